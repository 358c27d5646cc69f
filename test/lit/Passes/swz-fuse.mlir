// swz-fuse: residual adds fold into the preceding matmul's epilogue.
// RUN: swizzle-opt %s -swz-fuse | FileCheck %s
// RUN: swizzle-opt %s -swz-fuse=residual=false | FileCheck %s --check-prefix=OFF

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
