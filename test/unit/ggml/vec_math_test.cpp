// expf8 / silu8 / hsum8 (runtime/ggml/vec_math.h) against float64 references.
#include "ggml/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

using swz::ggml::expf8;
using swz::ggml::hsum8;
using swz::ggml::hsum8_hadd;
using swz::ggml::silu8;

float lane0(__m256 v) { return _mm256_cvtss_f32(v); }
float exp1(float x) { return lane0(expf8(_mm256_set1_ps(x))); }

// Distance in units in the last place between a float and the float64 value `ref`.
double ulps(float got, double ref) {
  const float r = static_cast<float>(ref);
  const double ulp = std::nextafter(std::fabs(r), std::numeric_limits<float>::infinity()) - std::fabs(r);
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

TEST(VecMath, Expf8IsWithinTwoUlpOfFloat64ExpOverTheNormalRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) worst = std::max(worst, ulps(exp1(x), std::exp(static_cast<double>(x))));
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(exp1(0.0f), 1.0f);
}

TEST(VecMath, Expf8SaturatesAndUnderflowsExactly) {
  EXPECT_EQ(exp1(-std::numeric_limits<float>::infinity()), 0.0f);  // masked attention cells
  EXPECT_EQ(exp1(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(exp1(200.0f)));
  // The |n| > 126 path: subnormal results within one subnormal step of float64.
  for (float x = -103.0f; x <= -87.5f; x += 0.25f)
    EXPECT_NEAR(exp1(x), std::exp(static_cast<double>(x)), std::numeric_limits<float>::denorm_min() * 1.01) << x;
}

TEST(VecMath, Expf8LanesAreIndependent) {
  alignas(32) float in[8] = {-3.5f, -1.0f, 0.0f, 0.5f, 1.0f, 2.0f, 10.0f, -std::numeric_limits<float>::infinity()};
  alignas(32) float out[8];
  _mm256_store_ps(out, expf8(_mm256_load_ps(in)));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], exp1(in[i])) << i;
}

TEST(VecMath, Silu8MatchesFloat64) {
  for (float x = -20.0f; x <= 20.0f; x += 0.031f) {
    const double ref = x / (1.0 + std::exp(-static_cast<double>(x)));
    const float got = lane0(silu8(_mm256_set1_ps(x)));
    EXPECT_LE(ulps(got, ref), 4.0) << x;
  }
}

TEST(VecMath, HorizontalSumsFollowTheirDocumentedOrder) {
  // Values chosen so that the two orders round differently.
  alignas(32) float v[8] = {1e8f, 1.0f, -1e8f, 1.0f, 3.0f, 0.5f, 7.0f, 0.25f};
  const __m256 x = _mm256_load_ps(v);
  const float a = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
  const float b = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
  ASSERT_NE(a, b);
  EXPECT_EQ(hsum8(x), a);
  EXPECT_EQ(hsum8_hadd(x), b);
}

}  // namespace
