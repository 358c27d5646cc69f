// End to end: the RMSNorm kernel (codegen/kernels/rms_norm_f32.mlir) to PTX,
// assembled by ptxas for sm_90 and sm_80.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80
// RUN: swizzle-opt %kernels/rms_norm_f32.mlir \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_rms_norm.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_rms_norm.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/rms_norm_f32.mlir \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_rms_norm.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// libdevice is linked and inlined (lit sets CUDA_ROOT): the PTX is self-contained.
// PTX-NOT: .extern
// PTX: .visible .entry rms_norm_f32(
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: rsqrt.approx.f32
// PTX-NOT: .extern

// PTXAS: Compiling entry function 'rms_norm_f32'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers
