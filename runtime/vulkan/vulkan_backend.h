// The Vulkan backend (backend/backend.h) over vulkan::Device (vulkan_device.h).
//
// Kernels: each kernels[].file (SPIR-V words) is read once; every entry gets a compute
// pipeline for its launch.function with one storage-buffer binding per signature argument
// (MLIR's spirv ABI: argument i, memref or scalar, at set 0, binding i). The workgroup
// size is compiled into the module; dynamic shared memory does not exist there (a launch
// asking for any is an Error).
//
// Launches are recorded into the Device's command stream (a barrier between commands,
// submitted in batches), not run one by one: a memref Arg binds its byte range
// [offset, offset + bytes) (bytes rounded up to 4: i8 / f16 arrays are read as whole
// words), so `offset` must be a multiple of the device's minStorageBufferOffsetAlignment
// (16 on lavapipe and NVIDIA; the executor aligns its sub-allocations to it). Scalars go
// to the stream's scalar arena.
//
// Ordering (backend.h): buffers are host-visible memory. upload() writes directly when
// nothing is pending; with work pending, a small upload (<= 64 KiB, 4-byte aligned) is
// recorded into the stream (vkCmdUpdateBuffer copies the bytes at once), a larger one
// waits for the pending work first. download() and free() wait for the pending work;
// copy() and fill32() are recorded. synchronize() submits and waits.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace swz::vulkan {

class Device;

class VulkanBackend final : public backend::Backend {
 public:
  /// Opens a Vulkan device (`select`: a name substring; "" = $SWZ_VK_DEVICE, else the
  /// best device). Throws backend::Error when Vulkan or the device is missing.
  explicit VulkanBackend(const std::string& select = "");
  ~VulkanBackend() override;
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;

  const backend::DeviceInfo& info() const override;
  void load_kernels(const package::Manifest& m, const std::string& package_dir) override;
  int kernel_index(const std::string& entry) const override;
  backend::Buffer alloc(size_t bytes, const std::string& what) override;
  void free(backend::Buffer b) override;
  void upload(backend::Buffer dst, size_t offset, const void* src, size_t bytes) override;
  void download(void* dst, backend::Buffer src, size_t offset, size_t bytes) override;
  void copy(backend::Buffer dst, size_t dst_offset, backend::Buffer src, size_t src_offset, size_t bytes) override;
  void fill32(backend::Buffer dst, size_t offset, size_t bytes, uint32_t pattern) override;
  void launch(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const backend::Arg> args) override;
  void synchronize() override;

  /// The device (its limits: minStorageBufferOffsetAlignment, ...).
  Device& device();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace swz::vulkan
