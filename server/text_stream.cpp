#include "text_stream.h"

#include <algorithm>

namespace swz::server {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}

void Utf8Decoder::put(unsigned char b, std::string& out) {
  if (need_ != 0) {
    if (b >= lo_ && b <= hi_) {
      held_.push_back(static_cast<char>(b));
      lo_ = 0x80;
      hi_ = 0xBF;
      if (held_.size() == need_) {
        out += held_;
        held_.clear();
        need_ = 0;
      }
      return;
    }
    // The held bytes are a maximal subpart of an ill-formed sequence: one U+FFFD, then
    // `b` starts afresh.
    out += kReplacement;
    held_.clear();
    need_ = 0;
    lo_ = 0x80;
    hi_ = 0xBF;
  }
  if (b < 0x80) {
    out.push_back(static_cast<char>(b));
    return;
  }
  // Table 3-7 of the Unicode Standard (well-formed UTF-8 byte sequences).
  if (b >= 0xC2 && b <= 0xDF) {
    need_ = 2;
  } else if (b == 0xE0) {
    need_ = 3, lo_ = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    need_ = 3;
  } else if (b == 0xED) {
    need_ = 3, hi_ = 0x9F;
  } else if (b == 0xF0) {
    need_ = 4, lo_ = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    need_ = 4;
  } else if (b == 0xF4) {
    need_ = 4, hi_ = 0x8F;
  } else {
    out += kReplacement;  // continuation byte without a lead, C0, C1, F5..FF
    return;
  }
  held_.push_back(static_cast<char>(b));
}

std::string Utf8Decoder::feed(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + held_.size());
  for (char c : bytes) put(static_cast<unsigned char>(c), out);
  return out;
}

std::string Utf8Decoder::finish() {
  std::string out;
  if (need_ != 0) out = kReplacement;
  held_.clear();
  need_ = 0;
  lo_ = 0x80;
  hi_ = 0xBF;
  return out;
}

CompletionText::CompletionText(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove_if(stops_.begin(), stops_.end(), [](const std::string& s) { return s.empty(); }),
               stops_.end());
}

std::string CompletionText::release(bool at_end) {
  std::string out;
  if (stops_.empty()) {
    out.swap(pending_);
    return out;
  }
  size_t first = std::string::npos;  // earliest start of a complete stop sequence
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  // Earliest start of a suffix that is a proper prefix of some stop sequence: a stop
  // sequence may still complete there. Such a suffix starts where a stop sequence
  // (valid UTF-8) starts, so on a character boundary. Nothing can complete at the end.
  size_t hold = 0;
  if (!at_end) {
    for (const auto& s : stops_) {
      size_t k = std::min(s.size() - 1, pending_.size());
      for (; k > hold; --k) {
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) break;
      }
      hold = std::max(hold, k);
    }
  }
  const size_t maybe = pending_.size() - hold;
  if (first != std::string::npos && first <= maybe) {
    // No stop sequence can start earlier than `first` any more: cut there.
    out = pending_.substr(0, first);
    for (const auto& s : stops_) {
      if (pending_.compare(first, s.size(), s) == 0) {
        matched_ = s;
        break;
      }
    }
    pending_.clear();
    stopped_ = true;
    return out;
  }
  out = pending_.substr(0, std::min(first, maybe));
  pending_.erase(0, out.size());
  return out;
}

std::string CompletionText::push(std::string_view piece_bytes) {
  if (stopped_) return {};
  pending_ += decoder_.feed(piece_bytes);
  return release(/*at_end=*/false);
}

std::string CompletionText::finish() {
  if (stopped_) return {};
  pending_ += decoder_.finish();
  std::string out = release(/*at_end=*/true);
  if (!stopped_) {
    out += pending_;
    pending_.clear();
  }
  return out;
}

}  // namespace swz::server
