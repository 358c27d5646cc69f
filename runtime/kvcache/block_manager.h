// Paged KV cache and content-addressed prefix cache (DESIGN.md §4).
//
// Pages. The KV cache is a pool of fixed-size pages; a page holds the K and V vectors of
// kBlockTokens (64) consecutive positions for every layer, laid out per layer as K
// [slot 0..63][kv_width] then V transposed [kv_width][slot 0..63], f16 (PageLayout), so
// one page is one contiguous copy for spill, restore and disk. A sequence owns a block table (page ids; position p
// lives in page table[p / 64], slot p % 64). Pages are reference counted: the sequence
// holding a page in its block table holds one reference, the prefix cache holds one for
// every block it keeps resident; a page returns to the free list at zero. A writer of a
// page whose count is above one copies it first (copy-on-write, exec::PagedSequenceModel::prepare_pages).
//
// Prefix cache. A prompt is cut into 64-token blocks; block i's key is
//   key_i = XXH3-128(model key ‖ key_{i-1} ‖ tokens of block i)   (key_{-1} = 0)
// where the model key hashes the package's GGUF content hash, the tokenizer and the KV
// layout, so keys of different models or tokenizers never meet and a key names a whole
// prefix. The index maps key → block in one or more tiers:
//   device  a page of the pool (on the cpu backend also RAM, but a bounded pool);
//   host    a copy in host RAM (bounded by bytes), made when a device block is evicted
//           (spill) and moved back into a page when a request hits it (restore);
//   disk    optional (`cache_dir`): one file per block and *tenant* (an organisation),
//           written by a background thread after the block is published, read back (and
//           authenticated) on a hit; survives restarts (the destructor finishes pending
//           writes). Encrypted at rest (below).
// Lookup is the longest prefix of a prompt's keys present in the RAM tiers, across all
// requests, sessions and API keys of the model, or on the disk tier of the request's
// own tenant (a request may have none: RAM tiers only).
//
// Token-granular reuse (match_partial). A block published with its tokens and its parent
// key is also a candidate for a prompt that shares only the start of it: after the full
// blocks matched, the prompt's next tokens are compared with the RAM-tier blocks whose
// parent is the last matched key, and the longest common run (m < 64 tokens) is reused
// from that block's page, which the sequence copies before writing slot m (copy on
// write). A prompt's partial last block (1..63 tokens) is published too, under
//   key = XXH3-128(model ‖ parent ‖ its m tokens)
// (a key no full block has), so the next turn of a conversation, or a prompt edited
// near its end, reuses everything before the first differing token, as llama.cpp's
// per-slot prompt cache does. Partial blocks live in the RAM tiers only (never on disk);
// blocks read from disk carry no tokens and are matched whole only. A block is a partial
// candidate only for the scopes (an organisation or an API key) that published it:
// whole-block hits are shared by everyone, as before, but below a whole block a request
// never learns how many tokens of another scope's prompt its own shares (reported as
// cached tokens, and in TTFT), which would let it read that prompt token by token.
// The blocks a scope published under a parent are indexed apart from other scopes', sorted
// by their tokens and listed by last use, so match_partial compares the prompt with the
// neighbours of its place in the sorted order and settles ties by recency, however many
// prompts were cached under the same parent (the zero key: every prompt's start).
//
// Disk tier encryption (zero data retention, docs/server.md "Zero data retention"). A
// tenant's keys come from the server's 32-byte master key (CacheOptions::disk_key, a key
// file kept outside the cache directory) and the tenant's name:
//   tenant key = BLAKE2b-256(key = master, "swizzle-kv-tenant:" ‖ name)
//   enc key    = crypto_kdf(tenant key, id 1, "swzkvenc"),  name key = id 2
// Files live in DIR/<model key hex>/t<BLAKE2b-128(name key, "dir")>/ and are named
// BLAKE2b-128(name key, model key ‖ block key).kv, so neither the organisation nor the
// block key (which anyone could compute from a guessed prompt) shows in a path. A file is
//   "SWZKVENC" u32 version u32 0 | nonce | XChaCha20-Poly1305(header: layout, model key,
//   block key) | nonce | XChaCha20-Poly1305(page bytes, AD = plain head ‖ header)
// with random 24-byte nonces: a copied cache directory reveals neither tokens nor K/V,
// a file moved into another tenant's folder (or read with another master key) fails
// authentication and is deleted, and a flipped bit anywhere is caught. Blocks no sequence uses are evicted in
// LRU order (spilled device → host, dropped host → gone unless on disk, disk files
// deleted LRU beyond the disk budget) and expire from the RAM tiers after a sliding TTL
// (each hit restarts it). Blocks matched by an admitted request are pinned until its run
// has taken them: a pinned block may move device → host under pressure (even past the
// host budget) but is never dropped, so the count reported at admission stays true.
//
// Thread safety: every public member is safe to call concurrently (one mutex), except
// page_data(), which is lock-free pointer arithmetic over the fixed pool mapping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace swz::kvcache {

/// Tokens per page and per prefix-cache block.
inline constexpr int kBlockTokens = 64;

/// A 128-bit block key (XXH3-128). The all-zero key is the parent of a prompt's first block.
struct BlockKey {
  uint64_t lo = 0, hi = 0;
  bool operator==(const BlockKey&) const = default;
  bool is_zero() const { return lo == 0 && hi == 0; }
  /// 32 lower-case hex digits, high half first (the model's disk tier folder; logs).
  std::string hex() const;
};
struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
};

/// The model key: XXH3-128 of `identity` (what makes K/V of the same tokens differ:
/// weights hash, tokenizer, graph, KV layout and dtype).
BlockKey model_key(std::string_view identity);
/// key = XXH3-128(model ‖ parent ‖ tokens[0..n)) over little-endian bytes (n = 64 for a block).
BlockKey block_key(const BlockKey& model, const BlockKey& parent, const int32_t* tokens, int n);
/// Keys of the first `n_tokens / 64` full blocks of `tokens` (a partial last block has none),
/// continuing the chain after `parent` (zero = start of the prompt).
std::vector<BlockKey> block_keys(const BlockKey& model, const int32_t* tokens, size_t n_tokens,
                                 BlockKey parent = {});

/// Shape of one page, f16: per layer K as [kBlockTokens][kv_width], then V transposed as
/// [kv_width][kBlockTokens] (k_offset, v_offset).
struct PageLayout {
  int n_layer = 0;
  int kv_width = 0;  ///< n_head_kv * head_dim
  size_t page_elems() const { return static_cast<size_t>(n_layer) * 2 * kBlockTokens * kv_width; }
  size_t page_bytes() const { return page_elems() * sizeof(uint16_t); }
  /// Element offset, within a page, of `slot`'s K row in `layer` (kv_width f16: head
  /// hk's key at + hk * head_dim).
  size_t k_offset(int layer, int slot) const {
    return (static_cast<size_t>(layer) * 2 * kBlockTokens + slot) * kv_width;
  }
  /// Element offset, within a page, of V's row for dimension `dim` (0 .. kv_width-1) in
  /// `layer`: V is stored transposed, each dimension's kBlockTokens slots contiguous (slot
  /// s at + s), as llama.cpp's non-flash V cache (v_trans), so P.V reads keys in order.
  size_t v_offset(int layer, int dim) const {
    return (static_cast<size_t>(layer) * 2 + 1) * kBlockTokens * kv_width + static_cast<size_t>(dim) * kBlockTokens;
  }
};

/// What a backend needs from the page pool (a sequence model's view of the KV cache).
class PageAllocator {
 public:
  virtual ~PageAllocator() = default;
  virtual const PageLayout& layout() const = 0;
  /// A free page with reference count 1, evicting cached blocks if needed. Throws
  /// std::length_error when every page is held by running sequences.
  virtual int alloc_page() = 0;
  virtual void ref_page(int page) = 0;
  /// Drops one reference; the page is free at zero.
  virtual void unref_page(int page) = 0;
  virtual int page_refcount(int page) const = 0;
  /// The page's elements (layout().page_elems() f16 values). Lock-free; valid for the
  /// allocator's lifetime.
  virtual uint16_t* page_data(int page) = 0;
};

struct CacheOptions {
  int n_pages = 0;                    ///< device page pool size (pages of layout.page_bytes())
  bool prefix_cache = true;           ///< false: a plain paged KV cache, nothing is shared or kept
  size_t host_bytes = size_t{1} << 30;  ///< host tier budget for unpinned blocks (0 = no host tier)
  std::chrono::milliseconds ttl{std::chrono::minutes(5)};  ///< sliding TTL of the RAM tiers (0 = none)
  std::string disk_dir;               ///< disk tier directory ("" = none); a subfolder per model key
  uint64_t disk_bytes = uint64_t{10} << 30;  ///< disk tier budget, all tenants together
  /// The disk tier's 32-byte master key (raw bytes; required with disk_dir): every
  /// tenant's keys derive from it (file comment, "Disk tier encryption").
  std::string disk_key;
  /// Injectable clock (tests); default std::chrono::steady_clock::now. It must never go
  /// back: expiry and match_partial's tie rule walk blocks in last-use order.
  std::function<std::chrono::steady_clock::time_point()> clock;
  /// Log sink for tier events worth an operator's eye (a corrupt disk file); default stderr.
  std::function<void(const std::string&)> log;
  /// Pages that live outside host memory (a GPU backend's device pools, runtime/exec):
  /// read_page copies page `page`'s layout.page_elems() values (in the backend's own
  /// order) to `dst`, write_page copies them in. Spills, restores and disk writes go
  /// through them; the pool then maps no host memory and page_data() returns nullptr.
  /// Called with the cache's lock held from the thread that allocates a page or acquires
  /// a block (spill, restore), and without it from the disk thread (a page it holds a
  /// reference on); they must not call back into the cache. An exception from either
  /// leaves the cache as it was (spill / restore) or skips the disk write of that block.
  /// Unset (both): pages are the host mapping.
  std::function<void(int page, uint16_t* dst)> read_page;
  std::function<void(int page, const uint16_t* src)> write_page;
};

/// Counters and occupancy (engine CacheStats reads these).
struct BlockStats {
  uint64_t blocks_device = 0, blocks_host = 0, blocks_disk = 0;
  uint64_t evictions = 0;   ///< blocks dropped from the last tier that held them
  uint64_t spills = 0, restores = 0, disk_reads = 0, disk_writes = 0, disk_rejects = 0;
  int pages_free = 0, pages_total = 0;
};

/// The page pool plus the prefix index and its tiers.
class BlockManager final : public PageAllocator {
 public:
  /// Maps the pool (lazily committed anonymous memory) and, with a disk tier, opens the
  /// default tenant ("", id 0; disk_tenant()). Throws std::invalid_argument for
  /// n_pages < 1, an empty layout or a disk tier without a 32-byte disk_key,
  /// std::runtime_error when the pool cannot be mapped or the disk directory cannot be
  /// created.
  BlockManager(const PageLayout& layout, const BlockKey& model, CacheOptions opts);
  ~BlockManager() override;
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // PageAllocator
  const PageLayout& layout() const override { return layout_; }
  int alloc_page() override;
  void ref_page(int page) override;
  void unref_page(int page) override;
  int page_refcount(int page) const override;
  /// nullptr when pages live elsewhere (CacheOptions::read_page).
  uint16_t* page_data(int page) override {
    return base_ ? base_ + static_cast<size_t>(page) * layout_.page_elems() : nullptr;
  }

  const BlockKey& model() const { return model_; }
  bool prefix_cache_enabled() const { return opts_.prefix_cache; }

  /// The disk tier id of tenant `name` (an organisation; "" = the default tenant, id 0),
  /// for match_and_pin and publish; -1 without a disk tier. The first call for a name
  /// derives its keys, creates its folder and reads the headers of the files in it
  /// (a file that does not authenticate is deleted and logged).
  int disk_tenant(const std::string& name);
  /// Longest prefix of `keys` held in a RAM tier or on the disk tier of `tenant` (-1:
  /// none). Pins each matched block (appends its key to `pinned`), restarts its TTL, and
  /// loads disk-only blocks into the host tier (a file that fails authentication ends the
  /// match there, is deleted and logged). Returns the number of matched blocks.
  int match_and_pin(const std::vector<BlockKey>& keys, std::vector<BlockKey>& pinned, int tenant = 0);
  /// Releases pins taken by match_and_pin.
  void unpin(const std::vector<BlockKey>& pinned);
  /// Makes the pinned blocks `keys` device-resident (restoring host copies into fresh
  /// pages) and returns their pages in order, each with one reference added for the
  /// caller's block table. The pins are kept (unpin separately).
  std::vector<int> acquire(const std::vector<BlockKey>& keys);
  /// Offers a full block a sequence computed in `page` to the cache under `key`. If the
  /// key is new the cache takes a reference on the page; if it exists already the RAM
  /// tiers do not change. Either way a disk write for `tenant` is queued unless that
  /// tenant has the block already (-1: no disk write). No-op with the prefix cache off.
  /// Such a block is matched whole only (it has no tokens for match_partial).
  void publish(const BlockKey& key, int page, int tenant = 0);
  /// publish() of a block whose tokens are known: `tokens` (64 for a full block, whose key
  /// is block_key(model, parent, tokens, 64); 1..63 for a prompt's partial last block, key
  /// block_key(model, parent, tokens, m), RAM tiers only: `tenant` is ignored) and the key
  /// of the block before it (`parent`, zero for a prompt's first block), so match_partial
  /// can reuse its first tokens for requests of `scope` (an organisation; "" = requests of
  /// none). Throws std::invalid_argument for 0 or more than 64 tokens.
  void publish(const BlockKey& key, int page, int tenant, const BlockKey& parent, std::span<const int32_t> tokens,
               std::string_view scope);
  /// Token-granular reuse after the full blocks: the largest m <= max_tokens (capped at 64)
  /// such that a RAM-tier block that `scope` published with its tokens under `parent` (zero:
  /// a prompt's first block) begins with tokens[0 .. m). Pins that block (appends its key
  /// to `pinned`; its page comes from acquire() as any other, positions 0 .. m-1 valid) and
  /// returns m; returns 0 and pins nothing when no such block shares a first token. Ties
  /// go to a device-resident block, then the most recently used, then the one published
  /// (with tokens) first. Costs O(log n) in the n blocks `scope` published under `parent`,
  /// plus a comparison with each of those sharing more than m tokens with the prompt (on
  /// disk only), plus, for the tie rule, about twice the fewer of: those sharing m tokens;
  /// those used since the chosen one (and, when it is on host, those on a device page).
  /// Relies on CacheOptions::clock never going back.
  int match_partial(const BlockKey& parent, const int32_t* tokens, int max_tokens, std::vector<BlockKey>& pinned,
                    std::string_view scope);
  /// Writes queued blocks to the disk tier now, on the calling thread (no-op without one).
  /// The disk thread does this on its own after every publish; this is for tests and
  /// for callers that need the files before going on.
  void flush_disk();
  /// Path of `key`'s file on `tenant`'s disk tier (whether or not it exists); "" without
  /// a disk tier or for an unknown tenant. For tests and tools.
  std::string disk_file(const BlockKey& key, int tenant = 0) const;
  /// Size in bytes of every disk tier file of this layout.
  uint64_t disk_file_bytes() const;
  /// Applies the TTL now (also done by match_and_pin, publish and stats).
  void expire();
  BlockStats stats();

 private:
  struct Entry;
  /// A match_partial candidate: an entry with tokens, in the Children of its parent and
  /// of each scope that published it.
  struct Child {
    const Entry* entry;  // its node in index_ (stable: unordered_map nodes never move)
    BlockKey key;
  };
  /// Lexicographic by tokens (a prefix first), then by `seq` (publication order); also
  /// compares a Child with a span of tokens (lower_bound of a prompt). Defined in the .cpp.
  struct ChildOrder {
    using is_transparent = void;
    bool operator()(const Child& a, const Child& b) const;
    bool operator()(const Child& a, std::span<const int32_t> b) const;
    bool operator()(std::span<const int32_t> a, const Child& b) const;
  };
  using ChildSet = std::set<Child, ChildOrder>;
  /// match_partial's candidates for one (parent, scope): the blocks that scope published
  /// with tokens under that parent.
  struct Children {
    ChildSet by_tokens;
    std::list<Child> by_use;         // in last_used order, front = least recent (as lru_)
    std::list<Child> by_use_device;  // those with a device page, in the same order
  };
  struct ChildrenKey {
    BlockKey parent;
    uint64_t scope;  // XXH3-64 of the scope
    bool operator==(const ChildrenKey&) const = default;
  };
  struct ChildrenKeyHash {
    size_t operator()(const ChildrenKey& k) const {
      return BlockKeyHash{}(k.parent) ^ static_cast<size_t>(k.scope * 0xC2B2AE3D27D4EB4Full);
    }
  };
  /// One scope that published an entry with tokens, and the entry's places in its Children.
  struct ScopeSlot {
    uint64_t scope;                    // XXH3-64 of the scope
    Children* children;                // children_[{parent, scope}] (a node: never moves)
    ChildSet::iterator by_tokens;      // erased in O(1)
    std::list<Child>::iterator by_use;
    std::list<Child>::iterator by_use_device;  // while the entry has a device page
  };
  struct Entry {
    int page = -1;                   // device tier: a page with one reference held by the cache
    std::vector<uint16_t> host;      // host tier copy (empty: not on host)
    std::vector<int> disk;           // tenants whose disk tier holds a file of this block
    BlockKey parent;                 // the block before it (match_partial); meaningful with tokens
    std::vector<int32_t> tokens;     // its tokens (64, or 1..63: a partial block); empty: unknown
    std::vector<ScopeSlot> scopes;   // the scopes that published it with tokens
    uint64_t seq = 0;                // with tokens: order of publication (match_partial's last tie rule)
    int pins = 0;
    std::chrono::steady_clock::time_point last_used;
    std::list<BlockKey>::iterator lru;  // position in lru_ (front = least recently used)
  };
  using Map = std::unordered_map<BlockKey, Entry, BlockKeyHash>;

  std::chrono::steady_clock::time_point now() const;
  void touch(const BlockKey& key, Entry& e);
  bool evict_one_page();              // caller holds mu_
  void make_host_room(size_t bytes);  // caller holds mu_
  void drop_ram(Map::iterator it);    // drops device+host copies; erases when nothing is left
  void erase_if_empty(Map::iterator it);
  void enforce_disk_budget();         // caller holds mu_
  /// A disk tier tenant: its folder and keys (file comment, "Disk tier encryption").
  struct Tenant {
    std::string dir;
    unsigned char enc[32];
    unsigned char names[32];
  };
  int open_tenant(const std::string& name);  // caller holds mu_
  std::string disk_path(const Tenant& t, const BlockKey& key) const;
  bool read_disk(const Tenant& t, const BlockKey& key, std::vector<uint16_t>& out, std::string& why) const;
  void write_disk(const Tenant& t, const BlockKey& key, const std::vector<uint16_t>& data);
  bool read_header(const Tenant& t, const std::string& path, BlockKey& key, std::string& why) const;
  void log(const std::string& line) const;
  void release_page_ref(int page);    // caller holds mu_
  void release_entry_page(Entry& e);   // the entry's device page back (cached_ cleared); caller holds mu_
  void list_on_device(Entry& e, const BlockKey& key);  // e just got a device page: into by_use_device
  void read_page(int page, uint16_t* dst);        // through CacheOptions::read_page or page_data()
  void write_page(int page, const uint16_t* src);
  void disk_worker();

  PageLayout layout_;
  BlockKey model_;
  CacheOptions opts_;
  uint16_t* base_ = nullptr;
  size_t map_bytes_ = 0;
  std::vector<int> refcount_;
  std::vector<char> cached_;  // page held by an index entry (one at most: publish adopts no other's page)
  std::vector<int> free_;
  Map index_;
  /// (parent key, scope) -> the entries that scope published with tokens under that
  /// parent (match_partial's candidates); absent when there are none.
  std::unordered_map<ChildrenKey, Children, ChildrenKeyHash> children_;
  uint64_t next_seq_ = 0;  // Entry::seq of the next entry to get tokens
  std::list<BlockKey> lru_;
  size_t host_used_ = 0;
  uint64_t disk_used_ = 0;
  std::vector<std::pair<BlockKey, int>> disk_queue_;  // (block, tenant)
  std::string disk_model_dir_;
  std::vector<Tenant> tenants_;                        // by tenant id (copied out before unlocking)
  std::unordered_map<std::string, int> tenant_ids_;
  BlockStats counters_;
  mutable std::mutex mu_;
  std::condition_variable disk_cv_;  // disk_queue_ not empty, or stopping_
  bool stopping_ = false;
  int flushing_ = 0;                      // flush_disk calls writing a batch now
  std::condition_variable flush_done_cv_;  // flushing_ dropped to 0
  std::thread disk_thread_;          // last member: started after everything else exists
};

}  // namespace swz::kvcache
