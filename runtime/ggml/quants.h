// Row-level tensor-type math for the CPU runtime: dequantization, quantization and
// quantized dot products of ggml's formats (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q8_1, Q4_K, Q5_K, Q6_K, Q8_K).
//
// Source of truth: ggml (ggml/src/ggml-common.h block layouts, ggml/src/ggml-quants.c
// quantize_row_*_ref / dequantize_row_*, ggml/src/ggml-cpu type traits for the
// weight/activation pairing). Layouts are in ggml/blocks.h.
//
// A "row" is `n` consecutive elements; for block types n must be a multiple of the block
// size (32, or 256 for k-quants), else std::invalid_argument is thrown.
#pragma once

#include <cstdint>

#include "ggml/ggml_types.h"

namespace swz::ggml {

/// Decodes `n` elements of type `t` at `src` into floats. Exact to the format's definition
/// (same float operations, in the same order, as ggml's dequantize_row_*; no FMA contraction).
/// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K.
/// Throws std::invalid_argument for other types or a bad `n`.
void dequantize_row(Type t, const void* src, float* dst, int64_t n);

/// Encodes `n` floats as type `t`, bit-identical to ggml's quantize_row_*_ref (the reference
/// quantizers llama.cpp uses without an importance matrix). Supported: F32, F16, BF16, Q4_0,
/// Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K. `dst` holds row_size(t, n) bytes.
/// Throws std::invalid_argument for other types or a bad `n`.
void quantize_row(Type t, const float* src, void* dst, int64_t n);

/// Encodes activations the way llama.cpp's x86 CPU backend does (its type_traits_cpu
/// from_float): for Q8_0/Q8_1 the AVX variant (id = 127/amax, round half to even, Q8_1's
/// s = fp16(d_f32 * sum q)); Q8_K and the float types as quantize_row. This is what matmul
/// uses, so our products see the same integers as llama.cpp's. Same contract as quantize_row.
void quantize_row_activation(Type t, const float* src, void* dst, int64_t n);

/// The activation type llama.cpp's CPU backend pairs with a weight type (type_traits_cpu
/// vec_dot_type): Q4_0,Q5_0,Q8_0 -> Q8_0; Q4_1,Q5_1 -> Q8_1; Q4_K,Q5_K,Q6_K -> Q8_K;
/// F16 -> F16; BF16 -> BF16; F32 -> F32. Throws std::invalid_argument for other types.
Type vec_dot_type(Type weight_type);

/// True for the weight types vec_dot / matmul accept.
bool is_matmul_type(Type weight_type);

/// Dot product of one weight row (type `weight_type`, `n` elements) with one activation
/// row already encoded as vec_dot_type(weight_type). Integer products are exact; the
/// float accumulation order is our own (so results equal llama.cpp's up to fp32 rounding).
/// AVX2/FMA when compiled for it, scalar otherwise. Throws std::invalid_argument for
/// unsupported types or a bad `n`.
float vec_dot(Type weight_type, int64_t n, const void* w_row, const void* act_row);

/// The portable scalar implementation of vec_dot (same contract); exposed for tests.
float vec_dot_scalar(Type weight_type, int64_t n, const void* w_row, const void* act_row);

}  // namespace swz::ggml
