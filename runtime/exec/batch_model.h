// What the scheduler (runtime/engine/scheduler.h) needs from a backend model: one forward
// pass over a batch of sequences, each with its own tokens, first position, block table
// (owned by the caller) and row kind. The graph executor (GPU packages) runs the batch in
// one pass; SequentialBatchModel runs a SequenceModel (the cpu backend's CpuModel) over the
// same batch one sequence after another, so the scheduler is one code path everywhere.
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
  /// Copies page `src`'s K/V into page `dst` (copy-on-write of a shared page).
  virtual void copy_page(int dst, int src) = 0;
};

/// BatchModel over a PagedSequenceModel that runs one sequence per call (the cpu backend
/// today): forward() lends each step's block table to the model, runs it, takes the table
/// back. Results are those of running each sequence alone (the model's batch invariance
/// makes them equal to one batched pass). The model must outlive this object and must hold
/// no sequence of its own while used here.
class SequentialBatchModel final : public BatchModel {
 public:
  SequentialBatchModel(PagedSequenceModel& model, int max_rows, int max_seqs)
      : m_(model), max_rows_(max_rows), max_seqs_(max_seqs) {}
  int n_vocab() const override { return m_.n_vocab(); }
  int max_rows() const override { return max_rows_; }
  int max_seqs() const override { return max_seqs_; }
  bool has_device_argmax() const override { return false; }
  void forward(std::span<const SequenceStep> seqs, std::vector<float>* logits, std::vector<int32_t>* token_ids) override {
    if (token_ids) throw std::invalid_argument("SequentialBatchModel: no device argmax");
    if (static_cast<int>(seqs.size()) > max_seqs_)
      throw std::invalid_argument("forward: " + std::to_string(seqs.size()) + " sequences exceed " + std::to_string(max_seqs_));
    if (logits) logits->clear();
    std::vector<float> part;
    for (const SequenceStep& s : seqs) {
      m_.run_borrowed(s.block_table, s.n_blocks, s.pos0, s.tokens, s.n_tokens, s.n_out, s.rows, part);
      if (logits) logits->insert(logits->end(), part.begin(), part.end());
    }
  }
  void copy_page(int dst, int src) override { m_.copy_kv_page(dst, src); }

 private:
  PagedSequenceModel& m_;
  int max_rows_, max_seqs_;
};

}  // namespace swz::exec
