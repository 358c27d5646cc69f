// swz-fuse shared-input: a run of up to three adjacent matmuls that read one input with
// one weight type (q, k, v; gate, up), none with a residual or a row restriction, is
// marked swz.shared_input = the run's first graph op: their decode GEMVs run as one
// launch of the int8 kernel, the input quantized and read once.
// RUN: swizzle-opt %s -swz-fuse | FileCheck %s
// RUN: swizzle-opt %s -swz-fuse=shared-input=false | FileCheck %s --check-prefix=OFF
// OFF-NOT: swz.shared_input

// CHECK-LABEL: func.func @qkv_gate_up
func.func @qkv_gate_up(%h: tensor<?x1024xf32>, %wq: tensor<1024x1024xf32>, %wk: tensor<128x1024xf32>,
                       %wv: tensor<128x1024xf32>, %bq: tensor<1024xf32>, %h2: tensor<?x1024xf32>,
                       %wg: tensor<4864x1024xf32>, %wu: tensor<4864x1024xf32>)
    -> (tensor<?x1024xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x4864xf32>) {
  // A bias does not matter (each output adds its own).
  // CHECK: swz.matmul %arg0, %arg1 bias(%arg4 : tensor<1024xf32>) {swz.graph_ops = [2], swz.shared_input = 2 : i64, weight_type = #swz.quant<q4_k>}
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [3], swz.shared_input = 2 : i64, weight_type = #swz.quant<q4_k>}
  // CHECK: swz.matmul %arg0, %arg3 {swz.graph_ops = [4], swz.shared_input = 2 : i64, weight_type = #swz.quant<q4_k>}
  %q = swz.matmul %h, %wq bias(%bq : tensor<1024xf32>) {weight_type = #swz.quant<q4_k>, swz.graph_ops = [2]}
      : tensor<?x1024xf32>, tensor<1024x1024xf32> -> tensor<?x1024xf32>
  %k = swz.matmul %h, %wk {weight_type = #swz.quant<q4_k>, swz.graph_ops = [3]}
      : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %v = swz.matmul %h, %wv {weight_type = #swz.quant<q4_k>, swz.graph_ops = [4]}
      : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  // CHECK: swz.matmul %arg5, %arg6 {swz.graph_ops = [11], swz.shared_input = 11 : i64, weight_type = #swz.quant<q4_k>}
  // CHECK: swz.matmul %arg5, %arg7 {swz.graph_ops = [12], swz.shared_input = 11 : i64, weight_type = #swz.quant<q4_k>}
  %g = swz.matmul %h2, %wg {weight_type = #swz.quant<q4_k>, swz.graph_ops = [11]}
      : tensor<?x1024xf32>, tensor<4864x1024xf32> -> tensor<?x4864xf32>
  %u = swz.matmul %h2, %wu {weight_type = #swz.quant<q4_k>, swz.graph_ops = [12]}
      : tensor<?x1024xf32>, tensor<4864x1024xf32> -> tensor<?x4864xf32>
  %a = swz.swiglu %g, %u {swz.graph_ops = [13]} : tensor<?x4864xf32>
  return %q, %k, %v, %a : tensor<?x1024xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x4864xf32>
}

// Not a run: another weight type (Q4_K_M keeps v in Q6_K: another kernel), another input,
// an op in between, more than three, a residual.
// CHECK-LABEL: func.func @not_runs
func.func @not_runs(%h: tensor<?x1024xf32>, %x: tensor<?x1024xf32>, %w: tensor<128x1024xf32>,
                    %r: tensor<?x128xf32>) -> tensor<?x128xf32> {
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [1], swz.shared_input = 1 : i64, weight_type = #swz.quant<q4_k>}
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [2], swz.shared_input = 1 : i64, weight_type = #swz.quant<q4_k>}
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [3], weight_type = #swz.quant<q6_k>}
  %m1 = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [1]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %m2 = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [2]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %m3 = swz.matmul %h, %w {weight_type = #swz.quant<q6_k>, swz.graph_ops = [3]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  // CHECK: swz.matmul %arg1, %arg2 {swz.graph_ops = [4], weight_type = #swz.quant<q4_k>}
  %m4 = swz.matmul %x, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [4]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  // CHECK: swz.add
  %s = swz.add %m1, %m2 {swz.graph_ops = [5]} : tensor<?x128xf32>
  // CHECK: swz.matmul %arg1, %arg2 {swz.graph_ops = [6], weight_type = #swz.quant<q4_k>}
  %m5 = swz.matmul %x, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [6]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  // Four in a row: the first three are a run, the fourth stands alone.
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [7], swz.shared_input = 7 : i64
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [8], swz.shared_input = 7 : i64
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [9], swz.shared_input = 7 : i64
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [10], weight_type
  %n1 = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [7]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %n2 = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [8]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %n3 = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [9]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %n4 = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [10]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  // A matmul that took its residual add (after the residual fusion) is no run's member.
  // CHECK: swz.matmul %arg0, %arg2 residual(%arg3 : tensor<?x128xf32>) {swz.graph_ops = [11, 12], weight_type
  // CHECK: swz.matmul %arg0, %arg2 {swz.graph_ops = [13], weight_type
  %o = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [11]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %o2 = swz.add %r, %o {swz.graph_ops = [12]} : tensor<?x128xf32>
  %p = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [13]} : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  %t1 = swz.add %s, %m3 {swz.graph_ops = [14]} : tensor<?x128xf32>
  %t2 = swz.add %t1, %m4 {swz.graph_ops = [15]} : tensor<?x128xf32>
  %t3 = swz.add %t2, %m5 {swz.graph_ops = [16]} : tensor<?x128xf32>
  %t4 = swz.add %t3, %n1 {swz.graph_ops = [17]} : tensor<?x128xf32>
  %t5 = swz.add %t4, %n2 {swz.graph_ops = [18]} : tensor<?x128xf32>
  %t6 = swz.add %t5, %n3 {swz.graph_ops = [19]} : tensor<?x128xf32>
  %t7 = swz.add %t6, %n4 {swz.graph_ops = [20]} : tensor<?x128xf32>
  %t8 = swz.add %t7, %o2 {swz.graph_ops = [21]} : tensor<?x128xf32>
  %t9 = swz.add %t8, %p {swz.graph_ops = [22]} : tensor<?x128xf32>
  return %t9 : tensor<?x128xf32>
}
