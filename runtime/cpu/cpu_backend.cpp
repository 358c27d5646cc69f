#include "cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "backend/buffer_table.h"
#include "backend/kernel_record.h"
#include "cpu/kernels.h"
#include "cpu/signatures.h"
#include "ggml/thread_pool.h"
#include "package/package.h"

namespace swz::cpu {
namespace {

constexpr size_t kHuge = size_t{2} << 20;
constexpr size_t kMapAbove = size_t{1} << 20;

/// One host allocation: `data` (64-byte aligned); `mapped` bytes of an anonymous mapping
/// when it is one (else from aligned_alloc).
struct HostMemory {
  uint8_t* data = nullptr;
  size_t mapped = 0;
};

uint64_t physical_bytes(int name) {
  const long pages = sysconf(name), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

struct CpuBackend::Impl {
  backend::DeviceInfo info;
  std::unique_ptr<ggml::ThreadPool> pool;
  backend::BufferTable<HostMemory> buffers;
  struct Kernel {
    backend::KernelRecord rec;
    KernelImpl impl;
    double seconds = 0;
    uint64_t launches = 0;
  };
  std::vector<Kernel> kernels;
  std::unordered_map<std::string, int> by_entry;
  std::vector<KernelCall::Arg> call_args;  // per launch (reused)
  std::vector<uint8_t> scratch;
  bool profile = std::getenv("SWZ_PROFILE") != nullptr;

  HostMemory& range(backend::Buffer b, size_t offset, size_t bytes, const char* what) {
    return buffers.range(b, offset, bytes, "cpu", what).handle;
  }
  void release(HostMemory& m, size_t bytes) {
    if (m.mapped) munmap(m.data, m.mapped);
    else std::free(m.data);
    (void)bytes;
  }
};

CpuBackend::CpuBackend(int n_threads) : impl_(std::make_unique<Impl>()) {
  if (n_threads < 0) throw std::invalid_argument("cpu backend: negative thread count " + std::to_string(n_threads));
  const int n = n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  impl_->pool = std::make_unique<ggml::ThreadPool>(n);
  backend::DeviceInfo& d = impl_->info;
  d.backend = "cpu";
  d.name = std::to_string(n) + " threads";
  d.arch = "x86-64 avx2";
  d.total_bytes = physical_bytes(_SC_PHYS_PAGES);
  d.free_bytes = physical_bytes(_SC_AVPHYS_PAGES);
}

CpuBackend::~CpuBackend() {
  Impl& s = *impl_;
  if (s.profile)
    for (const Impl::Kernel& k : s.kernels)
      if (k.launches)
        std::fprintf(stderr, "swz-profile %-22s %10.3f ms %8llu launches\n", k.rec.entry.c_str(), k.seconds * 1e3,
                     static_cast<unsigned long long>(k.launches));
  for (auto& slot : s.buffers.slots())
    if (slot.bytes) s.release(slot.handle, slot.bytes);
}

const backend::DeviceInfo& CpuBackend::info() const { return impl_->info; }
int CpuBackend::n_threads() const { return impl_->pool->size(); }

void CpuBackend::load_kernels(const package::Manifest& m, const std::string& package_dir) {
  (void)package_dir;  // cpu kernels are built in: no files
  Impl& s = *impl_;
  if (m.target != "cpu")
    throw backend::Error("cpu: package target " + m.target + " is not cpu (compile with swizzlec compile --target cpu)");
  s.kernels.clear();
  s.by_entry.clear();
  for (const package::Kernel& k : m.kernels) {
    Impl::Kernel kernel;
    try {
      kernel.impl = find_kernel(k.entry);
    } catch (const std::invalid_argument& e) {
      throw backend::Error(std::string("cpu: ") + e.what());
    }
    kernel.rec.entry = k.entry;
    kernel.rec.function = k.entry;
    const std::vector<ArgSpec> want = kernel_signature(kernel.impl.op);
    if (!k.signature.is_array() || k.signature.size() != want.size())
      throw backend::Error("cpu: kernel " + k.entry + " has " + std::to_string(k.signature.is_array() ? k.signature.size() : 0) +
                           " arguments in the package, this cpu backend's has " + std::to_string(want.size()) +
                           " (recompile the package with this swizzlec)");
    for (size_t a = 0; a < want.size(); ++a) {
      const std::string dtype = k.signature[a].value("dtype", "");
      if (dtype != want[a].dtype)
        throw backend::Error("cpu: kernel " + k.entry + " argument " + std::to_string(a) + " (" + std::string(want[a].name) +
                             ") is " + dtype + " in the package, " + std::string(want[a].dtype) +
                             " in this cpu backend (recompile the package with this swizzlec)");
      kernel.rec.args.push_back(backend::parse_arg_type(dtype));
      kernel.rec.memrefs += kernel.rec.args.back().kind == backend::Arg::Memref;
    }
    s.by_entry[k.entry] = static_cast<int>(s.kernels.size());
    s.kernels.push_back(std::move(kernel));
  }
}

int CpuBackend::kernel_index(const std::string& entry) const {
  auto it = impl_->by_entry.find(entry);
  if (it == impl_->by_entry.end()) throw backend::Error("cpu: kernel " + entry + " is not loaded (load_kernels() of its package first)");
  return it->second;
}

backend::Buffer CpuBackend::alloc(size_t bytes, const std::string& what) {
  Impl& s = *impl_;
  if (bytes == 0) throw backend::Error("cpu: alloc of 0 bytes for " + what);
  HostMemory m;
  if (bytes >= kMapAbove) {
    // Over-map by 2 MiB, keep the 2 MiB-aligned part, so every whole huge page of it can
    // be backed by one (transparent huge pages).
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t len = (bytes + page - 1) / page * page;
    void* p = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      auto* base = static_cast<uint8_t*>(p);
      auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHuge - 1) & ~(kHuge - 1));
      if (aligned > base) munmap(base, static_cast<size_t>(aligned - base));
      const size_t tail = static_cast<size_t>(base + len + kHuge - (aligned + len));
      if (tail) munmap(aligned + len, tail);
      madvise(aligned, len, MADV_HUGEPAGE);
      m.data = aligned;
      m.mapped = len;
    }
  } else {
    m.data = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  }
  if (!m.data)
    throw backend::OutOfMemory("cpu: out of memory allocating " + backend::human_bytes(bytes) + " for " + what + ": " +
                               backend::human_bytes(physical_bytes(_SC_AVPHYS_PAGES)) + " free of " +
                               backend::human_bytes(s.info.total_bytes));
  return s.buffers.add(m, bytes);
}

void CpuBackend::free(backend::Buffer b) {
  Impl& s = *impl_;
  if (!b) return;
  auto& slot = s.buffers.range(b, 0, 0, "cpu", "free");
  s.release(slot.handle, slot.bytes);
  s.buffers.release(slot);
}

void CpuBackend::upload(backend::Buffer dst, size_t offset, const void* src, size_t bytes) {
  std::memcpy(impl_->range(dst, offset, bytes, "upload").data + offset, src, bytes);
}

void CpuBackend::download(void* dst, backend::Buffer src, size_t offset, size_t bytes) {
  std::memcpy(dst, impl_->range(src, offset, bytes, "download").data + offset, bytes);
}

void CpuBackend::copy(backend::Buffer dst, size_t dst_offset, backend::Buffer src, size_t src_offset, size_t bytes) {
  uint8_t* d = impl_->range(dst, dst_offset, bytes, "copy").data + dst_offset;
  const uint8_t* sp = impl_->range(src, src_offset, bytes, "copy").data + src_offset;
  std::memmove(d, sp, bytes);
}

void CpuBackend::fill32(backend::Buffer dst, size_t offset, size_t bytes, uint32_t pattern) {
  if (offset % 4 || bytes % 4) throw backend::Error("cpu: fill32 offset and size must be multiples of 4");
  uint8_t* d = impl_->range(dst, offset, bytes, "fill32").data + offset;
  for (size_t i = 0; i < bytes; i += 4) std::memcpy(d + i, &pattern, 4);
}

void CpuBackend::launch(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const backend::Arg> args) {
  (void)grid, (void)dynamic_smem;  // the kernels split their work over the pool
  Impl& s = *impl_;
  if (kernel < 0 || static_cast<size_t>(kernel) >= s.kernels.size())
    throw backend::Error("cpu: launch of kernel index " + std::to_string(kernel) + ", " + std::to_string(s.kernels.size()) +
                         " loaded");
  Impl::Kernel& k = s.kernels[kernel];
  backend::check_args(k.rec, args, [&](const backend::Arg& a) -> size_t {
    auto* slot = s.buffers.find(a.buffer);
    return slot ? slot->bytes : 0;
  });
  s.call_args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const backend::Arg& a = args[i];
    KernelCall::Arg& c = s.call_args[i];
    c = KernelCall::Arg{};
    if (a.kind == backend::Arg::Memref) {
      c.data = s.buffers.find(a.buffer)->handle.data + a.offset;
      c.bytes = a.bytes;
    } else if (a.kind == backend::Arg::I32) {
      c.i32 = a.i32;
    } else {
      c.f32 = a.f32;
    }
  }
  KernelCall call{s.call_args, k.impl.type, &k.rec.entry, s.pool.get(), &s.scratch};
  const auto t0 = s.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    k.impl.fn(call);
  } catch (const backend::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw backend::Error(std::string("cpu: ") + e.what());
  }
  if (s.profile) {
    k.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++k.launches;
  }
}

}  // namespace swz::cpu

namespace swz::cpu {

// The cpu backend's registration (cmake/SwzBackends.cmake).
extern const backend::BackendEntry kBackendEntry;
const backend::BackendEntry kBackendEntry = {
    "cpu",
    [](const std::string& target) { return target == "cpu"; },
    [](const std::string&, int n_threads) -> std::unique_ptr<backend::Backend> { return std::make_unique<CpuBackend>(n_threads); },
    [](const std::string&) -> std::string { return "cpu f16 page64 per-layer-tiles k-rows v-transposed"; },
    "cpu",
};

}  // namespace swz::cpu
