#include "model.h"

#include <cmath>

#include "gguf/gguf.h"

namespace swz::models {
namespace {

using nlohmann::json;

int as_int(const gguf::File& f, const std::string& key) { return static_cast<int>(f.get_u64(key)); }

}  // namespace

json HParams::to_json() const {
  return json{{"arch", arch},           {"n_layer", n_layer},       {"n_embd", n_embd},
              {"n_head", n_head},       {"n_head_kv", n_head_kv},   {"head_dim", head_dim},
              {"n_rot", n_rot},         {"n_ff", n_ff},             {"n_vocab", n_vocab},
              {"n_ctx_train", n_ctx_train}, {"rope_theta", rope_theta}, {"rms_eps", rms_eps},
              {"rope_type", rope_type == RopeType::Neox ? "neox" : "norm"},
              {"qkv_bias", qkv_bias},   {"qk_norm", qk_norm},       {"tied_output", tied_output}};
}

HParams HParams::from_json(const json& j) {
  HParams hp;
  try {
    hp.arch = j.at("arch").get<std::string>();
    hp.n_layer = j.at("n_layer").get<int>();
    hp.n_embd = j.at("n_embd").get<int>();
    hp.n_head = j.at("n_head").get<int>();
    hp.n_head_kv = j.at("n_head_kv").get<int>();
    hp.head_dim = j.at("head_dim").get<int>();
    hp.n_rot = j.at("n_rot").get<int>();
    hp.n_ff = j.at("n_ff").get<int>();
    hp.n_vocab = j.at("n_vocab").get<int>();
    hp.n_ctx_train = j.at("n_ctx_train").get<int>();
    hp.rope_theta = j.at("rope_theta").get<float>();
    hp.rms_eps = j.at("rms_eps").get<float>();
    std::string rt = j.at("rope_type").get<std::string>();
    if (rt != "norm" && rt != "neox") throw UnsupportedModel("hparams.rope_type must be \"norm\" or \"neox\", got \"" + rt + "\"");
    hp.rope_type = rt == "neox" ? RopeType::Neox : RopeType::Norm;
    hp.qkv_bias = j.at("qkv_bias").get<bool>();
    hp.qk_norm = j.at("qk_norm").get<bool>();
    hp.tied_output = j.at("tied_output").get<bool>();
  } catch (const json::exception& e) {
    throw UnsupportedModel(std::string("invalid hparams: ") + e.what());
  }
  hp.validate();
  return hp;
}

void HParams::validate() const {
  auto bad = [&](const std::string& what) { throw UnsupportedModel(arch + " model: " + what); };
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    throw UnsupportedModel("unsupported architecture '" + arch + "' (supported: llama, qwen2, qwen3)");
  if (n_layer <= 0 || n_layer > 1024) bad("block_count " + std::to_string(n_layer) + " out of range");
  if (n_embd <= 0 || n_head <= 0 || n_head_kv <= 0 || head_dim <= 0 || n_ff <= 0 || n_vocab <= 0)
    bad("non-positive dimension");
  if (n_head % n_head_kv != 0)
    bad("head_count " + std::to_string(n_head) + " is not a multiple of head_count_kv " + std::to_string(n_head_kv));
  if (head_dim % 2 != 0) bad("head_dim " + std::to_string(head_dim) + " is odd");
  if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) bad("rope dimension_count " + std::to_string(n_rot) + " invalid");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) bad("rope.freq_base must be positive");
  if (!(rms_eps > 0) || !std::isfinite(rms_eps)) bad("layer_norm_rms_epsilon must be positive");
  if (n_ctx_train <= 0) bad("context_length must be positive");
}

HParams read_hparams(const gguf::File& f) {
  HParams hp;
  hp.arch = f.get_string("general.architecture");
  if (hp.arch != "llama" && hp.arch != "qwen2" && hp.arch != "qwen3")
    throw UnsupportedModel(f.path() + ": unsupported architecture '" + hp.arch + "' (supported: llama, qwen2, qwen3)");
  const std::string a = hp.arch + ".";
  hp.n_layer = as_int(f, a + "block_count");
  hp.n_embd = as_int(f, a + "embedding_length");
  hp.n_ff = as_int(f, a + "feed_forward_length");
  hp.n_head = as_int(f, a + "attention.head_count");
  hp.n_head_kv = static_cast<int>(f.get_u64_or(a + "attention.head_count_kv", hp.n_head));
  hp.head_dim = static_cast<int>(f.get_u64_or(a + "attention.key_length", hp.n_head > 0 ? hp.n_embd / hp.n_head : 0));
  if (f.has(a + "attention.value_length") && static_cast<int>(f.get_u64(a + "attention.value_length")) != hp.head_dim)
    throw UnsupportedModel(f.path() + ": attention.value_length != key_length is not supported");
  hp.n_rot = static_cast<int>(f.get_u64_or(a + "rope.dimension_count", hp.head_dim));
  hp.n_ctx_train = as_int(f, a + "context_length");
  hp.rope_theta = static_cast<float>(f.get_f64_or(a + "rope.freq_base", 10000.0));
  hp.rms_eps = static_cast<float>(f.get_f64(a + "attention.layer_norm_rms_epsilon"));
  const gguf::TensorInfo& emb = f.require_tensor("token_embd.weight");
  hp.n_vocab = static_cast<int>(f.get_u64_or(a + "vocab_size", emb.ne.size() > 1 ? emb.ne[1] : 0));
  // llama.cpp: LLM_ARCH_LLAMA uses LLAMA_ROPE_TYPE_NORM; QWEN2 and QWEN3 use NEOX (llama_model_rope_type).
  hp.rope_type = hp.arch == "llama" ? RopeType::Norm : RopeType::Neox;
  hp.qkv_bias = hp.arch == "qwen2";
  hp.qk_norm = hp.arch == "qwen3";
  hp.tied_output = f.tensor("output.weight") == nullptr;
  // Llama 3.1+ carries per-dimension RoPE frequency factors; the graph has no input for them yet.
  if (f.tensor("rope_freqs.weight"))
    throw UnsupportedModel(f.path() + ": RoPE frequency factors (rope_freqs.weight, Llama 3.1 style) are not supported yet");
  if (f.has(a + "rope.scaling.type") && f.get_string(a + "rope.scaling.type") != "none")
    throw UnsupportedModel(f.path() + ": rope scaling '" + f.get_string(a + "rope.scaling.type") + "' is not supported yet");
  hp.validate();
  return hp;
}

std::vector<TensorSpec> tensor_specs(const HParams& hp) {
  const int64_t E = hp.n_embd, Q = int64_t{hp.n_head} * hp.head_dim, KV = int64_t{hp.n_head_kv} * hp.head_dim;
  std::vector<TensorSpec> s;
  s.push_back({"token_embd.weight", {E, hp.n_vocab}, false});
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    s.push_back({b + "attn_norm.weight", {E}, true});
    s.push_back({b + "attn_q.weight", {E, Q}, false});
    s.push_back({b + "attn_k.weight", {E, KV}, false});
    s.push_back({b + "attn_v.weight", {E, KV}, false});
    if (hp.qkv_bias) {
      s.push_back({b + "attn_q.bias", {Q}, true});
      s.push_back({b + "attn_k.bias", {KV}, true});
      s.push_back({b + "attn_v.bias", {KV}, true});
    }
    if (hp.qk_norm) {
      s.push_back({b + "attn_q_norm.weight", {hp.head_dim}, true});
      s.push_back({b + "attn_k_norm.weight", {hp.head_dim}, true});
    }
    s.push_back({b + "attn_output.weight", {Q, E}, false});
    s.push_back({b + "ffn_norm.weight", {E}, true});
    s.push_back({b + "ffn_gate.weight", {E, hp.n_ff}, false});
    s.push_back({b + "ffn_up.weight", {E, hp.n_ff}, false});
    s.push_back({b + "ffn_down.weight", {hp.n_ff, E}, false});
  }
  s.push_back({"output_norm.weight", {E}, true});
  if (!hp.tied_output) s.push_back({"output.weight", {E, hp.n_vocab}, false});
  return s;
}

void check_tensors(const gguf::File& f, const HParams& hp) {
  auto shape = [](const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
  };
  for (const TensorSpec& spec : tensor_specs(hp)) {
    const gguf::TensorInfo* t = f.tensor(spec.name);
    if (!t) throw UnsupportedModel(f.path() + ": missing tensor '" + spec.name + "' required by " + hp.arch);
    std::vector<int64_t> ne = t->ne;
    while (ne.size() > spec.ne.size() && ne.back() == 1) ne.pop_back();
    if (ne != spec.ne)
      throw UnsupportedModel(f.path() + ": tensor '" + spec.name + "' has shape " + shape(t->ne) + ", expected " +
                             shape(spec.ne));
    const ggml::TypeInfo& ti = ggml::type_info(t->type);
    if (!ti.computable)
      throw UnsupportedModel(f.path() + ": tensor '" + spec.name + "' has type " + ti.name +
                             ", which the runtime cannot compute yet");
    if (spec.is_norm_or_bias && t->type != ggml::Type::F32)
      throw UnsupportedModel(f.path() + ": tensor '" + spec.name + "' must be f32, is " + ti.name);
  }
}

json build_graph(const HParams& hp, const gguf::File& f) {
  hp.validate();
  check_tensors(f, hp);
  const int Q = hp.n_head * hp.head_dim, KV = hp.n_head_kv * hp.head_dim;
  json ops = json::array();
  auto op = [&](const char* kind, json in, const std::string& out, json attrs = json::object()) {
    json o = {{"op", kind}, {"in", std::move(in)}, {"out", out}};
    for (auto& [k, v] : attrs.items()) o[k] = v;
    ops.push_back(std::move(o));
  };
  const json rope_attrs = {{"head_dim", hp.head_dim}, {"n_rot", hp.n_rot}, {"theta", hp.rope_theta},
                           {"mode", hp.rope_type == RopeType::Neox ? "neox" : "norm"}};
  op("get_rows", {"token_embd.weight", "tokens"}, "x");
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    op("rms_norm", {"x", b + "attn_norm.weight"}, "h", {{"eps", hp.rms_eps}});
    for (const char* p : {"q", "k", "v"}) {
      json in = {"h", b + "attn_" + p + ".weight"};
      if (hp.qkv_bias) in.push_back(b + "attn_" + p + ".bias");
      op("matmul", in, p);
    }
    if (hp.qk_norm) {
      op("head_norm", {"q", b + "attn_q_norm.weight"}, "q", {{"eps", hp.rms_eps}, {"head_dim", hp.head_dim}});
      op("head_norm", {"k", b + "attn_k_norm.weight"}, "k", {{"eps", hp.rms_eps}, {"head_dim", hp.head_dim}});
    }
    json rq = rope_attrs, rk = rope_attrs;
    rq["n_head"] = hp.n_head;
    rk["n_head"] = hp.n_head_kv;
    op("rope", {"q"}, "q", rq);
    op("rope", {"k"}, "k", rk);
    op("attention", {"q", "k", "v"}, "attn",
       {{"layer", i}, {"n_head", hp.n_head}, {"n_head_kv", hp.n_head_kv}, {"head_dim", hp.head_dim},
        {"scale", 1.0 / std::sqrt(static_cast<double>(hp.head_dim))}});
    op("matmul", {"attn", b + "attn_output.weight"}, "o");
    op("add", {"x", "o"}, "x");
    op("rms_norm", {"x", b + "ffn_norm.weight"}, "h", {{"eps", hp.rms_eps}});
    op("matmul", {"h", b + "ffn_gate.weight"}, "g");
    op("matmul", {"h", b + "ffn_up.weight"}, "u");
    op("swiglu", {"g", "u"}, "a");
    op("matmul", {"a", b + "ffn_down.weight"}, "d");
    op("add", {"x", "d"}, "x");
  }
  op("rms_norm", {"x", "output_norm.weight"}, "h", {{"eps", hp.rms_eps}, {"rows", "output"}});
  op("matmul", {"h", hp.tied_output ? "token_embd.weight" : "output.weight"}, "logits", {{"rows", "output"}});
  json buffers = {{"x", hp.n_embd}, {"h", hp.n_embd}, {"q", Q},       {"k", KV},       {"v", KV},
                  {"attn", Q},      {"o", hp.n_embd}, {"g", hp.n_ff}, {"u", hp.n_ff},  {"a", hp.n_ff},
                  {"d", hp.n_embd}, {"logits", hp.n_vocab}};
  return json{{"hparams", hp.to_json()}, {"buffers", buffers}, {"ops", ops}, {"output", "logits"}};
}

HParams preset(const std::string& name) {
  HParams hp;
  // Shapes from each model's published config.json (Hugging Face model cards).
  if (name == "smollm2-135m") {
    hp = {"llama", 30, 576, 9, 3, 64, 64, 1536, 49152, 8192, 100000.0f, 1e-5f, RopeType::Norm, false, false, true};
  } else if (name == "qwen2.5-coder-0.5b") {
    hp = {"qwen2", 24, 896, 14, 2, 64, 64, 4864, 151936, 32768, 1000000.0f, 1e-6f, RopeType::Neox, true, false, true};
  } else if (name == "qwen2.5-coder-7b") {
    hp = {"qwen2", 28, 3584, 28, 4, 128, 128, 18944, 152064, 32768, 1000000.0f, 1e-6f, RopeType::Neox, true, false, false};
  } else if (name == "qwen3-0.6b") {
    hp = {"qwen3", 28, 1024, 16, 8, 128, 128, 3072, 151936, 40960, 1000000.0f, 1e-6f, RopeType::Neox, false, true, true};
  } else if (name == "qwen3-8b") {
    hp = {"qwen3", 36, 4096, 32, 8, 128, 128, 12288, 151936, 40960, 1000000.0f, 1e-6f, RopeType::Neox, false, true, false};
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw UnsupportedModel("unknown preset '" + name + "' (known: " + known + ")");
  }
  return hp;
}

std::vector<std::string> preset_names() {
  return {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-7b", "qwen3-0.6b", "qwen3-8b"};
}

}  // namespace swz::models
