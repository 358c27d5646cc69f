#include "exec/executor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "package/expr.h"
#include "package/package.h"

namespace swz::exec {
namespace {

using nlohmann::json;
using package::Expr;
using Rows = SequenceModel::Rows;

/// Slots of the symbols every launch rule may name (docs/package-format.md).
enum Slot { kT, kPos0, kCtx, kMaxT, kMaxCtx, kBaseSlots };
const std::vector<std::string>& base_symbols() {
  static const std::vector<std::string> s = {"T", "pos0", "ctx", "max_T", "max_ctx"};
  return s;
}

/// A kernel signature entry: memref (rank, element bytes) or a 32-bit scalar.
struct ArgType {
  bool memref = false;
  int rank = 0;
  int elem_bytes = 4;
  std::string scalar;  // "i32" | "f32" for scalars
};

/// Parses an MLIR argument type as swizzlec records it: "memref<?xf32>",
/// "memref<?x?xf16>", "memref<?xvector<4xf32>>", "i32", "f32".
ArgType parse_type(const std::string& t, const std::string& where) {
  ArgType a;
  if (t == "i32" || t == "f32") {
    a.scalar = t;
    return a;
  }
  if (t.rfind("memref<", 0) != 0 || t.back() != '>') throw std::runtime_error(where + ": unsupported argument type '" + t + "'");
  std::string body = t.substr(7, t.size() - 8);
  a.memref = true;
  while (body.size() > 2 && body.compare(0, 2, "?x") == 0) {
    ++a.rank;
    body = body.substr(2);
  }
  auto scalar_bytes = [&](const std::string& e) {
    if (e == "f32" || e == "i32") return 4;
    if (e == "f16" || e == "i16" || e == "bf16") return 2;
    if (e == "i8") return 1;
    if (e == "f64" || e == "i64") return 8;
    throw std::runtime_error(where + ": unsupported element type '" + e + "' in '" + t + "'");
  };
  if (body.rfind("vector<", 0) == 0) {
    const size_t x = body.find('x');
    const int lanes = std::stoi(body.substr(7, x - 7));
    a.elem_bytes = lanes * scalar_bytes(body.substr(x + 1, body.size() - x - 2));
  } else {
    a.elem_bytes = scalar_bytes(body);
  }
  if (a.rank < 1 || a.rank > 4) throw std::runtime_error(where + ": memref rank " + std::to_string(a.rank) + " in '" + t + "'");
  return a;
}

enum class Phase { All, Decode, Prefill };

struct Binding {
  enum Kind { Buffer, Weight, Tokens, Positions, KvK, KvV, BlockTable, Scratch, Absent, I32, F32 } kind = Absent;
  int index = -1;  // graph buffer, weight, scratch or layer
  std::vector<Expr> shape;
  Expr value;      // I32
  float f32 = 0;
  ArgType type;
};

struct Launch {
  int kernel = -1;
  std::string entry, where;
  Phase phase = Phase::All;
  bool sequence_scope = false;
  std::vector<Expr> lets;
  Expr grid[3];
  Expr smem;
  std::vector<Binding> args;
};

struct OpPlan {
  std::string kind;
  bool output_rows = false;
  /// SWZ_DUMP_DIR: (graph op index, buffer) written once this op's launches ran: its own
  /// output, and those of the ops fused into it that a buffer holds (a fused residual
  /// add's sum; not a rope folded into the KV write, whose rotated k is never stored).
  std::vector<std::pair<int, int>> dumps;
  std::vector<int> in_buffers;  // graph buffers the op reads
  int out_buffer = -1;
  std::vector<Launch> launches;
};

struct GraphBuffer {
  std::string name;
  int width = 0;
  backend::Buffer main, gathered;
  bool read_by_output = false;
};

struct Weight {
  std::string name;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  backend::Buffer buf;
};

struct Scratch {
  std::string name;
  size_t bytes = 0;
  backend::Buffer buf;
};

}  // namespace

struct GraphExecutor::Impl {
  std::unique_ptr<backend::Backend> be;
  ExecutorOptions opts;
  int n_layer = 0, n_head_kv = 0, head_dim = 0, max_blocks = 0;
  size_t tile_bytes = 0;  // one page of one layer's K (or V): n_head_kv * 64 * head_dim f16
  std::vector<backend::Buffer> kv_k, kv_v;  // per layer: n_pages tiles
  std::vector<GraphBuffer> bufs;
  std::vector<Weight> weights;
  std::vector<Scratch> scratch;
  std::vector<OpPlan> ops;
  int out_buf = -1;
  backend::Buffer tokens, positions, block_tables, dummy;
  // Per forward (reused, never shrunk).
  std::vector<int32_t> h_tokens, h_positions, h_tables;
  std::vector<backend::Arg> args;
  std::vector<double> values;
  std::vector<char> compact;  // per graph buffer: holds output rows compactly this pass
  std::vector<float> out_rows;
  uint64_t allocated = 0;

  backend::Buffer alloc(size_t bytes, const std::string& what) {
    backend::Buffer b = be->alloc(std::max<size_t>(bytes, 16), what);
    allocated += b.bytes;
    return b;
  }
  ~Impl() {
    if (!be) return;
    auto f = [&](backend::Buffer b) {
      if (b) be->free(b);
    };
    for (auto& b : kv_k) f(b);
    for (auto& b : kv_v) f(b);
    for (auto& b : bufs) f(b.main), f(b.gathered);
    for (auto& w : weights) f(w.buf);
    for (auto& s : scratch) f(s.buf);
    f(tokens), f(positions), f(block_tables), f(dummy);
  }

  void plan(const package::LoadedPackage& pkg);
  // SWZ_DUMP_DIR=dir (single-sequence passes): each op's output rows written to
  // dir/<op index>_<buffer>.f32 as the cpu backend does (CpuModel::forward), so the two
  // can be compared op by op (test/python/test_gpu_execution.py, the conformance check).
  const char* dump_dir = std::getenv("SWZ_DUMP_DIR");
  void dump(const OpPlan& op, int n_rows, bool output) {
    for (const auto& [index, b] : op.dumps) {
      const GraphBuffer& gb = bufs[b];
      std::vector<float> host(static_cast<size_t>(n_rows) * gb.width);
      be->download(host.data(), output && compact[b] == 2 ? gb.gathered : gb.main, 0, host.size() * 4);
      char path[512];
      std::snprintf(path, sizeof path, "%s/%03d_%s.f32", dump_dir, index, gb.name.c_str());
      if (FILE* f = std::fopen(path, "wb")) {
        std::fwrite(host.data(), sizeof(float), host.size(), f);
        std::fclose(f);
      }
    }
  }
  void run_launch(const Launch& l, int row0, int n_rows, int pos0, int ctx, int seq_slot, bool output);
};

namespace {

template <typename T>
int index_of(std::vector<T>& v, const std::string& name) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return static_cast<int>(i);
  v.push_back(T{});
  v.back().name = name;
  return static_cast<int>(v.size() - 1);
}

}  // namespace

void GraphExecutor::Impl::plan(const package::LoadedPackage& pkg) {
  const package::Manifest& m = pkg.manifest;
  const json& g = m.graph;
  const json& hp = g.at("hparams");
  n_layer = hp.at("n_layer").get<int>();
  n_head_kv = hp.at("n_head_kv").get<int>();
  head_dim = hp.at("head_dim").get<int>();
  std::map<std::string, int> buf_index;
  for (auto& [name, width] : g.at("buffers").items()) {
    buf_index[name] = static_cast<int>(bufs.size());
    bufs.push_back(GraphBuffer{name, width.get<int>(), {}, {}, false});
  }
  out_buf = buf_index.at(g.at("output").get<std::string>());
  std::map<std::string, ArgType> dummy_types;
  const json& jops = g.at("ops");
  for (size_t i = 0; i < jops.size(); ++i) {
    const json& jo = jops[i];
    OpPlan op;
    op.kind = jo.at("op").get<std::string>();
    op.output_rows = jo.value("rows", std::string()) == "output";
    for (const json& in : jo.at("in"))
      if (auto it = buf_index.find(in.get<std::string>()); it != buf_index.end()) op.in_buffers.push_back(it->second);
    op.out_buffer = buf_index.at(jo.at("out").get<std::string>());
    if (jo.contains("fused_into")) {
      // A residual add folded into the matmul before it: the anchor's launches write its
      // sum (the matmul's own output is not materialised on every path).
      const size_t anchor = jo.at("fused_into").get<size_t>();
      if (op.kind == "add" && anchor < ops.size()) {
        OpPlan& a = ops[anchor];
        std::erase_if(a.dumps, [&](const std::pair<int, int>& d) {
          return std::count(op.in_buffers.begin(), op.in_buffers.end(), d.second) > 0;
        });
        a.dumps.emplace_back(static_cast<int>(i), op.out_buffer);
      }
      ops.push_back(std::move(op));
      continue;
    }
    op.dumps.emplace_back(static_cast<int>(i), op.out_buffer);
    if (!jo.contains("launches"))
      throw std::runtime_error("graph op " + std::to_string(i) + " (" + jo.at("op").get<std::string>() +
                               ") has no launch records: recompile the package with this swizzlec");
    const json& jl = jo.at("launches");
    for (size_t li = 0; li < jl.size(); ++li) {
      const json& r = jl[li];
      Launch l;
      l.where = "graph.ops[" + std::to_string(i) + "].launches[" + std::to_string(li) + "]";
      l.entry = r.at("kernel").get<std::string>();
      const package::Kernel* k = m.find_kernel(l.entry);
      if (!k) throw std::runtime_error(l.where + ": unknown kernel " + l.entry);
      l.kernel = be->kernel_index(l.entry);
      const std::string phase = r.value("phase", std::string("all"));
      l.phase = phase == "decode" ? Phase::Decode : phase == "prefill" ? Phase::Prefill : Phase::All;
      l.sequence_scope = r.value("scope", std::string("batch")) == "sequence";
      std::vector<std::string> syms = base_symbols();
      if (r.contains("let"))
        for (auto& [name, e] : r.at("let").items()) {
          l.lets.push_back(Expr::parse(e.get<std::string>(), syms));
          syms.push_back(name);
        }
      for (int d = 0; d < 3; ++d) l.grid[d] = Expr::parse(r.at("grid").at(d).get<std::string>(), syms);
      l.smem = Expr::parse(r.value("dynamic_smem", std::string("0")), syms);
      const json& sig = k->signature;
      const json& jargs = r.at("args");
      if (jargs.size() != sig.size())
        throw std::runtime_error(l.where + ": " + std::to_string(jargs.size()) + " bindings for kernel " + l.entry + " of " +
                                 std::to_string(sig.size()) + " arguments");
      for (size_t a = 0; a < jargs.size(); ++a) {
        const json& b = jargs[a];
        const std::string aw = l.where + ".args[" + std::to_string(a) + "]";
        Binding bd;
        bd.type = parse_type(sig[a].at("dtype").get<std::string>(), aw);
        if (b.contains("i32")) {
          bd.kind = Binding::I32;
          bd.value = Expr::parse(b.at("i32").get<std::string>(), syms);
        } else if (b.contains("f32")) {
          bd.kind = Binding::F32;
          bd.f32 = b.at("f32").get<float>();
        } else {
          if (b.contains("buffer")) {
            bd.kind = Binding::Buffer;
            auto it = buf_index.find(b.at("buffer").get<std::string>());
            if (it == buf_index.end()) throw std::runtime_error(aw + ": unknown graph buffer " + b.at("buffer").dump());
            bd.index = it->second;
            if (op.output_rows) bufs[it->second].read_by_output = true;
          } else if (b.contains("weight")) {
            bd.kind = Binding::Weight;
            const std::string name = b.at("weight").get<std::string>();
            const gguf::TensorInfo* t = pkg.gguf.tensor(name);
            if (!t) throw std::runtime_error(aw + ": weight " + name + " is not in " + pkg.gguf.path());
            bd.index = index_of(weights, name);
            weights[bd.index].data = t->data;
            weights[bd.index].bytes = t->n_bytes;
          } else if (b.contains("tokens")) {
            bd.kind = Binding::Tokens;
          } else if (b.contains("positions")) {
            bd.kind = Binding::Positions;
          } else if (b.contains("kv")) {
            bd.kind = b.at("kv").get<std::string>() == "v" ? Binding::KvV : Binding::KvK;
            bd.index = b.at("layer").get<int>();
            if (bd.index < 0 || bd.index >= n_layer) throw std::runtime_error(aw + ": KV layer " + std::to_string(bd.index));
          } else if (b.contains("block_table")) {
            bd.kind = Binding::BlockTable;
          } else if (b.contains("scratch")) {
            bd.kind = Binding::Scratch;
            bd.index = index_of(scratch, b.at("scratch").get<std::string>());
            // Sized once, for the largest pass: T = max_T rows, ctx = the context.
            std::vector<std::string> ssyms = syms;
            Expr bytes = Expr::parse(b.at("bytes").get<std::string>(), ssyms);
            std::vector<double> v(ssyms.size(), 0.0);
            v[kT] = v[kMaxT] = opts.max_rows;
            v[kCtx] = v[kMaxCtx] = opts.n_ctx;
            for (size_t s = 0; s < l.lets.size(); ++s) v[kBaseSlots + s] = l.lets[s].evaluate(v.data());
            scratch[bd.index].bytes = std::max<size_t>(scratch[bd.index].bytes, bytes.as_int(v.data(), aw + ".bytes"));
          } else if (b.contains("absent")) {
            bd.kind = Binding::Absent;
          } else {
            throw std::runtime_error(aw + ": unknown binding " + b.dump());
          }
          if (!bd.type.memref) throw std::runtime_error(aw + ": a memref binding for a scalar argument of " + l.entry);
          if (b.contains("shape"))
            for (const json& s : b.at("shape")) bd.shape.push_back(Expr::parse(s.get<std::string>(), syms));
          const bool sized_here = bd.kind == Binding::KvK || bd.kind == Binding::KvV || bd.kind == Binding::BlockTable ||
                                  bd.kind == Binding::Absent;
          if (!sized_here && static_cast<int>(bd.shape.size()) != bd.type.rank)
            throw std::runtime_error(aw + ": shape of rank " + std::to_string(bd.shape.size()) + " for a rank-" +
                                     std::to_string(bd.type.rank) + " memref");
        }
        if (!bd.type.memref && (bd.kind == Binding::I32) != (bd.type.scalar == "i32"))
          throw std::runtime_error(aw + ": binding does not match the " + bd.type.scalar + " argument of " + l.entry);
        l.args.push_back(std::move(bd));
      }
      op.launches.push_back(std::move(l));
    }
    ops.push_back(std::move(op));
  }
}

GraphExecutor::GraphExecutor(const package::LoadedPackage& pkg, std::unique_ptr<backend::Backend> be,
                             const ExecutorOptions& opts)
    : impl_(std::make_unique<Impl>()), opts_(opts) {
  Impl& m = *impl_;
  if (opts.max_rows < 1 || opts.max_seqs < 1 || opts.n_ctx < 1 || opts.n_pages < 1)
    throw std::invalid_argument("executor: max_rows, max_seqs, n_ctx and n_pages must be positive");
  m.be = std::move(be);
  m.opts = opts;
  m.be->load_kernels(pkg.manifest, pkg.dir);
  m.plan(pkg);
  n_vocab_ = pkg.manifest.graph.at("hparams").at("n_vocab").get<int>();
  m.max_blocks = (opts.n_ctx + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
  m.tile_bytes = static_cast<size_t>(m.n_head_kv) * kvcache::kBlockTokens * m.head_dim * 2;
  for (Weight& w : m.weights) {
    w.buf = m.alloc(w.bytes, "weight " + w.name);
    m.be->upload(w.buf, 0, w.data, w.bytes);
  }
  for (GraphBuffer& b : m.bufs) {
    const size_t bytes = static_cast<size_t>(opts.max_rows) * b.width * 4;
    b.main = m.alloc(bytes, "activation buffer " + b.name);
    if (b.read_by_output) b.gathered = m.alloc(bytes, "output rows of " + b.name);
  }
  for (Scratch& s : m.scratch) s.buf = m.alloc(s.bytes, "scratch " + s.name);
  for (int l = 0; l < m.n_layer; ++l) {
    m.kv_k.push_back(m.alloc(m.tile_bytes * opts.n_pages, "K cache of layer " + std::to_string(l)));
    m.kv_v.push_back(m.alloc(m.tile_bytes * opts.n_pages, "V cache of layer " + std::to_string(l)));
  }
  m.tokens = m.alloc(static_cast<size_t>(opts.max_rows) * 4, "token ids");
  m.positions = m.alloc(static_cast<size_t>(opts.max_rows) * 4, "positions");
  m.block_tables = m.alloc(static_cast<size_t>(opts.max_seqs) * m.max_blocks * 4, "block tables");
  m.dummy = m.alloc(256, "absent arguments");
  m.be->fill32(m.dummy, 0, 256, 0);
  m.be->synchronize();
  device_bytes_ = m.allocated;
}

GraphExecutor::~GraphExecutor() = default;

const backend::DeviceInfo& GraphExecutor::device() const { return impl_->be->info(); }

size_t GraphExecutor::page_elems() const { return impl_->tile_bytes / 2 * 2 * impl_->n_layer; }

void GraphExecutor::read_page(int page, uint16_t* host) {
  std::lock_guard<std::mutex> lock(mu_);
  Impl& m = *impl_;
  const size_t half = m.tile_bytes / 2;  // f16 values per tile
  for (int l = 0; l < m.n_layer; ++l) {
    m.be->download(host + (2 * l) * half, m.kv_k[l], page * m.tile_bytes, m.tile_bytes);
    m.be->download(host + (2 * l + 1) * half, m.kv_v[l], page * m.tile_bytes, m.tile_bytes);
  }
}

void GraphExecutor::write_page(int page, const uint16_t* host) {
  std::lock_guard<std::mutex> lock(mu_);
  Impl& m = *impl_;
  const size_t half = m.tile_bytes / 2;
  for (int l = 0; l < m.n_layer; ++l) {
    m.be->upload(m.kv_k[l], page * m.tile_bytes, host + (2 * l) * half, m.tile_bytes);
    m.be->upload(m.kv_v[l], page * m.tile_bytes, host + (2 * l + 1) * half, m.tile_bytes);
  }
}

void GraphExecutor::copy_page(int dst, int src) {
  std::lock_guard<std::mutex> lock(mu_);
  Impl& m = *impl_;
  for (int l = 0; l < m.n_layer; ++l) {
    m.be->copy(m.kv_k[l], dst * m.tile_bytes, m.kv_k[l], src * m.tile_bytes, m.tile_bytes);
    m.be->copy(m.kv_v[l], dst * m.tile_bytes, m.kv_v[l], src * m.tile_bytes, m.tile_bytes);
  }
}

// One launch over rows [row0, row0 + n_rows) of the pass (output rows when `output`),
// positions pos0.., the longest sequence `ctx`, block table slot `seq_slot` (sequence
// scope; -1 in batch scope).
void GraphExecutor::Impl::run_launch(const Launch& l, int row0, int n_rows, int pos0, int ctx, int seq_slot, bool output) {
  values.assign(kBaseSlots + l.lets.size(), 0.0);
  values[kT] = n_rows;
  values[kPos0] = pos0;
  values[kCtx] = ctx;
  values[kMaxT] = opts.max_rows;
  values[kMaxCtx] = opts.n_ctx;
  for (size_t s = 0; s < l.lets.size(); ++s) values[kBaseSlots + s] = l.lets[s].evaluate(values.data());
  args.clear();
  for (size_t a = 0; a < l.args.size(); ++a) {
    const Binding& b = l.args[a];
    backend::Arg arg;
    if (b.kind == Binding::I32) {
      arg.kind = backend::Arg::I32;
      arg.i32 = static_cast<int32_t>(b.value.as_int(values.data(), l.where + ".args[" + std::to_string(a) + "]"));
      args.push_back(arg);
      continue;
    }
    if (b.kind == Binding::F32) {
      arg.kind = backend::Arg::F32;
      arg.f32 = b.f32;
      args.push_back(arg);
      continue;
    }
    arg.kind = backend::Arg::Memref;
    arg.rank = b.type.rank;
    size_t limit = 0;  // bytes available from arg.offset
    switch (b.kind) {
      case Binding::Buffer: {
        const GraphBuffer& gb = bufs[b.index];
        arg.buffer = output && compact[b.index] == 2 ? gb.gathered : gb.main;
        arg.offset = static_cast<size_t>(row0) * gb.width * 4;
        break;
      }
      case Binding::Weight: arg.buffer = weights[b.index].buf; break;
      case Binding::Tokens: arg.buffer = tokens, arg.offset = static_cast<size_t>(row0) * 4; break;
      case Binding::Positions: arg.buffer = positions, arg.offset = static_cast<size_t>(row0) * 4; break;
      case Binding::Scratch: arg.buffer = scratch[b.index].buf; break;
      case Binding::KvK:
      case Binding::KvV: arg.buffer = (b.kind == Binding::KvK ? kv_k : kv_v)[b.index]; break;
      case Binding::BlockTable:
        if (seq_slot < 0) throw std::runtime_error(l.where + ": a block table in a batch-scope launch");
        arg.buffer = block_tables, arg.offset = static_cast<size_t>(seq_slot) * max_blocks * 4;
        break;
      case Binding::Absent: arg.buffer = dummy; break;
      default: break;
    }
    limit = arg.buffer.bytes - arg.offset;
    int64_t elems = 1;
    if (b.kind == Binding::Absent) {
      for (int d = 0; d < arg.rank; ++d) arg.sizes[d] = 1;
    } else if (b.kind == Binding::KvK || b.kind == Binding::KvV || b.kind == Binding::BlockTable) {
      // Sized by the executor: the whole page pool, the whole block table slot.
      const size_t bytes = b.kind == Binding::BlockTable ? static_cast<size_t>(max_blocks) * 4 : limit;
      arg.sizes[0] = static_cast<int64_t>(bytes / b.type.elem_bytes);
      for (int d = 1; d < arg.rank; ++d) arg.sizes[d] = 1;
    } else {
      for (int d = 0; d < arg.rank; ++d)
        arg.sizes[d] = b.shape[d].as_int(values.data(), l.where + ".args[" + std::to_string(a) + "].shape");
    }
    for (int d = 0; d < arg.rank; ++d) elems *= arg.sizes[d];
    arg.bytes = static_cast<size_t>(elems) * b.type.elem_bytes;
    if (arg.bytes > limit)
      throw std::runtime_error(l.where + ".args[" + std::to_string(a) + "] (" + l.entry + "): " + std::to_string(arg.bytes) +
                               " bytes bound, " + std::to_string(limit) + " available");
    args.push_back(arg);
  }
  std::array<uint32_t, 3> grid;
  for (int d = 0; d < 3; ++d) grid[d] = static_cast<uint32_t>(l.grid[d].as_int(values.data(), l.where + ".grid"));
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;  // nothing to do (e.g. no rows)
  be->launch(l.kernel, grid, static_cast<uint32_t>(l.smem.as_int(values.data(), l.where + ".dynamic_smem")), args);
}

void GraphExecutor::forward(std::span<const SequenceStep> seqs, std::vector<float>& logits) {
  std::lock_guard<std::mutex> lock(mu_);
  Impl& m = *impl_;
  if (seqs.empty()) throw std::invalid_argument("forward: no sequences");
  if (static_cast<int>(seqs.size()) > opts_.max_seqs)
    throw std::invalid_argument("forward: " + std::to_string(seqs.size()) + " sequences, at most " + std::to_string(opts_.max_seqs));
  // Generated-row sequences first, then prompt rows (decode / prefill phase ranges).
  std::vector<int> order(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(), [&](int i) { return seqs[i].rows == Rows::Generated; });
  const int n = static_cast<int>(seqs.size());
  std::vector<int> row0(n), out0(n);
  int rows = 0, out_rows = 0, gen_rows = 0, gen_out = 0;
  bool identity = true;
  m.h_tokens.clear();
  m.h_positions.clear();
  m.h_tables.assign(static_cast<size_t>(n) * m.max_blocks, 0);
  for (int k = 0; k < n; ++k) {
    const SequenceStep& s = seqs[order[k]];
    if (s.n_tokens < 1 || s.n_out < 1 || s.n_out > s.n_tokens || s.pos0 < 0)
      throw std::invalid_argument("forward: sequence " + std::to_string(order[k]) + " has " + std::to_string(s.n_tokens) +
                                  " tokens and wants " + std::to_string(s.n_out) + " logits rows");
    if (s.pos0 + s.n_tokens > opts_.n_ctx)
      throw std::invalid_argument("forward: sequence " + std::to_string(order[k]) + " passes the context of " +
                                  std::to_string(opts_.n_ctx) + " positions");
    const int need = (s.pos0 + s.n_tokens + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
    if (s.n_blocks < need || s.n_blocks > m.max_blocks)
      throw std::invalid_argument("forward: sequence " + std::to_string(order[k]) + " has " + std::to_string(s.n_blocks) +
                                  " blocks for " + std::to_string(s.pos0 + s.n_tokens) + " positions");
    row0[k] = rows;
    out0[k] = out_rows;
    rows += s.n_tokens;
    out_rows += s.n_out;
    identity &= s.n_out == s.n_tokens;
    if (s.rows == Rows::Generated) gen_rows += s.n_tokens, gen_out += s.n_out;
    for (int i = 0; i < s.n_tokens; ++i) {
      m.h_tokens.push_back(s.tokens[i]);
      m.h_positions.push_back(s.pos0 + i);
    }
    std::copy(s.block_table, s.block_table + s.n_blocks, m.h_tables.begin() + static_cast<ptrdiff_t>(k) * m.max_blocks);
  }
  if (rows > opts_.max_rows)
    throw std::invalid_argument("forward: " + std::to_string(rows) + " rows, at most " + std::to_string(opts_.max_rows));
  for (int32_t t : m.h_tokens)
    if (t < 0 || t >= n_vocab_) throw std::out_of_range("token id " + std::to_string(t) + " outside the vocabulary");
  m.be->upload(m.tokens, 0, m.h_tokens.data(), m.h_tokens.size() * 4);
  m.be->upload(m.positions, 0, m.h_positions.data(), m.h_positions.size() * 4);
  m.be->upload(m.block_tables, 0, m.h_tables.data(), m.h_tables.size() * 4);
  // compact[b]: 0 = full rows, 1 = output rows in `main` (written by an output op),
  // 2 = output rows gathered into `gathered`.
  m.compact.assign(m.bufs.size(), 0);
  for (const OpPlan& op : m.ops) {
    const bool output = op.output_rows;
    if (output) {
      for (int b : op.in_buffers) {
        if (m.compact[b]) continue;
        GraphBuffer& gb = m.bufs[b];
        if (identity) {
          m.compact[b] = 1;  // every row is an output row, in the same order
          continue;
        }
        const size_t row_bytes = static_cast<size_t>(gb.width) * 4;
        for (int k = 0; k < n; ++k) {
          const SequenceStep& s = seqs[order[k]];
          m.be->copy(gb.gathered, out0[k] * row_bytes, gb.main, (row0[k] + s.n_tokens - s.n_out) * row_bytes,
                     s.n_out * row_bytes);
        }
        m.compact[b] = 2;
      }
    }
    for (const Launch& l : op.launches) {
      const int total = output ? out_rows : rows, gen = output ? gen_out : gen_rows;
      const int lo = l.phase == Phase::Prefill ? gen : 0;
      const int hi = l.phase == Phase::Decode ? gen : total;
      if (hi <= lo) continue;
      if (!l.sequence_scope) {
        int ctx = 0;
        for (const SequenceStep& s : seqs) ctx = std::max(ctx, s.pos0 + s.n_tokens);
        m.run_launch(l, lo, hi - lo, 0, ctx, -1, output);
        continue;
      }
      for (int k = 0; k < n; ++k) {
        const SequenceStep& s = seqs[order[k]];
        const int r = output ? out0[k] : row0[k], cnt = output ? s.n_out : s.n_tokens;
        if (r < lo || r >= hi) continue;
        m.run_launch(l, r, cnt, s.pos0 + s.n_tokens - cnt, s.pos0 + s.n_tokens, k, output);
      }
    }
    if (output && op.out_buffer >= 0) m.compact[op.out_buffer] = 1;
    if (m.dump_dir && n == 1) m.dump(op, output ? out_rows : rows, output);
  }
  // Logits: the output buffer's output rows, back in the caller's sequence order.
  const GraphBuffer& ob = m.bufs[m.out_buf];
  const size_t row_bytes = static_cast<size_t>(ob.width) * 4;
  logits.resize(static_cast<size_t>(out_rows) * n_vocab_);
  if (m.compact[m.out_buf]) {
    m.out_rows.resize(static_cast<size_t>(out_rows) * ob.width);
    m.be->download(m.out_rows.data(), m.compact[m.out_buf] == 2 ? ob.gathered : ob.main, 0, out_rows * row_bytes);
  }
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const int k = static_cast<int>(std::find(order.begin(), order.end(), i) - order.begin());
    const SequenceStep& s = seqs[i];
    float* dst = logits.data() + at * n_vocab_;
    if (m.compact[m.out_buf]) {
      std::copy_n(m.out_rows.data() + static_cast<size_t>(out0[k]) * ob.width, static_cast<size_t>(s.n_out) * ob.width, dst);
    } else {
      m.be->download(dst, ob.main, (row0[k] + s.n_tokens - s.n_out) * row_bytes, s.n_out * row_bytes);
    }
    at += s.n_out;
  }
}

GraphModel::GraphModel(GraphExecutor& ex, kvcache::PageAllocator& kv) : ex_(ex), kv_(kv) {}

GraphModel::~GraphModel() { release(); }

void GraphModel::truncate(int n) {
  n_past_ = std::clamp(n, 0, n_past_);
  const size_t keep = static_cast<size_t>((n_past_ + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens);
  while (block_table_.size() > keep) {
    kv_.unref_page(block_table_.back());
    block_table_.pop_back();
  }
}

void GraphModel::release() {
  for (int p : block_table_) kv_.unref_page(p);
  block_table_.clear();
  n_past_ = 0;
}

void GraphModel::attach(std::vector<int> pages, int n_past) {
  if (n_past < 0 || n_past > n_ctx() || pages.size() * kvcache::kBlockTokens < static_cast<size_t>(n_past)) {
    for (int p : pages) kv_.unref_page(p);
    throw std::invalid_argument("attach: " + std::to_string(pages.size()) + " pages cannot hold " + std::to_string(n_past) +
                                " positions");
  }
  release();
  block_table_ = std::move(pages);
  n_past_ = n_past;
}

void GraphModel::forward(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>& logits) {
  if (n_tokens <= 0) throw std::invalid_argument("forward: no tokens");
  if (n_past_ + n_tokens > n_ctx())
    throw std::length_error("KV cache full: " + std::to_string(n_past_) + " + " + std::to_string(n_tokens) +
                            " tokens exceed the context of " + std::to_string(n_ctx()));
  n_out = std::clamp(n_out, 1, n_tokens);
  // The pages for positions n_past.. exist and are this sequence's own: a missing page is
  // allocated, a shared one (a prefix-cache block) copied on the device first. Page
  // allocation happens here, never inside the executor (which holds its lock).
  const int first = n_past_ / kvcache::kBlockTokens, last = (n_past_ + n_tokens - 1) / kvcache::kBlockTokens;
  for (int b = first; b <= last; ++b) {
    if (static_cast<size_t>(b) >= block_table_.size()) {
      block_table_.push_back(kv_.alloc_page());
    } else if (kv_.page_refcount(block_table_[b]) > 1) {
      const int fresh = kv_.alloc_page();
      ex_.copy_page(fresh, block_table_[b]);
      kv_.unref_page(block_table_[b]);
      block_table_[b] = fresh;
    }
  }
  // Prompt rows go through the executor in chunks of its row budget.
  const int max_rows = ex_.options().max_rows;
  std::vector<float> part;
  logits.clear();
  for (int i = 0; i < n_tokens; i += max_rows) {
    const int cnt = std::min(max_rows, n_tokens - i);
    SequenceStep s;
    s.tokens = tokens + i;
    s.n_tokens = cnt;
    s.pos0 = n_past_ + i;
    s.block_table = block_table_.data();
    s.n_blocks = static_cast<int>(block_table_.size());
    const int want_from = n_tokens - n_out;  // first row whose logits are wanted
    const int out_here = std::max(0, i + cnt - std::max(want_from, i));
    s.n_out = std::max(1, out_here);
    s.rows = rows;
    s.n_blocks = (s.pos0 + cnt + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
    ex_.forward(std::span<const SequenceStep>(&s, 1), part);
    if (out_here > 0) logits.insert(logits.end(), part.begin(), part.end());
  }
  n_past_ += n_tokens;
}

}  // namespace swz::exec
