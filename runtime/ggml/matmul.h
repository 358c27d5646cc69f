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

/// One weight matrix of a matmul_multi call: y = W x for the shared x.
struct MatmulJob {
  const void* W;  ///< n_out rows of n_in elements of wtype (as in matmul)
  Type wtype;
  int64_t n_out;
  float* y;  ///< [n_tokens, n_out]
};

/// Several matmuls of the same input x [n_tokens, n_in] (e.g. the Q, K and V projections, or
/// ffn gate and up) in one parallel region: x is encoded once per distinct activation type and
/// all jobs' row chunks are shared out together, so a decode step pays one thread hand-off
/// instead of one per matrix. Results are bit-identical to separate matmul() calls.
/// Same errors as matmul (checked for every job before any work).
/// Weight rows per tile of one-token (decode) matmuls: 1 or 2 fixes it for this process, 0
/// measures again (the default: the process's first decode matmuls time both and keep the
/// faster, matmul.cpp's DecodeRows; SWZ_GGML_DECODE_ROWS=1|2 fixes it at start). Results
/// never depend on it (each output sums its row's blocks in the same order); tests and
/// benchmarks set it. Throws std::invalid_argument for another value.
void set_decode_rows(int rows);

void matmul_multi(const MatmulJob* jobs, size_t n_jobs, int64_t n_in, const float* x, int64_t n_tokens,
                  ThreadPool& pool, std::vector<uint8_t>& scratch);

/// Same as matmul, with activations already encoded as vec_dot_type(wtype), `act_stride` bytes apart
/// (e.g. one quantized input shared by the Q, K and V projections).
void matmul_quantized(const void* W, Type wtype, int64_t n_out, int64_t n_in, const void* act, size_t act_stride,
                      int64_t n_tokens, float* y, ThreadPool& pool);

/// Encodes x [n_tokens, n_in] as vec_dot_type(wtype) rows into `scratch` (resized), in
/// parallel for large inputs; returns the row stride in bytes.
size_t quantize_activations(Type wtype, int64_t n_in, const float* x, int64_t n_tokens, ThreadPool& pool,
                            std::vector<uint8_t>& scratch);

}  // namespace swz::ggml
