// ptx_check: runs generated PTX kernels on an NVIDIA GPU and compares them with a
// float64 CPU reference. Plain C++ and the CUDA driver API (no MLIR, no runtime/).
//
//   swz-ptx-check --gemm <swz_kernels.ptx> --rms-norm <swz_rms_norm.ptx>
//
// Kernels and their ABI (MLIR's memref calling convention: each memref<?x?xT>
// argument expands to allocated ptr, aligned ptr, offset, size0, size1, stride0,
// stride1; memref<?xT> to ptr, ptr, offset, size, stride):
//  * gemm_f16_mma_sync(A, B: memref<?x?xf16>, C: memref<?x?xf32>):
//    C = A·Bᵀ, grid (N/8, M/16), block 32. Tolerance: |C - ref| <= 1e-3 + 1e-4 |ref|
//    (f32 accumulation of K f16 products; any fragment or swizzle error is O(1)).
//  * rms_norm_f32(x: memref<?x?xf32>, gamma: memref<?xf32>, y: memref<?x?xf32>,
//    eps: f32): grid (rows), block 32. Tolerance: |y - ref| <= 1e-5 (1 + |ref|).
// Exit status 0 only if every kernel is within tolerance. Errors (no GPU, bad
// PTX) print the CUDA error string and exit 2.
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void check(CUresult r, const char *what) {
  if (r != CUDA_SUCCESS) {
    const char *msg = nullptr;
    cuGetErrorString(r, &msg);
    std::fprintf(stderr, "error: %s: %s\n", what, msg ? msg : "unknown CUDA error");
    std::exit(2);
  }
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "error: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Deterministic uniform values in [-1, 1) (64-bit LCG, Knuth's constants).
struct Rng {
  uint64_t s;
  double next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return double(s >> 11) / double(1ull << 53) * 2.0 - 1.0;
  }
};

/// MLIR memref descriptor fields for a rank-`R` memref, as kernel parameters.
template <int R> struct Memref {
  CUdeviceptr allocated, aligned;
  int64_t offset, sizes[R], strides[R];
  void push(std::vector<void *> &params) {
    params.push_back(&allocated);
    params.push_back(&aligned);
    params.push_back(&offset);
    for (int i = 0; i < R; ++i)
      params.push_back(&sizes[i]);
    for (int i = 0; i < R; ++i)
      params.push_back(&strides[i]);
  }
};

template <typename T> CUdeviceptr upload(const std::vector<T> &v) {
  CUdeviceptr p;
  check(cuMemAlloc(&p, v.size() * sizeof(T)), "cuMemAlloc");
  check(cuMemcpyHtoD(p, v.data(), v.size() * sizeof(T)), "cuMemcpyHtoD");
  return p;
}

CUfunction load(const std::string &ptxPath, const char *entry) {
  std::string ptx = readFile(ptxPath);
  CUmodule module;
  char log[8192] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log)))};
  CUresult r = cuModuleLoadDataEx(&module, ptx.c_str(), 2, opts, vals);
  if (r != CUDA_SUCCESS)
    std::fprintf(stderr, "JIT log for %s:\n%s\n", ptxPath.c_str(), log);
  check(r, "cuModuleLoadDataEx");
  CUfunction f;
  check(cuModuleGetFunction(&f, module, entry), entry);
  return f;
}

bool runGemm(const std::string &ptx, int64_t M, int64_t N, int64_t K) {
  Rng rng{42};
  std::vector<_Float16> a(M * K), b(N * K);
  for (auto &x : a) x = _Float16(rng.next());
  for (auto &x : b) x = _Float16(rng.next());
  std::vector<float> c(M * N, -12345.0f);
  CUdeviceptr da = upload(a), db = upload(b), dc = upload(c);
  Memref<2> ma{da, da, 0, {M, K}, {K, 1}}, mb{db, db, 0, {N, K}, {K, 1}},
      mc{dc, dc, 0, {M, N}, {N, 1}};
  std::vector<void *> params;
  ma.push(params);
  mb.push(params);
  mc.push(params);
  CUfunction f = load(ptx, "gemm_f16_mma_sync");
  check(cuLaunchKernel(f, N / 8, M / 16, 1, 32, 1, 1, 0, nullptr, params.data(), nullptr),
        "cuLaunchKernel(gemm)");
  check(cuCtxSynchronize(), "cuCtxSynchronize(gemm)");
  check(cuMemcpyDtoH(c.data(), dc, c.size() * sizeof(float)), "cuMemcpyDtoH");
  double maxErr = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += double(a[i * K + k]) * double(b[j * K + k]);
      double err = std::fabs(double(c[i * N + j]) - ref);
      maxErr = std::max(maxErr, err);
      if (!(err <= 1e-3 + 1e-4 * std::fabs(ref)))
        ++bad;
    }
  std::printf("gemm_f16_mma_sync M=%lld N=%lld K=%lld: max |err| = %.3g, %lld of %lld "
              "outside tolerance -> %s\n",
              (long long)M, (long long)N, (long long)K, maxErr, (long long)bad,
              (long long)(M * N), bad ? "FAIL" : "ok");
  cuMemFree(da);
  cuMemFree(db);
  cuMemFree(dc);
  return bad == 0;
}

bool runRmsNorm(const std::string &ptx, int64_t rows, int64_t D) {
  Rng rng{7};
  std::vector<float> x(rows * D), g(D), y(rows * D, -12345.0f);
  for (auto &v : x) v = float(rng.next() * 3.0);
  for (auto &v : g) v = float(1.0 + 0.5 * rng.next());
  float eps = 1e-5f;
  CUdeviceptr dx = upload(x), dg = upload(g), dy = upload(y);
  Memref<2> mx{dx, dx, 0, {rows, D}, {D, 1}}, my{dy, dy, 0, {rows, D}, {D, 1}};
  Memref<1> mg{dg, dg, 0, {D}, {1}};
  std::vector<void *> params;
  mx.push(params);
  mg.push(params);
  my.push(params);
  params.push_back(&eps);
  CUfunction f = load(ptx, "rms_norm_f32");
  check(cuLaunchKernel(f, rows, 1, 1, 32, 1, 1, 0, nullptr, params.data(), nullptr),
        "cuLaunchKernel(rms_norm)");
  check(cuCtxSynchronize(), "cuCtxSynchronize(rms_norm)");
  check(cuMemcpyDtoH(y.data(), dy, y.size() * sizeof(float)), "cuMemcpyDtoH");
  double maxErr = 0;
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i)
      ss += double(x[r * D + i]) * double(x[r * D + i]);
    double inv = 1.0 / std::sqrt(ss / double(D) + double(eps));
    for (int64_t i = 0; i < D; ++i) {
      double ref = double(x[r * D + i]) * inv * double(g[i]);
      double err = std::fabs(double(y[r * D + i]) - ref);
      maxErr = std::max(maxErr, err);
      if (!(err <= 1e-5 * (1.0 + std::fabs(ref))))
        ++bad;
    }
  }
  std::printf("rms_norm_f32 rows=%lld D=%lld: max |err| = %.3g, %lld of %lld outside "
              "tolerance -> %s\n",
              (long long)rows, (long long)D, maxErr, (long long)bad,
              (long long)(rows * D), bad ? "FAIL" : "ok");
  cuMemFree(dx);
  cuMemFree(dg);
  cuMemFree(dy);
  return bad == 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string gemm, rms;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--gemm")
      gemm = argv[i + 1];
    else if (flag == "--rms-norm")
      rms = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--gemm file.ptx] [--rms-norm file.ptx]\n", argv[0]);
      return 2;
    }
  }
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  char name[256];
  check(cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
  int major = 0, minor = 0;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  std::printf("device: %s (sm_%d%d)\n", name, major, minor);
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  bool ok = true;
  if (!gemm.empty()) {
    ok &= runGemm(gemm, 64, 64, 256);
    ok &= runGemm(gemm, 128, 40, 64 * 11);
  }
  if (!rms.empty()) {
    ok &= runRmsNorm(rms, 7, 576);
    ok &= runRmsNorm(rms, 3, 4096);
    ok &= runRmsNorm(rms, 2, 5);
  }
  cuDevicePrimaryCtxRelease(dev);
  return ok ? 0 : 1;
}
