// OpenAI legacy Completions (POST /v1/completions): plain-text prompts, no chat template.
// Reference: https://platform.openai.com/docs/api-reference/completions and the `openai`
// SDK's `client.completions`. All JSON of this endpoint lives here.
#pragma once

#include "api_error.h"
#include "engine/engine.h"
#include "route_hooks.h"

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace swz::server {

class HttpServer;  // http_server.h

/// One prompt of a completions request: text, or token ids (sent as a list of integers).
struct CompletionsPrompt {
  std::string text;             ///< the text (for token ids: empty until detokenized for echo)
  std::vector<int32_t> tokens;  ///< token ids as sent (used as they are: no BOS is added)
  bool is_tokens = false;
};

/// A validated completions request.
struct CompletionsRequest {
  /// `prompt`: a string, a list of strings, a list of token ids, or a list of lists of
  /// token ids; each prompt gets n choices (index = prompt * n + j).
  std::vector<CompletionsPrompt> prompts;
  int max_tokens = 16;                ///< OpenAI's default for this endpoint
  engine::SamplingParams sampling;
  std::vector<std::string> stop;
  bool echo = false;                  ///< the choice's text starts with its prompt
  bool stream = false;
  bool include_usage = false;
  int n = 1;                          ///< choices per prompt, 1..kMaxChoices
  int logprobs = -1;                  ///< -1: none; 0..5 alternatives per position (legacy integer `logprobs`)
  std::optional<bool> speculative;    ///< extension, as chat
  bool ignore_eos = false;            ///< extension, as chat (vLLM, llama-server)
  /// `response_format` as on chat (structured_output.h): the grammar of every choice; null: text.
  std::shared_ptr<const grammar::Grammar> grammar;
  /// `response_format` was sent (any type, "text" included). False: the route's default
  /// format applies (default_output_format, structured_output.h).
  bool output_chosen = false;
};

/// Throws ApiError (400 naming the field) for a missing/empty or wrongly typed prompt
/// (a token id must be an integer >= 0; the vocabulary bound is checked when the engine
/// is known), out-of-range numbers (as chat), n outside [1, kMaxChoices], best_of != 1,
/// logprobs outside [0, 5], and suffix.
CompletionsRequest parse_completions_request(std::string_view body);

/// Registers POST /v1/completions on `http` (errors in OpenAI's schema). Text prompts are
/// tokenized as plain text with BOS as the model says; token-id prompts are checked
/// against the vocabulary (400 naming the index) and used as sent. Choices (n per
/// prompt) are generated one after another; `logprobs` (with echo, the prompt's too)
/// follow the legacy schema (openai_logprobs.h). `base` is the
/// path it hangs under ("/v1"; the security endpoint's "/v1/security" and "/security/v1").
void add_completions_route(HttpServer& http, engine::Engine& engine, std::atomic<bool>& cancelled,
                           std::function<void(const std::string&)> log, GenerationHooks hooks = {},
                           const std::string& base = "/v1");

}  // namespace swz::server
