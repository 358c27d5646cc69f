// bench_atomize: time of frontend_ast::atomize on real source files (issue 15 item 4: the
// aim is <= 2 ms per 10k tokens of code on the 2-core dev VM; a benchmark, never a test).
//
//   build/bench/bench-atomize [--reps N] [--cpu] FILE...
//
// --cpu: time with the thread's CPU clock instead of the wall clock (on a VM whose cores
// other work shares, wall times of the same run varied by +-30% on 2026-12-03).
//
// Per file: the language from its name, the median over N repetitions of a first parse
// (the content made unique per repetition by a trailing comment, so the content-hash
// cache cannot answer; atomize() parses a skeleton, function bodies skipped where it can,
// frontend_ast/atomize.h), of a full parse of the same content (atomize_uncached with
// ParseMode::Full: every byte parsed, as atomize() did before 2026-12-05; the share of
// bytes the skeleton skipped beside it; its atoms must equal the first parse's, checked
// outside the timing), of a cached call (same content again) and of an edited version:
// after the unique version was atomized under the file's path as its identity, one
// identifier on the line at 10% of the file is renamed (a turn of an agent session; the
// first line from there on where the rename makes no new parse error), then one at 50% of
// that version (the next turn); each is atomized under the same identity, so it is
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
#include <ctime>
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

bool g_cpu_clock = false;  // --cpu

/// Now in ms: wall time (steady clock), or with --cpu this thread's CPU time
/// (CLOCK_THREAD_CPUTIME_ID), which time spent waiting for a core shared with other work
/// does not inflate.
double now_ms() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double ms_since(double t0) { return now_ms() - t0; }

/// `code` with "_v2" inserted at each of `offsets` (ascending).
std::string renamed(const std::string& code, const std::vector<size_t>& offsets) {
  std::string out = code;
  for (size_t k = offsets.size(); k-- > 0;) out.insert(offsets[k], "_v2");
  return out;
}

/// The byte offset just after the last identifier (3+ characters) of the first line at or
/// after the one holding `frac` of `code`'s bytes where appending "_v2" to it (on top of
/// the renames at `before`) keeps the parse as clean as the original's (no new ERROR node:
/// renaming a keyword would make one): a rename as an agent makes it. npos if none.
size_t rename_offset(const std::string& code, double frac, fa::Language lang, std::vector<size_t> before) {
  const bool base_error = fa::atomize_uncached(code, lang)->has_error;
  auto ident = [&](size_t k) { return std::isalnum(static_cast<unsigned char>(code[k])) || code[k] == '_'; };
  const size_t nl = code.rfind('\n', static_cast<size_t>(static_cast<double>(code.size()) * frac));
  size_t line = nl == std::string::npos ? 0 : nl + 1;
  for (int tries = 0; tries < 200 && line < code.size(); ++tries) {
    const size_t eol = std::min(code.find('\n', line), code.size());
    size_t offset = std::string::npos;
    for (size_t i = line; i < eol;) {
      size_t j = i;
      while (j < eol && ident(j)) ++j;
      if (j - i >= 3 && !std::isdigit(static_cast<unsigned char>(code[i]))) offset = j;
      i = j + 1;
    }
    if (offset != std::string::npos) {
      std::vector<size_t> all = before;
      all.push_back(offset);
      std::sort(all.begin(), all.end());
      if (fa::atomize_uncached(renamed(code, all), lang)->has_error == base_error) return offset;
    }
    line = eol + 1;
  }
  return std::string::npos;
}

/// Same atoms (kind, bytes, name, hash); with `flags`, also the same parsed / has_error (a
/// skeleton parse does not see errors inside the bodies it skipped, a full parse does).
bool same_atoms(const fa::Atomization& a, const fa::Atomization& b, bool flags = true) {
  if ((flags && (a.parsed != b.parsed || a.has_error != b.has_error)) || a.atoms.size() != b.atoms.size()) return false;
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
    if (std::strcmp(argv[i], "--cpu") == 0) {
      g_cpu_clock = true;
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      files.push_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench-atomize [--reps N] [--cpu] FILE...\n");
    return 2;
  }
  constexpr double kBytesPerToken = 3.6;
  double total_bytes = 0, total_ms = 0, total_edited_ms = 0, total_full_ms = 0;
  int mismatches = 0, full_mismatches = 0;
  std::printf("| file | language | bytes | ~tokens | atoms | first parse ms | cached ms | edit at 10%% ms | edit at 50%% ms |"
              " first parse ms / 10k tokens | edited ms / 10k tokens | full parse ms | full parse ms / 10k tokens | skipped |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
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
    std::vector<double> first, cached, edit10, edit50, full;
    size_t skipped = 0;
    // The two renames (same offsets in every repetition's version: they only differ at the end).
    const size_t at10 = rename_offset(code, 0.1, lang, {});
    const size_t at50 = at10 == std::string::npos ? std::string::npos : rename_offset(code, 0.5, lang, {at10});
    size_t atoms = 0;
    for (int r = 0; r < reps; ++r) {
      const std::string stamp = std::to_string(r) + " " + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
      const std::string unique = code + "\n" + std::string(comment) + "bench " + stamp + "\n";
      double t0 = now_ms();
      auto az = fa::atomize(unique, lang);
      first.push_back(ms_since(t0));
      t0 = now_ms();
      auto again = fa::atomize(unique, lang);
      cached.push_back(ms_since(t0));
      atoms = az->atoms.size();
      skipped = az->skipped_bytes;
      if (again.get() != az.get()) std::fprintf(stderr, "cache miss on the second call (%s)\n", path.c_str());
      t0 = now_ms();
      auto fz = fa::atomize_uncached(unique, lang, fa::ParseMode::Full);
      full.push_back(ms_since(t0));
      if (!same_atoms(*az, *fz, /*flags=*/false)) {
        ++full_mismatches;
        std::fprintf(stderr, "%s: first-parse atoms differ from a full parse\n", path.c_str());
      }
      if (at50 == std::string::npos) continue;

      // Turns of a session on one file: the unique version, then two edits of it. One
      // identity per file (a unique one per repetition would have every put evict another
      // file's tree, timed with the edit).
      const std::string& file = path;
      const std::string v1 = unique + std::string(comment) + "turn 1\n";
      fa::atomize(v1, lang, file);
      std::vector<size_t> both = {at10, at50};
      std::sort(both.begin(), both.end());
      const std::string v2 = renamed(v1, {at10}), v3 = renamed(v1, both);
      for (const auto& [version, times] : {std::pair{&v2, &edit10}, std::pair{&v3, &edit50}}) {
        t0 = now_ms();
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
    const double full_ms = median(full);
    total_full_ms += full_ms;
    std::printf("| %s | %s | %zu | %.0f | %zu | %.3f | %.4f | %.3f | %.3f | %.2f | %.2f | %.3f | %.2f | %.0f%% |\n", path.c_str(),
                std::string(fa::language_name(lang)).c_str(), code.size(), tokens, atoms, ms, median(cached), median(edit10),
                median(edit50), ms / tokens * 10000.0, edited_ms / tokens * 10000.0, full_ms, full_ms / tokens * 10000.0,
                100.0 * static_cast<double>(skipped) / static_cast<double>(code.size()));
  }
  const double all_tokens = total_bytes / kBytesPerToken;
  const fa::AtomizeCacheStats stats = fa::atomize_cache_stats();
  std::printf("all (%s): %.0f bytes (~%.0f tokens at %.1f bytes/token): first parse %.2f ms, %.2f ms per 10k tokens; "
              "edited %.2f ms, %.2f ms per 10k tokens; full parse %.2f ms, %.2f ms per 10k tokens\n",
              g_cpu_clock ? "thread CPU time" : "wall time", total_bytes, all_tokens, kBytesPerToken, total_ms, total_ms / all_tokens * 10000.0, total_edited_ms,
              total_edited_ms / all_tokens * 10000.0, total_full_ms, total_full_ms / all_tokens * 10000.0);
  std::printf("atomize: %llu parses (%llu incremental), %llu cache hits, %llu from a skeleton (%llu fell back to a full parse), "
              "%llu edits without a parse; edited atoms equal to a fresh parse: %s; first-parse atoms equal to a full parse: %s\n",
              static_cast<unsigned long long>(stats.parses), static_cast<unsigned long long>(stats.incremental),
              static_cast<unsigned long long>(stats.hits), static_cast<unsigned long long>(stats.skeleton),
              static_cast<unsigned long long>(stats.fallbacks), static_cast<unsigned long long>(stats.unparsed), mismatches ? "NO" : "yes",
              full_mismatches ? "NO" : "yes");
  return mismatches || full_mismatches ? 1 : 0;
}
