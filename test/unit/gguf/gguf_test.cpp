// GGUF reader tests on images built byte by byte here (independent of any writer in
// the project), per the GGUF spec (ggml-org/ggml docs/gguf.md).
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

using swz::gguf::Error;
using swz::gguf::File;
using swz::gguf::ValueType;

struct Image {
  std::vector<uint8_t> b;
  template <typename T>
  void put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad(size_t align) {
    while (b.size() % align) b.push_back(0);
  }
};

// A file with one key of every scalar type, a string array, a nested array and two
// tensors (an f32 [4,2] and a q8_0 [32,1]).
Image sample(uint32_t version = 3) {
  Image im;
  im.put<uint32_t>(0x46554747);
  im.put<uint32_t>(version);
  im.put<uint64_t>(2);   // tensors
  im.put<uint64_t>(15);  // kvs
  auto key = [&](const std::string& k, ValueType t) {
    im.str(k);
    im.put<uint32_t>(static_cast<uint32_t>(t));
  };
  key("u8", ValueType::UINT8); im.put<uint8_t>(200);
  key("i8", ValueType::INT8); im.put<int8_t>(-100);
  key("u16", ValueType::UINT16); im.put<uint16_t>(60000);
  key("i16", ValueType::INT16); im.put<int16_t>(-30000);
  key("u32", ValueType::UINT32); im.put<uint32_t>(4000000000u);
  key("i32", ValueType::INT32); im.put<int32_t>(-2000000000);
  key("f32", ValueType::FLOAT32); im.put<float>(1.5f);
  key("bool", ValueType::BOOL); im.put<uint8_t>(1);
  key("str", ValueType::STRING); im.str("héllo");
  key("u64", ValueType::UINT64); im.put<uint64_t>(1ull << 60);
  key("i64", ValueType::INT64); im.put<int64_t>(-(1ll << 60));
  key("f64", ValueType::FLOAT64); im.put<double>(-2.25);
  key("arr", ValueType::ARRAY); im.put<uint32_t>(static_cast<uint32_t>(ValueType::STRING)); im.put<uint64_t>(3);
  im.str("a"); im.str(""); im.str("ccc");
  key("nested", ValueType::ARRAY); im.put<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY)); im.put<uint64_t>(2);
  for (int i = 0; i < 2; ++i) {
    im.put<uint32_t>(static_cast<uint32_t>(ValueType::INT32));
    im.put<uint64_t>(2);
    im.put<int32_t>(i);
    im.put<int32_t>(-i);
  }
  key("general.alignment", ValueType::UINT32); im.put<uint32_t>(64);
  // tensor infos
  im.str("w.f32");
  im.put<uint32_t>(2); im.put<uint64_t>(4); im.put<uint64_t>(2);
  im.put<uint32_t>(0);   // F32
  im.put<uint64_t>(0);
  im.str("w.q8");
  im.put<uint32_t>(2); im.put<uint64_t>(32); im.put<uint64_t>(1);
  im.put<uint32_t>(8);   // Q8_0
  im.put<uint64_t>(64);  // 32 bytes of f32 rounded up to 64
  im.pad(64);
  for (int i = 0; i < 8; ++i) im.put<float>(static_cast<float>(i));
  im.pad(64);
  for (int i = 0; i < 34; ++i) im.put<uint8_t>(static_cast<uint8_t>(i));
  return im;
}

TEST(Gguf, ParsesEveryValueType) {
  Image im = sample();
  File f = File::parse(im.b.data(), im.b.size());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_u64("u8"), 200u);
  EXPECT_EQ(f.get("i8").as_i64(), -100);
  EXPECT_EQ(f.get_u64("u16"), 60000u);
  EXPECT_EQ(f.get("i16").as_i64(), -30000);
  EXPECT_EQ(f.get_u64("u32"), 4000000000u);
  EXPECT_EQ(f.get("i32").as_i64(), -2000000000);
  EXPECT_DOUBLE_EQ(f.get_f64("f32"), 1.5);
  EXPECT_TRUE(f.get_bool_or("bool", false));
  EXPECT_EQ(f.get_string("str"), "héllo");
  EXPECT_EQ(f.get_u64("u64"), 1ull << 60);
  EXPECT_EQ(f.get("i64").as_i64(), -(1ll << 60));
  EXPECT_DOUBLE_EQ(f.get_f64("f64"), -2.25);
  const auto& arr = f.get("arr").as_array();
  ASSERT_EQ(arr.items.size(), 3u);
  EXPECT_EQ(arr.items[2].as_string(), "ccc");
  const auto& nested = f.get("nested").as_array();
  ASSERT_EQ(nested.items.size(), 2u);
  EXPECT_EQ(nested.items[1].as_array().items[1].as_i64(), -1);
  EXPECT_EQ(f.keys().front(), "u8");
  EXPECT_THROW(f.get_u64("i8"), Error);       // negative: not a u64
  EXPECT_THROW(f.get_string("u8"), Error);    // wrong type
  EXPECT_THROW(f.get("missing"), Error);
  EXPECT_EQ(f.get_u64_or("missing", 7), 7u);
}

TEST(Gguf, TensorTableAndData) {
  Image im = sample(2);
  File f = File::parse(im.b.data(), im.b.size());
  ASSERT_EQ(f.tensors().size(), 2u);
  const auto& t = f.require_tensor("w.f32");
  EXPECT_EQ(t.ne, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(t.n_bytes, 32u);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  float v[8];
  std::memcpy(v, t.data, sizeof v);
  EXPECT_EQ(v[7], 7.0f);
  const auto& q = f.require_tensor("w.q8");
  EXPECT_EQ(q.type, swz::ggml::Type::Q8_0);
  EXPECT_EQ(q.n_bytes, 34u);
  EXPECT_EQ(q.data[33], 33);
  EXPECT_THROW(f.require_tensor("nope"), Error);
}

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    File::parse(b.data(), b.size(), "t.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gguf, EveryTruncationIsAnErrorNotACrash) {
  Image im = sample();
  for (size_t n = 0; n < im.b.size(); ++n) {
    std::vector<uint8_t> cut(im.b.begin(), im.b.begin() + n);
    std::string msg = error_of(cut);
    EXPECT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(Gguf, BadMagicVersionTypeOffset) {
  Image im = sample();
  auto b = im.b;
  b[0] = 'X';
  EXPECT_NE(error_of(b).find("bad magic"), std::string::npos);
  b = im.b;
  b[4] = 1;
  EXPECT_NE(error_of(b).find("unsupported GGUF version 1"), std::string::npos);

  // Locate the second tensor's type field: its name "w.q8" then dims.
  std::string name = "w.q8";
  auto it = std::search(im.b.begin(), im.b.end(), name.begin(), name.end());
  size_t type_pos = (it - im.b.begin()) + name.size() + 4 + 16;
  b = im.b;
  b[type_pos] = 99;
  EXPECT_NE(error_of(b).find("unknown tensor type 99"), std::string::npos);
  b = im.b;
  b[type_pos + 4] = 0x40;  // offset 64 -> 64 + 0x40 = 128: still aligned, but past the end
  b[type_pos + 4 + 5] = 0x01;  // make it huge
  EXPECT_NE(error_of(b).find("extends past the end"), std::string::npos);
  b = im.b;
  b[type_pos + 4] = 65;  // misaligned
  EXPECT_NE(error_of(b).find("not a multiple of the alignment"), std::string::npos);
}

TEST(Gguf, OverlappingTensorsRejected) {
  Image im = sample();
  std::string name = "w.q8";
  auto it = std::search(im.b.begin(), im.b.end(), name.begin(), name.end());
  size_t off_pos = (it - im.b.begin()) + name.size() + 4 + 16 + 4;
  im.b[off_pos] = 0;  // same offset as w.f32
  EXPECT_NE(error_of(im.b).find("overlap"), std::string::npos);
}

TEST(Gguf, HugeCountsRejectedBeforeAllocation) {
  Image im;
  im.put<uint32_t>(0x46554747);
  im.put<uint32_t>(3);
  im.put<uint64_t>(0);
  im.put<uint64_t>(1);
  im.str("k");
  im.put<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY));
  im.put<uint32_t>(static_cast<uint32_t>(ValueType::UINT64));
  im.put<uint64_t>(1ull << 62);
  EXPECT_NE(error_of(im.b).find("truncated"), std::string::npos);
}

TEST(Gguf, OpenMissingFileNamesPath) {
  try {
    File::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

}  // namespace
