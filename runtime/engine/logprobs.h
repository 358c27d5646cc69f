// Log-probabilities of a logits row, for OpenAI's `logprobs` / `top_logprobs` and the
// legacy completions' `logprobs` (server/openai_*.cpp put them on the wire).
#pragma once

#include <cstdint>

#include "engine/engine.h"

namespace swz::engine {

/// Log-softmax of `logits` (f32 [n], the raw model output of one position) evaluated in
/// double: logprob(i) = l_i - max - log(sum_j exp(l_j - max)). Returns the logprob of
/// `token` and the `top_n` most likely tokens, by descending logit, ties to the lower id
/// (top_n is clamped to [0, n]). Cost: two passes over the row plus a top_n-sized
/// insertion list, O(n * top_n) worst case. Requires 0 <= token < n, n >= 1, and finite
/// logits (a -inf entry gets logprob -inf; NaN is not handled).
TokenLogprobs token_logprobs(const float* logits, int n, int32_t token, int top_n);

}  // namespace swz::engine
