// The float64 reference behind the GEMV / get_rows GPU cases (test/gpu/cases_gemv.cpp)
// against runtime/ggml, our CPU implementation of the same GGUF formats (itself tested
// against llama.cpp): dequantizing the same blocks must agree to f32 rounding, on rows
// produced by ggml's reference quantizers and on the random blocks the cases use.
#include "test/gpu/cases.h"
#include "test/gpu/cases_gemv.h"

#include "ggml/fp16.h"
#include "ggml/ggml_types.h"
#include "ggml/quants.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using namespace swz::check;

swz::ggml::Type ggmlType(const std::string &t) {
  using swz::ggml::Type;
  if (t == "q4_0") return Type::Q4_0;
  if (t == "q4_1") return Type::Q4_1;
  if (t == "q5_0") return Type::Q5_0;
  if (t == "q8_0") return Type::Q8_0;
  if (t == "q4_k") return Type::Q4_K;
  if (t == "q6_k") return Type::Q6_K;
  return Type::F16;
}

// ggml dequantizes in f32 (at most two roundings of terms bounded by mag), we in double.
void expectRowsAgree(const std::string &t, const std::vector<uint8_t> &bytes, int64_t rows,
                     int64_t k) {
  const int64_t rowBytes = k / gemv::blockElements(t) * gemv::blockBytes(t);
  std::vector<float> ours32(static_cast<size_t>(k));
  std::vector<double> ref(static_cast<size_t>(k)), mag(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t *row = bytes.data() + r * rowBytes;
    swz::ggml::dequantize_row(ggmlType(t), row, ours32.data(), k);
    gemv::dequantRow(t, row, k, ref.data(), mag.data());
    for (int64_t i = 0; i < k; ++i) {
      ASSERT_TRUE(std::isfinite(ref[i])) << t << " row " << r << " element " << i;
      ASSERT_LE(std::fabs(double(ours32[i]) - ref[i]), std::ldexp(mag[i], -22))
          << t << " row " << r << " element " << i << ": ggml " << ours32[i] << ", reference "
          << ref[i];
    }
  }
}

TEST(GemvReference, HalfConversionRoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (((h >> 10) & 31) == 31)
      continue;  // inf / NaN
    const double d = gemv::halfToDouble(uint16_t(h));
    EXPECT_EQ(d, double(swz::ggml::fp16_to_fp32(uint16_t(h)))) << h;
    EXPECT_EQ(gemv::doubleToHalf(d), h) << h;
  }
  // Rounding: halfway between 1 and 1 + 2^-10 goes to even (1); above it, up.
  EXPECT_EQ(gemv::doubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3C00);
  EXPECT_EQ(gemv::doubleToHalf(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(gemv::doubleToHalf(1e6), 0x7C00);
}

TEST(GemvReference, MatchesGgmlOnQuantizedRows) {
  Rng rng{42};
  for (const std::string &t : gemv::weightTypes()) {
    const int64_t k = gemv::blockElements(t) == 256 ? 1024 : 576, rows = 6;
    std::vector<float> x(static_cast<size_t>(rows * k));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(rng.next() * (1.0 + double(i % 7)));
    const int64_t rowBytes = k / gemv::blockElements(t) * gemv::blockBytes(t);
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * rowBytes));
    for (int64_t r = 0; r < rows; ++r)
      swz::ggml::quantize_row(ggmlType(t), x.data() + r * k, bytes.data() + r * rowBytes, k);
    SCOPED_TRACE(t);
    expectRowsAgree(t, bytes, rows, k);
  }
}

TEST(GemvReference, MatchesGgmlOnTheCasesRandomBlocks) {
  for (const std::string &t : gemv::weightTypes()) {
    const int64_t k = gemv::blockElements(t) == 256 ? 1536 : 1504, rows = 9;
    SCOPED_TRACE(t);
    expectRowsAgree(t, gemv::randomWeights(t, rows, k, 7), rows, k);
  }
}

TEST(GemvReference, CasesCoverEveryWeightTypeAndArgmax) {
  std::vector<Case> cases = gemvCases("spv");
  for (const std::string &t : gemv::weightTypes()) {
    int matmul = 0, getRows = 0;
    for (const Case &c : cases) {
      matmul += c.entry == "matmul_" + t;
      getRows += c.entry == "get_rows_" + t;
    }
    EXPECT_GE(matmul, 3) << t;
    EXPECT_GE(getRows, 1) << t;
  }
  int argmax = 0;
  for (const Case &c : cases)
    argmax += c.entry == "argmax_f32";
  EXPECT_GE(argmax, 2);
}

TEST(GemvReference, ChecksRejectUntouchedOutputs) {
  // Each case's check must fail on untouched outputs (the kernel did nothing).
  for (Case &c : gemvCases("ptx")) {
    std::vector<std::vector<uint8_t>> out;
    for (const Buffer &b : c.buffers)
      out.push_back(b.bytes);
    Verdict v = c.check(out);
    EXPECT_GT(v.bad, 0) << c.entry << " " << c.label;
    EXPECT_FALSE(v.note.empty());
  }
}

} // namespace
