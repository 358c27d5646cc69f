#include "ggml/matmul.h"

#include <algorithm>
#include <atomic>
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

// Encodes x rows as `at` (ggml layout, or matmul's packed layout) into scratch.
size_t quantize_rows(Type at, bool packed, int64_t n_in, const float* x, int64_t n_tokens, ThreadPool& pool,
                     std::vector<uint8_t>& scratch) {
  const size_t stride = packed ? kern::packed_act_row_size(at, n_in) : row_size(at, n_in);
  const size_t need = stride * static_cast<size_t>(n_tokens);
  if (scratch.size() < need) scratch.resize(need);
  uint8_t* dst = scratch.data();
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
  return stride;
}

void run_matmul(const kern::KernelSet& ks, const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act,
                size_t act_stride, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace

size_t quantize_activations(Type wtype, int64_t n_in, const float* x, int64_t n_tokens, ThreadPool& pool,
                            std::vector<uint8_t>& scratch) {
  return quantize_rows(vec_dot_type(wtype), false, n_in, x, n_tokens, pool, scratch);
}

void matmul_quantized(const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act, size_t act_stride,
                      int64_t n_tokens, float* y, ThreadPool& pool) {
  check_args(wtype, n_out, n_in, n_tokens);
  if (n_out == 0 || n_tokens == 0) return;
  run_matmul(*kern::kernels_for(wtype), W, wtype, n_out, n_in, act, act_stride, n_tokens, y, pool);
}

namespace {

void run_matmul(const kern::KernelSet& ks, const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act,
                size_t act_stride, int64_t n_tokens, float* y, ThreadPool& pool) {
  const size_t w_stride = row_size(wtype, n_in);
  const auto* w = static_cast<const uint8_t*>(W);
  const auto* a = static_cast<const uint8_t*>(act);
  int R = ks.rows_per_tile;
  int T = ks.toks_per_tile;
  // Experiment hook: SWZ_GGML_TILE=RxT picks another compiled tile shape.
  static const std::pair<int, int> tile_override = [] {
    const char* e = std::getenv("SWZ_GGML_TILE");
    int r = 0, t = 0;
    if (e && std::sscanf(e, "%dx%d", &r, &t) == 2 && r >= 1 && r <= kern::kMaxR && t >= 1 && t <= kern::kMaxT)
      return std::make_pair(r, t);
    return std::make_pair(0, 0);
  }();
  if (tile_override.first && ks.fn[tile_override.first - 1][tile_override.second - 1]) {
    R = tile_override.first;
    T = tile_override.second;
  }
  const int nth = pool.size();

  // Row chunks: small enough for every thread to get several (load balance when a core is
  // busy elsewhere), large enough that a chunk of weight rows stays in L1/L2 while the
  // token tiles stream past it.
  int64_t chunk;
  if (n_tokens == 1) {
    chunk = std::max<int64_t>(R, std::min<int64_t>(64, n_out / (static_cast<int64_t>(nth) * 8)));
  } else {
    const int64_t row_bytes = static_cast<int64_t>(w_stride);
    chunk = std::max<int64_t>(R, std::min<int64_t>(64, (16 * 1024) / std::max<int64_t>(1, row_bytes)));
    chunk = std::min(chunk, std::max<int64_t>(R, n_out / (static_cast<int64_t>(nth) * 4)));
  }
  chunk = (chunk + R - 1) / R * R;
  const int64_t n_chunks = (n_out + chunk - 1) / chunk;
  std::atomic<int64_t> next{nth};

  auto do_chunk = [&](int64_t c) {
    const int64_t r_begin = c * chunk;
    const int64_t r_end = std::min(n_out, r_begin + chunk);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
      const int tt = static_cast<int>(std::min<int64_t>(T, n_tokens - t0));
      for (int64_t r0 = r_begin; r0 < r_end; r0 += R) {
        const int rr = static_cast<int>(std::min<int64_t>(R, r_end - r0));
        kern::TileFn fn = ks.fn[rr - 1][tt - 1];
        if (fn) {
          fn(n_in, w + r0 * w_stride, w_stride, a + t0 * act_stride, act_stride, y + t0 * n_out + r0, n_out);
        } else {
          for (int r = 0; r < rr; ++r)
            for (int t = 0; t < tt; ++t)
              ks.fn[0][0](n_in, w + (r0 + r) * w_stride, w_stride, a + (t0 + t) * act_stride, act_stride,
                          y + (t0 + t) * n_out + r0 + r, n_out);
        }
      }
    }
  };

  if (nth == 1 || n_chunks == 1) {
    for (int64_t c = 0; c < n_chunks; ++c) do_chunk(c);
    return;
  }
  pool.run([&](int ith, int) {
    for (int64_t c = ith; c < n_chunks; c = next.fetch_add(1, std::memory_order_relaxed)) do_chunk(c);
  });
}

}  // namespace

void matmul(const void* W, Type wtype, int64_t n_out, int64_t n_in, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, std::vector<uint8_t>& scratch) {
  check_args(wtype, n_out, n_in, n_tokens);
  if (n_out == 0 || n_tokens == 0) return;
  if (vec_dot_type(wtype) == Type::F32) {
    run_matmul(*kern::kernels_for(wtype), W, wtype, n_out, n_in, x, static_cast<size_t>(n_in) * sizeof(float), n_tokens,
               y, pool);
    return;
  }
  const Type at = vec_dot_type(wtype);
  const bool packed = kern::packed_act_enabled();
  const size_t stride = quantize_rows(at, packed, n_in, x, n_tokens, pool, scratch);
  run_matmul(packed ? *kern::packed_kernels_for(wtype) : *kern::kernels_for(wtype), W, wtype, n_out, n_in,
             scratch.data(), stride, n_tokens, y, pool);
}

}  // namespace swz::ggml
