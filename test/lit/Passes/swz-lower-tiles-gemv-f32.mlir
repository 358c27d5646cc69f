// swz-lower-tiles: the f32 decode GEMV (every target, SPIR-V included) generated from a
// swz.gemv_tile with activations "f32" and the schedule's gemv.f32.<type> (LowerGemv.cpp),
// into the enclosing gpu.module with its workgroup globals (the launch contract of
// codegen/kernels/gemv_<type>.mlir).
// RUN: rm -rf %t && mkdir -p %t
// swz-apply-schedule alone: the GEMV takes the schedule's fields, the lookup none.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/spirv.json | FileCheck %s --check-prefix=APPLY
// APPLY: swz.gemv_tile @matmul_q4_0 rows_per_warp(1) {activations = "f32", target = "spirv", units_in_flight = 2 : i32, weights = "q4_0"}
// APPLY-NEXT: swz.gemv_tile @get_rows_q4_0 {activations = "f32", lookup, weights = "q4_0"}
// The f32 GEMV (every target; here the SPIR-V schedule's Q4_0: 2 units in flight, the
// one-token loop stepping 64 units), and a schedule edit to 3 (step 96).
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/spirv.json \
// RUN:   -swz-lower-tiles | FileCheck %s --check-prefix=F32
// RUN: sed -e 's/"q4_0": { "units_in_flight": 2 }/"q4_0": { "units_in_flight": 3 }/' \
// RUN:     %schedules/spirv.json > %t/f32.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/f32.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=F32EDIT

module {
  gpu.module @swz_gemv_q4_0 {
    swz.gemv_tile @matmul_q4_0 {activations = "f32", weights = "q4_0"}
    swz.gemv_tile @get_rows_q4_0 {activations = "f32", lookup, weights = "q4_0"}
  }
}

// F32-NOT: swz.gemv_tile
// F32: gpu.module @swz_gemv_q4_0 {
// F32-NEXT: memref.global "private" @acc : memref<128xf32, #gpu.address_space<workgroup>>
// F32-NEXT: memref.global "private" @slots : memref<1024xf32, #gpu.address_space<workgroup>>
// F32-NEXT: gpu.func @matmul_q4_0(%{{.*}}: memref<?xi32>, %{{.*}}: memref<?xvector<4xf32>>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>, spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [128, 1, 1]>, swz.grid = "ceil(N/4), ceil(T/8), 1"}
// A Q4_0 block: 18 bytes, 32 weights, 4 units of 8.
// F32: arith.cmpi ult, %{{.*}}, %{{.*}} : index
// F32-NEXT: %[[NB:.*]] = arith.divui %{{.*}}, %c32 : index
// F32-NEXT: arith.muli %[[NB]], %c4 : index
// F32-NEXT: arith.muli %[[NB]], %c18 : index
// F32: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64 iter_args(%{{.*}} = %cst) -> (f32) {
// The embedding lookup (no schedule fields): a workgroup a token, 128 threads over its
// row's units.
// F32: gpu.func @get_rows_q4_0(%{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %{{.*}}: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>, spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [128, 1, 1]>, swz.grid = "T, 1, 1"}
// F32: scf.for %{{.*}} = %thread_id_x to %{{.*}} step %c128 {
// F32EDIT: gpu.func @matmul_q4_0(
// F32EDIT: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c96 iter_args(%{{.*}} = %cst) -> (f32) {
