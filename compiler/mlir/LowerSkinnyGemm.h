//===- LowerSkinnyGemm.h - the dequantizing prefill GEMM of swz-lower-tiles ===//
#ifndef SWZ_COMPILER_MLIR_LOWERSKINNYGEMM_H
#define SWZ_COMPILER_MLIR_LOWERSKINNYGEMM_H

#include "Swz/SwzDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Support/LogicalResult.h"

namespace swz {

/// Writes the kernel of a scheduled dequantizing tile spec (`swz.gemm_tile` with
/// `weights = "q4_k" | "q6_k" | "q8_0"`) into `gm`: the workgroup global @skinny_<type>
/// (after the globals already there) and, at the end of `gm`, the kernel
/// gpu.func @<op's name>(x: memref<?xf32> [T, K], w: memref<?xf16> (the GGUF tensor's
/// bytes), y: memref<?xf32> [T, N], bias: memref<?xf32> [N], res: memref<?xf32> [T, N],
/// T, N, K, flags: i32), block (32 warps, 1, 1), swz.grid "ceil(N/<8 warps>), 1, 1":
/// y = f16(x) . f16(dequant(W))^T (+ bias with flags & 1) (+ res with flags & 2; res may
/// be y) for T <= tile_m, K % 256 == 0, each sum bitwise
/// dequant_<type>_f16 + gemm_f16's. Ported op for op from the former
/// codegen/kernels/gen_quant_kernels.py (gemm_skinny). Errors on `op` (naming the
/// schedule field) for what it cannot emit: tile_k other than 256, tile_n other than
/// 8 x warps, tile_m not 16 x a power of two, stages < 2, a ring over 48 KiB of static
/// shared memory, another mma or copy.
mlir::LogicalResult emitSkinnyGemmKernel(GemmTileOp op, mlir::gpu::GPUModuleOp gm);

} // namespace swz

#endif // SWZ_COMPILER_MLIR_LOWERSKINNYGEMM_H
