// Anthropic Messages API wire format (POST /v1/messages, POST /v1/messages/count_tokens):
// request parsing and validation, the response and SSE event JSON, the Anthropic error
// schema, and the request flow between the HTTP layer and the engine. References: the
// Messages API (https://docs.anthropic.com/en/api/messages), its streaming events
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming) and errors
// (https://docs.anthropic.com/en/api/errors), checked against the official `anthropic`
// Python SDK and Claude Code. All JSON of this API lives here; the engine has none.
#pragma once

#include "api_error.h"
#include "engine/engine.h"
#include "route_hooks.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cache_mode.h"
#include <vector>

namespace swz::server {

class HttpServer;  // http_server.h

/// A validated Messages request.
struct MessagesRequest {
  std::string model;                   ///< as sent (any name is accepted)
  engine::ChatPrompt prompt;           ///< system + messages (+ tools) in the engine's terms
  int max_tokens = 0;                  ///< >= 1 (required by the API; 0 only for count_tokens)
  engine::SamplingParams sampling;     ///< Anthropic defaults: temperature 1, top_p/top_k off
  std::vector<std::string> stop_sequences;
  bool stream = false;
  bool parse_tool_calls = false;       ///< tools offered and tool_choice != none
  bool disable_parallel_tool_use = false;
  /// Text the forced assistant prefix stands for (tool_choice any/tool), fed to the
  /// tool-call parser before the generated text.
  std::string forced_prefix;
  std::string forced_tool;             ///< tool_choice "tool": its name ("" for "any")
  /// The output's grammar (structured_output.h): a forced tool call, or output_config.format
  /// / output_format (json_schema, sarif-2.1.0, unified-diff). Null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  /// The request chose its output: output_config.format / output_format (any type, "text"
  /// included), a forced call, or tools the model may call. False: the route's default
  /// format applies (default_output_format, structured_output.h).
  bool output_chosen = false;
  int dropped_billing_blocks = 0;      ///< Claude Code's per-request billing-header system blocks removed
  /// extension "swizzle_cache_mode" as sent (checked by resolve_cache_mode, cache_mode.h)
  std::optional<nlohmann::json> cache_mode;
  /// extension "swizzle_approx_recompute" as sent (checked by resolve_approx_recompute)
  std::optional<nlohmann::json> approx_recompute;
  /// extension "swizzle_approx_select" as sent (checked by resolve_approx_select)
  std::optional<nlohmann::json> approx_select;
};

/// Parses and validates a Messages request body. `count_tokens`: the body of
/// /v1/messages/count_tokens (no max_tokens, stream, sampling). Throws ApiError (400,
/// `param` a dotted path such as "messages.2.content.0.type") for invalid JSON, missing
/// or wrongly typed fields, out-of-range numbers (max_tokens >= 1, temperature in [0, 1],
/// top_p in (0, 1], top_k >= 0), unknown roles or block types, and features this server
/// does not have (image/document blocks, extended thinking, server tools, MCP servers).
/// cache_control anywhere is accepted and ignored (the prefix cache is automatic).
MessagesRequest parse_messages_request(std::string_view body, bool count_tokens = false);

/// Anthropic's error type for an HTTP status: 400 invalid_request_error, 401
/// authentication_error, 403 permission_error, 404 not_found_error, 413
/// request_too_large, 429 rate_limit_error, 529 overloaded_error, other 5xx api_error.
const char* anthropic_error_type(int status);

/// {"type": "error", "error": {"type": anthropic_error_type(status), "message": ...}};
/// the message starts with the offending field ("max_tokens: ...") when e.param is set.
nlohmann::json anthropic_error_body(const ApiError& e);

/// usage object: input_tokens (prompt tokens neither read from nor written to the
/// cache), cache_creation_input_tokens (prompt tokens evaluated and written to the
/// prefix cache: prompt - cached, since the engine keeps every evaluated token),
/// cache_read_input_tokens (= cached), output_tokens. The three input counts add up to
/// the prompt's token count, as in Anthropic's API.
/// `cache_mode` non-null: also "swizzle_cache_mode" (cache_mode.h).
nlohmann::json anthropic_usage(int prompt_tokens, int cached_tokens, int output_tokens, const char* cache_mode = nullptr);

/// One SSE event: "event: <type>\ndata: <compact JSON>\n\n".
std::string anthropic_sse_event(const nlohmann::json& payload);

/// The request flow of POST /v1/messages, independent of the HTTP library. Thread-safe.
class AnthropicMessages {
 public:
  explicit AnthropicMessages(engine::Engine& engine);

  struct Prepared {
    MessagesRequest req;
    engine::GenerateRequest gen;
    std::shared_ptr<engine::Admission> admission;  ///< cached-prefix counts known before any byte
    std::string id;                                ///< msg_...
    TokenClock::Clock::time_point received = TokenClock::Clock::now();  ///< when prepare() began (TTFT origin)
    frontend_ast::CacheMode cache_mode = frontend_ast::CacheMode::Exact;  ///< the mode used (cache_mode.h)
    frontend_ast::ReorderStats reorder;  ///< what `reorder` did to the messages (zero for exact)
  };

  /// The server default mode and the shared atom-order memory (cache_mode.h).
  void set_cache_policy(CacheModePolicy policy) { cache_policy_ = std::move(policy); }

  /// Parses, templates, tokenizes, checks the context (prompt + 1 <= n_ctx, else 400
  /// "prompt is too long: N tokens > M maximum", Anthropic's wording, which Claude Code
  /// reads), admits. Throws ApiError; 503 (overloaded_error) once cancel_all() was called.
  /// `scope`, when set, fills the request's disk tier fields before admission (as
  /// ChatCompletions::prepare). `mode_header`: the X-Swizzle-Cache-Mode request header
  /// ("" if absent); the mode is resolved and applied before templating (cache_mode.h).
  /// `default_format`: the grammar of a request that chose no output (MessagesRequest::
  /// output_chosen false; default_output_format(path), structured_output.h); null: text.
  Prepared prepare(std::string_view body, const std::function<void(engine::GenerateRequest&)>& scope = {},
                   const std::string& mode_header = "",
                   const std::shared_ptr<const grammar::Grammar>& default_format = nullptr);

  /// /v1/messages/count_tokens: the prompt's token count, as prepare() would make it.
  int count_tokens(std::string_view body);

  struct Outcome {
    engine::GenerateResult result;
    std::string stop_reason;    ///< end_turn | max_tokens | stop_sequence | tool_use
    std::string stop_sequence;  ///< the matched one, for stop_reason stop_sequence
    int tool_calls = 0;
    bool client_gone = false;
    /// cancel_all() (the shutdown grace period ended) stopped generation before it was
    /// complete: the answer is an error (shutdown_cut_error), never a normal stop.
    bool cut = false;
    TokenClock clock;  ///< per-token timestamps from Prepared::received (TTFT, ITL)
  };

  /// Non-streaming: runs generation, fills `body` with the Message object. Throws ApiError
  /// (a generation cut by cancel_all(): 503, shutdown_cut_error).
  Outcome complete(const Prepared& p, nlohmann::json& body);

  /// Streaming: message_start (with usage) -> per content block: content_block_start,
  /// text_delta / input_json_delta events, content_block_stop -> message_delta
  /// (stop_reason, usage) -> message_stop. An engine error after the first byte, or a
  /// generation cut by cancel_all(), becomes an `error` event (the cut:
  /// overloaded_error) and the stream ends there, without message_delta / message_stop.
  /// Never throws.
  Outcome stream(const Prepared& p, const std::function<bool(std::string_view)>& write);

  /// Server shutdown, once its grace period has ended: running generations stop at their
  /// next token and are reported as cut (Outcome::cut); prepare() refuses new ones.
  void cancel_all() { cancelled_ = true; }

 private:
  struct Sink;
  Outcome generate(const Prepared& p, Sink& sink);
  engine::Engine& engine_;
  std::atomic<bool> cancelled_{false};
  CacheModePolicy cache_policy_;
};

/// Registers POST /v1/messages and POST /v1/messages/count_tokens on `http`. `log`
/// receives one line per finished request (may be empty); `hooks` (route_hooks.h) are the
/// server core's disconnect check, ledger and cost header (each may be empty). `base`
/// is the path they hang under ("/v1"; the security endpoint's "/v1/security" and
/// "/security/v1").
void add_anthropic_routes(HttpServer& http, AnthropicMessages& messages,
                          std::function<void(const std::string&)> log, GenerationHooks hooks = {},
                          const std::string& base = "/v1");

/// True for paths whose errors use Anthropic's schema (/v1/messages and below, also as
/// /v1/security/messages... and /security/v1/messages...).
bool is_anthropic_path(std::string_view path);

}  // namespace swz::server
