#include "exec/executor.h"

#include <algorithm>
#include <chrono>
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
using Rows = SequenceModel::Rows;

using package::Phase;

/// A launch record (package::Launch, parsed by package::parse_launches) with its names
/// resolved to the executor's buffers, weights and scratch, and the backend's kernel.
struct Launch {
  const package::Launch* rec = nullptr;
  int kernel = -1;
  std::string where;
  std::vector<int> index;  // per argument: graph buffer, weight or scratch index (-1 otherwise)
  /// Some rule of the record reads pos0 or ctx: its grid or arguments change from one
  /// step to the next even when the batch's shape does not (attention, the KV write).
  bool dynamic = false;
};

/// A step program: the launches of one forward pass shape (see GraphExecutor::Impl::
/// programs), kept as a backend launch graph. Only the dynamic launches are evaluated
/// again on later passes of the same shape; the rest are the graph's as recorded.
struct StepItem {
  const Launch* launch = nullptr;
  int row0 = 0, n_rows = 0;
  int seq_slot = -1;    // arranged sequence (sequence scope), -1: batch scope
  bool output = false;
  int branch = 0;       // backend::LaunchDesc::branch
  int node = -1;        // index in the graph, -1: not launched (a 0 in its grid)
};
struct StepProgram {
  int graph = -1;                       // backend launch graph, -1: none yet
  int passes = 0;                       // passes of this shape seen
  uint64_t last_used = 0;
  std::vector<StepItem> dynamic;        // the dynamic launches, in order
  std::vector<backend::LaunchDesc> descs;  // per dynamic item with a node: its last launch
  std::vector<char> compact;            // the pass's final compact[] (GraphExecutor::Impl)
  /// Per arranged sequence: the first position of the pass the graph's dynamic launches
  /// were last set for (GraphExecutor::Impl::replay), or empty. A pass of this shape at
  /// these positions launches the graph as it is, evaluating nothing.
  std::vector<int> set_for;
};

struct OpPlan {
  std::string kind;
  bool output_rows = false;
  /// SWZ_DUMP_DIR: (graph op index, buffer) written once this op's launches ran: its own
  /// output, and those of the ops fused into it that a buffer holds (a fused residual
  /// add's sum; not a rope folded into the KV write, whose rotated k is never stored).
  std::vector<std::pair<int, int>> dumps;
  std::vector<int> in_buffers;  // graph buffers the op reads
  /// Output-rows ops: the buffers its records bind that hold full rows when it runs (not
  /// written by an earlier output op; not its own output, unless it also reads it): their
  /// output rows are gathered into `gathered` first.
  std::vector<int> gather;
  int out_buffer = -1;
  std::vector<Launch> launches;
};

struct GraphBuffer {
  std::string name;
  int width = 0;
  backend::Buffer main, gathered;
  bool gathered_by_output = false;  // some output op gathers it: `gathered` is allocated
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
  /// Bound by a sequence-scope launch (attention's split-K partials): the scratch is per
  /// row (its bytes rule is linear in max_T), and each sequence's launches get the slice
  /// of its own rows, `row_bytes` a row (rounded up to kMemrefOffsetAlignment), so the
  /// sequences of a pass never share it and their launches may run concurrently. 0: one
  /// scratch for the whole launch.
  size_t row_bytes = 0;
  backend::Buffer buf;
};

}  // namespace

struct GraphExecutor::Impl {
  std::unique_ptr<backend::Backend> be;
  ExecutorOptions opts;
  int n_layer = 0, n_head_kv = 0, head_dim = 0, max_blocks = 0;
  // Per-sequence slots of the staging buffers, in elements, padded so that every slot
  // starts at a multiple of backend::kMemrefOffsetAlignment bytes (a Vulkan storage
  // buffer offset must be aligned): block tables, and positions for sequence-scope
  // launches (batch-scope launches read `positions` contiguously).
  int table_stride = 0, pos_stride = 0;
  std::vector<int> seq_pos0;  // per arranged sequence: its first position this pass
  size_t tile_bytes = 0;  // one page of one layer's K (or V): n_head_kv * 64 * head_dim f16
  bool cpu_tiles = false;  // the cpu format: K [64][kv_width], V [kv_width][64]; else [n_head_kv][64][head_dim] both
  kvcache::KvGeometry geom;
  /// Copies the runs' slots to `k`, `v` ([n_layer][sum n][kv_width] f16; with `layer` >= 0
  /// that layer's only, [sum n][kv_width]), through kv_stage.
  void kv_runs(std::span<const BatchModel::KvRun> runs, uint16_t* k, uint16_t* v, int layer = -1);
  /// move_kv through the host (packages without graph.kv_move): per layer, K and V, the
  /// moves' source and destination tiles cross to the host through kv_stage, the slots are
  /// copied (K re-rotated: kvcache::rerotate_head) and the destination tiles go back.
  void move_kv_host(std::span<const BatchModel::KvMove> moves);
  /// move_kv on the device: graph.kv_move's records, one a layer, over the moves uploaded
  /// to `kv_moves` (kKvMoveChunk at a time).
  void move_kv_device(std::span<const BatchModel::KvMove> moves);
  backend::Buffer kv_stage;  // stage_tiles tiles: K/V tiles gathered for one host transfer
  static constexpr int kKvMoveChunk = 4096;
  std::vector<package::Launch> kv_move_records;  // graph.kv_move (kv_move.launches point into it)
  OpPlan kv_move;
  backend::Buffer kv_moves;            // kKvMoveChunk moves {source slot, destination slot, delta} (i32)
  std::vector<int32_t> h_moves;
  int stage_tiles = 0;
  /// Element offset in a tile of (slot, dim) for K (`is_v` false) or V, dim in 0..kv_width-1.
  size_t tile_index(bool is_v, int slot, int dim) const {
    const int kvw = n_head_kv * head_dim;
    if (cpu_tiles) return is_v ? static_cast<size_t>(dim) * kvcache::kBlockTokens + slot : static_cast<size_t>(slot) * kvw + dim;
    return (static_cast<size_t>(dim / head_dim) * kvcache::kBlockTokens + slot) * head_dim + dim % head_dim;
  }
  std::vector<backend::Buffer> kv_k, kv_v;  // per layer: n_pages tiles
  std::vector<GraphBuffer> bufs;
  std::vector<Weight> weights;
  std::vector<Scratch> scratch;
  std::vector<package::OpLaunches> records;  // parse_launches(); ops' Launch::rec point into it
  std::vector<OpPlan> ops;
  /// Per layer: one past the index in `ops` of the last op whose launches bind that layer's
  /// K or V (its attention), 0 for none: forward_layers(n) runs ops [0, layer_end[n - 1]).
  std::vector<size_t> layer_end;
  int out_buf = -1;
  // seq_info: per arranged sequence {first row, rows, first position, block table offset
  // (elements)}, the `sequences` binding; row_tables: per row, its sequence's block table
  // offset, the `row_tables` binding (docs/package-format.md, "Bindings").
  backend::Buffer tokens, positions, seq_positions, block_tables, seq_info, row_tables, dummy;
  // Per forward (reused, never shrunk).
  std::vector<int32_t> h_tokens, h_positions, h_seq_positions, h_tables, h_seq_info, h_row_tables;
  // This pass's sequences per phase range (symbols n_seq, seq_T of a batch-scope launch):
  // [0] every row, [1] the decode rows (generated sequences, arranged first), [2] prefill.
  int range_seqs[3] = {0, 0, 0}, range_seq_T[3] = {0, 0, 0};
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
    f(tokens), f(positions), f(seq_positions), f(block_tables), f(seq_info), f(row_tables), f(dummy), f(kv_stage), f(kv_moves);
    for (auto& [k, p] : programs)
      if (p.graph >= 0) be->destroy_graph(p.graph);
  }

  void plan(const package::LoadedPackage& pkg);
  Launch resolve(const package::LoadedPackage& pkg, const package::Launch& r, const std::string& where,
                 const std::map<std::string, int>& buf_index);
  std::vector<package::Launch> argmax_records;  // graph.sampling.argmax (argmax.launches point into it)
  OpPlan argmax;                                // greedy sampling as an output-rows op
  int argmax_ids = -1;                          // its scratch of token ids
  std::vector<int32_t> ids_rows;                // per forward: downloaded token ids
  // SWZ_DUMP_DIR=dir (single-sequence passes): each op's output rows written to
  // dir/<op index>_<buffer>.f32, on every backend, so a cpu and a GPU package's runs
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
  /// Fills `cur` with launch `l` over rows [row0, row0 + n_rows) (see the definition);
  /// false when its grid has a 0 (nothing to launch).
  bool prepare(const Launch& l, int row0, int n_rows, int pos0, int ctx, int seq_slot, bool output);
  /// prepare() then launch `cur`, or, while recording a step program, keep it (in graph
  /// branch `branch`: backend::LaunchDesc::branch).
  void emit(const Launch& l, int row0, int n_rows, int pos0, int ctx, int seq_slot, bool output, int branch = 0);
  [[noreturn]] void bad_rule(const Launch& l, const package::Expr& e, const char* field, size_t arg);
  int64_t eval(const Launch& l, const package::Expr& e, const char* field, size_t arg) {
    int64_t v = 0;
    if (!e.try_int(values.data(), v)) bad_rule(l, e, field, arg);
    return v;
  }
  backend::LaunchDesc cur;  // the launch prepare() built

  // Launch graphs (backend.h) for passes that repeat: every pass whose rows are all output
  // rows (each decode step; speculative verification) has a shape key (the sequences'
  // token counts, what comes back). From its second pass, a shape's launches are recorded
  // into a StepProgram and a backend graph; later passes of that shape evaluate only the
  // dynamic launches, update those that changed, and launch the graph. SWZ_GRAPHS=0 turns
  // this off (every launch evaluated and launched one by one).
  bool use_graphs = [] {
    const char* e = std::getenv("SWZ_GRAPHS");
    return !e || std::string(e) != "0";
  }();
  static constexpr size_t kMaxPrograms = 32;  // least recently used beyond this are dropped
  std::unordered_map<std::string, StepProgram> programs;
  uint64_t pass_counter = 0;
  StepProgram* recording = nullptr;  // emit() keeps launches here instead of launching
  std::vector<backend::LaunchDesc> recorded;  // the whole pass being recorded
  std::string key;
  bool replay(StepProgram& p, std::span<const SequenceStep> seqs);
  bool set_dynamic(StepProgram& p, std::span<const int> pos0, std::span<const int> n_tokens);
  /// Whether replay() sets a launched graph's dynamic launches for the shape's next pass
  /// while the device runs this one: where launches run asynchronously (not the cpu
  /// backend, whose graphs run inside launch_graph()).
  bool ahead = false;
  std::vector<int> slot_pos0, slot_tokens;  // replay()'s per arranged sequence scratch
  void drop(StepProgram& p) {
    if (p.graph >= 0) be->destroy_graph(p.graph);
    p.graph = -1;
    p.dynamic.clear();
    p.descs.clear();
  }
  // Per forward (reused): arrangement of the sequences.
  std::vector<int> order, row0, out0, arranged;
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
  geom.n_layer = n_layer;
  geom.n_head_kv = n_head_kv;
  geom.head_dim = head_dim;
  geom.n_rot = hp.at("n_rot").get<int>();
  geom.rope_theta = hp.at("rope_theta").get<float>();
  geom.neox = hp.at("rope_type").get<std::string>() == "neox";
  std::map<std::string, int> buf_index;
  for (auto& [name, width] : g.at("buffers").items()) {
    buf_index[name] = static_cast<int>(bufs.size());
    bufs.push_back(GraphBuffer{name, width.get<int>(), {}, {}, false});
  }
  out_buf = buf_index.at(g.at("output").get<std::string>());
  records = package::parse_launches(m);
  std::vector<const package::OpLaunches*> by_op(g.at("ops").size(), nullptr);
  for (const package::OpLaunches& ol : records) by_op.at(ol.op) = &ol;
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
    if (!by_op[i])
      throw std::runtime_error("graph op " + std::to_string(i) + " (" + op.kind + ") has no launch records");
    const std::vector<package::Launch>& recs = by_op[i]->launches;
    for (size_t li = 0; li < recs.size(); ++li)
      op.launches.push_back(resolve(pkg, recs[li], "graph.ops[" + std::to_string(i) + "].launches[" + std::to_string(li) + "]",
                                    buf_index));
    ops.push_back(std::move(op));
  }
  layer_end.assign(static_cast<size_t>(n_layer), 0);
  for (size_t i = 0; i < ops.size(); ++i)
    for (const Launch& l : ops[i].launches)
      for (const package::Binding& b : l.rec->args)
        if (b.kind == package::Binding::Kv && b.layer >= 0 && b.layer < n_layer) layer_end[static_cast<size_t>(b.layer)] = i + 1;
  // Greedy sampling on the device (graph.sampling.argmax): token ids of the output rows.
  argmax_records = package::parse_argmax_launches(m);
  if (!argmax_records.empty()) {
    const json& op = g.at("sampling").at("argmax");
    argmax.kind = "argmax";
    argmax.output_rows = true;
    argmax.in_buffers.push_back(buf_index.at(op.at("in").at(0).get<std::string>()));
    for (size_t li = 0; li < argmax_records.size(); ++li)
      argmax.launches.push_back(resolve(pkg, argmax_records[li], "graph.sampling.argmax.launches[" + std::to_string(li) + "]",
                                        buf_index));
    argmax_ids = index_of(scratch, op.at("out").get<std::string>());
    if (scratch[argmax_ids].bytes < static_cast<size_t>(opts.max_rows) * 4)
      throw std::runtime_error("graph.sampling.argmax: its out '" + scratch[argmax_ids].name +
                               "' is not a scratch its records bind with room for one i32 per row");
  }
  // K/V moved on the device (graph.kv_move): the approx cache mode's installs.
  kv_move_records = package::parse_kv_move_launches(m);
  kv_move.kind = "kv_move";
  for (size_t li = 0; li < kv_move_records.size(); ++li)
    kv_move.launches.push_back(resolve(pkg, kv_move_records[li], "graph.kv_move.launches[" + std::to_string(li) + "]", buf_index));
  // Which buffers each output-rows op gathers (OpPlan::gather), in graph order.
  std::vector<char> compact(bufs.size(), 0);
  auto plan_gather = [&](OpPlan& op) {
    if (!op.output_rows) return;
    std::vector<char> bound(bufs.size(), 0);
    for (const Launch& l : op.launches)
      for (size_t a = 0; a < l.rec->args.size(); ++a)
        if (l.rec->args[a].kind == package::Binding::Buffer) bound[l.index[a]] = 1;
    const bool reads_out = std::count(op.in_buffers.begin(), op.in_buffers.end(), op.out_buffer) > 0;
    for (size_t b = 0; b < bufs.size(); ++b)
      if (bound[b] && !compact[b] && (static_cast<int>(b) != op.out_buffer || reads_out)) {
        op.gather.push_back(static_cast<int>(b));
        bufs[b].gathered_by_output = true;
        compact[b] = 1;
      }
    if (op.out_buffer >= 0) compact[op.out_buffer] = 1;
  };
  for (OpPlan& op : ops) plan_gather(op);
  plan_gather(argmax);
}

Launch GraphExecutor::Impl::resolve(const package::LoadedPackage& pkg, const package::Launch& r, const std::string& where,
                                    const std::map<std::string, int>& buf_index) {
  Launch l;
  l.rec = &r;
  l.where = where + " (" + r.kernel + ")";
  l.kernel = be->kernel_index(r.kernel);
  for (const package::Binding& b : r.args) {
    int index = -1;
    switch (b.kind) {
      case package::Binding::Buffer:
        index = buf_index.at(b.name);
        break;
      case package::Binding::Weight: {
        const gguf::TensorInfo* t = pkg.gguf.tensor(b.name);
        if (!t) throw std::runtime_error(l.where + ": weight " + b.name + " is not in " + pkg.gguf.path());
        index = index_of(weights, b.name);
        weights[index].data = t->data;
        weights[index].bytes = t->n_bytes;
        break;
      }
      case package::Binding::Scratch: {
        index = index_of(scratch, b.name);
        // Sized once, for the largest pass: max_T rows, a full context.
        const double v[2] = {static_cast<double>(opts.max_rows), static_cast<double>(opts.n_ctx)};
        scratch[index].bytes = std::max<size_t>(scratch[index].bytes, b.value.as_int(v, l.where + " scratch " + b.name));
        if (r.scope == package::Scope::Sequence) {
          const double one[2] = {1, static_cast<double>(opts.n_ctx)}, two[2] = {2, static_cast<double>(opts.n_ctx)};
          const int64_t b1 = b.value.as_int(one, l.where + " scratch " + b.name);
          if (b.value.as_int(two, l.where + " scratch " + b.name) != 2 * b1)
            throw std::runtime_error(l.where + ": scratch " + b.name + " is bound per sequence, so its bytes rule '" +
                                     b.value.text() + "' must be linear in max_T (bytes per row); recompile the package");
          const size_t a = backend::kMemrefOffsetAlignment;
          Scratch& sc = scratch[index];
          sc.row_bytes = std::max<size_t>(sc.row_bytes, (static_cast<size_t>(b1) + a - 1) / a * a);
          sc.bytes = std::max(sc.bytes, sc.row_bytes * static_cast<size_t>(opts.max_rows));
        }
        break;
      }
      default: break;
    }
    l.index.push_back(index);
  }
  auto reads_step = [](const package::Expr& e) { return e.uses(package::kSymPos0) || e.uses(package::kSymCtx); };
  for (const package::Expr& e : r.let) l.dynamic |= reads_step(e);
  for (const package::Expr& e : r.grid) l.dynamic |= reads_step(e);
  l.dynamic |= reads_step(r.dynamic_smem);
  for (const package::Binding& b : r.args) {
    if (b.kind == package::Binding::I32) l.dynamic |= reads_step(b.value);
    for (const package::Expr& e : b.shape) l.dynamic |= reads_step(e);
  }
  return l;
}

GraphExecutor::GraphExecutor(const package::LoadedPackage& pkg, std::unique_ptr<backend::Backend> be,
                             const ExecutorOptions& opts)
    : impl_(std::make_unique<Impl>()), opts_(opts) {
  Impl& m = *impl_;
  if (opts.max_rows < 1 || opts.max_seqs < 1 || opts.n_ctx < 1 || opts.n_pages < 1)
    throw std::invalid_argument("executor: max_rows, max_seqs, n_ctx and n_pages must be positive");
  m.be = std::move(be);
  m.ahead = m.be->info().backend != "cpu";
  m.cpu_tiles = m.be->info().backend == "cpu";
  m.opts = opts;
  m.be->load_kernels(pkg.manifest, pkg.dir);
  m.plan(pkg);
  n_vocab_ = pkg.manifest.graph.at("hparams").at("n_vocab").get<int>();
  m.max_blocks = (opts.n_ctx + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
  m.tile_bytes = static_cast<size_t>(m.n_head_kv) * kvcache::kBlockTokens * m.head_dim * 2;
  for (Weight& w : m.weights) {
    // Zero-padded to 16 bytes: kernels read quantized rows as whole 32-bit words or
    // 16-byte vectors, so a binding's shape may round the tensor up (package-format.md).
    const size_t padded = (w.bytes + 15) / 16 * 16;
    w.buf = m.alloc(padded, "weight " + w.name);
    if (padded > w.bytes) m.be->fill32(w.buf, padded - 16, 16, 0);
    m.be->upload(w.buf, 0, w.data, w.bytes);
  }
  for (GraphBuffer& b : m.bufs) {
    const size_t bytes = static_cast<size_t>(opts.max_rows) * b.width * 4;
    b.main = m.alloc(bytes, "activation buffer " + b.name);
    if (b.gathered_by_output) b.gathered = m.alloc(bytes, "output rows of " + b.name);
  }
  // Scratch starts zeroed (docs/package-format.md): kernels may keep counters in it.
  for (Scratch& s : m.scratch) {
    s.bytes = (s.bytes + 3) / 4 * 4;
    s.buf = m.alloc(s.bytes, "scratch " + s.name);
    m.be->fill32(s.buf, 0, s.bytes, 0);
  }
  for (int l = 0; l < m.n_layer; ++l) {
    m.kv_k.push_back(m.alloc(m.tile_bytes * opts.n_pages, "K cache of layer " + std::to_string(l)));
    m.kv_v.push_back(m.alloc(m.tile_bytes * opts.n_pages, "V cache of layer " + std::to_string(l)));
  }
  m.tokens = m.alloc(static_cast<size_t>(opts.max_rows) * 4, "token ids");
  const int align = static_cast<int>(backend::kMemrefOffsetAlignment / 4);
  m.table_stride = (m.max_blocks + align - 1) / align * align;
  m.pos_stride = (opts.max_rows + align - 1) / align * align;
  m.positions = m.alloc(static_cast<size_t>(opts.max_rows) * 4, "positions");
  m.seq_positions = m.alloc(static_cast<size_t>(opts.max_seqs) * m.pos_stride * 4, "positions per sequence");
  m.block_tables = m.alloc(static_cast<size_t>(opts.max_seqs) * m.table_stride * 4, "block tables");
  m.seq_info = m.alloc(static_cast<size_t>(opts.max_seqs) * 4 * 4, "sequence records");
  m.row_tables = m.alloc(static_cast<size_t>(opts.max_rows) * 4, "block table of each row");
  m.dummy = m.alloc(256, "absent arguments");
  m.stage_tiles = std::max(2, std::min(m.max_blocks, 64));  // a move's two pages at least
  m.kv_stage = m.alloc(m.tile_bytes * static_cast<size_t>(m.stage_tiles), "K/V staging (approx cache mode)");
  if (!m.kv_move.launches.empty()) m.kv_moves = m.alloc(Impl::kKvMoveChunk * 12, "K/V moves (approx cache mode)");
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

kvcache::KvGeometry GraphExecutor::kv_geometry() const { return impl_->geom; }

namespace {
void check_runs(const char* what, std::span<const BatchModel::KvRun> runs, int n_pages, bool distinct) {
  std::set<int> pages;
  for (const BatchModel::KvRun& r : runs) {
    if (r.page < 0 || r.page >= n_pages || r.slot0 < 0 || r.n < 0 || r.slot0 + r.n > kvcache::kBlockTokens)
      throw std::invalid_argument(std::string(what) + ": page " + std::to_string(r.page) + " slots " +
                                  std::to_string(r.slot0) + "+" + std::to_string(r.n) + " out of range");
    if (distinct && !pages.insert(r.page).second)
      throw std::invalid_argument(std::string(what) + ": page " + std::to_string(r.page) + " twice");
  }
}
}  // namespace

void GraphExecutor::read_kv(std::span<const KvRun> runs, uint16_t* k, uint16_t* v, int layer) {
  std::lock_guard<std::mutex> lock(mu_);
  check_runs("read_kv", runs, opts_.n_pages, false);
  if (layer >= impl_->n_layer)
    throw std::invalid_argument("read_kv: layer " + std::to_string(layer) + " of " + std::to_string(impl_->n_layer));
  impl_->kv_runs(runs, k, v, layer);
}

void GraphExecutor::move_kv(std::span<const KvMove> moves) {
  std::lock_guard<std::mutex> lock(mu_);
  Impl& m = *impl_;
  std::set<int> src_pages;
  std::set<std::pair<int, int>> dst;
  for (const KvMove& mv : moves) {
    if (mv.src_page < 0 || mv.src_page >= opts_.n_pages || mv.dst_page < 0 || mv.dst_page >= opts_.n_pages ||
        mv.src_slot < 0 || mv.src_slot >= kvcache::kBlockTokens || mv.dst_slot < 0 || mv.dst_slot >= kvcache::kBlockTokens)
      throw std::invalid_argument("move_kv: page " + std::to_string(mv.src_page) + " slot " + std::to_string(mv.src_slot) +
                                  " to page " + std::to_string(mv.dst_page) + " slot " + std::to_string(mv.dst_slot) +
                                  " out of range");
    src_pages.insert(mv.src_page);
    if (!dst.insert({mv.dst_page, mv.dst_slot}).second)
      throw std::invalid_argument("move_kv: page " + std::to_string(mv.dst_page) + " slot " + std::to_string(mv.dst_slot) +
                                  " written twice");
  }
  for (const auto& [page, slot] : dst)
    if (src_pages.count(page))
      throw std::invalid_argument("move_kv: page " + std::to_string(page) + " is both a source and a destination");
  if (moves.empty()) return;
  if (!m.kv_move.launches.empty()) m.move_kv_device(moves);
  else m.move_kv_host(moves);
}

void GraphExecutor::Impl::move_kv_host(std::span<const BatchModel::KvMove> moves) {
  const size_t half = tile_bytes / 2;  // f16 values in a tile
  std::vector<uint16_t> host;
  std::map<int, kvcache::RopeDelta> rotations;
  // Chunks of moves whose pages (sources and destinations) fit the staging buffer.
  for (size_t m0 = 0; m0 < moves.size();) {
    std::map<int, int> slot_of;  // page -> its tile in kv_stage
    std::vector<int> pages;
    size_t m1 = m0;
    for (; m1 < moves.size(); ++m1) {
      const int need = !slot_of.count(moves[m1].src_page) + !slot_of.count(moves[m1].dst_page);
      if (static_cast<int>(pages.size()) + need > stage_tiles) break;
      for (int p : {moves[m1].src_page, moves[m1].dst_page})
        if (slot_of.emplace(p, static_cast<int>(pages.size())).second) pages.push_back(p);
    }
    host.resize(pages.size() * half);
    std::set<int> written;  // the chunk's destination pages
    for (size_t i = m0; i < m1; ++i) written.insert(moves[i].dst_page);
    for (int l = 0; l < n_layer; ++l)
      for (int is_v = 0; is_v < 2; ++is_v) {
        const backend::Buffer& pool = is_v ? kv_v[l] : kv_k[l];
        for (size_t i = 0; i < pages.size(); ++i) be->copy(kv_stage, i * tile_bytes, pool, pages[i] * tile_bytes, tile_bytes);
        be->download(host.data(), kv_stage, 0, pages.size() * tile_bytes);
        for (size_t i = m0; i < m1; ++i) {
          const BatchModel::KvMove& mv = moves[i];
          const uint16_t* src = host.data() + static_cast<size_t>(slot_of[mv.src_page]) * half;
          uint16_t* dst = host.data() + static_cast<size_t>(slot_of[mv.dst_page]) * half;
          for (int h = 0; h < n_head_kv; ++h) {
            if (is_v && cpu_tiles) {  // the cpu format's transposed V: value by value
              for (int d = h * head_dim; d < (h + 1) * head_dim; ++d)
                dst[tile_index(true, mv.dst_slot, d)] = src[tile_index(true, mv.src_slot, d)];
              continue;
            }
            uint16_t* x = dst + tile_index(is_v, mv.dst_slot, h * head_dim);
            std::copy_n(src + tile_index(is_v, mv.src_slot, h * head_dim), head_dim, x);
            if (!is_v && mv.delta != 0) {
              auto it = rotations.find(mv.delta);
              if (it == rotations.end()) it = rotations.emplace(mv.delta, kvcache::RopeDelta(geom, mv.delta)).first;
              kvcache::rerotate_head(x, geom, it->second);
            }
          }
        }
        be->upload(kv_stage, 0, host.data(), pages.size() * tile_bytes);
        for (int p : written)
          be->copy(pool, p * tile_bytes, kv_stage, static_cast<size_t>(slot_of[p]) * tile_bytes, tile_bytes);
      }
    m0 = m1;
  }
}

void GraphExecutor::Impl::move_kv_device(std::span<const BatchModel::KvMove> moves) {
  constexpr int kTok = kvcache::kBlockTokens;
  for (size_t m0 = 0; m0 < moves.size(); m0 += kKvMoveChunk) {
    const int n = static_cast<int>(std::min<size_t>(kKvMoveChunk, moves.size() - m0));
    h_moves.resize(static_cast<size_t>(n) * 3);
    for (int i = 0; i < n; ++i) {
      const BatchModel::KvMove& mv = moves[m0 + static_cast<size_t>(i)];
      h_moves[3 * i] = mv.src_page * kTok + mv.src_slot;
      h_moves[3 * i + 1] = mv.dst_page * kTok + mv.dst_slot;
      h_moves[3 * i + 2] = mv.delta;
    }
    // Stream-ordered after the previous chunk's launches (which read kv_moves).
    be->upload(kv_moves, 0, h_moves.data(), h_moves.size() * 4);
    for (const Launch& l : kv_move.launches)
      if (prepare(l, 0, n, 0, 0, -1, false)) be->launch(cur.kernel, cur.grid, cur.dynamic_smem, cur.args);
  }
}

void GraphExecutor::Impl::kv_runs(std::span<const BatchModel::KvRun> runs, uint16_t* k, uint16_t* v, int layer) {
  const size_t kvw = static_cast<size_t>(n_head_kv) * head_dim;
  const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? n_layer : layer + 1;  // the layers copied
  size_t total = 0;
  for (const BatchModel::KvRun& r : runs) total += static_cast<size_t>(r.n);
  const size_t half = tile_bytes / 2;  // f16 values in a tile
  std::vector<uint16_t> host;
  for (size_t g0 = 0, row0 = 0; g0 < runs.size(); g0 += static_cast<size_t>(stage_tiles)) {
    const size_t cnt = std::min(runs.size() - g0, static_cast<size_t>(stage_tiles));
    host.resize(cnt * half);
    size_t rows = 0;
    for (size_t i = 0; i < cnt; ++i) rows += static_cast<size_t>(runs[g0 + i].n);
    for (int l = l0; l < l1; ++l)
      for (int is_v = 0; is_v < 2; ++is_v) {
        const backend::Buffer& pool = is_v ? kv_v[l] : kv_k[l];
        for (size_t i = 0; i < cnt; ++i) be->copy(kv_stage, i * tile_bytes, pool, runs[g0 + i].page * tile_bytes, tile_bytes);
        be->download(host.data(), kv_stage, 0, cnt * tile_bytes);
        uint16_t* base = (is_v ? v : k) + (static_cast<size_t>(l - l0) * total + row0) * kvw;
        size_t row = 0;
        for (size_t i = 0; i < cnt; ++i) {
          const BatchModel::KvRun& r = runs[g0 + i];
          const uint16_t* tile = host.data() + i * half;
          // Contiguous pieces: a head's head_dim values (GPU tiles), a K row (cpu); the cpu
          // format's transposed V goes value by value.
          const bool by_value = cpu_tiles && is_v;
          const size_t piece = by_value ? 1 : cpu_tiles ? kvw : static_cast<size_t>(head_dim);
          for (int t = 0; t < r.n; ++t, ++row)
            for (size_t d = 0; d < kvw; d += piece)
              std::copy_n(&tile[tile_index(is_v, r.slot0 + t, static_cast<int>(d))], piece, &base[row * kvw + d]);
        }
      }
    row0 += rows;
  }
}

void GraphExecutor::Impl::bad_rule(const Launch& l, const package::Expr& e, const char* field, size_t arg) {
  std::string what = l.where + " " + field;
  if (arg != size_t(-1)) what += " of argument " + std::to_string(arg);
  e.as_int(values.data(), what);  // throws, naming the rule and its value
  throw std::logic_error(what + ": try_int and as_int disagree");
}

// One launch over rows [row0, row0 + n_rows) of the pass (output rows when `output`),
// positions pos0.., the longest sequence `ctx`, block table slot `seq_slot` (sequence
// scope; -1 in batch scope), into `cur`. No allocation once `cur` has grown.
bool GraphExecutor::Impl::prepare(const Launch& l, int row0, int n_rows, int pos0, int ctx, int seq_slot, bool output) {
  const package::Launch& r = *l.rec;
  values.assign(package::kSymLet0 + r.let.size(), 0.0);
  values[package::kSymT] = n_rows;
  values[package::kSymPos0] = pos0;
  values[package::kSymCtx] = ctx;
  values[package::kSymKvPages] = opts.n_pages;
  if (seq_slot >= 0) {
    values[package::kSymNSeq] = 1, values[package::kSymSeqT] = n_rows;
  } else {
    const int range = r.phase == Phase::Decode ? 1 : r.phase == Phase::Prefill ? 2 : 0;
    values[package::kSymNSeq] = range_seqs[range], values[package::kSymSeqT] = range_seq_T[range];
  }
  values[package::kSymTableStride] = table_stride;
  values[package::kSymMaxCtx] = opts.n_ctx;
  for (size_t s = 0; s < r.let.size(); ++s) values[package::kSymLet0 + s] = r.let[s].evaluate(values.data());
  for (int d = 0; d < 3; ++d) {
    const int64_t g = eval(l, r.grid[d], "grid", size_t(-1));
    if (g > 0xFFFFFFFFll) throw std::runtime_error(l.where + ": grid " + std::to_string(g) + " does not fit 32 bits");
    cur.grid[d] = static_cast<uint32_t>(g);
  }
  if (cur.grid[0] == 0 || cur.grid[1] == 0 || cur.grid[2] == 0) return false;  // e.g. no split-K reduction with one split
  cur.kernel = l.kernel;
  cur.dynamic_smem = static_cast<uint32_t>(eval(l, r.dynamic_smem, "dynamic_smem", size_t(-1)));
  cur.args.resize(r.args.size());
  for (size_t a = 0; a < r.args.size(); ++a) {
    const package::Binding& b = r.args[a];
    const package::ArgType& type = r.arg_types[a];
    backend::Arg& arg = cur.args[a];
    arg = backend::Arg{};
    if (b.kind == package::Binding::I32) {
      arg.kind = backend::Arg::I32;
      const int64_t v = eval(l, b.value, "value", a);
      if (v > 0x7FFFFFFFll) throw std::runtime_error(l.where + " argument " + std::to_string(a) + ": " + std::to_string(v) + " does not fit an i32");
      arg.i32 = static_cast<int32_t>(v);
      continue;
    }
    if (b.kind == package::Binding::F32) {
      arg.kind = backend::Arg::F32;
      arg.f32 = b.f32;
      continue;
    }
    arg.kind = backend::Arg::Memref;
    arg.rank = type.rank;
    const int index = l.index[a];
    switch (b.kind) {
      case package::Binding::Buffer: {
        const GraphBuffer& gb = bufs[index];
        arg.buffer = output && compact[index] == 2 ? gb.gathered : gb.main;
        arg.offset = static_cast<size_t>(row0) * gb.width * 4;
        break;
      }
      case package::Binding::Weight: arg.buffer = weights[index].buf; break;
      case package::Binding::Tokens: arg.buffer = tokens, arg.offset = static_cast<size_t>(row0) * 4; break;
      case package::Binding::Positions:
        if (seq_slot < 0) {
          arg.buffer = positions, arg.offset = static_cast<size_t>(row0) * 4;
        } else {  // the sequence's own slot (aligned), from its first position this pass
          arg.buffer = seq_positions;
          arg.offset = (static_cast<size_t>(seq_slot) * pos_stride + (pos0 - seq_pos0[seq_slot])) * 4;
        }
        break;
      case package::Binding::Scratch:
        arg.buffer = scratch[index].buf;
        if (seq_slot >= 0 && scratch[index].row_bytes) arg.offset = static_cast<size_t>(row0) * scratch[index].row_bytes;
        break;
      case package::Binding::Kv: arg.buffer = (b.name == "v" ? kv_v : kv_k)[b.layer]; break;
      case package::Binding::BlockTable:  // batch scope: every sequence's, k's at k * table_stride
        arg.buffer = block_tables;
        if (seq_slot >= 0) arg.offset = static_cast<size_t>(seq_slot) * table_stride * 4;
        break;
      case package::Binding::Sequences: arg.buffer = seq_info; break;  // decode phase: from sequence 0
      case package::Binding::RowTables: arg.buffer = row_tables, arg.offset = static_cast<size_t>(row0) * 4; break;
      case package::Binding::KvMoves: arg.buffer = kv_moves, arg.offset = static_cast<size_t>(row0) * 12; break;
      default: arg.buffer = dummy; break;  // Absent
    }
    int64_t elems = 1;
    for (int d = 0; d < arg.rank; ++d) {
      arg.sizes[d] = eval(l, b.shape[d], "shape", a);
      elems *= arg.sizes[d];
    }
    arg.bytes = static_cast<size_t>(elems) * type.elem_bytes;
    // A graph buffer binding covers this launch's rows only (T rows from row0); anything
    // else its whole allocation.
    const size_t limit = b.kind == package::Binding::Buffer ? static_cast<size_t>(n_rows) * bufs[index].width * 4
                                                            : arg.buffer.bytes - arg.offset;
    if (b.kind == package::Binding::Absent) {
      arg.bytes = std::min(arg.bytes, limit);  // never read
    } else if (arg.bytes > limit) {
      throw std::runtime_error(l.where + " argument " + std::to_string(a) + ": " + std::to_string(arg.bytes) +
                               " bytes bound, " + std::to_string(limit) + " available");
    }
  }
  return true;
}

void GraphExecutor::Impl::emit(const Launch& l, int row0, int n_rows, int pos0, int ctx, int seq_slot, bool output,
                               int branch) {
  const bool active = prepare(l, row0, n_rows, pos0, ctx, seq_slot, output);
  cur.branch = branch;
  if (!recording) {
    if (active) be->launch(cur.kernel, cur.grid, cur.dynamic_smem, cur.args);
    return;
  }
  if (active) recorded.push_back(cur);
  if (!l.dynamic) return;
  recording->dynamic.push_back(StepItem{&l, row0, n_rows, seq_slot, output, branch, active ? int(recorded.size()) - 1 : -1});
  if (active) recording->descs.push_back(cur);
}

// The dynamic launches of `p` evaluated for a pass whose arranged sequences start at
// pos0[k] with n_tokens[k] tokens each; those that changed are updated in the graph.
// False when a dynamic launch appears or vanishes (a 0 in its grid changed): the program
// must be recorded again (launches updated before that stay consistent with p.descs).
bool GraphExecutor::Impl::set_dynamic(StepProgram& p, std::span<const int> pos0, std::span<const int> n_tokens) {
  int max_ctx = 0;
  for (size_t k = 0; k < pos0.size(); ++k) max_ctx = std::max(max_ctx, pos0[k] + n_tokens[k]);
  seq_pos0.assign(pos0.begin(), pos0.end());  // prepare() places sequence positions by it
  size_t d = 0;
  for (StepItem& it : p.dynamic) {
    int first = 0, ctx = max_ctx;
    if (it.seq_slot >= 0) {
      ctx = pos0[it.seq_slot] + n_tokens[it.seq_slot];
      first = ctx - it.n_rows;
    }
    const bool active = prepare(*it.launch, it.row0, it.n_rows, first, ctx, it.seq_slot, it.output);
    cur.branch = it.branch;
    if (active != (it.node >= 0)) return false;
    if (!active) continue;
    backend::LaunchDesc& last = p.descs[d++];
    if (!(cur == last)) {
      be->update_graph(p.graph, static_cast<size_t>(it.node), cur);
      last = cur;
    }
  }
  return true;
}

// A pass of a recorded shape: unless the graph's dynamic launches are already set for
// this pass's positions (p.set_for), they are evaluated and those that changed updated;
// then the graph is launched. False (nothing launched) as set_dynamic. While the device
// runs it, the dynamic launches are set for the next pass of the shape, each sequence
// `n_tokens` on (the next decode step): a pass that comes at those positions then costs
// the host only its uploads and the launch.
bool GraphExecutor::Impl::replay(StepProgram& p, std::span<const SequenceStep> seqs) {
  const size_t n = seqs.size();
  slot_pos0.resize(n), slot_tokens.resize(n);
  for (size_t k = 0; k < n; ++k) {
    slot_pos0[k] = seqs[order[k]].pos0;
    slot_tokens[k] = seqs[order[k]].n_tokens;
  }
  if (p.set_for != slot_pos0) {
    p.set_for.clear();
    if (!set_dynamic(p, slot_pos0, slot_tokens)) return false;
  }
  be->launch_graph(p.graph);
  compact = p.compact;
  p.set_for.clear();
  if (ahead) {
    for (size_t k = 0; k < n; ++k) slot_pos0[k] += slot_tokens[k];
    bool fits = true;
    for (size_t k = 0; k < n; ++k) fits &= slot_pos0[k] + slot_tokens[k] <= opts.n_ctx;
    try {
      if (fits && set_dynamic(p, slot_pos0, slot_tokens)) p.set_for = slot_pos0;
    } catch (const std::exception&) {
      // Not this pass's business: p.descs still says what the graph holds, and the next
      // pass evaluates its launches itself (and reports what is wrong, if it is).
    }
  }
  return true;
}

void GraphExecutor::forward(std::span<const SequenceStep> seqs, std::vector<float>& logits) { forward(seqs, &logits, nullptr); }

bool GraphExecutor::has_device_argmax() const { return !impl_->argmax.launches.empty(); }

void GraphExecutor::forward(std::span<const SequenceStep> seqs, std::vector<float>* logits, std::vector<int32_t>* token_ids) {
  if (token_ids && !has_device_argmax()) throw std::invalid_argument("forward: this package has no device argmax (graph.sampling)");
  pass(seqs, logits, token_ids, impl_->n_layer);
}

void GraphExecutor::forward_layers(std::span<const SequenceStep> seqs, int n_layers) {
  if (n_layers < 1 || n_layers > impl_->n_layer)
    throw std::invalid_argument("forward_layers: " + std::to_string(n_layers) + " layers of " + std::to_string(impl_->n_layer));
  if (impl_->layer_end[static_cast<size_t>(n_layers - 1)] == 0)
    throw std::invalid_argument("forward_layers: no op of the graph binds layer " + std::to_string(n_layers - 1) + "'s K/V");
  pass(seqs, nullptr, nullptr, n_layers);
}

void GraphExecutor::pass(std::span<const SequenceStep> seqs, std::vector<float>* logits, std::vector<int32_t>* token_ids,
                         int n_layers) {
  std::lock_guard<std::mutex> lock(mu_);
  // A partial pass (forward_layers) stops after the last op of layer n_layers - 1.
  const bool partial = n_layers < impl_->n_layer;
  const size_t ops_end = partial ? impl_->layer_end[static_cast<size_t>(n_layers - 1)] : impl_->ops.size();
  const auto t_entry = std::chrono::steady_clock::now();
  Impl& m = *impl_;
  if (seqs.empty()) throw std::invalid_argument("forward: no sequences");
  if (static_cast<int>(seqs.size()) > opts_.max_seqs)
    throw std::invalid_argument("forward: " + std::to_string(seqs.size()) + " sequences, at most " + std::to_string(opts_.max_seqs));
  // Generated-row sequences first, then prompt rows (decode / prefill phase ranges).
  std::vector<int>& order = m.order;
  order.resize(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(), [&](int i) { return seqs[i].rows == Rows::Generated; });
  const int n = static_cast<int>(seqs.size());
  std::vector<int>& row0 = m.row0;
  std::vector<int>& out0 = m.out0;
  row0.resize(n), out0.resize(n);
  int rows = 0, out_rows = 0, gen_rows = 0, gen_out = 0, max_ctx = 0;
  bool identity = true;
  m.h_tokens.clear();
  m.h_positions.clear();
  m.h_tables.assign(static_cast<size_t>(n) * m.table_stride, 0);
  m.h_seq_positions.assign(static_cast<size_t>(n) * m.pos_stride, 0);
  m.h_seq_info.assign(static_cast<size_t>(n) * 4, 0);
  m.h_row_tables.clear();
  for (int r = 0; r < 3; ++r) m.range_seqs[r] = m.range_seq_T[r] = 0;
  m.seq_pos0.assign(n, 0);
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
    max_ctx = std::max(max_ctx, s.pos0 + s.n_tokens);
    rows += s.n_tokens;
    // Before the rows are written: the per-sequence position slots hold max_rows each.
    if (rows > opts_.max_rows)
      throw std::invalid_argument("forward: " + std::to_string(rows) + " rows, at most " + std::to_string(opts_.max_rows));
    out_rows += s.n_out;
    identity &= s.n_out == s.n_tokens;
    if (s.rows == Rows::Generated) gen_rows += s.n_tokens, gen_out += s.n_out;
    for (int i = 0; i < s.n_tokens; ++i) {
      m.h_tokens.push_back(s.tokens[i]);
      m.h_positions.push_back(s.pos0 + i);
      m.h_seq_positions[static_cast<size_t>(k) * m.pos_stride + i] = s.pos0 + i;
      m.h_row_tables.push_back(k * m.table_stride);
    }
    const int32_t info[4] = {row0[k], s.n_tokens, s.pos0, k * m.table_stride};
    std::copy(info, info + 4, m.h_seq_info.begin() + static_cast<ptrdiff_t>(k) * 4);
    for (int range : {0, s.rows == Rows::Generated ? 1 : 2}) {
      ++m.range_seqs[range];
      m.range_seq_T[range] = std::max(m.range_seq_T[range], s.n_tokens);
    }
    m.seq_pos0[k] = s.pos0;
    for (int b = 0; b < s.n_blocks; ++b)
      if (s.block_table[b] < 0 || s.block_table[b] >= opts_.n_pages)
        throw std::invalid_argument("forward: sequence " + std::to_string(order[k]) + " names KV page " +
                                    std::to_string(s.block_table[b]) + " of a pool of " + std::to_string(opts_.n_pages));
    std::copy(s.block_table, s.block_table + s.n_blocks, m.h_tables.begin() + static_cast<ptrdiff_t>(k) * m.table_stride);
  }
  for (int32_t t : m.h_tokens)
    if (t < 0 || t >= n_vocab_) throw std::out_of_range("token id " + std::to_string(t) + " outside the vocabulary");
  m.be->upload(m.tokens, 0, m.h_tokens.data(), m.h_tokens.size() * 4);
  m.be->upload(m.positions, 0, m.h_positions.data(), m.h_positions.size() * 4);
  m.be->upload(m.seq_positions, 0, m.h_seq_positions.data(), m.h_seq_positions.size() * 4);
  m.be->upload(m.block_tables, 0, m.h_tables.data(), m.h_tables.size() * 4);
  m.be->upload(m.seq_info, 0, m.h_seq_info.data(), m.h_seq_info.size() * 4);
  m.be->upload(m.row_tables, 0, m.h_row_tables.data(), m.h_row_tables.size() * 4);
  // compact[b]: 0 = full rows, 1 = output rows in `main` (written by an output op),
  // 2 = output rows gathered into `gathered`.
  m.compact.assign(m.bufs.size(), 0);
  // One op (its launches over the rows of their phase and scope), output ops on the
  // gathered output rows.
  auto run_op = [&](const OpPlan& op) {
    const bool output = op.output_rows;
    if (output) {
      for (int b : op.gather) {
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
    const int total = output ? out_rows : rows, gen = output ? gen_out : gen_rows;
    auto range = [&](const Launch& l) {
      return std::pair<int, int>(l.rec->phase == Phase::Prefill ? gen : 0, l.rec->phase == Phase::Decode ? gen : total);
    };
    const std::vector<Launch>& ls = op.launches;
    for (size_t i = 0; i < ls.size();) {
      if (ls[i].rec->scope == package::Scope::Batch) {
        const auto [lo, hi] = range(ls[i]);
        if (hi > lo) m.emit(ls[i], lo, hi - lo, 0, max_ctx, -1, output);
        ++i;
        continue;
      }
      // A run of sequence-scope launches goes sequence by sequence, each sequence's
      // launches in order (attention and its split reduction, which pass data
      // through the sequence's own slice of scratch: Scratch::row_bytes). In a launch
      // graph each sequence is a branch, so the sequences' launches may run concurrently.
      size_t j = i;
      while (j < ls.size() && ls[j].rec->scope != package::Scope::Batch) ++j;
      for (int k = 0; k < n; ++k) {
        const SequenceStep& s = seqs[order[k]];
        const int r = output ? out0[k] : row0[k], cnt = output ? s.n_out : s.n_tokens;
        for (size_t t = i; t < j; ++t) {
          const auto [lo, hi] = range(ls[t]);
          if (r < lo || r >= hi) continue;
          m.emit(ls[t], r, cnt, s.pos0 + s.n_tokens - cnt, s.pos0 + s.n_tokens, k, output, n > 1 ? k + 1 : 0);
        }
      }
      i = j;
    }
    // An output op's result is in output rows: in `main`, or in `gathered` when it wrote
    // into a buffer it gathered (in place).
    if (output && op.out_buffer >= 0 && m.compact[op.out_buffer] != 2) m.compact[op.out_buffer] = 1;
    if (m.dump_dir && n == 1 && !op.dumps.empty()) m.dump(op, output ? out_rows : rows, output);
  };
  // A pass whose rows are all output rows gathers nothing (no copies between launches):
  // it can run as a launch graph (Impl::programs).
  bool launched = false;           // the pass ran as a recorded launch graph
  StepProgram* record = nullptr;  // the pass is recorded into this program
  if (identity && m.use_graphs && !m.dump_dir && !partial) {
    m.key.assign(token_ids ? "a" : "l");
    for (int k = 0; k < n; ++k) {
      const SequenceStep& s = seqs[order[k]];
      m.key += s.rows == Rows::Generated ? 'g' : 'p';
      m.key += std::to_string(s.n_tokens);
    }
    if (m.programs.size() >= Impl::kMaxPrograms && !m.programs.count(m.key)) {  // drop the least recently used shape
      auto lru = m.programs.begin();
      for (auto it = m.programs.begin(); it != m.programs.end(); ++it)
        if (it->second.last_used < lru->second.last_used) lru = it;
      m.drop(lru->second);
      m.programs.erase(lru);
    }
    StepProgram& p = m.programs[m.key];
    p.last_used = ++m.pass_counter;
    ++p.passes;
    if (p.graph >= 0) {
      launched = m.replay(p, seqs);
      if (!launched) m.drop(p);  // a launch appeared or vanished: record it again
    }
    if (!launched && p.passes >= 2) record = &p;  // a shape seen once runs launch by launch
  }
  if (!launched) {
    m.recording = record;
    m.recorded.clear();
    try {
      for (size_t i = 0; i < ops_end; ++i) run_op(m.ops[i]);
      if (token_ids) run_op(m.argmax);
      m.recording = nullptr;
      if (record) {
        record->compact = m.compact;
        record->graph = m.be->create_graph(m.recorded);
        m.be->launch_graph(record->graph);
      }
    } catch (...) {
      // Nothing half-recorded stays: the shape records again from scratch next time.
      m.recording = nullptr;
      if (record) m.drop(*record);
      throw;
    }
  }
  const auto t_launched = std::chrono::steady_clock::now();
  // Counted once the results are back (every return below).
  struct CountPass {
    PassTimes& t;
    std::chrono::steady_clock::time_point entry, launched;
    ~CountPass() {
      t.host += std::chrono::duration<double>(launched - entry).count();
      t.wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
      ++t.passes;
    }
  } count_pass{times_, t_entry, t_launched};
  // For each sequence in the caller's order: its arranged index.
  std::vector<int>& arranged = m.arranged;
  arranged.resize(n);
  for (int k = 0; k < n; ++k) arranged[order[k]] = k;
  if (token_ids) {
    // Greedy sampling on the device (run above): only the output rows' token ids come back.
    m.ids_rows.resize(static_cast<size_t>(out_rows));
    m.be->download(m.ids_rows.data(), m.scratch[m.argmax_ids].buf, 0, m.ids_rows.size() * 4);
    token_ids->clear();
    for (int i = 0; i < n; ++i)
      token_ids->insert(token_ids->end(), m.ids_rows.begin() + out0[arranged[i]], m.ids_rows.begin() + out0[arranged[i]] + seqs[i].n_out);
  }
  if (!logits) return;
  // Logits: the output buffer's output rows, back in the caller's sequence order.
  const GraphBuffer& ob = m.bufs[m.out_buf];
  const size_t row_bytes = static_cast<size_t>(ob.width) * 4;
  logits->resize(static_cast<size_t>(out_rows) * n_vocab_);
  if (m.compact[m.out_buf]) {
    m.out_rows.resize(static_cast<size_t>(out_rows) * ob.width);
    m.be->download(m.out_rows.data(), m.compact[m.out_buf] == 2 ? ob.gathered : ob.main, 0, out_rows * row_bytes);
  }
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const int k = arranged[i];
    const SequenceStep& s = seqs[i];
    float* dst = logits->data() + at * n_vocab_;
    if (m.compact[m.out_buf]) {
      std::copy_n(m.out_rows.data() + static_cast<size_t>(out0[k]) * ob.width, static_cast<size_t>(s.n_out) * ob.width, dst);
    } else {
      m.be->download(dst, ob.main, (row0[k] + s.n_tokens - s.n_out) * row_bytes, s.n_out * row_bytes);
    }
    at += s.n_out;
  }
}

GraphModel::GraphModel(GraphExecutor& ex, kvcache::PageAllocator& kv)
    : PagedSequenceModel(kv, ex.options().n_ctx), ex_(ex) {}

GraphModel::~GraphModel() { release(); }

void GraphModel::forward(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>& logits) {
  run(tokens, n_tokens, n_out, rows, &logits, nullptr);
}

bool GraphModel::forward_argmax(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<int32_t>& ids) {
  if (!ex_.has_device_argmax()) return false;
  run(tokens, n_tokens, n_out, rows, nullptr, &ids);
  return true;
}

void GraphModel::run(const int32_t* tokens, int n_tokens, int n_out, Rows rows, std::vector<float>* logits,
                     std::vector<int32_t>* ids) {
  if (n_tokens <= 0) throw std::invalid_argument("forward: no tokens");
  check_room(n_tokens);
  n_out = std::clamp(n_out, 1, n_tokens);
  // Page allocation and copy-on-write happen here, never inside the executor (which
  // holds its lock while it runs).
  prepare_pages(n_tokens);
  // Prompt rows go through the executor in chunks of its row budget.
  const int max_rows = ex_.options().max_rows;
  std::vector<float> part;
  std::vector<int32_t> part_ids;
  if (logits) logits->clear();
  if (ids) ids->clear();
  for (int i = 0; i < n_tokens; i += max_rows) {
    const int cnt = std::min(max_rows, n_tokens - i);
    SequenceStep s;
    s.tokens = tokens + i;
    s.n_tokens = cnt;
    s.pos0 = n_past_ + i;
    s.block_table = block_table_.data();
    const int want_from = n_tokens - n_out;  // first row whose logits are wanted
    const int out_here = std::max(0, i + cnt - std::max(want_from, i));
    s.n_out = std::max(1, out_here);
    s.rows = rows;
    s.n_blocks = (s.pos0 + cnt + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
    ex_.forward(std::span<const SequenceStep>(&s, 1), logits ? &part : nullptr, ids ? &part_ids : nullptr);
    if (out_here > 0 && logits) logits->insert(logits->end(), part.begin(), part.end());
    if (out_here > 0 && ids) ids->insert(ids->end(), part_ids.begin(), part_ids.end());
  }
  n_past_ += n_tokens;
}

}  // namespace swz::exec
