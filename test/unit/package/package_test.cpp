// Tests of the .swz package format (runtime/package): round trip, one test per validation
// rule (the error must name the field), atomic replacement, and refusal of a GGUF that
// differs from the one the package was compiled from.
#include "package/package.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "compile.h"
#include "tiny_gguf.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using swz::package::Error;
using swz::package::Manifest;

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("swz_package_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    gguf_ = (dir_ / "tiny.gguf").string();
    swz::test::write_tiny_gguf(gguf_, 1);
    pkg_ = (dir_ / "tiny.swz").string();
    swz::compiler::CompileOptions o;
    o.ggufPath = gguf_;
    o.outDir = pkg_;
    swz::compiler::compilePackage(o, {});
    manifest_ = swz::package::read_manifest(pkg_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string gguf_, pkg_;
  Manifest manifest_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// `cpu` as an sm_90 package (docs/package-format.md, "The launch contract"): stand-in GPU
/// kernels with MLIR signatures, and every graph op launching sm_90.rows over its output
/// buffer, the contract's smallest valid form. `files` receives the kernel files.
Manifest gpu_manifest(const Manifest& cpu, swz::package::PackageFiles& files) {
  Manifest m = cpu;
  m.target = "sm_90";
  m.kernels.clear();
  files.clear();
  auto kernel = [&](const std::string& name, const std::vector<std::string>& dtypes) {
    json sig = json::array();
    for (size_t i = 0; i < dtypes.size(); ++i) sig.push_back({{"name", "arg" + std::to_string(i)}, {"dtype", dtypes[i]}});
    m.kernels.push_back({"sm_90." + name, name + ".ptx",
                         {{"function", name}, {"block", {128, 1, 1}}, {"grid", "T, 1, 1"}, {"dynamic_smem", "0"}},
                         sig, std::nullopt});
    files.push_back({name + ".ptx", "// ptx\n"});
  };
  kernel("rows", {"memref<?xf32>", "memref<?xf32>", "i32", "f32"});
  kernel("matmul_q4_1", {"memref<?xi32>", "memref<?xvector<4xf32>>", "memref<?xf32>", "memref<?xf32>", "memref<?xf32>",
                         "i32", "i32", "i32", "i32"});
  kernel("attn", {"memref<?xf32>", "memref<?xf16>", "memref<?xi32>", "memref<?xf32>", "i32"});
  for (json& op : m.graph["ops"]) {
    const std::string out = op["out"];
    const std::string n = "T*" + std::to_string(m.graph["buffers"][out].get<int>());
    json rec = {{"kernel", "sm_90.rows"},
                {"phase", "all"},
                {"scope", "batch"},
                {"grid", {"T", "1", "1"}},
                {"dynamic_smem", "0"},
                {"args", {{{"buffer", out}, {"shape", {n}}}, {{"buffer", out}, {"shape", {n}}}, {{"i32", "T"}}, {{"f32", 1.5}}}}};
    if (op.contains("rows")) rec["rows"] = op["rows"];
    op["launches"] = json::array({rec});
  }
  return m;
}

TEST_F(PackageTest, CompiledManifestHasTheModelsFacts) {
  const Manifest& m = manifest_;
  EXPECT_EQ(m.format_version, 3);
  EXPECT_EQ(m.target, "cpu");
  EXPECT_EQ(m.model.architecture, "llama");
  EXPECT_EQ(m.model.name, "tiny");
  EXPECT_EQ(m.model.hparams, swz::test::tiny_hparams().to_json());
  EXPECT_EQ(m.tokenizer.model, "gpt2");
  EXPECT_EQ(m.tokenizer.pre, "default");
  EXPECT_EQ(m.tokenizer.n_vocab, 300);
  ASSERT_TRUE(m.tokenizer.chat_template.has_value());
  EXPECT_EQ(*m.tokenizer.chat_template, "{{ messages[0]['content'] }}");
  EXPECT_EQ(m.source_gguf.path, fs::canonical(gguf_).string());
  EXPECT_EQ(m.source_gguf.size, fs::file_size(gguf_));
  EXPECT_EQ(m.source_gguf.tensor_count, swz::models::tensor_specs(swz::test::tiny_hparams()).size());
  // Weight plan offsets point at the tensor bytes in the file.
  swz::gguf::File f = swz::gguf::File::open(gguf_);
  ASSERT_EQ(m.weight_plan.tensors.size(), f.tensors().size());
  for (const auto& w : m.weight_plan.tensors) {
    const auto& t = f.require_tensor(w.name);
    EXPECT_EQ(f.base() + w.offset, t.data) << w.name;
    EXPECT_EQ(w.bytes, t.n_bytes) << w.name;
  }
}

TEST_F(PackageTest, ContentHashIsXxh3_128OfTheDataSection) {
  // Independent computation: the one-shot XXH3-128 over the file's bytes after the
  // data offset, read with ifstream (not the mapping).
  swz::gguf::File f = swz::gguf::File::open(gguf_);
  std::ifstream in(gguf_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  XXH128_hash_t h = XXH3_128bits(bytes.data() + f.data_offset(), bytes.size() - f.data_offset());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  EXPECT_EQ(swz::package::content_hash(f), hex);
  EXPECT_EQ(manifest_.source_gguf.digest, hex);
  uint64_t last = 0;
  swz::package::content_hash(f, [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last);
    EXPECT_EQ(total, bytes.size() - f.data_offset());
    last = done;
  });
  EXPECT_EQ(last, bytes.size() - f.data_offset());
}

TEST_F(PackageTest, RoundTrip) {
  const std::string out = (dir_ / "copy.swz").string();
  swz::package::write_package(out, manifest_);
  Manifest back = swz::package::read_manifest(out);
  EXPECT_EQ(swz::package::to_json(back), swz::package::to_json(manifest_));
  EXPECT_EQ(back.raw, swz::package::to_json(manifest_));
  EXPECT_EQ(back.kernels.size(), manifest_.kernels.size());
  ASSERT_NE(back.find_kernel("cpu.matmul.f32"), nullptr);
  EXPECT_FALSE(back.find_kernel("cpu.matmul.f32")->file.has_value());
  ASSERT_NE(back.find_weight("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(back.find_weight("blk.0.attn_q.weight")->ne, (std::vector<int64_t>{64, 64}));
  // No temporary directories are left behind.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(PackageTest, WriteReplacesAnExistingPackageAndRefusesOtherDirectories) {
  Manifest m = manifest_;
  m.model.name = "renamed";
  swz::package::write_package(pkg_, m);
  EXPECT_EQ(swz::package::read_manifest(pkg_).model.name, "renamed");

  fs::path other = dir_ / "not_a_package";
  fs::create_directories(other);
  std::ofstream(other / "precious.txt") << "keep me";
  EXPECT_NE(error_of([&] { swz::package::write_package(other.string(), m); }).find("refusing to replace"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(other / "precious.txt"));
}

TEST_F(PackageTest, WriteRefusesAnInvalidManifestAndWritesNothing) {
  Manifest m = manifest_;
  m.source_gguf.digest = "xyz";
  const std::string out = (dir_ / "bad.swz").string();
  EXPECT_NE(error_of([&] { swz::package::write_package(out, m); }).find("source_gguf.content_hash.digest"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(PackageTest, GpuTargetKernelFilesTravelWithThePackage) {
  swz::package::PackageFiles files;
  Manifest m = gpu_manifest(manifest_, files);
  // A kernel file that is not supplied is refused.
  EXPECT_NE(error_of([&] { swz::package::write_package((dir_ / "gpu.swz").string(), m); })
                .find("not among the files to write"),
            std::string::npos);
  swz::package::write_package((dir_ / "gpu.swz").string(), m, files);
  Manifest back = swz::package::read_manifest((dir_ / "gpu.swz").string());
  EXPECT_EQ(*back.kernels[0].file, *m.kernels[0].file);
  std::ifstream in(dir_ / "gpu.swz" / *m.kernels[0].file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "// ptx\n");
  // A deleted kernel file is reported on read.
  fs::remove(dir_ / "gpu.swz" / *m.kernels[0].file);
  EXPECT_NE(error_of([&] { swz::package::read_manifest((dir_ / "gpu.swz").string()); })
                .find("kernels[0].file: \"" + *m.kernels[0].file + "\" is missing"),
            std::string::npos);
}

// GPU-target graph rules: every op has launches covering every forward pass or is fused
// into another op that lists it.
TEST_F(PackageTest, GpuTargetGraphFusionAndPhasesAreChecked) {
  swz::package::PackageFiles files;
  Manifest m = gpu_manifest(manifest_, files);
  json& ops = m.graph["ops"];
  const std::string out = (dir_ / "g.swz").string();
  auto expect = [&](Manifest mm, const std::string& what) {
    EXPECT_NE(error_of([&] { swz::package::write_package(out, mm, files); }).find(what), std::string::npos)
        << what;
  };
  Manifest none = m;
  none.graph["ops"][1].erase("launches");
  expect(none, "graph.ops[1]: an op needs \"launches\" or \"fused_into\"");
  Manifest half = m;
  half.graph["ops"][1]["launches"][0]["phase"] = "decode";
  expect(half, "graph.ops[1].launches: must cover every forward pass");
  Manifest unlisted = m;
  unlisted.graph["ops"][2].erase("launches");
  unlisted.graph["ops"][2]["fused_into"] = 1;
  expect(unlisted, "does not list this op in its \"fused\"");
  Manifest both = unlisted;
  both.graph["ops"][1]["fused"] = {2};
  both.graph["ops"][2]["launches"] = ops[2]["launches"];
  expect(both, "an op fused into another has no launches of its own");
  Manifest ok = unlisted;
  ok.graph["ops"][1]["fused"] = {2};
  swz::package::write_package(out, ok, files);
  EXPECT_EQ(swz::package::read_manifest(out).graph["ops"][2]["fused_into"], 1);
  // "decode_into": the op's decode runs in an earlier op's launch (a merged GEMV), so
  // prefill launches alone cover it; an index that is not earlier, or a decode launch
  // of its own besides, is refused.
  Manifest prefillOnly = m;
  prefillOnly.graph["ops"][2]["launches"][0]["phase"] = "prefill";
  expect(prefillOnly, "graph.ops[2].launches: must cover every forward pass");
  Manifest merged = prefillOnly;
  merged.graph["ops"][2]["decode_into"] = 1;
  swz::package::write_package(out, merged, files);
  EXPECT_EQ(swz::package::read_manifest(out).graph["ops"][2]["decode_into"], 1);
  Manifest later = prefillOnly;
  later.graph["ops"][2]["decode_into"] = 3;
  expect(later, "graph.ops[2].decode_into: must be the index of an earlier graph op with launches");
  Manifest twice = m;
  twice.graph["ops"][2]["launches"][0]["phase"] = "decode";
  twice.graph["ops"][2]["launches"].push_back(ops[2]["launches"][0]);
  twice.graph["ops"][2]["launches"][1]["phase"] = "prefill";
  twice.graph["ops"][2]["decode_into"] = 1;
  expect(twice, "an op whose decode runs in another op's launch has no decode launch");
}

// graph.sampling.argmax: parsed by parse_argmax_launches, refused when it is not an
// argmax over the graph's output rows.
TEST_F(PackageTest, GreedySamplingRecordsAreCheckedAndParsed) {
  swz::package::PackageFiles files;
  Manifest m = gpu_manifest(manifest_, files);
  const std::string output = m.graph["output"];
  const std::string n = "T*" + std::to_string(m.graph["buffers"][output].get<int>());
  json rec = {{"kernel", "sm_90.rows"},
              {"phase", "all"},
              {"scope", "batch"},
              {"rows", "output"},
              {"grid", {"T", "1", "1"}},
              {"dynamic_smem", "0"},
              {"args", {{{"buffer", output}, {"shape", {n}}}, {{"scratch", "ids"}, {"bytes", "max_T*4"}, {"shape", {"T"}}},
                        {{"i32", "T"}}, {{"f32", 0.5}}}}};
  m.graph["sampling"] = {{"argmax", {{"op", "argmax"}, {"in", {output}}, {"out", "ids"}, {"rows", "output"}, {"launches", {rec}}}}};
  const std::string out = (dir_ / "s.swz").string();
  swz::package::write_package(out, m, files);
  const std::vector<swz::package::Launch> l = swz::package::parse_argmax_launches(swz::package::read_manifest(out));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(l[0].output_rows);
  EXPECT_EQ(l[0].args[1].kind, swz::package::Binding::Scratch);
  EXPECT_EQ(l[0].args[1].name, "ids");
  EXPECT_TRUE(swz::package::parse_argmax_launches(manifest_).empty());  // optional: cpu packages have none
  auto expect = [&](Manifest mm, const std::string& what) {
    EXPECT_NE(error_of([&] { swz::package::write_package(out, mm, files); }).find(what), std::string::npos) << what;
  };
  Manifest other = m;
  other.graph["sampling"]["argmax"]["in"] = {"h"};
  expect(other, "graph.sampling.argmax: expected {\"op\": \"argmax\", \"in\": [the graph's output]");
  Manifest phase = m;
  phase.graph["sampling"]["argmax"]["launches"][0]["phase"] = "decode";
  expect(phase, "graph.sampling.argmax.launches[0]: greedy sampling runs on every pass, over the batch");
  Manifest rows = m;
  rows.graph["sampling"]["argmax"]["launches"][0].erase("rows");
  expect(rows, "graph.sampling.argmax.launches[0].rows: the graph op runs on output rows only");
}

// graph.kv_move: parsed by parse_kv_move_launches; refused when a layer's K or V is left
// out, when a record is not over the batch on every pass, and kv_moves bound elsewhere.
TEST_F(PackageTest, KvMoveRecordsAreCheckedAndParsed) {
  swz::package::PackageFiles files;
  Manifest m = gpu_manifest(manifest_, files);
  json sig = json::array();
  const std::vector<std::string> dtypes = {"memref<?xf16>", "memref<?xf16>", "memref<?xi32>", "i32", "f32"};
  for (size_t i = 0; i < dtypes.size(); ++i) sig.push_back({{"name", "arg" + std::to_string(i)}, {"dtype", dtypes[i]}});
  m.kernels.push_back({"sm_90.move", "move.ptx",
                       {{"function", "move"}, {"block", {64, 1, 1}}, {"grid", "T, 1, 1"}, {"dynamic_smem", "0"}}, sig,
                       std::nullopt});
  files.push_back({"move.ptx", "// ptx\n"});
  ASSERT_EQ(m.model.hparams.value("n_layer", 0), 1);
  json rec = {{"kernel", "sm_90.move"},
              {"phase", "all"},
              {"scope", "batch"},
              {"grid", {"T", "2", "1"}},
              {"dynamic_smem", "0"},
              {"args", {{{"kv", "k"}, {"layer", 0}, {"shape", {"kv_pages*64"}}},
                        {{"kv", "v"}, {"layer", 0}, {"shape", {"kv_pages*64"}}},
                        {{"kv_moves", true}, {"shape", {"T*3"}}},
                        {{"i32", "64"}},
                        {{"f32", 10000.0}}}}};
  m.graph["kv_move"] = {{"op", "kv_move"}, {"launches", {rec}}};
  const std::string out = (dir_ / "kv.swz").string();
  swz::package::write_package(out, m, files);
  const std::vector<swz::package::Launch> l = swz::package::parse_kv_move_launches(swz::package::read_manifest(out));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].args[2].kind, swz::package::Binding::KvMoves);
  EXPECT_EQ(l[0].args[1].kind, swz::package::Binding::Kv);
  EXPECT_TRUE(swz::package::parse_kv_move_launches(manifest_).empty());  // optional: cpu packages have none
  auto expect = [&](Manifest mm, const std::string& what) {
    EXPECT_NE(error_of([&] { swz::package::write_package(out, mm, files); }).find(what), std::string::npos) << what;
  };
  Manifest noV = m;
  noV.graph["kv_move"]["launches"][0]["args"][1] = {{"kv", "k"}, {"layer", 0}, {"shape", {"kv_pages*64"}}};
  expect(noV, "graph.kv_move.launches: no record binds layer 0's V: every layer's K and V move");
  Manifest phase = m;
  phase.graph["kv_move"]["launches"][0]["phase"] = "decode";
  expect(phase, "graph.kv_move.launches[0]: moving K/V is no forward pass: phase all, scope batch");
  Manifest op = m;
  op.graph["kv_move"]["op"] = "move";
  expect(op, "graph.kv_move: expected {\"op\": \"kv_move\"");
  Manifest elsewhere = m;
  elsewhere.graph["ops"][0]["launches"][0]["kernel"] = "sm_90.move";
  elsewhere.graph["ops"][0]["launches"][0]["args"] = rec["args"];
  expect(elsewhere, "kv_moves binds move_kv's table of moves: only graph.kv_move's records bind it");
}

// One launch-contract rule per case: mutate a record of the GPU manifest, expect an Error
// naming the record's field.
TEST_F(PackageTest, LaunchRecordErrorsNameTheField) {
  swz::package::PackageFiles files;
  const json base = swz::package::to_json(gpu_manifest(manifest_, files));
  EXPECT_NO_THROW(swz::package::from_json(base, "m"));
  struct LaunchCase {
    const char* name;
    std::function<void(json& rec)> mutate;  // graph.ops[1].launches[0] (rms_norm -> h)
    const char* expect;
  };
  const json attn = {{"kernel", "sm_90.attn"},
                     {"phase", "all"},
                     {"scope", "sequence"},
                     {"let", {{"n_split", "ceil(ctx/256)"}}},
                     {"grid", {"T", "n_split", "1"}},
                     {"dynamic_smem", "0"},
                     {"args",
                      {{{"buffer", "q"}, {"shape", {"T*64"}}},
                       {{"kv", "k"}, {"layer", 0}, {"shape", {"kv_pages*2048"}}},
                       {{"block_table", true}, {"shape", {"ceil(ctx/64)"}}},
                       {{"scratch", "o_part"}, {"bytes", "ceil(max_ctx/256)*max_T*256"}, {"shape", {"n_split*T*64"}}},
                       {{"i32", "pos0"}}}}};
  const std::vector<LaunchCase> cases = {
      {"args short", [](json& r) { r["args"].erase(3); },
       "graph.ops[1].launches[0].args: 3 bindings, kernel sm_90.rows has 4 arguments"},
      {"args kind", [](json& r) { r["args"][2] = {{"buffer", "h"}, {"shape", {"T*64"}}}; },
       "graph.ops[1].launches[0].args[2]: kernel sm_90.rows argument 2 is i32, the binding is a memref (buffer \"h\")"},
      {"args f32 as i32", [](json& r) { r["args"][3] = {{"i32", "1"}}; },
       "graph.ops[1].launches[0].args[3]: kernel sm_90.rows argument 3 is f32, the binding is an i32 (i32 \"1\")"},
      {"unknown symbol", [](json& r) { r["grid"][0] = "ceil(n/256)"; },
       "graph.ops[1].launches[0].grid[0]: unknown symbol 'n' at 5 in 'ceil(n/256)'; known: T, pos0, ctx, kv_pages"},
      {"max_T outside scratch", [](json& r) { r["args"][0]["shape"][0] = "max_T*64"; },
       "graph.ops[1].launches[0].args[0].shape[0]: unknown symbol 'max_T'"},
      {"bad expression", [](json& r) { r["dynamic_smem"] = "2*(T"; },
       "graph.ops[1].launches[0].dynamic_smem: expected ')'"},
      {"not whole", [](json& r) { r["grid"][1] = "1/8"; }, "graph.ops[1].launches[0].grid[1]: value: '1/8' = 0.125"},
      {"rank", [](json& r) { r["args"][0]["shape"] = {"T", "64"}; },
       "graph.ops[1].launches[0].args[0].shape: 2 sizes, kernel sm_90.rows argument 0 (memref<?xf32>) has rank 1"},
      {"no shape", [](json& r) { r["args"][0].erase("shape"); }, "graph.ops[1].launches[0].args[0].shape: missing"},
      {"buffer", [](json& r) { r["args"][0]["buffer"] = "zz"; },
       "graph.ops[1].launches[0].args[0].buffer: 'zz' is not a graph buffer"},
      {"weight", [](json& r) { r["args"][1] = {{"weight", "nope.weight"}, {"shape", {"64"}}}; },
       "graph.ops[1].launches[0].args[1].weight: 'nope.weight' is not a weight_plan tensor"},
      {"two kinds", [](json& r) { r["args"][1]["absent"] = true; },
       "graph.ops[1].launches[0].args[1]: both \"buffer\" and \"absent\""},
      {"no kind", [](json& r) { r["args"][1] = {{"shape", {"1"}}}; }, "graph.ops[1].launches[0].args[1]: no binding"},
      {"f32 type", [](json& r) { r["args"][3]["f32"] = "1.5"; }, "graph.ops[1].launches[0].args[3].f32: expected a number"},
      {"kernel", [](json& r) { r["kernel"] = "sm_90.nope"; },
       "graph.ops[1].launches[0].kernel: 'sm_90.nope' is not a kernels[] entry"},
      {"phase", [](json& r) { r["phase"] = "verify"; }, "graph.ops[1].launches[0].phase: unknown phase \"verify\""},
      {"scope", [](json& r) { r["scope"] = "token"; }, "graph.ops[1].launches[0].scope: unknown scope \"token\""},
      {"rows", [](json& r) { r["rows"] = "output"; },
       "graph.ops[1].launches[0].rows: \"rows\": \"output\" on a graph op that runs on every row"},
      {"grid size", [](json& r) { r["grid"] = {"T", "1"}; }, "graph.ops[1].launches[0].grid: expected 3 expressions"},
      {"sequences in sequence scope",
       [&](json& r) { r = attn; r["phase"] = "decode"; r["args"][2] = {{"sequences", true}, {"shape", {"n_seq*4"}}}; },
       "graph.ops[1].launches[0].args[2]: sequences describes the sequences of a batch-scope launch"},
      {"row_tables in sequence scope", [&](json& r) { r = attn; r["args"][2] = {{"row_tables", true}, {"shape", {"T"}}}; },
       "graph.ops[1].launches[0].args[2]: row_tables describes the sequences of a batch-scope launch"},
      {"batch block_table in prefill", [&](json& r) { r = attn; r["scope"] = "batch"; r["phase"] = "prefill"; },
       "graph.ops[1].launches[0].args[2]: a batch-scope block_table holds the tables from the pass's first sequence on"},
      {"sequences outside decode",
       [&](json& r) { r = attn; r["scope"] = "batch"; r["args"][2] = {{"sequences", true}, {"shape", {"n_seq*4"}}}; },
       "graph.ops[1].launches[0].args[2]: sequences binds the decode sequences of a pass"},
      {"kv layer", [&](json& r) { r = attn; r["args"][1]["layer"] = 1; },
       "graph.ops[1].launches[0].args[1].layer: layer 1 is not below n_layer 1"},
      {"kv type", [&](json& r) { r = attn; r["args"][2] = {{"kv", "v"}, {"layer", 0}, {"shape", {"1"}}}; },
       "graph.ops[1].launches[0].args[2]: kernel sm_90.attn argument 2 is memref<?xi32>; kv binds memref<?xf16>"},
      {"scratch symbol", [&](json& r) { r = attn; r["args"][3]["bytes"] = "T*256"; },
       "graph.ops[1].launches[0].args[3].bytes: unknown symbol 'T'"},
      {"let unknown", [&](json& r) { r = attn; r["let"]["n_split"] = "ceil(len/256)"; },
       "graph.ops[1].launches[0].let.n_split: unknown symbol 'len'"},
      {"let cycle", [&](json& r) { r = attn; r["let"] = {{"a", "b+1"}, {"b", "a+1"}}; },
       "graph.ops[1].launches[0].let: its symbols depend on each other in a cycle"},
      {"let predefined", [&](json& r) { r = attn; r["let"]["ctx"] = "1"; },
       "graph.ops[1].launches[0].let.ctx: 'ctx' is a predefined symbol"},
  };
  for (const LaunchCase& c : cases) {
    json j = base;
    c.mutate(j["graph"]["ops"][1]["launches"][0]);
    std::string err = error_of([&] { swz::package::from_json(j, "pkg/manifest.json"); });
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": got: " << err;
    EXPECT_EQ(err.rfind("pkg/manifest.json: ", 0), 0u) << c.name << ": got: " << err;
  }
  // The attention-like record itself is valid.
  json j = base;
  j["graph"]["ops"][1]["launches"][0] = attn;
  EXPECT_NO_THROW(swz::package::from_json(j, "m"));
}

// parse_launches: the records of every op, expressions compiled against the record's
// symbols (T, pos0, ctx, kv_pages, then `let` in dependency order).
TEST_F(PackageTest, ParseLaunchesEvaluatesTheRules) {
  swz::package::PackageFiles files;
  Manifest m = gpu_manifest(manifest_, files);
  json& rec = m.graph["ops"][1]["launches"][0];
  // "a" sorts before "split_len" but depends on it: evaluated after it.
  rec["let"] = {{"a", "split_len/64"}, {"split_len", "ceil(ctx/64)*64"}};
  rec["grid"] = {"ceil(T*3/8)", "a", "max(1, pos0)"};
  rec["args"][0] = {{"scratch", "x_f16"}, {"bytes", "max_T*1152"}, {"shape", {"T*576"}}};
  m = swz::package::from_json(swz::package::to_json(m), "m");
  std::vector<swz::package::OpLaunches> all = swz::package::parse_launches(m);
  ASSERT_EQ(all.size(), m.graph["ops"].size());
  EXPECT_EQ(all[1].op, 1u);
  ASSERT_EQ(all[1].launches.size(), 1u);
  const swz::package::Launch& l = all[1].launches[0];
  EXPECT_EQ(l.kernel, "sm_90.rows");
  EXPECT_EQ(m.kernels[l.kernel_index].entry, "sm_90.rows");
  EXPECT_EQ(l.phase, swz::package::Phase::All);
  EXPECT_EQ(l.scope, swz::package::Scope::Batch);
  EXPECT_FALSE(l.output_rows);
  EXPECT_EQ(l.symbols(), (std::vector<std::string>{"T", "pos0", "ctx", "kv_pages", "n_seq", "seq_T", "table_stride",
                                                    "max_ctx", "split_len", "a"}));
  // T = 37, pos0 = 100, ctx = 137, kv_pages = 0, one sequence of 37 rows, max_ctx 4096;
  // then the lets.
  std::vector<double> v = {37, 100, 137, 0, 1, 37, 16, 4096, 0, 0};
  for (size_t i = 0; i < l.let.size(); ++i) v[swz::package::kSymLet0 + i] = l.let[i].evaluate(v.data());
  EXPECT_EQ(v[8], 192);
  EXPECT_EQ(v[9], 3);
  EXPECT_EQ(l.grid[0].as_int(v.data(), "grid"), 14);
  EXPECT_EQ(l.grid[1].as_int(v.data(), "grid"), 3);
  EXPECT_EQ(l.grid[2].as_int(v.data(), "grid"), 100);
  ASSERT_EQ(l.args.size(), 4u);
  ASSERT_EQ(l.arg_types.size(), 4u);
  EXPECT_EQ(l.args[0].kind, swz::package::Binding::Scratch);
  EXPECT_EQ(l.args[0].name, "x_f16");
  const double budget[] = {512, 8192};  // max_T, max_ctx
  EXPECT_EQ(l.args[0].value.as_int(budget, "bytes"), 512 * 1152);
  EXPECT_EQ(l.args[0].shape[0].as_int(v.data(), "shape"), 37 * 576);
  EXPECT_EQ(l.args[1].kind, swz::package::Binding::Buffer);
  EXPECT_EQ(l.args[2].kind, swz::package::Binding::I32);
  EXPECT_EQ(l.args[2].value.as_int(v.data(), "i32"), 37);
  EXPECT_EQ(l.args[3].kind, swz::package::Binding::F32);
  EXPECT_EQ(l.args[3].f32, 1.5f);
  EXPECT_EQ(l.arg_types[0].kind, swz::package::ArgType::Memref);
  EXPECT_EQ(l.arg_types[3].kind, swz::package::ArgType::F32);
  // The LM head's record carries rows: "output".
  EXPECT_TRUE(all.back().launches[0].output_rows);
  // A cpu package has records too, one op each (attention: one per phase).
  const auto cpu = swz::package::parse_launches(manifest_);
  ASSERT_EQ(cpu.size(), manifest_.graph["ops"].size());
  EXPECT_EQ(cpu[0].launches[0].kernel, "cpu.get_rows.f32");
}

TEST(PackageArgType, ParsesTheKernelSignatureTypes) {
  using swz::package::ArgType;
  auto t = swz::package::parse_arg_type("memref<?xvector<4xf32>>");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, ArgType::Memref);
  EXPECT_EQ(t->rank, 1);
  EXPECT_EQ(t->elem_bytes, 16);
  t = swz::package::parse_arg_type("memref<?x?xf16>");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->rank, 2);
  EXPECT_EQ(t->elem_bytes, 2);
  EXPECT_EQ(t->elem, "f16");
  EXPECT_EQ(swz::package::parse_arg_type("memref<?xi8>")->elem_bytes, 1);
  EXPECT_EQ(swz::package::parse_arg_type("i32")->kind, ArgType::I32);
  EXPECT_EQ(swz::package::parse_arg_type("f32")->kind, ArgType::F32);
  EXPECT_FALSE(swz::package::parse_arg_type("memref<4xf32>"));
  EXPECT_FALSE(swz::package::parse_arg_type("memref<?xbf16>"));
  EXPECT_FALSE(swz::package::parse_arg_type("q4_1"));
}

// One case per validation rule: mutate the compiled manifest's JSON, expect an Error whose
// message names the field.
struct Case {
  const char* name;
  std::function<void(json&)> mutate;
  const char* expect;  // substring of the error message
};

TEST_F(PackageTest, EveryValidationErrorNamesTheField) {
  auto op_index = [](const json& j, const std::string& kind) {
    for (size_t i = 0; i < j["graph"]["ops"].size(); ++i)
      if (j["graph"]["ops"][i]["op"] == kind) return i;
    return size_t{0};
  };
  const std::vector<Case> cases = {
      {"format", [](json& j) { j["format"] = "gguf"; }, "format: expected \"swizzle-package\", got \"gguf\""},
      {"format missing", [](json& j) { j.erase("format"); }, "format: missing"},
      {"version", [](json& j) { j["format_version"] = 1; },
       "format_version: package format version 1 is not supported (this build reads version 3); recompile the "
       "package with this swizzlec"},
      {"version type", [](json& j) { j["format_version"] = "1"; }, "format_version: expected a non-negative integer"},
      {"target", [](json& j) { j["target"] = "sm_75"; }, "target: unknown target \"sm_75\""},
      {"created_by", [](json& j) { j["created_by"] = ""; }, "created_by: must not be empty"},
      {"model", [](json& j) { j["model"] = json::array(); }, "model: expected an object"},
      {"architecture", [](json& j) { j["model"]["architecture"] = "qwen2"; },
       "model.hparams.arch: \"llama\" differs from model.architecture \"qwen2\""},
      {"hparams key", [](json& j) { j["model"]["hparams"].erase("n_ff"); }, "model.hparams.n_ff: missing"},
      {"hparams zero", [](json& j) { j["model"]["hparams"]["n_layer"] = 0; }, "model.hparams.n_layer: must be positive"},
      {"hparams gqa", [](json& j) { j["model"]["hparams"]["n_head_kv"] = 3; },
       "model.hparams.n_head_kv: n_head is not a multiple of n_head_kv"},
      {"hparams rope", [](json& j) { j["model"]["hparams"]["rope_type"] = "yarn"; },
       "model.hparams.rope_type: expected \"norm\" or \"neox\""},
      {"hparams bool", [](json& j) { j["model"]["hparams"]["qk_norm"] = 1; }, "model.hparams.qk_norm: expected a boolean"},
      {"tokenizer model", [](json& j) { j["tokenizer"].erase("model"); }, "tokenizer.model: missing"},
      {"n_vocab", [](json& j) { j["tokenizer"]["n_vocab"] = 0; }, "tokenizer.n_vocab: must be positive"},
      {"chat_template", [](json& j) { j["tokenizer"]["chat_template"] = 5; },
       "tokenizer.chat_template: expected a string or null"},
      {"path", [](json& j) { j["source_gguf"]["path"] = "model.gguf"; }, "source_gguf.path: must be absolute"},
      {"size", [](json& j) { j["source_gguf"]["size"] = -1; }, "source_gguf.size: expected a non-negative integer"},
      {"algorithm", [](json& j) { j["source_gguf"]["content_hash"]["algorithm"] = "md5"; },
       "source_gguf.content_hash.algorithm: expected \"xxh3-128\""},
      {"digest", [](json& j) { j["source_gguf"]["content_hash"]["digest"] = "ABC"; },
       "source_gguf.content_hash.digest: expected 32 lower-case hex digits"},
      {"tensor_count", [](json& j) { j["source_gguf"]["tensor_count"] = "12"; },
       "source_gguf.tensor_count: expected a non-negative integer"},
      {"kernels", [](json& j) { j["kernels"] = json::object(); }, "kernels: expected an array"},
      {"kernel entry", [](json& j) { j["kernels"][1]["entry"] = j["kernels"][0]["entry"]; },
       "kernels[1].entry: duplicate entry"},
      {"kernel file cpu", [](json& j) { j["kernels"][0]["file"] = "k.o"; }, "kernels[0].file: must be null for target cpu"},
      {"kernel file gpu", [](json& j) { j["target"] = "sm_90"; }, "kernels[0].file: target sm_90 needs a kernel file"},
      {"kernel file escape",
       [](json& j) {
         j["target"] = "spirv";
         for (auto& k : j["kernels"]) k["file"] = "../evil.spv";
       },
       "kernels[0].file: \"../evil.spv\" must be a plain relative path"},
      {"launch", [](json& j) { j["kernels"][2]["launch"] = {{"threads", 4}}; },
       "kernels[2].launch: target cpu expects {\"threads\": \"pool\"}"},
      {"signature", [](json& j) { j["kernels"][0]["signature"][1].erase("dtype"); }, "kernels[0].signature[1].dtype: missing"},
      {"schedule", [](json& j) { j["kernels"][0]["schedule"] = 3; }, "kernels[0].schedule: expected a string or null"},
      {"strategy", [](json& j) { j["weight_plan"]["strategy"] = "repack"; }, "weight_plan.strategy: unknown strategy \"repack\""},
      {"tensor type", [](json& j) { j["weight_plan"]["tensors"][0]["type"] = "q9_9"; },
       "weight_plan.tensors[0].type: unknown ggml type \"q9_9\""},
      {"tensor ne", [](json& j) { j["weight_plan"]["tensors"][0]["ne"] = json::array(); },
       "weight_plan.tensors[0].ne: expected 1 to 4 dimensions"},
      {"tensor ne zero", [](json& j) { j["weight_plan"]["tensors"][0]["ne"][1] = 0; },
       "weight_plan.tensors[0].ne[1]: dimension out of range"},
      {"tensor block", [](json& j) { j["weight_plan"]["tensors"][0]["type"] = "q8_0"; j["weight_plan"]["tensors"][0]["ne"][0] = 65; },
       "weight_plan.tensors[0].ne: ne[0] = 65 is not a multiple of q8_0's block size 32"},
      {"tensor bytes", [](json& j) { j["weight_plan"]["tensors"][0]["bytes"] = 12; },
       "weight_plan.tensors[0].bytes: 12 does not match f32 [64, 300]"},
      {"tensor offset", [](json& j) { j["weight_plan"]["tensors"][0]["offset"] = j["source_gguf"]["size"]; },
       "weight_plan.tensors[0].offset: tensor extends past source_gguf.size"},
      {"tensor duplicate", [](json& j) { j["weight_plan"]["tensors"][1]["name"] = j["weight_plan"]["tensors"][0]["name"]; },
       "weight_plan.tensors[1].name: duplicate tensor"},
      {"graph", [](json& j) { j["graph"] = 1; }, "graph: expected an object"},
      {"graph hparams", [](json& j) { j["graph"]["hparams"]["n_ff"] = 7; }, "graph.hparams: differs from model.hparams"},
      {"graph output", [](json& j) { j["graph"]["output"] = "nowhere"; }, "graph.output: 'nowhere' is not a graph buffer"},
      {"graph ops", [](json& j) { j["graph"]["ops"] = json::array(); }, "graph.ops: must not be empty"},
      {"graph op input",
       [&](json& j) { j["graph"]["ops"][op_index(j, "matmul")]["in"][1] = "blk.9.attn_q.weight"; },
       "'blk.9.attn_q.weight' is neither a graph buffer nor a weight_plan tensor"},
      {"graph op out", [](json& j) { j["graph"]["ops"][0]["out"] = "zz"; }, "graph.ops[0].out: 'zz' is not a graph buffer"},
      {"graph op kernel", [](json& j) { j["graph"]["ops"][0]["kernel"] = "cpu.get_rows.q8_0"; },
       "graph.ops[0].kernel: ops name their kernels in \"launches\" (format version 3); recompile the package"},
      {"graph op launches", [](json& j) { j["graph"]["ops"][0].erase("launches"); },
       "graph.ops[0]: an op needs \"launches\" or \"fused_into\""},
      {"graph op launch kernel", [](json& j) { j["graph"]["ops"][0]["launches"][0]["kernel"] = "cpu.get_rows.q9"; },
       "graph.ops[0].launches[0].kernel: 'cpu.get_rows.q9' is not a kernels[] entry"},
      {"not object", [](json& j) { j = json::array(); }, "(top level): expected an object"},
  };
  const json base = swz::package::to_json(manifest_);
  EXPECT_NO_THROW(swz::package::from_json(base, "m"));
  for (const Case& c : cases) {
    json j = base;
    c.mutate(j);
    std::string err = error_of([&] { swz::package::from_json(j, "pkg/manifest.json"); });
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": got: " << err;
    EXPECT_EQ(err.rfind("pkg/manifest.json: ", 0), 0u) << c.name << ": got: " << err;
  }
}

TEST_F(PackageTest, ReadManifestReportsMissingAndMalformedFiles) {
  EXPECT_NE(error_of([&] { swz::package::read_manifest((dir_ / "nope.swz").string()); }).find("not a package directory"),
            std::string::npos);
  fs::create_directories(dir_ / "empty.swz");
  EXPECT_NE(error_of([&] { swz::package::read_manifest((dir_ / "empty.swz").string()); }).find("manifest.json: cannot open"),
            std::string::npos);
  std::ofstream(dir_ / "empty.swz" / "manifest.json") << "{\"format\": ";
  EXPECT_NE(error_of([&] { swz::package::read_manifest((dir_ / "empty.swz").string()); }).find("not valid JSON"),
            std::string::npos);
}

TEST_F(PackageTest, OpenPackageMapsTheGguf) {
  swz::package::LoadedPackage p = swz::package::open_package(pkg_);
  EXPECT_EQ(p.manifest.model.name, "tiny");
  EXPECT_EQ(p.gguf.tensors().size(), p.manifest.source_gguf.tensor_count);
  EXPECT_NE(p.gguf.tensor("blk.0.ffn_down.weight"), nullptr);
}

TEST_F(PackageTest, OpenPackageRefusesADifferentGgufOfTheSameSize) {
  // Same size and layout, different weights: only the content hash tells them apart.
  swz::test::write_tiny_gguf(gguf_, 2);
  ASSERT_EQ(fs::file_size(gguf_), manifest_.source_gguf.size);
  std::string err = error_of([&] { swz::package::open_package(pkg_); });
  EXPECT_NE(err.find("does not match the package"), std::string::npos) << err;
  EXPECT_NE(err.find("content hash "), std::string::npos) << err;
  EXPECT_NE(err.find("package was compiled from " + manifest_.source_gguf.digest), std::string::npos) << err;
  EXPECT_NE(err.find("recompile with swizzlec compile"), std::string::npos) << err;
  // Without hash verification the structural checks pass (documented trade-off).
  EXPECT_NO_THROW(swz::package::open_package(pkg_, /*verify_hash=*/false));
}

TEST_F(PackageTest, OpenPackageRefusesAGgufOfAnotherSizeOrMissing) {
  const std::string other = (dir_ / "other.gguf").string();
  swz::test::write_tiny_gguf(other, 1);
  {
    std::ofstream grow(other, std::ios::app | std::ios::binary);
    grow << std::string(32, '\0');
  }
  std::string err = error_of([&] { swz::package::open_package(pkg_, true, other); });
  EXPECT_NE(err.find(other + " does not match the package"), std::string::npos) << err;
  EXPECT_NE(err.find("size " + std::to_string(manifest_.source_gguf.size + 32) + " bytes"), std::string::npos) << err;

  // An override path holding an identical copy is accepted.
  const std::string copy = (dir_ / "copy.gguf").string();
  fs::copy_file(gguf_, copy);
  EXPECT_EQ(swz::package::open_package(pkg_, true, copy).gguf.path(), copy);

  fs::remove(gguf_);
  err = error_of([&] { swz::package::open_package(pkg_); });
  EXPECT_NE(err.find("which is missing"), std::string::npos) << err;
}

}  // namespace
