//===- main.cpp - swizzlec: the Swizzle compiler driver -------------------===//
//
//   swizzlec compile model.gguf --target cpu -o model.swz [-v]
//   swizzlec synth --arch qwen3 --preset qwen3-0.6b --type q8_0 -o out.gguf
//
// Errors go to stderr as "swizzlec: error: ..." with exit status 1 (2 for usage errors).
// This translation unit and the cpu path use no MLIR; GPU targets come from
// compiler/mlir when it is built.
//
//===----------------------------------------------------------------------===//
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "compile.h"
#ifdef SWZ_WITH_SYNTH
#include "synth.h"
#endif

namespace {

using namespace swz;

/// Percent progress on stderr: rewritten in place on a terminal; with -v on a
/// non-terminal, one line per 10%.
struct ProgressPrinter {
  bool tty = ::isatty(2);
  bool verbose = false;
  std::string label;
  int last = -1;
  void operator()(const std::string &what, uint64_t done, uint64_t total) {
    int pct = total ? static_cast<int>(done * 100 / total) : 100;
    if (what != label) {
      label = what;
      last = -1;
    }
    if (pct == last)
      return;
    if (tty) {
      std::fprintf(stderr, "\r%s: %3d%%", what.c_str(), pct);
      if (pct == 100)
        std::fputc('\n', stderr);
    } else if (verbose && (pct / 10 != last / 10 || last < 0)) {
      std::fprintf(stderr, "%s: %d%%\n", what.c_str(), pct);
    }
    last = pct;
  }
};

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"swizzlec: compiles GGUF models into .swz packages for swizzle-rt"};
  app.set_version_flag("--version", swz::compiler::swizzlecVersion());
  app.require_subcommand(1);
  bool verbose = false;

  swz::compiler::CompileOptions copts;
  CLI::App *compile = app.add_subcommand("compile", "compile a GGUF model into a .swz package");
  compile->add_option("model", copts.ggufPath, "the GGUF model file")->required();
  compile->add_option("--target", copts.target, "cpu | sm_80 | sm_90 | spirv")->capture_default_str();
  compile->add_option("-o,--output", copts.outDir, "the package directory to write, e.g. model.swz")->required();
  compile->add_flag("-v,--verbose", verbose, "report each step");

#ifdef SWZ_WITH_SYNTH
  swz::compiler::SynthOptions sopts;
  CLI::App *synth = app.add_subcommand("synth", "write a random-weight GGUF in the shape of a real model");
  swz::compiler::addSynthOptions(*synth, sopts);
  synth->add_flag("-v,--verbose", verbose, "report each step");
#endif

  CLI11_PARSE(app, argc, argv);

  ProgressPrinter printer;
  printer.verbose = verbose;
  swz::compiler::Log log;
  log.verbose = verbose;
  if (verbose)
    log.info = [](const std::string &s) { std::cerr << "swizzlec: " << s << "\n"; };
  log.progress = [&](const std::string &what, uint64_t done, uint64_t total) { printer(what, done, total); };

  try {
    auto t0 = std::chrono::steady_clock::now();
    if (*compile) {
      swz::compiler::compilePackage(copts, log);
    }
#ifdef SWZ_WITH_SYNTH
    else if (*synth) {
      swz::compiler::runSynth(sopts, log);
    }
#endif
    if (verbose) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "swizzlec: done in %.2f s\n", s);
    }
  } catch (const std::exception &e) {
    if (printer.tty && printer.last >= 0 && printer.last < 100)
      std::fputc('\n', stderr);
    std::cerr << "swizzlec: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
