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
    info_.backend = "fake";
  }

  const engine::ModelInfo& info() const override { return info_; }
  std::string failure() const override { return failed; }
  std::string failed;  ///< tests set it: the engine's device failed

  std::vector<int32_t> tokenize_chat(const std::vector<engine::ChatMessage>& messages, bool add_generation_prompt) override {
    std::vector<int32_t> t;
    for (const auto& m : messages) {
      if (m.role != "system" && m.role != "user" && m.role != "assistant") throw engine::InvalidRequest("bad role " + m.role);
      for (unsigned char c : m.role + ":" + m.content + "\n") t.push_back(c);
    }
    if (add_generation_prompt) t.insert(t.end(), {1, 2});
    return t;
  }
  /// Tools and tool messages as plain bytes: "tools:<name>,...\n", "role:content\n",
  /// "call:<name><arguments>\n"; a continued final message has no "\n" and no generation
  /// prompt; the assistant prefix follows the generation prompt.
  std::vector<int32_t> tokenize_chat_prompt(const engine::ChatPrompt& p) override {
    std::string s;
    if (!p.tools.empty()) {
      s += "tools:";
      for (const auto& t : p.tools) s += t.name + ",";
      s += "\n";
    }
    for (size_t i = 0; i < p.messages.size(); ++i) {
      const auto& m = p.messages[i];
      if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
        throw engine::InvalidRequest("bad role " + m.role);
      s += m.role + ":" + m.content;
      for (const auto& c : m.tool_calls) s += "call:" + c.name + c.arguments;
      if (!(p.continue_final_message && i + 1 == p.messages.size())) s += "\n";
    }
    std::vector<int32_t> t(s.begin(), s.end());
    for (auto& x : t) x &= 0xFF;
    if (p.add_generation_prompt && !p.continue_final_message) t.insert(t.end(), {1, 2});
    for (unsigned char c : p.assistant_prefix) t.push_back(c);
    last_prompt = p;
    return t;
  }
  std::vector<int32_t> tokenize(const std::string& text, bool, bool) override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string detokenize(const std::vector<int32_t>& tokens) override { return std::string(tokens.begin(), tokens.end()); }
  /// Generated token i is piece i of the default script.
  std::string token_piece(int32_t id) override {
    return id >= 0 && static_cast<size_t>(id) < pieces.size() ? pieces[static_cast<size_t>(id)] : std::string(1, static_cast<char>(id));
  }

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
    // One request at a time (the real engine batches, this one serialises). Waiting goes
    // through the admission's EventWait when the server set one (its handler fibers: a
    // blocked thread would stall every fiber on it), else sleeps.
    const engine::Admission::EventWait& wait = a.event_wait();
    auto pause = [&wait](std::chrono::milliseconds ms) {
      const auto until = std::chrono::steady_clock::now() + ms;
      if (!wait.wait) return std::this_thread::sleep_for(ms);
      for (auto now = std::chrono::steady_clock::now(); now < until; now = std::chrono::steady_clock::now())
        wait.wait(std::chrono::duration_cast<std::chrono::milliseconds>(until - now) + std::chrono::milliseconds(1));
    };
    ++queued_;
    for (bool idle = false; !busy_.compare_exchange_strong(idle, true); idle = false) pause(std::chrono::milliseconds(2));
    --queued_;
    ++running_;
    struct Done {
      std::atomic<int>& running;
      std::atomic<bool>& busy;
      ~Done() {
        --running;
        busy = false;
      }
    } done{running_, busy_};
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
    const std::string prompt_bytes(req.prompt.begin(), req.prompt.end());
    const std::vector<std::string>* script = &pieces;
    for (const auto& [trigger, alt] : scripts)
      if (prompt_bytes.find(trigger) != std::string::npos) script = &alt;
    const std::vector<std::string>& pieces = *script;
    a.prefilled({});
    for (size_t i = 0; endless_now || i < pieces.size(); ++i) {
      if (req.max_tokens >= 0 && r.completion_tokens >= req.max_tokens) {
        r.finish = engine::FinishReason::Length;
        break;
      }
      if (r.prompt_tokens + r.completion_tokens >= info_.n_ctx) {
        r.finish = engine::FinishReason::Length;
        break;
      }
      if (a.cancel_requested()) {  // as the scheduler polls it before each step
        r.finish = engine::FinishReason::Cancelled;
        ++cancelled;
        break;
      }
      const bool slow = !slow_trigger.empty() && prompt_bytes.find(slow_trigger) != std::string::npos;
      if (const int ms = slow ? slow_delay_ms : token_delay_ms) pause(std::chrono::milliseconds(ms));
      engine::TokenEvent ev{static_cast<int32_t>(i), endless_now ? std::string("tok ") : pieces[i], std::nullopt};
      if (req.logprobs >= 0) {  // scripted: token i has logprob -(i+1)/4; alternatives i, i+1, ...
        engine::TokenLogprobs lp{ev.token, -0.25 * static_cast<double>(i + 1), {}};
        for (int k = 0; k < req.logprobs; ++k) lp.top.push_back({static_cast<int32_t>(i) + k, lp.logprob - k});
        ev.logprobs = lp;
      }
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
  /// The fake's one slot: `running` holds it, `queued` wait for it (so a test can see
  /// that every request it sent has reached the engine).
  engine::SchedulerStats scheduler_stats() const override {
    engine::SchedulerStats s;
    s.parallel = 1;
    s.running = running_.load();
    s.queued = queued_.load();
    return s;
  }

  engine::ModelInfo info_;
  engine::CacheStats stats;  ///< what cache_stats() reports (scripted)
  std::vector<std::string> pieces;
  /// (trigger, pieces): prompts whose bytes contain the trigger replay these instead
  /// (the last matching trigger wins).
  std::vector<std::pair<std::string, std::vector<std::string>>> scripts;
  int cached_tokens = 0;
  bool throw_runtime = false;
  bool endless = false;  ///< generate "tok " until cancelled or the context is full
  std::string endless_trigger;  ///< non-empty: endless for prompts whose bytes contain it
  int token_delay_ms = 0;
  std::string slow_trigger;  ///< non-empty: prompts whose bytes contain it wait slow_delay_ms per token instead
  int slow_delay_ms = 0;
  std::atomic<int> generate_calls{0};
  std::atomic<int> cancelled{0};
  engine::GenerateRequest last_request;
  engine::ChatPrompt last_prompt;  ///< the last tokenize_chat_prompt() argument

 private:
  std::atomic<bool> busy_{false};  // a request runs
  std::atomic<int> queued_{0};
  std::atomic<int> running_{0};
};

}  // namespace swz::test
