// Multithreaded matrix multiplication of a ggml-typed weight matrix with f32 activations:
// the CPU runtime's linear layers (decode: n_tokens = 1; prefill: n_tokens = hundreds).
#pragma once

#include <cstdint>
#include <vector>

#include "ggml/ggml_types.h"
#include "ggml/thread_pool.h"

namespace swz::ggml {

/// y[t*n_out + r] = sum_k W[r][k] * x[t*n_in + k] for r < n_out, t < n_tokens.
///
/// W: n_out rows of n_in elements of type `wtype`, row-major, in GGUF layout (ne[0] = n_in is
/// the contiguous dimension; each row is row_size(wtype, n_in) bytes). x: f32 [n_tokens, n_in]
/// row-major. y: f32 [n_tokens, n_out] row-major (must not alias x).
///
/// Numerics follow llama.cpp's CPU backend: x is first quantized to vec_dot_type(wtype) with
/// quantize_row_activation (the same integers llama.cpp computes), then each output is the
/// quantized dot product; results agree with llama.cpp up to fp32 summation order.
/// `scratch` holds the quantized activations (resized as needed; reuse it across calls).
/// Output rows are split across `pool`; tiles of several rows x 4 tokens share each weight
/// load so prefill is compute-bound.
///
/// Throws std::invalid_argument when wtype has no dot product (is_matmul_type), n_in is not a
/// multiple of the block size, or a size is negative.
void matmul(const void* W, Type wtype, int64_t n_out, int64_t n_in, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, std::vector<uint8_t>& scratch);

/// Same, with activations already encoded as vec_dot_type(wtype), `act_stride` bytes apart
/// (e.g. one quantized input shared by the Q, K and V projections).
void matmul_quantized(const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act, size_t act_stride,
                      int64_t n_tokens, float* y, ThreadPool& pool);

/// Encodes x [n_tokens, n_in] as vec_dot_type(wtype) rows into `scratch` (resized), in
/// parallel for large inputs; returns the row stride in bytes.
size_t quantize_activations(Type wtype, int64_t n_in, const float* x, int64_t n_tokens, ThreadPool& pool,
                            std::vector<uint8_t>& scratch);

}  // namespace swz::ggml
