//===- LowerAttention.h - the kernel of a scheduled swz.attention_tile -*- C++ -*-===//
//
// swz-lower-tiles (LowerTiles.cpp) calls lowerAttentionTile for every
// `swz.attention_tile`; LowerAttention.cpp builds the prefill kernel and
// LowerAttentionDecode.cpp the split-K decode kernel (`decode`).
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_MLIR_LOWERATTENTION_H
#define SWZ_COMPILER_MLIR_LOWERATTENTION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace mlir {
class OpBuilder;
class Operation;
} // namespace mlir

namespace swz {
class AttentionTileOp;

/// Where a tile spec's kernel goes (the attention generators'): `emit` builds it with a
/// builder at `op` when `op` sits in a `gpu.module` (several entries share one kernel file),
/// else at the start of a new `gpu.module @swz_<name>` created in `op`'s place; then `op`
/// is erased and the enclosing module marked a GPU container module. Fails with an error
/// on `op`, `op` kept, when one of `symbols` (the globals the kernel will define) already
/// exists in that scope (the message adds `note` in parentheses when not empty), or when
/// @swz_<name> exists and a new gpu.module would be needed.
mlir::LogicalResult placeTileKernel(mlir::Operation *op, llvm::StringRef name, llvm::ArrayRef<std::string> symbols,
                                    llvm::StringRef note, llvm::function_ref<void(mlir::OpBuilder &)> emit);

/// Replaces the scheduled `swz.attention_tile @name` `op` (after swz-apply-schedule) with
/// the tensor-core flash-attention prefill kernel `gpu.func @name` its schedule describes
/// (FlashAttention-2, Dao 2023: block_q query rows a block, 16 a warp, K/V pages of
/// block_kv = 64 keys through shared memory, online softmax in registers; Passes.td,
/// SwzLowerTiles, gives the contract). The kernel and its three shared tiles
/// (`@<name>_q`, `_k`, `_v`: f16, block_q or block_kv rows of head_dim) go into the
/// enclosing `gpu.module` when `op` sits in one (several entries share one kernel file),
/// else into a new `gpu.module @swz_<name>` in its place. Arguments: q f32
/// [T * n_head * head_dim], k_cache / v_cache f16 [page][n_head_kv][64][head_dim],
/// block_table i32, out / o_part / lse_part f32, T, pos0, n_head, head_dim, split_len
/// (i32), scale (f32). Fails with an error on `op` naming the schedule field when the
/// schedule asks for what this generator does not emit (head_dim other than 64 or 128,
/// block_kv other than the 64-key KV page, block_q other than 16 x warps, stages other
/// than 1, mma other than mma.sync.m16n8k16, copy other than cp.async.cg.16, a swizzle
/// other than Swizzle<3, 3, log2(head_dim) - 3>, more than 48 KiB of shared memory) or
/// when a symbol it would define exists; `op` is erased only on success.
/// A tile spec with `decode` is handed to lowerDecodeAttentionTile.
mlir::LogicalResult lowerAttentionTile(AttentionTileOp op);

/// Replaces the scheduled `swz.attention_tile @name : f16 head_dim(128) ... {decode}` `op`
/// with the split-K decode attention kernel `gpu.func @name` (LowerAttentionDecode.cpp;
/// Passes.td, SwzLowerTiles, gives the contract) and its workgroup globals `@dec_o`
/// (warps x rows x 128 f32), `@dec_m`, `@dec_l` (warps x rows f32) and `@dec_last` (1 i32),
/// in the enclosing `gpu.module` when `op` sits in one, else in a new
/// `gpu.module @swz_<name>`. Arguments: q f32 [T * n_head * 128], k_cache / v_cache f16
/// [page][n_head_kv][64][128], block_table i32, out / o_part / lse_part f32, count i32
/// ([T * n_head], zero before and after a launch), seqs i32 [n_seq * 4], T, seq_tiles,
/// n_head, head_dim, max_splits (i32), scale (f32). The schedule's attention.decode gives
/// warps (block 32 x warps), keys_in_flight (keys a warp loads at once) and
/// min_ctas_per_sm (nvvm.minctasm when > 0). Fails with an error on `op` naming the field
/// when head_dim is not 128, block(rows, split unit) is not the driver's (8, 32), warps
/// are not a multiple of 4 whose groups of 128 threads divide the rows (4 or 8),
/// keys_in_flight is outside [1, 16], the warps' states exceed 48 KiB, or a global it
/// would define exists; `op` is erased only on success.
mlir::LogicalResult lowerDecodeAttentionTile(AttentionTileOp op);
} // namespace swz

#endif // SWZ_COMPILER_MLIR_LOWERATTENTION_H
