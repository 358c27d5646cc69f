//===- compile_gpu.cpp - swizzlec's GPU targets: kernels for a model graph ===//
//
// Implements the driver's addGpuKernels() hook (compiler/driver/compile.h) on top of
// swz::codegen::compileGpuKernels. Plain C++: no MLIR headers in this file.
//
//===----------------------------------------------------------------------===//
#include "compile.h"

#include "launch_bindings.h"

#include "codegen/GpuCompiler.h"
#include "compiler/mlir/Schedule.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace swz::compiler {

/// (target, schedule JSON) of compiler/schedules/*.json (BuiltinSchedules.cpp, CMake).
const std::vector<std::pair<std::string, std::string>> &builtinSchedules();

namespace {

using nlohmann::json;

/// Per-function resources of one PTX module as reported by `ptxas -v`.
struct PtxasInfo {
  int64_t registers = -1, sharedBytes = 0, stackBytes = 0, spillStores = 0, spillLoads = 0;
};

/// An executable regular file (not a directory named ptxas, not a non-executable).
bool isExecutable(const std::string &path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

/// Where ptxas is: $CUDA_ROOT/bin/ptxas, else the one on PATH; empty if none.
std::string findPtxas(const std::string &cudaRootDir) {
  if (!cudaRootDir.empty() && isExecutable(cudaRootDir + "/bin/ptxas"))
    return cudaRootDir + "/bin/ptxas";
  if (const char *path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t b = 0, e; b <= p.size(); b = e + 1) {
      e = p.find(':', b);
      if (e == std::string::npos)
        e = p.size();
      std::string cand = p.substr(b, e - b) + "/ptxas";
      if (e > b && isExecutable(cand))
        return cand;
    }
  }
  return "";
}

/// `s` quoted for /bin/sh: '...' with each ' written as '\''.
std::string shellQuote(const std::string &s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// A private temporary directory (mkdtemp), removed with everything in it on scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "swizzlec-ptxas-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw CompileError("cannot create a temporary directory for ptxas in " +
                         std::filesystem::temp_directory_path().string());
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Assembles `ptx` for `arch` with `ptxas -v` and returns each entry's registers,
/// static shared memory, stack and spills (ptxas's "Function properties for <name>" and
/// "Used N registers" lines). Throws CompileError with ptxas's output if it rejects the
/// PTX, or says why it could not run.
std::map<std::string, PtxasInfo> runPtxas(const std::string &ptxas, const std::string &ptx,
                                          const std::string &arch, const std::string &module) {
  TempDir dir;
  const std::filesystem::path in = dir.path / (module + ".ptx");
  {
    std::ofstream out(in, std::ios::binary);
    out << ptx;
    out.close();
    if (!out)
      throw CompileError("cannot write " + in.string() + " for ptxas");
  }
  const std::string cmd = shellQuote(ptxas) + " -arch=" + arch + " -v -o /dev/null " +
                          shellQuote(in.string()) + " 2>&1";
  std::string text;
  FILE *p = ::popen(cmd.c_str(), "r");
  if (!p)
    throw CompileError("cannot run " + ptxas);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    text.append(buf, n);
  const int status = ::pclose(p);
  if (status == -1 || !WIFEXITED(status))
    throw CompileError(ptxas + " did not finish (status " + std::to_string(status) + ")");
  if (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127)
    throw CompileError("cannot execute " + ptxas + ": " + text);
  if (WEXITSTATUS(status) != 0)
    throw CompileError("ptxas -arch=" + arch + " rejected " + module + ".ptx:\n" + text);
  std::map<std::string, PtxasInfo> info;
  std::istringstream lines(text);
  std::string line, current, owner;
  const std::regex entry(R"(Compiling entry function '([^']+)')");
  const std::regex propsFor(R"(Function properties for (\S+))");
  const std::regex props(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex used(R"(Used (\d+) registers(.*?(\d+) bytes smem)?)");
  std::smatch mt;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, mt, entry)) {
      current = mt[1];
      info[current];
    } else if (std::regex_search(line, mt, propsFor)) {
      owner = mt[1];  // a non-inlined callee's properties are not the entry's
    } else if (!current.empty() && owner == current && std::regex_search(line, mt, props)) {
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

/// The graph pipeline (import, fusion, kernel outlining) for the manifest's graph.
codegen::GraphPlan plan(const package::Manifest &m, const schedule::TargetSchedule &sched,
                        const std::string &emitStage = "") {
  std::vector<codegen::GraphWeight> weights;
  for (const package::WeightTensor &w : m.weight_plan.tensors)
    weights.push_back({w.name, lower(ggml::type_info(w.type).name), w.ne});
  // Residual fusion needs a "+residual" kernel for every matmul type the graph uses.
  bool residual = true;
  for (const json &op : m.graph.at("ops"))
    if (op.at("op") == "matmul") {
      const package::WeightTensor *w = m.find_weight(op.at("in").at(1).get<std::string>());
      if (!w || codegen::kernelsFor("matmul." + lower(ggml::type_info(w->type).name) + "+residual",
                                    m.target != "spirv").empty())
        residual = false;
    }
  // RoPE-into-KV-write fusion: every attention variant has a "+rope_k" kernel set.
  const bool ropeKv = !codegen::kernelsFor("attention.f16kv+rope_k", m.target != "spirv").empty();
  try {
    const codegen::DecodeGemv gemv{sched.gemv.f16MmaSplitKBelowRows, sched.gemv.q4kMma,
                                   sched.gemv.q4kMmaSplitKBelowRows, sched.gemm.skinnyMaxRows};
    codegen::GraphPlan p = codegen::planGraph(m.graph.dump(), weights, m.target, residual, ropeKv, gemv,
                                                   &sched, emitStage);
    for (codegen::LaunchGroup &g : p.groups) g.prefillSplitMin = sched.attention.prefillSplitMin;
    return p;
  } catch (const std::exception &e) {
    throw CompileError("target " + m.target + ": " + e.what());
  }
}

/// The target's tile schedule: `<dir>/<target>.json`, else the built-in copy.
schedule::TargetSchedule targetSchedule(const std::string &target, const std::string &dir) {
  try {
    if (!dir.empty())
      return schedule::loadSchedule(dir + "/" + target + ".json");
    auto it = std::find_if(builtinSchedules().begin(), builtinSchedules().end(),
                           [&](const auto &s) { return s.first == target; });
    if (it == builtinSchedules().end())
      throw CompileError("no built-in tile schedule for target " + target);
    return schedule::parseSchedule(it->second, "built-in compiler/schedules/" + target + ".json");
  } catch (const CompileError &) {
    throw;
  } catch (const std::exception &e) {
    throw CompileError(std::string("tile schedule: ") + e.what());
  }
}

std::string swizzleStr(const std::optional<std::array<unsigned, 3>> &s) {
  return s ? "Swizzle<" + std::to_string((*s)[0]) + "," + std::to_string((*s)[1]) + "," +
                 std::to_string((*s)[2]) + ">"
           : "row-major";
}

/// Why `k`'s shared-memory tiles do not follow the schedule entry it names
/// (`swz.schedule`), or "" when they do: the gemm entry's stages x tile_m / tile_n rows of
/// tile_k elements, the attention entry's block_q and stages x block_kv rows; the
/// schedule's swizzle (S from the row length for "shift": "row"); element size.
std::string scheduleMismatch(const codegen::CompiledKernel &k, const schedule::TargetSchedule &s) {
  if (k.smemTiles.empty())
    return "it names schedule entry '" + k.schedule + "' but stages no ldmatrix/cp.async tile";
  // "gemm", "gemm.<class>" (a shape class's kernel) or "attention".
  const schedule::GemmSchedule *gemmEntry = k.schedule == "gemm" ? &s.gemm : nullptr;
  if (k.schedule.rfind("gemm.", 0) == 0)
    for (const schedule::GemmClass &c : s.gemmClasses)
      if (k.schedule == "gemm." + c.name)
        gemmEntry = &c.gemm;
  const bool gemm = gemmEntry != nullptr;
  if (!gemm && k.schedule != "attention")
    return "unknown schedule entry '" + k.schedule + "' (gemm, gemm.<class> of the schedule's gemm.classes, or attention)";
  const std::string &elem = gemm ? gemmEntry->elementType : s.attention.elementType;
  const auto &sw = gemm ? gemmEntry->swizzle : s.attention.swizzle;
  const bool fromRow = gemm ? gemmEntry->swizzleShiftFromRow : s.attention.swizzleShiftFromRow;
  for (const auto &t : k.smemTiles) {
    std::string why;
    if (t.elemBytes != (elem == "f32" ? 4u : 2u))
      why = std::to_string(t.elemBytes) + "-byte elements, the schedule's are " + elem;
    if (gemm) {
      const auto &g = *gemmEntry;
      if (t.cols != g.tileK || (t.rows != g.stages * g.tileM && t.rows != g.stages * g.tileN))
        why = std::to_string(t.rows) + "x" + std::to_string(t.cols) + ", the schedule's " +
              std::to_string(g.stages) + " stages of " + std::to_string(g.tileM) + " or " +
              std::to_string(g.tileN) + " rows of tile_k " + std::to_string(g.tileK) +
              " elements";
    } else {
      const auto &a = s.attention;
      if (t.rows != a.blockQ && t.rows != a.stages * a.blockKv)
        why = std::to_string(t.rows) + " rows, the schedule's block_q " + std::to_string(a.blockQ) +
              " or " + std::to_string(a.stages) + " stages of block_kv " + std::to_string(a.blockKv);
    }
    std::optional<std::array<unsigned, 3>> want;
    if (sw) {
      unsigned shift = sw->shift;
      if (fromRow) {
        unsigned log2cols = 0;
        while ((int64_t(1) << (log2cols + 1)) <= t.cols)
          ++log2cols;
        shift = log2cols - sw->base;
      }
      want = std::array<unsigned, 3>{sw->bits, sw->base, shift};
    }
    if (why.empty() && want != t.swizzle)
      why = "layout " + swizzleStr(t.swizzle) + ", the schedule's " + swizzleStr(want);
    if (!why.empty())
      return "tile @" + t.name + " is " + why;
  }
  return "";
}

std::string cudaRoot() {
  if (const char *env = std::getenv("CUDA_ROOT"))
    return env;
  std::error_code ec;
  return std::filesystem::exists("/usr/local/cuda/nvvm/libdevice", ec) ? "/usr/local/cuda" : "";
}

} // namespace

std::string graphMlir(const package::Manifest &m, const std::string &stage) {
  if (stage != "import" && stage != "fuse" && stage != "outline")
    throw CompileError("unknown --emit-mlir stage '" + stage + "' (import, fuse or outline)");
  codegen::GraphPlan p = plan(m, targetSchedule(m.target, ""), stage);
  if (stage == "outline" && !p.missing.empty())
    throw CompileError("target " + m.target + ": cannot outline, no GPU kernel yet for " +
                       p.missing.begin()->first);
  return p.ir;
}

void addGpuKernels(package::Manifest &m, const gguf::File &, package::PackageFiles &files,
                   const Log &log, const std::string &scheduleDir) {
  const bool ptx = m.target != "spirv";
  // 1. Import, fuse and outline the graph; list every op that has no kernel yet.
  const schedule::TargetSchedule sched = targetSchedule(m.target, scheduleDir);
  codegen::GraphPlan p = plan(m, sched);
  if (!p.missing.empty()) {
    std::string list, have;
    for (const auto &[key, n] : p.missing)
      list += (list.empty() ? "" : ", ") + key + (n > 1 ? " (x" + std::to_string(n) + ")" : "");
    for (const auto &[key, impl] : codegen::gpuImpls())
      if (key.find('+') == std::string::npos && !codegen::kernelsFor(key, ptx).empty())
        have += (have.empty() ? "" : ", ") + key;
    throw CompileError("target " + m.target + ": no GPU kernel yet for graph ops " + list +
                       " (GPU kernels for this target so far: " + have +
                       "); use --target cpu");
  }
  // 2. Compile each kernel source once; assemble each PTX module with ptxas -v.
  const std::string root = cudaRoot();
  const std::string ptxas = ptx ? findPtxas(root) : "";
  // The PTX's own target (sm_90.json: "sm_90a", for wgmma), as compileGpuKernels lowers it.
  const std::string ptxArch = schedule::ptxArch(sched, m.target);
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
      ks = codegen::compileGpuKernels(codegen::builtinKernelSource(source), m.target, root, &sched);
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
      resources[source] = runPtxas(ptxas, ks.front().binary, ptxArch, ks.front().module);
    return ks;
  };

  auto kernelOf = [&](const codegen::KernelRef &ref) -> const codegen::CompiledKernel & {
    auto &ks = compileSource(ref.source);
    auto k = std::find_if(ks.begin(), ks.end(), [&](const codegen::CompiledKernel &c) {
      return c.entry == ref.entry;
    });
    if (k == ks.end())
      throw CompileError("kernel source " + std::string(ref.source) + " has no entry " +
                         ref.entry);
    return *k;
  };

  // 3. One kernels[] record per kernel entry; each group's anchor graph op gets its
  //    launch records (launch_bindings.h: the launch contract).
  std::map<std::string, std::string> written;  // entry -> kernel source
  std::vector<std::string> report;
  json &ops = m.graph.at("ops");
  // The kernels[] record of one kernel entry, written once.
  auto recordKernel = [&](const codegen::KernelRef &ref) {
    const codegen::CompiledKernel *k = &kernelOf(ref);
    const std::string entry = m.target + "." + ref.entry;
    auto [at, fresh] = written.emplace(entry, ref.source);
    if (!fresh) {
      if (at->second != ref.source)
        throw CompileError("kernel entry " + entry + " is defined by both " + at->second +
                           " and " + ref.source);
      return;
    }
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
    std::optional<std::string> scheduleName;
    if (!k->schedule.empty()) {
      std::string why = scheduleMismatch(*k, sched);
      if (!why.empty())
        throw CompileError("target " + m.target + ": kernel " + k->entry +
                           " does not follow the " + m.target + " schedule's " + k->schedule +
                           " entry: " + why);
      scheduleName = m.target + "." + k->schedule;
    }
    std::string line = entry + ": " + file;
    auto rs = resources.find(ref.source);
    if (rs != resources.end()) {
      auto r = rs->second.find(k->entry);
      if (r == rs->second.end() || r->second.registers < 0)
        throw CompileError("ptxas reported no register count for entry " + k->entry + " of " +
                           file);
      const PtxasInfo &pi = r->second;
      launch["ptxas"] = {{"arch", ptxArch},
                         {"registers", pi.registers},
                         {"shared_bytes", pi.sharedBytes},
                         {"stack_bytes", pi.stackBytes},
                         {"spill_store_bytes", pi.spillStores},
                         {"spill_load_bytes", pi.spillLoads}};
      line += ", " + std::to_string(pi.registers) + " registers, " +
              std::to_string(pi.sharedBytes) + " B smem" +
              (k->dynamicSmem.empty() ? "" : " + " + k->dynamicSmem + " B dynamic") + ", " +
              std::to_string(pi.stackBytes) +
              " B stack, spills " + std::to_string(pi.spillStores) + "/" +
              std::to_string(pi.spillLoads) + " B";
    }
    if (scheduleName)
      line += ", schedule " + *scheduleName;
    line += tiles.empty() ? ", bank conflicts: no ldmatrix/cp.async tiles"
                          : ", bank conflicts: " + std::to_string(worst) + "-way worst over " +
                                std::to_string(tiles.size()) + " tile(s)";
    report.push_back(line);
    // Shared / workgroup memory against the target's per-block limit: ptxas's count
    // for PTX, the IR's static count for every target (SPIR-V has no ptxas); a kernel's
    // dynamic shared memory adds to its static (the CUDA backend checks the same sum).
    int64_t smem = k->workgroupBytes;
    const int64_t ptxasStatic =
        launch.contains("ptxas") ? launch["ptxas"]["shared_bytes"].get<int64_t>() : 0;
    int64_t dynamicBytes = 0;
    const char *dEnd = k->dynamicSmem.data() + k->dynamicSmem.size();
    if (!k->dynamicSmem.empty() &&
        std::from_chars(k->dynamicSmem.data(), dEnd, dynamicBytes).ptr == dEnd)
      smem = dynamicBytes + ptxasStatic;
    else
      smem = std::max(smem, ptxasStatic);
    launch["workgroup_bytes"] = k->workgroupBytes;
    if (sched.maxSmemBytesPerBlock > 0 && smem > sched.maxSmemBytesPerBlock)
      throw CompileError("target " + m.target + ": kernel " + k->entry + " uses " +
                         std::to_string(smem) + " bytes of shared memory, more than the " +
                         m.target + " schedule's max_smem_bytes_per_block " +
                         std::to_string(sched.maxSmemBytesPerBlock));
    m.kernels.push_back({entry, file, std::move(launch), std::move(signature), scheduleName});
  };
  // Matmuls of one input in a row (q, k, v; gate, up) share its copy, decode's int8 one
  // (quantize_q8_x) and prefill's f16 one (convert_f32_f16): such a launch equal to the
  // last one of its kernel kept is dropped while no op in between wrote that input
  // (every launch of the kernel writes the same scratches, so the last one is what they
  // hold).
  auto endsWith = [](const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  struct LastCopy {
    json record;     // the last record of the kernel kept
    std::string of;  // the activation it read
  };
  std::map<std::string, LastCopy> lastCopy;  // by kernel: ".quantize_q8_x", ".convert_f32_f16"
  // And the matmuls swz-fuse marked as one run (swz.shared_input: q, k, v; gate, up)
  // run as one launch of matmul_<type>_q8x (up to three outputs), which reads the int8
  // input once per row block and saves the launches' fixed cost: `open` is the record
  // of the last such matmul launch kept (in the previous group), `openOutputs` how many
  // outputs it holds, `openShared` its group's run.
  // (SWZ_MERGE_GEMV=0 turns the pattern off: one launch per matmul, for A/Bs.)
  json *open = nullptr;
  int openOutputs = 0;
  int64_t openShared = -1;
  int64_t openOp = -1;  // the graph op whose launches hold `open`
  auto i32Of = [](const json &arg) { return std::stoll(arg.at("i32").get<std::string>()); };
  // A quantize_q8_x right after the launch that wrote its input, of an op swz-fuse marked
  // swz.quantize_output (the RMSNorm before q/k/v and gate/up; SwiGLU before down), folds
  // into it in decode: that op runs its f32 kernel in prefill and <kernel>_q8x in decode,
  // which writes the same f32 output (bitwise) and its int8 form. `prevOp` is the last
  // graph op with launches. (SWZ_FOLD_QUANTIZE=0 turns the pattern off, for A/Bs.)
  int64_t prevOp = -1;
  bool prevQuantizeOutput = false;  // swz-fuse marked prevOp's op (swz.quantize_output)
  auto foldQuantize = [&](const json &quant) -> bool {
    if (prevOp < 0 || !prevQuantizeOutput || quant.at("phase") != "decode")
      return false;
    json &prevLaunches = ops.at(prevOp).at("launches");
    if (prevLaunches.empty())
      return false;
    json &producer = prevLaunches.back();
    const std::string &kernel = producer.at("kernel").get_ref<const std::string &>();
    const json &qa = quant.at("args");
    const json &pa = producer.at("args");
    const bool norm = endsWith(kernel, ".rms_norm_f32"), swiglu = endsWith(kernel, ".swiglu_f32");
    if (!(norm || swiglu) || producer.at("phase") != "all" || producer.at("scope") != quant.at("scope") ||
        !pa.at(2).contains("buffer") || pa.at(2).at("buffer") != qa.at(0).at("buffer"))
      return false;
    const std::string fusedEntry = norm ? "rms_norm_q8x" : "swiglu_q8x";
    recordKernel({"gemv_q8x", fusedEntry, "decode", true, false});
    json fused = producer;
    fused["kernel"] = m.target + "." + fusedEntry;
    fused["phase"] = "decode";
    if (norm) {  // (x, gamma, y, xq, xds, d, eps)
      fused["args"] = json::array({pa[0], pa[1], pa[2], qa[1], qa[2], pa[3], pa[4]});
    } else {     // (gate, up, a as vec4 views, xq, xds, nblk), launched as the quantize
      json gate = pa[0], up = pa[1], out = pa[2];
      for (json *v : {&gate, &up, &out})
        (*v)["shape"] = qa[0].at("shape");
      fused["args"] = json::array({gate, up, out, qa[1], qa[2], qa[3]});
      fused["grid"] = quant.at("grid");
    }
    producer["phase"] = "prefill";
    prevLaunches.push_back(std::move(fused));
    return true;
  };
  for (const codegen::LaunchGroup &group : p.groups) {
    for (const codegen::KernelRef &ref : group.kernels)
      recordKernel(ref);
    // The group's first graph op carries the launches; the others were fused into it.
    json &anchor = ops.at(group.graphOps.front());
    json launches = launchRecords(m, group, kernelOf);
    json kept = json::array();
    bool decodeBefore = false;  // a decode launch of this group came before
    for (json &l : launches) {
      const std::string &kernel = l.at("kernel").get_ref<const std::string &>();
      const bool quantize = endsWith(kernel, ".quantize_q8_x");
      if (quantize || endsWith(kernel, ".convert_f32_f16")) {
        LastCopy &last = lastCopy[quantize ? ".quantize_q8_x" : ".convert_f32_f16"];
        if (l == last.record)
          continue;
        const bool folded = quantize && !decodeBefore && foldQuantize(l);
        last = {l, l.at("args").at(0).at("buffer").get<std::string>()};
        if (folded)
          continue;
      }
      decodeBefore |= l.at("phase") != "prefill";
      kept.push_back(std::move(l));
    }
    // Merge this group's int8 GEMV into the previous group's when swz-fuse put both in
    // one run; and (checks of what the run implies) nothing re-quantized the input in
    // between, neither adds a residual, and the launch has room.
    json *mine = nullptr;
    bool requantized = false;
    for (json &l : kept) {
      const std::string &kernel = l.at("kernel").get_ref<const std::string &>();
      requantized |= endsWith(kernel, ".quantize_q8_x");
      if (endsWith(kernel, "_q8x") && !l.contains("rows"))
        mine = &l;
    }
    bool merged = false;
    if (mine && open && group.sharedInput >= 0 && group.sharedInput == openShared && !requantized &&
        openOutputs < 3 && (*open)["kernel"] == (*mine)["kernel"] && (*open)["phase"] == (*mine)["phase"]) {
      json &a = (*open)["args"];
      const json &b = (*mine)["args"];
      const int64_t fa = i32Of(a[17]), fb = i32Of(b[17]);
      if (a[3] == b[3] && a[4] == b[4] && a[15] == b[15] && a[16] == b[16] && !(fa & 2) && !(fb & 2)) {
        const int k = openOutputs;
        a[k] = b[0];          // weight
        a[5 + k] = b[5];      // y
        a[8 + k] = b[8];      // bias
        a[12 + k] = b[12];    // N
        a[17] = {{"i32", std::to_string(fa | ((fb & 1) ? (k == 1 ? 4 : 8) : 0))}};
        // The kernel's own grid rule (rows a workgroup: the schedule's gemv.q8x) over
        // the merged row counts.
        const std::string &name = (*open)["kernel"].get_ref<const std::string &>();
        auto kr = std::find_if(m.kernels.begin(), m.kernels.end(), [&](const package::Kernel &k) { return k.entry == name; });
        if (kr == m.kernels.end())
          throw CompileError("merging int8 GEMVs: no kernels[] record for " + name);
        (*open)["grid"][0] = substituteExpr(splitGridRules(kr->launch.at("grid").get<std::string>())[0],
                                            {{"N0", a[12].at("i32").get<std::string>()},
                                             {"N1", a[13].at("i32").get<std::string>()},
                                             {"N2", a[14].at("i32").get<std::string>()}});
        ++openOutputs;
        merged = true;
        anchor["decode_into"] = openOp;
        kept.erase(kept.begin() + (mine - &kept[0]));
      }
    }
    anchor["launches"] = std::move(kept);
    if (!anchor["launches"].empty()) {
      prevOp = group.graphOps.front();
      prevQuantizeOutput = group.quantizeOutput;
    }
    if (!merged) {
      open = nullptr;
      openOutputs = 0;
      for (json &l : anchor["launches"])
        if (endsWith(l.at("kernel").get_ref<const std::string &>(), "_q8x") && !l.contains("rows") &&
            !(i32Of(l["args"][17]) & 2)) {
          open = &l;
          openOutputs = 1;
          openOp = group.graphOps.front();
          openShared = group.sharedInput;
        }
    }
    for (int64_t id : group.graphOps)
      for (auto &[kernel, last] : lastCopy)
        if (ops.at(id).contains("out") && ops.at(id).at("out") == last.of)
          last.record = json();
    for (size_t i = 1; i < group.graphOps.size(); ++i) {
      json &fused = ops.at(group.graphOps[i]);
      fused["fused_into"] = group.graphOps.front();
      anchor["fused"].push_back(group.graphOps[i]);
    }
  }
  // 4. Greedy sampling on the device: argmax of each output row of the graph's output
  //    (the logits), so a greedy decode step copies back token ids, not logits.
  //    PTX splits each row over workgroups of 4096 logits, then reduces their maxima (one
  //    workgroup scanning Qwen's 152k logits took 66 us a step on the H200); SPIR-V keeps
  //    one workgroup a row.
  std::vector<codegen::KernelRef> argmax;
  for (const char *entry : m.target == "spirv" ? std::vector<const char *>{"argmax_f32"}
                                               : std::vector<const char *>{"argmax_split_f32", "argmax_reduce_f32"})
    argmax.push_back(codegen::KernelRef{"argmax_f32", entry, "all"});
  for (const codegen::KernelRef &ref : argmax)
    recordKernel(ref);
  m.graph["sampling"] = {{"argmax", samplingRecord(m, argmax, kernelOf)}};
  // 5. K/V moved between cache slots on the device (the approx cache mode's installs:
  //    exec::BatchModel::move_kv), one record a layer.
  const codegen::KernelRef move{"attention_f16kv", "kv_move_rope_f16", "all"};
  if (json kv = kvMoveRecord(m, move, kernelOf); !kv.is_null()) {
    recordKernel(move);
    m.graph["kv_move"] = std::move(kv);
  }
  if (log.info)
    for (const std::string &line : report)
      log.info("kernel " + line);
}

} // namespace swz::compiler
