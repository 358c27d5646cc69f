// The AVX2 kernel sets of vec_dot.cpp built once more with AVX-512 (VNNI, VL, BW) on
// 256-bit vectors: vpdpbusd in its EVEX form and 32 vector registers, so a 3x4 Q5_0 tile
// keeps its 12 accumulators in registers (81-85 against 76 GFLOP/s a thread on the 2-core
// Xeon VM, 256 tokens). The same integers and the same float operations per output, so the
// same bits as the AVX2 and AVX-VNNI builds. kern::kernels_for picks them at run time when
// the CPU has AVX-512 VNNI/VL/BW (kernels.h, use_avx512); the binary still runs on
// AVX2-only CPUs.
#define SWZ_GGML_VNNI_TU 1  // a variant build of vec_dot.cpp: its kernel sets only
#define SWZ_GGML_AVX512_TU 1
#pragma GCC diagnostic ignored "-Wunused-function"
#include "vec_dot.cpp"
