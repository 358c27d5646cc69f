// The tensor-core prefill GEMM executed on the CPU by codegen/check/simt.py: the
// kernels after swz-materialize-swizzle, interpreted thread by thread (128 threads
// in lockstep, ldmatrix / mma.sync fragments per the PTX ISA, cp.async zero-fill),
// against a float64 reference. Covers what only a run can: every lane's addresses,
// the 3-stage ring (K = 200: four k tiles, the tail 8 wide), partial tiles in T and
// N, T = 1, bias.
// RUN: rm -rf %t && mkdir -p %t
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-materialize-swizzle -mlir-print-op-generic -o %t/gemm_f16.mlir
// RUN: %python %swz_src_root/codegen/check/simt.py %t/gemm_f16.mlir gemm_f16 65 72 200 --bias | FileCheck %s --check-prefix=F16A
// RUN: %python %swz_src_root/codegen/check/simt.py %t/gemm_f16.mlir gemm_f16 1 40 32 | FileCheck %s --check-prefix=F16B
// A fragment error (the second n8 tile's B taken from the first) is caught:
// RUN: sed -e '0,/static_position = array<i64: 2>}> : (vector<4x2xf16>) -> vector<2xf16>/s//static_position = array<i64: 0>}> : (vector<4x2xf16>) -> vector<2xf16>/' %t/gemm_f16.mlir > %t/bad.mlir
// RUN: not %python %swz_src_root/codegen/check/simt.py %t/bad.mlir gemm_f16 20 20 64 | FileCheck %s --check-prefix=BAD

// F16A: gemm_f16 T=65 N=72 K=200 +bias: max |err| {{.*}}, 0 of 4680 outside
// F16B: gemm_f16 T=1 N=40 K=32: max |err| {{.*}}, 0 of 40 outside
// BAD: gemm_f16 T=20 N=20 K=64: max |err| {{.*}}, {{[1-9][0-9]*}} of 400 outside
