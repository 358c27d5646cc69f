// swz-bench: llama-bench style throughput of a package on its target's backend (cpu,
// cuda, vulkan: exec::open_backend_model, as the engine opens it).
//   swz-bench PACKAGE [--pp 512] [--tg 128] [--depth 0] [--reps 5] [-t threads]
//   --depth D: the tg decodes run after a D-token prompt (untimed), as llama-bench's -d
//   ("tg128 @ d2048"): decode speed with a long context in the KV cache.
// pp<N>: one forward over N prompt tokens (chunked at 512 like the engine) from an empty
// KV cache, logits for the last token only. tg<N>: N single-token forwards from an empty
// KV cache (llama-bench's definition). Prints JSON: per-rep seconds and tokens/s medians.
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
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: swz-bench PACKAGE [--pp N] [--tg N] [--depth N] [--reps N] [-t threads]\n";
    return 2;
  }
  int pp = 512, tg = 128, depth = 0, reps = 5, threads = 0;
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
    else if (a == "--reps") reps = v;
    else if (a == "-t") threads = v;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  if (pp < 1 || tg < 1 || reps < 1 || threads < 0) {
    std::cerr << "--pp, --tg and --reps must be >= 1, -t >= 0\n";
    return 2;
  }
  try {
    auto pkg = swz::package::open_package(argv[1]);
    const int n_ctx_model = std::max(pp, depth + tg) + 8;
    swz::kvcache::CacheOptions kv_opts;  // a plain paged KV cache for one sequence
    kv_opts.n_pages = (n_ctx_model + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens + 1;
    kv_opts.prefix_cache = false;
    swz::exec::BackendModel bm = swz::exec::open_backend_model(pkg, n_ctx_model, std::move(kv_opts), "", threads);
    swz::exec::SequenceModel& model = *bm.model;
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> dist(0, model.n_vocab() - 1);
    std::vector<int32_t> prompt(pp);
    for (auto& t : prompt) t = dist(rng);
    std::vector<int32_t> depth_prompt(depth);
    for (auto& t : depth_prompt) t = dist(rng);
    std::vector<float> logits;
    using Clock = std::chrono::steady_clock;
    std::vector<double> pp_s, tg_s;
    for (int r = 0; r < reps + 1; ++r) {  // first rep warms up (page cache, thread pool)
      model.truncate(0);
      auto t0 = Clock::now();
      for (int i = 0; i < pp; i += 512) model.forward(prompt.data() + i, std::min(512, pp - i), 1, swz::exec::SequenceModel::Rows::Prompt, logits);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r) pp_s.push_back(s);
      model.truncate(0);
      for (int i = 0; i < depth; i += 512)
        model.forward(depth_prompt.data() + i, std::min(512, depth - i), 1, swz::exec::SequenceModel::Rows::Prompt, logits);
      int32_t tok = prompt[0];
      t0 = Clock::now();
      for (int i = 0; i < tg; ++i) {
        model.forward(&tok, 1, 1, swz::exec::SequenceModel::Rows::Generated, logits);
        tok = prompt[(i + 1) % pp];
      }
      s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r) tg_s.push_back(s);
    }
    nlohmann::json out = {{"backend", bm.backend},
                          {"threads", pkg.manifest.target == "cpu" ? (threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency())) : 0},
                          {"pp", pp},
                          {"tg", tg},
                          {"depth", depth},
                          {"pp_seconds", pp_s},
                          {"tg_seconds", tg_s},
                          {"pp_tok_s", pp / median(pp_s)},
                          {"tg_tok_s", tg / median(tg_s)}};
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "swz-bench: " << e.what() << "\n";
    return 1;
  }
}
