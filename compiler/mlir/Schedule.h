//===- Schedule.h - per-target tile schedules (compiler/schedules/*.json) --===//
//
// Plain C++ (no MLIR). A schedule file describes, for one GPU target, the tile
// shapes, warps, pipeline stages, vector widths, instructions and shared-memory
// swizzle that the kernels use. Format: see compiler/schedules/sm_80.json and
// docs/compiler-guide.md ("Adding a GPU target").
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_MLIR_SCHEDULE_H
#define SWZ_COMPILER_MLIR_SCHEDULE_H

#include "compiler/mlir/BankConflicts.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

namespace swz::schedule {

/// The dequantizing (skinny) prefill GEMM's geometry, schedule object `gemm.skinny`:
/// {"warps": W, "m_tiles": M, "stages": {"q4_k": S, "q6_k": S, "q8_0": S}}. A warp owns one
/// n8 tile (8 weight rows) for every token, so a workgroup covers 8 W weight rows and
/// 16 M prompt rows (gemm.skinny_max_rows <= 16 M); `stages` is the cp.async ring's
/// depth per block format (256 weights of each of the 8 W rows a stage).
struct SkinnyGemmSchedule {
  int64_t warps = 0;  ///< a power of two, >= 1
  int64_t mTiles = 0; ///< 1, 2, 4, ... (m16 tiles: one K loop per power of two up to it)
  std::map<std::string, int64_t> stages; ///< "q4_k", "q6_k", "q8_0" -> stages (>= 2)
};

struct GemmSchedule {
  std::string elementType; ///< "f16" or "bf16".
  int64_t tileM = 0, tileN = 0, tileK = 0;
  int64_t warps = 0, stages = 0;
  int64_t vectorBytes = 16;
  std::string mma;  ///< e.g. "mma.sync.m16n8k16", "wgmma.m64n256k16", "fma".
  std::string copy; ///< e.g. "cp.async.cg.16", "tma", "load.16".
  std::optional<bank::Swizzle> swizzle; ///< element units; none = row-major.
  /// "shift": "row": S = log2(row length in elements) - M, set per tile.
  bool swizzleShiftFromRow = false;
  bool conflictFree = false; ///< claim checked by swz-check-bank-conflicts.
  /// Prompt passes of at most this many rows multiply Q4_K / Q6_K / Q8_0 weights with the
  /// skinny GEMM (codegen/kernels/gemm_skinny.mlir: dequantizing in its loads, up to 64
  /// rows) instead of dequant_<type>_f16 + gemm_f16; bitwise the same results. Schedule
  /// field `gemm.skinny_max_rows` (optional, default 0: never; sm_* say 1, measured on the
  /// H200: faster at one row, slower from 16).
  int64_t skinnyMaxRows = 0;
  /// wgmma groups left in flight across a k tile (`gemm.mma_in_flight`, optional: 0 or
  /// 1; absent: 0). A group in flight costs the copies a stage of lookahead (wgmma only,
  /// 3 or more stages).
  std::optional<int64_t> mmaInFlight;
  /// `gemm.skinny` (optional; required when skinny_max_rows > 0). swz-apply-schedule reads
  /// the base entry's (a shape class inherits it but has no skinny kernels).
  std::optional<SkinnyGemmSchedule> skinny;
};

struct AttentionSchedule {
  std::string elementType;
  int64_t blockQ = 0, blockKv = 0;
  int64_t warps = 0, stages = 0;
  std::string mma, copy;
  std::optional<bank::Swizzle> swizzle;
  bool swizzleShiftFromRow = false; ///< see GemmSchedule.
  bool conflictFree = false;
  /// prefill_split_min: prefill attention's split length is at least this many keys (a
  /// multiple of 64; launch_bindings.cpp prefillSplitLen). Longer splits cost a short
  /// pass on a long context (the tail after a prefix-cache hit) parallelism; shorter ones
  /// cost a long prompt's late passes partials and their reduction.
  int64_t prefillSplitMin = 256;
};

struct GemvSchedule {
  int64_t threads = 0, rowsPerBlock = 0, vectorBytes = 0;
  /// F16 weights with fewer rows than this decode on the tensor-core GEMV's 16-warp
  /// workgroup shape (matmul_f16_mma_w16, warps splitting K: few workgroups need more
  /// warps each to keep enough loads in flight); others, and all when 0, on the 4-warp one.
  /// Schedule field `gemv.f16_mma_split_k_below_rows` (optional, default 0).
  int64_t f16MmaSplitKBelowRows = 0;
  /// Q4_K decodes on the int8 tensor cores (matmul_q4_k_mma_q8x: mma.sync.m16n8k32 over
  /// 16 rows x 8 tokens, 4 warps splitting K) instead of dp4a (matmul_q4_k_q8x).
  /// Schedule field `gemv.q4_k_mma` (optional, default false).
  bool q4kMma = false;
  /// With q4kMma, matrices of fewer rows take the 8-warp workgroup
  /// (matmul_q4_k_mma_w8_q8x). Schedule field `gemv.q4_k_mma_split_k_below_rows`
  /// (optional, default 0).
  int64_t q4kMmaSplitKBelowRows = 0;
};

/// A shape class of the prefill GEMM (`gemm.classes[i]`, optional): matmuls whose weight is
/// N x K with nMin <= N <= nMax and kMin <= K <= kMax (schedule fields `n_min`, `n_max`,
/// `k_min`, `k_max`, each optional) multiply with their own kernel, `gemm_f16_<name>`,
/// generated from the base `gemm` entry with the class's other fields replacing its own.
/// The first class that matches wins; a matmul no class matches takes `gemm_f16`.
struct GemmClass {
  std::string name; ///< [a-z0-9_]+, unique in the file.
  int64_t nMin = 0, nMax = INT64_MAX, kMin = 0, kMax = INT64_MAX;
  GemmSchedule gemm;
};

struct TargetSchedule {
  std::string target;      ///< "sm_80", "sm_90", "spirv".
  std::string arch;        ///< "sm_80", ..., "vulkan1.1".
  std::string ptxVersion;  ///< "7.0"; empty for non-PTX targets.
  int64_t warpSize = 32;
  int64_t maxSmemBytesPerBlock = 0;
  GemmSchedule gemm;
  std::vector<GemmClass> gemmClasses; ///< `gemm.classes`, in file order
  AttentionSchedule attention;
  GemvSchedule gemv;
};

/// The first of `s.gemmClasses` that an N x K weight falls in, or nullptr (the base entry).
const GemmClass *gemmClassFor(const TargetSchedule &s, int64_t n, int64_t k);

/// Parses a schedule from JSON text. `origin` names the source in messages.
/// Throws std::runtime_error("<origin>: <json path>: <problem>") on malformed
/// JSON, a missing or mistyped field, or format_version != 1.
TargetSchedule parseSchedule(std::string_view json, std::string_view origin);

/// Reads and parses a schedule file. Throws std::runtime_error if the file
/// cannot be read or parseSchedule fails.
TargetSchedule loadSchedule(const std::string &path);

/// Shared-memory bytes a GEMM tile needs: stages * (tileM + tileN) * tileK * elemBytes.
int64_t gemmSmemBytes(const GemmSchedule &s, unsigned elemBytes);

/// Static shared memory a CUDA block may declare (48 KiB); more must be dynamic.
constexpr int64_t kStaticSmemBytes = 48 * 1024;

/// Alignment of the generated GEMM's shared tiles: 1024 bytes for wgmma (its 128-byte
/// swizzle repeats every 8 rows of 128 bytes), 128 for mma.sync.
int64_t gemmSmemAlign(bool wgmma);

/// Dynamic shared memory the generated GEMM asks for with `tileBytes` of tiles: 0 when they
/// fit kStaticSmemBytes, else the tiles plus the slack that rounds a 16-byte-aligned
/// window up to gemmSmemAlign (swz-dynamic-smem places them).
int64_t gemmDynamicSmemBytes(int64_t tileBytes, bool wgmma);

/// The architecture a PTX target's kernels are lowered and assembled for: the schedule's
/// `device.arch` where it names a variant of `target` (sm_90.json: "sm_90a", the
/// architecture-specific PTX wgmma needs), else `target` ("sm_80").
std::string ptxArch(const TargetSchedule &s, const std::string &target);

} // namespace swz::schedule

#endif // SWZ_COMPILER_MLIR_SCHEDULE_H
