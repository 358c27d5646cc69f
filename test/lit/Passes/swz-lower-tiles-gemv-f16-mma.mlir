// swz-lower-tiles: F16's tensor-core decode GEMVs generated from swz.gemv_tile with `mma`
// and the schedule's gemv.f16_mma / gemv.f16_mma_split_k (LowerGemv.cpp), into the
// enclosing gpu.module with their workgroup globals (codegen/kernels/gemv_f16_mma.mlir's
// launch contract).
// RUN: rm -rf %t && mkdir -p %t
// The sm_90 schedule: 4 warps and 4 chunks in flight (the loop steps 16 chunks), and for
// split_k 16 warps and 2 in flight (32).
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SHIP
// A schedule edit: 2 m-tiles (32 rows a workgroup) of 8 warps, 1 chunk in flight.
// RUN: sed -e 's/"f16_mma": { "warps": 4, "m_tiles": 1, "units_in_flight": 4 }/"f16_mma": { "warps": 8, "m_tiles": 2, "units_in_flight": 1 }/' \
// RUN:     %schedules/sm_90.json > %t/edit.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/edit.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=EDIT
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json | FileCheck %s --check-prefix=APPLY
// Errors: no such entry (SPIR-V), a field the entry does not have, too many warps.
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%schedules/spirv.json 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: sed -e 's/"f16_mma": { "warps": 4,/"f16_mma": { "rows_per_warp": 1, "warps": 4,/' %schedules/sm_90.json > %t/field.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/field.json 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: sed -e 's/"f16_mma": { "warps": 4,/"f16_mma": { "warps": 32,/' %schedules/sm_90.json > %t/w32.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/w32.json 2>&1 | FileCheck %s --check-prefix=W32

module {
  gpu.module @swz_gemv_f16_mma {
    swz.gemv_tile @matmul_f16_mma {activations = "f32", mma = "mma.sync.m16n8k16", weights = "f16"}
    swz.gemv_tile @matmul_f16_mma_w16 {activations = "f32", mma = "mma.sync.m16n8k16", split_k, weights = "f16"}
  }
}

// APPLY: swz.gemv_tile @matmul_f16_mma {activations = "f32", m_tiles = 1 : i32, mma = "mma.sync.m16n8k16", target = "sm_90", units_in_flight = 4 : i32, warps = 4 : i32, weights = "f16"}
// APPLY-NEXT: swz.gemv_tile @matmul_f16_mma_w16 {activations = "f32", m_tiles = 1 : i32, mma = "mma.sync.m16n8k16", split_k, target = "sm_90", units_in_flight = 2 : i32, warps = 16 : i32, weights = "f16"}

// NONE: error: @matmul_f16_mma needs the spirv schedule's gemv.f16_mma, which it does not have
// FIELD: $.gemv.f16_mma.rows_per_warp: not a field of the tensor-core GEMV (warps, m_tiles, units_in_flight)
// W32: $.gemv.f16_mma.warps: 32 is more than 16

// SHIP-NOT: swz.gemv_tile
// SHIP: memref.global "private" @acc_matmul_f16_mma : memref<512xf32, #gpu.address_space<workgroup>>
// SHIP-NEXT: gpu.func @matmul_f16_mma(%{{.*}}: memref<?xvector<4xi32>>, %{{.*}}: memref<?xvector<4xf32>>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil(N/16), ceil(T/8), 1"}
// SHIP: scf.for %{{.*}} = %c0 to %{{.*}} step %c16 iter_args(%{{.*}} = %cst) -> (vector<2x2xf32>) {
// SHIP: nvgpu.mma.sync
// SHIP: gpu.barrier
// SHIP: memref.global "private" @acc_matmul_f16_mma_w16 : memref<2048xf32, #gpu.address_space<workgroup>>
// SHIP-NEXT: gpu.func @matmul_f16_mma_w16(
// SHIP-SAME: known_block_size = array<i32: 512, 1, 1>, swz.grid = "ceil(N/16), ceil(T/8), 1"
// SHIP: scf.for %{{.*}} = %c0 to %{{.*}} step %c32 iter_args(

// EDIT: memref.global "private" @acc_matmul_f16_mma : memref<2048xf32, #gpu.address_space<workgroup>>
// EDIT-NEXT: gpu.func @matmul_f16_mma(
// EDIT-SAME: known_block_size = array<i32: 256, 1, 1>, swz.grid = "ceil(N/32), ceil(T/8), 1"
// Two m-tiles' accumulators, one chunk (8 warps) a step.
// EDIT: scf.for %{{.*}} = %c0 to %{{.*}} step %c8 iter_args(%{{.*}} = %cst, %{{.*}} = %cst) -> (vector<2x2xf32>, vector<2x2xf32>) {
