// Manifest kernel entries as backends use them. See kernel_record.h.
#include "backend/kernel_record.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "package/package.h"

namespace swz::backend {
namespace {

/// Bytes of a scalar element type, 0 if unknown.
uint32_t scalar_bytes(const std::string& t) {
  if (t == "f32" || t == "i32") return 4;
  if (t == "f16" || t == "bf16" || t == "i16") return 2;
  if (t == "i8") return 1;
  if (t == "f64" || t == "i64") return 8;
  return 0;
}

/// Splits `s` at 'x' outside angle brackets ("?x?xvector<4xf32>" -> "?", "?", "vector<4xf32>").
std::vector<std::string> split_dims(const std::string& s) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : s) {
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == 'x' && depth == 0)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

}  // namespace

ArgSpec parse_arg_type(const std::string& type) {
  ArgSpec s;
  if (type == "i32") return s;
  if (type == "f32") {
    s.kind = Arg::F32;
    return s;
  }
  const std::string pre = "memref<";
  if (type.rfind(pre, 0) != 0 || type.back() != '>')
    throw Error("unsupported kernel argument type '" + type + "' (expected i32, f32 or memref<...>)");
  std::string body = type.substr(pre.size(), type.size() - pre.size() - 1);
  // A layout or memory space after a top-level ',' does not change the descriptor.
  int depth = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '<') ++depth;
    if (body[i] == '>') --depth;
    if (body[i] == ',' && depth == 0) {
      body.resize(i);
      break;
    }
  }
  std::vector<std::string> parts = split_dims(body);
  const std::string elem = parts.back();
  parts.pop_back();
  s.kind = Arg::Memref;
  s.rank = int(parts.size());
  if (s.rank < 1 || s.rank > 4) throw Error("memref type '" + type + "': rank " + std::to_string(s.rank) + " outside 1..4");
  s.elem_bytes = scalar_bytes(elem);
  if (s.elem_bytes == 0 && elem.rfind("vector<", 0) == 0 && elem.back() == '>') {
    std::vector<std::string> v = split_dims(elem.substr(7, elem.size() - 8));
    if (v.size() == 2) {
      const uint32_t lanes = uint32_t(std::strtoul(v[0].c_str(), nullptr, 10));
      s.elem_bytes = lanes * scalar_bytes(v[1]);
    }
  }
  if (s.elem_bytes == 0) throw Error("memref type '" + type + "': unsupported element type '" + elem + "'");
  return s;
}

KernelRecord parse_kernel(const package::Kernel& k, const std::string& abi) {
  KernelRecord r;
  r.entry = k.entry;
  auto fail = [&](const std::string& field, const std::string& problem) -> Error {
    return Error("kernel " + k.entry + ": " + field + ": " + problem);
  };
  if (!k.file || k.file->empty()) throw fail("file", "missing (a GPU kernel needs its .ptx / .spv file)");
  r.file = *k.file;
  const nlohmann::json& l = k.launch;
  if (!l.is_object()) throw fail("launch", "not an object");
  if (!l.contains("abi") || !l["abi"].is_string() || l["abi"].get<std::string>() != abi)
    throw fail("launch.abi", (l.contains("abi") ? l["abi"].dump() : std::string("missing")) + "; this backend runs \"" + abi + "\"");
  if (!l.contains("function") || !l["function"].is_string() || l["function"].get<std::string>().empty())
    throw fail("launch.function", "missing");
  r.function = l["function"].get<std::string>();
  if (!l.contains("block") || !l["block"].is_array() || l["block"].size() != 3) throw fail("launch.block", "expected [x, y, z]");
  for (int i = 0; i < 3; ++i) {
    const nlohmann::json& b = l["block"][i];
    if (!b.is_number_integer() || b.get<int64_t>() < 1 || b.get<int64_t>() > 1024)
      throw fail("launch.block", "expected three integers in 1..1024, got " + l["block"].dump());
    r.block[i] = uint32_t(b.get<int64_t>());
  }
  if (!k.signature.is_array()) throw fail("signature", "not an array");
  for (size_t i = 0; i < k.signature.size(); ++i) {
    const nlohmann::json& a = k.signature[i];
    if (!a.is_object() || !a.contains("dtype") || !a["dtype"].is_string())
      throw fail("signature[" + std::to_string(i) + "].dtype", "missing");
    try {
      r.args.push_back(parse_arg_type(a["dtype"].get<std::string>()));
    } catch (const Error& e) {
      throw fail("signature[" + std::to_string(i) + "]", e.what());
    }
    r.memrefs += r.args.back().kind == Arg::Memref;
  }
  return r;
}

std::string read_kernel_file(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read kernel file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw Error("kernel file " + path + " is empty");
  return ss.str();
}

void throw_arg_error(const KernelRecord& rec, size_t index, const std::string& problem) {
  throw Error("launch " + rec.entry + ": argument " + std::to_string(index) + " " + problem);
}

void throw_arg_count(const KernelRecord& rec, size_t given) {
  throw Error("launch " + rec.entry + ": " + std::to_string(given) + " arguments for a signature of " +
              std::to_string(rec.args.size()));
}

}  // namespace swz::backend
