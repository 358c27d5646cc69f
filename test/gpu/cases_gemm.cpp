// Numeric cases for the prefill GEMM path (llama.cpp's cuBLAS order: dequantize the
// weight to f16, round the activations to f16, multiply on tensor cores):
//   * swz_dequant_f16 (codegen/kernels/dequant_f16.mlir): dequant_<type>_f16 for
//     Q4_0, Q4_1, Q8_0, Q4_K, Q6_K and convert_f32_f16 (PTX and SPIR-V);
//   * swz_gemm_f16 (gemm_f16.mlir): tensor-core GEMM, PTX only;
//   * swz_gemm_f32_f16w (gemm_f32_f16w.mlir): the portable tiled GEMM, SPIR-V only.
// References are float64: weights decoded per the GGUF block spec (ggml-common.h,
// ggml-quants.c dequantize_row_*), written here independently of runtime/ggml, and
// products summed in double. Plain C++ (see cases.h).
//
// Weight blocks are random bytes (every bit pattern of qs/qh/scales is a valid block)
// with random f16 scales, so all quant values, sub-block scales and mins occur.
// Outputs start as f16 / f32 NaN: an element the kernel does not write fails.
#include "cases.h"
#include "cases_gemv.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

namespace swz::check {
namespace {

constexpr uint16_t kF16NaN = 0x7E00;

/// f16 bits of v rounded through f32 (as the kernels' f32 -> f16 conversions), and back.
uint16_t f16Bits(double v) { return gemv::doubleToHalf(double(float(v))); }
double f16Value(uint16_t b) { return gemv::halfToDouble(b); }

/// A random f16 with magnitude in [lo, hi) and random sign when `signedValue`.
uint16_t randomF16(Rng &rng, double lo, double hi, bool signedValue) {
  double u = 0.5 * (rng.next() + 1.0);
  double mag = lo + (hi - lo) * u;
  double s = signedValue && rng.next() < 0 ? -1.0 : 1.0;
  return f16Bits(s * mag);
}

uint8_t randomByte(Rng &rng) { return uint8_t(int((rng.next() + 1.0) * 128.0) & 0xFF); }

uint16_t getF16(const std::vector<uint8_t> &b, size_t at) {
  return uint16_t(b[at] | (b[at + 1] << 8));
}

/// One quantized weight type: block geometry, a random-block generator, and the
/// float64 decoding of one block (GGUF spec).
struct QuantType {
  const char *name;   ///< ggml name, lower case ("q4_k")
  int blockElems;     ///< 32 or 256
  int blockBytes;
  void (*fill)(Rng &, uint8_t *block);
  /// float64 decoding of one block (GGUF spec): the shared reference of cases_gemv.h.
  void decode(const uint8_t *block, double *out) const {
    gemv::dequantRow(name, block, blockElems, out, nullptr);
  }
};

// Scales: |d| in [2^-10, 2^-5), the range of real GGUF weights' block scales.
constexpr double kDLo = 1.0 / 1024, kDHi = 1.0 / 32;

void fillQ4_0(Rng &r, uint8_t *b) {
  uint16_t d = randomF16(r, kDLo, kDHi, true);
  std::memcpy(b, &d, 2);
  for (int i = 2; i < 18; ++i) b[i] = randomByte(r);
}
void fillQ4_1(Rng &r, uint8_t *b) {
  uint16_t d = randomF16(r, kDLo, kDHi, false), m = randomF16(r, 0.01, 0.25, true);
  std::memcpy(b, &d, 2);
  std::memcpy(b + 2, &m, 2);
  for (int i = 4; i < 20; ++i) b[i] = randomByte(r);
}
void fillQ8_0(Rng &r, uint8_t *b) {
  uint16_t d = randomF16(r, kDLo / 8, kDHi / 8, true);
  std::memcpy(b, &d, 2);
  for (int i = 2; i < 34; ++i) b[i] = randomByte(r);
}
void fillQ4_K(Rng &r, uint8_t *b) {
  uint16_t d = randomF16(r, kDLo / 16, kDHi / 16, false),
           dmin = randomF16(r, kDLo / 16, kDHi / 16, false);
  std::memcpy(b, &d, 2);
  std::memcpy(b + 2, &dmin, 2);
  for (int i = 4; i < 144; ++i) b[i] = randomByte(r);
}
void fillQ6_K(Rng &r, uint8_t *b) {
  for (int i = 0; i < 208; ++i) b[i] = randomByte(r);  // ql, qh, int8 scales
  uint16_t d = randomF16(r, kDLo / 64, kDHi / 64, true);
  std::memcpy(b + 208, &d, 2);
}

const std::vector<QuantType> &quantTypes() {
  static const std::vector<QuantType> types = {
      {"q4_0", 32, 18, fillQ4_0},   {"q4_1", 32, 20, fillQ4_1},
      {"q8_0", 32, 34, fillQ8_0},   {"q4_k", 256, 144, fillQ4_K},
      {"q6_k", 256, 210, fillQ6_K},
  };
  return types;
}

std::string shape(const char *what, int64_t a, int64_t b) {
  return std::string(what) + "=" + std::to_string(a) + "x" + std::to_string(b);
}

/// The f16 result of an f32 computation of an exact value: round-to-nearest to f16
/// is within half an f16 ulp (2^-11 |ref|); the f32 intermediate (Q4_1's d*q + m,
/// Q4_K's d*sc*q - dmin*m, Q6_K's d*sc*q) may round once before, so allow one ulp,
/// 2^-10 |ref|, plus 2^-24 for f16 subnormals.
constexpr const char *kF16Note =
    "|got - ref| <= 2^-10 |ref| + 2^-24 (one f16 ulp: f32 arithmetic, then one "
    "rounding to f16)";

Verdict checkF16(const std::vector<uint8_t> &bytes, const std::vector<double> &ref) {
  Verdict v;
  v.note = kF16Note;
  for (size_t i = 0; i < ref.size(); ++i) {
    double got = f16Value(getF16(bytes, 2 * i));
    compare(v, got, ref[i], std::ldexp(std::fabs(ref[i]), -10) + std::ldexp(1.0, -24));
  }
  return v;
}

/// dequant_<type>_f16 over an N x K weight. `grid` (Gx, Gy) with Gx * Gy >= N
/// exercises the row = blockIdx.x + blockIdx.y * gridDim.x mapping.
/// An N x K weight of random `q` blocks (bytes, zero-padded to a multiple of `pad`) and its
/// float64 decoding (GGUF spec), row-major.
struct QuantMatrix {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};
QuantMatrix randomQuantMatrix(const QuantType &q, int64_t N, int64_t K, Rng &rng, size_t pad = 1) {
  const int64_t blocks = N * (K / q.blockElems);
  QuantMatrix m;
  m.bytes.assign((size_t(blocks * q.blockBytes) + pad - 1) / pad * pad, 0);
  for (int64_t b = 0; b < blocks; ++b)
    q.fill(rng, m.bytes.data() + b * q.blockBytes);
  m.values.resize(size_t(N * K));
  for (int64_t b = 0; b < blocks; ++b)
    q.decode(m.bytes.data() + b * q.blockBytes, m.values.data() + b * q.blockElems);
  return m;
}

Case dequantCase(const QuantType &q, int64_t N, int64_t K, unsigned gx, unsigned gy,
                 uint64_t seed) {
  Rng rng{seed};
  QuantMatrix qm = randomQuantMatrix(q, N, K, rng);
  const std::vector<uint8_t> &w = qm.bytes;
  auto ref = std::make_shared<std::vector<double>>(std::move(qm.values));

  Case c;
  c.module = "swz_dequant_f16";
  c.entry = std::string("dequant_") + q.name + "_f16";
  c.label = shape("N x K", N, K) + (gy > 1 ? " grid " + std::to_string(gx) + "x" +
                                                  std::to_string(gy)
                                            : "");
  c.buffers.push_back(makeBuffer(w, {int64_t(w.size())}));
  c.buffers.push_back(makeBuffer(std::vector<uint16_t>(size_t(N * K), kF16NaN), {N * K}));
  c.args = {Arg::memref(0), Arg::memref(1), Arg::i(int32_t(N)), Arg::i(int32_t(K))};
  c.grid = {gx, gy, 1};
  c.block = {256, 1, 1};
  c.bytesMoved = double(w.size()) + 2.0 * double(N * K);
  c.flops = 2.0 * double(N * K);
  c.check = [ref](const std::vector<std::vector<uint8_t>> &out) {
    return checkF16(out[1], *ref);
  };
  return c;
}

Case convertCase(int64_t T, int64_t K) {
  Rng rng{17};
  std::vector<float> x(size_t(T * K));
  for (auto &v : x) v = float(rng.next() * 8.0);
  // The reference is the correctly rounded f16 of each f32: the kernel's single
  // cvt.rn (OpFConvert) must match it exactly.
  auto ref = std::make_shared<std::vector<double>>(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    (*ref)[i] = f16Value(f16Bits(x[i]));
  Case c;
  c.module = "swz_dequant_f16";
  c.entry = "convert_f32_f16";
  c.label = shape("T x K", T, K);
  c.buffers.push_back(makeBuffer(x, {T * K}));
  c.buffers.push_back(makeBuffer(std::vector<uint16_t>(x.size(), kF16NaN), {T * K}));
  c.args = {Arg::memref(0), Arg::memref(1), Arg::i(int32_t(T)), Arg::i(int32_t(K))};
  c.grid = {unsigned(T), 1, 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 6.0 * double(T * K);
  c.check = [ref](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "exact: f16(x) rounded to nearest even";
    for (size_t i = 0; i < ref->size(); ++i)
      compare(v, f16Value(getF16(out[1], 2 * i)), (*ref)[i], 0.0);
    return v;
  };
  return c;
}

/// Float64 y = x·Wᵀ (+ bias) (+ res) and, per element, sum |x_k w_k| (+ |bias|) (+ |res|)
/// for the rounding-error bound.
struct GemmRef {
  std::vector<double> y, absSum;
};

/// GEMM inputs as doubles (exactly the values the kernel sees); bias, res empty = none.
struct GemmInputs {
  std::vector<double> x, w, bias, res;
};

/// The float64 product; with `rowStep` > 1 only rows t % rowStep == 0 and the last (the
/// 7B-shape timing cases: 15 of 512 rows, each across all N columns; the small cases
/// check every output, so an edge error cannot hide).
GemmRef gemmRef(const GemmInputs &in, int64_t T, int64_t N, int64_t K, int64_t rowStep = 1) {
  const std::vector<double> &x = in.x, &w = in.w;
  const std::vector<double> *bias = in.bias.empty() ? nullptr : &in.bias;
  const std::vector<double> *res = in.res.empty() ? nullptr : &in.res;
  GemmRef r;
  r.y.resize(size_t(T * N));
  r.absSum.resize(size_t(T * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N && (t % rowStep == 0 || t == T - 1); ++n) {
      const double *xr = &x[size_t(t * K)], *wr = &w[size_t(n * K)];
      double s = 0, a = 0;
      for (int64_t k = 0; k < K; ++k) {
        double p = xr[k] * wr[k];
        s += p;
        a += std::fabs(p);
      }
      if (bias) {
        s += (*bias)[size_t(n)];
        a += std::fabs((*bias)[size_t(n)]);
      }
      if (res) {
        s += (*res)[size_t(t * N + n)];
        a += std::fabs((*res)[size_t(t * N + n)]);
      }
      r.y[size_t(t * N + n)] = s;
      r.absSum[size_t(t * N + n)] = a;
    }
  return r;
}

/// The bias buffer of a GEMM case: N random values (a 1-element dummy without bias),
/// appended to `ref` as float64 for the reference.
std::vector<float> randomBias(Rng &rng, int64_t N, bool withBias, std::vector<double> &ref) {
  std::vector<float> biasF(size_t(withBias ? N : 1), 0.f);
  if (withBias)
    for (auto &b : biasF) {
      b = float(rng.next());
      ref.push_back(b);
    }
  return biasF;
}

/// The prefill GEMMs' epilogue flags (gemm_f16.mlir, gemm_skinny.mlir): add bias[n], add
/// the residual res[t, n]. The cases with a residual run it in place, as the graph's
/// `x = x + matmul(...)`: res and y are one buffer, holding the residual on entry.
constexpr unsigned kBias = 1, kRes = 2;

/// The residual of a GEMM case with kRes: T x N random values, appended to `ref` as
/// float64; empty without.
std::vector<float> randomResidual(Rng &rng, int64_t T, int64_t N, unsigned flags, std::vector<double> &ref) {
  std::vector<float> resF;
  if (flags & kRes)
    for (int64_t i = 0; i < T * N; ++i) {
      resF.push_back(float(rng.next()));
      ref.push_back(resF.back());
    }
  return resF;
}

std::string gemmLabel(int64_t T, int64_t N, int64_t K, unsigned flags) {
  return "T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
         (flags & kBias ? " +bias" : "") + (flags & kRes ? " +res" : "");
}

/// y of a prefill GEMM case (buffer 2): NaN, or with kRes the residual (`resF`), which the
/// kernel adds in place.
Buffer gemmOutput(std::vector<float> resF, int64_t T, int64_t N, std::vector<int64_t> sizes, unsigned flags) {
  return makeBuffer((flags & kRes) ? std::move(resF) : std::vector<float>(size_t(T * N), std::nanf("")),
                    std::move(sizes));
}

/// The res argument of a prefill GEMM case: y (buffer 2) with kRes; without, a new dummy
/// buffer of `rank` ones (never read).
Arg gemmResidualArg(Case &c, int rank, unsigned flags) {
  if (flags & kRes)
    return Arg::memref(2);
  c.buffers.push_back(makeBuffer(std::vector<float>(1, 0.f), std::vector<int64_t>(size_t(rank), 1)));
  return Arg::memref(int(c.buffers.size()) - 1);
}

/// The GEMM cases' check: |y - ref| <= (K + 1) 2^-23 sum_k |x_k w_k| + 1e-30 against the
/// float64 product of the same inputs (`note` says why that bound holds for the kernel).
std::function<Verdict(const std::vector<std::vector<uint8_t>> &)>
gemmCheck(std::shared_ptr<GemmInputs> in, int64_t T, int64_t N, int64_t K, std::string note,
          int64_t rowStep = 1) {
  return [in, T, N, K, note, rowStep](const std::vector<std::vector<uint8_t>> &out) {
    const GemmRef ref = gemmRef(*in, T, N, K, rowStep);
    Verdict v;
    v.note = note;
    auto y = asVector<float>(out[2]);
    for (size_t i = 0; i < y.size(); ++i) {
      const int64_t t = int64_t(i) / N;
      if (t % rowStep == 0 || t == T - 1)
        compare(v, y[i], ref.y[i], double(K + 1) * std::ldexp(ref.absSum[i], -23) + 1e-30);
    }
    return v;
  };
}


/// Random f16 matrix (values in [-1, 1)), as bits and as doubles.
void randomF16Matrix(Rng &rng, int64_t n, std::vector<uint16_t> &bits, std::vector<double> &vals) {
  bits.resize(size_t(n));
  vals.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    bits[size_t(i)] = f16Bits(rng.next());
    vals[size_t(i)] = f16Value(bits[size_t(i)]);
  }
}

/// The launch shape of the generated gemm_f16 (compiler/mlir/LowerTiles.cpp): the
/// sm_80 / sm_90 schedules' 64x64 tile on 128 threads, unless SWZ_GEMM_TILE =
/// "<tile_m>x<tile_n>x<threads>[x<dynamic_smem_bytes>]" names the tile of a kernel
/// generated from another schedule (bench/tune_gemm.sh, test/python/test_simt_interp.py;
/// the bytes are the kernel's swz.dynamic_smem, for tiles over the static 48 KiB).
struct GemmLaunch {
  long long tileM = 64, tileN = 64, threads = 128, dynamicSmem = 0;
};

GemmLaunch gemmLaunch() {
  GemmLaunch l;
  if (const char *e = std::getenv("SWZ_GEMM_TILE")) {
    int used3 = -1, used4 = -1;  // characters consumed: the whole value, nothing after
    std::sscanf(e, "%lldx%lldx%lld%n", &l.tileM, &l.tileN, &l.threads, &used3);
    std::sscanf(e, "%lldx%lldx%lldx%lld%n", &l.tileM, &l.tileN, &l.threads, &l.dynamicSmem, &used4);
    const size_t len = std::strlen(e);
    const bool whole3 = used3 >= 0 && size_t(used3) == len, whole4 = used4 >= 0 && size_t(used4) == len;
    if (!whole4)
      l.dynamicSmem = 0;
    if ((!whole3 && !whole4) || l.tileM <= 0 || l.tileN <= 0 || l.threads <= 0 ||
        l.threads % 32 != 0 || l.dynamicSmem < 0)
      throw std::runtime_error(std::string("SWZ_GEMM_TILE='") + e +
                               "': expected <tile_m>x<tile_n>x<threads>[x<dynamic_smem_bytes>], "
                               "e.g. 64x64x128 or 128x128x256x132080");
  }
  return l;
}

/// gemm_f16 (PTX): x, W f16 (the outputs of convert_f32_f16 / dequant_*_f16), y f32.
/// `rowStep`: gemmRef's (the reference over a subset of rows for the large cases).
Case gemmF16Case(int64_t T, int64_t N, int64_t K, unsigned flags, uint64_t seed,
                 int64_t rowStep = 1) {
  Rng rng{seed};
  std::vector<uint16_t> xb, wb;
  std::vector<double> xv, wv, bias, res;
  randomF16Matrix(rng, T * K, xb, xv);
  randomF16Matrix(rng, N * K, wb, wv);
  std::vector<float> biasF = randomBias(rng, N, flags & kBias, bias);
  std::vector<float> resF = randomResidual(rng, T, N, flags, res);
  // The float64 reference is computed when the case is checked (T N K MACs).
  auto in = std::make_shared<GemmInputs>(GemmInputs{std::move(xv), std::move(wv), std::move(bias), std::move(res)});

  Case c;
  c.module = "swz_gemm_f16";
  c.entry = "gemm_f16";
  c.label = gemmLabel(T, N, K, flags);
  c.buffers.push_back(makeBuffer(xb, {T, K}));
  c.buffers.push_back(makeBuffer(wb, {N, K}));
  c.buffers.push_back(gemmOutput(std::move(resF), T, N, {T, N}, flags));
  c.buffers.push_back(makeBuffer(biasF, {int64_t(biasF.size())}));
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3), gemmResidualArg(c, 2, flags),
            Arg::i(int32_t(flags))};
  const GemmLaunch l = gemmLaunch();
  c.grid = {unsigned((N + l.tileN - 1) / l.tileN), unsigned((T + l.tileM - 1) / l.tileM), 1};
  c.block = {unsigned(l.threads), 1, 1};
  c.dynamicSmemBytes = unsigned(l.dynamicSmem);
  c.bytesMoved = 2.0 * double(T * K + N * K) + 4.0 * double(T * N) * (flags & kRes ? 2 : 1) +
                 (flags & kBias ? 4.0 * N : 0);
  c.flops = 2.0 * double(T) * double(N) * double(K);
  c.tensorCore = true;  // mma.sync: the roofline uses the tensor-core peak
  // Products of f16 values are exact in f32 (11 + 11 significant bits); the K-term
  // f32 sum (tensor-core accumulation, whatever its order or its rounding mode:
  // unit roundoff <= 2^-23) and the bias and residual adds are within (K + 1) 2^-23 times
  // the sum of the terms' magnitudes, sum|x_k w_k| + |bias| + |res|
  // (Higham, Accuracy and Stability, eq. 3.5). A fragment, swizzle or edge error
  // is O(|y|) ~ sqrt(K)/3, far outside.
  c.check = gemmCheck(in, T, N, K,
                      "|y - ref| <= (K + 1) 2^-23 sum_k |x_k w_k| + 1e-30 (f32 accumulation of "
                      "exact f16 products; ref = float64 product of the same f16 inputs)" +
                          std::string(rowStep > 1 ? "; rows t % " + std::to_string(rowStep) +
                                                        " == 0 and the last"
                                                  : ""),
                      rowStep);
  return c;
}

/// gemm_f32_f16w (SPIR-V): x f32, W f16, y f32.
Case gemmPortableCase(int64_t T, int64_t N, int64_t K, bool withBias, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> x(size_t(T * K));
  std::vector<double> xv(x.size()), wv, bias;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(rng.next());
    xv[i] = x[i];
  }
  std::vector<uint16_t> wb;
  randomF16Matrix(rng, N * K, wb, wv);
  std::vector<float> biasF = randomBias(rng, N, withBias, bias);
  auto in = std::make_shared<GemmInputs>(GemmInputs{std::move(xv), std::move(wv), std::move(bias)});

  Case c;
  c.module = "swz_gemm_f32_f16w";
  c.entry = "gemm_f32_f16w";
  c.label = gemmLabel(T, N, K, withBias ? kBias : 0);
  c.buffers.push_back(makeBuffer(x, {T * K}));
  c.buffers.push_back(makeBuffer(wb, {N * K}));
  c.buffers.push_back(makeBuffer(std::vector<float>(size_t(T * N), std::nanf("")), {T * N}));
  c.buffers.push_back(makeBuffer(biasF, {int64_t(biasF.size())}));
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3),
            Arg::i(int32_t(T)), Arg::i(int32_t(N)), Arg::i(int32_t(K)),
            Arg::i(withBias ? 1 : 0)};
  c.grid = {unsigned((N + 63) / 64), unsigned((T + 63) / 64), 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 4.0 * double(T * K) + 2.0 * double(N * K) + 4.0 * double(T * N) +
                 (withBias ? 4.0 * N : 0);
  c.flops = 2.0 * double(T) * double(N) * double(K);
  // f32 x times f16 w rounds once (or not at all with FMA), each of the K adds
  // and the bias add once: |err| <= (2K + 1) 2^-24 sum|x_k w_k| to first order.
  c.check = gemmCheck(in, T, N, K,
                      "|y - ref| <= (K + 1) 2^-23 sum_k |x_k w_k| + 1e-30 (f32 products and "
                      "sums, u = 2^-24, two roundings per term)");
  return c;
}

/// gemm_skinny_<type> (PTX): the prefill GEMM of short passes, x f32 rounded to f16 in the
/// kernel, W the GGUF blocks (bytes, padded to 16 as the executor pads weights).
Case gemmSkinnyCase(const QuantType &q, int64_t T, int64_t N, int64_t K, unsigned flags, uint64_t seed) {
  Rng rng{seed};
  QuantMatrix qm = randomQuantMatrix(q, N, K, rng, 16);
  const std::vector<uint8_t> &w = qm.bytes;
  std::vector<double> &wv = qm.values;
  std::vector<float> x(size_t(T * K));
  std::vector<double> xv(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(rng.next());
    xv[i] = f16Value(f16Bits(x[i]));  // the kernel multiplies f16(x)
  }
  std::vector<double> bias, res;
  std::vector<float> biasF = randomBias(rng, N, flags & kBias, bias);
  std::vector<float> resF = randomResidual(rng, T, N, flags, res);
  auto in = std::make_shared<GemmInputs>(GemmInputs{std::move(xv), std::move(wv), std::move(bias), std::move(res)});

  Case c;
  c.module = "swz_gemm_skinny";
  c.entry = std::string("gemm_skinny_") + q.name;
  c.label = gemmLabel(T, N, K, flags);
  c.buffers.push_back(makeBuffer(x, {T * K}));
  Buffer wb;
  wb.bytes = w;
  wb.sizes = {int64_t(w.size() / 2)};
  wb.elemBytes = 2;
  c.buffers.push_back(std::move(wb));
  c.buffers.push_back(gemmOutput(std::move(resF), T, N, {T * N}, flags));
  c.buffers.push_back(makeBuffer(biasF, {int64_t(biasF.size())}));
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::memref(3), gemmResidualArg(c, 1, flags),
            Arg::i(int32_t(T)), Arg::i(int32_t(N)), Arg::i(int32_t(K)), Arg::i(int32_t(flags))};
  c.grid = {unsigned((N + 31) / 32), 1, 1};
  c.block = {128, 1, 1};
  c.bytesMoved = double(N * (K / q.blockElems) * q.blockBytes) + 4.0 * double(T * K + T * N) +
                 (flags & kRes ? 4.0 * double(T * N) : 0);
  c.flops = 2.0 * double(T) * double(N) * double(K);
  c.tensorCore = true;
  // Against the exact weights: each f16 weight is the f32 dequantization rounded once more
  // (one f16 ulp, 2^-10 |w|, + 2^-24 for subnormals; kF16Note), then gemm_f16's bound.
  c.check = [in, T, N, K](const std::vector<std::vector<uint8_t>> &out) {
    const GemmRef ref = gemmRef(*in, T, N, K);
    Verdict v;
    v.note = "|y - ref| <= (2^-10 + (K + 1) 2^-23) sum_k |x_k w_k| + 2^-24 sum_k |x_k| (ref = float64 "
             "product of f16(x) and the exact weights: one f16 rounding of each weight, then f32 "
             "accumulation)";
    auto y = asVector<float>(out[2]);
    for (int64_t t = 0; t < T; ++t) {
      double sx = 0;
      for (int64_t k = 0; k < K; ++k) sx += std::fabs(in->x[size_t(t * K + k)]);
      for (int64_t n = 0; n < N; ++n) {
        const size_t i = size_t(t * N + n);
        compare(v, y[i], ref.y[i],
                (std::ldexp(1.0, -10) + double(K + 1) * std::ldexp(1.0, -23)) * ref.absSum[i] +
                    std::ldexp(sx, -24) + 1e-30);
      }
    }
    return v;
  };
  return c;
}

} // namespace

std::vector<Case> gemmCases(const std::string &format) {
  std::vector<Case> cases;
  // Dequantization and activation rounding: both targets, one source.
  uint64_t seed = 100;
  for (const QuantType &q : quantTypes()) {
    cases.push_back(dequantCase(q, 577, 1536, 577, 1, seed++));  // N odd
    cases.push_back(dequantCase(q, 33, 4864, 33, 1, seed++));    // K = 4864 (Qwen2.5 FFN)
  }
  cases.push_back(dequantCase(quantTypes()[2], 577, 576, 300, 2, seed++));  // 2-D grid
  cases.push_back(convertCase(17, 576));
  cases.push_back(convertCase(100, 1536));

  if (format == "ptx") {
    // Tensor-core GEMM: T = 1, 17, 100, 512; N = 576, 1536, 577 (odd); K = 576,
    // 1536, 4864, plus K = 544 (a 32-wide tail after the last full 64-wide k tile)
    // and K = 32 (one partial k tile), and an exact 64x64x64 tile.
    cases.push_back(gemmF16Case(64, 64, 64, 0, 1));
    cases.push_back(gemmF16Case(1, 576, 576, 0, 2));
    cases.push_back(gemmF16Case(17, 1536, 576, kBias, 3));
    cases.push_back(gemmF16Case(100, 577, 1536, 0, 4));
    cases.push_back(gemmF16Case(512, 576, 4864, kBias, 5));
    cases.push_back(gemmF16Case(512, 1536, 576, 0, 6));
    cases.push_back(gemmF16Case(33, 100, 544, kBias, 7));
    cases.push_back(gemmF16Case(5, 40, 32, 0, 8));
    // The residual epilogue, in place (y holds the residual on entry): partial tiles with
    // bias, and an odd N without.
    cases.push_back(gemmF16Case(33, 100, 544, kBias | kRes, 12));
    cases.push_back(gemmF16Case(100, 577, 1536, kRes, 13));
    // Qwen2.5-Coder-7B's pp512 shapes, for timing on a GPU (q and o 3584 x 3584, gate /
    // up 18944 x 3584, down 3584 x 18944; the reference over 15 of the 512 rows). Only
    // with SWZ_GEMM_TIMING_CASES=1 (bench/tune_gemm.sh): their 1.6 GB of inputs would
    // slow every listing of the cases.
    if (const char *e = std::getenv("SWZ_GEMM_TIMING_CASES"); e && std::string(e) == "1") {
      cases.push_back(gemmF16Case(512, 3584, 3584, kBias, 9, 37));
      cases.push_back(gemmF16Case(512, 18944, 3584, 0, 10, 37));
      cases.push_back(gemmF16Case(512, 3584, 18944, 0, 11, 37));
    }
    // Skinny GEMM (T <= 64, K % 256 == 0): a partial last workgroup (N = 577, 100, 70),
    // 1, 2 and 4 m-tiles (its three loops), Q6_K rows whose super-blocks start 4, 8, 12
    // bytes past 16 (rows of 2,100 bytes).
    const QuantType &q80 = quantTypes()[2], &q4k = quantTypes()[3], &q6k = quantTypes()[4];
    cases.push_back(gemmSkinnyCase(q4k, 1, 577, 1536, 0, 21));
    cases.push_back(gemmSkinnyCase(q4k, 17, 64, 512, kBias, 22));
    cases.push_back(gemmSkinnyCase(q4k, 64, 40, 256, 0, 23));
    cases.push_back(gemmSkinnyCase(q6k, 1, 100, 2560, kBias, 24));
    cases.push_back(gemmSkinnyCase(q6k, 33, 33, 512, 0, 25));
    cases.push_back(gemmSkinnyCase(q80, 1, 70, 1024, 0, 26));
    cases.push_back(gemmSkinnyCase(q80, 64, 32, 768, kBias, 27));
    cases.push_back(gemmSkinnyCase(q4k, 17, 64, 512, kBias | kRes, 31));  // the residual, in place
    cases.push_back(gemmSkinnyCase(q6k, 33, 33, 512, kRes, 32));
    // 7B shapes (timed on the H200: ffn_down and q/k/v at one token).
    cases.push_back(gemmSkinnyCase(q4k, 1, 3584, 18944, 0, 28));
    cases.push_back(gemmSkinnyCase(q6k, 1, 3584, 18944, 0, 29));
    cases.push_back(gemmSkinnyCase(q4k, 1, 4608, 3584, kBias, 30));
  } else {
    // Portable GEMM on lavapipe (CPU): smaller products, same edge coverage.
    cases.push_back(gemmPortableCase(1, 576, 576, false, 11));
    cases.push_back(gemmPortableCase(17, 577, 576, true, 12));
    cases.push_back(gemmPortableCase(100, 577, 1536, false, 13));
    cases.push_back(gemmPortableCase(64, 64, 64, true, 14));
    cases.push_back(gemmPortableCase(33, 100, 544, false, 15));
    cases.push_back(gemmPortableCase(5, 40, 4864, true, 16));
  }
  return cases;
}

} // namespace swz::check
