// Draft pricing (engine/step_cost.h): the step-time fit recovers a known linear cost, the
// threshold is what a row costs against the pass's tokens per second, and a draft is
// taken token by token while the chance that all of it up to there is accepted beats it.
#include <gtest/gtest.h>

#include <random>

#include "engine/step_cost.h"

namespace swz::engine {
namespace {

TEST(StepCostModel, RecoversALinearCostFromDecodePasses) {
  // t = 30 ms + 8.5 ms a row (the 2-core VM, Qwen2.5-0.5B, 8 sequences decoding), with 2%
  // noise, rows 8..20 as drafts come and go.
  StepCostModel m;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> rows(8, 20);
  std::normal_distribution<double> noise(1.0, 0.02);
  for (int i = 0; i < 400; ++i) {
    const int r = rows(rng);
    m.observe(r, (0.030 + 0.0085 * r) * noise(rng));
  }
  const auto f = m.fit();
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->b, 0.0085, 0.0008);
  EXPECT_NEAR(f->a, 0.030, 0.010);
  EXPECT_NEAR(f->seconds(8), 0.098, 0.004);
}

TEST(StepCostModel, NoFitBeforeEnoughPassesOrWithoutVariedRows) {
  StepCostModel m;
  for (int i = 0; i < StepCostModel::kMinSteps - 1; ++i) m.observe(8 + (i % 3), 0.1);
  EXPECT_FALSE(m.fit().has_value()) << "fitted from fewer than kMinSteps passes";
  StepCostModel same;
  for (int i = 0; i < 100; ++i) same.observe(8, 0.1);
  EXPECT_FALSE(same.fit().has_value()) << "every pass had 8 rows: a row's cost is unknown";
}

TEST(StepCostModel, KeepsItsLastFitWhilePassesStayOneSize) {
  // Pricing keeps passes at the decode rows once drafts stop paying; the fit made before
  // must hold then, or pricing would switch itself off and on.
  StepCostModel m;
  for (int i = 0; i < 50; ++i) m.observe(8 + i % 5, 0.030 + 0.0085 * (8 + i % 5));
  const auto before = m.fit();
  ASSERT_TRUE(before.has_value());
  for (int i = 0; i < 500; ++i) m.observe(8, 0.098);
  const auto after = m.fit();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->b, before->b);
  EXPECT_EQ(after->a, before->a);
}

TEST(StepCostModel, FollowsAChangeInCost) {
  // The weight 0.98^age forgets: after 300 passes at a new cost the fit is the new one.
  StepCostModel m;
  for (int i = 0; i < 300; ++i) m.observe(1 + i % 5, 0.020 + 0.010 * (1 + i % 5));
  for (int i = 0; i < 300; ++i) m.observe(1 + i % 5, 0.040 + 0.001 * (1 + i % 5));
  const auto f = m.fit();
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->b, 0.001, 0.0005);
  EXPECT_NEAR(f->a, 0.040, 0.003);
}

TEST(DraftPricing, ThresholdIsARowsCostAgainstThePassTokensPerSecond) {
  EXPECT_EQ(DraftPricing::threshold(std::nullopt, 8, 8), 0.0) << "no fit: every draft is taken, as before";
  StepCostModel::Fit cpu{0.030, 0.0085};  // a row is most of a pass
  // 8 decode tokens in 0.098 s; one more row 0.0085 s: pays when accepted > 69% of the time.
  EXPECT_NEAR(DraftPricing::threshold(cpu, 8, 8), 0.0085 * 8 / 0.098, 1e-12);
  EXPECT_NEAR(DraftPricing::threshold(cpu, 1, 1), 0.0085 / 0.0385, 1e-12);  // one sequence: 22%
  StepCostModel::Fit gpu{0.003, 0.00001};  // weight streaming: a row is nearly free
  EXPECT_LT(DraftPricing::threshold(gpu, 8, 8), 0.03);
}

TEST(DraftPricing, AcceptanceCountsTheTokensTriedAndFollowsTheText) {
  DraftPricing::Record r;
  EXPECT_NEAR(r.acceptance(), 0.5, 1e-12);
  // A draft of 16 with 13 accepted tried 14 tokens (the 15th and 16th were never judged):
  // p = 14 / 16, not 14 / 18.
  r.verified(16, 13);
  EXPECT_NEAR(r.acceptance(), 14.0 / 16.0, 1e-12);
  // Drafts of 16 always accepted in full: nothing was rejected.
  DraftPricing::Record full;
  for (int i = 0; i < 5; ++i) full.verified(16, 16);
  EXPECT_GT(full.acceptance(), 0.97);
  // Prose that never drafts well, then text that copies: the estimate recovers within a
  // few verifications instead of being outweighed by the whole history.
  DraftPricing::Record turn;
  for (int i = 0; i < 200; ++i) turn.verified(1, 0);
  EXPECT_LT(turn.acceptance(), 0.15);
  for (int i = 0; i < 15; ++i) turn.verified(1, 1);
  EXPECT_GT(turn.acceptance(), 0.7);
}

TEST(DraftPricing, TakesTokensWhileAllOfTheDraftUpToThemIsLikelyAccepted) {
  EXPECT_EQ(DraftPricing::take(0.9, 0.0, 5), 5);   // free rows: the whole draft
  EXPECT_EQ(DraftPricing::take(0.9, 0.7, 5), 3);   // 0.9, 0.81, 0.729 > 0.7; 0.656 is not
  EXPECT_EQ(DraftPricing::take(0.5, 0.69, 5), 0);  // a new sequence at 8 rows on the CPU
  EXPECT_EQ(DraftPricing::take(0.9, 0.7, 2), 2);   // never more than the drafter proposed
  EXPECT_EQ(DraftPricing::take(1.0, 0.99, 4), 4);
}

}  // namespace
}  // namespace swz::engine
