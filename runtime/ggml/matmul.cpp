#include "ggml/matmul.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <stdexcept>
#include <string>

#include "ggml/kernels.h"
#include "ggml/quants.h"

namespace swz::ggml {

namespace {

void check_args(Type wtype, int64_t n_out, int64_t n_in, int64_t n_tokens) {
  if (!is_matmul_type(wtype)) {
    throw std::invalid_argument(std::string("matmul: weight type ") + type_info(wtype).name + " is not supported");
  }
  if (n_out < 0 || n_in < 0 || n_tokens < 0) {
    throw std::invalid_argument("matmul: negative size (n_out=" + std::to_string(n_out) + ", n_in=" +
                                std::to_string(n_in) + ", n_tokens=" + std::to_string(n_tokens) + ")");
  }
  const int64_t bs = type_info(wtype).block_size;
  if (n_in % bs != 0) {
    throw std::invalid_argument("matmul: n_in=" + std::to_string(n_in) + " is not a multiple of " +
                                type_info(wtype).name + "'s block size " + std::to_string(bs));
  }
}

}  // namespace

namespace {

// Encodes x rows as `at` (ggml layout, or matmul's packed layout) into dst, `stride` bytes
// apart; in parallel when the input is large.
void encode_rows(Type at, bool packed, int64_t n_in, const float* x, int64_t n_tokens, uint8_t* dst, size_t stride,
                 ThreadPool& pool) {
  auto encode = [&](int64_t t) {
    if (packed) kern::quantize_row_activation_packed(at, x + t * n_in, dst + t * stride, n_in);
    else quantize_row_activation(at, x + t * n_in, dst + t * stride, n_in);
  };
  if (n_tokens * n_in >= 65536 && pool.size() > 1) {
    pool.run([&](int ith, int nth) {
      for (int64_t t = ith; t < n_tokens; t += nth) encode(t);
    });
  } else {
    for (int64_t t = 0; t < n_tokens; ++t) encode(t);
  }
}

}  // namespace

size_t quantize_activations(Type wtype, int64_t n_in, const float* x, int64_t n_tokens, ThreadPool& pool,
                            std::vector<uint8_t>& scratch) {
  const Type at = vec_dot_type(wtype);
  const size_t stride = row_size(at, n_in);
  if (scratch.size() < stride * static_cast<size_t>(n_tokens)) scratch.resize(stride * static_cast<size_t>(n_tokens));
  encode_rows(at, false, n_in, x, n_tokens, scratch.data(), stride, pool);
  return stride;
}


namespace {

// One matmul's share of a parallel region: its kernels, tile shape and row chunking.
struct Plan {
  const kern::KernelSet* ks;
  const uint8_t* w;
  size_t w_stride;
  const uint8_t* a;
  size_t a_stride;
  int64_t n_out, n_in, n_tokens;
  float* y;
  int R, T;
  int64_t chunk, n_chunks;
};

/// Sets a plan's rows per tile, its row chunks rounded up to whole tiles.
void set_rows(Plan& p, int R) {
  p.R = R;
  p.chunk = (p.chunk + R - 1) / R * R;
  p.n_chunks = (p.n_out + p.chunk - 1) / p.chunk;
}

Plan make_plan(const kern::KernelSet& ks, const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act,
               size_t act_stride, int64_t n_tokens, float* y, int nth) {
  Plan p{&ks, static_cast<const uint8_t*>(W), row_size(wtype, n_in), static_cast<const uint8_t*>(act), act_stride,
         n_out, n_in, n_tokens, y, ks.rows_per_tile, ks.toks_per_tile, 0, 0};
  // Experiment hook: SWZ_GGML_TILE=RxT picks another compiled tile shape.
  static const std::pair<int, int> tile_override = [] {
    const char* e = std::getenv("SWZ_GGML_TILE");
    int r = 0, t = 0;
    if (e && std::sscanf(e, "%dx%d", &r, &t) == 2 && r >= 1 && r <= kern::kMaxR && t >= 1 && t <= kern::kMaxT)
      return std::make_pair(r, t);
    return std::make_pair(0, 0);
  }();
  if (tile_override.first && ks.fn[tile_override.first - 1][tile_override.second - 1]) {
    p.R = tile_override.first;
    p.T = tile_override.second;
  } else if (n_tokens <= p.T) {
    // One token tile (decode, small speculative batches): every weight byte is read once.
    // How many weight rows a tile takes is chosen by measurement (DecodeRows below): one
    // row keeps a single sequential stream the hardware prefetcher follows, which was
    // ~1.6x faster on a 2-core Zen VM (SmolLM2 Q4_1, Qwen2.5 Q4_K_M); two rows share each
    // activation block's loads, which is 12-27% faster on a 2-core Xeon VM (AVX-512) where
    // the weights stream from a large LLC. Results are unchanged either way: each output
    // element sums its row's blocks in the same order.
    p.R = 1;
  }
  // Row chunks: small enough for every thread to get several (load balance when a core is
  // busy elsewhere), large enough that a chunk of weight rows stays in L1 while the token
  // tiles stream past it.
  int64_t chunk;
  if (n_tokens == 1) {
    chunk = std::max<int64_t>(p.R, std::min<int64_t>(64, n_out / (static_cast<int64_t>(nth) * 8)));
  } else {
    chunk = std::max<int64_t>(p.R, std::min<int64_t>(64, (16 * 1024) / std::max<int64_t>(1, static_cast<int64_t>(p.w_stride))));
    chunk = std::min(chunk, std::max<int64_t>(p.R, n_out / (static_cast<int64_t>(nth) * 4)));
  }
  p.chunk = chunk;
  set_rows(p, p.R);
  return p;
}

void run_chunk(const Plan& p, int64_t c) {
  const kern::KernelSet& ks = *p.ks;
  const int64_t r_begin = c * p.chunk;
  const int64_t r_end = std::min(p.n_out, r_begin + p.chunk);
  for (int64_t t0 = 0; t0 < p.n_tokens; t0 += p.T) {
    const int tt = static_cast<int>(std::min<int64_t>(p.T, p.n_tokens - t0));
    for (int64_t r0 = r_begin; r0 < r_end; r0 += p.R) {
      const int rr = static_cast<int>(std::min<int64_t>(p.R, r_end - r0));
      kern::TileFn fn = ks.fn[rr - 1][tt - 1];
      if (fn) {
        fn(p.n_in, p.w + r0 * p.w_stride, p.w_stride, p.a + t0 * p.a_stride, p.a_stride, p.y + t0 * p.n_out + r0,
           p.n_out);
      } else {
        for (int r = 0; r < rr; ++r)
          for (int t = 0; t < tt; ++t)
            ks.fn[0][0](p.n_in, p.w + (r0 + r) * p.w_stride, p.w_stride, p.a + (t0 + t) * p.a_stride, p.a_stride,
                        p.y + (t0 + t) * p.n_out + r0 + r, p.n_out);
      }
    }
  }
}

// Runs all plans' chunks in one parallel region (chunks handed out by an atomic counter).
void run_plans(const std::vector<Plan>& plans, ThreadPool& pool) {
  struct Ctx {
    const std::vector<Plan>* plans;
    int64_t first[17];  // first global chunk of each plan (small jobs lists) ...
    std::vector<int64_t> first_big;  // ... or this for long ones
    const int64_t* f;
    size_t n;
    int64_t total;
    std::atomic<int64_t> next;
    void run(int64_t g) const {
      const size_t i = static_cast<size_t>(std::upper_bound(f, f + n + 1, g) - f) - 1;
      run_chunk((*plans)[i], g - f[i]);
    }
  } ctx;
  ctx.plans = &plans;
  ctx.n = plans.size();
  if (ctx.n + 1 <= 17) {
    ctx.f = ctx.first;
  } else {
    ctx.first_big.resize(ctx.n + 1);
    ctx.f = ctx.first_big.data();
  }
  int64_t* f = const_cast<int64_t*>(ctx.f);
  f[0] = 0;
  for (size_t i = 0; i < ctx.n; ++i) f[i + 1] = f[i] + plans[i].n_chunks;
  ctx.total = f[ctx.n];
  if (ctx.total == 0) return;
  const int nth = pool.size();
  if (nth == 1 || ctx.total == 1) {
    for (int64_t g = 0; g < ctx.total; ++g) ctx.run(g);
    return;
  }
  ctx.next.store(nth, std::memory_order_relaxed);
  Ctx* c = &ctx;  // one-pointer capture: std::function stores it without allocating
  pool.run([c](int ith, int) {
    for (int64_t g = ith; g < c->total; g = c->next.fetch_add(1, std::memory_order_relaxed)) c->run(g);
  });
}

}  // namespace

/// Rows per tile of decode matmuls (one token tile), chosen by measuring the matmuls this
/// process runs: the first kTrials decode calls run in blocks of kBlock calls, one row a
/// tile and two rows in turn (the first block is warm-up and not counted); each call's
/// time over the weight bytes it streamed is summed per choice, and the faster (two rows
/// only when at least 3% faster) is used from then on. Blocks, not alternate calls: calls
/// alternating the two measured the same (within 1%) on a machine where a whole decode at
/// two rows is 27% faster. In place, on the real weights and cache state, because the
/// answer depends on the machine (see make_plan) and the numbers do not (the same sums in
/// the same order). SWZ_GGML_DECODE_ROWS=1|2 fixes it instead.
class DecodeRows {
 public:
  /// The R for this call (1 or 2) and whether to time it (a trial).
  int next(bool& trial) {
    const int c = chosen_.load(std::memory_order_relaxed);
    trial = false;
    if (c) return c;
    const int i = calls_.fetch_add(1, std::memory_order_relaxed);
    if (i >= kTrials) return 1;  // the deciding call is on its way
    trial = i >= kBlock;  // the first block warms up (first touches, page faults)
    return 1 + ((i / kBlock) & 1);
  }
  /// A trial's result: `r` rows a tile took `ns` for `bytes` weight bytes.
  void record(int r, int64_t ns, int64_t bytes) {
    ns_[r - 1].fetch_add(ns, std::memory_order_relaxed);
    bytes_[r - 1].fetch_add(bytes, std::memory_order_relaxed);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 != kTrials - kBlock) return;
    const double t1 = static_cast<double>(ns_[0].load()) / static_cast<double>(std::max<int64_t>(1, bytes_[0].load()));
    const double t2 = static_cast<double>(ns_[1].load()) / static_cast<double>(std::max<int64_t>(1, bytes_[1].load()));
    chosen_.store(t2 < 0.97 * t1 ? 2 : 1, std::memory_order_relaxed);
  }
  static DecodeRows& get() {
    static DecodeRows d;
    return d;
  }
  /// set_decode_rows: fixed (1, 2) or measured again (0).
  void reset(int rows) {
    ns_[0] = ns_[1] = bytes_[0] = bytes_[1] = 0;
    calls_ = done_ = 0;
    chosen_ = rows;
  }

 private:
  DecodeRows() {
    const char* e = std::getenv("SWZ_GGML_DECODE_ROWS");
    if (e && (e[0] == '1' || e[0] == '2') && e[1] == 0) chosen_ = e[0] - '0';
  }
  static constexpr int kBlock = 32, kTrials = 16 * kBlock;
  std::atomic<int> chosen_{0}, calls_{0}, done_{0};
  std::atomic<int64_t> ns_[2] = {0, 0}, bytes_[2] = {0, 0};
};

void set_decode_rows(int rows) {
  if (rows < 0 || rows > 2) throw std::invalid_argument("set_decode_rows: " + std::to_string(rows) + " is not 0, 1 or 2");
  DecodeRows::get().reset(rows);
}

void matmul_quantized(const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act, size_t act_stride,
                      int64_t n_tokens, float* y, ThreadPool& pool) {
  check_args(wtype, n_out, n_in, n_tokens);
  if (n_out == 0 || n_tokens == 0) return;
  run_plans({make_plan(*kern::kernels_for(wtype), W, wtype, n_out, n_in, act, act_stride, n_tokens, y, pool.size())},
            pool);
}

void matmul_multi(const MatmulJob* jobs, size_t n_jobs, int64_t n_in, const float* x, int64_t n_tokens,
                  ThreadPool& pool, std::vector<uint8_t>& scratch) {
  for (size_t j = 0; j < n_jobs; ++j) check_args(jobs[j].wtype, jobs[j].n_out, n_in, n_tokens);
  if (n_tokens == 0) return;
  // Encode x once per distinct activation type (e.g. Qwen's Q5_0 and Q8_0 both take Q8_0).
  const bool packed = kern::packed_act_enabled();
  // At most 5 distinct encoded types exist (Q8_0, Q8_1, Q8_K, F16, BF16): fixed arrays.
  Type acts[8];
  size_t offset[8], stride[8], n_acts = 0;
  for (size_t j = 0; j < n_jobs; ++j) {
    const Type at = vec_dot_type(jobs[j].wtype);
    if (at != Type::F32 && jobs[j].n_out > 0 && std::find(acts, acts + n_acts, at) == acts + n_acts) acts[n_acts++] = at;
  }
  size_t total = 0;
  for (size_t i = 0; i < n_acts; ++i) {
    stride[i] = packed ? kern::packed_act_row_size(acts[i], n_in) : row_size(acts[i], n_in);
    offset[i] = total;
    total += stride[i] * static_cast<size_t>(n_tokens);
  }
  if (scratch.size() < total) scratch.resize(total);
  for (size_t i = 0; i < n_acts; ++i)
    encode_rows(acts[i], packed, n_in, x, n_tokens, scratch.data() + offset[i], stride[i], pool);
  thread_local std::vector<Plan> plans;  // reused: no allocation on the decode hot path
  plans.clear();
  for (size_t j = 0; j < n_jobs; ++j) {
    const MatmulJob& jb = jobs[j];
    if (jb.n_out == 0) continue;
    const Type at = vec_dot_type(jb.wtype);
    if (at == Type::F32) {
      plans.push_back(make_plan(*kern::kernels_for(jb.wtype), jb.W, jb.wtype, jb.n_out, n_in, x,
                                static_cast<size_t>(n_in) * sizeof(float), n_tokens, jb.y, pool.size()));
      continue;
    }
    const size_t i = static_cast<size_t>(std::find(acts, acts + n_acts, at) - acts);
    const kern::KernelSet& ks = packed ? *kern::packed_kernels_for(jb.wtype) : *kern::kernels_for(jb.wtype);
    plans.push_back(make_plan(ks, jb.W, jb.wtype, jb.n_out, n_in, scratch.data() + offset[i], stride[i], n_tokens, jb.y,
                              pool.size()));
  }
  // Decode: the measured rows a tile (DecodeRows) for the kernels that have two-row tiles.
  bool trial = false;
  int rows = 0;
  int64_t bytes = 0;
  for (Plan& p : plans) {
    if (p.R != 1 || p.n_tokens > p.T || !p.ks->fn[1][p.n_tokens - 1]) continue;
    if (!rows) rows = DecodeRows::get().next(trial);
    set_rows(p, rows);
    bytes += static_cast<int64_t>(p.w_stride) * p.n_out;
  }
  if (!trial) {
    run_plans(plans, pool);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  run_plans(plans, pool);
  DecodeRows::get().record(rows, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
                           bytes);
}

void matmul(const void* W, Type wtype, int64_t n_out, int64_t n_in, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, std::vector<uint8_t>& scratch) {
  const MatmulJob job{W, wtype, n_out, y};
  matmul_multi(&job, 1, n_in, x, n_tokens, pool, scratch);
}

}  // namespace swz::ggml
