// Round trip of every swz model-graph op: parse, print, parse again, print.
// RUN: swizzle-opt %s | swizzle-opt | FileCheck %s

// CHECK-LABEL: func.func @block
func.func @block(%table: tensor<49152x576xf32>, %ids: tensor<?xi32>,
                 %gamma: tensor<576xf32>, %wq: tensor<576x576xf32>,
                 %pos: tensor<?xi32>, %q3: tensor<?x9x64xf32>,
                 %k3: tensor<?x3x64xf32>, %v3: tensor<?x3x64xf32>,
                 %g: tensor<?x1536xf32>, %u: tensor<?x1536xf32>,
                 %logits: tensor<1x49152xf32>) -> tensor<1xi32> {
  // CHECK: swz.embedding %{{.*}}, %{{.*}} {weight_type = #swz.quant<q8_0>} : tensor<49152x576xf32>, tensor<?xi32> -> tensor<?x576xf32>
  %h = swz.embedding %table, %ids {weight_type = #swz.quant<q8_0>}
      : tensor<49152x576xf32>, tensor<?xi32> -> tensor<?x576xf32>
  // CHECK: swz.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<?x576xf32>, tensor<576xf32>
  %n = swz.rms_norm %h, %gamma {epsilon = 1.0e-05 : f32} : tensor<?x576xf32>, tensor<576xf32>
  // CHECK: swz.matmul %{{.*}}, %{{.*}} {weight_type = #swz.quant<q4_0>} : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  %y = swz.matmul %n, %wq {weight_type = #swz.quant<q4_0>}
      : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  // CHECK: swz.rope %{{.*}}, %{{.*}} {mode = #swz.rope_mode<normal>, rotary_dim = 64 : i32, theta = 1.000000e+04 : f32} : tensor<?x9x64xf32>, tensor<?xi32>
  %qr = swz.rope %q3, %pos {mode = #swz.rope_mode<normal>, theta = 10000.0 : f32, rotary_dim = 64 : i32}
      : tensor<?x9x64xf32>, tensor<?xi32>
  // CHECK: swz.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32} : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  %o = swz.attention %qr, %k3, %v3 {scale = 0.125 : f32, causal}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  // CHECK: swz.swiglu %{{.*}}, %{{.*}} : tensor<?x1536xf32>
  %a = swz.swiglu %g, %u : tensor<?x1536xf32>
  // CHECK: swz.add %{{.*}}, %{{.*}} : tensor<?x576xf32>
  %r = swz.add %h, %y : tensor<?x576xf32>
  // CHECK: swz.argmax %{{.*}} : tensor<1x49152xf32> -> tensor<1xi32>
  %t = swz.argmax %logits : tensor<1x49152xf32> -> tensor<1xi32>
  return %t : tensor<1xi32>
}

// f16 / bf16 activations and the other weight formats.
// CHECK-LABEL: func.func @formats
func.func @formats(%x: tensor<4x512xf16>, %w: tensor<256x512xbf16>) {
  // CHECK: #swz.quant<f32>
  %0 = swz.matmul %x, %w {weight_type = #swz.quant<f32>} : tensor<4x512xf16>, tensor<256x512xbf16> -> tensor<4x256xf16>
  // CHECK: #swz.quant<f16>
  %1 = swz.matmul %x, %w {weight_type = #swz.quant<f16>} : tensor<4x512xf16>, tensor<256x512xbf16> -> tensor<4x256xf16>
  // CHECK: #swz.quant<q4_1>
  %2 = swz.matmul %x, %w {weight_type = #swz.quant<q4_1>} : tensor<4x512xf16>, tensor<256x512xbf16> -> tensor<4x256xf16>
  // CHECK: #swz.quant<q4_k>
  %3 = swz.matmul %x, %w {weight_type = #swz.quant<q4_k>} : tensor<4x512xf16>, tensor<256x512xbf16> -> tensor<4x256xf16>
  // CHECK: #swz.quant<q5_k>
  %4 = swz.matmul %x, %w {weight_type = #swz.quant<q5_k>} : tensor<4x512xf16>, tensor<256x512xbf16> -> tensor<4x256xf16>
  // CHECK: #swz.quant<q6_k>
  %5 = swz.matmul %x, %w {weight_type = #swz.quant<q6_k>} : tensor<4x512xf16>, tensor<256x512xbf16> -> tensor<4x256xf16>
  return
}

// Neox RoPE with a partial rotary dimension.
// CHECK-LABEL: func.func @neox
func.func @neox(%q: tensor<8x14x64xf32>, %pos: tensor<8xi32>) -> tensor<8x14x64xf32> {
  // CHECK: mode = #swz.rope_mode<neox>, rotary_dim = 32 : i32
  %0 = swz.rope %q, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32, rotary_dim = 32 : i32}
      : tensor<8x14x64xf32>, tensor<8xi32>
  return %0 : tensor<8x14x64xf32>
}

// Optional matmul operands (bias: qwen2's q/k/v; residual: what swz-fuse folds in)
// and attention over a layer's KV cache.
// CHECK-LABEL: func.func @epilogues
func.func @epilogues(%x: tensor<?x896xf32>, %wk: tensor<128x896xf32>, %bk: tensor<128xf32>,
                     %r: tensor<?x128xf32>, %q: tensor<?x14x64xf32>,
                     %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>) -> (tensor<?x128xf32>, tensor<?x14x64xf32>) {
  // CHECK: swz.matmul %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<128xf32>) residual(%{{.*}} : tensor<?x128xf32>) {weight_type = #swz.quant<q8_0>} : tensor<?x896xf32>, tensor<128x896xf32> -> tensor<?x128xf32>
  %y = swz.matmul %x, %wk bias(%bk : tensor<128xf32>) residual(%r : tensor<?x128xf32>)
      {weight_type = #swz.quant<q8_0>} : tensor<?x896xf32>, tensor<128x896xf32> -> tensor<?x128xf32>
  // CHECK: swz.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, layer = 3 : i32, scale = 1.250000e-01 : f32}
  %o = swz.attention %q, %k, %v {scale = 0.125 : f32, causal, layer = 3 : i32}
      : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x64xf32>
  return %y, %o : tensor<?x128xf32>, tensor<?x14x64xf32>
}

// Attention with RoPE fused into the KV write (what swz-fuse makes of rope(k)).
// CHECK-LABEL: func.func @rope_k
func.func @rope_k(%q: tensor<?x9x64xf32>, %k: tensor<?x3x64xf32>, %v: tensor<?x3x64xf32>,
                  %pos: tensor<?xi32>) -> tensor<?x9x64xf32> {
  // CHECK: swz.attention %{{.*}}, %{{.*}}, %{{.*}} rope_k(%{{.*}} : tensor<?xi32>) {causal, k_rope_dim = 64 : i32, k_rope_mode = #swz.rope_mode<normal>, k_rope_theta = 1.000000e+05 : f32, layer = 0 : i32, scale = 1.250000e-01 : f32}
  %o = swz.attention %q, %k, %v rope_k(%pos : tensor<?xi32>) {scale = 0.125 : f32, causal,
      layer = 0 : i32, k_rope_mode = #swz.rope_mode<normal>, k_rope_theta = 1.0e+05 : f32,
      k_rope_dim = 64 : i32}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  return %o : tensor<?x9x64xf32>
}
