// Per-architecture model descriptions: hyper-parameters read from GGUF metadata, the
// tensors each architecture needs, and the decoder graph (op list) that `swizzlec
// compile` writes into a package and the runtime's backends execute.
//
// Supported: llama (SmolLM2, Llama 2/3), qwen2 (Qwen2/2.5, Qwen2.5-Coder: QKV bias),
// qwen3 (per-head RMSNorm on q and k). Key names follow llama.cpp's GGUF conventions
// (src/llama-arch.cpp, gguf-py/gguf/constants.py): `<arch>.block_count`,
// `<arch>.attention.head_count`, tensors `blk.N.attn_q.weight` ...
//
// Plain C++ (no MLIR): the compiler imports this graph into the swz dialect; the
// runtime never includes this header (it reads the graph back from the manifest).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml/ggml_types.h"

namespace swz::gguf {
class File;
}

namespace swz::models {

class UnsupportedModel : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class RopeType { Norm, Neox };  ///< llama.cpp LLAMA_ROPE_TYPE_NORM (pairs (2i,2i+1)) / NEOX (pairs (i, i+d/2))

struct HParams {
  std::string arch;        ///< "llama" | "qwen2" | "qwen3"
  int n_layer = 0;
  int n_embd = 0;          ///< hidden size
  int n_head = 0;
  int n_head_kv = 0;       ///< GQA: n_head % n_head_kv == 0
  int head_dim = 0;        ///< per-head size (qwen3: attention.key_length, may differ from n_embd/n_head)
  int n_rot = 0;           ///< rotary dims (rope.dimension_count; default head_dim)
  int n_ff = 0;            ///< SwiGLU inner size
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;
  RopeType rope_type = RopeType::Norm;
  bool qkv_bias = false;   ///< qwen2
  bool qk_norm = false;    ///< qwen3
  bool tied_output = false;  ///< no output.weight: the LM head is token_embd.weight

  nlohmann::json to_json() const;
  static HParams from_json(const nlohmann::json& j);  ///< throws UnsupportedModel on missing/invalid fields
  void validate() const;                              ///< throws UnsupportedModel naming the bad value
};

/// Reads and validates hyper-parameters. Throws UnsupportedModel for an architecture
/// outside llama/qwen2/qwen3 (naming it), or gguf::Error for missing/mistyped keys.
HParams read_hparams(const gguf::File& f);

/// One tensor an architecture needs. `ne` in ggml order (ne[0] contiguous).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  bool is_norm_or_bias = false;  ///< kept F32 by `swizzlec synth`, like llama.cpp's quantizer
};

/// Every tensor the architecture reads, in a stable order (token_embd, per layer, output).
std::vector<TensorSpec> tensor_specs(const HParams& hp);

/// Checks that the file holds every tensor of tensor_specs() with the right shape and a
/// type the cpu backend can compute. Throws UnsupportedModel naming the first problem.
void check_tensors(const gguf::File& f, const HParams& hp);

/// The decoder graph as JSON: {"hparams": {...}, "buffers": {name: width}, "ops": [...],
/// "output": "logits"}. Each op: {"op": kind, "in": [...], "out": name, ...attrs}.
/// Activations are f32 [n_tokens, width] buffers; weights are GGUF tensor names.
/// Op kinds (semantics in docs/graph.md):
///   get_rows   in: [weight, "tokens"]          out[t] = dequant(weight row tokens[t])
///   rms_norm   in: [x, weight]                 out = x / sqrt(mean(x^2) + eps) * weight   (attr eps)
///   head_norm  in: [x, weight]                 rms_norm over each head_dim slice (attrs eps, head_dim)
///   matmul     in: [x, weight] (+ bias)        out = x W^T (+ b)
///   rope       in: [x]                         in place rotary embedding at each token's position
///                                              (attrs n_head, head_dim, n_rot, theta, mode "norm"|"neox")
///   attention  in: [q, k, v]                   writes k, v to the layer's KV cache at the tokens'
///                                              positions, causal softmax(q k^T * scale) v with GQA
///                                              (attrs layer, n_head, n_head_kv, head_dim, scale)
///   swiglu     in: [gate, up]                  out = silu(gate) * up
///   add        in: [a, b]                      out = a + b
nlohmann::json build_graph(const HParams& hp, const gguf::File& f);

/// Shapes of real models for `swizzlec synth` (DESIGN.md §6). Names:
/// smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-7b, qwen3-0.6b, qwen3-8b.
/// Throws UnsupportedModel for an unknown name (the message lists the known ones).
HParams preset(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace swz::models
