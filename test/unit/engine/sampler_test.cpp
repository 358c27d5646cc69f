// Sampler tests: greedy ties, validation, determinism, and that the sampled frequencies
// follow the filtered, temperature-scaled softmax (computed here in double).
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

namespace {

using swz::engine::InvalidRequest;
using swz::engine::Sampler;
using swz::engine::SamplingParams;

SamplingParams params(float temp, int top_k = 0, float top_p = 1, float min_p = 0, uint64_t seed = 42) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

std::map<int, double> frequencies(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::map<int, double> f;
  for (int i = 0; i < n; ++i) f[s.sample(logits.data(), static_cast<int>(logits.size()))] += 1.0 / n;
  return f;
}

TEST(Sampler, GreedyTakesLowestIdOnTies) {
  std::vector<float> l = {1, 3, 3, 2};
  EXPECT_EQ(swz::engine::argmax(l.data(), 4), 1);
  Sampler s(params(0));
  EXPECT_EQ(s.sample(l.data(), 4), 1);
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(Sampler(params(-1)), InvalidRequest);
  EXPECT_THROW(Sampler(params(std::numeric_limits<float>::infinity())), InvalidRequest);
  EXPECT_THROW(Sampler(params(std::nanf(""))), InvalidRequest);
  EXPECT_THROW(Sampler(params(1, 0, 0.0f)), InvalidRequest);
  EXPECT_THROW(Sampler(params(1, 0, 1.5f)), InvalidRequest);
  EXPECT_THROW(Sampler(params(1, -1)), InvalidRequest);
  EXPECT_THROW(Sampler(params(1, 0, 1, 2.0f)), InvalidRequest);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> l = {0.1f, 0.5f, 0.2f, 0.9f, 0.0f};
  Sampler a(params(1.0f, 0, 1, 0, 7)), b(params(1.0f, 0, 1, 0, 7));
  for (int i = 0; i < 200; ++i) EXPECT_EQ(a.sample(l.data(), 5), b.sample(l.data(), 5));
}

TEST(Sampler, FrequenciesFollowSoftmaxWithTemperature) {
  std::vector<float> l = {1.0f, 2.0f, 0.5f, -1.0f};
  const double T = 0.7;
  double z = 0;
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] / T);
  auto f = frequencies(params(static_cast<float>(T)), l, 200000);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(f[static_cast<int>(i)], p[i] / z, 0.005) << i;
}

TEST(Sampler, TopKTopPMinPFilter) {
  std::vector<float> l = {3.0f, 2.9f, 1.0f, 0.0f, -5.0f};
  // top_k = 2: only ids 0 and 1, in proportion e^3 : e^2.9.
  auto f = frequencies(params(1.0f, 2), l, 100000);
  EXPECT_EQ(f.count(2) + f.count(3) + f.count(4), 0u);
  EXPECT_NEAR(f[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.9)), 0.006);
  // top_p = 0.5: the smallest prefix of the sorted softmax reaching 0.5 is {0, 1}
  // (p0 = 0.47 < 0.5, p0 + p1 = 0.9).
  f = frequencies(params(1.0f, 0, 0.5f), l, 20000);
  EXPECT_EQ(f.count(2) + f.count(3) + f.count(4), 0u);
  EXPECT_GT(f[1], 0.3);
  // min_p = 0.2: keep logits >= max + ln 0.2 = 1.39: ids 0 and 1 only.
  f = frequencies(params(1.0f, 0, 1, 0.2f), l, 20000);
  EXPECT_EQ(f.count(2) + f.count(3) + f.count(4), 0u);
  // top_k = 1 is greedy whatever the temperature.
  f = frequencies(params(5.0f, 1), l, 1000);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
}

// Speculative verification: greedy verify is argmax; sampled verify of any draft token
// (likely, unlikely, or filtered out by top_k) emits tokens with sample()'s distribution.
TEST(Sampler, VerifyGreedyIsArgmax) {
  std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  Sampler s(params(0));
  bool ok = false;
  EXPECT_EQ(s.verify(l.data(), 4, 1, ok), 1);
  EXPECT_TRUE(ok);
  EXPECT_EQ(s.verify(l.data(), 4, 2, ok), 1);  // tie: the lowest id, as sample()
  EXPECT_FALSE(ok);
}

TEST(Sampler, VerifyPreservesTheDistribution) {
  std::vector<float> l = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  for (int top_k : {0, 3}) {
    const std::map<int, double> want = frequencies(params(0.8f, top_k, 1, 0, 1), l, 400000);
    for (int32_t draft = 0; draft < 5; ++draft) {
      Sampler s(params(0.8f, top_k, 1, 0, 100 + draft));
      std::map<int, double> got;
      int accepted = 0;
      const int n = 200000;
      for (int i = 0; i < n; ++i) {
        bool ok = false;
        const int32_t t = s.verify(l.data(), 5, draft, ok);
        got[t] += 1.0 / n;
        accepted += ok;
        EXPECT_EQ(ok, t == draft);
      }
      // accepted with probability p(draft); emitted tokens distributed as sample()'s
      EXPECT_NEAR(accepted / static_cast<double>(n), want.count(draft) ? want.at(draft) : 0.0, 0.006) << draft;
      for (int t = 0; t < 5; ++t)
        EXPECT_NEAR(got.count(t) ? got[t] : 0.0, want.count(t) ? want.at(t) : 0.0, 0.006) << "top_k " << top_k << " draft " << draft << " token " << t;
    }
  }
}

TEST(Sampler, PresenceAndFrequencyPenaltiesFollowOpenAIsFormula) {
  // Greedy over logits {2.0, 1.5, 0.0}: without penalties always token 0.
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  SamplingParams p = params(0);
  p.frequency_penalty = 0.3f;
  Sampler s(p);
  // Token 0 after k picks: 2.0 - 0.3k; token 1 after j picks: 1.5 - 0.3j (reference, by hand).
  std::vector<int> got;
  for (int i = 0; i < 6; ++i) got.push_back(s.sample(logits.data(), 3));
  // 2.0 > 1.5 -> 0; 1.7 > 1.5 -> 0; 1.4 < 1.5 -> 1; 1.4 > 1.2 -> 0; 1.1 < 1.2 -> 1; 1.1 > 0.9 -> 0.
  EXPECT_EQ(got, (std::vector<int>{0, 0, 1, 0, 1, 0}));
  SamplingParams q = params(0);
  q.presence_penalty = 0.6f;  // one-off: 2.0 - 0.6 = 1.4 < 1.5, then both penalised: 1.4 > 0.9
  Sampler t(q);
  std::vector<int> got2;
  for (int i = 0; i < 4; ++i) got2.push_back(t.sample(logits.data(), 3));
  EXPECT_EQ(got2, (std::vector<int>{0, 1, 0, 0}));
  SamplingParams bad = params(0);
  bad.presence_penalty = 2.5f;
  EXPECT_THROW(Sampler{bad}, InvalidRequest);
}

TEST(Sampler, VerifyAppliesAndRecordsPenaltiesLikeSample) {
  // Speculative verification must return what sample() would: same penalties, and each
  // returned token counts. Greedy, frequency penalty 0.3 over {2.0, 1.5, 0.0}.
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  SamplingParams p = params(0);
  p.frequency_penalty = 0.3f;
  Sampler plain(p), spec(p);
  for (int i = 0; i < 6; ++i) {
    bool ok = false;
    const int32_t want = plain.sample(logits.data(), 3);
    EXPECT_EQ(spec.verify(logits.data(), 3, /*draft=*/0, ok), want) << i;
    EXPECT_EQ(ok, want == 0);
  }
}

TEST(Sampler, MaskForbidsTokensInSampleAndVerify) {
  // A 70-token vocabulary (two mask words); the grammar allows 3, 40 and 69 only.
  std::vector<float> logits(70);
  for (int i = 0; i < 70; ++i) logits[static_cast<size_t>(i)] = static_cast<float>(i % 7);  // 6 is the max (6, 13, ...)
  uint64_t allow[2] = {(uint64_t{1} << 3) | (uint64_t{1} << 40), uint64_t{1} << (69 - 64)};
  EXPECT_EQ(swz::engine::masked_argmax(logits.data(), 70, allow), 69);  // 69 % 7 = 6 beats 40 % 7 = 5 and 3
  Sampler greedy(params(0));
  EXPECT_EQ(greedy.sample(logits.data(), 70, allow), 69);
  bool ok = true;
  EXPECT_EQ(greedy.verify(logits.data(), 70, /*draft=*/6, ok, allow), 69);  // 6 is the unmasked argmax
  EXPECT_FALSE(ok);
  EXPECT_EQ(greedy.verify(logits.data(), 70, /*draft=*/69, ok, allow), 69);
  EXPECT_TRUE(ok);
  SamplingParams p = params(1.5f);
  p.seed = 11;
  Sampler hot(p);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 3000; ++i) ++seen[hot.sample(logits.data(), 70, allow)];
  EXPECT_EQ(seen.size(), 3u);  // only allowed tokens, each drawn
  for (int t : {3, 40, 69}) EXPECT_GT(seen[t], 0);
  for (int i = 0; i < 500; ++i) {  // a forbidden draft is never accepted
    bool acc = true;
    const int32_t t = hot.verify(logits.data(), 70, /*draft=*/13, acc, allow);
    EXPECT_FALSE(acc);
    EXPECT_TRUE(t == 3 || t == 40 || t == 69) << t;
  }
}

}  // namespace
