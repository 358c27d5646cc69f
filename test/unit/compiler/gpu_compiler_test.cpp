// Tests of swz::codegen::compileGpuKernels on the kernels in codegen/kernels/.
#include "codegen/GpuCompiler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

using swz::codegen::CompiledKernel;
using swz::codegen::compileGpuKernels;

namespace {

/// The shipped schedule of `target` (compiler/schedules/<target>.json): gemm_f16.mlir is a
/// tile spec whose kernel the schedule generates.
const swz::schedule::TargetSchedule *shipped(const std::string &target) {
  static std::map<std::string, swz::schedule::TargetSchedule> cache;
  auto it = cache.find(target);
  if (it == cache.end())
    it = cache.emplace(target, swz::schedule::loadSchedule(std::string(SWZ_SOURCE_DIR) +
                                                           "/compiler/schedules/" + target +
                                                           ".json"))
             .first;
  return &it->second;
}

/// The std::runtime_error message of compiling `source` for `target`; a test failure (and
/// "") when it compiles.
std::string compileError(const std::string &source, const std::string &target,
                         const swz::schedule::TargetSchedule *schedule = nullptr) {
  try {
    compileGpuKernels(source, target, "", schedule);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected compileGpuKernels to fail";
  return "";
}

std::string kernelSource(const char *name) {
  std::ifstream in(std::string(SWZ_SOURCE_DIR) + "/codegen/kernels/" + name,
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GpuCompiler, GemmToPtx) {
  // The tensor-core prefill GEMM every GPU package launches (codegen/kernels/gemm_f16.mlir),
  // generated from the sm_80 schedule: mma.sync.
  std::vector<CompiledKernel> ks =
      compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_80", "", shipped("sm_80"));
  ASSERT_EQ(ks.size(), 1u);
  const CompiledKernel &k = ks[0];
  EXPECT_EQ(k.module, "swz_gemm_f16");
  EXPECT_EQ(k.entry, "gemm_f16");
  EXPECT_EQ(k.format, "ptx");
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{128, 1, 1}));
  EXPECT_EQ(k.grid, "ceil(N/64), ceil(T/64), 1");
  // (x, w, y, bias, res, flags)
  ASSERT_EQ(k.arguments.size(), 6u);
  EXPECT_EQ(k.arguments[0], "memref<?x?xf16>");
  EXPECT_EQ(k.arguments[2], "memref<?x?xf32>");
  EXPECT_EQ(k.arguments[4], "memref<?x?xf32>");
  EXPECT_EQ(k.arguments[5], "i32");
  EXPECT_NE(k.binary.find(".target sm_80"), std::string::npos);
  EXPECT_NE(k.binary.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
            std::string::npos);
  EXPECT_NE(k.binary.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos);
  EXPECT_NE(k.binary.find("cp.async.cg.shared.global"), std::string::npos);
  // The swizzle was materialised (the XOR permutation is in the addressing).
  EXPECT_NE(k.binary.find("xor.b"), std::string::npos);
  EXPECT_EQ(k.binary.back(), '\n'); // no trailing NUL
}

TEST(GpuCompiler, GemmToPtxWithWgmmaOnSm90) {
  // The sm_90 schedule: wgmma.m64n64k16 reading the shared tiles by descriptor, PTX for the
  // schedule's arch sm_90a (wgmma is Hopper-specific).
  std::vector<CompiledKernel> ks =
      compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_90", "", shipped("sm_90"));
  ASSERT_EQ(ks.size(), 1u);
  const CompiledKernel &k = ks[0];
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{128, 1, 1}));
  EXPECT_EQ(k.grid, "ceil(N/64), ceil(T/64), 1");
  EXPECT_NE(k.binary.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(k.binary.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
  EXPECT_NE(k.binary.find("fence.proxy.async.shared::cta"), std::string::npos);
  EXPECT_EQ(k.binary.find("mma.sync.aligned"), std::string::npos);
  EXPECT_EQ(k.binary.find("ldmatrix"), std::string::npos);
  // The copies into the 128-byte-swizzled tiles still carry the XOR.
  EXPECT_NE(k.binary.find("xor.b"), std::string::npos);
}

TEST(GpuCompiler, GemmSmemTilesAreConflictFree) {
  // Both staged tiles (x and W, 64 rows of 64 f16: 128-byte rows) carry Swizzle<3,3,3>:
  // ldmatrix.x4 and cp.async.16 each take one wavefront per 8-lane phase.
  std::vector<CompiledKernel> ks =
      compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_90", "", shipped("sm_90"));
  ASSERT_EQ(ks[0].smemTiles.size(), 2u);
  for (const auto &t : ks[0].smemTiles) {
    EXPECT_EQ(t.ldmatrixDegree, 1u) << t.name;
    EXPECT_EQ(t.cpAsyncDegree, 1u) << t.name;
    EXPECT_TRUE(t.claimedConflictFree) << t.name;
    EXPECT_NE(t.layout.find("Swizzle<3,3,3>"), std::string::npos) << t.layout;
  }
}

TEST(GpuCompiler, ContradictedConflictFreeClaimFailsCompilation) {
  // A schedule without the swizzle leaves the same tiles row-major with 128-byte rows:
  // ldmatrix.x4 is 8-way conflicted, so its `conflict_free` claim must stop compilation.
  swz::schedule::TargetSchedule naive = *shipped("sm_80");
  naive.gemm.swizzle.reset();
  const std::string e = compileError(kernelSource("gemm_f16.mlir"), "sm_80", &naive);
  EXPECT_NE(e.find("claims conflict_free but ldmatrix.x4 on smem tile (192x64 of 2-byte "
                   "elements (128-byte rows, row-major)) is 8-way bank-conflicted"),
            std::string::npos)
      << e;
}

TEST(GpuCompiler, TileSpecsNeedASchedule) {
  for (const char *source :
       {"gemm_f16.mlir", "attention_f16kv_mma.mlir", "attention_decode.mlir", "gemv_q8x.mlir"}) {
    const std::string e = compileError(kernelSource(source), "sm_90");
    EXPECT_NE(e.find("swz.gemv_tile): compiling it needs the target's schedule"),
              std::string::npos)
        << source << ": " << e;
  }
  // The f32 GEMVs are tile specs on every target, SPIR-V's included.
  const std::string e = compileError(kernelSource("gemv_q4_0.mlir"), "spirv");
  EXPECT_NE(e.find("compiling it needs the target's schedule"), std::string::npos) << e;
}

TEST(GpuCompiler, AttentionToPtxFromTheSchedule) {
  // The tensor-core prefill attention (codegen/kernels/attention_f16kv_mma.mlir: two tile
  // specs in one gpu.module), generated from the sm_80 schedule: both entries in one PTX
  // module, the launch records the runtime's kernel table expects.
  std::vector<CompiledKernel> ks = compileGpuKernels(kernelSource("attention_f16kv_mma.mlir"),
                                                     "sm_80", "", shipped("sm_80"));
  ASSERT_EQ(ks.size(), 2u);
  std::map<std::string, const CompiledKernel *> byEntry;
  for (const CompiledKernel &k : ks)
    byEntry[k.entry] = &k;
  for (auto [entry, hd] : {std::pair<std::string, int64_t>{"flash_attention_f16kv_mma", 64},
                           {"flash_attention_f16kv_mma_hd128", 128}}) {
    ASSERT_TRUE(byEntry.count(entry)) << entry;
    const CompiledKernel &k = *byEntry[entry];
    EXPECT_EQ(k.module, "swz_attention_f16kv_mma");
    EXPECT_EQ(k.block, (std::array<int64_t, 3>{128, 1, 1}));
    EXPECT_EQ(k.grid, "ceil(T*n_head/n_head_kv/64), n_head_kv, n_split");
    EXPECT_EQ(k.schedule, "attention"); // the package writer prefixes the target
    ASSERT_EQ(k.arguments.size(), 13u);
    EXPECT_EQ(k.arguments[1], "memref<?xf16>");
    EXPECT_EQ(k.arguments[12], "f32");
    EXPECT_EQ(k.workgroupBytes, 3 * 64 * hd * 2) << entry;
    ASSERT_EQ(k.smemTiles.size(), 3u) << entry;
    for (const auto &t : k.smemTiles) {
      EXPECT_TRUE(t.claimedConflictFree) << t.name;
      EXPECT_EQ(t.ldmatrixDegree, 1u) << t.name;
      EXPECT_EQ(t.cpAsyncDegree, 1u) << t.name;
      EXPECT_EQ(t.cols, hd) << t.name;
    }
    EXPECT_NE(k.binary.find("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"),
              std::string::npos);
    EXPECT_NE(k.binary.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
              std::string::npos);
  }

  // Two warps: 32 query rows a block; the launch record and the Q tile follow.
  swz::schedule::TargetSchedule s = *shipped("sm_80");
  s.attention.warps = 2;
  s.attention.blockQ = 32;
  ks = compileGpuKernels(kernelSource("attention_f16kv_mma.mlir"), "sm_80", "", &s);
  ASSERT_EQ(ks.size(), 2u);
  for (const CompiledKernel &k : ks) {
    EXPECT_EQ(k.block, (std::array<int64_t, 3>{64, 1, 1})) << k.entry;
    EXPECT_EQ(k.grid, "ceil(T*n_head/n_head_kv/32), n_head_kv, n_split") << k.entry;
    EXPECT_NE(k.binary.find(".maxntid 64, 1, 1"), std::string::npos) << k.entry;
  }

  // What the generator does not emit is refused, naming the field.
  s.attention.stages = 2;
  const std::string e = compileError(kernelSource("attention_f16kv_mma.mlir"), "sm_80", &s);
  EXPECT_NE(e.find("@flash_attention_f16kv_mma: stages must be 1"), std::string::npos) << e;
}

TEST(GpuCompiler, DecodeAttentionToPtxFromTheSchedule) {
  // The split-K decode attention (codegen/kernels/attention_decode.mlir: a tile spec with
  // `decode`), generated from the sm_80 schedule's attention.decode: the launch record the
  // runtime's kernel table expects, no staged tiles (nothing for swz.schedule to check).
  std::vector<CompiledKernel> ks = compileGpuKernels(kernelSource("attention_decode.mlir"),
                                                     "sm_80", "", shipped("sm_80"));
  ASSERT_EQ(ks.size(), 1u);
  const CompiledKernel &k = ks[0];
  EXPECT_EQ(k.module, "swz_attention_decode");
  EXPECT_EQ(k.entry, "flash_decode_f16kv_hd128");
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(k.grid, "n_seq*seq_tiles, n_head_kv, n_split");
  EXPECT_EQ(k.schedule, "");
  EXPECT_TRUE(k.smemTiles.empty());
  ASSERT_EQ(k.arguments.size(), 15u);
  EXPECT_EQ(k.arguments[7], "memref<?xi32>");
  EXPECT_EQ(k.arguments[14], "f32");
  // dec_o (8 warps x 8 rows x 128 f32), dec_m, dec_l (64 f32), dec_last (one i32).
  EXPECT_EQ(k.workgroupBytes, 8 * 8 * 128 * 4 + 2 * 64 * 4 + 4);
  EXPECT_NE(k.binary.find("fence.acq_rel.gpu"), std::string::npos);
  EXPECT_EQ(k.binary.find(".minnctapersm"), std::string::npos);

  // A schedule edit: 4 warps, 2 keys in flight, 2 workgroups an SM.
  swz::schedule::TargetSchedule s = *shipped("sm_80");
  s.attention.decode->warps = 4;
  s.attention.decode->keysInFlight = 2;
  s.attention.decode->minCtasPerSm = 2;
  ks = compileGpuKernels(kernelSource("attention_decode.mlir"), "sm_80", "", &s);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].block, (std::array<int64_t, 3>{128, 1, 1}));
  EXPECT_EQ(ks[0].workgroupBytes, 4 * 8 * 128 * 4 + 2 * 32 * 4 + 4);
  EXPECT_NE(ks[0].binary.find(".maxntid 128, 1, 1"), std::string::npos);
  EXPECT_NE(ks[0].binary.find(".minnctapersm 2"), std::string::npos);

  // A schedule without attention.decode cannot build it.
  s.attention.decode.reset();
  const std::string e = compileError(kernelSource("attention_decode.mlir"), "sm_80", &s);
  EXPECT_NE(e.find("@flash_decode_f16kv_hd128 (decode) needs the sm_80 schedule's "
                   "attention.decode"),
            std::string::npos)
      << e;
}

TEST(GpuCompiler, ScheduleEditRegeneratesTheGemm) {
  // sm_80's schedule edited to tile 128 x 64 x 32, 8 warps, 2 stages, Swizzle<2,3,3> for
  // 64-byte rows (mma.sync): the launch
  // record, the shared tiles and the PTX follow.
  swz::schedule::TargetSchedule s = *shipped("sm_80");
  s.gemm.tileM = 128;
  s.gemm.tileN = 64;
  s.gemm.tileK = 32;
  s.gemm.warps = 8;
  s.gemm.stages = 2;
  s.gemm.swizzle = swz::bank::Swizzle{2, 3, 3};
  std::vector<CompiledKernel> ks = compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_80", "", &s);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(ks[0].grid, "ceil(N/64), ceil(T/128), 1");
  EXPECT_EQ(ks[0].workgroupBytes, 2 * (128 + 64) * 32 * 2);
  ASSERT_EQ(ks[0].smemTiles.size(), 2u);
  for (const auto &t : ks[0].smemTiles) {
    EXPECT_EQ(t.cols, 32) << t.name;
    EXPECT_EQ(t.ldmatrixDegree, 1u) << t.name;
    EXPECT_EQ(t.cpAsyncDegree, 1u) << t.name;
    EXPECT_EQ(t.swizzle, (std::array<unsigned, 3>{2, 3, 3})) << t.name;
  }
  EXPECT_EQ(ks[0].smemTiles[0].rows, 256);  // gemm_x: 2 stages x 128
  EXPECT_EQ(ks[0].smemTiles[1].rows, 128);  // gemm_w: 2 stages x 64
  EXPECT_NE(ks[0].binary.find(".maxntid 256, 1, 1"), std::string::npos);
  EXPECT_NE(ks[0].binary.find("cp.async.wait_group 0;"), std::string::npos);

  // What the generator does not emit is refused, naming the field: wgmma needs the
  // architecture-specific sm_90a, and N of the instruction is tile_n.
  s.gemm.mma = "wgmma.m64n128k16";
  std::string e = compileError(kernelSource("gemm_f16.mlir"), "sm_80", &s);
  EXPECT_NE(e.find("asks for wgmma.m64n128k16, which needs device.arch \"sm_90a\""),
            std::string::npos)
      << e;
  s.arch = "sm_90a";
  e = compileError(kernelSource("gemm_f16.mlir"), "sm_80", &s);
  EXPECT_NE(e.find("the schedule asks for mma \"wgmma.m64n128k16\""), std::string::npos) << e;
}

TEST(GpuCompiler, TilesOverStaticSharedMemoryGoDynamic) {
  // sm_90's schedule edited to 128 x 128 x 64 on two warpgroups of wgmma.m64n128k16, 4
  // stages, one wgmma group in flight: 128 KiB of tiles (more than the 48 KiB a block may
  // declare statically). The launch record asks for the tiles plus the 1008 bytes that
  // round the 16-byte-aligned window up to 1024; the PTX declares no tile statically and
  // keeps one wgmma group pending in the K loop.
  swz::schedule::TargetSchedule s = *shipped("sm_90");
  s.gemm.tileM = 128;
  s.gemm.tileN = 128;
  s.gemm.warps = 8;
  s.gemm.stages = 4;
  s.gemm.mma = "wgmma.m64n128k16";
  s.gemm.mmaInFlight = 1;
  std::vector<CompiledKernel> ks = compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_90", "", &s);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].dynamicSmem, std::to_string(4 * (128 + 128) * 64 * 2 + 1024 - 16));
  EXPECT_EQ(ks[0].workgroupBytes, 4 * (128 + 128) * 64 * 2 + 1024 - 16);
  EXPECT_EQ(ks[0].block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(ks[0].binary.find("gemm_x"), std::string::npos);  // no static tile
  EXPECT_NE(ks[0].binary.find("wgmma.wait_group.sync.aligned 1;"), std::string::npos);
  EXPECT_NE(ks[0].binary.find("wgmma.wait_group.sync.aligned 0;"), std::string::npos);
  EXPECT_NE(ks[0].binary.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"),
            std::string::npos);

  // The shipped schedule's tiles fit statically: no dynamic shared memory, no group left
  // in flight.
  ks = compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_90", "", shipped("sm_90"));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].dynamicSmem, "");
  EXPECT_EQ(ks[0].binary.find("wgmma.wait_group.sync.aligned 1;"), std::string::npos);
}

TEST(GpuCompiler, SwigluToSpirv) {
  std::vector<CompiledKernel> ks =
      compileGpuKernels(kernelSource("swiglu_f32.mlir"), "spirv");
  ASSERT_EQ(ks.size(), 1u);
  const CompiledKernel &k = ks[0];
  EXPECT_EQ(k.entry, "swiglu_f32");
  EXPECT_EQ(k.format, "spv");
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{256, 1, 1}));
  ASSERT_GE(k.binary.size(), 20u);
  ASSERT_EQ(k.binary.size() % 4, 0u);
  uint32_t magic;
  std::memcpy(&magic, k.binary.data(), 4);
  EXPECT_EQ(magic, 0x07230203u); // SPIR-V magic number (SPIR-V spec, 3.1)
}

TEST(GpuCompiler, Errors) {
  EXPECT_THROW(compileGpuKernels("module {}", "gfx90a"), std::invalid_argument);
  const std::string e = compileError("module { func.func @f( }", "sm_90");
  EXPECT_NE(e.find("cannot parse kernel source"), std::string::npos) << e;
  EXPECT_THROW(compileGpuKernels("module {}", "sm_90"), std::runtime_error);
}

// The prefill GEMM's launch record (the shipped schedule's 64x64 tile on 4 warps), and
// the bank-conflict analysis compileGpuKernels runs: its two Swizzle<3,3,3> tiles are
// conflict-free (without the layout, ContradictedConflictFreeClaimFailsCompilation).
TEST(GpuCompiler, PrefillGemmSharedMemoryIsCheckedConflictFree) {
  std::vector<CompiledKernel> ks = compileGpuKernels(kernelSource("gemm_f16.mlir"), "sm_90", "", shipped("sm_90"));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].module, "swz_gemm_f16");
  EXPECT_EQ(ks[0].entry, "gemm_f16");
  EXPECT_EQ(ks[0].block, (std::array<int64_t, 3>{128, 1, 1}));
  EXPECT_EQ(ks[0].grid, "ceil(N/64), ceil(T/64), 1");
  ASSERT_EQ(ks[0].smemTiles.size(), 2u);
  for (const auto &t : ks[0].smemTiles) {
    EXPECT_NE(t.layout.find("Swizzle<3,3,3>"), std::string::npos) << t.layout;
    EXPECT_EQ(t.ldmatrixDegree, 1u) << t.name;
    EXPECT_EQ(t.cpAsyncDegree, 1u) << t.name;
  }
  EXPECT_EQ(ks[0].smemTiles[0].name, "gemm_x");

}

// Kernels without ldmatrix / cp.async tiles report nothing.
TEST(GpuCompiler, DequantHasNoSharedTiles) {
  std::vector<CompiledKernel> ks = compileGpuKernels(kernelSource("dequant_f16.mlir"), "spirv");
  ASSERT_EQ(ks.size(), 6u);
  for (const CompiledKernel &k : ks) {
    EXPECT_EQ(k.module, "swz_dequant_f16");
    EXPECT_TRUE(k.smemTiles.empty()) << k.entry;
    EXPECT_EQ(k.block, (std::array<int64_t, 3>{256, 1, 1}));
  }
}

// The portable prefill GEMM compiles in-process for SPIR-V with its launch record (256
// invocations, 8 storage-buffer arguments).
TEST(GpuCompiler, PortablePrefillGemm) {
  std::vector<CompiledKernel> spv = compileGpuKernels(kernelSource("gemm_f32_f16w.mlir"), "spirv");
  ASSERT_EQ(spv.size(), 1u);
  EXPECT_EQ(spv[0].module, "swz_gemm_f32_f16w");
  EXPECT_EQ(spv[0].format, "spv");
  EXPECT_EQ(spv[0].block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(spv[0].grid, "ceil(N/64), ceil(T/64), 1");
  EXPECT_EQ(spv[0].arguments.size(), 8u);
  ASSERT_GE(spv[0].binary.size(), 4u);
  uint32_t magic;
  std::memcpy(&magic, spv[0].binary.data(), 4);
  EXPECT_EQ(magic, 0x07230203u);  // SPIR-V magic number
}

} // namespace
