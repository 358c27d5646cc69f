//===- ptx_check.cpp - run every PTX kernel case on an NVIDIA GPU ----------===//
//
//   swz-ptx-check --ptx-dir DIR [--filter SUBSTR] [--reps N] [--json out.json]
//                 [--peak-gbps X] [--peak-tflops Y] [--peak-tc-tflops Z] [--flush-l2 MB]
//                 [--rotate MB]
//   swz-ptx-check --print-peak-ptx     # the peak kernels' PTX (for ptxas)
//
// Runs allCases("ptx") (test/gpu/cases.h) through the CUDA driver API: loads
// DIR/<module>.ptx (JIT by the driver), expands each memref argument into MLIR's
// descriptor (allocated ptr, aligned ptr, offset, sizes[R], strides[R]; row-major,
// offset 0), launches with the case's grid, block and dynamic shared memory, and
// compares the buffers with the float64 reference. Then times N launches (default
// 20, after one warm-up) with cuEvents (--flush-l2: each launch alone after an L2
// eviction; --rotate: back to back over copies of the case's buffers that add up to at
// least MB, so no launch finds its inputs in the L2) and prints the mean time, the achieved
// bandwidth (Case::bytesMoved / time) and the roofline fraction:
//   roofline = max(bytesMoved / peak bandwidth, flops / peak FLOP rate) / time,
// with the tensor-core peak for Case::tensorCore cases, else the FP32 FMA peak.
// Peaks not given on the command line are measured here first: bandwidth by a
// 1 GiB device-to-device cuMemcpy (2 bytes moved per byte copied), the FP32 peak
// by an FMA loop and the tensor-core peak by an mma.sync.m16n8k16 (f16, f32
// accumulate) loop, both hand-written PTX below.
// Exit status: 0 if every case is within tolerance, 1 if any is not (or failed to
// load or launch: the context is reset and the run goes on), 2 for bad usage or no GPU.
//
//===----------------------------------------------------------------------===//
#include "cases.h"

#include <cuda.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace {

using swz::check::Arg;
using swz::check::Case;
using swz::check::Verdict;

/// A failed CUDA call: the call's name and cuGetErrorString.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(CUresult r, const std::string &what) {
  if (r != CUDA_SUCCESS) {
    const char *msg = nullptr;
    cuGetErrorString(r, &msg);
    throw CudaError(what + ": " + (msg ? msg : "unknown CUDA error"));
  }
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CUmodule loadPtx(const std::string &ptx, const std::string &what) {
  CUmodule module;
  char log[8192] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log)))};
  CUresult r = cuModuleLoadDataEx(&module, ptx.c_str(), 2, opts, vals);
  if (r != CUDA_SUCCESS) {
    const char *msg = nullptr;
    cuGetErrorString(r, &msg);
    throw CudaError("cuModuleLoadDataEx(" + what + "): " + (msg ? msg : "?") + "\n" + log);
  }
  return module;
}

/// PTX of the two peak kernels: swz_peak_fma (per thread, `iters` x 32 FMAs over 8
/// independent chains) and swz_peak_mma (per warp, `iters` x 8 independent
/// mma.sync.m16n8k16.f32.f16.f16.f32). Both store a sum so nothing is dead.
std::string peakPtx() {
  std::ostringstream p;
  auto prologue = [&](const char *name) {
    p << ".visible .entry " << name << "(.param .u64 out, .param .u32 iters)\n{\n"
      << "  .reg .pred %p;\n  .reg .b32 %r<16>;\n  .reg .f32 %f<40>;\n  .reg .b64 %rd<4>;\n"
      << "  ld.param.u64 %rd1, [out];\n  ld.param.u32 %r1, [iters];\n"
      << "  mov.u32 %r2, %tid.x;\n  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n"
      << "  mad.lo.u32 %r5, %r3, %r4, %r2;\n";
  };
  auto epilogue = [&](const char *loop, int n) {
    p << "  sub.s32 %r1, %r1, 1;\n  setp.ne.s32 %p, %r1, 0;\n  @%p bra " << loop << ";\n"
      << "  mov.f32 %f33, 0f00000000;\n";
    for (int i = 1; i <= n; ++i)
      p << "  add.f32 %f33, %f33, %f" << i << ";\n";
    p << "  cvta.to.global.u64 %rd2, %rd1;\n  mul.wide.u32 %rd3, %r5, 4;\n"
      << "  add.s64 %rd2, %rd2, %rd3;\n  st.global.f32 [%rd2], %f33;\n  ret;\n}\n";
  };
  p << ".version 7.0\n.target sm_80\n.address_size 64\n";
  prologue("swz_peak_fma");
  p << "  cvt.rn.f32.u32 %f1, %r5;\n";
  for (int i = 2; i <= 8; ++i)
    p << "  add.f32 %f" << i << ", %f" << i - 1 << ", 0f3F800000;\n";
  p << "  mov.f32 %f17, 0f3F7FFFFF;\n  mov.f32 %f18, 0f33800000;\nFMA_LOOP:\n";
  for (int round = 0; round < 4; ++round)
    for (int i = 1; i <= 8; ++i)
      p << "  fma.rn.f32 %f" << i << ", %f" << i << ", %f17, %f18;\n";
  epilogue("FMA_LOOP", 8);
  prologue("swz_peak_mma");
  for (int i = 6; i <= 9; ++i)
    p << "  mov.b32 %r" << i << ", 0x3C003C00;\n";  // A fragment: f16 1.0 pairs
  p << "  mov.b32 %r10, 0x00003C00;\n  mov.b32 %r11, 0x3C000000;\n";
  for (int i = 1; i <= 32; ++i)
    p << "  mov.f32 %f" << i << ", 0f00000000;\n";
  p << "MMA_LOOP:\n";
  for (int a = 0; a < 8; ++a) {
    std::string acc = "{%f" + std::to_string(4 * a + 1) + ", %f" + std::to_string(4 * a + 2) +
                      ", %f" + std::to_string(4 * a + 3) + ", %f" + std::to_string(4 * a + 4) + "}";
    p << "  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " << acc
      << ", {%r6, %r7, %r8, %r9}, {%r10, %r11}, " << acc << ";\n";
  }
  epilogue("MMA_LOOP", 32);
  return p.str();
}

/// Milliseconds `work()` takes on the default stream, between two cuEvents.
template <typename Work> float timeEvents(Work work) {
  CUevent start, stop;
  check(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  check(cuEventRecord(start, nullptr), "cuEventRecord");
  work();
  check(cuEventRecord(stop, nullptr), "cuEventRecord");
  check(cuEventSynchronize(stop), "cuEventSynchronize");
  float ms = 0;
  check(cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  cuEventDestroy(start);
  cuEventDestroy(stop);
  return ms;
}

/// Seconds per launch of `f` (mean of `reps` after one warm-up), timed with cuEvents.
/// flushL2 (bytes, 0: off): before each timed launch a memset of that many bytes evicts
/// the L2 (the H200's is 50 MB), so the kernel reads its weights from HBM as in a decode
/// step of a model larger than the L2; only the kernel lies between each pair of events.
double timeLaunch(CUfunction f, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
                  unsigned smem, void **params, int reps, size_t flushL2 = 0) {
  auto launch = [&](const char *what) {
    check(cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                         nullptr, params, nullptr),
          what);
  };
  launch("cuLaunchKernel (warm-up)");
  if (flushL2 == 0) {  // back to back (rotated copies: timeRotated)
    float ms = timeEvents([&] {
      for (int r = 0; r < reps; ++r)
        launch("cuLaunchKernel (timed)");
    });
    return double(ms) * 1e-3 / reps;
  }
  CUdeviceptr scratch;
  check(cuMemAlloc(&scratch, flushL2), "cuMemAlloc (L2 flush)");
  double total = 0;
  for (int r = 0; r < reps; ++r) {
    check(cuMemsetD8Async(scratch, uint8_t(r), flushL2, nullptr), "cuMemsetD8Async (L2 flush)");
    total += timeEvents([&] { launch("cuLaunchKernel (timed)"); });
  }
  cuMemFree(scratch);
  return total * 1e-3 / reps;
}

struct Peaks {
  double bytesPerS = 0, fmaFlopsPerS = 0, tcFlopsPerS = 0;
  std::string source;  ///< "measured" / "given" per peak, for the report
};

/// Device bandwidth from a 1 GiB cuMemcpyDtoD (bytes read + written per second).
double measureBandwidth() {
  const size_t bytes = size_t(1) << 30;
  CUdeviceptr a, b;
  check(cuMemAlloc(&a, bytes), "cuMemAlloc (bandwidth)");
  check(cuMemAlloc(&b, bytes), "cuMemAlloc (bandwidth)");
  check(cuMemcpyDtoD(b, a, bytes), "cuMemcpyDtoD");
  const int reps = 10;
  float ms = timeEvents([&] {
    for (int r = 0; r < reps; ++r)
      check(cuMemcpyDtoDAsync(b, a, bytes, nullptr), "cuMemcpyDtoDAsync");
  });
  cuMemFree(a);
  cuMemFree(b);
  return 2.0 * double(bytes) * reps / (double(ms) * 1e-3);
}

/// FLOP/s of the peak kernel `entry`: `flopsPerThread(iters)` per thread.
double measureFlops(CUmodule module, const char *entry, int sms, double flopsPerIterPerThread) {
  CUfunction f;
  check(cuModuleGetFunction(&f, module, entry), entry);
  const unsigned block = 256, grid = unsigned(sms) * 8;
  CUdeviceptr out;
  check(cuMemAlloc(&out, size_t(grid) * block * 4), "cuMemAlloc (peak)");
  uint32_t iters = 1024;
  void *params[] = {&out, &iters};
  double s = timeLaunch(f, {grid, 1, 1}, {block, 1, 1}, 0, params, 5);
  cuMemFree(out);
  return double(grid) * block * iters * flopsPerIterPerThread / s;
}

/// A case's device buffers and its kernel parameter list (MLIR's expanded memrefs).
struct Launch {
  std::vector<CUdeviceptr> buffers;
  std::vector<int64_t> words;  ///< parameter storage; `params` points into it
  std::vector<void *> params;
  ~Launch() {
    for (CUdeviceptr p : buffers)
      cuMemFree(p);
  }
};

void prepare(const Case &c, Launch &l) {
  for (const auto &b : c.buffers) {
    CUdeviceptr p = 0;
    check(cuMemAlloc(&p, std::max<size_t>(b.bytes.size(), 4)), "cuMemAlloc");
    l.buffers.push_back(p);
    if (!b.bytes.empty())
      check(cuMemcpyHtoD(p, b.bytes.data(), b.bytes.size()), "cuMemcpyHtoD");
  }
  size_t n = 0;
  for (const Arg &a : c.args)
    n += a.kind == Arg::Memref ? 3 + 2 * c.buffers.at(a.buffer).sizes.size() : 1;
  l.words.assign(n, 0);  // 8 bytes per parameter; i32 / f32 use the low 4
  size_t w = 0;
  auto push = [&](const void *v, size_t bytes) {
    std::memcpy(&l.words[w], v, bytes);
    l.params.push_back(&l.words[w++]);
  };
  for (const Arg &a : c.args) {
    if (a.kind == Arg::I32) {
      push(&a.i32, 4);
    } else if (a.kind == Arg::F32) {
      push(&a.f32, 4);
    } else {
      const auto &b = c.buffers.at(a.buffer);
      CUdeviceptr p = l.buffers.at(a.buffer);
      int64_t offset = 0;
      push(&p, 8);
      push(&p, 8);
      push(&offset, 8);
      for (int64_t s : b.sizes)
        push(&s, 8);
      std::vector<int64_t> strides(b.sizes.size(), 1);
      for (int i = int(b.sizes.size()) - 2; i >= 0; --i)
        strides[i] = strides[i + 1] * b.sizes[i + 1];
      for (int64_t s : strides)
        push(&s, 8);
    }
  }
}

/// Seconds per launch with the buffers rotated: `copies` (>= 2) parameter lists over
/// separate copies of the case's buffers, launched back to back (one warm-up round
/// first), `reps` launches cycling through them between two cuEvents. With the copies
/// adding up to more than the L2 (the H200's is 50 MB), every launch reads its inputs
/// from HBM, as a decode step's chain of kernels does, and the launch overhead is what a
/// stream of launches pays (not one launch's own, as with --flush-l2).
double timeRotated(CUfunction f, const Case &c, const std::vector<std::unique_ptr<Launch>> &copies,
                   int reps) {
  auto launch = [&](Launch &l) {
    check(cuLaunchKernel(f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2],
                         c.dynamicSmemBytes, nullptr, l.params.data(), nullptr),
          "cuLaunchKernel (rotated)");
  };
  for (const auto &l : copies)
    launch(*l);
  const int n = std::max<int>(reps, int(copies.size()));
  float ms = timeEvents([&] {
    for (int r = 0; r < n; ++r)
      launch(*copies[size_t(r) % copies.size()]);
  });
  return double(ms) * 1e-3 / n;
}

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s --ptx-dir DIR [--filter SUBSTR] [--reps N] [--json out.json] "
               "[--peak-gbps X] [--peak-tflops Y] [--peak-tc-tflops Z] [--flush-l2 MB] [--rotate MB]\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string dir, filter, jsonPath;
  int reps = 20;
  size_t flushL2 = 0, rotate = 0;
  double givenGbps = 0, givenTflops = 0, givenTcTflops = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--print-peak-ptx") {  // for checking it with ptxas where there is no GPU
      std::fputs(peakPtx().c_str(), stdout);
      return 0;
    }
    if (i + 1 >= argc)
      return usage(argv[0]);
    std::string v = argv[++i];
    if (flag == "--ptx-dir") dir = v;
    else if (flag == "--filter") filter = v;
    else if (flag == "--json") jsonPath = v;
    else if (flag == "--reps") reps = std::atoi(v.c_str());
    else if (flag == "--flush-l2") flushL2 = size_t(std::atol(v.c_str())) << 20;
    else if (flag == "--rotate") rotate = size_t(std::atol(v.c_str())) << 20;
    else if (flag == "--peak-gbps") givenGbps = std::atof(v.c_str());
    else if (flag == "--peak-tflops") givenTflops = std::atof(v.c_str());
    else if (flag == "--peak-tc-tflops") givenTcTflops = std::atof(v.c_str());
    else return usage(argv[0]);
  }
  if (dir.empty() || reps < 1 || (rotate && flushL2))
    return usage(argv[0]);

  CUdevice dev;
  CUcontext ctx;
  char name[256] = {0};
  int major = 0, minor = 0, sms = 0;
  try {
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
    cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  } catch (const CudaError &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  std::printf("device: %s (sm_%d%d, %d SMs), PTX from %s\n", name, major, minor, sms, dir.c_str());

  // Peaks: given, else measured (a failed measurement leaves that peak out).
  Peaks peak;
  auto measured = [&](const char *what, double given, double scale, auto measure) {
    if (given > 0)
      return given * scale;
    try {
      return measure();
    } catch (const std::exception &e) {
      std::printf("warning: measuring the %s peak failed (%s); no roofline for it\n", what,
                  e.what());
      return 0.0;
    }
  };
  peak.bytesPerS = measured("bandwidth", givenGbps, 1e9, [] { return measureBandwidth(); });
  CUmodule peakModule = nullptr;
  try {
    peakModule = loadPtx(peakPtx(), "peak kernels");
  } catch (const std::exception &e) {
    std::printf("warning: %s\n", e.what());
  }
  peak.fmaFlopsPerS = measured("FP32", givenTflops, 1e12, [&] {
    if (!peakModule) throw std::runtime_error("no peak module");
    return measureFlops(peakModule, "swz_peak_fma", sms, 32 * 2.0);
  });
  peak.tcFlopsPerS = measured("tensor-core", givenTcTflops, 1e12, [&] {
    if (!peakModule) throw std::runtime_error("no peak module");
    return measureFlops(peakModule, "swz_peak_mma", sms, 8 * 4096.0 / 32);
  });
  std::printf("peaks: %.0f GB/s (%s), FP32 %.1f TFLOP/s (%s), tensor core f16 mma.sync %.1f "
              "TFLOP/s (%s)\n",
              peak.bytesPerS / 1e9, givenGbps > 0 ? "given" : "measured: 1 GiB DtoD copy",
              peak.fmaFlopsPerS / 1e12, givenTflops > 0 ? "given" : "measured: FMA loop",
              peak.tcFlopsPerS / 1e12, givenTcTflops > 0 ? "given" : "measured: mma.sync loop");

  std::map<std::string, CUmodule> modules;
  nlohmann::json results = nlohmann::json::array();
  int run = 0, failed = 0;
  for (const Case &c : swz::check::allCases("ptx")) {
    std::string label = c.module + "." + c.entry + " " + c.label;
    if (!filter.empty() && label.find(filter) == std::string::npos)
      continue;
    ++run;
    Verdict v;
    std::string error, digest;  // digest: output_fnv1a
    double seconds = 0;
    try {
      auto it = modules.find(c.module);
      if (it == modules.end()) {
        std::string path = dir + "/" + c.module + ".ptx";
        it = modules.emplace(c.module, loadPtx(readFile(path), path)).first;
      }
      CUfunction f;
      check(cuModuleGetFunction(&f, it->second, c.entry.c_str()),
            "cuModuleGetFunction(" + c.entry + ")");
      if (c.dynamicSmemBytes > 48 * 1024)
        check(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 int(c.dynamicSmemBytes)),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
      Launch l;
      prepare(c, l);
      check(cuLaunchKernel(f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                           c.block[2], c.dynamicSmemBytes, nullptr, l.params.data(), nullptr),
            "cuLaunchKernel");
      check(cuCtxSynchronize(), "cuCtxSynchronize");
      std::vector<std::vector<uint8_t>> out(c.buffers.size());
      for (size_t i = 0; i < out.size(); ++i) {
        out[i].resize(c.buffers[i].bytes.size());
        if (!out[i].empty())
          check(cuMemcpyDtoH(out[i].data(), l.buffers[i], out[i].size()), "cuMemcpyDtoH");
      }
      v = c.check(out);
      // FNV-1a over every buffer after the launch: equal digests = bitwise equal outputs
      // (bench/tune_gemm.sh compares each candidate schedule's kernel with the shipped one).
      uint64_t h = 1469598103934665603ull;
      for (const auto &b : out)
        for (uint8_t byte : b)
          h = (h ^ byte) * 1099511628211ull;
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
      digest = hex;
      // Timed after the check: in-place kernels change their buffers.
      if (rotate) {
        size_t caseBytes = 0;
        for (const auto &b : c.buffers)
          caseBytes += b.bytes.size();
        std::vector<std::unique_ptr<Launch>> copies;
        // At most 64 copies: a case under rotate / 64 bytes stays partly in the L2.
        const size_t n = std::clamp<size_t>((rotate + caseBytes - 1) / std::max<size_t>(caseBytes, 1), 2, 64);
        for (size_t i = 0; i < n; ++i) {
          copies.push_back(std::make_unique<Launch>());
          prepare(c, *copies.back());
        }
        seconds = timeRotated(f, c, copies, reps);
      } else {
        seconds = timeLaunch(f, c.grid, c.block, c.dynamicSmemBytes, l.params.data(), reps, flushL2);
      }
    } catch (const std::exception &e) {
      error = e.what();
      // A faulting kernel poisons the context: start a fresh one for the next case.
      if (dynamic_cast<const CudaError *>(&e)) {
        modules.clear();
        cuDevicePrimaryCtxRelease(dev);
        cuDevicePrimaryCtxReset(dev);
        if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
            cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
          std::fprintf(stderr, "error: cannot recreate the CUDA context after: %s\n", e.what());
          return 2;
        }
      }
    }
    bool ok = error.empty() && v.bad == 0 && v.checked > 0;
    failed += !ok;
    double gbps = seconds > 0 ? c.bytesMoved / seconds / 1e9 : 0;
    double flopPeak = c.tensorCore ? peak.tcFlopsPerS : peak.fmaFlopsPerS;
    double ideal = std::max(peak.bytesPerS > 0 ? c.bytesMoved / peak.bytesPerS : 0.0,
                            flopPeak > 0 ? c.flops / flopPeak : 0.0);
    double roofline = seconds > 0 ? ideal / seconds : 0;
    if (!error.empty())
      std::printf("FAIL %s: %s\n", label.c_str(), error.c_str());
    else
      std::printf("%s %s: max |err| %.3g, %lld of %lld outside tolerance (%s); %.2f us, "
                  "%.1f GB/s, %.1f%% of roofline\n",
                  ok ? "ok  " : "FAIL", label.c_str(), v.maxErr, (long long)v.bad,
                  (long long)v.checked, v.note.c_str(), seconds * 1e6, gbps, roofline * 100);
    std::fflush(stdout);
    results.push_back({{"module", c.module}, {"entry", c.entry}, {"label", c.label},
                       {"ok", ok}, {"error", error}, {"max_err", v.maxErr}, {"bad", v.bad},
                       {"checked", v.checked}, {"tolerance", v.note},
                       {"grid", c.grid}, {"block", c.block},
                       {"dynamic_smem_bytes", c.dynamicSmemBytes},
                       {"bytes_moved", c.bytesMoved}, {"flops", c.flops},
                       {"tensor_core", c.tensorCore}, {"time_us", seconds * 1e6},
                       {"output_fnv1a", digest},
                       {"gb_per_s", gbps}, {"roofline_fraction", roofline}});
  }
  std::printf("%d cases, %d failed\n", run, failed);
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << nlohmann::json{{"device", name},
                          {"sm", major * 10 + minor},
                          {"ptx_dir", dir},
                          {"reps", reps},
                          {"flush_l2_mb", flushL2 >> 20},
                          {"rotate_mb", rotate >> 20},
                          {"peak_gb_per_s", peak.bytesPerS / 1e9},
                          {"peak_fp32_tflops", peak.fmaFlopsPerS / 1e12},
                          {"peak_tensor_core_tflops", peak.tcFlopsPerS / 1e12},
                          {"cases", results}}
               .dump(2)
        << "\n";
  }
  cuDevicePrimaryCtxRelease(dev);
  if (run == 0) {
    std::fprintf(stderr, "error: no case matches '%s'\n", filter.c_str());
    return 2;
  }
  return failed ? 1 : 0;
}
