// Tests of `swizzlec compile` (compiler/driver): the cpu target's kernel list, target
// checks, and clear errors for unsupported or corrupt models, through the library and
// through the swizzlec executable.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "../package/tiny_gguf.h"
#include "compile.h"
#include "compile_cpu.h"

namespace {

namespace fs = std::filesystem;
using swz::compiler::CompileError;
using swz::compiler::CompileOptions;

class CompileDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("swz_compile_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    gguf_ = (dir_ / "tiny.gguf").string();
    swz::test::write_tiny_gguf(gguf_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  CompileOptions opts(const std::string& target = "cpu") {
    CompileOptions o;
    o.ggufPath = gguf_;
    o.target = target;
    o.outDir = (dir_ / "out.swz").string();
    return o;
  }
  fs::path dir_;
  std::string gguf_;
};

TEST_F(CompileDriverTest, CpuKernelsAreOnePerOpKindAndWeightType) {
  swz::compiler::compilePackage(opts(), {});
  swz::package::Manifest m = swz::package::read_manifest((dir_ / "out.swz").string());
  std::set<std::string> entries;
  for (const auto& k : m.kernels) {
    entries.insert(k.entry);
    EXPECT_FALSE(k.file.has_value());
    EXPECT_EQ(k.launch, (nlohmann::json{{"threads", "pool"}}));
    EXPECT_FALSE(k.schedule.has_value());
  }
  EXPECT_EQ(entries, (std::set<std::string>{"cpu.add.f32", "cpu.attention.f16kv", "cpu.get_rows.f32", "cpu.matmul.f32",
                                            "cpu.rms_norm.f32", "cpu.rope.f32", "cpu.swiglu.f32"}));
  // Every op runs through launch records of the common contract; attention has one per
  // phase (llama.cpp's batched order for prompt rows, its single-row order for generated).
  for (const auto& op : m.graph["ops"]) {
    ASSERT_TRUE(op.contains("launches")) << op.dump();
    ASSERT_FALSE(op.contains("kernel")) << op.dump();
    const auto& ls = op["launches"];
    for (const auto& l : ls)
      EXPECT_EQ(l["kernel"].get<std::string>().rfind("cpu." + op["op"].get<std::string>() + ".", 0), 0u) << l.dump();
    if (op["op"] == "attention") {
      ASSERT_EQ(ls.size(), 2u);
      EXPECT_EQ(ls[0]["phase"], "prefill");
      EXPECT_EQ(ls[0]["args"].back(), (nlohmann::json{{"i32", "0"}}));
      EXPECT_EQ(ls[1]["phase"], "decode");
      EXPECT_EQ(ls[1]["args"].back(), (nlohmann::json{{"i32", "1"}}));
      EXPECT_EQ(ls[1]["scope"], "sequence");
    } else {
      ASSERT_EQ(ls.size(), 1u);
      EXPECT_EQ(ls[0]["phase"], "all");
    }
  }
  const auto* mm = m.find_kernel("cpu.matmul.f32");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->signature[1]["name"], "w");
  EXPECT_EQ(mm->signature[1]["dtype"], "memref<?xi8>");  // the weight's raw GGUF bytes
  EXPECT_EQ(mm->signature[2]["name"], "bias");
  EXPECT_EQ(mm->signature.size(), 8u);
}

TEST_F(CompileDriverTest, TargetsAreCheckedBeforeAnyWork) {
  EXPECT_TRUE(swz::compiler::targetAvailable("cpu"));
  try {
    swz::compiler::targetAvailable("sm_75");
    FAIL() << "no error";
  } catch (const CompileError& e) {
    EXPECT_STREQ(e.what(), "unknown target 'sm_75' (known: cpu, sm_80, sm_86, sm_89, sm_90, spirv)");
  }
#ifndef SWZ_HAVE_GPU_CODEGEN
  EXPECT_FALSE(swz::compiler::targetAvailable("sm_90"));
  try {
    swz::compiler::compilePackage(opts("sm_90"), {});
    FAIL() << "no error";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("target sm_90 needs the MLIR codegen"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "out.swz"));
#endif
}

TEST_F(CompileDriverTest, UnsupportedArchitectureIsRefused) {
  swz::test::write_tiny_gguf(gguf_, 1, "gpt2");
  try {
    swz::compiler::compilePackage(opts(), {});
    FAIL() << "no error";
  } catch (const swz::models::UnsupportedModel& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported architecture 'gpt2'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "out.swz"));
}

TEST_F(CompileDriverTest, CorruptGgufIsRefused) {
  fs::resize_file(gguf_, 200);
  EXPECT_THROW(swz::compiler::compilePackage(opts(), {}), swz::gguf::Error);
  EXPECT_FALSE(fs::exists(dir_ / "out.swz"));
}

struct CliResult {
  int status;
  std::string err;
};

CliResult run_swizzlec(const std::string& args, const fs::path& dir) {
  const std::string errf = (dir / "stderr.txt").string();
  std::string cmd = std::string(SWIZZLEC_PATH) + " " + args + " 2> " + errf;
  int rc = std::system(cmd.c_str());
  std::ifstream in(errf);
  std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, err};
}

TEST_F(CompileDriverTest, ExecutableExitsNonZeroWithAClearMessage) {
  const std::string out = (dir_ / "cli.swz").string();
  CliResult ok = run_swizzlec("compile " + gguf_ + " --target cpu -o " + out, dir_);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(swz::package::read_manifest(out).target, "cpu");

  CliResult unknown = run_swizzlec("compile " + gguf_ + " --target sm_75 -o " + out + "2", dir_);
  EXPECT_EQ(unknown.status, 1);
  EXPECT_EQ(unknown.err, "swizzlec: error: unknown target 'sm_75' (known: cpu, sm_80, sm_86, sm_89, sm_90, spirv)\n");

  CliResult missing = run_swizzlec("compile " + (dir_ / "nope.gguf").string() + " -o " + out + "2", dir_);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("nope.gguf: no such file"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(out + "2"));
}

TEST_F(CompileDriverTest, SynthExecutableRejectsBadArguments) {
  const std::string out = (dir_ / "s.gguf").string();
  CliResult type = run_swizzlec("synth --preset qwen3-0.6b --type q3_k -o " + out, dir_);
  EXPECT_EQ(type.status, 1);
  EXPECT_NE(type.err.find("unsupported --type 'q3_k'"), std::string::npos) << type.err;
  CliResult preset = run_swizzlec("synth --preset llama-70b --type f16 -o " + out, dir_);
  EXPECT_EQ(preset.status, 1);
  EXPECT_NE(preset.err.find("unknown preset 'llama-70b'"), std::string::npos) << preset.err;
  CliResult vocab = run_swizzlec("synth --arch llama --type f32 --n-vocab 100 -o " + out, dir_);
  EXPECT_EQ(vocab.status, 1);
  EXPECT_NE(vocab.err.find("too small for the built-in byte vocabulary"), std::string::npos) << vocab.err;
  EXPECT_FALSE(fs::exists(out));
  CliResult ok = run_swizzlec("synth --arch qwen2 --type f16 --n-layer 1 --n-embd 64 --n-head 2 --n-head-kv 1 --n-ff 128 "
                              "--n-vocab 300 -o " + out, dir_);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(swz::models::read_hparams(swz::gguf::File::open(out)).n_layer, 1);
}

}  // namespace
