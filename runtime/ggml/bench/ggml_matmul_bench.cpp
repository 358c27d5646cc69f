// Matmul throughput on SmolLM2-135M's shapes, decode (n_tokens = 1) and prefill (512).
//
// Usage: swz_ggml_matmul_bench [--threads N] [--tokens T] [--type q4_1] [--reps R] [--model]
// (--model: one whole decode/prefill step over distinct per-layer weights instead of per shape;
//  --arch qwen05: Qwen2.5-0.5B Q4_K_M shapes and types instead of SmolLM2-135M Q4_1; --model is SmolLM2 only)
// Prints, per shape, the median time and GFLOP/s (2*n_out*n_in*n_tokens flops, the
// activation quantization included), then an estimated forward step for the whole model
// (30 layers of q,k,v,o,gate,up,down + the Q8_0 output head).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml/matmul.h"
#include "ggml/quants.h"

using namespace swz::ggml;

namespace {

struct Shape {
  const char* name;
  int64_t n_out, n_in;
  int count;  // uses per layer (0 for the head)
  bool head;  // the output head (Q8_0 in both models)
  Type type;  // the real file's type (overridden by --type / --head-type)
};

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// With one thread the thread's CPU time is reported (robust on a shared machine); with more,
// wall time.
double bench_one(Type wt, int64_t n_out, int64_t n_in, int64_t n_tok, ThreadPool& pool, int reps) {
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> wf(static_cast<size_t>(n_in));
  std::vector<uint8_t> w(row_size(wt, n_in) * static_cast<size_t>(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    for (auto& v : wf) v = nd(rng) * 0.05f;
    quantize_row(wt, wf.data(), w.data() + r * row_size(wt, n_in), n_in);
  }
  std::vector<float> x(static_cast<size_t>(n_in * n_tok));
  for (auto& v : x) v = nd(rng);
  std::vector<float> y(static_cast<size_t>(n_out * n_tok));
  std::vector<uint8_t> scratch;
  matmul(w.data(), wt, n_out, n_in, x.data(), n_tok, y.data(), pool, scratch);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    matmul(w.data(), wt, n_out, n_in, x.data(), n_tok, y.data(), pool, scratch);
    const double c1 = cpu_now();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(pool.size() == 1 ? c1 - c0 : std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  // Fastest run: the machine's capability, least disturbed by other processes.
  return std::getenv("SWZ_BENCH_MEDIAN") ? times[times.size() / 2] : times[0];
}

// A decode step over distinct weights for every layer (SmolLM2-135M: 30 layers of q,k,v,o,
// gate,up,down + the 49152x576 head), so weights stream from DRAM as in a real forward pass.
void bench_model(Type wt, Type head, ThreadPool& pool, int64_t n_tok, int reps, bool fused) {
  struct Mat {
    int64_t n_out, n_in;
    Type t;
    std::vector<uint8_t> w;
  };
  std::vector<Mat> mats;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> ub(0, 255);
  auto add = [&](int64_t o, int64_t i, Type t) {
    Mat m{o, i, t, std::vector<uint8_t>(row_size(t, i) * static_cast<size_t>(o))};
    // Random bytes with small fp16 scales: valid blocks of any type.
    std::vector<float> row(static_cast<size_t>(i));
    std::normal_distribution<float> nd(0.f, 0.05f);
    for (int64_t r = 0; r < std::min<int64_t>(o, 64); ++r) {
      for (auto& v : row) v = nd(rng);
      quantize_row(t, row.data(), m.w.data() + r * row_size(t, i), i);
    }
    for (int64_t r = 64; r < o; ++r)
      std::memcpy(m.w.data() + r * row_size(t, i), m.w.data() + (r % 64) * row_size(t, i), row_size(t, i));
    mats.push_back(std::move(m));
  };
  for (int l = 0; l < 30; ++l) {
    add(576, 576, wt);
    add(192, 576, wt);
    add(192, 576, wt);
    add(576, 576, wt);
    add(1536, 576, wt);
    add(1536, 576, wt);
    add(576, 1536, wt);
  }
  add(49152, 576, head);
  size_t bytes = 0;
  for (auto& m : mats) bytes += m.w.size();
  std::vector<float> x(static_cast<size_t>(1536 * n_tok), 0.5f), y(static_cast<size_t>(49152 * n_tok));
  std::vector<uint8_t> scratch;
  std::vector<double> times, cpu;
  for (int it = 0; it < reps + 1; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    if (fused) {
      // q,k,v share x (one region), o, gate+up share x, down, head: 5 regions per layer -> 4.
      for (size_t i = 0; i + 1 < mats.size(); i += 7) {
        MatmulJob qkv[3] = {{mats[i].w.data(), mats[i].t, mats[i].n_out, y.data()},
                            {mats[i + 1].w.data(), mats[i + 1].t, mats[i + 1].n_out, y.data() + 576 * n_tok},
                            {mats[i + 2].w.data(), mats[i + 2].t, mats[i + 2].n_out, y.data() + 768 * n_tok}};
        matmul_multi(qkv, 3, 576, x.data(), n_tok, pool, scratch);
        matmul(mats[i + 3].w.data(), mats[i + 3].t, 576, 576, x.data(), n_tok, y.data(), pool, scratch);
        MatmulJob gu[2] = {{mats[i + 4].w.data(), mats[i + 4].t, 1536, y.data()},
                           {mats[i + 5].w.data(), mats[i + 5].t, 1536, y.data() + 1536 * n_tok}};
        matmul_multi(gu, 2, 576, x.data(), n_tok, pool, scratch);
        matmul(mats[i + 6].w.data(), mats[i + 6].t, 576, 1536, x.data(), n_tok, y.data(), pool, scratch);
      }
      const Mat& h = mats.back();
      matmul(h.w.data(), h.t, h.n_out, h.n_in, x.data(), n_tok, y.data(), pool, scratch);
    } else {
      for (auto& m : mats) matmul(m.w.data(), m.t, m.n_out, m.n_in, x.data(), n_tok, y.data(), pool, scratch);
    }
    const double c1 = cpu_now();
    const auto t1 = std::chrono::steady_clock::now();
    if (it > 0) {
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
      cpu.push_back(c1 - c0);
    }
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu.begin(), cpu.end());
  const double sec = times[0];
  std::printf("(min wall %.2f ms, median wall %.2f ms, min caller-thread cpu %.2f ms)\n", times[0] * 1e3,
              times[times.size() / 2] * 1e3, cpu[0] * 1e3);
  std::printf("%smodel step n_tokens=%lld: %zu matmuls over %.1f MB of weights: %.2f ms (%.1f GB/s) -> %.1f tokens/s\n",
              fused ? "fused (matmul_multi) " : "", static_cast<long long>(n_tok), mats.size(), bytes / 1e6, sec * 1e3, bytes / sec / 1e9, n_tok / sec);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 0;
  std::vector<int64_t> token_counts = {1, 512};
  Type wt = Type::Q4_1, head = Type::Q8_0;
  bool model = false, type_override = false, head_override = false;
  std::string arch = "smollm2";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::atoi(next());
    else if (a == "--reps") reps = std::atoi(next());
    else if (a == "--tokens") token_counts = {std::atoll(next())};
    else if (a == "--model") model = true;
    else if (a == "--arch") {
      arch = next();
      if (arch != "smollm2" && arch != "qwen05") {
        std::fprintf(stderr, "--arch: smollm2 or qwen05\n");
        return 2;
      }
    }
    else if (a == "--type" || a == "--head-type") {
      Type t;
      const char* v = next();
      if (!type_from_name(v, &t) || !is_matmul_type(t)) {
        std::fprintf(stderr, "unsupported type %s\n", v);
        return 2;
      }
      (a == "--type" ? wt : head) = t;
      (a == "--type" ? type_override : head_override) = true;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--tokens T] [--type T] [--head-type T] [--reps R] [--model] [--arch smollm2|qwen05]\n", argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  // SmolLM2-135M-Instruct Q4_1 (30 layers) and Qwen2.5-Coder-0.5B-Instruct Q4_K_M (24 layers),
  // with the tensor types of the real files (Qwen: 896-wide rows cannot be k-quants -> Q5_0).
  const std::vector<Shape> smol = {
      {"attn_q/o 576x576", 576, 576, 2, false, Type::Q4_1},     {"attn_k/v 192x576", 192, 576, 2, false, Type::Q4_1},
      {"ffn_gate/up 1536x576", 1536, 576, 2, false, Type::Q4_1}, {"ffn_down 576x1536", 576, 1536, 1, false, Type::Q4_1},
      {"output 49152x576", 49152, 576, 0, true, Type::Q8_0},
  };
  const std::vector<Shape> qwen = {
      {"attn_q/o 896x896", 896, 896, 2, false, Type::Q5_0},      {"attn_k 128x896", 128, 896, 1, false, Type::Q5_0},
      {"attn_v 128x896", 128, 896, 1, false, Type::Q8_0},        {"ffn_gate/up 4864x896", 4864, 896, 2, false, Type::Q5_0},
      {"ffn_down 896x4864 q6", 896, 4864, 1, false, Type::Q6_K}, {"ffn_down 896x4864 q4", 896, 4864, 0, false, Type::Q4_K},
      {"output 151936x896", 151936, 896, 0, true, Type::Q8_0},
  };
  const std::vector<Shape>& shapes = arch == "qwen05" ? qwen : smol;
  const int n_layers = arch == "qwen05" ? 24 : 30;
  std::printf("threads=%d arch=%s%s%s\n", pool.size(), arch.c_str(), type_override ? " weights=" : "",
              type_override ? type_info(wt).name : "");
  if (model) {
    for (int64_t nt : token_counts)
      for (bool fused : {false, true}) bench_model(wt, head, pool, nt, reps > 0 ? reps : (nt == 1 ? 20 : 2), fused);
    return 0;
  }
  for (int64_t nt : token_counts) {
    const int r = reps > 0 ? reps : (nt == 1 ? 200 : 5);
    double step = 0;
    for (const Shape& s : shapes) {
      const Type t = s.head ? (head_override ? head : s.type) : (type_override ? wt : s.type);
      const double sec = bench_one(t, s.n_out, s.n_in, nt, pool, s.head && nt > 1 ? std::max(1, r / 2) : r);
      const double gflops = 2.0 * s.n_out * s.n_in * nt / sec * 1e-9;
      std::printf("n_tokens=%-4lld %-22s %-5s %9.1f us  %7.1f GFLOP/s\n", static_cast<long long>(nt), s.name,
                  type_info(t).name, sec * 1e6, gflops);
      // Qwen's ffn_down alternates Q6_K / Q4_K: each row above counts for half the layers.
      const double uses = s.head ? 1 : (arch == "qwen05" && std::string(s.name).rfind("ffn_down", 0) == 0 ? n_layers / 2.0 : n_layers * s.count);
      step += sec * uses;
    }
    std::printf("n_tokens=%-4lld model matmuls (%d layers + head): %.2f ms  -> %.1f tokens/s\n\n",
                static_cast<long long>(nt), n_layers, step * 1e3, nt / step);
  }
  return 0;
}
