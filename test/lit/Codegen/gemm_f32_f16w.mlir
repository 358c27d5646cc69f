// The portable prefill GEMM for the spirv target (codegen/kernels/gemm_f32_f16w.mlir):
// 64x64 workgroup tiles, 16-wide k slices staged in Workgroup-class memory, f32
// vector FMAs; lowered through the spirv dialect and validated by spirv-val
// (Vulkan 1.1; f16 storage buffers for the weight).
// REQUIRES: spirv-val
// RUN: rm -rf %t && mkdir -p %t
// RUN: swizzle-opt %kernels/gemm_f32_f16w.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce | FileCheck %s --check-prefix=SPV
// RUN: swizzle-opt %kernels/gemm_f32_f16w.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce -swz-extract-kernels=output-dir=%t -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/swz_gemm_f32_f16w.spv

// SPV: spirv.module @__spv__swz_gemm_f32_f16w Logical GLSL450 requires #spirv.vce<v1.0, [Shader, StorageBuffer16BitAccess, Float16], [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>
// Two 64 x 16 f32 tiles of workgroup memory (x and the f16 -> f32 weight slice).
// SPV-DAG: spirv.GlobalVariable @__workgroup_mem__0 : !spirv.ptr<!spirv.struct<(!spirv.array<1024 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @__workgroup_mem__1 : !spirv.ptr<!spirv.struct<(!spirv.array<1024 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @gemm_f32_f16w_arg_1 bind(0, 1) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<f16, stride=2> [0])>, StorageBuffer>
// SPV-DAG: spirv.GlobalVariable @gemm_f32_f16w_arg_7 bind(0, 7) : !spirv.ptr<!spirv.struct<(i32 [0])>, StorageBuffer>
// SPV: spirv.func @gemm_f32_f16w()
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV-COUNT-4: spirv.GL.Fma {{.*}} : vector<4xf32>
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.EntryPoint "GLCompute" @gemm_f32_f16w
// SPV: spirv.ExecutionMode @gemm_f32_f16w "LocalSize", 256, 1, 1
