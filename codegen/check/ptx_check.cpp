// ptx_check: runs generated PTX kernels on an NVIDIA GPU and compares them with a
// float64 CPU reference. Plain C++ and the CUDA driver API (no MLIR, no runtime/).
//
//   swz-ptx-check --gemm <swz_kernels.ptx> --rms-norm <swz_rms_norm.ptx>
//                 --add <swz_add.ptx> --rope <swz_rope.ptx> --swiglu <swz_swiglu.ptx>
//
// Kernels and their ABI (MLIR's memref calling convention: each memref<?x?xT>
// argument expands to allocated ptr, aligned ptr, offset, size0, size1, stride0,
// stride1; memref<?xT> to ptr, ptr, offset, size, stride):
//  * gemm_f16_mma_sync(A, B: memref<?x?xf16>, C: memref<?x?xf32>):
//    C = A·Bᵀ, grid (N/8, M/16), block 32. Tolerance: |C - ref| <= 1e-3 + 1e-4 |ref|
//    (f32 accumulation of K f16 products; any fragment or swizzle error is O(1)).
//  * rms_norm_f32(x: memref<?x?xf32>, gamma: memref<?xf32>, y: memref<?x?xf32>,
//    eps: f32): grid (rows), block 32. Tolerance: |y - ref| <= 1e-5 (1 + |ref|).
//  * add_f32(a, b, out: memref<?xf32>, n: i32): exact (one f32 rounding, same as
//    the reference's f32 sum).
//  * swiglu_f32(gate, up, out: memref<?xf32>, n: i32): |err| <= 1e-5 (1 + |ref|)
//    (exp via ex2.approx).
//  * rope_f32(x: memref<?xf32>, positions: memref<?xi32>, head_dim, n_rot: i32,
//    theta: f32, neox: i32): grid (T, n_head), block 32, in place. Reference
//    angle a = pos * theta^(-2i/n_rot) in float64. The kernel forms a in f32 (as
//    llama.cpp does), so a carries up to ~8 ulps: |err| <= 1e-6 + (|x0| + |x1|) *
//    (a * 2^-21 + 1e-6) per rotated pair; untouched features must be exact.
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


/// Runs `entry` of `ptx` on 1-D buffers: out = f(a, b) elementwise over n, grid
/// ceil(n/block). Returns the device output.
std::vector<float> runElementwise(const std::string &ptx, const char *entry, int block,
                                  const std::vector<float> &a, const std::vector<float> &b) {
  int64_t n = int64_t(a.size());
  std::vector<float> out(n, -12345.0f);
  CUdeviceptr da = upload(a), db = upload(b), dout = upload(out);
  Memref<1> ma{da, da, 0, {n}, {1}}, mb{db, db, 0, {n}, {1}}, mo{dout, dout, 0, {n}, {1}};
  int32_t n32 = int32_t(n);
  std::vector<void *> params;
  ma.push(params);
  mb.push(params);
  mo.push(params);
  params.push_back(&n32);
  CUfunction f = load(ptx, entry);
  check(cuLaunchKernel(f, unsigned((n + block - 1) / block), 1, 1, block, 1, 1, 0, nullptr,
                       params.data(), nullptr),
        entry);
  check(cuCtxSynchronize(), entry);
  check(cuMemcpyDtoH(out.data(), dout, out.size() * sizeof(float)), "cuMemcpyDtoH");
  cuMemFree(da);
  cuMemFree(db);
  cuMemFree(dout);
  return out;
}

bool report(const char *what, double maxErr, int64_t bad, int64_t total) {
  std::printf("%s: max |err| = %.3g, %lld of %lld outside tolerance -> %s\n", what, maxErr,
              (long long)bad, (long long)total, bad ? "FAIL" : "ok");
  return bad == 0;
}

bool runAdd(const std::string &ptx, int64_t n) {
  Rng rng{11};
  std::vector<float> a(n), b(n);
  for (auto &v : a) v = float(rng.next() * 100.0);
  for (auto &v : b) v = float(rng.next());
  std::vector<float> out = runElementwise(ptx, "add_f32", 256, a, b);
  double maxErr = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    double err = std::fabs(double(out[i]) - double(a[i] + b[i]));
    maxErr = std::max(maxErr, err);
    bad += err != 0.0;
  }
  char what[64];
  std::snprintf(what, sizeof(what), "add_f32 n=%lld", (long long)n);
  return report(what, maxErr, bad, n);
}

bool runSwiglu(const std::string &ptx, int64_t n) {
  Rng rng{13};
  std::vector<float> g(n), u(n);
  for (auto &v : g) v = float(rng.next() * 8.0);
  for (auto &v : u) v = float(rng.next() * 2.0);
  std::vector<float> out = runElementwise(ptx, "swiglu_f32", 64, g, u);
  double maxErr = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    double ref = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
    double err = std::fabs(double(out[i]) - ref);
    maxErr = std::max(maxErr, err);
    bad += !(err <= 1e-5 * (1.0 + std::fabs(ref)));
  }
  char what[64];
  std::snprintf(what, sizeof(what), "swiglu_f32 n=%lld", (long long)n);
  return report(what, maxErr, bad, n);
}

bool runRope(const std::string &ptx, int64_t T, int32_t nHead, int32_t headDim, int32_t nRot,
             float theta, bool neox) {
  Rng rng{17};
  int64_t width = int64_t(nHead) * headDim;
  std::vector<float> x(T * width);
  for (auto &v : x) v = float(rng.next());
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t)
    pos[t] = int32_t((t * 977) % 4096); // spread over [0, 4096)
  std::vector<float> y = x;
  CUdeviceptr dx = upload(y), dp = upload(pos);
  Memref<1> mx{dx, dx, 0, {T * width}, {1}}, mp{dp, dp, 0, {T}, {1}};
  int32_t neox32 = neox ? 1 : 0;
  std::vector<void *> params;
  mx.push(params);
  mp.push(params);
  params.push_back(&headDim);
  params.push_back(&nRot);
  params.push_back(&theta);
  params.push_back(&neox32);
  CUfunction f = load(ptx, "rope_f32");
  check(cuLaunchKernel(f, unsigned(T), unsigned(nHead), 1, 32, 1, 1, 0, nullptr, params.data(),
                       nullptr),
        "cuLaunchKernel(rope)");
  check(cuCtxSynchronize(), "cuCtxSynchronize(rope)");
  check(cuMemcpyDtoH(y.data(), dx, y.size() * sizeof(float)), "cuMemcpyDtoH");
  std::vector<double> ref(x.begin(), x.end()), tol(x.size(), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int32_t h = 0; h < nHead; ++h)
      for (int32_t i = 0; i < nRot / 2; ++i) {
        double ang = double(pos[t]) * std::pow(double(theta), -2.0 * i / nRot);
        int64_t base = t * width + int64_t(h) * headDim;
        int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + nRot / 2 : 2 * i + 1;
        double x0 = x[base + j0], x1 = x[base + j1];
        ref[base + j0] = x0 * std::cos(ang) - x1 * std::sin(ang);
        ref[base + j1] = x0 * std::sin(ang) + x1 * std::cos(ang);
        double angTol = ang * std::ldexp(1.0, -21) + 1e-6;
        tol[base + j0] = tol[base + j1] = 1e-6 + (std::fabs(x0) + std::fabs(x1)) * angTol;
      }
  double maxErr = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double err = std::fabs(double(y[i]) - ref[i]);
    maxErr = std::max(maxErr, err);
    bad += !(err <= tol[i]);
  }
  char what[128];
  std::snprintf(what, sizeof(what), "rope_f32 %s T=%lld heads=%d head_dim=%d n_rot=%d",
                neox ? "neox" : "norm", (long long)T, nHead, headDim, nRot);
  return report(what, maxErr, bad, int64_t(y.size()));
}

} // namespace

int main(int argc, char **argv) {
  std::string gemm, rms, add, rope, swiglu;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--gemm")
      gemm = argv[i + 1];
    else if (flag == "--rms-norm")
      rms = argv[i + 1];
    else if (flag == "--add")
      add = argv[i + 1];
    else if (flag == "--rope")
      rope = argv[i + 1];
    else if (flag == "--swiglu")
      swiglu = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--gemm f.ptx] [--rms-norm f.ptx] [--add f.ptx] [--rope f.ptx] "
                   "[--swiglu f.ptx]\n",
                   argv[0]);
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
  if (!add.empty())
    ok &= runAdd(add, 100003);
  if (!swiglu.empty())
    ok &= runSwiglu(swiglu, 4864 * 3 + 5);
  if (!rope.empty()) {
    ok &= runRope(rope, 37, 9, 64, 64, 10000.0f, false);    // SmolLM2: llama, norm
    ok &= runRope(rope, 37, 14, 64, 64, 1000000.0f, true);  // Qwen2.5: neox
    ok &= runRope(rope, 5, 4, 128, 96, 10000.0f, true);     // partial rotation
  }
  cuDevicePrimaryCtxRelease(dev);
  return ok ? 0 : 1;
}
