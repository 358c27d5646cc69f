// swz-materialize-swizzle rewrites indices into swizzled shared-memory buffers.
// RUN: swizzle-opt %s -swz-materialize-swizzle | FileCheck %s
// Idempotent: the attribute is renamed, a second run changes nothing.
// RUN: swizzle-opt %s -swz-materialize-swizzle -swz-materialize-swizzle | FileCheck %s
// With constant indices the permutation folds to Swizzle<3,3,3>'s values.
// RUN: swizzle-opt %s -swz-materialize-swizzle -canonicalize | FileCheck %s --check-prefix=FOLD

gpu.module @kernels {
  // CHECK: memref.global "private" @tile : memref<16x64xf16, #gpu.address_space<workgroup>> {swz.smem_swizzled = #swz.swizzle<3, 3, 3>}
  memref.global "private" @tile : memref<16x64xf16, #gpu.address_space<workgroup>>
      {swz.smem_layout = #swz.swizzle<3, 3, 3>}
  memref.global "private" @plain : memref<16x64xf16, #gpu.address_space<workgroup>>

  // CHECK-LABEL: func.func @access(
  // CHECK-SAME: %[[R:[a-z0-9]+]]: index, %[[C:[a-z0-9]+]]: index
  func.func @access(%r: index, %c: index, %v: f16) -> (f16, vector<4x2xf16>) {
    %t = memref.get_global @tile : memref<16x64xf16, #gpu.address_space<workgroup>>
    %p = memref.get_global @plain : memref<16x64xf16, #gpu.address_space<workgroup>>
    // col' = col ^ (((row * 64 + col) >> 3) & 56)
    // CHECK: %[[C64:.*]] = arith.constant 64 : index
    // CHECK: %[[MUL:.*]] = arith.muli %[[R]], %[[C64]] : index
    // CHECK: %[[LIN:.*]] = arith.addi %[[MUL]], %[[C]] : index
    // CHECK: %[[C3:.*]] = arith.constant 3 : index
    // CHECK: %[[SH:.*]] = arith.shrui %[[LIN]], %[[C3]] : index
    // CHECK: %[[C56:.*]] = arith.constant 56 : index
    // CHECK: %[[BITS:.*]] = arith.andi %[[SH]], %[[C56]] : index
    // CHECK: %[[COL:.*]] = arith.xori %[[C]], %[[BITS]] : index
    // CHECK: memref.store %{{.*}}, %{{.*}}[%[[R]], %[[COL]]]
    memref.store %v, %t[%r, %c] : memref<16x64xf16, #gpu.address_space<workgroup>>
    // The plain buffer keeps its indices.
    // CHECK: memref.load %{{.*}}[%[[R]], %[[C]]]
    %x = memref.load %p[%r, %c] : memref<16x64xf16, #gpu.address_space<workgroup>>
    // CHECK: arith.xori
    // CHECK: nvgpu.ldmatrix %{{.*}}[%[[R]], %{{.*}}] {numTiles = 4 : i32, transpose = false}
    %y = nvgpu.ldmatrix %t[%r, %c] {numTiles = 4 : i32, transpose = false}
        : memref<16x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    return %x, %y : f16, vector<4x2xf16>
  }

  // FOLD-LABEL: func.func @constants
  func.func @constants(%v: f16) {
    %t = memref.get_global @tile : memref<16x64xf16, #gpu.address_space<workgroup>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c5 = arith.constant 5 : index
    %c19 = arith.constant 19 : index
    // Row 1, chunk 0 -> chunk 1 (column 8).
    // FOLD-DAG: %[[C1:.*]] = arith.constant 1 : index
    // FOLD-DAG: %[[C8:.*]] = arith.constant 8 : index
    // FOLD-DAG: %[[C5:.*]] = arith.constant 5 : index
    // FOLD-DAG: %[[C59:.*]] = arith.constant 59 : index
    // FOLD: memref.store %{{.*}}, %{{.*}}[%[[C1]], %[[C8]]]
    memref.store %v, %t[%c1, %c0] : memref<16x64xf16, #gpu.address_space<workgroup>>
    // Row 5, column 19 = chunk 2 + 3 -> chunk 2^5 = 7: column 59.
    // FOLD: memref.store %{{.*}}, %{{.*}}[%[[C5]], %[[C59]]]
    memref.store %v, %t[%c5, %c19] : memref<16x64xf16, #gpu.address_space<workgroup>>
    return
  }
}
