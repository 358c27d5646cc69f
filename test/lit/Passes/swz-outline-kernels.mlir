// swz-outline-kernels: each model-graph op gets its target kernels as symbol
// references, and their gpu.modules are copied into the module once.
// RUN: swizzle-opt %s -split-input-file -swz-outline-kernels=target=sm_90 -verify-diagnostics | FileCheck %s
// RUN: swizzle-opt %s -split-input-file -swz-outline-kernels=target=spirv -verify-diagnostics | FileCheck %s --check-prefix=SPV

// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @ffn
func.func @ffn(%g: tensor<?x1536xf32>, %u: tensor<?x1536xf32>, %x: tensor<?x1536xf32>) -> tensor<?x1536xf32> {
  // CHECK: swz.swiglu %{{.*}}, %{{.*}} {swz.kernels = {all = [@swz_swiglu::@swiglu_f32]}}
  %a = swz.swiglu %g, %u : tensor<?x1536xf32>
  // CHECK: swz.add %{{.*}}, %{{.*}} {swz.kernels = {all = [@swz_add::@add_f32]}}
  %b = swz.add %a, %x : tensor<?x1536xf32>
  // CHECK: swz.add %{{.*}}, %{{.*}} {swz.kernels = {all = [@swz_add::@add_f32]}}
  %c = swz.add %b, %x : tensor<?x1536xf32>
  return %c : tensor<?x1536xf32>
}
// One copy of each kernel module, whatever the number of ops using it.
// CHECK-COUNT-1: gpu.module @swz_swiglu
// CHECK-COUNT-1: gpu.module @swz_add
// CHECK-NOT: gpu.module
// SPV: swz.kernels = {all = [@swz_swiglu::@swiglu_f32]}
// SPV: gpu.module @swz_swiglu attributes {spirv.target_env

// -----

func.func @no_kernel(%x: tensor<?x512xf32>, %w: tensor<64x512xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{no GPU kernel yet for matmul.q5_k on target}}
  %y = swz.matmul %x, %w {weight_type = #swz.quant<q5_k>}
      : tensor<?x512xf32>, tensor<64x512xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
