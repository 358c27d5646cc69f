// End to end: the RMSNorm kernel (codegen/kernels/rms_norm_f32.mlir) from one
// source to PTX (assembled by ptxas for sm_90 and sm_80) and to SPIR-V (through
// swz-spirv-workgroup-memory; spirv-val, Vulkan 1.1).
// REQUIRES: ptxas, spirv-val
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/spirv
// RUN: swizzle-opt %kernels/rms_norm_f32.mlir \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_rms_norm.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_rms_norm.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/rms_norm_f32.mlir \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_rms_norm.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/rms_norm_f32.mlir -swz-spirv-workgroup-memory -convert-math-to-spirv \
// RUN:   -convert-gpu-to-spirv -spirv-lower-abi-attrs -spirv-update-vce | FileCheck %s --check-prefix=SPV
// RUN: swizzle-opt %kernels/rms_norm_f32.mlir -swz-spirv-workgroup-memory -convert-math-to-spirv \
// RUN:   -convert-gpu-to-spirv -spirv-lower-abi-attrs -spirv-update-vce \
// RUN:   -swz-extract-kernels=output-dir=%t/spirv -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/spirv/swz_rms_norm.spv

// libdevice is linked and inlined (lit sets CUDA_ROOT): the PTX is self-contained.
// PTX-NOT: .extern
// PTX: .visible .entry rms_norm_f32(
// PTX: .maxntid 256, 1, 1
// PTX: .shared .align 4 .b8 partials[1024];
// PTX-COUNT-9: bar.sync 0;
// PTX: rsqrt.approx.f32
// PTX-NOT: .extern

// PTXAS: Compiling entry function 'rms_norm_f32'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers, used 1 barriers, 1024 bytes smem

// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<256 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} bind(0, 3) : !spirv.ptr<!spirv.struct<(i32 [0])>, StorageBuffer>
// SPV-DAG: spirv.GlobalVariable @{{.*}} bind(0, 4) : !spirv.ptr<!spirv.struct<(f32 [0])>, StorageBuffer>
// SPV: spirv.func @rms_norm_f32()
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.GL.InverseSqrt
// SPV: spirv.ExecutionMode @rms_norm_f32 "LocalSize", 256, 1, 1
