// runtime/cuda without a GPU: what a machine without an NVIDIA driver sees, the driver
// symbol table checked against cuda.h and against the exports of the toolkit's stub
// libcuda.so, the compute-capability check, and the manifest argument-type parser
// shared with runtime/vulkan. The kernels themselves run in backend_test (sm_90 instance,
// on a GPU machine) and in swz-backend-check on the H200.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "backend/backend.h"
#include "backend/kernel_record.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_driver.h"

namespace {

using swz::backend::Arg;
using swz::backend::Error;

[[maybe_unused]] bool require() {
  const char* r = std::getenv("SWZ_REQUIRE");
  return r && std::string(r) == "1";
}

bool driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return h != nullptr;  // not closed: see cuda_driver.h
}

TEST(CudaBackend, WithoutDriverCreateBackendNamesLibcuda) {
  if (driver_present()) GTEST_SKIP() << "libcuda.so.1 is installed here: backend_test's sm_90 instance covers this machine";
  for (const char* target : {"sm_80", "sm_90"}) {
    try {
      swz::backend::create_backend(target);
      FAIL() << "expected swz::backend::Error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("cuda: libcuda.so.1 not found (no NVIDIA driver)", 0), 0u) << msg;
      EXPECT_NE(msg.find("--target spirv"), std::string::npos) << msg;
    }
  }
}

TEST(CudaBackend, UnknownTargetsAreErrors) {
  try {
    swz::backend::create_backend("rocm");
    FAIL();
  } catch (const Error& e) {
    // The message lists what the registered backends run.
    EXPECT_EQ(std::string(e.what()).rfind("no backend for package target 'rocm' (known: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu -> cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm_80, sm_86, sm_89, sm_90 -> cuda"), std::string::npos) << e.what();
  }
  // cpu packages run on the cpu backend, through the same interface.
  EXPECT_EQ(swz::backend::create_backend("cpu", "", 1)->info().backend, "cpu");
  EXPECT_EQ(swz::backend::kv_format("sm_90"), "sm_90 f16 page64 per-layer-tiles");
  EXPECT_NE(swz::backend::kv_format("cpu"), swz::backend::kv_format("sm_90"));
}

TEST(CudaSymbols, NamesAreUniqueAndVersionedWhereTheDriverVersionsThem) {
  std::set<std::string> apis, symbols;
  for (const auto& [api, symbol] : swz::cuda::symbol_names()) {
    EXPECT_TRUE(apis.insert(api).second) << api;
    EXPECT_TRUE(symbols.insert(symbol).second) << symbol;
    EXPECT_EQ(std::string(symbol).rfind(api, 0), 0u) << symbol << " is not " << api << " or a version of it";
  }
  // The ones whose unversioned export is the legacy 32-bit / pre-4.0 ABI (CUDA 13 cuda.h).
  std::set<std::string> v2 = {"cuMemAlloc_v2",        "cuMemFree_v2",         "cuMemGetInfo_v2",
                              "cuDeviceTotalMem_v2",  "cuStreamDestroy_v2",   "cuLinkCreate_v2",
                              "cuLinkAddData_v2",     "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
                              "cuMemcpyDtoDAsync_v2", "cuDevicePrimaryCtxRelease_v2"};
  for (const std::string& s : v2) EXPECT_TRUE(symbols.count(s)) << s;
}

#if SWZ_HAVE_CUDA_H
}  // namespace
std::vector<std::vector<std::string>> swz_cuda_header_names();
int swz_cuda_header_version();
namespace {

TEST(CudaSymbols, MatchCudaHeaderDefines) {
  auto rows = swz_cuda_header_names();
  ASSERT_EQ(rows.size(), swz::cuda::symbol_names().size());
  for (const auto& r : rows) EXPECT_EQ(r[1], r[2]) << "cuda.h (CUDA_VERSION " << swz_cuda_header_version() << ") maps " << r[0]
                                                   << " to " << r[1] << "; cuda_symbols.h asks for " << r[2];
}
#else
TEST(CudaSymbols, MatchCudaHeaderDefines) {
  if (require()) FAIL() << "cuda.h not found at configure time (SWZ_REQUIRE=1): install the CUDA toolkit headers";
  GTEST_SKIP() << "cuda.h not found at configure time";
}
#endif

#ifdef SWZ_CUDA_STUB
TEST(CudaSymbols, EveryNameIsExportedByTheToolkitStub) {
  // The stub libcuda.so exports the driver's whole API; dlopen it by path.
  std::unique_ptr<swz::cuda::Driver> d = swz::cuda::Driver::load(SWZ_CUDA_STUB);
  ASSERT_TRUE(d);
  EXPECT_NE(d->cuMemAlloc, nullptr);
  EXPECT_NE(d->cuLaunchKernel, nullptr);
}

TEST(CudaBackend, StubLibraryIsNotADriver) {
  if (driver_present()) GTEST_SKIP() << "a real driver is loaded in this process; the stub would not be used";
  try {
    swz::cuda::CudaBackend b("", SWZ_CUDA_STUB);
    FAIL() << "expected swz::backend::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("stub"), std::string::npos) << msg;
  }
}
#else
TEST(CudaSymbols, EveryNameIsExportedByTheToolkitStub) {
  if (require()) FAIL() << "the CUDA toolkit's stub libcuda.so was not found at configure time (SWZ_REQUIRE=1)";
  GTEST_SKIP() << "no stub libcuda.so";
}
#endif

TEST(CudaBackend, MissingSymbolNamesIt) {
  // libm is a shared library without any cu* symbol.
  try {
    swz::cuda::Driver::load("libm.so.6");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no cuGetErrorName"), std::string::npos) << e.what();
  }
}

TEST(CudaArch, ArchSpecificPtxRunsOnItsArchitectureOnly) {
  using swz::cuda::ptx_arch_mismatch;
  const std::string wgmma = "//\n.version 8.0\n.target sm_90a\n.address_size 64\n";
  EXPECT_EQ(ptx_arch_mismatch(wgmma, "sm_90"), "");
  EXPECT_EQ(ptx_arch_mismatch(".version 8.0\n.target sm_90\n", "sm_120"), "");  // forward JIT
  EXPECT_EQ(ptx_arch_mismatch(".version 7.8\n.target sm_89\n", "sm_100"), "");
  EXPECT_EQ(ptx_arch_mismatch(wgmma, "sm_100"),
            "is PTX for sm_90a, which runs on sm_90 devices only (architecture-specific instructions such as "
            "wgmma); this device is sm_100: recompile the model with swizzlec compile --target sm_89 (mma.sync "
            "kernels, PTX that every GPU from sm_89 up runs)");
  EXPECT_NE(ptx_arch_mismatch(wgmma, "sm_89"), "");
}

TEST(CudaArch, ForwardCompatiblePtxOnly) {
  using swz::cuda::arch_mismatch;
  EXPECT_EQ(arch_mismatch("sm_90", 9, 0, "NVIDIA H200"), "");
  EXPECT_EQ(arch_mismatch("sm_80", 9, 0, "NVIDIA H200"), "");  // PTX JIT runs forward
  EXPECT_EQ(arch_mismatch("sm_80", 8, 6, "NVIDIA RTX A6000"), "");
  EXPECT_EQ(arch_mismatch("sm_90", 8, 0, "NVIDIA A100"),
            "package compiled for sm_90; device NVIDIA A100 is sm_80: recompile with swizzlec compile --target sm_80");
  EXPECT_NE(arch_mismatch("sm_80", 7, 5, "Tesla T4").find("--target spirv"), std::string::npos);
  // The suggested target is the newest one swizzlec knows that the device runs.
  EXPECT_EQ(arch_mismatch("sm_86", 8, 6, "NVIDIA GeForce RTX 3050"), "");
  EXPECT_EQ(arch_mismatch("sm_86", 8, 9, "NVIDIA L4"), "");
  EXPECT_EQ(arch_mismatch("sm_89", 12, 0, "NVIDIA GeForce RTX 5090"), "");  // sm_120 runs sm_89 PTX
  EXPECT_EQ(arch_mismatch("sm_90", 8, 9, "NVIDIA GeForce RTX 4090"),
            "package compiled for sm_90; device NVIDIA GeForce RTX 4090 is sm_89: recompile with swizzlec compile --target sm_89");
  EXPECT_EQ(arch_mismatch("sm_89", 8, 6, "NVIDIA GeForce RTX 3050"),
            "package compiled for sm_89; device NVIDIA GeForce RTX 3050 is sm_86: recompile with swizzlec compile --target sm_86");
  EXPECT_EQ(arch_mismatch("sm_86", 8, 0, "NVIDIA A100"),
            "package compiled for sm_86; device NVIDIA A100 is sm_80: recompile with swizzlec compile --target sm_80");
  EXPECT_EQ(arch_mismatch("sm_90a", 9, 0, "NVIDIA H100"), "");
  EXPECT_NE(arch_mismatch("sm_90a", 10, 0, "NVIDIA B200"), "");  // arch-specific: exact only
  EXPECT_NE(arch_mismatch("spirv", 9, 0, "NVIDIA H200"), "");
}

TEST(KernelRecord, ArgumentTypes) {
  using swz::backend::parse_arg_type;
  EXPECT_EQ(parse_arg_type("i32").kind, Arg::I32);
  EXPECT_EQ(parse_arg_type("f32").kind, Arg::F32);
  auto m = parse_arg_type("memref<?xf32>");
  EXPECT_EQ(m.kind, Arg::Memref);
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.elem_bytes, 4u);
  m = parse_arg_type("memref<?x?xf16>");
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.elem_bytes, 2u);
  m = parse_arg_type("memref<?xvector<4xf32>>");
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.elem_bytes, 16u);
  EXPECT_EQ(parse_arg_type("memref<?xi8>").elem_bytes, 1u);
  EXPECT_THROW(parse_arg_type("memref<4x8xi32, 1>"), Error);  // the launch contract binds dynamic memrefs only
  EXPECT_THROW(parse_arg_type("index"), Error);
  EXPECT_THROW(parse_arg_type("memref<?xcomplex<f32>>"), Error);
  EXPECT_THROW(parse_arg_type("memref<?x?x?x?x?xf32>"), Error);
}

}  // namespace
