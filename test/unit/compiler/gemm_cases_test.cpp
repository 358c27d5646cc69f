// Tests of the prefill-GEMM numeric cases (test/gpu/cases_gemm.cpp) on the CPU,
// with no GPU: each case's float64 check must accept what an independent correct
// implementation produces (runtime/ggml's dequantize_row for the dequant kernels, a
// sequential f32 GEMM for the GEMMs; the tolerances must hold for them) and must
// reject an output with one wrong element or with elements left unwritten.
#include "cases.h"

#include "ggml/quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

namespace {

using swz::check::Arg;
using swz::check::Case;
using swz::check::Verdict;
using Outputs = std::vector<std::vector<uint8_t>>;

uint16_t toF16(float f) {
  _Float16 h = _Float16(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float fromF16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return float(h);
}

Outputs initial(const Case &c) {
  Outputs out;
  for (const auto &b : c.buffers)
    out.push_back(b.bytes);
  return out;
}

const std::map<std::string, swz::ggml::Type> kDequantTypes = {
    {"dequant_q4_0_f16", swz::ggml::Type::Q4_0}, {"dequant_q4_1_f16", swz::ggml::Type::Q4_1},
    {"dequant_q8_0_f16", swz::ggml::Type::Q8_0}, {"dequant_q4_k_f16", swz::ggml::Type::Q4_K},
    {"dequant_q6_k_f16", swz::ggml::Type::Q6_K},
};

/// What a correct dequant kernel writes: ggml's f32 dequantization rounded to f16.
Outputs dequantOnCpu(const Case &c) {
  Outputs out = initial(c);
  const int64_t N = c.args[2].i32, K = c.args[3].i32;
  const auto type = kDequantTypes.at(c.entry);
  const size_t rowBytes = c.buffers[0].bytes.size() / size_t(N);
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    swz::ggml::dequantize_row(type, c.buffers[0].bytes.data() + n * rowBytes, row.data(), K);
    for (int64_t k = 0; k < K; ++k) {
      uint16_t h = toF16(row[size_t(k)]);
      std::memcpy(out[1].data() + 2 * (n * K + k), &h, 2);
    }
  }
  return out;
}

/// What a correct GEMM writes, to f32 rounding: y = x·Wᵀ (+ bias), summed in f32 in order.
Outputs gemmOnCpu(const Case &c) {
  Outputs out = initial(c);
  const bool portable = c.entry == "gemm_f32_f16w";
  const int64_t T = portable ? c.args[4].i32 : c.buffers[0].sizes[0];
  const int64_t N = portable ? c.args[5].i32 : c.buffers[2].sizes[1];
  const int64_t K = portable ? c.args[6].i32 : c.buffers[0].sizes[1];
  // gemm_f16's flags: 1 bias, 2 the residual, added in place (y holds it on entry).
  const int32_t flags = c.args[portable ? 7 : 5].i32;
  const bool bias = (flags & 1) != 0, res = !portable && (flags & 2) != 0;
  auto x = [&](int64_t i) {
    if (portable) {
      float v;
      std::memcpy(&v, c.buffers[0].bytes.data() + 4 * i, 4);
      return v;
    }
    uint16_t h;
    std::memcpy(&h, c.buffers[0].bytes.data() + 2 * i, 2);
    return fromF16(h);
  };
  auto w = [&](int64_t i) {
    uint16_t h;
    std::memcpy(&h, c.buffers[1].bytes.data() + 2 * i, 2);
    return fromF16(h);
  };
  auto biasF = swz::check::asVector<float>(c.buffers[3].bytes);
  std::vector<float> y = swz::check::asVector<float>(c.buffers[2].bytes);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      float s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += x(t * K + k) * w(n * K + k);
      float &out = y[size_t(t * N + n)];
      out = (bias ? s + biasF[size_t(n)] : s) + (res ? out : 0.f);
    }
  std::memcpy(out[2].data(), y.data(), y.size() * 4);
  return out;
}

TEST(GemmCases, CoverEveryKernelAndShape) {
  std::map<std::string, int> ptx, spv;
  for (const Case &c : swz::check::gemmCases("ptx"))
    ++ptx[c.entry];
  for (const Case &c : swz::check::gemmCases("spv"))
    ++spv[c.entry];
  for (const auto &[entry, type] : kDequantTypes) {
    EXPECT_GE(ptx[entry], 2) << entry;
    EXPECT_GE(spv[entry], 2) << entry;
  }
  EXPECT_GE(ptx["convert_f32_f16"], 1);
  EXPECT_GE(ptx["gemm_f16"], 6);
  EXPECT_EQ(ptx.count("gemm_f32_f16w"), 0u);  // PTX has the tensor-core kernel
  EXPECT_GE(spv["gemm_f32_f16w"], 5);
  EXPECT_EQ(spv.count("gemm_f16"), 0u);  // mma.sync does not exist on SPIR-V
  for (const Case &c : swz::check::gemmCases("ptx")) {
    EXPECT_GT(c.bytesMoved, 0) << c.entry << " " << c.label;
    EXPECT_FALSE(c.label.empty());
  }
}

TEST(GemmCases, DequantChecksAcceptGgmlAndRejectErrors) {
  for (const Case &c : swz::check::gemmCases("spv")) {
    if (!kDequantTypes.count(c.entry))
      continue;
    SCOPED_TRACE(c.entry + " " + c.label);
    Outputs good = dequantOnCpu(c);
    Verdict v = c.check(good);
    EXPECT_EQ(v.bad, 0) << "max err " << v.maxErr << " (" << v.note << ")";
    EXPECT_EQ(v.checked, int64_t(good[1].size() / 2));
    // One element off by 1% of its value (or 1e-3 when it is 0): rejected.
    Outputs bad = good;
    const size_t i = good[1].size() / 2 / 3;
    uint16_t h;
    std::memcpy(&h, bad[1].data() + 2 * i, 2);
    float f = fromF16(h);
    h = toF16(f == 0 ? 1e-3f : f * 1.01f);
    std::memcpy(bad[1].data() + 2 * i, &h, 2);
    EXPECT_EQ(c.check(bad).bad, 1);
    // Nothing written (the NaN sentinel): every element rejected.
    EXPECT_EQ(c.check(initial(c)).bad, v.checked);
  }
}

TEST(GemmCases, GemmChecksAcceptF32AccumulationAndRejectErrors) {
  for (const char *format : {"ptx", "spv"})
    for (const Case &c : swz::check::gemmCases(format)) {
      if (c.entry != "gemm_f16" && c.entry != "gemm_f32_f16w")
        continue;
      if (c.flops > 2.0 * 128 * 1536 * 1536)  // keep the CPU work of this test small
        continue;
      SCOPED_TRACE(c.entry + " " + c.label);
      Outputs good = gemmOnCpu(c);
      Verdict v = c.check(good);
      EXPECT_EQ(v.bad, 0) << "max err " << v.maxErr << " (" << v.note << ")";
      EXPECT_GT(v.checked, 0);
      // A swapped pair of outputs in the last row (an edge error) is rejected.
      Outputs bad = good;
      auto y = swz::check::asVector<float>(bad[2]);
      std::swap(y[y.size() - 1], y[y.size() - 2]);
      std::memcpy(bad[2].data(), y.data(), y.size() * 4);
      EXPECT_GE(c.check(bad).bad, 1);
      const bool res = c.entry == "gemm_f16" && (c.args[5].i32 & 2) != 0;
      if (!res) {
        // Nothing written (the NaN sentinel): every element rejected.
        EXPECT_EQ(c.check(initial(c)).bad, v.checked);
        continue;
      }
      // With the residual in place, y holds it on entry: nothing written, or the residual
      // not added, leaves each y off by the product or by the residual (uniform in [-1, 1),
      // the bound 0.01-0.07 at these K): rejected at 90% of the elements at least.
      EXPECT_GT(double(c.check(initial(c)).bad), 0.9 * double(v.checked));
      Case noRes = c;
      noRes.args[5].i32 &= ~2;
      EXPECT_GT(double(c.check(gemmOnCpu(noRes)).bad), 0.9 * double(v.checked));
    }
}

} // namespace
