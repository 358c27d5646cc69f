// swz-fuse quantize-output: an RMSNorm or SwiGLU right before a matmul that reads its
// result is marked swz.quantize_output: in decode it also writes that matmul's int8
// input (rms_norm_q8x / swiglu_q8x), so no quantize launch runs between them.
// RUN: swizzle-opt %s -swz-fuse | FileCheck %s
// RUN: swizzle-opt %s -swz-fuse=quantize-output=false | FileCheck %s --check-prefix=OFF
// OFF-NOT: swz.quantize_output

// CHECK-LABEL: func.func @ffn
func.func @ffn(%x: tensor<?x1024xf32>, %g: tensor<1024xf32>, %wg: tensor<4864x1024xf32>,
               %wu: tensor<4864x1024xf32>, %wd: tensor<1024x4864xf32>) -> tensor<?x1024xf32> {
  // CHECK: swz.rms_norm %arg0, %arg1 {epsilon = {{.*}}, swz.graph_ops = [10], swz.quantize_output}
  %h = swz.rms_norm %x, %g {epsilon = 1.0e-6 : f32, swz.graph_ops = [10]} : tensor<?x1024xf32>, tensor<1024xf32>
  %gate = swz.matmul %h, %wg {weight_type = #swz.quant<q4_k>, swz.graph_ops = [11]}
      : tensor<?x1024xf32>, tensor<4864x1024xf32> -> tensor<?x4864xf32>
  %up = swz.matmul %h, %wu {weight_type = #swz.quant<q4_k>, swz.graph_ops = [12]}
      : tensor<?x1024xf32>, tensor<4864x1024xf32> -> tensor<?x4864xf32>
  // CHECK: swz.swiglu %{{.*}}, %{{.*}} {swz.graph_ops = [13], swz.quantize_output}
  %a = swz.swiglu %gate, %up {swz.graph_ops = [13]} : tensor<?x4864xf32>
  %d = swz.matmul %a, %wd {weight_type = #swz.quant<q6_k>, swz.graph_ops = [14]}
      : tensor<?x4864xf32>, tensor<1024x4864xf32> -> tensor<?x1024xf32>
  return %d : tensor<?x1024xf32>
}

// Not marked: the op after the norm is not a matmul reading it; the last norm (the
// output norm before the LM head) restricted to output rows.
// CHECK-LABEL: func.func @not_marked
func.func @not_marked(%x: tensor<?x1024xf32>, %y: tensor<?x1024xf32>, %g: tensor<1024xf32>,
                      %w: tensor<128x1024xf32>) -> (tensor<?x1024xf32>, tensor<?x128xf32>, tensor<?x128xf32>) {
  // CHECK: swz.rms_norm %arg0, %arg2 {epsilon = {{.*}}, swz.graph_ops = [1]} :
  %h = swz.rms_norm %x, %g {epsilon = 1.0e-6 : f32, swz.graph_ops = [1]} : tensor<?x1024xf32>, tensor<1024xf32>
  %s = swz.add %h, %y {swz.graph_ops = [2]} : tensor<?x1024xf32>
  %m = swz.matmul %h, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [3]}
      : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  // CHECK: swz.rms_norm %arg1, %arg2 {epsilon = {{.*}}, swz.graph_ops = [4], swz.rows = "output"} :
  %o = swz.rms_norm %y, %g {epsilon = 1.0e-6 : f32, swz.graph_ops = [4], swz.rows = "output"} : tensor<?x1024xf32>, tensor<1024xf32>
  %l = swz.matmul %o, %w {weight_type = #swz.quant<q4_k>, swz.graph_ops = [5], swz.rows = "output"}
      : tensor<?x1024xf32>, tensor<128x1024xf32> -> tensor<?x128xf32>
  return %s, %m, %l : tensor<?x1024xf32>, tensor<?x128xf32>, tensor<?x128xf32>
}
