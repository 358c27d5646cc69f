// swz-lower-tiles: the dequantizing (skinny) prefill GEMM generated from swz.gemm_tile ops
// with `weights = "<type>"` and the schedule's gemm.skinny (LowerSkinnyGemm.cpp). The three
// kernels share one gpu.module, @swz_gemm_skinny (the launch contract of
// codegen/kernels/gemm_skinny.mlir: module, entries, arguments, grid, block).
//
// The sm_80 schedule: 4 warps (32 weight rows a workgroup), 4 m-tiles (64 prompt rows),
// ring stages q4_k 8, q6_k 6, q8_0 4; each row's stage window in an odd number of
// 16-byte units (144, 240, 272 bytes: 72, 120, 136 halves).
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SM80
// A schedule edit changes the ring: q6_k with 3 stages (96 rows, one group in flight
// while a stage is read), 2 warps (16 weight rows a workgroup, block 64), 2 m-tiles (one
// branch on T: the 1- and 2-m-tile loops).
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/"q6_k": 6/"q6_k": 3/' -e 's/"warps": 4, "m_tiles": 4/"warps": 2, "m_tiles": 2/' \
// RUN:     %schedules/sm_80.json > %t/small.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SMALL
// The padded, swizzle-free ring (row strides an odd number of 16-byte units) through the
// static bank-conflict analysis: 1-way for 16-byte copies (and for ldmatrix.x4, which the
// kernel does not use: its B loads are 16-bit, 8 rows in 8 different bank quadruples).
// No conflict_free claim is made, so nothing fails on it.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS
// The scheduled op itself (swz-apply-schedule alone).
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json | FileCheck %s --check-prefix=APPLY

module {
  swz.gemm_tile @gemm_skinny_q4_k : f16 {weights = "q4_k"}
  swz.gemm_tile @gemm_skinny_q6_k : f16 {weights = "q6_k"}
  swz.gemm_tile @gemm_skinny_q8_0 : f16 {weights = "q8_0"}
}

// APPLY: swz.gemm_tile @gemm_skinny_q4_k : f16 tile(64, 32, 256) warps(4) stages(8) {copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_90", weights = "q4_k"}
// APPLY: swz.gemm_tile @gemm_skinny_q6_k : f16 tile(64, 32, 256) warps(4) stages(6)
// APPLY: swz.gemm_tile @gemm_skinny_q8_0 : f16 tile(64, 32, 256) warps(4) stages(4)

// BANKS: remark: memref.global @skinny_q4_k: tile 256x72 of 2-byte elements (144-byte rows, row-major): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @skinny_q6_k: tile 192x120 of 2-byte elements (240-byte rows, row-major): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @skinny_q8_0: tile 128x136 of 2-byte elements (272-byte rows, row-major): ldmatrix.x4 1-way, cp.async.16 1-way

// SM80-NOT: swz.gemm_tile
// SM80: gpu.module @swz_gemm_skinny {
// SM80-NEXT: memref.global "private" @skinny_q4_k : memref<256x72xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// SM80-NEXT: memref.global "private" @skinny_q6_k : memref<192x120xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// SM80-NEXT: memref.global "private" @skinny_q8_0 : memref<128x136xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// (x, w, y, bias, res, T, N, K, flags)
// SM80-NEXT: gpu.func @gemm_skinny_q4_k(%{{[^:]*}}: memref<?xf32>, %{{[^:]*}}: memref<?xf16>, %[[Y:[^:]*]]: memref<?xf32>, %{{[^:]*}}: memref<?xf32>, %[[RES:[^:]*]]: memref<?xf32>, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[FLAGS:[^:]*]]: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil(N/32), 1, 1"}
// SM80-NOT: swz.schedule
// SM80-NOT: swz.dynamic_smem
// SM80: memref.get_global @skinny_q4_k
// 7 prologue groups (stages 0..6), then per k stage: wait for all but 6, barrier, copy stage kt + 7.
// SM80-COUNT-7: nvgpu.device_async_create_group
// SM80: scf.if
// SM80: scf.for
// SM80-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 6 : i32}
// SM80-NEXT: gpu.barrier
// SM80: nvgpu.mma.sync
// SM80-SAME: mmaShape = [16, 8, 16]
// SM80: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// Epilogue: flags bit 1 adds res[t, n] (read, then y written, by the same thread: res may
// be y) after the bias: y = (acc + bias) + res, as gemm_f16's.
// SM80: %[[RBIT:.*]] = arith.andi %[[FLAGS]], %c2_i32 : i32
// SM80-NEXT: %[[USERES:.*]] = arith.cmpi ne, %[[RBIT]], %c0_i32 : i32
// The residuals are all loaded (each under its bounds) before the first store.
// SM80: %[[RV:.*]]:16 = scf.if %[[USERES]] -> (f32,
// SM80-NEXT: scf.if %{{.*}} -> (f32) {
// SM80-NEXT: memref.load %[[RES]][%[[I:.*]]] : memref<?xf32>
// SM80-COUNT-15: memref.load %[[RES]]
// SM80-NOT: memref.store
// SM80: } else {
// SM80: scf.if
// SM80-NEXT: %[[S:.*]] = arith.addf
// SM80-NEXT: %[[SR:.*]] = arith.addf %[[S]], %[[RV]]#0 : f32
// SM80-NEXT: %[[OUT:.*]] = arith.select %[[USERES]], %[[SR]], %[[S]] : f32
// SM80-NEXT: memref.store %[[OUT]], %[[Y]][%[[I]]] : memref<?xf32>
// SM80: gpu.func @gemm_skinny_q6_k
// SM80: memref.get_global @skinny_q6_k
// SM80-COUNT-5: nvgpu.device_async_create_group
// SM80: nvgpu.device_async_wait %{{.*}} {numGroups = 4 : i32}
// SM80: gpu.func @gemm_skinny_q8_0
// SM80: memref.get_global @skinny_q8_0
// SM80-COUNT-3: nvgpu.device_async_create_group
// SM80: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}

// SMALL: memref.global "private" @skinny_q4_k : memref<128x72xf16
// SMALL-NEXT: memref.global "private" @skinny_q6_k : memref<48x120xf16
// SMALL-NEXT: memref.global "private" @skinny_q8_0 : memref<64x136xf16
// SMALL: gpu.func @gemm_skinny_q6_k
// SMALL-SAME: known_block_size = array<i32: 64, 1, 1>, swz.grid = "ceil(N/16), 1, 1"
// SMALL: arith.cmpi ule, %{{.*}}, %c16 : index
// SMALL-NOT: arith.cmpi ule, %{{.*}}, %c32 : index
// SMALL: scf.for
// SMALL-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// SMALL: -> (vector<2x2xf32>, vector<2x2xf32>)
// SMALL: gpu.func @gemm_skinny_q8_0
