// Tests of `swizzlec synth` (compiler/driver/synth.h) and the GGUF writer: files read back
// with our GGUF reader hold the requested shapes, types (with llama.cpp's k-quant
// fallbacks), metadata and tokenizer; weights are deterministic and have the documented
// statistics after dequantization; a synthetic model compiles into a package.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../package/tiny_gguf.h"
#include "compile.h"
#include "ggml/quants.h"
#include "gguf/gguf.h"
#include "gguf_writer.h"
#include "synth.h"

namespace {

namespace fs = std::filesystem;
using swz::compiler::SynthOptions;
using swz::ggml::Type;

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("swz_synth_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A small llama whose rows are multiples of 256 (k-quants apply) except the 64-wide heads.
  SynthOptions small(const std::string& type, const std::string& arch = "llama") {
    SynthOptions o;
    o.arch = arch;
    o.type = type;
    o.nLayer = 2;
    o.nEmbd = 256;
    o.nHead = 4;
    o.nHeadKv = 2;
    o.headDim = 64;
    o.nFf = 512;
    o.nVocab = 1000;
    o.seed = 7;
    o.threads = 3;
    o.output = (dir_ / (arch + "-" + type + ".gguf")).string();
    return o;
  }
  std::string bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  fs::path dir_;
};

struct Stats {
  double mean, std;
};
Stats stats(const swz::gguf::TensorInfo& t) {
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  const size_t rb = swz::ggml::row_size(t.type, t.ne[0]);
  double s = 0, s2 = 0;
  const int64_t rows = t.rows();
  for (int64_t r = 0; r < rows; ++r) {
    swz::ggml::dequantize_row(t.type, t.data + r * rb, row.data(), t.ne[0]);
    for (float v : row) {
      s += v;
      s2 += double(v) * v;
    }
  }
  const double n = double(rows) * t.ne[0];
  return {s / n, std::sqrt(s2 / n - (s / n) * (s / n))};
}

TEST_F(SynthTest, HParamsFromPresetsAndOverrides) {
  SynthOptions o;
  o.preset = "qwen3-0.6b";
  swz::models::HParams hp = swz::compiler::synthHParams(o);
  EXPECT_EQ(hp.arch, "qwen3");
  EXPECT_EQ(hp.head_dim, 128);  // qwen3 keeps key_length != n_embd / n_head
  EXPECT_EQ(hp.n_embd, 1024);
  o.nLayer = 3;
  o.nEmbd = 512;
  EXPECT_EQ(swz::compiler::synthHParams(o).head_dim, 128);
  SynthOptions l;
  l.arch = "llama";  // default preset smollm2-135m
  l.nEmbd = 256;
  l.nHead = 4;  // smollm2's 3 kv heads do not divide 4 heads
  EXPECT_THROW(swz::compiler::synthHParams(l), swz::models::UnsupportedModel);
  l.nHeadKv = 2;
  hp = swz::compiler::synthHParams(l);
  EXPECT_EQ(hp.n_layer, 30);
  EXPECT_EQ(hp.head_dim, 64);
  EXPECT_EQ(hp.n_rot, 64);
  l.arch = "qwen2";  // shapes of the qwen2 preset, qwen2 traits
  l.preset = "smollm2-135m";
  hp = swz::compiler::synthHParams(l);
  EXPECT_TRUE(hp.qkv_bias);
  EXPECT_EQ(hp.rope_type, swz::models::RopeType::Neox);
  SynthOptions bad;
  bad.preset = "gpt-5";
  EXPECT_THROW(swz::compiler::synthHParams(bad), swz::models::UnsupportedModel);
  EXPECT_THROW(swz::compiler::synthType("q3_k"), swz::compiler::CompileError);
  EXPECT_EQ(swz::compiler::synthType("Q4_K"), Type::Q4_K);
}

TEST_F(SynthTest, FallbackTypesFollowLlamaCpp) {
  swz::models::TensorSpec w576{"blk.0.attn_q.weight", {576, 576}, false};
  swz::models::TensorSpec w1536{"blk.0.ffn_down.weight", {1536, 576}, false};
  swz::models::TensorSpec norm{"blk.0.attn_norm.weight", {576}, true};
  swz::models::TensorSpec w40{"x.weight", {40, 8}, false};
  EXPECT_EQ(swz::compiler::synthTensorType(w576, Type::Q4_K), Type::Q5_0);
  EXPECT_EQ(swz::compiler::synthTensorType(w576, Type::Q5_K), Type::Q5_1);
  EXPECT_EQ(swz::compiler::synthTensorType(w576, Type::Q6_K), Type::Q8_0);
  EXPECT_EQ(swz::compiler::synthTensorType(w1536, Type::Q4_K), Type::Q4_K);
  EXPECT_EQ(swz::compiler::synthTensorType(norm, Type::Q4_K), Type::F32);
  EXPECT_EQ(swz::compiler::synthTensorType(w40, Type::Q4_K), Type::F16);
  EXPECT_EQ(swz::compiler::synthTensorType(w40, Type::Q8_0), Type::F16);
  EXPECT_EQ(swz::compiler::synthTensorType(w576, Type::Q4_1), Type::Q4_1);
}

TEST_F(SynthTest, Q4KMMixFollowsLlamaCpp) {
  // llama_tensor_get_type (LLAMA_FTYPE_MOSTLY_Q4_K_M) on a 28-layer model: use_more_bits
  // picks layers 0-2, 5, 8, ..., 23 (i - 3 = 2 mod 3) and 24-27.
  using swz::compiler::synthQ4KMType;
  EXPECT_EQ(synthQ4KMType("output.weight", 28), Type::Q6_K);
  EXPECT_EQ(synthQ4KMType("token_embd.weight", 28), Type::Q4_K);
  std::vector<int> q6;
  for (int i = 0; i < 28; ++i) {
    const Type v = synthQ4KMType("blk." + std::to_string(i) + ".attn_v.weight", 28);
    EXPECT_EQ(synthQ4KMType("blk." + std::to_string(i) + ".ffn_down.weight", 28), v) << i;
    EXPECT_EQ(synthQ4KMType("blk." + std::to_string(i) + ".attn_q.weight", 28), Type::Q4_K) << i;
    EXPECT_EQ(synthQ4KMType("blk." + std::to_string(i) + ".ffn_up.weight", 28), Type::Q4_K) << i;
    if (v == Type::Q6_K)
      q6.push_back(i);
  }
  EXPECT_EQ(q6, (std::vector<int>{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}));
  EXPECT_EQ(swz::compiler::synthType("q4_k_m"), Type::Q4_K);
}

TEST_F(SynthTest, WrittenFileReadsBackWithMetadataAndTypes) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    SynthOptions o = small("q4_k", arch);
    swz::compiler::runSynth(o, {});
    swz::gguf::File f = swz::gguf::File::open(o.output);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.get_string("general.architecture"), arch);
    EXPECT_EQ(f.get_u64("general.file_type"), 14u);  // LLAMA_FTYPE_MOSTLY_Q4_K_S
    swz::models::HParams hp = swz::models::read_hparams(f);
    swz::models::HParams want = swz::compiler::synthHParams(o);
    EXPECT_EQ(hp.to_json(), want.to_json()) << arch;
    swz::models::check_tensors(f, hp);
    EXPECT_EQ(f.get("tokenizer.ggml.tokens").as_array().items.size(), 1000u);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f.get("tokenizer.ggml.tokens").as_array().items[65].as_string(), "A");
    EXPECT_EQ(f.get("tokenizer.ggml.tokens").as_array().items[32].as_string(), "\xC4\xA0");  // GPT-2's space: U+0120
    EXPECT_EQ(f.get("tokenizer.ggml.tokens").as_array().items[258].as_string(), "<|im_end|>");
    for (const auto& spec : swz::models::tensor_specs(hp)) {
      const auto& t = f.require_tensor(spec.name);
      EXPECT_EQ(t.type, swz::compiler::synthTensorType(spec, Type::Q4_K)) << spec.name;
    }
    EXPECT_EQ(f.require_tensor("blk.0.attn_q.weight").type, Type::Q4_K);
  }
}

TEST_F(SynthTest, DeterministicForAnyThreadCountAndSeedSensitive) {
  SynthOptions a = small("q8_0");
  swz::compiler::runSynth(a, {});
  SynthOptions b = a;
  b.threads = 1;
  b.output = (dir_ / "b.gguf").string();
  swz::compiler::runSynth(b, {});
  EXPECT_EQ(bytes(a.output), bytes(b.output));
  SynthOptions c = a;
  c.seed = 8;
  c.output = (dir_ / "c.gguf").string();
  swz::compiler::runSynth(c, {});
  EXPECT_EQ(fs::file_size(a.output), fs::file_size(c.output));
  EXPECT_NE(bytes(a.output), bytes(c.output));
  // The same seed gives the same tensor values whatever the type around it.
  SynthOptions k1 = small("q4_k"), k2 = small("q4_k");
  k2.output = (dir_ / "k2.gguf").string();
  k2.threads = 2;
  swz::compiler::runSynth(k1, {});
  swz::compiler::runSynth(k2, {});
  EXPECT_EQ(bytes(k1.output), bytes(k2.output));
}

TEST_F(SynthTest, WeightStatisticsMatchTheDocumentedScales) {
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"}) {
    SynthOptions o = small(type);
    o.tiedOutput = 0;
    swz::compiler::runSynth(o, {});
    swz::gguf::File f = swz::gguf::File::open(o.output);
    auto check = [&](const std::string& name, double mean, double std, double tol) {
      Stats s = stats(f.require_tensor(name));
      EXPECT_NEAR(s.mean, mean, tol * std + 1e-3) << type << " " << name;
      EXPECT_NEAR(s.std, std, tol * std) << type << " " << name;
    };
    check("blk.0.attn_q.weight", 0.0, 1.0 / 16.0, 0.05);                                       // 1/sqrt(256)
    check("blk.1.ffn_down.weight", 0.0, 1.0 / std::sqrt(512.0), 0.05);                         // 1/sqrt(n_ff)
    check("output.weight", 0.0, swz::compiler::kHeadLogitStd / 16.0, 0.05);                    // 6/sqrt(n_embd)
    check("token_embd.weight", 0.0, 1.0, 0.05);
    check("blk.0.attn_norm.weight", 1.0, 0.1, 0.25);
  }
}

TEST_F(SynthTest, VocabFromCopiesTheTokenizer) {
  const std::string src = (dir_ / "src.gguf").string();
  swz::test::write_tiny_gguf(src);  // 300 tokens "t0".."t299" and a chat template
  SynthOptions o = small("f16");
  o.nVocab = 0;
  o.vocabFrom = src;
  swz::compiler::runSynth(o, {});
  swz::gguf::File f = swz::gguf::File::open(o.output);
  EXPECT_EQ(f.require_tensor("token_embd.weight").ne[1], 300);
  EXPECT_EQ(f.get("tokenizer.ggml.tokens").as_array().items[299].as_string(), "t299");
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), "{{ messages[0]['content'] }}");
  EXPECT_EQ(swz::models::read_hparams(f).n_vocab, 300);
  o.nVocab = 1000;
  EXPECT_THROW(swz::compiler::runSynth(o, {}), swz::compiler::CompileError);
}

TEST_F(SynthTest, SyntheticModelCompilesIntoAPackage) {
  SynthOptions o = small("q4_0", "qwen2");
  swz::compiler::runSynth(o, {});
  swz::compiler::CompileOptions c;
  c.ggufPath = o.output;
  c.outDir = (dir_ / "q.swz").string();
  swz::compiler::compilePackage(c, {});
  swz::package::LoadedPackage p = swz::package::open_package(c.outDir);
  EXPECT_EQ(p.manifest.model.architecture, "qwen2");
  EXPECT_NE(p.manifest.find_kernel("cpu.matmul.q4_0"), nullptr);
  EXPECT_EQ(p.manifest.tokenizer.chat_template.value_or(""),
            swz::gguf::File::open(o.output).get_string("tokenizer.chat_template"));
}

TEST_F(SynthTest, GgufWriterKeepsKeyOrderAndAlignsTensors) {
  swz::compiler::GgufWriter w(64);
  w.setKV("b", swz::compiler::ggufU32(1));
  w.setKV("a", swz::compiler::ggufString("x"));
  w.setKV("b", swz::compiler::ggufI32(-5));  // replaced in place
  w.addTensor("t1", {3}, Type::F32);
  w.addTensor("t2", {32, 2}, Type::Q8_0);
  EXPECT_THROW(w.addTensor("t3", {33}, Type::Q8_0), std::invalid_argument);
  EXPECT_THROW(w.addTensor("t1", {4}, Type::F32), std::invalid_argument);
  const std::string path = (dir_ / "w.gguf").string();
  w.write(path, [&](size_t i, uint8_t* dst) { std::memset(dst, static_cast<int>(i + 1), w.tensors()[i].bytes); });
  EXPECT_EQ(fs::file_size(path), w.fileSize());
  swz::gguf::File f = swz::gguf::File::open(path);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"general.alignment", "b", "a"}));
  EXPECT_EQ(f.get("b").as_i64(), -5);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.require_tensor("t2").offset, 64u);
  EXPECT_EQ(f.require_tensor("t2").data[0], 2);
  EXPECT_EQ(f.require_tensor("t1").data[11], 1);
}

}  // namespace
