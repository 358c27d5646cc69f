#include "cpu/kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/signatures.h"
#include "ggml/fp16.h"
#include "ggml/matmul.h"
#include "ggml/quants.h"
#include "ggml/thread_pool.h"
#include "ggml/vec_math.h"
#include "kvcache/block_manager.h"

namespace swz::cpu {
namespace {

inline uint16_t to_f16(float f) { return ggml::fp32_to_fp16(f); }
inline float from_f16(uint16_t h) { return ggml::fp16_to_fp32(h); }

// y = x / sqrt(mean(x^2) + eps) * w, the sum in double as ggml_compute_forward_rms_norm_f32.
void rms_norm_row(const float* x, const float* w, float* y, int n, float eps) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

// Eight f16 values as floats.
inline __m256 cvt8(const uint16_t* x) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }

// Four tinyBLAS hsum8s at once: lane i of the result is hsum8(a_i), with hsum8's exact
// pairing ((x0+x4)+(x2+x6))+((x1+x5)+(x3+x7)).
inline __m128 hsum8_x4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  // lo + hi per accumulator: a0|a1 and a2|a3 side by side (x_i = l_i + l_{i+4}).
  const __m256 u01 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a0, a1, 0x31));
  const __m256 u23 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a3, 0x20), _mm256_permute2f128_ps(a2, a3, 0x31));
  // (x0+x2, x1+x3) of each: [a0, a2 | a1, a3].
  const __m256 y = _mm256_add_ps(_mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(3, 2, 3, 2)));
  // (x0+x2) + (x1+x3) in lanes 0, 2, 4, 6 = a0, a2, a1, a3.
  const __m256 z = _mm256_add_ps(y, _mm256_movehdup_ps(y));
  return _mm256_castps256_ps128(_mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 2, 6, 0, 0, 0, 0)));
}

// Attention scores in the order of llamafile's tinyBLAS<8, f16> (llama.cpp's CPU matmul
// for batches of 2+ rows: one 8-lane FMA accumulator over consecutive 8-element chunks,
// then hsum8) for HB query heads that share one KV head:
// w[h * ldw + j] = (k_j . q_h) * scale for j < n_vis (rounded up to 4;
// the caller masks the extra scores). q holds the heads'
// f16-rounded queries as floats (HB x hd); krows[j] points at key j's head slice (hd f16).
// Four keys at a time: every converted key chunk feeds HB FMA chains, and the 4*HB
// chains are independent, so the loop runs at FMA throughput instead of FMA latency.
template <int HB>
void scores_tinyblas(const float* q, int hd, const uint16_t* const* krows, int n_vis, float scale, float* w,
                     size_t ldw) {
  const __m128 sc = _mm_set1_ps(scale);
  for (int j = 0; j < n_vis; j += 4) {  // krows valid up to n_vis rounded up to 4
    __m256 acc[HB][4];
    for (int h = 0; h < HB; ++h)
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_setzero_ps();
    for (int c = 0; c < hd; c += 8) {
      const __m256 k0 = cvt8(krows[j] + c), k1 = cvt8(krows[j + 1] + c), k2 = cvt8(krows[j + 2] + c),
                   k3 = cvt8(krows[j + 3] + c);
      for (int h = 0; h < HB; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + static_cast<size_t>(h) * hd + c);
        acc[h][0] = _mm256_fmadd_ps(k0, qv, acc[h][0]);
        acc[h][1] = _mm256_fmadd_ps(k1, qv, acc[h][1]);
        acc[h][2] = _mm256_fmadd_ps(k2, qv, acc[h][2]);
        acc[h][3] = _mm256_fmadd_ps(k3, qv, acc[h][3]);
      }
    }
    for (int h = 0; h < HB; ++h)
      _mm_storeu_ps(w + h * ldw + j, _mm_mul_ps(hsum8_x4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]), sc));
  }
}

// The paged, transposed V of one KV head: dimension d's values of keys 64*pg .. 64*pg+63
// are at pages[pg] + base + d * 64 (PageLayout::v_offset).
struct VHead {
  const uint16_t* const* pages;
  size_t base;
  const uint16_t* at(int d, int j) const {
    return pages[j / kvcache::kBlockTokens] + base + static_cast<size_t>(d) * kvcache::kBlockTokens + j % kvcache::kBlockTokens;
  }
};

// Eight V values of keys j..j+7 (j % 8 == 0) for dimension d; lanes at or past n_vis read
// as 0 (a page's slots past the sequence hold stale data, and llama.cpp's masked cells
// contribute 0 * v). Only the sequence's last chunk takes the masked path.
inline __m256 v8(const VHead& v, int d, int j, int n_vis) {
  const __m256 x = cvt8(v.at(d, j));
  if (j + 8 <= n_vis) return x;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n_vis - j), lane)));
}

// out[d] = sum_j p[j] * v_j[d] in tinyBLAS order (llama.cpp's kqv = v^T . f16(p) for 2+
// rows): output d's accumulator takes keys 8c..8c+7 in its lanes, FMAs in c order, then
// hsum8 over the lanes. p: f16-rounded probabilities as floats (n_vis rounded up to 8
// readable); hd % 8 == 0.
void pv_tinyblas(const float* p, int n_vis, const VHead& v, int hd, float* out) {
  constexpr int B = kvcache::kBlockTokens;
  const int n_full = n_vis / 8 * 8;  // keys in whole 8-key chunks; the rest is masked
  for (int d = 0; d < hd; d += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int j0 = 0; j0 < n_full; j0 += B) {  // page by page: 8 rows of 64 keys, stride B
      const uint16_t* r = v.at(d, j0);
      const float* pj = p + j0;
      const int n = std::min(B, n_full - j0);
      for (int j = 0; j < n; j += 8) {
        const __m256 pv = _mm256_loadu_ps(pj + j);
        a0 = _mm256_fmadd_ps(cvt8(r + j), pv, a0);
        a1 = _mm256_fmadd_ps(cvt8(r + B + j), pv, a1);
        a2 = _mm256_fmadd_ps(cvt8(r + 2 * B + j), pv, a2);
        a3 = _mm256_fmadd_ps(cvt8(r + 3 * B + j), pv, a3);
        a4 = _mm256_fmadd_ps(cvt8(r + 4 * B + j), pv, a4);
        a5 = _mm256_fmadd_ps(cvt8(r + 5 * B + j), pv, a5);
        a6 = _mm256_fmadd_ps(cvt8(r + 6 * B + j), pv, a6);
        a7 = _mm256_fmadd_ps(cvt8(r + 7 * B + j), pv, a7);
      }
    }
    if (n_full < n_vis) {
      const __m256 pv = _mm256_loadu_ps(p + n_full);
      a0 = _mm256_fmadd_ps(v8(v, d, n_full, n_vis), pv, a0);
      a1 = _mm256_fmadd_ps(v8(v, d + 1, n_full, n_vis), pv, a1);
      a2 = _mm256_fmadd_ps(v8(v, d + 2, n_full, n_vis), pv, a2);
      a3 = _mm256_fmadd_ps(v8(v, d + 3, n_full, n_vis), pv, a3);
      a4 = _mm256_fmadd_ps(v8(v, d + 4, n_full, n_vis), pv, a4);
      a5 = _mm256_fmadd_ps(v8(v, d + 5, n_full, n_vis), pv, a5);
      a6 = _mm256_fmadd_ps(v8(v, d + 6, n_full, n_vis), pv, a6);
      a7 = _mm256_fmadd_ps(v8(v, d + 7, n_full, n_vis), pv, a7);
    }
    _mm_storeu_ps(out + d, hsum8_x4(a0, a1, a2, a3));
    _mm_storeu_ps(out + d + 4, hsum8_x4(a4, a5, a6, a7));
  }
}

// ggml_vec_dot_f16's reduction of its four accumulators (AVX2): (s0+s2)+(s1+s3), then
// hsum8_hadd; exact in float for lengths that are multiples of 32 (no double tail).
inline float reduce_ggml(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
  return ggml::hsum8_hadd(_mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3)));
}

// One 32-element step of ggml_vec_dot_f16 (GGML_F16_STEP 32, four 8-lane accumulators):
// s_k += f32(x[8k .. 8k+7]) * y_k for k = 0..3.
struct Acc4 {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  void step32(const uint16_t* x, __m256 y0, __m256 y1, __m256 y2, __m256 y3) {
    s0 = _mm256_fmadd_ps(cvt8(x), y0, s0);
    s1 = _mm256_fmadd_ps(cvt8(x + 8), y1, s1);
    s2 = _mm256_fmadd_ps(cvt8(x + 16), y2, s2);
    s3 = _mm256_fmadd_ps(cvt8(x + 24), y3, s3);
  }
  // step32 over V's dimension d, keys j..j+31, lanes at or past n_vis as 0 (v8).
  void step32_masked(const VHead& v, int d, int j, int n_vis, __m256 y0, __m256 y1, __m256 y2, __m256 y3) {
    s0 = _mm256_fmadd_ps(v8(v, d, j, n_vis), y0, s0);
    s1 = _mm256_fmadd_ps(v8(v, d, j + 8, n_vis), y1, s1);
    s2 = _mm256_fmadd_ps(v8(v, d, j + 16, n_vis), y2, s2);
    s3 = _mm256_fmadd_ps(v8(v, d, j + 24, n_vis), y3, s3);
  }
  float reduce() const { return reduce_ggml(s0, s1, s2, s3); }
};

// Attention scores in ggml_vec_dot_f16 order (llama.cpp's single-row matmul, AVX2: four
// 8-lane accumulators over 32-element steps, then reduce_ggml), two keys at a time:
// w[j] = (k_j . q) * scale for j < n_vis. q: the f16-rounded query as floats; hd % 32 == 0.
void scores_ggml(const float* q, int hd, const uint16_t* const* krows, int n_vis, float scale, float* w) {
  auto q8 = [q](int i) { return _mm256_loadu_ps(q + i); };
  int j = 0;
  for (; j + 2 <= n_vis; j += 2) {
    Acc4 a, b;
    for (int i = 0; i < hd; i += 32) {
      const __m256 q0 = q8(i), q1 = q8(i + 8), q2 = q8(i + 16), q3 = q8(i + 24);
      a.step32(krows[j] + i, q0, q1, q2, q3);
      b.step32(krows[j + 1] + i, q0, q1, q2, q3);
    }
    w[j] = a.reduce() * scale;
    w[j + 1] = b.reduce() * scale;
  }
  for (; j < n_vis; ++j) {
    Acc4 a;
    for (int i = 0; i < hd; i += 32) a.step32(krows[j] + i, q8(i), q8(i + 8), q8(i + 16), q8(i + 24));
    w[j] = a.reduce() * scale;
  }
}

// out[d] = sum_j p[j] * v_j[d] in ggml_vec_dot_f16 order (llama.cpp's kqv for one row):
// key j feeds accumulator (j % 32) / 8, lane j % 8, then reduce_ggml. Two outputs at a
// time share the p loads. p readable up to n_vis rounded to 32; hd even.
void pv_ggml(const float* p, int n_vis, const VHead& v, int hd, float* out) {
  constexpr int B = kvcache::kBlockTokens;
  const int n_full = n_vis / 32 * 32;  // keys in whole 32-key steps; the last step is masked
  auto p8 = [p](int j) { return _mm256_loadu_ps(p + j); };
  for (int d = 0; d < hd; d += 2) {
    Acc4 a, b;
    for (int j0 = 0; j0 < n_full; j0 += B) {  // page by page
      const uint16_t* ra = v.at(d, j0);
      const uint16_t* rb = ra + B;
      const int n = std::min(B, n_full - j0);
      for (int j = 0; j < n; j += 32) {
        const __m256 p0 = p8(j0 + j), p1 = p8(j0 + j + 8), p2 = p8(j0 + j + 16), p3 = p8(j0 + j + 24);
        a.step32(ra + j, p0, p1, p2, p3);
        b.step32(rb + j, p0, p1, p2, p3);
      }
    }
    if (n_full < n_vis) {  // the last, partial step: masked lanes
      const int j = n_full;
      const __m256 p0 = p8(j), p1 = p8(j + 8), p2 = p8(j + 16), p3 = p8(j + 24);
      a.step32_masked(v, d, j, n_vis, p0, p1, p2, p3);
      b.step32_masked(v, d + 1, j, n_vis, p0, p1, p2, p3);
    }
    out[d] = a.reduce();
    out[d + 1] = b.reduce();
  }
}

// Softmax of one row of scores as ggml_vec_soft_max_f32 (expf8 per 8 cells, group sums
// added in double), then the probabilities rounded to f16 (llama.cpp converts kq for the
// f16 matmul) into p as floats. w and p hold n_vis rounded up to `pad` cells; cells from
// n_vis on are masked (-inf in w, 0 in p).
void softmax_f16(float* w, float* p, int n_vis, int pad) {
  const int n_grp = (n_vis + 7) / 8, n_end = (n_vis + pad - 1) / pad * pad;
  for (int j = n_vis; j < n_grp * 8; ++j) w[j] = -INFINITY;
  __m256 mx8 = _mm256_set1_ps(-INFINITY);
  for (int g = 0; g < n_grp; ++g) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(w + 8 * g));
  __m128 mx4 = _mm_max_ps(_mm256_castps256_ps128(mx8), _mm256_extractf128_ps(mx8, 1));
  mx4 = _mm_max_ps(mx4, _mm_movehl_ps(mx4, mx4));
  const float mx = std::max(_mm_cvtss_f32(mx4), _mm_cvtss_f32(_mm_movehdup_ps(mx4)));
  double sum = 0.0;
  for (int g = 0; g < n_grp; ++g) {
    const __m256 e = ggml::expf8(_mm256_sub_ps(_mm256_loadu_ps(w + 8 * g), _mm256_set1_ps(mx)));
    _mm256_storeu_ps(w + 8 * g, e);
    sum += static_cast<double>(ggml::hsum8(e));
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int g = 0; g < n_grp; ++g)
    _mm256_storeu_ps(p + 8 * g, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(w + 8 * g), inv), _MM_FROUND_TO_NEAREST_INT)));
  for (int j = n_vis; j < n_end; ++j) p[j] = 0.0f;
}

// --- The kernels: argument checks, then the computation ---------------------------------

/// Throws std::invalid_argument "<entry>: <what>" unless `ok`: a launch whose scalars
/// disagree with the memory bound to it is refused before anything is read.
void need(const KernelCall& c, bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(*c.entry + ": " + what);
}
template <typename T>
T* ptr(const KernelCall& c, size_t i) {
  return reinterpret_cast<T*>(c.args[i].data);
}
/// Argument i holds at least `n` values of T.
void need_elems(const KernelCall& c, size_t i, size_t n, size_t elem, const char* name) {
  need(c, c.args[i].bytes >= n * elem,
       std::string(name) + " binds " + std::to_string(c.args[i].bytes) + " bytes, the launch reads " + std::to_string(n * elem));
}

// get_rows: table, tokens, out, T, W
void get_rows(const KernelCall& c) {
  const int T = c.args[3].i32, W = c.args[4].i32;
  need(c, T >= 0 && W > 0 && W % ggml::type_info(c.type).block_size == 0, "bad T or W");
  const size_t row_bytes = ggml::row_size(c.type, W);
  const size_t n_rows = c.args[0].bytes / row_bytes;
  need_elems(c, 1, T, 4, "tokens");
  need_elems(c, 2, static_cast<size_t>(T) * W, 4, "out");
  const int32_t* tokens = ptr<int32_t>(c, 1);
  for (int t = 0; t < T; ++t) {
    need(c, tokens[t] >= 0 && static_cast<size_t>(tokens[t]) < n_rows,
         "token id " + std::to_string(tokens[t]) + " outside the table's " + std::to_string(n_rows) + " rows");
    ggml::dequantize_row(c.type, ptr<uint8_t>(c, 0) + row_bytes * tokens[t], ptr<float>(c, 2) + static_cast<size_t>(t) * W, W);
  }
}

// rms_norm / head_norm: x, weight, out, T, W, seg, eps (in place allowed: each segment is
// read fully before it is written)
void rms_norm(const KernelCall& c) {
  const int T = c.args[3].i32, W = c.args[4].i32, seg = c.args[5].i32;
  const float eps = c.args[6].f32;
  need(c, T >= 0 && W > 0 && seg > 0 && W % seg == 0, "W must be a multiple of seg");
  need_elems(c, 0, static_cast<size_t>(T) * W, 4, "x");
  need_elems(c, 1, seg, 4, "weight");
  need_elems(c, 2, static_cast<size_t>(T) * W, 4, "out");
  const float* w = ptr<float>(c, 1);
  for (int t = 0; t < T; ++t) {
    const float* xr = ptr<float>(c, 0) + static_cast<size_t>(t) * W;
    float* yr = ptr<float>(c, 2) + static_cast<size_t>(t) * W;
    for (int s = 0; s < W; s += seg) rms_norm_row(xr + s, w, yr + s, seg, eps);
  }
}

// matmul: x, w, bias, out, T, K, N, has_bias
void matmul(const KernelCall& c) {
  const MatmulLaunch m = matmul_launch(c);
  run_matmuls(&m, 1, *c.pool, *c.scratch);
}

// rope: x (in place), positions, T, n_head, head_dim, n_rot, theta, neox
void rope(const KernelCall& c) {
  const int T = c.args[2].i32, n_head = c.args[3].i32, hd = c.args[4].i32, n_rot = c.args[5].i32;
  const float base = c.args[6].f32;
  const bool neox = c.args[7].i32 != 0;
  need(c, T >= 0 && n_head > 0 && hd > 0 && n_rot > 0 && n_rot <= hd && n_rot % 2 == 0, "bad rope attributes");
  const int width = n_head * hd;
  need_elems(c, 0, static_cast<size_t>(T) * width, 4, "x");
  need_elems(c, 1, T, 4, "positions");
  // ggml_rope_cache_init with freq_scale 1, ext_factor 0, attn_factor 1:
  // theta_i = p * theta_scale^i, theta_scale = base^(-2/n_rot), accumulated in float.
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float cache[2 * 512];
  need(c, n_rot <= 1024, "n_rot above 1024");
  for (int t = 0; t < T; ++t) {
    float theta = static_cast<float>(ptr<int32_t>(c, 1)[t]);
    for (int i = 0; i < n_rot; i += 2) {
      cache[i] = std::cos(theta);
      cache[i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
    for (int h = 0; h < n_head; ++h) {
      float* v = ptr<float>(c, 0) + static_cast<size_t>(t) * width + static_cast<size_t>(h) * hd;
      for (int i = 0; i < n_rot; i += 2) {
        const float cs = cache[i], sn = cache[i + 1];
        const int a = neox ? i / 2 : i, b = neox ? i / 2 + n_rot / 2 : i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs - x1 * sn;
        v[b] = x0 * sn + x1 * cs;
      }
    }
  }
}

// Causal GQA attention over the sequence's KV pages, bit-identical to llama.cpp's CPU
// non-flash path (llm_graph_context::build_attn_mha): kq = k . f16(q) (f16 matmul),
// softmax(kq * scale) with ggml_vec_soft_max_f32 (expf8 in 8-wide groups, group sums
// added in double), probabilities rounded to f16, out = v^T . f16(p) (f16 matmul, V
// stored transposed as llama.cpp's v_trans cache). llama.cpp's f16 matmuls reduce in one
// order for a batch of 2+ query rows (tinyBLAS) and another for a single row
// (ggml_vec_dot_f16); both are reproduced, chosen by `single_row` (the launch record's
// phase), not by T. The KV length llama.cpp pads to a multiple of 256 with masked cells
// only adds exact zeros, so it is not materialised here. Needs head_dim % 32 == 0.
//
// Arguments: q, k, v, k_cache, v_cache, block_table, out, T, pos0, n_head, n_head_kv,
// head_dim, scale, single_row.
void attention(const KernelCall& c) {
  constexpr int B = kvcache::kBlockTokens;
  const int T = c.args[7].i32, pos0 = c.args[8].i32, n_head = c.args[9].i32, n_head_kv = c.args[10].i32,
            hd = c.args[11].i32;
  const float scale = c.args[12].f32;
  const bool single_row = c.args[13].i32 != 0;
  need(c, T >= 0 && pos0 >= 0 && n_head_kv > 0 && n_head > 0 && n_head % n_head_kv == 0 && hd > 0,
       "bad attention attributes");
  need(c, hd % 32 == 0, "head_dim " + std::to_string(hd) + " is not a multiple of 32 (llama.cpp's f16 dot product step)");
  const int kv_width = n_head_kv * hd, q_width = n_head * hd;
  const int n_kv = pos0 + T;
  const size_t tile = static_cast<size_t>(B) * kv_width;  // f16 values of one page's K (or V) tile
  const int n_blocks = (n_kv + B - 1) / B;
  need_elems(c, 0, static_cast<size_t>(T) * q_width, 4, "q");
  need_elems(c, 1, static_cast<size_t>(T) * kv_width, 4, "k");
  need_elems(c, 2, static_cast<size_t>(T) * kv_width, 4, "v");
  need_elems(c, 5, n_blocks, 4, "block_table");
  need_elems(c, 6, static_cast<size_t>(T) * q_width, 4, "out");
  const size_t n_pages = c.args[3].bytes / 2 / tile;
  need(c, c.args[4].bytes / 2 / tile == n_pages, "k_cache and v_cache pools differ");
  const int32_t* table = ptr<int32_t>(c, 5);
  // Page and K-row tables, reused from launch to launch (no allocation per layer on the
  // decode path). The calling thread's own; the pool's workers below read them through
  // these references (a thread_local named inside the lambda would be the worker's).
  thread_local std::vector<uint16_t*> tl_kpages, tl_vpages;
  thread_local std::vector<const uint16_t*> tl_krows;
  std::vector<uint16_t*>& kpages = tl_kpages;
  std::vector<uint16_t*>& vpages = tl_vpages;
  std::vector<const uint16_t*>& krows = tl_krows;
  kpages.resize(n_blocks);
  vpages.resize(n_blocks);
  for (int b = 0; b < n_blocks; ++b) {
    need(c, table[b] >= 0 && static_cast<size_t>(table[b]) < n_pages,
         "block table names page " + std::to_string(table[b]) + " of a pool of " + std::to_string(n_pages));
    kpages[b] = ptr<uint16_t>(c, 3) + table[b] * tile;
    vpages[b] = ptr<uint16_t>(c, 4) + table[b] * tile;
  }
  // This launch's K rows and (transposed) V columns into their pages.
  const float* k = ptr<float>(c, 1);
  const float* v = ptr<float>(c, 2);
  for (int t = 0; t < T; ++t) {
    const int p = pos0 + t;
    ggml::fp32_to_fp16_row(k + static_cast<size_t>(t) * kv_width, kpages[p / B] + static_cast<size_t>(p % B) * kv_width, kv_width);
    const float* vr = v + static_cast<size_t>(t) * kv_width;
    uint16_t* vp = vpages[p / B];
    for (int d = 0; d < kv_width; ++d) vp[static_cast<size_t>(d) * B + p % B] = to_f16(vr[d]);
  }
  // K row table per KV head; rows past n_kv point at row 0 (their scores are masked).
  const int n_pad = (n_kv + 31) & ~31;
  krows.resize(static_cast<size_t>(n_head_kv) * n_pad);
  for (int hk = 0; hk < n_head_kv; ++hk)
    for (int j = 0; j < n_pad; ++j) {
      const int p = j < n_kv ? j : 0;
      krows[static_cast<size_t>(hk) * n_pad + j] = kpages[p / B] + static_cast<size_t>(p % B) * kv_width + static_cast<size_t>(hk) * hd;
    }
  const int group = n_head / n_head_kv;
  const bool tinyblas = !single_row;
  // Tasks for tinyBLAS: (query token, KV head), the group's query heads scored together so
  // each converted key feeds up to three of them. For one row (decode) that is too few
  // tasks to keep every thread busy (3 KV heads, 2 threads), so there a task is one query
  // head; its KV head's K and V are shared through the cache.
  const int heads_per_task = tinyblas ? group : 1;
  const int tasks_per_token = n_head / heads_per_task;
  const int n_tasks = T * tasks_per_token;
  const float* q = ptr<float>(c, 0);
  float* out = ptr<float>(c, 6);
  c.pool->run([&](int ith, int nth) {
    constexpr int kHB = 3;  // query heads scored together (4 keys x 3 heads = 12 accumulators)
    std::vector<float> w(static_cast<size_t>(kHB) * n_pad), qf(static_cast<size_t>(kHB) * hd), pf(n_pad);
    for (int task = ith; task < n_tasks; task += nth) {
      const int t = task / tasks_per_token, h_first = (task % tasks_per_token) * heads_per_task;
      const int hk = h_first / group;
      const int n_vis = pos0 + t + 1;  // causal: positions 0..pos0+t
      const uint16_t* const* kr = krows.data() + static_cast<size_t>(hk) * n_pad;
      const VHead vh{vpages.data(), static_cast<size_t>(hk) * hd * B};
      for (int h0 = 0; h0 < heads_per_task; h0 += kHB) {
        const int hb = std::min(kHB, heads_per_task - h0);
        for (int i = 0; i < hb; ++i) {  // f16(q) as llama.cpp's matmul sees it
          const float* qr = q + static_cast<size_t>(t) * q_width + static_cast<size_t>(h_first + h0 + i) * hd;
          for (int d = 0; d < hd; ++d) qf[static_cast<size_t>(i) * hd + d] = from_f16(to_f16(qr[d]));
        }
        if (tinyblas) {
          switch (hb) {
            case 3: scores_tinyblas<3>(qf.data(), hd, kr, n_vis, scale, w.data(), n_pad); break;
            case 2: scores_tinyblas<2>(qf.data(), hd, kr, n_vis, scale, w.data(), n_pad); break;
            default: scores_tinyblas<1>(qf.data(), hd, kr, n_vis, scale, w.data(), n_pad); break;
          }
        } else {
          for (int i = 0; i < hb; ++i)
            scores_ggml(qf.data() + static_cast<size_t>(i) * hd, hd, kr, n_vis, scale, w.data() + static_cast<size_t>(i) * n_pad);
        }
        for (int i = 0; i < hb; ++i) {
          float* o = out + static_cast<size_t>(t) * q_width + static_cast<size_t>(h_first + h0 + i) * hd;
          softmax_f16(w.data() + static_cast<size_t>(i) * n_pad, pf.data(), n_vis, tinyblas ? 8 : 32);
          if (tinyblas) pv_tinyblas(pf.data(), n_vis, vh, hd, o);
          else pv_ggml(pf.data(), n_vis, vh, hd, o);
        }
      }
    }
  });
}

// swiglu: gate, up, out, T, W (ggml_vec_swiglu_f32: silu8 in 8-wide groups of each row,
// scalar expf for a row's tail)
void swiglu(const KernelCall& c) {
  const int T = c.args[3].i32, W = c.args[4].i32;
  need(c, T >= 0 && W > 0, "bad T or W");
  for (int i = 0; i < 3; ++i) need_elems(c, i, static_cast<size_t>(T) * W, 4, i == 0 ? "gate" : i == 1 ? "up" : "out");
  for (int t = 0; t < T; ++t) {
    const float* x = ptr<float>(c, 0) + static_cast<size_t>(t) * W;
    const float* y = ptr<float>(c, 1) + static_cast<size_t>(t) * W;
    float* o = ptr<float>(c, 2) + static_cast<size_t>(t) * W;
    int i = 0;
    for (; i + 8 <= W; i += 8)
      _mm256_storeu_ps(o + i, _mm256_mul_ps(ggml::silu8(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(y + i)));
    for (; i < W; ++i) o[i] = x[i] / (1.0f + std::exp(-x[i])) * y[i];
  }
}

// add: a, b, out, n
void add(const KernelCall& c) {
  const int n = c.args[3].i32;
  need(c, n >= 0, "bad n");
  for (int i = 0; i < 3; ++i) need_elems(c, i, n, 4, i == 0 ? "a" : i == 1 ? "b" : "out");
  const float* a = ptr<float>(c, 0);
  const float* b = ptr<float>(c, 1);
  float* o = ptr<float>(c, 2);
  for (int i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

}  // namespace

MatmulLaunch matmul_launch(const KernelCall& c) {
  MatmulLaunch m;
  m.T = c.args[4].i32;
  m.K = c.args[5].i32;
  const int N = c.args[6].i32;
  const bool has_bias = c.args[7].i32 != 0;
  need(c, m.T >= 0 && m.K > 0 && N > 0 && m.K % ggml::type_info(c.type).block_size == 0, "bad T, K or N");
  need_elems(c, 0, static_cast<size_t>(m.T) * m.K, 4, "x");
  need(c, c.args[1].bytes >= ggml::row_size(c.type, m.K) * N, "w binds fewer bytes than N rows of K values");
  if (has_bias) need_elems(c, 2, N, 4, "bias");
  need_elems(c, 3, static_cast<size_t>(m.T) * N, 4, "out");
  need(c, c.args[0].data != c.args[3].data, "out must not alias x");
  m.x = ptr<float>(c, 0);
  m.job = ggml::MatmulJob{ptr<uint8_t>(c, 1), c.type, N, ptr<float>(c, 3)};
  m.bias = has_bias ? ptr<float>(c, 2) : nullptr;
  return m;
}

void run_matmuls(const MatmulLaunch* ms, size_t n, ggml::ThreadPool& pool, std::vector<uint8_t>& scratch) {
  if (n == 0) return;
  ggml::MatmulJob jobs[kMaxMatmulGroup];
  for (size_t i = 0; i < n; ++i) jobs[i] = ms[i].job;
  ggml::matmul_multi(jobs, n, ms[0].K, ms[0].x, ms[0].T, pool, scratch);
  for (size_t i = 0; i < n; ++i) {
    if (!ms[i].bias) continue;
    const int64_t N = ms[i].job.n_out;
    for (int t = 0; t < ms[i].T; ++t)
      for (int64_t k = 0; k < N; ++k) ms[i].job.y[static_cast<size_t>(t) * N + k] += ms[i].bias[k];
  }
}

KernelImpl find_kernel(const std::string& entry) {
  struct Known {
    const char* op;
    KernelFn fn;
    bool typed;  // <type> is the weight's ggml type (else fixed: f32, or f16kv for attention)
  };
  static const Known known[] = {{"get_rows", get_rows, true}, {"rms_norm", rms_norm, false}, {"head_norm", rms_norm, false},
                                {"matmul", matmul, true},     {"rope", rope, false},         {"attention", attention, false},
                                {"swiglu", swiglu, false},    {"add", add, false}};
  const size_t a = entry.find('.'), b = entry.rfind('.');
  if (entry.compare(0, 4, "cpu.") != 0 || a == std::string::npos || b <= a)
    throw std::invalid_argument("kernel '" + entry + "' is not a cpu kernel entry (cpu.<op>.<type>)");
  const std::string op = entry.substr(a + 1, b - a - 1), type = entry.substr(b + 1);
  for (const Known& k : known) {
    if (op != k.op) continue;
    KernelImpl impl{k.fn, ggml::Type::F32, op};
    if (!k.typed) {
      const std::string want = op == "attention" ? "f16kv" : "f32";
      if (type != want) throw std::invalid_argument("kernel '" + entry + "': the cpu backend runs " + op + " as cpu." + op + "." + want);
      return impl;
    }
    // The weight types the cpu dot products and dequantizers implement (runtime/ggml).
    static const char* types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
    bool found = false;
    for (const char* t : types) found |= type == t;
    if (found && ggml::type_from_name(type, &impl.type)) return impl;
    throw std::invalid_argument("kernel '" + entry + "': the cpu backend has no " + type + " kernels");
  }
  throw std::invalid_argument("kernel '" + entry + "' is not a kernel of this runtime's cpu backend");
}

}  // namespace swz::cpu
