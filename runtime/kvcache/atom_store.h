// Position-independent K/V of code atoms, for the `approx` cache mode (issue 15,
// docs/server.md "Cache modes"; experimental).
//
// An atom (a function, a class member, an import block: frontend_ast/atomize.h) is a run
// of prompt tokens. A request in approx mode saves the K/V its prefill computed for each
// of its atoms here, keyed by the atom's tokens alone (not by what precedes them), with
// the positions they were computed at. A later approx request holding the same tokens
// anywhere in its prompt (after an edit earlier in the file moved them) takes that K/V
// instead of computing it: V as stored, K re-rotated by RoPE from the old positions to
// the new ones (rerotate_k; exact for the rotation itself, since RoPE at position p + d is
// RoPE at p followed by a rotation by d), while the atom's first tokens are recomputed
// (scheduler.h). What is approximate is the context: the atom's K/V was computed after
// other tokens than now precede it (Prompt Cache, Gim et al. 2024; EPIC, Hu et al. 2024;
// CacheBlend, Yao et al. 2025).
//
// Layout of a saved atom, f16, backend-independent: K and V each [n_layer][n][kv_width]
// (kv_width = n_head_kv * head_dim, KV head h's dims at h * head_dim), as
// exec::BatchModel::read_kv gives them.
//
// Thread safety: every member is safe to call concurrently (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kvcache/block_manager.h"

namespace swz::kvcache {

/// What re-rotating and reshaping K/V needs to know of a model (package hparams).
struct KvGeometry {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_rot = 0;            ///< rotated dims per head (even, <= head_dim)
  float rope_theta = 10000.f;
  bool neox = false;        ///< rope_type "neox": dim i pairs with i + n_rot/2; "norm": 2i with 2i+1
  int kv_width() const { return n_head_kv * head_dim; }
};

/// One atom's saved K/V.
struct AtomKV {
  int pos0 = 0;               ///< position of the atom's first token when computed
  int n = 0;                  ///< tokens
  std::vector<uint16_t> k, v; ///< f16 [n_layer][n][kv_width] each
  size_t bytes() const { return (k.size() + v.size()) * sizeof(uint16_t); }
};

/// Rotates the K rows `k` (f16 [n_rows][kv_width], every KV head) by RoPE at position
/// offset `delta` (may be negative), in place: a row roped at position p becomes the row
/// roped at p + delta. Angles as ggml's rope (theta_i = delta * rope_theta^(-2i/n_rot),
/// freq_scale 1), taken in double, the rotation in float; each value is rounded to f16 once. Follows ggml's
/// rope_f32 pairing (norm: dims 2i, 2i+1; neox: i, i + n_rot/2).
void rerotate_k(uint16_t* k, int n_rows, const KvGeometry& g, int delta);

/// Saved atoms by key (XXH3-128 of the approx namespace's model key and the atom's tokens:
/// block_key(model, {}, tokens, n)), least recently used evicted beyond `max_bytes`.
class AtomStore {
 public:
  explicit AtomStore(size_t max_bytes) : max_bytes_(max_bytes) {}
  /// The saved atom, or null; a hit makes it the most recently used.
  std::shared_ptr<const AtomKV> find(const BlockKey& key);
  bool contains(const BlockKey& key) const;
  /// Saves `atom` under `key` (replacing nothing: a key saved already is kept), then
  /// evicts least recently used atoms while over budget. An atom larger than the whole
  /// budget is not kept.
  void put(const BlockKey& key, std::shared_ptr<const AtomKV> atom);
  struct Stats {
    uint64_t atoms = 0, bytes = 0, hits = 0, misses = 0, saved = 0, evicted = 0;
  };
  Stats stats() const;

 private:
  using Lru = std::list<std::pair<BlockKey, std::shared_ptr<const AtomKV>>>;  // front = most recent
  size_t max_bytes_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<BlockKey, Lru::iterator, BlockKeyHash> index_;
  Stats stats_;
};

}  // namespace swz::kvcache
