// The single-sequence engine over the cpu backend. One request runs at a time (a
// mutex); the KV cache of the previous request is kept, and a new prompt that shares a
// token prefix with it re-evaluates only the rest (llama.cpp server's `cache_prompt`).
// The paged, content-addressed prefix cache of DESIGN.md §4 replaces this later.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "chat/chat_template.h"
#include "cpu/cpu_model.h"
#include "engine/sampler.h"
#include "ggml/thread_pool.h"
#include "package/package.h"
#include "tokenizer/tokenizer.h"

namespace swz::engine {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Prefill is evaluated in chunks of this many tokens (llama.cpp's default n_ubatch).
constexpr int kPrefillChunk = 512;

class CpuEngine final : public Engine {
 public:
  CpuEngine(const std::string& path, const EngineOptions& opts)
      : pkg_(open(path)),
        tok_(tokenizer::Tokenizer::from_gguf(pkg_.gguf)),
        pool_(opts.n_threads > 0 ? opts.n_threads : std::max(1u, std::thread::hardware_concurrency())) {
    const package::Manifest& mf = pkg_.manifest;
    if (mf.target != "cpu")
      throw LoadError(path + ": package target is '" + mf.target +
                      "'; this swizzle-rt runs cpu packages (GPU backends are not built yet)");
    const nlohmann::json& hp = mf.graph.at("hparams");
    info_.architecture = hp.at("arch").get<std::string>();
    info_.n_ctx_train = hp.at("n_ctx_train").get<int>();
    info_.n_vocab = hp.at("n_vocab").get<int>();
    info_.n_ctx = opts.n_ctx > 0 ? std::min(opts.n_ctx, info_.n_ctx_train) : info_.n_ctx_train;
    info_.package_path = path;
    info_.id = mf.model.name.empty() ? std::filesystem::path(path).stem().string() : mf.model.name;
    if (mf.tokenizer.chat_template) {
      try {
        template_.emplace(chat::ChatTemplate::parse(*mf.tokenizer.chat_template));
      } catch (const chat::TemplateError& e) {
        throw LoadError(path + ": the model's chat template is not supported: " + e.what());
      }
    }
    try {
      model_ = std::make_unique<cpu::CpuModel>(mf.graph, pkg_.gguf, info_.n_ctx, pool_);
    } catch (const std::exception& e) {
      throw LoadError(path + ": " + e.what());
    }
  }

  const ModelInfo& info() const override { return info_; }

  std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) override {
    ChatPrompt p;
    p.messages = messages;
    p.add_generation_prompt = add_generation_prompt;
    return tokenize_chat_prompt(p);
  }

  std::vector<int32_t> tokenize_chat_prompt(const ChatPrompt& p) override {
    if (!template_) throw InvalidRequest("this model has no chat template; use the completions endpoint");
    std::vector<tokenizer::Segment> segs;
    const chat::Rendered r = render_chat(p);
    // Template literals may hold special tokens; message text (data spans) never does.
    size_t pos = 0;
    const std::string_view text(r.text);
    for (const chat::Span& s : r.data_spans) {
      if (s.begin > pos) segs.push_back({text.substr(pos, s.begin - pos), true});
      segs.push_back({text.substr(s.begin, s.end - s.begin), false});
      pos = s.end;
    }
    if (pos < text.size()) segs.push_back({text.substr(pos), true});
    // The forced assistant prefix is ours (e.g. "<tool_call>"): its control tokens count.
    if (!p.assistant_prefix.empty()) segs.push_back({p.assistant_prefix, true});
    std::vector<int32_t> ids = tok_.encode_segments(segs, /*add_special=*/false);
    if (tok_.add_bos() && (ids.empty() || ids.front() != tok_.bos())) ids.insert(ids.begin(), tok_.bos());
    return ids;
  }

  std::vector<int32_t> tokenize(const std::string& text, bool add_special) override {
    return tok_.encode(text, add_special, /*parse_special=*/false);
  }

  std::string detokenize(const std::vector<int32_t>& tokens) override { return tok_.decode(tokens); }

  std::unique_ptr<Admission> admit(const GenerateRequest& req) override {
    Sampler validate(req.sampling);
    (void)validate;
    const int n_prompt = static_cast<int>(req.prompt.size());
    if (n_prompt == 0) throw InvalidRequest("the prompt is empty");
    if (n_prompt >= info_.n_ctx)
      throw InvalidRequest("the prompt has " + std::to_string(n_prompt) + " tokens, which does not fit the context of " +
                           std::to_string(info_.n_ctx) + " tokens (at least one must remain for the answer)");
    for (int32_t t : req.prompt)
      if (t < 0 || t >= info_.n_vocab) throw InvalidRequest("token id " + std::to_string(t) + " is outside the vocabulary");
    std::lock_guard<std::mutex> lock(mu_);
    return std::make_unique<CpuAdmission>(req, common_prefix(req.prompt));
  }

  GenerateResult run(Admission& a, const TokenCallback& on_token) override {
    const GenerateRequest& req = a.request();
    Sampler sampler(req.sampling);
    std::lock_guard<std::mutex> lock(mu_);
    GenerateResult res;
    res.prompt_tokens = a.prompt_tokens();
    const auto t0 = Clock::now();

    // Single slot: reuse the common prefix with what the KV cache holds now. Another
    // request that ran between admit() and run() may have shortened it.
    const size_t keep = common_prefix(req.prompt);
    model_->truncate(static_cast<int>(keep));
    history_.resize(keep);
    res.cached_tokens = static_cast<int>(keep);

    std::vector<float> logits;
    try {
      for (size_t i = keep; i < req.prompt.size(); i += kPrefillChunk) {
        const int n = static_cast<int>(std::min<size_t>(kPrefillChunk, req.prompt.size() - i));
        model_->forward(req.prompt.data() + i, n, 1, logits);
        history_.insert(history_.end(), req.prompt.begin() + i, req.prompt.begin() + i + n);
      }
    } catch (...) {
      model_->truncate(0);
      history_.clear();
      throw;
    }
    res.prefill_ms = ms_since(t0);
    const auto t1 = Clock::now();

    const int limit = req.max_tokens >= 0 ? req.max_tokens : info_.n_ctx;
    res.finish = FinishReason::Length;
    while (res.completion_tokens < limit) {
      const int32_t tok = sampler.sample(logits.data(), info_.n_vocab);
      if (tok_.is_eog(tok)) {
        res.finish = FinishReason::Stop;
        break;
      }
      ++res.completion_tokens;
      TokenEvent ev{tok, tok_.token_to_piece(tok)};
      res.text += ev.piece;
      if (on_token && !on_token(ev)) {
        res.finish = FinishReason::Cancelled;
        break;
      }
      if (res.completion_tokens >= limit) break;
      if (model_->n_past() + 1 > info_.n_ctx) break;  // context full: finish "length"
      model_->forward(&tok, 1, 1, logits);
      history_.push_back(tok);
    }
    res.decode_ms = ms_since(t1);
    return res;
  }

 private:
  struct CpuAdmission final : Admission {
    CpuAdmission(const GenerateRequest& r, int cached) : Admission(r, cached) {}
  };

  /// Tokens of `prompt` whose K/V the cache holds; the last prompt position is always
  /// evaluated again so its logits exist. Caller holds mu_.
  size_t common_prefix(const std::vector<int32_t>& prompt) const {
    size_t keep = 0;
    while (keep < history_.size() && keep < prompt.size() && history_[keep] == prompt[keep]) ++keep;
    return std::min(keep, prompt.size() - 1);
  }

  /// Renders `p` with the model's template (see Engine::tokenize_chat_prompt).
  chat::Rendered render_chat(const ChatPrompt& p) const {
    if (p.messages.empty()) throw InvalidRequest("messages must not be empty");
    if (p.continue_final_message && p.messages.back().role != "assistant")
      throw InvalidRequest("only an assistant message can be continued");
    // Templates that render `tools` and `tool_calls` themselves (Qwen2.5, Llama-3.1...)
    // get them as Hugging Face passes them; others get the Hermes-style text below.
    const bool native = template_->source().find("tools") != std::string::npos &&
                        template_->source().find("tool_call") != std::string::npos;
    auto parse_object = [](const std::string& text, const std::string& what) {
      nlohmann::ordered_json j;
      try {
        j = nlohmann::ordered_json::parse(text.empty() ? std::string("{}") : text);
      } catch (const nlohmann::json::exception&) {
        throw InvalidRequest(what + " is not valid JSON");
      }
      if (!j.is_object()) throw InvalidRequest(what + " must be a JSON object");
      return j;
    };
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    for (const ToolDefinition& t : p.tools) {
      nlohmann::ordered_json fn = {{"name", t.name}};
      if (!t.description.empty()) fn["description"] = t.description;
      fn["parameters"] = parse_object(t.parameters, "the parameters of tool '" + t.name + "'");
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    auto call_text = [&](const ToolCall& c) {
      nlohmann::ordered_json j = {{"name", c.name}, {"arguments", parse_object(c.arguments, "the arguments of call '" + c.name + "'")}};
      return "<tool_call>\n" + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n</tool_call>";
    };
    // A marker after the continued message's content shows where its turn's end begins.
    static constexpr std::string_view kCut = "\x1eswz-continue\x1e";
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    std::string fallback_system;
    if (!native && !p.tools.empty()) {
      fallback_system =
          "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
          "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
      for (const auto& t : tools) fallback_system += "\n" + t.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      fallback_system +=
          "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
          "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
          "</tool_call>";
    }
    for (size_t i = 0; i < p.messages.size(); ++i) {
      const ChatMessage& m = p.messages[i];
      if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
        throw InvalidRequest("unsupported message role '" + m.role + "' (expected system, user, assistant or tool)");
      std::string content = m.content;
      const bool last = i + 1 == p.messages.size();
      if (native) {
        nlohmann::ordered_json j = {{"role", m.role}};
        if (!m.tool_calls.empty()) {
          nlohmann::ordered_json calls = nlohmann::ordered_json::array();
          for (const ToolCall& c : m.tool_calls)
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", parse_object(c.arguments, "the arguments of call '" + c.name + "'")}}}});
          j["tool_calls"] = std::move(calls);
        }
        if (last && p.continue_final_message) content += kCut;
        j["content"] = content;
        if (m.role == "tool") {
          if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
          if (!m.name.empty()) j["name"] = m.name;
        }
        msgs.push_back(std::move(j));
        continue;
      }
      // Hermes-style fallback: calls and results become text the model can read.
      std::string role = m.role;
      if (m.role == "assistant") {
        for (const ToolCall& c : m.tool_calls) content += (content.empty() ? "" : "\n") + call_text(c);
      } else if (m.role == "tool") {
        role = "user";
        content = "<tool_response>\n" + content + "\n</tool_response>";
        // Consecutive results share one user turn, as Qwen2.5's template does.
        if (!msgs.empty() && i > 0 && p.messages[i - 1].role == "tool") {
          std::string prev = msgs.back()["content"].get<std::string>();
          msgs.back()["content"] = prev + "\n" + content;
          continue;
        }
      }
      if (last && p.continue_final_message) content += kCut;
      msgs.push_back({{"role", role}, {"content", content}});
    }
    if (!fallback_system.empty()) {
      if (msgs[0]["role"] == "system") {
        msgs[0]["content"] = msgs[0]["content"].get<std::string>() + "\n\n" + fallback_system;
      } else {
        msgs.insert(msgs.begin(), nlohmann::ordered_json{{"role", "system"}, {"content", fallback_system}});
      }
    }
    nlohmann::ordered_json ctx = {{"messages", msgs},
                                  {"add_generation_prompt", p.add_generation_prompt && !p.continue_final_message},
                                  {"bos_token", tok_.bos() >= 0 ? std::string(tok_.token_text(tok_.bos())) : std::string()},
                                  {"eos_token", tok_.eos() >= 0 ? std::string(tok_.token_text(tok_.eos())) : std::string()}};
    if (native && !p.tools.empty()) ctx["tools"] = tools;
    chat::Rendered r;
    try {
      r = template_->render(ctx);
    } catch (const chat::TemplateError& e) {
      throw InvalidRequest(std::string("chat template: ") + e.what());
    }
    if (p.continue_final_message) {
      const size_t cut = r.text.rfind(kCut);
      if (cut == std::string::npos) throw InvalidRequest("chat template: cannot continue the final assistant message");
      r.text.resize(cut);
      std::vector<chat::Span> spans;
      for (chat::Span s : r.data_spans) {
        if (s.begin >= cut) break;
        s.end = std::min(s.end, cut);
        spans.push_back(s);
      }
      r.data_spans = std::move(spans);
    }
    return r;
  }

  static package::LoadedPackage open(const std::string& path) {
    try {
      return package::open_package(path);
    } catch (const std::exception& e) {
      throw LoadError(e.what());
    }
  }

  package::LoadedPackage pkg_;
  tokenizer::Tokenizer tok_;
  ggml::ThreadPool pool_;
  std::optional<chat::ChatTemplate> template_;
  std::unique_ptr<cpu::CpuModel> model_;
  ModelInfo info_;
  std::mutex mu_;
  std::vector<int32_t> history_;  // tokens whose K/V are in the cache, in order
};

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::string& package_path, const EngineOptions& opts) {
  try {
    return std::make_unique<CpuEngine>(package_path, opts);
  } catch (const LoadError&) {
    throw;
  } catch (const std::exception& e) {
    throw LoadError(package_path + ": " + e.what());
  }
}

}  // namespace swz::engine
