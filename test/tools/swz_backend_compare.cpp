// swz-backend-compare: end-to-end correctness of a GPU package (sm_*, spirv) against the
// cpu backend on the same GGUF.
//
//   swz-backend-compare CPU_PKG GPU_PKG [-n 32] [--prompts 4] [--tol 0.1] [--tie 0.25] [--json OUT]
//
// For each built-in prompt (code and chat text, tokenized with the model's tokenizer):
// the cpu package is prefilled and decoded greedily for n tokens (the reference path);
// the GPU package is prefilled with the same prompt and then fed the cpu's tokens one
// per forward pass (teacher forcing), so its logits are compared at every position of
// the same path. Greedy decoding on the GPU gives the cpu's tokens exactly as long as its
// argmax agrees at every position, so `first_diff` is the first generated token where a
// free-running GPU greedy decode would differ (-1: none in n).
// Per position: err = rms_i(gpu_i - cpu_i) / std(cpu), the normalised logit error (and,
// reported, the max over the vocabulary). The GPU kernels do not round activations to Q8
// before each matmul as the cpu backend (llama.cpp's CPU order) does, and prefill GEMMs
// take f16 activations: the two differ by that rounding, compounded over the layers. A
// prompt passes when, up to the first difference, the mean of err is <= tol and every
// err <= 5 tol (on lavapipe, SmolLM2: mean 0.03-0.07, isolated positions up to 0.33, where
// a token's activations are large and Q8 rounding of them loses most), and, if the tokens
// differ there, the cpu's top-2 gap at that position is below `tie` x std (a near-tie
// that such rounding may flip). Exit 0 if every prompt passes, 1 otherwise.
//
// Prompt rows must not depend on the pass either: a prompt's last rows run again on its
// cold KV (a prefix-cache hit: the last 1 and 100 of split + 44 tokens, 1 of 50; a row of
// one split against the same row with an empty second one) give the cold logits (chunk_check).
//
// Each decode step is also run with greedy sampling on the device (forward_argmax, what a
// greedy decode step of the engine runs), and so is one 8-row pass as a speculative
// verification runs it: each token id must equal the host argmax of the same row's
// logits (counted; any difference fails the run).
//
// Both packages are opened as the engine opens them (exec::open_backend_model): the GPU
// one through backend::create_backend, exec::GraphExecutor and exec::GraphModel over a
// kvcache::BlockManager whose pages live on the device.
#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "exec/backend_model.h"
#include "package/package.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using Rows = swz::exec::SequenceModel::Rows;

const char* kPrompts[] = {
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The capital of France is",
    "#include <stdio.h>\n\nint main(void) {\n    printf(",
    "User: Write a haiku about the sea.\nAssistant:",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "In 1905, Albert Einstein published four papers that",
    "SELECT name, COUNT(*) FROM orders JOIN customers ON",
    "fn main() {\n    let v: Vec<i32> = (1..10).collect();\n",
};

struct Model {
  std::unique_ptr<swz::package::LoadedPackage> pkg;
  swz::exec::BackendModel bm;
};

/// A package on its target's backend with a plain paged KV cache (no prefix cache), as
/// the engine opens it; the GPU executor takes up to 8 sequences a pass (batch_check).
/// Pages: 9 sequences of up to 512 positions (the compared one and batch_check's), or one
/// of n_ctx (chunk_check), whichever is more.
std::unique_ptr<Model> open(const std::string& path, int n_ctx) {
  auto r = std::make_unique<Model>();
  r->pkg = std::make_unique<swz::package::LoadedPackage>(swz::package::open_package(path));
  swz::kvcache::CacheOptions co;
  const int per_seq = 512 / swz::kvcache::kBlockTokens + 1;
  co.n_pages = std::max(9 * per_seq, (n_ctx + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens + 1);
  co.prefix_cache = false;
  r->bm = swz::exec::open_backend_model(*r->pkg, n_ctx, std::move(co), "", 0, 512, 8);
  return r;
}

/// Batch invariance of the executor (exec::GraphExecutor::forward over several sequences,
/// the continuous-batching path): `prompts` prefilled together in one pass, the
/// generated token of half of them, a mixed pass (prompt rows of some sequences beside
/// decode rows of others, in reverse order), then the rest; each sequence's logits
/// compared with the same sequence run alone. On the H200 every row is bit-identical;
/// lavapipe's results move with the batch (the real SmolLM2: up to 1.8e-3 x std after 30
/// layers), so the bound is kBatchTol x std(logits), far below what a wrong row, offset or
/// block table gives (O(1)); bitwise differences are printed. Returns the
/// number of differing rows when the bound is broken, else 0.
constexpr double kBatchTol = 1e-2;

/// How far a logits row `got` [nv] is from `ref` [nv]: max |got - ref| and std(ref), both
/// over the vocabulary (the bound kBatchTol applies to their ratio).
struct RowError {
  double max_abs = 0, std = 0;
};
RowError row_error(const float* got, const float* ref, int nv) {
  double d = 0, mean = 0, var = 0;
  for (int v = 0; v < nv; ++v) mean += ref[v] / nv;
  for (int v = 0; v < nv; ++v) {
    d = std::max(d, std::fabs(static_cast<double>(got[v]) - ref[v]));
    var += (ref[v] - mean) * (ref[v] - mean) / nv;
  }
  return {d, std::sqrt(var)};
}

long batch_check(Model& gpu, const std::vector<std::vector<int32_t>>& prompts, int nv) {
  swz::exec::GraphExecutor& ex = *gpu.bm.executor;
  swz::kvcache::BlockManager& kv = *gpu.bm.kv;
  const int n = static_cast<int>(std::min<size_t>(prompts.size(), ex.options().max_seqs));
  struct Seq {
    std::vector<int32_t> tokens;  // prompt, then the decode token, then the second chunk
    std::vector<int> pages;
  };
  auto pages_for = [&](int positions) {
    std::vector<int> p((positions + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens);
    for (int& x : p) x = kv.alloc_page();
    return p;
  };
  // Each sequence: its prompt (Prompt rows), one generated token (Generated), then 5 more
  // prompt-like tokens as a second chunk (Prompt rows at pos0 > 0).
  std::vector<Seq> seqs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    seqs[i].tokens = prompts[i];
    seqs[i].tokens.push_back(prompts[i][0]);
    for (int j = 0; j < 5; ++j) seqs[i].tokens.push_back(prompts[i][static_cast<size_t>(j) % prompts[i].size()]);
  }
  using swz::exec::SequenceStep;
  auto step = [&](Seq& q, int from, int count, Rows rows) {
    SequenceStep st;
    st.tokens = q.tokens.data() + from;
    st.n_tokens = count;
    st.pos0 = from;
    st.block_table = q.pages.data();
    st.n_blocks = static_cast<int>(q.pages.size());
    st.n_out = 1;
    st.rows = rows;
    return st;
  };
  // The three passes of one sequence alone: logits rows [3][nv].
  std::vector<std::vector<float>> alone(static_cast<size_t>(n));
  std::vector<float> l;
  for (int i = 0; i < n; ++i) {
    Seq& q = seqs[i];
    const int np = static_cast<int>(prompts[i].size());
    q.pages = pages_for(static_cast<int>(q.tokens.size()));
    SequenceStep a = step(q, 0, np, Rows::Prompt), b = step(q, np, 1, Rows::Generated), c = step(q, np + 1, 5, Rows::Prompt);
    for (const SequenceStep& st : {a, b, c}) {
      ex.forward(std::span<const SequenceStep>(&st, 1), l);
      alone[i].insert(alone[i].end(), l.begin(), l.end());
    }
    for (int p : q.pages) kv.unref_page(p);
  }
  long differ = 0, rows = 0;
  double worst = 0;  // max |batched - alone| / std(alone) over all rows
  // `got` row r is sequence which[r]'s row of kind `kinds[r]` (0 prompt, 1 generated, 2 chunk).
  auto compare = [&](const std::vector<float>& got, const std::vector<int>& which, const std::vector<int>& kinds) {
    for (size_t r = 0; r < which.size(); ++r, ++rows) {
      const float* a = got.data() + r * nv;
      const float* b = alone[which[r]].data() + static_cast<size_t>(kinds[r]) * nv;
      if (std::memcmp(a, b, sizeof(float) * nv) == 0) continue;
      ++differ;
      const RowError e = row_error(a, b, nv);
      worst = std::max(worst, e.max_abs / e.std);
      std::printf("  batch: sequence %d, %s row: max |batched - alone| = %.3g (%.3g x std)\n", which[r],
                  kinds[r] == 0 ? "prompt" : kinds[r] == 1 ? "generated" : "second-chunk", e.max_abs, e.max_abs / e.std);
    }
  };
  for (Seq& q : seqs) q.pages = pages_for(static_cast<int>(q.tokens.size()));
  auto np = [&](int i) { return static_cast<int>(prompts[i].size()); };
  std::vector<SequenceStep> batch;
  std::vector<int> which, kinds;
  auto run = [&] {
    ex.forward(batch, l);
    compare(l, which, kinds);
    batch.clear(), which.clear(), kinds.clear();
  };
  // 1. every prompt together; 2. the even sequences' generated token; 3. a mixed pass, in
  // reverse order: the even sequences' second chunk (prompt rows) with the odd ones'
  // generated token (decode rows); 4. the odd sequences' second chunk.
  for (int i = 0; i < n; ++i) batch.push_back(step(seqs[i], 0, np(i), Rows::Prompt)), which.push_back(i), kinds.push_back(0);
  run();
  for (int i = 0; i < n; i += 2) batch.push_back(step(seqs[i], np(i), 1, Rows::Generated)), which.push_back(i), kinds.push_back(1);
  run();
  for (int i = n - 1; i >= 0; --i) {
    if (i % 2 == 0) batch.push_back(step(seqs[i], np(i) + 1, 5, Rows::Prompt)), kinds.push_back(2);
    else batch.push_back(step(seqs[i], np(i), 1, Rows::Generated)), kinds.push_back(1);
    which.push_back(i);
  }
  run();
  for (int i = 1; i < n; i += 2) batch.push_back(step(seqs[i], np(i) + 1, 5, Rows::Prompt)), which.push_back(i), kinds.push_back(2);
  if (!batch.empty()) run();
  for (Seq& q : seqs)
    for (int p : q.pages) kv.unref_page(p);
  std::printf("batch invariance: %d sequences, prompt / generated / mixed passes: %ld of %ld logits rows differ from the "
              "sequence run alone (bitwise), worst %.3g x std (bound %.3g)\n", n, differ, rows, worst, kBatchTol);
  return worst <= kBatchTol ? 0 : differ;
}

/// Prompt rows whatever the pass size, as a prefix-cache hit uses them: a prompt (the
/// prompts' tokens, repeated) prefilled cold (in passes of the executor's 512 rows, as
/// the engine runs a long prompt) through every layer, then its
/// last rows run again in a pass of their own over the cold KV of the rows before
/// them (the cached prefix); the last row's logits compared with the cold run's.
/// `split` is the package's prefill attention split length at this executor's context
/// (launch_bindings.cpp prefillSplitLen: 256 keys on spirv, 2,048 on sm_*):
///  * split + 44 tokens, the last 1 again: the one row attends in 2 splits, as in the cold
///    pass: each row's splits are fixed by its keys, not by the pass (until the eighteenth
///    session the split count followed the pass's rows, and on the H200 all 152,064
///    logits of 99 + 1 differed, by up to 0.014 x std: bench/RESULTS.md);
///  * the same, the last 100 again: rows before `split` with an empty second split, the
///    rest with two;
///  * 50 tokens, the last 1 again: one split; on PTX packages the one row goes through the
///    skinny GEMM (gemm.skinny_max_rows 1) against dequant + gemm_f16 in the cold pass;
///  * the long prompt's cold prefill has a pass boundary at split - 56, so that pass's
///    context is one split (the flash kernel writes the output itself); its last row
///    again in a pass to split + 44 (2 splits, the second empty for that row: through
///    attention_split_reduce), that row compared.
/// Returns the number of differing elements of the compared rows when they differ by more
/// than kBatchTol x std (bitwise differences are printed; on the H200 none may), else 0.
long chunk_check(Model& gpu, const std::vector<std::vector<int32_t>>& prompts, int nv, int split) {
  swz::exec::GraphExecutor& ex = *gpu.bm.executor;
  swz::kvcache::BlockManager& kv = *gpu.bm.kv;
  const int long_n = split + 44, max_rows = ex.options().max_rows;
  if (long_n > ex.options().n_ctx || split - 56 < 50)
    throw std::runtime_error("chunk_check: a prefill split of " + std::to_string(split) + " keys needs a context of " +
                             std::to_string(long_n) + " (this tool opens " + std::to_string(ex.options().n_ctx) +
                             ") and more than 106 keys");
  std::vector<int32_t> toks;
  for (size_t i = 0; static_cast<int>(toks.size()) < long_n; ++i)
    for (int32_t t : prompts[i % prompts.size()])
      if (static_cast<int>(toks.size()) < long_n) toks.push_back(t);
  std::vector<int> pages((toks.size() + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens);
  for (int& p : pages) p = kv.alloc_page();
  // Rows [pos0, pos0 + n) in one pass; the logits of its last n_out rows into `out`.
  auto pass = [&](int pos0, int n, int n_out, std::vector<float>& out) {
    swz::exec::SequenceStep st;
    st.tokens = toks.data() + pos0;
    st.n_tokens = n;
    st.pos0 = pos0;
    st.block_table = pages.data();
    st.n_blocks = static_cast<int>(pages.size());
    st.n_out = n_out;
    st.rows = Rows::Prompt;
    ex.forward(std::span<const swz::exec::SequenceStep>(&st, 1), out);
  };
  // Prefills [0, n) cold, as the engine would in passes of at most max_rows, with a pass
  // boundary at `cut` too; the last row's logits of the pass ending at `cut` into
  // `at_cut`, of the last pass into `last`.
  auto prefill = [&](int n, int cut, std::vector<float>& at_cut, std::vector<float>& last) {
    for (int p0 = 0; p0 < n;) {
      const int end = std::min(p0 + max_rows, p0 < cut ? cut : n);
      pass(p0, end - p0, 1, end == cut ? at_cut : last);
      p0 = end;
    }
  };
  // Each case: rows [from, to) again in one pass on the cold KV before them, the row at
  // `row` compared with its cold logits.
  struct Case {
    const std::vector<float>* cold;
    int from, to, row;
    const char* what;
  };
  // The long prompt cold in two parts: [0, direct) has a context of one split (the flash
  // kernel writes its rows itself), then the rest (two splits).
  const int direct = split - 56;
  std::vector<float> cold_direct, cold_last, cold_short, unused, warm;
  prefill(long_n, direct, cold_direct, cold_last);
  const std::vector<Case> long_cases = {
      {&cold_last, long_n - 1, long_n, long_n - 1, "the last 1 again (2 splits in both)"},
      {&cold_last, long_n - 100, long_n, long_n - 1,
       "the last 100 again (rows before the split length: an empty second split)"},
      {&cold_direct, direct - 1, long_n, direct - 1,
       "the row before the second part again with it (cold: one split, written directly; again: 2 splits, the "
       "second empty for it, through the reduction)"}};
  long bad = 0;
  auto check = [&](const Case& c, int cold_n) {
    pass(c.from, c.to - c.from, c.to - c.from, warm);
    const float* w = warm.data() + static_cast<size_t>(c.row - c.from) * nv;  // the compared row's logits
    const std::vector<float>& ref = *c.cold;
    long differ = 0;
    for (int v = 0; v < nv; ++v) differ += std::memcmp(&ref[v], &w[v], sizeof(float)) != 0;
    const RowError e = row_error(w, ref.data(), nv);
    const double worst = e.max_abs / e.std;
    std::printf("prompt tail: %d tokens cold, %s: %ld of %d logits differ (bitwise), worst %.3g x std (bound %.3g)\n",
                cold_n, c.what, differ, nv, worst, kBatchTol);
    if (worst > kBatchTol) bad += differ;
  };
  for (const Case& c : long_cases) check(c, long_n);
  prefill(50, 50, cold_short, unused);
  check({&cold_short, 49, 50, 49, "the last 1 again (one split; PTX: the skinny GEMM against dequant + gemm_f16)"}, 50);
  for (int p : pages) kv.unref_page(p);
  return bad;
}

int usage() {
  std::fprintf(stderr, "usage: swz-backend-compare CPU_PKG GPU_PKG [-n N] [--prompts K] [--tol X] [--tie Y] [--json OUT]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string cpu_path = argv[1], gpu_path = argv[2];
  int n = 32, n_prompts = 4;
  double tol = 0.1, tie = 0.25;
  std::string json_path;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "-n") n = std::atoi(argv[++i]);
    else if (a == "--prompts") n_prompts = std::atoi(argv[++i]);
    else if (a == "--tol") tol = std::atof(argv[++i]);
    else if (a == "--tie") tie = std::atof(argv[++i]);
    else if (a == "--json") json_path = argv[++i];
    else return usage();
  }
  n_prompts = std::clamp(n_prompts, 1, static_cast<int>(std::size(kPrompts)));
  try {
    // 4,096 positions: room for chunk_check's prompt past the first prefill split.
    const int n_ctx = 4096;
    auto cpu = open(cpu_path, n_ctx);
    auto gpu = open(gpu_path, n_ctx);
    if (cpu->pkg->manifest.source_gguf.digest != gpu->pkg->manifest.source_gguf.digest)
      throw std::runtime_error("the two packages were compiled from different GGUFs");
    std::printf("cpu: %s\ngpu: %s (%s)\n", cpu_path.c_str(), gpu_path.c_str(), gpu->bm.backend.c_str());
    auto tok = swz::tokenizer::Tokenizer::from_gguf(cpu->pkg->gguf);
    const int nv = cpu->bm.model->n_vocab();
    json report = json::array();
    bool all_pass = true;
    long argmax_checked = 0, argmax_differ = 0;
    std::vector<int32_t> ids;
    std::printf("%-3s %-7s %-10s %-10s %-10s %-12s %-12s %-10s %s\n", "#", "prompt", "first_diff", "mean_err", "max_err",
                "max_abs_err", "err_at_diff", "gap/std", "verdict");
    for (int p = 0; p < n_prompts; ++p) {
      const std::vector<int32_t> prompt = tok.encode(kPrompts[p], true, false);
      std::vector<float> lc, lg;
      cpu->bm.model->release();
      gpu->bm.model->release();
      cpu->bm.model->forward(prompt.data(), static_cast<int>(prompt.size()), 1, Rows::Prompt, lc);
      gpu->bm.model->forward(prompt.data(), static_cast<int>(prompt.size()), 1, Rows::Prompt, lg);
      int first_diff = -1;
      double max_err = 0, err_at_diff = 0, gap_at_diff = 0, worst_abs = 0;
      std::vector<int32_t> tokens;
      std::vector<double> errs;
      for (int i = 0; i < n; ++i) {
        double mean = 0, var = 0, maxd = 0, sq = 0;
        for (int v = 0; v < nv; ++v) mean += lc[v];
        mean /= nv;
        for (int v = 0; v < nv; ++v) {
          var += (lc[v] - mean) * (lc[v] - mean);
          const double d = std::fabs(static_cast<double>(lg[v]) - lc[v]);
          maxd = std::isfinite(lg[v]) ? std::max(maxd, d) : INFINITY;
          sq += d * d;
        }
        const double sd = std::sqrt(var / nv);
        const double err = std::sqrt(sq / nv) / sd;
        if (first_diff < 0) worst_abs = std::max(worst_abs, maxd / sd);
        errs.push_back(std::isfinite(maxd) ? err : INFINITY);
        const int32_t tc = swz::engine::argmax(lc.data(), nv), tg = swz::engine::argmax(lg.data(), nv);
        if (first_diff < 0) max_err = std::max(max_err, err);
        if (tc != tg && first_diff < 0) {
          first_diff = i;
          err_at_diff = err;
          std::vector<float> sorted(lc);
          std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
          gap_at_diff = (sorted[0] - sorted[1]) / sd;
        }
        tokens.push_back(tc);
        if (i + 1 < n) {
          cpu->bm.model->forward(&tc, 1, 1, Rows::Generated, lc);
          gpu->bm.model->forward(&tc, 1, 1, Rows::Generated, lg);
          // The same pass with greedy sampling on the device (what a greedy decode step
          // runs): its token id must be the host argmax of the logits just copied back.
          swz::exec::SequenceModel& g = *gpu->bm.model;
          g.truncate(g.n_past() - 1);
          if (g.forward_argmax(&tc, 1, 1, Rows::Generated, ids)) {
            ++argmax_checked;
            if (ids.at(0) != swz::engine::argmax(lg.data(), nv)) ++argmax_differ;
          } else {
            g.forward(&tc, 1, 1, Rows::Generated, lg);
          }
        }
      }
      const size_t upto = first_diff < 0 ? errs.size() : static_cast<size_t>(first_diff) + 1;
      double mean_err = 0;
      for (size_t k = 0; k < upto; ++k) mean_err += errs[k] / static_cast<double>(upto);
      const bool pass = mean_err <= tol && max_err <= 5 * tol && (first_diff < 0 || gap_at_diff <= tie);
      all_pass &= pass;
      std::printf("%-3d %-7zu %-10d %-10.4g %-10.4g %-12.4g %-12.4g %-10.3g %s\n", p, prompt.size(), first_diff, mean_err,
                  max_err, worst_abs, err_at_diff, gap_at_diff, pass ? "pass" : "FAIL");
      report.push_back({{"prompt", kPrompts[p]},
                        {"prompt_tokens", prompt.size()},
                        {"tokens", tokens},
                        {"text", tok.decode(tokens)},
                        {"first_diff", first_diff},
                        {"mean_err_until_diff", mean_err},
                        {"max_err_until_diff", max_err},
                        {"max_abs_err_until_diff", worst_abs},
                        {"err_per_position", errs},
                        {"gap_over_std_at_diff", gap_at_diff},
                        {"pass", pass}});
    }
    // Several rows in one pass, as a speculative verification runs them: the last prompt's
    // first 8 generated tokens fed at once (Generated rows, n_out = 8).
    {
      swz::exec::SequenceModel& g = *gpu->bm.model;
      const std::vector<int32_t> t = report.back()["tokens"].get<std::vector<int32_t>>();
      const int k = std::min<int>(8, static_cast<int>(t.size()));
      if (k > 1) {
        const std::vector<int32_t> prompt = tok.encode(kPrompts[n_prompts - 1], true, false);
        std::vector<float> rows;
        g.release();
        g.forward(prompt.data(), static_cast<int>(prompt.size()), 1, Rows::Prompt, rows);
        const int n0 = g.n_past();
        g.forward(t.data(), k, k, Rows::Generated, rows);
        g.truncate(n0);
        if (g.forward_argmax(t.data(), k, k, Rows::Generated, ids)) {
          for (int r = 0; r < k; ++r, ++argmax_checked)
            if (ids.at(static_cast<size_t>(r)) != swz::engine::argmax(rows.data() + static_cast<size_t>(r) * nv, nv))
              ++argmax_differ;
        }
      }
    }
    std::printf("device argmax: %ld of %ld rows (decode steps, and one 8-row verification pass) differ from the host "
                "argmax of the same logits\n", argmax_differ, argmax_checked);
    all_pass &= argmax_differ == 0;
    std::vector<std::vector<int32_t>> batch_prompts;
    for (int p = 0; p < n_prompts; ++p) batch_prompts.push_back(tok.encode(kPrompts[p], true, false));
    gpu->bm.model->release();
    const long batch_differ = batch_check(*gpu, batch_prompts, nv);
    all_pass &= batch_differ == 0;
    const long chunk_differ = chunk_check(*gpu, batch_prompts, nv, static_cast<int>(swz::package::prefill_split_len(gpu->pkg->manifest, n_ctx)));
    all_pass &= chunk_differ == 0;
    std::printf("%s: %d prompts x %d tokens; rms logit error / std(logits) up to the first difference: mean <= %.3g, each <= "
                "%.3g; a difference only at a near-tie (top-2 gap <= %.3g x std)\n", all_pass ? "PASS" : "FAIL", n_prompts, n, tol,
                5 * tol, tie);
    if (!json_path.empty())
      std::ofstream(json_path) << json{{"cpu", cpu_path}, {"gpu", gpu_path}, {"tol", tol}, {"tie", tie},
                                       {"device_argmax_checked", argmax_checked}, {"device_argmax_differ", argmax_differ},
                                       {"batch_rows_differ", batch_differ},
                                       {"chunk_logits_differ", chunk_differ},
                                       {"prompts", report}}
                                      .dump(1, ' ', false, json::error_handler_t::replace);  // a token may end mid-character
    return all_pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
