// bench_atomize: time of frontend_ast::atomize on real source files (issue 15 item 4: the
// aim is <= 2 ms per 10k tokens of code on the 2-core dev VM; a benchmark, never a test).
//
//   build/bench/bench-atomize [--reps N] FILE...
//
// Per file: the language from its name, the median over N repetitions of a first parse
// (the content made unique per repetition by a trailing comment, so the content-hash
// cache cannot answer), of a cached call (same content again) and of an edited version:
// after the unique version was atomized under a file identity, one identifier on the
// line at 10% of the file is renamed (a turn of an agent session), then one on the line at
// 50% of that version (the next turn); each is atomized under the same identity, so it is
// re-parsed incrementally from the previous version's tree. The edited columns are the
// medians of each, and per 10k tokens the median of both together. Every edited version's
// atoms are checked against a fresh parse (atomize_uncached), outside the timing. Tokens are estimated as
// bytes / 3.6 (SmolLM2's tokenizer on the bench sessions' code and prose: 6,922 characters,
// 1,910 tokens); the per-10k-token figure uses that estimate and says so.
#include <algorithm>
#include <cctype>
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

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// `code` with the first identifier (3+ characters) at or after the line holding `frac`
/// of its bytes renamed (suffix "_v2"); `code` unchanged if there is none.
std::string rename_at(const std::string& code, double frac) {
  const size_t nl = code.rfind('\n', static_cast<size_t>(static_cast<double>(code.size()) * frac));
  size_t i = nl == std::string::npos ? 0 : nl + 1;
  auto ident = [&](size_t k) { return std::isalnum(static_cast<unsigned char>(code[k])) || code[k] == '_'; };
  while (i < code.size()) {
    size_t j = i;
    while (j < code.size() && ident(j)) ++j;
    if (j - i >= 3 && !std::isdigit(static_cast<unsigned char>(code[i]))) return std::string(code).insert(j, "_v2");
    i = j + 1;
  }
  return code;
}

bool same_atoms(const fa::Atomization& a, const fa::Atomization& b) {
  if (a.parsed != b.parsed || a.has_error != b.has_error || a.atoms.size() != b.atoms.size()) return false;
  for (size_t i = 0; i < a.atoms.size(); ++i)
    if (a.atoms[i].begin != b.atoms[i].begin || a.atoms[i].end != b.atoms[i].end || a.atoms[i].kind != b.atoms[i].kind ||
        a.atoms[i].name != b.atoms[i].name || a.atoms[i].hash != b.atoms[i].hash)
      return false;
  return true;
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
  double total_bytes = 0, total_ms = 0, total_edited_ms = 0;
  int mismatches = 0;
  std::printf("| file | language | bytes | ~tokens | atoms | first parse ms | cached ms | edit at 10%% ms | edit at 50%% ms |"
              " first parse ms / 10k tokens | edited ms / 10k tokens |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
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
    std::vector<double> first, cached, edit10, edit50;
    size_t atoms = 0;
    for (int r = 0; r < reps; ++r) {
      const std::string stamp = std::to_string(r) + " " + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
      const std::string unique = code + "\n" + std::string(comment) + "bench " + stamp + "\n";
      auto t0 = std::chrono::steady_clock::now();
      auto az = fa::atomize(unique, lang);
      first.push_back(ms_since(t0));
      t0 = std::chrono::steady_clock::now();
      auto again = fa::atomize(unique, lang);
      cached.push_back(ms_since(t0));
      atoms = az->atoms.size();
      if (again.get() != az.get()) std::fprintf(stderr, "cache miss on the second call (%s)\n", path.c_str());

      // Turns of a session on one file: the unique version, then two edits of it.
      const std::string file = path + "#" + stamp;
      const std::string v1 = unique + std::string(comment) + "turn 1\n";
      fa::atomize(v1, lang, file);
      const std::string v2 = rename_at(v1, 0.1), v3 = rename_at(v2, 0.5);
      for (const auto& [version, times] : {std::pair{&v2, &edit10}, std::pair{&v3, &edit50}}) {
        t0 = std::chrono::steady_clock::now();
        auto ez = fa::atomize(*version, lang, file);
        times->push_back(ms_since(t0));
        if (!same_atoms(*ez, *fa::atomize_uncached(*version, lang))) {
          ++mismatches;
          std::fprintf(stderr, "edited %s: atoms differ from a fresh parse\n", path.c_str());
        }
      }
    }
    const double tokens = static_cast<double>(code.size()) / kBytesPerToken;
    const double ms = median(first);
    std::vector<double> edited = edit10;
    edited.insert(edited.end(), edit50.begin(), edit50.end());
    const double edited_ms = median(edited);
    total_bytes += static_cast<double>(code.size());
    total_ms += ms;
    total_edited_ms += edited_ms;
    std::printf("| %s | %s | %zu | %.0f | %zu | %.3f | %.4f | %.3f | %.3f | %.2f | %.2f |\n", path.c_str(),
                std::string(fa::language_name(lang)).c_str(), code.size(), tokens, atoms, ms, median(cached), median(edit10),
                median(edit50), ms / tokens * 10000.0, edited_ms / tokens * 10000.0);
  }
  const double all_tokens = total_bytes / kBytesPerToken;
  const fa::AtomizeCacheStats stats = fa::atomize_cache_stats();
  std::printf("all: %.0f bytes (~%.0f tokens at %.1f bytes/token): first parse %.2f ms, %.2f ms per 10k tokens; "
              "edited %.2f ms, %.2f ms per 10k tokens\n",
              total_bytes, all_tokens, kBytesPerToken, total_ms, total_ms / all_tokens * 10000.0, total_edited_ms,
              total_edited_ms / all_tokens * 10000.0);
  std::printf("atomize: %llu parses (%llu incremental), %llu cache hits; edited atoms equal to a fresh parse: %s\n",
              static_cast<unsigned long long>(stats.parses), static_cast<unsigned long long>(stats.incremental),
              static_cast<unsigned long long>(stats.hits), mismatches ? "NO" : "yes");
  return mismatches ? 1 : 0;
}
