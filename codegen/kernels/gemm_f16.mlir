// Prefill GEMM on tensor cores: y[T, N] (f32) = x[T, K] (f16) · W[N, K]ᵀ (f16)
// (+ bias[N]) (+ res[T, N]), for any T >= 1, N >= 1 and K a multiple of 8 (GGUF rows: multiples
// of 32). x is the f16 copy of the activations (dequant_f16.mlir convert_f32_f16),
// W the f16 weight ([N, K], K contiguous, ggml order: a GGUF F16 tensor as is, or
// the dequant_<type>_f16 scratch).
//
// The kernel is generated: swizzlec applies the target's schedule to this tile spec
// (swz-apply-schedule: compiler/schedules/<target>.json, "gemm": tile_m / tile_n /
// tile_k, warps, stages, mma, copy, swizzle) and swz-lower-tiles writes gpu.module
// @swz_gemm_f16 with the kernel gpu.func @gemm_f16 (compiler/mlir/LowerTiles.cpp;
// Passes.td describes the kernel). With sm_80's schedule: 4 warps compute a 64x64 tile
// of y through a 3-stage cp.async ring of 64-wide k tiles in Swizzle<3,3,3> shared
// memory, ldmatrix.x4 + mma.sync.m16n8k16; with sm_90's, one warpgroup multiplies the
// same tiles with wgmma.mma_async.m64n64k16 (PTX for sm_90a); 48 KiB static shared
// memory either way. To see it:
//   swizzle-opt codegen/kernels/gemm_f16.mlir \
//     -swz-apply-schedule=schedule=compiler/schedules/sm_90.json -swz-lower-tiles
//
// Launch record: block (32 x warps, 1, 1), grid (ceil(N/tile_n), ceil(T/tile_m), 1), no
// dynamic shared memory. Arguments: x: memref<?x?xf16> [T, K], w: memref<?x?xf16>
// [N, K], y: memref<?x?xf32> [T, N] (all row-major, 16-byte aligned rows: K % 8 == 0),
// bias: memref<?xf32> [N] (read only if flags & 1; pass any buffer otherwise),
// res: memref<?x?xf32> [T, N] (read only if flags & 2: the residual stream of a fused
// `x = x + matmul(...)`; each element is read, then y's written, by one thread, so res
// may be y), flags: i32. y = (acc + bias) + res: the bits of the GEMM then add_f32.
module {
  swz.gemm_tile @gemm_f16 : f16
}
