// swz-eval: runs a package's model directly (tokenizer + cpu backend, no sampling
// heuristics, no end-of-generation stop) for parity tests against llama.cpp.
//
//   swz-eval PACKAGE PROMPTS.json N_PREDICT OUT.json
//
// PROMPTS.json: [{"text": "...", "special": bool, "force": [ids]?}] — tokenized like
// llama.cpp's llama_tokenize(text, add_special=true, parse_special=special).
// OUT.json: [{"prompt_tokens": [...], "greedy": [N_PREDICT ids], "logits": [n_vocab floats
// at the last prompt position], "forced_argmax": [...], "forced_margin": [...]}].
// Greedy = argmax, ties to the lowest id, exactly N_PREDICT tokens even past an
// end-of-generation token. With "force", a second pass feeds those tokens instead
// (teacher forcing) and records our argmax and top-2 logit margin at each step.
#include <cmath>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "exec/backend_model.h"
#include "engine/sampler.h"
#include "ggml/thread_pool.h"
#include "package/package.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: swz-eval PACKAGE PROMPTS.json N_PREDICT OUT.json\n";
    return 2;
  }
  try {
    auto pkg = swz::package::open_package(argv[1]);
    auto tok = swz::tokenizer::Tokenizer::from_gguf(pkg.gguf);
      std::ifstream in(argv[2]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[2]);
    nlohmann::json prompts = nlohmann::json::parse(in);
    const int n_predict = std::stoi(argv[3]);
    // One model for all prompts (truncate between them), sized for the longest.
    int n_ctx = 1;
    for (const auto& p : prompts) {
      const size_t n = tok.encode(p.at("text").get<std::string>(), true, p.value("special", false)).size();
      const size_t f = p.contains("force") ? p.at("force").size() : 0;
      n_ctx = std::max<int>(n_ctx, static_cast<int>(n + std::max<size_t>(n_predict, f) + 1));
    }
    const int n_ctx_model = n_ctx;
    swz::kvcache::CacheOptions kv_opts;  // a plain paged KV cache for one sequence
    kv_opts.n_pages = (n_ctx_model + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens + 1;
    kv_opts.prefix_cache = false;
    swz::exec::BackendModel bm = swz::exec::open_backend_model(pkg, n_ctx_model, std::move(kv_opts), "");
    swz::exec::SequenceModel& model = *bm.model;
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : prompts) {
      std::vector<int32_t> ids = tok.encode(p.at("text").get<std::string>(), true, p.value("special", false));
      model.truncate(0);
      std::vector<float> logits;
      model.forward(ids.data(), static_cast<int>(ids.size()), 1, swz::exec::SequenceModel::Rows::Prompt, logits);
      nlohmann::json rec = {{"prompt_tokens", ids}, {"logits", logits}};
      std::vector<int32_t> greedy;
      for (int i = 0; i < n_predict; ++i) {
        int32_t t = swz::engine::argmax(logits.data(), model.n_vocab());
        greedy.push_back(t);
        if (i + 1 < n_predict) model.forward(&t, 1, 1, swz::exec::SequenceModel::Rows::Generated, logits);
      }
      rec["greedy"] = greedy;
      if (p.contains("force")) {
        std::vector<int32_t> force = p.at("force").get<std::vector<int32_t>>();
        std::vector<int32_t> am;
        std::vector<float> margin;
        model.truncate(0);
        model.forward(ids.data(), static_cast<int>(ids.size()), 1, swz::exec::SequenceModel::Rows::Prompt, logits);
        for (size_t i = 0; i < force.size(); ++i) {
          int32_t best = swz::engine::argmax(logits.data(), model.n_vocab());
          float second = -INFINITY;
          for (int v = 0; v < model.n_vocab(); ++v)
            if (v != best) second = std::max(second, logits[v]);
          am.push_back(best);
          margin.push_back(logits[best] - second);
          if (i + 1 < force.size()) model.forward(&force[i], 1, 1, swz::exec::SequenceModel::Rows::Generated, logits);
        }
        rec["forced_argmax"] = am;
        rec["forced_margin"] = margin;
      }
      out.push_back(std::move(rec));
    }
    std::ofstream of(argv[4]);
    of << out.dump();
    of.close();
    if (!of) throw std::runtime_error(std::string("cannot write ") + argv[4]);
  } catch (const std::exception& e) {
    std::cerr << "swz-eval: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
