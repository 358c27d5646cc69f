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
#include <map>
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/KernelTable.h"
#include "compiler/mlir/Schedule.h"

namespace swz::codegen {

/// One compiled kernel and what a runtime needs to launch it.
struct CompiledKernel {
  std::string module;  ///< gpu.module name = kernel file stem ("swz_kernels").
  std::string entry;   ///< kernel function name ("gemm_f16").
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
  /// Workgroup (shared) memory of the kernel in bytes: the workgroup-space memref.globals
  /// it reads and the workgroup allocations / attributions it makes, or its
  /// `swz.dynamic_smem` bytes where that is a number and more (the tiles swz-dynamic-smem
  /// places, with their alignment slack). Counted from the IR, so it exists for SPIR-V
  /// too (ptxas reports PTX's static part).
  int64_t workgroupBytes = 0;
  /// Which entry of the target's tile schedule (compiler/schedules/<target>.json) the
  /// kernel's tiles follow, from its `swz.schedule` attribute: "gemm", "attention" or
  /// empty (no schedule). swizzlec checks the tiles against it.
  std::string schedule;
  /// Dynamic shared memory rule from the kernel's `swz.dynamic_smem` attribute
  /// (bytes, e.g. "2*64*head_dim*2"); empty = none.
  std::string dynamicSmem;

  /// Static bank-conflict analysis of one shared-memory tile the kernel reads
  /// with ldmatrix.x4 or fills with 16-byte cp.async (compiler/mlir/BankConflicts.h).
  struct SmemTile {
    std::string name;        ///< the memref.global's symbol
    std::string layout;      ///< e.g. "16x64 2-byte (128-byte rows, Swizzle<3,3,3>)"
    unsigned ldmatrixDegree = 0; ///< worst 8-lane phase of ldmatrix.x4, 1 = conflict-free
    unsigned cpAsyncDegree = 0;  ///< worst 8-lane phase of cp.async.16 stores
    bool claimedConflictFree = false; ///< the tile carries `swz.conflict_free`
    int64_t rows = 0, cols = 0;  ///< tile shape in elements (memref.global's type)
    unsigned elemBytes = 2;
    std::optional<std::array<unsigned, 3>> swizzle; ///< {B, M, S}; none = row-major
  };
  /// Every ldmatrix / cp.async tile of this kernel; empty when it stages no such tile
  /// (scalar shared-memory reductions are not analysed). Compilation fails (the
  /// swz-check-bank-conflicts pass runs in the pipeline) when a claim is contradicted.
  std::vector<SmemTile> smemTiles;
};

/// Compiles every kernel in `mlirSource` for `target`:
///  * tile specs first: a source with `swz.gemm_tile` or `swz.attention_tile` ops
///    (gemm_f16.mlir, attention_f16kv_mma.mlir) gets
///    `schedule` applied (swz-apply-schedule) and its kernels generated from it
///    (swz-lower-tiles); such a source without a schedule is an error;
///  * both: swz-check-bank-conflicts, which fails the compilation if a
///    shared-memory tile marked `swz.conflict_free` is bank-conflicted (its report
///    goes to CompiledKernel::smemTiles);
///  * "sm_XY": swz-materialize-swizzle, then MLIR's gpu-lower-to-nvvm pipeline
///    (nvgpu -> nvvm -> LLVM NVPTX), PTX text. `cudaRoot` (e.g. /usr/local/cuda)
///    is where libdevice is found for math.* functions; empty = $CUDA_ROOT.
///  * "spirv": convert-math-to-spirv, convert-gpu-to-spirv, spirv ABI lowering,
///    serialized SPIR-V. The gpu.module must carry a spirv.target_env.
/// Throws std::invalid_argument for an unknown target and std::runtime_error
/// with the MLIR diagnostics if parsing or any pass fails.
std::vector<CompiledKernel> compileGpuKernels(std::string_view mlirSource,
                                              const std::string &target,
                                              const std::string &cudaRoot = "",
                                              const schedule::TargetSchedule *schedule = nullptr);

/// The target schedule's choices among decode-GEMV kernels by weight type and shape
/// (schedule::GemvSchedule; Codegen.cpp's kernelKey turns them into kernel-table keys).
struct DecodeGemv {
  /// gemv.f16_mma_split_k_below_rows: F16 matmuls of fewer rows take the 16-warp
  /// tensor-core GEMV ("matmul.f16.k8.w16"); 0: none.
  int64_t f16SplitKBelowRows = 0;
  /// gemv.q4_k_mma: Q4_K decodes on the int8 tensor cores ("matmul.q4_k.mma").
  bool q4kMma = false;
  /// gemv.q4_k_mma_split_k_below_rows: with q4kMma, fewer rows take the 8-warp
  /// workgroup ("matmul.q4_k.mma.w8"); 0: none.
  int64_t q4kMmaSplitKBelowRows = 0;
  /// gemm.skinny_max_rows: prompt passes of at most this many rows multiply Q4_K, Q6_K
  /// and Q8_0 weights with gemm_skinny_<type> ("matmul.<type>.skinny"); 0: never.
  int64_t skinnyMaxRows = 0;
};

/// A weight the model graph reads: GGUF tensor name, ggml type name in lower case
/// ("q4_1", "f32"), and ggml dims (ne[0] contiguous).
struct GraphWeight {
  std::string name;
  std::string type;
  std::vector<int64_t> ne;
};

/// One launch group of the compiled graph: the graph ops (indices into
/// manifest.graph.ops, in order) one fused op stands for, its kernel-table key and
/// its kernels (codegen/KernelTable.h).
struct LaunchGroup {
  std::vector<int64_t> graphOps;
  std::string key;
  std::vector<KernelRef> kernels;
  /// swz-fuse's swz.shared_input: the first graph op of the run of matmuls that read
  /// one input (q/k/v, gate/up), whose decode GEMVs run as one launch; -1 if none.
  int64_t sharedInput = -1;
  /// swz-fuse's swz.quantize_output: the op (RMSNorm, SwiGLU) also writes the int8 input
  /// of the matmul after it, in decode.
  bool quantizeOutput = false;
  /// DecodeGemv::skinnyMaxRows for a ".skinny" key: its KernelRef::rows kernels run when
  /// the pass has at most this many prompt rows (Rows::Small) or more (Rows::Large).
  int64_t skinnyMaxRows = 0;
  /// The target schedule's attention.prefill_split_min (set by the driver): prefill
  /// attention's shortest split, in keys.
  int64_t prefillSplitMin = 256;
};

/// The graph pipeline's result: the IR after the stage asked for (for `swizzlec
/// --emit-mlir` and lit), the launch groups, and the keys of ops that have no kernel
/// for the target (with counts; groups is then empty, and so is an "outline" `ir`).
struct GraphPlan {
  std::string ir;
  std::vector<LaunchGroup> groups;
  std::map<std::string, int> missing;
};

/// Runs swizzlec's graph pipeline on a model graph (docs/graph.md: the JSON of
/// models::build_graph, as `manifest.graph`): import into the swz dialect
/// (func.func @forward over tokens, positions and the weights), swz-fuse (residual
/// adds into matmul epilogues when `fuseResidual`, RoPE on k into the attention's KV
/// write when `fuseRopeKv`), then swz-outline-kernels for
/// `target` ("sm_XY" or "spirv"), which references each op's kernels and copies
/// their gpu.modules into the module. Throws std::runtime_error with the MLIR
/// diagnostics for a graph the importer cannot express (an unknown op or weight
/// type) and std::invalid_argument for a malformed graph.
/// `emitStage` ("import", "fuse", "outline" or empty) names the stage whose IR is
/// printed into GraphPlan::ir; empty prints nothing (a package compile).
/// `gemv`: the target schedule's decode-GEMV choices (DecodeGemv); `schedule`: the
/// target's schedule, which generates the kernels of tile-spec sources (gemm_f16.mlir;
/// null: such a source is an error).
GraphPlan planGraph(const std::string &graphJson, const std::vector<GraphWeight> &weights,
                    const std::string &target, bool fuseResidual, bool fuseRopeKv,
                    const DecodeGemv &gemv, const schedule::TargetSchedule *schedule,
                    const std::string &emitStage = "");

/// The kernel sources built into the library: (file stem, MLIR text) of every
/// codegen/kernels/*.mlir listed in codegen/CMakeLists.txt (SWZ_KERNELS).
const std::vector<std::pair<std::string, std::string>> &builtinKernelSources();

/// The built-in kernel source with file stem `stem` (e.g. "rms_norm_f32").
/// Throws std::invalid_argument naming the known stems if there is none.
const std::string &builtinKernelSource(const std::string &stem);

} // namespace swz::codegen

#endif // SWZ_CODEGEN_GPUCOMPILER_H
