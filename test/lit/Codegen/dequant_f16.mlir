// Weight dequantization to f16 and the f32 -> f16 activation copy for prefill
// (codegen/kernels/dequant_f16.mlir): one source to PTX (ptxas sm_90 / sm_80, no
// spills) and to SPIR-V (i8 / f16 storage buffers; spirv-val, Vulkan 1.1).
// REQUIRES: ptxas, spirv-val
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/spirv
// RUN: swizzle-opt %kernels/dequant_f16.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_dequant_f16.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_dequant_f16.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/dequant_f16.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_dequant_f16.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/dequant_f16.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce | FileCheck %s --check-prefix=SPV
// RUN: swizzle-opt %kernels/dequant_f16.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce -swz-extract-kernels=output-dir=%t/spirv -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/spirv/swz_dequant_f16.spv

// PTX-NOT: .extern
// PTX-DAG: .visible .entry dequant_q4_0_f16(
// PTX-DAG: .visible .entry dequant_q4_1_f16(
// PTX-DAG: .visible .entry dequant_q8_0_f16(
// PTX-DAG: .visible .entry dequant_q4_k_f16(
// PTX-DAG: .visible .entry dequant_q6_k_f16(
// PTX-DAG: .visible .entry convert_f32_f16(
// PTX-DAG: .maxntid 256, 1, 1
// The f16 scales are read as two bytes and reinterpreted; the result is rounded
// to f16 once (cvt.rn.f16.f32) and stored as 2 bytes.
// PTX-DAG: ld.global.u8
// PTX-DAG: cvt.f32.f16
// PTX-DAG: cvt.rn.f16.f32
// PTX-DAG: st.global.b16
// dequant_q4_k_f16 stores four f16 at a time.
// PTX-DAG: st.global.v4.b16

// Six entries, each without spills.
// PTXAS-COUNT-6: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// SPV: spirv.module @__spv__swz_dequant_f16 Logical GLSL450 requires #spirv.vce<v1.0, [Shader, StorageBuffer8BitAccess, StorageBuffer16BitAccess, Int16, Int8, Float16], [SPV_KHR_8bit_storage, SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>
// SPV-DAG: spirv.GlobalVariable @dequant_q4_k_f16_arg_0 bind(0, 0) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<i8, stride=1> [0])>, StorageBuffer>
// SPV-DAG: spirv.GlobalVariable @dequant_q4_k_f16_arg_1 bind(0, 1) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<vector<4xf16>, stride=8> [0])>, StorageBuffer>
// SPV-DAG: spirv.GlobalVariable @convert_f32_f16_arg_0 bind(0, 0) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<f32, stride=4> [0])>, StorageBuffer>
// SPV-DAG: spirv.EntryPoint "GLCompute" @dequant_q6_k_f16
// SPV-DAG: spirv.ExecutionMode @dequant_q6_k_f16 "LocalSize", 256, 1, 1
