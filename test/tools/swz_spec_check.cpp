// swz-spec-check: checks behind speculative decoding on a real package, driven by
// test/python/test_speculative.py.
//
//   swz-spec-check batch PACKAGE TEXT N OUT.json
//     Batch invariance of the cpu backend through forward()/truncate() only: the prompt
//     TEXT is prefilled (Rows::Prompt), N tokens are decoded greedily one per forward
//     pass (Rows::Generated; the reference rows); then, for batch sizes 2..17 at several
//     offsets, the cache is truncated back (or refilled in one batch) and the same tokens
//     are forwarded as one Rows::Generated batch with n_out = batch.
//     Each row must be bit-identical (memcmp) to the reference row of its position. Also
//     compares a prompt prefilled in one pass with chunked prefill. Writes
//     {"rows_compared", "rows_differing", "max_abs_diff", "chunked_prefill_identical"}.
//
//   swz-spec-check parity PACKAGE PROMPTS.json MAX_TOKENS OUT.json
//     Through the Engine API (prefix cache and all): for each prompt, greedy generation
//     with speculative decoding off and on, in an order that gives the speculative run a
//     full prefix-cache hit for even prompts and none or a partial one for odd prompts.
//     PROMPTS.json: [{"messages": [{"role","content"}...]} | {"text": "..."}].
//     OUT.json: [{"plain": [ids], "spec": [ids], "plain_text", "spec_text", "finish_plain",
//     "finish_spec", "cached_spec", "prompt_tokens", "drafted", "accepted"}].
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "exec/backend_model.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "ggml/thread_pool.h"
#include "kvcache/block_manager.h"
#include "package/package.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;

int batch_check(const std::string& package, const std::string& text, int n, const std::string& out_path) {
  auto pkg = swz::package::open_package(package);
  auto tok = swz::tokenizer::Tokenizer::from_gguf(pkg.gguf);
  const std::vector<int32_t> prompt = tok.encode(text, true, false);
  const int np = static_cast<int>(prompt.size());
  const int n_ctx_model = np + n + 32;
  swz::kvcache::CacheOptions kv_opts;  // a plain paged KV cache for one sequence
  kv_opts.n_pages = (n_ctx_model + swz::kvcache::kBlockTokens - 1) / swz::kvcache::kBlockTokens + 1;
  kv_opts.prefix_cache = false;
  swz::exec::BackendModel bm = swz::exec::open_backend_model(pkg, n_ctx_model, std::move(kv_opts), "");
  swz::exec::SequenceModel& model = *bm.model;
  using Rows = swz::exec::SequenceModel::Rows;
  const int nv = model.n_vocab();
  std::vector<float> logits;
  model.forward(prompt.data(), np, 1, Rows::Prompt, logits);
  std::vector<float> last_prompt_row = logits;
  // Reference: one token per pass. ref[i] = logits after tokens[i] (tokens[0] from the prompt).
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> ref;
  int32_t t = swz::engine::argmax(logits.data(), nv);
  for (int i = 0; i < n; ++i) {
    tokens.push_back(t);
    model.forward(&t, 1, 1, Rows::Generated, logits);
    ref.push_back(logits);
    t = swz::engine::argmax(logits.data(), nv);
  }
  long compared = 0, differing = 0;
  double max_diff = 0;
  for (int b = 2; b <= 17; ++b) {
    for (int off = 0; off + b <= n; off += 7) {
      // truncate() only rolls back: refill up to the offset (in one batch: its K/V must
      // equal the reference's too, or the rows below differ).
      if (model.n_past() < np + off) {
        const int have = model.n_past() - np;
        model.forward(tokens.data() + have, off - have, 1, Rows::Generated, logits);
      }
      model.truncate(np + off);
      model.forward(tokens.data() + off, b, b, Rows::Generated, logits);
      for (int r = 0; r < b; ++r) {
        const float* got = logits.data() + static_cast<size_t>(r) * nv;
        const float* want = ref[static_cast<size_t>(off + r)].data();
        ++compared;
        if (std::memcmp(got, want, sizeof(float) * nv) != 0) {
          ++differing;
          if (std::getenv("SWZ_SPEC_CHECK_VERBOSE")) std::cerr << "differs: batch " << b << " offset " << off << " row " << r << "\n";
          for (int k = 0; k < nv; ++k) max_diff = std::max(max_diff, static_cast<double>(std::abs(got[k] - want[k])));
        }
      }
    }
  }
  // Chunked prefill (as a prefix-cache hit leaves it: the rest of the prompt in one pass).
  bool chunked_ok = true;
  for (int cut : {1, np / 3, np / 2, np - 1}) {
    if (cut <= 0 || cut >= np) continue;
    model.truncate(0);
    model.forward(prompt.data(), cut, 1, Rows::Prompt, logits);
    model.forward(prompt.data() + cut, np - cut, 1, Rows::Prompt, logits);
    chunked_ok &= std::memcmp(logits.data(), last_prompt_row.data(), sizeof(float) * nv) == 0;
  }
  json out = {{"rows_compared", compared},
              {"rows_differing", differing},
              {"max_abs_diff", max_diff},
              {"chunked_prefill_identical", chunked_ok},
              {"prompt_tokens", np}};
  std::ofstream(out_path) << out.dump();
  return 0;
}

const char* finish_name(swz::engine::FinishReason f) {
  switch (f) {
    case swz::engine::FinishReason::Stop: return "stop";
    case swz::engine::FinishReason::Length: return "length";
    default: return "cancelled";
  }
}

int parity(const std::string& package, const std::string& prompts_path, int max_tokens, const std::string& out_path) {
  swz::engine::EngineOptions eo;
  eo.n_ctx = 2048;
  // Every draft the lookup proposes: the test counts accepted and rejected drafts, which
  // draft pricing would make depend on this machine's step times.
  eo.spec_pricing = false;
  auto engine = swz::engine::Engine::load(package, eo);
  std::ifstream in(prompts_path);
  if (!in) throw std::runtime_error("cannot read " + prompts_path);
  const json prompts = json::parse(in);
  std::vector<swz::engine::GenerateRequest> reqs;
  for (const json& p : prompts) {
    swz::engine::GenerateRequest r;
    if (p.contains("messages")) {
      std::vector<swz::engine::ChatMessage> msgs;
      for (const json& m : p.at("messages")) msgs.push_back({m.at("role"), m.at("content")});
      r.prompt = engine->tokenize_chat(msgs, true);
    } else {
      r.prompt = engine->tokenize(p.at("text").get<std::string>(), true, false);
    }
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    reqs.push_back(std::move(r));
  }
  struct Gen {
    std::vector<int32_t> ids;
    swz::engine::GenerateResult res;
  };
  auto gen = [&](swz::engine::GenerateRequest r, bool spec) {
    r.speculative = spec;
    Gen g;
    g.res = engine->generate(r, [&](const swz::engine::TokenEvent& ev) {
      g.ids.push_back(ev.token);
      return true;
    });
    return g;
  };
  std::vector<Gen> plain(reqs.size()), spec(reqs.size());
  // Even i: plain(i) then spec(i) (a full hit); odd i: spec(i) first, right after a
  // different prompt, then plain(i).
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i % 2 == 0) {
      plain[i] = gen(reqs[i], false);
      spec[i] = gen(reqs[i], true);
    } else {
      spec[i] = gen(reqs[i], true);
      plain[i] = gen(reqs[i], false);
    }
  }
  json out = json::array();
  for (size_t i = 0; i < reqs.size(); ++i) {
    out.push_back({{"plain", plain[i].ids},
                   {"spec", spec[i].ids},
                   {"plain_text", plain[i].res.text},
                   {"spec_text", spec[i].res.text},
                   {"finish_plain", finish_name(plain[i].res.finish)},
                   {"finish_spec", finish_name(spec[i].res.finish)},
                   {"completion_plain", plain[i].res.completion_tokens},
                   {"completion_spec", spec[i].res.completion_tokens},
                   {"cached_spec", spec[i].res.cached_tokens},
                   {"prompt_tokens", spec[i].res.prompt_tokens},
                   {"drafted", spec[i].res.spec_drafted},
                   {"accepted", spec[i].res.spec_accepted},
                   {"drafted_plain", plain[i].res.spec_drafted}});
  }
  std::ofstream(out_path) << out.dump(-1, ' ', false, json::error_handler_t::replace);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "batch" && argc == 6) return batch_check(argv[2], argv[3], std::stoi(argv[4]), argv[5]);
    if (mode == "parity" && argc == 6) return parity(argv[2], argv[3], std::stoi(argv[4]), argv[5]);
    std::cerr << "usage: swz-spec-check batch PACKAGE TEXT N OUT.json\n"
                 "       swz-spec-check parity PACKAGE PROMPTS.json MAX_TOKENS OUT.json\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "swz-spec-check: " << e.what() << "\n";
    return 1;
  }
}
