// Tests of the driver's GPU hook addGpuKernels (compiler/driver/compile_gpu.cpp): which
// graph ops get built-in GPU kernels, the files and launch records it adds, and the
// error listing the ops that have no GPU kernel yet.
#include "compile.h"
#include "codegen/KernelTable.h"
#include "package/expr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

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
             {"buffers", {{"x", 576}, {"h", 576}, {"h2", 576}, {"q", 576}, {"k", 192},
                          {"v", 192}, {"attn", 576}, {"o", 576}, {"o2", 576},
                          {"g", 1536}, {"u", 1536}, {"a", 1536}}},
             {"output", output},
             {"ops", std::move(ops)}};
  m.weight_plan.tensors.push_back({"blk.0.attn_norm.weight", ggml::Type::F32, {576}, 0, 2304});
  m.weight_plan.tensors.push_back({"blk.0.attn_q.weight", ggml::Type::Q4_1, {576, 576}, 0, 0});
  m.weight_plan.tensors.push_back({"blk.0.attn_output.weight", ggml::Type::Q4_1, {576, 576}, 0, 0});
  m.weight_plan.tensors.push_back({"blk.0.ffn_down.weight", ggml::Type::Q5_K, {1536, 576}, 0, 0});
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
  ASSERT_EQ(m.kernels.size(), 4u);  // + greedy sampling's two-pass argmax (graph.sampling), last
  EXPECT_EQ(m.kernels[2].entry, "sm_90.argmax_split_f32");
  EXPECT_EQ(m.kernels[3].entry, "sm_90.argmax_reduce_f32");
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
  EXPECT_EQ(m.kernels[1].launch.at("block"), json({256, 1, 1}));
  // Each op's launch record binds every kernel argument (docs/package-format.md).
  EXPECT_FALSE(m.graph["ops"][0].contains("kernels"));
  EXPECT_FALSE(m.graph["ops"][0].contains("kernel"));
  EXPECT_EQ(m.graph["ops"][0]["launches"],
            json::parse(R"([{"kernel": "sm_90.rms_norm_f32", "phase": "all", "scope": "batch",
              "grid": ["T", "1", "1"], "dynamic_smem": "0",
              "args": [{"buffer": "x", "shape": ["T*576"]},
                       {"weight": "blk.0.attn_norm.weight", "shape": ["576"]},
                       {"buffer": "h", "shape": ["T*576"]}, {"i32": "576"}, {"f32": 1e-05}]}])"));
  EXPECT_EQ(m.graph["ops"][1]["launches"][0]["grid"], json({"ceil(T*3/2)", "1", "1"}));
  EXPECT_EQ(m.graph["ops"][2]["launches"][0]["kernel"], "sm_90.rms_norm_f32");
  // ptxas -v (CUDA toolkit present wherever libdevice is): resources recorded per entry,
  // for the schedule's arch (sm_90.json: sm_90a, whose PTX the package carries).
  const json &px = m.kernels[0].launch.at("ptxas");
  EXPECT_EQ(px.at("arch"), "sm_90a");
  EXPECT_GT(px.at("registers").get<int>(), 0);
  EXPECT_EQ(px.at("spill_store_bytes"), 0);
  EXPECT_EQ(px.at("spill_load_bytes"), 0);
  EXPECT_EQ(m.kernels[0].launch.at("smem_tiles"), json::array()) << "no ldmatrix tiles";
  ASSERT_EQ(files.size(), 3u);  // rms_norm, swiglu, argmax
  EXPECT_EQ(files[0].first, "swz_rms_norm.ptx");
  // Greedy sampling on the device: argmax of the graph output's rows (graph.sampling).
  // PTX: parts of 4096 logits (576 logits: one part), then the reduction into argmax_ids.
  const json &sampling = m.graph["sampling"]["argmax"]["launches"];
  ASSERT_EQ(sampling.size(), 2u);
  EXPECT_EQ(sampling[0]["kernel"], "sm_90.argmax_split_f32");
  EXPECT_EQ(sampling[0]["grid"], json({"T", "1", "1"}));
  EXPECT_EQ(sampling[0]["args"][1]["scratch"], "argmax_part_v");
  EXPECT_EQ(sampling[0]["args"][4], json({{"i32", "4096"}}));
  EXPECT_EQ(sampling[1]["kernel"], "sm_90.argmax_reduce_f32");
  EXPECT_EQ(sampling[1]["args"][2]["scratch"], "argmax_ids");
  EXPECT_EQ(m.graph["sampling"]["argmax"]["in"], json({m.graph["output"]}));
  EXPECT_NE(files[0].second.find(".entry rms_norm_f32("), std::string::npos);
  EXPECT_EQ(files[0].second.find(".extern"), std::string::npos) << "libdevice not linked";
}

const json kAttention = json::array(
    {{{"op", "attention"}, {"in", {"q", "k", "v"}}, {"out", "attn"}, {"layer", 0}, {"scale", 0.125}}});

/// The kernel entries `m`'s graph op `i` launches in `phase`, in order.
json phase(const package::Manifest &m, size_t i, const std::string &phase) {
  json out = json::array();
  for (const json &l : m.graph["ops"][i].value("launches", json::array()))
    if (l.at("phase") == phase)
      out.push_back(l.at("kernel"));
  return out;
}

/// Graph op `i`'s launch record of `kernel` in `phase`.
json record(const package::Manifest &m, size_t i, const std::string &kernel,
            const std::string &phase) {
  for (const json &l : m.graph["ops"][i].value("launches", json::array()))
    if (l.at("kernel") == kernel && l.at("phase") == phase)
      return l;
  ADD_FAILURE() << "op " << i << " has no " << phase << " launch of " << kernel;
  return json::object();
}

const package::Kernel *kernel(const package::Manifest &m, const std::string &entry) {
  for (const auto &k : m.kernels)
    if (k.entry == entry)
      return &k;
  return nullptr;
}

/// The CompileError message of compiling `m`'s GPU kernels ("" and a test failure when it
/// compiles).
std::string compileError(package::Manifest m) {
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  try {
    compiler::addGpuKernels(m, f, files, {});
  } catch (const compiler::CompileError &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected CompileError";
  return "";
}

// The graph's one attention op is three launches per phase: kv_store_f16 always; prefill
// the tensor-core flash attention for head_dim 64 on PTX; decode split-K partials and
// their reduction.
TEST(GpuKernels, AttentionForSm80) {
  package::Manifest m = manifest("sm_80", kAttention);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  if (!haveLibdevice()) { // math.exp / math.log come from libdevice
    EXPECT_THROW(compiler::addGpuKernels(m, f, files, {}), compiler::CompileError);
    return;
  }
  compiler::addGpuKernels(m, f, files, {});
  EXPECT_EQ(phase(m, 0, "all"), json({"sm_80.kv_store_f16"}));
  EXPECT_EQ(phase(m, 0, "prefill"), json({"sm_80.flash_attention_f16kv_mma", "sm_80.attention_split_reduce"}));
  EXPECT_EQ(phase(m, 0, "decode"),
            json({"sm_80.flash_attention_f16kv", "sm_80.attention_split_reduce"}));
  // The KV write: one launch for the rows of every sequence (each row's position and
  // block table offset per row). Attention: one launch per sequence; prefill in splits of
  // a fixed length (max_ctx's, a multiple of 64 keys for the tensor-core kernel), decode in
  // up to 16 splits (one per 32 keys); then the
  // reduction, which is skipped (grid 0) when there is one split. 9 query heads of 3 KV
  // heads (G = 3).
  const json store = record(m, 0, "sm_80.kv_store_f16", "all");
  EXPECT_EQ(store["scope"], "batch");
  EXPECT_EQ(store["grid"], json({"T", "3", "1"}));
  EXPECT_EQ(store["args"][2], json({{"kv", "k"}, {"layer", 0}, {"shape", {"kv_pages*12288"}}}));
  EXPECT_EQ(store["args"][4], json({{"block_table", true}, {"shape", {"n_seq*table_stride"}}}));
  EXPECT_EQ(store["args"][5], json({{"row_tables", true}, {"shape", {"T"}}}));
  EXPECT_EQ(store["args"][6], json({{"positions", true}, {"shape", {"T"}}}));
  const json prefill = record(m, 0, "sm_80.flash_attention_f16kv_mma", "prefill");
  EXPECT_EQ(prefill["scope"], "sequence");
  EXPECT_EQ(prefill["let"],
            json({{"split_len", "max(2048, ceil(max_ctx/1024)*64)"}, {"n_split", "ceil(ctx/split_len)"}}));
  EXPECT_EQ(record(m, 0, "sm_80.attention_split_reduce", "prefill")["let"], prefill["let"]);
  EXPECT_EQ(prefill["grid"], json({"ceil(T*3/64)", "3", "n_split"}));
  EXPECT_EQ(prefill["args"][5]["scratch"], "attn_o_part");
  EXPECT_EQ(prefill["args"][11], json({{"i32", "split_len"}}));
  EXPECT_EQ(prefill["args"][12], json({{"f32", 0.125}}));
  const json decode = record(m, 0, "sm_80.flash_attention_f16kv", "decode");
  EXPECT_EQ(decode["let"], json({{"n_split_max", "min(ceil(ctx/32), 16)"},
                                 {"split_len", "ceil(ctx/n_split_max/32)*32"},
                                 {"n_split", "ceil(ctx/split_len)"}}));
  EXPECT_EQ(record(m, 0, "sm_80.attention_split_reduce", "decode")["let"], decode["let"]);
  // The splits cover the context in whole 32-key tiles, one per 32 keys up to 16 splits,
  // and only splits that hold keys are launched: (ctx, n_split, split_len) as the executor
  // evaluates the rules (n_split_max, then split_len, then n_split). At 600 keys 16
  // splits of 64 keys would leave 6 empty: 10.
  {
    const std::vector<std::string> syms = {"T", "pos0", "ctx", "kv_pages", "n_split_max", "split_len", "n_split"};
    // v = {T, pos0, ctx, kv_pages, n_split_max, split_len, n_split}: the let in order.
    auto eval = [&](const json& let, double* v) {
      v[4] = package::Expr::parse(let["n_split_max"], syms).evaluate(v);
      v[5] = package::Expr::parse(let["split_len"], syms).evaluate(v);
      v[6] = package::Expr::parse(let["n_split"], syms).evaluate(v);
    };
    for (const auto& [ctx, want_n, want_len] : std::vector<std::array<int, 3>>{
             {1, 1, 32}, {32, 1, 32}, {33, 2, 32}, {65, 3, 32}, {512, 16, 32}, {600, 10, 64}, {1000, 16, 64}, {4096, 16, 256}, {32768, 16, 2048}}) {
      double v[7] = {1, double(ctx - 1), double(ctx), 100, 0, 0, 0};
      eval(decode["let"], v);
      EXPECT_EQ(v[6], want_n) << "ctx " << ctx;
      EXPECT_EQ(v[5], want_len) << "ctx " << ctx;
    }
    // Prefill: splits of one length for every pass of an executor (max_ctx's: sm_80's
    // attention.prefill_split_min, 2,048 keys, up to a 32,768 context, then max_ctx / 16
    // rounded up to 64), so a key's split never depends on the pass; at most 16 (the
    // partials' scratch), none empty.
    const std::vector<std::string> psyms = {"T", "pos0", "ctx", "kv_pages", "max_ctx", "split_len", "n_split"};
    for (const auto& [max_ctx, ctx, want_n, want_len] : std::vector<std::array<int, 4>>{
             {512, 512, 1, 2048}, {4096, 100, 1, 2048}, {4096, 2049, 2, 2048}, {4096, 4096, 2, 2048},
             {8192, 8192, 4, 2048}, {32768, 32768, 16, 2048}, {33000, 32768, 16, 2112}, {33000, 100, 1, 2112}}) {
      for (int T : {1, 64, 512}) {
        if (T > ctx) continue;
        double v[7] = {double(T), double(ctx - T), double(ctx), 100, double(max_ctx), 0, 0};
        v[5] = package::Expr::parse(prefill["let"]["split_len"], psyms).evaluate(v);
        v[6] = package::Expr::parse(prefill["let"]["n_split"], psyms).evaluate(v);
        EXPECT_EQ(v[6], want_n) << "T " << T << " ctx " << ctx << " max_ctx " << max_ctx;
        EXPECT_EQ(v[5], want_len) << "T " << T << " ctx " << ctx << " max_ctx " << max_ctx;
      }
    }
    for (int max_ctx = 1; max_ctx <= 140000; max_ctx += 997)
      for (int ctx : {1, max_ctx / 2 + 1, max_ctx}) {
        double v[7] = {1, double(ctx - 1), double(ctx), 100, double(max_ctx), 0, 0};
        v[5] = package::Expr::parse(prefill["let"]["split_len"], psyms).evaluate(v);
        v[6] = package::Expr::parse(prefill["let"]["n_split"], psyms).evaluate(v);
        ASSERT_GE(v[6] * v[5], ctx);
        ASSERT_LT((v[6] - 1) * v[5], ctx) << "an empty split at ctx " << ctx;
        ASSERT_EQ(int64_t(v[5]) % 64, 0);
        ASSERT_LE(v[6], 16) << "max_ctx " << max_ctx << ": more splits than the partials' scratch holds";
      }
    for (int ctx = 1; ctx <= 20000; ctx += 7) {
      double v[7] = {1, double(ctx - 1), double(ctx), 100, 0, 0, 0};
      eval(decode["let"], v);
      ASSERT_GE(v[6] * v[5], ctx) << "ctx " << ctx << ": the splits do not cover the context";
      ASSERT_LT((v[6] - 1) * v[5], ctx) << "ctx " << ctx << ": an empty split";
      ASSERT_EQ(int64_t(v[5]) % 32, 0) << "ctx " << ctx;
      ASSERT_LE(v[6], v[4]) << "ctx " << ctx;
      ASSERT_LE(v[6], 16) << "ctx " << ctx << ": more splits than the partials' scratch holds";
    }
  }
  EXPECT_EQ(decode["grid"], json({"ceil(T*3/8)", "3", "n_split"}));
  EXPECT_EQ(decode["args"][5], json({{"scratch", "attn_o_part"},
                                     {"bytes", "min(ceil(max_ctx/32), 16)*max_T*2304"},
                                     {"shape", {"n_split*T*576"}}}));
  EXPECT_EQ(decode["args"][6], json({{"scratch", "attn_lse_part"},
                                     {"bytes", "min(ceil(max_ctx/32), 16)*max_T*36"},
                                     {"shape", {"n_split*T*9"}}}));
  const json reduce = record(m, 0, "sm_80.attention_split_reduce", "decode");
  EXPECT_EQ(reduce["grid"], json({"min(n_split-1, 1)*T", "9", "1"}));
  EXPECT_EQ(reduce["args"][3], json({{"i32", "n_split"}}));
  const package::Kernel *flash = kernel(m, "sm_80.flash_attention_f16kv");
  ASSERT_NE(flash, nullptr);
  EXPECT_EQ(flash->file, "swz_attention_f16kv.ptx");
  EXPECT_EQ(flash->launch.at("block"), json({128, 1, 1}));
  EXPECT_EQ(flash->launch.at("grid"), "ceil(T*n_head/n_head_kv/8), n_head_kv, n_split");
  // q, k_cache, v_cache, block_table, out, o_part, lse_part, then 5 i32 and scale.
  ASSERT_EQ(flash->signature.size(), 13u);
  EXPECT_EQ(flash->signature[1].at("dtype"), "memref<?xf16>");
  // The tensor-core kernel: its K/V page tiles are swizzled and conflict-free.
  const package::Kernel *mma = kernel(m, "sm_80.flash_attention_f16kv_mma");
  ASSERT_NE(mma, nullptr);
  ASSERT_FALSE(mma->launch.at("smem_tiles").empty());
  for (const json &t : mma->launch.at("smem_tiles")) {
    EXPECT_EQ(t.at("ldmatrix_x4_degree"), 1) << t;
    EXPECT_EQ(t.at("cp_async_16_degree"), 1) << t;
  }
  EXPECT_EQ(mma->launch.at("ptxas").at("spill_store_bytes"), 0);
  // Its tiles follow the sm_80 schedule's attention entry (checked at compile time).
  EXPECT_EQ(mma->schedule, "sm_80.attention");
  EXPECT_EQ(flash->schedule, std::nullopt);
  ASSERT_EQ(files.size(), 3u);  // + swz_argmax.ptx (greedy sampling)
  EXPECT_EQ(files[2].first, "swz_argmax.ptx");
}

// F16 matmuls decode on the tensor-core GEMV; its workgroup shape follows the target
// schedule's gemv.f16_mma_split_k_below_rows: sm_90's (8192) puts a 576-row matrix on the
// 16-warp shape; the same schedule edited to 0 (--schedule-dir) on the 4-warp one. SPIR-V
// keeps the f32-activation GEMV.
TEST(GpuKernels, F16DecodeKernelFollowsTheSchedule) {
  const json ops0 = json::array({
      {{"op", "matmul"}, {"in", {"x", "blk.0.attn_q.weight"}}, {"out", "q"}},
  });
  auto f16Manifest = [&](const std::string &target) {
    package::Manifest m = manifest(target, ops0);
    m.weight_plan.tensors[1].type = ggml::Type::F16;  // attn_q [576, 576]
    return m;
  };
  gguf::File f = emptyGguf();
  {
    package::Manifest m = f16Manifest("sm_90");
    package::PackageFiles files;
    compiler::addGpuKernels(m, f, files, {});
    EXPECT_EQ(phase(m, 0, "decode"), json({"sm_90.matmul_f16_mma_w16"}));
    EXPECT_EQ(record(m, 0, "sm_90.matmul_f16_mma_w16", "decode")["grid"], json({"36", "ceil(T/8)", "1"}));
    const package::Kernel *k = kernel(m, "sm_90.matmul_f16_mma_w16");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->launch.at("block"), json({512, 1, 1}));
  }
  {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "swz_f16_schedule_test";
    std::filesystem::create_directories(dir);
    std::ifstream in(std::string(SWZ_SOURCE_DIR) + "/compiler/schedules/sm_90.json");
    json sched = json::parse(in);
    sched["gemv"]["f16_mma_split_k_below_rows"] = 0;
    std::ofstream(dir / "sm_90.json") << sched.dump(2);
    package::Manifest m = f16Manifest("sm_90");
    package::PackageFiles files;
    compiler::addGpuKernels(m, f, files, {}, dir.string());
    EXPECT_EQ(phase(m, 0, "decode"), json({"sm_90.matmul_f16_mma"}));
    const package::Kernel *k = kernel(m, "sm_90.matmul_f16_mma");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->launch.at("block"), json({128, 1, 1}));
    std::filesystem::remove_all(dir);
  }
  {
    package::Manifest m = f16Manifest("spirv");
    package::PackageFiles files;
    compiler::addGpuKernels(m, f, files, {});
    EXPECT_EQ(phase(m, 0, "decode"), json({"spirv.matmul_f16"}));
  }
}

// swz-fuse folds rope(k) into the KV write, and rope(q) with it: the rope ops launch
// nothing and the attention's rope_kv_store_f16 rotates q in place and k into the cache.
// graph.kv_move rotates K with the rope that wrote it: a graph with RoPE whose attention's
// k comes from no rope op is refused, not given an unrotated move.
TEST(GpuKernels, KvMoveNeedsTheRopeOnK) {
  const json ops = json::array({
      {{"op", "rope"}, {"in", {"q"}}, {"out", "q"}, {"mode", "neox"}, {"theta", 1e6}, {"n_rot", 64}},
      {{"op", "attention"}, {"in", {"q", "k", "v"}}, {"out", "attn"}, {"layer", 0}, {"scale", 0.125}},
  });
  const std::string e = compileError(manifest("spirv", ops));
  EXPECT_NE(e.find("kv_move_rope_f16: no rope op before the attention writes its k ('k')"), std::string::npos) << e;
}

TEST(GpuKernels, RopeOnQAndKIsFusedIntoTheKvWrite) {
  const json ops0 = json::array({
      {{"op", "rope"}, {"in", {"q"}}, {"out", "q"}, {"mode", "neox"}, {"theta", 1e6}, {"n_rot", 64}},
      {{"op", "rope"}, {"in", {"k"}}, {"out", "k"}, {"mode", "neox"}, {"theta", 1e6}, {"n_rot", 64}},
      {{"op", "attention"}, {"in", {"q", "k", "v"}}, {"out", "attn"}, {"layer", 0}, {"scale", 0.125}},
  });
  package::Manifest m = manifest("spirv", ops0);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  const json &ops = m.graph["ops"];
  for (int i : {0, 1}) {
    EXPECT_EQ(ops[i]["fused_into"], 2);
    EXPECT_FALSE(ops[i].contains("launches"));
  }
  EXPECT_EQ(ops[2]["fused"], json({1, 0}));
  EXPECT_EQ(phase(m, 2, "all"), json({"spirv.rope_kv_store_f16"}));
  // Grid (T, n_q + n_head_kv): 9 query heads of q (576 = 9 x 64), 3 KV heads.
  const json storeRec = record(m, 2, "spirv.rope_kv_store_f16", "all");
  EXPECT_EQ(storeRec["grid"], json({"T", "12", "1"}));
  EXPECT_EQ(storeRec["args"][0], json({{"buffer", "q"}, {"shape", {"T*576"}}}));
  EXPECT_EQ(storeRec["args"][1], json({{"buffer", "k"}, {"shape", {"T*192"}}}));
  EXPECT_EQ(storeRec["args"][8], json({{"positions", true}, {"shape", {"T"}}}));
  EXPECT_EQ(storeRec["args"][9], json({{"i32", "64"}}));
  EXPECT_EQ(storeRec["args"][10], json({{"f32", 1e6}}));
  EXPECT_EQ(storeRec["args"][11], json({{"i32", "1"}}));  // neox
  EXPECT_EQ(storeRec["args"][12]["absent"], true);        // no head norms
  EXPECT_EQ(storeRec["args"][13]["absent"], true);
  EXPECT_EQ(storeRec["args"][15], json({{"i32", "0"}}));  // norm
  EXPECT_EQ(storeRec["args"][16], json({{"i32", "9"}}));  // n_q
  const package::Kernel *store = kernel(m, "spirv.rope_kv_store_f16");
  ASSERT_NE(store, nullptr);
  // q, k, v, k_cache, v_cache, block_table, pos0, head_dim, positions, n_rot, theta, neox,
  // q_gamma, k_gamma, eps, norm, n_q
  EXPECT_EQ(store->signature.size(), 17u);
  EXPECT_EQ(store->launch.at("grid"), "T, n_q + n_head_kv, 1");
  // graph.kv_move (the approx cache mode's installs): the layer's pools, the moves, and
  // the rope on k's n_rot, theta and pairing.
  const json &moves = m.graph["kv_move"]["launches"];
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0]["kernel"], "spirv.kv_move_rope_f16");
  EXPECT_EQ(moves[0]["grid"], json({"T", "3", "1"}));
  EXPECT_EQ(moves[0]["args"], json::parse(R"([{"kv": "k", "layer": 0, "shape": ["kv_pages*12288"]},
      {"kv": "v", "layer": 0, "shape": ["kv_pages*12288"]}, {"kv_moves": true, "shape": ["T*3"]},
      {"i32": "64"}, {"i32": "64"}, {"f32": 1000000.0}, {"i32": "1"}])"));

  // SWZ_FUSE_QK=0 (A/B builds): the rope on q is its own launch again, n_q = 0.
  setenv("SWZ_FUSE_QK", "0", 1);
  package::Manifest m2 = manifest("spirv", ops0);
  package::PackageFiles files2;
  compiler::addGpuKernels(m2, f, files2, {});
  unsetenv("SWZ_FUSE_QK");
  EXPECT_EQ(phase(m2, 0, "all"), json({"spirv.rope_f32"}));
  EXPECT_EQ(m2.graph["ops"][2]["fused"], json({1}));
  const json store2 = record(m2, 2, "spirv.rope_kv_store_f16", "all");
  EXPECT_EQ(store2["grid"], json({"T", "3", "1"}));
  EXPECT_EQ(store2["args"][16], json({{"i32", "0"}}));
}

// Qwen3: head_norm(q), head_norm(k), rope(q), rope(k), attention: one launch does all
// five (the norms' weights and eps on the KV write, norm = 1).
TEST(GpuKernels, HeadNormsAndRopeAreFusedIntoTheKvWrite) {
  package::Manifest m = manifest("sm_90", json::array({
      {{"op", "head_norm"}, {"in", {"q", "blk.0.attn_q_norm.weight"}}, {"out", "q"}, {"eps", 1e-6}},
      {{"op", "head_norm"}, {"in", {"k", "blk.0.attn_k_norm.weight"}}, {"out", "k"}, {"eps", 1e-6}},
      {{"op", "rope"}, {"in", {"q"}}, {"out", "q"}, {"mode", "neox"}, {"theta", 1e6}, {"n_rot", 64}},
      {{"op", "rope"}, {"in", {"k"}}, {"out", "k"}, {"mode", "neox"}, {"theta", 1e6}, {"n_rot", 64}},
      {{"op", "attention"}, {"in", {"q", "k", "v"}}, {"out", "attn"}, {"layer", 0}, {"scale", 0.125}},
  }));
  m.weight_plan.tensors.push_back({"blk.0.attn_q_norm.weight", ggml::Type::F32, {64}, 0, 256});
  m.weight_plan.tensors.push_back({"blk.0.attn_k_norm.weight", ggml::Type::F32, {64}, 0, 256});
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  const json &ops = m.graph["ops"];
  for (int i : {0, 1, 2, 3})
    EXPECT_EQ(ops[i]["fused_into"], 4) << i;
  EXPECT_EQ(ops[4]["fused"], json({3, 2, 0, 1}));
  const json storeRec = record(m, 4, "sm_90.rope_kv_store_f16", "all");
  EXPECT_EQ(storeRec["grid"], json({"T", "12", "1"}));
  EXPECT_EQ(storeRec["args"][12], json({{"weight", "blk.0.attn_q_norm.weight"}, {"shape", {"64"}}}));
  EXPECT_EQ(storeRec["args"][13], json({{"weight", "blk.0.attn_k_norm.weight"}, {"shape", {"64"}}}));
  EXPECT_EQ(storeRec["args"][14], json({{"f32", 1e-6}}));
  EXPECT_EQ(storeRec["args"][15], json({{"i32", "1"}}));  // norm
  EXPECT_EQ(storeRec["args"][16], json({{"i32", "9"}}));  // n_q
  // The whole attention op: this KV write, then the flash kernels.
  EXPECT_EQ(ops[4]["launches"][0]["kernel"], "sm_90.rope_kv_store_f16");
}

// PTX decode at head_dim 128: one flash_decode_f16kv_hd128 launch for the decode rows of
// every sequence of a pass (its sequences' records say where each one's rows, positions
// and block table are), the grid's z the most splits at the pass's longest context; each
// sequence splits its own context in the kernel (max_splits 16, as the portable records'
// rule), and merges its splits there (no reduction launch).
TEST(GpuKernels, DecodeAttentionIsOneLaunchForTheBatch) {
  package::Manifest m = manifest("sm_90", kAttention);
  m.graph["hparams"]["head_dim"] = 128;  // 8 query heads of 2 KV heads (G = 4)
  m.graph["buffers"]["q"] = m.graph["buffers"]["attn"] = 1024;
  m.graph["buffers"]["k"] = m.graph["buffers"]["v"] = 256;
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  if (!haveLibdevice())
    GTEST_SKIP() << "math.exp / math.log come from libdevice";
  compiler::addGpuKernels(m, f, files, {});
  EXPECT_EQ(phase(m, 0, "decode"), json({"sm_90.flash_decode_f16kv_hd128"}));
  const json decode = record(m, 0, "sm_90.flash_decode_f16kv_hd128", "decode");
  EXPECT_EQ(decode["scope"], "batch");
  EXPECT_EQ(decode["grid"], json({"n_seq*seq_tiles", "2", "n_split"}));
  EXPECT_EQ(decode["let"], json({{"seq_tiles", "ceil(seq_T/2)"}, {"n_split", "min(ceil(ctx/32), 16)"}}));
  EXPECT_EQ(decode["args"][3], json({{"block_table", true}, {"shape", {"n_seq*table_stride"}}}));
  EXPECT_EQ(decode["args"][7]["scratch"], "attn_split_count");
  EXPECT_EQ(decode["args"][8], json({{"sequences", true}, {"shape", {"n_seq*4"}}}));
  EXPECT_EQ(decode["args"][9], json({{"i32", "T"}}));
  EXPECT_EQ(decode["args"][10], json({{"i32", "seq_tiles"}}));
  EXPECT_EQ(decode["args"][13], json({{"i32", "16"}}));
  EXPECT_EQ(record(m, 0, "sm_90.kv_store_f16", "all")["scope"], "batch");
}

// The attention kernels' workgroup tiles hold head_dim <= 128: a model with larger heads
// is refused at compile time, not handed kernels that would overrun them.
TEST(GpuKernels, AttentionHeadDimAbove128HasNoKernel) {
  package::Manifest m = manifest("sm_90", kAttention);
  m.graph["hparams"]["head_dim"] = 192;  // q 576 = 3 heads, k/v 192 = 1 head
  const std::string e = compileError(m);
  EXPECT_NE(e.find("no GPU kernel yet for graph ops attention.f16kv.hd192"), std::string::npos) << e;
  EXPECT_TRUE(codegen::kernelsFor("attention.f16kv.hd256+rope_k", true).empty());
  EXPECT_FALSE(codegen::kernelsFor("attention.f16kv.hd96+rope_k", true).empty());
}

TEST(GpuKernels, AttentionForSpirv) {
  package::Manifest m = manifest("spirv", kAttention);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  EXPECT_EQ(phase(m, 0, "prefill"), json({"spirv.flash_attention_f16kv", "spirv.attention_split_reduce"}));
  // spirv.json leaves attention.prefill_split_min at its default, 256 keys.
  EXPECT_EQ(record(m, 0, "spirv.flash_attention_f16kv", "prefill")["let"]["split_len"], "max(256, ceil(max_ctx/1024)*64)");
  EXPECT_EQ(m.kernels.size(), 5u);  // kv_store, flash attention, split reduce; argmax; kv_move
  // No rope on k in this graph: K/V move as they are (n_rot 0).
  EXPECT_EQ(m.graph["kv_move"]["launches"][0]["args"][4], json({{"i32", "0"}}));
  EXPECT_EQ(m.kernels[0].launch.at("abi"), "spirv-storage-buffers");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].first, "swz_argmax.spv");
  EXPECT_EQ(files[0].first, "swz_attention_f16kv.spv");
  ASSERT_GE(files[0].second.size(), 4u);
  uint32_t magic = 0;
  std::memcpy(&magic, files[0].second.data(), 4);
  EXPECT_EQ(magic, 0x07230203u); // SPIR-V magic number
}

TEST(GpuKernels, MissingKernelsAreListed) {
  json ops = kNormAndSwiglu;
  ops.push_back({{"op", "matmul"}, {"in", {"a", "blk.0.ffn_down.weight"}}, {"out", "o"}});
  ops.push_back({{"op", "matmul"}, {"in", {"a", "blk.0.ffn_down.weight"}}, {"out", "o2"}});
  package::Manifest m = manifest("sm_80", ops);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  try {
    compiler::addGpuKernels(m, f, files, {});
    FAIL() << "expected CompileError";
  } catch (const compiler::CompileError &e) {
    EXPECT_STREQ(e.what(), "target sm_80: no GPU kernel yet for graph ops matmul.q5_k (x2) "
                           "(GPU kernels for this target so far: add.f32, argmax.f32, "
                           "attention.f16kv, attention.f16kv.hd128, attention.f16kv.hd64, "
                           "get_rows.f16, get_rows.q4_0, get_rows.q4_1, get_rows.q4_k, "
                           "get_rows.q5_0, get_rows.q6_k, get_rows.q8_0, head_norm.f32, "
                           "matmul.f16, matmul.f16.k8, matmul.f16.k8.w16, matmul.q4_0, "
                           "matmul.q4_1, matmul.q4_k, matmul.q4_k.mma, matmul.q4_k.mma.skinny, "
                           "matmul.q4_k.mma.w8, matmul.q4_k.mma.w8.skinny, matmul.q4_k.skinny, "
                           "matmul.q5_0, matmul.q6_k, matmul.q6_k.skinny, matmul.q8_0, matmul.q8_0.skinny, "
                           "rms_norm.f32, rope.f32, swiglu.f32); "
                           "use --target cpu");
  }
  EXPECT_TRUE(files.empty());
}

// swz-fuse folds `x = x + matmul(attn, Wo)` into the matmul: the add op is marked
// fused_into it and launches nothing; decode keeps the residual in the GEMV's epilogue,
// prefill in the GEMM's.
TEST(GpuKernels, ResidualAddIsFusedIntoTheMatmul) {
  package::Manifest m = manifest("sm_90", json::array({
      {{"op", "matmul"}, {"in", {"attn", "blk.0.attn_output.weight"}}, {"out", "o"}},
      {{"op", "add"}, {"in", {"x", "o"}}, {"out", "x"}},
  }));
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  const json &ops = m.graph["ops"];
  EXPECT_EQ(ops[0]["fused"], json({1}));
  EXPECT_EQ(ops[1]["fused_into"], 0);
  EXPECT_FALSE(ops[1].contains("launches"));
  EXPECT_EQ(phase(m, 0, "decode"), json({"sm_90.quantize_q8_x", "sm_90.matmul_q4_1_q8x"}));
  EXPECT_EQ(phase(m, 0, "prefill"),
            json({"sm_90.convert_f32_f16", "sm_90.dequant_q4_1_f16", "sm_90.gemm_f16"}));
  // Decode (the int8 GEMV: weights, int8 input and its scales, outputs 0..2, biases 0..2,
  // res, N0..N2, K, T, flags): the residual added in place (flags 2, y0 = res = x).
  const json dec = record(m, 0, "sm_90.matmul_q4_1_q8x", "decode")["args"];
  ASSERT_EQ(dec.size(), 18u);
  EXPECT_EQ(dec[0], json::parse(R"({"weight": "blk.0.attn_output.weight", "shape": ["51840"]})"));
  EXPECT_EQ(dec[5], json::parse(R"({"buffer": "x", "shape": ["T*576"]})"));
  EXPECT_EQ(dec[11], dec[5]);
  EXPECT_EQ(dec[8], json::parse(R"({"absent": true, "shape": ["1"]})"));
  EXPECT_EQ(dec[12], json({{"i32", "576"}}));
  EXPECT_EQ(dec[13], json({{"i32", "0"}}));
  EXPECT_EQ(dec[15], json({{"i32", "576"}}));
  EXPECT_EQ(dec[16], json({{"i32", "T"}}));
  EXPECT_EQ(dec[17], json({{"i32", "2"}}));
  // Prefill: x to f16, W dequantized, the GEMM (x, w, y, bias, res, flags) adds the
  // residual in place too (flags 2, y = res = x).
  EXPECT_EQ(record(m, 0, "sm_90.convert_f32_f16", "prefill")["args"][1],
            json({{"scratch", "x_f16"}, {"bytes", "max_T*1152"}, {"shape", {"T*576"}}}));
  EXPECT_EQ(record(m, 0, "sm_90.dequant_q4_1_f16", "prefill")["args"][0],
            json({{"weight", "blk.0.attn_output.weight"}, {"shape", {"207360"}}}));
  const json gemm = record(m, 0, "sm_90.gemm_f16", "prefill");
  EXPECT_EQ(gemm["grid"], json({"9", "ceil(T/64)", "1"}));
  EXPECT_EQ(gemm["args"][0], json({{"scratch", "x_f16"}, {"bytes", "max_T*1152"}, {"shape", {"T", "576"}}}));
  EXPECT_EQ(gemm["args"][1], json({{"scratch", "w_f16"}, {"bytes", "663552"}, {"shape", {"576", "576"}}}));
  ASSERT_EQ(gemm["args"].size(), 6u);
  EXPECT_EQ(gemm["args"][2], json({{"buffer", "x"}, {"shape", {"T", "576"}}}));
  EXPECT_EQ(gemm["args"][3], json::parse(R"({"absent": true, "shape": ["1"]})"));
  EXPECT_EQ(gemm["args"][4], gemm["args"][2]);
  EXPECT_EQ(gemm["args"][5], json({{"i32", "2"}}));
}

// The final norm and the LM head run on the output rows only, with their decode kernels
// on every pass (phase "all", rows "output"): no dequantized 49152 x 576 scratch.
TEST(GpuKernels, OutputRowsRunTheGemvOnEveryPass) {
  package::Manifest m = manifest("sm_90", json::array({
      {{"op", "rms_norm"}, {"in", {"x", "blk.0.attn_norm.weight"}}, {"out", "h"}, {"eps", 1e-5},
       {"rows", "output"}},
      {{"op", "matmul"}, {"in", {"h", "token_embd.weight"}}, {"out", "logits"}, {"rows", "output"}},
  }));
  m.graph["buffers"]["logits"] = 49152;
  m.weight_plan.tensors.push_back({"token_embd.weight", ggml::Type::Q8_0, {576, 49152}, 0, 0});
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  if (!haveLibdevice())
    GTEST_SKIP() << "rms_norm needs libdevice";
  compiler::addGpuKernels(m, f, files, {});
  EXPECT_EQ(m.graph["ops"][0]["launches"][0]["rows"], "output");
  // On PTX the Q8_0 decode GEMV takes int8 activations: quantize_q8_x, then the dp4a GEMV
  // (one output: N1 = N2 = 0), both on the output rows of every pass.
  const json &head = m.graph["ops"][1]["launches"];
  ASSERT_EQ(head.size(), 2u);
  EXPECT_EQ(head[0]["kernel"], "sm_90.quantize_q8_x");
  EXPECT_EQ(head[1]["kernel"], "sm_90.matmul_q8_0_q8x");
  for (const json &l : head) {
    EXPECT_EQ(l["phase"], "all");
    EXPECT_EQ(l["rows"], "output");
  }
  EXPECT_EQ(head[0]["args"][0], json({{"buffer", "h"}, {"shape", {"T*144"}}}));
  EXPECT_EQ(head[1]["grid"], json({"12288", "ceil(T/8)", "1"}));
  // Q8_0 [576, 49152]: 49152 rows of 18 blocks of 34 bytes, as 32-bit words.
  EXPECT_EQ(head[1]["args"][0], json({{"weight", "token_embd.weight"}, {"shape", {"7520256"}}}));
  EXPECT_EQ(head[1]["args"][3], json({{"scratch", "x_q8"}, {"bytes", "max_T*576"}, {"shape", {"T*36"}}}));
  EXPECT_EQ(head[1]["args"][12], json({{"i32", "49152"}}));
  EXPECT_EQ(head[1]["args"][13], json({{"i32", "0"}}));
}

// qwen3's q/k norm: rms_norm_f32 over T * n_head rows of head_dim, in place.
TEST(GpuKernels, HeadNormRunsOverHeads) {
  package::Manifest m = manifest("spirv", json::array({
      {{"op", "head_norm"}, {"in", {"q", "blk.0.attn_norm.weight"}}, {"out", "q"}, {"eps", 1e-6},
       {"head_dim", 64}},
  }));
  m.weight_plan.tensors[0].ne = {64};
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  EXPECT_EQ(m.graph["ops"][0]["launches"],
            json::parse(R"([{"kernel": "spirv.rms_norm_f32", "phase": "all", "scope": "batch",
              "grid": ["T*9", "1", "1"], "dynamic_smem": "0",
              "args": [{"buffer": "q", "shape": ["T*576"]},
                       {"weight": "blk.0.attn_norm.weight", "shape": ["64"]},
                       {"buffer": "q", "shape": ["T*576"]}, {"i32": "64"}, {"f32": 1e-06}]}])"));
}

TEST(GpuKernels, RmsNormAndSwigluForSpirv) {
  package::Manifest m = manifest("spirv", kNormAndSwiglu);
  package::PackageFiles files;
  gguf::File f = emptyGguf();
  compiler::addGpuKernels(m, f, files, {});
  ASSERT_EQ(m.kernels.size(), 3u);  // + argmax (greedy sampling)
  EXPECT_EQ(m.kernels[0].entry, "spirv.rms_norm_f32");
  EXPECT_EQ(m.kernels[0].file, "swz_rms_norm.spv");
  EXPECT_EQ(m.kernels[0].launch.at("block"), json({256, 1, 1}));
  EXPECT_EQ(m.kernels[0].launch.at("abi"), "spirv-storage-buffers");
  ASSERT_EQ(files.size(), 3u);
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
  ASSERT_EQ(files.size(), 2u);  // + swz_argmax.spv (greedy sampling)
  EXPECT_EQ(files[0].first, "swz_swiglu.spv");
  EXPECT_EQ(m.kernels[0].launch.at("abi"), "spirv-storage-buffers");
}

// Q4_K matmuls decode on the int8 tensor cores where the target schedule says so
// (gemv.q4_k_mma): sm_90's schedule with it turned on puts a 576-row matrix on the 8-warp
// workgroup (fewer rows than its gemv.q4_k_mma_split_k_below_rows), with the split at 0
// on the 4-warp one; sm_90 as shipped (q4_k_mma false) and sm_80 (no field) keep the
// dp4a GEMV.
TEST(GpuKernels, Q4KDecodeKernelFollowsTheSchedule) {
  auto q4kManifest = [&](const std::string &target) {
    package::Manifest m = manifest(target, json::array({
        {{"op", "matmul"}, {"in", {"a", "blk.0.ffn_down.weight"}}, {"out", "o"}},
    }));
    m.weight_plan.tensors[3].type = ggml::Type::Q4_K;  // ffn_down [1536 -> 576]
    return m;
  };
  gguf::File f = emptyGguf();
  auto decodeOf = [&](const std::string &target, const std::string &dir) {
    package::Manifest m = q4kManifest(target);
    package::PackageFiles files;
    compiler::addGpuKernels(m, f, files, {}, dir);
    return std::make_pair(phase(m, 0, "decode"), m);
  };
  // sm_90.json with gemv fields edited, in its own --schedule-dir.
  auto scheduleDir = [](const std::string &name, bool mma, int64_t split) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(dir);
    std::ifstream in(std::string(SWZ_SOURCE_DIR) + "/compiler/schedules/sm_90.json");
    json sched = json::parse(in);
    sched["gemv"]["q4_k_mma"] = mma;
    sched["gemv"]["q4_k_mma_split_k_below_rows"] = split;
    std::ofstream(dir / "sm_90.json") << sched.dump(2);
    return dir.string();
  };
  {
    auto [decode, m] = decodeOf("sm_90", scheduleDir("swz_q4k_mma_on", true, 4096));
    EXPECT_EQ(decode, json({"sm_90.quantize_q8_x", "sm_90.matmul_q4_k_mma_w8_q8x"}));
    EXPECT_EQ(record(m, 0, "sm_90.matmul_q4_k_mma_w8_q8x", "decode")["grid"], json({"36", "ceil(T/8)", "1"}));
    const package::Kernel *k = kernel(m, "sm_90.matmul_q4_k_mma_w8_q8x");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->launch.at("block"), json({256, 1, 1}));
    EXPECT_EQ(k->signature[0].at("dtype"), "memref<?xvector<2xi32>>");  // 8-byte weight loads
    EXPECT_EQ(k->launch.at("ptxas").at("spill_store_bytes"), 0);
  }
  {
    auto [decode, m] = decodeOf("sm_90", scheduleDir("swz_q4k_mma_no_split", true, 0));
    EXPECT_EQ(decode, json({"sm_90.quantize_q8_x", "sm_90.matmul_q4_k_mma_q8x"}));
    const package::Kernel *k = kernel(m, "sm_90.matmul_q4_k_mma_q8x");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->launch.at("block"), json({128, 1, 1}));
  }
  EXPECT_EQ(decodeOf("sm_90", "").first, json({"sm_90.quantize_q8_x", "sm_90.matmul_q4_k_q8x"}));
  EXPECT_EQ(decodeOf("sm_80", "").first, json({"sm_80.quantize_q8_x", "sm_80.matmul_q4_k_q8x"}));
}

// The decode kernels of SmolLM2-135M's weight types: Q4_1 matmuls and the Q8_0 embedding
// lookup, one generated source per weight type (codegen/kernels/gemv_<type>.mlir).
TEST(GpuKernels, QuantizedMatmulAndGetRowsForSm90AndSpirv) {
  for (const std::string target : {"sm_90", "spirv"}) {
    SCOPED_TRACE(target);
    package::Manifest m = manifest(target, json::array({
        {{"op", "get_rows"}, {"in", {"token_embd.weight", "tokens"}}, {"out", "x"}},
        {{"op", "matmul"}, {"in", {"x", "blk.0.attn_q.weight"}}, {"out", "q"}},
    }));
    m.weight_plan.tensors.push_back({"token_embd.weight", ggml::Type::Q8_0, {576, 49152}, 0, 0});
    package::PackageFiles files;
    gguf::File f = emptyGguf();
    compiler::addGpuKernels(m, f, files, {});
    const bool ptx = target != "spirv";
    EXPECT_EQ(phase(m, 0, "all"), json({target + ".get_rows_q8_0"}));
    // PTX decodes on int8 activations (quantize_q8_x, then the dp4a GEMV); SPIR-V on f32.
    EXPECT_EQ(phase(m, 1, "decode"), ptx ? json({"sm_90.quantize_q8_x", "sm_90.matmul_q4_1_q8x"})
                                         : json({"spirv.matmul_q4_1"}));
    EXPECT_EQ(phase(m, 1, "prefill"),
              target == "spirv"
                  ? json({"spirv.dequant_q4_1_f16", "spirv.gemm_f32_f16w"})
                  : json({"sm_90.convert_f32_f16", "sm_90.dequant_q4_1_f16", "sm_90.gemm_f16"}));
    EXPECT_EQ(m.kernels[0].entry, target + ".get_rows_q8_0");
    EXPECT_EQ(m.kernels[0].launch.at("function"), "get_rows_q8_0");
    EXPECT_EQ(m.kernels[0].launch.at("block"), json({128, 1, 1}));
    EXPECT_EQ(m.kernels[0].launch.at("grid"), "T, 1, 1");
    auto kernel = [&](const std::string &entry) {
      auto k = std::find_if(m.kernels.begin(), m.kernels.end(), [&](const auto &k) { return k.entry == entry; });
      EXPECT_NE(k, m.kernels.end()) << entry;
      return k == m.kernels.end() ? package::Kernel{} : *k;
    };
    if (ptx) {
      const package::Kernel k = kernel("sm_90.matmul_q4_1_q8x");
      EXPECT_EQ(k.launch.at("function"), "matmul_q4_1_q8x");
      EXPECT_EQ(k.launch.at("grid"), "ceil((N0+N1+N2)/4), ceil(T/8), 1");
      // (w0..w2: memref<?xi32>, xq, xds, y0..y2, bias0..bias2, res, N0..N2, K, T, flags)
      EXPECT_EQ(k.signature.size(), 18u);
    } else {
      const package::Kernel k = kernel("spirv.matmul_q4_1");
      EXPECT_EQ(k.launch.at("function"), "matmul_q4_1");
      EXPECT_EQ(k.launch.at("grid"), "ceil(N/4), ceil(T/8), 1");
      // (w: memref<?xi32>, x, y, bias, res: memref<?xf32>, N, K, T, flags: i32)
      EXPECT_EQ(k.signature.size(), 9u);
    }
    const std::string ext = ptx ? ".ptx" : ".spv";
    std::vector<std::string> names;
    for (const auto &[name, bytes] : files)
      names.push_back(name);
    EXPECT_EQ(names[0], "swz_gemv_q8_0" + ext);
    // + swz_argmax (greedy sampling); PTX: the int8 GEMV's module, not gemv_q4_1's.
    EXPECT_NE(std::find(names.begin(), names.end(), (ptx ? "swz_gemv_q8x" : "swz_gemv_q4_1") + ext), names.end());
  }
}

} // namespace
