// The decode loop with speculative decoding over a toy model: a fixed random table of
// logits indexed by the last two tokens, behind DecodeModel's forward()/truncate()
// contract (the model checks that contract on every call).
//
// Greedy: the emitted tokens equal plain decoding's for many prompts, with drafts both
// accepted and rejected; max_tokens, a full context, an end-of-generation token and a
// cancelling callback inside an accepted run end generation at exactly the token plain
// decoding ends at. Temperature > 0: the distribution of whole generated sequences matches
// the exact one (chain rule over the table), by a chi-square goodness-of-fit test, for
// plain and for speculative decoding.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using namespace swz::engine;
using V = std::vector<int32_t>;

class ToyModel final : public DecodeModel {
 public:
  ToyModel(int vocab, int n_ctx, uint64_t seed, float sharpness) : vocab_(vocab), n_ctx_(n_ctx) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, sharpness);
    table_.resize(static_cast<size_t>(vocab) * vocab * vocab);
    for (float& x : table_) x = nd(rng);
  }
  int n_past() const override { return static_cast<int>(kv_.size()); }
  void forward(const int32_t* t, int n, int n_out, std::vector<float>& logits) override {
    if (n <= 0 || n_out < 1 || n_out > n) throw std::logic_error("forward: bad sizes");
    if (n_past() + n > n_ctx_) throw std::length_error("forward: KV cache overflow");
    for (int i = 0; i < n; ++i) {
      if (t[i] < 0 || t[i] >= vocab_) throw std::out_of_range("forward: token outside the vocabulary");
      kv_.push_back(t[i]);
    }
    ++calls_;
    logits.clear();
    for (size_t p = kv_.size() - static_cast<size_t>(n_out); p < kv_.size(); ++p) {
      const float* row = row_after(p);
      logits.insert(logits.end(), row, row + vocab_);
    }
  }
  void truncate(int n) override {
    if (n < 0 || n > n_past()) throw std::logic_error("truncate: beyond the cache");
    kv_.resize(static_cast<size_t>(n));
  }
  /// Logits of the token following position p of `seq`.
  const float* row_after(const V& seq, size_t p) const {
    const int a = p >= 1 ? seq[p - 1] : 0, b = seq[p];
    return table_.data() + (static_cast<size_t>(a) * vocab_ + b) * vocab_;
  }
  const float* row_after(size_t p) const { return row_after(kv_, p); }
  const V& kv() const { return kv_; }
  int calls() const { return calls_; }
  int vocab() const { return vocab_; }

 private:
  int vocab_, n_ctx_;
  std::vector<float> table_;
  V kv_;
  int calls_ = 0;
};

struct Outcome {
  V out;
  DecodeStats st;
  V kv;
};

Outcome run(ToyModel& m, const V& prompt, bool spec, int max_tokens, const SamplingParams& sp, int n_ctx,
        int eog = -1, int cancel_after = -1) {
  m.truncate(0);
  std::vector<float> logits;
  m.forward(prompt.data(), static_cast<int>(prompt.size()), 1, logits);
  Sampler s(sp);
  DecodeOptions o;
  o.max_tokens = max_tokens;
  o.n_ctx = n_ctx;
  o.n_vocab = m.vocab();
  o.speculative = spec;
  o.lookup.ngram_min = 1;
  Outcome r;
  r.st = decode(m, s, logits, prompt, o, [&](int32_t t) { return t == eog; },
                [&](int32_t t, const float* row) {
                  // The row a token was chosen from is its position's logits.
                  V seq = prompt;
                  seq.insert(seq.end(), r.out.begin(), r.out.end());
                  EXPECT_TRUE(std::equal(row, row + m.vocab(), m.row_after(seq, seq.size() - 1)));
                  r.out.push_back(t);
                  return cancel_after < 0 || static_cast<int>(r.out.size()) < cancel_after;
                });
  r.kv = m.kv();
  return r;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

V cyclic_prompt(std::mt19937_64& rng, int vocab, int len) {
  // A random motif repeated with a little noise: plenty of n-gram matches, some wrong.
  std::uniform_int_distribution<int> tok(0, vocab - 1), mlen(2, 7), noise(0, 9);
  V motif(static_cast<size_t>(mlen(rng)));
  for (int32_t& t : motif) t = tok(rng);
  V p;
  while (static_cast<int>(p.size()) < len) p.push_back(noise(rng) == 0 ? tok(rng) : motif[p.size() % motif.size()]);
  return p;
}

// The KV cache after decoding holds what it holds after plain decoding, however
// generation ended: the prompt and the emitted tokens, but the last emitted one unless an
// end-of-generation token was sampled after it.
void expect_cache_invariant(const Outcome& r, const V& prompt) {
  V want = prompt;
  want.insert(want.end(), r.out.begin(), r.out.end());
  if (r.st.finish != FinishReason::Stop && !r.out.empty()) want.pop_back();
  EXPECT_EQ(r.kv, want);
}

TEST(SpeculativeDecode, GreedyMatchesPlainDecoding) {
  std::mt19937_64 rng(1);
  int drafted = 0, accepted = 0, fewer_passes = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int vocab = 3 + trial % 6;
    ToyModel m(vocab, 512, 1000 + trial, 2.0f);
    const V prompt = cyclic_prompt(rng, vocab, 10 + trial % 40);
    const Outcome plain = run(m, prompt, false, 60, greedy(), 512);
    const Outcome spec = run(m, prompt, true, 60, greedy(), 512);
    ASSERT_EQ(spec.out, plain.out) << "trial " << trial;
    EXPECT_EQ(spec.st.finish, plain.st.finish);
    EXPECT_EQ(spec.st.completion_tokens, static_cast<int>(spec.out.size()));
    EXPECT_LE(spec.st.accepted, spec.st.drafted);
    expect_cache_invariant(spec, prompt);
    expect_cache_invariant(plain, prompt);
    drafted += spec.st.drafted;
    accepted += spec.st.accepted;
    fewer_passes += spec.st.forward_passes < plain.st.forward_passes;
  }
  // Both paths were exercised: many drafts accepted, many rejected.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(drafted - accepted, 300);
  EXPECT_GT(fewer_passes, 200);
}

TEST(SpeculativeDecode, MaxTokensContextEogAndCancelInsideAcceptedRuns) {
  std::mt19937_64 rng(7);
  int checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int vocab = 4 + trial % 3;
    ToyModel m(vocab, 4096, 50 + trial, 2.0f);
    const V prompt = cyclic_prompt(rng, vocab, 24);
    const Outcome full = run(m, prompt, false, 80, greedy(), 4096);
    for (int limit : {1, 2, 3, 5, 8, 13, 21, 34}) {
      const Outcome r = run(m, prompt, true, limit, greedy(), 4096);
      ASSERT_LE(static_cast<int>(r.out.size()), limit);
      EXPECT_EQ(r.out, V(full.out.begin(), full.out.begin() + std::min<size_t>(limit, full.out.size())));
      EXPECT_EQ(r.st.finish, FinishReason::Length);
      expect_cache_invariant(r, prompt);
    }
    // Context: prompt + generated may not exceed n_ctx (the model throws if it would).
    for (int extra : {1, 2, 7, 19}) {
      const int n_ctx = static_cast<int>(prompt.size()) + extra;
      const Outcome plain = run(m, prompt, false, 80, greedy(), n_ctx);
      const Outcome spec = run(m, prompt, true, 80, greedy(), n_ctx);
      EXPECT_EQ(spec.out, plain.out);
      EXPECT_EQ(spec.st.finish, FinishReason::Length);
      EXPECT_LE(static_cast<int>(spec.kv.size()), n_ctx);
    }
    // An end-of-generation token: the first occurrence of the 6th generated token's id.
    const int eog = full.out[5];
    const Outcome pe = run(m, prompt, false, 80, greedy(), 4096, eog);
    const Outcome se = run(m, prompt, true, 80, greedy(), 4096, eog);
    EXPECT_EQ(se.out, pe.out);
    EXPECT_EQ(se.st.finish, FinishReason::Stop);
    EXPECT_EQ(pe.st.finish, FinishReason::Stop);
    // The callback cancels after n tokens: exactly n emitted, wherever a draft run ends.
    for (int n : {1, 4, 9, 17, 30}) {
      const Outcome c = run(m, prompt, true, 80, greedy(), 4096, -1, n);
      EXPECT_EQ(c.out, V(full.out.begin(), full.out.begin() + n));
      EXPECT_EQ(c.st.finish, FinishReason::Cancelled);
      expect_cache_invariant(c, prompt);
      checked += c.st.accepted > 0;
    }
  }
  EXPECT_GT(checked, 100);  // cancellations did land inside accepted runs
}

// Exact probability of each generated sequence of length L (chain rule over the table
// with the sampler's temperature and top_k), vs observed counts: chi-square statistic.
double chi_square(ToyModel& m, const V& prompt, int L, const SamplingParams& base, bool spec, int runs, int& drafted,
                  int& rejected, int& df) {
  std::map<V, int> counts;
  drafted = rejected = 0;
  for (int i = 0; i < runs; ++i) {
    SamplingParams sp = base;
    sp.seed = 100000u * spec + i;
    const Outcome r = run(m, prompt, spec, L, sp, 4096);
    counts[r.out]++;
    drafted += r.st.drafted;
    rejected += r.st.drafted - r.st.accepted;
  }
  const int v = m.vocab();
  double chi = 0, rest_expected = 0;
  int rest_observed = 0;
  df = 0;
  V seq(L, 0);
  for (;;) {
    V full = prompt;
    double p = 1;
    for (int k = 0; k < L; ++k) {
      const float* row = m.row_after(full, full.size() - 1);
      std::vector<std::pair<float, int>> c;
      for (int t = 0; t < v; ++t) c.push_back({row[t], t});
      std::sort(c.begin(), c.end(), [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      if (base.top_k > 0) c.resize(std::min<size_t>(c.size(), base.top_k));
      double z = 0, pt = 0;
      for (auto& [l, t] : c) {
        const double e = std::exp((l - c[0].first) / base.temperature);
        z += e;
        if (t == seq[k]) pt = e;
      }
      p *= pt / z;
      full.push_back(seq[k]);
    }
    const double e = p * runs;
    const int o = counts.count(seq) ? counts[seq] : 0;
    if (e >= 5) {
      chi += (o - e) * (o - e) / e;
      ++df;
    } else {
      rest_expected += e;
      rest_observed += o;
    }
    int k = L - 1;
    while (k >= 0 && ++seq[k] == v) seq[k--] = 0;
    if (k < 0) break;
  }
  if (rest_expected > 0) chi += (rest_observed - rest_expected) * (rest_observed - rest_expected) / rest_expected;
  return chi;  // df cells (+1 pooled) - 1 degrees of freedom
}

// Upper 1e-4 quantile of chi-square with k degrees of freedom (Wilson-Hilferty).
double chi2_crit(int k) {
  const double z = 3.719, a = 2.0 / (9.0 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

TEST(SpeculativeDecode, SampledSequencesFollowTheModelDistribution) {
  // A cyclic prompt makes the drafter propose most of the time; a flat table
  // (sharpness 1) makes both acceptance and rejection common.
  for (int top_k : {0, 3}) {
    ToyModel m(4, 4096, 99, 1.0f);
    const V prompt = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1};
    SamplingParams sp;
    sp.temperature = 0.9f;
    sp.top_k = top_k;
    int drafted = 0, rejected = 0, df = 0;
    const double chi_spec = chi_square(m, prompt, 4, sp, true, 30000, drafted, rejected, df);
    EXPECT_GT(drafted, 30000);
    EXPECT_GT(rejected, 10000);
    EXPECT_GT(drafted - rejected, 10000);
    EXPECT_LT(chi_spec, chi2_crit(df)) << "top_k " << top_k << ", df " << df;
    int d2 = 0, r2 = 0;
    const double chi_plain = chi_square(m, prompt, 4, sp, false, 30000, d2, r2, df);
    EXPECT_EQ(d2, 0);
    EXPECT_LT(chi_plain, chi2_crit(df)) << "top_k " << top_k;
  }
}

}  // namespace
