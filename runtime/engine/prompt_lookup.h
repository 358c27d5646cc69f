// Prompt-lookup drafting for speculative decoding: draft tokens are copied from the
// request's own token history (prompt + output) where its current suffix occurred
// before. No draft model; pays off when the output repeats its input (code edits,
// rewrites, quoting), which is what coding agents ask for most.
//
// References: A. Saxena, "Prompt Lookup Decoding" (2023, github.com/apoorvumang/
// prompt-lookup-decoding); vLLM's n-gram proposer (prompt_lookup_min / _max);
// llama.cpp's `lookup` example. The draft-length schedule is Hugging Face
// transformers' "heuristic" num_assistant_tokens schedule (assisted generation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace swz::engine {

struct PromptLookupOptions {
  int ngram_max = 8;   ///< longest history suffix looked up (tokens)
  int ngram_min = 2;   ///< shortest suffix that may start a draft (tokens); >= 1
  int draft_max = 16;  ///< upper bound of the draft length γ
  int draft_min = 1;   ///< lower bound of γ (>= 1)
  int draft_init = 4;  ///< γ at the start of a request
};

/// An n-gram index over one request's token history, and the draft length γ adapted
/// to recent acceptance. Build one per request (nothing carries over between requests).
///
/// Index: for every n in [ngram_min, ngram_max], a hash map from each n-gram of the
/// history that has a following token to the position of that following token in its
/// most recent occurrence. push() adds the n-grams that end just before the new token
/// (O(ngram_max) per token); draft() tries the history's suffix from the longest n
/// down and copies what followed the most recent earlier occurrence of the longest
/// one found (tokens compared, so a hash collision never produces a wrong match).
class PromptLookup {
 public:
  /// Throws std::invalid_argument when the options are inconsistent
  /// (ngram_min < 1, ngram_max < ngram_min, draft_min < 1, draft_max < draft_min).
  explicit PromptLookup(const PromptLookupOptions& opts = {});

  /// Forgets everything and indexes `tokens` [n] as the new history; γ = draft_init.
  void reset(const int32_t* tokens, size_t n);
  /// Appends one token to the history (a generated or accepted token).
  void push(int32_t token);

  /// Writes into `out` (cleared first) up to min(max_len, γ) tokens that followed the
  /// longest matching suffix of the history; leaves it empty when no suffix of
  /// >= ngram_min tokens occurred earlier. Returns the length of the matched suffix
  /// (0 when none).
  int draft(int max_len, std::vector<int32_t>& out) const;

  /// Reports a verification: `accepted` of `drafted` tokens were accepted. γ grows by 2
  /// when all were accepted and shrinks by 1 otherwise, within [draft_min, draft_max].
  void update(int drafted, int accepted);

  int draft_len() const { return gamma_; }
  const std::vector<int32_t>& history() const { return hist_; }

 private:
  uint64_t key(size_t end, int n) const;  // hash of hist_[end-n, end)
  PromptLookupOptions o_;
  std::vector<int32_t> hist_;
  // maps_[n - ngram_min]: n-gram hash -> index (in hist_) of the token after its latest occurrence
  std::vector<std::unordered_map<uint64_t, uint32_t>> maps_;
  int gamma_ = 0;
};

}  // namespace swz::engine
