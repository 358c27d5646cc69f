// The runtime's Vulkan backend, first slice: run compute kernels (SPIR-V from swizzlec's
// spirv target) on one Vulkan device. Used today by swz-vk-check (the numeric check of
// every SPIR-V kernel against a float64 reference, on Mesa lavapipe in CI); the graph
// executor will sit on top of it.
//
// Loading. libvulkan.so.1 is opened with dlopen at device creation and every entry point
// is fetched through vkGetInstanceProcAddr / vkGetDeviceProcAddr (VK_NO_PROTOTYPES), so
// swizzle-rt links no Vulkan library and runs unchanged on a machine without one.
//
// Device choice. The first discrete GPU, else integrated, else virtual, else a CPU
// implementation (Mesa lavapipe). The environment variable SWZ_VK_DEVICE (or the
// `select` argument) picks the first device whose name contains it (case-insensitive).
//
// Kernel ABI (MLIR's SPIR-V lowering, spirv-lower-abi-attrs): argument i of a kernel,
// memref or scalar, is a storage buffer at (set 0, binding i); a scalar's buffer holds its
// 4 bytes. The workgroup size is compiled into the module (LocalSize execution mode).
//
// Features. Enabled where the device supports them (kernels on f16 / i8 data need them):
// storageBuffer16BitAccess (Vulkan 1.1), storageBuffer8BitAccess, shaderFloat16 and
// shaderInt8 (Vulkan 1.2), shaderInt16 / shaderInt64 / shaderFloat64 (1.0).
//
// Errors: every failing call throws swz::vulkan::Error naming the call and its VkResult
// (e.g. "vkCreateComputePipelines: VK_ERROR_INITIALIZATION_FAILED").
//
// Two ways to run work. dispatch() records, submits and waits for one dispatch (the
// numeric checks, timed runs). The command stream (enqueue_*, flush, finish) records many
// commands into one command buffer with a compute/transfer -> compute/transfer memory
// barrier before each, and submits when a batch is full (kBatchCommands commands, or its
// descriptor sets or scalar slots run out) or on flush(); finish() also waits. Two batches
// (command buffer, fence, descriptor pool, scalar arena) alternate, so the device runs one
// while the host records the next. Scalars bound by value get a 4-byte slot of the
// batch's host-visible scalar arena (at minStorageBufferOffsetAlignment), reused once the
// batch has completed: no Vulkan allocation per dispatch.
//
// Host access. Buffers live in host-visible, host-coherent memory: write()/read() touch
// it directly, so a caller that has enqueued work must finish() before reading a buffer
// that work writes or writing one it reads (backend/VulkanBackend does).
//
// Thread safety: one Device per thread; Buffers and Pipelines belong to their Device and
// must be destroyed before it (and after the work that uses them: finish() first).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace swz::vulkan {

/// A failed Vulkan call, a missing loader or device, or a bad argument.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What the chosen device is and what it can do.
struct DeviceInfo {
  std::string name;                 ///< VkPhysicalDeviceProperties::deviceName
  std::string type;                 ///< "discrete", "integrated", "virtual", "cpu" or "other"
  uint32_t api_version = 0;         ///< VK_MAKE_API_VERSION-encoded
  uint32_t subgroup_size = 0;       ///< VkPhysicalDeviceSubgroupProperties::subgroupSize
  std::array<uint32_t, 3> max_workgroup_count{};  ///< maxComputeWorkGroupCount
  uint32_t max_workgroup_invocations = 0;         ///< maxComputeWorkGroupInvocations
  bool timestamps = false;          ///< the compute queue supports timestamp queries
  double timestamp_period_ns = 0;   ///< nanoseconds per timestamp tick
  bool storage_16bit = false, storage_8bit = false, float16 = false, int8 = false;
  uint64_t min_storage_offset_alignment = 0;  ///< minStorageBufferOffsetAlignment (bytes)
  uint64_t max_storage_range = 0;             ///< maxStorageBufferRange (bytes)
  uint64_t memory_bytes = 0;                  ///< size of the heap buffers are allocated from
};

/// A buffer allocation failed for lack of memory (VK_ERROR_OUT_OF_DEVICE_MEMORY or
/// VK_ERROR_OUT_OF_HOST_MEMORY).
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

class Device;

/// A storage buffer in host-visible, host-coherent memory (mapped for its lifetime).
/// Move-only; released when destroyed.
class Buffer {
 public:
  Buffer();
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  ~Buffer();
  /// Size in bytes as requested (the allocation may be larger).
  size_t size() const;
  /// Copies `bytes` bytes from `src` to byte `offset`. Throws Error if out of range.
  void write(const void* src, size_t bytes, size_t offset = 0);
  /// Copies `bytes` bytes at byte `offset` to `dst`. Throws Error if out of range.
  void read(void* dst, size_t bytes, size_t offset = 0) const;
  struct Impl;

 private:
  friend class Device;
  std::unique_ptr<Impl> impl_;
};

/// A compute pipeline: one entry point of a SPIR-V module and its descriptor set layout
/// (`bindings` storage buffers at set 0, bindings 0..bindings-1). Move-only.
class Pipeline {
 public:
  Pipeline();
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;
  ~Pipeline();
  uint32_t bindings() const;
  struct Impl;

 private:
  friend class Device;
  std::unique_ptr<Impl> impl_;
};

/// One Vulkan instance, physical device, logical device and compute queue.
class Device {
 public:
  /// Loads libvulkan.so.1, creates an instance (API 1.3 or what the loader has), picks a
  /// device (see the file comment; `select` empty = $SWZ_VK_DEVICE), enables the features
  /// listed above that it supports and creates a compute queue.
  /// Throws Error if the loader is missing, no device (or none matching) exists, or a
  /// call fails; the message lists the devices seen when the choice fails.
  explicit Device(const std::string& select = "");
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const;

  /// A storage buffer of `bytes` bytes, zero-filled. The allocation is rounded up to a
  /// multiple of 16 bytes (at least 16: Vulkan forbids empty buffers, and kernels reading
  /// i8 / i16 arrays as 32-bit words touch the whole last word). Also a transfer source
  /// and destination (enqueue_copy / enqueue_fill / enqueue_update). Throws OutOfMemory
  /// when the device has no memory for it, Error if another call fails.
  Buffer create_buffer(size_t bytes);

  /// Creates a compute pipeline for entry point `entry` of the SPIR-V module `spirv`
  /// (32-bit words, as spirv::serialize writes them) with `bindings` storage-buffer
  /// bindings. Throws Error if the module is not a multiple of 4 bytes or Vulkan rejects
  /// the module or pipeline.
  Pipeline create_pipeline(std::span<const uint32_t> spirv, const std::string& entry,
                           uint32_t bindings);

  /// Records and submits one dispatch of `grid` workgroups with buffer i bound at
  /// (set 0, binding i), then waits for it (fence) and makes its writes visible to the
  /// host. The command stream is finished first, so the dispatch is ordered after it. With `timed`, returns the dispatch's device time in nanoseconds from two
  /// timestamp queries (Error if the queue has no timestamps); otherwise returns 0.
  /// Throws Error if bindings.size() != pipeline.bindings(), grid exceeds
  /// maxComputeWorkGroupCount, or a call fails (VK_ERROR_DEVICE_LOST included).
  double dispatch(const Pipeline& pipeline, std::span<Buffer* const> bindings,
                  std::array<uint32_t, 3> grid, bool timed = false);

  // ---- The command stream (see the file comment). Every enqueue_* is ordered after the
  // commands enqueued before it; all throw Error on a bad argument or a failed call.

  /// Commands recorded per batch before it is submitted.
  static constexpr uint32_t kBatchCommands = 128;

  /// One binding of a dispatch: `range` bytes of `buffer` at byte `offset` (a multiple of
  /// minStorageBufferOffsetAlignment; range <= maxStorageBufferRange), or, with
  /// buffer == nullptr, the 4-byte scalar `scalar` (an i32 or f32's bits).
  struct Binding {
    const Buffer* buffer = nullptr;
    size_t offset = 0;
    size_t range = 0;
    uint32_t scalar = 0;
  };
  /// Records a dispatch of `grid` workgroups with binding i at (set 0, binding i).
  void enqueue_dispatch(const Pipeline& pipeline, std::span<const Binding> bindings, std::array<uint32_t, 3> grid);
  /// Records a copy of `bytes` bytes (vkCmdCopyBuffer).
  void enqueue_copy(const Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes);
  /// Records a fill of `bytes` bytes with `pattern` (vkCmdFillBuffer; offset, bytes multiples of 4).
  void enqueue_fill(const Buffer& dst, size_t offset, size_t bytes, uint32_t pattern);
  /// Records a write of `bytes` bytes of `src` (copied now; vkCmdUpdateBuffer: offset and
  /// bytes multiples of 4, bytes <= 65536).
  void enqueue_update(const Buffer& dst, size_t offset, const void* src, size_t bytes);
  /// Submits the commands recorded so far (does not wait).
  void flush();
  /// Submits and waits for every command enqueued so far; their writes are then visible to
  /// Buffer::read. Throws Error (VK_ERROR_DEVICE_LOST included) if the device failed.
  void finish();
  /// True while enqueued commands are recorded or running (finish() makes it false).
  bool busy() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc. for a VkResult value (its number if unknown).
std::string result_name(int32_t result);

}  // namespace swz::vulkan
