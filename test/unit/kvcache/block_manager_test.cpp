// BlockManager: page reference counts, the prefix index (chained keys, pins), token-granular
// reuse (match_partial: its tie rule, and thousands of blocks under one parent against a
// brute-force reference, across eviction), LRU and sliding-TTL eviction with an injected
// clock, device -> host spill and restore, the disk tier's round trip across a restart,
// rejection of corrupt files, and its encryption at rest per tenant (no plaintext page
// bytes, tokens or block keys in files or names; another tenant's or master key's reads fail).
#include "kvcache/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

namespace swz::kvcache {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const PageLayout kLayout{2, 8};  // 2 layers, kv_width 8: 2*2*64*8 = 2048 f16 per page

struct FakeClock {
  std::chrono::steady_clock::time_point t{std::chrono::hours(1000)};
  std::function<std::chrono::steady_clock::time_point()> fn() {
    return [this] { return t; };
  }
};

std::vector<int32_t> tokens(int n, int seed) {
  std::vector<int32_t> v(n);
  std::mt19937 rng(seed);
  for (auto& t : v) t = static_cast<int32_t>(rng() % 50000);
  return v;
}

// Fills a page with a pattern derived from `tag`, so copies can be told apart.
void fill(BlockManager& m, int page, uint16_t tag) {
  uint16_t* d = m.page_data(page);
  for (size_t i = 0; i < kLayout.page_elems(); ++i) d[i] = static_cast<uint16_t>(tag * 31 + i);
}
bool has(BlockManager& m, int page, uint16_t tag) {
  const uint16_t* d = m.page_data(page);
  for (size_t i = 0; i < kLayout.page_elems(); ++i)
    if (d[i] != static_cast<uint16_t>(tag * 31 + i)) return false;
  return true;
}

CacheOptions opts(int n_pages, FakeClock& clock) {
  CacheOptions o;
  o.n_pages = n_pages;
  o.clock = clock.fn();
  o.host_bytes = 0;
  o.log = [](const std::string&) {};
  return o;
}

// Publishes the blocks of `toks` in fresh pages tagged 100+i and releases the
// sequence's references (the cache keeps one each). Returns the keys.
std::vector<BlockKey> publish_all(BlockManager& m, const std::vector<int32_t>& toks, int tenant = 0) {
  std::vector<BlockKey> keys = block_keys(m.model(), toks.data(), toks.size());
  std::vector<int> pages;
  for (size_t i = 0; i < keys.size(); ++i) {
    pages.push_back(m.alloc_page());
    fill(m, pages.back(), static_cast<uint16_t>(100 + i));
  }
  for (size_t i = keys.size(); i-- > 0;) {  // deepest first, as the engine does
    m.publish(keys[i], pages[i], tenant);
    m.unref_page(pages[i]);
  }
  return keys;
}

TEST(BlockKeys, ChainedOverModelParentAndTokens) {
  const BlockKey model = model_key("model A"), other = model_key("model B");
  const auto t = tokens(64 * 3 + 10, 1);
  const auto k = block_keys(model, t.data(), t.size());
  ASSERT_EQ(k.size(), 3u);  // the partial last block has no key
  EXPECT_EQ(k[0], block_key(model, BlockKey{}, t.data(), 64));
  EXPECT_EQ(k[1], block_key(model, k[0], t.data() + 64, 64));
  EXPECT_EQ(block_keys(model, t.data() + 64, 128, k[0]), std::vector<BlockKey>(k.begin() + 1, k.end()));
  EXPECT_NE(block_keys(other, t.data(), t.size())[0], k[0]);
  // Same second block after a different first block: a different key (keys name prefixes).
  auto t2 = t;
  t2[5] ^= 1;
  const auto k2 = block_keys(model, t2.data(), t2.size());
  EXPECT_NE(k2[0], k[0]);
  EXPECT_NE(k2[1], k[1]);
  EXPECT_EQ(k[0].hex().size(), 32u);
}

TEST(BlockManager, PageRefcountsAndExhaustion) {
  FakeClock clock;
  CacheOptions o = opts(3, clock);
  o.prefix_cache = false;
  BlockManager m(kLayout, model_key("m"), o);
  const int a = m.alloc_page(), b = m.alloc_page(), c = m.alloc_page();
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_THROW(m.alloc_page(), std::length_error);
  m.ref_page(b);
  EXPECT_EQ(m.page_refcount(b), 2);
  m.unref_page(b);
  EXPECT_EQ(m.page_refcount(b), 1);
  m.unref_page(b);
  EXPECT_EQ(m.page_refcount(b), 0);
  EXPECT_THROW(m.unref_page(b), std::logic_error);
  EXPECT_THROW(m.ref_page(b), std::logic_error);
  EXPECT_EQ(m.alloc_page(), b);  // freed page is reused
  EXPECT_EQ(m.stats().pages_free, 0);
  (void)a;
  (void)c;
}

TEST(BlockManager, LongestPrefixMatchPinsAndShares) {
  FakeClock clock;
  BlockManager m(kLayout, model_key("m"), opts(8, clock));
  const auto t = tokens(64 * 3, 2);
  const auto keys = publish_all(m, t);
  EXPECT_EQ(m.stats().blocks_device, 3u);

  // A prompt sharing two blocks, diverging inside the third.
  auto t2 = t;
  t2[64 * 2 + 30] ^= 7;
  const auto keys2 = block_keys(m.model(), t2.data(), t2.size());
  std::vector<BlockKey> pinned;
  EXPECT_EQ(m.match_and_pin(keys2, pinned), 2);
  ASSERT_EQ(pinned.size(), 2u);
  const std::vector<int> pages = m.acquire(pinned);
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_TRUE(has(m, pages[0], 100));
  EXPECT_TRUE(has(m, pages[1], 101));
  EXPECT_EQ(m.page_refcount(pages[0]), 2);  // the cache's and the block table's
  m.unpin(pinned);
  EXPECT_THROW(m.unpin(pinned), std::logic_error);
  for (int p : pages) m.unref_page(p);
  EXPECT_EQ(m.page_refcount(pages[0]), 1);

  // Publishing a key that exists changes nothing (no second reference, no new entry).
  const int p = m.alloc_page();
  m.publish(keys[0], p);
  EXPECT_EQ(m.page_refcount(p), 1);
  m.unref_page(p);
  EXPECT_EQ(m.stats().blocks_device, 3u);

  // Nothing matches for another model's keys.
  std::vector<BlockKey> none;
  EXPECT_EQ(m.match_and_pin(block_keys(model_key("other"), t.data(), t.size()), none), 0);
}

TEST(BlockManager, MatchPartialReusesTheStartOfABlockUnderTheSameParent) {
  FakeClock clock;
  BlockManager m(kLayout, model_key("m"), opts(8, clock));
  const auto t = tokens(64 * 2 + 20, 3);
  const BlockKey k0 = block_key(m.model(), BlockKey{}, t.data(), 64);
  const BlockKey k1 = block_key(m.model(), k0, t.data() + 64, 64);
  const BlockKey tail = block_key(m.model(), k1, t.data() + 128, 20);
  EXPECT_EQ(block_keys(m.model(), t.data(), t.size()), (std::vector<BlockKey>{k0, k1}));
  EXPECT_NE(tail, block_key(m.model(), k1, t.data() + 128, 19));  // a partial key names its length
  const int p0 = m.alloc_page(), p1 = m.alloc_page(), p2 = m.alloc_page();
  fill(m, p0, 1), fill(m, p1, 2), fill(m, p2, 3);
  m.publish(tail, p2, 0, k1, std::span<const int32_t>(t.data() + 128, 20), "acme");
  m.publish(k1, p1, 0, k0, std::span<const int32_t>(t.data() + 64, 64), "acme");
  m.publish(k0, p0, 0, BlockKey{}, std::span<const int32_t>(t.data(), 64), "acme");
  for (int p : {p0, p1, p2}) m.unref_page(p);
  EXPECT_THROW(m.publish(k0, p0, 0, BlockKey{}, {}, "acme"), std::invalid_argument);
  EXPECT_THROW(m.publish(k0, p0, 0, BlockKey{}, std::span<const int32_t>(t.data(), 65), "acme"), std::invalid_argument);

  // Block 1 edited at its position 40: the first 40 tokens come from block 1's page.
  auto e = t;
  e[64 + 40] ^= 5;
  std::vector<BlockKey> pinned;
  EXPECT_EQ(m.match_and_pin(block_keys(m.model(), e.data(), e.size()), pinned), 1);
  EXPECT_EQ(m.match_partial(k0, e.data() + 64, 63, pinned, "acme"), 40);
  ASSERT_EQ(pinned, (std::vector<BlockKey>{k0, k1}));
  // Another organisation's request shares the same 40 tokens but is never told so.
  std::vector<BlockKey> theirs;
  EXPECT_EQ(m.match_partial(k0, e.data() + 64, 63, theirs, "globex"), 0);
  EXPECT_EQ(m.match_partial(k0, e.data() + 64, 63, theirs, ""), 0);
  EXPECT_TRUE(theirs.empty());
  // ... until it publishes the block itself (the same key: the page stays, the scope is added).
  const int q = m.alloc_page();
  m.publish(k1, q, 0, k0, std::span<const int32_t>(t.data() + 64, 64), "globex");
  EXPECT_EQ(m.page_refcount(q), 1);
  m.unref_page(q);
  EXPECT_EQ(m.match_partial(k0, e.data() + 64, 63, theirs, "globex"), 40);
  m.unpin(theirs);
  std::vector<int> pages = m.acquire(pinned);
  EXPECT_TRUE(has(m, pages[1], 2));
  m.unpin(pinned);
  for (int p : pages) m.unref_page(p);
  // Capped by the caller's limit; nothing shared: 0 and nothing pinned.
  pinned.clear();
  EXPECT_EQ(m.match_partial(k0, e.data() + 64, 12, pinned, "acme"), 12);
  m.unpin(pinned);
  pinned.clear();
  auto other = tokens(64, 4);
  other[0] = t[64] + 1;
  EXPECT_EQ(m.match_partial(k0, other.data(), 63, pinned, "acme"), 0);
  EXPECT_TRUE(pinned.empty());
  EXPECT_EQ(m.match_partial(BlockKey{}, other.data(), 63, pinned, "acme"), 0);  // under the zero parent: block 0 only
  // The partial last block: a prompt of 2 blocks and 30 tokens whose first 20 of block 2 match.
  auto longer = tokens(64 * 2 + 30, 3);
  longer[128 + 20] ^= 1;
  EXPECT_EQ(m.match_partial(k1, longer.data() + 128, 29, pinned, "acme"), 20);
  EXPECT_EQ(pinned, std::vector<BlockKey>{tail});
  m.unpin(pinned);
  pinned.clear();
  // A block published without tokens (the 3-argument form) is never a partial candidate.
  const auto u = tokens(64, 5);
  const int pu = m.alloc_page();
  m.publish(block_key(m.model(), BlockKey{}, u.data(), 64), pu);
  m.unref_page(pu);
  EXPECT_EQ(m.match_partial(BlockKey{}, u.data(), 63, pinned, "acme"), 0);
  // Evicted blocks leave the candidates: a pool of 8 pages taken by sequences evicts all 4.
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(m.alloc_page());
  EXPECT_EQ(m.stats().blocks_device, 0u);
  EXPECT_EQ(m.match_partial(k0, e.data() + 64, 63, pinned, "acme"), 0);
  EXPECT_EQ(m.match_partial(BlockKey{}, t.data(), 63, pinned, "acme"), 0);
  for (int p : held) m.unref_page(p);
}

TEST(BlockManager, APageAnotherEntryHoldsIsNeverAdoptedUnderASecondKey) {
  // A sequence that reused a cached page and ended before writing it (cancelled) would
  // publish that page again under its own partial key: two entries holding one page kept
  // it from eviction and expiry for ever (a page lost per such cancel).
  FakeClock clock;
  BlockManager m(kLayout, model_key("m"), opts(4, clock));
  const auto t = tokens(64, 7);
  const BlockKey k0 = block_key(m.model(), BlockKey{}, t.data(), 64);
  const int p = m.alloc_page();
  m.publish(k0, p, 0, BlockKey{}, std::span<const int32_t>(t.data(), 64), "");
  m.unref_page(p);
  std::vector<BlockKey> pinned;
  ASSERT_EQ(m.match_partial(BlockKey{}, t.data(), 63, pinned, ""), 63);
  const std::vector<int> pages = m.acquire(pinned);
  m.unpin(pinned);
  m.publish(block_key(m.model(), BlockKey{}, t.data(), 63), pages[0], -1, BlockKey{},
            std::span<const int32_t>(t.data(), 63), "");
  EXPECT_EQ(m.page_refcount(pages[0]), 2);  // the cache's one entry and the sequence
  m.unref_page(pages[0]);
  EXPECT_EQ(m.stats().blocks_device, 1u);
  std::vector<int> held;  // every page can be had again: the cached block is evicted
  for (int i = 0; i < 4; ++i) held.push_back(m.alloc_page());
  EXPECT_EQ(m.stats().blocks_device, 0u);
  for (int q : held) m.unref_page(q);
}

TEST(BlockManager, MatchPartialTiesGoToADevicePageThenTheMostRecentThenTheFirstPublished) {
  FakeClock clock;
  CacheOptions o = opts(4, clock);
  o.host_bytes = kLayout.page_bytes() * 2;
  BlockManager m(kLayout, model_key("m"), o);
  // Publishes `t` (64 tokens) under the zero parent for scope "" in a page of its own.
  auto put = [&](const std::vector<int32_t>& t) {
    const BlockKey k = block_key(m.model(), BlockKey{}, t.data(), 64);
    const int p = m.alloc_page();
    m.publish(k, p, -1, BlockKey{}, std::span<const int32_t>(t.data(), 64), "");
    m.unref_page(p);
    return k;
  };
  // A and B share their first 30 tokens; the query shares those 30 with both.
  auto a = tokens(64, 50), b = a, q = a;
  b[30] ^= 1, q[30] ^= 2;
  const BlockKey ka = put(a);
  clock.t += 1s;
  const BlockKey kb = put(b);
  std::vector<BlockKey> pinned;
  EXPECT_EQ(m.match_partial(BlockKey{}, q.data(), 63, pinned, ""), 30);
  EXPECT_EQ(pinned, std::vector<BlockKey>{kb});  // the more recently used
  m.unpin(pinned);
  pinned.clear();
  // B moves to the host tier and is used again there: A, older but on a device page, wins.
  clock.t += 1s;
  put(a);  // A used again: B is now the least recently used
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(m.alloc_page());  // the third spills B
  ASSERT_EQ(m.stats().blocks_host, 1u);
  clock.t += 1s;
  ASSERT_EQ(m.match_and_pin({kb}, pinned), 1);  // B used (stays on host)
  m.unpin(pinned);
  pinned.clear();
  EXPECT_EQ(m.match_partial(BlockKey{}, q.data(), 63, pinned, ""), 30);
  EXPECT_EQ(pinned, std::vector<BlockKey>{ka});
  m.unpin(pinned);
  pinned.clear();
  for (int p : held) m.unref_page(p);
  // C and D used at the same instant, both on device pages: the one published first.
  auto c = tokens(64, 51), d = c, r = c;
  d[20] ^= 1, r[20] ^= 2;
  const BlockKey kc = put(c);
  put(d);
  for (int i = 0; i < 3; ++i) {  // the winner's use does not move the clock: C each time
    EXPECT_EQ(m.match_partial(BlockKey{}, r.data(), 63, pinned, ""), 20);
    EXPECT_EQ(pinned, std::vector<BlockKey>{kc});
    m.unpin(pinned);
    pinned.clear();
  }
}

// Thousands of blocks under the zero parent (and some under another), most sharing their
// first tokens (one of a few "templates" of 1..63 tokens, and a small alphabet after it, so
// runs of every length occur), full and partial, published by three scopes, some twice.
// Every query's result and pinned block must equal a reference that scans every published
// block in RAM with match_partial's rule (longest common run capped at max_tokens and 64;
// ties: a device page, then the most recent use, then the first published), before and
// after LRU eviction takes a third of them (dropped, or with `host_tier` moved to host
// RAM), and after new blocks reuse the freed pages while chosen host blocks move back to
// device pages.
void match_partial_against_reference(bool host_tier) {
  FakeClock clock;
  constexpr int kPublishes = 4000;
  CacheOptions o = opts(kPublishes + 16, clock);
  o.ttl = std::chrono::milliseconds(0);
  if (host_tier) o.host_bytes = kLayout.page_bytes() * (kPublishes + 16);  // every eviction spills
  BlockManager m(kLayout, model_key("m"), o);
  std::mt19937 rng(77);
  const std::vector<std::string> scopes = {"", "acme", "globex"};
  const BlockKey other_parent = block_key(m.model(), BlockKey{}, tokens(64, 60).data(), 64);
  std::vector<std::vector<int32_t>> templates;
  for (int len : {1, 3, 12, 30, 63}) templates.push_back(tokens(len, 61 + len));

  struct Pub {
    BlockKey parent;
    std::vector<int32_t> toks;
    unsigned scopes = 0;    // bit i: scopes[i] published it
    uint64_t first = 0;     // publish order (the last tie rule)
    int64_t used_at = 0;    // clock seconds at its last use
    uint64_t lru = 0;       // order of its last use (eviction takes the smallest)
    bool live = false;      // in RAM
    bool device = true;     // on a device page (else on host)
  };
  std::unordered_map<BlockKey, Pub, BlockKeyHash> pubs;
  uint64_t next_first = 0, next_lru = 0;
  auto secs = [&] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(clock.t.time_since_epoch()).count());
  };
  auto used = [&](Pub& p) {
    p.used_at = secs();
    p.lru = next_lru++;
  };
  auto random_block = [&](int len) {
    std::vector<int32_t> t(len);
    const auto& tm = templates[rng() % templates.size()];
    for (int i = 0; i < len; ++i)
      t[i] = i < static_cast<int>(tm.size()) && rng() % 8 != 0 ? tm[i] : static_cast<int32_t>(rng() % 4);
    return t;
  };
  auto publish = [&](const BlockKey& parent, const std::vector<int32_t>& t, int scope) {
    const BlockKey k = block_key(m.model(), parent, t.data(), static_cast<int>(t.size()));
    const int page = m.alloc_page();
    m.publish(k, page, -1, parent, std::span<const int32_t>(t.data(), t.size()), scopes[scope]);
    m.unref_page(page);
    Pub& p = pubs[k];
    if (!p.live) p = Pub{parent, t, 0, next_first++, 0, 0, true};
    p.scopes |= 1u << scope;
    used(p);
  };
  auto publish_some = [&](int n) {
    std::vector<BlockKey> order;  // existing keys, to publish some again under another scope
    for (int i = 0; i < n; ++i) {
      if (rng() % 5 == 0) clock.t += 1s;  // runs of publishes at the same instant
      const BlockKey parent = rng() % 10 == 0 ? other_parent : BlockKey{};
      const int len = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % 63) : 64;
      if (rng() % 10 == 0 && !pubs.empty()) {
        auto it = std::next(pubs.begin(), static_cast<long>(rng() % pubs.size()));
        if (it->second.live) {
          const Pub p = it->second;
          publish(p.parent, p.toks, static_cast<int>(rng() % 3));
          continue;
        }
      }
      publish(parent, random_block(len), static_cast<int>(rng() % 3));
    }
  };
  auto reference = [&](const BlockKey& parent, const int32_t* q, int max_tokens, int scope, BlockKey& key) {
    max_tokens = std::min(max_tokens, 64);
    const Pub* best = nullptr;
    int best_m = 0;
    for (const auto& [k, p] : pubs) {
      if (!p.live || p.parent != parent || !(p.scopes & (1u << scope))) continue;
      const int n = std::min(max_tokens, static_cast<int>(p.toks.size()));
      const int mm = static_cast<int>(std::mismatch(q, q + n, p.toks.begin()).first - q);
      if (mm == 0) continue;
      if (best && !(mm > best_m ||
                    (mm == best_m &&
                     (p.device > best->device ||
                      (p.device == best->device && (p.used_at > best->used_at ||
                                                    (p.used_at == best->used_at && p.first < best->first)))))))
        continue;
      best = &p;
      best_m = mm;
      key = k;
    }
    return best_m;
  };
  int hits = 0, queries = 0;
  // With `restore`, a block on host that a query chose stays pinned until a few queries
  // later, when a run takes it (acquire: back on a device page, its last use unchanged).
  std::vector<BlockKey> to_restore;
  auto restore_pinned = [&] {
    const std::vector<int> pages = m.acquire(to_restore);
    m.unpin(to_restore);
    for (int page : pages) m.unref_page(page);
    for (const BlockKey& k : to_restore) pubs.at(k).device = true;
    to_restore.clear();
  };
  auto check_queries = [&](int n, bool restore = false) {
    for (int i = 0; i < n; ++i) {
      if (restore && i % 16 == 15) restore_pinned();
      if (rng() % 4 == 0) clock.t += 1s;
      const BlockKey parent = rng() % 10 == 0 ? other_parent : BlockKey{};
      std::vector<int32_t> q = random_block(64);
      if (rng() % 2 == 0 && !pubs.empty()) {  // a published block's tokens, changed at one position
        const Pub& p = std::next(pubs.begin(), static_cast<long>(rng() % pubs.size()))->second;
        std::copy(p.toks.begin(), p.toks.end(), q.begin());
        q[rng() % 64] ^= 1;
      }
      const int max_tokens = 1 + static_cast<int>(rng() % 70);
      const int scope = static_cast<int>(rng() % 3);
      BlockKey want{};
      const int want_m = reference(parent, q.data(), max_tokens, scope, want);
      std::vector<BlockKey> pinned;
      const int got = m.match_partial(parent, q.data(), max_tokens, pinned, scopes[scope]);
      ASSERT_EQ(got, want_m) << "query " << queries;
      ++queries;
      if (want_m == 0) {
        ASSERT_TRUE(pinned.empty());
        continue;
      }
      ASSERT_EQ(pinned, std::vector<BlockKey>{want}) << "query " << queries;
      used(pubs.at(want));
      ++hits;
      if (restore && !pubs.at(want).device && std::find(to_restore.begin(), to_restore.end(), want) == to_restore.end())
        to_restore.push_back(want);
      else
        m.unpin(pinned);
    }
    if (!to_restore.empty()) restore_pinned();
  };

  publish_some(kPublishes - 400);
  const size_t root_children =
      std::count_if(pubs.begin(), pubs.end(), [](const auto& kv) { return kv.second.parent.is_zero(); });
  ASSERT_GT(root_children, 2000u);
  ASSERT_EQ(m.stats().blocks_device, pubs.size());
  check_queries(3000);
  EXPECT_GT(hits, 1500);  // most queries share a run with something

  // Pages taken by sequences evict a third of the blocks, least recently used first: the
  // dropped are never matched again; those moved to host RAM lose ties to device pages.
  std::vector<int> held;
  const int free_pages = m.stats().pages_free;
  const uint64_t evictions = m.stats().evictions;
  const int n_evict = static_cast<int>(pubs.size() / 3);
  for (int i = 0; i < free_pages + n_evict; ++i) held.push_back(m.alloc_page());
  ASSERT_EQ(m.stats().evictions, evictions + (host_tier ? 0 : n_evict));
  ASSERT_EQ(m.stats().blocks_host, host_tier ? static_cast<uint64_t>(n_evict) : 0u);
  std::vector<Pub*> by_lru;
  for (auto& [k, p] : pubs) by_lru.push_back(&p);
  std::sort(by_lru.begin(), by_lru.end(), [](const Pub* a, const Pub* b) { return a->lru < b->lru; });
  for (int i = 0; i < n_evict; ++i) (host_tier ? by_lru[i]->device : by_lru[i]->live) = false;
  ASSERT_EQ(m.stats().blocks_device, pubs.size() - n_evict);
  check_queries(2000);
  for (int p : held) m.unref_page(p);

  // New blocks in the freed pages (some with the tokens of evicted ones: new entries).
  publish_some(400);
  for (int i = 0; i < 50; ++i) {
    Pub& p = *by_lru[rng() % n_evict];
    if (!p.live) publish(p.parent, p.toks, static_cast<int>(rng() % 3));
  }
  check_queries(2000, /*restore=*/true);
  if (host_tier) {
    EXPECT_GT(m.stats().restores, 100u);
  }
}

TEST(BlockManager, MatchPartialOverThousandsOfChildrenEqualsABruteForceReference) {
  match_partial_against_reference(false);
}

TEST(BlockManager, MatchPartialOverThousandsOfChildrenOnDeviceAndHostEqualsABruteForceReference) {
  match_partial_against_reference(true);
}

TEST(BlockManager, PartialBlocksStayOffTheDiskTier) {
  const fs::path dir = fs::temp_directory_path() / ("swz-partial-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  FakeClock clock;
  CacheOptions o = opts(4, clock);
  o.disk_dir = dir.string();
  o.disk_key = std::string(32, 'k');
  {
    BlockManager m(kLayout, model_key("m"), o);
    const auto t = tokens(64 + 10, 6);
    const BlockKey k0 = block_key(m.model(), BlockKey{}, t.data(), 64);
    const int p0 = m.alloc_page(), p1 = m.alloc_page();
    m.publish(block_key(m.model(), k0, t.data() + 64, 10), p1, 0, k0, std::span<const int32_t>(t.data() + 64, 10), "");
    m.publish(k0, p0, 0, BlockKey{}, std::span<const int32_t>(t.data(), 64), "");
    m.unref_page(p0), m.unref_page(p1);
    m.flush_disk();
    EXPECT_EQ(m.stats().disk_writes, 1u);  // the full block only
    EXPECT_EQ(m.stats().blocks_device, 2u);
  }
  fs::remove_all(dir);
}

TEST(BlockManager, LruEvictionTakesLeastRecentlyUsedAndNeverPagesInUse) {
  FakeClock clock;
  BlockManager m(kLayout, model_key("m"), opts(4, clock));
  const auto ka = publish_all(m, tokens(64, 10));  // A
  clock.t += 1s;
  const auto kb = publish_all(m, tokens(64, 11));  // B
  clock.t += 1s;
  const auto kc = publish_all(m, tokens(64, 12));  // C
  clock.t += 1s;
  std::vector<BlockKey> pinned;
  ASSERT_EQ(m.match_and_pin(ka, pinned), 1);  // A is now the most recently used
  m.unpin(pinned);
  // One free page; a sequence takes it, then needs one more: B (LRU) goes, not A or C.
  const int s1 = m.alloc_page();
  const int s2 = m.alloc_page();
  EXPECT_NE(s1, s2);
  EXPECT_EQ(m.stats().evictions, 1u);
  std::vector<BlockKey> p2;
  EXPECT_EQ(m.match_and_pin(kb, p2), 0);
  EXPECT_EQ(m.match_and_pin(ka, p2), 1);
  EXPECT_EQ(m.match_and_pin(kc, p2), 1);
  // A and C pinned, host tier off: they cannot be dropped; and s1, s2 are in use. But a
  // pinned block moves to host RAM (beyond the budget) rather than block the sequence.
  const int s3 = m.alloc_page();
  EXPECT_EQ(m.stats().blocks_host, 1u);
  EXPECT_EQ(m.stats().spills, 1u);
  const int s4 = m.alloc_page();
  EXPECT_EQ(m.stats().blocks_host, 2u);
  EXPECT_THROW(m.alloc_page(), std::length_error);  // every page is in a block table
  // The pinned blocks come back: restore needs pages, so free the sequence's.
  for (int s : {s1, s2, s3, s4}) m.unref_page(s);
  const std::vector<int> got = m.acquire(p2);
  EXPECT_TRUE(has(m, got[0], 100));
  EXPECT_TRUE(has(m, got[1], 100));
  EXPECT_EQ(m.stats().restores, 2u);
  EXPECT_EQ(m.stats().blocks_host, 0u);
  m.unpin(p2);
  for (int p : got) m.unref_page(p);
}

TEST(BlockManager, SlidingTtlExpiresUnusedBlocksOnly) {
  FakeClock clock;
  CacheOptions o = opts(8, clock);
  o.ttl = 300s;
  BlockManager m(kLayout, model_key("m"), o);
  const auto ka = publish_all(m, tokens(64, 20));
  const auto kb = publish_all(m, tokens(64, 21));
  clock.t += 200s;
  std::vector<BlockKey> pinned;
  ASSERT_EQ(m.match_and_pin(ka, pinned), 1);  // a hit restarts A's TTL
  m.unpin(pinned);
  clock.t += 150s;  // B: 350 s unused, A: 150 s
  std::vector<BlockKey> p2;
  EXPECT_EQ(m.match_and_pin(kb, p2), 0);
  EXPECT_EQ(m.match_and_pin(ka, p2), 1);
  // A pinned block does not expire however long it waits.
  clock.t += 1000s;
  m.expire();
  EXPECT_EQ(m.stats().blocks_device, 1u);
  m.unpin(p2);
  m.expire();  // unpinned, and 1000 s since its last use
  EXPECT_EQ(m.stats().blocks_device, 0u);
  // A block in a running sequence's table does not expire either.
  const auto kc = publish_all(m, tokens(64, 22));
  std::vector<BlockKey> p3;
  ASSERT_EQ(m.match_and_pin(kc, p3), 1);
  std::vector<int> pages = m.acquire(p3);
  m.unpin(p3);
  clock.t += 1000s;
  m.expire();
  EXPECT_EQ(m.stats().blocks_device, 1u);
  m.unref_page(pages[0]);
  m.expire();
  EXPECT_EQ(m.stats().blocks_device, 0u);
  EXPECT_EQ(m.stats().evictions, 3u);
  EXPECT_EQ(m.stats().pages_free, 8);
}

TEST(BlockManager, SpillToHostAndRestoreCopiesTheBytes) {
  FakeClock clock;
  CacheOptions o = opts(2, clock);
  o.host_bytes = kLayout.page_bytes() * 2;  // room for two spilled blocks
  BlockManager m(kLayout, model_key("m"), o);
  const auto t = tokens(64 * 2, 30);
  const auto keys = publish_all(m, t);  // blocks tagged 100, 101, both pages used
  const int s = m.alloc_page();         // evicts block 1 (deepest first) to host
  EXPECT_EQ(m.stats().blocks_host, 1u);
  fill(m, s, 7);  // the freed page is overwritten: the host copy must be independent
  const int s2 = m.alloc_page();
  EXPECT_EQ(m.stats().blocks_host, 2u);
  EXPECT_EQ(m.stats().blocks_device, 0u);
  m.unref_page(s);
  m.unref_page(s2);
  std::vector<BlockKey> pinned;
  ASSERT_EQ(m.match_and_pin(keys, pinned), 2);
  const std::vector<int> pages = m.acquire(pinned);
  EXPECT_TRUE(has(m, pages[0], 100));
  EXPECT_TRUE(has(m, pages[1], 101));
  EXPECT_EQ(m.stats().blocks_device, 2u);
  EXPECT_EQ(m.stats().blocks_host, 0u);
  m.unpin(pinned);
  for (int p : pages) m.unref_page(p);

  // Host budget of one block: the second spill drops the least recently used host block.
  CacheOptions o1 = opts(1, clock);
  o1.host_bytes = kLayout.page_bytes();
  BlockManager m1(kLayout, model_key("m"), o1);
  const auto ka = publish_all(m1, tokens(64, 31));
  m1.unref_page(m1.alloc_page());  // A -> host
  const auto kb = publish_all(m1, tokens(64, 32));
  m1.unref_page(m1.alloc_page());  // B -> host, A dropped
  std::vector<BlockKey> p;
  EXPECT_EQ(m1.match_and_pin(ka, p), 0);
  EXPECT_EQ(m1.match_and_pin(kb, p), 1);
  EXPECT_EQ(m1.stats().evictions, 1u);
  m1.unpin(p);
}

class DiskTier : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("swz-kv-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  CacheOptions disk_opts(FakeClock& clock, std::vector<std::string>* logs) {
    CacheOptions o = opts(4, clock);
    o.disk_dir = dir.string();
    o.disk_key = key;
    o.log = [logs](const std::string& l) {
      if (logs) logs->push_back(l);
    };
    return o;
  }
  fs::path dir;
  std::string key = std::string(32, '\x5a');  // the disk tier's master key
};

TEST_F(DiskTier, SurvivesRestartAndIsKeyedByModel) {
  FakeClock clock;
  const auto t = tokens(64 * 2 + 5, 40);
  const BlockKey model = model_key("m");
  std::vector<BlockKey> keys;
  {
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));
    keys = publish_all(m, t);
    m.flush_disk();
    EXPECT_EQ(m.stats().blocks_disk, 2u);
    EXPECT_EQ(m.stats().disk_writes, 2u);
  }
  {
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));  // a restart
    EXPECT_EQ(m.stats().blocks_disk, 2u);
    EXPECT_EQ(m.stats().blocks_device, 0u);
    std::vector<BlockKey> pinned;
    ASSERT_EQ(m.match_and_pin(block_keys(model, t.data(), t.size()), pinned), 2);
    EXPECT_EQ(m.stats().disk_reads, 2u);
    const std::vector<int> pages = m.acquire(pinned);
    EXPECT_TRUE(has(m, pages[0], 100));
    EXPECT_TRUE(has(m, pages[1], 101));
    m.unpin(pinned);
    for (int p : pages) m.unref_page(p);
  }
  {
    // Another model never sees these files (its own folder, and its keys differ).
    BlockManager m(kLayout, model_key("other"), disk_opts(clock, nullptr));
    EXPECT_EQ(m.stats().blocks_disk, 0u);
  }
}

TEST_F(DiskTier, ABlockOnDiskOnlyIsNoPartialCandidateUntilItIsInRamAgain) {
  FakeClock clock;
  BlockManager m(kLayout, model_key("m"), disk_opts(clock, nullptr));  // 4 pages, no host tier
  const auto t = tokens(64, 90);
  const BlockKey k = block_key(m.model(), BlockKey{}, t.data(), 64);
  auto compute = [&] {  // a sequence computes the block and publishes it
    const int p = m.alloc_page();
    m.publish(k, p, 0, BlockKey{}, std::span<const int32_t>(t.data(), 64), "acme");
    m.unref_page(p);
  };
  auto evict_all = [&] {
    std::vector<int> held;
    for (int i = 0; i < 4; ++i) held.push_back(m.alloc_page());
    for (int p : held) m.unref_page(p);
  };
  compute();
  m.flush_disk();
  evict_all();
  ASSERT_EQ(m.stats().blocks_device, 0u);
  ASSERT_EQ(m.stats().blocks_disk, 1u);
  std::vector<BlockKey> pinned;
  EXPECT_EQ(m.match_partial(BlockKey{}, t.data(), 63, pinned, "acme"), 0);  // no page to copy here
  EXPECT_TRUE(pinned.empty());
  compute();  // computed again: the entry adopts the page
  EXPECT_EQ(m.match_partial(BlockKey{}, t.data(), 63, pinned, "acme"), 63);
  EXPECT_EQ(pinned, std::vector<BlockKey>{k});
  m.unpin(pinned);
  pinned.clear();
  // Read back from disk into the host tier by a whole-block match, then into a page.
  evict_all();
  ASSERT_EQ(m.match_and_pin({k}, pinned, 0), 1);
  ASSERT_EQ(m.stats().blocks_host, 1u);
  EXPECT_EQ(m.match_partial(BlockKey{}, t.data(), 40, pinned, "acme"), 40);
  EXPECT_EQ(pinned, (std::vector<BlockKey>{k, k}));
  const std::vector<int> pages = m.acquire({k});
  EXPECT_EQ(m.stats().blocks_device, 1u);
  m.unpin(pinned);
  m.unref_page(pages[0]);
  pinned.clear();
  EXPECT_EQ(m.match_partial(BlockKey{}, t.data(), 63, pinned, "acme"), 63);
  EXPECT_EQ(m.match_partial(BlockKey{}, t.data(), 63, pinned, "globex"), 0);
  m.unpin(pinned);
}

TEST_F(DiskTier, TheDiskThreadWritesPublishedBlocksAndFinishesOnDestruction) {
  FakeClock clock;
  const auto t = tokens(64 * 4, 45);
  const BlockKey model = model_key("m");
  {
    CacheOptions o = disk_opts(clock, nullptr);
    o.n_pages = 8;
    BlockManager m(kLayout, model, o);
    publish_all(m, t);  // no flush_disk(): the background thread writes them
  }
  BlockManager m(kLayout, model, disk_opts(clock, nullptr));
  EXPECT_EQ(m.stats().blocks_disk, 4u);
  std::vector<BlockKey> pinned;
  EXPECT_EQ(m.match_and_pin(block_keys(model, t.data(), t.size()), pinned), 4);
  m.unpin(pinned);
}

TEST_F(DiskTier, CorruptTruncatedOrForeignFilesAreIgnoredWithALogLine) {
  FakeClock clock;
  const auto t = tokens(64 * 3, 50);
  const BlockKey model = model_key("m");
  std::vector<BlockKey> keys;
  {
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));
    keys = publish_all(m, t);
    m.flush_disk();
  }
  std::vector<std::string> files;
  {
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));
    for (const BlockKey& k : keys) files.push_back(m.disk_file(k));
  }
  // Block 1: flip one payload byte (authentication). Block 2: truncate.
  {
    std::fstream f(files[1], std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = static_cast<std::streamoff>(fs::file_size(files[1])) - 200;
    char c;
    f.seekg(at);
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(at);
    f.write(&c, 1);
  }
  fs::resize_file(files[2], 1000);
  std::vector<std::string> logs;
  BlockManager m(kLayout, model, disk_opts(clock, &logs));
  ASSERT_EQ(logs.size(), 1u);  // the truncated file, at the scan
  EXPECT_NE(logs[0].find("ignoring"), std::string::npos);
  EXPECT_FALSE(fs::exists(files[2]));
  std::vector<BlockKey> pinned;
  EXPECT_EQ(m.match_and_pin(keys, pinned), 1);  // block 0 good, block 1 fails authentication
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[1].find("page does not authenticate"), std::string::npos) << logs[1];
  EXPECT_EQ(m.stats().disk_rejects, 2u);
  const std::vector<int> pages = m.acquire(pinned);
  EXPECT_TRUE(has(m, pages[0], 100));
  m.unpin(pinned);
  m.unref_page(pages[0]);

  // A file renamed to another key's name: the key inside disagrees (found at the scan).
  fs::copy_file(files[0], files[1]);
  std::vector<std::string> logs2;
  BlockManager m2(kLayout, model, disk_opts(clock, &logs2));
  std::vector<BlockKey> p2;
  const std::vector<BlockKey> k1{keys[1]};
  EXPECT_EQ(m2.match_and_pin(k1, p2), 0);
  ASSERT_EQ(logs2.size(), 1u);
  EXPECT_NE(logs2[0].find("differs from its name"), std::string::npos);
  EXPECT_FALSE(fs::exists(files[1]));
}

TEST_F(DiskTier, BudgetDeletesLeastRecentlyUsedFiles) {
  FakeClock clock;
  CacheOptions o = disk_opts(clock, nullptr);
  const uint64_t file_bytes = kLayout.page_bytes() + 160;
  o.disk_bytes = file_bytes * 2;
  BlockManager m(kLayout, model_key("m"), o);
  const auto ka = publish_all(m, tokens(64, 60));
  clock.t += 1s;
  const auto kb = publish_all(m, tokens(64, 61));
  clock.t += 1s;
  const auto kc = publish_all(m, tokens(64, 62));
  m.flush_disk();
  EXPECT_EQ(m.disk_file_bytes(), file_bytes);
  EXPECT_EQ(m.stats().blocks_disk, 2u);
  EXPECT_FALSE(fs::exists(m.disk_file(ka[0])));
  EXPECT_TRUE(fs::exists(m.disk_file(kc[0])));
  (void)kb;
}

// Pages that live outside host memory (a GPU backend's pools): spills, restores and disk
// writes go through read_page / write_page; a failing device read or write leaves the
// cache as it was, and on the disk thread it skips the block with a log line.
TEST_F(DiskTier, DevicePagesGoThroughReadAndWritePageAndSurviveDeviceErrors) {
  FakeClock clock;
  std::vector<std::string> logs;
  std::vector<std::vector<uint16_t>> device(4, std::vector<uint16_t>(kLayout.page_elems()));
  bool fail = false;
  CacheOptions o = disk_opts(clock, &logs);
  o.host_bytes = kLayout.page_bytes() * 4;
  o.read_page = [&](int page, uint16_t* dst) {
    if (fail) throw std::runtime_error("cuda: device lost");
    std::copy(device[page].begin(), device[page].end(), dst);
  };
  o.write_page = [&](int page, const uint16_t* src) {
    if (fail) throw std::runtime_error("cuda: device lost");
    std::copy(src, src + kLayout.page_elems(), device[page].begin());
  };
  BlockManager m(kLayout, model_key("m"), o);
  EXPECT_EQ(m.page_data(0), nullptr);  // no host pool is mapped
  const auto t = tokens(64, 50);
  const auto keys = block_keys(m.model(), t.data(), t.size());
  const int p = m.alloc_page();
  for (size_t i = 0; i < device[p].size(); ++i) device[p][i] = static_cast<uint16_t>(i * 7);
  fail = true;  // the disk write cannot read the page: logged, skipped, nothing else changes
  m.publish(keys[0], p);
  m.flush_disk();
  EXPECT_EQ(m.stats().blocks_disk, 0u);
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs.back().find("disk tier write failed: cuda: device lost"), std::string::npos) << logs.back();
  m.unref_page(p);
  // A spill that cannot read the device throws and leaves the block resident.
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(m.alloc_page());
  EXPECT_THROW(m.alloc_page(), std::runtime_error);
  EXPECT_EQ(m.stats().blocks_device, 1u);
  EXPECT_EQ(m.stats().blocks_host, 0u);
  fail = false;
  const int q = m.alloc_page();  // now the spill reads the page into the host tier
  EXPECT_EQ(m.stats().blocks_host, 1u);
  device[q].assign(device[q].size(), 0xFFFF);  // the reused page is overwritten
  m.unref_page(q);
  // A restore that cannot write the device throws; the block stays on the host.
  std::vector<BlockKey> pinned;
  ASSERT_EQ(m.match_and_pin(keys, pinned), 1);
  fail = true;
  EXPECT_THROW(m.acquire(pinned), std::runtime_error);
  EXPECT_EQ(m.stats().blocks_host, 1u);
  fail = false;
  const std::vector<int> pages = m.acquire(pinned);
  for (size_t i = 0; i < device[pages[0]].size(); ++i) ASSERT_EQ(device[pages[0]][i], static_cast<uint16_t>(i * 7)) << i;
  m.unpin(pinned);
  m.unref_page(pages[0]);
  for (int h : held) m.unref_page(h);
  // A block published after the device recovered reaches the disk tier through read_page
  // (the failed one was skipped, not retried).
  const auto t2 = tokens(64, 51);
  const int r = m.alloc_page();
  m.publish(block_keys(m.model(), t2.data(), t2.size())[0], r);
  m.unref_page(r);
  m.flush_disk();
  EXPECT_EQ(m.stats().blocks_disk, 1u);
  EXPECT_EQ(m.stats().disk_writes, 1u);
}

}  // namespace
}  // namespace swz::kvcache

namespace swz::kvcache {
namespace {

bool contains(const std::string& hay, const void* needle, size_t n) {
  return hay.find(std::string(static_cast<const char*>(needle), n)) != std::string::npos;
}
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_F(DiskTier, FilesAreEncryptedPerTenantAndNamesRevealNothing) {
  FakeClock clock;
  const auto t = tokens(64 * 2, 70);
  const BlockKey model = model_key("m");
  std::vector<BlockKey> keys;
  std::vector<std::string> acme_files;
  {
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));
    const int acme = m.disk_tenant("acme");
    EXPECT_EQ(acme, 1);
    EXPECT_EQ(m.disk_tenant("acme"), 1);
    EXPECT_EQ(m.disk_tenant(""), 0);
    keys = publish_all(m, t, acme);
    m.flush_disk();
    EXPECT_EQ(m.stats().blocks_disk, 2u);
    for (const BlockKey& k : keys) {
      acme_files.push_back(m.disk_file(k, acme));
      EXPECT_FALSE(fs::exists(m.disk_file(k, 0)));  // only the publishing tenant's tier has it
    }
  }
  uint16_t page0[64];  // the first 64 values of block 0's page (fill(..., 100))
  for (int i = 0; i < 64; ++i) page0[i] = static_cast<uint16_t>(100 * 31 + i);
  size_t n_files = 0;
  for (const auto& de : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(de.path(), dir).string();
    // No block key, tenant name or model-independent token bytes in any path.
    for (const BlockKey& k : keys) EXPECT_EQ(rel.find(k.hex()), std::string::npos) << rel;
    EXPECT_EQ(rel.find("acme"), std::string::npos) << rel;
    if (!de.is_regular_file()) continue;
    ++n_files;
    const std::string bytes = slurp(de.path());
    EXPECT_EQ(bytes.size(), kLayout.page_bytes() + 160);
    EXPECT_FALSE(contains(bytes, page0, sizeof page0)) << "plaintext K/V in " << rel;
    EXPECT_FALSE(contains(bytes, page0 + 32, 16)) << "plaintext K/V in " << rel;
    EXPECT_FALSE(contains(bytes, t.data(), 64)) << "token ids in " << rel;
    EXPECT_FALSE(contains(bytes, &keys[0], 16)) << "block key in " << rel;
    EXPECT_FALSE(contains(bytes, &keys[1], 16)) << "block key in " << rel;
  }
  EXPECT_EQ(n_files, 2u);
  {
    // The owner reads them back across a restart.
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));
    const int acme = m.disk_tenant("acme");
    EXPECT_EQ(m.stats().blocks_disk, 2u);
    std::vector<BlockKey> pinned;
    EXPECT_EQ(m.match_and_pin(keys, pinned, 0), 0);  // not on the default tenant's tier
    ASSERT_EQ(m.match_and_pin(keys, pinned, acme), 2);
    const std::vector<int> pages = m.acquire(pinned);
    EXPECT_TRUE(has(m, pages[0], 100));
    EXPECT_TRUE(has(m, pages[1], 101));
    m.unpin(pinned);
    for (int p : pages) m.unref_page(p);
  }
  {
    // Another organisation's key cannot open acme's files: copied into globex's folder
    // under the names globex would use, they fail authentication and are deleted.
    std::vector<std::string> logs;
    BlockManager m(kLayout, model, disk_opts(clock, &logs));
    const int globex = m.disk_tenant("globex");
    std::vector<std::string> globex_files;
    for (const BlockKey& k : keys) globex_files.push_back(m.disk_file(k, globex));
    EXPECT_NE(fs::path(globex_files[0]).parent_path(), fs::path(acme_files[0]).parent_path());
    for (size_t i = 0; i < keys.size(); ++i) fs::copy_file(acme_files[i], globex_files[i]);
  }
  {
    std::vector<std::string> logs;
    BlockManager m(kLayout, model, disk_opts(clock, &logs));
    const int globex = m.disk_tenant("globex");
    ASSERT_EQ(logs.size(), 2u);
    EXPECT_NE(logs[0].find("does not authenticate with this tenant's key"), std::string::npos) << logs[0];
    std::vector<BlockKey> pinned;
    EXPECT_EQ(m.match_and_pin(keys, pinned, globex), 0);
    EXPECT_EQ(m.stats().disk_rejects, 2u);
  }
  {
    // Another master key: acme's folder and names differ, and acme's files copied there
    // under the new names do not open either.
    CacheOptions o = disk_opts(clock, nullptr);
    o.disk_key = std::string(32, '\x33');
    {
      BlockManager m(kLayout, model, o);
      const int acme = m.disk_tenant("acme");
      std::vector<BlockKey> pinned;
      EXPECT_EQ(m.match_and_pin(keys, pinned, acme), 0);
      for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_NE(m.disk_file(keys[i], acme), acme_files[i]);
        fs::copy_file(acme_files[i], m.disk_file(keys[i], acme));
      }
    }
    std::vector<std::string> logs;
    o.log = [&logs](const std::string& l) { logs.push_back(l); };
    BlockManager m(kLayout, model, o);
    const int acme = m.disk_tenant("acme");
    ASSERT_EQ(logs.size(), 2u);
    EXPECT_NE(logs[1].find("does not authenticate with this tenant's key"), std::string::npos) << logs[1];
    std::vector<BlockKey> pinned;
    EXPECT_EQ(m.match_and_pin(keys, pinned, acme), 0);
  }
}

TEST_F(DiskTier, ATenantOfMinusOneNeverTouchesDiskAKeyIsRequiredAndV1FilesAreDeleted) {
  FakeClock clock;
  const BlockKey model = model_key("m");
  {
    BlockManager m(kLayout, model, disk_opts(clock, nullptr));
    const auto keys = publish_all(m, tokens(64 * 2, 80), -1);
    m.flush_disk();
    EXPECT_EQ(m.stats().blocks_disk, 0u);
    EXPECT_EQ(m.stats().disk_writes, 0u);
    std::vector<BlockKey> pinned;
    EXPECT_EQ(m.match_and_pin(keys, pinned, -1), 2);  // the RAM tiers still serve it
    m.unpin(pinned);
  }
  size_t files = 0;
  for (const auto& de : fs::recursive_directory_iterator(dir)) files += de.is_regular_file();
  EXPECT_EQ(files, 0u);
  CacheOptions o = disk_opts(clock, nullptr);
  o.disk_key.clear();
  EXPECT_THROW(BlockManager(kLayout, model, o), std::invalid_argument);
  // Version-1 files (plain pages named by block key, directly in the model's folder) are
  // deleted at start: an upgrade leaves no plaintext behind.
  fs::create_directories(dir / model.hex());
  std::ofstream(dir / model.hex() / (std::string(32, 'a') + ".kv")) << "plaintext K/V";
  std::vector<std::string> logs;
  {
    BlockManager m1(kLayout, model, disk_opts(clock, &logs));
    EXPECT_EQ(m1.stats().disk_rejects, 1u);
  }
  EXPECT_FALSE(fs::exists(dir / model.hex() / (std::string(32, 'a') + ".kv")));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("deleted 1 unencrypted version-1 file(s)"), std::string::npos) << logs[0];
  CacheOptions plain = opts(4, clock);  // no disk tier: no tenant
  BlockManager m(kLayout, model, plain);
  EXPECT_EQ(m.disk_tenant("acme"), -1);
}

}  // namespace
}  // namespace swz::kvcache
