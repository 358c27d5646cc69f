// A scripted stand-in for swz::engine::Engine, for the server's unit tests only (never
// linked into swizzle-rt). Tokenization is one token per byte of "role:content\n" plus
// 2 tokens of generation prompt, so prompt lengths are easy to predict; generation
// replays `pieces` (raw bytes, which may cut UTF-8 characters) under the same contract
// as the real engine: max_tokens, a full context -> Length, callback false -> Cancelled.
#pragma once

#include "engine/engine.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace swz::test {

class FakeEngine : public engine::Engine {
 public:
  FakeEngine() {
    info_.id = "fake-model";
    info_.architecture = "fake";
    info_.n_ctx = 256;
    info_.n_ctx_train = 256;
    info_.n_vocab = 256;
  }

  const engine::ModelInfo& info() const override { return info_; }

  std::vector<int32_t> tokenize_chat(const std::vector<engine::ChatMessage>& messages, bool add_generation_prompt) override {
    std::vector<int32_t> t;
    for (const auto& m : messages) {
      if (m.role != "system" && m.role != "user" && m.role != "assistant") throw engine::InvalidRequest("bad role " + m.role);
      for (unsigned char c : m.role + ":" + m.content + "\n") t.push_back(c);
    }
    if (add_generation_prompt) t.insert(t.end(), {1, 2});
    return t;
  }
  std::vector<int32_t> tokenize(const std::string& text, bool) override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string detokenize(const std::vector<int32_t>& tokens) override { return std::string(tokens.begin(), tokens.end()); }

  struct FakeAdmission final : engine::Admission {
    FakeAdmission(const engine::GenerateRequest& r, int cached) : Admission(r, cached) {}
  };

  std::unique_ptr<engine::Admission> admit(const engine::GenerateRequest& req) override {
    if (req.prompt.empty()) throw engine::InvalidRequest("empty prompt");
    if (static_cast<int>(req.prompt.size()) >= info_.n_ctx) throw engine::InvalidRequest("prompt does not fit");
    return std::make_unique<FakeAdmission>(req, cached_tokens);
  }

  engine::GenerateResult run(engine::Admission& a, const engine::TokenCallback& on_token) override {
    const engine::GenerateRequest& req = a.request();
    std::lock_guard<std::mutex> lock(mu_);  // the real engine serialises too
    ++generate_calls;
    last_request = req;
    if (throw_runtime) throw std::runtime_error("fake engine exploded");
    const bool endless_now =
        endless || (!endless_trigger.empty() &&
                    std::string(req.prompt.begin(), req.prompt.end()).find(endless_trigger) != std::string::npos);
    engine::GenerateResult r;
    r.prompt_tokens = static_cast<int>(req.prompt.size());
    r.cached_tokens = cached_tokens;
    r.finish = engine::FinishReason::Stop;
    for (size_t i = 0; endless_now || i < pieces.size(); ++i) {
      if (req.max_tokens >= 0 && r.completion_tokens >= req.max_tokens) {
        r.finish = engine::FinishReason::Length;
        break;
      }
      if (r.prompt_tokens + r.completion_tokens >= info_.n_ctx) {
        r.finish = engine::FinishReason::Length;
        break;
      }
      if (token_delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(token_delay_ms));
      engine::TokenEvent ev{static_cast<int32_t>(i), endless_now ? std::string("tok ") : pieces[i]};
      r.text += ev.piece;
      ++r.completion_tokens;
      if (!on_token(ev)) {
        r.finish = engine::FinishReason::Cancelled;
        ++cancelled;
        break;
      }
    }
    return r;
  }

  engine::CacheStats cache_stats() const override { return stats; }

  engine::ModelInfo info_;
  engine::CacheStats stats;  ///< what cache_stats() reports (scripted)
  std::vector<std::string> pieces;
  int cached_tokens = 0;
  bool throw_runtime = false;
  bool endless = false;  ///< generate "tok " until cancelled or the context is full
  std::string endless_trigger;  ///< non-empty: endless for prompts whose bytes contain it
  int token_delay_ms = 0;
  std::atomic<int> generate_calls{0};
  std::atomic<int> cancelled{0};
  engine::GenerateRequest last_request;

 private:
  std::mutex mu_;
};

}  // namespace swz::test
