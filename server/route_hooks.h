// What the server core (server.cpp) does around a generation, the same for every endpoint
// (OpenAI chat in server.cpp, Anthropic /v1/messages, OpenAI /v1/completions in their own
// files): the client-disconnect check during prefill (Request::gone, set by the HTTP layer's
// outstanding read on the socket; http_server.h), the usage ledger and metrics (with
// TTFT / ITL / duration from the request's TokenClock), and the response headers.
//
//   TokenClock clock(arrival);
//   GenerateResult r = engine.run(admission, timed(clock, on_token));    // metrics.h
//   std::string cost = hooks.finished(req, "/v1/messages", r, clock);   // ledger + metrics
//   set_generation_headers(res, r, cost);                               // non-streamed answers
//   if (hooks.receipts) ... seal_response_body(*hooks.receipts, receipt_facts(...), body)
#pragma once

#include "accounting.h"
#include "engine/engine.h"
#include "metrics.h"
#include "receipt.h"
#include "server.h"

#include "http.h"

#include <functional>
#include <memory>
#include <string>

namespace swz::server {

struct GenerationHooks {
  /// First thing a generation request does, before parsing: counts it as running (the
  /// server's shutdown waits for it, or cuts it) until the returned token is destroyed;
  /// a stream keeps the token in its provider, any other answer in http::Response::hold
  /// (released once the answer is written). Null once the server is shutting down: answer
  /// shutting_down_error() (503) instead.
  std::function<std::shared_ptr<void>()> enter;
  /// After admission, before run(): installs the engine's cancel check (the client closed
  /// its connection: Request::gone; or the server is stopping) and, on a handler fiber, the
  /// admission's EventWait (fiber_event_wait: waiting for tokens suspends the fiber).
  std::function<void(const http::Request&, engine::Admission&)> admitted;
  /// After a generation (also one a client left mid-stream: what it consumed is billed):
  /// records `totals` (prompt / cached / generated tokens of all choices) for the
  /// caller's API key under `endpoint` in the ledger, and `clock` in the TTFT / ITL /
  /// duration histograms; returns the cost in USD as the X-Swizzle-Cost-USD value. The
  /// one recording path of every endpoint.
  std::function<std::string(const http::Request&, const std::string& endpoint, const engine::GenerateResult& totals,
                            const TokenClock& clock)>
      finished;
  /// A stream's cost header, sent before any token: the prompt's cost.
  std::function<std::string(int prompt_tokens, int cached_tokens)> quote;
  /// Before admission: sets the request's prefix-cache disk tier (GenerateRequest::
  /// disk_cache, cache_tenant) from its key: a store key's organisation is its tenant,
  /// and a security-scope key gets no disk tier unless its organisation enabled it
  /// (key_store.h); other keys use the default tenant. Unset: the engine's defaults.
  std::function<void(const http::Request&, engine::GenerateRequest&)> cache_scope;
  /// Execution receipts (receipt.h): null unless the server signs them (`serve --receipts`).
  /// A successful answer gets one: non-streamed, seal_response_body + the X-Swizzle-Receipt
  /// header; streamed, its writes go through a ReceiptStream sealed before the end.
  std::shared_ptr<const ReceiptSigner> receipts;
};

/// The facts of a receipt for a request that ran the engine: `endpoint` the route
/// (endpoint_label(req.path): the security endpoint's as /v1/security/...), `body` the request body
/// as received, `totals` the counts of all choices, `clock` the run's TokenClock (its
/// token ids per choice). response_blake3 is left for the sealing step.
inline ReceiptFacts receipt_facts(const std::string& endpoint, const std::string& body, bool stream,
                                  const engine::SamplingParams& sampling, int max_tokens, int n,
                                  const engine::GenerateResult& totals, const TokenClock& clock) {
  ReceiptFacts f;
  f.endpoint = endpoint;
  f.stream = stream;
  f.request_blake3 = blake3_hex(canonical_request(body));
  f.output = clock.token_runs();
  f.sampling = sampling;
  f.max_tokens = max_tokens;
  f.n = n;
  f.prompt_tokens = totals.prompt_tokens;
  f.cached_tokens = totals.cached_tokens;
  return f;
}

/// The headers of a non-streamed answer that ran the engine, the same on every endpoint:
/// X-Swizzle-Cache-Hit-Tokens / X-Swizzle-Uncached-Tokens, X-Swizzle-Cost-USD (`cost_usd`;
/// not sent when empty) and X-Swizzle-Spec-Drafted / X-Swizzle-Spec-Accepted.
inline void set_generation_headers(http::Response& res, const engine::GenerateResult& totals, const std::string& cost_usd) {
  auto set = [&res](const char* key, const std::string& value) { res.set_header(key, value); };
  set(kCacheHitHeader, std::to_string(totals.cached_tokens));
  set(kUncachedHeader, std::to_string(totals.prompt_tokens - totals.cached_tokens));
  if (!cost_usd.empty()) set(kCostHeader, cost_usd);
  set(kSpecDraftedHeader, std::to_string(totals.spec_drafted));
  set(kSpecAcceptedHeader, std::to_string(totals.spec_accepted));
}

}  // namespace swz::server
