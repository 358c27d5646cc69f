// swz-lower-tiles: the int8 decode GEMV generated from a swz.gemv_tile and the schedule's
// gemv.q8x.<type> (LowerGemv.cpp). The kernel goes into the enclosing gpu.module with its
// workgroup globals (the launch contract of codegen/kernels/gemv_q8x.mlir: module, entry,
// arguments, grid, block).
//
// The sm_90 schedule's Q8_0: a row a warp (4 rows a workgroup), 3 units in flight a lane
// (the one-token loop steps 96 units), nvvm.minctasm 8.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SHIP
// A schedule edit changes the kernel: 2 rows a warp (8 rows a workgroup, twice the
// workgroup memory, the grid's rule), 1 unit in flight (step 32), no nvvm.minctasm.
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/"q8_0": { "rows_per_warp": 1, "units_in_flight": 3, "min_ctas_per_sm": 8 }/"q8_0": { "rows_per_warp": 2, "units_in_flight": 1 }/' \
// RUN:     %schedules/sm_90.json > %t/edit.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/edit.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=EDIT
// The scheduled op itself (swz-apply-schedule alone); the GEMV stages nothing through
// ldmatrix or cp.async, so the bank-conflict check has nothing to report.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json | FileCheck %s --check-prefix=APPLY
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS --allow-empty

module {
  gpu.module @swz_gemv_q8x {
    swz.gemv_tile @matmul_q8_0_q8x {activations = "q8x", weights = "q8_0"}
  }
}

// APPLY: swz.gemv_tile @matmul_q8_0_q8x rows_per_warp(1) {activations = "q8x", min_ctas_per_sm = 8 : i32, target = "sm_90", units_in_flight = 3 : i32, weights = "q8_0"}

// BANKS-NOT: remark
// BANKS-NOT: error

// SHIP: module attributes {gpu.container_module}
// SHIP-NOT: swz.gemv_tile
// SHIP: gpu.module @swz_gemv_q8x {
// 4 warps x 1 row x 8 tokens x 4 segments; 1 row x 8 tokens x 128 threads.
// SHIP-NEXT: memref.global "private" @acc_q8_0 : memref<128xf32, #gpu.address_space<workgroup>>
// SHIP-NEXT: memref.global "private" @slots_q8_0 : memref<1024xf32, #gpu.address_space<workgroup>>
// SHIP-NEXT: gpu.func @matmul_q8_0_q8x(%{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xvector<4xi32>>, %{{.*}}: memref<?xvector<4xf32>>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 8 : i32, swz.grid = "ceil((N0+N1+N2)/4), ceil(T/8), 1"}
// The warp's first row: 4 b + 1 warp.
// SHIP: %[[WARP:.*]] = arith.divui %thread_id_x, %c32 : index
// SHIP-NEXT: %[[LANE:.*]] = arith.remui %thread_id_x, %c32 : index
// SHIP-NEXT: %[[WG:.*]] = arith.muli %block_id_x, %c4 : index
// SHIP-NEXT: %[[GRP:.*]] = arith.muli %[[WARP]], %c1 : index
// SHIP-NEXT: arith.addi %[[WG]], %[[GRP]] : index
// A Q8_0 block is 32 weights, two units of 16.
// SHIP: %[[NB:.*]] = arith.divui %{{.*}}, %c32 : index
// SHIP-NEXT: %[[UNITS:.*]] = arith.muli %[[NB]], %c2 : index
// One token: register accumulators over units lane, lane + 96, ...; units u + 32 and
// u + 64 load before any is used, each selected away past the row.
// SHIP: scf.if %{{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// SHIP-NEXT: scf.for %[[U:.*]] = %[[LANE]] to %{{.*}} step %c96 iter_args(%{{.*}} = %cst) -> (f32) {
// SHIP: arith.addi %[[U]], %c32 : index
// SHIP: arith.addi %[[U]], %c64 : index
// Q8_0's weights are signed bytes: dp4a.s32.s32, four a unit.
// SHIP: llvm.inline_asm "dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r"
// SHIP-NOT: dp4a.u32
// SHIP: } else {
// 2..8 tokens: every thread's slots of (row, token) zeroed, then a unit at a time.
// SHIP: memref.get_global @slots_q8_0
// SHIP-NEXT: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// SHIP: scf.for %{{.*}} = %[[LANE]] to %{{.*}} step %c32 {
// The reduction: xor 4, 2, 1 in 8-lane segments, then 8 and 16 for one token.
// SHIP: gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : f32
// SHIP: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
// SHIP: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
// SHIP: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
// SHIP: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
// SHIP: gpu.barrier
// SHIP: gpu.return

// EDIT: gpu.module @swz_gemv_q8x {
// EDIT-NEXT: memref.global "private" @acc_q8_0 : memref<256xf32, #gpu.address_space<workgroup>>
// EDIT-NEXT: memref.global "private" @slots_q8_0 : memref<2048xf32, #gpu.address_space<workgroup>>
// EDIT-NEXT: gpu.func @matmul_q8_0_q8x(
// EDIT-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil((N0+N1+N2)/8), ceil(T/8), 1"}
// EDIT: %[[WG:.*]] = arith.muli %block_id_x, %c8 : index
// EDIT-NEXT: %[[GRP:.*]] = arith.muli %{{.*}}, %c2 : index
// The warp's second row: row0 + 1, back to row0 past the last row.
// EDIT: %[[R1:.*]] = arith.addi %[[ROW0:.*]], %c1 : index
// EDIT-NEXT: %[[LIVE1:.*]] = arith.cmpi ult, %[[R1]], %{{.*}} : index
// EDIT-NEXT: arith.select %[[LIVE1]], %[[R1]], %[[ROW0]] : index
// Two rows' accumulators a token, one unit at a time.
// EDIT: scf.if %{{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// EDIT-NEXT: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32 iter_args(%{{.*}} = %cst, %{{.*}} = %cst) -> (f32, f32) {
// The slots of 2 rows x 8 tokens.
// EDIT: scf.for %{{.*}} = %c0 to %c16 step %c1 {
