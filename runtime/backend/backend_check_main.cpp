// swz-backend-check PACKAGE [--device SELECT] [--bench N]
//
// Loads every kernel of a GPU package (sm_80 / sm_90 / spirv) through create_backend() --
// the same library code swizzle-rt runs -- and checks add_f32, rms_norm_f32 and each
// decode GEMV against a float64 reference, with every memref argument at a non-zero
// byte offset of a larger buffer (runtime/backend/backend_check.h). Prints the device,
// the kernel cache (cuda), one line per case and, with --bench N, the host time per
// launch of N back-to-back GEMV launches and of the whole batch including synchronize().
// Exit status: 0 all ok, 1 a case failed, 2 bad usage / no device / package not loadable.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "backend/backend_check.h"
#include "cuda/cuda_backend.h"
#include "package/package.h"

namespace {

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s PACKAGE_DIR [--device SELECT] [--bench N]\n", argv0);
  return 2;
}

/// Host microseconds per launch of `n` add_f32 launches (n = 4096 elements each), and of
/// the batch including synchronize().
void bench(swz::backend::Backend& b, const swz::package::Manifest& m, int n) {
  using namespace swz::backend;
  const swz::package::Kernel* add = nullptr;
  for (const auto& k : m.kernels)
    if (k.launch.value("function", "") == "add_f32") add = &k;
  if (!add) {
    std::printf("bench: the package has no add_f32\n");
    return;
  }
  const int elems = 4096;
  Buffer buf = b.alloc(3 * 16384, "bench");
  b.fill32(buf, 0, 3 * 16384, 0);
  Arg a[4];
  for (int i = 0; i < 3; ++i) {
    a[i].kind = Arg::Memref;
    a[i].buffer = buf;
    a[i].offset = size_t(i) * 16384;
    a[i].bytes = elems * 4;
    a[i].rank = 1;
    a[i].sizes[0] = elems;
  }
  a[3].kind = Arg::I32;
  a[3].i32 = elems;
  const int idx = b.kernel_index(add->entry);
  const auto grid = check::grid_of(m, add->entry, {{"n", elems}});
  b.launch(idx, grid, 0, a);
  b.synchronize();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) b.launch(idx, grid, 0, a);
  auto t1 = std::chrono::steady_clock::now();
  b.synchronize();
  auto t2 = std::chrono::steady_clock::now();
  const double enqueue = std::chrono::duration<double, std::micro>(t1 - t0).count();
  const double total = std::chrono::duration<double, std::micro>(t2 - t0).count();
  std::printf("bench: %d launches of %s (n=%d): %.2f us/launch to enqueue, %.2f us/launch until synchronize() returns\n",
              n, add->entry.c_str(), elems, enqueue / n, total / n);
  b.free(buf);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, device;
  int bench_n = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      device = argv[++i];
    else if (a == "--bench" && i + 1 < argc)
      bench_n = std::atoi(argv[++i]);
    else if (!a.empty() && a[0] != '-' && dir.empty())
      dir = a;
    else
      return usage(argv[0]);
  }
  if (dir.empty()) return usage(argv[0]);
  swz::package::Manifest m;
  std::unique_ptr<swz::backend::Backend> b;
  try {
    m = swz::package::read_manifest(dir);
    b = swz::backend::create_backend(m.target, device);
    const auto& info = b->info();
    std::printf("device: %s (%s, %s; %.1f GiB, %.1f GiB free)\n", info.name.c_str(), info.backend.c_str(), info.arch.c_str(),
                double(info.total_bytes) / double(1u << 30), double(info.free_bytes) / double(1u << 30));
    auto t0 = std::chrono::steady_clock::now();
    b->load_kernels(m, dir);
    auto t1 = std::chrono::steady_clock::now();
    std::printf("package: %s (target %s, %zu kernels) loaded in %.1f ms\n", dir.c_str(), m.target.c_str(), m.kernels.size(),
                std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (auto* cuda = dynamic_cast<swz::cuda::CudaBackend*>(b.get()))
      for (const std::string& line : cuda->cache_report()) std::printf("  cubin cache: %s\n", line.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  std::vector<swz::backend::check::Result> results = swz::backend::check::run_checks(*b, m);
  std::fputs(swz::backend::check::format_table(results).c_str(), stdout);
  int failed = 0;
  for (const auto& r : results) failed += !r.ok();
  std::printf("%zu cases, %d failed\n", results.size(), failed);
  if (bench_n > 0) {
    try {
      bench(*b, m, bench_n);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: %s\n", e.what());
      failed++;
    }
  }
  return results.empty() || failed ? 1 : 0;
}
