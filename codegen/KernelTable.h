//===- KernelTable.h - which built-in kernels implement a graph op -*- C++ -*-===//
//
// The table swizzlec's kernel outlining (swz-outline-kernels) and package writer
// (compiler/driver/compile_gpu.cpp) share. Plain C++: no MLIR in this header.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_CODEGEN_KERNELTABLE_H
#define SWZ_CODEGEN_KERNELTABLE_H

#include <map>
#include <string>
#include <vector>

namespace swz::codegen {

/// One kernel of a graph op's implementation.
struct KernelRef {
  std::string source;  ///< codegen/kernels/<source>.mlir (builtinKernelSource)
  std::string entry;   ///< gpu.func name in it
  std::string phase;   ///< "all" (every forward), "decode" (T small) or "prefill"
  bool ptx = true;     ///< used for sm_* targets
  bool spirv = true;   ///< used for the spirv target
  /// Which prefill passes run it, by their prompt-row count against the launch group's
  /// skinny_max_rows (LaunchGroup::skinnyMaxRows): every one, at most that many rows, or
  /// more. The launch record's grid carries the condition (a zero grid is skipped).
  enum class Rows { Any, Small, Large } rows = Rows::Any;
};

/// Built-in GPU implementations keyed "<op>.<type>[.<shape class>][+<fused epilogue>]",
/// e.g. "matmul.q4_1", "matmul.q4_1+residual", "attention.f16kv", "attention.f16kv.hd128",
/// "matmul.f16.k8" (F16 rows on 16-byte boundaries), "matmul.f16.k8.w16" (and fewer rows
/// than the schedule's gemv.f16_mma_split_k_below_rows; Codegen.cpp's kernelKey),
/// "matmul.q4_k.mma" and "matmul.q4_k.mma.w8" (the schedule's gemv.q4_k_mma and
/// gemv.q4_k_mma_split_k_below_rows), "matmul.q4_k.skinny" (a ".skinny" suffix on Q4_K,
/// Q6_K and Q8_0 keys: the schedule's gemm.skinny_max_rows). An op runs its "all"
/// kernels plus either its "decode" kernels (decode / speculative-verification
/// batches) or its "prefill" kernels (prompt chunks), in table order.
const std::map<std::string, std::vector<KernelRef>> &gpuImpls();

/// The kernels implementing `key` for a PTX (`ptx`) or SPIR-V target; empty when the
/// key is unknown or the kernels for that format do not cover every forward pass
/// ("all" kernels, or decode and prefill kernels both).
std::vector<KernelRef> kernelsFor(const std::string &key, bool ptx);

} // namespace swz::codegen

#endif // SWZ_CODEGEN_KERNELTABLE_H
