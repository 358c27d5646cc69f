// A tiny llama-architecture GGUF for tests (1 layer, n_embd 64, 300-token vocab, f32
// weights), written with swizzlec's GgufWriter. `seed` changes every weight value but
// not the file's size or layout, so two seeds give a same-size, different-content pair.
#pragma once

#include <cstring>
#include <string>

#include "gguf_writer.h"
#include "model.h"

namespace swz::test {

inline models::HParams tiny_hparams() {
  models::HParams hp;
  hp.arch = "llama";
  hp.n_layer = 1;
  hp.n_embd = 64;
  hp.n_head = 2;
  hp.n_head_kv = 1;
  hp.head_dim = 32;
  hp.n_rot = 32;
  hp.n_ff = 128;
  hp.n_vocab = 300;
  hp.n_ctx_train = 256;
  hp.rope_theta = 10000.0f;
  hp.rms_eps = 1e-5f;
  hp.tied_output = true;
  return hp;
}

inline void write_tiny_gguf(const std::string& path, uint32_t seed = 1, const std::string& arch = "llama") {
  using namespace swz::compiler;
  models::HParams hp = tiny_hparams();
  GgufWriter w;
  w.setKV("general.architecture", ggufString(arch));
  w.setKV("general.name", ggufString("tiny"));
  const std::string a = arch + ".";
  w.setKV(a + "block_count", ggufU32(hp.n_layer));
  w.setKV(a + "context_length", ggufU32(hp.n_ctx_train));
  w.setKV(a + "embedding_length", ggufU32(hp.n_embd));
  w.setKV(a + "feed_forward_length", ggufU32(hp.n_ff));
  w.setKV(a + "attention.head_count", ggufU32(hp.n_head));
  w.setKV(a + "attention.head_count_kv", ggufU32(hp.n_head_kv));
  w.setKV(a + "attention.layer_norm_rms_epsilon", ggufF32(hp.rms_eps));
  w.setKV(a + "rope.freq_base", ggufF32(hp.rope_theta));
  w.setKV("tokenizer.ggml.model", ggufString("gpt2"));
  std::vector<std::string> tokens;
  for (int i = 0; i < hp.n_vocab; ++i) tokens.push_back(std::string(1, 't').append(std::to_string(i)));
  w.setKV("tokenizer.ggml.tokens", ggufStringArray(tokens));
  w.setKV("tokenizer.chat_template", ggufString("{{ messages[0]['content'] }}"));
  for (const auto& spec : models::tensor_specs(hp)) w.addTensor(spec.name, spec.ne, ggml::Type::F32);
  w.write(path, [&](size_t index, uint8_t* dst) {
    const auto& t = w.tensors()[index];
    for (uint64_t i = 0; i < t.bytes / 4; ++i) {
      float v = static_cast<float>(static_cast<int>((i * 2654435761u + seed * 97u + index) % 2001) - 1000) / 1000.0f;
      std::memcpy(dst + 4 * i, &v, 4);
    }
  });
}

}  // namespace swz::test
