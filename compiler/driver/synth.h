//===- synth.h - swizzlec synth: random-weight GGUFs of real shapes -*- C++ -*-===//
//
// Writes a GGUF v3 (alignment 32) with the shape of a real model (models::preset) and
// random weights, loadable by llama.cpp and by swizzle-rt: speed does not depend on
// weight values, so these serve benchmarks of any size (DESIGN.md §6).
//
// Determinism: every element is a pure function of (seed, tensor name, element index)
// (a SplitMix64 counter hash), so the output is byte-for-byte identical for the same
// arguments, whatever the thread count. Values are "normal-ish": the sum of four 16-bit
// uniforms (Irwin-Hall, variance matched to 1, bounded at +-3.46) times a per-tensor
// scale:
//   matrices            1/sqrt(fan_in) (fan_in = ne[0]): activations keep unit scale;
//   output head         kHeadLogitStd/sqrt(n_embd) (also token_embd when tied): since the
//                       final RMSNorm gives unit-scale rows, logits have std ~ kHeadLogitStd
//                       (6), so softmax is peaked and greedy tokens have clear margins;
//   token_embd (untied) 1.0;
//   norm weights        1 + 0.1 x noise;  biases 0.1 x noise.
// f32/f16/bf16 and the 32-element block types (q8_0, q4_0, q4_1 and the q5_0/q5_1
// fallbacks) are encoded from these floats with ggml's reference quantizers
// (ggml::quantize_row, bit-identical to llama-quantize without an imatrix). The k-quants
// (q4_k, q5_k, q6_k) are synthesized directly in the quantized domain instead: codes
// uniform over their range, sub-block scales uniform in [32, 63], mins centring each
// sub-block on zero, and d chosen so the dequantized std equals the same per-tensor scale.
// Reason: ggml's reference k-quant search costs 170-340 ns per element (measured), i.e.
// minutes for a 7B model; direct synthesis is a few ns per element. The blocks are valid
// k-quant blocks whatever their origin, so both engines read the same weights.
// Norms and biases stay f32. Rows whose length is not a multiple of the chosen type's
// block fall back as llama.cpp's quantizer does (llama-quant.cpp): q4_k -> q5_0,
// q5_k -> q5_1, q6_k -> q8_0, then f16 if still incompatible.
//
// Tokenizer: copied (every tokenizer.* key) from --vocab-from, which also fixes n_vocab;
// otherwise a minimal byte-level "gpt2" vocabulary (256 byte tokens, <|endoftext|>,
// <|im_start|>, <|im_end|>, a ChatML template, no merges) padded to n_vocab with unused
// tokens.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile.h"
#include "ggml/ggml_types.h"
#include "model.h"

namespace swz::compiler {

inline constexpr float kHeadLogitStd = 6.0f;

struct SynthOptions {
  std::string arch;              ///< llama | qwen2 | qwen3; empty = the preset's
  std::string preset;            ///< models::preset name; empty = the arch's default
  std::string type = "q8_0";     ///< f32 f16 bf16 q8_0 q4_0 q4_1 q4_k q5_k q6_k, or q4_k_m (a mix)
  std::string vocabFrom;         ///< a real GGUF whose tokenizer is copied
  std::string output;
  std::string name;              ///< general.name; empty = "synth-<preset>-<type>"
  uint64_t seed = 0;
  int threads = 0;               ///< 0 = hardware concurrency
  // Overrides (0 = the preset's value).
  int nLayer = 0, nEmbd = 0, nHead = 0, nHeadKv = 0, headDim = 0, nFf = 0, nVocab = 0, nCtx = 0;
  int tiedOutput = -1;           ///< -1 = preset's, 0 = separate output.weight, 1 = tied
};

/// Resolves preset + arch + overrides into validated hyper-parameters (n_vocab not yet
/// adjusted to --vocab-from). Throws models::UnsupportedModel / CompileError.
models::HParams synthHParams(const SynthOptions &opts);

/// The on-disk type of one tensor: f32 for norms and biases, else `want` with llama.cpp's
/// fallback for rows that do not fit its block size.
ggml::Type synthTensorType(const models::TensorSpec &spec, ggml::Type want);

/// The type `--type q4_k_m` gives one tensor of an n_layer-block model, before the
/// fallback: llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M mix (llama_tensor_get_type in
/// src/llama-quant.cpp, non-Falcon, no experts): output.weight Q6_K; attn_v and ffn_down
/// Q6_K in the layers use_more_bits picks (the first and last eighth, every third between:
/// i < n/8, i >= 7n/8, (i - n/8) % 3 == 2), Q4_K elsewhere; everything else Q4_K.
ggml::Type synthQ4KMType(const std::string &tensorName, int nLayer);

/// Parses the --type name (the list above). Throws CompileError naming the known ones.
ggml::Type synthType(const std::string &name);

/// True when this build can write `t` (f32/f16/bf16 always; block types need ggml/quants).
bool synthCanWrite(ggml::Type t);

/// The value generator: element `i` of the tensor keyed `key`, before scaling.
float synthNoise(uint64_t key, uint64_t i);
uint64_t synthTensorKey(uint64_t seed, const std::string &name);

/// Writes the GGUF. Throws CompileError, models::UnsupportedModel, gguf::Error or
/// std::runtime_error (I/O).
void runSynth(const SynthOptions &opts, const Log &log);

} // namespace swz::compiler
