// Byte layouts of ggml's quantization blocks, field for field as ggml/src/ggml-common.h
// defines them (ggml_half = IEEE half bit pattern stored as uint16_t, little-endian).
// GGUF tensor data is an array of these blocks, row by row; every struct has alignment
// <= 4 and no padding (checked below), so a GGUF data section can be read in place.
#pragma once

#include <cstdint>

#include "ggml/ggml_types.h"

namespace swz::ggml {

inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
inline constexpr int QK8_1 = 32;
inline constexpr int K_SCALE_SIZE = 12;

/// Q4_0: x = d * (q - 8), q in [0,15]; qs[j] holds element j (low nibble) and j+16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[QK4_0 / 2];
};
/// Q4_1: x = d * q + m, q in [0,15]; nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[QK4_1 / 2];
};
/// Q5_0: x = d * (q - 16), q in [0,31]; low 4 bits as Q4_0, bit 4 of element j is bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
};
/// Q5_1: x = d * q + m, q in [0,31]; bit packing as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
/// Q8_0: x = d * q, q int8.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[QK8_0];
};
/// Q8_1: x = d * q; s = d * sum(q) (an activation type: pairs with Q4_1/Q5_1 weights).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[QK8_1];
};
/// Q4_K: super-block of 8 sub-blocks of 32; x = d*sc_j*q - dmin*m_j with 6-bit sc_j, m_j
/// packed in `scales` (see get_scale_min_k4); qs: 4 groups of 64 elements, each 32 bytes
/// holding elements l (low nibble) and l+32 (high nibble) of the group.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
/// Q5_K: as Q4_K plus a 5th bit: bit (2*g) of qh[l] for element l of group g's low half,
/// bit (2*g+1) for its high half.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
/// Q6_K: x = d * scales[i/16] * (q - 32), q in [0,63]: low 4 bits in ql, high 2 bits in qh.
struct BlockQ6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;
};
/// Q8_K: x = d * q (d is fp32); bsums[j] = sum of qs[16j..16j+15]. Activation type of k-quants.
struct BlockQ8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

/// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block
/// (ggml-quants.c get_scale_min_k4): j<4: low 6 bits of q[j], q[j+4]; j>=4: 4 bits from
/// q[j+4] plus the top 2 bits of q[j-4] (scale) / q[j] (min).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

}  // namespace swz::ggml
