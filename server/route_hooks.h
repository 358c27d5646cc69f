// What the server core (server.cpp) does around a generation of an endpoint that lives in
// its own file (Anthropic /v1/messages, OpenAI /v1/completions): the client-disconnect
// check during prefill, and the usage ledger / metrics with the cost header.
#pragma once

#include "engine/engine.h"

#include <httplib.h>

#include <functional>
#include <string>

namespace swz::server {

struct GenerationHooks {
  /// After admission, before run(): installs the engine's cancel check (the client's
  /// socket closed, or the server is stopping).
  std::function<void(const httplib::Request&, engine::Admission&)> admitted;
  /// After a generation: records prompt / cached / output tokens for the caller's API
  /// key under `endpoint`; returns the cost in USD as the X-Swizzle-Cost-USD value.
  std::function<std::string(const std::string& endpoint, const httplib::Request&, int prompt_tokens, int cached_tokens,
                            int output_tokens)>
      finished;
  /// A stream's cost header, sent before any token: the prompt's cost.
  std::function<std::string(int prompt_tokens, int cached_tokens)> quote;
};

}  // namespace swz::server
