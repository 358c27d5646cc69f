// The cpu backend (backend/backend.h): host memory, and a cpu package's kernels run by the
// C++ implementations in runtime/cpu/kernels.h on a thread pool. The graph executor
// (runtime/exec/executor.h) drives it from the package's launch records as it drives the
// CUDA and Vulkan backends: one contract, one executor, three backends.
//
// Memory. alloc() returns 64-byte aligned host memory; allocations of 1 MiB or more are
// anonymous mappings aligned to 2 MiB and advised MADV_HUGEPAGE, so the weights a decode
// step streams (copied out of the GGUF mapping at load) and the KV pools sit on huge pages
// and the step does not miss the TLB on every 4 KiB page. upload/download/copy are memcpy.
//
// Launches run on the calling thread, which takes part in the pool's work; the grid and
// dynamic shared memory of a record mean nothing here (the kernels split their work over
// the pool themselves). Consecutive cpu.matmul launches of the same input (Q/K/V,
// gate/up) are held back and run together in one parallel region when the next launch of
// another kind or input, or any other call, comes (ggml::matmul_multi: bit-identical to
// running them one by one), so a decode step pays one thread hand-off for them, not three. Arguments are checked as on the GPU backends
// (backend::check_args: kinds, ranks, byte ranges, views) and each kernel checks that its
// scalars agree with the memory bound to it before reading any.
//
// SWZ_PROFILE=1: wall time per kernel entry, printed to stderr when the backend is
// destroyed ("swz-profile cpu.matmul.q4_k 812.345 ms 3720 launches").
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace swz::cpu {

class CpuBackend final : public backend::Backend {
 public:
  /// `n_threads` threads take part in each kernel (the caller included); 0 = all cores.
  /// Throws std::invalid_argument for a negative count.
  explicit CpuBackend(int n_threads = 0);
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  const backend::DeviceInfo& info() const override;
  /// Resolves every kernels[].entry of a `cpu` package to its implementation and checks
  /// its signature against runtime/cpu/signatures.h. Throws backend::Error for another
  /// target, an entry this build lacks, or a signature that differs (argument named).
  void load_kernels(const package::Manifest& m, const std::string& package_dir) override;
  int kernel_index(const std::string& entry) const override;
  backend::Buffer alloc(size_t bytes, const std::string& what) override;
  void free(backend::Buffer b) override;
  void upload(backend::Buffer dst, size_t offset, const void* src, size_t bytes) override;
  void download(void* dst, backend::Buffer src, size_t offset, size_t bytes) override;
  void copy(backend::Buffer dst, size_t dst_offset, backend::Buffer src, size_t src_offset, size_t bytes) override;
  void fill32(backend::Buffer dst, size_t offset, size_t bytes, uint32_t pattern) override;
  /// Runs the kernel now; throws backend::Error when the arguments do not match its
  /// signature or the kernel refuses them (its message names the entry and the argument).
  void launch(int kernel, std::array<uint32_t, 3> grid, uint32_t dynamic_smem, std::span<const backend::Arg> args) override;
  void synchronize() override;
  /// Threads taking part in each kernel.
  int n_threads() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace swz::cpu
