// swz-spirv-workgroup-memory: workgroup memref.globals become memref.alloc in
// memory space 3 (one per function and global), which convert-gpu-to-spirv
// lowers to Workgroup-storage-class variables.
// RUN: swizzle-opt %s -split-input-file -verify-diagnostics \
// RUN:   -pass-pipeline='builtin.module(gpu.module(swz-spirv-workgroup-memory))' | FileCheck %s
// RUN: swizzle-opt %s -split-input-file -verify-diagnostics \
// RUN:   -pass-pipeline='builtin.module(gpu.module(swz-spirv-workgroup-memory),convert-gpu-to-spirv)' \
// RUN:   | FileCheck %s --check-prefix=SPV

// CHECK-LABEL: gpu.module @m
// CHECK-NOT: memref.global "private" @tile
// CHECK: gpu.func @k
// CHECK-NEXT: %[[A:.*]] = memref.alloc() : memref<4x8xf32, 3>
// CHECK-NOT: memref.alloc
// CHECK: memref.store %{{.*}}, %[[A]][%{{.*}}, %{{.*}}] : memref<4x8xf32, 3>
// CHECK: memref.load %[[A]][%{{.*}}, %{{.*}}] : memref<4x8xf32, 3>
// SPV: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<32 x f32>)>, Workgroup>
// SPV: spirv.func @k
// SPV: spirv.Store "Workgroup"
// SPV: spirv.Load "Workgroup"
module attributes {gpu.container_module} {
  gpu.module @m attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3, [Shader],
          [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {
    memref.global "private" @tile : memref<4x8xf32, #gpu.address_space<workgroup>>
    gpu.func @k(%x: memref<?xf32>) kernel
        attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [32, 1, 1]>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %tid = gpu.thread_id x
      %t = memref.get_global @tile : memref<4x8xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%tid] : memref<?xf32>
      memref.store %v, %t[%c0, %c1] : memref<4x8xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %t2 = memref.get_global @tile : memref<4x8xf32, #gpu.address_space<workgroup>>
      %w = memref.load %t2[%c0, %c1] : memref<4x8xf32, #gpu.address_space<workgroup>>
      memref.store %w, %x[%tid] : memref<?xf32>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @bad {
    // expected-error @+1 {{swz-spirv-workgroup-memory: a workgroup global needs a static shape and no initial value}}
    memref.global "private" @init : memref<4xf32, #gpu.address_space<workgroup>> = dense<0.0>
  }
}
