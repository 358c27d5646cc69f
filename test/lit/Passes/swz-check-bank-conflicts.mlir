// swz-check-bank-conflicts: static conflict degrees of ldmatrix.x4 reads and 16-byte
// cp.async stores for each scheduled tile (compiler/mlir/BankConflicts.h).
// RUN: swizzle-opt %s -split-input-file -swz-check-bank-conflicts -verify-diagnostics -mlir-print-op-on-diagnostic=false

// 128-byte rows: naive row-major is 8-way for ldmatrix, Swizzle<3,3,3> is conflict-free.
// expected-remark @+1 {{gemm_tile @swizzled: A 128x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way; B 128x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way}}
swz.gemm_tile @swizzled : f16 tile(128, 128, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>) {conflict_free}
// expected-remark @+1 {{gemm_tile @naive: A 128x64 of 2-byte elements (128-byte rows, row-major): ldmatrix.x4 8-way, cp.async.16 1-way; B 64x64 of 2-byte elements (128-byte rows, row-major): ldmatrix.x4 8-way, cp.async.16 1-way}}
swz.gemm_tile @naive : f16 tile(128, 64, 64) warps(4) stages(3)
// Unscheduled tiles are skipped (no remark).
swz.gemm_tile @later : f16

// -----

// expected-error @+1 {{gemm_tile @naive claims conflict_free but ldmatrix.x4 on smem A (128x64 of 2-byte elements (128-byte rows, row-major)) is 8-way bank-conflicted}}
swz.gemm_tile @naive : f16 tile(128, 128, 64) warps(4) stages(3) {conflict_free}

// -----

// 64-byte rows: row-major is 4-way, Swizzle<2,3,3> conflict-free.
// expected-remark @+1 {{gemm_tile @k32: A 64x32 of 2-byte elements (64-byte rows, Swizzle<2,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way}}
swz.gemm_tile @k32 : f16 tile(64, 64, 32) warps(4) stages(2) smem(#swz.swizzle<2, 3, 3>) {conflict_free}
// expected-remark @+1 {{gemm_tile @k32naive: A 64x32 of 2-byte elements (64-byte rows, row-major): ldmatrix.x4 4-way, cp.async.16 1-way}}
swz.gemm_tile @k32naive : f16 tile(64, 64, 32) warps(4) stages(2)

// -----

// Too few XOR bits for 128-byte rows: rows r and r+4 collide.
// expected-error @+1 {{gemm_tile @b2 claims conflict_free but ldmatrix.x4 on smem A (128x64 of 2-byte elements (128-byte rows, Swizzle<2,3,3>)) is 2-way bank-conflicted}}
swz.gemm_tile @b2 : f16 tile(128, 128, 64) warps(4) stages(3) smem(#swz.swizzle<2, 3, 3>) {conflict_free}

// -----

// head_dim 128 = 256-byte rows: Swizzle<3,3,3> reads the wrong bits (2-way),
// Swizzle<3,3,4> reads row mod 8 (conflict-free).
// expected-error @+1 {{attention_tile @fa claims conflict_free but ldmatrix.x4 on smem Q (64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,3>)) is 2-way bank-conflicted}}
swz.attention_tile @fa : f16 head_dim(128) block(64, 64) warps(4) stages(2) smem(#swz.swizzle<3, 3, 3>) {conflict_free}

// -----

// expected-remark @+1 {{attention_tile @fa: Q 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way; K 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way; V 64x128}}
swz.attention_tile @fa : f16 head_dim(128) block(64, 64) warps(4) stages(2) smem(#swz.swizzle<3, 3, 4>) {conflict_free}

// -----

// Kernel tiles: memref.globals read by ldmatrix / written by cp.async are analysed
// with their swz.smem_layout (row-major without one); swz.conflict_free is a claim.
gpu.module @kernels {
  // expected-remark @+1 {{memref.global @rowmajor: tile 32x64 of 2-byte elements (128-byte rows, row-major): ldmatrix.x4 8-way, cp.async.16 1-way}}
  memref.global "private" @rowmajor : memref<32x64xf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{memref.global @claimed claims conflict_free but ldmatrix.x4 on smem tile (32x32 of 2-byte elements (64-byte rows, row-major)) is 4-way bank-conflicted}}
  memref.global "private" @claimed : memref<32x32xf16, #gpu.address_space<workgroup>> {swz.conflict_free}
  // Not accessed by ldmatrix or cp.async: not analysed.
  memref.global "private" @other : memref<32x64xf16, #gpu.address_space<workgroup>>
  func.func @f(%i: index) -> (vector<4x2xf16>, vector<4x2xf16>, f16) {
    %a = memref.get_global @rowmajor : memref<32x64xf16, #gpu.address_space<workgroup>>
    %b = memref.get_global @claimed : memref<32x32xf16, #gpu.address_space<workgroup>>
    %c = memref.get_global @other : memref<32x64xf16, #gpu.address_space<workgroup>>
    %x = nvgpu.ldmatrix %a[%i, %i] {numTiles = 4 : i32, transpose = false}
        : memref<32x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    %y = nvgpu.ldmatrix %b[%i, %i] {numTiles = 4 : i32, transpose = false}
        : memref<32x32xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    %z = memref.load %c[%i, %i] : memref<32x64xf16, #gpu.address_space<workgroup>>
    return %x, %y, %z : vector<4x2xf16>, vector<4x2xf16>, f16
  }
}
