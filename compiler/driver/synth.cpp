//===- synth.cpp - swizzlec synth ------------------------------------------===//
#include "synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "gguf/gguf.h"
#include "gguf_writer.h"

#ifdef SWZ_HAVE_GGML_QUANTS
#include "ggml/blocks.h"
#include "ggml/quants.h"
#endif

namespace swz::compiler {
namespace {

using ggml::Type;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

#ifndef SWZ_HAVE_GGML_QUANTS
uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((u >> 16) | 64); // quiet NaN
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16); // round to nearest even
}
#endif

/// llama.cpp's llama_ftype for a file whose matrices are mostly `t` (llama.h).
uint32_t fileType(Type t) {
  switch (t) {
  case Type::F32: return 0;
  case Type::F16: return 1;
  case Type::Q4_0: return 2;
  case Type::Q4_1: return 3;
  case Type::Q8_0: return 7;
  case Type::Q4_K: return 14; // LLAMA_FTYPE_MOSTLY_Q4_K_S
  case Type::Q5_K: return 16; // LLAMA_FTYPE_MOSTLY_Q5_K_S
  case Type::Q6_K: return 18;
  case Type::BF16: return 32;
  default: return 0;
  }
}

const char *kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68
/// bytes to U+0100.. in byte order. Returns the UTF-8 text of byte `b`'s token.
std::string byteToken(int b) {
  auto printable = [](int c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF); };
  uint32_t cp;
  if (printable(b)) {
    cp = static_cast<uint32_t>(b);
  } else {
    int n = 0;
    for (int c = 0; c < b; ++c)
      if (!printable(c))
        ++n;
    cp = 256 + static_cast<uint32_t>(n);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

void addByteVocab(GgufWriter &w, int nVocab) {
  // llama.cpp token types (llama_token_type): NORMAL 1, CONTROL 3, UNUSED 5.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byteToken(b));
    types.push_back(1);
  }
  for (const char *special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.push_back(special);
    types.push_back(3);
  }
  // The rest are NORMAL tokens that read as words, " w<id>" ("Ġ" is GPT-2's byte-level
  // form of the space). No merge builds them, so prompts still tokenize to bytes; but a
  // random-weight model's greedy answer, which lands on them almost always, is visible
  // text to a client (were they UNUSED tokens, their pieces would be empty and a server
  // benchmark would count no tokens).
  for (int i = static_cast<int>(tokens.size()); i < nVocab; ++i) {
    tokens.push_back("\xC4\xA0w" + std::to_string(i));
    types.push_back(1);
  }
  w.setKV("tokenizer.ggml.model", ggufString("gpt2"));
  w.setKV("tokenizer.ggml.pre", ggufString("gpt-2")); // llama.cpp: LLAMA_VOCAB_PRE_TYPE_GPT2
  w.setKV("tokenizer.ggml.tokens", ggufStringArray(std::move(tokens)));
  w.setKV("tokenizer.ggml.token_type", ggufI32Array(types));
  w.setKV("tokenizer.ggml.merges", ggufStringArray({}));
  w.setKV("tokenizer.ggml.bos_token_id", ggufU32(256));
  w.setKV("tokenizer.ggml.eos_token_id", ggufU32(258));
  w.setKV("tokenizer.ggml.padding_token_id", ggufU32(256));
  w.setKV("tokenizer.ggml.add_bos_token", ggufBool(false));
  w.setKV("tokenizer.chat_template", ggufString(kChatMl));
}

int defaultThreads(int want) {
  if (want > 0)
    return want;
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

/// Converts one f32 row to `t` in `dst`: ggml's reference quantizers when built with
/// ggml/quants.h (bit-identical to llama-quantize without an importance matrix), else the
/// float conversions only.
void encodeRow(Type t, const float *src, uint8_t *dst, int64_t n) {
  if (t == Type::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
#ifdef SWZ_HAVE_GGML_QUANTS
  ggml::quantize_row(t, src, dst, n);
#else
  if (t == Type::F16) {
    for (int64_t i = 0; i < n; ++i) {
      _Float16 h = static_cast<_Float16>(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else if (t == Type::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = toBf16(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    throw CompileError(std::string("this swizzlec was built without ggml/quants.h and cannot write ") +
                       ggml::type_info(t).name);
  }
#endif
}

#ifdef SWZ_HAVE_GGML_QUANTS
uint16_t halfBits(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

/// Random bytes of super-block `block` of a tensor: a SplitMix64 stream keyed by both.
struct BlockBytes {
  uint64_t base;
  uint64_t next = 0;
  BlockBytes(uint64_t key, uint64_t block) : base(splitmix64(key ^ (block * 0xD1B54A32D192ED03ull))) {}
  uint64_t word() { return splitmix64(base + (next++) * 0x9E3779B97F4A7C15ull); }
  void fill(uint8_t *dst, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
      uint64_t w = word();
      std::memcpy(dst + i, &w, std::min<size_t>(8, n - i));
    }
  }
};

// k-quant blocks are synthesized directly in the quantized domain (see synth.h): codes
// uniform over their range, sub-block scales uniform in [32, 63], the min chosen so each
// sub-block is centred on zero, and d set so that the tensor's std is `scale`.
constexpr float kMeanScale = 47.5f;  // mean of the sub-block scales 32..63

void synthQ4KRow(uint64_t key, uint64_t firstBlock, float scale, uint8_t *dst, int64_t nBlocks, bool five) {
  // Codes uniform in [0, 2^b): mean (2^b-1)/2, std sqrt((4^b-1)/12).
  const float codeStd = five ? 9.2331f : 4.6098f;
  const float d = scale / (kMeanScale * codeStd);
  const int dminMul = five ? 16 : 8;        // dmin = d * dminMul
  const float centre = five ? 15.5f : 7.5f;  // m = round(sc * centre / dminMul)
  for (int64_t b = 0; b < nBlocks; ++b) {
    BlockBytes rng(key, firstBlock + static_cast<uint64_t>(b));
    uint8_t sc[8], m[8];
    uint64_t w = rng.word();
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(32 + ((w >> (5 * j)) & 31));
      m[j] = static_cast<uint8_t>(std::lround(sc[j] * centre / dminMul));
    }
    uint8_t scales[12];
    for (int j = 0; j < 4; ++j) {  // inverse of get_scale_min_k4
      scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
      scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
      scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    if (five) {
      auto *blk = reinterpret_cast<ggml::BlockQ5_K *>(dst) + b;
      blk->d = halfBits(d);
      blk->dmin = halfBits(d * dminMul);
      std::memcpy(blk->scales, scales, 12);
      rng.fill(blk->qh, sizeof blk->qh);
      rng.fill(blk->qs, sizeof blk->qs);
    } else {
      auto *blk = reinterpret_cast<ggml::BlockQ4_K *>(dst) + b;
      blk->d = halfBits(d);
      blk->dmin = halfBits(d * dminMul);
      std::memcpy(blk->scales, scales, 12);
      rng.fill(blk->qs, sizeof blk->qs);
    }
  }
}

void synthQ6KRow(uint64_t key, uint64_t firstBlock, float scale, uint8_t *dst, int64_t nBlocks) {
  const float d = scale / (kMeanScale * 18.4685f);  // codes uniform in [0, 64)
  for (int64_t b = 0; b < nBlocks; ++b) {
    BlockBytes rng(key, firstBlock + static_cast<uint64_t>(b));
    auto *blk = reinterpret_cast<ggml::BlockQ6_K *>(dst) + b;
    uint64_t w0 = rng.word(), w1 = rng.word();
    for (int j = 0; j < 16; ++j)
      blk->scales[j] = static_cast<int8_t>(32 + (((j < 8 ? w0 : w1) >> (5 * (j % 8))) & 31));
    rng.fill(blk->ql, sizeof blk->ql);
    rng.fill(blk->qh, sizeof blk->qh);
    blk->d = halfBits(d);
  }
}
#endif

} // namespace

uint64_t synthTensorKey(uint64_t seed, const std::string &name) { return splitmix64(seed ^ fnv1a64(name)); }

float synthNoise(uint64_t key, uint64_t i) {
  const uint64_t h = splitmix64(key + i * 0x9E3779B97F4A7C15ull);
  const uint64_t sum = (h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48);
  // Irwin-Hall of four U[0, 65536): mean 131070, std 65536/sqrt(3) (up to 1e-9).
  constexpr float kInvStd = 1.0f / 37837.22700f;
  return (static_cast<float>(static_cast<int64_t>(sum) - 131070)) * kInvStd;
}

Type synthQ4KMType(const std::string &tensorName, int nLayer) {
  if (tensorName == "output.weight")
    return Type::Q6_K;
  int layer = -1;
  char kind[32] = {0};
  if (std::sscanf(tensorName.c_str(), "blk.%d.%31[a-z_].weight", &layer, kind) == 2 &&
      (std::string(kind) == "attn_v" || std::string(kind) == "ffn_down")) {
    const bool moreBits = layer < nLayer / 8 || layer >= 7 * nLayer / 8 || (layer - nLayer / 8) % 3 == 2;
    if (moreBits)
      return Type::Q6_K;
  }
  return Type::Q4_K;
}

Type synthType(const std::string &name) {
  static const char *kKnown = "f32, f16, bf16, q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q4_k_m";
  if (name == "q4_k_m" || name == "Q4_K_M")
    return Type::Q4_K;  // the mix's base type (synthQ4KMType picks per tensor)
  Type t;
  if (ggml::type_from_name(name, &t)) {
    switch (t) {
    case Type::F32: case Type::F16: case Type::BF16: case Type::Q8_0: case Type::Q4_0:
    case Type::Q4_1: case Type::Q4_K: case Type::Q5_K: case Type::Q6_K:
      return t;
    default:
      break;
    }
  }
  throw CompileError("synth: unsupported --type '" + name + "' (supported: " + kKnown + ")");
}

bool synthCanWrite(Type t) {
  if (t == Type::F32 || t == Type::F16 || t == Type::BF16)
    return true;
#ifdef SWZ_HAVE_GGML_QUANTS
  return true;
#else
  return false;
#endif
}

Type synthTensorType(const models::TensorSpec &spec, Type want) {
  if (spec.is_norm_or_bias)
    return Type::F32;
  const int64_t n = spec.ne[0];
  Type t = want;
  if (n % ggml::type_info(t).block_size != 0) {
    // llama-quant.cpp (llama_tensor_get_type): k-quants fall back to a 32-block type.
    switch (want) {
    case Type::Q4_K: t = Type::Q5_0; break;
    case Type::Q5_K: t = Type::Q5_1; break;
    case Type::Q6_K: t = Type::Q8_0; break;
    default: t = Type::F16; break;
    }
    if (n % ggml::type_info(t).block_size != 0)
      t = Type::F16;
  }
  return t;
}

models::HParams synthHParams(const SynthOptions &o) {
  std::string presetName = o.preset;
  if (presetName.empty()) {
    if (o.arch == "llama")
      presetName = "smollm2-135m";
    else if (o.arch == "qwen2")
      presetName = "qwen2.5-coder-0.5b";
    else if (o.arch == "qwen3")
      presetName = "qwen3-0.6b";
    else if (o.arch.empty())
      throw CompileError("synth: give --preset (or --arch for its default preset)");
    else
      throw models::UnsupportedModel("synth: unsupported --arch '" + o.arch + "' (supported: llama, qwen2, qwen3)");
  }
  models::HParams hp = models::preset(presetName);
  if (!o.arch.empty() && o.arch != hp.arch) {
    if (o.arch != "llama" && o.arch != "qwen2" && o.arch != "qwen3")
      throw models::UnsupportedModel("synth: unsupported --arch '" + o.arch + "' (supported: llama, qwen2, qwen3)");
    // Shapes from the preset, architecture traits as models::read_hparams derives them.
    hp.arch = o.arch;
    hp.rope_type = o.arch == "llama" ? models::RopeType::Norm : models::RopeType::Neox;
    hp.qkv_bias = o.arch == "qwen2";
    hp.qk_norm = o.arch == "qwen3";
  }
  if (o.nLayer) hp.n_layer = o.nLayer;
  if (o.nEmbd) hp.n_embd = o.nEmbd;
  if (o.nHead) hp.n_head = o.nHead;
  if (o.nHeadKv) hp.n_head_kv = o.nHeadKv;
  if (o.nFf) hp.n_ff = o.nFf;
  if (o.nVocab) hp.n_vocab = o.nVocab;
  if (o.nCtx) hp.n_ctx_train = o.nCtx;
  if (o.tiedOutput >= 0) hp.tied_output = o.tiedOutput == 1;
  if (o.headDim) {
    hp.head_dim = o.headDim;
  } else if ((o.nEmbd || o.nHead) && hp.arch != "qwen3") {
    // llama/qwen2 derive head_dim = n_embd / n_head; qwen3 keeps its explicit key_length.
    if (hp.n_embd % hp.n_head != 0)
      throw models::UnsupportedModel("synth: n_embd " + std::to_string(hp.n_embd) + " is not a multiple of n_head " +
                                     std::to_string(hp.n_head) + " (give --head-dim)");
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  hp.n_rot = hp.head_dim;
  if (hp.n_head_kv > hp.n_head)
    hp.n_head_kv = hp.n_head;
  hp.validate();
  return hp;
}

void runSynth(const SynthOptions &o, const Log &log) {
  if (o.output.empty())
    throw CompileError("synth: no output file given (-o out.gguf)");
  const Type want = synthType(o.type);
  const bool q4km = o.type == "q4_k_m" || o.type == "Q4_K_M";
  models::HParams hp = synthHParams(o);

  GgufWriter w(32);
  const std::string presetName = o.preset.empty() ? "default" : o.preset;
  w.setKV("general.architecture", ggufString(hp.arch));
  w.setKV("general.name", ggufString(o.name.empty() ? "synth-" + presetName + "-" + o.type : o.name));
  w.setKV("general.file_type", ggufU32(q4km ? 15 : fileType(want)));  // 15: LLAMA_FTYPE_MOSTLY_Q4_K_M
  w.setKV("general.quantization_version", ggufU32(2));
  w.setKV("general.alignment", ggufU32(32));

  // Tokenizer first: --vocab-from fixes n_vocab.
  std::vector<std::pair<std::string, gguf::Value>> tokenizerKeys;
  if (!o.vocabFrom.empty()) {
    gguf::File src = gguf::File::open(o.vocabFrom);
    for (const std::string &k : src.keys())
      if (k.rfind("tokenizer.", 0) == 0)
        tokenizerKeys.emplace_back(k, src.get(k));
    const gguf::Value *tokens = src.find("tokenizer.ggml.tokens");
    if (!tokens)
      throw CompileError("synth: " + o.vocabFrom + " has no tokenizer.ggml.tokens to copy");
    const int n = static_cast<int>(tokens->as_array().items.size());
    if (o.nVocab && o.nVocab != n)
      throw CompileError("synth: --n-vocab " + std::to_string(o.nVocab) + " contradicts --vocab-from (" +
                         std::to_string(n) + " tokens)");
    hp.n_vocab = n;
  } else if (hp.n_vocab < 259) {
    throw CompileError("synth: n_vocab " + std::to_string(hp.n_vocab) +
                       " is too small for the built-in byte vocabulary (needs at least 259)");
  }
  hp.validate();

  const std::string a = hp.arch + ".";
  w.setKV(a + "vocab_size", ggufU32(hp.n_vocab));
  w.setKV(a + "context_length", ggufU32(hp.n_ctx_train));
  w.setKV(a + "embedding_length", ggufU32(hp.n_embd));
  w.setKV(a + "block_count", ggufU32(hp.n_layer));
  w.setKV(a + "feed_forward_length", ggufU32(hp.n_ff));
  w.setKV(a + "attention.head_count", ggufU32(hp.n_head));
  w.setKV(a + "attention.head_count_kv", ggufU32(hp.n_head_kv));
  w.setKV(a + "attention.key_length", ggufU32(hp.head_dim));
  w.setKV(a + "attention.value_length", ggufU32(hp.head_dim));
  w.setKV(a + "rope.dimension_count", ggufU32(hp.n_rot));
  w.setKV(a + "rope.freq_base", ggufF32(hp.rope_theta));
  w.setKV(a + "attention.layer_norm_rms_epsilon", ggufF32(hp.rms_eps));
  if (tokenizerKeys.empty()) {
    addByteVocab(w, hp.n_vocab);
  } else {
    for (auto &[k, v] : tokenizerKeys)
      w.setKV(k, std::move(v));
  }

  struct Plan {
    models::TensorSpec spec;
    Type type;
    float scale, offset;
    uint64_t key;
  };
  std::vector<Plan> plans;
  std::map<std::string, int> fallbacks;
  const float headScale = kHeadLogitStd / std::sqrt(static_cast<float>(hp.n_embd));
  for (const models::TensorSpec &spec : models::tensor_specs(hp)) {
    const Type tensorWant = q4km ? synthQ4KMType(spec.name, hp.n_layer) : want;
    Plan p{spec, synthTensorType(spec, tensorWant), 1.0f, 0.0f, synthTensorKey(o.seed, spec.name)};
    if (!synthCanWrite(p.type))
      throw CompileError(std::string("synth: this swizzlec was built without ggml/quants.h and cannot write ") +
                         ggml::type_info(p.type).name + " (f32, f16 and bf16 work)");
    if (p.type != tensorWant && !spec.is_norm_or_bias)
      ++fallbacks[std::string(ggml::type_info(tensorWant).name) + " -> " + ggml::type_info(p.type).name +
                  " (rows of " + std::to_string(spec.ne[0]) + ")"];
    const bool isBias = spec.name.size() > 5 && spec.name.compare(spec.name.size() - 5, 5, ".bias") == 0;
    if (isBias) {
      p.scale = 0.1f;
    } else if (spec.is_norm_or_bias) {
      p.scale = 0.1f;
      p.offset = 1.0f;
    } else if (spec.name == "output.weight" || (spec.name == "token_embd.weight" && hp.tied_output)) {
      p.scale = headScale;
    } else if (spec.name == "token_embd.weight") {
      p.scale = 1.0f;
    } else {
      p.scale = 1.0f / std::sqrt(static_cast<float>(spec.ne[0]));
    }
    w.addTensor(spec.name, spec.ne, p.type);
    plans.push_back(std::move(p));
  }
  if (log.info) {
    log.info("synth " + hp.arch + ": " + hp.to_json().dump());
    for (auto &[what, n] : fallbacks)
      log.info("fallback like llama.cpp: " + what + ": " + std::to_string(n) + " tensors");
    log.info("writing " + std::to_string(w.fileSize()) + " bytes to " + o.output);
  }

  const int nThreads = defaultThreads(o.threads);
  w.write(
      o.output,
      [&](size_t index, uint8_t *dst) {
        const Plan &p = plans[index];
        const int64_t n = p.spec.ne[0];
        int64_t rows = 1;
        for (size_t d = 1; d < p.spec.ne.size(); ++d)
          rows *= p.spec.ne[d];
        const size_t rowBytes = ggml::row_size(p.type, n);
        auto work = [&](int64_t r0, int64_t r1) {
#ifdef SWZ_HAVE_GGML_QUANTS
          if (p.type == Type::Q4_K || p.type == Type::Q5_K || p.type == Type::Q6_K) {
            const int64_t nb = n / ggml::QK_K;
            for (int64_t r = r0; r < r1; ++r) {
              uint8_t *out = dst + static_cast<size_t>(r) * rowBytes;
              const uint64_t first = static_cast<uint64_t>(r) * static_cast<uint64_t>(nb);
              if (p.type == Type::Q6_K)
                synthQ6KRow(p.key, first, p.scale, out, nb);
              else
                synthQ4KRow(p.key, first, p.scale, out, nb, p.type == Type::Q5_K);
            }
            return;
          }
#endif
          std::vector<float> row(static_cast<size_t>(n));
          for (int64_t r = r0; r < r1; ++r) {
            const uint64_t base = static_cast<uint64_t>(r) * static_cast<uint64_t>(n);
            for (int64_t j = 0; j < n; ++j)
              row[j] = p.offset + p.scale * synthNoise(p.key, base + static_cast<uint64_t>(j));
            encodeRow(p.type, row.data(), dst + static_cast<size_t>(r) * rowBytes, n);
          }
        };
        const int64_t perThread = std::max<int64_t>(1, (rows + nThreads - 1) / nThreads);
        if (rows * n < (1 << 16) || nThreads == 1) {
          work(0, rows);
          return;
        }
        std::vector<std::thread> pool;
        std::exception_ptr err;
        std::mutex mu;
        for (int64_t r0 = 0; r0 < rows; r0 += perThread) {
          pool.emplace_back([&, r0] {
            try {
              work(r0, std::min(rows, r0 + perThread));
            } catch (...) {
              std::lock_guard<std::mutex> lock(mu);
              err = std::current_exception();
            }
          });
        }
        for (auto &t : pool)
          t.join();
        if (err)
          std::rethrow_exception(err);
      },
      [&](size_t, uint64_t done, uint64_t total) {
        if (log.progress)
          log.progress("writing " + o.output, done, total);
      });
}

} // namespace swz::compiler
