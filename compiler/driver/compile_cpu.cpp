//===- compile_cpu.cpp - the cpu target: kernel entries and launch records ===//
#include "compile_cpu.h"

#include <algorithm>
#include <map>

#include "compile.h"
#include "cpu/signatures.h"

namespace swz::compiler {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string num(int64_t v) { return std::to_string(v); }

/// The launch records of one graph op for the cpu kernel `entry` of kind `kind`: a
/// binding per argument of cpu::kernel_signature(kind), by argument name. One record of
/// phase "all" (attention: one per phase, choosing llama.cpp's batched or single-row
/// reduction order), grid 1x1x1 (the kernels split work over the runtime's threads).
json launchRecords(const package::Manifest &m, const json &op, const std::string &kind, const std::string &entry) {
  const json &buffers = m.graph.at("buffers");
  const json &in = op.at("in");
  auto width = [&](const std::string &buf) -> int64_t {
    if (!buffers.contains(buf))
      throw CompileError("cpu target: op " + kind + " reads '" + buf + "', which is not a graph buffer");
    return buffers.at(buf).get<int64_t>();
  };
  auto weight = [&](const std::string &name) -> const package::WeightTensor & {
    const package::WeightTensor *w = m.find_weight(name);
    if (!w)
      throw CompileError("cpu target: op " + kind + " reads '" + name + "', which is not in the weight plan");
    return *w;
  };
  auto buf = [&](const std::string &name, int64_t w) { return json{{"buffer", name}, {"shape", {"T*" + num(w)}}}; };
  // A weight as raw GGUF bytes (memref<?xi8>), or as f32 values (norm weights, biases).
  auto wgt = [&](const std::string &name) {
    return json{{"weight", name}, {"shape", {num(static_cast<int64_t>(weight(name).bytes))}}};
  };
  auto wgt_f32 = [&](const std::string &name) {
    const package::WeightTensor &w = weight(name);
    if (w.type != ggml::Type::F32)
      throw CompileError("cpu target: op " + kind + " needs '" + name + "' in f32, the GGUF stores it as " +
                         ggml::type_info(w.type).name);
    return json{{"weight", name}, {"shape", {num(static_cast<int64_t>(w.bytes / 4))}}};
  };
  auto i32 = [](const std::string &e) { return json{{"i32", e}}; };
  auto f32 = [&](const char *attr) { return json{{"f32", op.at(attr).get<float>()}}; };
  const std::string out = op.at("out").get<std::string>();
  const int64_t W = width(out);
  std::map<std::string, json> b;  // argument name -> binding
  std::vector<json> phases{json{{"phase", "all"}}};
  if (kind == "get_rows") {
    b = {{"table", wgt(in.at(0))}, {"tokens", {{"tokens", true}, {"shape", {"T"}}}}, {"out", buf(out, W)},
         {"T", i32("T")}, {"W", i32(num(W))}};
  } else if (kind == "rms_norm" || kind == "head_norm") {
    const std::string x = in.at(0);
    const int64_t seg = kind == "head_norm" ? op.at("head_dim").get<int64_t>() : W;
    b = {{"x", buf(x, width(x))}, {"weight", wgt_f32(in.at(1))}, {"out", buf(out, W)}, {"T", i32("T")},
         {"W", i32(num(W))},      {"seg", i32(num(seg))},    {"eps", f32("eps")}};
  } else if (kind == "matmul") {
    const std::string x = in.at(0);
    const bool bias = in.size() > 2;
    b = {{"x", buf(x, width(x))},
         {"w", wgt(in.at(1))},
         {"bias", bias ? wgt_f32(in.at(2)) : json{{"absent", true}, {"shape", {"1"}}}},
         {"out", buf(out, W)},
         {"T", i32("T")},
         {"K", i32(num(width(x)))},
         {"N", i32(num(W))},
         {"has_bias", i32(bias ? "1" : "0")}};
  } else if (kind == "rope") {
    if (in.at(0) != op.at("out"))
      throw CompileError("cpu target: rope must be in place (in[0] == out)");
    b = {{"x", buf(out, W)},
         {"positions", {{"positions", true}, {"shape", {"T"}}}},
         {"T", i32("T")},
         {"n_head", i32(num(op.at("n_head").get<int64_t>()))},
         {"head_dim", i32(num(op.at("head_dim").get<int64_t>()))},
         {"n_rot", i32(num(op.at("n_rot").get<int64_t>()))},
         {"theta", f32("theta")},
         {"neox", i32(op.value("mode", std::string("norm")) == "neox" ? "1" : "0")}};
  } else if (kind == "attention") {
    const json &hp = m.graph.at("hparams");
    const int64_t tile = 64 * hp.at("n_head_kv").get<int64_t>() * hp.at("head_dim").get<int64_t>();
    const int64_t layer = op.at("layer").get<int64_t>();
    const std::string q = in.at(0), k = in.at(1), v = in.at(2);
    b = {{"q", buf(q, width(q))},
         {"k", buf(k, width(k))},
         {"v", buf(v, width(v))},
         {"k_cache", {{"kv", "k"}, {"layer", layer}, {"shape", {"kv_pages*" + num(tile)}}}},
         {"v_cache", {{"kv", "v"}, {"layer", layer}, {"shape", {"kv_pages*" + num(tile)}}}},
         {"block_table", {{"block_table", true}, {"shape", {"ceil(ctx/64)"}}}},
         {"out", buf(out, W)},
         {"T", i32("T")},
         {"pos0", i32("pos0")},
         {"n_head", i32(num(op.at("n_head").get<int64_t>()))},
         {"n_head_kv", i32(num(op.at("n_head_kv").get<int64_t>()))},
         {"head_dim", i32(num(op.at("head_dim").get<int64_t>()))},
         {"scale", f32("scale")}};
    // Prompt rows in llama.cpp's batched (tinyBLAS) order, generated rows in its
    // single-row order: chosen by the kind of row, never by the row count.
    phases = {json{{"phase", "prefill"}, {"scope", "sequence"}, {"single_row", "0"}},
              json{{"phase", "decode"}, {"scope", "sequence"}, {"single_row", "1"}}};
  } else if (kind == "swiglu") {
    b = {{"gate", buf(in.at(0), width(in.at(0)))}, {"up", buf(in.at(1), width(in.at(1)))}, {"out", buf(out, W)},
         {"T", i32("T")}, {"W", i32(num(W))}};
  } else if (kind == "add") {
    b = {{"a", buf(in.at(0), width(in.at(0)))}, {"b", buf(in.at(1), width(in.at(1)))}, {"out", buf(out, W)},
         {"n", i32("T*" + num(W))}};
  } else {
    throw CompileError("cpu target: no kernel for graph op '" + kind + "'");
  }
  json records = json::array();
  for (const json &ph : phases) {
    json args = json::array();
    for (const cpu::ArgSpec &a : cpu::kernel_signature(kind)) {
      const std::string name(a.name);
      if (name == "single_row") args.push_back(i32(ph.at("single_row").get<std::string>()));
      else args.push_back(b.at(name));
    }
    json r = {{"kernel", entry},
              {"phase", ph.at("phase")},
              {"scope", ph.value("scope", std::string("batch"))},
              {"grid", {"1", "1", "1"}},
              {"dynamic_smem", "0"},
              {"args", std::move(args)}};
    if (op.value("rows", std::string()) == "output") r["rows"] = "output";
    records.push_back(std::move(r));
  }
  return records;
}

} // namespace

void addCpuKernels(package::Manifest &m) {
  std::map<std::string, json> needed; // entry -> signature, sorted for a stable manifest
  for (json &op : m.graph.at("ops")) {
    const std::string kind = op.at("op").get<std::string>();
    const std::vector<cpu::ArgSpec> sig = cpu::kernel_signature(kind);
    if (sig.empty())
      throw CompileError("cpu target: no kernel for graph op '" + kind + "'");
    std::string type = "f32";
    if (kind == "attention") {
      type = "f16kv";
    } else if (kind == "get_rows" || kind == "matmul") {
      const std::string weight = op.at("in").at(kind == "get_rows" ? 0 : 1).get<std::string>();
      const package::WeightTensor *w = m.find_weight(weight);
      if (!w)
        throw CompileError("cpu target: op " + kind + " reads '" + weight + "', which is not in the weight plan");
      type = lower(ggml::type_info(w->type).name);
    }
    const std::string entry = "cpu." + kind + "." + type;
    if (!needed.count(entry)) {
      json s = json::array();
      for (const cpu::ArgSpec &a : sig)
        s.push_back({{"name", std::string(a.name)}, {"dtype", std::string(a.dtype)}});
      needed[entry] = std::move(s);
    }
    op["launches"] = launchRecords(m, op, kind, entry);
  }
  for (auto &[entry, sig] : needed)
    m.kernels.push_back({entry, std::nullopt, json{{"threads", "pool"}}, std::move(sig), std::nullopt});
}

} // namespace swz::compiler
