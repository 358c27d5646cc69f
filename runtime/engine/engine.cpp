// The engine over any backend: the graph executor (runtime/exec) over the cpu, CUDA or
// Vulkan backend, as the package's target names, behind one exec::SequenceModel, so
// everything below is one code path. One sequence
// runs at a time (a mutex); admission is concurrent. KV memory is a paged pool shared with the content-addressed prefix cache
// (runtime/kvcache/block_manager.h):
//   admit()  computes the prompt's 64-token block keys, finds the longest cached prefix
//            in any tier and pins it: cached_tokens = min(64 * matched blocks, prompt - 1).
//   run()    takes the pinned blocks into the sequence's block table (restoring host /
//            disk copies into pages), prefills the rest (the last prompt position is
//            always evaluated, so a full hit copies that block on write), publishes each
//            full block of the prompt after prefill, and releases the sequence. Blocks
//            that generated tokens complete are not published: their K/V were computed
//            as Rows::Generated (cpu: llama.cpp's single-row order; GPU: the decode
//            kernels), a cold prefill of the same tokens computes Rows::Prompt.
// Exactness rests on batch invariance: a token's K/V and logits do not depend on how
// the prompt is split into forward() calls (ggml::matmul is bit-identical per row for
// any row count, every other op is per row or per (token, head), attention's order is
// fixed by Rows, not by the row count); tested in
// test/unit/engine/prefix_cache_engine_test.cpp.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "chat/chat_template.h"
#include "exec/backend_model.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "kvcache/block_manager.h"
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
/// Prefill chunk when every prompt row's logits are needed (prompt logprobs): bounds the
/// logits buffer to 64 rows (e.g. 39 MB for Qwen2.5's 151,936-token vocabulary). The
/// chunking does not change any result (batch invariance, above).
constexpr int kPromptLogprobsChunk = 64;

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
      co.disk_bytes = opts.cache_disk_mb << 20;
      // What the K/V of a token sequence depends on: the weights (content hash of the
      // GGUF's tensor data), the graph (hyper-parameters, ops), the backend's KV format
      // (backend::kv_format: the layout, and the kernels that computed it). The tokenizer
      // identity is included as the issue asks (ids mean its vocabulary).
      const std::string identity = "swizzle-kv/3 " + backend::kv_format(mf.target) + "\n" + mf.source_gguf.hash_algorithm + ":" +
                                   mf.source_gguf.digest + "\n" + mf.tokenizer.model + "/" + mf.tokenizer.pre + "/" +
                                   std::to_string(mf.tokenizer.n_vocab) + "\n" + mf.graph.dump();
      bm_ = exec::open_backend_model(pkg_, info_.n_ctx, std::move(co), identity, opts.n_threads, kPrefillChunk);
      info_.backend = bm_.backend;
      kv_ = bm_.kv.get();
      model_ = bm_.model.get();
    } catch (const LoadError&) {
      throw;
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
    if (req.logprobs < -1 || req.logprobs > kMaxTopLogprobs)
      throw InvalidRequest("logprobs must be in -1.." + std::to_string(kMaxTopLogprobs) + ", got " + std::to_string(req.logprobs));
    auto a = std::make_unique<CacheAdmission>(req, *kv_);
    // Prompt logprobs need every prompt row's logits: the whole prompt is evaluated.
    if (kv_->prefix_cache_enabled() && !req.prompt_logprobs) {
      a->keys = kvcache::block_keys(kv_->model(), req.prompt.data(), req.prompt.size());
      const int matched = kv_->match_and_pin(a->keys, a->pinned);
      a->set_cached(std::min(matched * kvcache::kBlockTokens, n_prompt - 1));
    }
    return a;
  }

  std::string failure() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return failure_;
  }

  GenerateResult run(Admission& admission, const TokenCallback& on_token) override {
    check_not_failed();
    try {
      return run_sequence(admission, on_token);
    } catch (const backend::Error& e) {
      // A device error sticks to the context (CUDA) or the device is gone (Vulkan): no
      // later request could run, so the engine says so instead of failing each one.
      std::lock_guard<std::mutex> lock(stats_mu_);
      if (failure_.empty()) failure_ = e.what();
      throw;
    }
  }

  GenerateResult run_sequence(Admission& admission, const TokenCallback& on_token) {
    auto* a = dynamic_cast<CacheAdmission*>(&admission);
    if (!a || a->kv != kv_) throw std::invalid_argument("run: the admission comes from another engine");
    if (a->ran) throw std::invalid_argument("run: this admission has already run");
    a->ran = true;
    const GenerateRequest& req = a->request();
    Sampler sampler(req.sampling);
    std::lock_guard<std::mutex> lock(mu_);
    GenerateResult res;
    res.prompt_tokens = a->prompt_tokens();
    res.cached_tokens = a->cached_tokens();
    const auto t0 = Clock::now();
    const int n_prompt = res.prompt_tokens;

    // The pinned blocks become the head of the block table; their pins are then
    // redundant (the table's page references keep them) and are dropped. Blocks that
    // requests running between admit() and run() published extend the match: they are
    // used too (less prefill) but not reported, since cached_tokens was final at
    // admission (a stream's headers already carry it); CacheStats counts them as hits.
    std::vector<int> pages = kv_->acquire(a->pinned);
    a->release_pins();
    if (kv_->prefix_cache_enabled() && !req.prompt_logprobs && pages.size() < a->keys.size()) {
      std::vector<kvcache::BlockKey> more(a->keys.begin() + static_cast<ptrdiff_t>(pages.size()), a->keys.end()), pinned;
      kv_->match_and_pin(more, pinned);
      std::vector<int> extra;
      try {
        extra = kv_->acquire(pinned);
      } catch (...) {
        kv_->unpin(pinned);
        for (int p : pages) kv_->unref_page(p);
        throw;
      }
      kv_->unpin(pinned);
      pages.insert(pages.end(), extra.begin(), extra.end());
    }
    const int reused = std::min(static_cast<int>(pages.size()) * kvcache::kBlockTokens, n_prompt - 1);
    model_->attach(std::move(pages), reused);
    history_.assign(req.prompt.begin(), req.prompt.begin() + reused);
    struct Release {  // the sequence's pages go back on every exit path
      exec::SequenceModel& m;
      ~Release() { m.release(); }
    } release{*model_};

    std::vector<float> logits;
    res.finish = FinishReason::Length;
    const int nv = info_.n_vocab;
    const int chunk = req.prompt_logprobs ? kPromptLogprobsChunk : kPrefillChunk;
    for (int i = reused; i < n_prompt; i += chunk) {
      if (a->cancel_requested()) {
        res.finish = FinishReason::Cancelled;
        res.prompt_logprobs.clear();
        break;
      }
      const int n = std::min(chunk, n_prompt - i);
      model_->forward(req.prompt.data() + i, n, req.prompt_logprobs ? n : 1, exec::SequenceModel::Rows::Prompt, logits);
      history_.insert(history_.end(), req.prompt.begin() + i, req.prompt.begin() + i + n);
      if (req.prompt_logprobs) {
        // Row r (position i + r) predicts prompt token i + r + 1; the last row predicts
        // the first generated token and stays, alone, for the decode loop.
        for (int r = 0; r < n && i + r + 1 < n_prompt; ++r)
          res.prompt_logprobs.push_back(token_logprobs(logits.data() + static_cast<size_t>(r) * nv, nv,
                                                       req.prompt[static_cast<size_t>(i + r + 1)], std::max(0, req.logprobs)));
        std::copy(logits.end() - nv, logits.end(), logits.begin());
        logits.resize(static_cast<size_t>(nv));
      }
    }
    const int evaluated = model_->n_past() - reused;
    {
      std::lock_guard<std::mutex> slock(stats_mu_);
      hit_tokens_ += static_cast<uint64_t>(reused);
      miss_tokens_ += static_cast<uint64_t>(evaluated);
    }
    // Full prompt blocks are shared as soon as they exist (a request admitted during
    // this one's decode already finds them); also after a cancelled prefill: what was
    // computed is exact. Only prompt blocks are ever published: generated tokens' K/V are
    // computed as Rows::Generated (llama.cpp's single-row order), and a later prompt that
    // contains them must get exactly what a cold prefill (Rows::Prompt) computes.
    publish_blocks(a->keys);
    res.prefill_ms = ms_since(t0);
    const auto t1 = Clock::now();

    DecodeStats ds;
    if (res.finish != FinishReason::Cancelled) a->prefilled(res.prompt_logprobs);
    if (res.finish != FinishReason::Cancelled) {
      DecodeOptions dopt;
      dopt.max_tokens = req.max_tokens >= 0 ? req.max_tokens : info_.n_ctx;
      dopt.n_ctx = info_.n_ctx;
      dopt.n_vocab = nv;
      dopt.speculative = req.speculative.value_or(opts_.speculative);
      // Greedy with nothing that needs the logits on the host: a GPU decode step copies
      // back token ids only (the cpu backend has no such path and ignores it).
      dopt.device_argmax = req.sampling.temperature <= 0 && req.sampling.presence_penalty == 0 &&
                           req.sampling.frequency_penalty == 0 && req.logprobs < 0;
      dopt.lookup.draft_max = std::max(1, opts_.spec_draft_max);
      dopt.lookup.draft_init = std::min(dopt.lookup.draft_init, dopt.lookup.draft_max);
      HistoryModel seq(*model_, history_);
      ds = decode(
          seq, sampler, logits, req.prompt, dopt, [this](int32_t t) { return tok_.is_eog(t); },
          [&](int32_t t, const float* row) {
            TokenEvent ev{t, tok_.token_to_piece(t), std::nullopt};
            // The raw logits of t's position (verified positions' rows are bit-identical
            // to plain decoding's, speculative.h), before penalties and temperature.
            if (req.logprobs >= 0) ev.logprobs = token_logprobs(row, nv, t, req.logprobs);
            res.text += ev.piece;
            if (on_token && !on_token(ev)) return false;
            return !a->cancel_requested();  // the client went away: stop before the next forward pass
          });
      res.completion_tokens = ds.completion_tokens;
      res.finish = ds.finish;
      res.spec_drafted = ds.drafted;
      res.spec_accepted = ds.accepted;
    }
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

  CacheStats cache_stats() const override {
    const kvcache::BlockStats b = kv_->stats();
    CacheStats s;
    {
      std::lock_guard<std::mutex> slock(stats_mu_);
      s.hit_tokens = hit_tokens_;
      s.miss_tokens = miss_tokens_;
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
    return s;
  }

 private:
  /// The running sequence for the decode loop: the model's forward()/truncate(), with
  /// history_ kept equal to the tokens whose K/V the cache holds.
  class HistoryModel final : public DecodeModel {
   public:
    HistoryModel(exec::SequenceModel& m, std::vector<int32_t>& history) : m_(m), history_(history) {}
    int n_past() const override { return m_.n_past(); }
    // Generated tokens, alone or a speculative batch: Rows::Generated, so a verified
    // position's logits are exactly those of decoding it alone.
    void forward(const int32_t* tokens, int n_tokens, int n_out, std::vector<float>& logits) override {
      m_.forward(tokens, n_tokens, n_out, exec::SequenceModel::Rows::Generated, logits);
      history_.insert(history_.end(), tokens, tokens + n_tokens);
    }
    void truncate(int n) override {
      m_.truncate(n);
      history_.resize(static_cast<size_t>(m_.n_past()));
    }
    bool forward_argmax(const int32_t* tokens, int n_tokens, int n_out, std::vector<int32_t>& ids) override {
      if (!m_.forward_argmax(tokens, n_tokens, n_out, exec::SequenceModel::Rows::Generated, ids)) return false;
      history_.insert(history_.end(), tokens, tokens + n_tokens);
      return true;
    }

   private:
    exec::SequenceModel& m_;
    std::vector<int32_t>& history_;
  };

  struct CacheAdmission final : Admission {
    CacheAdmission(const GenerateRequest& r, kvcache::BlockManager& m) : Admission(r, 0), kv(&m) {}
    ~CacheAdmission() override { release_pins(); }
    void set_cached(int n) { cached_tokens_ = n; }
    void release_pins() {
      if (!pinned.empty()) kv->unpin(pinned);
      pinned.clear();
    }
    kvcache::BlockManager* kv;
    std::vector<kvcache::BlockKey> keys;    // the prompt's full-block keys
    std::vector<kvcache::BlockKey> pinned;  // keys[0 .. matched) while pinned
    bool ran = false;
  };

  /// Publishes every full block of the sequence (history_, whose K/V positions
  /// 0..n_past-1 are computed) that the cache may not hold yet. `prompt_keys` are the
  /// prompt's block keys; keys of later blocks continue the chain. Caller holds mu_.
  void publish_blocks(const std::vector<kvcache::BlockKey>& prompt_keys) {
    if (!kv_->prefix_cache_enabled()) return;
    const size_t n_full = static_cast<size_t>(model_->n_past()) / kvcache::kBlockTokens;
    const std::vector<int>& table = model_->block_table();
    std::vector<kvcache::BlockKey> keys(prompt_keys.begin(), prompt_keys.begin() + std::min(n_full, prompt_keys.size()));
    if (n_full > keys.size()) {
      const size_t from = keys.size() * kvcache::kBlockTokens;
      const std::vector<kvcache::BlockKey> more =
          kvcache::block_keys(kv_->model(), history_.data() + from, n_full * kvcache::kBlockTokens - from,
                              keys.empty() ? kvcache::BlockKey{} : keys.back());
      keys.insert(keys.end(), more.begin(), more.end());
    }
    // Deepest block first: a prefix ends up more recently used than its extensions, so
    // LRU eviction never strands a chain's tail behind an evicted head.
    for (size_t b = keys.size(); b-- > 0;) kv_->publish(keys[b], table[b]);
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

  EngineOptions opts_;
  package::LoadedPackage pkg_;
  tokenizer::Tokenizer tok_;
  std::optional<chat::ChatTemplate> template_;
  exec::BackendModel bm_;  // the backend, the KV page pool and prefix cache, the model
  kvcache::BlockManager* kv_ = nullptr;   // bm_.kv
  exec::SequenceModel* model_ = nullptr;  // bm_.model
  ModelInfo info_;
  std::mutex mu_;                 // one sequence at a time
  std::vector<int32_t> history_;  // the running sequence's tokens (K/V computed for the first n_past)
  mutable std::mutex stats_mu_;
  uint64_t hit_tokens_ = 0, miss_tokens_ = 0;
  SpecStats spec_;
  std::string failure_;  // the device error that stopped the engine (stats_mu_)
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
