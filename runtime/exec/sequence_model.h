// What the engine needs from a backend model that runs one sequence's forward passes over
// a paged KV cache (kvcache::PageAllocator): the cpu backend's CpuModel and the GPU graph
// executor's GraphModel implement it, so the engine's admission, prefix cache, sampling
// and speculative decoding are the same code on every backend.
#pragma once

#include <cstdint>
#include <vector>

namespace swz::exec {

class SequenceModel {
 public:
  virtual ~SequenceModel() = default;

  /// Which kernels (and so which reduction orders) compute a pass's rows. The caller
  /// names the kind of row, never the row count, so results never depend on batching:
  /// prompt rows always use Prompt (any chunking of a prompt gives the same K/V and
  /// logits), generated tokens always use Generated (a speculative batch verified in one
  /// pass gives exactly the logits of decoding its tokens one at a time). cpu: llama.cpp's
  /// batched and single-row orders; GPU packages: the launch records' prefill and decode
  /// phases.
  enum class Rows { Prompt, Generated };

  virtual int n_ctx() const = 0;
  virtual int n_vocab() const = 0;
  /// Tokens currently held in the KV cache (positions 0..n_past-1).
  virtual int n_past() const = 0;
  /// Drops KV entries at positions >= n; pages wholly past n are released.
  virtual void truncate(int n) = 0;
  /// Starts a new sequence whose positions 0..n_past-1 are already in `pages` (in order;
  /// pages.size() * 64 >= n_past). Takes over one reference per page. The previous
  /// sequence is released. Throws std::invalid_argument (pages released) if they cannot
  /// hold n_past positions.
  virtual void attach(std::vector<int> pages, int n_past) = 0;
  /// Releases the sequence's pages (one reference each) and empties it.
  virtual void release() = 0;
  /// The sequence's block table: page ids, position p in block_table()[p / 64].
  virtual const std::vector<int>& block_table() const = 0;
  /// Appends `n_tokens` tokens at positions n_past.. and runs the graph over them.
  /// Writes f32 logits [n_out, n_vocab] for the last `n_out` of these tokens into
  /// `logits` (resized). Throws std::length_error if the sequence would pass n_ctx or no
  /// page can be allocated (the sequence is unchanged but may hold new pages).
  virtual void forward(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>& logits) = 0;
  /// forward() that brings back only each wanted row's argmax (the greedy token; ties to
  /// the lowest id) in `ids` [n_out], computed where the logits are (a GPU keeps them).
  /// Returns false, having run nothing, when the backend has no such path (cpu: the
  /// logits are in host memory already); the caller then uses forward().
  virtual bool forward_argmax(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<int32_t>& ids) {
    (void)tokens, (void)n_tokens, (void)n_out, (void)rows, (void)ids;
    return false;
  }
};

}  // namespace swz::exec
