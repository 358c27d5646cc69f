#include "engine/prompt_lookup.h"

#include <xxhash.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace swz::engine {

PromptLookup::PromptLookup(const PromptLookupOptions& opts) : o_(opts) {
  if (o_.ngram_min < 1 || o_.ngram_max < o_.ngram_min)
    throw std::invalid_argument("prompt lookup: need 1 <= ngram_min <= ngram_max, got " + std::to_string(o_.ngram_min) +
                                ", " + std::to_string(o_.ngram_max));
  if (o_.draft_min < 1 || o_.draft_max < o_.draft_min)
    throw std::invalid_argument("prompt lookup: need 1 <= draft_min <= draft_max, got " + std::to_string(o_.draft_min) +
                                ", " + std::to_string(o_.draft_max));
  maps_.resize(static_cast<size_t>(o_.ngram_max - o_.ngram_min + 1));
  gamma_ = std::clamp(o_.draft_init, o_.draft_min, o_.draft_max);
}

uint64_t PromptLookup::key(size_t end, int n) const {
  return XXH3_64bits(hist_.data() + end - static_cast<size_t>(n), static_cast<size_t>(n) * sizeof(int32_t));
}

void PromptLookup::reset(const int32_t* tokens, size_t n) {
  hist_.clear();
  for (auto& m : maps_) m.clear();
  gamma_ = std::clamp(o_.draft_init, o_.draft_min, o_.draft_max);
  hist_.reserve(n + 256);
  for (size_t i = 0; i < n; ++i) push(tokens[i]);
}

void PromptLookup::push(int32_t token) {
  // The n-grams ending at the current last token now have a follower: the new token,
  // at index hist_.size() once appended. Later occurrences overwrite earlier ones.
  const size_t end = hist_.size();
  for (int n = o_.ngram_min; n <= o_.ngram_max && static_cast<size_t>(n) <= end; ++n)
    maps_[static_cast<size_t>(n - o_.ngram_min)][key(end, n)] = static_cast<uint32_t>(end);
  hist_.push_back(token);
}

int PromptLookup::draft(int max_len, std::vector<int32_t>& out) const {
  out.clear();
  const int len = std::min(max_len, gamma_);
  const size_t end = hist_.size();
  if (len <= 0) return 0;
  for (int n = std::min<size_t>(o_.ngram_max, end); n >= o_.ngram_min; --n) {
    const auto& m = maps_[static_cast<size_t>(n - o_.ngram_min)];
    auto it = m.find(key(end, n));
    if (it == m.end()) continue;
    const size_t follow = it->second;  // the suffix occurred at [follow-n, follow), follow < end
    if (!std::equal(hist_.begin() + static_cast<ptrdiff_t>(follow - n), hist_.begin() + static_cast<ptrdiff_t>(follow),
                    hist_.begin() + static_cast<ptrdiff_t>(end - n)))
      continue;  // hash collision
    const size_t stop = std::min(end, follow + static_cast<size_t>(len));
    out.assign(hist_.begin() + static_cast<ptrdiff_t>(follow), hist_.begin() + static_cast<ptrdiff_t>(stop));
    return n;
  }
  return 0;
}

void PromptLookup::update(int drafted, int accepted) {
  if (drafted <= 0) return;
  gamma_ = accepted >= drafted ? std::min(gamma_ + 2, o_.draft_max) : std::max(gamma_ - 1, o_.draft_min);
}

}  // namespace swz::engine
