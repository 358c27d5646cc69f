// Tokenizer implementation. See tokenizer.h for the contract and sources.
#include "tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace swz::tokenizer {
namespace {

constexpr int32_t kNull = -1;

// ---------------------------------------------------------------------------------------
// UTF-8, with llama.cpp's lenient decoding (src/unicode.cpp unicode_cpt_from_utf8): the
// length comes from the lead byte's high nibble, continuation bytes are checked, overlong
// forms and surrogates are accepted; a malformed sequence consumes one byte.

/// Byte length of the UTF-8 sequence starting with `lead` (1 for continuation bytes).
size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[lead >> 4];
}

constexpr uint32_t kInvalid = 0xFFFFFFFFu;

/// Decodes one code point at `off` (advancing it); kInvalid (and off+1) when malformed.
uint32_t decode_cpt(std::string_view s, size_t& off) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[off + i]); };
  const uint8_t c = b(0);
  const auto cont = [&](size_t i) { return off + i < s.size() && (b(i) & 0xC0) == 0x80; };
  if (!(c & 0x80)) {
    off += 1;
    return c;
  }
  if (!(c & 0x40)) {
    off += 1;
    return kInvalid;
  }
  if (!(c & 0x20)) {
    if (!cont(1)) { off += 1; return kInvalid; }
    uint32_t r = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    off += 2;
    return r;
  }
  if (!(c & 0x10)) {
    if (!cont(1) || !cont(2)) { off += 1; return kInvalid; }
    uint32_t r = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    off += 3;
    return r;
  }
  if (!(c & 0x08)) {
    if (!cont(1) || !cont(2) || !cont(3)) { off += 1; return kInvalid; }
    uint32_t r = ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    off += 4;
    return r;
  }
  off += 1;
  return kInvalid;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | ((cpt >> 6) & 0x1F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | ((cpt >> 12) & 0x0F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

size_t utf8_size(uint32_t cpt) { return cpt <= 0x7F ? 1 : cpt <= 0x7FF ? 2 : cpt <= 0xFFFF ? 3 : 4; }

/// Prepares `text` for the regex engine the way llama.cpp's unicode_regex_split sees it:
/// `norm` is the text with every malformed byte replaced by U+FFFD and overlong forms
/// re-encoded canonically (what llama.cpp tokenizes); `match` is `norm` with surrogate
/// code points (which PCRE2 refuses) replaced by U+FFFD, byte-for-byte the same length, so
/// offsets found in `match` slice `norm`. Code points above U+10FFFF (where llama.cpp
/// throws) become U+FFFD in both. Returns false (outputs untouched) when `text` is already
/// well-formed UTF-8, the common case.
bool normalize_utf8(std::string_view text, std::string& norm, std::string& match) {
  bool clean = true;
  for (size_t off = 0; off < text.size();) {
    const size_t start = off;
    const uint32_t c = decode_cpt(text, off);
    if (c == kInvalid || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || utf8_size(c) != off - start) {
      clean = false;
      break;
    }
  }
  if (clean) return false;
  norm.clear();
  match.clear();
  for (size_t off = 0; off < text.size();) {
    uint32_t c = decode_cpt(text, off);
    if (c == kInvalid || c > 0x10FFFF) c = 0xFFFD;
    append_utf8(norm, c);
    append_utf8(match, (c >= 0xD800 && c <= 0xDFFF) ? 0xFFFD : c);
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// GPT-2 byte-level alphabet (openai/gpt-2 encoder.py bytes_to_unicode): printable bytes map
// to themselves, the other 68 to U+0100.. in byte order.

struct ByteAlphabet {
  std::string byte_to_utf8[256];
  int16_t cpt_to_byte[324];  // -1 where the code point is not in the alphabet
  ByteAlphabet() {
    std::fill(std::begin(cpt_to_byte), std::end(cpt_to_byte), int16_t{-1});
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      append_utf8(byte_to_utf8[b], cpt);
      cpt_to_byte[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

// ---------------------------------------------------------------------------------------
// PCRE2 wrapper.

class Regex {
 public:
  explicit Regex(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE eoff = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                          &eoff, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("tokenizer: cannot compile pre-tokenizer regex at offset " + std::to_string(eoff) + ": " +
                  reinterpret_cast<const char*>(msg));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() { pcre2_code_free(code_); }

  /// Splits each byte range of `offs` (pairs [begin, end) into `s`) into matches and the
  /// unmatched gaps between them, in order (llama.cpp unicode_regex_split_stl semantics).
  /// Each range is a separate subject, so lookaheads never see past its end.
  void split(std::string_view s, const std::vector<std::pair<size_t, size_t>>& offs,
             std::vector<std::pair<size_t, size_t>>& out) const {
    out.clear();
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    pcre2_match_context* mc = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* js = nullptr;
    if (jit_) {
      js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(mc, nullptr, js);
    }
    pcre2_set_heap_limit(mc, 1u << 22);  // KiB: 4 GiB, i.e. effectively unlimited
    struct Guard {
      pcre2_match_data* md;
      pcre2_match_context* mc;
      pcre2_jit_stack* js;
      ~Guard() {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        if (js) pcre2_jit_stack_free(js);
      }
    } guard{md, mc, js};
    for (auto [b, e] : offs) {
      const auto* subj = reinterpret_cast<PCRE2_SPTR>(s.data() + b);
      const size_t len = e - b;
      size_t pos = 0, prev = 0;
      while (pos < len) {
        int rc = pcre2_match(code_, subj, len, pos, PCRE2_NO_UTF_CHECK, md, mc);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(code_, subj, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw Error(std::string("tokenizer: pre-tokenizer regex match failed: ") + reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // empty match: cannot happen with our patterns; step one character
          pos = ms + utf8_len(static_cast<uint8_t>(s[b + ms]));
          continue;
        }
        if (ms > prev) out.emplace_back(b + prev, b + ms);
        out.emplace_back(b + ms, b + me);
        prev = pos = me;
      }
      if (prev < len) out.emplace_back(b + prev, b + len);
    }
  }

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

// llama.cpp's whitespace set (unicode-data.cpp unicode_set_whitespace = Unicode White_Space),
// substituted for \s so that PCRE2 agrees with it exactly.
#define SWZ_WS "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
// \p{L} and \p{N} plus the letters and numbers assigned in Unicode 15.0 and 15.1 (llama.cpp's
// tables follow Unicode 15.1; Debian 12's PCRE2 10.42 follows Unicode 14.0, and these are all
// the L/N differences between the two; no code point left L or N). With a newer PCRE2 the
// extra ranges are redundant and harmless.
#define SWZ_L                                                                                        \
  "\\p{L}\\x{1123f}-\\x{11240}\\x{11f02}\\x{11f04}-\\x{11f10}\\x{11f12}-\\x{11f33}\\x{1342f}"        \
  "\\x{13441}-\\x{13446}\\x{1b132}\\x{1b155}\\x{1df25}-\\x{1df2a}\\x{1e030}-\\x{1e06d}"               \
  "\\x{1e4d0}-\\x{1e4eb}\\x{2b739}\\x{2ebf0}-\\x{2ee5d}\\x{31350}-\\x{323af}"
#define SWZ_N "\\p{N}\\x{11f50}-\\x{11f59}\\x{1d2c0}-\\x{1d2d3}\\x{1e4f0}-\\x{1e4f9}"
// Patterns from the models' tokenizer.json files, in llama.cpp's adapted form ((?i:...) spelled
// out as character classes).
const char* const kRegexGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?[" SWZ_L "]+| ?[" SWZ_N "]+| ?[^" SWZ_WS SWZ_L SWZ_N "]+|[" SWZ_WS "]+(?![^" SWZ_WS "])";
const char* const kRegexLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n" SWZ_L SWZ_N "]?[" SWZ_L "]+|[" SWZ_N "]{1,3}"
    "| ?[^" SWZ_WS SWZ_L SWZ_N "]+[\\r\\n]*|[" SWZ_WS "]*[\\r\\n]+|[" SWZ_WS "]+(?![^" SWZ_WS "])|[" SWZ_WS "]+";
const char* const kRegexQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n" SWZ_L SWZ_N "]?[" SWZ_L "]+|[" SWZ_N "]"
    "| ?[^" SWZ_WS SWZ_L SWZ_N "]+[\\r\\n]*|[" SWZ_WS "]*[\\r\\n]+|[" SWZ_WS "]+(?![^" SWZ_WS "])|[" SWZ_WS "]+";
const char* const kRegexDigit = "[" SWZ_N "]";
#undef SWZ_L
#undef SWZ_N
#undef SWZ_WS

struct PreSpec {
  std::vector<const char*> regexes;
  bool ignore_merges = false;
  bool clean_spaces = true;
  bool add_bos = false;
};

/// tokenizer.ggml.pre -> pre-tokenizer (llama.cpp llama_vocab::impl::load, BPE branch).
bool lookup_pre(const std::string& pre, PreSpec& spec) {
  auto is = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return pre == n; });
  };
  if (is({"gpt-2", "phi-2", "mpt", "olmo"})) {
    spec = {{kRegexGpt2}, false, true, false};
  } else if (is({"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
    spec = {{kRegexLlama3}, true, true, true};
  } else if (is({"dbrx", "smaug-bpe"})) {
    spec = {{kRegexLlama3}, false, true, false};
  } else if (is({"qwen2", "deepseek-r1-qwen"})) {
    spec = {{kRegexQwen2}, false, false, false};
  } else if (is({"megrez", "stablelm2"})) {
    spec = {{kRegexQwen2}, false, true, false};
  } else if (is({"smollm", "command-r"})) {
    spec = {{kRegexDigit, kRegexGpt2}, false, false, false};
  } else if (is({"starcoder", "refact", "codeshell", "exaone", "minerva-7b"})) {
    spec = {{kRegexDigit, kRegexGpt2}, false, true, false};
  } else {
    return false;
  }
  return true;
}

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StrMap = std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>>;

}  // namespace

// =========================================================================================

struct Tokenizer::Impl {
  enum class Kind { kBpe, kSpm } kind = Kind::kBpe;
  std::string model, pre;
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint32_t> attr;
  std::vector<std::string> piece;  // token_to_piece cache
  StrMap to_id;
  StrMap merge_rank;  // "first\xffsecond" -> rank
  std::vector<std::unique_ptr<Regex>> regexes;
  std::vector<int32_t> specials;  // CONTROL|USER_DEFINED|UNKNOWN, longest text first
  std::vector<uint8_t> eog;       // per id
  int32_t bos = kNull, eos = kNull;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool ignore_merges = false, clean_spaces = false;

  int32_t find(std::string_view s) const {
    auto it = to_id.find(s);
    return it == to_id.end() ? kNull : it->second;
  }
  void check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= text.size())
      throw Error("tokenizer: token id " + std::to_string(id) + " out of range [0, " + std::to_string(text.size()) + ")");
  }

  // ------------------------------------------------------------------ byte-level BPE
  struct Sym {
    int prev, next;
    uint32_t off, n;
  };
  struct Bigram {
    int left, right, rank;
    uint32_t ln, rn;  // symbol sizes when queued: a changed size marks the entry stale
  };
  struct BigramCmp {
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
  };

  /// Merges one byte-encoded pre-token `w` (llama.cpp llm_tokenizer_bpe_session): lowest
  /// merge rank first, leftmost on ties; final symbols looked up in the vocabulary, unknown
  /// ones emitted byte by byte where those single bytes are tokens.
  void bpe_word(const std::string& w, std::vector<int32_t>& out) const {
    if (ignore_merges) {
      int32_t t = find(w);
      if (t != kNull) {
        out.push_back(t);
        return;
      }
    }
    std::vector<Sym> syms;
    syms.reserve(w.size());
    for (size_t off = 0; off < w.size();) {
      size_t n = std::min(w.size() - off, utf8_len(static_cast<uint8_t>(w[off])));
      int idx = static_cast<int>(syms.size());
      syms.push_back({idx - 1, off + n == w.size() ? -1 : idx + 1, static_cast<uint32_t>(off), static_cast<uint32_t>(n)});
      off += n;
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramCmp> q;
    std::string key;
    auto add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      key.assign(w, syms[l].off, syms[l].n);
      key.push_back('\xff');
      key.append(w, syms[r].off, syms[r].n);
      auto it = merge_rank.find(key);
      if (it == merge_rank.end()) return;
      q.push({l, r, it->second, syms[l].n, syms[r].n});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
    while (!q.empty()) {
      Bigram b = q.top();
      q.pop();
      Sym& l = syms[b.left];
      Sym& r = syms[b.right];
      if (l.n == 0 || r.n == 0 || l.n != b.ln || r.n != b.rn) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      add(l.prev, b.left);
      add(b.left, l.next);
    }
    for (const Sym& s : syms) {
      if (s.n == 0) continue;
      std::string_view str(w.data() + s.off, s.n);
      int32_t t = find(str);
      if (t != kNull) {
        out.push_back(t);
        continue;
      }
      for (char c : str) {
        int32_t tb = find(std::string_view(&c, 1));
        if (tb != kNull) out.push_back(tb);
      }
    }
  }

  /// Pre-tokenizes `text` (regexes applied in sequence, each refining the previous split),
  /// byte-encodes every piece and merges it.
  void bpe_text(std::string_view text, std::vector<int32_t>& out) const {
    std::string norm, match;
    std::string_view subject = text, source = text;
    if (normalize_utf8(text, norm, match)) {
      subject = match;
      source = norm;
    }
    std::vector<std::pair<size_t, size_t>> offs{{0, subject.size()}}, next;
    for (const auto& re : regexes) {
      re->split(subject, offs, next);
      offs.swap(next);
    }
    const ByteAlphabet& ab = byte_alphabet();
    std::unordered_map<std::string, std::vector<int32_t>> cache;
    std::string w;
    std::vector<int32_t> ids;
    for (auto [b, e] : offs) {
      w.clear();
      for (size_t i = b; i < e; ++i) w += ab.byte_to_utf8[static_cast<uint8_t>(source[i])];
      auto it = cache.find(w);
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
      ids.clear();
      bpe_word(w, ids);
      out.insert(out.end(), ids.begin(), ids.end());
      if (cache.size() < (1u << 16)) cache.emplace(w, ids);
    }
  }

  // ------------------------------------------------------------------ SentencePiece
  struct SpmBigram {
    int left, right;
    float score;
    size_t size;
  };
  struct SpmCmp {
    bool operator()(const SpmBigram& l, const SpmBigram& r) const {
      return l.score < r.score || (l.score == r.score && l.left > r.left);
    }
  };

  /// llama.cpp llm_tokenizer_spm_session: merge the adjacent pair whose concatenation is the
  /// highest-scoring vocabulary entry (leftmost on ties) until none is left; symbols that are
  /// not tokens are emitted as <0xNN> byte tokens.
  void spm_text(const std::string& s, std::vector<int32_t>& out) const {
    std::vector<Sym> syms;
    for (size_t off = 0; off < s.size();) {
      size_t n = std::min(s.size() - off, utf8_len(static_cast<uint8_t>(s[off])));
      int idx = static_cast<int>(syms.size());
      syms.push_back({idx - 1, off + n == s.size() ? -1 : idx + 1, static_cast<uint32_t>(off), static_cast<uint32_t>(n)});
      off += n;
    }
    if (syms.empty()) return;
    std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmCmp> q;
    auto add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      std::string_view t(s.data() + syms[l].off, syms[l].n + syms[r].n);
      int32_t id = find(t);
      if (id == kNull) return;
      q.push({l, r, score[id], t.size()});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
    while (!q.empty()) {
      SpmBigram b = q.top();
      q.pop();
      Sym& l = syms[b.left];
      Sym& r = syms[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      add(l.prev, b.left);
      add(b.left, l.next);
    }
    for (int i = 0; i != -1; i = syms[i].next) {
      std::string_view t(s.data() + syms[i].off, syms[i].n);
      int32_t id = find(t);
      if (id != kNull) {
        out.push_back(id);
        continue;
      }
      for (char c : t) out.push_back(spm_byte_token(static_cast<uint8_t>(c)));
    }
  }

  int32_t spm_byte_token(uint8_t b) const {
    static const char* hex = "0123456789ABCDEF";
    const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = find(std::string_view(buf, 6));
    if (id == kNull) id = find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (id == kNull)
      throw Error("tokenizer: SentencePiece vocabulary has no byte token <0x" + std::string(buf + 3, 2) + ">");
    return id;
  }

  // ------------------------------------------------------------------ special tokens
  struct Frag {
    size_t off, len;
    int32_t tok;  // kNull: raw text
    bool allow;   // control tokens may be matched in it
  };

  /// Splits raw fragments at special-token texts (llama.cpp tokenizer_st_partition): for
  /// each special, longest first, every leftmost non-overlapping occurrence in every raw
  /// fragment. Control/unknown tokens only in fragments with allow=true.
  void partition(std::string_view s, std::vector<Frag>& frags) const {
    std::vector<Frag> next;
    for (int32_t id : specials) {
      const std::string& t = text[id];
      const bool ctl = attr[id] & (kAttrControl | kAttrUnknown);
      next.clear();
      bool changed = false;
      for (const Frag& f : frags) {
        if (f.tok != kNull || (ctl && !f.allow)) {
          next.push_back(f);
          continue;
        }
        size_t off = f.off, end = f.off + f.len;
        while (true) {
          size_t m = s.substr(0, end).find(t, off);
          if (m == std::string_view::npos) break;
          changed = true;
          if (m > off) next.push_back({off, m - off, kNull, f.allow});
          next.push_back({m, t.size(), id, f.allow});
          off = m + t.size();
        }
        if (off < end) next.push_back({off, end - off, kNull, f.allow});
      }
      if (changed) frags.swap(next);
    }
  }

  std::vector<int32_t> run(std::string_view s, std::vector<Frag> frags, bool add_special) const {
    partition(s, frags);
    std::vector<int32_t> out;
    out.reserve(s.size() / 3 + 4);
    if (add_special && add_bos) {
      if (bos == kNull) throw Error("tokenizer: add_bos is set but the vocabulary has no BOS token");
      out.push_back(bos);
    }
    bool prev_special = true;  // SentencePiece: prefix a space to the first text
    for (size_t i = 0; i < frags.size();) {
      if (frags[i].tok != kNull) {
        out.push_back(frags[i].tok);
        prev_special = true;
        ++i;
        continue;
      }
      // Adjacent raw fragments (from different segments) are one text.
      size_t b = frags[i].off, e = b + frags[i].len;
      for (++i; i < frags.size() && frags[i].tok == kNull && frags[i].off == e; ++i) e += frags[i].len;
      std::string_view t = s.substr(b, e - b);
      if (kind == Kind::kBpe) {
        bpe_text(t, out);
      } else {
        std::string esc;
        esc.reserve(t.size() + 8);
        if (add_space_prefix && prev_special) esc += "\xe2\x96\x81";
        for (char c : t) {
          if (c == ' ') esc += "\xe2\x96\x81";
          else esc.push_back(c);
        }
        spm_text(esc, out);
      }
      prev_special = false;
    }
    if (add_special && add_eos) {
      if (eos == kNull) throw Error("tokenizer: add_eos is set but the vocabulary has no EOS token");
      out.push_back(eos);
    }
    return out;
  }

  // ------------------------------------------------------------------ pieces
  std::string render_piece(int32_t id) const {
    const uint32_t a = attr[id];
    const std::string& t = text[id];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t;
    if (a & kAttrNormal) {
      if (kind == Kind::kSpm) {
        std::string r;
        for (size_t i = 0; i < t.size(); ++i) {
          if (t.compare(i, 3, "\xe2\x96\x81") == 0) {
            r.push_back(' ');
            i += 2;
          } else {
            r.push_back(t[i]);
          }
        }
        return r;
      }
      // Byte-level decode (llama.cpp llama_decode_text).
      const ByteAlphabet& ab = byte_alphabet();
      std::string r;
      for (size_t off = 0; off < t.size();) {
        uint32_t c = decode_cpt(t, off);
        if (c == kInvalid) c = 0xFFFD;
        if (c < 324 && ab.cpt_to_byte[c] >= 0) {
          r.push_back(static_cast<char>(ab.cpt_to_byte[c]));
        } else {
          std::string u;
          append_utf8(u, c);
          r += "[UNK_BYTE_0x";
          char hx[3];
          for (unsigned char ch : u) {
            snprintf(hx, sizeof hx, "%02x", ch);
            r += hx;
          }
          r += t + "]";
        }
      }
      return r;
    }
    if (a & kAttrByte) {
      if (t.size() < 5) return std::string();
      return std::string(1, static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16)));
    }
    return std::string();
  }
};

// =========================================================================================

namespace {

const gguf::Array& get_array(const gguf::File& f, const char* key, gguf::ValueType elem, const char* what) {
  const gguf::Value* v = f.find(key);
  if (!v) throw Error(std::string("tokenizer: missing ") + key);
  if (v->type != gguf::ValueType::ARRAY) throw Error(std::string("tokenizer: ") + key + " is not an array");
  const gguf::Array& a = v->as_array();
  if (a.elem_type != elem)
    throw Error(std::string("tokenizer: ") + key + " must be an array of " + what + ", not " +
                gguf::value_type_name(a.elem_type));
  return a;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::File& f) {
  auto im = std::make_unique<Impl>();
  Impl& t = *im;
  try {
    t.model = f.get_string("tokenizer.ggml.model");
    t.pre = f.get_string_or("tokenizer.ggml.pre", "");
  } catch (const gguf::Error& e) {
    throw Error(std::string("tokenizer: ") + e.what());
  }

  // Defaults per model family (llama.cpp llama_vocab::impl::load).
  int32_t def_bos = kNull, def_eos = kNull;
  PreSpec spec;
  if (t.model == "gpt2") {
    t.kind = Impl::Kind::kBpe;
    def_bos = 11;
    def_eos = 11;
    if (t.pre.empty())
      throw Error("tokenizer: tokenizer.ggml.pre is missing (model \"gpt2\"); the \"default\" pre-tokenizer is not supported");
    if (!lookup_pre(t.pre, spec))
      throw Error("tokenizer: unsupported tokenizer.ggml.pre \"" + t.pre +
                  "\" (supported: gpt-2, phi-2, mpt, olmo, llama3, llama-v3, llama-bpe, falcon3, dbrx, smaug-bpe, "
                  "qwen2, deepseek-r1-qwen, megrez, stablelm2, smollm, command-r, starcoder, refact, codeshell, "
                  "exaone, minerva-7b)");
    t.ignore_merges = spec.ignore_merges;
    t.clean_spaces = spec.clean_spaces;
    t.add_bos = spec.add_bos;
    t.add_space_prefix = false;
  } else if (t.model == "llama") {
    t.kind = Impl::Kind::kSpm;
    def_bos = 1;
    def_eos = 2;
    t.add_space_prefix = true;
    t.clean_spaces = false;
    t.add_bos = true;
  } else {
    throw Error("tokenizer: unsupported tokenizer.ggml.model \"" + t.model + "\" (supported: gpt2, llama)");
  }

  try {
    t.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", t.add_space_prefix);

    // Vocabulary.
    const gguf::Array& toks = get_array(f, "tokenizer.ggml.tokens", gguf::ValueType::STRING, "strings");
    const size_t n = toks.items.size();
    if (n == 0) throw Error("tokenizer: tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: too many tokens");
    t.text.resize(n);
    t.score.assign(n, 0.0f);
    t.attr.assign(n, kAttrNormal);
    t.to_id.reserve(n * 2);
    for (size_t i = 0; i < n; ++i) {
      std::string w = toks.items[i].as_string();
      if (w.empty()) w = "[EMPTY_" + std::to_string(i) + "]";
      t.to_id[w] = static_cast<int32_t>(i);
      t.text[i] = std::move(w);
    }
    if (const gguf::Value* v = f.find("tokenizer.ggml.scores")) {
      if (v->type != gguf::ValueType::ARRAY) throw Error("tokenizer: tokenizer.ggml.scores is not an array");
      const gguf::Array& a = v->as_array();
      if (a.elem_type != gguf::ValueType::FLOAT32 && a.elem_type != gguf::ValueType::INT32)
        throw Error("tokenizer: tokenizer.ggml.scores must be float32 or int32");
      if (a.items.size() < n) throw Error("tokenizer: tokenizer.ggml.scores has fewer entries than tokens");
      for (size_t i = 0; i < n; ++i) t.score[i] = static_cast<float>(a.items[i].as_f64());
    }
    if (f.find("tokenizer.ggml.token_type")) {
      const gguf::Array& a = get_array(f, "tokenizer.ggml.token_type", gguf::ValueType::INT32, "int32");
      if (a.items.size() < n) throw Error("tokenizer: tokenizer.ggml.token_type has fewer entries than tokens");
      for (size_t i = 0; i < n; ++i) {
        switch (a.items[i].as_i64()) {
          case 1: t.attr[i] = kAttrNormal; break;
          case 2: t.attr[i] = kAttrUnknown; break;
          case 3: t.attr[i] = kAttrControl; break;
          case 4: t.attr[i] = kAttrUserDefined; break;
          case 5: t.attr[i] = kAttrUnused; break;
          case 6: t.attr[i] = kAttrByte; break;
          default: t.attr[i] = kAttrUndefined; break;
        }
      }
    }

    // Merges ("first second", split at the first space after the first byte).
    if (t.kind == Impl::Kind::kBpe) {
      const gguf::Array& m = get_array(f, "tokenizer.ggml.merges", gguf::ValueType::STRING, "strings");
      t.merge_rank.reserve(m.items.size() * 2);
      std::string key;
      for (size_t i = 0; i < m.items.size(); ++i) {
        const std::string& s = m.items[i].as_string();
        size_t p = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
        key.clear();
        if (p != std::string::npos) {
          key.assign(s, 0, p);
          key.push_back('\xff');
          key.append(s, p + 1, std::string::npos);
        } else {
          key.push_back('\xff');
        }
        t.merge_rank.emplace(key, static_cast<int32_t>(i));
      }
      for (const char* re : spec.regexes) t.regexes.push_back(std::make_unique<Regex>(re));
    }

    // Special ids: defaults, then GGUF keys (an out-of-range key keeps the default).
    auto in_range = [&](int64_t id) { return id >= 0 && static_cast<size_t>(id) < n; };
    auto special_id = [&](int32_t def, std::initializer_list<const char*> keys) {
      int32_t id = in_range(def) ? def : kNull;
      for (const char* k : keys) {
        if (!f.has(k)) continue;
        int64_t v = f.get(k).as_i64();
        if (in_range(v)) id = static_cast<int32_t>(v);
      }
      return id;
    };
    t.bos = special_id(def_bos, {"tokenizer.ggml.bos_token_id"});
    t.eos = special_id(def_eos, {"tokenizer.ggml.eos_token_id"});
    int32_t eot = special_id(kNull, {"tokenizer.ggml.eot_token_id"});
    int32_t eom = special_id(kNull, {"tokenizer.ggml.eom_token_id"});
    int32_t fim_pad = special_id(kNull, {"tokenizer.ggml.fim_pad_token_id"});
    int32_t fim_rep = special_id(kNull, {"tokenizer.ggml.fim_rep_token_id"});
    int32_t fim_sep = special_id(kNull, {"tokenizer.ggml.fim_sep_token_id"});
    int32_t fim_pre = special_id(kNull, {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"});
    int32_t fim_suf = special_id(kNull, {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"});
    int32_t fim_mid = special_id(kNull, {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"});
    t.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", t.add_bos);
    t.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", t.add_eos);

    // Text-based detection of EOT / EOM / FIM tokens, which also become CONTROL (llama.cpp
    // does this by iterating its hash map; ids are scanned in order here, which only
    // matters for vocabularies with two candidates for the same role).
    auto mark_control = [&](int32_t id) { t.attr[id] |= kAttrControl; };
    auto detect = [&](int32_t& slot, std::initializer_list<const char*> names) {
      if (slot != kNull) return;
      for (const char* nm : names) {
        int32_t id = t.find(nm);
        if (id == kNull) continue;
        if (slot == kNull || id < slot) slot = id;
      }
      if (slot != kNull) mark_control(slot);
    };
    detect(eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                 "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>"});
    detect(eom, {"<|eom_id|>"});
    detect(fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
                     "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"});
    detect(fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
                     "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"});
    detect(fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
                     "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"});
    detect(fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
    detect(fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    detect(fim_sep, {"<|file_sep|>"});
    for (size_t i = 0; i < n; ++i)
      if ((t.attr[i] & kAttrControl) && t.text[i].find("unused") != std::string::npos) t.attr[i] |= kAttrUnused;

    // End-of-generation set.
    t.eog.assign(n, 0);
    for (int32_t id : {fim_pad, fim_rep, fim_sep})
      if (id != kNull) t.eog[id] = 1;
    static const char* const kEogNames[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
        "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~["};
    for (const char* nm : kEogNames) {
      int32_t id = t.find(nm);
      if (id == kNull) continue;
      t.eog[id] = 1;
      mark_control(id);
    }
    for (const char* nm : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
      int32_t id = t.find(nm);
      if (id != kNull) t.attr[id] = kAttrUserDefined;
    }
    for (int32_t id : {t.eos, eot, eom})
      if (id != kNull) t.eog[id] = 1;
    auto in_eog = [&](const char* nm) {
      int32_t id = t.find(nm);
      return id != kNull && t.eog[id] ? id : kNull;
    };
    // gpt-oss / solar-open: <|end|> is not end-of-generation when <|return|>+<|call|> exist.
    {
      int32_t end_id = in_eog("<|end|>");
      bool has_call = in_eog("<|call|>") != kNull || in_eog("<|calls|>") != kNull;
      if (end_id != kNull && has_call && (in_eog("<|return|>") != kNull || in_eog("<|flush|>") != kNull)) {
        t.eog[end_id] = 0;
        t.attr[end_id] = kAttrUserDefined;
      }
    }
    // gemma4 / plamo: </s> is an ordinary token there.
    {
      int32_t s_id = in_eog("</s>");
      if (s_id != kNull && (in_eog("<|tool_response>") != kNull || in_eog("<|plamo:eos|>") != kNull)) {
        t.eog[s_id] = 0;
        t.attr[s_id] = kAttrNormal;
      }
    }
  } catch (const gguf::Error& e) {
    throw Error(std::string("tokenizer: ") + e.what());
  }

  // Special-token matching order: longest text first (ties by id).
  for (size_t i = 0; i < t.text.size(); ++i)
    if (t.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) t.specials.push_back(static_cast<int32_t>(i));
  std::stable_sort(t.specials.begin(), t.specials.end(),
                   [&](int32_t a, int32_t b) { return t.text[a].size() > t.text[b].size(); });

  t.piece.resize(t.text.size());
  for (size_t i = 0; i < t.text.size(); ++i) t.piece[i] = t.render_piece(static_cast<int32_t>(i));
  return Tokenizer(std::move(im));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<Impl::Frag> frags;
  if (!text.empty()) frags.push_back({0, text.size(), kNull, parse_special});
  return impl_->run(text, std::move(frags), add_special);
}

std::vector<int32_t> Tokenizer::encode_segments(const std::vector<Segment>& segs, bool add_special) const {
  std::string all;
  size_t total = 0;
  for (const Segment& s : segs) total += s.text.size();
  all.reserve(total);
  std::vector<Impl::Frag> frags;
  for (const Segment& s : segs) {
    if (s.text.empty()) continue;
    frags.push_back({all.size(), s.text.size(), kNull, s.allow_special});
    all.append(s.text);
  }
  return impl_->run(all, std::move(frags), add_special);
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  impl_->check_id(id);
  return impl_->piece[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  bool remove_space = impl_->add_space_prefix;
  for (int32_t id : ids) {
    impl_->check_id(id);
    std::string_view p = impl_->piece[id];
    if (remove_space && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    remove_space = false;
    s.append(p);
  }
  if (!impl_->clean_spaces || s.empty()) return s;
  // llama.cpp llama_vocab::impl::detokenize clean_spaces passes, in place.
  char* text = s.data();
  // 1) " ?", " !", " .", " ," -> drop the space
  int32_t total1 = static_cast<int32_t>(s.size()), total = 1;
  for (int32_t i = 1; i < total1; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
    text[total++] = x;
  }
  // 2) " ' " -> "'"
  const int32_t total2 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      total--;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  // 3) " 's", " 'm", " 're", " 've" -> drop the space
  const int32_t total3 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        total--;
      } else if (i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
      }
    }
    text[total++] = x;
  }
  s.resize(total);
  return s;
}

int Tokenizer::n_vocab() const { return static_cast<int>(impl_->text.size()); }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->eog.size() && impl_->eog[id];
}
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->attr.size() &&
         (impl_->attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown));
}
uint32_t Tokenizer::token_attr(int32_t id) const {
  impl_->check_id(id);
  return impl_->attr[id];
}
std::string_view Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->text[id];
}
int32_t Tokenizer::text_to_token(std::string_view text) const { return impl_->find(text); }
const std::string& Tokenizer::model() const { return impl_->model; }
const std::string& Tokenizer::pre() const { return impl_->pre; }

}  // namespace swz::tokenizer
