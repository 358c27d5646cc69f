// The residual-add kernel (codegen/kernels/add_f32.mlir) from one source to PTX
// (ptxas sm_90 and sm_80) and to SPIR-V (spirv-val, Vulkan 1.1).
// REQUIRES: ptxas, spirv-val
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/spirv
// RUN: swizzle-opt %kernels/add_f32.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_add.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_add.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/add_f32.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_add.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/add_f32.mlir -convert-math-to-spirv -convert-gpu-to-spirv \
// RUN:   -spirv-lower-abi-attrs -spirv-update-vce -swz-extract-kernels=output-dir=%t/spirv -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/spirv/swz_add.spv

// PTX: .visible .entry add_f32(
// PTX: .maxntid 256, 1, 1
// PTX: add.rn.f32
// PTXAS: Compiling entry function 'add_f32'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
