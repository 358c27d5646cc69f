// Manifest kernel entries as backends use them. See kernel_record.h.
#include "backend/kernel_record.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "package/package.h"

namespace swz::backend {
ArgSpec parse_arg_type(const std::string& type) {
  // The package reader's parser (the launch contract binds exactly these types).
  const std::optional<package::ArgType> t = package::parse_arg_type(type);
  if (!t) throw Error("unsupported kernel argument type '" + type + "' (expected i32, f32 or memref<...>)");
  ArgSpec s;
  s.kind = t->kind == package::ArgType::Memref ? Arg::Memref : t->kind == package::ArgType::F32 ? Arg::F32 : Arg::I32;
  s.rank = t->rank;
  s.elem_bytes = static_cast<uint32_t>(t->elem_bytes);
  return s;
}

std::string human_bytes(uint64_t bytes) {
  char buf[64];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(uint64_t(1) << 30));
  else if (bytes >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(uint64_t(1) << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
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
