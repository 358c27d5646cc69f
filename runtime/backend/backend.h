// The backend interface: what the graph executor (runtime/exec/executor.h) needs from a
// device to run a package's kernels. One folder per backend implements it
// (runtime/cpu, runtime/cuda, runtime/vulkan). The
// interface knows nothing of graphs, ops or models: it allocates device memory, copies
// bytes, and launches a package's kernel by its manifest entry with already-resolved
// arguments (docs/package-format.md, "The launch contract"). Modelled on IREE's HAL
// drivers and ggml's backend table (../shared/STYLE.md).
//
// Ordering. Every call is ordered after the calls made before it on the same Backend
// (one in-order queue, as one CUDA stream): an upload issued after a launch does not
// overwrite memory that launch still reads, and a download sees every earlier launch's
// writes. upload() copies `src` before it returns (the caller may reuse it at once);
// download() returns when the bytes are in `dst`. synchronize() waits for everything.
//
// Threads: one thread at a time per Backend (the executor's; it may change between calls).
//
// Arguments are checked before every launch, allocation-free: their number and kinds
// against the kernel's manifest signature, each memref's rank, its byte range against its
// buffer, its view (product of sizes x element size) against `bytes`, and its offset:
// a multiple of the element size (16 at most) and, on Vulkan, of the device's
// minStorageBufferOffsetAlignment (a storage-buffer descriptor starts there). Placing
// every memref at a multiple of kMemrefOffsetAlignment satisfies every device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace swz::package {
struct Manifest;
}

namespace swz::backend {

/// A failed device call, a missing driver or device, a package the device cannot run.
/// what() is precise enough for an operator: the call, the driver's message, sizes.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Device memory could not be allocated. what() says how much was asked for, for what,
/// and how much the device has free ("cuda: out of device memory allocating 1.1 GiB for
/// weight output.weight: 0.4 GiB free of 79.6 GiB").
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// A byte offset every backend accepts for any memref argument: Vulkan requires
/// minStorageBufferOffsetAlignment <= 256 of every implementation, and 256 is a multiple
/// of every element size (128-bit vector loads included).
inline constexpr size_t kMemrefOffsetAlignment = 256;

/// An opaque device allocation. `id` is the backend's handle (0 = none); `bytes` its size.
struct Buffer {
  uint64_t id = 0;
  size_t bytes = 0;
  explicit operator bool() const { return id != 0; }
  bool operator==(const Buffer&) const = default;
};

/// One resolved kernel argument.
///   Memref: `bytes` of `buffer` starting at byte `offset`, viewed as a row-major memref of
///           `sizes` elements (rank = sizes.size(), 1..4) of the signature's element type.
///           The CUDA backend expands it into MLIR's descriptor (pointer + offset, offset
///           0, sizes, strides); the Vulkan backend binds the byte range.
///   I32, F32: a 32-bit scalar.
struct Arg {
  enum Kind { Memref, I32, F32 } kind = I32;
  Buffer buffer;
  size_t offset = 0;
  size_t bytes = 0;
  std::array<int64_t, 4> sizes{};
  int rank = 0;
  int32_t i32 = 0;
  float f32 = 0.f;
  bool operator==(const Arg&) const = default;
};

/// One launch as Backend::launch() takes it, kept for a launch graph.
struct LaunchDesc {
  int kernel = -1;
  std::array<uint32_t, 3> grid{};
  uint32_t dynamic_smem = 0;
  std::vector<Arg> args;
  /// Ordering within a graph. 0: after every launch before it. k > 0: after the branch-0
  /// launch before it and the earlier launches of branch k only, so branches between two
  /// branch-0 launches may run concurrently (the sequences of a batch in attention); the
  /// next branch-0 launch waits for all of them. Running everything in order is always
  /// correct (the default replay and launch() do).
  int branch = 0;
  bool operator==(const LaunchDesc&) const = default;
};

/// What a backend is running on (for logs, /health and errors).
struct DeviceInfo {
  std::string backend;          ///< "cpu", "cuda", "vulkan"
  std::string name;             ///< e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string arch;             ///< "sm_90" (cuda), device type (vulkan: "discrete", "cpu", ...)
  uint64_t total_bytes = 0;     ///< device memory (vulkan: the heap buffers come from; 0 if unknown)
  uint64_t free_bytes = 0;      ///< free at creation (0 if unknown: vulkan)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;

  /// Loads every kernel of `m` (kernels[].file under `package_dir`, format per target:
  /// PTX for sm_*, SPIR-V for spirv) and prepares a launchable function per entry; a
  /// second call replaces the kernels of the first (indices change). Throws Error when a
  /// file is missing, the device rejects a module (the JIT log included), a launch record
  /// is malformed (launch.abi of another backend, block, signature types), or the
  /// package's target does not suit the device (e.g. an sm_90 package on an sm_80 GPU).
  virtual void load_kernels(const package::Manifest& m, const std::string& package_dir) = 0;
  /// Index of kernel `entry` (manifest kernels[].entry) for launch(); throws Error if
  /// load_kernels() did not load it.
  virtual int kernel_index(const std::string& entry) const = 0;

  /// A device allocation of `bytes` (> 0) bytes, contents undefined. `what` names it in
  /// the error. Throws OutOfMemory (with the size asked and the free memory) or Error.
  virtual Buffer alloc(size_t bytes, const std::string& what) = 0;
  /// Frees `b` (no-op for an empty Buffer). Ordered after earlier calls: waits for the
  /// work in flight (frees are rare: model unload). A freed or unknown Buffer passed to any
  /// call is an Error.
  virtual void free(Buffer b) = 0;
  /// Copies `bytes` from host `src` to `dst` at byte `offset`. `src` is ordinary
  /// (pageable) host memory, not memory pinned with cuMemHostRegister.
  virtual void upload(Buffer dst, size_t offset, const void* src, size_t bytes) = 0;
  /// Copies `bytes` from `src` at byte `offset` to host `dst`; returns when done.
  virtual void download(void* dst, Buffer src, size_t offset, size_t bytes) = 0;
  /// Device-to-device copy (ranges must not overlap).
  virtual void copy(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) = 0;
  /// Fills `bytes` bytes of `dst` at `offset` with the 32-bit `pattern` (offset and bytes
  /// multiples of 4).
  virtual void fill32(Buffer dst, size_t offset, size_t bytes, uint32_t pattern) = 0;

  /// Launches kernel `kernel` (kernel_index) over `grid` workgroups of the block size its
  /// manifest record gives, with `dynamic_smem` bytes of dynamic shared memory and `args`
  /// in signature order. Throws Error when the arguments do not match the signature (see
  /// the file comment), a grid dimension is 0 or exceeds the device's limit, the dynamic
  /// shared memory exceeds the device's (Vulkan: any; SPIR-V kernels have none), or the
  /// launch fails. A kernel's own fault surfaces at the next download() / synchronize().
  virtual void launch(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const Arg> args) = 0;
  /// Waits for every call made so far; throws Error if a launch failed asynchronously.
  virtual void synchronize() = 0;

  // Launch graphs: a fixed sequence of launches recorded once and run again with one call,
  // for work that repeats with few changes (a decode step of one batch shape: the executor
  // records it once, then per step changes only the launches whose grid or arguments
  // moved, such as attention over a longer context). The CUDA backend builds a CUDA graph
  // (one cuGraphLaunch per step instead of hundreds of cuLaunchKernel calls, and shorter
  // gaps between kernels on the device); this default replays the kept launches through
  // launch() (the host still skips re-evaluating the launches that did not change).
  // Graph ids are small integers, reused after destroy_graph().

  /// Keeps `launches`, in order, as one graph; returns its id. Nothing runs. Throws Error
  /// as launch() does for a bad launch (CUDA: here; the default replay: at launch_graph).
  virtual int create_graph(std::span<const LaunchDesc> launches);
  /// Replaces launch `index` of `graph`: the same kernel, any grid, shared memory and
  /// arguments. Takes effect from the next launch_graph(); a run in flight is not changed.
  /// Throws Error for an unknown graph or index, another kernel, or a bad launch.
  virtual void update_graph(int graph, size_t index, const LaunchDesc& launch);
  /// Runs `graph`'s launches in order, ordered with every other call like a launch().
  virtual void launch_graph(int graph);
  /// Releases `graph` (waits for a run in flight where the device needs it).
  virtual void destroy_graph(int graph);

 private:
  std::vector<std::optional<std::vector<LaunchDesc>>> replay_graphs_;  // the default implementation's graphs
};

/// What a backend folder registers (cmake/SwzBackends.cmake: swz_register_backend names
/// this object and its library): the package targets it runs, how to create it, and the
/// KV page format of those targets' kernels. One `const BackendEntry kBackendEntry` per
/// backend folder (cpu::kBackendEntry, cuda::kBackendEntry, vulkan::kBackendEntry).
struct BackendEntry {
  const char* name;  ///< "cpu", "cuda", "vulkan"
  /// Whether it runs packages of `target` ("cpu", "sm_90", "spirv", ...).
  bool (*runs)(const std::string& target);
  /// A backend on device `select` (the backend's own syntax, "" = its default) with
  /// `n_threads` host threads (0 = all cores; only the cpu backend uses it). Throws Error
  /// when the driver or device is missing.
  std::unique_ptr<Backend> (*create)(const std::string& select, int n_threads);
  /// The KV page format its kernels for `target` read and write (for the prefix cache's
  /// model key: pages of different formats never share blocks).
  std::string (*kv_format)(const std::string& target);
  /// The targets it runs, for messages ("sm_80, sm_86, sm_89, sm_90").
  const char* targets;
};

/// The launches each launch of a graph must wait for, as indices of earlier launches,
/// from their LaunchDesc::branch: a branch-0 launch waits for the last launch of every
/// branch opened since the previous branch-0 launch, or for that launch when none was; a
/// branch-k launch waits for the previous launch of branch k since then, else for the
/// previous branch-0 launch. The first launch waits for nothing. (How the CUDA backend
/// links a graph's nodes; any order these allow gives the in-order result.)
std::vector<std::vector<int>> graph_dependencies(std::span<const LaunchDesc> launches);

/// Every backend this build has (a table generated from the registered backend folders).
std::span<const BackendEntry* const> registered_backends();

/// The backend for a package target, from registered_backends(): "cpu" → cpu
/// (runtime/cpu), "sm_80"/"sm_90" → cuda, "spirv" → vulkan. `select` picks a device (cuda:
/// ordinal, "" = 0; vulkan: name substring, "" = $SWZ_VK_DEVICE); `n_threads` the cpu
/// backend's threads (0 = all cores). Throws Error when no backend runs the target or its
/// driver/device is missing ("cuda: libcuda.so.1 not found (no NVIDIA driver): this
/// package needs an NVIDIA GPU").
std::unique_ptr<Backend> create_backend(const std::string& target, const std::string& select = "", int n_threads = 0);

/// The KV page format of `target`'s kernels (BackendEntry::kv_format of the backend that
/// runs it). Throws Error when no backend runs the target.
std::string kv_format(const std::string& target);

}  // namespace swz::backend
