// Errors of swz-materialize-swizzle.
// RUN: swizzle-opt %s -split-input-file -swz-materialize-swizzle -verify-diagnostics

gpu.module @kernels {
  memref.global "private" @tile : memref<16x32xf16, #gpu.address_space<workgroup>>
      {swz.smem_layout = #swz.swizzle<3, 3, 3>}
  func.func @f(%r: index, %c: index) -> f16 {
    // expected-error @+1 {{swizzle #swz.swizzle<3, 3, 3> permutes blocks of 64 elements, which does not divide the 32 columns of 'memref<16x32xf16, #gpu.address_space<workgroup>>'}}
    %t = memref.get_global @tile : memref<16x32xf16, #gpu.address_space<workgroup>>
    %x = memref.load %t[%r, %c] : memref<16x32xf16, #gpu.address_space<workgroup>>
    return %x : f16
  }
}

// -----

gpu.module @kernels {
  memref.global "private" @tile : memref<16x64xf16, #gpu.address_space<workgroup>>
      {swz.smem_layout = #swz.swizzle<3, 3, 3>}
  func.func @f() {
    %t = memref.get_global @tile : memref<16x64xf16, #gpu.address_space<workgroup>>
    // A view would hide the row/column structure the XOR depends on.
    // expected-error @+1 {{swz-materialize-swizzle does not know how to swizzle the indices of 'memref.subview' into a swizzled shared-memory buffer}}
    %s = memref.subview %t[0, 0] [8, 64] [1, 1] : memref<16x64xf16, #gpu.address_space<workgroup>> to memref<8x64xf16, strided<[64, 1]>, #gpu.address_space<workgroup>>
    return
  }
}
