//===- vk_check.cpp - run every SPIR-V kernel case on a Vulkan device ------===//
//
//   swz-vk-check [--spv-dir DIR] [--filter SUBSTR] [--device SUBSTR]
//                [--time REPS] [--json out.json]
//
// Runs allCases("spv") (test/gpu/cases.h) through runtime/vulkan (Mesa
// lavapipe in CI: `--device llvmpipe`) and compares each with its float64
// reference. SPIR-V comes from compiling the built-in kernel sources in-process
// (swz::codegen::compileGpuKernels(..., "spirv"), the same path as swizzlec
// --target spirv), or from DIR/<module>.spv with --spv-dir.
// ABI: argument i (memref or scalar) is the storage buffer at (set 0, binding i);
// a scalar's buffer holds its 4 bytes; the workgroup size is in the module.
// One line per case; with --time, also the mean device time of REPS timed
// dispatches (timestamp queries). Exit status: 0 if every case is within
// tolerance, 1 if any is not (or its kernel failed to compile or run), 2 for
// bad usage or no Vulkan device.
//
//===----------------------------------------------------------------------===//
#include "cases.h"

#include "codegen/GpuCompiler.h"
#include "vulkan/vulkan_device.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace {

using swz::check::Arg;
using swz::check::Case;
using swz::check::Verdict;

/// SPIR-V words of one gpu.module, or why there are none.
struct Module {
  std::vector<uint32_t> words;
  std::string error;
};

std::vector<uint32_t> toWords(const std::string &bytes) {
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

/// The SPIR-V for gpu.module `name`: DIR/<name>.spv, or compiled from the built-in
/// kernel source that declares `gpu.module @<name>`.
Module loadModule(const std::string &name, const std::string &spvDir) {
  Module m;
  if (!spvDir.empty()) {
    std::string path = spvDir + "/" + name + ".spv";
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      m.error = "cannot read " + path;
      return m;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (ss.str().size() % 4 != 0) {
      m.error = path + " is not a whole number of 32-bit words";
      return m;
    }
    m.words = toWords(ss.str());
    return m;
  }
  for (const auto &[stem, source] : swz::codegen::builtinKernelSources()) {
    size_t at = source.find("gpu.module @" + name);
    if (at == std::string::npos)
      continue;
    char next = source[at + 12 + name.size()];
    if (next != ' ' && next != '{')
      continue;
    try {
      for (const auto &k : swz::codegen::compileGpuKernels(source, "spirv"))
        if (k.module == name) {
          m.words = toWords(k.binary);
          return m;
        }
      m.error = "compiling " + stem + " for spirv produced no module " + name;
    } catch (const std::exception &e) {
      m.error = "compiling " + stem + " for spirv failed: " + e.what();
    }
    return m;
  }
  m.error = "no built-in kernel source declares gpu.module @" + name;
  return m;
}

struct Outcome {
  Verdict verdict;
  std::string error;
  double timeNs = 0;
};

Outcome runCase(swz::vulkan::Device &dev, const Case &c, const Module &mod,
                std::map<std::string, swz::vulkan::Pipeline> &pipelines, int reps) {
  Outcome o;
  if (!mod.error.empty()) {
    o.error = mod.error;
    return o;
  }
  try {
    const uint32_t bindings = uint32_t(c.args.size());
    std::string key = c.module + "." + c.entry + "/" + std::to_string(bindings);
    auto it = pipelines.find(key);
    if (it == pipelines.end())
      it = pipelines.emplace(key, dev.create_pipeline(mod.words, c.entry, bindings)).first;
    std::vector<swz::vulkan::Buffer> buffers;
    for (const auto &b : c.buffers) {
      buffers.push_back(dev.create_buffer(b.bytes.size()));
      buffers.back().write(b.bytes.data(), b.bytes.size());
    }
    std::vector<swz::vulkan::Buffer> scalars;
    scalars.reserve(c.args.size());
    std::vector<swz::vulkan::Buffer *> bound;
    for (const Arg &a : c.args) {
      if (a.kind == Arg::Memref) {
        if (a.buffer < 0 || size_t(a.buffer) >= buffers.size())
          throw std::runtime_error("argument names buffer " + std::to_string(a.buffer) +
                                   " of " + std::to_string(buffers.size()));
        bound.push_back(&buffers[a.buffer]);
        continue;
      }
      scalars.push_back(dev.create_buffer(4));
      if (a.kind == Arg::I32)
        scalars.back().write(&a.i32, 4);
      else
        scalars.back().write(&a.f32, 4);
      bound.push_back(&scalars.back());
    }
    std::array<uint32_t, 3> grid{c.grid[0], c.grid[1], c.grid[2]};
    dev.dispatch(it->second, bound, grid);
    std::vector<std::vector<uint8_t>> out(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
      out[i].resize(c.buffers[i].bytes.size());
      buffers[i].read(out[i].data(), out[i].size());
    }
    o.verdict = c.check(out);
    // Timed runs after the check: in-place kernels change their buffers.
    if (reps > 0) {
      double total = 0;
      for (int r = 0; r < reps; ++r)
        total += dev.dispatch(it->second, bound, grid, /*timed=*/true);
      o.timeNs = total / reps;
    }
  } catch (const std::exception &e) {
    o.error = e.what();
  }
  return o;
}

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--spv-dir DIR] [--filter SUBSTR] [--device SUBSTR] [--time REPS] "
               "[--json out.json]\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string spvDir, filter, device, jsonPath;
  int reps = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc)
      return usage(argv[0]);
    std::string value = argv[++i];
    if (flag == "--spv-dir")
      spvDir = value;
    else if (flag == "--filter")
      filter = value;
    else if (flag == "--device")
      device = value;
    else if (flag == "--json")
      jsonPath = value;
    else if (flag == "--time")
      reps = std::atoi(value.c_str());
    else
      return usage(argv[0]);
  }

  std::unique_ptr<swz::vulkan::Device> dev;
  try {
    dev = std::make_unique<swz::vulkan::Device>(device);
  } catch (const swz::vulkan::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  const auto &info = dev->info();
  std::printf("device: %s (%s, Vulkan %u.%u, subgroup %u; f16 %s, i8 %s, 16-bit storage %s, "
              "8-bit storage %s)\n",
              info.name.c_str(), info.type.c_str(), info.api_version >> 22,
              (info.api_version >> 12) & 0x3ff, info.subgroup_size, info.float16 ? "yes" : "no",
              info.int8 ? "yes" : "no", info.storage_16bit ? "yes" : "no",
              info.storage_8bit ? "yes" : "no");
  std::string groups;
  for (const auto &g : swz::check::linkedCaseGroups())
    groups += (groups.empty() ? "" : ", ") + g;
  std::printf("case groups: %s\n", groups.c_str());

  std::map<std::string, Module> modules;
  std::map<std::string, swz::vulkan::Pipeline> pipelines;
  nlohmann::json results = nlohmann::json::array();
  int run = 0, failed = 0;
  for (const Case &c : swz::check::allCases("spv")) {
    std::string name = c.module + "." + c.entry + " " + c.label;
    if (!filter.empty() && name.find(filter) == std::string::npos)
      continue;
    auto mit = modules.find(c.module);
    if (mit == modules.end())
      mit = modules.emplace(c.module, loadModule(c.module, spvDir)).first;
    Outcome o = runCase(*dev, c, mit->second, pipelines, reps);
    ++run;
    bool ok = o.error.empty() && o.verdict.bad == 0 && o.verdict.checked > 0;
    failed += !ok;
    if (!o.error.empty()) {
      std::printf("FAIL %s: %s\n", name.c_str(), o.error.c_str());
    } else {
      std::printf("%s %s: max |err| %.3g, %lld of %lld outside tolerance (%s)", ok ? "ok  " : "FAIL",
                  name.c_str(), o.verdict.maxErr, (long long)o.verdict.bad,
                  (long long)o.verdict.checked, o.verdict.note.c_str());
      if (reps > 0)
        std::printf(", %.1f us", o.timeNs / 1e3);
      std::printf("\n");
    }
    std::fflush(stdout);
    results.push_back({{"module", c.module},
                       {"entry", c.entry},
                       {"label", c.label},
                       {"ok", ok},
                       {"error", o.error},
                       {"max_err", o.verdict.maxErr},
                       {"bad", o.verdict.bad},
                       {"checked", o.verdict.checked},
                       {"tolerance", o.verdict.note},
                       {"time_us", reps > 0 ? nlohmann::json(o.timeNs / 1e3) : nlohmann::json()}});
  }
  std::printf("%d cases, %d failed\n", run, failed);
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << nlohmann::json{{"device", info.name}, {"format", "spv"}, {"cases", results}}.dump(2)
        << "\n";
  }
  if (run == 0) {
    std::fprintf(stderr, "error: no case matches '%s'\n", filter.c_str());
    return 2;
  }
  return failed ? 1 : 0;
}
