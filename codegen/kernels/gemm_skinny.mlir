// The skinny prefill GEMM (PTX only): for prompt passes of few rows (the target
// schedule's gemm.skinny_max_rows picks; at most 16 x gemm.skinny.m_tiles),
// y[T, N] = f16(x) . f16(dequant(W))^T (+ bias) straight from the GGUF blocks, instead of
// dequant_<type>_f16 writing the whole f16 weight and gemm_f16 reading it back (7B: 15 GB
// each way a pass).
//
// The kernels are generated: swizzlec applies the target's schedule to these tile specs
// (swz-apply-schedule: compiler/schedules/<target>.json, "gemm.skinny": warps, m_tiles,
// stages per block format) and swz-lower-tiles writes gpu.module @swz_gemm_skinny with
// gpu.func @gemm_skinny_q4_k, @gemm_skinny_q6_k and @gemm_skinny_q8_0
// (compiler/mlir/LowerSkinnyGemm.cpp says how). To see them:
//   swizzle-opt codegen/kernels/gemm_skinny.mlir \
//     -swz-apply-schedule=schedule=compiler/schedules/sm_80.json -swz-lower-tiles
//
// gemm_skinny_<type>(x, w, y, bias, res, T, N, K, flags): x [T, K] f32 (rounded to
//   f16 in the kernel, as convert_f32_f16 does), w the GGUF tensor's bytes as
//   memref<?xf16>, y [T, N] f32, bias [N] f32 (read only when flags & 1), res [T, N] f32
//   (read only when flags & 2; may be y: gemm_f16.mlir's epilogue); T, N, K, flags i32,
//   K % 256 == 0.
//   Launch record: block (32 x warps, 1, 1), grid (ceil(N / (8 x warps)), 1, 1), no
//   dynamic shared memory (sm_*: 4 warps, 32 weight rows a workgroup): warp w of
//   workgroup b owns weight rows 8 (warps b + w) .. + 7 (one n8 tile) for every prompt
//   row (m_tiles m-tiles of 16), over the whole of K.
//   Loads: the workgroup's rows move through workgroup memory 256 weights (a stage) at
//   a time, a `stages`-deep cp.async ring (16-byte chunks of each row's stage window,
//   zero-filled past N); each thread dequantizes the 4 weights of its mma B fragment
//   per k16 step (row g, k 2q, 2q+1, 2q+8, 2q+9) with dequant_f16.mlir's f32
//   arithmetic, rounded to f16; A comes from x rows g, g + 8 of each m-tile.
//   Bits: each output is one mma.sync.m16n8k16 accumulator over the k16 steps in
//   ascending order from zero, with the same f16 operands, steps and final bias add
//   and residual add as gemm_f16 (K % 256 == 0 for every type: no zero-filled k tail): the tensor core
//   computes an element from its own row, column and accumulator, so the result is
//   bitwise dequant_<type>_f16 + gemm_f16's, whichever path a pass takes (checked on the
//   H200 by swz-backend-compare's batch invariance: prompt rows alone vs together).
module {
  swz.gemm_tile @gemm_skinny_q4_k : f16 {weights = "q4_k"}
  swz.gemm_tile @gemm_skinny_q6_k : f16 {weights = "q6_k"}
  swz.gemm_tile @gemm_skinny_q8_0 : f16 {weights = "q8_0"}
}
