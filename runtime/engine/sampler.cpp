#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace swz::engine {

int32_t argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int32_t masked_argmax(const float* logits, int n, const uint64_t* allow) {
  int32_t best = -1;
  const int words = (n + 63) / 64;
  for (int w = 0; w < words; ++w) {
    uint64_t m = allow[w];
    while (m) {
      const int i = w * 64 + std::countr_zero(m);
      m &= m - 1;
      if (i >= n) break;
      if (best < 0 || logits[i] > logits[best]) best = i;
    }
  }
  return best;
}

const float* Sampler::masked(const float* logits, int n, const uint64_t* allow) {
  if (!allow) return logits;
  masked_.resize(static_cast<size_t>(n));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int w = 0; w * 64 < n; ++w) {
    const uint64_t m = allow[w];
    const int end = std::min(n, w * 64 + 64);
    if (m == ~uint64_t{0}) {
      std::copy(logits + w * 64, logits + end, masked_.begin() + w * 64);
    } else if (m == 0) {
      std::fill(masked_.begin() + w * 64, masked_.begin() + end, kNegInf);
    } else {
      for (int i = w * 64; i < end; ++i) masked_[static_cast<size_t>(i)] = (m >> (i & 63)) & 1 ? logits[i] : kNegInf;
    }
  }
  return masked_.data();
}

Sampler::Sampler(const SamplingParams& p) : p_(p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    throw InvalidRequest("temperature must be a finite number >= 0, got " + std::to_string(p.temperature));
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1)
    throw InvalidRequest("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1)
    throw InvalidRequest("min_p must be in [0, 1], got " + std::to_string(p.min_p));
  if (p.top_k < 0) throw InvalidRequest("top_k must be >= 0, got " + std::to_string(p.top_k));
  for (float pen : {p.presence_penalty, p.frequency_penalty})
    if (!std::isfinite(pen) || pen < -2 || pen > 2)
      throw InvalidRequest("presence/frequency penalties must be in [-2, 2], got " + std::to_string(pen));
  rng_.seed(p.seed ? *p.seed : std::random_device{}());
}

const float* Sampler::penalized(const float* logits, int n) {
  if ((p_.presence_penalty == 0.0f && p_.frequency_penalty == 0.0f) || counts_.empty()) return logits;
  penalized_.assign(logits, logits + n);
  for (const auto& [tok, c] : counts_)
    if (tok >= 0 && tok < n) penalized_[tok] -= c * p_.frequency_penalty + p_.presence_penalty;
  return penalized_.data();
}

void Sampler::count(int32_t tok) {
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) ++counts_[tok];
}

std::vector<double>& Sampler::distribution(const float* logits, int n) {
  cand_.resize(n);
  for (int i = 0; i < n; ++i) cand_[i] = {logits[i], i};
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < keep) {
    keep = p_.top_k;
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), by_logit);
    cand_.resize(keep);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Softmax over the survivors (before temperature, as llama.cpp's top_p/min_p see it).
  auto probs = [&]() {
    probs_.resize(cand_.size());
    double mx = cand_[0].first, sum = 0;
    for (size_t i = 0; i < cand_.size(); ++i) sum += probs_[i] = std::exp(cand_[i].first - mx);
    for (double& x : probs_) x /= sum;
  };
  if (p_.top_p < 1.0f) {
    probs();
    double cum = 0;
    size_t k = 0;
    while (k < probs_.size()) {
      cum += probs_[k++];
      if (cum >= p_.top_p) break;
    }
    cand_.resize(std::max<size_t>(k, 1));
  }
  if (p_.min_p > 0.0f) {
    const float thresh = cand_[0].first + std::log(p_.min_p);
    size_t k = 1;
    while (k < cand_.size() && cand_[k].first >= thresh) ++k;
    cand_.resize(k);
  }
  for (auto& c : cand_) c.first /= p_.temperature;
  probs();
  return probs_;
}

int32_t Sampler::sample(const float* logits, int n, const uint64_t* allow) {
  logits = penalized(logits, n);
  int32_t tok;
  if (p_.temperature <= 0) {
    tok = allow ? masked_argmax(logits, n, allow) : argmax(logits, n);
  } else {
    const std::vector<double>& pr = distribution(masked(logits, n, allow), n);
    std::discrete_distribution<size_t> dist(pr.begin(), pr.end());
    tok = cand_[dist(rng_)].second;
  }
  count(tok);
  return tok;
}

int32_t Sampler::verify(const float* logits, int n, int32_t draft, bool& accepted, const uint64_t* allow) {
  const float* l = penalized(logits, n);
  int32_t tok;
  if (allow && p_.temperature <= 0) {
    tok = masked_argmax(l, n, allow);
    accepted = tok == draft;
  } else {
    tok = verify_draw(masked(l, n, allow), n, draft, accepted);
  }
  count(tok);
  return tok;
}

int32_t Sampler::verify_draw(const float* logits, int n, int32_t draft, bool& accepted) {
  if (p_.temperature <= 0) {
    const int32_t t = argmax(logits, n);
    accepted = t == draft;
    return t;
  }
  std::vector<double>& pr = distribution(logits, n);
  size_t at = pr.size();
  for (size_t i = 0; i < cand_.size(); ++i)
    if (cand_[i].second == draft) at = i;
  const double p_draft = at < pr.size() ? pr[at] : 0.0;
  // Accept with probability p(draft): u < p, u uniform in [0, 1).
  if (p_draft > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p_draft) {
    accepted = true;
    return draft;
  }
  accepted = false;
  if (at < pr.size()) pr[at] = 0.0;  // the remainder, renormalised by discrete_distribution
  if (std::none_of(pr.begin(), pr.end(), [](double x) { return x > 0; })) {  // p(draft) was 1 in all but rounding
    accepted = true;
    return draft;
  }
  std::discrete_distribution<size_t> dist(pr.begin(), pr.end());
  return cand_[dist(rng_)].second;
}

}  // namespace swz::engine
