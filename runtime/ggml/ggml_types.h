// Tensor element types of the GGML/GGUF formats and their block layouts.
//
// Source: ggml's type table (ggml/include/ggml.h, ggml/src/ggml-common.h) and the
// GGUF spec (docs/gguf.md in ggml-org/ggml). Numbering is the on-disk enum: never
// renumber. A "block" is the unit of quantization: `block_size` elements stored in
// `type_size` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace swz::ggml {

enum class Type : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

/// Super-block size of the k-quants (Q4_K, Q5_K, Q6_K, Q8_K): 256 elements.
inline constexpr int QK_K = 256;

struct TypeInfo {
  const char* name;     ///< ggml's name, e.g. "q4_K"
  int64_t block_size;   ///< elements per block (1 for scalar types)
  size_t type_size;     ///< bytes per block
  bool known;           ///< a type this build can size (every on-disk type ggml defines)
  bool computable;      ///< a type the runtime can dequantize and multiply
};

/// Layout facts for `t`. Unknown numeric values give {name="unknown", known=false}.
const TypeInfo& type_info(Type t);
inline const TypeInfo& type_info(uint32_t raw) { return type_info(static_cast<Type>(raw)); }

/// Bytes of a row of `n` elements of type `t`. Precondition: n % block_size == 0.
inline size_t row_size(Type t, int64_t n) {
  const TypeInfo& ti = type_info(t);
  return static_cast<size_t>(n / ti.block_size) * ti.type_size;
}

/// Parses ggml's lower-case type name ("q4_K", "f16", "bf16"...), case-insensitively.
/// Returns false when the name is unknown.
bool type_from_name(std::string_view name, Type* out);

}  // namespace swz::ggml
