//===- cases_gemv.cpp - decode-side GEMV, embedding lookup and argmax -----===//
//
// Numeric cases for codegen/kernels/gemv_<type>.mlir (matmul_<type>: dequantizing
// GEMV y = x·Wᵀ (+ bias); get_rows_<type>: embedding lookup) for Q4_0, Q4_1, Q5_0,
// Q8_0, Q4_K, Q6_K and F16 weights, and argmax_f32.mlir (greedy sampling), PTX and
// SPIR-V alike (the kernels are target-neutral). Weights are random valid GGUF
// blocks (cases_gemv.h: every quant bit pattern, realistic scales); the reference
// dequantizes them in float64 from the block definitions (ggml-common.h /
// ggml-quants.c dequantize_row_*), written here independently of runtime/ggml
// (test/unit/compiler/gemv_reference_test.cpp checks the two agree).
//
//===----------------------------------------------------------------------===//
#include "cases.h"
#include "cases_gemv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace swz::check {
namespace gemv {

const std::vector<std::string> &weightTypes() {
  static const std::vector<std::string> types = {"q4_0", "q4_1", "q5_0", "q8_0",
                                                 "q4_k", "q6_k", "f16"};
  return types;
}

int blockElements(const std::string &t) {
  if (t == "q4_0" || t == "q4_1" || t == "q5_0" || t == "q8_0")
    return 32;
  if (t == "q4_k" || t == "q6_k")
    return 256;
  if (t == "f16")
    return 1;
  throw std::invalid_argument("gemv: unknown weight type '" + t + "'");
}

int blockBytes(const std::string &t) {
  if (t == "q4_0") return 18;
  if (t == "q4_1") return 20;
  if (t == "q5_0") return 22;
  if (t == "q8_0") return 34;
  if (t == "q4_k") return 144;
  if (t == "q6_k") return 210;
  if (t == "f16") return 2;
  throw std::invalid_argument("gemv: unknown weight type '" + t + "'");
}

double halfToDouble(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v;
  if (exp == 0)
    v = std::ldexp(double(man), -24);
  else if (exp == 31)
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(double(1024 + man), exp - 25);
  return sign ? -v : v;
}

uint16_t doubleToHalf(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v))
    return 0x7E00;
  if (a >= 65520.0)  // rounds to inf
    return uint16_t(sign | 0x7C00);
  if (a < std::ldexp(1.0, -14)) {  // subnormal: multiples of 2^-24
    double q = std::nearbyint(std::ldexp(a, 24));  // current rounding mode: to nearest even
    return uint16_t(sign | uint16_t(q));
  }
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  double m = std::nearbyint(std::ldexp(a, 11 - e));  // 11 significant bits
  if (m >= 2048.0) {
    m /= 2;
    ++e;
  }
  int exp = e - 1 + 15;
  if (exp >= 31)
    return uint16_t(sign | 0x7C00);
  return uint16_t(sign | uint16_t(exp << 10) | uint16_t(int(m) - 1024));
}

namespace {

uint16_t rd16(const uint8_t *p) { return uint16_t(p[0] | (p[1] << 8)); }
double rdHalf(const uint8_t *p) { return halfToDouble(rd16(p)); }

/// get_scale_min_k4 (ggml-quants.c): 6-bit scale and min of sub-block j of a q4_K block.
void scaleMinK4(int j, const uint8_t *q, int &sc, int &m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

} // namespace

void dequantRow(const std::string &t, const uint8_t *row, int64_t k, double *w, double *mag) {
  const int qk = blockElements(t), bs = blockBytes(t);
  if (k % qk != 0)
    throw std::invalid_argument("gemv: row of " + std::to_string(k) + " elements is not a " +
                                "multiple of " + t + "'s block of " + std::to_string(qk));
  double scratch;
  auto put = [&](int64_t i, double scale, double q, double off) {
    w[i] = scale * q + off;
    (mag ? mag[i] : scratch) = std::fabs(scale * q) + std::fabs(off);
  };
  for (int64_t b = 0; b < k / qk; ++b) {
    const uint8_t *x = row + b * bs;
    const int64_t o = b * qk;
    if (t == "f16") {
      put(o, 1.0, rdHalf(x), 0.0);
    } else if (t == "q4_0" || t == "q4_1" || t == "q5_0") {
      // d | (m | qh) | qs[16]: weight j low nibble of qs[j], weight j+16 high nibble.
      const double d = rdHalf(x);
      const uint8_t *qs = x + (t == "q4_0" ? 2 : t == "q4_1" ? 4 : 6);
      uint32_t qh = 0;
      if (t == "q5_0")
        qh = uint32_t(x[2]) | uint32_t(x[3]) << 8 | uint32_t(x[4]) << 16 | uint32_t(x[5]) << 24;
      const double off = t == "q4_0" ? -8.0 * d : t == "q4_1" ? rdHalf(x + 2) : -16.0 * d;
      for (int j = 0; j < 16; ++j) {
        int q0 = qs[j] & 0xF, q1 = qs[j] >> 4;
        if (t == "q5_0") {
          q0 |= int((qh >> j) & 1) << 4;
          q1 |= int((qh >> (j + 16)) & 1) << 4;
        }
        put(o + j, d, q0, off);
        put(o + j + 16, d, q1, off);
      }
    } else if (t == "q8_0") {
      // The kernel forms d * (q + 128) - 128 d.
      const double d = rdHalf(x);
      for (int j = 0; j < 32; ++j) {
        const int q = int8_t(x[2 + j]);
        w[o + j] = d * q;
        (mag ? mag[o + j] : scratch) = std::fabs(d) * (q + 128) + 128.0 * std::fabs(d);
      }
    } else if (t == "q4_k") {
      // d | dmin | scales[12] | qs[128]; 64 weights per 32 qs bytes: low nibbles
      // sub-block 2p, high nibbles sub-block 2p+1.
      const double d = rdHalf(x), dmin = rdHalf(x + 2);
      const uint8_t *scales = x + 4, *qs = x + 16;
      for (int p = 0; p < 4; ++p) {
        int sc0, m0, sc1, m1;
        scaleMinK4(2 * p, scales, sc0, m0);
        scaleMinK4(2 * p + 1, scales, sc1, m1);
        for (int l = 0; l < 32; ++l) {
          put(o + 64 * p + l, d * sc0, qs[32 * p + l] & 0xF, -dmin * m0);
          put(o + 64 * p + 32 + l, d * sc1, qs[32 * p + l] >> 4, -dmin * m1);
        }
      }
    } else if (t == "q6_k") {
      // ql[128] | qh[64] | scales[16] int8 | d; per 128-weight half n: for l < 32,
      // weights l, l+32, l+64, l+96 from ql[l], ql[l+32] nibbles and qh[l] bit pairs.
      const uint8_t *ql = x, *qh = x + 128;
      const int8_t *sc = reinterpret_cast<const int8_t *>(x + 192);
      const double d = rdHalf(x + 208);
      for (int n = 0; n < 2; ++n) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = (ql[64 * n + l] & 0xF) | (((qh[32 * n + l] >> 0) & 3) << 4);
          const int q2 = (ql[64 * n + l + 32] & 0xF) | (((qh[32 * n + l] >> 2) & 3) << 4);
          const int q3 = (ql[64 * n + l] >> 4) | (((qh[32 * n + l] >> 4) & 3) << 4);
          const int q4 = (ql[64 * n + l + 32] >> 4) | (((qh[32 * n + l] >> 6) & 3) << 4);
          const double s[4] = {d * sc[8 * n + is], d * sc[8 * n + is + 2], d * sc[8 * n + is + 4],
                               d * sc[8 * n + is + 6]};
          const int q[4] = {q1, q2, q3, q4};
          for (int m = 0; m < 4; ++m)
            put(o + 128 * n + l + 32 * m, s[m], q[m], -32.0 * s[m]);
        }
      }
    } else {
      throw std::invalid_argument("gemv: unknown weight type '" + t + "'");
    }
  }
}

std::vector<uint8_t> randomWeights(const std::string &t, int64_t rows, int64_t k,
                                   uint64_t seed) {
  const int qk = blockElements(t), bs = blockBytes(t);
  if (k % qk != 0)
    throw std::invalid_argument("gemv: k not a multiple of the block");
  const int64_t nb = rows * (k / qk);
  std::vector<uint8_t> bytes(static_cast<size_t>(nb * bs));
  Rng rng{seed};
  auto bits = [&]() { return uint8_t(uint64_t((rng.next() + 1.0) * 128.0) & 255); };
  // Positive d in [2^-9, 2^-5] (log-uniform), as quantizers give for |x| <~ 1.
  auto scaleHalf = [&](double sign) {
    return doubleToHalf(sign * std::ldexp(1.0, -7) * std::exp2(2.0 * rng.next()));
  };
  auto wr16 = [](uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v & 255);
    p[1] = uint8_t(v >> 8);
  };
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t *x = bytes.data() + b * bs;
    for (int i = 0; i < bs; ++i)
      x[i] = bits();
    if (t == "f16") {
      wr16(x, doubleToHalf(rng.next()));
    } else if (t == "q6_k") {
      wr16(x + 208, scaleHalf(1.0));
    } else {
      wr16(x, scaleHalf(1.0));
      if (t == "q4_1")
        wr16(x + 2, doubleToHalf(-8.0 * halfToDouble(rd16(x)) * (0.5 + 0.5 * rng.next())));
      if (t == "q4_k")
        wr16(x + 2, scaleHalf(1.0));  // dmin
    }
  }
  return bytes;
}

} // namespace gemv

namespace {

constexpr float kSentinel = -12345.0f;
constexpr double kU = 1.0 / 16777216.0;  // 2^-24, f32 unit roundoff

/// Raw weight bytes as the kernels' memref<?xi32> (zero-padded to whole words),
/// or memref<?xf16> for f16.
Buffer weightBuffer(const std::string &t, const std::vector<uint8_t> &bytes) {
  Buffer b;
  if (t == "f16") {
    b.bytes = bytes;
    b.sizes = {int64_t(bytes.size() / 2)};
    b.elemBytes = 2;
  } else {
    b.bytes = bytes;
    b.bytes.resize((bytes.size() + 3) / 4 * 4, 0);
    b.sizes = {int64_t(b.bytes.size() / 4)};
    b.elemBytes = 4;
  }
  return b;
}

/// Units (one thread's share) per block, as the f32 GEMVs (compiler/mlir/LowerGemv.cpp,
/// f32Format): 8 weights for 32-element blocks and f16, 16 for k-quants.
int64_t unitsPerRow(const std::string &t, int64_t k) {
  if (t == "f16")
    return (k + 7) / 8;
  return k / gemv::blockElements(t) * (gemv::blockElements(t) == 256 ? 16 : 4);
}

/// A GEMV case's random inputs, drawn from rng in this order: x [T, K] (uniform in [-2, 2)),
/// the bias [N] ([-1, 1)) and the residual [T, N] ([-4, 4)); an unused bias or residual is
/// one zero (a 1-element buffer).
struct GemvInputs {
  std::vector<float> x, bias, res;
};
GemvInputs randomGemvInputs(Rng &rng, int64_t T, int64_t N, int64_t K, bool bias, bool residual) {
  GemvInputs in{std::vector<float>(static_cast<size_t>(T * K)), std::vector<float>(static_cast<size_t>(bias ? N : 1), 0.f),
                std::vector<float>(static_cast<size_t>(residual ? T * N : 1), 0.f)};
  for (auto &v : in.x) v = float(rng.next() * 2.0);
  for (auto &v : in.bias) v = float(rng.next());
  for (auto &v : in.res) v = float(rng.next() * 4.0);
  return in;
}

/// The check of a one-output GEMV case: y[t, n] against the float64 dot product of weight
/// row n (type t, rowBytes a row in wb) with x[t] (the activations as the kernel uses them),
/// + bias[n] and + res[t, n] where given; |err| <= 2 L u S (S = sum_k |x| (|scale q| +
/// |offset|)), + 2u (|ref| + |bias| + |res|) with an epilogue.
void checkGemvRows(Verdict &v, const std::vector<float> &y, const std::string &t, const std::vector<uint8_t> &wb,
                   int64_t rowBytes, const std::vector<double> &x, int64_t T, int64_t N, int64_t K,
                   const std::vector<float> *bias, const std::vector<float> *res, double L) {
  std::vector<double> w(static_cast<size_t>(K)), mag(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    gemv::dequantRow(t, wb.data() + n * rowBytes, K, w.data(), mag.data());
    for (int64_t tt = 0; tt < T; ++tt) {
      double ref = 0, s = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += x[tt * K + k] * w[k];
        s += std::fabs(x[tt * K + k]) * mag[k];
      }
      double tol = 2.0 * L * kU * s, extra = 0;
      if (bias) {
        ref += double((*bias)[n]);
        extra += std::fabs(double((*bias)[n]));
      }
      if (res) {
        ref += double((*res)[tt * N + n]);
        extra += std::fabs(double((*res)[tt * N + n]));
      }
      if (bias || res)
        tol += 2.0 * kU * (std::fabs(ref) + extra + 2.0 * L * kU * s);
      compare(v, y[tt * N + n], ref, tol);
    }
  }
}

/// How a matmul case uses the epilogue flags.
enum Epilogue { kPlain = 0, kResidual = 2, kBiasInPlaceResidual = 3 };

/// matmul_<t>(w, x, y, bias, res, N, K, T, flags): grid (ceil(N/4), ceil(T/8)), block
/// 128. kResidual: res is its own buffer; kBiasInPlaceResidual: bias[n] and res = y
/// (y starts as the residual stream and is updated in place).
Case matmulCase(const std::string &t, int64_t T, int64_t N, int64_t K, Epilogue ep,
                uint64_t seed) {
  const int64_t rowBytes = K / gemv::blockElements(t) * gemv::blockBytes(t);
  const bool bias = ep == kBiasInPlaceResidual, inPlace = ep == kBiasInPlaceResidual;
  const bool residual = ep != kPlain;
  std::vector<uint8_t> wb = gemv::randomWeights(t, N, K, seed);
  Rng rng{seed * 31 + 7};
  auto [x, bv, rv] = randomGemvInputs(rng, T, N, K, bias, residual);
  Case c;
  c.module = "swz_gemv_" + t;
  c.entry = "matmul_" + t;
  c.label = "T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
            (ep == kResidual ? " +residual" : ep == kBiasInPlaceResidual ? " +bias +residual in place" : "");
  c.buffers = {weightBuffer(t, wb), makeBuffer(x, {T * K}),
               makeBuffer(inPlace ? rv : std::vector<float>(static_cast<size_t>(T * N), kSentinel),
                          {T * N}),
               makeBuffer(bv, {int64_t(bv.size())}), makeBuffer(rv, {int64_t(rv.size())})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3),
            Arg::memref(inPlace ? 2 : 4), Arg::i(int32_t(N)), Arg::i(int32_t(K)),
            Arg::i(int32_t(T)), Arg::i(int32_t(ep))};
  c.grid = {unsigned((N + 3) / 4), unsigned((T + 7) / 8), 1};
  c.block = {128, 1, 1};
  c.bytesMoved = double(wb.size()) + 4.0 * double(T * K + T * N + (bias ? N : 0) + (residual ? T * N : 0));
  c.flops = 2.0 * double(T) * double(N) * double(K);
  // Longest chain of f32 roundings behind one output: a unit's group sums (<= 16
  // fma), its scale/offset combine (3), one add per unit the thread handles
  // (ceil(units / 32)), the reduction (3 shuffle steps and 2 adds of the 4 segment sums); bias and residual add one rounding each.
  const double L = 16 + 3 + double((unitsPerRow(t, K) + 31) / 32) + 5;
  c.check = [t, T, N, K, bias, residual, rowBytes, wb, x, bv, rv, L](
                const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|err| <= 2 L u S (+ 2u (|ref| + |bias| + |res|) with bias / residual): S = sum_k |x| "
             "(|scale q| + |offset|) (the f32 terms the kernel forms), u = 2^-24, L = " +
             std::to_string(int(L)) + " = longest f32 rounding chain of the dot product "
             "(Higham gamma_L, doubled)";
    checkGemvRows(v, asVector<float>(out[2]), t, wb, rowBytes, std::vector<double>(x.begin(), x.end()), T, N, K,
                  bias ? &bv : nullptr, residual ? &rv : nullptr, L);
    return v;
  };
  return c;
}

/// quantize_q8_x's definition (gemv_q8x.mlir), in f32 as the kernel computes it: per
/// 32 elements d = amax / 127, q = round-half-even(x / d) (0 when d = 0), and the vec4
/// (d, d * sum q[0..15], d * sum q[16..31], 0).
void quantizeQ8x(const std::vector<float> &x, std::vector<int8_t> &q, std::vector<float> &ds) {
  const size_t nblk = x.size() / 32;
  q.assign(x.size(), 0);
  ds.assign(nblk * 4, 0.f);
  for (size_t b = 0; b < nblk; ++b) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i)
      amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float d = amax / 127.0f;
    int s[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const int v = d > 0.f ? int(std::nearbyint(x[b * 32 + i] / d)) : 0;
      q[b * 32 + i] = int8_t(v);
      s[i / 16] += v;
    }
    ds[b * 4] = d;
    ds[b * 4 + 1] = d * float(s[0]);
    ds[b * 4 + 2] = d * float(s[1]);
  }
}

/// `bytes` as an argument of 16-byte elements (memref<?xvector<4x...>>), zero-padded.
Buffer vec4Buffer(std::vector<uint8_t> bytes) {
  Buffer b;
  b.bytes = std::move(bytes);
  b.bytes.resize((b.bytes.size() + 15) / 16 * 16, 0);
  b.sizes = {int64_t(b.bytes.size() / 16)};
  b.elemBytes = 16;
  return b;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// The int8 check of quantize_q8_x and of the fused producers: the (xq, xds) a kernel
/// wrote must be exactly what the reference quantizer makes of `y` (its input, or the f32
/// output the fused kernel wrote beside them).
void checkQ8xOf(Verdict &v, const std::vector<float> &y, const std::vector<uint8_t> &xqOut,
                const std::vector<uint8_t> &xdsOut) {
  std::vector<int8_t> q;
  std::vector<float> ds;
  quantizeQ8x(y, q, ds);
  std::vector<int8_t> gq = asVector<int8_t>(xqOut);
  std::vector<float> gds = asVector<float>(xdsOut);
  for (size_t i = 0; i < q.size(); ++i)
    compare(v, double(gq[i]), double(q[i]), 0.0);
  for (size_t i = 0; i < ds.size(); ++i)
    if (i % 4 != 3)
      compare(v, double(gds[i]), double(ds[i]), 0.0);
}

/// quantize_q8_x(x, xq, xds, nblk): grid (ceil(nblk / 16)), block 128. Exact: the same
/// f32 division and rounding. Some blocks are all zero (d = 0) and some hold exact ties
/// (x / d = k + 0.5, rounded to even).
Case quantizeQ8xCase(int64_t T, int64_t K, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> x(static_cast<size_t>(T * K));
  for (auto &v : x) v = float(rng.next() * 3.0);
  for (int i = 0; i < 32; ++i) x[size_t(32 + i)] = 0.f;        // block 1: all zero
  for (int i = 0; i < 32; ++i) x[size_t(64 + i)] = float(i % 8) - 3.5f;  // ties
  x[64] = 127.f;  // d = 1: x / d = k + 0.5 exactly
  const int64_t nblk = T * K / 32;
  Case c;
  c.module = "swz_gemv_q8x";
  c.entry = "quantize_q8_x";
  c.label = "T=" + std::to_string(T) + " K=" + std::to_string(K) + " (zero block, ties)";
  c.buffers = {makeBuffer(x, {T * K / 4}), makeBuffer(std::vector<int32_t>(size_t(T * K / 4), 0x5a5a5a5a), {T * K / 4}),
               makeBuffer(std::vector<float>(size_t(nblk * 4), kSentinel), {nblk})};
  c.buffers[0].sizes = {T * K / 4};
  c.buffers[0].elemBytes = 16;
  c.buffers[2].elemBytes = 16;
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(int32_t(nblk))};
  c.grid = {unsigned((nblk + 15) / 16), 1, 1};
  c.block = {128, 1, 1};
  c.bytesMoved = 4.0 * double(T * K) + double(T * K) + 16.0 * double(nblk);
  c.flops = 4.0 * double(T * K);
  c.check = [x](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "exact: int8 values and the f32 (d, d*sum) of the reference quantizer";
    checkQ8xOf(v, x, out[1], out[2]);
    return v;
  };
  return c;
}

/// rms_norm_q8x(x, gamma, y, xq, xds, d, eps): RMSNorm of `rows` rows of width d (the f32
/// output against float64, as rmsNormCase) and its int8 form (exact, of that output).
Case rmsNormQ8xCase(int64_t rows, int64_t d, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> x(static_cast<size_t>(rows * d)), g(static_cast<size_t>(d));
  for (auto &v : x) v = float(rng.next() * 3.0);
  for (auto &v : g) v = float(1.0 + 0.5 * rng.next());
  const float eps = 1e-6f;
  const int64_t nblk = rows * d / 32;
  Case c;
  c.module = "swz_gemv_q8x";
  c.entry = "rms_norm_q8x";
  c.label = "rows=" + std::to_string(rows) + " d=" + std::to_string(d);
  c.buffers = {makeBuffer(x, {rows * d}), makeBuffer(g, {d}),
               makeBuffer(std::vector<float>(size_t(rows * d), kSentinel), {rows * d}),
               makeBuffer(std::vector<int32_t>(size_t(rows * d / 4), 0x5a5a5a5a), {rows * d / 4}),
               makeBuffer(std::vector<float>(size_t(nblk * 4), kSentinel), {nblk})};
  c.buffers[4].elemBytes = 16;
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3), Arg::memref(4),
            Arg::i(int32_t(d)), Arg::f(eps)};
  c.grid = {unsigned(rows), 1, 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 9.0 * double(rows * d) + 4.0 * double(d) + 16.0 * double(nblk);
  c.flops = 8.0 * double(rows * d);
  c.check = [x, g, rows, d, eps](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "y: |err| <= 1e-5 (1 + |ref|) against float64 (as rms_norm_f32); int8: exact, "
             "the reference quantizer of the kernel's own y";
    const std::vector<float> y = asVector<float>(out[2]);
    compareRmsNorm(v, y, x, g, rows, d, eps);
    checkQ8xOf(v, y, out[3], out[4]);
    return v;
  };
  return c;
}

/// swiglu_q8x(gate, up, a, xq, xds, nblk) over T rows of width K: a = silu(gate) * up
/// against float64 (as swigluCase) and its int8 form (exact, of that output).
Case swigluQ8xCase(int64_t T, int64_t K, uint64_t seed) {
  Rng rng{seed};
  const int64_t n = T * K, nblk = n / 32;
  std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n));
  for (auto &v : g) v = float(rng.next() * 8.0);
  for (auto &v : u) v = float(rng.next() * 2.0);
  Case c;
  c.module = "swz_gemv_q8x";
  c.entry = "swiglu_q8x";
  c.label = "T=" + std::to_string(T) + " K=" + std::to_string(K);
  c.buffers = {makeBuffer(g, {n / 4}), makeBuffer(u, {n / 4}),
               makeBuffer(std::vector<float>(size_t(n), kSentinel), {n / 4}),
               makeBuffer(std::vector<int32_t>(size_t(n / 4), 0x5a5a5a5a), {n / 4}),
               makeBuffer(std::vector<float>(size_t(nblk * 4), kSentinel), {nblk})};
  for (int i : {0, 1, 2, 4})
    c.buffers[size_t(i)].elemBytes = 16;
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3), Arg::memref(4),
            Arg::i(int32_t(nblk))};
  c.grid = {unsigned((nblk + 15) / 16), 1, 1};
  c.block = {128, 1, 1};
  c.bytesMoved = 13.0 * double(n) + 16.0 * double(nblk);
  c.flops = 9.0 * double(n);
  c.check = [g, u](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "a: |err| <= 1e-5 (1 + |ref|) against float64 (as swiglu_f32); int8: exact, "
             "the reference quantizer of the kernel's own a";
    const std::vector<float> a = asVector<float>(out[2]);
    compareSwiglu(v, a, g, u);
    checkQ8xOf(v, a, out[3], out[4]);
    return v;
  };
  return c;
}

/// matmul_<t>_q8x(w0, w1, w2, xq, xds, y0, y1, y2, bias0, bias1, bias2, res, N0, N1, N2, K,
/// T, flags) on int8 activations from the reference quantizer, with `Ns.size()` (1..3)
/// outputs of Ns[o] rows each (one launch of the merged q/k/v or gate/up GEMV); the
/// reference is the float64 dot product of the weights with the dequantized activations
/// (d q), so the check isolates the kernel's own rounding. kResidual / kBiasInPlaceResidual
/// apply to output 0; output 1 has a bias when `bias1`.
/// Rows one matmul_<t>_q8x workgroup computes: 4 warps x (rows a warp), the shipped sm_*
/// schedules' gemv.q8x.<t>.rows_per_warp (the kernel's swz.grid says the same).
/// SWZ_CHECK_Q8X_ROWS=<t>:<rows> overrides it, to check and time a kernel generated from an
/// edited schedule (bench/tune_q8x.sh, test_simt_interp.py).
int64_t q8xRowsPerWorkgroup(const std::string &t) {
  if (const char *v = std::getenv("SWZ_CHECK_Q8X_ROWS")) {
    const std::string s = v;
    if (s.rfind(t + ":", 0) == 0)
      return std::atoll(s.c_str() + t.size() + 1);
  }
  return t == "q4_k" ? 8 : 4;  // rpw 2 and 1 (test_simt_interp.py fails on a mismatch)
}

/// matmul_f16_mma's workgroup: rows (16 x the shipped schedules' gemv.f16_mma.m_tiles) and
/// threads (32 x gemv.f16_mma.warps), as the kernel's swz.grid and known_block_size say;
/// SWZ_CHECK_Q8X_ROWS=f16:<rows>x<warps> overrides them, for a kernel generated from an
/// edited schedule (bench/tune_q8x.sh, test_simt_interp.py). (matmul_f16_mma_w16's, 16 rows
/// by 16 warps, is gemv.f16_mma_split_k's as shipped; no override.)
std::pair<int64_t, unsigned> f16MmaWorkgroup() {
  if (const char *v = std::getenv("SWZ_CHECK_Q8X_ROWS")) {
    const std::string s = v;
    if (s.rfind("f16:", 0) == 0) {
      const size_t x = s.find('x', 4);
      return {std::atoll(s.c_str() + 4), x == std::string::npos ? 128u : unsigned(32 * std::atoi(s.c_str() + x + 1))};
    }
  }
  return {16, 128};
}

/// matmul_f16_mma(w, x, y, bias, res, N, K, T, flags) (gemv_f16_mma.mlir, PTX): matmul_f16's
/// contract on the tensor cores, w and x as 16-byte vectors. The reference is the float64
/// dot product of the weights with the activations rounded to f16 (what the kernel feeds
/// the mma), so the check isolates the kernel's own f32 rounding.
/// entry: matmul_f16_mma (the workgroup of f16MmaWorkgroup()) or matmul_f16_mma_w16 (16 rows,
/// 16 warps).
Case matmulF16MmaCase(int64_t T, int64_t N, int64_t K, Epilogue ep, uint64_t seed,
                      const std::string &entry = "matmul_f16_mma") {
  const bool bias = ep == kBiasInPlaceResidual, inPlace = ep == kBiasInPlaceResidual;
  const bool residual = ep != kPlain;
  std::vector<uint8_t> wb = gemv::randomWeights("f16", N, K, seed);
  Rng rng{seed * 31 + 7};
  auto [x, bv, rv] = randomGemvInputs(rng, T, N, K, bias, residual);
  std::vector<double> xh(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xh[i] = gemv::halfToDouble(gemv::doubleToHalf(double(x[i])));
  Case c;
  c.module = "swz_gemv_f16_mma";
  c.entry = entry;
  c.label = "T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
            (ep == kResidual ? " +residual" : ep == kBiasInPlaceResidual ? " +bias +residual in place" : "");
  c.buffers = {vec4Buffer(wb), vec4Buffer(bytesOf(x)),
               makeBuffer(inPlace ? rv : std::vector<float>(static_cast<size_t>(T * N), kSentinel), {T * N}),
               makeBuffer(bv, {int64_t(bv.size())}), makeBuffer(rv, {int64_t(rv.size())})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3),
            Arg::memref(inPlace ? 2 : 4), Arg::i(int32_t(N)), Arg::i(int32_t(K)),
            Arg::i(int32_t(T)), Arg::i(int32_t(ep))};
  const auto [rowsWg, threads] = entry == "matmul_f16_mma" ? f16MmaWorkgroup() : std::pair<int64_t, unsigned>{16, 512};
  c.grid = {unsigned((N + rowsWg - 1) / rowsWg), unsigned((T + 7) / 8), 1};
  c.block = {threads, 1, 1};
  c.bytesMoved = double(wb.size()) + 4.0 * double(T * K + T * N + (bias ? N : 0) + (residual ? T * N : 0));
  c.flops = 2.0 * double(T) * double(N) * double(K);
  // f32 roundings behind one output: a warp's mma chain (16 products an mma into its
  // accumulator, 2 ceil(K / 128) mma a warp with 4 or more warps), then the warps' sums
  // (<= 4 levels); a tensor core may round each addition by truncation, so 2u each.
  const double L = 2.0 * (32.0 * double((K + 127) / 128) + 4.0);
  c.check = [T, N, K, bias, residual, wb, xh, bv, rv, L](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|err| <= 2 L u S (+ 2u (|ref| + |bias| + |res|)): the reference dots the weights with "
             "the activations rounded to f16 in float64; S = sum_k |x_f16 w|, u = 2^-24, L = " +
             std::to_string(int(L)) + " (mma additions counted twice: truncating accumulation)";
    checkGemvRows(v, asVector<float>(out[2]), "f16", wb, K * 2, xh, T, N, K, bias ? &bv : nullptr,
                  residual ? &rv : nullptr, L);
    return v;
  };
  return c;
}

/// matmul_q4_k_mma_q8x's workgroup: 16 rows, 32 x gen_quant_kernels.py's MMA_Q4K["warps"]
/// threads (its swz.grid and known_block_size); SWZ_CHECK_Q8X_ROWS=q4k_mma:16x<warps>
/// overrides the warps, for a variant written by `gen_quant_kernels.py --variant q4k_mma:warps=..`.
unsigned q4kMmaWarps() {
  if (const char *v = std::getenv("SWZ_CHECK_Q8X_ROWS")) {
    const std::string s = v;
    if (s.rfind("q4k_mma:16x", 0) == 0)
      return unsigned(std::atoi(s.c_str() + 11));
  }
  return 4;
}

/// matmul_<t>_q8x (dp4a, gemv_q8x.mlir) or, with `entry`, another kernel of its contract
/// (matmul_q4_k_mma_q8x: the same sums on the int8 tensor cores).
Case matmulQ8xCase(const std::string &t, int64_t T, std::vector<int64_t> Ns, int64_t K, Epilogue ep,
                   uint64_t seed, bool bias1 = false, const std::string &entry = "") {
  const int64_t rowBytes = K / gemv::blockElements(t) * gemv::blockBytes(t);
  const bool bias = ep == kBiasInPlaceResidual, inPlace = ep == kBiasInPlaceResidual;
  const bool residual = ep != kPlain;
  const size_t nOut = Ns.size();
  Ns.resize(3, 0);
  const int64_t N = Ns[0];
  std::vector<std::vector<uint8_t>> wb(3);
  for (size_t o = 0; o < 3; ++o)
    wb[o] = gemv::randomWeights(t, std::max<int64_t>(Ns[o], 1), K, seed + 1000 * o);
  Rng rng{seed * 31 + 7};
  auto [x, bv, rv] = randomGemvInputs(rng, T, N, K, bias, residual);
  std::vector<float> bv1(static_cast<size_t>(bias1 ? Ns[1] : 1), 0.f);
  for (auto &v : bv1) v = float(rng.next());
  std::vector<int8_t> xq;
  std::vector<float> xds;
  quantizeQ8x(x, xq, xds);
  std::vector<double> xd(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xd[i] = double(xds[i / 32 * 4]) * double(xq[i]);
  Case c;
  c.module = "swz_gemv_q8x";
  c.entry = entry.empty() ? "matmul_" + t + "_q8x" : entry;
  const bool mma = c.entry.rfind("matmul_q4_k_mma", 0) == 0;
  const unsigned warps = c.entry == "matmul_q4_k_mma_w8_q8x" ? 8 : q4kMmaWarps();
  c.label = "T=" + std::to_string(T) + " N=" + std::to_string(N);
  for (size_t o = 1; o < nOut; ++o)
    c.label.append("+").append(std::to_string(Ns[o]));
  c.label += " K=" + std::to_string(K) +
             (ep == kResidual ? " +residual" : ep == kBiasInPlaceResidual ? " +bias +residual in place" : "") +
             (bias1 ? " +bias1" : "");
  auto wbuf = [&](const std::vector<uint8_t> &b) { return t == "q4_k" ? vec4Buffer(b) : weightBuffer(t, b); };
  auto ybuf = [&](int64_t n) { return makeBuffer(std::vector<float>(static_cast<size_t>(std::max<int64_t>(T * n, 1)), kSentinel), {std::max<int64_t>(T * n, 1)}); };
  // 0..2 weights, 3 xq, 4 xds, 5..7 y, 8 bias0, 9 bias1, 10 res
  c.buffers = {wbuf(wb[0]), wbuf(wb[1]), wbuf(wb[2]), vec4Buffer(bytesOf(xq)), vec4Buffer(bytesOf(xds)),
               inPlace ? makeBuffer(rv, {T * N}) : ybuf(N), ybuf(Ns[1]), ybuf(Ns[2]),
               makeBuffer(bv, {int64_t(bv.size())}), makeBuffer(bv1, {int64_t(bv1.size())}),
               makeBuffer(rv, {int64_t(rv.size())})};
  const int32_t flags = int32_t(ep) | (bias1 ? 4 : 0);
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3), Arg::memref(4),
            Arg::memref(5), Arg::memref(6), Arg::memref(7), Arg::memref(8), Arg::memref(9), Arg::memref(8),
            Arg::memref(inPlace ? 5 : 10), Arg::i(int32_t(Ns[0])), Arg::i(int32_t(Ns[1])),
            Arg::i(int32_t(Ns[2])), Arg::i(int32_t(K)), Arg::i(int32_t(T)), Arg::i(flags)};
  const int64_t rows = Ns[0] + Ns[1] + Ns[2];
  const int64_t rowsWg = mma ? 16 : q8xRowsPerWorkgroup(t);
  c.grid = {unsigned((rows + rowsWg - 1) / rowsWg), unsigned((T + 7) / 8), 1};
  c.block = {mma ? 32 * warps : 128u, 1, 1};
  c.bytesMoved = double(wb[0].size() * (Ns[0] > 0) + wb[1].size() * (Ns[1] > 0) + wb[2].size() * (Ns[2] > 0)) +
                 double(T * K) * (1.0 + 0.5) + 4.0 * double(T * rows + (bias ? N : 0) + (residual ? T * N : 0));
  c.flops = 2.0 * double(T) * double(rows) * double(K);
  // f32 roundings behind one output: a unit's scale products and combine (6: d sc, x dx,
  // x acc, the activation halves' sums, the min term, the difference; the int8 dot
  // product is exact), one add per unit the thread handles and the warp's reduction (5).
  // The tensor-core kernel: a warp's chain over every warps-th block's even (odd) sub-blocks
  // (4 a block), their sum, then the warps' tree.
  const int64_t units = K / gemv::blockElements(t) * (t == "q8_0" ? 2 : gemv::blockElements(t) == 32 ? 1 : 8);
  const int64_t W = warps, nb = K / 256;
  const double L = mma ? 6 + 4.0 * double((nb + W - 1) / W) + 1 + std::ceil(std::log2(double(W)))
                       : 6 + double((units + 31) / 32) + 5;
  c.check = [t, T, Ns, K, bias, bias1, residual, rowBytes, wb, xd, bv, bv1, rv, L](
                const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|err| <= 2 L u S (+ 2u (|ref| + |bias| + |res|)): the reference dots the weights "
             "with the dequantized int8 activations d q in float64; S = sum_k |d q| (|scale q| + "
             "|offset|), u = 2^-24, L = " + std::to_string(int(L));
    for (size_t o = 0; o < 3; ++o) {
      const std::vector<float> *b = o == 0 && bias ? &bv : o == 1 && bias1 ? &bv1 : nullptr;
      checkGemvRows(v, asVector<float>(out[5 + o]), t, wb[o], rowBytes, xd, T, Ns[o], K, b,
                    o == 0 && residual ? &rv : nullptr, L);
    }
    return v;
  };
  return c;
}

/// get_rows_<t>(w, tokens, out, K): grid (T), block 128.
Case getRowsCase(const std::string &t, int64_t T, int64_t N, int64_t K, uint64_t seed) {
  const int64_t rowBytes = K / gemv::blockElements(t) * gemv::blockBytes(t);
  std::vector<uint8_t> wb = gemv::randomWeights(t, N, K, seed);
  Rng rng{seed * 17 + 3};
  std::vector<int32_t> tokens(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i)  // first and last rows included
    tokens[i] = i == 0 ? int32_t(N - 1) : i == 1 ? 0 : int32_t((rng.next() + 1.0) / 2.0 * double(N)) % int32_t(N);
  Case c;
  c.module = "swz_gemv_" + t;
  c.entry = "get_rows_" + t;
  c.label = "T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
  c.buffers = {weightBuffer(t, wb), makeBuffer(tokens, {T}),
               makeBuffer(std::vector<float>(static_cast<size_t>(T * K), kSentinel), {T * K})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(int32_t(K))};
  c.grid = {unsigned(T), 1, 1};
  c.block = {128, 1, 1};
  c.bytesMoved = double(T) * (double(rowBytes) + 4.0 * double(K)) + 4.0 * double(T);
  c.flops = 2.0 * double(T * K);
  c.check = [t, T, K, rowBytes, wb, tokens](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|err| <= 4 u (|scale q| + |offset|), u = 2^-24: the kernel's scale*q + offset "
             "is one f32 product and one sum (or an fma), bound 2u(...), doubled; f16 exact";
    std::vector<float> y = asVector<float>(out[2]);
    std::vector<double> w(static_cast<size_t>(K)), mag(static_cast<size_t>(K));
    for (int64_t tt = 0; tt < T; ++tt) {
      gemv::dequantRow(t, wb.data() + int64_t(tokens[tt]) * rowBytes, K, w.data(), mag.data());
      for (int64_t k = 0; k < K; ++k)
        compare(v, y[tt * K + k], w[k], t == "f16" ? 0.0 : 4.0 * kU * mag[k]);
    }
    return v;
  };
  return c;
}

/// argmax_f32(logits, out, n_vocab): grid (T), block 256. `ties` plants the row's
/// maximum at several columns (the lowest must win) and -inf / NaN elsewhere.
Case argmaxCase(int64_t T, int64_t V, bool ties, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> logits(static_cast<size_t>(T * V));
  for (auto &v : logits) v = float(rng.next() * 20.0);
  if (ties) {
    for (int64_t t = 0; t < T; ++t) {
      float *r = logits.data() + t * V;
      const int64_t a = (V / 3 + 97 * t) % V, b = (a + 257) % V, c0 = (a + 1) % V;
      r[std::max(a, b)] = 25.0f;
      r[std::min(a, b)] = 25.0f;  // the winner: lowest of the equal maxima
      r[c0 == std::min(a, b) ? (c0 + 1) % V : c0] = -std::numeric_limits<float>::infinity();
      r[(a + 5) % V] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  Case c;
  c.module = "swz_argmax";
  c.entry = "argmax_f32";
  c.label = "T=" + std::to_string(T) + " n_vocab=" + std::to_string(V) + (ties ? " ties+nan" : "");
  c.buffers = {makeBuffer(logits, {T * V}), makeBuffer(std::vector<int32_t>(static_cast<size_t>(T), -1), {T})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::i(int32_t(V))};
  c.grid = {unsigned(T), 1, 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 4.0 * double(T * V + T);
  c.flops = double(T * V);
  c.check = [T, V, logits](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "exact: index of the first maximum (comparisons only), NaN never wins";
    std::vector<int32_t> idx = asVector<int32_t>(out[1]);
    for (int64_t t = 0; t < T; ++t) {
      int64_t best = -1;
      for (int64_t i = 0; i < V; ++i) {
        float x = logits[t * V + i];
        if (std::isnan(x))
          continue;
        if (best < 0 || x > logits[t * V + best])
          best = i;
      }
      compare(v, double(idx[t]), double(best < 0 ? 0 : best), 0.0);
    }
    return v;
  };
  return c;
}

/// The first maximum of x[lo, hi) (NaN never wins): its index, or `none` if all are NaN.
int64_t firstMax(const std::vector<float> &x, int64_t lo, int64_t hi, int64_t none) {
  int64_t best = -1;
  for (int64_t i = lo; i < hi; ++i)
    if (!std::isnan(x[size_t(i)]) && (best < 0 || x[size_t(i)] > x[size_t(best)]))
      best = i;
  return best < 0 ? none : best;
}

/// argmax_split_f32(logits, part_v, part_i, n_vocab, chunk), grid (T, n_part): each part's
/// first maximum (value and absolute index; n_vocab where the part is all NaN). Row t has
/// equal maxima inside one part and across parts, a NaN, and part 1 entirely NaN.
Case argmaxSplitCase(int64_t T, int64_t V, int64_t chunk, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> logits(static_cast<size_t>(T * V));
  for (auto &v : logits) v = float(rng.next() * 20.0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t t = 0; t < T; ++t) {
    float *r = logits.data() + t * V;
    for (int64_t i = chunk; i < std::min(2 * chunk, V); ++i) r[i] = nan;  // part 1: none
    r[(7 + 31 * t) % chunk] = 30.f;
    r[(7 + 31 * t) % chunk + 300] = 30.f;  // the same maximum later in part 0
    r[2 * chunk + 11] = 30.f;              // and in part 2
    r[3] = nan;
  }
  const int64_t nPart = (V + chunk - 1) / chunk;
  Case c;
  c.module = "swz_argmax";
  c.entry = "argmax_split_f32";
  c.label = "T=" + std::to_string(T) + " n_vocab=" + std::to_string(V) + " chunk=" + std::to_string(chunk) + " ties+nan";
  c.buffers = {makeBuffer(logits, {T * V}), makeBuffer(std::vector<float>(size_t(T * nPart), kSentinel), {T * nPart}),
               makeBuffer(std::vector<int32_t>(size_t(T * nPart), -1), {T * nPart})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(int32_t(V)), Arg::i(int32_t(chunk))};
  c.grid = {unsigned(T), unsigned(nPart), 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 4.0 * double(T * V) + 8.0 * double(T * nPart);
  c.flops = double(T * V);
  c.check = [T, V, chunk, nPart, logits](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "exact: each part's first maximum (index n_vocab when all NaN) and its value";
    std::vector<float> pv = asVector<float>(out[1]);
    std::vector<int32_t> pi = asVector<int32_t>(out[2]);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t p = 0; p < nPart; ++p) {
        const int64_t lo = t * V + p * chunk, hi = t * V + std::min((p + 1) * chunk, V);
        const int64_t best = firstMax(logits, lo, hi, -1);
        const size_t k = size_t(t * nPart + p);
        compare(v, double(pi[k]), double(best < 0 ? V : best - t * V), 0.0);
        if (best >= 0)
          compare(v, double(pv[k]), double(logits[size_t(best)]), 0.0);
      }
    return v;
  };
  return c;
}

/// argmax_reduce_f32(part_v, part_i, out, n_part, n_vocab), grid (T): the first maximum
/// over the parts (equal values: the lowest index; index n_vocab = none; all none -> 0).
Case argmaxReduceCase(int64_t T, int64_t nPart, uint64_t seed) {
  Rng rng{seed};
  const int64_t V = 152064;
  std::vector<float> pv(static_cast<size_t>(T * nPart));
  std::vector<int32_t> pi(static_cast<size_t>(T * nPart));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t p = 0; p < nPart; ++p) {
      const size_t k = size_t(t * nPart + p);
      pv[k] = float(std::floor(rng.next() * 4.0));  // few distinct values: many ties
      pi[k] = int32_t(p * 4096 + int64_t(std::fabs(rng.next()) * 4000.0) % 4096);
      if (p % 5 == 3) { pv[k] = -std::numeric_limits<float>::infinity(); pi[k] = int32_t(V); }  // none
    }
  if (T > 1)  // the last row: every part none
    for (int64_t p = 0; p < nPart; ++p) {
      pv[size_t((T - 1) * nPart + p)] = -std::numeric_limits<float>::infinity();
      pi[size_t((T - 1) * nPart + p)] = int32_t(V);
    }
  Case c;
  c.module = "swz_argmax";
  c.entry = "argmax_reduce_f32";
  c.label = "T=" + std::to_string(T) + " n_part=" + std::to_string(nPart) + " ties+none";
  c.buffers = {makeBuffer(pv, {T * nPart}), makeBuffer(pi, {T * nPart}),
               makeBuffer(std::vector<int32_t>(size_t(T), -1), {T})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(int32_t(nPart)), Arg::i(int32_t(V))};
  c.grid = {unsigned(T), 1, 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 8.0 * double(T * nPart) + 4.0 * double(T);
  c.flops = double(T * nPart);
  c.check = [T, nPart, V, pv, pi](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "exact: the largest value, on ties the lowest index; none (n_vocab) gives 0";
    std::vector<int32_t> idx = asVector<int32_t>(out[2]);
    for (int64_t t = 0; t < T; ++t) {
      float bv = -std::numeric_limits<float>::infinity();
      int32_t bi = int32_t(V);
      for (int64_t p = 0; p < nPart; ++p) {
        const size_t k = size_t(t * nPart + p);
        if (pv[k] > bv || (pv[k] == bv && pi[k] < bi)) { bv = pv[k]; bi = pi[k]; }
      }
      compare(v, double(idx[size_t(t)]), double(bi == V ? 0 : bi), 0.0);
    }
    return v;
  };
  return c;
}

} // namespace

std::vector<Case> gemvCases(const std::string &format) {
  // The gemv_<type> kernels are target-neutral (the same cases for ptx and spv);
  // gemv_q8x is PTX only.
  std::vector<Case> cases;
  uint64_t seed = 1000;
  for (const std::string &t : gemv::weightTypes()) {
    const bool kq = gemv::blockElements(t) == 256;
    // Decode (T = 1) at SmolLM2 / Qwen2.5 widths, a verification batch (T = 3) with a
    // residual, T = 9 (two token blocks, the second partial) with bias and an in-place
    // residual (res = y), odd N throughout; K not a
    // multiple of 256 where the format allows it, and an odd K for f16.
    if (kq) {
      cases.push_back(matmulCase(t, 1, 577, 1536, kPlain, ++seed));
      cases.push_back(matmulCase(t, 3, 131, 4864, kResidual, ++seed));
      cases.push_back(matmulCase(t, 9, 7, 256, kBiasInPlaceResidual, ++seed));
      cases.push_back(getRowsCase(t, 3, 50, 768, ++seed));
    } else {
      cases.push_back(matmulCase(t, 1, 577, 576, kPlain, ++seed));
      cases.push_back(matmulCase(t, 3, 131, t == "f16" ? 1001 : 1504, kResidual, ++seed));
      cases.push_back(matmulCase(t, 9, 7, t == "f16" ? 7 : 96, kBiasInPlaceResidual, ++seed));
      cases.push_back(getRowsCase(t, 3, 50, t == "f16" ? 577 : 576, ++seed));
    }
  }
  // Full-size decode matmuls of the models we ship (for the H200 run's roofline column):
  // SmolLM2-135M's Q8_0 output projection (30 MB of weights) and Qwen2.5-Coder-0.5B's
  // Q5_0 ffn_up and Q6_K ffn_down.
  cases.push_back(matmulCase("q8_0", 1, 49152, 576, kPlain, 61));
  cases.push_back(matmulCase("q5_0", 1, 4864, 896, kPlain, 62));
  cases.push_back(matmulCase("q6_k", 1, 896, 4864, kResidual, 63));
  // The int8 (dp4a) decode path, PTX only (gemv_q8x.mlir): the activation quantizer,
  // and each GEMV at decode, verification (T = 3, residual) and T = 9 (bias, in place).
  if (format == "ptx") {
    cases.push_back(quantizeQ8xCase(3, 1536, 81));
    // The producers that write the int8 input themselves (RMSNorm, SwiGLU): widths of
    // SmolLM2 (576: the last pass half full), Qwen3-0.6B and 7B (3584: 3.5 passes).
    cases.push_back(rmsNormQ8xCase(1, 576, 91));
    cases.push_back(rmsNormQ8xCase(3, 3584, 92));
    cases.push_back(swigluQ8xCase(1, 3072, 93));
    cases.push_back(swigluQ8xCase(3, 1536, 94));
    // Each type's GEMV, and Q4_K's on the int8 tensor cores too (4 and 8 warps a
    // workgroup; for them the 577 rows leave the last 16-row workgroup partial, and at
    // K = 256 one block means all warps but one hold none).
    for (const std::string t : {"q4_k", "q8_0", "q6_k", "q4_1", "q5_0"}) {
      const bool kq = gemv::blockElements(t) == 256;
      const std::vector<std::string> entries =
          t == "q4_k" ? std::vector<std::string>{"", "matmul_q4_k_mma_q8x", "matmul_q4_k_mma_w8_q8x"}
                      : std::vector<std::string>{""};
      for (const std::string &e : entries) {
        cases.push_back(matmulQ8xCase(t, 1, {577}, kq ? 1536 : 576, kPlain, 82, false, e));
        cases.push_back(matmulQ8xCase(t, 3, {131}, kq ? 4864 : 1504, kResidual, 83, false, e));
        cases.push_back(matmulQ8xCase(t, 9, {7}, 256, kBiasInPlaceResidual, 84, false, e));
        // Merged q/k/v (three outputs, row counts not multiples of 4: a workgroup spans
        // two outputs) with biases on q and k, and merged gate/up (two) at T = 3.
        cases.push_back(matmulQ8xCase(t, 1, {131, 66, 37}, kq ? 512 : 96, kPlain, 87, true, e));
        cases.push_back(matmulQ8xCase(t, 3, {70, 70}, 256, kPlain, 88, false, e));
      }
    }
    // The F16 tensor-core GEMV: decode at SmolLM2's width (N not a multiple of the 16-row
    // workgroup), a verification batch with a residual (K not a multiple of the 32-weight
    // chunk: the last chunk is partial), T = 9 (two token blocks) with bias and an in-place
    // residual, and K = 8 (one vector a row).
    // (Both workgroup shapes: 4 warps, and 16 splitting K.)
    for (const std::string e : {"matmul_f16_mma", "matmul_f16_mma_w16"}) {
      cases.push_back(matmulF16MmaCase(1, 577, 576, kPlain, 89, e));
      cases.push_back(matmulF16MmaCase(3, 131, 1000, kResidual, 90, e));
      cases.push_back(matmulF16MmaCase(9, 45, 264, kBiasInPlaceResidual, 95, e));
      cases.push_back(matmulF16MmaCase(2, 19, 8, kPlain, 96, e));
    }
    // Full-size: Qwen2.5-Coder-7B's Q4_K ffn_up (3584 -> 18944) and Qwen3-0.6B's Q8_0
    // ffn_down (3072 -> 1024), for the roofline column.
    cases.push_back(matmulQ8xCase("q4_k", 1, {18944}, 3584, kPlain, 85));
    cases.push_back(matmulQ8xCase("q8_0", 1, {1024}, 3072, kResidual, 86));
    // A Qwen2.5-Coder-7B Q4_K decode layer's four launches at their real shapes (time
    // them with --flush-l2: 7-76 MB of weights, the L2 holds 50): q/k/v merged with their
    // biases, o and ffn_down with the residual, gate/up merged.
    cases.push_back(matmulQ8xCase("q4_k", 1, {3584, 512, 512}, 3584, kPlain, 101, true));
    cases.push_back(matmulQ8xCase("q4_k", 1, {3584}, 3584, kResidual, 102));
    cases.push_back(matmulQ8xCase("q4_k", 1, {3584}, 18944, kResidual, 103));
    cases.push_back(matmulQ8xCase("q4_k", 1, {18944, 18944}, 3584, kPlain, 104));
    // The same at T = 8 (eight sequences decoding together: the kernel's many-token path).
    cases.push_back(matmulQ8xCase("q4_k", 8, {3584, 512, 512}, 3584, kPlain, 108, true));
    cases.push_back(matmulQ8xCase("q4_k", 8, {3584}, 18944, kResidual, 109));
    cases.push_back(matmulQ8xCase("q4_k", 8, {18944, 18944}, 3584, kPlain, 110));
    // The tensor-core Q4_K kernels at the same shapes, T = 1 and 8 (and 16: speculative
    // verification's drafts; 32: a batch) for the gate/up launch; sm_90's schedule puts
    // o and ffn_down (3584 rows) on the 8-warp one.
    for (const int64_t T : {1, 8})
      for (const std::string e : {"matmul_q4_k_mma_q8x", "matmul_q4_k_mma_w8_q8x"}) {
        cases.push_back(matmulQ8xCase("q4_k", T, {3584, 512, 512}, 3584, kPlain, 101, true, e));
        cases.push_back(matmulQ8xCase("q4_k", T, {3584}, 3584, kResidual, 102, false, e));
        cases.push_back(matmulQ8xCase("q4_k", T, {3584}, 18944, kResidual, 103, false, e));
        cases.push_back(matmulQ8xCase("q4_k", T, {18944, 18944}, 3584, kPlain, 104, false, e));
      }
    for (const int64_t T : {16, 32}) {
      cases.push_back(matmulQ8xCase("q4_k", T, {18944, 18944}, 3584, kPlain, 125, false));
      cases.push_back(matmulQ8xCase("q4_k", T, {18944, 18944}, 3584, kPlain, 125, false, "matmul_q4_k_mma_q8x"));
    }
    // Qwen3-0.6B's (Q8_0) at theirs: q/k/v, o, gate/up (ffn_down is case 86's shape).
    cases.push_back(matmulQ8xCase("q8_0", 1, {2048, 1024, 1024}, 1024, kPlain, 105));
    cases.push_back(matmulQ8xCase("q8_0", 1, {1024}, 2048, kResidual, 106));
    cases.push_back(matmulQ8xCase("q8_0", 1, {3072, 3072}, 1024, kPlain, 107));
    // The same four at T = 8 (eight sequences decoding together: the many-token path).
    cases.push_back(matmulQ8xCase("q8_0", 8, {2048, 1024, 1024}, 1024, kPlain, 126));
    cases.push_back(matmulQ8xCase("q8_0", 8, {1024}, 2048, kResidual, 127));
    cases.push_back(matmulQ8xCase("q8_0", 8, {3072, 3072}, 1024, kPlain, 128));
    cases.push_back(matmulQ8xCase("q8_0", 8, {1024}, 3072, kResidual, 129));
    // Every decode weight type at Qwen2.5-Coder-7B's FFN shapes (up 3584 -> 18944, down
    // 18944 -> 3584) and its Q6_K LM head (3584 -> 152064, 447 MB): 1.7 GB of weights, so
    // only on request (SWZ_CHECK_GEMV_7B=1; bench/tune_q8x.sh): every other runner of the
    // cases (the SIMT interpreter's swz-case-io) would build them for nothing.
    if (const char *big = std::getenv("SWZ_CHECK_GEMV_7B"); big && std::string(big) == "1") {
      cases.push_back(matmulQ8xCase("q8_0", 1, {18944, 18944}, 3584, kPlain, 111));
      cases.push_back(matmulQ8xCase("q8_0", 1, {3584}, 18944, kResidual, 112));
      // Q6_K on the int8 path: Q4_K_M's LM head, ffn_down and attn_v type.
      cases.push_back(matmulQ8xCase("q6_k", 1, {152064}, 3584, kPlain, 116));
      cases.push_back(matmulQ8xCase("q6_k", 1, {3584}, 18944, kResidual, 117));
      cases.push_back(matmulQ8xCase("q6_k", 1, {18944}, 3584, kPlain, 118));
      cases.push_back(matmulQ8xCase("q6_k", 8, {3584}, 18944, kResidual, 119));
      cases.push_back(matmulQ8xCase("q4_1", 1, {18944, 18944}, 3584, kPlain, 120));
      cases.push_back(matmulQ8xCase("q4_1", 1, {3584}, 18944, kResidual, 121));
      cases.push_back(matmulQ8xCase("q5_0", 1, {18944, 18944}, 3584, kPlain, 122));
      cases.push_back(matmulQ8xCase("q5_0", 1, {3584}, 18944, kResidual, 123));
      for (const std::string t : {"q4_1", "q5_0", "q6_k", "q8_0", "f16"}) {
        cases.push_back(matmulCase(t, 1, 18944, 3584, kPlain, 113));
        cases.push_back(matmulCase(t, 1, 3584, 18944, kResidual, 114));
      }
      for (const std::string e : {"matmul_f16_mma", "matmul_f16_mma_w16"}) {
        cases.push_back(matmulF16MmaCase(1, 18944, 3584, kPlain, 113, e));
        cases.push_back(matmulF16MmaCase(1, 3584, 18944, kResidual, 114, e));
        cases.push_back(matmulF16MmaCase(8, 3584, 18944, kResidual, 124, e));
      }
      cases.push_back(matmulCase("q6_k", 1, 152064, 3584, kPlain, 115));
    }
  }
  // The same two shapes on the f32-activation GEMVs (what SPIR-V runs), beside them.
  cases.push_back(matmulCase("q4_k", 1, 18944, 3584, kPlain, 85));
  cases.push_back(matmulCase("q8_0", 1, 1024, 3072, kResidual, 86));
  cases.push_back(argmaxCase(1, 49152, false, 71));
  cases.push_back(argmaxCase(3, 151936, true, 72));
  cases.push_back(argmaxCase(2, 1000, true, 73));
  // The two-pass argmax PTX packages run: parts of 4096 (Qwen's vocabulary: 38 parts, the
  // last one partial) and a small chunk with an all-NaN part; the reduction over 38 parts
  // and over more parts than threads (300: a thread merges two).
  cases.push_back(argmaxSplitCase(2, 151936, 4096, 74));
  cases.push_back(argmaxSplitCase(3, 4500, 1000, 75));
  cases.push_back(argmaxReduceCase(3, 38, 76));
  cases.push_back(argmaxReduceCase(2, 300, 77));
  return cases;
}

} // namespace swz::check
