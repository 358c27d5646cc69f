// Tests of ggml/quants.h and ggml/fp16.h against independent references:
//  - gguf-py's numpy (de)quantizers (PyPI `gguf`), and
//  - ggml's own C (quantize_row_*_ref, the CPU backend's from_float and vec_dot),
// through the vectors in test/data/ggml (regenerate with gen_ggml_vectors.py there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml/blocks.h"
#include "ggml/fp16.h"
#include "ggml/quants.h"
#include "test_util.h"

namespace swz::ggml {
namespace {

using test::kCols;
using test::kRows;
using test::read_bytes;
using test::read_f32;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---------------------------------------------------------------------------------------
// fp16 / bf16

TEST(Fp16, AllHalfPatternsMatchPortableConversionAndRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const float s = detail::fp16_to_fp32_soft(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(s)) << h;
      continue;
    }
    ASSERT_EQ(bits(f), bits(s)) << "half 0x" << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(f), h) << "round trip of half 0x" << std::hex << h;
    ASSERT_EQ(detail::fp32_to_fp16_soft(f), h) << "soft round trip of half 0x" << std::hex << h;
  }
}

TEST(Fp16, NarrowingRoundsToNearestEvenLikeF16C) {
  EXPECT_EQ(fp32_to_fp16(65504.f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.f), 0x7c00);  // tie to even: overflow to inf
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);  // exact tie, even stays
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, rounds up to even
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // half of the smallest subnormal: tie to 0
  EXPECT_EQ(fp32_to_fp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> ud;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = ud(rng);
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(fp32_to_fp16(f), detail::fp32_to_fp16_soft(f)) << "float bits 0x" << std::hex << u;
  }
}

TEST(Bf16, RoundsToNearestEvenAndQuietsNan) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie, even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, up to even
  uint32_t snan = 0x7f800001u;
  float f;
  std::memcpy(&f, &snan, 4);
  EXPECT_EQ(fp32_to_bf16(f), 0x7fc0);
}

// ---------------------------------------------------------------------------------------
// Dequantization vs gguf-py (bit-exact)

struct DequantCase {
  const char* name;
  Type type;
};

class DequantVsGguf : public ::testing::TestWithParam<DequantCase> {};

TEST_P(DequantVsGguf, BitExact) {
  const DequantCase c = GetParam();
  const std::vector<uint8_t> raw = read_bytes(std::string("dequant_") + c.name + ".bin");
  const std::vector<float> ref = read_f32(std::string("dequant_") + c.name + ".f32");
  const TypeInfo& ti = type_info(c.type);
  const int64_t n = static_cast<int64_t>(raw.size() / ti.type_size) * ti.block_size;
  ASSERT_EQ(static_cast<size_t>(n), ref.size());
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(c.type, raw.data(), out.data(), n);
  int mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (bits(out[i]) != bits(ref[i]) && mismatches++ < 5) {
      ADD_FAILURE() << c.name << " element " << i << ": got " << out[i] << " want " << ref[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantVsGguf,
                         ::testing::Values(DequantCase{"f16", Type::F16}, DequantCase{"bf16", Type::BF16},
                                           DequantCase{"q4_0", Type::Q4_0}, DequantCase{"q4_1", Type::Q4_1},
                                           DequantCase{"q5_0", Type::Q5_0}, DequantCase{"q5_1", Type::Q5_1},
                                           DequantCase{"q8_0", Type::Q8_0}, DequantCase{"q4_K", Type::Q4_K},
                                           DequantCase{"q5_K", Type::Q5_K}, DequantCase{"q6_K", Type::Q6_K}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------
// Quantization vs gguf-py and vs ggml's quantize_row_*_ref (bit-exact)

struct QuantCase {
  const char* name;
  Type type;
  bool in_gguf;  // gguf-py can quantize it (quant_<name>.bin exists)
};

class QuantBitExact : public ::testing::TestWithParam<QuantCase> {};

void expect_same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t row_bytes,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad_rows = 0;
  for (size_t r = 0; r * row_bytes < got.size(); ++r) {
    if (std::memcmp(got.data() + r * row_bytes, want.data() + r * row_bytes, row_bytes) != 0) {
      size_t off = r * row_bytes;
      while (got[off] == want[off]) ++off;
      ADD_FAILURE() << what << ": row " << r << " differs first at byte " << off - r * row_bytes << " (got "
                    << int(got[off]) << ", want " << int(want[off]) << ")";
      ++bad_rows;
    }
  }
  EXPECT_EQ(bad_rows, 0) << what;
}

TEST_P(QuantBitExact, MatchesReference) {
  const QuantCase c = GetParam();
  const std::vector<float> x = read_f32("quant_input.f32");
  ASSERT_EQ(x.size(), static_cast<size_t>(kRows * kCols));
  const size_t rb = row_size(c.type, kCols);
  std::vector<uint8_t> got(rb * kRows);
  for (int r = 0; r < kRows; ++r) quantize_row(c.type, x.data() + r * kCols, got.data() + r * rb, kCols);
  if (c.in_gguf) expect_same_bytes(got, read_bytes(std::string("quant_") + c.name + ".bin"), rb, "vs gguf-py");
  if (c.type != Type::F16 && c.type != Type::BF16) {
    expect_same_bytes(got, read_bytes(std::string("quant_ggml_") + c.name + ".bin"), rb, "vs ggml _ref");
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, QuantBitExact,
    ::testing::Values(QuantCase{"f16", Type::F16, true}, QuantCase{"bf16", Type::BF16, true},
                      QuantCase{"q4_0", Type::Q4_0, true}, QuantCase{"q4_1", Type::Q4_1, true},
                      QuantCase{"q5_0", Type::Q5_0, true}, QuantCase{"q5_1", Type::Q5_1, true},
                      QuantCase{"q8_0", Type::Q8_0, true}, QuantCase{"q8_1", Type::Q8_1, false},
                      QuantCase{"q4_K", Type::Q4_K, false}, QuantCase{"q5_K", Type::Q5_K, false},
                      QuantCase{"q6_K", Type::Q6_K, false}, QuantCase{"q8_K", Type::Q8_K, false}),
    [](const auto& info) { return std::string(info.param.name); });

// Activation quantization: the same bytes as llama.cpp's CPU backend from_float.
class ActivationBitExact : public ::testing::TestWithParam<QuantCase> {};

TEST_P(ActivationBitExact, MatchesCpuBackend) {
  const QuantCase c = GetParam();
  const std::vector<float> x = read_f32("quant_input.f32");
  const size_t rb = row_size(c.type, kCols);
  std::vector<uint8_t> got(rb * kRows);
  for (int r = 0; r < kRows; ++r) quantize_row_activation(c.type, x.data() + r * kCols, got.data() + r * rb, kCols);
  expect_same_bytes(got, read_bytes(std::string("act_ggml_") + c.name + ".bin"), rb, "vs ggml-cpu from_float");
}

INSTANTIATE_TEST_SUITE_P(ActTypes, ActivationBitExact,
                         ::testing::Values(QuantCase{"q8_0", Type::Q8_0, false}, QuantCase{"q8_1", Type::Q8_1, false},
                                           QuantCase{"q8_K", Type::Q8_K, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------
// Round trip: |dequant(quant(x)) - x| stays within the format's resolution.

struct RoundTripCase {
  Type type;
  double max_rel_rms;  // RMS error / RMS(x) over a N(0,1) row
};

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, ErrorWithinResolution) {
  const RoundTripCase c = GetParam();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const int64_t n = 4096;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> q(row_size(c.type, n));
  quantize_row(c.type, x.data(), q.data(), n);
  dequantize_row(c.type, q.data(), y.data(), n);
  double se = 0, sx = 0;
  for (int64_t i = 0; i < n; ++i) {
    se += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    sx += double(x[i]) * x[i];
  }
  const double rel = std::sqrt(se / sx);
  EXPECT_LE(rel, c.max_rel_rms) << type_info(c.type).name;
  EXPECT_GT(rel, 0.0) << "a lossy format reproduced x exactly: suspicious";

  // Per-block absolute bound for the simple formats: error <= one quantization step.
  const int64_t bs = type_info(c.type).block_size;
  if (bs == 32) {
    for (int64_t b = 0; b < n / bs; ++b) {
      float lo = x[b * bs], hi = x[b * bs], amax = 0;
      for (int64_t i = b * bs; i < (b + 1) * bs; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
        amax = std::max(amax, std::fabs(x[i]));
      }
      const int levels = c.type == Type::Q8_0 || c.type == Type::Q8_1 ? 254 : c.type == Type::Q5_0 || c.type == Type::Q5_1 ? 31 : 15;
      const bool asym = c.type == Type::Q4_1 || c.type == Type::Q5_1;
      const double step = asym ? (hi - lo) / levels : 2.0 * amax / levels;
      for (int64_t i = b * bs; i < (b + 1) * bs; ++i) {
        ASSERT_LE(std::fabs(double(y[i]) - x[i]), step * 1.01 + 1e-6) << type_info(c.type).name << " block " << b;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip,
                         ::testing::Values(RoundTripCase{Type::F16, 5e-4}, RoundTripCase{Type::BF16, 4e-3},
                                           RoundTripCase{Type::Q8_0, 0.01}, RoundTripCase{Type::Q8_1, 0.01},
                                           RoundTripCase{Type::Q5_0, 0.06}, RoundTripCase{Type::Q5_1, 0.05},
                                           RoundTripCase{Type::Q4_0, 0.12}, RoundTripCase{Type::Q4_1, 0.10},
                                           RoundTripCase{Type::Q4_K, 0.10}, RoundTripCase{Type::Q5_K, 0.05},
                                           RoundTripCase{Type::Q6_K, 0.025}, RoundTripCase{Type::Q8_K, 0.01}),
                         [](const auto& info) { return std::string(type_info(info.param.type).name); });

// ---------------------------------------------------------------------------------------
// vec_dot: vs llama.cpp's CPU vec_dot on the same bytes and vs a float64 reference.

struct DotCase {
  const char* name;
  Type type;
  const char* act;
};

class VecDot : public ::testing::TestWithParam<DotCase> {};

TEST_P(VecDot, MatchesLlamaCppAndFloat64) {
  const DotCase c = GetParam();
  const Type at = vec_dot_type(c.type);
  const std::vector<uint8_t> w = read_bytes(std::string("quant_ggml_") + c.name + ".bin");
  const std::vector<uint8_t> a = read_bytes(std::string("act_ggml_") + c.act + ".bin");
  const std::vector<float> ref = read_f32(std::string("vecdot_ggml_") + c.name + ".f32");
  const size_t wrb = row_size(c.type, kCols), arb = row_size(at, kCols);
  ASSERT_EQ(w.size(), wrb * kRows);
  ASSERT_EQ(a.size(), arb * kRows);
  for (int r = 0; r < kRows; ++r) {
    const test::Exact ex = test::exact_dot(c.type, kCols, w.data() + r * wrb, a.data() + r * arb);
    const double exact = ex.value, mag = ex.magnitude;
    const float got = vec_dot(c.type, kCols, w.data() + r * wrb, a.data() + r * arb);
    const float got_s = vec_dot_scalar(c.type, kCols, w.data() + r * wrb, a.data() + r * arb);
    if (std::isnan(ref[r])) {
      // Rows of magnitude 1e4 overflow Q8_1's fp16 s = d*sum(q): llama.cpp gives NaN, so must we.
      EXPECT_TRUE(std::isnan(got)) << c.name << " row " << r;
      EXPECT_TRUE(std::isnan(got_s)) << c.name << " row " << r;
      continue;
    }
    // The integer products are exact; what is left is fp32 rounding of the block scales and
    // of the sums: a few ulps of the magnitude.
    const double tol = 2e-6 * mag + 1e-30;
    EXPECT_NEAR(got, exact, tol) << c.name << " row " << r << " (avx/default path)";
    EXPECT_NEAR(got_s, exact, tol) << c.name << " row " << r << " (scalar path)";
    EXPECT_NEAR(got, ref[r], 2 * tol) << c.name << " row " << r << " vs llama.cpp vec_dot";
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, VecDot,
                         ::testing::Values(DotCase{"q4_0", Type::Q4_0, "q8_0"}, DotCase{"q4_1", Type::Q4_1, "q8_1"},
                                           DotCase{"q5_0", Type::Q5_0, "q8_0"}, DotCase{"q5_1", Type::Q5_1, "q8_1"},
                                           DotCase{"q8_0", Type::Q8_0, "q8_0"}, DotCase{"q4_K", Type::Q4_K, "q8_K"},
                                           DotCase{"q5_K", Type::Q5_K, "q8_K"}, DotCase{"q6_K", Type::Q6_K, "q8_K"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(VecDot, FloatTypesMatchFloat64) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (Type t : {Type::F32, Type::F16, Type::BF16}) {
    for (int64_t n : {1, 7, 8, 33, 576, 1000}) {
      std::vector<float> x(n), y(n), xd(n), yd(n);
      for (auto& v : x) v = nd(rng);
      for (auto& v : y) v = nd(rng);
      std::vector<uint8_t> xq(row_size(t, n)), yq(row_size(t, n));
      quantize_row(t, x.data(), xq.data(), n);
      quantize_row(vec_dot_type(t), y.data(), yq.data(), n);
      dequantize_row(t, xq.data(), xd.data(), n);
      dequantize_row(t, yq.data(), yd.data(), n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(xd[i]) * yd[i];
        mag += std::fabs(double(xd[i]) * yd[i]);
      }
      EXPECT_NEAR(vec_dot(t, n, xq.data(), yq.data()), exact, 2e-6 * mag) << type_info(t).name << " n=" << n;
      EXPECT_NEAR(vec_dot_scalar(t, n, xq.data(), yq.data()), exact, 2e-6 * mag) << type_info(t).name << " n=" << n;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Types and errors

TEST(VecDotType, PairsLikeLlamaCppCpuBackend) {
  EXPECT_EQ(vec_dot_type(Type::Q4_0), Type::Q8_0);
  EXPECT_EQ(vec_dot_type(Type::Q4_1), Type::Q8_1);
  EXPECT_EQ(vec_dot_type(Type::Q5_0), Type::Q8_0);
  EXPECT_EQ(vec_dot_type(Type::Q5_1), Type::Q8_1);
  EXPECT_EQ(vec_dot_type(Type::Q8_0), Type::Q8_0);
  EXPECT_EQ(vec_dot_type(Type::Q4_K), Type::Q8_K);
  EXPECT_EQ(vec_dot_type(Type::Q5_K), Type::Q8_K);
  EXPECT_EQ(vec_dot_type(Type::Q6_K), Type::Q8_K);
  EXPECT_EQ(vec_dot_type(Type::F16), Type::F16);
  EXPECT_EQ(vec_dot_type(Type::BF16), Type::BF16);
  EXPECT_EQ(vec_dot_type(Type::F32), Type::F32);
  EXPECT_THROW(vec_dot_type(Type::Q2_K), std::invalid_argument);
}

TEST(Errors, UnsupportedTypesAndBadLengthsThrow) {
  float f[256] = {};
  uint8_t b[512] = {};
  EXPECT_THROW(dequantize_row(Type::Q2_K, b, f, 256), std::invalid_argument);
  EXPECT_THROW(dequantize_row(Type::IQ2_XXS, b, f, 256), std::invalid_argument);
  EXPECT_THROW(quantize_row(Type::Q3_K, f, b, 256), std::invalid_argument);
  EXPECT_THROW(quantize_row(Type::Q4_0, f, b, 33), std::invalid_argument);
  EXPECT_THROW(dequantize_row(Type::Q6_K, b, f, 128), std::invalid_argument);
  EXPECT_THROW(vec_dot(Type::Q8_K, 256, b, b), std::invalid_argument);
  EXPECT_THROW(vec_dot(Type::Q4_1, 48, b, b), std::invalid_argument);
  try {
    dequantize_row(Type::Q2_K, b, f, 256);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("q2_K"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace swz::ggml
