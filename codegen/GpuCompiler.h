//===- GpuCompiler.h - compile GPU kernels to PTX / SPIR-V --------*- C++ -*-===//
//
// The C++ entry point swizzlec uses to turn kernel sources (gpu.module with
// gpu.func kernels written in gpu/nvgpu/memref/arith/scf/math, see
// codegen/kernels/) into PTX or SPIR-V plus a launch record per kernel.
// This header has no MLIR includes, so the driver stays cheap to compile.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_CODEGEN_GPUCOMPILER_H
#define SWZ_CODEGEN_GPUCOMPILER_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace swz::codegen {

/// One compiled kernel and what a runtime needs to launch it.
struct CompiledKernel {
  std::string module;  ///< gpu.module name = kernel file stem ("swz_kernels").
  std::string entry;   ///< kernel function name ("gemm_f16_mma_sync").
  std::string target;  ///< "sm_80", "sm_90", ..., or "spirv".
  std::string format;  ///< "ptx" (text) or "spv" (SPIR-V words, little endian).
  std::string binary;  ///< the PTX text or SPIR-V bytes of the whole module.
  /// Threads per block / workgroup size, from the kernel's known_block_size
  /// (PTX) or spirv.entry_point_abi workgroup_size (SPIR-V); 0 if unknown.
  std::array<int64_t, 3> block{0, 0, 0};
  /// Grid rule from the kernel's `swz.grid` attribute, e.g. "N/8, M/16, 1".
  std::string grid;
  /// MLIR types of the kernel arguments in order, e.g. "memref<?x?xf16>".
  /// PTX passes each memref<...xRxT> as 3 + 2R scalars (allocated pointer,
  /// aligned pointer, offset, sizes, strides); SPIR-V binds memref i and
  /// scalar j as storage buffers (set 0, binding = argument index).
  std::vector<std::string> arguments;
  /// The static bank-conflict analysis (swz-check-bank-conflicts) of the module's
  /// shared-memory tiles read by ldmatrix or written by cp.async, one line per tile,
  /// e.g. "memref.global @gemm_x: tile 192x64 of 2-byte elements (128-byte rows,
  /// Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way"; empty without such tiles.
  std::vector<std::string> sharedMemory;
};

/// Compiles every kernel in `mlirSource` for `target`:
///  * both: swz-check-bank-conflicts first, which fails the compilation if a
///    shared-memory tile marked `swz.conflict_free` is bank-conflicted (its report
///    goes to CompiledKernel::sharedMemory);
///  * "sm_XY": swz-materialize-swizzle, then MLIR's gpu-lower-to-nvvm pipeline
///    (nvgpu -> nvvm -> LLVM NVPTX), PTX text. `cudaRoot` (e.g. /usr/local/cuda)
///    is where libdevice is found for math.* functions; empty = $CUDA_ROOT.
///  * "spirv": convert-math-to-spirv, convert-gpu-to-spirv, spirv ABI lowering,
///    serialized SPIR-V. The gpu.module must carry a spirv.target_env.
/// Throws std::invalid_argument for an unknown target and std::runtime_error
/// with the MLIR diagnostics if parsing or any pass fails.
std::vector<CompiledKernel> compileGpuKernels(std::string_view mlirSource,
                                              const std::string &target,
                                              const std::string &cudaRoot = "");

/// The kernel sources built into the library: (file stem, MLIR text) of every
/// codegen/kernels/*.mlir listed in codegen/CMakeLists.txt (SWZ_KERNELS).
const std::vector<std::pair<std::string, std::string>> &builtinKernelSources();

/// The built-in kernel source with file stem `stem` (e.g. "rms_norm_f32").
/// Throws std::invalid_argument naming the known stems if there is none.
const std::string &builtinKernelSource(const std::string &stem);

} // namespace swz::codegen

#endif // SWZ_CODEGEN_GPUCOMPILER_H
