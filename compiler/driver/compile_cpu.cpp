//===- compile_cpu.cpp - the cpu target: kernel entries -------------------===//
#include "compile_cpu.h"

#include <algorithm>
#include <map>

#include "compile.h"

namespace swz::compiler {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

json arg(const char *name, const std::string &dtype, json shape, const char *role = "in", bool optional = false) {
  json a = {{"name", name}, {"dtype", dtype}, {"shape", std::move(shape)}, {"role", role}};
  if (optional)
    a["optional"] = true;
  return a;
}

/// The argument list of a cpu kernel. Shapes use symbols: T = tokens in the batch,
/// K/N = matmul input/output width, W = row width, H/Hkv/D = heads, kv heads, head_dim,
/// C = KV-cache capacity in tokens, V = vocabulary rows.
json cpuSignature(const std::string &op, const std::string &t) {
  if (op == "get_rows")
    return {arg("table", t, {"V", "W"}), arg("tokens", "i32", {"T"}), arg("out", "f32", {"T", "W"}, "out")};
  if (op == "rms_norm")
    return {arg("x", "f32", {"T", "W"}), arg("weight", t, {"W"}), arg("out", "f32", {"T", "W"}, "out")};
  if (op == "head_norm")
    return {arg("x", "f32", {"T", "H*D"}), arg("weight", t, {"D"}), arg("out", "f32", {"T", "H*D"}, "out")};
  if (op == "matmul")
    return {arg("x", "f32", {"T", "K"}), arg("w", t, {"N", "K"}), arg("bias", "f32", {"N"}, "in", true),
            arg("out", "f32", {"T", "N"}, "out")};
  if (op == "rope")
    return {arg("x", "f32", {"T", "H*D"}, "inout"), arg("positions", "i32", {"T"})};
  if (op == "attention")
    return {arg("q", "f32", {"T", "H*D"}),
            arg("k", "f32", {"T", "Hkv*D"}),
            arg("v", "f32", {"T", "Hkv*D"}),
            arg("positions", "i32", {"T"}),
            arg("k_cache", "f16", {"C", "Hkv*D"}, "inout"),
            arg("v_cache", "f16", {"C", "Hkv*D"}, "inout"),
            arg("out", "f32", {"T", "H*D"}, "out")};
  if (op == "swiglu")
    return {arg("gate", "f32", {"T", "W"}), arg("up", "f32", {"T", "W"}), arg("out", "f32", {"T", "W"}, "out")};
  if (op == "add")
    return {arg("a", "f32", {"T", "W"}), arg("b", "f32", {"T", "W"}), arg("out", "f32", {"T", "W"}, "out")};
  throw CompileError("cpu target: no kernel for graph op '" + op + "'");
}

} // namespace

void addCpuKernels(package::Manifest &m) {
  std::map<std::string, json> needed; // entry -> signature, sorted for a stable manifest
  for (json &op : m.graph.at("ops")) {
    const std::string kind = op.at("op").get<std::string>();
    std::string type = "f32";
    if (kind == "attention") {
      type = "f16kv";
    } else if (kind == "get_rows" || kind == "matmul" || kind == "rms_norm" || kind == "head_norm") {
      const json &in = op.at("in");
      const std::string weight = in.at(kind == "get_rows" ? 0 : 1).get<std::string>();
      const package::WeightTensor *w = m.find_weight(weight);
      if (!w)
        throw CompileError("cpu target: op " + kind + " reads '" + weight + "', which is not in the weight plan");
      type = lower(ggml::type_info(w->type).name);
    }
    const std::string entry = "cpu." + kind + "." + type;
    if (!needed.count(entry))
      needed[entry] = cpuSignature(kind, type == "f16kv" ? "f32" : type);
    op["kernel"] = entry;
  }
  for (auto &[entry, sig] : needed)
    m.kernels.push_back({entry, std::nullopt, json{{"threads", "pool"}}, std::move(sig), std::nullopt});
}

} // namespace swz::compiler
