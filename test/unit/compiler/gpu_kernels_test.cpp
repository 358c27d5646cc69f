// Tests of the driver's GPU hook addGpuKernels (compiler/mlir/GpuKernels.cpp): which
// graph ops get built-in GPU kernels, the files and launch records it adds, and the
// error listing the ops that have no GPU kernel yet.
#include "compile.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>

using nlohmann::json;
using namespace swz;

namespace {

/// A valid GGUF v3 with no tensors and no metadata (addGpuKernels does not read it).
gguf::File emptyGguf() {
  static uint8_t bytes[24];
  std::memcpy(bytes, "GGUF", 4);
  uint32_t version = 3;
  std::memcpy(bytes + 4, &version, 4); // tensor and kv counts stay 0
  return gguf::File::parse(bytes, sizeof(bytes), "empty.gguf");
}

package::Manifest manifest(const std::string &target, json ops) {
  package::Manifest m;
  m.target = target;
  // A graph as models::build_graph writes it (docs/graph.md); the importer needs the
  // buffer widths, head_dim and the output buffer.
  std::string output = ops.back().at("out");
  m.graph = {{"hparams", {{"head_dim", 64}}},
             {"buffers", {{"x", 576}, {"h", 576}, {"h2", 576}, {"q", 576}, {"k", 576},
                          {"g", 1536}, {"u", 1536}, {"a", 1536}}},
             {"output", output},
             {"ops", std::move(ops)}};
  m.weight_plan.tensors.push_back({"blk.0.attn_norm.weight", ggml::Type::F32, {576}, 0, 2304});
  m.weight_plan.tensors.push_back({"blk.0.attn_q.weight", ggml::Type::Q4_1, {576, 576}, 0, 0});
  return m;
}

const json kNormAndSwiglu = json::array({
    {{"op", "rms_norm"}, {"in", {"x", "blk.0.attn_norm.weight"}}, {"out", "h"}, {"eps", 1e-5}},
    {{"op", "swiglu"}, {"in", {"g", "u"}}, {"out", "a"}},
    {{"op", "rms_norm"}, {"in", {"x", "blk.0.attn_norm.weight"}}, {"out", "h2"}, {"eps", 1e-5}},
});

/// Whether the NVVM target can link libdevice (math.* in rms_norm/rope/swiglu).
bool haveLibdevice() {
  const char *root = std::getenv("CUDA_ROOT");
  return std::filesystem::exists(std::string(root ? root : "/usr/local/cuda") + "/nvvm/libdevice");
}

TEST(GpuKernels, RmsNormAndSwigluForSm90) {
  package::Manifest m = manifest("sm_90", kNormAndSwiglu);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  if (!haveLibdevice()) {
    // Without libdevice the PTX would keep unresolved calls: refused, not written.
    EXPECT_THROW(compiler::addGpuKernels(m, f, files, {}), compiler::CompileError);
    EXPECT_TRUE(files.empty());
    return;
  }
  compiler::addGpuKernels(m, f, files, {});
  ASSERT_EQ(m.kernels.size(), 2u);
  EXPECT_EQ(m.kernels[0].entry, "sm_90.rms_norm_f32");
  EXPECT_EQ(m.kernels[0].file, "swz_rms_norm.ptx");
  EXPECT_EQ(m.kernels[0].launch.at("function"), "rms_norm_f32");
  EXPECT_EQ(m.kernels[0].launch.at("block"), json({256, 1, 1}));
  EXPECT_EQ(m.kernels[0].launch.at("grid"), "rows, 1, 1");
  ASSERT_EQ(m.kernels[0].signature.size(), 5u); // x, gamma, y, d, eps
  EXPECT_EQ(m.kernels[0].signature[0].at("dtype"), "memref<?xf32>");
  EXPECT_EQ(m.kernels[0].signature[3].at("dtype"), "i32");
  EXPECT_EQ(m.kernels[0].signature[4].at("dtype"), "f32");
  EXPECT_EQ(m.kernels[1].entry, "sm_90.swiglu_f32");
  EXPECT_EQ(m.kernels[1].launch.at("block"), json({64, 1, 1}));
  EXPECT_EQ(m.graph["ops"][0]["kernel"], "sm_90.rms_norm_f32");
  EXPECT_EQ(m.graph["ops"][0]["kernels"], json({{"all", {"sm_90.rms_norm_f32"}}}));
  EXPECT_EQ(m.graph["ops"][2]["kernel"], "sm_90.rms_norm_f32");
  // ptxas -v (CUDA toolkit present wherever libdevice is): resources recorded per entry.
  const json &px = m.kernels[0].launch.at("ptxas");
  EXPECT_EQ(px.at("arch"), "sm_90");
  EXPECT_GT(px.at("registers").get<int>(), 0);
  EXPECT_EQ(px.at("spill_store_bytes"), 0);
  EXPECT_EQ(px.at("spill_load_bytes"), 0);
  EXPECT_EQ(m.kernels[0].launch.at("smem_tiles"), json::array()) << "no ldmatrix tiles";
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].first, "swz_rms_norm.ptx");
  EXPECT_NE(files[0].second.find(".entry rms_norm_f32("), std::string::npos);
  EXPECT_EQ(files[0].second.find(".extern"), std::string::npos) << "libdevice not linked";
}

TEST(GpuKernels, MissingKernelsAreListed) {
  json ops = kNormAndSwiglu;
  ops.push_back({{"op", "matmul"}, {"in", {"h", "blk.0.attn_q.weight"}}, {"out", "q"}});
  ops.push_back({{"op", "matmul"}, {"in", {"h", "blk.0.attn_q.weight"}}, {"out", "k"}});
  package::Manifest m = manifest("sm_80", ops);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  try {
    compiler::addGpuKernels(m, f, files, {});
    FAIL() << "expected CompileError";
  } catch (const compiler::CompileError &e) {
    EXPECT_STREQ(e.what(), "target sm_80: no GPU kernel yet for graph ops matmul.q4_1 (x2) "
                           "(GPU kernels for this target so far: add.f32, rms_norm.f32, rope.f32, "
                           "swiglu.f32); "
                           "use --target cpu");
  }
  EXPECT_TRUE(files.empty());
}

TEST(GpuKernels, RmsNormAndSwigluForSpirv) {
  package::Manifest m = manifest("spirv", kNormAndSwiglu);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  ASSERT_EQ(m.kernels.size(), 2u);
  EXPECT_EQ(m.kernels[0].entry, "spirv.rms_norm_f32");
  EXPECT_EQ(m.kernels[0].file, "swz_rms_norm.spv");
  EXPECT_EQ(m.kernels[0].launch.at("block"), json({256, 1, 1}));
  EXPECT_EQ(m.kernels[0].launch.at("abi"), "spirv-storage-buffers");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].first, "swz_rms_norm.spv");
  ASSERT_GE(files[0].second.size(), 4u);
  uint32_t magic = 0;
  std::memcpy(&magic, files[0].second.data(), 4);
  EXPECT_EQ(magic, 0x07230203u); // SPIR-V magic number
}

TEST(GpuKernels, SwigluForSpirv) {
  package::Manifest m = manifest("spirv", json::array({{{"op", "swiglu"}, {"in", {"g", "u"}}, {"out", "a"}}}));
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].first, "swz_swiglu.spv");
  EXPECT_EQ(m.kernels[0].launch.at("abi"), "spirv-storage-buffers");
}

} // namespace
