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

class Sampler {
 public:
  /// Throws InvalidRequest for non-finite or out-of-range parameters
  /// (temperature < 0, top_p outside (0, 1], min_p outside [0, 1], top_k < 0).
  explicit Sampler(const SamplingParams& p);
  /// Samples one token id from logits f32 [n]. Deterministic for a given seed. Each
  /// returned token counts as generated for the presence/frequency penalties.
  int32_t sample(const float* logits, int n);

 private:
  int32_t sample_chain(const float* logits, int n);
  SamplingParams p_;
  std::unordered_map<int32_t, int> counts_;  ///< generated token -> times (penalties)
  std::vector<float> penalized_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace swz::engine
