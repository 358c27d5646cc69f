// Tensor-core flash attention over the paged f16 KV cache, PTX only (sm_80+): the same
// contract as flash_attention_f16kv in attention_f16kv.mlir (same arguments, KV layout
// [page][n_head_kv][64][head_dim] f16, block table, GQA row flattening i = t * G + g,
// causal, split-K partials when n_split > 1) with block_q query rows per workgroup instead
// of 8; attention_f16kv.mlir's kv_store_f16 and attention_split_reduce complete it.
//
// The kernels are generated: swizzlec applies the target's schedule to these tile specs
// (swz-apply-schedule: compiler/schedules/<target>.json, "attention": block_q, block_kv,
// warps, stages, mma, copy, swizzle, conflict_free) and swz-lower-tiles writes each
// kernel into this gpu.module, so both entries share one kernel file
// (compiler/mlir/LowerAttention.cpp; Passes.td, SwzLowerTiles, describes the kernel).
// FlashAttention-2 (Dao 2023) structure; with the shipped schedules (sm_80 .. sm_90):
//   * 4 warps x 16 query rows (block_q 64); Q (times scale, rounded to f16) is staged once
//     in shared memory and each warp takes its A fragments with ldmatrix.x4;
//   * per 64-key tile (block_kv = one page: one block-table lookup), K and V are copied
//     with 16-byte cp.async (zero-filled past the last visible key, so slots outside the
//     context are never read) into 64 x head_dim f16 tiles, single-buffered (stages 1);
//   * S = Q K^T by mma.sync.m16n8k16 (K fragments: ldmatrix.x2), causal mask, online
//     softmax on the accumulator fragments (row max and sum over the 4 lanes of a quad
//     by shuffle-xor 1, 2), P rounded to f16 and reused as the A operand of O += P V
//     (V fragments: ldmatrix.x2.trans); O stays in registers.
// The shared tiles (@<entry>_q, _k, _v) carry the schedule's swizzle, Swizzle<3, 3, 3>
// for head_dim 64 (128-byte rows, 3 x 8 KiB) and Swizzle<3, 3, 4> for head_dim 128
// (256-byte rows, 3 x 16 KiB), and claim swz.conflict_free: swz-check-bank-conflicts
// verifies ldmatrix and cp.async on them are conflict-free (8-way row-major). To see it:
//   swizzle-opt codegen/kernels/attention_f16kv_mma.mlir \
//     -swz-apply-schedule=schedule=compiler/schedules/sm_80.json -swz-lower-tiles
//
// Launch record: block (32 x warps, 1, 1), grid (ceil(T * G / block_q), n_head_kv,
// n_split) (swz.grid "ceil(T*n_head/n_head_kv/<block_q>), n_head_kv, n_split"), no dynamic
// shared memory; split_len a multiple of 64. Arguments: q f32, k_cache f16, v_cache f16,
// block_table i32, out, o_part, lse_part f32, T, pos0, n_head, head_dim, split_len i32,
// scale f32 (head_dim is not read: it must match the entry). Numerics: q * scale and P
// are rounded to f16 for the tensor cores (K and V already are), accumulation in f32.
module {
  gpu.module @swz_attention_f16kv_mma {
    swz.attention_tile @flash_attention_f16kv_mma : f16 head_dim(64)
    swz.attention_tile @flash_attention_f16kv_mma_hd128 : f16 head_dim(128)
  }
}
