// The prefix cache inside the engine, on the real default model (SmolLM2-135M-Instruct
// Q4_1, the package scripts/compile-default.sh writes; path from SWZ_PACKAGE):
//  - prefill is batch-invariant: a token's K/V and the logits are bit-identical however
//    the prompt is split into forward() calls (what makes a cache hit exact);
//  - greedy output with cache hits equals a cold run for tens of prompts (divergence in
//    the middle of a block, partial last blocks, full hits that copy-on-write the last
//    block, repeats, extensions by a previous answer), and cached_tokens is exactly the
//    longest prefix shared with a prompt served before (token-granular reuse: whole
//    blocks, then the start of a block another prompt holds), short of the last position;
//  - host spill / restore under a small page pool, the disk tier across a restart, pins
//    keeping cached_tokens exact while other requests evict, cancellation during prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "exec/backend_model.h"
#include "engine/engine.h"
#include "require_package.h"
#include "kvcache/block_manager.h"
#include "package/package.h"

namespace swz::engine {
namespace {

namespace fs = std::filesystem;

// A real code prompt long enough for several blocks.
const char* kSource = R"(#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tiny arena allocator with a free list of fixed-size chunks. */
typedef struct chunk { struct chunk *next; } chunk_t;
typedef struct arena { char *base; size_t size, used, chunk; chunk_t *free_list; } arena_t;

int arena_init(arena_t *a, size_t size, size_t chunk) {
  a->base = malloc(size);
  if (!a->base) return -1;
  a->size = size; a->used = 0; a->chunk = chunk < sizeof(chunk_t) ? sizeof(chunk_t) : chunk;
  a->free_list = NULL;
  return 0;
}

void *arena_alloc(arena_t *a) {
  if (a->free_list) { chunk_t *c = a->free_list; a->free_list = c->next; return c; }
  if (a->used + a->chunk > a->size) return NULL;
  void *p = a->base + a->used; a->used += a->chunk; return p;
}

void arena_free(arena_t *a, void *p) { chunk_t *c = p; c->next = a->free_list; a->free_list = c; }

int main(void) {
  arena_t a;
  if (arena_init(&a, 1 << 16, 48)) return 1;
  void *x = arena_alloc(&a), *y = arena_alloc(&a);
  arena_free(&a, x);
  printf("%p %p %p\n", x, y, arena_alloc(&a));
  return 0;
}
)";

struct GreedyRun {
  std::vector<int32_t> tokens;
  GenerateResult r;
};

GreedyRun greedy(Engine& e, const std::vector<int32_t>& prompt, int n, std::unique_ptr<Admission>* keep = nullptr) {
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = n;
  req.sampling.temperature = 0;
  std::unique_ptr<Admission> a = e.admit(req);
  GreedyRun out;
  const int admitted = a->cached_tokens();
  out.r = e.run(*a, [&](const TokenEvent& ev) {
    out.tokens.push_back(ev.token);
    return true;
  });
  EXPECT_EQ(out.r.cached_tokens, admitted) << "run() must report what admit() promised";
  if (keep) *keep = std::move(a);
  return out;
}

EngineOptions cold_opts() {
  EngineOptions o;
  o.n_ctx = 1024;
  o.prefix_cache = false;
  return o;
}

/// A warm engine (cold_opts() with the prefix cache on), a cold one and kSource's tokens.
struct WarmCold {
  std::unique_ptr<Engine> warm, cold;
  std::vector<int32_t> base;
};
WarmCold warm_and_cold(const std::string& path) {
  EngineOptions o = cold_opts();
  o.prefix_cache = true;
  WarmCold w{Engine::load(path, o), Engine::load(path, cold_opts()), {}};
  w.base = w.warm->tokenize(kSource, true, false);
  return w;
}

TEST(PrefillBatchInvariance, KvAndLogitsDoNotDependOnChunking) {
  REQUIRE_PACKAGE(path);
  package::LoadedPackage pkg = package::open_package(path);
  const kvcache::PageLayout layout = exec::kv_layout(pkg.manifest.graph);
  kvcache::CacheOptions co;
  co.n_pages = 16;
  co.prefix_cache = false;
  exec::BackendModel bm = exec::open_backend_model(pkg, 1024, co, "", 2);
  exec::SequenceModel& model = *bm.model;
  std::vector<uint16_t> page(layout.page_elems());  // a page's host image (exec::GraphExecutor::read_page)
  std::vector<int32_t> prompt;
  for (int i = 0; i < 140; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % model.n_vocab()));
  const int n = static_cast<int>(prompt.size());

  auto run = [&](const std::vector<int>& chunks, std::vector<uint16_t>& kv_bytes, std::vector<float>& logits) {
    model.release();
    int at = 0;
    for (int c : chunks) {
      model.forward(prompt.data() + at, c, 1, exec::SequenceModel::Rows::Prompt, logits);
      at += c;
    }
    EXPECT_EQ(at, n);
    kv_bytes.clear();
    // Every layer's K and V of positions 0..n-1, in position order (V is stored transposed).
    for (int l = 0; l < layout.n_layer; ++l)
      for (int p = 0; p < n; ++p) {
        bm.executor->read_page(model.block_table()[p / 64], page.data());
        const uint16_t* row = page.data() + layout.k_offset(l, p % 64);
        kv_bytes.insert(kv_bytes.end(), row, row + layout.kv_width);
        for (int c = 0; c < layout.kv_width; ++c) kv_bytes.push_back(page[layout.v_offset(l, c) + p % 64]);
      }
  };
  std::vector<uint16_t> ref_kv, kv_bytes;
  std::vector<float> ref_logits, logits;
  run({n}, ref_kv, ref_logits);
  const std::vector<std::vector<int>> splits = {
      std::vector<int>(n, 1), {64, 64, 12}, {37, 40, 63}, {127, 13}, {1, 138, 1}, {139, 1}};
  for (const auto& s : splits) {
    run(s, kv_bytes, logits);
    ASSERT_EQ(kv_bytes.size(), ref_kv.size());
    EXPECT_EQ(0, std::memcmp(kv_bytes.data(), ref_kv.data(), ref_kv.size() * 2)) << "K/V differ for a split of " << s.size();
    ASSERT_EQ(logits.size(), ref_logits.size());
    EXPECT_EQ(0, std::memcmp(logits.data(), ref_logits.data(), logits.size() * 4)) << "logits differ for a split of " << s.size();
  }
}

TEST(PrefixCacheEngine, GreedyWithHitsEqualsColdRuns) {
  REQUIRE_PACKAGE(path);
  std::unique_ptr<Engine> cold = Engine::load(path, cold_opts());
  EngineOptions wo = cold_opts();
  wo.prefix_cache = true;
  std::unique_ptr<Engine> warm = Engine::load(path, wo);
  const std::vector<int32_t> base = warm->tokenize(kSource, true, false);
  ASSERT_GE(base.size(), 330u);
  auto cut = [&](size_t n) { return std::vector<int32_t>(base.begin(), base.begin() + n); };
  auto edit = [&](std::vector<int32_t> v, size_t at, int32_t tok) {
    v[at] = tok;
    return v;
  };
  const int32_t x = warm->tokenize(" banana", false, false).at(0);
  std::vector<std::vector<int32_t>> prompts = {
      cut(150),                   // cold: publishes blocks 0, 1
      cut(150),                   // repeat: 2 blocks hit, partial last block evaluated
      cut(128),                   // full hit: last position re-evaluated in a copied page
      cut(128),                   // again (the copy was private; the cached page unchanged)
      cut(64),                    // full hit of one block
      cut(200),                   // extension: 2 blocks hit
      cut(65),                    // 1 block + 1 token
      edit(cut(200), 100, x),     // divergence in the middle of block 1: block 0 hits
      edit(cut(200), 100, x),     // repeat of the diverged prompt: its blocks hit now
      edit(cut(200), 10, x),      // divergence in block 0: nothing hits
      edit(cut(256), 191, x),     // divergence at the last position of block 2
      edit(cut(256), 192, x),     // divergence at the first position of block 3
      cut(256),                   // 4 full blocks, full hit of what 191/192 shared
      cut(300),
      cut(330),
      edit(cut(330), 320, x),     // divergence in the partial last block
      cut(63),                    // shorter than a block: never cached
      cut(63),
      cut(129),
      cut(192),
      edit(cut(192), 127, x),     // divergence at the last token of block 1
      cut(193),
  };
  // A second turn: a previous prompt plus its generated answer plus a new question.
  // The first turn's answer completes block 1 (prompt 120 + 40 generated tokens). Only
  // the prompt's 56 positions of that block are reused (the turn-1 sequence published its
  // partial last block when it ended); its generated positions' K/V were computed as
  // generated rows, in llama.cpp's single-row order, where a cold prefill of turn 2
  // computes them as prompt rows, so turn 2 reuses 120 tokens and still equals its cold
  // run; a repeat of turn 2 then hits turn 2's own prompt blocks.
  GreedyRun first = greedy(*cold, cut(120), 40);
  ASSERT_EQ(first.tokens.size(), 40u);
  std::vector<int32_t> turn2 = cut(120);
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> q = warm->tokenize("\nExplain arena_free.", false, false);
  turn2.insert(turn2.end(), q.begin(), q.end());
  prompts.push_back(cut(120));  // the warm engine generates the same answer
  prompts.push_back(turn2);
  prompts.push_back(turn2);

  // What the warm engine must reuse: the longest prefix a prompt it served before shares
  // (every served prompt's full blocks and partial last block stay cached: the pool holds
  // them all), never the last position.
  std::vector<std::vector<int32_t>> served;
  auto expected_cached = [&](const std::vector<int32_t>& q) {
    size_t best = 0;
    for (const auto& p : served) {
      const size_t n = std::min(p.size(), q.size());
      best = std::max(best, static_cast<size_t>(std::mismatch(q.begin(), q.begin() + n, p.begin()).first - q.begin()));
    }
    return static_cast<int>(std::min(best, q.size() - 1));
  };
  auto warm_greedy = [&](const std::vector<int32_t>& q, int n_gen) {
    const int want = expected_cached(q);
    GreedyRun w = greedy(*warm, q, n_gen);
    EXPECT_EQ(w.r.cached_tokens, want);
    served.push_back(q);
    return w;
  };
  size_t hits = 0, mid_block = 0;
  std::map<std::vector<int32_t>, GreedyRun> cold_runs;  // repeated prompts run cold once
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i) + " (" + std::to_string(prompts[i].size()) + " tokens)");
    const int n_gen = i + 3 == prompts.size() ? 40 : 8;
    if (!cold_runs.count(prompts[i])) cold_runs[prompts[i]] = greedy(*cold, prompts[i], n_gen);
    const GreedyRun& c = cold_runs[prompts[i]];
    GreedyRun w = warm_greedy(prompts[i], n_gen);
    EXPECT_EQ(c.r.cached_tokens, 0);
    EXPECT_EQ(w.tokens, c.tokens);
    EXPECT_EQ(w.r.text, c.r.text);
    hits += w.r.cached_tokens > 0;
    mid_block += w.r.cached_tokens % 64 != 0 && w.r.cached_tokens != w.r.prompt_tokens - 1;
    if (i + 2 == prompts.size()) { EXPECT_EQ(w.r.cached_tokens, 120); }  // turn 2: turn 1's prompt
  }
  // A few of them spelled out.
  EXPECT_EQ(warm_greedy(cut(150), 1).r.cached_tokens, 149);
  EXPECT_EQ(warm_greedy(cut(128), 1).r.cached_tokens, 127);
  EXPECT_EQ(warm_greedy(cut(63), 1).r.cached_tokens, 62);  // one partial block, served twice before
  EXPECT_EQ(warm_greedy(edit(cut(200), 10, x), 1).r.cached_tokens, 199);  // cached by its own earlier run
  std::vector<int32_t> fresh = cut(200);
  fresh[3] = x;
  fresh[70] = x;
  EXPECT_EQ(warm_greedy(fresh, 1).r.cached_tokens, 3);  // only what precedes the first edit
  EXPECT_EQ(greedy(*warm, fresh, 1).tokens, greedy(*cold, fresh, 1).tokens);
  EXPECT_GE(hits, 22u);
  EXPECT_GE(mid_block, 8u);  // hits that end inside a block
  const CacheStats s = warm->cache_stats();
  EXPECT_GT(s.hit_tokens, 0u);
  EXPECT_GT(s.miss_tokens, 0u);
  EXPECT_GT(s.blocks_device, 0u);
  EXPECT_EQ(cold->cache_stats().hit_tokens, 0u);
}

TEST(PrefixCacheEngine, RequestsAdmittedTogetherShareBlocksPublishedInBetween) {
  REQUIRE_PACKAGE(path);
  auto [warm, cold, base] = warm_and_cold(path);
  const std::vector<int32_t> p(base.begin(), base.begin() + 200);
  GenerateRequest req;
  req.prompt = p;
  req.max_tokens = 6;
  req.sampling.temperature = 0;
  std::unique_ptr<Admission> a = warm->admit(req), b = warm->admit(req);
  EXPECT_EQ(a->cached_tokens(), 0);
  EXPECT_EQ(b->cached_tokens(), 0);
  const GenerateResult ra = warm->run(*a, nullptr);
  const uint64_t hits = warm->cache_stats().hit_tokens;
  const GenerateResult rb = warm->run(*b, nullptr);
  EXPECT_EQ(rb.cached_tokens, 0);                           // what admission reported
  EXPECT_EQ(warm->cache_stats().hit_tokens - hits, 192u);  // what was actually reused
  EXPECT_EQ(warm->cache_stats().miss_tokens, 200u + 8u);
  EXPECT_EQ(rb.text, ra.text);
  EXPECT_EQ(ra.text, greedy(*cold, p, 6).r.text);
}

TEST(PrefixCacheEngine, HostSpillRestoreAndPinsUnderASmallPool) {
  REQUIRE_PACKAGE(path);
  std::unique_ptr<Engine> cold = Engine::load(path, cold_opts());
  EngineOptions o;
  o.n_ctx = 256;
  o.kv_pages = 5;  // the minimum for 256 tokens: every new sequence evicts
  o.cache_host_mb = 64;
  std::unique_ptr<Engine> warm = Engine::load(path, o);
  const std::vector<int32_t> base = warm->tokenize(kSource, true, false);
  std::vector<int32_t> a(base.begin(), base.begin() + 200), b(base.begin() + 100, base.begin() + 300);
  const GreedyRun ca = greedy(*cold, a, 8), cb = greedy(*cold, b, 8);
  EXPECT_EQ(greedy(*warm, a, 8).tokens, ca.tokens);
  EXPECT_EQ(greedy(*warm, b, 8).tokens, cb.tokens);  // evicts a's blocks to host
  EXPECT_GT(warm->cache_stats().spills, 0u);
  // a is admitted (its 3 blocks pinned, some on host); b runs in between and needs pages.
  GenerateRequest req;
  req.prompt = a;
  req.max_tokens = 8;
  req.sampling.temperature = 0;
  std::unique_ptr<Admission> adm = warm->admit(req);
  EXPECT_EQ(adm->cached_tokens(), 199);  // 3 blocks and 7 of the 8 positions a's run left in its last one
  EXPECT_EQ(greedy(*warm, b, 8).tokens, cb.tokens);
  std::vector<int32_t> got;
  GenerateResult r = warm->run(*adm, [&](const TokenEvent& ev) {
    got.push_back(ev.token);
    return true;
  });
  EXPECT_EQ(r.cached_tokens, 199);
  EXPECT_EQ(got, ca.tokens);
  EXPECT_GT(warm->cache_stats().restores, 0u);
  // An admission dropped without running releases its pins (no leak, pages reusable).
  for (int i = 0; i < 3; ++i) (void)warm->admit(req);
  EXPECT_EQ(greedy(*warm, b, 8).tokens, cb.tokens);
}

TEST(PrefixCacheEngine, DiskTierSurvivesARestart) {
  REQUIRE_PACKAGE(path);
  const fs::path dir = fs::temp_directory_path() / ("swz-engine-disk-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EngineOptions o = cold_opts();
  o.prefix_cache = true;
  o.cache_dir = dir.string();
  o.cache_key = std::string(32, 'k');
  std::unique_ptr<Engine> cold = Engine::load(path, cold_opts());
  const std::vector<int32_t> base = cold->tokenize(kSource, true, false);
  const std::vector<int32_t> p(base.begin(), base.begin() + 210);
  const GreedyRun ref = greedy(*cold, p, 8);
  {
    std::unique_ptr<Engine> e = Engine::load(path, o);
    EXPECT_EQ(greedy(*e, p, 8).r.cached_tokens, 0);
  }  // the engine's destructor waits for the disk thread's writes
  {
    std::unique_ptr<Engine> e = Engine::load(path, o);  // a restart: only the disk tier remains
    EXPECT_GE(e->cache_stats().blocks_disk, 3u);
    const GreedyRun w = greedy(*e, p, 8);
    EXPECT_EQ(w.r.cached_tokens, 192);
    EXPECT_EQ(w.tokens, ref.tokens);
    EXPECT_EQ(e->cache_stats().disk_reads, 3u);
  }
  fs::remove_all(dir);
}

TEST(PrefixCacheEngine, CancelDuringPrefillStopsAndPublishesOnlyExactBlocks) {
  REQUIRE_PACKAGE(path);
  EngineOptions o = cold_opts();
  o.prefix_cache = true;
  o.batch_tokens = 512;  // prefill chunks of 512 (the scheduler's step budget)
  std::unique_ptr<Engine> warm = Engine::load(path, o);
  std::unique_ptr<Engine> cold = Engine::load(path, cold_opts());
  std::vector<int32_t> base = warm->tokenize(kSource, true, false);
  while (base.size() < 600) base.insert(base.end(), base.begin() + 1, base.begin() + 200);
  base.resize(600);
  GenerateRequest req;
  req.prompt = base;
  req.max_tokens = 4;
  req.sampling.temperature = 0;
  std::unique_ptr<Admission> a = warm->admit(req);
  int polls = 0;
  // The scheduler polls before each step, run() while it waits: the second poll comes
  // during the first 512-token chunk, so the second chunk never runs.
  a->set_cancel_check([&] { return ++polls >= 2; });
  bool got_token = false;
  GenerateResult r = warm->run(*a, [&](const TokenEvent&) {
    got_token = true;
    return true;
  });
  EXPECT_EQ(r.finish, FinishReason::Cancelled);
  EXPECT_EQ(r.completion_tokens, 0);
  EXPECT_FALSE(got_token);
  EXPECT_EQ(warm->cache_stats().miss_tokens, 512u);  // the second chunk never ran
  // The 8 blocks computed before the cancel are exact and shared; the rest is evaluated.
  const GreedyRun w = greedy(*warm, base, 4);
  EXPECT_EQ(w.r.cached_tokens, 512);
  EXPECT_EQ(w.tokens, greedy(*cold, base, 4).tokens);
}

TEST(PrefixCacheEngine, ARequestCancelledBeforeItsPrefillLeavesThePoolAsItWas) {
  // A partial hit and a full hit, each cancelled before its first prefill chunk: the page
  // it took from the cache is not published again (under its own partial key), so no page
  // is lost and the cache holds the same blocks; the same prompts then run exactly.
  REQUIRE_PACKAGE(path);
  auto [warm, cold, base] = warm_and_cold(path);
  const std::vector<int32_t> p(base.begin(), base.begin() + 150), full(base.begin(), base.begin() + 128);
  std::vector<int32_t> edited = p;
  edited[140] ^= 1;  // shares 140 tokens with p: 2 blocks and 12 positions of p's last one
  greedy(*warm, p, 4);
  greedy(*warm, full, 4);
  const CacheStats before = warm->cache_stats();
  for (const std::vector<int32_t>* q : {static_cast<const std::vector<int32_t>*>(&edited), &full}) {
    GenerateRequest req;
    req.prompt = *q;
    req.max_tokens = 4;
    req.sampling.temperature = 0;
    std::unique_ptr<Admission> a = warm->admit(req);
    EXPECT_EQ(a->cached_tokens(), q == &edited ? 140 : 127);
    a->set_cancel_check([] { return true; });
    EXPECT_EQ(warm->run(*a, nullptr).finish, FinishReason::Cancelled);
  }
  const CacheStats after = warm->cache_stats();
  EXPECT_EQ(after.pages_free, before.pages_free);
  EXPECT_EQ(after.blocks_device, before.blocks_device);
  EXPECT_EQ(greedy(*warm, edited, 4).tokens, greedy(*cold, edited, 4).tokens);
  EXPECT_EQ(greedy(*warm, full, 4).r.cached_tokens, 127);
}

}  // namespace
}  // namespace swz::engine
