// The tensor-core prefill GEMMs executed on the CPU by codegen/check/simt.py: the
// kernels after swz-materialize-swizzle, interpreted thread by thread (128 threads
// in lockstep, ldmatrix / mma.sync fragments per the PTX ISA, cp.async zero-fill),
// against a float64 reference. Covers what only a run can: every lane's addresses,
// the 3-stage ring (K = 200: four k tiles, the tail 8 wide), partial tiles in T and
// N, T = 1, bias, and the in-kernel Q8_0 and Q4_1 dequantization.
// RUN: rm -rf %t && mkdir -p %t
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-materialize-swizzle -mlir-print-op-generic -o %t/gemm_f16.mlir
// RUN: %python %swz_src_root/codegen/check/simt.py %t/gemm_f16.mlir gemm_f16 65 72 200 --bias | FileCheck %s --check-prefix=F16A
// RUN: %python %swz_src_root/codegen/check/simt.py %t/gemm_f16.mlir gemm_f16 1 40 32 | FileCheck %s --check-prefix=F16B
// RUN: swizzle-opt %kernels/gemm_q8_0_f16.mlir -swz-materialize-swizzle -mlir-print-op-generic -o %t/gemm_q8.mlir
// RUN: %python %swz_src_root/codegen/check/simt.py %t/gemm_q8.mlir gemm_q8_0_f16 70 70 96 --bias | FileCheck %s --check-prefix=Q8
// RUN: swizzle-opt %kernels/gemm_q4_1_f16.mlir -swz-materialize-swizzle -mlir-print-op-generic -o %t/gemm_q41.mlir
// RUN: %python %swz_src_root/codegen/check/simt.py %t/gemm_q41.mlir gemm_q4_1_f16 70 70 96 --bias | FileCheck %s --check-prefix=Q41
// A fragment error (the second n8 tile's B taken from the first) is caught:
// RUN: sed -e '0,/static_position = array<i64: 2>}> : (vector<4x2xf16>) -> vector<2xf16>/s//static_position = array<i64: 0>}> : (vector<4x2xf16>) -> vector<2xf16>/' %t/gemm_f16.mlir > %t/bad.mlir
// RUN: not %python %swz_src_root/codegen/check/simt.py %t/bad.mlir gemm_f16 20 20 64 | FileCheck %s --check-prefix=BAD

// F16A: gemm_f16 T=65 N=72 K=200 +bias: max |err| {{.*}}, 0 of 4680 outside
// F16B: gemm_f16 T=1 N=40 K=32: max |err| {{.*}}, 0 of 40 outside
// Q8: gemm_q8_0_f16 T=70 N=70 K=96 +bias: max |err| {{.*}}, 0 of 4900 outside
// Q41: gemm_q4_1_f16 T=70 N=70 K=96 +bias: max |err| {{.*}}, 0 of 4900 outside
// BAD: gemm_f16 T=20 N=20 K=64: max |err| {{.*}}, {{[1-9][0-9]*}} of 400 outside
