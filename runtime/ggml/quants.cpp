// Dequantization and reference quantization of ggml's block formats.
//
// Every float expression here mirrors ggml-quants.c's operation order, and this file is
// compiled with -ffp-contract=off (see CMakeLists.txt) so no multiply-add gets fused: the
// results are then bit-identical to ggml's reference code and to gguf-py's numpy decoder.
#include "ggml/quants.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ggml/blocks.h"
#include "ggml/fp16.h"
#include "ggml/kernels.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace swz::ggml {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS in ggml-quants.c

void check_row(Type t, int64_t n, const char* what) {
  const TypeInfo& ti = type_info(t);
  if (n < 0 || ti.block_size <= 0 || n % ti.block_size != 0) {
    throw std::invalid_argument(std::string(what) + ": row of " + std::to_string(n) + " elements is not a multiple of " +
                                ti.name + "'s block size " + std::to_string(ti.block_size));
  }
}

[[noreturn]] void unsupported(Type t, const char* what) {
  throw std::invalid_argument(std::string(what) + ": type " + type_info(t).name + " (" +
                              std::to_string(static_cast<uint32_t>(t)) + ") is not supported");
}

// Round to nearest, ties to even, via the 1.5*2^23 trick (ggml's nearest_int). |f| <= 2^22.
inline int nearest_int(float fval) {
  const float val = fval + 12582912.f;
  int i;
  std::memcpy(&i, &val, sizeof(int));
  return (i & 0x007fffff) - 0x00400000;
}

// ---------------------------------------------------------------------------------------
// Dequantization (ggml-quants.c dequantize_row_*)

void dequant_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * 32 + j] = static_cast<float>(x0) * d;
      y[i * 32 + j + 16] = static_cast<float>(x1) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[i * 32 + j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[i * 32 + j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int xh0 = static_cast<int>((qh >> j) << 4) & 0x10;
      const int xh1 = static_cast<int>(qh >> (j + 12)) & 0x10;
      const int x0 = ((x[i].qs[j] & 0x0F) | xh0) - 16;
      const int x1 = ((x[i].qs[j] >> 4) | xh1) - 16;
      y[i * 32 + j] = static_cast<float>(x0) * d;
      y[i * 32 + j + 16] = static_cast<float>(x1) * d;
    }
  }
}

void dequant_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int xh0 = static_cast<int>((qh >> j) << 4) & 0x10;
      const int xh1 = static_cast<int>(qh >> (j + 12)) & 0x10;
      y[i * 32 + j] = static_cast<float>((x[i].qs[j] & 0x0F) | xh0) * d + m;
      y[i * 32 + j + 16] = static_cast<float>((x[i].qs[j] >> 4) | xh1) * d + m;
    }
  }
}

void dequant_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 32; ++j) y[i * 32 + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequant_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 32; ++j) y[i * 32 + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequant_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < QK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void dequant_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < QK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

void dequant_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < QK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void dequant_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * static_cast<float>(x[i].qs[j]);
  }
}

// ---------------------------------------------------------------------------------------
// Reference quantization (ggml-quants.c quantize_row_*_ref)

void quant_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[i * 32 + j] * id;
      const float x1 = x[i * 32 + 16 + j] * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quant_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[i * 32 + j] - min) * id;
      const float x1 = (x[i * 32 + 16 + j] - min) * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quant_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[i * 32 + j] * id;
      const float x1 = x[i * 32 + 16 + j] * id;
      const uint32_t xi0 = static_cast<uint32_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x0 + 16.5f))));
      const uint32_t xi1 = static_cast<uint32_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x1 + 16.5f))));
      y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quant_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[i * 32 + j] - min) * id;
      const float x1 = (x[i * 32 + 16 + j] - min) * id;
      const uint32_t xi0 = static_cast<uint8_t>(x0 + 0.5f);
      const uint32_t xi1 = static_cast<uint8_t>(x1 + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quant_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[i * 32 + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[i * 32 + j] * id));
  }
}

void quant_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[i * 32 + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[i * 32 + j] * id));
      y[i].qs[16 + j] = static_cast<int8_t>(std::round(x[i * 32 + 16 + j] * id));
      sum += y[i].qs[j] + y[i].qs[16 + j];
    }
    y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// ggml-quants.c make_qkx2_quants: fits x ~ scale*L - the_min with L in [0,nmax], weighted
// least squares over a small grid of candidate scales.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml-quants.c make_qx_quants (qw == NULL): symmetric L in [-nmax, nmax-1] stored +nmax.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) {
      const int l = nearest_int(iscale * x[i]);
      L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
    }
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  auto weight = [&](int i) {
    return rmse_type == 1 ? x[i] * x[i] : rmse_type == 2 ? 1.0f : rmse_type == 3 ? std::fabs(x[i]) : std::sqrt(std::fabs(x[i]));
  };
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = weight(i);
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = weight(i);
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Shared by Q4_K (nmax 15, rmin -1, 20 steps) and Q5_K (nmax 31, rmin -0.5, 15 steps):
// per-sub-block scales/mins, packed as 6 bits with fp16 super-scales, then requantized.
void kquant_scales_mins(const float* x, int nmax, float rmin, int nstep, uint8_t* L, uint8_t scales_out[K_SCALE_SIZE],
                        uint16_t* d_out, uint16_t* dmin_out) {
  uint8_t Laux[32];
  float weights[32];
  float mins[QK_K / 32];
  float scales[QK_K / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales_out, 0, K_SCALE_SIZE);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = fp32_to_fp16(max_scale / 63.f);
  *dmin_out = fp32_to_fp16(max_min / 63.f);
  uint8_t sc, m;
  for (int j = 0; j < QK_K / 32; ++j) {
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = fp16_to_fp32(*d_out) * sc;
    if (!d) continue;
    const float dm = fp16_to_fp32(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      int l = nearest_int((x[32 * j + ii] + dm) / d);
      l = std::max(0, std::min(nmax, l));
      L[32 * j + ii] = static_cast<uint8_t>(l);
    }
  }
}

void quant_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i) {
    kquant_scales_mins(x, 15, -1.f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < QK_K; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
    x += QK_K;
  }
}

void quant_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i) {
    kquant_scales_mins(x, 31, -0.5f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
      ql += 32;
    }
    x += QK_K;
  }
}

void quant_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      y[i].d = fp32_to_fp16(0.f);
      x += QK_K;
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = std::max(-32, std::min(31, l));
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < QK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
    x += QK_K;
  }
}

#if defined(__AVX2__)
// Same results as the scalar loop below: first element of largest |x| gives the sign,
// nearest_int == round-half-even (both exact for |v| <= 127), same float multiply.
void quant_q8_k_avx2(const float* x, BlockQ8_K* y, int64_t nb) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    __m256 ma = _mm256_setzero_ps();
    for (int v = 0; v < 32; ++v) ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * v)));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(ma, 1), _mm256_castps256_ps128(ma));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (!amax) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, QK_K);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    float max = 0;
    const __m256 va = _mm256_set1_ps(amax);
    for (int v = 0; v < 32; ++v) {
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * v)), va, _CMP_EQ_OQ));
      if (m) {
        max = x[8 * v + __builtin_ctz(static_cast<unsigned>(m))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int g = 0; g < 8; ++g) {  // 32 elements: 2 bsums
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 p = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * g + 8 * k));
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                                _mm256_set1_epi32(127));
      }
      const __m256i s01 = _mm256_add_epi32(q[0], q[1]), s23 = _mm256_add_epi32(q[2], q[3]);
      // hsum of s01 and s23 (the two 16-element groups)
      const __m256i h = _mm256_hadd_epi32(s01, s23);  // [s01 pairs 0..1, s23 0..1 | s01 2..3, s23 2..3]
      const __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      const __m128i h2 = _mm_hadd_epi32(h4, h4);  // [s01, s23, s01, s23]
      y[i].bsums[2 * g] = static_cast<int16_t>(_mm_cvtsi128_si32(h2));
      y[i].bsums[2 * g + 1] = static_cast<int16_t>(_mm_extract_epi32(h2, 1));
      __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
      __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
      __m256i b = _mm256_packs_epi16(p01, p23);
      b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + 32 * g), b);
    }
    y[i].d = 1 / iscale;
  }
}
#endif

void quant_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
#if defined(__AVX2__)
  quant_q8_k_avx2(x, y, nb);
  return;
#endif
  for (int64_t i = 0; i < nb; ++i) {
    float max = 0, amax = 0;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (!amax) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, QK_K);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));  // ggml leaves them unset; zero is their value
      x += QK_K;
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(std::min(127, v));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
    x += QK_K;
  }
}

// ---------------------------------------------------------------------------------------
// Activation quantization as llama.cpp's x86 CPU backend does it (arch/x86/quants.c
// quantize_row_q8_0 / quantize_row_q8_1, AVX branch): id = 127/amax, round half to even.

// Quantizes one block of 32; returns sum of q (for Q8_1). Writes fp16 d.
inline int act_q8_block(const float* x, int8_t* qs, uint16_t* d_out, float* d_f32) {
#if defined(__AVX2__)
  __m256 v0 = _mm256_loadu_ps(x);
  __m256 v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16);
  __m256 v3 = _mm256_loadu_ps(x + 24);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 ma = _mm256_andnot_ps(sign, v0);
  ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, v1));
  ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, v2));
  ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, v3));
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(ma, 1), _mm256_castps256_ps128(ma));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.f;
  *d_out = fp32_to_fp16(d);
  *d_f32 = d;
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  const __m256 mul = _mm256_set1_ps(id);
  __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
  const int sum = _mm_cvtsi128_si32(s4);
  i0 = _mm256_packs_epi32(i0, i1);
  i2 = _mm256_packs_epi32(i2, i3);
  i0 = _mm256_packs_epi16(i0, i2);
  i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), i0);
  return sum;
#else
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  *d_out = fp32_to_fp16(d);
  *d_f32 = d;
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    const int q = static_cast<int>(std::nearbyint(x[j] * id));  // default rounding: half to even
    qs[j] = static_cast<int8_t>(q);
    sum += q;
  }
  return sum;
#endif
}

}  // namespace

void dequantize_row(Type t, const void* src, float* dst, int64_t n) {
  check_row(t, n, "dequantize_row");
  const int64_t nb = n / type_info(t).block_size;
  switch (t) {
    case Type::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case Type::F16: fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::BF16: bf16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::Q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case Type::Q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case Type::Q5_0: dequant_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case Type::Q5_1: dequant_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
    case Type::Q8_0: dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case Type::Q8_1: dequant_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb); return;
    case Type::Q4_K: dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb); return;
    case Type::Q5_K: dequant_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb); return;
    case Type::Q6_K: dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb); return;
    case Type::Q8_K: dequant_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb); return;
    default: unsupported(t, "dequantize_row");
  }
}

void quantize_row(Type t, const float* src, void* dst, int64_t n) {
  check_row(t, n, "quantize_row");
  const int64_t nb = n / type_info(t).block_size;
  switch (t) {
    case Type::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case Type::F16: fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n); return;
    case Type::BF16: fp32_to_bf16_row(src, static_cast<uint16_t*>(dst), n); return;
    case Type::Q4_0: quant_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
    case Type::Q4_1: quant_q4_1(src, static_cast<BlockQ4_1*>(dst), nb); return;
    case Type::Q5_0: quant_q5_0(src, static_cast<BlockQ5_0*>(dst), nb); return;
    case Type::Q5_1: quant_q5_1(src, static_cast<BlockQ5_1*>(dst), nb); return;
    case Type::Q8_0: quant_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case Type::Q8_1: quant_q8_1(src, static_cast<BlockQ8_1*>(dst), nb); return;
    case Type::Q4_K: quant_q4_k(src, static_cast<BlockQ4_K*>(dst), nb); return;
    case Type::Q5_K: quant_q5_k(src, static_cast<BlockQ5_K*>(dst), nb); return;
    case Type::Q6_K: quant_q6_k(src, static_cast<BlockQ6_K*>(dst), nb); return;
    case Type::Q8_K: quant_q8_k(src, static_cast<BlockQ8_K*>(dst), nb); return;
    default: unsupported(t, "quantize_row");
  }
}

void quantize_row_activation(Type t, const float* src, void* dst, int64_t n) {
  if (t == Type::Q8_0) {
    check_row(t, n, "quantize_row_activation");
    auto* y = static_cast<BlockQ8_0*>(dst);
    float d;
    for (int64_t i = 0; i < n / 32; ++i) act_q8_block(src + 32 * i, y[i].qs, &y[i].d, &d);
    return;
  }
  if (t == Type::Q8_1) {
    check_row(t, n, "quantize_row_activation");
    auto* y = static_cast<BlockQ8_1*>(dst);
    float d;
    for (int64_t i = 0; i < n / 32; ++i) {
      const int sum = act_q8_block(src + 32 * i, y[i].qs, &y[i].d, &d);
      y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
    }
    return;
  }
  quantize_row(t, src, dst, n);
}

namespace kern {

size_t packed_act_row_size(Type at, int64_t n) {
  if (at == Type::Q8_0 || at == Type::Q8_1) {
    const size_t nb = static_cast<size_t>(n / 32);
    const size_t raw = static_cast<size_t>(n) + nb * 8 + (at == Type::Q8_0 ? nb * 32 : 0);
    return (raw + 31) / 32 * 32;
  }
  return row_size(at, n);
}

void quantize_row_activation_packed(Type at, const float* src, uint8_t* dst, int64_t n) {
  if (at != Type::Q8_0 && at != Type::Q8_1) {
    quantize_row_activation(at, src, dst, n);
    return;
  }
  const int64_t nb = n / 32;
  auto* qs = reinterpret_cast<int8_t*>(dst);
  float* d = reinterpret_cast<float*>(dst + n);
  float* s = d + nb;
  for (int64_t i = 0; i < nb; ++i) {
    uint16_t dh;
    float df;
    const int sum = act_q8_block(src + 32 * i, qs + 32 * i, &dh, &df);
    d[i] = fp16_to_fp32(dh);
    s[i] = at == Type::Q8_1 ? fp16_to_fp32(fp32_to_fp16(df * static_cast<float>(sum))) : 0.0f;
  }
  if (at == Type::Q8_0) {
    // c[i][g] = -16 * (qs[32i+4g] + ... + qs[32i+4g+3]): the offset term of Q5_0's q - 16
    // per int32 lane of a vpdpbusd (kernels.h).
    auto* c = reinterpret_cast<int32_t*>(s + nb);
    for (int64_t i = 0; i < nb; ++i)
      for (int g = 0; g < 8; ++g) {
        const int8_t* q = qs + 32 * i + 4 * g;
        c[8 * i + g] = -16 * (q[0] + q[1] + q[2] + q[3]);
      }
  }
}

}  // namespace kern

Type vec_dot_type(Type w) {
  switch (w) {
    case Type::F32: return Type::F32;
    case Type::F16: return Type::F16;
    case Type::BF16: return Type::BF16;
    case Type::Q4_0:
    case Type::Q5_0:
    case Type::Q8_0: return Type::Q8_0;
    case Type::Q4_1:
    case Type::Q5_1: return Type::Q8_1;
    case Type::Q4_K:
    case Type::Q5_K:
    case Type::Q6_K: return Type::Q8_K;
    default: unsupported(w, "vec_dot_type");
  }
}

bool is_matmul_type(Type w) {
  switch (w) {
    case Type::F32:
    case Type::F16:
    case Type::BF16:
    case Type::Q4_0:
    case Type::Q4_1:
    case Type::Q5_0:
    case Type::Q5_1:
    case Type::Q8_0:
    case Type::Q4_K:
    case Type::Q5_K:
    case Type::Q6_K: return true;
    default: return false;
  }
}

// ---------------------------------------------------------------------------------------
// Row conversions

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
  }
#endif
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

}  // namespace swz::ggml
