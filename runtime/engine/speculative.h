// The decode loop, with prompt-lookup speculative decoding: draft γ tokens from the
// request's own history (prompt_lookup.h), verify them and one more position in a single
// forward pass of γ+1 tokens, keep the accepted prefix, roll the KV cache back past the
// first rejected one.
//
// Exactness. Greedy: every emitted token is the argmax of the logits of its position,
// and the backend computes a position's logits bit-identically whether it is evaluated
// alone or inside a batch (exec/sequence_model.h, Rows; checked by
// test/unit/engine/batch_invariance_test.cpp), so the output is byte-identical to plain
// decoding. Temperature > 0: Sampler::verify's rejection rule (Leviathan et al. 2023,
// Chen et al. 2023) makes each emitted token distributed exactly as plain sampling's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/engine.h"
#include "engine/prompt_lookup.h"
#include "engine/sampler.h"

namespace swz::engine {

/// The running sequence as the decode loop drives it: exactly the backend's forward()
/// and truncate() (exec::SequenceModel's contract).
class DecodeModel {
 public:
  virtual ~DecodeModel() = default;
  /// Tokens whose K/V the cache holds (positions 0..n_past-1).
  virtual int n_past() const = 0;
  /// Appends `tokens` [n_tokens] at positions n_past.. and writes f32 logits
  /// [n_out, n_vocab] of the last n_out of them into `logits`.
  virtual void forward(const int32_t* tokens, int n_tokens, int n_out, std::vector<float>& logits) = 0;
  /// Drops the KV entries at positions >= n.
  virtual void truncate(int n) = 0;
  /// forward() returning only the argmax (greedy token) of each of the last n_out rows in
  /// `ids`, computed where the logits are; false (nothing run) when the model has no such
  /// path. Used by decode() when DecodeOptions::device_argmax.
  virtual bool forward_argmax(const int32_t* tokens, int n_tokens, int n_out, std::vector<int32_t>& ids) {
    (void)tokens, (void)n_tokens, (void)n_out, (void)ids;
    return false;
  }
};

struct DecodeOptions {
  int max_tokens = 0;        ///< tokens to emit at most (>= 0)
  int n_ctx = 0;             ///< the model's context (tokens): n_past never exceeds it
  int n_vocab = 0;           ///< logits row width
  bool speculative = true;   ///< draft and verify; false = one token per forward pass
  /// The sampler is greedy with no penalties and `emit` needs no logits rows (no
  /// logprobs): decode passes ask the model for argmax token ids only
  /// (DecodeModel::forward_argmax; a GPU then copies back ids, not logits). The tokens are
  /// the same: argmax with ties to the lowest id is what greedy sample() and verify() pick.
  bool device_argmax = false;
  PromptLookupOptions lookup;
};

struct DecodeStats {
  int completion_tokens = 0;  ///< tokens passed to `emit` (end-of-generation tokens are not)
  FinishReason finish = FinishReason::Length;
  int drafted = 0;            ///< draft tokens verified
  int accepted = 0;           ///< draft tokens accepted and emitted (<= drafted)
  int verify_passes = 0;      ///< forward passes that verified a draft
  int forward_passes = 0;     ///< all decode forward passes
};

/// Runs the decode phase after prefill. `logits`: f32 [n_vocab] of the last prompt
/// position (overwritten). `prompt`: the request's prompt token ids (the drafter's
/// initial history; the model's KV cache already holds them). `is_eog(t)`: t ends
/// generation (not emitted; finish = Stop). `emit(t, row)`: a generated token, in order,
/// with the f32 [n_vocab] logits row it was chosen from (valid during the call; for
/// logprobs; nullptr for tokens of a device_argmax pass); return false to stop (finish =
/// Cancelled). Ends with Length when max_tokens tokens were
/// emitted or the context is full. Exceptions of the model propagate.
DecodeStats decode(DecodeModel& model, Sampler& sampler, std::vector<float>& logits, const std::vector<int32_t>& prompt,
                   const DecodeOptions& opts, const std::function<bool(int32_t)>& is_eog,
                   const std::function<bool(int32_t, const float*)>& emit);

}  // namespace swz::engine
