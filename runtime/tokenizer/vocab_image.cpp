#include "tokenizer/vocab_image.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>

#include "tokenizer/tokenizer.h"

namespace swz::tokenizer {

namespace {

/// Thrown when the metadata runs past the bytes read so far.
struct NeedMore {};

std::vector<uint8_t> image_from(const std::vector<uint8_t>& b, const std::string& path,
                                const std::map<std::string, std::string>& replace) {
  size_t p = 0;
  auto take = [&](uint64_t n) {
    if (n > b.size() - p) throw NeedMore{};
    p += n;
    return p - n;
  };
  auto u32 = [&] { uint32_t v; std::memcpy(&v, &b[take(4)], 4); return v; };
  auto u64 = [&] { uint64_t v; std::memcpy(&v, &b[take(8)], 8); return v; };
  auto scalar = [](uint32_t t) -> size_t {
    static const size_t kSize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? kSize[t] : 0;
  };
  uint64_t alignment = 32;
  std::function<void(uint32_t, int)> skip = [&](uint32_t t, int depth) {
    if (size_t s = scalar(t)) { take(s); return; }
    if (t == 8) { take(u64()); return; }
    if (t != 9 || depth > 8) throw Error("vocab_image: " + path + ": bad GGUF value type " + std::to_string(t));
    const uint32_t et = u32();
    const uint64_t n = u64();
    if (size_t s = scalar(et)) {
      if (n > (b.size() - p) / s) take(b.size() - p + 1);  // reports truncation
      take(s * n);
      return;
    }
    for (uint64_t i = 0; i < n; ++i) skip(et, depth + 1);
  };

  if (b.size() < 24 || std::memcmp(b.data(), "GGUF", 4) != 0) throw Error("vocab_image: " + path + ": not a GGUF file");
  take(4);
  const uint32_t version = u32();
  u64();  // tensor count, dropped
  const uint64_t n_kv = u64();
  std::vector<uint8_t> out;
  auto put = [&](const void* d, size_t n) {
    const size_t o = out.size();
    out.resize(o + n);
    if (n) std::memcpy(out.data() + o, d, n);
  };
  const uint32_t magic = 0x46554747;
  const uint64_t zero = 0;
  put(&magic, 4);
  put(&version, 4);
  put(&zero, 8);
  put(&n_kv, 8);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t start = p;
    const uint64_t kl = u64();
    const std::string key(reinterpret_cast<const char*>(&b[take(kl)]), kl);
    const uint32_t t = u32();
    const size_t vstart = p;
    skip(t, 0);
    if (key == "general.alignment" && t == 4) {
      uint32_t a;
      std::memcpy(&a, &b[vstart], 4);
      if (a == 0 || a % 8 != 0) throw Error("vocab_image: " + path + ": bad general.alignment");
      alignment = a;
    }
    auto it = replace.find(key);
    if (it != replace.end() && t == 8) {
      const uint64_t vl = it->second.size();
      put(&kl, 8);
      put(key.data(), kl);
      put(&t, 4);
      put(&vl, 8);
      put(it->second.data(), vl);
    } else {
      put(&b[start], p - start);
    }
  }
  while (out.size() % alignment) out.push_back(0);
  return out;
}

}  // namespace

std::vector<uint8_t> vocab_image(const std::string& path, const std::map<std::string, std::string>& replace,
                                 size_t limit) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("vocab_image: cannot open " + path);
  f.seekg(0, std::ios::end);
  const auto fsize = static_cast<size_t>(f.tellg());
  f.seekg(0);
  // Read a growing prefix: the metadata is usually a few MB at the front of a large file.
  std::vector<uint8_t> b;
  for (size_t want = std::min({fsize, limit, size_t{8} << 20});; want = std::min({fsize, limit, want * 4})) {
    const size_t have = b.size();
    b.resize(want);
    f.read(reinterpret_cast<char*>(b.data() + have), static_cast<std::streamsize>(want - have));
    if (static_cast<size_t>(f.gcount()) != want - have) throw Error("vocab_image: cannot read " + path);
    try {
      return image_from(b, path, replace);
    } catch (const NeedMore&) {
      if (want == fsize || want == limit)
        throw Error("vocab_image: " + path + ": GGUF metadata truncated (read " + std::to_string(want) + " bytes)");
    }
  }
}

}  // namespace swz::tokenizer
