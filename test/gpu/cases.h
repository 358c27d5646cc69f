//===- cases.h - numeric test cases for generated GPU kernels -----*- C++ -*-===//
//
// One description per (kernel, shape): the inputs, the launch, and a float64
// reference check. Two runners execute the same cases:
//   * swz-ptx-check (test/gpu/ptx_check.cpp): PTX through the CUDA driver API,
//     on the H200 (test/gpu/run_gpu_check.sh);
//   * swz-vk-check (test/gpu/vk_check.cpp): SPIR-V through runtime/vulkan, on
//     Mesa lavapipe in CI (ctest vk_check), any Vulkan device elsewhere.
// Plain C++: no MLIR, no CUDA, no Vulkan in this header.
//
// Argument conventions (MLIR's, see codegen/GpuCompiler.h):
//   * PTX: a memref<...xRxT> argument is passed as 3 + 2R scalars (allocated ptr,
//     aligned ptr, offset, sizes[R], strides[R]); the runner builds the descriptor
//     from Buffer::sizes (row-major strides, offset 0).
//   * SPIR-V: memref argument i and scalar argument j are both storage buffers at
//     (set 0, binding = argument index); a scalar's buffer holds its 4 bytes.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_CODEGEN_CHECK_CASES_H
#define SWZ_CODEGEN_CHECK_CASES_H

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace swz::check {

/// A device buffer: its initial bytes and the logical memref shape (elements).
struct Buffer {
  std::vector<uint8_t> bytes;  ///< initial contents (outputs: filled with a sentinel)
  std::vector<int64_t> sizes;  ///< memref sizes, row-major; product * elemBytes == bytes.size()
  int elemBytes = 4;           ///< element size in bytes (1 for i8, 2 for f16, 4 for f32/i32)
};

/// One kernel argument: a memref (index into Case::buffers) or a 32-bit scalar.
struct Arg {
  enum Kind { Memref, I32, F32 } kind = Memref;
  int buffer = -1;  ///< for Memref
  int32_t i32 = 0;  ///< for I32
  float f32 = 0.f;  ///< for F32
  static Arg memref(int b) { return {Memref, b, 0, 0.f}; }
  static Arg i(int32_t v) { return {I32, -1, v, 0.f}; }
  static Arg f(float v) { return {F32, -1, 0, v}; }
};

/// Result of comparing device outputs with the float64 reference.
struct Verdict {
  double maxErr = 0;     ///< max |device - reference| over checked elements
  int64_t bad = 0;       ///< elements outside the stated tolerance
  int64_t checked = 0;   ///< elements compared
  std::string note;      ///< the tolerance, stated (printed with the result)
};

/// One numeric test: run `entry` of module `module` with `args` over `grid`
/// workgroups (the block / workgroup size is the kernel's own launch record),
/// then `check` the final contents of all buffers (index = Case::buffers index).
struct Case {
  std::string module;  ///< gpu.module name = output file stem, e.g. "swz_add"
  std::string entry;   ///< gpu.func name, e.g. "add_f32"
  std::string label;   ///< shape description for the report, e.g. "n=100003"
  std::vector<Buffer> buffers;
  std::vector<Arg> args;
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};  ///< threads per block (PTX launch; SPIR-V has it built in)
  unsigned dynamicSmemBytes = 0;           ///< PTX only
  /// Bytes moved and FLOPs of one launch, for the roofline column of timed runs.
  double bytesMoved = 0, flops = 0;
  /// The FLOPs run on tensor cores (mma.sync / wgmma): the roofline uses the tensor-core
  /// peak instead of the FP32 FMA peak.
  bool tensorCore = false;
  std::function<Verdict(const std::vector<std::vector<uint8_t>> &out)> check;
};

/// Deterministic uniform values in [-1, 1) (64-bit LCG, Knuth's constants).
struct Rng {
  uint64_t s;
  double next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return double(s >> 11) / double(1ull << 53) * 2.0 - 1.0;
  }
};

template <typename T> Buffer makeBuffer(const std::vector<T> &v, std::vector<int64_t> sizes) {
  Buffer b;
  b.bytes.resize(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  b.sizes = std::move(sizes);
  b.elemBytes = int(sizeof(T));
  return b;
}

template <typename T> std::vector<T> asVector(const std::vector<uint8_t> &bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty())
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

/// Accumulates |got - ref| <= tol element checks into a Verdict.
inline void compare(Verdict &v, double got, double ref, double tol) {
  double err = got - ref;
  err = err < 0 ? -err : err;
  if (err > v.maxErr || err != err)
    v.maxErr = err;
  if (!(err <= tol))
    ++v.bad;
  ++v.checked;
}

/// Checks `y`, the kernel's RMSNorm of `rows` rows of width d, against float64:
/// x / sqrt(mean(x^2) + eps) * g, |err| <= 1e-5 (1 + |ref|) (rms_norm_f32, rms_norm_q8x).
inline void compareRmsNorm(Verdict &v, const std::vector<float> &y, const std::vector<float> &x,
                           const std::vector<float> &g, int64_t rows, int64_t d, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i)
      ss += double(x[size_t(r * d + i)]) * double(x[size_t(r * d + i)]);
    const double inv = 1.0 / std::sqrt(ss / double(d) + double(eps));
    for (int64_t i = 0; i < d; ++i) {
      const double ref = double(x[size_t(r * d + i)]) * inv * double(g[size_t(i)]);
      compare(v, y[size_t(r * d + i)], ref, 1e-5 * (1.0 + std::fabs(ref)));
    }
  }
}

/// Checks `a`, the kernel's SwiGLU, against float64 g / (1 + e^-g) * u, |err| <= 1e-5
/// (1 + |ref|) (swiglu_f32, swiglu_q8x).
inline void compareSwiglu(Verdict &v, const std::vector<float> &a, const std::vector<float> &g,
                          const std::vector<float> &u) {
  for (size_t i = 0; i < a.size(); ++i) {
    const double ref = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
    compare(v, a[i], ref, 1e-5 * (1.0 + std::fabs(ref)));
  }
}

/// Case groups, one per file (cases_*.cpp). `format` is "ptx" or "spv": a group
/// leaves out kernels that do not exist for that format (e.g. mma.sync GEMM on SPIR-V).
/// Every test/gpu/cases*.cpp is compiled into both runners (CMake globs them).
std::vector<Case> elementwiseCases(const std::string &format);  // add, swiglu, rms_norm, rope
std::vector<Case> gemvCases(const std::string &format);         // dequantizing GEMV (cases_gemv.cpp)
std::vector<Case> attentionCases(const std::string &format);    // attention (cases_attention.cpp)
std::vector<Case> gemmCases(const std::string &format);         // prefill GEMM (cases_gemm.cpp)

/// Every group's cases for `format`, in the order elementwise, gemv, attention, gemm.
/// A group whose cases_*.cpp is not in the build (yet) is left out: cases.cpp
/// references the group functions weakly, and allCases skips a null one.
std::vector<Case> allCases(const std::string &format);

/// Names of the groups allCases found linked in, e.g. {"elementwise", "gemv"}.
std::vector<std::string> linkedCaseGroups();

} // namespace swz::check

#endif // SWZ_CODEGEN_CHECK_CASES_H
