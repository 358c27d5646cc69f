#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace swz::engine {

TokenLogprobs token_logprobs(const float* logits, int n, int32_t token, int top_n) {
  top_n = std::clamp(top_n, 0, n);
  double mx = logits[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_z = mx + std::log(sum);  // log of the partition function

  // The top_n largest logits, kept sorted (descending, ties to the lower id): a row
  // enters only when it beats the current last entry, so the common case is one compare.
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(top_n) + 1);
  auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (top_n > 0) {
    for (int32_t i = 0; i < n; ++i) {
      if (static_cast<int>(best.size()) == top_n && !before(i, best.back())) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), i, before), i);
      if (static_cast<int>(best.size()) > top_n) best.pop_back();
    }
  }
  TokenLogprobs out;
  out.token = token;
  out.logprob = static_cast<double>(logits[token]) - log_z;
  out.top.reserve(best.size());
  for (int32_t t : best) out.top.push_back({t, static_cast<double>(logits[t]) - log_z});
  return out;
}

}  // namespace swz::engine
