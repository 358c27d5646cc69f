// What is recorded when a request that ran the engine has finished: the request goes into
// the usage ledger (per API key and model) and the metrics (tokens, cost, TTFT / ITL /
// duration), and its cost comes back for the response header. Endpoints do not call this
// directly: they call GenerationHooks::finished (route_hooks.h), the one recording path,
// which fills in the caller's key and the model:
//
//   TokenClock clock(arrival);
//   GenerateResult r = engine.run(admission, timed(clock, on_token));
//   std::string cost = hooks.finished(req, "/v1/messages", r, clock);
//     // = accounting.finish({endpoint, key_id, model, prompt, cached, output, &clock}).usd()
//
// Requests rejected before the engine ran (4xx) cost nothing and are not recorded here;
// the server counts every response by status itself (Metrics::count_response).
#pragma once

#include "ledger.h"
#include "metrics.h"

#include <string>

namespace swz::server {

/// Name of the response header carrying a request's cost in USD (exact decimal). On a
/// streamed response it carries the prompt's cost only (headers leave before any token
/// is generated); the ledger has the full cost. See docs/server.md, "Cost header".
inline constexpr const char* kCostHeader = "X-Swizzle-Cost-USD";

/// One finished request, as the ledger and metrics need it.
struct FinishedRequest {
  std::string endpoint;   ///< route label, e.g. "/v1/chat/completions" (metrics only)
  std::string key_id;     ///< Caller::key_id of the request's API key
  std::string model;      ///< the served model id (what the prices file is keyed by)
  int prompt_tokens = 0;  ///< all prompt tokens, cached ones included
  int cached_tokens = 0;  ///< prompt tokens served from the prefix cache
  int output_tokens = 0;  ///< generated tokens (also those of a cancelled stream)
  const TokenClock* timing = nullptr;  ///< null: no TTFT/ITL/duration observation
};

/// Ledger + metrics behind one thread-safe call.
class Accounting {
 public:
  explicit Accounting(PriceTable prices = {}) : ledger(std::move(prices)) {}

  /// Records `r` in the ledger and the metrics; returns its cost.
  Money finish(const FinishedRequest& r) {
    TokenCounts t = counts(r.prompt_tokens, r.cached_tokens, r.output_tokens);
    Money cost = ledger.record(r.key_id, r.model, t);
    metrics.observe_generation(r.endpoint, r.model, r.prompt_tokens, r.cached_tokens, r.output_tokens, cost.usd_double(),
                               r.timing);
    return cost;
  }
  /// The cost of a prompt (no output) without recording it: the header of a stream.
  Money quote_prompt(const std::string& model, int prompt_tokens, int cached_tokens) const {
    return ledger.quote(model, counts(prompt_tokens, cached_tokens, 0));
  }

  static TokenCounts counts(int prompt_tokens, int cached_tokens, int output_tokens) {
    auto nn = [](int v) { return static_cast<uint64_t>(v > 0 ? v : 0); };
    const int cached = cached_tokens < prompt_tokens ? cached_tokens : prompt_tokens;
    return {nn(prompt_tokens - cached), nn(cached), nn(output_tokens)};
  }

  Ledger ledger;
  Metrics metrics;
};

}  // namespace swz::server
