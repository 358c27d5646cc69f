// The HTTP server of swizzle-rt: OpenAI-compatible endpoints over one engine.
//
//   POST /v1/chat/completions   (stream or not; see openai_chat.h)
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /v1/usage              the usage ledger: the caller's rows (all rows for the admin key)
//   POST /v1/security/{chat/completions,completions,messages} (also /security/v1/...): the
//                               same routes for keys with the security scope (key_store.h)
//   POST /tokenize, /detokenize (llama.cpp server's tokenizer endpoints)
//   GET  /health                -> {"status": "ok"}
//   GET  /metrics               Prometheus text format 0.0.4 (metrics.h)
//
// Built on the HTTP layer of http_server.h (Boost.Beast: asynchronous connections on two io
// threads, handlers on fibers of a small pool; no thread per connection or per stream); the
// engine's scheduler batches generation. See docs/server.md for the decisions and a request walk.
#pragma once

#include "api_keys.h"
#include "engine/engine.h"
#include "frontend_ast/reorder.h"
#include "ledger.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace swz::server {

class ReceiptSigner;

struct ServerOptions {
  std::string api_key;               ///< non-empty: /v1/* requires "Authorization: Bearer <api_key>" (401 otherwise)
  std::vector<ApiKey> api_keys;      ///< more accepted keys (with names for the ledger); see api_keys.h
  std::string admin_key;             ///< non-empty: this key may read every /v1/usage row
  PriceTable prices;                 ///< prices of the usage ledger (default: every price 0)
  int http_threads = 0;              ///< threads of the handler fibers (http_server.h); 0 = hardware concurrency, clamped to 2..8
  size_t max_body_bytes = 32u << 20; ///< larger request bodies get 413
  /// SIGINT/SIGTERM under serve_until_signal: how long running generations may take to
  /// finish before they are cut (Server::shutdown). `swizzle-rt serve --shutdown-grace`.
  double shutdown_grace_s = 10.0;
  /// Per-organisation keys with scopes (key_store.h; `swizzle-rt keys`), re-read when the
  /// file changes. Empty = none. With a store, only its keys and the configured ones are accepted.
  std::string key_store;
  int key_store_recheck_ms = 1000;  ///< how often the store file's stamp is checked at most
  /// Execution receipts: non-null = every successful generation response carries one
  /// signed by this signer (receipt.h, docs/receipts.md). `swizzle-rt serve --receipts`.
  std::shared_ptr<const ReceiptSigner> receipts;
  /// The cache mode of requests that name none (cache_mode.h; `swizzle-rt serve
  /// --cache-mode`).
  frontend_ast::CacheMode cache_mode = frontend_ast::CacheMode::Exact;
  /// The approx mode's recomputed share of each reused atom for requests that name none
  /// (`--approx-recompute`; engine::GenerateRequest::approx_recompute), 0..1.
  float approx_recompute = engine::kApproxRecompute;
  /// Which tokens of each reused atom for requests that name none (`--approx-select`;
  /// engine::GenerateRequest::approx_select).
  engine::ApproxSelect approx_select = engine::ApproxSelect::Deviation;
  /// One line per finished request (method, path, status, tokens, ms); null = no log.
  std::function<void(const std::string&)> log;
};

/// Name of the response headers carrying the prefix-cache accounting of a request.
inline constexpr const char* kCacheHitHeader = "X-Swizzle-Cache-Hit-Tokens";
inline constexpr const char* kUncachedHeader = "X-Swizzle-Uncached-Tokens";
/// Speculative decoding's draft tokens verified / accepted for a non-streamed response
/// (streams carry them in the usage chunk: usage.completion_tokens_details).
inline constexpr const char* kSpecDraftedHeader = "X-Swizzle-Spec-Drafted";
inline constexpr const char* kSpecAcceptedHeader = "X-Swizzle-Spec-Accepted";

class Server {
 public:
  /// `engine` must outlive the server.
  Server(engine::Engine& engine, ServerOptions opts = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds `host`:`port` (port 0 = any free port). Returns the bound port.
  /// Throws std::runtime_error when the address cannot be bound.
  int bind(const std::string& host, int port);
  /// Serves until shutdown() / stop() and every connection has ended; call after bind().
  /// The calling thread is one of the HTTP layer's io threads. Returns true (a failed
  /// connection ends only that connection).
  bool run();
  /// bind() + run().
  bool listen(const std::string& host, int port);
  /// Graceful shutdown; thread-safe, also from another thread while run() blocks; returns
  /// once no generation runs any more (run() returns right after):
  ///  1. stops accepting connections; a request arriving on a connection that is already
  ///     open gets 503 in its API's error schema (OpenAI: server_error /
  ///     server_shutting_down; Anthropic: overloaded_error), GET /health 503
  ///     {"status": "shutting_down"};
  ///  2. lets the generations that run (chat, completions, messages, streamed or not)
  ///     finish, for at most `grace`;
  ///  3. cuts the ones still running at their next token: each client gets an error,
  ///     never a normal end (non-streamed: 503 in its API's schema; streamed: OpenAI a
  ///     final `data: {"error": {...}}` event and no [DONE], Anthropic `event: error`
  ///     overloaded_error and no message_stop);
  ///  4. closes idle keep-alive connections (and requests still being read), so run()
  ///     need not wait out their timeout; run() returns once the last connection ended.
  /// A second call waits for the first. `note`, if set, gets a line when the shutdown has
  /// to wait for running requests and when it cuts them.
  void shutdown(std::chrono::milliseconds grace, const std::function<void(const std::string&)>& note = {});
  /// shutdown() without grace: running generations are cut at once (reported as errors).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swz::server
