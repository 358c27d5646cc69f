// The graph executor: runs a package's graph on any backend (runtime/backend/backend.h:
// cpu, cuda, vulkan)
// from the package's launch records alone (docs/package-format.md, "The launch
// contract"). No per-kernel C++ here: a kernel is launched by its manifest entry with the
// arguments its record binds, the grid and shared memory its rules give.
//
// A forward pass takes a batch of sequences (tokens, first position, block table, rows of
// logits wanted, row kind), so continuous batching needs no second executor:
//   * rows are laid out generated-row sequences first, then prompt-row sequences;
//     `decode`-phase launches run over the generated rows, `prefill`-phase launches over
//     the prompt rows, `all` launches over every row (a row's kernels follow its kind);
//   * `scope: sequence` launches (the KV write, attention) run once per sequence over its
//     rows, with its positions and block table;
//   * ops with `rows: "output"` (final norm, LM head) run on the gathered output rows (the
//     last n_out rows of each sequence), copied once into compact buffers.
// Device memory is allocated once at construction: weights (as stored in the GGUF),
// activation buffers for `max_rows` rows, scratch sized by the records' rules at max_rows
// and n_ctx, the KV page pools (per layer, K and V: one tile of n_head_kv * 64 * head_dim
// f16 per page, laid out as the target's kernels read it: GPU targets
// [n_head_kv][64][head_dim], cpu K [64][n_head_kv * head_dim] and V transposed),
// token/position/block-table staging. Nothing is allocated while running.
//
// KV pages: page ids are the kvcache::PageAllocator's; the executor stores them. A page's
// host image (read_page / write_page, for the prefix cache's host and disk tiers) is
// per layer the K tile then the V tile, f16: page_elems() values.
//
// Thread safety: every public member takes the executor's mutex (the backend is used by
// one thread at a time); none calls back into the page allocator.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "exec/batch_model.h"
#include "exec/sequence_model.h"
#include "kvcache/block_manager.h"

namespace swz::package {
struct LoadedPackage;
}

namespace swz::exec {

struct ExecutorOptions {
  int max_rows = 512;   ///< rows (tokens of all sequences) per forward pass
  int max_seqs = 16;    ///< sequences per forward pass
  int n_ctx = 4096;     ///< longest sequence (positions)
  int n_pages = 0;      ///< KV page pool size (pages of 64 positions), >= 1
};

/// SequenceStep (the batch's per-sequence record) is defined in exec/batch_model.h.
class GraphExecutor final : public BatchModel {
 public:
  /// Uploads the package's weights and allocates everything (see the file comment).
  /// Throws backend::OutOfMemory / backend::Error from the device, std::runtime_error for
  /// a package whose graph or launch records the executor cannot run (names the op).
  GraphExecutor(const package::LoadedPackage& pkg, std::unique_ptr<backend::Backend> be, const ExecutorOptions& opts);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  /// Runs the graph over `seqs` and writes f32 logits [sum n_out, n_vocab] into `logits`,
  /// sequence by sequence in the order given. Throws std::invalid_argument for a batch
  /// over max_rows / max_seqs, a sequence past n_ctx or with too few blocks;
  /// backend::Error when the device fails.
  void forward(std::span<const SequenceStep> seqs, std::vector<float>& logits);
  /// The same pass with what comes back chosen: `logits` (may be null) as above and/or
  /// `token_ids` [sum n_out]: each output row's argmax (ties to the lowest id), computed
  /// on the device by the package's graph.sampling.argmax records, so a greedy step copies
  /// back n_out ids instead of n_out x n_vocab floats. Throws std::invalid_argument for
  /// token_ids when !has_device_argmax().
  void forward(std::span<const SequenceStep> seqs, std::vector<float>* logits, std::vector<int32_t>* token_ids) override;
  /// Whether the package has device argmax records (swizzlec writes them for GPU targets).
  bool has_device_argmax() const override;
  /// The graph's ops up to the last one that binds layer n_layers - 1's K/V (its attention),
  /// launched one by one (never a recorded launch graph), nothing gathered or copied back.
  void forward_layers(std::span<const SequenceStep> seqs, int n_layers) override;

  int n_vocab() const override { return n_vocab_; }
  int max_rows() const override { return opts_.max_rows; }
  int max_seqs() const override { return opts_.max_seqs; }
  const ExecutorOptions& options() const { return opts_; }
  const backend::DeviceInfo& device() const;
  /// f16 values in one page's host image (= kvcache::PageLayout::page_elems()).
  size_t page_elems() const;
  void read_page(int page, uint16_t* host);
  void write_page(int page, const uint16_t* host);
  void copy_page(int dst, int src) override;
  kvcache::KvGeometry kv_geometry() const override;
  /// (Through a device staging buffer: per layer, K and V, the runs' tiles are gathered
  /// with device copies and cross to the host in one transfer, so the number of host
  /// transfers does not grow with the pages.)
  void read_kv(std::span<const KvRun> runs, uint16_t* k, uint16_t* v, int layer = -1) override;
  void move_kv(std::span<const KvMove> moves) override;
  /// Device bytes the executor allocated (weights, activations, scratch, KV pools).
  uint64_t device_bytes() const { return device_bytes_; }

  /// Where forward() passes spent their time since the last reset_pass_times(), in
  /// seconds of wall time: `host` from entry until everything was launched (checks,
  /// uploads, launch-graph updates, the launches), `wait` from there until the results
  /// were back (the device finishing its work, then the copy). On a device whose launches
  /// are asynchronous, `host` is time the device sits idle before each pass.
  struct PassTimes {
    double host = 0, wait = 0;
    int passes = 0;
  };
  PassTimes pass_times() const { return times_; }
  void reset_pass_times() { times_ = {}; }

 private:
  /// forward() and forward_layers(): the graph's ops through layer n_layers - 1 (all of
  /// them, and the argmax when token_ids, with n_layers = n_layer).
  void pass(std::span<const SequenceStep> seqs, std::vector<float>* logits, std::vector<int32_t>* token_ids, int n_layers);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ExecutorOptions opts_;
  int n_vocab_ = 0;
  uint64_t device_bytes_ = 0;
  PassTimes times_;
  std::mutex mu_;
};

/// SequenceModel over a GraphExecutor: one sequence, page ids from `kv` (its page_data()
/// is not used: the pages live on the device), copy-on-write of shared pages on the
/// device. The executor and allocator must outlive it.
class GraphModel final : public PagedSequenceModel {
 public:
  GraphModel(GraphExecutor& ex, kvcache::PageAllocator& kv);
  ~GraphModel() override;
  int n_vocab() const override { return ex_.n_vocab(); }
  void forward(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>& logits) override;
  bool forward_argmax(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<int32_t>& ids) override;

 private:
  void copy_page(int dst, int src) override { ex_.copy_page(dst, src); }
  void run(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>* logits, std::vector<int32_t>* ids);
  GraphExecutor& ex_;
};

}  // namespace swz::exec
