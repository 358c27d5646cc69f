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

TEST_F(PackageTest, CompiledManifestHasTheModelsFacts) {
  const Manifest& m = manifest_;
  EXPECT_EQ(m.format_version, 1);
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
  Manifest m = manifest_;
  m.target = "sm_90";
  for (auto& k : m.kernels) {
    k.file = "kernels/" + k.entry + ".ptx";
    k.launch = {{"grid", {"N/128", 1, 1}}, {"block", {128, 1, 1}}};
    k.schedule = "sm_90";
  }
  // GPU-target ops name their launches per phase (docs/package-format.md).
  for (auto& op : m.graph["ops"]) op["kernels"] = {{"all", {op["kernel"]}}};
  // A kernel file that is not supplied is refused.
  EXPECT_NE(error_of([&] { swz::package::write_package((dir_ / "gpu.swz").string(), m); })
                .find("not among the files to write"),
            std::string::npos);
  swz::package::PackageFiles files;
  for (auto& k : m.kernels) files.push_back({*k.file, "// ptx for " + k.entry + "\n"});
  swz::package::write_package((dir_ / "gpu.swz").string(), m, files);
  Manifest back = swz::package::read_manifest((dir_ / "gpu.swz").string());
  EXPECT_EQ(*back.kernels[0].file, *m.kernels[0].file);
  std::ifstream in(dir_ / "gpu.swz" / *m.kernels[0].file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "// ptx for " + m.kernels[0].entry + "\n");
  // A deleted kernel file is reported on read.
  fs::remove(dir_ / "gpu.swz" / *m.kernels[0].file);
  EXPECT_NE(error_of([&] { swz::package::read_manifest((dir_ / "gpu.swz").string()); })
                .find("kernels[0].file: \"" + *m.kernels[0].file + "\" is missing"),
            std::string::npos);
}

// GPU-target graph rules: every op has kernels covering every forward pass or is fused
// into another op that lists it.
TEST_F(PackageTest, GpuTargetGraphFusionAndPhasesAreChecked) {
  Manifest m = manifest_;
  m.target = "sm_90";
  swz::package::PackageFiles files;
  for (auto& k : m.kernels) {
    k.file = k.entry + ".ptx";
    files.push_back({*k.file, "// ptx\n"});
  }
  json& ops = m.graph["ops"];
  for (auto& op : ops) op["kernels"] = {{"all", {op["kernel"]}}};
  const std::string out = (dir_ / "g.swz").string();
  auto expect = [&](Manifest mm, const std::string& what) {
    EXPECT_NE(error_of([&] { swz::package::write_package(out, mm, files); }).find(what), std::string::npos)
        << what;
  };
  Manifest none = m;
  none.graph["ops"][1].erase("kernels");
  expect(none, "a GPU-target op needs \"kernels\" or \"fused_into\"");
  Manifest half = m;
  half.graph["ops"][1]["kernels"] = {{"decode", {ops[1]["kernel"]}}};
  expect(half, "must cover every forward pass");
  Manifest unlisted = m;
  unlisted.graph["ops"][2].erase("kernels");
  unlisted.graph["ops"][2].erase("kernel");
  unlisted.graph["ops"][2]["fused_into"] = 1;
  expect(unlisted, "does not list this op in its \"fused\"");
  Manifest both = unlisted;
  both.graph["ops"][1]["fused"] = {2};
  both.graph["ops"][2]["kernels"] = {{"all", {ops[2]["kernel"]}}};
  expect(both, "an op fused into another has no kernels of its own");
  Manifest ok = unlisted;
  ok.graph["ops"][1]["fused"] = {2};
  swz::package::write_package(out, ok, files);
  EXPECT_EQ(swz::package::read_manifest(out).graph["ops"][2]["fused_into"], 1);
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
      {"version", [](json& j) { j["format_version"] = 2; }, "format_version: package format version 2 is not supported"},
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
      {"graph op kernel", [](json& j) { j["graph"]["ops"][0]["kernel"] = "cpu.get_rows.q9"; },
       "graph.ops[0].kernel: 'cpu.get_rows.q9' is not a kernels[] entry"},
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
