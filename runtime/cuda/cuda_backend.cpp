// The CUDA backend. See cuda_backend.h.
#include "cuda/cuda_backend.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "backend/buffer_table.h"
#include "backend/kernel_record.h"
#include "cuda/cuda_driver.h"
#include "package/package.h"

namespace swz::cuda {

using backend::Arg;
using backend::Buffer;
using backend::Error;
using backend::LaunchDesc;
namespace fs = std::filesystem;

namespace {

/// FNV-1a, 64 bits: identifies a PTX source and checks a cached cubin (not cryptographic).
uint64_t fnv1a(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// Header of a cached cubin file, followed by the cubin's bytes.
struct CacheHeader {
  char magic[8] = {'S', 'W', 'Z', 'C', 'U', 'B', 'I', '1'};
  uint64_t ptx_hash = 0;
  uint64_t cubin_hash = 0;
  uint64_t cubin_bytes = 0;
};

/// The cubin in `path` if its header matches `ptx_hash` and its bytes their hash.
bool read_cache(const fs::path& path, uint64_t ptx_hash, std::string& cubin) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  CacheHeader h, want;
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
  if (std::memcmp(h.magic, want.magic, sizeof h.magic) != 0 || h.ptx_hash != ptx_hash) return false;
  if (h.cubin_bytes == 0 || h.cubin_bytes > (uint64_t(1) << 32)) return false;
  cubin.resize(h.cubin_bytes);
  if (!in.read(cubin.data(), std::streamsize(cubin.size()))) return false;
  return fnv1a(cubin.data(), cubin.size()) == h.cubin_hash;
}

/// Writes the cache file atomically (temporary file + rename). Returns "" or why not.
std::string write_cache(const fs::path& path, uint64_t ptx_hash, const std::string& cubin) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return "cannot create " + path.parent_path().string() + ": " + ec.message();
  const fs::path tmp = path.string() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return "cannot write " + tmp.string();
    CacheHeader h;
    h.ptx_hash = ptx_hash;
    h.cubin_hash = fnv1a(cubin.data(), cubin.size());
    h.cubin_bytes = cubin.size();
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(cubin.data(), std::streamsize(cubin.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return "cannot write " + tmp.string();
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "cannot rename into " + path.string();
  }
  return "";
}

/// The per-user cache directory: $XDG_CACHE_HOME/swizzle, else ~/.cache/swizzle ("" if neither).
fs::path user_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "swizzle";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "swizzle";
  return {};
}

/// "swz_add" for "swz_add.ptx" (a file in a subdirectory: "sub_swz_add").
std::string module_name(const std::string& file) {
  std::string stem = fs::path(file).replace_extension().string();
  for (char& c : stem)
    if (c == '/' || c == '\\') c = '_';
  return stem;
}

}  // namespace

std::string ptx_arch_mismatch(const std::string& ptx, const std::string& device_arch) {
  const size_t at = ptx.find(".target ");
  if (at == std::string::npos) return "";
  const size_t begin = at + 8;
  const std::string target = ptx.substr(begin, ptx.find_first_of(" ,\t\r\n", begin) - begin);
  if (target.size() < 4 || target.back() != 'a' || target.substr(0, target.size() - 1) == device_arch) return "";
  return "is PTX for " + target + ", which runs on " + target.substr(0, target.size() - 1) +
         " devices only (architecture-specific instructions such as wgmma); this device is " + device_arch +
         ": recompile the model with swizzlec compile --target sm_89 (mma.sync kernels, PTX that every GPU from "
         "sm_89 up runs)";
}

std::string arch_mismatch(const std::string& target, int major, int minor, const std::string& device) {
  const std::string dev_arch = "sm_" + std::to_string(major) + std::to_string(minor);
  const int dev = major * 10 + minor;
  int pkg = 0;
  bool specific = false;
  if (target.rfind("sm_", 0) != 0 || target.size() < 5) return "package target " + target + " is not a CUDA target (sm_XY)";
  size_t i = 3;
  while (i < target.size() && std::isdigit(static_cast<unsigned char>(target[i]))) pkg = pkg * 10 + (target[i++] - '0');
  if (i < target.size()) {
    if (target.substr(i) != "a" || pkg == 0) return "package target " + target + " is not a CUDA target (sm_XY)";
    specific = true;
  }
  const bool ok = specific ? dev == pkg : dev >= pkg;
  if (ok) return "";
  // The newest CUDA target swizzlec knows that the device runs (PTX for sm_XY runs on sm_MN, MN >= XY).
  std::string fix;
  int best = 0;
  for (const std::string& t : package::known_targets()) {
    if (t.rfind("sm_", 0) != 0) continue;
    const int v = std::atoi(t.c_str() + 3);
    if (v <= dev && v > best) best = v, fix = t;
  }
  return "package compiled for " + target + "; device " + device + " is " + dev_arch +
         (fix.empty() ? ": no CUDA target of swizzlec runs on it (sm_80 is the oldest); use swizzlec compile --target spirv"
                      : ": recompile with swizzlec compile --target " + fix);
}

struct CudaBackend::Impl {
  std::unique_ptr<Driver> d;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  int major = 0, minor = 0, driver_version = 0, smem_optin = 0;
  std::array<uint32_t, 3> max_grid{};
  backend::DeviceInfo info;

  struct Kernel {
    backend::KernelRecord rec;
    CUfunction fn = nullptr;
    int static_smem = 0;
    uint32_t dynamic_limit = 0;  ///< current MAX_DYNAMIC_SHARED_SIZE_BYTES of fn
    size_t param_words = 0;      ///< kernel parameters after memref expansion
  };
  std::vector<CUmodule> modules;
  std::vector<Kernel> kernels;
  std::unordered_map<std::string, int> by_entry;
  std::vector<std::string> cache_report;

  backend::BufferTable<CUdeviceptr> buffers;

  // Launch scratch, grown once to the largest parameter list and reused.
  std::vector<uint64_t> words;
  std::vector<void*> params;

  Kernel& marshal(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const Arg> args);
  static std::string describe(const Kernel& k, std::array<uint32_t, 3> grid, uint32_t dynamic_smem);

  /// A launch graph: its kernel nodes in order (a chain) and their kernels.
  struct Graph {
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<CUgraphNode> nodes;
    std::vector<int> kernels;
  };
  std::vector<Graph> graphs;  // by id; exec == nullptr: free
  CUDA_KERNEL_NODE_PARAMS node_params(const LaunchDesc& l);
  Graph& graph(int id);
  void release(Graph& g);

  /// Makes the primary context current on this thread. Cached per thread; the cache is
  /// dropped whenever any CudaBackend is created or destroyed (a released primary context
  /// can come back with the same handle while no longer current).
  static inline std::atomic<uint64_t> epoch{0};
  void bind() {
    thread_local CUcontext current = nullptr;
    thread_local uint64_t current_epoch = 0;
    const uint64_t now = epoch.load(std::memory_order_relaxed);
    if (current != ctx || current_epoch != now) {
      d->check(d->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
      current = ctx;
      current_epoch = now;
    }
  }

  /// The device address of `bytes` bytes at `offset` of `b`, or Error naming `what`.
  CUdeviceptr range(Buffer b, size_t offset, size_t bytes, const char* what) {
    return buffers.range(b, offset, bytes, "cuda", what).handle + offset;
  }

  /// Releases everything (also after a constructor that threw half-way).
  ~Impl() {
    if (!ctx) return;
    try {
      bind();
    } catch (const Error&) {
      return;
    }
    if (stream) d->cuStreamSynchronize(stream);
    for (Graph& g : graphs) release(g);
    for (const auto& slot : buffers.slots())
      if (slot.bytes) d->cuMemFree(slot.handle);
    unload();
    if (stream) d->cuStreamDestroy(stream);
    d->cuDevicePrimaryCtxRelease(device);
    epoch.fetch_add(1);
  }

  static void load_all(Impl& s, const package::Manifest& m, const std::string& package_dir);

  void unload() {
    if (!graphs.empty()) {  // their nodes name the modules' functions
      if (stream) d->cuStreamSynchronize(stream);
      for (Graph& g : graphs) release(g);
      graphs.clear();
    }
    for (CUmodule m : modules) d->cuModuleUnload(m);
    modules.clear();
    kernels.clear();
    words.clear();
    params.clear();
    by_entry.clear();
    cache_report.clear();
  }

  /// JIT-compiles `ptx` for the current device; the error log goes into the Error.
  std::string jit(const std::string& ptx, const std::string& path) {
    std::vector<char> info_log(1 << 14, '\0'), error_log(1 << 14, '\0');
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                           CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
    void* vals[] = {info_log.data(), reinterpret_cast<void*>(uintptr_t(info_log.size())), error_log.data(),
                    reinterpret_cast<void*>(uintptr_t(error_log.size())), reinterpret_cast<void*>(uintptr_t(0))};
    CUlinkState state = nullptr;
    d->check(d->cuLinkCreate(5, opts, vals, &state), "cuLinkCreate");
    auto jit_fail = [&](CUresult r, const char* call) {
      std::string log(error_log.data());
      d->cuLinkDestroy(state);
      throw Error("cuda: " + std::string(call) + "(" + path + ") for " + info.arch + ": " + d->describe(r) +
                  (log.empty() ? std::string() : "\nJIT error log:\n" + log));
    };
    CUresult r = d->cuLinkAddData(state, CU_JIT_INPUT_PTX, const_cast<char*>(ptx.c_str()), ptx.size() + 1, path.c_str(), 0,
                                  nullptr, nullptr);
    if (r != CUDA_SUCCESS) jit_fail(r, "cuLinkAddData");
    void* cubin = nullptr;
    size_t cubin_bytes = 0;
    r = d->cuLinkComplete(state, &cubin, &cubin_bytes);
    if (r != CUDA_SUCCESS) jit_fail(r, "cuLinkComplete");
    std::string out(static_cast<const char*>(cubin), cubin_bytes);  // owned by the link state
    d->cuLinkDestroy(state);
    return out;
  }

  /// The module for PTX file `file`: from the cubin cache, else JIT (and cached).
  CUmodule load_module(const std::string& package_dir, const std::string& file) {
    const std::string path = package_dir + "/" + file;
    const std::string ptx = backend::read_kernel_file(package_dir, file);
    if (std::string why = ptx_arch_mismatch(ptx, info.arch); !why.empty()) throw Error("cuda: kernel file " + path + " " + why);
    const uint64_t ptx_hash = fnv1a(ptx.data(), ptx.size());
    const std::string module = module_name(file);
    const std::string tail = info.arch + "." + std::to_string(driver_version) + ".cubin";
    char hash_hex[17];
    std::snprintf(hash_hex, sizeof hash_hex, "%016llx", static_cast<unsigned long long>(ptx_hash));
    std::vector<fs::path> candidates = {fs::path(package_dir) / ".cache" / (module + "." + tail)};
    if (fs::path user = user_cache_dir(); !user.empty()) candidates.push_back(user / (module + "." + hash_hex + "." + tail));

    CUmodule mod = nullptr;
    std::string cubin;
    for (const fs::path& c : candidates) {
      if (!read_cache(c, ptx_hash, cubin)) continue;
      if (d->cuModuleLoadData(&mod, cubin.data()) == CUDA_SUCCESS) {
        cache_report.push_back(c.string() + " (hit)");
        return mod;
      }
      mod = nullptr;  // a cubin the driver rejects: JIT again and overwrite it
    }
    cubin = jit(ptx, path);
    std::string why;
    for (const fs::path& c : candidates) {
      std::string e = write_cache(c, ptx_hash, cubin);
      if (e.empty()) {
        why.clear();
        cache_report.push_back(c.string() + " (written)");
        break;
      }
      why += (why.empty() ? "" : "; ") + e;
    }
    if (!why.empty()) cache_report.push_back(path + " (not cached: " + why + ")");
    d->check(d->cuModuleLoadData(&mod, cubin.data()), ("cuModuleLoadData(" + path + ")").c_str());
    return mod;
  }
};

CudaBackend::CudaBackend(const std::string& select, const std::string& library) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.d = Driver::load(library);
  const Driver& d = *s.d;
  CUresult r = d.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    d.fail(r, "cuInit: " + library + " is the CUDA toolkit's stub, not a driver (no NVIDIA driver installed)");
  if (r == CUDA_ERROR_NO_DEVICE) d.fail(r, "cuInit: the NVIDIA driver is loaded but sees no GPU");
  d.check(r, "cuInit");
  int count = 0;
  d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  int ordinal = 0;
  if (!select.empty()) {
    char* end = nullptr;
    long v = std::strtol(select.c_str(), &end, 10);
    if (*end != '\0' || v < 0) throw Error("cuda: device selector '" + select + "' is not a device ordinal (0, 1, ...)");
    ordinal = int(v);
  }
  if (count == 0) throw Error("cuda: no CUDA device found (the driver is loaded but cuDeviceGetCount is 0)");
  if (ordinal >= count)
    throw Error("cuda: no device " + std::to_string(ordinal) + " (" + std::to_string(count) + " device" +
                (count == 1 ? "" : "s") + ": ordinals 0.." + std::to_string(count - 1) + ")");
  d.check(d.cuDeviceGet(&s.device, ordinal), "cuDeviceGet");
  char name[256] = {0};
  d.check(d.cuDeviceGetName(name, sizeof name - 1, s.device), "cuDeviceGetName");
  auto attr = [&](CUdevice_attribute a, const char* what) {
    int v = 0;
    d.check(d.cuDeviceGetAttribute(&v, a, s.device), what);
    return v;
  };
  s.major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  s.minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  s.max_grid[0] = uint32_t(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "cuDeviceGetAttribute(MAX_GRID_DIM_X)"));
  s.max_grid[1] = uint32_t(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "cuDeviceGetAttribute(MAX_GRID_DIM_Y)"));
  s.max_grid[2] = uint32_t(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "cuDeviceGetAttribute(MAX_GRID_DIM_Z)"));
  s.smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                      "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)");
  d.check(d.cuDriverGetVersion(&s.driver_version), "cuDriverGetVersion");
  d.check(d.cuDevicePrimaryCtxRetain(&s.ctx, s.device), "cuDevicePrimaryCtxRetain");
  Impl::epoch.fetch_add(1);
  s.bind();
  d.check(d.cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  size_t total = 0, free_bytes = 0;
  d.check(d.cuDeviceTotalMem(&total, s.device), "cuDeviceTotalMem");
  d.check(d.cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  s.info.backend = "cuda";
  s.info.name = name;
  s.info.arch = "sm_" + std::to_string(s.major) + std::to_string(s.minor);
  s.info.total_bytes = total;
  s.info.free_bytes = free_bytes;
}

CudaBackend::~CudaBackend() = default;

const backend::DeviceInfo& CudaBackend::info() const { return impl_->info; }

const std::vector<std::string>& CudaBackend::cache_report() const { return impl_->cache_report; }

void CudaBackend::load_kernels(const package::Manifest& m, const std::string& package_dir) {
  Impl& s = *impl_;
  s.bind();
  if (std::string why = arch_mismatch(m.target, s.major, s.minor, s.info.name); !why.empty()) throw Error("cuda: " + why);
  s.unload();
  try {
    Impl::load_all(s, m, package_dir);
  } catch (...) {
    s.unload();  // nothing half-loaded stays launchable
    throw;
  }
}

void CudaBackend::Impl::load_all(Impl& s, const package::Manifest& m, const std::string& package_dir) {
  std::vector<backend::KernelRecord> recs;
  for (const package::Kernel& k : m.kernels) recs.push_back(backend::parse_kernel(k, "mlir-memref-expanded"));
  std::map<std::string, CUmodule> by_file;  // each file read and loaded once
  for (backend::KernelRecord& rec : recs) {
    auto it = by_file.find(rec.file);
    if (it == by_file.end()) {
      CUmodule mod = s.load_module(package_dir, rec.file);
      s.modules.push_back(mod);
      it = by_file.emplace(rec.file, mod).first;
    }
    Impl::Kernel k;
    CUresult r = s.d->cuModuleGetFunction(&k.fn, it->second, rec.function.c_str());
    if (r != CUDA_SUCCESS)
      s.d->fail(r, "cuModuleGetFunction: " + rec.file + " has no function " + rec.function + " (kernel " + rec.entry + ")");
    int max_threads = 0, dyn = 0;
    s.d->check(s.d->cuFuncGetAttribute(&k.static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k.fn), "cuFuncGetAttribute");
    s.d->check(s.d->cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.fn), "cuFuncGetAttribute");
    s.d->check(s.d->cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.fn), "cuFuncGetAttribute");
    k.dynamic_limit = uint32_t(dyn);
    const uint64_t threads = uint64_t(rec.block[0]) * rec.block[1] * rec.block[2];
    if (threads > uint64_t(max_threads))
      throw Error("cuda: kernel " + rec.entry + ": block " + std::to_string(rec.block[0]) + "x" + std::to_string(rec.block[1]) +
                  "x" + std::to_string(rec.block[2]) + " exceeds the function's " + std::to_string(max_threads) +
                  " threads per block on " + s.info.name);
    for (const backend::ArgSpec& a : rec.args) k.param_words += a.kind == Arg::Memref ? 3 + 2 * size_t(a.rank) : 1;
    k.rec = std::move(rec);
    s.by_entry[k.rec.entry] = int(s.kernels.size());
    s.kernels.push_back(std::move(k));
  }
  size_t most = 0;
  for (const Impl::Kernel& k : s.kernels) most = std::max(most, k.param_words);
  s.words.assign(most, 0);
  s.params.assign(most, nullptr);
}

int CudaBackend::kernel_index(const std::string& entry) const {
  auto it = impl_->by_entry.find(entry);
  if (it == impl_->by_entry.end()) throw Error("cuda: kernel " + entry + " is not loaded (load_kernels() of its package first)");
  return it->second;
}

Buffer CudaBackend::alloc(size_t bytes, const std::string& what) {
  Impl& s = *impl_;
  s.bind();
  if (bytes == 0) throw Error("cuda: alloc of 0 bytes for " + what);
  CUdeviceptr p = 0;
  CUresult r = s.d->cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free_bytes = 0, total = 0;
    s.d->cuMemGetInfo(&free_bytes, &total);
    throw backend::OutOfMemory("cuda: out of device memory allocating " + backend::human_bytes(bytes) + " for " + what + ": " +
                               backend::human_bytes(free_bytes) + " free of " + backend::human_bytes(total) + " on " + s.info.name);
  }
  if (r != CUDA_SUCCESS) s.d->fail(r, "cuMemAlloc(" + std::to_string(bytes) + " bytes for " + what + ")");
  return s.buffers.add(p, bytes);
}

void CudaBackend::free(Buffer b) {
  Impl& s = *impl_;
  if (!b) return;
  s.bind();
  auto& slot = s.buffers.range(b, 0, 0, "cuda", "free");
  s.d->check(s.d->cuStreamSynchronize(s.stream), "cuStreamSynchronize (before cuMemFree)");
  s.d->check(s.d->cuMemFree(slot.handle), "cuMemFree");
  s.buffers.release(slot);
}

void CudaBackend::upload(Buffer dst, size_t offset, const void* src, size_t bytes) {
  Impl& s = *impl_;
  s.bind();
  CUdeviceptr p = s.range(dst, offset, bytes, "upload");
  if (bytes == 0) return;
  // Pageable source: the driver stages it before returning, so `src` may be reused.
  s.d->check(s.d->cuMemcpyHtoDAsync(p, src, bytes, s.stream), "cuMemcpyHtoDAsync");
}

void CudaBackend::download(void* dst, Buffer src, size_t offset, size_t bytes) {
  Impl& s = *impl_;
  s.bind();
  CUdeviceptr p = s.range(src, offset, bytes, "download");
  if (bytes) s.d->check(s.d->cuMemcpyDtoHAsync(dst, p, bytes, s.stream), "cuMemcpyDtoHAsync");
  CUresult r = s.d->cuStreamSynchronize(s.stream);
  if (r != CUDA_SUCCESS)
    s.d->fail(r, "download: cuStreamSynchronize (an earlier launch may have failed; CUDA_LAUNCH_BLOCKING=1 finds which)");
}

void CudaBackend::copy(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) {
  Impl& s = *impl_;
  s.bind();
  CUdeviceptr d = s.range(dst, dst_offset, bytes, "copy (destination)");
  CUdeviceptr from = s.range(src, src_offset, bytes, "copy (source)");
  if (dst.id == src.id && d < from + bytes && from < d + bytes) throw Error("cuda: copy: overlapping ranges");
  if (bytes) s.d->check(s.d->cuMemcpyDtoDAsync(d, from, bytes, s.stream), "cuMemcpyDtoDAsync");
}

void CudaBackend::fill32(Buffer dst, size_t offset, size_t bytes, uint32_t pattern) {
  Impl& s = *impl_;
  s.bind();
  if (offset % 4 || bytes % 4)
    throw Error("cuda: fill32: offset " + std::to_string(offset) + " and size " + std::to_string(bytes) +
                " must be multiples of 4");
  CUdeviceptr p = s.range(dst, offset, bytes, "fill32");
  if (bytes) s.d->check(s.d->cuMemsetD32Async(p, pattern, bytes / 4, s.stream), "cuMemsetD32Async");
}

// Checks a launch and writes its parameter block into s.words / s.params (MLIR's expanded
// memref ABI, one 8-byte word per parameter; i32 / f32 in the low 4 bytes). Returns the
// kernel.
CudaBackend::Impl::Kernel& CudaBackend::Impl::marshal(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem,
                                                      std::span<const Arg> args) {
  Impl& s = *this;
  if (kernel < 0 || size_t(kernel) >= s.kernels.size())
    throw Error("cuda: launch: kernel index " + std::to_string(kernel) + " outside 0.." + std::to_string(s.kernels.size()));
  Impl::Kernel& k = s.kernels[size_t(kernel)];
  s.bind();
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || grid[i] > s.max_grid[i])
      throw Error("cuda: launch " + k.rec.entry + ": grid[" + std::to_string(i) + "] = " + std::to_string(grid[i]) +
                  " outside 1.." + std::to_string(s.max_grid[i]) + " (the device's grid limit)");
  backend::check_args(k.rec, args, [&](const Arg& a) -> size_t {
    const auto* slot = s.buffers.find(a.buffer);
    return slot ? slot->bytes : 0;
  });
  if (dynamic_smem > k.dynamic_limit) {
    if (uint64_t(dynamic_smem) + uint64_t(k.static_smem) > uint64_t(s.smem_optin))
      throw Error("cuda: launch " + k.rec.entry + ": " + std::to_string(dynamic_smem) + " bytes of dynamic shared memory + " +
                  std::to_string(k.static_smem) + " static exceed the device's " + std::to_string(s.smem_optin) +
                  " per block");
    s.d->check(s.d->cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(dynamic_smem)),
               "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    k.dynamic_limit = dynamic_smem;
  }
  uint64_t* w = s.words.data();
  void** p = s.params.data();
  size_t n = 0;
  auto push = [&](uint64_t v) {
    w[n] = v;
    p[n] = &w[n];
    ++n;
  };
  for (const Arg& a : args) {
    if (a.kind == Arg::I32) {
      uint64_t v = 0;
      std::memcpy(&v, &a.i32, 4);
      push(v);
    } else if (a.kind == Arg::F32) {
      uint64_t v = 0;
      std::memcpy(&v, &a.f32, 4);
      push(v);
    } else {
      const uint64_t ptr = s.buffers.find(a.buffer)->handle + a.offset;
      push(ptr);  // allocated
      push(ptr);  // aligned
      push(0);    // offset
      for (int d = 0; d < a.rank; ++d) push(uint64_t(a.sizes[size_t(d)]));
      int64_t stride = 1;
      const size_t strides_at = n;
      for (int d = 0; d < a.rank; ++d) push(0);
      for (int d = a.rank - 1; d >= 0; --d) {
        w[strides_at + size_t(d)] = uint64_t(stride);
        stride *= a.sizes[size_t(d)];
      }
    }
  }
  return k;
}

std::string CudaBackend::Impl::describe(const Kernel& k, std::array<uint32_t, 3> grid, uint32_t dynamic_smem) {
  return k.rec.entry + ", grid " + std::to_string(grid[0]) + "x" + std::to_string(grid[1]) + "x" + std::to_string(grid[2]) +
         ", block " + std::to_string(k.rec.block[0]) + "x" + std::to_string(k.rec.block[1]) + "x" +
         std::to_string(k.rec.block[2]) + ", dynamic smem " + std::to_string(dynamic_smem);
}

void CudaBackend::launch(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const Arg> args) {
  Impl& s = *impl_;
  Impl::Kernel& k = s.marshal(kernel, grid, dynamic_smem, args);
  CUresult r = s.d->cuLaunchKernel(k.fn, grid[0], grid[1], grid[2], k.rec.block[0], k.rec.block[1], k.rec.block[2],
                                   dynamic_smem, s.stream, s.params.data(), nullptr);
  if (r != CUDA_SUCCESS) s.d->fail(r, "cuLaunchKernel(" + Impl::describe(k, grid, dynamic_smem) + ")");
}

// Launch graphs: one CUDA graph per id, its kernel nodes ordered as LaunchDesc::branch
// says (a chain, where every launch is branch 0, as on the stream), instantiated once; update_graph() changes one node of the
// executable graph in place (cuGraphExecKernelNodeSetParams copies the parameters, as
// cuLaunchKernel does, and leaves launches already enqueued unchanged).

CUDA_KERNEL_NODE_PARAMS CudaBackend::Impl::node_params(const LaunchDesc& l) {
  Kernel& k = marshal(l.kernel, l.grid, l.dynamic_smem, l.args);
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = k.fn;
  p.gridDimX = l.grid[0], p.gridDimY = l.grid[1], p.gridDimZ = l.grid[2];
  p.blockDimX = k.rec.block[0], p.blockDimY = k.rec.block[1], p.blockDimZ = k.rec.block[2];
  p.sharedMemBytes = l.dynamic_smem;
  p.kernelParams = params.data();
  return p;
}

CudaBackend::Impl::Graph& CudaBackend::Impl::graph(int id) {
  if (id < 0 || size_t(id) >= graphs.size() || !graphs[size_t(id)].exec)
    throw Error("cuda: launch graph " + std::to_string(id) + " does not exist");
  return graphs[size_t(id)];
}

void CudaBackend::Impl::release(Graph& g) {
  if (g.exec) d->cuGraphExecDestroy(g.exec);
  if (g.graph) d->cuGraphDestroy(g.graph);
  g = Graph{};
}

int CudaBackend::create_graph(std::span<const LaunchDesc> launches) {
  Impl& s = *impl_;
  if (!s.d->has_graphs()) return Backend::create_graph(launches);  // a pre-12.0 driver: replay
  s.bind();
  Impl::Graph g;
  try {
    s.d->check(s.d->cuGraphCreate(&g.graph, 0), "cuGraphCreate");
    const std::vector<std::vector<int>> order = backend::graph_dependencies(launches);
    std::vector<CUgraphNode> deps;
    for (size_t i = 0; i < launches.size(); ++i) {
      const LaunchDesc& l = launches[i];
      const CUDA_KERNEL_NODE_PARAMS p = s.node_params(l);
      CUgraphNode node = nullptr;
      deps.clear();
      for (int d : order[i]) deps.push_back(g.nodes[size_t(d)]);
      CUresult r = s.d->cuGraphAddKernelNode(&node, g.graph, deps.data(), deps.size(), &p);
      if (r != CUDA_SUCCESS)
        s.d->fail(r, "cuGraphAddKernelNode(" + Impl::describe(s.kernels[size_t(l.kernel)], l.grid, l.dynamic_smem) + ")");
      g.nodes.push_back(node);
      g.kernels.push_back(l.kernel);
    }
    s.d->check(s.d->cuGraphInstantiate(&g.exec, g.graph, 0), "cuGraphInstantiate");
  } catch (...) {
    s.release(g);
    throw;
  }
  size_t id = 0;
  while (id < s.graphs.size() && s.graphs[id].exec) ++id;
  if (id == s.graphs.size()) s.graphs.emplace_back();
  s.graphs[id] = std::move(g);
  return int(id);
}

void CudaBackend::update_graph(int graph, size_t index, const LaunchDesc& launch) {
  Impl& s = *impl_;
  if (!s.d->has_graphs()) return Backend::update_graph(graph, index, launch);
  Impl::Graph& g = s.graph(graph);
  if (index >= g.nodes.size())
    throw Error("cuda: launch graph " + std::to_string(graph) + " has no launch " + std::to_string(index));
  if (g.kernels[index] != launch.kernel)
    throw Error("cuda: launch graph " + std::to_string(graph) + ": launch " + std::to_string(index) + " runs kernel " +
                std::to_string(g.kernels[index]) + ", not " + std::to_string(launch.kernel));
  const CUDA_KERNEL_NODE_PARAMS p = s.node_params(launch);
  CUresult r = s.d->cuGraphExecKernelNodeSetParams(g.exec, g.nodes[index], &p);
  if (r != CUDA_SUCCESS)
    s.d->fail(r, "cuGraphExecKernelNodeSetParams(" +
                     Impl::describe(s.kernels[size_t(launch.kernel)], launch.grid, launch.dynamic_smem) + ")");
}

void CudaBackend::launch_graph(int graph) {
  Impl& s = *impl_;
  if (!s.d->has_graphs()) return Backend::launch_graph(graph);
  Impl::Graph& g = s.graph(graph);
  s.bind();
  s.d->check(s.d->cuGraphLaunch(g.exec, s.stream), "cuGraphLaunch");
}

void CudaBackend::destroy_graph(int graph) {
  Impl& s = *impl_;
  if (!s.d->has_graphs()) return Backend::destroy_graph(graph);
  Impl::Graph& g = s.graph(graph);
  s.bind();
  s.d->check(s.d->cuStreamSynchronize(s.stream), "cuStreamSynchronize (before cuGraphExecDestroy)");
  s.release(g);
}

void CudaBackend::synchronize() {
  Impl& s = *impl_;
  s.bind();
  CUresult r = s.d->cuStreamSynchronize(s.stream);
  if (r != CUDA_SUCCESS)
    s.d->fail(r, "cuStreamSynchronize (a launch failed asynchronously; CUDA_LAUNCH_BLOCKING=1 finds which)");
}

}  // namespace swz::cuda

namespace swz::cuda {

// The CUDA backend's registration (cmake/SwzBackends.cmake): sm_* packages.
extern const backend::BackendEntry kBackendEntry;
const backend::BackendEntry kBackendEntry = {
    "cuda",
    [](const std::string& target) { return target.rfind("sm_", 0) == 0; },
    [](const std::string& select, int) -> std::unique_ptr<backend::Backend> { return std::make_unique<CudaBackend>(select); },
    [](const std::string& target) { return target + " f16 page64 per-layer-tiles"; },
    "sm_80, sm_86, sm_89, sm_90",
};

}  // namespace swz::cuda
