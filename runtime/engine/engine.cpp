// The engine over any backend: the graph executor (runtime/exec) over the cpu, CUDA or
// Vulkan backend, as the package's target names. Generation runs in the scheduler
// (engine/scheduler.h): continuous batching with chunked prefill, each step one batched
// forward pass of the executor (an exec::BatchModel). Admission is concurrent. KV memory is a paged pool shared with the content-addressed
// prefix cache (runtime/kvcache/block_manager.h):
//   admit()  computes the prompt's 64-token block keys, finds the longest cached prefix
//            in any tier and pins it, then the longest start of the next block that a
//            cached block under the last matched key shares (token-granular reuse,
//            kvcache::BlockManager::match_partial): cached_tokens = min(64 * matched
//            blocks + m, prompt - 1).
//   run()    submits the admission to the scheduler, which takes the pinned blocks into
//            the sequence's block table (restoring host / disk copies into pages),
//            prefills the rest (the last prompt position is always evaluated, so a full
//            hit copies that block on write, as does a partial one), publishes each full
//            block of the prompt after prefill and its partial last block when the
//            sequence ends, and releases the sequence's pages then. Blocks that
//            generated tokens complete are not published: their K/V were computed as
//            Rows::Generated (cpu: llama.cpp's single-row order; GPU: the decode
//            kernels), a cold prefill of the same tokens computes Rows::Prompt.
// Exactness rests on batch invariance: a token's K/V and logits do not depend on how
// the prompt is split into forward passes or what else the pass carries (ggml::matmul is
// bit-identical per row for any row count, every other op is per row or per (token,
// head), attention's order is fixed by Rows, not by the row count); tested in
// test/unit/engine/prefix_cache_engine_test.cpp and scheduler_test.cpp.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "chat/chat_template.h"
#include "exec/backend_model.h"
#include "grammar/matcher.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "kvcache/block_manager.h"
#include "package/package.h"
#include "tokenizer/tokenizer.h"

namespace swz::engine {
namespace {



class PackageEngine final : public Engine {
 public:
  PackageEngine(const std::string& path, const EngineOptions& opts)
      : opts_(opts),
        pkg_(open(path)),
        tok_(tokenizer::Tokenizer::from_gguf(pkg_.gguf)) {
    const package::Manifest& mf = pkg_.manifest;
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
      const int ctx_pages = (info_.n_ctx + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
      kvcache::CacheOptions co;
      co.n_pages = opts.kv_pages > 0 ? opts.kv_pages : 4 * ctx_pages + 1;
      if (co.n_pages < ctx_pages + 1)
        throw LoadError(path + ": --kv-pages " + std::to_string(co.n_pages) + " is too small: a context of " +
                        std::to_string(info_.n_ctx) + " tokens needs at least " + std::to_string(ctx_pages + 1) +
                        " pages of 64 tokens");
      co.prefix_cache = opts.prefix_cache;
      co.host_bytes = static_cast<size_t>(opts.cache_host_mb) << 20;
      co.ttl = std::chrono::seconds(std::max(0, opts.cache_ttl_s));
      co.disk_dir = opts.cache_dir;
      co.disk_key = opts.cache_key;
      co.disk_bytes = opts.cache_disk_mb << 20;
      // What the K/V of a token sequence depends on: the weights (content hash of the
      // GGUF's tensor data), the graph (hyper-parameters, ops), the backend's KV format
      // (backend::kv_format: the layout, and the kernels that computed it). The tokenizer
      // identity is included as the issue asks (ids mean its vocabulary).
      const std::string identity = "swizzle-kv/3 " + backend::kv_format(mf.target) + "\n" + mf.source_gguf.hash_algorithm + ":" +
                                   mf.source_gguf.digest + "\n" + mf.tokenizer.model + "/" + mf.tokenizer.pre + "/" +
                                   std::to_string(mf.tokenizer.n_vocab) + "\n" + mf.graph.dump();
      if (opts.parallel < 1) throw LoadError("--parallel must be at least 1");
      if (opts.batch_tokens < opts.parallel)
        throw LoadError("--batch-tokens " + std::to_string(opts.batch_tokens) + " must be at least --parallel (" +
                        std::to_string(opts.parallel) + "): every running sequence decodes in every step");
      bm_ = exec::open_backend_model(pkg_, info_.n_ctx, std::move(co), identity, opts.n_threads, opts.batch_tokens,
                                     opts.parallel + kApproxSegmentSlots);
      info_.backend = bm_.backend;
      kv_ = bm_.kv.get();
      batch_ = bm_.executor.get();
      SchedulerOptions so;
      so.n_ctx = info_.n_ctx;
      so.parallel = opts.parallel;
      so.batch_tokens = opts.batch_tokens;
      so.max_queue = opts.max_queue;
      so.speculative = opts.speculative;
      so.spec_draft_max = opts.spec_draft_max;
      so.spec_pricing = opts.spec_pricing;
      SchedulerHooks hooks;
      hooks.is_eog = [this](int32_t t) { return tok_.is_eog(t); };
      hooks.piece = [this](int32_t t) { return tok_.token_to_piece(t); };
      hooks.vocab = [this] { return vocab(); };
      // A device error sticks to the context (CUDA) or the device is gone (Vulkan): no
      // later request could run, so the engine says so instead of failing each one.
      hooks.failed = [this](const std::string& what) {
        std::lock_guard<std::mutex> lock(stats_mu_);
        if (failure_.empty()) failure_ = what;
      };
      if (opts.approx_atoms > 0) atoms_ = std::make_unique<kvcache::AtomStore>(static_cast<size_t>(opts.approx_atoms));
      sched_ = std::make_unique<Scheduler>(*batch_, *kv_, so, std::move(hooks), atoms_.get());
    } catch (const LoadError&) {
      throw;
    } catch (const std::exception& e) {
      throw LoadError(path + ": " + e.what());
    }
  }

  const ModelInfo& info() const override { return info_; }

  SpecStats spec_stats() const override { return sched_->spec_stats(); }
  SchedulerStats scheduler_stats() const override { return sched_->stats(); }

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

  std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) override {
    return tok_.encode(text, add_special, parse_special);
  }

  std::string detokenize(const std::vector<int32_t>& tokens) override { return tok_.decode(tokens); }
  std::string token_piece(int32_t id) override { return tok_.token_to_piece(id); }

  void check_not_failed() const {
    const std::string f = failure();
    if (!f.empty()) throw EngineFailed("the model's device failed (" + f + "); restart swizzle-rt");
  }

  std::unique_ptr<Admission> admit(const GenerateRequest& req) override {
    check_not_failed();
    Sampler validate(req.sampling);
    (void)validate;
    const int n_prompt = static_cast<int>(req.prompt.size());
    if (n_prompt == 0) throw InvalidRequest("the prompt is empty");
    if (n_prompt >= info_.n_ctx)
      throw InvalidRequest("the prompt has " + std::to_string(n_prompt) + " tokens, which does not fit the context of " +
                           std::to_string(info_.n_ctx) + " tokens (at least one must remain for the answer)");
    for (int32_t t : req.prompt)
      if (t < 0 || t >= info_.n_vocab) throw InvalidRequest("token id " + std::to_string(t) + " is outside the vocabulary");
    if (req.grammar) vocab();  // built on the caller's thread, not the scheduler's
    if (req.n < 1 || req.n > kMaxChoices)
      throw InvalidRequest("n (choices) must be in 1.." + std::to_string(kMaxChoices) + ", got " + std::to_string(req.n));
    if (req.logprobs < -1 || req.logprobs > kMaxTopLogprobs)
      throw InvalidRequest("logprobs must be in -1.." + std::to_string(kMaxTopLogprobs) + ", got " + std::to_string(req.logprobs));
    return sched_->admit(req);
  }

  std::string failure() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return failure_;
  }

  GenerateResult run(Admission& admission, const TokenCallback& on_token) override {
    check_not_failed();
    return sched_->run(admission, on_token);
  }

  std::vector<GenerateResult> run_choices(Admission& admission, const ChoiceTokenCallback& on_token,
                                          const ChoiceDoneCallback& on_done) override {
    check_not_failed();
    return sched_->run_choices(admission, on_token, on_done);
  }

  CacheStats cache_stats() const override {
    const kvcache::BlockStats b = kv_->stats();
    CacheStats s;
    {
      s.hit_tokens = sched_->hit_tokens();
      s.miss_tokens = sched_->miss_tokens();
    }
    s.blocks_device = b.blocks_device;
    s.blocks_host = b.blocks_host;
    s.blocks_disk = b.blocks_disk;
    s.evictions = b.evictions;
    s.pages_total = static_cast<uint64_t>(b.pages_total);
    s.pages_free = static_cast<uint64_t>(b.pages_free);
    s.spills = b.spills;
    s.restores = b.restores;
    s.disk_reads = b.disk_reads;
    s.disk_writes = b.disk_writes;
    s.disk_rejects = b.disk_rejects;
    if (atoms_) {
      const kvcache::AtomStore::Stats a = atoms_->stats();
      s.approx_atoms = a.atoms;
      s.approx_atom_hits = a.hits;
      s.approx_atom_stale = a.stale;
    }
    return s;
  }

 private:
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

  /// The vocabulary trie of grammar-constrained decoding, built on first use (about 0.2 s
  /// for 152k tokens): every token's piece, end-of-generation tokens marked. Control tokens
  /// that do not end generation (<|im_start|>, FIM markers...) get no piece, so a grammar
  /// never allows them; user-defined ones (Qwen's <tool_call>) keep their text.
  std::shared_ptr<const grammar::Vocabulary> vocab() {
    std::call_once(vocab_once_, [this] {
      std::vector<std::string> pieces(static_cast<size_t>(info_.n_vocab));
      std::vector<bool> eog(pieces.size());
      for (int32_t t = 0; t < std::min(info_.n_vocab, tok_.n_vocab()); ++t) {
        eog[static_cast<size_t>(t)] = tok_.is_eog(t);
        if (!(tok_.token_attr(t) & tokenizer::kAttrControl)) pieces[static_cast<size_t>(t)] = tok_.token_to_piece(t);
      }
      vocab_ = std::make_shared<const grammar::Vocabulary>(pieces, eog);
    });
    return vocab_;
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
  std::optional<chat::ChatTemplate> template_;
  ModelInfo info_;
  std::once_flag vocab_once_;
  std::shared_ptr<const grammar::Vocabulary> vocab_;
  mutable std::mutex stats_mu_;
  std::string failure_;  // the device error that stopped the engine (stats_mu_)
  // Destroyed in reverse order: the scheduler (its thread, the sequences' pages) first,
  // then the backend, the KV pool and the model.
  exec::BackendModel bm_;  // the backend, the KV page pool and prefix cache, the model
  kvcache::BlockManager* kv_ = nullptr;   // bm_.kv
  exec::BatchModel* batch_ = nullptr;     // bm_.executor
  std::unique_ptr<kvcache::AtomStore> atoms_;  // before sched_: the scheduler uses it until destroyed
  std::unique_ptr<Scheduler> sched_;
};

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::string& package_path, const EngineOptions& opts) {
  try {
    return std::make_unique<PackageEngine>(package_path, opts);
  } catch (const LoadError&) {
    throw;
  } catch (const std::exception& e) {
    throw LoadError(package_path + ": " + e.what());
  }
}

}  // namespace swz::engine
