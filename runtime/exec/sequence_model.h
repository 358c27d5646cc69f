// What the engine needs from a backend model that runs one sequence's forward passes over
// a paged KV cache (kvcache::PageAllocator): the graph executor's GraphModel implements it
// on every backend (cpu, cuda, vulkan), so the engine's admission, prefix cache, sampling
// and speculative decoding are the same code everywhere.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvcache/block_manager.h"

namespace swz::exec {

class SequenceModel {
 public:
  virtual ~SequenceModel() = default;

  /// Which kernels (and so which reduction orders) compute a pass's rows. The caller
  /// names the kind of row, never the row count, so results never depend on batching:
  /// prompt rows always use Prompt (any chunking of a prompt gives the same K/V and
  /// logits), generated tokens always use Generated (a speculative batch verified in one
  /// pass gives exactly the logits of decoding its tokens one at a time): the launch
  /// records' prefill and decode phases (cpu: llama.cpp's batched and single-row orders).
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

/// The block-table half of a SequenceModel, shared by the backends: one sequence's pages
/// from a kvcache::PageAllocator (64 positions a page; position p in block_table()[p / 64]),
/// released on truncate / release, and made the sequence's own before a pass writes them
/// (prepare_pages: a missing page is allocated, one shared with the prefix cache or
/// another sequence is copied first through the backend's copy_page).
class PagedSequenceModel : public SequenceModel {
 public:
  PagedSequenceModel(kvcache::PageAllocator& kv, int n_ctx) : kv_(kv), n_ctx_(n_ctx) {}
  int n_ctx() const override { return n_ctx_; }
  int n_past() const override { return n_past_; }
  void truncate(int n) override {
    n_past_ = std::clamp(n, 0, n_past_);
    const size_t keep = static_cast<size_t>((n_past_ + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens);
    while (block_table_.size() > keep) {
      kv_.unref_page(block_table_.back());
      block_table_.pop_back();
    }
  }
  void release() override {
    for (int p : block_table_) kv_.unref_page(p);
    block_table_.clear();
    n_past_ = 0;
  }
  void attach(std::vector<int> pages, int n_past) override {
    if (n_past < 0 || n_past > n_ctx_ || pages.size() * kvcache::kBlockTokens < static_cast<size_t>(n_past)) {
      for (int p : pages) kv_.unref_page(p);
      throw std::invalid_argument("attach: " + std::to_string(pages.size()) + " pages cannot hold " + std::to_string(n_past) +
                                  " positions");
    }
    release();
    block_table_ = std::move(pages);
    n_past_ = n_past;
  }
  const std::vector<int>& block_table() const override { return block_table_; }

 protected:
  /// Copies page `src`'s K/V into page `dst` (the backend's page format).
  virtual void copy_page(int dst, int src) = 0;
  /// Throws std::length_error unless n_tokens more positions fit the context.
  void check_room(int n_tokens) const {
    if (n_past_ + n_tokens > n_ctx_)
      throw std::length_error("KV cache full: " + std::to_string(n_past_) + " + " + std::to_string(n_tokens) +
                              " tokens exceed the context of " + std::to_string(n_ctx_));
  }
  /// Makes the pages for positions n_past .. n_past+n_tokens-1 exist and be this
  /// sequence's own. Throws std::length_error when no page can be had (the sequence keeps
  /// the pages it got; a page being copied is released if the copy throws).
  void prepare_pages(int n_tokens) {
    const int first = n_past_ / kvcache::kBlockTokens, last = (n_past_ + n_tokens - 1) / kvcache::kBlockTokens;
    for (int b = first; b <= last; ++b) {
      if (static_cast<size_t>(b) >= block_table_.size()) {
        block_table_.push_back(kv_.alloc_page());
      } else if (kv_.page_refcount(block_table_[b]) > 1) {
        const int fresh = kv_.alloc_page();
        try {
          copy_page(fresh, block_table_[b]);
        } catch (...) {
          kv_.unref_page(fresh);
          throw;
        }
        kv_.unref_page(block_table_[b]);
        block_table_[b] = fresh;
      }
    }
  }

  kvcache::PageAllocator& kv_;
  std::vector<int> block_table_;
  int n_ctx_ = 0;
  int n_past_ = 0;
};

}  // namespace swz::exec
