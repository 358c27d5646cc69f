#include "ggml/matmul.h"

#include <algorithm>
#include <atomic>
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

size_t quantize_activations(Type wtype, int64_t n_in, const float* x, int64_t n_tokens, ThreadPool& pool,
                            std::vector<uint8_t>& scratch) {
  const Type at = vec_dot_type(wtype);
  const size_t stride = row_size(at, n_in);
  const size_t need = stride * static_cast<size_t>(n_tokens);
  if (scratch.size() < need) scratch.resize(need);
  uint8_t* dst = scratch.data();
  if (n_tokens * n_in >= 65536 && pool.size() > 1) {
    pool.run([&](int ith, int nth) {
      for (int64_t t = ith; t < n_tokens; t += nth) quantize_row_activation(at, x + t * n_in, dst + t * stride, n_in);
    });
  } else {
    for (int64_t t = 0; t < n_tokens; ++t) quantize_row_activation(at, x + t * n_in, dst + t * stride, n_in);
  }
  return stride;
}

void matmul_quantized(const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act, size_t act_stride,
                      int64_t n_tokens, float* y, ThreadPool& pool) {
  check_args(wtype, n_out, n_in, n_tokens);
  if (n_out == 0 || n_tokens == 0) return;
  const kern::KernelSet& ks = *kern::kernels_for(wtype);
  const size_t w_stride = row_size(wtype, n_in);
  const auto* w = static_cast<const uint8_t*>(W);
  const auto* a = static_cast<const uint8_t*>(act);
  const int R = ks.rows_per_tile;
  const int T = ks.toks_per_tile;
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

void matmul(const void* W, Type wtype, int64_t n_out, int64_t n_in, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, std::vector<uint8_t>& scratch) {
  check_args(wtype, n_out, n_in, n_tokens);
  if (n_out == 0 || n_tokens == 0) return;
  if (vec_dot_type(wtype) == Type::F32) {
    matmul_quantized(W, wtype, n_out, n_in, x, static_cast<size_t>(n_in) * sizeof(float), n_tokens, y, pool);
    return;
  }
  const size_t stride = quantize_activations(wtype, n_in, x, n_tokens, pool, scratch);
  matmul_quantized(W, wtype, n_out, n_in, scratch.data(), stride, n_tokens, y, pool);
}

}  // namespace swz::ggml
