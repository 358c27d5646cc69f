//===- GpuKernels.cpp - swizzlec's GPU targets: kernels for a model graph -===//
//
// Implements the driver's addGpuKernels() hook (compiler/driver/compile.h) on top of
// swz::codegen::compileGpuKernels. Plain C++: no MLIR headers in this file.
//
//===----------------------------------------------------------------------===//
#include "compile.h"

#include "codegen/GpuCompiler.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

namespace swz::compiler {
namespace {

using nlohmann::json;

/// A built-in GPU kernel implementing one graph op for one weight type.
struct GpuImpl {
  const char *source; ///< codegen/kernels/<source>.mlir
  const char *entry;  ///< gpu.func name in it
  bool ptx;           ///< available for sm_* targets
  bool spirv;         ///< available for the spirv target
};

/// What exists today, keyed "<op>.<type>" like the cpu target's entries.
const std::map<std::string, GpuImpl> &gpuImpls() {
  static const std::map<std::string, GpuImpl> impls = {
      {"add.f32", {"add_f32", "add_f32", true, true}},
      // Prefill (T > 1 rows) as llama.cpp's cuBLAS path: convert.f32_f16 for the
      // activations, dequant.<type> for the weight (f16 weights need none), then
      // matmul_prefill.<type>: the tensor-core GEMM on PTX, the portable tiled GEMM
      // (f32 activations, no convert) on SPIR-V.
      {"convert.f32_f16", {"dequant_f16", "convert_f32_f16", true, true}},
      {"dequant.q4_0", {"dequant_f16", "dequant_q4_0_f16", true, true}},
      {"dequant.q4_1", {"dequant_f16", "dequant_q4_1_f16", true, true}},
      {"dequant.q8_0", {"dequant_f16", "dequant_q8_0_f16", true, true}},
      {"dequant.q4_k", {"dequant_f16", "dequant_q4_k_f16", true, true}},
      {"dequant.q6_k", {"dequant_f16", "dequant_q6_k_f16", true, true}},
      {"matmul_prefill.f16", {"gemm_f16", "gemm_f16", true, false}},
      {"matmul_prefill.q4_0", {"gemm_f16", "gemm_f16", true, false}},
      {"matmul_prefill.q4_1", {"gemm_f16", "gemm_f16", true, false}},
      {"matmul_prefill.q8_0", {"gemm_f16", "gemm_f16", true, false}},
      {"matmul_prefill.q4_k", {"gemm_f16", "gemm_f16", true, false}},
      {"matmul_prefill.q6_k", {"gemm_f16", "gemm_f16", true, false}},
      // Q4_1 / Q8_0 without the f16 scratch: dequantized into the GEMM's shared tiles.
      {"matmul_prefill_fused.q4_1", {"gemm_q4_1_f16", "gemm_q4_1_f16", true, false}},
      {"matmul_prefill_fused.q8_0", {"gemm_q8_0_f16", "gemm_q8_0_f16", true, false}},
      {"matmul_prefill_portable.f16", {"gemm_f32_f16w", "gemm_f32_f16w", false, true}},
      {"matmul_prefill_portable.q4_0", {"gemm_f32_f16w", "gemm_f32_f16w", false, true}},
      {"matmul_prefill_portable.q4_1", {"gemm_f32_f16w", "gemm_f32_f16w", false, true}},
      {"matmul_prefill_portable.q8_0", {"gemm_f32_f16w", "gemm_f32_f16w", false, true}},
      {"matmul_prefill_portable.q4_k", {"gemm_f32_f16w", "gemm_f32_f16w", false, true}},
      {"matmul_prefill_portable.q6_k", {"gemm_f32_f16w", "gemm_f32_f16w", false, true}},
      {"rms_norm.f32", {"rms_norm_f32", "rms_norm_f32", true, false}},
      {"rope.f32", {"rope_f32", "rope_f32", true, true}},
      {"swiglu.f32", {"swiglu_f32", "swiglu_f32", true, true}},
  };
  return impls;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// "<op>.<type>" for a graph op: the weight's ggml type for ops that read one.
std::string opKey(const package::Manifest &m, const json &op) {
  const std::string kind = op.at("op").get<std::string>();
  std::string type = "f32";
  if (kind == "get_rows" || kind == "matmul" || kind == "rms_norm" || kind == "head_norm") {
    const std::string weight = op.at("in").at(kind == "get_rows" ? 0 : 1).get<std::string>();
    const package::WeightTensor *w = m.find_weight(weight);
    if (!w)
      throw CompileError(m.target + " target: op " + kind + " reads '" + weight +
                         "', which is not in the weight plan");
    type = lower(ggml::type_info(w->type).name);
  } else if (kind == "attention") {
    type = "f16kv";
  }
  return kind + "." + type;
}

std::string cudaRoot() {
  if (const char *env = std::getenv("CUDA_ROOT"))
    return env;
  std::error_code ec;
  return std::filesystem::exists("/usr/local/cuda/nvvm/libdevice", ec) ? "/usr/local/cuda" : "";
}

} // namespace

void addGpuKernels(package::Manifest &m, const gguf::File &, package::PackageFiles &files,
                   const Log &log) {
  const bool ptx = m.target != "spirv";
  // 1. Which kernels the graph needs, and which of those do not exist yet.
  std::map<std::string, int> needed, missing;
  for (const json &op : m.graph.at("ops")) {
    std::string key = opKey(m, op);
    auto it = gpuImpls().find(key);
    if (it == gpuImpls().end() || !(ptx ? it->second.ptx : it->second.spirv))
      ++missing[key];
    else
      ++needed[key];
  }
  if (!missing.empty()) {
    std::string list, have;
    for (const auto &[key, n] : missing)
      list += (list.empty() ? "" : ", ") + key + (n > 1 ? " (x" + std::to_string(n) + ")" : "");
    for (const auto &[key, impl] : gpuImpls())
      if (ptx ? impl.ptx : impl.spirv)
        have += (have.empty() ? "" : ", ") + key;
    throw CompileError("target " + m.target + ": no GPU kernel yet for graph ops " + list +
                       " (GPU kernels for this target so far: " + have +
                       "); use --target cpu");
  }
  // 2. Compile each kernel source once and record its launch rule.
  std::map<std::string, std::vector<codegen::CompiledKernel>> compiled;
  std::set<std::string> written;
  for (json &op : m.graph.at("ops")) {
    const std::string key = opKey(m, op);
    const GpuImpl &impl = gpuImpls().at(key);
    auto &ks = compiled[impl.source];
    if (ks.empty()) {
      try {
        ks = codegen::compileGpuKernels(codegen::builtinKernelSource(impl.source), m.target,
                                        cudaRoot());
      } catch (const std::exception &e) {
        throw CompileError("target " + m.target + ": compiling kernel " + impl.source +
                           " failed: " + e.what());
      }
    }
    if (ks.front().format == "ptx" &&
        ks.front().binary.find(".extern .func") != std::string::npos)
      throw CompileError("target " + m.target + ": kernel " + impl.source +
                         " calls libdevice functions, but no CUDA toolkit was found to link "
                         "them from (set CUDA_ROOT to a CUDA installation with "
                         "nvvm/libdevice)");
    auto k = std::find_if(ks.begin(), ks.end(),
                          [&](const codegen::CompiledKernel &c) { return c.entry == impl.entry; });
    if (k == ks.end())
      throw CompileError("kernel source " + std::string(impl.source) + " has no entry " + impl.entry);
    const std::string entry = m.target + "." + key;
    const std::string file = k->module + "." + k->format;

    op["kernel"] = entry;
    if (!written.insert(entry).second)
      continue;
    if (std::none_of(files.begin(), files.end(), [&](const auto &f) { return f.first == file; }))
      files.emplace_back(file, k->binary);
    json signature = json::array();
    for (size_t i = 0; i < k->arguments.size(); ++i)
      signature.push_back({{"name", "arg" + std::to_string(i)}, {"dtype", k->arguments[i]}});
    json launch = {{"function", k->entry},
                   {"block", {k->block[0], k->block[1], k->block[2]}},
                   {"grid", k->grid},
                   {"abi", k->format == "ptx" ? "mlir-memref-expanded" : "spirv-storage-buffers"}};
    m.kernels.push_back({entry, file, std::move(launch), std::move(signature), m.target});
    if (log.info)
      log.info("kernel " + entry + ": " + file + " (" + std::to_string(k->binary.size()) + " bytes)");
  }
}

} // namespace swz::compiler
