// Vector transcendental and reduction primitives whose results are bit-identical to
// llama.cpp's x86 CPU backend (ggml-cpu built for AVX2+FMA), so that softmax, SiLU and
// f16 dot products round exactly as the reference does and greedy decoding does not
// drift away from it (tiny differences are amplified by the next activation
// quantization to Q8).
//
// expf8 implements the vector expf of Arm's optimized-routines (math/v_expf.c, MIT/Apache):
// x = n ln2 + b with n = round(x / ln2) via the 1.5 * 2^23 shift, ln2 split into a
// high and a low part, exp(b) - 1 by a degree-5 polynomial evaluated in Estrin form,
// 2^n assembled in the exponent field, and a two-factor scale for |n| > 126. The
// constants are that algorithm's (ggml-cpu vec.h ggml_v_expf uses the same ones).
#pragma once

#include <immintrin.h>

#include <cmath>

namespace swz::ggml {

#if defined(__AVX2__) && defined(__FMA__)

/// e^x for 8 floats; max error about 1 ulp; exact 0 for -inf and large negative x,
/// +inf for large positive x.
inline __m256 expf8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);  // 1.5 * 2^23: rounds x*log2(e) to an integer
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  // b = x - n*ln2 with ln2 = 0x1.62e4p-1 + 0x1.7f7d1cp-20
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);  // n in the exponent field
  const __m256 scale = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));  // 2^n
  const __m256 b2 = _mm256_mul_ps(b, b);
  const __m256 c0 = _mm256_set1_ps(0x1.ffffecp-1f), c1 = _mm256_set1_ps(0x1.fffdb6p-2f),
               c2 = _mm256_set1_ps(0x1.555e66p-3f), c3 = _mm256_set1_ps(0x1.573e2ep-5f),
               c4 = _mm256_set1_ps(0x1.0e4020p-7f);
  // poly = (c0 b) + (c1 + c2 b) b^2 + (c3 + c4 b) b^4 ~= e^b - 1
  const __m256 poly = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(c4, b, c3), b2, _mm256_fmadd_ps(c2, b, c1)), b2,
                                      _mm256_mul_ps(c0, b));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 big = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  if (!_mm256_movemask_ps(big)) return _mm256_fmadd_ps(poly, scale, scale);
  // |n| > 126: 2^n is not a normal float; scale by s1 * s2 instead (s1 = 2^+-127 or so),
  // and for |n| > 192 the result is s1^2 (overflow to inf or underflow to 0).
  const __m256i neg = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(neg, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, neg));
  const __m256 huge = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, poly, s2), s1);
  const __m256 normal = _mm256_fmadd_ps(scale, poly, scale);
  return _mm256_or_ps(_mm256_and_ps(huge, _mm256_mul_ps(s1, s1)),
                      _mm256_andnot_ps(huge, _mm256_or_ps(_mm256_and_ps(big, scaled), _mm256_andnot_ps(big, normal))));
}

/// SiLU x / (1 + e^-x) for 8 floats (e^-x by expf8; the division is IEEE).
inline __m256 silu8(__m256 x) {
  const __m256 neg_x = _mm256_sub_ps(_mm256_setzero_ps(), x);
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), expf8(neg_x)));
}

/// Horizontal sum of 8 floats in the order ((x0+x4)+(x2+x6)) + ((x1+x5)+(x3+x7)):
/// ggml's hsum_float_8 and llamafile tinyBLAS's hsum.
inline float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

/// Horizontal sum of 8 floats in the order ((x0+x4)+(x1+x5)) + ((x2+x6)+(x3+x7)): the
/// tail of ggml's GGML_F32x8_REDUCE (two _mm_hadd_ps).
inline float hsum8_hadd(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_hadd_ps(r, r);
  r = _mm_hadd_ps(r, r);
  return _mm_cvtss_f32(r);
}

#endif

}  // namespace swz::ggml
