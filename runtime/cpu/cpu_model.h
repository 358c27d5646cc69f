// The cpu backend: executes a package's decoder graph (see models/model.h for the op
// semantics) over memory-mapped GGUF weights, with a paged f16 KV cache.
//
// KV cache: the model keeps one sequence's block table, a list of pages of a
// kvcache::PageAllocator (64 positions per page, kvcache/block_manager.h). forward()
// allocates pages as the sequence grows and copies a page before writing into it when
// another holder shares it (copy-on-write), so pages taken from the prefix cache are
// never modified. Attention reads K/V through the block table.
//
// Numerics follow llama.cpp's CPU backend (ggml-cpu ops.cpp): activations quantized to
// the weight type's vec_dot type before each matmul, RMSNorm summed in double, RoPE
// angles built by repeated multiplication by theta_scale in float, attention scores from
// f16 q and k, softmax with a double sum and f16-rounded probabilities before P·V (the
// non-flash path). So greedy tokens match llama.cpp and logits agree to float rounding.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/sequence_model.h"
#include "ggml/ggml_types.h"
#include "kvcache/block_manager.h"

namespace swz::gguf {
class File;
}
namespace swz::ggml {
class ThreadPool;
}

namespace swz::cpu {

/// The page shape of `graph`'s KV cache: n_layer and n_head_kv * head_dim from its
/// hparams. Throws std::runtime_error when they are missing.
kvcache::PageLayout kv_layout(const nlohmann::json& graph);

/// Executes one sequence's forward passes. Not thread-safe: one caller at a time.
class CpuModel final : public exec::PagedSequenceModel {
 public:
  /// `graph` is the manifest's graph JSON; `weights` the package's source GGUF (must
  /// outlive the model). `n_ctx` is the longest sequence (tokens). `kv` supplies the KV
  /// pages (its layout must be kv_layout(graph)) and must outlive the model. Throws
  /// std::runtime_error naming an unknown op, buffer or tensor, or a layout mismatch.
  CpuModel(const nlohmann::json& graph, const gguf::File& weights, int n_ctx, ggml::ThreadPool& pool,
           kvcache::PageAllocator& kv);
  ~CpuModel() override;
  CpuModel(const CpuModel&) = delete;
  CpuModel& operator=(const CpuModel&) = delete;

  int n_vocab() const override { return n_vocab_; }
  // n_ctx, n_past, truncate, attach, release, block_table: exec::PagedSequenceModel.

  /// Which reduction order attention uses for the rows of a forward pass. llama.cpp's
  /// CPU backend reduces f16 attention products in one order for a batch of query rows
  /// (prompt processing) and in another for a single row (token-by-token decode); both
  /// are reproduced bit for bit. The choice belongs to the caller, not to the row count,
  /// so that results never depend on how rows are batched: prompt rows always use
  /// Prompt (any chunking of a prompt gives the same K/V and logits), and generated
  /// tokens always use Generated (a batch of speculative tokens verified in one pass
  /// gives exactly the logits of decoding them one at a time).
  // Rows (exec::SequenceModel::Rows): the cpu backend's two orders.

  /// Appends `n_tokens` tokens at positions n_past.. and runs the graph over them.
  /// Writes f32 logits [n_out, n_vocab] for the last `n_out` of these tokens into
  /// `logits` (resized). Throws std::length_error if the sequence would pass n_ctx or no
  /// page can be allocated (the sequence is unchanged but may hold new pages).
  /// Debugging: with SWZ_DUMP_DIR set, each op's output rows are written to
  /// $SWZ_DUMP_DIR/<op index>_<buffer>.f32 (raw little-endian f32, overwritten per pass).
  void forward(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>& logits) override;

 private:
  struct Impl;
  void copy_page(int dst, int src) override;
  std::unique_ptr<Impl> impl_;
  int n_vocab_ = 0;
};

}  // namespace swz::cpu
