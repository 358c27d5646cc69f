// The cpu backend's kernel signatures: one table that swizzlec (compiler/driver/compile_cpu.cpp,
// writing a cpu package's kernels[] and launch records) and swizzle-rt's cpu backend
// (runtime/cpu/kernels.cpp, checking a package's kernels against what it implements) both
// read, so the two sides of the launch contract cannot drift (docs/package-format.md, "The
// cpu target's kernels"). Header-only, no dependencies: the compiler includes it too.
#pragma once

#include <string_view>
#include <vector>

namespace swz::cpu {

/// One kernel argument: its name (what the compiler binds to it) and its launch-contract
/// type (package::parse_arg_type: "memref<?xf32>", "memref<?xi8>" for a weight's raw GGUF
/// bytes, "memref<?xf16>" for a KV pool, "memref<?xi32>", "i32", "f32").
struct ArgSpec {
  std::string_view name;
  std::string_view dtype;
};

/// The arguments of cpu kernel `op` ("get_rows", "rms_norm", "head_norm", "matmul",
/// "rope", "attention", "swiglu", "add"), in order; empty for an op the cpu backend lacks.
/// Entries are "cpu.<op>.<type>", <type> the lower-case ggml type of the op's weight
/// ("f32" when it has none, "f16kv" for attention). Activations are f32 rows; `T` is the
/// launch's row count.
///   get_rows:  out[t] = dequantize(table row tokens[t]) for t < T; rows of W values
///   rms_norm / head_norm: out = x / sqrt(mean(x^2) + eps) * weight over segments of `seg`
///              values (seg = W: per row; seg = head_dim: per head), T rows of W
///   matmul:    out[t] = W x[t] (+ bias), W: N rows of K values of <type>, T rows
///   rope:      x rotated in place by positions[t] (neox: halves; else adjacent pairs)
///   attention: writes k, v (T rows at positions pos0..) into the sequence's KV pages,
///              then causal GQA attention of q over positions 0..pos0+T-1 into out;
///              single_row selects llama.cpp's reduction order (1: decode, 0: batched)
///   swiglu:    out = silu(gate) * up, T rows of W
///   add:       out = a + b, n values
inline std::vector<ArgSpec> kernel_signature(std::string_view op) {
  constexpr std::string_view f32 = "memref<?xf32>", bytes = "memref<?xi8>", f16 = "memref<?xf16>", i32s = "memref<?xi32>";
  if (op == "get_rows") return {{"table", bytes}, {"tokens", i32s}, {"out", f32}, {"T", "i32"}, {"W", "i32"}};
  if (op == "rms_norm" || op == "head_norm")
    return {{"x", f32}, {"weight", f32}, {"out", f32}, {"T", "i32"}, {"W", "i32"}, {"seg", "i32"}, {"eps", "f32"}};
  if (op == "matmul")
    return {{"x", f32},       {"w", bytes},     {"bias", f32},    {"out", f32},
            {"T", "i32"},     {"K", "i32"},     {"N", "i32"},     {"has_bias", "i32"}};
  if (op == "rope")
    return {{"x", f32},       {"positions", i32s}, {"T", "i32"},     {"n_head", "i32"},
            {"head_dim", "i32"}, {"n_rot", "i32"}, {"theta", "f32"}, {"neox", "i32"}};
  if (op == "attention")
    return {{"q", f32},          {"k", f32},        {"v", f32},          {"k_cache", f16},   {"v_cache", f16},
            {"block_table", i32s}, {"out", f32},    {"T", "i32"},        {"pos0", "i32"},    {"n_head", "i32"},
            {"n_head_kv", "i32"}, {"head_dim", "i32"}, {"scale", "f32"}, {"single_row", "i32"}};
  if (op == "swiglu") return {{"gate", f32}, {"up", f32}, {"out", f32}, {"T", "i32"}, {"W", "i32"}};
  if (op == "add") return {{"a", f32}, {"b", f32}, {"out", f32}, {"n", "i32"}};
  return {};
}

}  // namespace swz::cpu
