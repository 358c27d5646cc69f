// Matmul throughput on SmolLM2-135M's shapes, decode (n_tokens = 1) and prefill (512).
//
// Usage: swz_ggml_matmul_bench [--threads N] [--tokens T] [--type q4_1] [--reps R] [--model]
// (--model: one whole decode/prefill step over distinct per-layer weights instead of per shape)
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
  int count;  // uses per forward step
  bool head;  // the output head (Q8_0 in the default model)
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
void bench_model(Type wt, Type head, ThreadPool& pool, int64_t n_tok, int reps) {
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
  std::vector<double> times;
  for (int it = 0; it < reps + 1; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& m : mats) matmul(m.w.data(), m.t, m.n_out, m.n_in, x.data(), n_tok, y.data(), pool, scratch);
    const auto t1 = std::chrono::steady_clock::now();
    if (it > 0) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  const double sec = times[times.size() / 2];
  std::printf("model step n_tokens=%lld: %zu matmuls over %.1f MB of weights: %.2f ms (%.1f GB/s) -> %.1f tokens/s\n",
              static_cast<long long>(n_tok), mats.size(), bytes / 1e6, sec * 1e3, bytes / sec / 1e9, n_tok / sec);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 0;
  std::vector<int64_t> token_counts = {1, 512};
  Type wt = Type::Q4_1, head = Type::Q8_0;
  bool model = false;
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
    else if (a == "--type" || a == "--head-type") {
      Type t;
      const char* v = next();
      if (!type_from_name(v, &t) || !is_matmul_type(t)) {
        std::fprintf(stderr, "unsupported type %s\n", v);
        return 2;
      }
      (a == "--type" ? wt : head) = t;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--tokens T] [--type T] [--head-type T] [--reps R] [--model]\n", argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  const Shape shapes[] = {
      {"attn_q/o 576x576", 576, 576, 2, false},  {"attn_k/v 192x576", 192, 576, 2, false},
      {"ffn_gate/up 1536x576", 1536, 576, 2, false}, {"ffn_down 576x1536", 576, 1536, 1, false},
      {"output 49152x576", 49152, 576, 1, true},
  };
  std::printf("threads=%d weights=%s head=%s\n", pool.size(), type_info(wt).name, type_info(head).name);
  if (model) {
    for (int64_t nt : token_counts) bench_model(wt, head, pool, nt, reps > 0 ? reps : (nt == 1 ? 20 : 2));
    return 0;
  }
  for (int64_t nt : token_counts) {
    const int r = reps > 0 ? reps : (nt == 1 ? 200 : 5);
    double step = 0;
    for (const Shape& s : shapes) {
      const Type t = s.head ? head : wt;
      const double sec = bench_one(t, s.n_out, s.n_in, nt, pool, s.head && nt > 1 ? std::max(1, r / 2) : r);
      const double gflops = 2.0 * s.n_out * s.n_in * nt / sec * 1e-9;
      std::printf("n_tokens=%-4lld %-22s %-5s %9.1f us  %7.1f GFLOP/s\n", static_cast<long long>(nt), s.name,
                  type_info(t).name, sec * 1e6, gflops);
      step += sec * (s.head ? 1 : 30 * s.count);
    }
    std::printf("n_tokens=%-4lld model matmuls (30 layers + head): %.2f ms  -> %.1f tokens/s\n\n",
                static_cast<long long>(nt), step * 1e3, nt / step);
  }
  return 0;
}
