// OpenAI Chat Completions wire format (POST /v1/chat/completions): request parsing and
// validation, response and stream-chunk JSON, SSE framing, and the request flow between
// the HTTP layer and the engine. Reference: the OpenAI API reference
// (https://platform.openai.com/docs/api-reference/chat) and the behaviour of the
// official `openai` Python SDK. All JSON of this API lives here; the engine has none.
#pragma once

#include "api_error.h"
#include "engine/engine.h"
#include "metrics.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cache_mode.h"
#include <vector>

namespace swz::server {

/// A validated chat-completions request.
struct ChatRequest {
  std::string model;                              ///< as sent (any name is accepted)
  std::vector<engine::ChatMessage> messages;      ///< roles normalised: developer -> system
  std::optional<int> max_tokens;                  ///< max_completion_tokens wins over max_tokens
  engine::SamplingParams sampling;                ///< OpenAI defaults: temperature 1, top_p 1
  bool stream = false;
  bool include_usage = false;                     ///< stream_options.include_usage
  std::vector<std::string> stop;                  ///< up to 4 non-empty sequences
  std::optional<bool> speculative;                ///< extension: speculative decoding on/off (absent: server default)
  bool ignore_eos = false;                        ///< extension (vLLM, llama-server): EOG tokens do not stop the answer
  std::vector<engine::ToolDefinition> tools;      ///< `tools` (type function); cleared for tool_choice "none"
  bool parse_tool_calls = false;                  ///< tools offered and tool_choice != none
  bool parallel_tool_calls = true;                ///< false: generation stops after the first call
  /// tool_choice "required" / a named function: the answer starts inside the tool-call
  /// syntax (rendered as the engine's assistant prefix, fed to the tool-call parser).
  std::string forced_prefix;
  std::string forced_tool;                        ///< tool_choice names a function: its name ("" for "required")
  /// The output's grammar (structured_output.h): response_format json_object / json_schema /
  /// sarif-2.1.0 / unified-diff, or a forced tool call. Null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  /// The request chose its output: `response_format` (any type, "text" included), a forced
  /// call, or tools the model may call. False: the route's default format applies
  /// (default_output_format, structured_output.h: SARIF on the security endpoint).
  bool output_chosen = false;
  bool continue_final_message = false;            ///< the last message is the assistant's: continue it
  int n = 1;                                      ///< choices to generate (1..kMaxChoices)
  int logprobs = -1;                              ///< -1: none; else top_logprobs (logprobs: true, 0..20)
  /// extension "swizzle_cache_mode" as sent (checked by resolve_cache_mode, cache_mode.h)
  std::optional<nlohmann::json> cache_mode;
  /// extension "swizzle_approx_recompute" as sent (checked by resolve_approx_recompute)
  std::optional<nlohmann::json> approx_recompute;
  /// extension "swizzle_approx_select" as sent (checked by resolve_approx_select)
  std::optional<nlohmann::json> approx_select;
};

/// Parses and validates a request body. Throws ApiError (400, naming `param`) for:
/// invalid JSON, a non-object body, missing/empty `messages`, an unknown role, a content
/// part that is not text, wrongly typed fields, non-finite or out-of-range numbers
/// (temperature in [0, 2], top_p in (0, 1], min_p in [0, 1], top_k >= 0,
/// max_tokens >= 1, presence/frequency_penalty in [-2, 2], n in [1, kMaxChoices],
/// top_logprobs in [0, 20] and only with logprobs: true), and features not implemented
/// (legacy `functions`, non-empty logit_bias). `response_format` (text, json_object,
/// json_schema, and the extensions sarif-2.1.0 and unified-diff) and forced tool calls set
/// `grammar`; a schema that cannot be compiled is a 400 naming the keyword (structured_output.h). Tools: `tools` (type "function"), `tool_choice` ("none",
/// "auto", "required", {"type": "function", "function": {"name"}}),
/// `parallel_tool_calls`, assistant `tool_calls` and role "tool" messages. A trailing
/// assistant message is continued. Unknown fields are ignored. A JSON null counts as absent.
ChatRequest parse_chat_request(std::string_view body);

/// `v` as a JSON boolean; anything else throws ApiError 400 (invalid_request_error, param
/// `param`) "Invalid type for '<param>': expected a boolean, but got <type>.", the wording of
/// OpenAI's request validation. Shared by every OpenAI-schema endpoint's boolean fields.
bool get_bool(const nlohmann::json& v, const std::string& param);

/// usage object: {prompt_tokens, completion_tokens, total_tokens,
/// prompt_tokens_details{cached_tokens}, completion_tokens_details{reasoning_tokens,
/// accepted_prediction_tokens, rejected_prediction_tokens}}. The prediction counts are
/// speculative decoding's accepted and rejected draft tokens (OpenAI's fields for its
/// Predicted Outputs, the same mechanism; unlike OpenAI, rejected drafts are not part of
/// completion_tokens). `cache_mode` non-null: also "swizzle_cache_mode" (cache_mode.h).
nlohmann::json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens, int spec_drafted = 0,
                          int spec_accepted = 0, const char* cache_mode = nullptr);

/// "stop" | "length" (the engine's Cancelled happens on a stop sequence or a vanished
/// client; the former is reported as "stop", the latter never reaches a client).
const char* finish_reason_name(engine::FinishReason reason, bool stop_sequence_hit);

/// One SSE event carrying `payload`: "data: <compact JSON>\n\n". Invalid UTF-8 in strings
/// is replaced by U+FFFD rather than throwing.
std::string sse_event(const nlohmann::json& payload);
/// The stream terminator, "data: [DONE]\n\n".
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

/// A fresh id "chatcmpl-" + 24 random alphanumerics.
std::string new_completion_id();

/// The request flow of POST /v1/chat/completions, independent of the HTTP library.
/// Thread-safe: one instance serves all connections (the engine serialises generation).
class ChatCompletions {
 public:
  explicit ChatCompletions(engine::Engine& engine);

  /// Everything decided before the first response byte.
  struct Prepared {
    ChatRequest req;
    engine::GenerateRequest gen;  ///< templated, tokenized prompt + sampling (choice 0's)
    /// The request's one admission, for all req.n choices (GenerateRequest::n: the prompt
    /// is prefilled once and the choices decode together, sharing its KV pages; choice i
    /// samples with engine::choice_seed(seed, i)); cached-prefix counts known. The usage
    /// counts the prompt once (as OpenAI bills n > 1).
    std::shared_ptr<engine::Admission> admission;
    std::string id;               ///< chatcmpl-...
    int64_t created = 0;          ///< unix seconds
    TokenClock::Clock::time_point received = TokenClock::Clock::now();  ///< when prepare() began (TTFT origin)
    frontend_ast::CacheMode cache_mode = frontend_ast::CacheMode::Exact;  ///< the mode used (cache_mode.h)
    frontend_ast::ReorderStats reorder;  ///< what `reorder` did to the messages (zero for exact)
  };

  /// The server default mode and the shared atom-order memory (cache_mode.h).
  void set_cache_policy(CacheModePolicy policy) { cache_policy_ = std::move(policy); }

  /// Parses, templates, tokenizes and checks the context: prompt tokens + 1 must fit in
  /// n_ctx (room for at least one generated token), else 400 code
  /// "context_length_exceeded" naming both numbers. Then admits the request to the
  /// engine (prefix-cache lookup), so the cache counts are known before any byte is sent. max_tokens beyond the remaining
  /// context is not an error: generation ends at the full context with finish_reason
  /// "length". Throws ApiError; engine::InvalidRequest becomes a 400. `scope`, when set,
  /// fills the request's prefix-cache disk tier fields (GenerateRequest::disk_cache,
  /// cache_tenant: GenerationHooks::cache_scope) before admission.
  /// `mode_header`: the X-Swizzle-Cache-Mode request header ("" if absent); the mode is
  /// resolved and applied to the messages before templating (cache_mode.h).
  /// `default_format`: the grammar of a request that chose no output (ChatRequest::
  /// output_chosen false; default_output_format(path), structured_output.h); null: text.
  Prepared prepare(std::string_view body, const std::function<void(engine::GenerateRequest&)>& scope = {},
                   const std::string& mode_header = "",
                   const std::shared_ptr<const grammar::Grammar>& default_format = nullptr);

  struct Outcome {
    /// All choices together: prompt and cached tokens and prefill time once (choice 0's),
    /// completion tokens, draft counts and decode times summed over the choices.
    engine::GenerateResult result;
    std::string text;            ///< the completion text the client gets (choice 0)
    bool stop_sequence = false;  ///< a `stop` sequence ended generation (choice 0)
    int tool_calls = 0;          ///< calls returned, all choices (finish_reason "tool_calls" for a choice with calls)
    bool client_gone = false;    ///< streaming: a write failed, generation was cancelled
    /// cancel_all() (the shutdown grace period ended) stopped a choice before it was
    /// complete: the answer is an error (shutdown_cut_error), never a normal stop.
    bool cut = false;
    TokenClock clock;            ///< per-token timestamps from Prepared::received (TTFT, ITL)
  };

  /// Non-streaming: runs generation of every choice; returns the outcome and fills `body`
  /// with the chat.completion object. Throws ApiError (engine::InvalidRequest -> 400, any
  /// other exception -> 500, a choice cut by cancel_all() -> 503 shutdown_cut_error).
  Outcome complete(const Prepared& p, nlohmann::json& body);

  /// Streaming: writes SSE events through `write` (returns false once the client is
  /// gone, which cancels generation). First a chunk with delta.role per choice, in index
  /// order; then, as the choices generate together, their content / tool-call chunks
  /// interleaved, each naming its choice's `index` (each a complete-UTF-8 piece of text;
  /// joined per choice they equal the non-streamed text), and a chunk with a choice's
  /// finish_reason when that choice ends (as OpenAI streams n > 1); then a usage chunk
  /// (choices: []) if include_usage, then [DONE]. With logprobs, each delta chunk carries
  /// the entries of the tokens generated since the previous chunk of that choice (text
  /// held back for a stop string or an incomplete character delays its entries to the
  /// chunk that releases text; the finish chunk carries the rest), so the joined entries
  /// equal the non-streamed ones. An engine error after the first byte, or a choice cut by
  /// cancel_all(), is sent as an SSE event {"error": {...}} (the cut: 503's body,
  /// code server_shutting_down) and the stream ends there, without a finish_reason for
  /// that choice and without [DONE]. Never throws.
  /// `before_done`, if set, is called once generation has ended and every chunk but
  /// [DONE] is written (not when the client is gone or the engine failed), so what it
  /// records is visible to a client that has seen the end of the stream.
  Outcome stream(const Prepared& p, const std::function<bool(std::string_view)>& write,
                 const std::function<void(const Outcome&)>& before_done = {});

  /// Server shutdown, once its grace period has ended: every running and future
  /// generation stops at its next token and is reported as cut (Outcome::cut).
  void cancel_all() { cancelled_ = true; }
  /// True once cancel_all() was called.
  bool cancelling() const { return cancelled_; }

  engine::Engine& engine() { return engine_; }

 private:
  nlohmann::json chunk(const Prepared& p, int index, nlohmann::json delta, const char* finish_reason,
                       nlohmann::json logprobs = nullptr) const;
  struct ChoiceRun;
  struct ChoiceState;
  /// Runs every choice together (Engine::run_choices); `deliver(index, delta, logprobs)`
  /// gets each content or tool-call delta of choice `index` with the logprob entries of
  /// its tokens generated since its previous delta, and returns false when the client is
  /// gone (every choice then stops); `done(index, run)`, if set, hears of each choice as
  /// it ends (not when the client is gone), and returns false when the client is gone.
  /// Returns the runs in index order. Engine exceptions propagate.
  std::vector<ChoiceRun> run_all(const Prepared& p, TokenClock& clock,
                                 const std::function<bool(int, nlohmann::json, std::vector<engine::TokenLogprobs>)>& deliver,
                                 const std::function<bool(int, const ChoiceRun&)>& done = {});
  engine::Engine& engine_;
  std::atomic<bool> cancelled_{false};
  CacheModePolicy cache_policy_;
};

}  // namespace swz::server
