// Position-independent reuse of code atoms' K/V, for the `approx` cache mode (issue 15,
// docs/server.md "Cache modes"; experimental).
//
// An atom (a function, a class member, an import block: frontend_ast/atomize.h) is a run
// of prompt tokens. A request in approx mode records, for each atom its prefill computed,
// where that K/V lies: the prefix-cache blocks (kvcache::BlockManager keys of the approx
// namespace) and slots holding the atom's tokens, and the positions they were computed
// at. The index is keyed by the atom's tokens alone (not by what precedes them). A later
// approx request holding the same tokens anywhere in its prompt (after an edit earlier in
// the file moved them) pins those blocks at admission and, at its prefill, has the
// backend move the K/V into its own pages (exec::BatchModel::move_kv): V as it was, K
// re-rotated by RoPE from the old positions to the new ones (exact for the rotation
// itself, since RoPE at position p + d is RoPE at p followed by a rotation by d), while the
// atom's first tokens and those whose K/V deviates most are recomputed (scheduler.h). What is approximate is the context:
// the atom's K/V was computed after other tokens than now precede it (Prompt Cache, Gim
// et al. 2024; EPIC, Hu et al. 2024; CacheBlend, Yao et al. 2025).
//
// The K/V itself is never copied out: it lives in the prefix cache's pages (and its host
// and disk tiers), which own its memory and its eviction. An atom whose blocks the cache
// does not hold is stale: found at admission, not pinnable, erased; every atom a request
// computes (not one it installed) is saved again at its new location.
//
// Thread safety: every AtomStore member is safe to call concurrently (one mutex).
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

/// RoPE's rotation by `delta` positions (may be negative): cos and sin per pair
/// i < n_rot/2 of the angle delta * rope_theta^(-2i/n_rot) (ggml's rope, freq_scale 1),
/// taken in double, kept in float.
struct RopeDelta {
  RopeDelta(const KvGeometry& g, int delta);
  int delta;
  std::vector<float> cs, sn;
};

/// Rotates one KV head's key (head_dim contiguous f16 values, roped at some position p)
/// in place into the key roped at p + r.delta: each pair (norm: dims 2i, 2i+1; neox: i,
/// i + n_rot/2, as ggml's rope_f32) rotated in float, each value rounded to f16 once;
/// dims >= n_rot unchanged.
void rerotate_head(uint16_t* x, const KvGeometry& g, const RopeDelta& r);

/// Where one saved atom's K/V lies.
struct AtomRef {
  int pos0 = 0;  ///< position of the atom's first token when computed
  int n = 0;     ///< tokens
  /// A prefix-cache block (approx namespace) holding `n` of the atom's tokens, in order,
  /// at slots slot0 .. slot0 + n - 1. The pieces' n add up to the atom's.
  struct Piece {
    BlockKey block;
    int slot0 = 0, n = 0;
  };
  std::vector<Piece> pieces;
};

/// Saved atoms by key (XXH3-128 of the approx namespace's scope key and the atom's tokens:
/// block_key(scope_key, {}, tokens, n)), least recently used dropped beyond `max_atoms`.
class AtomStore {
 public:
  explicit AtomStore(size_t max_atoms) : max_atoms_(max_atoms) {}
  /// The saved atom, or null; a hit makes it the most recently used.
  std::shared_ptr<const AtomRef> find(const BlockKey& key);
  bool contains(const BlockKey& key) const;
  /// Saves `atom` under `key` (replacing an atom saved under it before: the newest
  /// computation's location wins), then drops the least recently used atoms while over
  /// max_atoms.
  void put(const BlockKey& key, std::shared_ptr<const AtomRef> atom);
  /// Erases the atom of `key`, a find() hit whose blocks the prefix cache does not hold
  /// now, and counts that hit as stale instead. The next request that computes the atom
  /// saves it again.
  void stale(const BlockKey& key);
  struct Stats {
    uint64_t atoms = 0, hits = 0, misses = 0, stale = 0, saved = 0, evicted = 0;
  };
  Stats stats() const;

 private:
  void erase_locked(const BlockKey& key);  // the atom of `key`, if any (mu_ held)
  using Lru = std::list<std::pair<BlockKey, std::shared_ptr<const AtomRef>>>;  // front = most recent
  size_t max_atoms_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<BlockKey, Lru::iterator, BlockKeyHash> index_;
  Stats stats_;
};

}  // namespace swz::kvcache
