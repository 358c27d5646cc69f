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
#include "synth.h"

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

void addSynthOptions(CLI::App &cmd, swz::compiler::SynthOptions &o) {
  std::string presets;
  for (const auto &n : swz::models::preset_names())
    presets += (presets.empty() ? "" : ", ") + n;
  cmd.add_option("--arch", o.arch, "llama | qwen2 | qwen3 (default: the preset's)");
  cmd.add_option("--preset", o.preset, "model shape: " + presets);
  cmd.add_option("--type", o.type, "f32 f16 bf16 q8_0 q4_0 q4_1 q4_k q5_k q6_k, or q4_k_m (llama.cpp's Q4_K_M mix)")->capture_default_str();
  cmd.add_option("--vocab-from", o.vocabFrom, "copy the tokenizer (and n_vocab) from this GGUF");
  cmd.add_option("--seed", o.seed, "weights are a pure function of the seed")->capture_default_str();
  cmd.add_option("--name", o.name, "general.name");
  cmd.add_option("-j,--threads", o.threads, "generator threads (default: all cores)");
  cmd.add_option("--n-layer", o.nLayer, "override block_count");
  cmd.add_option("--n-embd", o.nEmbd, "override embedding_length");
  cmd.add_option("--n-head", o.nHead, "override attention.head_count");
  cmd.add_option("--n-head-kv", o.nHeadKv, "override attention.head_count_kv");
  cmd.add_option("--head-dim", o.headDim, "override attention.key_length");
  cmd.add_option("--n-ff", o.nFf, "override feed_forward_length");
  cmd.add_option("--n-vocab", o.nVocab, "override the vocabulary size (built-in vocabulary only)");
  cmd.add_option("--n-ctx", o.nCtx, "override context_length");
  cmd.add_option("--tied-output", o.tiedOutput, "1: LM head = token_embd; 0: separate output.weight");
  cmd.add_option("-o,--output", o.output, "the GGUF file to write")->required();
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"swizzlec: compiles GGUF models into .swz packages for swizzle-rt"};
  app.set_version_flag("--version", swz::compiler::swizzlecVersion());
  app.require_subcommand(1);
  bool verbose = false;

  swz::compiler::CompileOptions copts;
  CLI::App *compile = app.add_subcommand("compile", "compile a GGUF model into a .swz package");
  compile->add_option("model", copts.ggufPath, "the GGUF model file")->required();
  compile->add_option("--target", copts.target, "cpu | sm_80 | sm_86 | sm_89 | sm_90 | spirv")->capture_default_str();
  compile->add_option("-o,--output", copts.outDir, "the package directory to write, e.g. model.swz");
  compile->add_option("--emit-mlir", copts.emitMlir,
                      "GPU targets: print the graph's MLIR after a pipeline stage (import | fuse | "
                      "outline) instead of writing a package");
  compile->add_option("--schedule-dir", copts.scheduleDir,
                      "GPU targets: read <dir>/<target>.json as the tile schedule instead of the "
                      "built-in compiler/schedules/<target>.json");
  compile->add_flag("-v,--verbose", verbose, "report each step");

  swz::compiler::SynthOptions sopts;
  CLI::App *synth = app.add_subcommand("synth", "write a random-weight GGUF in the shape of a real model");
  addSynthOptions(*synth, sopts);
  synth->add_flag("-v,--verbose", verbose, "report each step");

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
    } else if (*synth) {
      swz::compiler::runSynth(sopts, log);
    }
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
