//===- LowerGemv.h - the int8 decode GEMVs of swz-lower-tiles -------------===//
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
mlir::LogicalResult lowerGemvTile(GemvTileOp op);

} // namespace swz

#endif // SWZ_COMPILER_MLIR_LOWERGEMV_H
