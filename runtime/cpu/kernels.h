// The cpu backend's kernels: the C++ implementations behind a cpu package's kernel entries
// ("cpu.<op>.<type>", signatures in runtime/cpu/signatures.h). The cpu backend
// (cpu_backend.h) resolves each manifest entry here once at load and calls it per launch
// with its arguments in host memory; the graph executor (runtime/exec) decides what binds
// to them from the package's launch records, exactly as for the GPU backends.
//
// Numerics follow llama.cpp's CPU backend (ggml-cpu ops.cpp): activations quantized to
// the weight type's vec_dot type before each matmul, RMSNorm summed in double, RoPE
// angles built by repeated multiplication by theta_scale in float, attention scores from
// f16 q and k, softmax with a double sum and f16-rounded probabilities before P·V (the
// non-flash path), with llama.cpp's two f16 reduction orders (batched rows: tinyBLAS;
// one row: ggml_vec_dot_f16) chosen by the attention's `single_row` argument, which the
// launch records set from the phase (prefill: 0, decode: 1), never from the row count.
// So greedy tokens match llama.cpp and logits agree to float rounding, and a row's
// result does not depend on which other rows or sequences share its pass.
//
// KV pages (the cpu target's format, backend::kv_format("cpu")): each layer's K pool is
// [page][64 slots][n_head_kv * head_dim] f16 and its V pool [page][n_head_kv * head_dim][64
// slots] f16 (V transposed, as llama.cpp's non-flash v_trans cache, so P·V reads keys in
// order). A page's host image (layer by layer, K tile then V tile) is therefore
// kvcache::PageLayout's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ggml/ggml_types.h"
#include "ggml/matmul.h"


namespace swz::cpu {

/// One launch of a cpu kernel: its arguments in signature order, resolved to host memory.
struct KernelCall {
  struct Arg {
    uint8_t* data = nullptr;  ///< memref: its first byte (the binding's offset applied)
    size_t bytes = 0;         ///< memref: bytes bound (the shape's product x element size)
    int32_t i32 = 0;
    float f32 = 0.f;
  };
  std::span<const Arg> args;
  ggml::Type type = ggml::Type::F32;  ///< the entry's <type> (the weight's ggml type)
  const std::string* entry = nullptr; ///< for error messages
  ggml::ThreadPool* pool = nullptr;
  std::vector<uint8_t>* scratch = nullptr;  ///< reusable work memory (matmul's quantized activations)
};

using KernelFn = void (*)(const KernelCall&);

/// A kernel entry resolved: its function, weight type and expected signature.
struct KernelImpl {
  KernelFn fn = nullptr;
  ggml::Type type = ggml::Type::F32;
  std::string op;
};

/// A matmul launch checked and resolved (cpu.matmul.<type>: out = W x (+ bias)), so the
/// cpu backend can run consecutive ones that share their input in one parallel region.
struct MatmulLaunch {
  const float* x = nullptr;  ///< [T, K] f32
  int T = 0, K = 0;
  ggml::MatmulJob job;       ///< W (N rows of K values of its type), y [T, N]
  const float* bias = nullptr;  ///< [N] or null
};
/// Most matmuls run_matmuls() takes at once.
inline constexpr size_t kMaxMatmulGroup = 8;

/// Checks a cpu.matmul launch's arguments (as the kernel does) and resolves them. Throws
/// std::invalid_argument naming the entry and argument.
MatmulLaunch matmul_launch(const KernelCall& c);
/// Runs `n` (1..kMaxMatmulGroup) matmul launches of the same x, T and K (none writing x or
/// another's y) in one parallel region: ggml::matmul_multi, bit-identical to running them
/// one by one; then each one's bias.
void run_matmuls(const MatmulLaunch* ms, size_t n, ggml::ThreadPool& pool, std::vector<uint8_t>& scratch);

/// The implementation of manifest entry `entry` ("cpu.matmul.q4_k"). Throws
/// std::invalid_argument naming the entry when this build has no such kernel (an unknown
/// op, or a weight type the op's dot products / dequantizers do not implement).
KernelImpl find_kernel(const std::string& entry);

}  // namespace swz::cpu
