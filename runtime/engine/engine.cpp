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
#include "engine/speculative.h"
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
      : opts_(opts),
        pkg_(open(path)),
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

  SpecStats spec_stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return spec_;
  }

  std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) override {
    if (!template_) throw InvalidRequest("this model has no chat template; use the completions endpoint");
    if (messages.empty()) throw InvalidRequest("messages must not be empty");
    nlohmann::json msgs = nlohmann::json::array();
    for (const ChatMessage& m : messages) {
      if (m.role != "system" && m.role != "user" && m.role != "assistant")
        throw InvalidRequest("unsupported message role '" + m.role + "' (expected system, user or assistant)");
      msgs.push_back({{"role", m.role}, {"content", m.content}});
    }
    nlohmann::json ctx = {{"messages", msgs},
                          {"add_generation_prompt", add_generation_prompt},
                          {"bos_token", tok_.bos() >= 0 ? std::string(tok_.token_text(tok_.bos())) : std::string()},
                          {"eos_token", tok_.eos() >= 0 ? std::string(tok_.token_text(tok_.eos())) : std::string()}};
    chat::Rendered r;
    try {
      r = template_->render(ctx);
    } catch (const chat::TemplateError& e) {
      throw InvalidRequest(std::string("chat template: ") + e.what());
    }
    // Template literals may hold special tokens; message text (data spans) never does.
    std::vector<tokenizer::Segment> segs;
    size_t pos = 0;
    const std::string_view text(r.text);
    for (const chat::Span& s : r.data_spans) {
      if (s.begin > pos) segs.push_back({text.substr(pos, s.begin - pos), true});
      segs.push_back({text.substr(s.begin, s.end - s.begin), false});
      pos = s.end;
    }
    if (pos < text.size()) segs.push_back({text.substr(pos), true});
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

    DecodeOptions dopt;
    dopt.max_tokens = req.max_tokens >= 0 ? req.max_tokens : info_.n_ctx;
    dopt.n_ctx = info_.n_ctx;
    dopt.n_vocab = info_.n_vocab;
    dopt.speculative = req.speculative.value_or(opts_.speculative);
    dopt.lookup.draft_max = std::max(1, opts_.spec_draft_max);
    dopt.lookup.draft_init = std::min(dopt.lookup.draft_init, dopt.lookup.draft_max);
    SequenceModel seq(*model_, history_);
    const DecodeStats ds = decode(
        seq, sampler, logits, req.prompt, dopt, [this](int32_t t) { return tok_.is_eog(t); },
        [&](int32_t t, const float* /*logits row of t*/) {
          TokenEvent ev{t, tok_.token_to_piece(t)};
          res.text += ev.piece;
          return !on_token || on_token(ev);
        });
    res.completion_tokens = ds.completion_tokens;
    res.finish = ds.finish;
    res.spec_drafted = ds.drafted;
    res.spec_accepted = ds.accepted;
    {
      std::lock_guard<std::mutex> slock(stats_mu_);
      spec_.drafted_tokens += static_cast<uint64_t>(ds.drafted);
      spec_.accepted_tokens += static_cast<uint64_t>(ds.accepted);
      spec_.verify_passes += static_cast<uint64_t>(ds.verify_passes);
      spec_.decode_passes += static_cast<uint64_t>(ds.forward_passes);
      spec_.decode_tokens += static_cast<uint64_t>(ds.completion_tokens);
    }
    res.decode_ms = ms_since(t1);
    return res;
  }

 private:
  /// The running sequence for the decode loop: the model's forward()/truncate(), with
  /// history_ kept equal to the tokens whose K/V the cache holds.
  class SequenceModel final : public DecodeModel {
   public:
    SequenceModel(cpu::CpuModel& m, std::vector<int32_t>& history) : m_(m), history_(history) {}
    int n_past() const override { return m_.n_past(); }
    void forward(const int32_t* tokens, int n_tokens, int n_out, std::vector<float>& logits) override {
      m_.forward(tokens, n_tokens, n_out, logits);
      history_.insert(history_.end(), tokens, tokens + n_tokens);
    }
    void truncate(int n) override {
      m_.truncate(n);
      history_.resize(static_cast<size_t>(m_.n_past()));
    }

   private:
    cpu::CpuModel& m_;
    std::vector<int32_t>& history_;
  };

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

  static package::LoadedPackage open(const std::string& path) {
    try {
      return package::open_package(path);
    } catch (const std::exception& e) {
      throw LoadError(e.what());
    }
  }

  EngineOptions opts_;
  package::LoadedPackage pkg_;
  tokenizer::Tokenizer tok_;
  ggml::ThreadPool pool_;
  std::optional<chat::ChatTemplate> template_;
  std::unique_ptr<cpu::CpuModel> model_;
  ModelInfo info_;
  std::mutex mu_;
  std::vector<int32_t> history_;  // tokens whose K/V are in the cache, in order
  mutable std::mutex stats_mu_;
  SpecStats spec_;
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
