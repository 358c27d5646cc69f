// Test helper: metadata-only ("vocab") GGUF images, byte-identical to
// test/tokenizer/gguf_vocab.py vocab_image(), which gen_reference.py hands to llama.cpp.
// The image is the source's header and key/value section with tensor_count = 0, optionally
// with some string keys replaced, padded to the alignment. Works on truncated GGUFs (only
// the metadata is read), e.g. part01.bin of the chunked Qwen2.5-Coder GGUF.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace swz::tokenizer::test {

inline std::vector<uint8_t> read_prefix(const std::string& path, size_t limit = 64u << 20) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> b(limit);
  f.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(limit));
  b.resize(static_cast<size_t>(f.gcount()));
  return b;
}

/// Builds the vocab image of `path`; `replace` maps string-valued keys to new values
/// (a key absent from the source is not added).
inline std::vector<uint8_t> vocab_image(const std::string& path, const std::map<std::string, std::string>& replace = {}) {
  const std::vector<uint8_t> b = read_prefix(path);
  size_t p = 0;
  auto take = [&](size_t n) {
    if (p + n > b.size()) throw std::runtime_error(path + ": truncated GGUF metadata");
    size_t at = p;
    p += n;
    return at;
  };
  auto u32 = [&] { uint32_t v; std::memcpy(&v, &b[take(4)], 4); return v; };
  auto u64 = [&] { uint64_t v; std::memcpy(&v, &b[take(8)], 8); return v; };
  auto str = [&] { uint64_t n = u64(); size_t at = take(n); return std::string(reinterpret_cast<const char*>(&b[at]), n); };
  auto scalar = [](uint32_t t) -> size_t {
    switch (t) {
      case 0: case 1: case 7: return 1;
      case 2: case 3: return 2;
      case 4: case 5: case 6: return 4;
      case 10: case 11: case 12: return 8;
      default: return 0;
    }
  };
  uint64_t alignment = 32;
  std::function<void(uint32_t, const std::string&)> skip = [&](uint32_t t, const std::string& key) {
    if (size_t s = scalar(t)) {
      size_t at = take(s);
      if (key == "general.alignment" && t == 4) { uint32_t a; std::memcpy(&a, &b[at], 4); alignment = a; }
      return;
    }
    if (t == 8) { str(); return; }
    if (t == 9) {
      uint32_t et = u32();
      uint64_t n = u64();
      if (size_t s = scalar(et)) { take(s * n); return; }
      for (uint64_t i = 0; i < n; ++i) skip(et, "");
      return;
    }
    throw std::runtime_error(path + ": bad GGUF value type " + std::to_string(t));
  };
  if (b.size() < 24 || std::memcmp(b.data(), "GGUF", 4) != 0) throw std::runtime_error(path + ": not a GGUF file");
  take(4);
  const uint32_t version = u32();
  u64();
  const uint64_t n_kv = u64();
  std::vector<uint8_t> out;
  auto put = [&](const void* d, size_t n) { const auto* c = static_cast<const uint8_t*>(d); out.insert(out.end(), c, c + n); };
  const uint32_t magic = 0x46554747;
  const uint64_t zero = 0;
  put(&magic, 4); put(&version, 4); put(&zero, 8); put(&n_kv, 8);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t start = p;
    const std::string key = str();
    const uint32_t t = u32();
    skip(t, key);
    auto it = replace.find(key);
    if (it != replace.end() && t == 8) {
      const uint64_t kl = key.size(), vl = it->second.size();
      put(&kl, 8); put(key.data(), kl); put(&t, 4); put(&vl, 8); put(it->second.data(), vl);
    } else {
      put(&b[start], p - start);
    }
  }
  while (out.size() % alignment) out.push_back(0);
  return out;
}

/// First existing path among `cands` (empty strings ignored), or "".
inline std::string first_existing(const std::vector<std::string>& cands) {
  for (const auto& c : cands)
    if (!c.empty() && std::filesystem::is_regular_file(c)) return c;
  return "";
}

/// `rel` under every <root>/.venv/lib/python3*/site-packages.
inline std::vector<std::string> site_packages_candidates(const std::string& root, const std::string& rel) {
  std::vector<std::string> out;
  std::error_code ec;
  std::filesystem::path lib = std::filesystem::path(root) / ".venv" / "lib";
  if (!std::filesystem::is_directory(lib, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(lib, ec))
    if (e.path().filename().string().rfind("python3", 0) == 0) out.push_back((e.path() / "site-packages" / rel).string());
  return out;
}

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace swz::tokenizer::test
