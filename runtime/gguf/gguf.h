// GGUF reader: memory-maps a model file and exposes its metadata and tensor table.
//
// Source: the GGUF specification, ggml-org/ggml docs/gguf.md (versions 2 and 3,
// little-endian). Layout: magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv_count key/value pairs, tensor_count tensor infos, padding to `general.alignment`
// (default 32), then the tensor data section. Every offset and length is checked
// against the file size before use: a corrupt file throws swz::gguf::Error, it never
// reads out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "ggml/ggml_types.h"

namespace swz::gguf {

/// Any malformed or unsupported GGUF. what() names the file position or key at fault.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

struct Value;
/// A homogeneous GGUF array. Nested arrays are allowed by the spec and supported.
struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;
};

/// One metadata value. Integers keep their signedness in the variant; use the
/// as_*() accessors, which convert any integer type that fits and throw Error otherwise.
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  uint64_t as_u64() const;  ///< non-negative integer; throws Error otherwise
  int64_t as_i64() const;   ///< any integer in int64 range; throws Error otherwise
  double as_f64() const;    ///< float32/float64 or any integer
  bool as_bool() const;     ///< BOOL only
  const std::string& as_string() const;  ///< STRING only
  const Array& as_array() const;         ///< ARRAY only
};

/// One tensor of the file. `ne` is in ggml order: ne[0] is the contiguous (fastest)
/// dimension, e.g. a weight of shape [n_out, n_in] in PyTorch terms has ne = {n_in, n_out}.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;   ///< 1..4 dims, each >= 1
  ggml::Type type = ggml::Type::F32;
  uint64_t offset = 0;       ///< from the start of the data section, a multiple of the alignment
  uint64_t n_bytes = 0;      ///< ggml_nbytes for a contiguous tensor
  const uint8_t* data = nullptr;  ///< points into the mapping
  int64_t n_elements() const;
  int64_t rows() const { return n_elements() / ne[0]; }
};

/// A parsed GGUF file. Move-only; keeps the mapping alive for the tensors' data pointers.
class File {
 public:
  /// Maps `path` read-only and parses it. Throws Error (with the path in the message)
  /// for I/O failure, bad magic, unsupported version, truncation, out-of-range
  /// offsets, unknown tensor types, overlapping or misaligned tensors.
  static File open(const std::string& path);
  /// Parses an in-memory image (not copied: `data` must outlive the File). For tests and fuzzing.
  static File parse(const uint8_t* data, size_t size, std::string label = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  ///< file offset of the data section
  uint64_t file_size() const { return size_; }
  const uint8_t* base() const { return base_; }
  const std::string& path() const { return label_; }

  /// Metadata keys in file order.
  const std::vector<std::string>& keys() const { return key_order_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  /// Typed getters: throw Error naming the key when it is absent or of another type.
  const Value& get(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  double get_f64(std::string_view key) const;
  /// Getters with a default for absent keys (present but mistyped still throws).
  std::string get_string_or(std::string_view key, std::string def) const;
  uint64_t get_u64_or(std::string_view key, uint64_t def) const;
  double get_f64_or(std::string_view key, double def) const;
  bool get_bool_or(std::string_view key, bool def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(std::string_view name) const;
  /// Throws Error naming the tensor when it is absent.
  const TensorInfo& require_tensor(std::string_view name) const;

 private:
  File() = default;
  void parse_image();

  std::string label_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;  // owned mmap, null for parse()
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> key_order_;
  std::unordered_map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace swz::gguf
