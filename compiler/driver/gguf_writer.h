//===- gguf_writer.h - GGUF v3 writer for swizzlec synth --------*- C++ -*-===//
//
// Writes GGUF version 3 files (ggml-org/ggml docs/gguf.md): header, metadata in insertion
// order, tensor infos, padding to `general.alignment`, then each tensor's data at an
// aligned offset. Tensor bytes come from a callback, tensor by tensor, so a multi-GB
// file is never held in memory: the next tensor is produced while the previous one is
// written (double buffering). The file is written to `<path>.tmp-<pid>` and renamed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ggml/ggml_types.h"
#include "gguf/gguf.h"

namespace swz::compiler {

/// Builders for metadata values (gguf::Value as the reader returns them).
gguf::Value ggufU32(uint32_t v);
gguf::Value ggufI32(int32_t v);
gguf::Value ggufU64(uint64_t v);
gguf::Value ggufF32(float v);
gguf::Value ggufBool(bool v);
gguf::Value ggufString(std::string v);
gguf::Value ggufStringArray(std::vector<std::string> v);
gguf::Value ggufI32Array(const std::vector<int32_t>& v);
gguf::Value ggufF32Array(const std::vector<float>& v);

class GgufWriter {
public:
  /// `alignment`: data alignment in bytes (power of two); also written as
  /// general.alignment when it is not the default 32.
  explicit GgufWriter(uint32_t alignment = 32);

  /// Sets a metadata key. A new key is appended; an existing key keeps its position and
  /// takes the new value.
  void setKV(const std::string &key, gguf::Value value);
  bool hasKV(const std::string &key) const;

  /// Declares a tensor (ne in ggml order, ne[0] contiguous). Throws std::invalid_argument
  /// when ne[0] is not a multiple of the type's block size or the name repeats.
  void addTensor(const std::string &name, std::vector<int64_t> ne, ggml::Type type);

  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    ggml::Type type;
    uint64_t bytes;
    uint64_t offset; ///< from the start of the data section
  };
  const std::vector<Tensor> &tensors() const { return tensors_; }
  /// Size of the complete file in bytes.
  uint64_t fileSize() const;

  /// Fills `dst` (tensors()[index].bytes bytes) with tensor `index`'s data.
  using Fill = std::function<void(size_t index, uint8_t *dst)>;
  /// Called after each tensor is written: (index, bytes written so far, total file bytes).
  using Progress = std::function<void(size_t, uint64_t, uint64_t)>;
  /// Writes the file. Throws std::runtime_error on I/O errors (path and errno text).
  void write(const std::string &path, const Fill &fill, const Progress &progress = {}) const;

private:
  std::string header() const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, gguf::Value>> kv_;
  std::vector<Tensor> tensors_;
  uint64_t dataSize_ = 0;
};

} // namespace swz::compiler
