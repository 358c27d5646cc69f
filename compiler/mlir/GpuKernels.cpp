//===- GpuKernels.cpp - swizzlec's GPU targets: kernels for a model graph -===//
//
// Implements the driver's addGpuKernels() hook (compiler/driver/compile.h) on top of
// swz::codegen::compileGpuKernels. Plain C++: no MLIR headers in this file.
//
//===----------------------------------------------------------------------===//
#include "compile.h"

#include "codegen/GpuCompiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace swz::compiler {
namespace {

using nlohmann::json;

/// One kernel of a graph op's implementation.
struct KernelRef {
  const char *source;  ///< codegen/kernels/<source>.mlir
  const char *entry;   ///< gpu.func name in it
  const char *phase;   ///< "all" (every forward), "decode" (T small) or "prefill"
  bool ptx = true;     ///< used for sm_* targets
  bool spirv = true;   ///< used for the spirv target
};

/// Built-in GPU implementations, keyed "<op>.<type>" like the cpu target's entries.
/// An op runs its "all" kernels, plus either its "decode" kernels (the runtime's
/// decode / speculative-verification batches) or its "prefill" kernels (prompt
/// chunks), in table order.
const std::map<std::string, std::vector<KernelRef>> &gpuImpls() {
  static const std::map<std::string, std::vector<KernelRef>> impls = {
      {"add.f32", {{"add_f32", "add_f32", "all"}}},
      {"rms_norm.f32", {{"rms_norm_f32", "rms_norm_f32", "all", true, false}}},
      {"rope.f32", {{"rope_f32", "rope_f32", "all"}}},
      {"swiglu.f32", {{"swiglu_f32", "swiglu_f32", "all"}}},
  };
  return impls;
}

/// The kernels of `impl` that exist for the target's format; empty if any phase the
/// op needs has none.
std::vector<KernelRef> forTarget(const std::vector<KernelRef> &impl, bool ptx) {
  std::vector<KernelRef> out;
  bool all = false, decode = false, prefill = false;
  for (const KernelRef &k : impl) {
    if (!(ptx ? k.ptx : k.spirv))
      continue;
    out.push_back(k);
    std::string phase = k.phase;
    all |= phase == "all";
    decode |= phase == "decode";
    prefill |= phase == "prefill";
  }
  if (!all && !(decode && prefill))
    out.clear();
  return out;
}

/// Per-function resources of one PTX module as reported by `ptxas -v`.
struct PtxasInfo {
  int64_t registers = -1, sharedBytes = 0, stackBytes = 0, spillStores = 0, spillLoads = 0;
};

/// Where ptxas is: $CUDA_ROOT/bin/ptxas, else the one on PATH; empty if none.
std::string findPtxas(const std::string &cudaRootDir) {
  std::error_code ec;
  if (!cudaRootDir.empty() && std::filesystem::exists(cudaRootDir + "/bin/ptxas", ec))
    return cudaRootDir + "/bin/ptxas";
  if (const char *path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t b = 0, e; b <= p.size(); b = e + 1) {
      e = p.find(':', b);
      if (e == std::string::npos)
        e = p.size();
      std::string cand = p.substr(b, e - b) + "/ptxas";
      if (e > b && std::filesystem::exists(cand, ec))
        return cand;
    }
  }
  return "";
}

/// Assembles `ptx` for `arch` with `ptxas -v` and returns each entry's registers,
/// static shared memory, stack and spills (ptxas's "Function properties" and "Used
/// N registers" lines). Throws CompileError with ptxas's output if it rejects the PTX.
std::map<std::string, PtxasInfo> runPtxas(const std::string &ptxas, const std::string &ptx,
                                          const std::string &arch, const std::string &module) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("swizzlec-ptxas-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path in = dir / (module + ".ptx");
  {
    std::ofstream out(in, std::ios::binary);
    out << ptx;
  }
  std::string cmd = "'" + ptxas + "' -arch=" + arch + " -v -o /dev/null '" + in.string() + "' 2>&1";
  std::string text;
  if (FILE *p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
      text.append(buf, n);
    int rc = ::pclose(p);
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (rc != 0)
      throw CompileError("ptxas -arch=" + arch + " rejected " + module + ".ptx:\n" + text);
  } else {
    throw CompileError("cannot run " + ptxas);
  }
  std::map<std::string, PtxasInfo> info;
  std::istringstream lines(text);
  std::string line, current;
  const std::regex entry(R"(Compiling entry function '([^']+)')");
  const std::regex props(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex used(R"(Used (\d+) registers(.*?(\d+) bytes smem)?)");
  std::smatch mt;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, mt, entry)) {
      current = mt[1];
      info[current];
    } else if (!current.empty() && std::regex_search(line, mt, props)) {
      info[current].stackBytes = std::stoll(mt[1]);
      info[current].spillStores = std::stoll(mt[2]);
      info[current].spillLoads = std::stoll(mt[3]);
    } else if (!current.empty() && std::regex_search(line, mt, used)) {
      info[current].registers = std::stoll(mt[1]);
      if (mt[3].matched)
        info[current].sharedBytes = std::stoll(mt[3]);
    }
  }
  return info;
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
  // 1. Which kernels the graph needs, and which ops have none yet.
  std::map<std::string, int> missing;
  for (const json &op : m.graph.at("ops")) {
    std::string key = opKey(m, op);
    auto it = gpuImpls().find(key);
    if (it == gpuImpls().end() || forTarget(it->second, ptx).empty())
      ++missing[key];
  }
  if (!missing.empty()) {
    std::string list, have;
    for (const auto &[key, n] : missing)
      list += (list.empty() ? "" : ", ") + key + (n > 1 ? " (x" + std::to_string(n) + ")" : "");
    for (const auto &[key, impl] : gpuImpls())
      if (!forTarget(impl, ptx).empty())
        have += (have.empty() ? "" : ", ") + key;
    throw CompileError("target " + m.target + ": no GPU kernel yet for graph ops " + list +
                       " (GPU kernels for this target so far: " + have +
                       "); use --target cpu");
  }
  // 2. Compile each kernel source once; assemble each PTX module with ptxas -v.
  const std::string root = cudaRoot();
  const std::string ptxas = ptx ? findPtxas(root) : "";
  if (ptx && ptxas.empty() && log.info)
    log.info("ptxas not found (set CUDA_ROOT): registers, shared memory and spills are "
             "not recorded and the PTX is not assembled");
  std::map<std::string, std::vector<codegen::CompiledKernel>> compiled;
  std::map<std::string, std::map<std::string, PtxasInfo>> resources; // source -> entry ->
  auto compileSource = [&](const std::string &source) -> std::vector<codegen::CompiledKernel> & {
    auto &ks = compiled[source];
    if (!ks.empty())
      return ks;
    try {
      ks = codegen::compileGpuKernels(codegen::builtinKernelSource(source), m.target, root);
    } catch (const std::exception &e) {
      throw CompileError("target " + m.target + ": compiling kernel " + source +
                         " failed: " + e.what());
    }
    if (ks.front().format == "ptx" &&
        ks.front().binary.find(".extern .func") != std::string::npos)
      throw CompileError("target " + m.target + ": kernel " + source +
                         " calls libdevice functions, but no CUDA toolkit was found to link "
                         "them from (set CUDA_ROOT to a CUDA installation with "
                         "nvvm/libdevice)");
    if (!ptxas.empty())
      resources[source] = runPtxas(ptxas, ks.front().binary, m.target, ks.front().module);
    return ks;
  };

  // 3. Launch records, one per kernel entry; each graph op lists its kernels by phase.
  std::set<std::string> written;
  std::vector<std::string> report;
  for (json &op : m.graph.at("ops")) {
    const std::string key = opKey(m, op);
    json phases = json::object();
    for (const KernelRef &ref : forTarget(gpuImpls().at(key), ptx)) {
      auto &ks = compileSource(ref.source);
      auto k = std::find_if(ks.begin(), ks.end(), [&](const codegen::CompiledKernel &c) {
        return c.entry == ref.entry;
      });
      if (k == ks.end())
        throw CompileError("kernel source " + std::string(ref.source) + " has no entry " +
                           ref.entry);
      const std::string entry = m.target + "." + ref.entry;
      phases[ref.phase].push_back(entry);
      if (!written.insert(entry).second)
        continue;
      const std::string file = k->module + "." + k->format;
      if (std::none_of(files.begin(), files.end(), [&](const auto &f) { return f.first == file; }))
        files.emplace_back(file, k->binary);
      json signature = json::array();
      for (size_t i = 0; i < k->arguments.size(); ++i)
        signature.push_back({{"name", "arg" + std::to_string(i)}, {"dtype", k->arguments[i]}});
      json launch = {{"function", k->entry},
                     {"block", {k->block[0], k->block[1], k->block[2]}},
                     {"grid", k->grid},
                     {"dynamic_smem", k->dynamicSmem.empty() ? "0" : k->dynamicSmem},
                     {"abi", k->format == "ptx" ? "mlir-memref-expanded" : "spirv-storage-buffers"}};
      // Bank conflicts: every ldmatrix / cp.async tile (degree 1 = conflict-free).
      json tiles = json::array();
      unsigned worst = 0;
      for (const auto &t : k->smemTiles) {
        tiles.push_back({{"tile", t.name},
                         {"layout", t.layout},
                         {"ldmatrix_x4_degree", t.ldmatrixDegree},
                         {"cp_async_16_degree", t.cpAsyncDegree},
                         {"claimed_conflict_free", t.claimedConflictFree}});
        worst = std::max({worst, t.ldmatrixDegree, t.cpAsyncDegree});
      }
      launch["smem_tiles"] = tiles;
      std::string line = entry + ": " + file;
      auto rs = resources.find(ref.source);
      if (rs != resources.end()) {
        auto r = rs->second.find(k->entry);
        if (r == rs->second.end())
          throw CompileError("ptxas reported nothing for entry " + k->entry + " of " + file);
        const PtxasInfo &pi = r->second;
        launch["ptxas"] = {{"arch", m.target},
                           {"registers", pi.registers},
                           {"shared_bytes", pi.sharedBytes},
                           {"stack_bytes", pi.stackBytes},
                           {"spill_store_bytes", pi.spillStores},
                           {"spill_load_bytes", pi.spillLoads}};
        line += ", " + std::to_string(pi.registers) + " registers, " +
                std::to_string(pi.sharedBytes) + " B smem, " + std::to_string(pi.stackBytes) +
                " B stack, spills " + std::to_string(pi.spillStores) + "/" +
                std::to_string(pi.spillLoads) + " B";
      }
      line += tiles.empty() ? ", bank conflicts: no ldmatrix/cp.async tiles"
                            : ", bank conflicts: " + std::to_string(worst) + "-way worst over " +
                                  std::to_string(tiles.size()) + " tile(s)";
      report.push_back(line);
      m.kernels.push_back({entry, file, std::move(launch), std::move(signature), m.target});
    }
    op["kernels"] = phases;
    if (phases.size() == 1 && phases.contains("all") && phases["all"].size() == 1)
      op["kernel"] = phases["all"][0];
  }
  if (log.info)
    for (const std::string &line : report)
      log.info("kernel " + line);
}

} // namespace swz::compiler
