// swz-dynamic-smem: the shared tiles of a kernel that declares swz.dynamic_smem become
// views of gpu.dynamic_shared_memory, in order of first use, each at a multiple of its
// alignment from a base rounded up at run time to the largest one; other kernels and their
// globals are left alone.
// RUN: swizzle-opt %s -swz-dynamic-smem | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// Too few bytes declared: @small at 0 (256 bytes), @tile at 1024 (4096), + slack 1008 = 6128 needed.
// RUN: sed -e 's/"6128"/"6127"/' %s | not swizzle-opt -swz-dynamic-smem 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: sed -e 's/"6128"/"5 KiB"/' %s | not swizzle-opt -swz-dynamic-smem 2>&1 | FileCheck %s --check-prefix=NAN

module attributes {gpu.container_module} {
  gpu.module @m {
    memref.global "private" @small : memref<64xf32, #gpu.address_space<workgroup>>
    memref.global "private" @tile : memref<32x64xf16, #gpu.address_space<workgroup>> {alignment = 1024 : i64}
    memref.global "private" @kept : memref<16xf32, #gpu.address_space<workgroup>>
    gpu.func @big(%out: memref<?xf32>) kernel attributes {swz.dynamic_smem = "6128"} {
      %c0 = arith.constant 0 : index
      %s = memref.get_global @small : memref<64xf32, #gpu.address_space<workgroup>>
      %t = memref.get_global @tile : memref<32x64xf16, #gpu.address_space<workgroup>>
      %s2 = memref.get_global @small : memref<64xf32, #gpu.address_space<workgroup>>
      %v = memref.load %s[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %h = memref.load %t[%c0, %c0] : memref<32x64xf16, #gpu.address_space<workgroup>>
      %hf = arith.extf %h : f16 to f32
      %w = memref.load %s2[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %a = arith.addf %v, %hf : f32
      %b = arith.addf %a, %w : f32
      memref.store %b, %out[%c0] : memref<?xf32>
      gpu.return
    }
    gpu.func @static(%out: memref<?xf32>) kernel {
      %c0 = arith.constant 0 : index
      %k = memref.get_global @kept : memref<16xf32, #gpu.address_space<workgroup>>
      %v = memref.load %k[%c0] : memref<16xf32, #gpu.address_space<workgroup>>
      memref.store %v, %out[%c0] : memref<?xf32>
      gpu.return
    }
  }
}

// CHECK-NOT: memref.global "private" @small
// CHECK-NOT: memref.global "private" @tile
// CHECK: memref.global "private" @kept
// CHECK-LABEL: gpu.func @big
// CHECK: %[[WIN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[WIN]]
// CHECK: %[[A:.*]] = arith.constant 1024 : index
// CHECK: %[[R:.*]] = arith.remui %[[P]], %[[A]]
// CHECK: %[[U:.*]] = arith.subi %[[A]], %[[R]]
// CHECK: %[[SHIFT:.*]] = arith.remui %[[U]], %[[A]]
// @small first (first use), at 0; @tile at the next multiple of 1024.
// CHECK: %[[S:.*]] = memref.view %[[WIN]][%[[SHIFT]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[OFF:.*]] = arith.addi %[[SHIFT]], %c1024
// CHECK: %[[T:.*]] = memref.view %[[WIN]][%[[OFF]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<32x64xf16, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.get_global
// CHECK: memref.load %[[S]]
// CHECK: memref.load %[[T]]
// CHECK: memref.load %[[S]]
// CHECK-LABEL: gpu.func @static
// CHECK-NOT: gpu.dynamic_shared_memory
// CHECK: memref.get_global @kept

// SMALL: error: swz-dynamic-smem: the kernel's 2 shared tiles need 6128 bytes (5120 + alignment slack 1008), more than its swz.dynamic_smem 6127
// NAN: error: swz-dynamic-smem: swz.dynamic_smem must be a positive byte count, got "5 KiB"
