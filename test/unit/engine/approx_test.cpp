// The approx cache mode in the scheduler (engine/scheduler.h, kvcache/atom_store.h) on the
// real default model (SmolLM2-135M-Instruct Q4_1; SWZ_PACKAGE):
//  - an atom that an approx request computed at positions [50, 200) is installed when a
//    second approx request holds it at [83, 233) after other tokens: the admission reports
//    its tokens past the recomputed head as cached (and approx_tokens);
//  - the installed K/V is the first request's, moved: in layer 0 (where K/V depend only on
//    the token and its position) V equals a cold exact prefill of the second prompt
//    bitwise and K within f16 rounding of the re-rotation; every position before the atom
//    (same context in both) equals the cold prefill bitwise in every layer;
//  - approx and exact requests never share prefix-cache blocks: an exact request of the
//    same prompt finds nothing cached, and the approx namespace serves a repeat in full;
//  - saved atoms serve only their own cache scope (another organisation finds none);
//  - a longer cached prefix found when a request starts (published after its admission)
//    still gets the rest of a planned install, from the right offset into the saved atom
//    (layer-0 V bitwise the cold prefill's), so what is reused is at least what was reported;
//  - the prompt segments between installs run in one pass (a sequence of the pass each)
//    and give bitwise the logprobs they give in a pass each (both selections);
//  - forward_layers(n) writes layers 0..n-1's K/V bitwise as forward() does, and no other;
//  - ApproxSelect::Deviation recomputes, after each atom's first tokens, the windows whose
//    layer-1 K/V (the saved atom's, K re-rotated) deviates most from the K/V the request's
//    own context gives (computed here from a cold exact prefill): those positions hold K/V
//    nearer the cold prefill's than the saved, all others the saved K/V moved, bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "exec/backend_model.h"
#include "exec/executor.h"
#include "ggml/fp16.h"
#include "package/package.h"
#include "require_package.h"

namespace swz::engine {
namespace {

constexpr int kTok = kvcache::kBlockTokens;

std::vector<int32_t> tokens(int n, uint32_t seed, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed;
  for (int32_t& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<int32_t>(100 + (x >> 8) % static_cast<uint32_t>(n_vocab - 200));
  }
  return t;
}

/// The token lists `parts`, one after the other.
std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const std::vector<int32_t>& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct Counts {
  int cached = 0, approx = 0;
};

/// The default model on the cpu backend with a 64-page pool and its scheduler (1,024
/// positions, 256 rows a pass), an atom index of 1,024 atoms; `max_seqs` sequences a pass.
struct Rig {
  Rig(const package::LoadedPackage& pkg, int parallel, int max_seqs)
      : bm(exec::open_backend_model(pkg, 1024, pages(), "approx-test", 2, 256, max_seqs)), store(1024) {
    SchedulerOptions so;
    so.n_ctx = 1024;
    so.parallel = parallel;
    so.batch_tokens = 256;
    SchedulerHooks hooks;
    hooks.is_eog = [](int32_t) { return false; };
    hooks.piece = [](int32_t) { return std::string(); };
    sched = std::make_unique<Scheduler>(*bm.executor, *bm.kv, so, hooks, &store);
  }
  static kvcache::CacheOptions pages() {
    kvcache::CacheOptions co;
    co.n_pages = 64;
    return co;
  }
  exec::BackendModel bm;
  kvcache::AtomStore store;
  std::unique_ptr<Scheduler> sched;  // last: destroyed first
};

Counts run(Scheduler& s, const std::vector<int32_t>& prompt, std::vector<TokenSpan> atoms, const std::string& scope = "",
           ApproxSelect select = ApproxSelect::Head) {
  GenerateRequest r;
  r.cache_scope = scope;
  r.approx_select = select;
  r.prompt = prompt;
  r.max_tokens = 1;
  r.sampling.temperature = 0;
  r.speculative = false;
  r.approx_atoms = std::move(atoms);
  std::unique_ptr<Admission> a = s.admit(r);
  Counts out{a->cached_tokens(), a->approx_tokens()};
  s.run(*a, {});
  return out;
}

/// Layer `l`'s K and V of positions [p0, p1) of `prompt` as the blocks cached under `model`
/// hold them (full blocks only), f16 [n][kv_width] each.
void cached_kv(exec::BackendModel& bm, const kvcache::BlockKey& model, const std::vector<int32_t>& prompt, int l, int p0,
               int p1, std::vector<uint16_t>& k, std::vector<uint16_t>& v) {
  const kvcache::KvGeometry g = bm.executor->kv_geometry();
  const size_t kvw = static_cast<size_t>(g.kv_width());
  std::vector<kvcache::BlockKey> keys = kvcache::block_keys(model, prompt.data(), static_cast<size_t>(p1 + kTok - 1) / kTok * kTok);
  std::vector<kvcache::BlockKey> pinned;
  ASSERT_EQ(bm.kv->match_and_pin(keys, pinned), static_cast<int>(keys.size()));
  std::vector<int> pages = bm.kv->acquire(pinned);
  k.assign(static_cast<size_t>(p1 - p0) * kvw, 0);
  v = k;
  std::vector<uint16_t> pk(static_cast<size_t>(g.n_layer) * kTok * kvw), pv(pk.size());
  for (int p = p0; p < p1; ++p) {
    if (p == p0 || p % kTok == 0) {
      const exec::BatchModel::KvRun run{pages[static_cast<size_t>(p / kTok)], 0, kTok};
      bm.executor->read_kv({&run, 1}, pk.data(), pv.data());
    }
    const size_t src = (static_cast<size_t>(l) * kTok + static_cast<size_t>(p % kTok)) * kvw;
    std::copy_n(pk.data() + src, kvw, k.data() + static_cast<size_t>(p - p0) * kvw);
    std::copy_n(pv.data() + src, kvw, v.data() + static_cast<size_t>(p - p0) * kvw);
  }
  for (int page : pages) bm.kv->unref_page(page);
  bm.kv->unpin(pinned);
}

/// Expects one position's K (`kvw` f16 values) `got` within the f16 rounding of RoPE's
/// re-rotation of `want` (a GPU package's kv_move kernel rotates in its own float arithmetic,
/// the host in kvcache::rerotate_head's): each value within 3e-3 of its rotation pair's
/// magnitude + 1e-3. Returns how many values differ at all.
int expect_k_near(const uint16_t* got, const uint16_t* want, const kvcache::KvGeometry& g, int position) {
  int differ = 0;
  for (int h = 0; h < g.n_head_kv; ++h)
    for (int j = 0; j < g.head_dim; ++j) {
      const size_t i = static_cast<size_t>(h) * g.head_dim + j;
      const int partner = j >= g.n_rot ? j : g.neox ? (j < g.n_rot / 2 ? j + g.n_rot / 2 : j - g.n_rot / 2) : (j ^ 1);
      const double a = ggml::fp16_to_fp32(want[i]), b = ggml::fp16_to_fp32(want[i - j + partner]);
      EXPECT_NEAR(ggml::fp16_to_fp32(got[i]), a, std::hypot(a, b) * 3e-3 + 1e-3) << "position " << position << " head " << h << " dim " << j;
      differ += got[i] != want[i];
    }
  return differ;
}

TEST(Approx, InstalledAtomIsTheEarlierComputationMovedAndRerotated) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  Rig rig(pkg, 4, 4);
  exec::BackendModel& bm = rig.bm;
  kvcache::AtomStore& store = rig.store;
  Scheduler& sched = *rig.sched;
  const int nv = bm.executor->n_vocab();

  const std::vector<int32_t> head1 = tokens(50, 1, nv), head2 = tokens(83, 2, nv), atom = tokens(150, 3, nv),
                             tail = tokens(20, 4, nv);
  const std::vector<int32_t> p1 = cat({head1, atom, tail}), p2 = cat({head2, atom, tail});

  const Counts first = run(sched, p1, {{50, 200}});
  EXPECT_EQ(first.cached, 0);
  EXPECT_EQ(store.stats().atoms, 1u);
  const int head = static_cast<int>(std::ceil(kApproxRecompute * 150));  // 23 recomputed
  const Counts second = run(sched, p2, {{83, 233}});
  EXPECT_EQ(second.approx, 150 - head);
  EXPECT_EQ(second.cached, 150 - head);

  // Another scope finds no atom of this one; this scope finds it wherever it moves.
  const std::vector<int32_t> p3 = cat({tokens(120, 5, nv), atom, tail});
  EXPECT_EQ(run(sched, p3, {{120, 270}}, "org:other").approx, 0);
  const std::vector<int32_t> p4 = cat({tokens(97, 6, nv), atom, tail});  // (p3's blocks are shared whole: a new prefix)
  EXPECT_EQ(run(sched, p4, {{97, 247}}).approx, 150 - head);

  // The cold reference: the same prompt in exact mode (its own namespace: nothing cached).
  const Counts exact = run(sched, p2, {});
  EXPECT_EQ(exact.cached, 0) << "exact requests never see the approx namespace's blocks";
  const Counts again = run(sched, p2, {{83, 233}});
  EXPECT_EQ(again.cached, static_cast<int>(p2.size()) - 1) << "a repeat is served by the approx namespace";

  const kvcache::KvGeometry g = bm.executor->kv_geometry();
  const int kvw = g.kv_width();
  const int inst0 = 83 + head, inst1 = 3 * kTok;  // installed positions held by full blocks
  std::vector<uint16_t> ka, va, ke, ve;
  // Layer 0 of the installed positions: V bitwise, K within the re-rotation's f16 rounding.
  cached_kv(bm, sched.approx_model(), p2, 0, inst0, inst1, ka, va);
  cached_kv(bm, bm.kv->model(), p2, 0, inst0, inst1, ke, ve);
  EXPECT_EQ(va, ve);
  int differ = 0;
  for (int p = 0; p < inst1 - inst0; ++p)
    differ += expect_k_near(ka.data() + static_cast<size_t>(p) * kvw, ke.data() + static_cast<size_t>(p) * kvw, g, inst0 + p);
  EXPECT_GT(differ, 0) << "K really went through the re-rotation";
  // Before the atom both prompts are the same tokens in the same places: bitwise, every layer.
  for (int l = 0; l < g.n_layer; ++l) {
    cached_kv(bm, sched.approx_model(), p2, l, 0, 83 + head, ka, va);
    cached_kv(bm, bm.kv->model(), p2, l, 0, 83 + head, ke, ve);
    EXPECT_EQ(ka, ke) << "layer " << l;
    EXPECT_EQ(va, ve) << "layer " << l;
  }
  // Deeper layers of the installed positions hold the first prompt's context, not this one's.
  cached_kv(bm, sched.approx_model(), p2, g.n_layer - 1, inst0, inst1, ka, va);
  cached_kv(bm, bm.kv->model(), p2, g.n_layer - 1, inst0, inst1, ke, ve);
  EXPECT_NE(va, ve);

  // A longer cached prefix found when the request starts (published after its admission)
  // covers the head of a planned install: the rest of the atom is still installed, from the
  // right offset into the saved atom, so at least what the admission reported is reused.
  const std::vector<int32_t> p5 = cat({tokens(40, 7, nv), atom, tail});
  GenerateRequest ra;
  ra.prompt = p5;
  ra.max_tokens = 1;
  ra.sampling.temperature = 0;
  ra.approx_atoms = {{40, 190}};
  ra.approx_select = ApproxSelect::Head;
  std::unique_ptr<Admission> late = sched.admit(ra);
  EXPECT_EQ(late->cached_tokens(), 150 - head);  // the install [63, 190)
  const std::vector<int32_t> p6 = cat({{p5.begin(), p5.begin() + 130}, tokens(60, 8, nv)});  // shares blocks 0 and 1 with p5
  run(sched, p6, {{130, 180}});  // approx (its atom is new): publishes p6's blocks in the namespace
  const uint64_t hits0 = sched.hit_tokens();
  sched.run(*late, {});
  EXPECT_EQ(sched.hit_tokens() - hits0, 128u + (190 - 128)) << "blocks 0-1, then the install's tail [128, 190)";
  EXPECT_EQ(run(sched, p5, {}).cached, 0);  // the cold reference, in exact mode
  cached_kv(bm, sched.approx_model(), p5, 0, 128, 190, ka, va);
  cached_kv(bm, bm.kv->model(), p5, 0, 128, 190, ke, ve);
  EXPECT_EQ(va, ve) << "the tail came from the right place in the saved atom";
}

// The prompt segments between installs go into one pass, a sequence of the pass each,
// and compute what they compute one pass a segment: the same request on a scheduler
// whose passes have no spare sequence slots gives bitwise the same logprobs, in more
// passes.
TEST(Approx, SegmentsBetweenInstallsRunInOnePassAsApart) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  for (const ApproxSelect select : {ApproxSelect::Head, ApproxSelect::Deviation}) {
  SCOPED_TRACE(std::string(approx_select_name(select)));
  struct Run {
    std::vector<TokenLogprobs> lp;
    int cached = 0;
    uint64_t steps = 0;  // passes of the second request
  };
  auto run_with = [&](int max_seqs) {
    Rig rig(pkg, 1, max_seqs);
    Scheduler& sched = *rig.sched;
    const int nv = rig.bm.executor->n_vocab();
    const std::vector<int32_t> a = tokens(100, 11, nv), mid = tokens(30, 12, nv), b = tokens(90, 13, nv),
                               tail = tokens(25, 14, nv);
    auto prompt = [&](int head, uint32_t seed) { return cat({tokens(head, seed, nv), a, mid, b, tail}); };
    run(sched, prompt(40, 15), {{40, 140}, {170, 260}}, "", select);
    GenerateRequest r;
    r.approx_select = select;
    r.prompt = prompt(57, 16);
    r.max_tokens = 3;
    r.sampling.temperature = 0;
    r.speculative = false;
    r.logprobs = 5;
    r.approx_atoms = {{57, 157}, {187, 277}};
    std::unique_ptr<Admission> adm = sched.admit(r);
    Run out;
    out.cached = adm->cached_tokens();
    const uint64_t steps0 = sched.stats().steps;
    sched.run(*adm, [&](const TokenEvent& ev) {
      out.lp.push_back(*ev.logprobs);
      return true;
    });
    out.steps = sched.stats().steps - steps0;
    return out;
  };
  const Run apart = run_with(1), together = run_with(1 + kApproxSegmentSlots);
  const int head = static_cast<int>(std::ceil(kApproxRecompute * 100)), head_b = static_cast<int>(std::ceil(kApproxRecompute * 90));
  EXPECT_EQ(together.cached, (100 - head) + (90 - head_b));
  EXPECT_EQ(apart.cached, together.cached);
  // Prompt rows: [0, 57 + 15) and [157, 187 + 14) before and between the installs, then
  // [277, 302): 3 segments, one pass; apart, a pass each; then 2 decode passes either way.
  // Deviation: [0, 59), [157, 189), [277, 302) and the runs inside the atoms (13 and 12
  // tokens in windows of 4: 2 to 4 runs each), one pass; apart, a pass each.
  EXPECT_EQ(together.steps, 1u + 2u);
  if (select == ApproxSelect::Head) {
    EXPECT_EQ(apart.steps, 3u + 2u);
  } else {
    EXPECT_GE(apart.steps, 3u + 2u + 4u);
    EXPECT_LE(apart.steps, 3u + 2u + 8u);
  }
  ASSERT_EQ(together.lp.size(), 3u);
  ASSERT_EQ(apart.lp.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(together.lp[i].token, apart.lp[i].token) << "token " << i;
    EXPECT_EQ(together.lp[i].logprob, apart.lp[i].logprob) << "token " << i;
    ASSERT_EQ(together.lp[i].top.size(), apart.lp[i].top.size());
    for (size_t j = 0; j < together.lp[i].top.size(); ++j) {
      EXPECT_EQ(together.lp[i].top[j].token, apart.lp[i].top[j].token);
      EXPECT_EQ(together.lp[i].top[j].logprob, apart.lp[i].top[j].logprob);
    }
  }
  }
}

// The probe pass of ApproxSelect::Deviation: forward_layers(n) writes the K/V of layers
// 0..n-1 bitwise as a full forward() does and leaves deeper layers' K/V as they were, also
// where a full pass of the same shape was recorded as a launch graph (it must not replay it).
TEST(Approx, ForwardLayersWritesTheFirstLayersKvAsForwardDoes) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  Rig rig(pkg, 1, 1);
  exec::GraphExecutor& ex = *rig.bm.executor;
  const kvcache::KvGeometry g = ex.kv_geometry();
  ASSERT_GT(g.n_layer, kApproxProbeLayers);
  const std::vector<int32_t> p = tokens(100, 21, ex.n_vocab());
  const int table[2] = {3, 4}, other[2] = {5, 6};
  auto step = [&](const int* t) {
    exec::SequenceStep st;
    st.tokens = p.data();
    st.n_tokens = 100;
    st.block_table = t;
    st.n_blocks = 2;
    st.n_out = 100;  // every row an output row: a shape the executor records as a launch graph
    return st;
  };
  const exec::SequenceStep full = step(table), probe = step(other);
  std::vector<float> logits;
  ex.forward({&full, 1}, logits);
  // `other` first holds a different prompt's K/V in every layer (its pass of the same
  // shape, the second, is recorded), then the probe runs.
  const std::vector<int32_t> q = tokens(100, 22, ex.n_vocab());
  exec::SequenceStep before = probe;
  before.tokens = q.data();
  ex.forward({&before, 1}, logits);
  const exec::BatchModel::KvRun other_runs[2] = {{5, 0, 64}, {6, 0, 36}}, full_runs[2] = {{3, 0, 64}, {4, 0, 36}};
  const size_t layer_vals = static_cast<size_t>(100) * g.kv_width();
  std::vector<uint16_t> k0(layer_vals * g.n_layer), v0(k0.size()), kp(k0.size()), vp(k0.size()), kf(k0.size()), vf(k0.size());
  ex.read_kv(other_runs, k0.data(), v0.data());
  EXPECT_THROW(ex.forward_layers({&probe, 1}, 0), std::invalid_argument);
  EXPECT_THROW(ex.forward_layers({&probe, 1}, g.n_layer + 1), std::invalid_argument);
  ex.forward_layers({&probe, 1}, kApproxProbeLayers);
  ex.read_kv(other_runs, kp.data(), vp.data());
  ex.read_kv(full_runs, kf.data(), vf.data());
  for (int l = 0; l < g.n_layer; ++l) {
    auto at = [&](const std::vector<uint16_t>& x) {
      return std::vector<uint16_t>(x.begin() + static_cast<ptrdiff_t>(l * layer_vals), x.begin() + static_cast<ptrdiff_t>((l + 1) * layer_vals));
    };
    if (l < kApproxProbeLayers) {
      EXPECT_EQ(at(kp), at(kf)) << "layer " << l;
      EXPECT_EQ(at(vp), at(vf)) << "layer " << l;
    } else {
      EXPECT_EQ(at(kp), at(k0)) << "layer " << l << " untouched";
      EXPECT_EQ(at(vp), at(v0)) << "layer " << l << " untouched";
    }
  }
  // read_kv of one layer is that layer's slice.
  std::vector<uint16_t> k1(layer_vals), v1(layer_vals);
  ex.read_kv(full_runs, k1.data(), v1.data(), 1);
  EXPECT_TRUE(std::equal(k1.begin(), k1.end(), kf.begin() + static_cast<ptrdiff_t>(layer_vals)));
  EXPECT_TRUE(std::equal(v1.begin(), v1.end(), vf.begin() + static_cast<ptrdiff_t>(layer_vals)));
  EXPECT_THROW(ex.read_kv(full_runs, k1.data(), v1.data(), g.n_layer), std::invalid_argument);
}

TEST(Approx, SelectDeviatingTakesTheWindowsOfLargestDeviation) {
  // Windows of 4 from position 100: sums 1, 10, 0, 7.5, 2 (the last window 2 tokens).
  const std::vector<double> dev = {0, 0, 1, 0, 9, 1, 0, 0, 0, 0, 0, 0, 0, 5, 2.5, 0, 1, 1};
  EXPECT_EQ(select_deviating(dev, 100, 4), (std::vector<TokenSpan>{{104, 108}}));
  EXPECT_EQ(select_deviating(dev, 100, 8), (std::vector<TokenSpan>{{104, 108}, {112, 116}}));
  // The budget ends inside a window: its contiguous tokens of the largest sum.
  EXPECT_EQ(select_deviating(dev, 100, 6), (std::vector<TokenSpan>{{104, 108}, {113, 115}}));
  // Adjacent windows merge (the last window here holds 2 tokens); all tokens; none.
  EXPECT_EQ(select_deviating(dev, 100, 13), (std::vector<TokenSpan>{{100, 103}, {104, 108}, {112, 118}}));
  EXPECT_EQ(select_deviating(dev, 100, 40), (std::vector<TokenSpan>{{100, 118}}));
  EXPECT_TRUE(select_deviating(dev, 100, 0).empty());
}

// ApproxSelect::Deviation chooses where the saved K/V deviates most from what the request's
// own context gives: the test computes that deviation itself from a cold exact prefill.
TEST(Approx, DeviationRecomputesTheTokensWhoseKvDeviatesMost) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  Rig rig(pkg, 1, 1 + kApproxSegmentSlots);
  exec::BackendModel& bm = rig.bm;
  Scheduler& sched = *rig.sched;
  const int nv = bm.executor->n_vocab();
  const kvcache::KvGeometry g = bm.executor->kv_geometry();
  const size_t kvw = static_cast<size_t>(g.kv_width());
  // Long tails: every atom position lies in a full (published) block in both prompts.
  const std::vector<int32_t> atom = tokens(150, 31, nv), tail = tokens(100, 32, nv);
  const std::vector<int32_t> p1 = cat({tokens(50, 33, nv), atom, tail}), p2 = cat({tokens(83, 34, nv), atom, tail});
  run(sched, p1, {{50, 200}}, "", ApproxSelect::Deviation);
  EXPECT_EQ(run(sched, p2, {}).cached, 0);  // the cold reference, exact mode
  const int recompute = static_cast<int>(std::ceil(kApproxRecompute * 150));  // 23: 2 first, 21 chosen
  const int begin = 83 + kApproxMinRecompute, end = 233, n = end - begin;
  std::vector<uint16_t> ks, vs, kc, vc, ka, va;
  cached_kv(bm, sched.approx_model(), p1, 1, 50 + kApproxMinRecompute, 200, ks, vs);  // saved, old positions
  cached_kv(bm, bm.kv->model(), p2, 1, begin, end, kc, vc);                           // cold, new positions
  const kvcache::RopeDelta rot(g, 83 - 50);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < g.n_head_kv; ++h) kvcache::rerotate_head(ks.data() + t * kvw + static_cast<size_t>(h) * g.head_dim, g, rot);
  auto sq = [&](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int t) {
    double e = 0;
    for (size_t d = 0; d < kvw; ++d) {
      const double x = ggml::fp16_to_fp32(a[t * kvw + d]) - ggml::fp16_to_fp32(b[t * kvw + d]);
      e += x * x;
    }
    return e;
  };
  std::vector<double> dev(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) dev[static_cast<size_t>(t)] = sq(kc, ks, t) + sq(vc, vs, t);
  const std::vector<TokenSpan> want = select_deviating(dev, begin, recompute - kApproxMinRecompute);
  ASSERT_NE(want, (std::vector<TokenSpan>{{begin, begin + recompute - kApproxMinRecompute}})) << "not simply the head";

  const uint64_t hits0 = sched.hit_tokens();
  const Counts c = run(sched, p2, {{83, 233}}, "", ApproxSelect::Deviation);
  EXPECT_EQ(c.cached, 150 - recompute);
  EXPECT_EQ(c.approx, 150 - recompute);
  EXPECT_EQ(sched.hit_tokens() - hits0, static_cast<uint64_t>(150 - recompute)) << "installed less the recomputed runs";
  cached_kv(bm, sched.approx_model(), p2, 1, begin, end, ka, va);
  int chosen = 0;
  for (int t = 0; t < n; ++t) {
    const int p = begin + t;
    const bool in = std::any_of(want.begin(), want.end(), [&](const TokenSpan& r) { return r.begin <= p && p < r.end; });
    if (in) {
      ++chosen;
      // Recomputed with this context: nearer the cold K/V than the saved one.
      EXPECT_LT(sq(ka, kc, t) + sq(va, vc, t), dev[static_cast<size_t>(t)]) << "position " << p;
    } else {
      // The saved K/V moved: V bitwise, K as rotated (bitwise on the cpu backend, whose
      // move rotates with rerotate_head as this test did).
      expect_k_near(ka.data() + t * kvw, ks.data() + t * kvw, g, p);
      if (bm.executor->device().backend == "cpu") {
        EXPECT_TRUE(std::equal(ka.begin() + t * kvw, ka.begin() + (t + 1) * kvw, ks.begin() + t * kvw)) << "position " << p;
      }
      EXPECT_TRUE(std::equal(va.begin() + t * kvw, va.begin() + (t + 1) * kvw, vs.begin() + t * kvw)) << "position " << p;
    }
  }
  EXPECT_EQ(chosen, recompute - kApproxMinRecompute);
}

// Deviation runs longer than a pass's rows go on in the next pass: 99% of a 300-token atom
// recomputed (295 tokens chosen after the first 2) on a scheduler of 256 rows a pass. The
// probe over the 345 prompt positions up to the atom's end runs in passes of at most the
// model's max_rows (256 here): two, 256 rows and 89; its rows count against the step's
// budget at kApproxProbeLayers / n_layer of a row each.
TEST(Approx, DeviationRunsLongerThanAPassSpanPasses) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  Rig rig(pkg, 1, 1 + kApproxSegmentSlots);
  Scheduler& sched = *rig.sched;
  const int nv = rig.bm.executor->n_vocab();
  const std::vector<int32_t> atom = tokens(300, 41, nv), tail = tokens(30, 42, nv);
  const std::vector<int32_t> p1 = cat({tokens(20, 43, nv), atom, tail}), p2 = cat({tokens(45, 44, nv), atom, tail});
  run(sched, p1, {{20, 320}}, "", ApproxSelect::Deviation);
  GenerateRequest r;
  r.prompt = p2;
  r.max_tokens = 1;
  r.sampling.temperature = 0;
  r.approx_atoms = {{45, 345}};
  r.approx_recompute = 0.99f;
  r.approx_select = ApproxSelect::Deviation;
  std::unique_ptr<Admission> a = sched.admit(r);
  EXPECT_EQ(a->cached_tokens(), 300 - 297);
  const SchedulerStats st0 = sched.stats();
  const uint64_t hits0 = sched.hit_tokens(), steps0 = st0.steps;
  const GenerateResult res = sched.run(*a, {});
  EXPECT_EQ(res.completion_tokens, 1);
  EXPECT_EQ(sched.hit_tokens() - hits0, 3u);
  EXPECT_EQ(sched.stats().probe_passes - st0.probe_passes, 2u);
  EXPECT_EQ(sched.stats().probe_rows - st0.probe_rows, 345u);
  // 375 prompt rows less 3 installed: at least 2 passes of 256 rows.
  EXPECT_GE(sched.stats().steps - steps0, 2u);
}

}  // namespace
}  // namespace swz::engine
