// Quantized dot products: weight row (ggml block type) . activation row (its vec_dot_type).
//
// Math per pair (integer parts exact, as in ggml-cpu's ggml_vec_dot_*):
//   Q4_0.Q8_0: sum_b dw*da * sum_i (q_i-8)*a_i        Q4_1.Q8_1: sum_b dw*da*sum q*a + mw*sa
//   Q5_0.Q8_0: sum_b dw*da * sum_i (q_i-16)*a_i       Q5_1.Q8_1: like Q4_1 with 5-bit q
//   Q8_0.Q8_0: sum_b dw*da * sum_i w_i*a_i
//   Q4_K/Q5_K.Q8_K: sum_B d*da * sum_j sc_j*sum q*a - dmin*da * sum_j m_j*(bsum_2j+bsum_2j+1)
//   Q6_K.Q8_K: sum_B d*da * sum_g sc_g * (sum q*a - 32*bsum_g)   (g: 16-element groups)
// AVX2 tiles follow the same integer math with pmaddubsw/pmaddwd; float sums are ours.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ggml/blocks.h"
#include "ggml/fp16.h"
#include "ggml/kernels.h"
#include "ggml/quants.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SWZ_GGML_AVX2 1
#include <immintrin.h>
#endif

namespace swz::ggml {
namespace kern {
namespace {

// ---------------------------------------------------------------------------------------
// Scalar 1x1 kernels

float dot_f32_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const float* x = reinterpret_cast<const float*>(w);
  const float* y = reinterpret_cast<const float*>(a);
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += x[i + k] * y[i + k];
  for (; i < n; ++i) s[0] += x[i] * y[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

template <float (*cvt)(uint16_t)>
float dot_h16_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(w);
  const uint16_t* y = reinterpret_cast<const uint16_t*>(a);
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += cvt(x[i + k]) * cvt(y[i + k]);
  for (; i < n; ++i) s[0] += cvt(x[i]) * cvt(y[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

float dot_q4_0_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const auto* x = reinterpret_cast<const BlockQ4_0*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    int si = 0;
    for (int j = 0; j < 16; ++j) {
      si += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j];
      si += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
    }
    sum += static_cast<float>(si) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return sum;
}

float dot_q4_1_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const auto* x = reinterpret_cast<const BlockQ4_1*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_1*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    int si = 0;
    for (int j = 0; j < 16; ++j) {
      si += (x[b].qs[j] & 0x0F) * y[b].qs[j];
      si += (x[b].qs[j] >> 4) * y[b].qs[j + 16];
    }
    sum += static_cast<float>(si) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) +
           fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sum;
}

inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return lo | static_cast<int>(((qh >> j) & 1u) << 4);
}

float dot_q5_0_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const auto* x = reinterpret_cast<const BlockQ5_0*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    int si = 0;
    for (int j = 0; j < 32; ++j) si += (q5_value(x[b].qs, qh, j) - 16) * y[b].qs[j];
    sum += static_cast<float>(si) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return sum;
}

float dot_q5_1_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const auto* x = reinterpret_cast<const BlockQ5_1*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_1*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    int si = 0;
    for (int j = 0; j < 32; ++j) si += q5_value(x[b].qs, qh, j) * y[b].qs[j];
    sum += static_cast<float>(si) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) +
           fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sum;
}

float dot_q8_0_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const auto* x = reinterpret_cast<const BlockQ8_0*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    int si = 0;
    for (int j = 0; j < 32; ++j) si += x[b].qs[j] * y[b].qs[j];
    sum += static_cast<float>(si) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return sum;
}

// Q4_K / Q5_K share the scale/min layout; `bits5` selects the 5th bit from qh.
template <bool kFive>
float dot_q45_k_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  using WB = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const auto* x = reinterpret_cast<const WB*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const uint8_t* q = x[b].qs;
    const int8_t* aq = y[b].qs;
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[b].scales, &sc, &m);
      const int g = j / 2;  // 64-element group: low nibbles = sub-block 2g, high = 2g+1
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (j & 1) ? (q[32 * g + l] >> 4) : (q[32 * g + l] & 0xF);
        if constexpr (kFive) v |= ((x[b].qh[l] >> j) & 1) << 4;
        s += v * aq[32 * j + l];
      }
      sumi += sc * s;
      summ += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    const float d = fp16_to_fp32(x[b].d) * y[b].d;
    const float dmin = fp16_to_fp32(x[b].dmin) * y[b].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_k_s(int64_t n, const uint8_t* w, const uint8_t* a) {
  const auto* x = reinterpret_cast<const BlockQ6_K*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int8_t q[QK_K];
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        q[128 * h + l + 0] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        q[128 * h + l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        q[128 * h + l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        q[128 * h + l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      ql += 64;
      qh += 32;
    }
    int sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * g + l] * y[b].qs[16 * g + l];
      sumi += x[b].scales[g] * s;
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

template <float (*F)(int64_t, const uint8_t*, const uint8_t*)>
void scalar_tile(int64_t n, const uint8_t* w, size_t, const uint8_t* a, size_t, float* out, int64_t) {
  out[0] = F(n, w, a);
}

#if defined(SWZ_GGML_AVX2)
// ---------------------------------------------------------------------------------------
// AVX2 helpers

inline float hsum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// 16 bytes of nibble pairs -> 32 bytes: byte j = low nibble of p[j], byte 16+j = high nibble.
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes: 0xFF where bit j is set, else 0.
inline __m256i bits_to_bytes(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(v)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// Sum of pairwise products of unsigned bytes u (<= 127 in magnitude pairs) and signed bytes s
// as 8 int32 lanes: lane i = sum of the products of bytes 4i..4i+3. With AVX-VNNI (the
// vec_dot_vnni.cpp build) one vpdpbusd; else vpmaddubsw + vpmaddwd, whose int16 pair sums
// never saturate for our operands (|u| <= 127 pairs with |s| <= 127: at most 32,258), so
// both give the same integers and every result the same bits.
inline __m256i dot_us8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// dot_us8 added to `acc` (vpdpbusd's accumulating form; else one more vpaddd).
inline __m256i dot_us8_acc(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// ---------------------------------------------------------------------------------------
// Symmetric 32-blocks against Q8_0 (Q4_0, Q5_0, Q8_0): signed weights w, sign trick.
// Q4_0 and Q5_0 also load their unsigned codes q (load_u; w = q - 2^kOffsetLog2): the
// packed tiles dot q with the activations as they are and start the sum from the packed
// row's offset term (kernels.h: c = -16 * sum a per 4-byte lane), which saves the sign
// instruction per weight row and token. The same integers per lane either way.

struct WQ8_0 {
  using B = BlockQ8_0;
  static constexpr bool kUnsigned = false;
  static __m256i load(const B& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
};
struct WQ4_0 {
  using B = BlockQ4_0;
  static constexpr bool kUnsigned = true;
  static constexpr int kOffsetLog2 = 3;
  static __m256i load(const B& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
  static __m256i load_u(const B& b) { return nibbles32(b.qs); }
};
struct WQ5_0 {
  using B = BlockQ5_0;
  static constexpr bool kUnsigned = true;
  static constexpr int kOffsetLog2 = 4;
  // q - 16 = nibble | 0xF0 (as int8) where the 5th bit is clear, nibble where it is set.
  static __m256i load(const B& b) {
    const __m256i hi = _mm256_andnot_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(nibbles32(b.qs), hi);
  }
  static __m256i load_u(const B& b) {
    return _mm256_or_si256(nibbles32(b.qs), _mm256_and_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(0x10)));
  }
};

template <class W, int R, int T>
void tile_sym_q8_0(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  using B = typename W::B;
  const int64_t nb = n / 32;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wv[R], wabs[R];
    __m256 dw[R];
    for (int r = 0; r < R; ++r) {
      const B& blk = reinterpret_cast<const B*>(w + r * ws)[b];
      wv[r] = W::load(blk);
      wabs[r] = _mm256_sign_epi8(wv[r], wv[r]);
      dw[r] = _mm256_set1_ps(fp16_to_fp32(blk.d));
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(a + t * as)[b];
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
      const __m256 da = _mm256_set1_ps(fp16_to_fp32(ab.d));
      for (int r = 0; r < R; ++r) {
        const __m256 p = _mm256_cvtepi32_ps(dot_us8(wabs[r], _mm256_sign_epi8(av, wv[r])));
        acc[r][t] = _mm256_fmadd_ps(p, _mm256_mul_ps(dw[r], da), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[t * ldo + r] = hsum(acc[r][t]);
}

// ---------------------------------------------------------------------------------------
// Q4_1 / Q5_1 against Q8_1: unsigned weights, plus the m * s term.

struct WQ4_1 {
  using B = BlockQ4_1;
  static constexpr bool kUnsigned = false;  // (already unsigned: the Q8_1 form)
  static __m256i load(const B& b) { return nibbles32(b.qs); }
};
struct WQ5_1 {
  using B = BlockQ5_1;
  static constexpr bool kUnsigned = false;
  static __m256i load(const B& b) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles32(b.qs), hi);
  }
};

template <class W, int R, int T>
void tile_asym_q8_1(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  using B = typename W::B;
  const int64_t nb = n / 32;
  __m256 acc[R][T];
  float accm[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      accm[r][t] = 0.0f;
    }
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wv[R];
    __m256 dw[R];
    float mw[R];
    for (int r = 0; r < R; ++r) {
      const B& blk = reinterpret_cast<const B*>(w + r * ws)[b];
      wv[r] = W::load(blk);
      dw[r] = _mm256_set1_ps(fp16_to_fp32(blk.d));
      mw[r] = fp16_to_fp32(blk.m);
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_1& ab = reinterpret_cast<const BlockQ8_1*>(a + t * as)[b];
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
      const __m256 da = _mm256_set1_ps(fp16_to_fp32(ab.d));
      const float sa = fp16_to_fp32(ab.s);
      for (int r = 0; r < R; ++r) {
        const __m256 p = _mm256_cvtepi32_ps(dot_us8(wv[r], av));
        acc[r][t] = _mm256_fmadd_ps(p, _mm256_mul_ps(dw[r], da), acc[r][t]);
        accm[r][t] += mw[r] * sa;
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[t * ldo + r] = hsum(acc[r][t]) + accm[r][t];
}

// ---------------------------------------------------------------------------------------
// Packed activations (kernels.h: qs[n] | d[nb] | s[nb] as floats): matmul's layout.

// Broadcast of an fp16 scale to 8 floats (vpbroadcastw + vcvtph2ps).
inline __m256 bcast_h(const uint16_t& h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }

// Accumulators are named variables, not an array: __m256i loads are may_alias, so GCC would
// otherwise keep an accumulator array in memory and store it on every iteration.
#define SWZ_ACC_DECL(r, t) __m256 c##r##t = _mm256_setzero_ps();
#define SWZ_ACC_ALL(X) X(0, 0) X(0, 1) X(0, 2) X(0, 3) X(0, 4) X(0, 5) X(0, 6) X(0, 7) \
  X(1, 0) X(1, 1) X(1, 2) X(1, 3) \
  X(2, 0) X(2, 1) X(2, 2) X(2, 3) X(3, 0) X(3, 1) X(3, 2) X(3, 3)

// Software prefetch of the weight rows, this many bytes ahead of each row's current block
// (for short rows: into the rows of the next tiles). Decode streams every weight once and
// the hardware prefetcher alone left it latency-bound: Qwen2.5-0.5B's Q8_0 LM head
// (151936 x 896, 145 MB) on 2 threads of the Xeon VM took 10.0 ms at 1 token and 28.2 ms at
// 8, and 6.8 / 19.0 ms prefetching 3 KB ahead (1 KB ahead: 9.4 / 25.3; 4 KB: 6.8 / 18.6);
// prefill at 256 tokens is unchanged. With the K-quant row kernels doing the same, Qwen2.5-
// Coder-0.5B Q4_K_M decode (swz-bench -t 2) 30.6 -> 44.4 tok/s, 8 sequences 94 -> 119.
// Experiment hook: SWZ_GGML_PREFETCH=<bytes> (0 = the current line, i.e. none ahead).
static const int kPrefetchBytes = std::getenv("SWZ_GGML_PREFETCH") ? std::atoi(std::getenv("SWZ_GGML_PREFETCH")) : 3072;
template <class W, bool kAsym, int R, int T>
void tile_packed(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  // Up to 4 x 4, or one row x up to 8 tokens (one weight block unpacked for 8 tokens:
  // the unpacking is the largest cost a pair of a row and a token does not share).
  static_assert((R <= 4 && T <= 4) || (R == 1 && T <= 8));
  using B = typename W::B;
  constexpr bool kU = !kAsym && W::kUnsigned;  // unsigned codes + the packed offset term
  const int64_t nb = n / 32;
  SWZ_ACC_ALL(SWZ_ACC_DECL)
  // Asymmetric types: sum_b m_w[b] * s_a[b] in scalar FMAs, one per block in block order,
  // added after the hsum: ggml_vec_dot_q4_1_q8_1's `summs` (GCC contracts its
  // `summs += m * s`), so results are bit-identical to llama.cpp. Kept in this loop so
  // the FMA chains overlap the vector work instead of costing a second pass.
#define SWZ_MACC_DECL(r, t) float m##r##t = 0.0f;
  SWZ_ACC_ALL(SWZ_MACC_DECL)
#undef SWZ_MACC_DECL
  const B* wr0 = reinterpret_cast<const B*>(w);
  const B* wr1 = reinterpret_cast<const B*>(w + (R > 1 ? 1 : 0) * ws);
  const B* wr2 = reinterpret_cast<const B*>(w + (R > 2 ? 2 : 0) * ws);
  const B* wr3 = reinterpret_cast<const B*>(w + (R > 3 ? 3 : 0) * ws);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i w0, w1, w2, w3, s0, s1, s2, s3;
    __m256 d0, d1, d2, d3;
    float mw0 = 0, mw1 = 0, mw2 = 0, mw3 = 0;
#define SWZ_LOADW(r)                                          \
  if constexpr (R > r) {                                      \
    if constexpr (kU) w##r = W::load_u(wr##r[b]);             \
    else w##r = W::load(wr##r[b]);                            \
    if constexpr (!kAsym && !kU) s##r = _mm256_sign_epi8(w##r, w##r); \
    if constexpr (kAsym) mw##r = fp16_to_fp32(wr##r[b].m);    \
    d##r = bcast_h(wr##r[b].d);                               \
  }
    SWZ_LOADW(0) SWZ_LOADW(1) SWZ_LOADW(2) SWZ_LOADW(3)
#undef SWZ_LOADW
    {
      // (a prefetch past the end of the weights is harmless: it never faults)
      _mm_prefetch(reinterpret_cast<const char*>(wr0 + b) + kPrefetchBytes, _MM_HINT_T0);
      if constexpr (R > 1) _mm_prefetch(reinterpret_cast<const char*>(wr1 + b) + kPrefetchBytes, _MM_HINT_T0);
      if constexpr (R > 2) _mm_prefetch(reinterpret_cast<const char*>(wr2 + b) + kPrefetchBytes, _MM_HINT_T0);
      if constexpr (R > 3) _mm_prefetch(reinterpret_cast<const char*>(wr3 + b) + kPrefetchBytes, _MM_HINT_T0);
    }
#define SWZ_STEP(r, t)                                                                                  \
  if constexpr (R > r) {                                                                                \
    __m256i p;                                                                                          \
    if constexpr (kAsym) p = dot_us8(w##r, av);                                                         \
    else if constexpr (kU) p = dot_us8_acc(cv, w##r, av);                                               \
    else p = dot_us8(s##r, _mm256_sign_epi8(av, w##r));                                                 \
    c##r##t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(d##r, da), c##r##t);                 \
    if constexpr (kAsym) m##r##t = std::fma(mw##r, sa, m##r##t);                                        \
  }
#define SWZ_TOKEN(t, STEPS)                                                                        \
  if constexpr (T > t) {                                                                           \
    const uint8_t* arow = a + t * as;                                                              \
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(arow + 32 * b));        \
    const __m256 da = _mm256_broadcast_ss(reinterpret_cast<const float*>(arow + n) + b);           \
    const float sa = kAsym ? reinterpret_cast<const float*>(arow + n)[nb + b] : 0.0f;              \
    __m256i cv = _mm256_setzero_si256();                                                           \
    if constexpr (kU) {                                                                            \
      cv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(arow + n + 8 * nb) + b);            \
      if constexpr (W::kOffsetLog2 != 4) cv = _mm256_srai_epi32(cv, 4 - W::kOffsetLog2);           \
    }                                                                                              \
    STEPS(t)                                                                                       \
    (void)sa, (void)cv;                                                                            \
  }
#define SWZ_ROWS4(t) SWZ_STEP(0, t) SWZ_STEP(1, t) SWZ_STEP(2, t) SWZ_STEP(3, t)
#define SWZ_ROW1(t) SWZ_STEP(0, t)
    SWZ_TOKEN(0, SWZ_ROWS4) SWZ_TOKEN(1, SWZ_ROWS4) SWZ_TOKEN(2, SWZ_ROWS4) SWZ_TOKEN(3, SWZ_ROWS4)
    SWZ_TOKEN(4, SWZ_ROW1) SWZ_TOKEN(5, SWZ_ROW1) SWZ_TOKEN(6, SWZ_ROW1) SWZ_TOKEN(7, SWZ_ROW1)
#undef SWZ_ROWS4
#undef SWZ_ROW1
#undef SWZ_TOKEN
#undef SWZ_STEP
    (void)w0, (void)w1, (void)w2, (void)w3, (void)s0, (void)s1, (void)s2, (void)s3;
    (void)d0, (void)d1, (void)d2, (void)d3, (void)mw0, (void)mw1, (void)mw2, (void)mw3;
  }
  float res[R][T];
#define SWZ_RES(r, t) \
  if constexpr (R > r && T > t) res[r][t] = hsum(c##r##t) + m##r##t;
  SWZ_ACC_ALL(SWZ_RES)
#undef SWZ_RES
#define SWZ_MACC_USE(r, t) (void)m##r##t;
  SWZ_ACC_ALL(SWZ_MACC_USE)
#undef SWZ_MACC_USE
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[t * ldo + r] = res[r][t];
}

// ---------------------------------------------------------------------------------------
// K-quants against Q8_K, one weight row x T activation rows.

// The 8 6-bit scales and mins of a Q4_K/Q5_K block as int16 vectors (lanes 0..7).
inline void k4_scales_mins(const uint8_t* s, int16_t sc[8], int16_t mn[8]) {
  for (int j = 0; j < 8; ++j) {
    uint8_t d, m;
    get_scale_min_k4(j, s, &d, &m);
    sc[j] = d;
    mn[j] = m;
  }
}

#define SWZ_T4(X) X(0) X(1) X(2) X(3)
#define SWZ_T8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

template <bool kFive, int T>
void tile_q45_k(int64_t n, const uint8_t* w, size_t, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  static_assert(T <= 8);
  using WB = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const int64_t nb = n / QK_K;
  const auto* x = reinterpret_cast<const WB*>(w);
#define SWZ_DECL(t) __m256 acc##t = _mm256_setzero_ps(); float accm##t = 0.0f;
  SWZ_T8(SWZ_DECL)
#undef SWZ_DECL
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    for (size_t l = 0; l < sizeof(WB); l += 64)  // tile_packed's kPrefetchBytes
      _mm_prefetch(reinterpret_cast<const char*>(x + b) + kPrefetchBytes + l, _MM_HINT_T0);
    int16_t sc[8], mn[8];
    k4_scales_mins(x[b].scales, sc, mn);
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0, si4 = si0, si5 = si0, si6 = si0, si7 = si0;
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFive) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
    for (int g = 0; g < 4; ++g) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * g));
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        const __m256i one = _mm256_set1_epi8(1);
        const __m128i sh_lo = _mm_cvtsi32_si128(2 * g), sh_hi = _mm_cvtsi32_si128(2 * g + 1);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, sh_lo), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, sh_hi), one), 4));
      }
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * g]);
      const __m256i s_hi = _mm256_set1_epi16(sc[2 * g + 1]);
#define SWZ_TOK(t)                                                                                          \
  if constexpr (T > t) {                                                                                    \
    const int8_t* aq = reinterpret_cast<const BlockQ8_K*>(a + t * as)[b].qs + 64 * g;                       \
    const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));                          \
    const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 32));                     \
    const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a_lo), s_lo);                           \
    const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a_hi), s_hi);                           \
    si##t = _mm256_add_epi32(si##t, _mm256_add_epi32(p_lo, p_hi));                                          \
  }
      SWZ_T8(SWZ_TOK)
#undef SWZ_TOK
    }
    const __m128i mins = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mn));
#define SWZ_FIN(t)                                                                                          \
  if constexpr (T > t) {                                                                                    \
    const BlockQ8_K& ab = reinterpret_cast<const BlockQ8_K*>(a + t * as)[b];                                \
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));                      \
    const __m128i bs8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));        \
    __m128i pm = _mm_madd_epi16(bs8, mins);                                                                 \
    pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, _MM_SHUFFLE(1, 0, 3, 2)));                                 \
    pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, _MM_SHUFFLE(2, 3, 0, 1)));                                 \
    acc##t = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(si##t), acc##t);                  \
    accm##t += dmin * ab.d * static_cast<float>(_mm_cvtsi128_si32(pm));                                     \
  }
    SWZ_T8(SWZ_FIN)
#undef SWZ_FIN
  }
#define SWZ_OUT(t) \
  if constexpr (T > t) out[t * ldo] = hsum(acc##t) - accm##t;
  SWZ_T8(SWZ_OUT)
#undef SWZ_OUT
}

template <int T>
void tile_q6_k(int64_t n, const uint8_t* w, size_t, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  static_assert(T <= 8);
  const int64_t nb = n / QK_K;
  const auto* x = reinterpret_cast<const BlockQ6_K*>(w);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, acc4 = acc0, acc5 = acc0, acc6 = acc0, acc7 = acc0;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  for (int64_t b = 0; b < nb; ++b) {
    for (size_t l = 0; l < sizeof(BlockQ6_K); l += 64)  // tile_packed's kPrefetchBytes
      _mm_prefetch(reinterpret_cast<const char*>(x + b) + kPrefetchBytes + l, _MM_HINT_T0);
    const float d = fp16_to_fp32(x[b].d);
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
    __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0, si4 = si0, si5 = si0, si6 = si0, si7 = si0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * h));
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      for (int c = 0; c < 4; ++c) {
        // Chunk c of half h: elements 128h+32c+l, 16-groups 8h+2c (i16 lanes 0..7), 8h+2c+1.
        const __m256i lowbits = c == 0 ? ql0 : c == 1 ? ql1 : c == 2 ? _mm256_srli_epi16(ql0, 4) : _mm256_srli_epi16(ql1, 4);
        const __m256i q = _mm256_or_si256(_mm256_and_si256(lowbits, m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), m3), 4));
        const int g = 8 * h + 2 * c;
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(x[b].scales[g + 1]), _mm_set1_epi16(x[b].scales[g]));
#define SWZ_TOK(t)                                                                                          \
  if constexpr (T > t) {                                                                                    \
    const int8_t* aq = reinterpret_cast<const BlockQ8_K*>(a + t * as)[b].qs + 128 * h + 32 * c;             \
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));                            \
    si##t = _mm256_add_epi32(si##t, _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), sc));                    \
  }
        SWZ_T8(SWZ_TOK)
#undef SWZ_TOK
      }
    }
#define SWZ_FIN(t)                                                                                          \
  if constexpr (T > t) {                                                                                    \
    const BlockQ8_K& ab = reinterpret_cast<const BlockQ8_K*>(a + t * as)[b];                                \
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));                      \
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(bs, scales16), 5); /* 32*sum sc*bsum */        \
    acc##t = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(_mm256_sub_epi32(si##t, corr)), acc##t); \
  }
    SWZ_T8(SWZ_FIN)
#undef SWZ_FIN
  }
#define SWZ_OUT(t) \
  if constexpr (T > t) out[t * ldo] = hsum(acc##t);
  SWZ_T8(SWZ_OUT)
#undef SWZ_OUT
}

// ---------------------------------------------------------------------------------------
// Float types, one weight row x T activation rows.

template <int T>
void tile_f32(int64_t n, const uint8_t* w, size_t, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  const float* x = reinterpret_cast<const float*>(w);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(reinterpret_cast<const float*>(a + t * as) + i), acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = hsum(acc[t]);
    const float* y = reinterpret_cast<const float*>(a + t * as);
    for (int64_t k = i; k < n; ++k) s += x[k] * y[k];
    out[t * ldo] = s;
  }
}

inline __m256 load_h16(const uint16_t* p, bool bf) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (bf) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  return _mm256_cvtph_ps(v);
}

template <bool kBF, int T>
void tile_h16(int64_t n, const uint8_t* w, size_t, const uint8_t* a, size_t as, float* out, int64_t ldo) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(w);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = load_h16(x + i, kBF);
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(xv, load_h16(reinterpret_cast<const uint16_t*>(a + t * as) + i, kBF), acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = hsum(acc[t]);
    const uint16_t* y = reinterpret_cast<const uint16_t*>(a + t * as);
    for (int64_t k = i; k < n; ++k)
      s += kBF ? bf16_to_fp32(x[k]) * bf16_to_fp32(y[k]) : fp16_to_fp32(x[k]) * fp16_to_fp32(y[k]);
    out[t * ldo] = s;
  }
}

// Table builders.
template <template <int, int> class K, int R, int T>
void fill_rt(KernelSet& ks) {
  ks.fn[R - 1][T - 1] = &K<R, T>::run;
  if constexpr (T > 1) fill_rt<K, R, T - 1>(ks);
  if constexpr (T == 1 && R > 1) fill_rt<K, R - 1, 4>(ks);
}

template <class W>
struct SymQ8_0 {
  template <int R, int T>
  struct K {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* o, int64_t l) {
      tile_sym_q8_0<W, R, T>(n, w, ws, a, as, o, l);
    }
  };
};
template <class W>
struct AsymQ8_1 {
  template <int R, int T>
  struct K {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* o, int64_t l) {
      tile_asym_q8_1<W, R, T>(n, w, ws, a, as, o, l);
    }
  };
};

template <class W, bool kAsym>
struct Packed {
  template <int R, int T>
  struct K {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* o, int64_t l) {
      tile_packed<W, kAsym, R, T>(n, w, ws, a, as, o, l);
    }
  };
};
// Default tiles. Measured on the 2-core dev machine (Zen, AVX2): 3x4 is ~5% faster than
// 2x4 for Q8_0 (spills a little, but spilled weights are L1 loads). On the 2-core Xeon VM
// (AVX-VNNI; swz_ggml_matmul_bench -t 1 --arch qwen05, 256 tokens, GFLOP/s): one row x 8
// tokens, which unpacks each weight block once for 8 tokens, against the 2x4 / 3x4 tiles:
// Q5_0 75 vs 66, Q5_1 64 vs 51, Q4_1 69 vs 61 (8 tokens, a decode step of 8 sequences:
// Q5_0 87 vs 73); Q4_0, whose unpacking is cheapest, 71 vs 76 (2x4 kept); Q8_0 even.
template <class W, bool kAsym>
KernelSet make_packed(int rows, int toks) {
  KernelSet ks;
  fill_rt<Packed<W, kAsym>::template K, kMaxR, 4>(ks);
  fill_rt<Packed<W, kAsym>::template K, 1, kMaxT>(ks);  // one row x 5..8 tokens
  ks.rows_per_tile = rows;
  ks.toks_per_tile = toks;
  return ks;
}

template <class W>
KernelSet make_sym() {
  KernelSet ks;
  fill_rt<SymQ8_0<W>::template K, 2, 4>(ks);
  ks.rows_per_tile = 2;
  ks.toks_per_tile = 4;
  return ks;
}
template <class W>
KernelSet make_asym() {
  KernelSet ks;
  fill_rt<AsymQ8_1<W>::template K, 2, 4>(ks);
  ks.rows_per_tile = 2;
  ks.toks_per_tile = 4;
  return ks;
}
template <template <int> class F>
KernelSet make_row() {
  KernelSet ks;
  ks.fn[0][0] = &F<1>::run;
  ks.fn[0][1] = &F<2>::run;
  ks.fn[0][2] = &F<3>::run;
  ks.fn[0][3] = &F<4>::run;
  ks.rows_per_tile = 1;
  ks.toks_per_tile = 4;
  return ks;
}
// One row x up to 8 tokens: the block's scales and unpacking shared by 8 tokens. Q4_K at
// Qwen2.5-0.5B's ffn_down, 256 tokens, one thread of the Xeon VM: 70 -> 76 GFLOP/s; Q6_K
// 77 either way (kept at 4).
template <template <int> class F>
KernelSet make_row8() {
  KernelSet ks = make_row<F>();
  ks.fn[0][4] = &F<5>::run;
  ks.fn[0][5] = &F<6>::run;
  ks.fn[0][6] = &F<7>::run;
  ks.fn[0][7] = &F<8>::run;
  ks.toks_per_tile = 8;
  return ks;
}
#define SWZ_ROW_KERNEL(NAME, CALL)                                                                        \
  template <int T>                                                                                        \
  struct NAME {                                                                                           \
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* o, int64_t l) { \
      CALL(n, w, ws, a, as, o, l);                                                                        \
    }                                                                                                     \
  };
SWZ_ROW_KERNEL(RowQ4K, (tile_q45_k<false, T>))
SWZ_ROW_KERNEL(RowQ5K, (tile_q45_k<true, T>))
SWZ_ROW_KERNEL(RowQ6K, tile_q6_k<T>)
SWZ_ROW_KERNEL(RowF32, tile_f32<T>)
SWZ_ROW_KERNEL(RowF16, (tile_h16<false, T>))
SWZ_ROW_KERNEL(RowBF16, (tile_h16<true, T>))
#undef SWZ_ROW_KERNEL
#endif  // SWZ_GGML_AVX2

[[maybe_unused]] KernelSet scalar_set(TileFn f) {
  KernelSet ks;
  ks.fn[0][0] = f;
  return ks;
}

}  // namespace

#if !defined(SWZ_GGML_VNNI_TU)
TileFn scalar_kernel_for(Type t) {
  switch (t) {
    case Type::F32: return scalar_tile<dot_f32_s>;
    case Type::F16: return scalar_tile<dot_h16_s<fp16_to_fp32>>;
    case Type::BF16: return scalar_tile<dot_h16_s<bf16_to_fp32>>;
    case Type::Q4_0: return scalar_tile<dot_q4_0_s>;
    case Type::Q4_1: return scalar_tile<dot_q4_1_s>;
    case Type::Q5_0: return scalar_tile<dot_q5_0_s>;
    case Type::Q5_1: return scalar_tile<dot_q5_1_s>;
    case Type::Q8_0: return scalar_tile<dot_q8_0_s>;
    case Type::Q4_K: return scalar_tile<dot_q45_k_s<false>>;
    case Type::Q5_K: return scalar_tile<dot_q45_k_s<true>>;
    case Type::Q6_K: return scalar_tile<dot_q6_k_s>;
    default: return nullptr;
  }
}
#endif  // !SWZ_GGML_VNNI_TU

#if defined(SWZ_GGML_AVX512_TU)
// vec_dot_avx512.cpp: this file again, built with AVX-512 (VNNI, VL, BW) for 256-bit
// vectors: vpdpbusd and 32 vector registers.
#define SWZ_KERNELS_FOR kernels_for_avx512
#define SWZ_PACKED_KERNELS_FOR packed_kernels_for_avx512
#elif defined(SWZ_GGML_VNNI_TU)
// vec_dot_vnni.cpp: this file again, built with -mavxvnni; only its kernel sets, under their
// own names (the rest is the base build's).
#define SWZ_KERNELS_FOR kernels_for_vnni
#define SWZ_PACKED_KERNELS_FOR packed_kernels_for_vnni
#else
#define SWZ_KERNELS_FOR kernels_for_base
#define SWZ_PACKED_KERNELS_FOR packed_kernels_for_base
#endif

const KernelSet* SWZ_KERNELS_FOR(Type t) {
#if defined(SWZ_GGML_AVX2)
  static const KernelSet q8_0 = make_sym<WQ8_0>();
  static const KernelSet q4_0 = make_sym<WQ4_0>();
  static const KernelSet q5_0 = make_sym<WQ5_0>();
  static const KernelSet q4_1 = make_asym<WQ4_1>();
  static const KernelSet q5_1 = make_asym<WQ5_1>();
  static const KernelSet q4_k = make_row8<RowQ4K>();
  static const KernelSet q5_k = make_row8<RowQ5K>();
  static const KernelSet q6_k = make_row<RowQ6K>();
  static const KernelSet f32 = make_row<RowF32>();
  static const KernelSet f16 = make_row<RowF16>();
  static const KernelSet bf16 = make_row<RowBF16>();
  switch (t) {
    case Type::F32: return &f32;
    case Type::F16: return &f16;
    case Type::BF16: return &bf16;
    case Type::Q4_0: return &q4_0;
    case Type::Q4_1: return &q4_1;
    case Type::Q5_0: return &q5_0;
    case Type::Q5_1: return &q5_1;
    case Type::Q8_0: return &q8_0;
    case Type::Q4_K: return &q4_k;
    case Type::Q5_K: return &q5_k;
    case Type::Q6_K: return &q6_k;
    default: return nullptr;
  }
#else
  static const KernelSet sets[] = {
      scalar_set(scalar_kernel_for(Type::F32)),  scalar_set(scalar_kernel_for(Type::F16)),
      scalar_set(scalar_kernel_for(Type::BF16)), scalar_set(scalar_kernel_for(Type::Q4_0)),
      scalar_set(scalar_kernel_for(Type::Q4_1)), scalar_set(scalar_kernel_for(Type::Q5_0)),
      scalar_set(scalar_kernel_for(Type::Q5_1)), scalar_set(scalar_kernel_for(Type::Q8_0)),
      scalar_set(scalar_kernel_for(Type::Q4_K)), scalar_set(scalar_kernel_for(Type::Q5_K)),
      scalar_set(scalar_kernel_for(Type::Q6_K))};
  switch (t) {
    case Type::F32: return &sets[0];
    case Type::F16: return &sets[1];
    case Type::BF16: return &sets[2];
    case Type::Q4_0: return &sets[3];
    case Type::Q4_1: return &sets[4];
    case Type::Q5_0: return &sets[5];
    case Type::Q5_1: return &sets[6];
    case Type::Q8_0: return &sets[7];
    case Type::Q4_K: return &sets[8];
    case Type::Q5_K: return &sets[9];
    case Type::Q6_K: return &sets[10];
    default: return nullptr;
  }
#endif
}

const KernelSet* SWZ_PACKED_KERNELS_FOR(Type t) {
#if defined(SWZ_GGML_AVX2)
  static const KernelSet q8_0 = make_packed<WQ8_0, false>(3, 4);
#if defined(SWZ_GGML_AVX512_TU)
  static const KernelSet q4_0 = make_packed<WQ4_0, false>(4, 4);  // 87 against 80 GFLOP/s at 2x4
#else
  static const KernelSet q4_0 = make_packed<WQ4_0, false>(2, 4);
#endif
#if defined(SWZ_GGML_AVX512_TU)
  // 32 registers: a 3x4 tile no longer spills; Q5_0, one thread of the Xeon VM, 256
  // tokens: 81-85 GFLOP/s against 76 at 1x8 (and 76 at 4x4).
  static const KernelSet q5_0 = make_packed<WQ5_0, false>(3, 4);
#else
  static const KernelSet q5_0 = make_packed<WQ5_0, false>(1, 8);
#endif
  static const KernelSet q4_1 = make_packed<WQ4_1, true>(1, 8);
  static const KernelSet q5_1 = make_packed<WQ5_1, true>(1, 8);
  switch (t) {
    case Type::Q4_0: return &q4_0;
    case Type::Q4_1: return &q4_1;
    case Type::Q5_0: return &q5_0;
    case Type::Q5_1: return &q5_1;
    case Type::Q8_0: return &q8_0;
    default: break;
  }
  return SWZ_KERNELS_FOR(t);
#else
  return nullptr;  // scalar build: matmul uses ggml-layout activations (packed_act_enabled)
#endif
}

#if !defined(SWZ_GGML_VNNI_TU)
#if defined(SWZ_GGML_HAVE_VNNI_TU)
const KernelSet* kernels_for_vnni(Type t);
const KernelSet* packed_kernels_for_vnni(Type t);
#endif
#if defined(SWZ_GGML_HAVE_AVX512_TU)
const KernelSet* kernels_for_avx512(Type t);
const KernelSet* packed_kernels_for_avx512(Type t);
#endif

namespace {
/// Which build's kernel sets kernels_for hands out: -1 not decided yet, 0 the base (AVX2)
/// build, 1 AVX-VNNI (vec_dot_vnni.cpp), 2 AVX-512 (vec_dot_avx512.cpp).
std::atomic<int> g_isa{-1};
bool vnni_supported() {
#if defined(SWZ_GGML_HAVE_VNNI_TU) && (defined(__x86_64__) || defined(__i386__))
  return __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}
bool avx512_supported() {
#if defined(SWZ_GGML_HAVE_AVX512_TU) && (defined(__x86_64__) || defined(__i386__))
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}
bool env_off(const char* name) {
  const char* e = std::getenv(name);
  return e && e[0] == '0';
}
int isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = avx512_supported() && !env_off("SWZ_GGML_AVX512") ? 2 : vnni_supported() && !env_off("SWZ_GGML_VNNI") ? 1 : 0;
    g_isa.store(v, std::memory_order_relaxed);
  }
  return v;
}
}  // namespace

bool use_vnni(bool on) {
  const bool ok = !on || vnni_supported();
  g_isa.store(on && ok ? 1 : 0, std::memory_order_relaxed);
  return ok;
}

bool use_avx512(bool on) {
  const bool ok = !on || avx512_supported();
  g_isa.store(on && ok ? 2 : 0, std::memory_order_relaxed);
  return ok;
}

void use_default_kernels() { g_isa.store(-1, std::memory_order_relaxed); }

const KernelSet* kernels_for(Type t) {
  switch (isa()) {
#if defined(SWZ_GGML_HAVE_AVX512_TU)
    case 2: return kernels_for_avx512(t);
#endif
#if defined(SWZ_GGML_HAVE_VNNI_TU)
    case 1: return kernels_for_vnni(t);
#endif
    default: return kernels_for_base(t);
  }
}

const KernelSet* packed_kernels_for(Type t) {
  switch (isa()) {
#if defined(SWZ_GGML_HAVE_AVX512_TU)
    case 2: return packed_kernels_for_avx512(t);
#endif
#if defined(SWZ_GGML_HAVE_VNNI_TU)
    case 1: return packed_kernels_for_vnni(t);
#endif
    default: return packed_kernels_for_base(t);
  }
}

bool packed_act_enabled() {
#if defined(SWZ_GGML_AVX2)
  return true;
#else
  return false;
#endif
}

#endif  // !SWZ_GGML_VNNI_TU
}  // namespace kern
#if !defined(SWZ_GGML_VNNI_TU)

namespace {
void check_dot(Type t, int64_t n, const char* what) {
  const TypeInfo& ti = type_info(t);
  if (!is_matmul_type(t)) {
    throw std::invalid_argument(std::string(what) + ": weight type " + ti.name + " has no dot product");
  }
  if (n < 0 || n % ti.block_size != 0) {
    throw std::invalid_argument(std::string(what) + ": row of " + std::to_string(n) + " elements is not a multiple of " +
                                ti.name + "'s block size " + std::to_string(ti.block_size));
  }
}
}  // namespace

float vec_dot(Type t, int64_t n, const void* w_row, const void* act_row) {
  check_dot(t, n, "vec_dot");
  float out = 0;
  kern::kernels_for(t)->fn[0][0](n, static_cast<const uint8_t*>(w_row), 0, static_cast<const uint8_t*>(act_row), 0, &out,
                                 1);
  return out;
}

float vec_dot_scalar(Type t, int64_t n, const void* w_row, const void* act_row) {
  check_dot(t, n, "vec_dot_scalar");
  float out = 0;
  kern::scalar_kernel_for(t)(n, static_cast<const uint8_t*>(w_row), 0, static_cast<const uint8_t*>(act_row), 0, &out, 1);
  return out;
}

#endif  // !SWZ_GGML_VNNI_TU
}  // namespace swz::ggml
