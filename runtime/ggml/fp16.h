// IEEE-754 binary16 (F16) and bfloat16 (BF16) <-> binary32 conversions.
//
// Semantics follow ggml (ggml/src/ggml-impl.h): fp32 -> fp16 rounds to nearest-even
// (what F16C's vcvtps2ph with imm 0 does), overflow goes to +-inf, subnormals are kept;
// fp32 -> bf16 rounds to nearest-even and forces NaNs quiet (ggml_compute_fp32_to_bf16).
// Widening conversions are exact. The scalar fallbacks are bit-identical to the F16C path.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace swz::ggml {

namespace detail {
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Portable fp16 -> fp32 (exact).
inline float fp16_to_fp32_soft(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in fp32.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return f32_from_bits(sign | f32_bits(v));
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// Portable fp32 -> fp16, round to nearest-even (bit-identical to vcvtps2ph imm=0).
inline uint16_t fp32_to_fp16_soft(float f) {
  uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((u >> 13) & 0x3ffu);  // quiet NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf (incl. inf itself)
  if (u < 0x38800000u) {
    // Result is subnormal (or zero): count in units of 2^-24, rounded to nearest-even. A
    // result of 1024 is the smallest normal, whose encoding is the same bit pattern.
    const float v = f32_from_bits(u) * 0x1p24f;
    const uint32_t vi = f32_bits(v + 0x1p23f) - f32_bits(0x1p23f);  // RNE for 0 <= v < 2^23
    return sign | static_cast<uint16_t>(vi);
  }
  u += 0xfffu + ((u >> 13) & 1u);
  return sign | static_cast<uint16_t>((u - (112u << 23)) >> 13);
}
}  // namespace detail

/// Converts an IEEE half (bit pattern) to float. Exact.
inline float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return detail::fp16_to_fp32_soft(h);
#endif
}

/// Converts a float to an IEEE half (bit pattern), round to nearest-even.
inline uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
  return static_cast<uint16_t>(_cvtss_sh(f, 0));
#else
  return detail::fp32_to_fp16_soft(f);
#endif
}

/// Converts a bfloat16 (bit pattern) to float. Exact.
inline float bf16_to_fp32(uint16_t h) { return detail::f32_from_bits(static_cast<uint32_t>(h) << 16); }

/// Converts a float to bfloat16 (bit pattern): round to nearest-even, NaN forced quiet
/// (ggml_compute_fp32_to_bf16).
inline uint16_t fp32_to_bf16(float f) {
  const uint32_t u = detail::f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/// Row conversions (vectorised where the target allows). `n` elements, no alignment needed.
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace swz::ggml
