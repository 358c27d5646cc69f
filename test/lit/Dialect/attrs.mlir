// Round trip of the swz attributes in generic attribute position.
// RUN: swizzle-opt %s | swizzle-opt | FileCheck %s

// CHECK-LABEL: func.func @attrs
// CHECK-SAME: identity = #swz.swizzle<0, 3, 3>, int8 = #swz.swizzle<3, 4, 3>, ropeA = #swz.rope_mode<neox>, ropeB = #swz.rope_mode<normal>, rows128B = #swz.swizzle<3, 3, 3>, rows64B = #swz.swizzle<2, 3, 3>
func.func @attrs() attributes {
    rows128B = #swz.swizzle<3, 3, 3>, rows64B = #swz.swizzle<2, 3, 3>,
    int8 = #swz.swizzle<3, 4, 3>, identity = #swz.swizzle<0, 3, 3>,
    ropeA = #swz.rope_mode<neox>, ropeB = #swz.rope_mode<normal>} {
  return
}

// CHECK-LABEL: func.func @quant
// CHECK-SAME: a = #swz.quant<f32>, b = #swz.quant<f16>, c = #swz.quant<q4_0>, d = #swz.quant<q4_1>, e = #swz.quant<q8_0>, f = #swz.quant<q4_k>, g = #swz.quant<q5_k>, h = #swz.quant<q6_k>, i = #swz.quant<q5_0>, j = #swz.quant<q5_1>, k = #swz.quant<bf16>
func.func @quant() attributes {
    a = #swz.quant<f32>, b = #swz.quant<f16>, c = #swz.quant<q4_0>, d = #swz.quant<q4_1>,
    e = #swz.quant<q8_0>, f = #swz.quant<q4_k>, g = #swz.quant<q5_k>, h = #swz.quant<q6_k>,
    i = #swz.quant<q5_0>, j = #swz.quant<q5_1>, k = #swz.quant<bf16>} {
  return
}
