//===- compile.h - swizzlec compile: GGUF -> .swz package -------*- C++ -*-===//
//
// The target-independent half of `swizzlec compile`: open the GGUF, read and check the
// model (models/), build the decoder graph, hash the tensor data, and fill every
// manifest field except the kernels. Each target then adds its kernels (and kernel
// files): compile_cpu.h for "cpu"; GPU targets come from compiler/mlir (MLIR codegen)
// and are only linked when that part is built (SWZ_HAVE_GPU_CODEGEN).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <string>

#include "gguf/gguf.h"
#include "model.h"
#include "package/package.h"

namespace swz::compiler {

/// Thrown for a request swizzlec cannot honour (unknown target, target not built in).
class CompileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Messages to the user. `progress(label, done, total)` reports a long step.
struct Log {
  bool verbose = false;
  std::function<void(const std::string &)> info;  ///< shown with -v
  std::function<void(const std::string &, uint64_t, uint64_t)> progress;
};

struct CompileOptions {
  std::string ggufPath;
  std::string target = "cpu";
  std::string outDir;   ///< the package directory to write, e.g. "model.swz"
  /// GPU targets: print the graph's MLIR after this stage ("import", "fuse",
  /// "outline") to stdout instead of writing a package.
  std::string emitMlir;
  /// GPU targets: read <scheduleDir>/<target>.json instead of the built-in schedule.
  std::string scheduleDir;
};

/// The swizzlec version string written as created_by, e.g. "swizzlec 0.1.0".
std::string swizzlecVersion();

/// True when this swizzlec can compile for `target` (cpu always; GPU targets only with
/// the MLIR codegen linked in). Throws CompileError for a name outside
/// package::known_targets(), listing the known ones.
bool targetAvailable(const std::string &target);

/// Fills every manifest field but `kernels` for `f` (opened from `absPath`): model,
/// hparams, tokenizer, source_gguf (size, XXH3-128 of the data section, tensor count),
/// graph (models::build_graph) and the mmap-in-place weight plan of the tensors the graph
/// reads. Throws models::UnsupportedModel / gguf::Error for an unsupported or malformed model.
package::Manifest buildBaseManifest(const gguf::File &f, const std::string &absPath, const std::string &target,
                                    const Log &log);

/// GPU hook, implemented by compile_gpu.cpp (library swz_compiler_gpu) when it is built;
/// the driver calls it only when compiled with SWZ_HAVE_GPU_CODEGEN. Adds the kernels of
/// `m.target` to `m.kernels` and their files (.ptx/.spv, names relative to the package)
/// to `files`. Kernels whose tiles follow the target's schedule are checked against it:
/// the built-in compiler/schedules/<target>.json, or `<scheduleDir>/<target>.json`.
void addGpuKernels(package::Manifest &m, const gguf::File &f, package::PackageFiles &files, const Log &log,
                   const std::string &scheduleDir = "");

/// GPU hook: the model graph of `m` as MLIR after `stage` of swizzlec's graph pipeline
/// ("import": swz ops in func.func @forward; "fuse": after swz-fuse; "outline": after
/// swz-outline-kernels for m.target). Throws CompileError.
std::string graphMlir(const package::Manifest &m, const std::string &stage);

/// The whole of `swizzlec compile`: checks the target first (fails fast, writing
/// nothing), then builds and writes the package. Throws CompileError, package::Error,
/// models::UnsupportedModel or gguf::Error.
void compilePackage(const CompileOptions &opts, const Log &log);

} // namespace swz::compiler
