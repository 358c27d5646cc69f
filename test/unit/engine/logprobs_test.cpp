// token_logprobs (engine/logprobs.h): log-softmax and top-k of a logits row against a
// float64 reference computed here independently (log-sum-exp over a sorted copy).
#include "engine/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace {

using swz::engine::token_logprobs;
using swz::engine::TokenLogprobs;

/// log p_i in float64: l_i - logsumexp(l), the sum taken over ascending terms.
std::vector<double> reference_log_softmax(const std::vector<float>& l) {
  std::vector<double> x(l.begin(), l.end());
  const double mx = *std::max_element(x.begin(), x.end());
  std::vector<double> e;
  for (double v : x) e.push_back(std::exp(v - mx));
  std::sort(e.begin(), e.end());
  const double lse = mx + std::log(std::accumulate(e.begin(), e.end(), 0.0));
  for (double& v : x) v -= lse;
  return x;
}

TEST(TokenLogprobs, MatchesFloat64ReferenceOnAVocabSizedRow) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  const int n = 49152;  // SmolLM2's vocabulary
  std::vector<float> l(n);
  for (float& v : l) v = dist(rng);
  const std::vector<double> ref = reference_log_softmax(l);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  for (int32_t tok : {0, 123, n - 1, order[0], order[5000]}) {
    const TokenLogprobs r = token_logprobs(l.data(), n, tok, 20);
    EXPECT_EQ(r.token, tok);
    EXPECT_NEAR(r.logprob, ref[tok], 1e-11) << tok;
    ASSERT_EQ(r.top.size(), 20u);
    for (size_t k = 0; k < r.top.size(); ++k) {
      EXPECT_EQ(r.top[k].token, order[k]) << k;
      EXPECT_NEAR(r.top[k].logprob, ref[order[k]], 1e-11) << k;
    }
  }
  // A distribution: the probabilities of a whole (smaller) row sum to 1.
  const int m = 1000;
  double total = 0;
  for (int i = 0; i < m; ++i) total += std::exp(token_logprobs(l.data(), m, i, 0).logprob);
  EXPECT_NEAR(total, 1.0, 1e-12);
}

TEST(TokenLogprobs, TiesGoToTheLowerIdAndTopIsClamped) {
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f};
  const TokenLogprobs r = token_logprobs(l.data(), 4, 3, 10);
  ASSERT_EQ(r.top.size(), 4u);  // clamped to the vocabulary
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_EQ(r.top[1].token, 2);
  EXPECT_EQ(r.top[2].token, 3);
  EXPECT_EQ(r.top[3].token, 0);
  EXPECT_DOUBLE_EQ(r.top[0].logprob, r.top[1].logprob);
  EXPECT_DOUBLE_EQ(r.logprob, r.top[2].logprob);
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(r.logprob, 2.0 - z, 1e-15);
  EXPECT_TRUE(token_logprobs(l.data(), 4, 0, 0).top.empty());
}

TEST(TokenLogprobs, LargeLogitsDoNotOverflow) {
  const std::vector<float> l = {1000.0f, 999.0f, -1000.0f};
  const TokenLogprobs r = token_logprobs(l.data(), 3, 1, 1);
  EXPECT_NEAR(r.logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(r.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-12);
  EXPECT_TRUE(std::isfinite(token_logprobs(l.data(), 3, 2, 0).logprob));
}

}  // namespace
