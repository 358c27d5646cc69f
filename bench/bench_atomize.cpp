// bench_atomize: time of frontend_ast::atomize on real source files (issue 15 item 4: the
// aim is <= 2 ms per 10k tokens of code on the 2-core dev VM; a benchmark, never a test).
//
//   build/bench/bench-atomize [--reps N] FILE...
//
// Per file: the language from its name, the median over N repetitions of a first parse
// (the content made unique per repetition by a trailing comment, so the content-hash
// cache cannot answer) and of a cached call (same content again). Tokens are estimated as
// bytes / 3.6 (SmolLM2's tokenizer on the bench sessions' code and prose: 6,922 characters,
// 1,910 tokens); the per-10k-token figure uses that estimate and says so.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend_ast/atomize.h"
#include "frontend_ast/language.h"

namespace fa = swz::frontend_ast;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      files.push_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench-atomize [--reps N] FILE...\n");
    return 2;
  }
  constexpr double kBytesPerToken = 3.6;
  double total_bytes = 0, total_ms = 0;
  std::printf("| file | language | bytes | ~tokens | atoms | parse ms | cached ms | parse ms / 10k tokens |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const std::string& path : files) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string code = ss.str();
    const fa::Language lang = fa::language_from_path(path);
    const std::string_view comment = fa::line_comment(lang);
    std::vector<double> first, cached;
    size_t atoms = 0;
    for (int r = 0; r < reps; ++r) {
      const std::string unique = code + "\n" + std::string(comment) + "bench " + std::to_string(r) + " " +
                                 std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\n";
      auto t0 = std::chrono::steady_clock::now();
      auto az = fa::atomize(unique, lang);
      auto t1 = std::chrono::steady_clock::now();
      auto again = fa::atomize(unique, lang);
      auto t2 = std::chrono::steady_clock::now();
      atoms = az->atoms.size();
      if (again.get() != az.get()) std::fprintf(stderr, "cache miss on the second call (%s)\n", path.c_str());
      first.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      cached.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    const double tokens = static_cast<double>(code.size()) / kBytesPerToken;
    const double ms = median(first);
    total_bytes += static_cast<double>(code.size());
    total_ms += ms;
    std::printf("| %s | %s | %zu | %.0f | %zu | %.3f | %.4f | %.2f |\n", path.c_str(), std::string(fa::language_name(lang)).c_str(),
                code.size(), tokens, atoms, ms, median(cached), ms / tokens * 10000.0);
  }
  std::printf("all: %.0f bytes (~%.0f tokens at %.1f bytes/token), parse %.2f ms: %.2f ms per 10k tokens\n", total_bytes,
              total_bytes / kBytesPerToken, kBytesPerToken, total_ms, total_ms / (total_bytes / kBytesPerToken) * 10000.0);
  return 0;
}
