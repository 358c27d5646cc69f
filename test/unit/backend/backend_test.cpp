// Backend::launch on real package kernels, for each backend: "spirv" on Mesa lavapipe
// (every CI machine), "sm_90" where an NVIDIA GPU is (skipped elsewhere; SWZ_REQUIRE_CUDA=1
// fails instead). The package is a one-layer Q8_0 model compiled by swizzlec (see
// CMakeLists.txt) or given by $SWZ_SPIRV_PACKAGE / $SWZ_CUDA_PACKAGE.
//
// Covered: add_f32, rms_norm_f32 and the GEMVs against float64 references with every
// memref at a non-zero offset of a larger buffer (backend_check.h); the ordering rules of
// backend.h (download after launches without synchronize, upload between launches,
// copy / fill32 in stream order, hundreds of launches in flight); and the errors a
// misusing executor gets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "backend/backend.h"
#include "backend/backend_check.h"
#include "package/package.h"
#include "vulkan/vulkan_backend.h"
#include "vulkan/vulkan_device.h"

namespace {

using swz::backend::Arg;
using swz::backend::Backend;
using swz::backend::Buffer;
using swz::backend::Error;
namespace fs = std::filesystem;
namespace check = swz::backend::check;

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::string(v) == value;
}

std::string swizzlec() {
  if (const char* e = std::getenv("SWZ_SWIZZLEC"); e && *e) return e;
#ifdef SWZ_SWIZZLEC_EXE
  return SWZ_SWIZZLEC_EXE;
#else
  return "";
#endif
}

/// A package for `target`: $SWZ_SPIRV_PACKAGE / $SWZ_CUDA_PACKAGE, or made once per
/// process with swizzlec. Empty (and `why` set) when neither is available.
/// The scratch directory of this process's packages, removed at exit.
struct ScratchDir {
  fs::path path;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

std::string package_for(const std::string& target, std::string& why) {
  static std::map<std::string, std::string> made;
  static ScratchDir scratch;
  if (auto it = made.find(target); it != made.end()) return it->second;
  const char* given = std::getenv(target == "spirv" ? "SWZ_SPIRV_PACKAGE" : "SWZ_CUDA_PACKAGE");
  if (given && *given) return made[target] = given;
  const std::string swzc = swizzlec();
  if (swzc.empty()) {
    why = "no swizzlec with GPU codegen (configure with SWZ_BUILD_COMPILER=ON or -DSWZ_SWIZZLEC=..., or set "
          "SWZ_SWIZZLEC / SWZ_SPIRV_PACKAGE)";
    return "";
  }
  const fs::path dir = fs::path(testing::TempDir()) / ("swz_backend_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  scratch.path = dir;
  const fs::path gguf = dir / "tiny_q8_0.gguf", pkg = dir / ("tiny_" + target + ".swz");
  if (!fs::exists(gguf)) {
    const std::string cmd = "'" + swzc + "' synth --preset smollm2-135m --n-layer 1 --n-vocab 512 --type q8_0 -j 1 -o '" +
                            gguf.string() + "' > /dev/null";
    if (std::system(cmd.c_str()) != 0) {
      why = "failed: " + cmd;
      return "";
    }
  }
  // SWZ_FUSE_RESIDUAL=0: the residual adds stay add_f32 launches, the kernel the ordering
  // tests below chain (fused, a PTX package has no add_f32 at all: the GEMMs and GEMVs
  // add the residual in their epilogues).
  const std::string cmd = "SWZ_FUSE_RESIDUAL=0 '" + swzc + "' compile '" + gguf.string() + "' --target " + target +
                          " -o '" + pkg.string() + "' > /dev/null";
  if (std::system(cmd.c_str()) != 0) {
    why = "failed: " + cmd;
    return "";
  }
  return made[target] = pkg.string();
}

class BackendTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string target = GetParam();
    try {  // the device first: no package is compiled for a machine without one
      // spirv: lavapipe unless $SWZ_VK_DEVICE names another device.
      const char* vk = std::getenv("SWZ_VK_DEVICE");
      b_ = swz::backend::create_backend(target, target != "spirv" ? "" : vk && *vk ? vk : "llvmpipe");
    } catch (const Error& e) {
      if (target != "spirv" && !env_is("SWZ_REQUIRE_CUDA", "1")) GTEST_SKIP() << e.what();
      FAIL() << e.what();
    }
    std::string why;
    dir_ = package_for(target, why);
    if (dir_.empty()) {
      if (env_is("SWZ_REQUIRE", "1")) FAIL() << why << " (SWZ_REQUIRE=1)";
      GTEST_SKIP() << why;
    }
    m_ = swz::package::read_manifest(dir_);
    b_->load_kernels(m_, dir_);
  }

  /// Entry of the kernel whose launch.function is `fn`.
  std::string entry(const std::string& fn) {
    for (const auto& k : m_.kernels)
      if (k.launch.value("function", "") == fn) return k.entry;
    ADD_FAILURE() << "the package has no " << fn;
    return "";
  }

  static Arg mem(Buffer b, size_t offset, int64_t floats) {
    Arg a;
    a.kind = Arg::Memref;
    a.buffer = b;
    a.offset = offset;
    a.bytes = size_t(floats) * 4;
    a.rank = 1;
    a.sizes[0] = floats;
    return a;
  }
  static Arg i32(int32_t v) {
    Arg a;
    a.kind = Arg::I32;
    a.i32 = v;
    return a;
  }

  /// add_f32: out = a + b over n floats, all in `buf` at the given byte offsets.
  void add(Buffer buf, size_t a, size_t b, size_t out, int n) {
    Arg args[] = {mem(buf, a, n), mem(buf, b, n), mem(buf, out, n), i32(n)};
    const std::string e = entry("add_f32");
    b_->launch(b_->kernel_index(e), check::grid_of(m_, e, {{"n", n}}), 0, args);
  }

  std::vector<float> get(Buffer buf, size_t offset, int n) {
    std::vector<float> v(static_cast<size_t>(n));
    b_->download(v.data(), buf, offset, size_t(n) * 4);
    return v;
  }

  std::string dir_;
  swz::package::Manifest m_;
  std::unique_ptr<Backend> b_;
};

TEST_P(BackendTest, KernelsMatchFloat64ReferenceAtNonZeroOffsets) {
  std::vector<check::Result> results = check::run_checks(*b_, m_);
  std::set<std::string> kernels;
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok()) << r.kernel << " " << r.label << ": " << (r.error.empty() ? check::format_table({r}) : r.error);
    kernels.insert(r.kernel.substr(r.kernel.find('.') + 1));
  }
  EXPECT_TRUE(kernels.count("add_f32"));
  EXPECT_TRUE(kernels.count("rms_norm_f32"));
  EXPECT_TRUE(kernels.count("matmul_q8_0"));
  std::printf("%s", check::format_table(results).c_str());
}

TEST_P(BackendTest, DownloadSeesEveryEarlierLaunch) {
  // 300 dependent launches (more than one Vulkan batch): acc += b each time, no synchronize().
  const int n = 1000;
  Buffer buf = b_->alloc(3 * 4096 + 256, "chain");
  std::vector<float> a(n), bv(n);
  for (int i = 0; i < n; ++i) a[size_t(i)] = float(i), bv[size_t(i)] = 0.5f;
  b_->upload(buf, 256, a.data(), n * 4);
  b_->upload(buf, 256 + 4096, bv.data(), n * 4);
  for (int r = 0; r < 300; ++r) add(buf, 256, 256 + 4096, 256, n);  // in place: out aliases a
  std::vector<float> got = get(buf, 256, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], float(i) + 150.f) << i;
  b_->free(buf);
}

TEST_P(BackendTest, UploadBetweenLaunchesIsOrdered) {
  // add(a, b -> o1); upload b'; add(a, b' -> o2): o1 must use the old b. Both a small
  // upload (recorded in the stream on Vulkan) and a large one (waits for pending work).
  for (int n : {1024, 100000}) {
    const size_t s = ((size_t(n) * 4 + 255) / 256) * 256;
    Buffer buf = b_->alloc(256 + 4 * s, "upload order");
    std::vector<float> a(size_t(n), 1.f), b1(size_t(n), 2.f), b2(size_t(n), 10.f);
    b_->upload(buf, 256, a.data(), a.size() * 4);
    b_->upload(buf, 256 + s, b1.data(), b1.size() * 4);
    add(buf, 256, 256 + s, 256 + 2 * s, n);
    b_->upload(buf, 256 + s, b2.data(), b2.size() * 4);
    b1.assign(size_t(n), -1.f);  // upload() copied its source: reusing it changes nothing
    add(buf, 256, 256 + s, 256 + 3 * s, n);
    std::vector<float> o1 = get(buf, 256 + 2 * s, n), o2 = get(buf, 256 + 3 * s, n);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(o1[size_t(i)], 3.f) << "n=" << n << " i=" << i;
      ASSERT_EQ(o2[size_t(i)], 11.f) << "n=" << n << " i=" << i;
    }
    b_->free(buf);
  }
}

TEST_P(BackendTest, CopyAndFillAreStreamOrdered) {
  const int n = 4096;
  Buffer x = b_->alloc(256 + n * 4 * 3, "x"), y = b_->alloc(n * 4 + 512, "y");
  std::vector<float> ones(n, 1.f);
  b_->upload(x, 256, ones.data(), n * 4);
  b_->fill32(x, 256 + n * 4, n * 4, 0x40000000u);  // 2.0f
  add(x, 256, 256 + n * 4, 256 + 2 * n * 4, n);     // 3.0
  b_->copy(y, 256, x, 256 + 2 * n * 4, n * 4);
  add(x, 256 + 2 * n * 4, 256 + 2 * n * 4, 256 + 2 * n * 4, n);  // 6.0, after the copy read 3.0
  std::vector<float> got = get(y, 256, n), after = get(x, 256 + 2 * n * 4, n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(got[size_t(i)], 3.f) << i;
    ASSERT_EQ(after[size_t(i)], 6.f) << i;
  }
  b_->synchronize();
  b_->free(x);
  b_->free(y);
}

TEST_P(BackendTest, MisuseIsAnError) {
  Buffer buf = b_->alloc(4096, "misuse");
  const std::string e = entry("add_f32");
  const int k = b_->kernel_index(e);
  const auto grid = check::grid_of(m_, e, {{"n", 16}});
  auto expect_error = [&](std::vector<Arg> args, std::array<uint32_t, 3> g, uint32_t smem, const std::string& words) {
    try {
      b_->launch(k, g, smem, args);
      ADD_FAILURE() << "expected an Error mentioning '" << words << "'";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << err.what();
    }
  };
  expect_error({mem(buf, 256, 16), mem(buf, 512, 16), mem(buf, 768, 16)}, grid, 0, "3 arguments for a signature of 4");
  expect_error({mem(buf, 256, 16), i32(1), mem(buf, 768, 16), i32(16)}, grid, 0, "argument 1 is an i32");
  expect_error({mem(buf, 256, 16), mem(buf, 4000, 100), mem(buf, 768, 16), i32(16)}, grid, 0, "exceed its buffer");
  expect_error({mem(buf, 256, 16), mem(buf, 258, 16), mem(buf, 768, 16), i32(16)}, grid, 0, "not a multiple of its element size");
  Arg too_big = mem(buf, 256, 16);
  too_big.sizes[0] = 17;
  expect_error({too_big, mem(buf, 512, 16), mem(buf, 768, 16), i32(16)}, grid, 0, "views 17 elements");
  expect_error({mem(buf, 256, 16), mem(buf, 512, 16), mem(buf, 768, 16), i32(16)}, {0, 1, 1}, 0, "grid[0] = 0");
  expect_error({mem(buf, 256, 16), mem(buf, 512, 16), mem(buf, 768, 16), i32(16)}, {1, 1, 1u << 30}, 0, "grid[2]");
  EXPECT_THROW(b_->kernel_index("no.such_kernel"), Error);
  EXPECT_THROW(b_->alloc(0, "nothing"), Error);
  EXPECT_THROW(b_->upload(buf, 4000, std::vector<float>(100).data(), 400), Error);
  EXPECT_THROW(b_->fill32(buf, 2, 8, 0), Error);
  EXPECT_THROW(b_->copy(buf, 0, buf, 8, 16), Error);  // overlapping
  b_->free(buf);
  expect_error({mem(buf, 256, 16), mem(buf, 512, 16), mem(buf, 768, 16), i32(16)}, grid, 0, "no live buffer");
  EXPECT_THROW(b_->free(buf), Error);  // twice
  b_->synchronize();
}

TEST_P(BackendTest, OutOfMemoryNamesSizeAndPurpose) {
  try {
    Buffer b = b_->alloc(size_t(1) << 46, "weight output.weight");  // 64 TiB
    b_->free(b);
    GTEST_SKIP() << "the device allocated 64 TiB";
  } catch (const swz::backend::OutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("65536.0 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("weight output.weight"), std::string::npos) << msg;
  } catch (const Error& e) {
    ADD_FAILURE() << "an Error that is not OutOfMemory: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, BackendTest, testing::Values("spirv", "sm_90"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

// ---- Vulkan only: the storage-buffer offset rule and the stream's batching.

TEST(VulkanBackend, OffsetBelowStorageAlignmentIsAClearError) {
  std::string why;
  const std::string dir = package_for("spirv", why);
  if (dir.empty()) {
    if (env_is("SWZ_REQUIRE", "1")) FAIL() << why;
    GTEST_SKIP() << why;
  }
  swz::vulkan::VulkanBackend b("llvmpipe");
  const auto m = swz::package::read_manifest(dir);
  b.load_kernels(m, dir);
  const uint64_t align = b.device().info().min_storage_offset_alignment;
  if (align <= 4) GTEST_SKIP() << "this device binds storage buffers at any 4-byte offset";
  Buffer buf = b.alloc(4096, "misaligned");
  Arg x;
  x.kind = Arg::Memref;
  x.buffer = buf;
  x.rank = 1;
  x.sizes[0] = 16;
  x.bytes = 64;
  Arg a = x, bb = x, out = x, n;
  a.offset = 256;
  bb.offset = 256 + 4;  // a multiple of sizeof(f32), not of the descriptor alignment
  out.offset = 512;
  n.kind = Arg::I32;
  n.i32 = 16;
  std::vector<Arg> args = {a, bb, out, n};
  try {
    b.launch(b.kernel_index("spirv.add_f32"), {1, 1, 1}, 0, args);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("minStorageBufferOffsetAlignment " + std::to_string(align)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("argument 1"), std::string::npos) << e.what();
  }
  try {
    b.launch(b.kernel_index("spirv.add_f32"), {1, 1, 1}, 1024, std::vector<Arg>{a, a, out, n});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic shared memory"), std::string::npos) << e.what();
  }
}

}  // namespace
