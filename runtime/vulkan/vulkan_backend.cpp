// The Vulkan backend. See vulkan_backend.h.
#include "vulkan/vulkan_backend.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

#include "backend/buffer_table.h"
#include "backend/kernel_record.h"
#include "package/package.h"
#include "vulkan/vulkan_device.h"

namespace swz::vulkan {

using backend::Arg;

namespace {

/// Runs `f`, turning vulkan::Error into backend::Error ("vulkan: ...").
template <typename F>
auto guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const OutOfMemory& e) {
    throw backend::OutOfMemory(std::string("vulkan: ") + e.what());
  } catch (const Error& e) {
    throw backend::Error(std::string("vulkan: ") + e.what());
  }
}

}  // namespace

struct VulkanBackend::Impl {
  std::unique_ptr<Device> dev;
  backend::DeviceInfo info;
  struct Kernel {
    backend::KernelRecord rec;
    Pipeline pipeline;
  };
  std::vector<Kernel> kernels;
  std::unordered_map<std::string, int> by_entry;
  backend::BufferTable<Buffer> buffers;
  std::vector<Device::Binding> bindings;  // launch scratch

  /// The vulkan::Buffer of `b` when bytes [offset, offset + bytes) lie inside it; else Error.
  Buffer& range(backend::Buffer b, size_t offset, size_t bytes, const char* what) {
    return buffers.range(b, offset, bytes, "vulkan", what).handle;
  }
};

VulkanBackend::VulkanBackend(const std::string& select) : impl_(std::make_unique<Impl>()) {
  guard([&] { impl_->dev = std::make_unique<Device>(select); });
  const DeviceInfo& di = impl_->dev->info();
  impl_->info.backend = "vulkan";
  impl_->info.name = di.name;
  impl_->info.arch = di.type;
  impl_->info.total_bytes = di.memory_bytes;
  impl_->info.free_bytes = 0;  // unknown without VK_EXT_memory_budget
}

VulkanBackend::~VulkanBackend() {
  try {
    impl_->dev->finish();
  } catch (const Error&) {
    // A lost device: the buffers and pipelines are released all the same.
  }
  impl_->kernels.clear();
  impl_->buffers.clear();
}

const backend::DeviceInfo& VulkanBackend::info() const { return impl_->info; }

Device& VulkanBackend::device() { return *impl_->dev; }

void VulkanBackend::load_kernels(const package::Manifest& m, const std::string& package_dir) {
  Impl& s = *impl_;
  if (m.target != "spirv")
    throw backend::Error("vulkan: package target " + m.target + " is not spirv (compile with swizzlec compile --target spirv)");
  guard([&] { s.dev->finish(); });
  s.kernels.clear();
  s.by_entry.clear();
  std::map<std::string, std::vector<uint32_t>> words;  // each file read once
  for (const package::Kernel& k : m.kernels) {
    Impl::Kernel kernel;
    kernel.rec = backend::parse_kernel(k, "spirv-storage-buffers");
    auto it = words.find(kernel.rec.file);
    if (it == words.end()) {
      const std::string bytes = backend::read_kernel_file(package_dir, kernel.rec.file);
      if (bytes.size() % 4 != 0)
        throw backend::Error("vulkan: " + package_dir + "/" + kernel.rec.file + " is not a whole number of 32-bit words");
      std::vector<uint32_t> w(bytes.size() / 4);
      std::memcpy(w.data(), bytes.data(), bytes.size());
      it = words.emplace(kernel.rec.file, std::move(w)).first;
    }
    kernel.pipeline = guard([&] {
      try {
        return s.dev->create_pipeline(it->second, kernel.rec.function, uint32_t(kernel.rec.args.size()));
      } catch (const Error& e) {
        throw Error("kernel " + kernel.rec.entry + " (" + package_dir + "/" + kernel.rec.file + "): " + e.what());
      }
    });
    s.by_entry[kernel.rec.entry] = int(s.kernels.size());
    s.kernels.push_back(std::move(kernel));
  }
}

int VulkanBackend::kernel_index(const std::string& entry) const {
  auto it = impl_->by_entry.find(entry);
  if (it == impl_->by_entry.end())
    throw backend::Error("vulkan: kernel " + entry + " is not loaded (load_kernels() of its package first)");
  return it->second;
}

backend::Buffer VulkanBackend::alloc(size_t bytes, const std::string& what) {
  Impl& s = *impl_;
  if (bytes == 0) throw backend::Error("vulkan: alloc of 0 bytes for " + what);
  Buffer b;
  try {
    b = s.dev->create_buffer(bytes);
  } catch (const OutOfMemory& e) {
    throw backend::OutOfMemory("vulkan: out of device memory allocating " + backend::human_bytes(bytes) + " for " + what + " (heap of " +
                               backend::human_bytes(s.info.total_bytes) + " on " + s.info.name + "): " + e.what());
  } catch (const Error& e) {
    throw backend::Error("vulkan: allocating " + backend::human_bytes(bytes) + " for " + what + ": " + e.what());
  }
  return s.buffers.add(std::move(b), bytes);
}

void VulkanBackend::free(backend::Buffer b) {
  Impl& s = *impl_;
  if (!b) return;
  auto& slot = s.buffers.range(b, 0, 0, "vulkan", "free");
  guard([&] { s.dev->finish(); });  // no pending command may still use it
  s.buffers.release(slot);
}

void VulkanBackend::upload(backend::Buffer dst, size_t offset, const void* src, size_t bytes) {
  Impl& s = *impl_;
  Buffer& buf = s.range(dst, offset, bytes, "upload");
  if (bytes == 0) return;
  guard([&] {
    if (s.dev->busy()) {
      if (bytes <= 65536 && offset % 4 == 0 && bytes % 4 == 0) {
        s.dev->enqueue_update(buf, offset, src, bytes);  // ordered, copied now
        return;
      }
      s.dev->finish();
    }
    buf.write(src, bytes, offset);
  });
}

void VulkanBackend::download(void* dst, backend::Buffer src, size_t offset, size_t bytes) {
  Impl& s = *impl_;
  Buffer& buf = s.range(src, offset, bytes, "download");
  guard([&] {
    s.dev->finish();
    if (bytes) buf.read(dst, bytes, offset);
  });
}

void VulkanBackend::copy(backend::Buffer dst, size_t dst_offset, backend::Buffer src, size_t src_offset, size_t bytes) {
  Impl& s = *impl_;
  Buffer& d = s.range(dst, dst_offset, bytes, "copy (destination)");
  Buffer& from = s.range(src, src_offset, bytes, "copy (source)");
  if (&d == &from && dst_offset < src_offset + bytes && src_offset < dst_offset + bytes)
    throw backend::Error("vulkan: copy: overlapping ranges");
  guard([&] { s.dev->enqueue_copy(d, dst_offset, from, src_offset, bytes); });
}

void VulkanBackend::fill32(backend::Buffer dst, size_t offset, size_t bytes, uint32_t pattern) {
  Impl& s = *impl_;
  Buffer& d = s.range(dst, offset, bytes, "fill32");
  if (offset % 4 || bytes % 4)
    throw backend::Error("vulkan: fill32: offset " + std::to_string(offset) + " and size " + std::to_string(bytes) +
                         " must be multiples of 4");
  guard([&] { s.dev->enqueue_fill(d, offset, bytes, pattern); });
}

void VulkanBackend::launch(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const Arg> args) {
  Impl& s = *impl_;
  if (kernel < 0 || size_t(kernel) >= s.kernels.size())
    throw backend::Error("vulkan: launch: kernel index " + std::to_string(kernel) + " outside 0.." +
                         std::to_string(s.kernels.size()));
  const Impl::Kernel& k = s.kernels[size_t(kernel)];
  if (dynamic_smem != 0)
    throw backend::Error("vulkan: launch " + k.rec.entry + ": " + std::to_string(dynamic_smem) +
                         " bytes of dynamic shared memory asked; SPIR-V kernels have none");
  const DeviceInfo& di = s.dev->info();
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || grid[i] > di.max_workgroup_count[i])
      throw backend::Error("vulkan: launch " + k.rec.entry + ": grid[" + std::to_string(i) + "] = " + std::to_string(grid[i]) +
                           " outside 1.." + std::to_string(di.max_workgroup_count[i]) + " (maxComputeWorkGroupCount)");
  backend::check_args(k.rec, args, [&](const Arg& a) -> size_t {
    const auto* slot = s.buffers.find(a.buffer);
    return slot ? slot->bytes : 0;
  });
  s.bindings.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    Device::Binding& b = s.bindings[i];
    b = {};
    if (a.kind == Arg::I32) {
      std::memcpy(&b.scalar, &a.i32, 4);
    } else if (a.kind == Arg::F32) {
      std::memcpy(&b.scalar, &a.f32, 4);
    } else {
      if (a.offset % di.min_storage_offset_alignment != 0)
        backend::throw_arg_error(k.rec, i,
                                 "byte offset " + std::to_string(a.offset) + " is not a multiple of " + di.name +
                                     "'s minStorageBufferOffsetAlignment " +
                                     std::to_string(di.min_storage_offset_alignment) +
                                     " (a storage-buffer descriptor cannot start there)");
      b.buffer = &s.buffers.find(a.buffer)->handle;
      b.offset = a.offset;
      b.range = std::max<size_t>(4, (a.bytes + 3) & ~size_t(3));
    }
  }
  guard([&] { s.dev->enqueue_dispatch(k.pipeline, s.bindings, grid); });
}

void VulkanBackend::synchronize() {
  guard([&] { impl_->dev->finish(); });
}

}  // namespace swz::vulkan

namespace swz::vulkan {

// The Vulkan backend's registration (cmake/SwzBackends.cmake): spirv packages.
extern const backend::BackendEntry kBackendEntry;
const backend::BackendEntry kBackendEntry = {
    "vulkan",
    [](const std::string& target) { return target == "spirv"; },
    [](const std::string& select, int) -> std::unique_ptr<backend::Backend> { return std::make_unique<VulkanBackend>(select); },
    [](const std::string& target) { return target + " f16 page64 per-layer-tiles"; },
    "spirv",
};

}  // namespace swz::vulkan
