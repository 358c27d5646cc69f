#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

namespace swz::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxDims = 4;
// Guards against absurd counts in corrupt headers before any allocation.
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr int kMaxArrayNesting = 8;

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Bounds-checked little-endian cursor over the file image.
class Reader {
 public:
  Reader(const uint8_t* p, uint64_t n, const std::string& label) : p_(p), n_(n), label_(label) {}
  uint64_t pos() const { return pos_; }
  void seek(uint64_t pos) { pos_ = pos; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(label_ + ": " + what + " (at byte offset " + std::to_string(pos_) + ")");
  }
  void need(uint64_t bytes, const char* what) const {
    if (bytes > n_ || pos_ > n_ - bytes)
      fail(std::string("truncated file: need ") + std::to_string(bytes) + " bytes for " + what + ", file has " +
           std::to_string(n_ - std::min(pos_, n_)) + " left");
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringBytes) fail(std::string("string length ") + std::to_string(len) + " too large for " + what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
  const std::string& label_;
};

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    default: return 0;
  }
}

Value read_value(Reader& r, ValueType type, const std::string& key, int depth) {
  Value out;
  out.type = type;
  switch (type) {
    case ValueType::UINT8: out.v = uint64_t{r.read<uint8_t>(key.c_str())}; break;
    case ValueType::INT8: out.v = int64_t{r.read<int8_t>(key.c_str())}; break;
    case ValueType::UINT16: out.v = uint64_t{r.read<uint16_t>(key.c_str())}; break;
    case ValueType::INT16: out.v = int64_t{r.read<int16_t>(key.c_str())}; break;
    case ValueType::UINT32: out.v = uint64_t{r.read<uint32_t>(key.c_str())}; break;
    case ValueType::INT32: out.v = int64_t{r.read<int32_t>(key.c_str())}; break;
    case ValueType::UINT64: out.v = r.read<uint64_t>(key.c_str()); break;
    case ValueType::INT64: out.v = r.read<int64_t>(key.c_str()); break;
    case ValueType::FLOAT32: out.v = double{r.read<float>(key.c_str())}; break;
    case ValueType::FLOAT64: out.v = r.read<double>(key.c_str()); break;
    case ValueType::BOOL: {
      uint8_t b = r.read<uint8_t>(key.c_str());
      if (b > 1) r.fail("key '" + key + "': bool value " + std::to_string(b) + " is neither 0 nor 1");
      out.v = b != 0;
      break;
    }
    case ValueType::STRING: out.v = r.read_string(key.c_str()); break;
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayNesting) r.fail("key '" + key + "': arrays nested too deeply");
      Array arr;
      uint32_t et = r.read<uint32_t>(key.c_str());
      if (et > static_cast<uint32_t>(ValueType::FLOAT64))
        r.fail("key '" + key + "': unknown array element type " + std::to_string(et));
      arr.elem_type = static_cast<ValueType>(et);
      uint64_t count = r.read<uint64_t>(key.c_str());
      // Each element takes at least one byte (strings at least 8): reject counts the file cannot hold.
      size_t min_elem = arr.elem_type == ValueType::STRING ? 8 : arr.elem_type == ValueType::ARRAY ? 12 : scalar_size(arr.elem_type);
      r.need(count > (std::numeric_limits<uint64_t>::max() / min_elem) ? std::numeric_limits<uint64_t>::max() : count * min_elem,
             ("array '" + key + "'").c_str());
      arr.items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) arr.items.push_back(read_value(r, arr.elem_type, key, depth + 1));
      out.v = std::move(arr);
      break;
    }
    default:
      r.fail("key '" + key + "': unknown value type " + std::to_string(static_cast<uint32_t>(type)));
  }
  return out;
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

uint64_t Value::as_u64() const {
  if (auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (auto* i = std::get_if<int64_t>(&v); i && *i >= 0) return static_cast<uint64_t>(*i);
  throw Error(std::string("expected a non-negative integer, got ") + value_type_name(type));
}
int64_t Value::as_i64() const {
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v); u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(*u);
  throw Error(std::string("expected an integer, got ") + value_type_name(type));
}
double Value::as_f64() const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  throw Error(std::string("expected a number, got ") + value_type_name(type));
}
bool Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw Error(std::string("expected a bool, got ") + value_type_name(type));
}
const std::string& Value::as_string() const {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  throw Error(std::string("expected a string, got ") + value_type_name(type));
}
const Array& Value::as_array() const {
  if (auto* a = std::get_if<Array>(&v)) return *a;
  throw Error(std::string("expected an array, got ") + value_type_name(type));
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

File::File(File&& o) noexcept { *this = std::move(o); }
File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (map_) munmap(map_, size_);
    label_ = std::move(o.label_);
    base_ = o.base_;
    size_ = o.size_;
    map_ = o.map_;
    o.map_ = nullptr;
    version_ = o.version_;
    alignment_ = o.alignment_;
    data_offset_ = o.data_offset_;
    key_order_ = std::move(o.key_order_);
    kv_ = std::move(o.kv_);
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
  }
  return *this;
}
File::~File() {
  if (map_) munmap(map_, size_);
}

File File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  File f;
  f.label_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    throw Error(path + ": empty file, not a GGUF model");
  }
  void* m = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) throw Error(path + ": mmap failed: " + std::strerror(e));
  f.map_ = m;
  f.base_ = static_cast<const uint8_t*>(m);
  f.parse_image();
  return f;
}

File File::parse(const uint8_t* data, size_t size, std::string label) {
  File f;
  f.label_ = std::move(label);
  f.base_ = data;
  f.size_ = size;
  f.parse_image();
  return f;
}

void File::parse_image() {
  Reader r(base_, size_, label_);
  uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kMagic) {
    r.seek(0);
    r.fail("bad magic " + hex(magic) + ": not a GGUF file (expected \"GGUF\")");
  }
  version_ = r.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    r.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  uint64_t n_tensors = r.read<uint64_t>("tensor count");
  uint64_t n_kv = r.read<uint64_t>("metadata count");
  // Each kv needs >= 8+0+4 bytes and each tensor info >= 8+4+8+4+8.
  if (n_kv > size_ / 12) r.fail("metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
  if (n_tensors > size_ / 32) r.fail("tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string("metadata key");
    uint32_t t = r.read<uint32_t>("metadata value type");
    if (t > static_cast<uint32_t>(ValueType::FLOAT64))
      r.fail("key '" + key + "': unknown value type " + std::to_string(t));
    Value val = read_value(r, static_cast<ValueType>(t), key, 0);
    if (kv_.count(key)) r.fail("duplicate metadata key '" + key + "'");
    key_order_.push_back(key);
    kv_.emplace(std::move(key), std::move(val));
  }

  if (const Value* a = find("general.alignment")) {
    uint64_t al = 0;
    try {
      al = a->as_u64();
    } catch (const Error&) {
      r.fail("general.alignment is not an unsigned integer");
    }
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      r.fail("general.alignment " + std::to_string(al) + " is not a power of two in [1, 2^20]");
    alignment_ = al;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo ti;
    ti.name = r.read_string("tensor name");
    uint32_t n_dims = r.read<uint32_t>("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail("tensor '" + ti.name + "': " + std::to_string(n_dims) + " dimensions (supported 1..4)");
    int64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = r.read<uint64_t>("tensor dim");
      if (dim == 0 || dim > (1ull << 40)) r.fail("tensor '" + ti.name + "': dimension " + std::to_string(dim) + " out of range");
      if (n_el > (int64_t{1} << 50) / static_cast<int64_t>(dim)) r.fail("tensor '" + ti.name + "': element count overflows");
      n_el *= static_cast<int64_t>(dim);
      ti.ne.push_back(static_cast<int64_t>(dim));
    }
    uint32_t type = r.read<uint32_t>("tensor type");
    const ggml::TypeInfo& tinfo = ggml::type_info(type);
    if (!tinfo.known) r.fail("tensor '" + ti.name + "': unknown tensor type " + std::to_string(type));
    ti.type = static_cast<ggml::Type>(type);
    if (ti.ne[0] % tinfo.block_size != 0)
      r.fail("tensor '" + ti.name + "': row length " + std::to_string(ti.ne[0]) + " is not a multiple of " + tinfo.name +
             "'s block size " + std::to_string(tinfo.block_size));
    ti.offset = r.read<uint64_t>("tensor offset");
    if (ti.offset % alignment_ != 0)
      r.fail("tensor '" + ti.name + "': offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
             std::to_string(alignment_));
    ti.n_bytes = static_cast<uint64_t>(n_el / tinfo.block_size) * tinfo.type_size;
    if (tensor_index_.count(ti.name)) r.fail("duplicate tensor name '" + ti.name + "'");
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  uint64_t pos = r.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_) r.fail("data section starts past the end of the file");

  // Every tensor must lie inside the file, and no two may overlap.
  std::vector<const TensorInfo*> by_offset;
  for (TensorInfo& ti : tensors_) {
    if (ti.offset > size_ - data_offset_ || ti.n_bytes > size_ - data_offset_ - ti.offset)
      throw Error(label_ + ": tensor '" + ti.name + "' (" + std::to_string(ti.n_bytes) + " bytes at data offset " +
                  std::to_string(ti.offset) + ") extends past the end of the file (" + std::to_string(size_) +
                  " bytes): truncated or corrupt");
    ti.data = base_ + data_offset_ + ti.offset;
    by_offset.push_back(&ti);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes > by_offset[i]->offset)
      throw Error(label_ + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  if (!v) throw Error(label_ + ": missing metadata key '" + std::string(key) + "'");
  return *v;
}

namespace {
template <typename F>
auto typed(const std::string& label, std::string_view key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(label + ": metadata key '" + std::string(key) + "': " + e.what());
  }
}
}  // namespace

std::string File::get_string(std::string_view key) const {
  return typed(label_, key, [&] { return get(key).as_string(); });
}
uint64_t File::get_u64(std::string_view key) const {
  return typed(label_, key, [&] { return get(key).as_u64(); });
}
double File::get_f64(std::string_view key) const {
  return typed(label_, key, [&] { return get(key).as_f64(); });
}
std::string File::get_string_or(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : def;
}
uint64_t File::get_u64_or(std::string_view key, uint64_t def) const { return has(key) ? get_u64(key) : def; }
double File::get_f64_or(std::string_view key, double def) const { return has(key) ? get_f64(key) : def; }
bool File::get_bool_or(std::string_view key, bool def) const {
  return has(key) ? typed(label_, key, [&] { return get(key).as_bool(); }) : def;
}

const TensorInfo* File::tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::require_tensor(std::string_view name) const {
  const TensorInfo* t = tensor(name);
  if (!t) throw Error(label_ + ": missing tensor '" + std::string(name) + "'");
  return *t;
}

}  // namespace swz::gguf
