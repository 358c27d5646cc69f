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
constexpr size_t kChunk = size_t{64} << 20;  // arena chunk; larger allocations get their own mapping

/// One host allocation: `data` (64-byte aligned) inside arena chunk `chunk`.
struct HostMemory {
  uint8_t* data = nullptr;
  int chunk = -1;
};

/// An anonymous mapping aligned to 2 MiB and advised MADV_HUGEPAGE (pages are committed
/// when first touched). Allocations are carved from it in order; it is unmapped when its
/// last one is freed.
struct Chunk {
  uint8_t* base = nullptr;
  size_t size = 0, used = 0;
  int live = 0;
};

/// Maps `bytes` (a multiple of 2 MiB) at a 2 MiB boundary: over-maps by 2 MiB and unmaps
/// the slack, so every huge page of it can be backed by one. nullptr when out of memory.
uint8_t* map_huge(size_t bytes) {
  void* p = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* base = static_cast<uint8_t*>(p);
  auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHuge - 1) & ~(kHuge - 1));
  if (aligned > base) munmap(base, static_cast<size_t>(aligned - base));
  const size_t tail = static_cast<size_t>(base + bytes + kHuge - (aligned + bytes));
  if (tail) munmap(aligned + bytes, tail);
  madvise(aligned, bytes, MADV_HUGEPAGE);
  return aligned;
}

uint64_t physical_bytes(int name) {
  const long pages = sysconf(name), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

struct CpuBackend::Impl {
  backend::DeviceInfo info;
  std::unique_ptr<ggml::ThreadPool> pool;
  backend::BufferTable<HostMemory> buffers;
  std::vector<Chunk> chunks;  // the arena (a freed chunk keeps its slot, base nullptr)
  int current = -1;           // the chunk small allocations are carved from
  struct Kernel {
    backend::KernelRecord rec;
    KernelImpl impl;
    bool matmul = false;  // cpu.matmul.*: deferred to join its neighbours (pending)
    double seconds = 0;
    uint64_t launches = 0;
  };
  std::vector<Kernel> kernels;
  std::unordered_map<std::string, int> by_entry;
  std::vector<KernelCall::Arg> call_args;  // per launch (reused)
  std::vector<uint8_t> scratch;
  bool profile = std::getenv("SWZ_PROFILE") != nullptr;
  // Matmul launches of one input (Q/K/V, gate/up) waiting to run in one parallel region:
  // they run when a launch of another input or kind comes, or at any other call.
  MatmulLaunch pending[kMaxMatmulGroup];
  int pending_kernel[kMaxMatmulGroup] = {};
  size_t n_pending = 0;

  /// Runs the pending matmuls (bit-identical to running them one by one, in order).
  void flush() {
    if (n_pending == 0) return;
    const size_t n = n_pending;
    n_pending = 0;
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    try {
      run_matmuls(pending, n, *pool, scratch);
    } catch (const std::exception& e) {
      throw backend::Error(std::string("cpu: ") + kernels[pending_kernel[0]].rec.entry + ": " + e.what());
    }
    if (profile) {
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
      for (size_t i = 0; i < n; ++i) kernels[pending_kernel[i]].seconds += dt;
    }
  }
  /// Whether `m` may join the pending matmuls: the same input rows, and it neither writes
  /// their input nor an output of theirs.
  bool joins(const MatmulLaunch& m) const {
    if (n_pending == 0 || n_pending == kMaxMatmulGroup) return n_pending == 0;
    if (m.x != pending[0].x || m.T != pending[0].T || m.K != pending[0].K) return false;
    for (size_t i = 0; i < n_pending; ++i)
      if (m.job.y == pending[i].job.y) return false;
    return true;
  }

  HostMemory& range(backend::Buffer b, size_t offset, size_t bytes, const char* what) {
    return buffers.range(b, offset, bytes, "cpu", what).handle;
  }
  void release(HostMemory& m) {
    Chunk& c = chunks.at(m.chunk);
    if (--c.live == 0) {
      munmap(c.base, c.size);
      c = Chunk{};
      if (current == m.chunk) current = -1;
    }
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
  for (Chunk& c : s.chunks)
    if (c.base) munmap(c.base, c.size);
}

const backend::DeviceInfo& CpuBackend::info() const { return impl_->info; }
void CpuBackend::synchronize() { impl_->flush(); }

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
    kernel.matmul = kernel.impl.op == "matmul";
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

// Allocations are carved, 64-byte aligned, from 64 MiB arena chunks on huge pages (one of
// their own when larger), so the many small weight tensors of a model (SmolLM2's are
// 70-550 KB each) share huge pages: a decode step streams every weight once, and on 4 KiB
// pages it would miss the TLB on nearly every page.
backend::Buffer CpuBackend::alloc(size_t bytes, const std::string& what) {
  Impl& s = *impl_;
  if (bytes == 0) throw backend::Error("cpu: alloc of 0 bytes for " + what);
  const size_t need = (bytes + 63) / 64 * 64;
  const bool own = need > kChunk / 4;  // large: a mapping of its own
  int index = -1;
  if (!own && s.current >= 0 && s.chunks[s.current].base && s.chunks[s.current].size - s.chunks[s.current].used >= need)
    index = s.current;
  if (index < 0) {
    Chunk c;
    c.size = own ? (need + kHuge - 1) / kHuge * kHuge : kChunk;
    c.base = map_huge(c.size);
    if (!c.base)
      throw backend::OutOfMemory("cpu: out of memory allocating " + backend::human_bytes(bytes) + " for " + what + ": " +
                                 backend::human_bytes(physical_bytes(_SC_AVPHYS_PAGES)) + " free of " +
                                 backend::human_bytes(s.info.total_bytes));
    s.chunks.push_back(c);
    index = static_cast<int>(s.chunks.size() - 1);
    if (!own) s.current = index;
  }
  Chunk& c = s.chunks[index];
  HostMemory m{c.base + c.used, index};
  c.used += need;
  ++c.live;
  return s.buffers.add(m, bytes);
}

void CpuBackend::free(backend::Buffer b) {
  Impl& s = *impl_;
  s.flush();
  if (!b) return;
  auto& slot = s.buffers.range(b, 0, 0, "cpu", "free");
  s.release(slot.handle);
  s.buffers.release(slot);
}

void CpuBackend::upload(backend::Buffer dst, size_t offset, const void* src, size_t bytes) {
  impl_->flush();
  std::memcpy(impl_->range(dst, offset, bytes, "upload").data + offset, src, bytes);
}

void CpuBackend::download(void* dst, backend::Buffer src, size_t offset, size_t bytes) {
  impl_->flush();
  std::memcpy(dst, impl_->range(src, offset, bytes, "download").data + offset, bytes);
}

void CpuBackend::copy(backend::Buffer dst, size_t dst_offset, backend::Buffer src, size_t src_offset, size_t bytes) {
  impl_->flush();
  uint8_t* d = impl_->range(dst, dst_offset, bytes, "copy").data + dst_offset;
  const uint8_t* sp = impl_->range(src, src_offset, bytes, "copy").data + src_offset;
  std::memmove(d, sp, bytes);
}

void CpuBackend::fill32(backend::Buffer dst, size_t offset, size_t bytes, uint32_t pattern) {
  impl_->flush();
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
  if (k.matmul) {
    // Matmuls of one input wait for each other (Impl::pending) and run in one region.
    MatmulLaunch m;
    try {
      m = matmul_launch(call);
    } catch (const std::exception& e) {
      s.flush();
      throw backend::Error(std::string("cpu: ") + e.what());
    }
    if (!s.joins(m)) s.flush();
    s.pending_kernel[s.n_pending] = kernel;
    s.pending[s.n_pending++] = m;
    if (s.profile) ++k.launches;
    return;
  }
  s.flush();
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
