// End to end: the SwiGLU kernel (codegen/kernels/swiglu_f32.mlir) lowered through
// the spirv dialect, serialized to a SPIR-V binary and validated by spirv-val
// for Vulkan 1.1.
// REQUIRES: spirv-val
// RUN: rm -rf %t && mkdir -p %t
// RUN: swizzle-opt %kernels/swiglu_f32.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce | FileCheck %s --check-prefix=IR
// RUN: swizzle-opt %kernels/swiglu_f32.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce -swz-extract-kernels=output-dir=%t -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: %spirv-val --target-env vulkan1.1 %t/swz_swiglu.spv

// IR: spirv.module @__spv__swz_swiglu Logical GLSL450 requires #spirv.vce<v1.0, [Shader], [SPV_KHR_storage_buffer_storage_class]>
// IR-DAG: spirv.GlobalVariable @{{.*}} bind(0, 0) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<f32, stride=4> [0])>, StorageBuffer>
// IR-DAG: spirv.GlobalVariable @{{.*}} bind(0, 3) : !spirv.ptr<!spirv.struct<(i32 [0])>, StorageBuffer>
// IR: spirv.func @swiglu_f32()
// IR: spirv.GL.Exp
// IR: spirv.EntryPoint "GLCompute" @swiglu_f32
// IR: spirv.ExecutionMode @swiglu_f32 "LocalSize", 256, 1, 1
// REMARK: remark: wrote {{[0-9]+}} bytes of spv to swz_swiglu.spv
