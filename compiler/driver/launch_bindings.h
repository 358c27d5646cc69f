//===- launch_bindings.h - launch records of the launch contract -*- C++ -*-===//
//
// What swizzlec writes into a GPU package's graph ops as `launches`
// (docs/package-format.md, "The launch contract"): for each kernel a graph op runs,
// which buffer, weight, KV pool, scratch or value binds to every kernel argument, the
// grid and the derived symbols, as rules over the run-time symbols T, pos0, ctx,
// kv_pages. All per-kernel knowledge of arguments lives here (launch_bindings.cpp, one binder
// per kernel family); the runtime only evaluates the records. Plain C++: no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_DRIVER_LAUNCH_BINDINGS_H
#define SWZ_COMPILER_DRIVER_LAUNCH_BINDINGS_H

#include "codegen/GpuCompiler.h"
#include "package/package.h"

#include <functional>
#include <map>
#include <string>

namespace swz::compiler {

/// The compiled kernel a KernelRef names (its argument types and `swz.grid` rule).
using KernelLookup = std::function<const codegen::CompiledKernel &(const codegen::KernelRef &)>;

/// The `launches` array of launch group `group` of manifest `m` (its anchor graph op is
/// group.graphOps.front(); the others are fused into it): one record per kernel of
/// group.kernels, in order. A graph op with `rows: "output"` runs its decode kernels on
/// every pass (phase "all"). Throws CompileError when a kernel has no binder, a binder's
/// arguments do not match the kernel's, or the graph lacks what a binder needs.
nlohmann::json launchRecords(const package::Manifest &m, const codegen::LaunchGroup &group,
                             const KernelLookup &kernelOf);

/// Greedy sampling on the device (graph.sampling.argmax): the pseudo op
/// {"op": "argmax", "in": [graph output], "out": "argmax_ids", "rows": "output"} with its
/// launch records: the `argmax` kernels in order (argmax_f32; or argmax_split_f32 then
/// argmax_reduce_f32 through the scratches argmax_part_v / argmax_part_i) over the output
/// rows of the logits into the scratch "argmax_ids", one i32 token id per row. Throws
/// CompileError as launchRecords.
nlohmann::json samplingRecord(const package::Manifest &m, const std::vector<codegen::KernelRef> &argmax,
                              const KernelLookup &kernelOf);

/// K/V moved between KV cache slots on the device (graph.kv_move; exec::BatchModel::move_kv,
/// the approx cache mode): {"op": "kv_move", "launches": [...]}, one record of `move`
/// (kv_move_rope_f16) for each attention op's layer over T moves in the `kv_moves`
/// binding; null for a graph without attention (no KV cache). Throws CompileError as
/// launchRecords.
nlohmann::json kvMoveRecord(const package::Manifest &m, const codegen::KernelRef &move,
                            const KernelLookup &kernelOf);

/// `expr` (the launch contract's grammar) with each symbol of `values` replaced by its
/// expression, then simplified (simplifyExpr). Throws CompileError on a malformed rule.
std::string substituteExpr(const std::string &expr,
                           const std::map<std::string, std::string> &values);

/// The three comma-separated rules of a kernel's `swz.grid` ("ceil(N/4), ceil(T/8), 1").
std::vector<std::string> splitGridRules(const std::string &grid);

/// `expr` with constants folded: whole-constant subexpressions evaluated, and each
/// product's constant factors gathered into one reduced fraction after its symbols
/// ("ceil(T*9/3/8)" -> "ceil(T*3/8)", "ceil(576/4)" -> "144"). Same value for every
/// assignment of the symbols.
std::string simplifyExpr(const std::string &expr);

} // namespace swz::compiler

#endif // SWZ_COMPILER_DRIVER_LAUNCH_BINDINGS_H
