// OpenAI legacy Completions (POST /v1/completions): plain-text prompts, no chat template.
// Reference: https://platform.openai.com/docs/api-reference/completions and the `openai`
// SDK's `client.completions`. All JSON of this endpoint lives here.
#pragma once

#include "api_error.h"
#include "engine/engine.h"
#include "route_hooks.h"

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace httplib {
class Server;
}

namespace swz::server {

/// A validated completions request.
struct CompletionsRequest {
  std::vector<std::string> prompts;   ///< `prompt`: a string or a list of strings (one choice each)
  int max_tokens = 16;                ///< OpenAI's default for this endpoint
  engine::SamplingParams sampling;
  std::vector<std::string> stop;
  bool echo = false;                  ///< the choice's text starts with its prompt
  bool stream = false;
  bool include_usage = false;
};

/// Throws ApiError (400 naming the field) for a missing/empty or wrongly typed prompt,
/// out-of-range numbers (as chat), n != 1, best_of != 1, logprobs, suffix, and token-id
/// prompts (not supported yet).
CompletionsRequest parse_completions_request(std::string_view body);

/// Registers POST /v1/completions on `http` (errors in OpenAI's schema). Prompts are
/// tokenized as plain text with BOS as the model says, generated one after another.
void add_completions_route(httplib::Server& http, engine::Engine& engine, std::atomic<bool>& cancelled,
                           std::function<void(const std::string&)> log, GenerationHooks hooks = {});

}  // namespace swz::server
