// swz-bench: llama-bench style throughput of a package on its target's backend (cpu,
// cuda, vulkan: exec::open_backend_model, as the engine opens it).
//   swz-bench PACKAGE [--pp 512] [--tg 128] [--depth 0] [--pp-depth 0] [--reps 5] [-t threads] [--seqs S]
//             [--ubatch 512] [--ctx N] [--max-seqs 1]
//   --depth D: the tg decodes run after a D-token prompt (untimed), as llama-bench's -d
//   ("tg128 @ d2048"): decode speed with a long context in the KV cache.
//   --pp-depth D: the pp prompt is timed after a D-token prompt (untimed), as llama-bench's
//   -d does for pp ("pp64 @ d32704"): the prefill a prefix-cache hit leaves, e.g. the warm
//   TTFT of a 32k-token prompt whose last 64-token block was edited.
// pp<N>: one forward over N prompt tokens (in passes of --ubatch, 512 as the engine) from an empty
// KV cache, logits for the last token only. tg<N>: N single-token forwards from an empty
// KV cache (llama-bench's definition), each token the greedy pick of the step before
// (device argmax where the package has it, as the server's greedy path; else host logits).
// --seqs S (S >= 1): aggregate decode of S sequences in one batch, as llama-batched-bench's
// S_TG: each sequence gets its own pp-token prompt (untimed), then tg steps decode all S
// together (one forward pass per step); reports S * tg / seconds.
// --ubatch U: prompts go in passes of U tokens (the executor's row budget: the server's
// --batch-tokens, llama-bench's -ub); --ctx N and --max-seqs S open the executor as a
// server with --ctx N --parallel S does (its scratch sized for them), so a server's
// chunked prefill can be timed pass by pass (pp_host_ms_per_pass, pp_wait_ms_per_pass).
// Prints JSON: per-rep seconds and tokens/s medians; for the tg steps also the medians of
// tg_host_us_per_step (microseconds a step spends on the host before everything is
// launched: with an asynchronous device, time it sits idle) and tg_wait_us_per_step
// (from there until the token ids are back), from GraphExecutor::pass_times().
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "exec/backend_model.h"
#include "package/package.h"

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
using Clock = std::chrono::steady_clock;

/// Medians over the reps of the executor's pass times (GraphExecutor::pass_times), a pass's
/// host time (before everything is launched: the device idle meanwhile) and wait (until the
/// results are back), in seconds x `scale`, as out[host_key] and out[wait_key]: the tg
/// steps' tg_host_us_per_step / tg_wait_us_per_step, the pp passes' pp_*_ms_per_pass.
void add_pass_times(nlohmann::json& out, const std::vector<swz::exec::GraphExecutor::PassTimes>& t,
                    const char* host_key = "tg_host_us_per_step", const char* wait_key = "tg_wait_us_per_step",
                    double scale = 1e6) {
  std::vector<double> host, wait;
  for (const auto& p : t)
    if (p.passes) host.push_back(scale * p.host / p.passes), wait.push_back(scale * p.wait / p.passes);
  if (host.empty()) return;
  out[host_key] = median(host);
  out[wait_key] = median(wait);
}

/// --seqs: S sequences, each a pp-token prompt, then tg steps of all S together.
int batched(const char* path, int pp, int tg, int reps, int threads, int seqs) {
  try {
    auto pkg = swz::package::open_package(path);
    const int n_ctx = pp + tg + 8;
    const int pages_per_seq = (n_ctx + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens;
    swz::kvcache::CacheOptions kv_opts;
    kv_opts.n_pages = seqs * pages_per_seq + 1;
    kv_opts.prefix_cache = false;
    swz::exec::BackendModel bm =
        swz::exec::open_backend_model(pkg, n_ctx, std::move(kv_opts), "", threads, 512, std::max(seqs, 1));
    swz::exec::GraphExecutor& ex = *bm.executor;
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> dist(0, ex.n_vocab() - 1);
    // Pages k * pages_per_seq .. for sequence k, straight from the executor's pool.
    std::vector<std::vector<int>> tables(seqs);
    for (int k = 0; k < seqs; ++k)
      for (int p = 0; p < pages_per_seq; ++p) tables[k].push_back(k * pages_per_seq + p);
    std::vector<std::vector<int32_t>> prompts(seqs, std::vector<int32_t>(pp));
    for (auto& p : prompts)
      for (auto& t : p) t = dist(rng);
    std::vector<float> logits;
    std::vector<int32_t> ids;
    auto step = [&](std::vector<swz::exec::SequenceStep>& st) {
      if (ex.has_device_argmax()) {
        ex.forward(st, nullptr, &ids);
      } else {
        ex.forward(st, &logits, nullptr);
        ids.resize(st.size());
        for (size_t k = 0; k < st.size(); ++k) {
          const auto row = logits.begin() + static_cast<ptrdiff_t>(k) * ex.n_vocab();
          ids[k] = static_cast<int32_t>(std::max_element(row, row + ex.n_vocab()) - row);
        }
      }
    };
    std::vector<double> tg_s;
    std::vector<swz::exec::GraphExecutor::PassTimes> pass_times;  // per timed rep
    for (int r = 0; r < reps + 1; ++r) {  // the first rep warms up
      std::vector<int32_t> tok(seqs);
      for (int k = 0; k < seqs; ++k) {
        for (int i = 0; i < pp; i += 512) {
          std::vector<swz::exec::SequenceStep> st(1);
          st[0].tokens = prompts[k].data() + i;
          st[0].n_tokens = std::min(512, pp - i);
          st[0].pos0 = i;
          st[0].block_table = tables[k].data();
          st[0].n_blocks = (i + st[0].n_tokens + 63) / 64;
          st[0].rows = swz::exec::SequenceModel::Rows::Prompt;
          step(st);
          tok[k] = ids[0];
        }
      }
      std::vector<swz::exec::SequenceStep> st(seqs);
      ex.reset_pass_times();
      const auto t0 = Clock::now();
      for (int i = 0; i < tg; ++i) {
        for (int k = 0; k < seqs; ++k) {
          st[k].tokens = &tok[k];
          st[k].n_tokens = 1;
          st[k].pos0 = pp + i;
          st[k].block_table = tables[k].data();
          st[k].n_blocks = (pp + i + 1 + 63) / 64;
          st[k].rows = swz::exec::SequenceModel::Rows::Generated;
        }
        step(st);
        std::copy(ids.begin(), ids.end(), tok.begin());
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r) tg_s.push_back(s), pass_times.push_back(ex.pass_times());
    }
    nlohmann::json out = {{"backend", bm.backend}, {"seqs", seqs},  {"pp", pp},
                          {"tg", tg},              {"tg_seconds", tg_s},
                          {"batch_tg_tok_s", double(seqs) * tg / median(tg_s)}};
    add_pass_times(out, pass_times);
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "swz-bench: " << e.what() << "\n";
    return 1;
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: swz-bench PACKAGE [--pp N] [--tg N] [--depth N] [--pp-depth N] [--reps N] [-t threads] [--seqs S]"
                 " [--ubatch N] [--ctx N] [--max-seqs N]\n";
    return 2;
  }
  int pp = 512, tg = 128, depth = 0, pp_depth = 0, reps = 5, threads = 0, seqs = 0, ubatch = 512, ctx = 0, max_seqs = 1;
  for (int i = 2; i < argc; i += 2) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "option " << a << " needs a value\n";
      return 2;
    }
    int v = 0;
    try {
      v = std::stoi(argv[i + 1]);
    } catch (const std::exception&) {
      std::cerr << "option " << a << ": not a number: " << argv[i + 1] << "\n";
      return 2;
    }
    if (a == "--pp") pp = v;
    else if (a == "--tg") tg = v;
    else if (a == "--depth") depth = v;
    else if (a == "--pp-depth") pp_depth = v;
    else if (a == "--reps") reps = v;
    else if (a == "-t") threads = v;
    else if (a == "--seqs") seqs = v;
    else if (a == "--ubatch") ubatch = v;
    else if (a == "--ctx") ctx = v;
    else if (a == "--max-seqs") max_seqs = v;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  if (pp < 1 || tg < 1 || reps < 1 || threads < 0 || seqs < 0 || depth < 0 || pp_depth < 0 || ubatch < 1 || ctx < 0 ||
      max_seqs < 1) {
    std::cerr << "--pp, --tg, --reps, --ubatch and --max-seqs must be >= 1, -t, --seqs, --depth, --pp-depth and --ctx >= 0\n";
    return 2;
  }
  if (seqs > 0 && (ubatch != 512 || ctx || max_seqs != 1)) {
    std::cerr << "--seqs does not take --ubatch, --ctx or --max-seqs\n";
    return 2;
  }
  if (seqs > 0) return batched(argv[1], pp, tg, reps, threads, seqs);
  try {
    auto pkg = swz::package::open_package(argv[1]);
    const int n_need = std::max(pp_depth + pp, depth + tg) + 8;
    if (ctx && ctx < n_need) {
      std::cerr << "--ctx " << ctx << " is under the " << n_need << " positions the run needs\n";
      return 2;
    }
    const int n_ctx_model = ctx ? ctx : n_need;
    swz::kvcache::CacheOptions kv_opts;  // a plain paged KV cache for one sequence
    kv_opts.n_pages = (n_ctx_model + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens + 1;
    kv_opts.prefix_cache = false;
    swz::exec::BackendModel bm =
        swz::exec::open_backend_model(pkg, n_ctx_model, std::move(kv_opts), "", threads, ubatch, max_seqs);
    swz::exec::SequenceModel& model = *bm.model;
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> dist(0, model.n_vocab() - 1);
    std::vector<int32_t> prompt(pp);
    for (auto& t : prompt) t = dist(rng);
    std::vector<int32_t> depth_prompt(std::max(depth, pp_depth));
    for (auto& t : depth_prompt) t = dist(rng);
    std::vector<float> logits;
    // n prompt tokens appended to the sequence, in passes of ubatch tokens as the engine chunks them.
    auto prefill = [&](const int32_t* tokens, int n) {
      for (int i = 0; i < n; i += ubatch)
        model.forward(tokens + i, std::min(ubatch, n - i), 1, swz::exec::SequenceModel::Rows::Prompt, logits);
    };
    std::vector<double> pp_s, tg_s;
    std::vector<swz::exec::GraphExecutor::PassTimes> pass_times, pp_times;  // per timed tg / pp rep
    for (int r = 0; r < reps + 1; ++r) {  // first rep warms up (page cache, thread pool)
      model.truncate(0);
      prefill(depth_prompt.data(), pp_depth);  // untimed: the cached prefix
      if (bm.executor) bm.executor->reset_pass_times();
      auto t0 = Clock::now();
      prefill(prompt.data(), pp);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r) pp_s.push_back(s);
      if (r && bm.executor) pp_times.push_back(bm.executor->pass_times());
      model.truncate(0);
      prefill(depth_prompt.data(), depth);
      int32_t tok = prompt[0];
      std::vector<int32_t> ids;
      if (bm.executor) bm.executor->reset_pass_times();
      t0 = Clock::now();
      for (int i = 0; i < tg; ++i) {
        if (model.forward_argmax(&tok, 1, 1, swz::exec::SequenceModel::Rows::Generated, ids)) {
          tok = ids[0];
        } else {
          model.forward(&tok, 1, 1, swz::exec::SequenceModel::Rows::Generated, logits);
          tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        }
      }
      s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r) tg_s.push_back(s);
      if (r && bm.executor) pass_times.push_back(bm.executor->pass_times());
    }
    nlohmann::json out = {{"backend", bm.backend},
                          {"threads", pkg.manifest.target == "cpu" ? (threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency())) : 0},
                          {"pp", pp},
                          {"tg", tg},
                          {"depth", depth},
                          {"pp_depth", pp_depth},
                          {"ubatch", ubatch},
                          {"n_ctx", n_ctx_model},
                          {"max_seqs", max_seqs},
                          {"pp_seconds", pp_s},
                          {"tg_seconds", tg_s},
                          {"pp_tok_s", pp / median(pp_s)},
                          {"tg_tok_s", tg / median(tg_s)}};
    add_pass_times(out, pass_times);
    add_pass_times(out, pp_times, "pp_host_ms_per_pass", "pp_wait_ms_per_pass", 1e3);
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "swz-bench: " << e.what() << "\n";
    return 1;
  }
}
