#include "cpu/cpu_model.h"

#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "ggml/fp16.h"
#include "ggml/matmul.h"
#include "ggml/quants.h"
#include "ggml/thread_pool.h"
#include "ggml/vec_math.h"
#include "gguf/gguf.h"

namespace swz::cpu {
namespace {

using nlohmann::json;

inline uint16_t to_f16(float f) { return ggml::fp32_to_fp16(f); }
inline float from_f16(uint16_t h) { return ggml::fp16_to_fp32(h); }

enum class OpKind { GetRows, RmsNorm, HeadNorm, MatMul, Rope, Attention, SwiGlu, Add };

// The cpu backend's kernels by manifest entry (docs/package-format.md, "The cpu target's
// kernel convention"): "cpu.<op>.<type>". A cpu package names each op's kernel, and that
// entry, not the op, chooses the code here, so the manifest's kernel list is the
// contract for every backend; an entry this build lacks is refused at load.
OpKind kernel_kind(const std::string& entry, const std::string& op, const std::string& weight_type) {
  static const std::unordered_map<std::string, OpKind> kinds = {
      {"get_rows", OpKind::GetRows}, {"rms_norm", OpKind::RmsNorm},     {"head_norm", OpKind::HeadNorm},
      {"matmul", OpKind::MatMul},    {"rope", OpKind::Rope},            {"attention", OpKind::Attention},
      {"swiglu", OpKind::SwiGlu},    {"add", OpKind::Add}};
  const size_t a = entry.find('.'), b = entry.rfind('.');
  auto it = a == std::string::npos || b <= a ? kinds.end() : kinds.find(entry.substr(a + 1, b - a - 1));
  if (entry.compare(0, 4, "cpu.") != 0 || it == kinds.end())
    throw std::runtime_error("graph: kernel '" + entry + "' is not a kernel of this runtime's cpu backend");
  const std::string type = entry.substr(b + 1);
  const std::string want = it->second == OpKind::Attention ? "f16kv" : weight_type.empty() ? "f32" : weight_type;
  if (entry.substr(a + 1, b - a - 1) != op || type != want)
    throw std::runtime_error("graph: op '" + op + "' is bound to kernel '" + entry + "'; this cpu backend runs it as cpu." + op +
                             "." + want);
  if (it->second == OpKind::GetRows || it->second == OpKind::MatMul) {
    // The weight types the cpu dot products and dequantizers implement (runtime/ggml).
    static const char* types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
    if (std::find(std::begin(types), std::end(types), type) == std::end(types))
      throw std::runtime_error("graph: kernel '" + entry + "': the cpu backend has no " + type + " kernels");
  }
  return it->second;
}

// A weight as the kernels see it: the GGUF tensor's type and shape, and where its bytes
// are (in the GGUF mapping, or in the huge-page copy, see CpuModel::CpuModel).
struct WeightView {
  const uint8_t* data;
  ggml::Type type;
  std::vector<int64_t> ne;
};

struct Op {
  OpKind kind;
  std::vector<int> in;                          // buffer indices (-1 = not a buffer)
  std::vector<WeightView> w;                    // weight tensors, in order of appearance
  int out = -1;
  bool output_rows = false;
  float eps = 0, theta = 0, scale = 0;
  int head_dim = 0, n_head = 0, n_head_kv = 0, n_rot = 0, layer = 0;
  bool neox = false;
  // Consecutive matmuls of one input (Q/K/V, gate/up) run as one ggml::matmul_multi:
  // the first op of such a run has group > 1, the others are skipped (in_group).
  int group = 1;
  bool in_group = false;
};

struct Buffer {
  std::string name;
  int width = 0;
  bool output_only = false;  // written only by rows == "output" ops: n_out rows suffice
  int rows = 0;  // rows valid after the last write
  std::vector<float> data;
};

}  // namespace

struct CpuModel::Impl {
  const gguf::File& file;
  ggml::ThreadPool& pool;
  std::vector<Op> ops;
  std::vector<Buffer> bufs;
  int out_buf = -1;
  int n_layer = 0, kv_width = 0;
  kvcache::PageLayout layout;
  std::vector<uint16_t*> pages;  // the block table's page addresses for this forward
  std::vector<const uint16_t*> krow_table;  // attention's K row pointers per KV head (reused)
  std::vector<uint8_t> scratch;
  std::vector<int32_t> tokens;
  std::vector<float> rope_cache;
  // SWZ_PROFILE=1: wall seconds per op kind, printed to stderr when the model is destroyed.
  bool profile = std::getenv("SWZ_PROFILE") != nullptr;
  double op_seconds[8] = {};
  // SWZ_DUMP_DIR=dir: each op's output rows written to dir (see CpuModel::forward).
  const char* dump_dir = std::getenv("SWZ_DUMP_DIR");

  Impl(const gguf::File& f, ggml::ThreadPool& p) : file(f), pool(p) {}

  void run_op(const Op& op, int n_tokens, int n_out, int n_past, bool single_row_order);
  void copy_weights_to_huge_pages();
  void* weights_copy = nullptr;
  size_t weights_copy_bytes = 0;
  ~Impl();
  void validate_graph(int n_vocab);
  void run_matmuls(const Op* ops, int n, int n_out);
  void attention(const Op& op, int n_tokens, int n_past, bool single_row_order);
};

kvcache::PageLayout kv_layout(const json& graph) {
  try {
    const json& hp = graph.at("hparams");
    return kvcache::PageLayout{hp.at("n_layer").get<int>(), hp.at("n_head_kv").get<int>() * hp.at("head_dim").get<int>()};
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("graph: malformed hparams: ") + e.what());
  }
}

CpuModel::CpuModel(const json& graph, const gguf::File& weights, int n_ctx, ggml::ThreadPool& pool,
                   kvcache::PageAllocator& kv)
    : PagedSequenceModel(kv, n_ctx), impl_(std::make_unique<Impl>(weights, pool)) {
  Impl& m = *impl_;
  std::unordered_map<std::string, int> buf_index;
  try {
    for (auto& [name, width] : graph.at("buffers").items()) {
      buf_index[name] = static_cast<int>(m.bufs.size());
      m.bufs.push_back(Buffer{name, width.get<int>(), false, 0, {}});
    }
    const json& hp = graph.at("hparams");
    n_vocab_ = hp.at("n_vocab").get<int>();
    m.n_layer = hp.at("n_layer").get<int>();
    m.kv_width = hp.at("n_head_kv").get<int>() * hp.at("head_dim").get<int>();
    const std::string out_name = graph.at("output").get<std::string>();
    if (!buf_index.count(out_name)) throw std::runtime_error("graph: output buffer '" + out_name + "' is not declared");
    m.out_buf = buf_index[out_name];
    for (const json& jo : graph.at("ops")) {
      Op op;
      const std::string op_name = jo.at("op").get<std::string>();
      if (!jo.contains("kernel"))
        throw std::runtime_error("graph: op '" + op_name + "' names no kernel (a cpu package binds every op to a cpu.* entry)");
      for (const json& jin : jo.at("in")) {
        std::string name = jin.get<std::string>();
        if (auto it = buf_index.find(name); it != buf_index.end()) {
          op.in.push_back(it->second);
        } else if (name == "tokens") {
          op.in.push_back(-1);
        } else {
          const gguf::TensorInfo* t = weights.tensor(name);
          if (!t) throw std::runtime_error("graph: op input '" + name + "' is neither a buffer nor a tensor of " + weights.path());
          op.w.push_back({t->data, t->type, t->ne});
          op.in.push_back(-1);
        }
      }
      // The type suffix: the op's weight's ggml type (get_rows, matmul, norms), else f32.
      std::string weight_type;
      if (!op.w.empty() && (op_name == "get_rows" || op_name == "matmul" || op_name == "rms_norm" || op_name == "head_norm"))
        for (char c : std::string(ggml::type_info(op.w[0].type).name))
          weight_type += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      op.kind = kernel_kind(jo.at("kernel").get<std::string>(), op_name, weight_type);
      std::string out = jo.at("out").get<std::string>();
      if (!buf_index.count(out)) throw std::runtime_error("graph: op output '" + out + "' is not a declared buffer");
      op.out = buf_index[out];
      op.output_rows = jo.value("rows", std::string()) == "output";
      op.eps = jo.value("eps", 0.0f);
      op.theta = jo.value("theta", 0.0f);
      op.scale = jo.value("scale", 0.0f);
      op.head_dim = jo.value("head_dim", 0);
      op.n_head = jo.value("n_head", 0);
      op.n_head_kv = jo.value("n_head_kv", 0);
      op.n_rot = jo.value("n_rot", 0);
      op.layer = jo.value("layer", 0);
      op.neox = jo.value("mode", std::string("norm")) == "neox";
      m.ops.push_back(std::move(op));
    }
    m.validate_graph(n_vocab_);
    for (Buffer& b : m.bufs) {
      bool any = false, all_output = true;
      for (const Op& op : m.ops)
        if (op.out == &b - m.bufs.data()) {
          any = true;
          all_output &= op.output_rows;
        }
      b.output_only = any && all_output;
    }
    for (size_t i = 0; i < m.ops.size(); ++i) {
      Op& head = m.ops[i];
      if (head.kind != OpKind::MatMul) continue;
      size_t j = i + 1;
      while (j < m.ops.size() && m.ops[j].kind == OpKind::MatMul && m.ops[j].in[0] == head.in[0] &&
             m.ops[j].output_rows == head.output_rows && m.ops[j].out != head.in[0])
        ++j;
      head.group = static_cast<int>(j - i);
      for (size_t k = i + 1; k < j; ++k) m.ops[k].in_group = true;
      i = j - 1;
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("graph: malformed: ") + e.what());
  }
  m.layout = kv.layout();
  if (m.layout.n_layer != m.n_layer || m.layout.kv_width != m.kv_width)
    throw std::runtime_error("KV page layout (" + std::to_string(m.layout.n_layer) + " layers x " +
                             std::to_string(m.layout.kv_width) + ") does not match the graph (" + std::to_string(m.n_layer) +
                             " x " + std::to_string(m.kv_width) + ")");
  m.copy_weights_to_huge_pages();
}

// Weight plan "copy-huge-pages": the GGUF is mapped with 4 KiB pages, so a decode step
// that streams ~100 MB of weights walks ~25k pages and misses the TLB on most of them.
// Copying the weights the graph reads into one anonymous mapping advised MADV_HUGEPAGE
// (2 MiB pages) removes those misses. SWZ_WEIGHTS=mmap keeps the mapping as is.
void CpuModel::Impl::copy_weights_to_huge_pages() {
  const char* mode = std::getenv("SWZ_WEIGHTS");
  if (mode && std::string(mode) == "mmap") return;
  std::unordered_map<const uint8_t*, size_t> offset_of;
  size_t total = 0;
  for (Op& op : ops)
    for (WeightView& w : op.w)
      if (!offset_of.count(w.data)) {
        offset_of[w.data] = total;
        total += (ggml::row_size(w.type, w.ne[0]) * (w.ne.size() > 1 ? w.ne[1] : 1) + 63) / 64 * 64;
      }
  // Keep the reclaimable file mapping when the copy would take over half the free memory.
  if (long pages = sysconf(_SC_AVPHYS_PAGES); pages > 0 && total > static_cast<size_t>(pages) * sysconf(_SC_PAGESIZE) / 2)
    return;
  const size_t huge = size_t{2} << 20;
  const size_t bytes = (total + huge - 1) / huge * huge;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;  // keep using the GGUF mapping
  madvise(p, bytes, MADV_HUGEPAGE);
  auto* base = static_cast<uint8_t*>(p);
  std::unordered_map<const uint8_t*, bool> copied;
  for (Op& op : ops)
    for (WeightView& w : op.w) {
      uint8_t* dst = base + offset_of.at(w.data);
      if (!copied[w.data]) {
        std::memcpy(dst, w.data, ggml::row_size(w.type, w.ne[0]) * (w.ne.size() > 1 ? w.ne[1] : 1));
        copied[w.data] = true;
      }
    }
  for (Op& op : ops)
    for (WeightView& w : op.w) w.data = base + offset_of.at(w.data);
  weights_copy = p;
  weights_copy_bytes = bytes;
}

// Shapes the manifest's graph promises, checked against the GGUF once at load: a
// hand-edited or mismatched manifest is an error naming the op, never an overflow.
void CpuModel::Impl::validate_graph(int n_vocab) {
  Impl& m = *this;
  const gguf::File& weights = file;
  auto fail = [&](size_t i, const std::string& what) {
    throw std::runtime_error("graph op " + std::to_string(i) + ": " + what + " (" + weights.path() + ")");
  };
  auto is_buf = [&](const Op& op, size_t k) { return k < op.in.size() && op.in[k] >= 0; };
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    const Buffer& out = m.bufs[op.out];
    auto width = [&](size_t k) { return m.bufs[op.in[k]].width; };
    switch (op.kind) {
      case OpKind::GetRows:
        if (op.w.size() != 1 || op.w[0].ne.size() < 2 || op.w[0].ne[0] != out.width || op.w[0].ne[1] < n_vocab)
          fail(i, "get_rows needs a [" + std::to_string(out.width) + ", >= n_vocab] table");
        break;
      case OpKind::RmsNorm:
      case OpKind::HeadNorm: {
        if (!is_buf(op, 0) || op.w.size() != 1 || op.w[0].type != ggml::Type::F32) fail(i, "norm needs a buffer and an f32 weight");
        const int seg = op.kind == OpKind::HeadNorm ? op.head_dim : width(0);
        if (seg <= 0 || width(0) % seg != 0 || op.w[0].ne[0] != seg || out.width != width(0)) fail(i, "norm shapes disagree");
        break;
      }
      case OpKind::MatMul:
        if (!is_buf(op, 0) || op.w.empty() || op.w[0].ne.size() < 2 || op.w[0].ne[0] != width(0) || op.w[0].ne[1] != out.width)
          fail(i, "matmul weight shape disagrees with its input/output buffers");
        if (op.w.size() > 1 && (op.w[1].type != ggml::Type::F32 || op.w[1].ne[0] != out.width)) fail(i, "matmul bias shape");
        break;
      case OpKind::Rope:
        if (!is_buf(op, 0) || op.n_head <= 0 || op.head_dim <= 0 || op.n_rot <= 0 || op.n_rot > op.head_dim ||
            op.n_rot % 2 || op.n_head * op.head_dim != width(0))
          fail(i, "rope attributes disagree with the buffer width");
        break;
      case OpKind::Attention:
        if (!is_buf(op, 0) || !is_buf(op, 1) || !is_buf(op, 2) || op.n_head_kv <= 0 || op.n_head % op.n_head_kv ||
            op.layer < 0 || op.layer >= m.n_layer || width(0) != op.n_head * op.head_dim ||
            width(1) != m.kv_width || width(2) != m.kv_width || out.width != width(0) ||
            op.n_head_kv * op.head_dim != m.kv_width)
          fail(i, "attention shapes disagree with the KV cache");
        if (op.head_dim % 32)  // the f16 dot products in llama.cpp's orders work on 32-element steps
          fail(i, "attention head_dim " + std::to_string(op.head_dim) + " is not supported by the cpu backend (needs a multiple of 32)");
        break;
      case OpKind::SwiGlu:
      case OpKind::Add:
        if (!is_buf(op, 0) || !is_buf(op, 1) || width(0) != width(1) || out.width != width(0)) fail(i, "elementwise shapes");
        break;
    }
  }
}

CpuModel::Impl::~Impl() {
  if (weights_copy) munmap(weights_copy, weights_copy_bytes);
}

CpuModel::~CpuModel() {
  release();
  if (impl_ && impl_->profile) {
    static const char* names[] = {"get_rows", "rms_norm", "head_norm", "matmul", "rope", "attention", "swiglu", "add"};
    for (int k = 0; k < 8; ++k) std::fprintf(stderr, "swz-profile %-10s %9.3f ms\n", names[k], impl_->op_seconds[k] * 1e3);
  }
}

void CpuModel::copy_page(int dst, int src) {
  std::memcpy(kv_.page_data(dst), kv_.page_data(src), kv_.layout().page_bytes());
}

void CpuModel::forward(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>& logits) {
  if (n_tokens <= 0) throw std::invalid_argument("forward: no tokens");
  check_room(n_tokens);
  n_out = std::clamp(n_out, 1, n_tokens);
  Impl& m = *impl_;
  for (int i = 0; i < n_tokens; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab_)
      throw std::out_of_range("token id " + std::to_string(tokens[i]) + " outside the vocabulary of " + std::to_string(n_vocab_));
  }
  prepare_pages(n_tokens);
  m.pages.resize(block_table_.size());
  for (size_t i = 0; i < block_table_.size(); ++i) m.pages[i] = kv_.page_data(block_table_[i]);
  m.tokens.assign(tokens, tokens + n_tokens);
  for (Buffer& b : m.bufs) {
    size_t need = static_cast<size_t>(b.output_only ? n_out : n_tokens) * b.width;
    if (b.data.size() < need) b.data.resize(need);
    b.rows = 0;
  }
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    if (op.in_group) continue;
    const auto t0 = m.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    m.run_op(op, n_tokens, n_out, n_past_, rows == Rows::Generated);
    if (const char* dir = m.dump_dir) {
      const Buffer& b = m.bufs[op.out];
      char path[512];
      std::snprintf(path, sizeof path, "%s/%03zu_%s.f32", dir, i, b.name.c_str());
      if (FILE* f = std::fopen(path, "wb")) {
        std::fwrite(b.data.data(), sizeof(float), static_cast<size_t>(b.rows) * b.width, f);
        std::fclose(f);
      }
    }
    if (m.profile)
      m.op_seconds[static_cast<int>(op.kind)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  n_past_ += n_tokens;
  const Buffer& out = m.bufs[m.out_buf];
  logits.assign(out.data.begin() + static_cast<ptrdiff_t>(out.rows - n_out) * out.width,
                out.data.begin() + static_cast<ptrdiff_t>(out.rows) * out.width);
}

namespace {

// y = x / sqrt(mean(x^2) + eps) * w, the sum in double as ggml_compute_forward_rms_norm_f32.
void rms_norm_row(const float* x, const float* w, float* y, int n, float eps) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

// Eight f16 values as floats.
inline __m256 cvt8(const uint16_t* x) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }

// Four tinyBLAS hsum8s at once: lane i of the result is hsum8(a_i), with hsum8's exact
// pairing ((x0+x4)+(x2+x6))+((x1+x5)+(x3+x7)).
inline __m128 hsum8_x4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  // lo + hi per accumulator: a0|a1 and a2|a3 side by side (x_i = l_i + l_{i+4}).
  const __m256 u01 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a0, a1, 0x31));
  const __m256 u23 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a3, 0x20), _mm256_permute2f128_ps(a2, a3, 0x31));
  // (x0+x2, x1+x3) of each: [a0, a2 | a1, a3].
  const __m256 y = _mm256_add_ps(_mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(3, 2, 3, 2)));
  // (x0+x2) + (x1+x3) in lanes 0, 2, 4, 6 = a0, a2, a1, a3.
  const __m256 z = _mm256_add_ps(y, _mm256_movehdup_ps(y));
  return _mm256_castps256_ps128(_mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 2, 6, 0, 0, 0, 0)));
}

// Attention scores in the order of llamafile's tinyBLAS<8, f16> (llama.cpp's CPU matmul
// for batches of 2+ rows: one 8-lane FMA accumulator over consecutive 8-element chunks,
// then hsum8) for HB query heads that share one KV head:
// w[h * ldw + j] = (k_j . q_h) * scale for j < n_vis (rounded up to 4;
// the caller masks the extra scores). q holds the heads'
// f16-rounded queries as floats (HB x hd); krows[j] points at key j's head slice (hd f16).
// Four keys at a time: every converted key chunk feeds HB FMA chains, and the 4*HB
// chains are independent, so the loop runs at FMA throughput instead of FMA latency.
template <int HB>
void scores_tinyblas(const float* q, int hd, const uint16_t* const* krows, int n_vis, float scale, float* w,
                     size_t ldw) {
  const __m128 sc = _mm_set1_ps(scale);
  for (int j = 0; j < n_vis; j += 4) {  // krows valid up to n_vis rounded up to 4
    __m256 acc[HB][4];
    for (int h = 0; h < HB; ++h)
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_setzero_ps();
    for (int c = 0; c < hd; c += 8) {
      const __m256 k0 = cvt8(krows[j] + c), k1 = cvt8(krows[j + 1] + c), k2 = cvt8(krows[j + 2] + c),
                   k3 = cvt8(krows[j + 3] + c);
      for (int h = 0; h < HB; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + static_cast<size_t>(h) * hd + c);
        acc[h][0] = _mm256_fmadd_ps(k0, qv, acc[h][0]);
        acc[h][1] = _mm256_fmadd_ps(k1, qv, acc[h][1]);
        acc[h][2] = _mm256_fmadd_ps(k2, qv, acc[h][2]);
        acc[h][3] = _mm256_fmadd_ps(k3, qv, acc[h][3]);
      }
    }
    for (int h = 0; h < HB; ++h)
      _mm_storeu_ps(w + h * ldw + j, _mm_mul_ps(hsum8_x4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]), sc));
  }
}

// The paged, transposed V of one KV head: dimension d's values of keys 64*pg .. 64*pg+63
// are at pages[pg] + base + d * 64 (PageLayout::v_offset).
struct VHead {
  const uint16_t* const* pages;
  size_t base;
  const uint16_t* at(int d, int j) const {
    return pages[j / kvcache::kBlockTokens] + base + static_cast<size_t>(d) * kvcache::kBlockTokens + j % kvcache::kBlockTokens;
  }
};

// Eight V values of keys j..j+7 (j % 8 == 0) for dimension d; lanes at or past n_vis read
// as 0 (a page's slots past the sequence hold stale data, and llama.cpp's masked cells
// contribute 0 * v). Only the sequence's last chunk takes the masked path.
inline __m256 v8(const VHead& v, int d, int j, int n_vis) {
  const __m256 x = cvt8(v.at(d, j));
  if (j + 8 <= n_vis) return x;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n_vis - j), lane)));
}

// out[d] = sum_j p[j] * v_j[d] in tinyBLAS order (llama.cpp's kqv = v^T . f16(p) for 2+
// rows): output d's accumulator takes keys 8c..8c+7 in its lanes, FMAs in c order, then
// hsum8 over the lanes. p: f16-rounded probabilities as floats (n_vis rounded up to 8
// readable); hd % 8 == 0.
void pv_tinyblas(const float* p, int n_vis, const VHead& v, int hd, float* out) {
  constexpr int B = kvcache::kBlockTokens;
  const int n_full = n_vis / 8 * 8;  // keys in whole 8-key chunks; the rest is masked
  for (int d = 0; d < hd; d += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int j0 = 0; j0 < n_full; j0 += B) {  // page by page: 8 rows of 64 keys, stride B
      const uint16_t* r = v.at(d, j0);
      const float* pj = p + j0;
      const int n = std::min(B, n_full - j0);
      for (int j = 0; j < n; j += 8) {
        const __m256 pv = _mm256_loadu_ps(pj + j);
        a0 = _mm256_fmadd_ps(cvt8(r + j), pv, a0);
        a1 = _mm256_fmadd_ps(cvt8(r + B + j), pv, a1);
        a2 = _mm256_fmadd_ps(cvt8(r + 2 * B + j), pv, a2);
        a3 = _mm256_fmadd_ps(cvt8(r + 3 * B + j), pv, a3);
        a4 = _mm256_fmadd_ps(cvt8(r + 4 * B + j), pv, a4);
        a5 = _mm256_fmadd_ps(cvt8(r + 5 * B + j), pv, a5);
        a6 = _mm256_fmadd_ps(cvt8(r + 6 * B + j), pv, a6);
        a7 = _mm256_fmadd_ps(cvt8(r + 7 * B + j), pv, a7);
      }
    }
    if (n_full < n_vis) {
      const __m256 pv = _mm256_loadu_ps(p + n_full);
      a0 = _mm256_fmadd_ps(v8(v, d, n_full, n_vis), pv, a0);
      a1 = _mm256_fmadd_ps(v8(v, d + 1, n_full, n_vis), pv, a1);
      a2 = _mm256_fmadd_ps(v8(v, d + 2, n_full, n_vis), pv, a2);
      a3 = _mm256_fmadd_ps(v8(v, d + 3, n_full, n_vis), pv, a3);
      a4 = _mm256_fmadd_ps(v8(v, d + 4, n_full, n_vis), pv, a4);
      a5 = _mm256_fmadd_ps(v8(v, d + 5, n_full, n_vis), pv, a5);
      a6 = _mm256_fmadd_ps(v8(v, d + 6, n_full, n_vis), pv, a6);
      a7 = _mm256_fmadd_ps(v8(v, d + 7, n_full, n_vis), pv, a7);
    }
    _mm_storeu_ps(out + d, hsum8_x4(a0, a1, a2, a3));
    _mm_storeu_ps(out + d + 4, hsum8_x4(a4, a5, a6, a7));
  }
}

// ggml_vec_dot_f16's reduction of its four accumulators (AVX2): (s0+s2)+(s1+s3), then
// hsum8_hadd; exact in float for lengths that are multiples of 32 (no double tail).
inline float reduce_ggml(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
  return ggml::hsum8_hadd(_mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3)));
}

// One 32-element step of ggml_vec_dot_f16 (GGML_F16_STEP 32, four 8-lane accumulators):
// s_k += f32(x[8k .. 8k+7]) * y_k for k = 0..3.
struct Acc4 {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  void step32(const uint16_t* x, __m256 y0, __m256 y1, __m256 y2, __m256 y3) {
    s0 = _mm256_fmadd_ps(cvt8(x), y0, s0);
    s1 = _mm256_fmadd_ps(cvt8(x + 8), y1, s1);
    s2 = _mm256_fmadd_ps(cvt8(x + 16), y2, s2);
    s3 = _mm256_fmadd_ps(cvt8(x + 24), y3, s3);
  }
  // step32 over V's dimension d, keys j..j+31, lanes at or past n_vis as 0 (v8).
  void step32_masked(const VHead& v, int d, int j, int n_vis, __m256 y0, __m256 y1, __m256 y2, __m256 y3) {
    s0 = _mm256_fmadd_ps(v8(v, d, j, n_vis), y0, s0);
    s1 = _mm256_fmadd_ps(v8(v, d, j + 8, n_vis), y1, s1);
    s2 = _mm256_fmadd_ps(v8(v, d, j + 16, n_vis), y2, s2);
    s3 = _mm256_fmadd_ps(v8(v, d, j + 24, n_vis), y3, s3);
  }
  float reduce() const { return reduce_ggml(s0, s1, s2, s3); }
};

// Attention scores in ggml_vec_dot_f16 order (llama.cpp's single-row matmul, AVX2: four
// 8-lane accumulators over 32-element steps, then reduce_ggml), two keys at a time:
// w[j] = (k_j . q) * scale for j < n_vis. q: the f16-rounded query as floats; hd % 32 == 0.
void scores_ggml(const float* q, int hd, const uint16_t* const* krows, int n_vis, float scale, float* w) {
  auto q8 = [q](int i) { return _mm256_loadu_ps(q + i); };
  int j = 0;
  for (; j + 2 <= n_vis; j += 2) {
    Acc4 a, b;
    for (int i = 0; i < hd; i += 32) {
      const __m256 q0 = q8(i), q1 = q8(i + 8), q2 = q8(i + 16), q3 = q8(i + 24);
      a.step32(krows[j] + i, q0, q1, q2, q3);
      b.step32(krows[j + 1] + i, q0, q1, q2, q3);
    }
    w[j] = a.reduce() * scale;
    w[j + 1] = b.reduce() * scale;
  }
  for (; j < n_vis; ++j) {
    Acc4 a;
    for (int i = 0; i < hd; i += 32) a.step32(krows[j] + i, q8(i), q8(i + 8), q8(i + 16), q8(i + 24));
    w[j] = a.reduce() * scale;
  }
}

// out[d] = sum_j p[j] * v_j[d] in ggml_vec_dot_f16 order (llama.cpp's kqv for one row):
// key j feeds accumulator (j % 32) / 8, lane j % 8, then reduce_ggml. Two outputs at a
// time share the p loads. p readable up to n_vis rounded to 32; hd even.
void pv_ggml(const float* p, int n_vis, const VHead& v, int hd, float* out) {
  constexpr int B = kvcache::kBlockTokens;
  const int n_full = n_vis / 32 * 32;  // keys in whole 32-key steps; the last step is masked
  auto p8 = [p](int j) { return _mm256_loadu_ps(p + j); };
  for (int d = 0; d < hd; d += 2) {
    Acc4 a, b;
    for (int j0 = 0; j0 < n_full; j0 += B) {  // page by page
      const uint16_t* ra = v.at(d, j0);
      const uint16_t* rb = ra + B;
      const int n = std::min(B, n_full - j0);
      for (int j = 0; j < n; j += 32) {
        const __m256 p0 = p8(j0 + j), p1 = p8(j0 + j + 8), p2 = p8(j0 + j + 16), p3 = p8(j0 + j + 24);
        a.step32(ra + j, p0, p1, p2, p3);
        b.step32(rb + j, p0, p1, p2, p3);
      }
    }
    if (n_full < n_vis) {  // the last, partial step: masked lanes
      const int j = n_full;
      const __m256 p0 = p8(j), p1 = p8(j + 8), p2 = p8(j + 16), p3 = p8(j + 24);
      a.step32_masked(v, d, j, n_vis, p0, p1, p2, p3);
      b.step32_masked(v, d + 1, j, n_vis, p0, p1, p2, p3);
    }
    out[d] = a.reduce();
    out[d + 1] = b.reduce();
  }
}

// Softmax of one row of scores as ggml_vec_soft_max_f32 (expf8 per 8 cells, group sums
// added in double), then the probabilities rounded to f16 (llama.cpp converts kq for the
// f16 matmul) into p as floats. w and p hold n_vis rounded up to `pad` cells; cells from
// n_vis on are masked (-inf in w, 0 in p).
void softmax_f16(float* w, float* p, int n_vis, int pad) {
  const int n_grp = (n_vis + 7) / 8, n_end = (n_vis + pad - 1) / pad * pad;
  for (int j = n_vis; j < n_grp * 8; ++j) w[j] = -INFINITY;
  __m256 mx8 = _mm256_set1_ps(-INFINITY);
  for (int g = 0; g < n_grp; ++g) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(w + 8 * g));
  __m128 mx4 = _mm_max_ps(_mm256_castps256_ps128(mx8), _mm256_extractf128_ps(mx8, 1));
  mx4 = _mm_max_ps(mx4, _mm_movehl_ps(mx4, mx4));
  const float mx = std::max(_mm_cvtss_f32(mx4), _mm_cvtss_f32(_mm_movehdup_ps(mx4)));
  double sum = 0.0;
  for (int g = 0; g < n_grp; ++g) {
    const __m256 e = ggml::expf8(_mm256_sub_ps(_mm256_loadu_ps(w + 8 * g), _mm256_set1_ps(mx)));
    _mm256_storeu_ps(w + 8 * g, e);
    sum += static_cast<double>(ggml::hsum8(e));
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int g = 0; g < n_grp; ++g)
    _mm256_storeu_ps(p + 8 * g, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(w + 8 * g), inv), _MM_FROUND_TO_NEAREST_INT)));
  for (int j = n_vis; j < n_end; ++j) p[j] = 0.0f;
}

}  // namespace

void CpuModel::Impl::run_op(const Op& op, int n_tokens, int n_out, int n_past, bool single_row_order) {
  Buffer& out = bufs[op.out];
  // Rows an op reads: all valid rows of its first input, or for ops feeding the LM head
  // (rows == "output") only the last n_out of them; outputs are written from row 0.
  auto rows_of = [&](const Buffer& b, int& first, int& count) {
    count = op.output_rows ? std::min(n_out, b.rows) : b.rows;
    first = b.rows - count;
  };
  auto wf32 = [&](size_t i) { return reinterpret_cast<const float*>(op.w.at(i).data); };
  switch (op.kind) {
    case OpKind::GetRows: {
      const WeightView* w = &op.w.at(0);
      const size_t row_bytes = ggml::row_size(w->type, w->ne[0]);
      for (int t = 0; t < n_tokens; ++t)
        ggml::dequantize_row(w->type, w->data + row_bytes * tokens[t], out.data.data() + static_cast<size_t>(t) * out.width,
                             w->ne[0]);
      out.rows = n_tokens;
      break;
    }
    case OpKind::RmsNorm:
    case OpKind::HeadNorm: {
      const Buffer& x = bufs[op.in[0]];
      int first, count;
      rows_of(x, first, count);
      const float* w = wf32(0);
      const int seg = op.kind == OpKind::HeadNorm ? op.head_dim : x.width;
      // in place is fine: each segment is read fully before written
      for (int t = 0; t < count; ++t) {
        const float* xr = x.data.data() + static_cast<size_t>(first + t) * x.width;
        float* yr = out.data.data() + static_cast<size_t>(t) * out.width;
        for (int s = 0; s < x.width; s += seg) rms_norm_row(xr + s, w, yr + s, seg, op.eps);
      }
      out.rows = count;
      break;
    }
    case OpKind::MatMul:
      run_matmuls(&op, op.group, n_out);
      break;
    case OpKind::Rope: {
      Buffer& x = bufs[op.in[0]];
      if (&x != &out) throw std::runtime_error("graph: rope must be in place");
      // ggml_rope_cache_init with freq_scale 1, ext_factor 0, attn_factor 1:
      // theta_i = p * theta_scale^i, theta_scale = base^(-2/n_rot), accumulated in float.
      const float theta_scale = std::pow(op.theta, -2.0f / static_cast<float>(op.n_rot));
      rope_cache.resize(op.n_rot);
      for (int t = 0; t < x.rows; ++t) {
        float theta = static_cast<float>(n_past + t);
        for (int i = 0; i < op.n_rot; i += 2) {
          rope_cache[i] = std::cos(theta);
          rope_cache[i + 1] = std::sin(theta);
          theta *= theta_scale;
        }
        for (int h = 0; h < op.n_head; ++h) {
          float* v = x.data.data() + static_cast<size_t>(t) * x.width + static_cast<size_t>(h) * op.head_dim;
          for (int i = 0; i < op.n_rot; i += 2) {
            const float c = rope_cache[i], s = rope_cache[i + 1];
            const int a = op.neox ? i / 2 : i, b = op.neox ? i / 2 + op.n_rot / 2 : i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
          }
        }
      }
      break;
    }
    case OpKind::Attention:
      attention(op, n_tokens, n_past, single_row_order);
      break;
    case OpKind::SwiGlu: {
      const Buffer& g = bufs[op.in[0]];
      const Buffer& u = bufs[op.in[1]];
      const size_t n = static_cast<size_t>(g.rows) * g.width;
      // ggml_vec_swiglu_f32: silu8 in 8-wide groups of each row, scalar expf for a row's tail.
      const int width = g.width;
      for (int t = 0; t < g.rows; ++t) {
        const float* x = g.data.data() + static_cast<size_t>(t) * width;
        const float* y = u.data.data() + static_cast<size_t>(t) * width;
        float* o = out.data.data() + static_cast<size_t>(t) * width;
        int i = 0;
        for (; i + 8 <= width; i += 8)
          _mm256_storeu_ps(o + i, _mm256_mul_ps(ggml::silu8(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(y + i)));
        for (; i < width; ++i) o[i] = x[i] / (1.0f + std::exp(-x[i])) * y[i];
      }
      (void)n;
      out.rows = g.rows;
      break;
    }
    case OpKind::Add: {
      const Buffer& a = bufs[op.in[0]];
      const Buffer& b = bufs[op.in[1]];
      const size_t n = static_cast<size_t>(a.rows) * a.width;
      for (size_t i = 0; i < n; ++i) out.data[i] = a.data[i] + b.data[i];
      out.rows = a.rows;
      break;
    }
  }
}

// A matmul, or a run of matmuls sharing one input buffer, in one parallel region
// (ggml::matmul_multi: bit-identical to separate calls), each plus its optional bias.
void CpuModel::Impl::run_matmuls(const Op* group, int n, int n_out) {
  const Buffer& x = bufs[group[0].in[0]];
  const int count = group[0].output_rows ? std::min(n_out, x.rows) : x.rows;
  const int first = x.rows - count;
  std::vector<ggml::MatmulJob> jobs;
  for (int i = 0; i < n; ++i) {
    const WeightView* w = &group[i].w.at(0);
    jobs.push_back({w->data, w->type, w->ne[1], bufs[group[i].out].data.data()});
  }
  ggml::matmul_multi(jobs.data(), jobs.size(), x.width, x.data.data() + static_cast<size_t>(first) * x.width, count, pool,
                     scratch);
  for (int i = 0; i < n; ++i) {
    Buffer& out = bufs[group[i].out];
    if (group[i].w.size() > 1) {
      const float* b = reinterpret_cast<const float*>(group[i].w[1].data);
      for (int t = 0; t < count; ++t) {
        float* yr = out.data.data() + static_cast<size_t>(t) * out.width;
        for (int k = 0; k < out.width; ++k) yr[k] += b[k];
      }
    }
    out.rows = count;
  }
}

// Causal GQA attention over the layer's KV cache, bit-identical to llama.cpp's CPU
// non-flash path (llm_graph_context::build_attn_mha): kq = k . f16(q) (f16 matmul),
// softmax(kq * scale) with ggml_vec_soft_max_f32 (expf8 in 8-wide groups, group sums
// added in double), probabilities rounded to f16, out = v^T . f16(p) (f16 matmul, V
// stored transposed as llama.cpp's v_trans cache). llama.cpp's f16 matmuls reduce in one
// order for a batch of 2+ query rows (tinyBLAS) and another for a single row
// (ggml_vec_dot_f16); both are reproduced, chosen by the caller's CpuModel::Rows (see
// cpu_model.h) rather than by n_tokens. The KV length llama.cpp pads to a multiple of 256
// with masked cells only adds exact zeros, so it is not materialised here.
// Needs head_dim % 32 == 0 (ggml_vec_dot_f16's step; checked at load).
void CpuModel::Impl::attention(const Op& op, int n_tokens, int n_past, bool single_row_order) {
  const Buffer& q = bufs[op.in[0]];
  const Buffer& k = bufs[op.in[1]];
  const Buffer& v = bufs[op.in[2]];
  Buffer& out = bufs[op.out];
  constexpr int B = kvcache::kBlockTokens;
  const int hd = op.head_dim, group = op.n_head / op.n_head_kv;
  const int n_kv = n_past + n_tokens;
  // This forward's K rows and (transposed) V columns into their pages.
  for (int t = 0; t < n_tokens; ++t) {
    const int p = n_past + t;
    uint16_t* page = pages[p / B];
    ggml::fp32_to_fp16_row(k.data.data() + static_cast<size_t>(t) * k.width, page + layout.k_offset(op.layer, p % B), kv_width);
    const float* vr = v.data.data() + static_cast<size_t>(t) * v.width;
    for (int c = 0; c < kv_width; ++c) page[layout.v_offset(op.layer, c) + p % B] = to_f16(vr[c]);
  }
  // K row table per KV head; rows past n_kv point at row 0 (their scores are masked).
  const int n_pad = (n_kv + 31) & ~31;
  krow_table.resize(static_cast<size_t>(op.n_head_kv) * n_pad);
  for (int hk = 0; hk < op.n_head_kv; ++hk)
    for (int j = 0; j < n_pad; ++j) {
      const int p = j < n_kv ? j : 0;
      krow_table[static_cast<size_t>(hk) * n_pad + j] = pages[p / B] + layout.k_offset(op.layer, p % B) + static_cast<size_t>(hk) * hd;
    }
  // Rows::Prompt: tinyBLAS's order (llamafile_sgemm takes batches of n >= 2 rows when
  // k % 8 == 0); Rows::Generated: ggml_vec_dot_f16's, what llama.cpp does for one row.
  const bool tinyblas = !single_row_order;
  // Tasks for tinyBLAS: (query token, KV head), the group's query heads scored together so
  // each converted key feeds up to three of them. For one row (decode) that is too few
  // tasks to keep every thread busy (3 KV heads, 2 threads), so there a task is one query
  // head; its KV head's K and V are shared through the cache.
  const int heads_per_task = tinyblas ? group : 1;
  const int tasks_per_token = op.n_head / heads_per_task;
  const int n_tasks = n_tokens * tasks_per_token;
  pool.run([&](int ith, int nth) {
    constexpr int kHB = 3;  // query heads scored together (4 keys x 3 heads = 12 accumulators)
    std::vector<float> w(static_cast<size_t>(kHB) * n_pad), qf(static_cast<size_t>(kHB) * hd), pf(n_pad);
    for (int task = ith; task < n_tasks; task += nth) {
      const int t = task / tasks_per_token, h_first = (task % tasks_per_token) * heads_per_task;
      const int hk = h_first / group;
      const int n_vis = n_past + t + 1;  // causal: positions 0..n_past+t
      const uint16_t* const* kr = krow_table.data() + static_cast<size_t>(hk) * n_pad;
      const VHead vh{pages.data(), layout.v_offset(op.layer, hk * hd)};
      for (int h0 = 0; h0 < heads_per_task; h0 += kHB) {
        const int hb = std::min(kHB, heads_per_task - h0);
        for (int i = 0; i < hb; ++i) {  // f16(q) as llama.cpp's matmul sees it
          const float* qr = q.data.data() + static_cast<size_t>(t) * q.width + static_cast<size_t>(h_first + h0 + i) * hd;
          for (int d = 0; d < hd; ++d) qf[static_cast<size_t>(i) * hd + d] = from_f16(to_f16(qr[d]));
        }
        if (tinyblas) {
          switch (hb) {
            case 3: scores_tinyblas<3>(qf.data(), hd, kr, n_vis, op.scale, w.data(), n_pad); break;
            case 2: scores_tinyblas<2>(qf.data(), hd, kr, n_vis, op.scale, w.data(), n_pad); break;
            default: scores_tinyblas<1>(qf.data(), hd, kr, n_vis, op.scale, w.data(), n_pad); break;
          }
        } else {
          for (int i = 0; i < hb; ++i)
            scores_ggml(qf.data() + static_cast<size_t>(i) * hd, hd, kr, n_vis, op.scale, w.data() + static_cast<size_t>(i) * n_pad);
        }
        for (int i = 0; i < hb; ++i) {
          float* o = out.data.data() + static_cast<size_t>(t) * out.width + static_cast<size_t>(h_first + h0 + i) * hd;
          softmax_f16(w.data() + static_cast<size_t>(i) * n_pad, pf.data(), n_vis, tinyblas ? 8 : 32);
          if (tinyblas) pv_tinyblas(pf.data(), n_vis, vh, hd, o);
          else pv_ggml(pf.data(), n_vis, vh, hd, o);
        }
      }
    }
  });
  out.rows = n_tokens;
}

}  // namespace swz::cpu
