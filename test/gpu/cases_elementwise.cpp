//===- cases_elementwise.cpp - add, swiglu, rms_norm, rope -----------------===//
//
// Numeric cases for codegen/kernels/{add_f32, swiglu_f32, rms_norm_f32, rope_f32}
// (PTX and SPIR-V), each against a float64 reference with the tolerance stated in its
// Verdict::note. (The tensor-core prefill GEMM's cases are in cases_gemm.cpp.)
//
//===----------------------------------------------------------------------===//
#include "cases.h"

#include <cmath>

namespace swz::check {
namespace {

constexpr float kSentinel = -12345.0f;

/// out = f(a, b) elementwise over n: add_f32 (block 256) and swiglu_f32 (block 64),
/// arguments (a, b, out: memref<?xf32>, n: i32), grid ceil(n / block).
Case binaryCase(const char *module, const char *entry, unsigned block, int64_t n,
                const std::vector<float> &a, const std::vector<float> &b) {
  Case c;
  c.module = module;
  c.entry = entry;
  c.label = "n=" + std::to_string(n);
  c.buffers = {makeBuffer(a, {n}), makeBuffer(b, {n}),
               makeBuffer(std::vector<float>(size_t(n), kSentinel), {n})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(int32_t(n))};
  c.grid = {unsigned((n + block - 1) / block), 1, 1};
  c.block = {block, 1, 1};
  c.bytesMoved = 12.0 * double(n);
  return c;
}

Case addCase(int64_t n) {
  Rng rng{11};
  std::vector<float> a(n), b(n);
  for (auto &v : a) v = float(rng.next() * 100.0);
  for (auto &v : b) v = float(rng.next());
  Case c = binaryCase("swz_add", "add_f32", 256, n, a, b);
  c.flops = double(n);
  c.check = [a, b](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "exact: one f32 rounding of a + b, same as the reference's f32 sum";
    std::vector<float> y = asVector<float>(out[2]);
    for (size_t i = 0; i < y.size(); ++i)
      compare(v, y[i], double(a[i] + b[i]), 0.0);
    return v;
  };
  return c;
}

Case swigluCase(int64_t n) {
  Rng rng{13};
  std::vector<float> g(n), u(n);
  for (auto &v : g) v = float(rng.next() * 8.0);
  for (auto &v : u) v = float(rng.next() * 2.0);
  Case c = binaryCase("swz_swiglu", "swiglu_f32", 256, n, g, u);
  c.grid = {unsigned((n + 1023) / 1024), 1, 1};  // four elements a thread
  c.flops = 5.0 * double(n);  // neg, exp, add, div, mul
  c.check = [g, u](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|err| <= 1e-5 (1 + |ref|): f32 exp (ex2.approx on PTX, GLSL Exp on SPIR-V) "
             "and division, a few ulps";
    compareSwiglu(v, asVector<float>(out[2]), g, u);
    return v;
  };
  return c;
}

/// rms_norm_f32(x, gamma, y: memref<?xf32>, d: i32, eps: f32), grid (rows), block 256.
Case rmsNormCase(int64_t rows, int64_t d) {
  Rng rng{7};
  std::vector<float> x(rows * d), g(d);
  for (auto &v : x) v = float(rng.next() * 3.0);
  for (auto &v : g) v = float(1.0 + 0.5 * rng.next());
  const float eps = 1e-5f;
  Case c;
  c.module = "swz_rms_norm";
  c.entry = "rms_norm_f32";
  c.label = "rows=" + std::to_string(rows) + " d=" + std::to_string(d);
  c.buffers = {makeBuffer(x, {rows * d}), makeBuffer(g, {d}),
               makeBuffer(std::vector<float>(size_t(rows * d), kSentinel), {rows * d})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(int32_t(d)), Arg::f(eps)};
  c.grid = {unsigned(rows), 1, 1};
  c.block = {256, 1, 1};
  c.bytesMoved = 8.0 * double(rows * d) + 4.0 * double(d);
  c.flops = 4.0 * double(rows * d);
  c.check = [x, g, rows, d, eps](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|err| <= 1e-5 (1 + |ref|): f32 sum of squares over d (relative error ~d * 2^-24 "
             "at worst) and rsqrt (rsqrt.approx.f32, 2^-22.9; GLSL InverseSqrt)";
    compareRmsNorm(v, asVector<float>(out[2]), x, g, rows, d, eps);
    return v;
  };
  return c;
}

/// rope_f32(x: memref<?xf32>, positions: memref<?xi32>, head_dim, n_rot: i32,
/// theta: f32, neox: i32), grid (T, n_head), block 32, in place.
Case ropeCase(int64_t T, int32_t nHead, int32_t headDim, int32_t nRot, float theta, bool neox) {
  Rng rng{17};
  const int64_t width = int64_t(nHead) * headDim;
  std::vector<float> x(T * width);
  for (auto &v : x) v = float(rng.next());
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t)
    pos[t] = int32_t((t * 977) % 4096);  // spread over [0, 4096)
  Case c;
  c.module = "swz_rope";
  c.entry = "rope_f32";
  c.label = std::string(neox ? "neox" : "norm") + " T=" + std::to_string(T) +
            " heads=" + std::to_string(nHead) + " head_dim=" + std::to_string(headDim) +
            " n_rot=" + std::to_string(nRot);
  c.buffers = {makeBuffer(x, {T * width}), makeBuffer(pos, {T})};
  c.args = {Arg::memref(0), Arg::memref(1), Arg::i(headDim), Arg::i(nRot), Arg::f(theta),
            Arg::i(neox ? 1 : 0)};
  c.grid = {unsigned(T), unsigned(nHead), 1};
  c.block = {32, 1, 1};
  c.bytesMoved = 8.0 * double(T) * nHead * nRot + 4.0 * double(T);
  c.flops = 6.0 * double(T) * nHead * (nRot / 2);
  c.check = [x, pos, T, nHead, headDim, nRot, theta, neox,
             width](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "rotated pairs: |err| <= 1e-6 + (|x0| + |x1|) (a 2^-21 + 1e-6) for angle a = "
             "pos theta^(-2i/n_rot) (the kernel forms a in f32 as llama.cpp does: ~8 ulps); "
             "features >= n_rot exact";
    std::vector<float> y = asVector<float>(out[0]);
    std::vector<double> ref(x.begin(), x.end()), tol(x.size(), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int32_t h = 0; h < nHead; ++h)
        for (int32_t i = 0; i < nRot / 2; ++i) {
          double ang = double(pos[t]) * std::pow(double(theta), -2.0 * i / nRot);
          int64_t base = t * width + int64_t(h) * headDim;
          int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + nRot / 2 : 2 * i + 1;
          double x0 = x[base + j0], x1 = x[base + j1];
          ref[base + j0] = x0 * std::cos(ang) - x1 * std::sin(ang);
          ref[base + j1] = x0 * std::sin(ang) + x1 * std::cos(ang);
          double angTol = ang * std::ldexp(1.0, -21) + 1e-6;
          tol[base + j0] = tol[base + j1] = 1e-6 + (std::fabs(x0) + std::fabs(x1)) * angTol;
        }
    for (size_t i = 0; i < y.size(); ++i)
      compare(v, y[i], ref[i], tol[i]);
    return v;
  };
  return c;
}

} // namespace

std::vector<Case> elementwiseCases(const std::string &format) {
  std::vector<Case> cases;
  for (int64_t n : {int64_t(1), int64_t(257), int64_t(100003)})
    cases.push_back(addCase(n));
  for (int64_t n : {int64_t(63), int64_t(4864 * 3 + 5)})
    cases.push_back(swigluCase(n));
  cases.push_back(rmsNormCase(7, 576));   // SmolLM2 width, d % 256 != 0
  cases.push_back(rmsNormCase(3, 4096));
  cases.push_back(rmsNormCase(2, 5));     // d < block: most threads sum nothing
  cases.push_back(rmsNormCase(1, 896));   // Qwen2.5-0.5B width, decode (one row)
  cases.push_back(ropeCase(37, 9, 64, 64, 10000.0f, false));    // SmolLM2: llama, norm
  cases.push_back(ropeCase(37, 14, 64, 64, 1000000.0f, true));  // Qwen2.5: neox
  cases.push_back(ropeCase(5, 4, 128, 96, 10000.0f, true));     // partial rotation
  cases.push_back(ropeCase(1, 2, 128, 128, 10000.0f, false));   // decode: one token
  return cases;
}

} // namespace swz::check
