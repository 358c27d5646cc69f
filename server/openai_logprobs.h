// OpenAI log-probability objects built from the engine's TokenLogprobs
// (engine/engine.h): the chat schema (`choices[i].logprobs.content[]`, Chat Completions
// API reference, "logprobs") and the legacy completions schema (`tokens`,
// `token_logprobs`, `top_logprobs`, `text_offset`). Token strings follow vLLM: a token's
// own bytes decoded alone, an incomplete or ill-formed UTF-8 sequence shown as U+FFFD
// (`bytes` keeps the exact bytes).
#pragma once

#include "engine/engine.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace swz::server {

/// The most choices `n` may ask for (chat and legacy completions); larger n -> 400.
inline constexpr int kMaxChoices = 16;
/// The most alternatives legacy completions' integer `logprobs` may ask for (OpenAI's cap).
inline constexpr int kMaxLegacyLogprobs = 5;

/// A token's text for logprobs: `piece` (raw bytes) decoded alone, ill-formed -> U+FFFD.
std::string logprob_token_text(const std::string& piece);

/// Chat: [{"token", "logprob", "bytes": [int...], "top_logprobs": [{"token", "logprob",
/// "bytes"}...]}...] for `entries`, in order. `engine` gives the tokens' bytes.
nlohmann::json chat_logprobs_content(engine::Engine& engine, const std::vector<engine::TokenLogprobs>& entries);

/// Builds one legacy completions `logprobs` object. Positions are appended in order;
/// text_offset counts Unicode code points of the token strings from `start_offset`
/// (vLLM's rule), continuing across take() calls.
class LegacyLogprobs {
 public:
  LegacyLogprobs(engine::Engine& engine, int start_offset = 0) : engine_(engine), offset_(start_offset) {}
  /// The first prompt token (echo): a token with null logprob and null top_logprobs.
  void add_first(int32_t token);
  /// A position: its token's logprob and a {token: logprob} object of the top
  /// alternatives plus the token itself (OpenAI: up to logprobs + 1 entries).
  void add(const engine::TokenLogprobs& e);
  bool empty() const { return tokens_.empty(); }
  /// {"tokens", "token_logprobs", "top_logprobs", "text_offset"} of the positions added
  /// since the last take(); starts afresh (the offset carries on).
  nlohmann::json take();

 private:
  void put(int32_t token, nlohmann::json logprob, nlohmann::json top);
  engine::Engine& engine_;
  int offset_;
  nlohmann::json tokens_ = nlohmann::json::array(), logprobs_ = nlohmann::json::array(),
                 top_ = nlohmann::json::array(), offsets_ = nlohmann::json::array();
};

}  // namespace swz::server
