// The CUDA backend (backend/backend.h) over the CUDA driver API, loaded at run time.
//
// Driver. libcuda.so.1 is opened with dlopen when a CudaBackend is created and every
// entry point fetched with dlsym (cuda_driver.h, cuda_symbols.h): nothing links libcuda
// and no cuda.h is needed to build, so swizzle-rt runs unchanged on a machine without an
// NVIDIA driver (creating a CudaBackend there throws backend::Error naming libcuda.so.1).
// The device's primary context is used (cuDevicePrimaryCtxRetain) and made current on
// whichever thread calls the backend.
//
// Kernels. load_kernels() reads each kernels[].file (PTX) once, JIT-compiles it for the
// device with cuLinkCreate / cuLinkAddData / cuLinkComplete and keeps the cubin in a
// cache: `<package>/.cache/<module>.<sm_XY>.<driver version>.cubin`, or, when the
// package directory is not writable, `$XDG_CACHE_HOME/swizzle` (else `~/.cache/swizzle`)
// with the PTX's hash in the name, `<module>.<ptx hash>.<sm_XY>.<driver>.cubin`. A cache
// file starts with a header holding the hash of the PTX it came from and of the cubin; a
// file whose header does not match (stale, truncated, corrupt) is ignored and rewritten
// (atomically: temporary file + rename). Then cuModuleLoadData and cuModuleGetFunction
// per entry. The package's target must suit the device: PTX is forward-compatible, so an
// sm_80 package runs on sm_90, but an sm_90 package on an sm_80 GPU is refused (as is an
// arch-specific sm_90a package on anything but sm_90).
//
// Launches. Each memref Arg is expanded into MLIR's descriptor (allocated pointer =
// aligned pointer = buffer + offset, offset 0, sizes[rank], row-major strides[rank], all
// i64); i32 / f32 are 4-byte parameters. The parameter block lives in scratch vectors
// reused by every launch (no host allocation per launch). Launch graphs (backend.h) are
// CUDA graphs built from the same parameter blocks. The block size is the manifest's launch.block; a dynamic
// shared-memory size above the function's current limit raises it with cuFuncSetAttribute
// (up to the device's opt-in maximum; above it, Error).
//
// Ordering: one non-blocking stream; upload is cuMemcpyHtoDAsync from pageable host
// memory, which returns once the source has been staged (the caller may reuse it), and
// stays ordered on the stream; download waits for the stream. free() waits for the stream
// before cuMemFree. Asynchronous kernel faults surface at the next synchronize() or
// download() (CUDA_LAUNCH_BLOCKING=1 pins them to the launch).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace swz::cuda {

class CudaBackend final : public backend::Backend {
 public:
  /// Opens `library` (tests pass the toolkit's stub), initializes the driver and retains
  /// device `select` (an ordinal, "" = 0). Throws backend::Error when the driver is
  /// missing ("cuda: libcuda.so.1 not found (no NVIDIA driver) ..."), fails to initialize,
  /// or has no such device.
  explicit CudaBackend(const std::string& select = "", const std::string& library = "libcuda.so.1");
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

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
  /// Launch graphs as CUDA graphs (backend.h): kernel nodes ordered by their branches (a
  /// chain where all are branch 0), instantiated once;
  /// update_graph() is cuGraphExecKernelNodeSetParams on one node, launch_graph() one
  /// cuGraphLaunch on the backend's stream. destroy_graph() waits for the stream first.
  /// On a driver without the CUDA 12.0 graph entry points, backend.h's replay instead.
  int create_graph(std::span<const backend::LaunchDesc> launches) override;
  void update_graph(int graph, size_t index, const backend::LaunchDesc& launch) override;
  void launch_graph(int graph) override;
  void destroy_graph(int graph) override;

  /// Where load_kernels() found or put each module's cubin ("<path> (hit)" / "(written)" /
  /// "(not cached: <why>)"), for logs and tests.
  const std::vector<std::string>& cache_report() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// The compute-capability check of load_kernels(), for tests: empty when a package of
/// `target` ("sm_80", "sm_90", "sm_90a") runs on a device of capability major.minor named
/// `device`, else the reason ("package compiled for sm_90; device NVIDIA A100 is sm_80:
/// recompile with swizzlec compile --target sm_80").
std::string arch_mismatch(const std::string& target, int major, int minor, const std::string& device);

/// The kernel-file check of load_kernels(), for tests: empty unless the PTX text `ptx`
/// names an architecture-specific target (".target sm_90a": the wgmma prefill GEMM that
/// compiler/schedules/sm_90.json generates) other than `device_arch` ("sm_90"); then the
/// reason, beginning "is PTX for sm_90a, which runs on sm_90 devices only", with the
/// target to recompile for. The driver's JIT would refuse such PTX with a bare error code.
std::string ptx_arch_mismatch(const std::string& ptx, const std::string& device_arch);

}  // namespace swz::cuda
