// Tensor-core GEMM tile: C[M, N] (f32) = A[M, K] (f16) · B[N, K]ᵀ (f16).
//
// One warp per thread block computes a 16x8 tile of C at
// (blockIdx.y * 16, blockIdx.x * 8); launch with grid (N / 8, M / 16), block 32.
// Requires M % 16 == 0, N % 8 == 0, K % 64 == 0; A, B, C row-major.
//
// Per K step of 64, the warp copies the 16x64 A tile and the 8x64 B tile
// (128-byte rows) to shared memory with 16-byte cp.async, then runs four
// mma.sync.m16n8k16 fed by ldmatrix.x4 (A) and ldmatrix.x2 (B). The shared
// tiles carry `swz.smem_layout = #swz.swizzle<3, 3, 3>`: swz-materialize-swizzle
// rewrites every index into them with the XOR permutation. `swz.conflict_free`
// is checked by swz-check-bank-conflicts (8-way ldmatrix conflicts row-major,
// none swizzled; measured on an H200 with ncu: 21,504 vs 0 shared-load bank
// conflicts for a 64x64x256 GEMM, see docs/compiler-guide.md).
module attributes {gpu.container_module} {
  gpu.module @swz_kernels {
    memref.global "private" @smem_a : memref<16x64xf16, #gpu.address_space<workgroup>>
        {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
    memref.global "private" @smem_b : memref<8x64xf16, #gpu.address_space<workgroup>>
        {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}

    gpu.func @gemm_f16_mma_sync(%A: memref<?x?xf16>, %B: memref<?x?xf16>,
                                %C: memref<?x?xf32>) kernel
        attributes {known_block_size = array<i32: 32, 1, 1>, swz.grid = "N/8, M/16, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant dense<0.0> : vector<2x2xf32>
      %sa = memref.get_global @smem_a : memref<16x64xf16, #gpu.address_space<workgroup>>
      %sb = memref.get_global @smem_b : memref<8x64xf16, #gpu.address_space<workgroup>>
      %lane = gpu.thread_id x
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %row0 = arith.muli %by, %c16 : index
      %col0 = arith.muli %bx, %c8 : index
      %K = memref.dim %A, %c1 : memref<?x?xf16>

      // ldmatrix addresses: x4 over A (lane -> row lane%16, k half lane/16),
      // x2 over B (lane -> row lane%8, k half (lane/8)%2).
      %a_row = arith.remui %lane, %c16 : index
      %a_half = arith.divui %lane, %c16 : index
      %a_koff = arith.muli %a_half, %c8 : index
      %b_row = arith.remui %lane, %c8 : index
      %b_q = arith.divui %lane, %c8 : index
      %b_half = arith.remui %b_q, %c2 : index
      %b_koff = arith.muli %b_half, %c8 : index

      %acc = scf.for %k0 = %c0 to %K step %c64 iter_args(%acc_in = %zero) -> (vector<2x2xf32>) {
        // A tile: 16 rows x 8 chunks = 128 chunks, 4 per lane.
        scf.for %i = %c0 to %c4 step %c1 {
          %base = arith.muli %i, %c32 : index
          %ch = arith.addi %base, %lane : index
          %r = arith.divui %ch, %c8 : index
          %cc = arith.remui %ch, %c8 : index
          %c = arith.muli %cc, %c8 : index
          %gr = arith.addi %row0, %r : index
          %gc = arith.addi %k0, %c : index
          %t = nvgpu.device_async_copy %A[%gr, %gc], %sa[%r, %c], 8 {bypassL1}
              : memref<?x?xf16> to memref<16x64xf16, #gpu.address_space<workgroup>>
        }
        // B tile: 8 rows x 8 chunks = 64 chunks, 2 per lane.
        scf.for %i = %c0 to %c2 step %c1 {
          %base = arith.muli %i, %c32 : index
          %ch = arith.addi %base, %lane : index
          %r = arith.divui %ch, %c8 : index
          %cc = arith.remui %ch, %c8 : index
          %c = arith.muli %cc, %c8 : index
          %gr = arith.addi %col0, %r : index
          %gc = arith.addi %k0, %c : index
          %t = nvgpu.device_async_copy %B[%gr, %gc], %sb[%r, %c], 8 {bypassL1}
              : memref<?x?xf16> to memref<8x64xf16, #gpu.address_space<workgroup>>
        }
        %g = nvgpu.device_async_create_group
        nvgpu.device_async_wait %g {numGroups = 0 : i32}
        gpu.barrier
        %acc_out = scf.for %kk = %c0 to %c64 step %c16 iter_args(%a_acc = %acc_in) -> (vector<2x2xf32>) {
          %ak = arith.addi %kk, %a_koff : index
          %fa = nvgpu.ldmatrix %sa[%a_row, %ak] {numTiles = 4 : i32, transpose = false}
              : memref<16x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
          %bk = arith.addi %kk, %b_koff : index
          %fb = nvgpu.ldmatrix %sb[%b_row, %bk] {numTiles = 2 : i32, transpose = false}
              : memref<8x64xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
          %d = nvgpu.mma.sync (%fa, %fb, %a_acc) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          scf.yield %d : vector<2x2xf32>
        }
        // The next iteration overwrites the tiles: wait until every lane has read them.
        gpu.barrier
        scf.yield %acc_out : vector<2x2xf32>
      }

      // Accumulator fragment of m16n8: element [i][j] is C[lane/4 + 8i][(lane%4)*2 + j].
      %q = arith.divui %lane, %c4 : index
      %m4 = arith.remui %lane, %c4 : index
      %cn = arith.muli %m4, %c2 : index
      %r0 = arith.addi %row0, %q : index
      %r1 = arith.addi %r0, %c8 : index
      %n0 = arith.addi %col0, %cn : index
      %n1 = arith.addi %n0, %c1 : index
      %v00 = vector.extract %acc[0, 0] : f32 from vector<2x2xf32>
      %v01 = vector.extract %acc[0, 1] : f32 from vector<2x2xf32>
      %v10 = vector.extract %acc[1, 0] : f32 from vector<2x2xf32>
      %v11 = vector.extract %acc[1, 1] : f32 from vector<2x2xf32>
      memref.store %v00, %C[%r0, %n0] : memref<?x?xf32>
      memref.store %v01, %C[%r0, %n1] : memref<?x?xf32>
      memref.store %v10, %C[%r1, %n0] : memref<?x?xf32>
      memref.store %v11, %C[%r1, %n1] : memref<?x?xf32>
      gpu.return
    }
  }
}
