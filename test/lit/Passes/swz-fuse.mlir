// swz-fuse: residual adds fold into the preceding matmul's epilogue; RoPE on k folds
// into the attention's KV write, and with it RoPE on q and Qwen3's head norms.
// RUN: swizzle-opt %s -swz-fuse | FileCheck %s
// RUN: swizzle-opt %s -swz-fuse=residual=false | FileCheck %s --check-prefix=OFF
// RUN: swizzle-opt %s -swz-fuse=rope-kv=false | FileCheck %s --check-prefix=NOROPE
// RUN: swizzle-opt %s -swz-fuse=qk-rope=false | FileCheck %s --check-prefix=NOQK

// CHECK-LABEL: func.func @layer
func.func @layer(%x: tensor<?x576xf32>, %a: tensor<?x576xf32>, %wo: tensor<576x576xf32>,
                 %f: tensor<?x1536xf32>, %wd: tensor<576x1536xf32>) -> tensor<?x576xf32> {
  %o = swz.matmul %a, %wo {weight_type = #swz.quant<q4_1>, swz.graph_ops = [8]}
      : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  // add(residual, matmul): the add's result is now the matmul's, both graph ops recorded.
  // CHECK: %[[X1:.*]] = swz.matmul %{{.*}}, %{{.*}} residual(%arg0 : tensor<?x576xf32>) {swz.graph_ops = [8, 9], weight_type = #swz.quant<q4_1>}
  %x1 = swz.add %x, %o {swz.graph_ops = [9]} : tensor<?x576xf32>
  %d = swz.matmul %f, %wd {weight_type = #swz.quant<q6_k>, swz.graph_ops = [14]}
      : tensor<?x1536xf32>, tensor<576x1536xf32> -> tensor<?x576xf32>
  // add(matmul, residual): operand order does not matter.
  // CHECK: %[[X2:.*]] = swz.matmul %{{.*}}, %{{.*}} residual(%[[X1]] : tensor<?x576xf32>) {swz.graph_ops = [14, 15], weight_type = #swz.quant<q6_k>}
  %x2 = swz.add %d, %x1 {swz.graph_ops = [15]} : tensor<?x576xf32>
  // CHECK-NOT: swz.add
  // CHECK: return %[[X2]]
  // OFF-COUNT-2: swz.add
  return %x2 : tensor<?x576xf32>
}

// A matmul whose result is also used elsewhere keeps its add: the epilogue would
// otherwise overwrite a value someone still reads.
// CHECK-LABEL: func.func @shared
func.func @shared(%x: tensor<?x576xf32>, %a: tensor<?x576xf32>, %wo: tensor<576x576xf32>)
    -> (tensor<?x576xf32>, tensor<?x576xf32>) {
  // CHECK: swz.matmul %{{.*}}, %{{.*}} {weight_type
  %o = swz.matmul %a, %wo {weight_type = #swz.quant<q4_1>}
      : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  // CHECK: swz.add
  %x1 = swz.add %x, %o : tensor<?x576xf32>
  return %x1, %o : tensor<?x576xf32>, tensor<?x576xf32>
}

// An op between the matmul and its add (here one reading x, the buffer the fused
// launch would overwrite) keeps them apart.
// CHECK-LABEL: func.func @not_adjacent
func.func @not_adjacent(%x: tensor<?x576xf32>, %a: tensor<?x576xf32>, %wo: tensor<576x576xf32>,
                        %g: tensor<576xf32>) -> (tensor<?x576xf32>, tensor<?x576xf32>) {
  // CHECK: swz.matmul %{{.*}}, %{{.*}} {weight_type
  %o = swz.matmul %a, %wo {weight_type = #swz.quant<q4_1>}
      : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  // CHECK: swz.rms_norm
  %h = swz.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : tensor<?x576xf32>, tensor<576xf32>
  // CHECK: swz.add
  %x1 = swz.add %x, %o : tensor<?x576xf32>
  return %x1, %h : tensor<?x576xf32>, tensor<?x576xf32>
}

// A residual that is the matmul's own input keeps its add: the fused epilogue would write
// x in place while other workgroups still read it as the input.
// CHECK-LABEL: func.func @own_input
func.func @own_input(%x: tensor<?x576xf32>, %w: tensor<576x576xf32>) -> tensor<?x576xf32> {
  // CHECK: swz.matmul %{{.*}}, %{{.*}} {weight_type
  %y = swz.matmul %x, %w {weight_type = #swz.quant<q8_0>}
      : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  // CHECK: swz.add
  %x1 = swz.add %x, %y : tensor<?x576xf32>
  return %x1 : tensor<?x576xf32>
}

// The LM head runs on the output rows only (swz.rows): not fused into a full add.
// CHECK-LABEL: func.func @output_rows
func.func @output_rows(%x: tensor<?x576xf32>, %h: tensor<?x576xf32>, %w: tensor<576x576xf32>)
    -> tensor<?x576xf32> {
  %y = swz.matmul %h, %w {weight_type = #swz.quant<q8_0>, swz.rows = "output"}
      : tensor<?x576xf32>, tensor<576x576xf32> -> tensor<?x576xf32>
  // CHECK: swz.add
  %r = swz.add %x, %y : tensor<?x576xf32>
  return %r : tensor<?x576xf32>
}

// rope(k) reaching the attention only through the importer's reshapes: the rope goes,
// the attention stores k rotated (rope_k) and stands for both graph ops.
// CHECK-LABEL: func.func @rope_kv
// NOROPE-LABEL: func.func @rope_kv
func.func @rope_kv(%q: tensor<?x9x64xf32>, %k: tensor<?x3x64xf32>, %v: tensor<?x3x64xf32>,
                   %pos: tensor<?xi32>) -> tensor<?x9x64xf32> {
  // NOROPE: swz.rope
  // NOROPE: swz.attention %{{.*}}, %{{.*}}, %{{.*}} {causal
  %kr = swz.rope %k, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+05 : f32,
      rotary_dim = 64 : i32, swz.graph_ops = [6]} : tensor<?x3x64xf32>, tensor<?xi32>
  %kf = tensor.collapse_shape %kr [[0], [1, 2]] : tensor<?x3x64xf32> into tensor<?x192xf32>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %kf, %c0 : tensor<?x192xf32>
  %k3 = tensor.expand_shape %kf [[0], [1, 2]] output_shape [%t, 3, 64]
      : tensor<?x192xf32> into tensor<?x3x64xf32>
  // CHECK-NOT: swz.rope
  // CHECK: swz.attention %{{.*}}, %arg1, %{{.*}} rope_k(%arg3 : tensor<?xi32>) {causal, k_rope_dim = 64 : i32, k_rope_mode = #swz.rope_mode<normal>, k_rope_theta = 1.000000e+05 : f32, layer = 0 : i32, scale = 1.250000e-01 : f32, swz.graph_ops = [7, 6]}
  %o = swz.attention %q, %k3, %v {scale = 0.125 : f32, causal, layer = 0 : i32,
      swz.graph_ops = [7]}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  return %o : tensor<?x9x64xf32>
}

// A rotated k that something else also reads keeps its rope.
// CHECK-LABEL: func.func @rope_shared
func.func @rope_shared(%q: tensor<?x9x64xf32>, %k: tensor<?x3x64xf32>, %v: tensor<?x3x64xf32>,
                       %pos: tensor<?xi32>) -> (tensor<?x9x64xf32>, tensor<?x3x64xf32>) {
  // CHECK: swz.rope
  %kr = swz.rope %k, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32,
      rotary_dim = 64 : i32} : tensor<?x3x64xf32>, tensor<?xi32>
  // CHECK: swz.attention %{{.*}}, %{{.*}}, %{{.*}} {causal
  %o = swz.attention %q, %kr, %v {scale = 0.125 : f32, causal, layer = 0 : i32}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  return %o, %kr : tensor<?x9x64xf32>, tensor<?x3x64xf32>
}

// Qwen3's layer as the importer writes it: head norms on q and k, rope on both (each
// through the importer's collapse / expand round trip), attention. All four ops go into
// the attention: rope_k, q_rope, qk_norm with the norms' weights and epsilon; it stands
// for graph ops [9, 8, 7, 5, 6].
// CHECK-LABEL: func.func @qwen3_qk
// NOQK-LABEL: func.func @qwen3_qk
func.func @qwen3_qk(%q0: tensor<?x16x128xf32>, %k0: tensor<?x8x128xf32>, %v: tensor<?x8x128xf32>,
                    %gq: tensor<128xf32>, %gk: tensor<128xf32>, %pos: tensor<?xi32>)
    -> tensor<?x16x128xf32> {
  %c0 = arith.constant 0 : index
  %qn = swz.rms_norm %q0, %gq {epsilon = 1.0e-06 : f32, swz.graph_ops = [5]}
      : tensor<?x16x128xf32>, tensor<128xf32>
  %kn = swz.rms_norm %k0, %gk {epsilon = 1.0e-06 : f32, swz.graph_ops = [6]}
      : tensor<?x8x128xf32>, tensor<128xf32>
  %qnf = tensor.collapse_shape %qn [[0], [1, 2]] : tensor<?x16x128xf32> into tensor<?x2048xf32>
  %tq = tensor.dim %qnf, %c0 : tensor<?x2048xf32>
  %qn3 = tensor.expand_shape %qnf [[0], [1, 2]] output_shape [%tq, 16, 128]
      : tensor<?x2048xf32> into tensor<?x16x128xf32>
  %qr = swz.rope %qn3, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32,
      rotary_dim = 128 : i32, swz.graph_ops = [7]} : tensor<?x16x128xf32>, tensor<?xi32>
  %knf = tensor.collapse_shape %kn [[0], [1, 2]] : tensor<?x8x128xf32> into tensor<?x1024xf32>
  %tk = tensor.dim %knf, %c0 : tensor<?x1024xf32>
  %kn3 = tensor.expand_shape %knf [[0], [1, 2]] output_shape [%tk, 8, 128]
      : tensor<?x1024xf32> into tensor<?x8x128xf32>
  %kr = swz.rope %kn3, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32,
      rotary_dim = 128 : i32, swz.graph_ops = [8]} : tensor<?x8x128xf32>, tensor<?xi32>
  %qrf = tensor.collapse_shape %qr [[0], [1, 2]] : tensor<?x16x128xf32> into tensor<?x2048xf32>
  %tq2 = tensor.dim %qrf, %c0 : tensor<?x2048xf32>
  %q3 = tensor.expand_shape %qrf [[0], [1, 2]] output_shape [%tq2, 16, 128]
      : tensor<?x2048xf32> into tensor<?x16x128xf32>
  // CHECK-NOT: swz.rms_norm
  // CHECK-NOT: swz.rope
  // CHECK: swz.attention %arg0, %arg1, %arg2 rope_k(%arg5 : tensor<?xi32>) qk_norm(%arg3, %arg4 : tensor<128xf32>, tensor<128xf32>) {causal, k_rope_dim = 128 : i32, k_rope_mode = #swz.rope_mode<neox>, k_rope_theta = 1.000000e+06 : f32, layer = 0 : i32, norm_epsilon = 9.99999997E-7 : f32, q_rope, scale = 0.0883883461 : f32, swz.graph_ops = [9, 8, 7, 5, 6]}
  // CHECK-NOT: tensor.collapse_shape
  // Without qk-rope only k's rope goes; q keeps its norm and rope, k its norm.
  // NOQK-COUNT-2: swz.rms_norm
  // NOQK: swz.rope %{{.*}}, %arg5
  // NOQK-NOT: swz.rope %
  // NOQK: swz.attention %{{.*}}, %{{.*}}, %arg2 rope_k(%arg5 : tensor<?xi32>) {causal
  %o = swz.attention %q3, %kr, %v {scale = 0.0883883461 : f32, causal, layer = 0 : i32,
      swz.graph_ops = [9]}
      : tensor<?x16x128xf32>, tensor<?x8x128xf32>, tensor<?x8x128xf32> -> tensor<?x16x128xf32>
  return %o : tensor<?x16x128xf32>
}

// Without head norms (Qwen2.5, SmolLM2) only the rope on q joins; a rope on q with
// other attributes than k's (here theta) stays.
// CHECK-LABEL: func.func @q_rope_only
func.func @q_rope_only(%q: tensor<?x9x64xf32>, %k: tensor<?x3x64xf32>, %v: tensor<?x3x64xf32>,
                       %pos: tensor<?xi32>, %q2: tensor<?x9x64xf32>) -> (tensor<?x9x64xf32>, tensor<?x9x64xf32>) {
  %qr = swz.rope %q, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+05 : f32,
      rotary_dim = 64 : i32, swz.graph_ops = [5]} : tensor<?x9x64xf32>, tensor<?xi32>
  %kr = swz.rope %k, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+05 : f32,
      rotary_dim = 64 : i32, swz.graph_ops = [6]} : tensor<?x3x64xf32>, tensor<?xi32>
  // CHECK: swz.attention %arg0, %arg1, %arg2 rope_k(%arg3 : tensor<?xi32>) {causal, {{.*}}q_rope, scale = 1.250000e-01 : f32, swz.graph_ops = [7, 6, 5]}
  %o = swz.attention %qr, %kr, %v {scale = 0.125 : f32, causal, layer = 0 : i32,
      swz.graph_ops = [7]}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  // CHECK: swz.rope %arg4, %arg3 {mode = #swz.rope_mode<normal>, rotary_dim = 64 : i32, theta = 1.000000e+04
  %qr2 = swz.rope %q2, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+04 : f32,
      rotary_dim = 64 : i32} : tensor<?x9x64xf32>, tensor<?xi32>
  %kr2 = swz.rope %k, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+05 : f32,
      rotary_dim = 64 : i32} : tensor<?x3x64xf32>, tensor<?xi32>
  // CHECK: swz.attention %{{.*}}, %arg1, %arg2 rope_k(%arg3 : tensor<?xi32>) {causal, k_rope_dim = 64 : i32, k_rope_mode = #swz.rope_mode<normal>, k_rope_theta = 1.000000e+05 : f32, layer = 1 : i32, scale
  %o2 = swz.attention %qr2, %kr2, %v {scale = 0.125 : f32, causal, layer = 1 : i32}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  return %o, %o2 : tensor<?x9x64xf32>, tensor<?x9x64xf32>
}

// q before its rope read elsewhere too: the fused launch would rotate q's buffer in
// place under that reader, so the rope on q stays (k's still joins the KV write).
// CHECK-LABEL: func.func @q_read_twice
func.func @q_read_twice(%q: tensor<?x9x64xf32>, %k: tensor<?x3x64xf32>, %v: tensor<?x3x64xf32>,
                        %pos: tensor<?xi32>) -> (tensor<?x9x64xf32>, tensor<?x9x64xf32>) {
  // CHECK: swz.rope %arg0, %arg3
  %qr = swz.rope %q, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+05 : f32,
      rotary_dim = 64 : i32} : tensor<?x9x64xf32>, tensor<?xi32>
  %kr = swz.rope %k, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+05 : f32,
      rotary_dim = 64 : i32} : tensor<?x3x64xf32>, tensor<?xi32>
  // CHECK: swz.attention %{{.*}}, %arg1, %arg2 rope_k(%arg3 : tensor<?xi32>) {causal, k_rope_dim = 64 : i32, k_rope_mode = #swz.rope_mode<normal>, k_rope_theta = 1.000000e+05 : f32, layer = 0 : i32, scale
  %o = swz.attention %qr, %kr, %v {scale = 0.125 : f32, causal, layer = 0 : i32}
      : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
  return %o, %q : tensor<?x9x64xf32>, tensor<?x9x64xf32>
}
