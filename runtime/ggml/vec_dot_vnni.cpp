// The AVX2 kernel sets of vec_dot.cpp built once more with AVX-VNNI (-mavxvnni): their
// int8 dot products are one vpdpbusd instead of vpmaddubsw + vpmaddwd (the same integers,
// so the same results), ~13% more int8 matmul throughput on a 2-core Xeon VM (Q5_0, 256
// tokens: 112 -> 127 GFLOP/s). kern::kernels_for picks them at run time when the CPU has
// AVX-VNNI (kernels.h, use_vnni); the binary still runs on AVX2-only CPUs.
#define SWZ_GGML_VNNI_TU 1
// (the scalar kernels and helpers of the file are the base build's; unused here)
#pragma GCC diagnostic ignored "-Wunused-function"
#include "vec_dot.cpp"
