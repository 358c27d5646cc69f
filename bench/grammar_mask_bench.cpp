// swz-grammar-bench: time per token of grammar masks (runtime/grammar/matcher.h) on a real
// vocabulary. For each workload a valid document is tokenized with the model's own tokenizer
// and replayed: per token, mask() (the whole-vocabulary bitmask of allowed tokens) is timed,
// then the token is accepted. Reports median / p90 / p99 / max µs per token, the cold first
// mask, and cache hit rates; bench/RESULTS.md records runs.
//
//   swz-grammar-bench MODEL.gguf [--repeat N]
//
// Every workload runs N times with a fresh matcher over the same compiled grammar: run 1 pays
// the lazily built tables (a schema's first request), runs 2..N find them warm (the server
// reuses compiled grammars, matcher.h). Percentiles of run 1 ("cold") and of runs 2..N ("warm").
//
//   swz-grammar-bench MODEL.gguf --generate PACKAGE [--samples K] [--max-tokens T] [--save FILE]
//   swz-grammar-bench MODEL.gguf --replay FILE
//
// Real generations instead of hand-written documents: PACKAGE (compiled from MODEL.gguf)
// generates each format's output through the engine (greedy, then K sampled at temperature
// 0.8 with seeds 1..K), and the generated token ids are replayed through matchers, timing
// every mask(): "cold" replays each generation over a freshly compiled grammar (a server's
// first request of that format), "steady" replays all of a format's generations one after
// another over one grammar (a server that has served the format before; the first
// generation excluded). The replay does exactly the mask work of the generation (a matcher
// is deterministic in its tokens); only CPU-cache effects of the forward pass are missing.
// --save writes the generations' token ids (one line each: workload index, ids), --replay
// times a saved set again without the engine. --clock cpu times masks in the thread's CPU
// time (a loaded machine's waits for a core left out) instead of wall time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#ifdef SWZ_GRAMMAR_BENCH_ENGINE
#include "engine/engine.h"
#endif
#include "gguf/gguf.h"
#include "grammar/formats.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace swz;
using Clock = std::chrono::steady_clock;
bool cpu_clock = false;  ///< --clock cpu: thread CPU time (a loaded machine's waits left out)

/// Microseconds on the chosen clock.
double now_us() {
  if (cpu_clock) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
  }
  return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}
using ojson = nlohmann::ordered_json;

struct Workload {
  const char* name;
  std::shared_ptr<const grammar::Grammar> g;
  std::string doc;
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

/// Per-token mask() times (µs) of replaying `ids` through a fresh matcher of `g`; false when
/// a token is masked (the generation disagrees with the grammar: a bug).
bool replay(const std::shared_ptr<const grammar::Grammar>& g, const std::shared_ptr<const grammar::Vocabulary>& vocab,
            const std::vector<int32_t>& ids, std::vector<double>& out) {
  grammar::Matcher m(g, vocab);
  for (int32_t id : ids) {
    const double a = now_us();
    const uint64_t* mask = m.mask();
    out.push_back(now_us() - a);
    if (!((mask[static_cast<uint32_t>(id) >> 6] >> (id & 63)) & 1) || !m.accept(id)) return false;
  }
  return true;
}

struct GenWorkload {
  const char* name;
  std::function<grammar::Grammar()> compile;  ///< a fresh Grammar object per call (cold tables)
  std::string prompt;
};

using Generations = std::vector<std::vector<std::vector<int32_t>>>;  ///< [workload][generation]: token ids

#ifdef SWZ_GRAMMAR_BENCH_ENGINE
/// Each workload's generations through PACKAGE: greedy, then `samples` at temperature 0.8
/// (seeds 1..samples), each at most max_tokens tokens, constrained by the workload's grammar.
Generations generate(const std::string& package, const std::vector<GenWorkload>& ws, int samples, int max_tokens) {
  engine::EngineOptions o;
  o.n_ctx = 4096;
  o.prefix_cache = false;
  o.speculative = false;
  std::unique_ptr<engine::Engine> e = engine::Engine::load(package, o);
  Generations out;
  for (const GenWorkload& w : ws) {
    out.emplace_back();
    auto g = std::make_shared<const grammar::Grammar>(w.compile());
    for (int k = 0; k <= samples; ++k) {
      engine::GenerateRequest r;
      engine::ChatPrompt cp;
      cp.messages = {engine::ChatMessage("user", w.prompt)};
      r.prompt = e->tokenize_chat_prompt(cp);
      r.max_tokens = max_tokens;
      r.sampling.temperature = k == 0 ? 0.0f : 0.8f;
      r.sampling.seed = static_cast<uint64_t>(k);
      r.grammar = g;
      std::vector<int32_t> ids;
      e->generate(r, [&](const engine::TokenEvent& t) {
        ids.push_back(t.token);
        return true;
      });
      out.back().push_back(std::move(ids));
    }
  }
  return out;
}
#else
Generations generate(const std::string&, const std::vector<GenWorkload>&, int, int) {
  throw std::runtime_error("built without the engine: --generate is unavailable (use --replay)");
}
#endif

/// Writes / reads generations: one line per generation, "WORKLOAD_INDEX id id ...".
void save_generations(const std::string& path, const Generations& gens) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  for (size_t w = 0; w < gens.size(); ++w)
    for (const auto& ids : gens[w]) {
      std::fprintf(f, "%zu", w);
      for (int32_t id : ids) std::fprintf(f, " %d", id);
      std::fprintf(f, "\n");
    }
  std::fclose(f);
}

Generations load_generations(const std::string& path, size_t n_workloads) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  Generations gens(n_workloads);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    size_t w = 0;
    if (!(ls >> w) || w >= n_workloads) throw std::runtime_error(path + ": bad line");
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    gens[w].push_back(std::move(ids));
  }
  return gens;
}

/// Replays every generation (see the file comment) and prints the table. Returns the exit code.
int replay_mode(const std::shared_ptr<const grammar::Vocabulary>& vocab, const std::vector<GenWorkload>& ws,
                const Generations& gens) {
  std::printf("%-26s %5s %6s | %9s %9s %9s | %9s %9s %9s\n", "format", "gens", "tokens", "cold med", "cold p99", "cold max",
              "stdy med", "stdy p99", "stdy max");
  std::vector<double> all_cold, all_steady;
  for (size_t w = 0; w < ws.size(); ++w) {
    std::vector<double> cold, steady;
    size_t n_tokens = 0;
    for (const auto& ids : gens[w]) {
      n_tokens += ids.size();
      if (!replay(std::make_shared<const grammar::Grammar>(ws[w].compile()), vocab, ids, cold)) {
        std::fprintf(stderr, "%s: a generated token is masked on replay\n", ws[w].name);
        return 1;
      }
    }
    auto shared = std::make_shared<const grammar::Grammar>(ws[w].compile());
    for (size_t i = 0; i < gens[w].size(); ++i) {
      std::vector<double> t;
      if (!replay(shared, vocab, gens[w][i], t)) return 1;
      if (i > 0) steady.insert(steady.end(), t.begin(), t.end());
    }
    all_cold.insert(all_cold.end(), cold.begin(), cold.end());
    all_steady.insert(all_steady.end(), steady.begin(), steady.end());
    std::printf("%-26s %5zu %6zu | %9.2f %9.1f %9.1f | %9.2f %9.1f %9.1f\n", ws[w].name, gens[w].size(), n_tokens,
                pct(cold, 0.5), pct(cold, 0.99), pct(cold, 1.0), pct(steady, 0.5), pct(steady, 0.99), pct(steady, 1.0));
  }
  std::printf("all formats, cold: median %.2f us/token, p99 %.1f (%zu masks); steady: median %.2f, p99 %.1f (%zu masks)\n",
              pct(all_cold, 0.5), pct(all_cold, 0.99), all_cold.size(), pct(all_steady, 0.5), pct(all_steady, 0.99),
              all_steady.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: swz-grammar-bench MODEL.gguf [--repeat N]\n"
                 "       swz-grammar-bench MODEL.gguf --generate PACKAGE [--samples K] [--max-tokens T] [--save FILE]\n"
                 "       swz-grammar-bench MODEL.gguf --replay FILE\n"
                 "       (any mode: --clock cpu times masks in thread CPU time instead of wall time)\n");
    return 2;
  }
  int repeat = 3, samples = 2, max_tokens = 600;
  std::string package, save, replay_file;
  for (int i = 2; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--generate")) package = argv[++i];
    else if (!std::strcmp(argv[i], "--samples")) samples = std::max(0, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--max-tokens")) max_tokens = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--save")) save = argv[++i];
    else if (!std::strcmp(argv[i], "--replay")) replay_file = argv[++i];
    else if (!std::strcmp(argv[i], "--clock")) cpu_clock = !std::strcmp(argv[++i], "cpu");
  }
  const gguf::File f = gguf::File::open(argv[1]);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(f);
  const auto t0 = Clock::now();
  std::vector<std::string> pieces(static_cast<size_t>(tok.n_vocab()));
  std::vector<bool> eog(pieces.size());
  for (int32_t t = 0; t < tok.n_vocab(); ++t) {  // as PackageEngine::vocab()
    eog[static_cast<size_t>(t)] = tok.is_eog(t);
    if (!(tok.token_attr(t) & tokenizer::kAttrControl)) pieces[static_cast<size_t>(t)] = tok.token_to_piece(t);
  }
  auto vocab = std::make_shared<const grammar::Vocabulary>(pieces, eog);
  const double build_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("vocabulary: %d tokens, %zu trie nodes, built in %.1f ms\n", vocab->n_vocab(), vocab->n_trie_nodes(), build_ms);

  const ojson household = ojson::parse(R"({"type": "object", "properties": {
      "family_name": {"type": "string"},
      "members": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
      "pets": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
               "species": {"enum": ["cat", "dog", "fish"]}}, "required": ["name", "species"], "additionalProperties": false}},
      "has_garden": {"type": "boolean"}, "rating": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
    "required": ["family_name", "members", "pets", "has_garden", "rating"], "additionalProperties": false,
    "$defs": {"Person": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
              "city": {"type": "string"}}, "required": ["name", "age", "city"], "additionalProperties": false}}})");
  if (!package.empty() || !replay_file.empty()) {
    const std::string vuln = "import os\n\ndef run(cmd):\n    os.system('sh -c ' + cmd)\n\nrun(input())\n";
    const grammar::DiffOriginal original{"app.py", vuln};
    std::vector<GenWorkload> gws = {
        {"json_schema (household)", [&] { return grammar::compile_json_schema(household); },
         "Describe the Smith household as JSON: two people, one cat, a garden."},
        {"json_object", [] { return grammar::json_object_grammar(); },
         "Return a JSON object listing three colours with their names and hex codes."},
        {"sarif-2.1.0", [] { return grammar::builtin_format("sarif-2.1.0"); },
         "Report the security problems of this Python file app.py as SARIF 2.1.0:\n\n" + vuln},
        {"unified-diff", [] { return grammar::unified_diff_grammar(); },
         "Write a unified diff that renames function run to execute in app.py:\n\n" + vuln},
        {"unified-diff (anchored)", [&] { return grammar::unified_diff_grammar(&original); },
         "Fix the command injection in app.py with a unified diff (use subprocess.run with a list):\n\n" + vuln}};
    Generations gens;
    if (!replay_file.empty()) {
      gens = load_generations(replay_file, gws.size());
      std::printf("real generations from %s\n", replay_file.c_str());
    } else {
      gens = generate(package, gws, samples, max_tokens);
      std::printf("real generations: %s, greedy + %d sampled (T=0.8), max_tokens %d\n", package.c_str(), samples, max_tokens);
      if (!save.empty()) save_generations(save, gens);
    }
    return replay_mode(vocab, gws, gens);
  }
  std::vector<Workload> ws;
  ws.push_back({"json_schema (household)", std::make_shared<const grammar::Grammar>(grammar::compile_json_schema(household)),
                "{\n  \"family_name\": \"Smith\",\n  \"members\": [\n    {\"name\": \"Alice Smith\", \"age\": 34, \"city\": \"Paris\"},\n"
                "    {\"name\": \"Bob Smith\", \"age\": 36, \"city\": \"Paris\"}\n  ],\n  \"pets\": [{\"name\": \"Tom\", \"species\": "
                "\"cat\"}],\n  \"has_garden\": true,\n  \"rating\": 4.5\n}"});
  ws.push_back({"json_object", std::make_shared<const grammar::Grammar>(grammar::json_object_grammar()),
                "{\"colors\": [{\"name\": \"red\", \"hex\": \"#ff0000\"}, {\"name\": \"green\", \"hex\": \"#00ff00\"}], "
                "\"count\": 2, \"note\": \"Primary colours of light, as used by screens and projectors.\"}"});
  ws.push_back({"sarif-2.1.0", std::make_shared<const grammar::Grammar>(grammar::builtin_format("sarif-2.1.0")),
                "{\"version\": \"2.1.0\", \"runs\": [{\"tool\": {\"driver\": {\"name\": \"swizzle\", \"rules\": [{\"id\": \"PY001\", "
                "\"shortDescription\": {\"text\": \"Command injection\"}}]}}, \"results\": [{\"ruleId\": \"PY001\", \"level\": "
                "\"error\", \"message\": {\"text\": \"os.system is called with user input\"}, \"locations\": [{\"physicalLocation\": "
                "{\"artifactLocation\": {\"uri\": \"app.py\"}, \"region\": {\"startLine\": 4}}}]}]}]}"});
  ws.push_back({"unified-diff", std::make_shared<const grammar::Grammar>(grammar::unified_diff_grammar()),
                "--- a/app.py\n+++ b/app.py\n@@ -1,4 +1,4 @@\n-import os\n+import subprocess\n \n def run(cmd):\n-    "
                "os.system('sh -c ' + cmd)\n+    subprocess.run(['sh', '-c', cmd], check=True)\n"});
  std::vector<double> all_cold, all_warm;
  std::printf("%-26s %6s | %9s %9s %9s %9s | %9s %9s %9s\n", "workload", "tokens", "cold med", "cold p90", "cold p99", "cold max",
              "warm med", "warm p90", "warm max");
  for (const Workload& w : ws) {
    const std::vector<int32_t> ids = tok.encode(w.doc, false, false);
    if (!grammar::matches(*w.g, w.doc)) {
      std::fprintf(stderr, "%s: the document is not a sentence of its grammar\n", w.name);
      return 1;
    }
    std::vector<double> warm, run1;
    for (int r = 0; r < repeat; ++r) {
      grammar::Matcher m(w.g, vocab);
      for (size_t i = 0; i < ids.size(); ++i) {
        const double a = now_us();
        const uint64_t* mask = m.mask();
        const double d = now_us() - a;
        if (!((mask[static_cast<uint32_t>(ids[i]) >> 6] >> (ids[i] & 63)) & 1)) {
          std::fprintf(stderr, "%s: token %zu (%d) is masked\n", w.name, i, ids[i]);
          return 1;
        }
        if (!m.accept(ids[i])) return 1;
        (r == 0 ? run1 : warm).push_back(d);
      }
    }
    all_cold.insert(all_cold.end(), run1.begin(), run1.end());
    all_warm.insert(all_warm.end(), warm.begin(), warm.end());
    std::printf("%-26s %6zu | %9.2f %9.2f %9.1f %9.1f | %9.2f %9.2f %9.1f\n", w.name, ids.size(), pct(run1, 0.5), pct(run1, 0.9),
                pct(run1, 0.99), pct(run1, 1.0), pct(warm, 0.5), pct(warm, 0.9), pct(warm, 1.0));
  }
  std::printf("all workloads, cold: median %.2f us/token, p90 %.1f, p99 %.1f (%zu masks)\n", pct(all_cold, 0.5),
              pct(all_cold, 0.9), pct(all_cold, 0.99), all_cold.size());
  std::printf("all workloads, warm: median %.2f us/token, p90 %.1f, p99 %.1f (%zu masks)\n", pct(all_warm, 0.5),
              pct(all_warm, 0.9), pct(all_warm, 0.99), all_warm.size());
  return 0;
}
