// PromptLookup: longest-suffix matches, most recent occurrence, draft length bounds,
// the γ schedule, and that reset() forgets the previous request.
#include "engine/prompt_lookup.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace {

using swz::engine::PromptLookup;
using swz::engine::PromptLookupOptions;
using V = std::vector<int32_t>;

PromptLookupOptions opts(int nmin, int nmax, int dmax, int dinit) {
  PromptLookupOptions o;
  o.ngram_min = nmin;
  o.ngram_max = nmax;
  o.draft_max = dmax;
  o.draft_init = dinit;
  return o;
}

TEST(PromptLookup, CopiesWhatFollowedTheSuffix) {
  PromptLookup pl(opts(2, 4, 16, 8));
  const V h = {10, 11, 12, 13, 14, 15, 16, 99, 11, 12};
  pl.reset(h.data(), h.size());
  V d;
  EXPECT_EQ(pl.draft(100, d), 2);  // suffix [11, 12] occurred at 1..2
  EXPECT_EQ(d, (V{13, 14, 15, 16, 99, 11, 12}));  // up to the end of the history
  EXPECT_EQ(pl.draft(3, d), 2);
  EXPECT_EQ(d, (V{13, 14, 15}));  // max_len bounds it
}

TEST(PromptLookup, PrefersTheLongestMatchThenTheMostRecent) {
  PromptLookup pl(opts(1, 4, 16, 4));
  // [2, 3] occurs twice: at 1..2 (followed by 7, inside the 3-gram [1, 2, 3]) and at
  // 5..6 (followed by 8). The suffix [1, 2, 3] only matches the first.
  const V h = {1, 2, 3, 7, 0, 2, 3, 8, 5, 1, 2, 3};
  pl.reset(h.data(), h.size());
  V d;
  EXPECT_EQ(pl.draft(2, d), 3);
  EXPECT_EQ(d, (V{7, 0}));
  // Suffix [4, 2, 3] after pushes: only the 2-gram [2, 3] matches; its most recent
  // occurrence is the one that ends the previous history (followed by 4).
  pl.push(4);
  pl.push(2);
  pl.push(3);
  EXPECT_EQ(pl.draft(2, d), 2);
  EXPECT_EQ(d, (V{4, 2}));
}

TEST(PromptLookup, NoDraftBelowTheMinimumNgram) {
  PromptLookup pl(opts(2, 4, 16, 4));
  const V h = {5, 6, 7, 8, 6};  // only the 1-gram [6] repeats
  pl.reset(h.data(), h.size());
  V d = {1, 2};
  EXPECT_EQ(pl.draft(8, d), 0);
  EXPECT_TRUE(d.empty());
  PromptLookup one(opts(1, 4, 16, 4));
  one.reset(h.data(), h.size());
  EXPECT_EQ(one.draft(8, d), 1);
  EXPECT_EQ(d, (V{7, 8, 6}));
}

TEST(PromptLookup, ResetForgetsThePreviousRequest) {
  PromptLookup pl(opts(2, 4, 16, 4));
  const V a = {1, 2, 3, 4, 1, 2};
  pl.reset(a.data(), a.size());
  V d;
  EXPECT_EQ(pl.draft(8, d), 2);
  pl.update(4, 4);
  EXPECT_EQ(pl.draft_len(), 6);
  const V b = {9, 1, 2};  // [1, 2] was in the old history only
  pl.reset(b.data(), b.size());
  EXPECT_EQ(pl.draft(8, d), 0);
  EXPECT_EQ(pl.draft_len(), 4);
  EXPECT_EQ(pl.history(), b);
}

TEST(PromptLookup, DraftLengthFollowsAcceptance) {
  PromptLookup pl(opts(2, 4, 10, 4));
  pl.update(4, 4);
  EXPECT_EQ(pl.draft_len(), 6);
  pl.update(6, 6);
  pl.update(8, 8);
  EXPECT_EQ(pl.draft_len(), 10);  // capped at draft_max
  pl.update(10, 3);
  EXPECT_EQ(pl.draft_len(), 9);
  for (int i = 0; i < 20; ++i) pl.update(2, 0);
  EXPECT_EQ(pl.draft_len(), 1);  // floor at draft_min
  pl.update(0, 0);               // nothing drafted: no change
  EXPECT_EQ(pl.draft_len(), 1);
  const V h = {1, 2, 3, 4, 1, 2};
  pl.reset(h.data(), h.size());
  pl.update(1, 0);
  V d;
  pl.draft(8, d);
  EXPECT_EQ(d.size(), 3u);  // γ = 3 after reset (4) and one miss
}

TEST(PromptLookup, RejectsBadOptions) {
  EXPECT_THROW(PromptLookup(opts(0, 4, 8, 4)), std::invalid_argument);
  EXPECT_THROW(PromptLookup(opts(3, 2, 8, 4)), std::invalid_argument);
  EXPECT_THROW(PromptLookup(opts(1, 4, 0, 1)), std::invalid_argument);
}

}  // namespace
