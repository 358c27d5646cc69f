// What the scheduler (runtime/engine/scheduler.h) needs from a backend model: one forward
// pass over a batch of sequences, each with its own tokens, first position, block table
// (owned by the caller) and row kind. The graph executor (runtime/exec/executor.h)
// implements it for every backend (cpu, cuda, vulkan).
//
// Page management is the caller's: before forward(), every page covering a step's positions
// pos0 .. pos0 + n_tokens - 1 exists in its block table and is the sequence's own (a page
// shared with the prefix cache or another sequence was copied first, through copy_page).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/sequence_model.h"
#include "kvcache/atom_store.h"

namespace swz::exec {

/// One sequence's part of a forward pass.
struct SequenceStep {
  const int32_t* tokens = nullptr;  ///< n_tokens token ids
  int n_tokens = 0;
  int pos0 = 0;                     ///< position of tokens[0]; the sequence holds 0..pos0-1 already
  const int* block_table = nullptr; ///< page ids covering positions 0..pos0+n_tokens-1
  int n_blocks = 0;
  int n_out = 1;                    ///< logits rows wanted: the last n_out tokens (1..n_tokens)
  SequenceModel::Rows rows = SequenceModel::Rows::Prompt;
};

class BatchModel {
 public:
  virtual ~BatchModel() = default;
  virtual int n_vocab() const = 0;
  /// Rows (tokens of all sequences) one forward() may carry.
  virtual int max_rows() const = 0;
  /// Sequences one forward() may carry.
  virtual int max_seqs() const = 0;
  /// Whether forward() can return device-computed argmax ids (token_ids).
  virtual bool has_device_argmax() const = 0;
  /// Runs the graph over `seqs` (KV written at each sequence's positions through its block
  /// table). `logits` (may be null): f32 [sum n_out, n_vocab], sequence by sequence in the
  /// order given. `token_ids` (may be null; only when has_device_argmax()): [sum n_out],
  /// each output row's argmax, ties to the lowest id. Throws std::invalid_argument for a
  /// batch over max_rows / max_seqs, a sequence past the context or with too few blocks;
  /// backend::Error when the device fails.
  virtual void forward(std::span<const SequenceStep> seqs, std::vector<float>* logits, std::vector<int32_t>* token_ids) = 0;
  /// Runs only the graph's first `n_layers` transformer layers over `seqs`: their K/V in
  /// layers 0 .. n_layers - 1 are written at the sequences' positions as forward() writes
  /// them (bitwise), nothing after those layers runs (no deeper layer's K/V, no logits).
  /// The `approx` cache mode's deviation probe (CacheBlend's first-layer pass, Yao et al.
  /// 2025, §4.3): K/V of a shallow layer computed with the request's own context, to compare
  /// with the K/V it would reuse. Throws as forward(); std::invalid_argument for n_layers
  /// outside 1 .. n_layer.
  virtual void forward_layers(std::span<const SequenceStep> seqs, int n_layers) = 0;
  /// Copies page `src`'s K/V into page `dst` (copy-on-write of a shared page).
  virtual void copy_page(int dst, int src) = 0;

  // Token-level K/V access for position-independent reuse (the `approx` cache mode,
  // kvcache/atom_store.h), whatever the backend's page layout.
  /// The model's KV shape and RoPE (package hparams).
  virtual kvcache::KvGeometry kv_geometry() const = 0;
  /// Slots slot0 .. slot0 + n - 1 of one page (0 <= slot0, slot0 + n <= 64).
  struct KvRun {
    int page = 0, slot0 = 0, n = 0;
  };
  /// Copies the runs' slots to `k` and `v`, f16 [n_layer][sum of n][kv_width] each (the
  /// runs in order); with `layer` >= 0 that layer's only, f16 [sum of n][kv_width]. Ordered
  /// after every earlier forward(). Throws std::invalid_argument for a run or a layer out
  /// of range.
  virtual void read_kv(std::span<const KvRun> runs, uint16_t* k, uint16_t* v, int layer = -1) = 0;
  /// One token slot's K/V moved for position-independent reuse: from slot `src_slot` of
  /// page `src_page` to slot `dst_slot` of page `dst_page`, V as it is, K re-rotated by
  /// RoPE by `delta` positions (kvcache::rerotate_head's rotation).
  struct KvMove {
    int src_page = 0, src_slot = 0, dst_page = 0, dst_slot = 0, delta = 0;
  };
  /// Applies `moves` in every layer. A destination page must not be a source page and no
  /// destination slot may be written twice; the destination pages' other slots keep their
  /// values. Ordered after every earlier forward() and before every later one. On GPU
  /// packages the package's graph.kv_move kernel does it on the device
  /// (docs/package-format.md); elsewhere the executor moves the slots through the host.
  /// Throws std::invalid_argument for a move out of range or breaking those rules,
  /// backend::Error when the device fails.
  virtual void move_kv(std::span<const KvMove> moves) = 0;
};

}  // namespace swz::exec
