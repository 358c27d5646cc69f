//===- compile.cpp - swizzlec compile: GGUF -> .swz package ---------------===//
#include "compile.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "compile_cpu.h"

#ifndef SWZ_VERSION
#define SWZ_VERSION "0.0.0"
#endif

namespace swz::compiler {

namespace fs = std::filesystem;
using nlohmann::json;

std::string swizzlecVersion() { return std::string("swizzlec ") + SWZ_VERSION; }

bool targetAvailable(const std::string &target) {
  const auto &known = package::known_targets();
  if (std::find(known.begin(), known.end(), target) == known.end())
    throw CompileError("unknown target '" + target + "' (known: " + package::known_targets_text() + ")");
  if (target == "cpu")
    return true;
#ifdef SWZ_HAVE_GPU_CODEGEN
  return true;
#else
  return false;
#endif
}

package::Manifest buildBaseManifest(const gguf::File &f, const std::string &absPath, const std::string &target,
                                    const Log &log) {
  package::Manifest m;
  m.target = target;
  m.created_by = swizzlecVersion();

  models::HParams hp = models::read_hparams(f);
  models::check_tensors(f, hp);
  if (log.info)
    log.info("model: " + hp.arch + ", " + std::to_string(hp.n_layer) + " layers, n_embd " +
             std::to_string(hp.n_embd) + ", n_vocab " + std::to_string(hp.n_vocab));
  m.model.architecture = hp.arch;
  m.model.name = f.get_string_or("general.name", fs::path(absPath).stem().string());
  m.model.hparams = hp.to_json();

  if (!f.has("tokenizer.ggml.model"))
    throw gguf::Error(absPath + ": no tokenizer (tokenizer.ggml.model is missing)");
  m.tokenizer.model = f.get_string("tokenizer.ggml.model");
  m.tokenizer.pre = f.get_string_or("tokenizer.ggml.pre", "default");
  m.tokenizer.n_vocab = static_cast<int64_t>(f.get("tokenizer.ggml.tokens").as_array().items.size());
  if (m.tokenizer.n_vocab != hp.n_vocab)
    throw models::UnsupportedModel(absPath + ": tokenizer has " + std::to_string(m.tokenizer.n_vocab) +
                                   " tokens but token_embd.weight has " + std::to_string(hp.n_vocab) + " rows");
  if (f.has("tokenizer.chat_template"))
    m.tokenizer.chat_template = f.get_string("tokenizer.chat_template");

  m.graph = models::build_graph(hp, f);

  for (const models::TensorSpec &spec : models::tensor_specs(hp)) {
    const gguf::TensorInfo &t = f.require_tensor(spec.name);
    m.weight_plan.tensors.push_back({t.name, t.type, t.ne, f.data_offset() + t.offset, t.n_bytes});
  }

  m.source_gguf.path = absPath;
  m.source_gguf.size = f.file_size();
  m.source_gguf.tensor_count = f.tensors().size();
  m.source_gguf.digest = package::content_hash(f, [&](uint64_t done, uint64_t total) {
    if (log.progress)
      log.progress("hashing tensor data", done, total);
  });
  if (log.info)
    log.info("content hash (xxh3-128 of " + std::to_string(f.file_size() - f.data_offset()) +
             " bytes of tensor data): " + m.source_gguf.digest);
  return m;
}

void compilePackage(const CompileOptions &opts, const Log &log) {
  if (!targetAvailable(opts.target))
    throw CompileError("target " + opts.target +
                       " needs the MLIR codegen, which is not built into this swizzlec "
                       "(configure with -DSWZ_BUILD_COMPILER=ON); only --target cpu is available");
  if (!opts.emitMlir.empty() && opts.target == "cpu")
    throw CompileError("--emit-mlir needs a GPU target (sm_80, sm_86, sm_89, sm_90, spirv): the cpu target "
                       "runs the graph with swizzle-rt's built-in kernels, not through MLIR");
  if (opts.outDir.empty() && opts.emitMlir.empty())
    throw CompileError("no output package given (-o model.swz)");
  std::error_code ec;
  fs::path abs = fs::absolute(opts.ggufPath, ec);
  if (ec || !fs::is_regular_file(abs, ec))
    throw CompileError(opts.ggufPath + ": no such file");
  abs = fs::weakly_canonical(abs, ec);

  gguf::File f = gguf::File::open(abs.string());
  package::Manifest m = buildBaseManifest(f, abs.string(), opts.target, log);
  package::PackageFiles files;
#ifdef SWZ_HAVE_GPU_CODEGEN
  if (!opts.emitMlir.empty()) {
    std::fputs(graphMlir(m, opts.emitMlir).c_str(), stdout);
    return;
  }
#endif
  if (opts.target == "cpu") {
    addCpuKernels(m);
  } else {
#ifdef SWZ_HAVE_GPU_CODEGEN
    addGpuKernels(m, f, files, log, opts.scheduleDir);
#endif
  }
  package::write_package(opts.outDir, m, files);
  if (log.info)
    log.info("wrote " + opts.outDir + ": " + std::to_string(m.kernels.size()) + " kernels, " +
             std::to_string(m.weight_plan.tensors.size()) + " weight tensors");
}

} // namespace swz::compiler
