//===- gguf_writer.cpp - GGUF v3 writer -----------------------------------===//
#include "gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <stdexcept>

namespace swz::compiler {
namespace {

using gguf::Value;
using gguf::ValueType;

template <typename T> void put(std::string &out, T v) {
  char tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));
  out.append(tmp, sizeof(T));
}

void putString(std::string &out, const std::string &s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void putValue(std::string &out, const Value &v, ValueType type) {
  switch (type) {
  case ValueType::UINT8: put<uint8_t>(out, static_cast<uint8_t>(v.as_u64())); break;
  case ValueType::INT8: put<int8_t>(out, static_cast<int8_t>(v.as_i64())); break;
  case ValueType::UINT16: put<uint16_t>(out, static_cast<uint16_t>(v.as_u64())); break;
  case ValueType::INT16: put<int16_t>(out, static_cast<int16_t>(v.as_i64())); break;
  case ValueType::UINT32: put<uint32_t>(out, static_cast<uint32_t>(v.as_u64())); break;
  case ValueType::INT32: put<int32_t>(out, static_cast<int32_t>(v.as_i64())); break;
  case ValueType::UINT64: put<uint64_t>(out, v.as_u64()); break;
  case ValueType::INT64: put<int64_t>(out, v.as_i64()); break;
  case ValueType::FLOAT32: put<float>(out, static_cast<float>(v.as_f64())); break;
  case ValueType::FLOAT64: put<double>(out, v.as_f64()); break;
  case ValueType::BOOL: put<uint8_t>(out, v.as_bool() ? 1 : 0); break;
  case ValueType::STRING: putString(out, v.as_string()); break;
  case ValueType::ARRAY: {
    const gguf::Array &a = v.as_array();
    put<uint32_t>(out, static_cast<uint32_t>(a.elem_type));
    put<uint64_t>(out, a.items.size());
    for (const Value &item : a.items)
      putValue(out, item, a.elem_type);
    break;
  }
  default:
    throw std::invalid_argument("gguf writer: unknown value type " +
                                std::to_string(static_cast<uint32_t>(type)));
  }
}

uint64_t alignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void writeAll(int fd, const uint8_t *p, size_t n, const std::string &path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

template <typename T> Value scalar(ValueType t, T v) {
  Value out;
  out.type = t;
  out.v = v;
  return out;
}

} // namespace

Value ggufU32(uint32_t v) { return scalar(ValueType::UINT32, uint64_t{v}); }
Value ggufI32(int32_t v) { return scalar(ValueType::INT32, int64_t{v}); }
Value ggufU64(uint64_t v) { return scalar(ValueType::UINT64, v); }
Value ggufF32(float v) { return scalar(ValueType::FLOAT32, double{v}); }
Value ggufBool(bool v) { return scalar(ValueType::BOOL, v); }
Value ggufString(std::string v) { return scalar(ValueType::STRING, std::move(v)); }
Value ggufStringArray(std::vector<std::string> v) {
  gguf::Array a;
  a.elem_type = ValueType::STRING;
  a.items.reserve(v.size());
  for (auto &s : v)
    a.items.push_back(ggufString(std::move(s)));
  return scalar(ValueType::ARRAY, std::move(a));
}
Value ggufI32Array(const std::vector<int32_t> &v) {
  gguf::Array a;
  a.elem_type = ValueType::INT32;
  for (int32_t x : v)
    a.items.push_back(ggufI32(x));
  return scalar(ValueType::ARRAY, std::move(a));
}
Value ggufF32Array(const std::vector<float> &v) {
  gguf::Array a;
  a.elem_type = ValueType::FLOAT32;
  for (float x : v)
    a.items.push_back(ggufF32(x));
  return scalar(ValueType::ARRAY, std::move(a));
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw std::invalid_argument("gguf writer: alignment must be a power of two");
  if (alignment != 32)
    setKV("general.alignment", ggufU32(alignment));
}

void GgufWriter::setKV(const std::string &key, Value value) {
  for (auto &kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

bool GgufWriter::hasKV(const std::string &key) const {
  for (const auto &kv : kv_)
    if (kv.first == key)
      return true;
  return false;
}

void GgufWriter::addTensor(const std::string &name, std::vector<int64_t> ne, ggml::Type type) {
  const ggml::TypeInfo &ti = ggml::type_info(type);
  if (!ti.known)
    throw std::invalid_argument("gguf writer: tensor " + name + ": unknown type");
  if (ne.empty() || ne.size() > 4)
    throw std::invalid_argument("gguf writer: tensor " + name + ": 1 to 4 dimensions");
  if (ne[0] % ti.block_size != 0)
    throw std::invalid_argument("gguf writer: tensor " + name + ": ne[0] = " + std::to_string(ne[0]) +
                                " is not a multiple of " + ti.name + "'s block size");
  for (const Tensor &t : tensors_)
    if (t.name == name)
      throw std::invalid_argument("gguf writer: duplicate tensor " + name);
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d)
    rows *= static_cast<uint64_t>(ne[d]);
  Tensor t{name, std::move(ne), type, 0, 0};
  t.bytes = ggml::row_size(type, t.ne[0]) * rows;
  t.offset = alignUp(dataSize_, alignment_);
  dataSize_ = t.offset + t.bytes;
  tensors_.push_back(std::move(t));
}

std::string GgufWriter::header() const {
  std::string h;
  put<uint32_t>(h, 0x46554747); // "GGUF"
  put<uint32_t>(h, 3);
  put<uint64_t>(h, tensors_.size());
  put<uint64_t>(h, kv_.size());
  for (const auto &[key, value] : kv_) {
    putString(h, key);
    put<uint32_t>(h, static_cast<uint32_t>(value.type));
    putValue(h, value, value.type);
  }
  for (const Tensor &t : tensors_) {
    putString(h, t.name);
    put<uint32_t>(h, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne)
      put<uint64_t>(h, static_cast<uint64_t>(d));
    put<uint32_t>(h, static_cast<uint32_t>(t.type));
    put<uint64_t>(h, t.offset);
  }
  h.resize(alignUp(h.size(), alignment_), '\0');
  return h;
}

uint64_t GgufWriter::fileSize() const { return header().size() + dataSize_; }

void GgufWriter::write(const std::string &path, const Fill &fill, const Progress &progress) const {
  const std::string h = header();
  const uint64_t total = h.size() + dataSize_;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  try {
    writeAll(fd, reinterpret_cast<const uint8_t *>(h.data()), h.size(), path);
    uint64_t written = h.size();
    // Double buffering: tensor i+1 is filled on this thread while tensor i is written
    // by an async task.
    std::vector<uint8_t> bufs[2];
    std::future<void> pending;
    const std::vector<uint8_t> zeros(alignment_, 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor &t = tensors_[i];
      std::vector<uint8_t> &buf = bufs[i % 2];
      buf.resize(t.bytes);
      fill(i, buf.data());
      if (pending.valid())
        pending.get();
      const uint64_t pad = h.size() + t.offset - written;
      const uint64_t after = written + pad + t.bytes;
      pending = std::async(std::launch::async, [&, i, pad, after, &buf = buf] {
        writeAll(fd, zeros.data(), pad, path);
        writeAll(fd, buf.data(), buf.size(), path);
        if (progress)
          progress(i, after, total);
      });
      written = after;
    }
    if (pending.valid())
      pending.get();
    if (::close(fd) != 0)
      throw std::runtime_error(path + ": close failed: " + std::strerror(errno));
    fd = -1;
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error(path + ": cannot rename " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

} // namespace swz::compiler
