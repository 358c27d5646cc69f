//===- LowerGemv.h - the decode GEMVs and embedding lookups of swz-lower-tiles ===//
#ifndef SWZ_COMPILER_MLIR_LOWERGEMV_H
#define SWZ_COMPILER_MLIR_LOWERGEMV_H

#include "Swz/SwzDialect.h"

#include "mlir/Support/LogicalResult.h"

namespace swz {

/// Replaces the scheduled `swz.gemv_tile @name {weights = "<type>", activations = "q8x"}`
/// `op` (type q4_k, q8_0, q6_k, q4_1 or q5_0) with the int8 decode GEMV
/// gpu.func @name(w0, w1, w2: the weights (memref<?xvector<4xi32>> for q4_k, else
/// memref<?xi32>: the GGUF blocks' bytes), xq: memref<?xvector<4xi32>> (int8 activations,
/// [T, K]), xds: memref<?xvector<4xf32>> ((d, d sum lo, d sum hi, 0) per block of 32),
/// y0, y1, y2, bias0, bias1, bias2, res: memref<?xf32>, N0, N1, N2, K, T, flags: i32) and
/// its workgroup globals @acc_<type> (128 x rows_per_warp f32) and @slots_<type> (1024 x
/// rows_per_warp f32), in the enclosing gpu.module when `op` sits in one, else in a new
/// `gpu.module @swz_<name>`. Block (128, 1, 1), swz.grid "ceil((N0+N1+N2)/<4
/// rows_per_warp>), ceil(T/8), 1", nvvm.minctasm = min_ctas_per_sm when > 0. Computes
/// yo[t, n] = sum_k x[t, k] Wo[n, k] (+ biaso[n] with flags 1, 4, 8) (+ res[t, n] on output
/// 0 with flags 2; res may be y0), K a multiple of the block size. Ported op for op from
/// the former codegen/kernels/gen_quant_kernels.py (gemv_q8x); the block layouts follow
/// ggml-common.h. Errors on `op` when it is not scheduled or a global it would define
/// exists; `op` is erased only on success.
///
/// With activations "f32" (type q4_0, q4_1, q5_0, q8_0, q4_k, q6_k or f16; rows_per_warp 1):
/// gpu.func @name(w: memref<?xi32> (memref<?xf16> for f16), x: memref<?xvector<4xf32>>
/// [T, K] (memref<?xf32> for f16), y, bias, res: memref<?xf32>, N, K, T, flags: i32) and
/// the globals @acc (128 f32) and @slots (1024 f32): y[t, n] = sum_k x[t, k] W[n, k]
/// (+ bias[n] with flags 1) (+ res[t, n] with flags 2), block (128, 1, 1) with
/// spirv.entry_point_abi, swz.grid "ceil(N/4), ceil(T/8), 1". With `lookup`: gpu.func
/// @name(w, tokens: memref<?xi32> [T], out: memref<?xf32> [T, K], K: i32), out[t, :] =
/// dequant(W[tokens[t], :]), block (128, 1, 1), swz.grid "T, 1, 1" (no schedule needed).
/// With mma "mma.sync.m16n8k16" (weights f16): F16's tensor-core GEMV gpu.func @name(w:
/// memref<?xvector<4xi32>> (8 f16 a vector, K % 8 == 0), x: memref<?xvector<4xf32>>, y,
/// bias, res, N, K, T, flags) and @acc_<name> (warps x m_tiles x 128 f32), block (32 warps,
/// 1, 1), swz.grid "ceil(N/<16 m_tiles>), ceil(T/8), 1"; errors on an unscheduled spec.
mlir::LogicalResult lowerGemvTile(GemvTileOp op);

} // namespace swz

#endif // SWZ_COMPILER_MLIR_LOWERGEMV_H
