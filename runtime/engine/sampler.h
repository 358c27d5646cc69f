// Token sampling over a logits row. Order as llama.cpp's default chain (common/sampling.cpp):
// top_k -> top_p -> min_p -> temperature -> draw. Greedy when temperature <= 0.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace swz::engine {

/// Index of the largest logit; ties go to the lowest index. logits: f32 [n].
int32_t argmax(const float* logits, int n);
/// argmax over the tokens `allow` permits (bit t of word t / 64); -1 when none is.
int32_t masked_argmax(const float* logits, int n, const uint64_t* allow);

class Sampler {
 public:
  /// Throws InvalidRequest for non-finite or out-of-range parameters
  /// (temperature < 0, top_p outside (0, 1], min_p outside [0, 1], top_k < 0).
  explicit Sampler(const SamplingParams& p);
  /// Samples one token id from logits f32 [n]. Deterministic for a given seed. Each
  /// returned token counts as generated for the presence/frequency penalties.
  /// `allow` (optional): a token mask, bit t of word t / 64 set = token t may be drawn
  /// (grammar/matcher.h); masked tokens get probability 0 (logit -inf) before the chain.
  /// At least one token must be allowed.
  int32_t sample(const float* logits, int n, const uint64_t* allow = nullptr);

  /// Speculative verification of one drafted token against logits f32 [n] of its
  /// position. Greedy (temperature <= 0): returns argmax, `accepted` = (argmax == draft),
  /// so verified output equals plain greedy decoding. Otherwise, for a deterministic
  /// draft (proposal q = a point mass on `draft`), the rejection rule of Leviathan et
  /// al. 2023 ("Fast Inference from Transformers via Speculative Decoding", Alg. 1) and
  /// Chen et al. 2023: accept with probability p(draft), where p is the distribution
  /// sample() draws from (after top_k/top_p/min_p/temperature); on rejection draw from
  /// p with `draft` removed, renormalised. The returned token is distributed exactly as
  /// sample()'s. Returns the token to emit (== draft when accepted). Penalties apply as in
  /// sample(), and the returned token counts as generated.
  /// `allow`: as in sample(); a draft token it forbids is rejected (probability 0).
  int32_t verify(const float* logits, int n, int32_t draft, bool& accepted, const uint64_t* allow = nullptr);

 private:
  /// Fills cand_ (survivors, sorted by logit) and returns their probabilities.
  std::vector<double>& distribution(const float* logits, int n);
  /// logits with the presence/frequency penalties of the tokens returned so far applied
  /// (OpenAI's formula: l - count * frequency - [count > 0] * presence), or logits itself.
  const float* penalized(const float* logits, int n);
  /// Records a returned token for the penalties.
  void count(int32_t tok);
  /// `logits` with the tokens `allow` forbids set to -inf (a copy), or logits itself.
  const float* masked(const float* logits, int n, const uint64_t* allow);
  int32_t verify_draw(const float* logits, int n, int32_t draft, bool& accepted);
  SamplingParams p_;
  std::unordered_map<int32_t, int> counts_;  ///< generated token -> times (penalties)
  std::vector<float> penalized_;
  std::vector<float> masked_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::vector<double> probs_;
};

}  // namespace swz::engine
