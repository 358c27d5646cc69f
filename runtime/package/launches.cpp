// The launch contract's reader and validator (docs/package-format.md, "The launch
// contract"): each GPU-target graph op's `launches`, parsed into package::Launch with
// every rule compiled to a package::Expr. from_json() runs it on every manifest it reads;
// the graph executor calls parse_launches() for the parsed records.
#include <algorithm>
#include <map>
#include <set>

#include "package/checker.h"
#include "package/package.h"

namespace swz::package {
namespace {

using detail::Checker;
using nlohmann::json;

/// The fixed symbols of a record's expressions, in slot order (kSymT ...).
const std::vector<std::string>& base_symbols() {
  static const std::vector<std::string> s{"T", "pos0", "ctx", "kv_pages", "n_seq", "seq_T", "table_stride", "max_ctx"};
  return s;
}
const std::vector<std::string>& scratch_symbols() {
  static const std::vector<std::string> s{"max_T", "max_ctx"};
  return s;
}

bool identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
}

/// Symbols an expression names (identifiers not followed by '('): for ordering `let`.
std::set<std::string> names_in(const std::string& text) {
  std::set<std::string> out;
  for (size_t i = 0; i < text.size();) {
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      size_t b = i;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      size_t k = i;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
      if (k >= text.size() || text[k] != '(') out.insert(text.substr(b, i - b));
    } else if (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.') {
      // a number, possibly with an exponent: skip it whole so "1e5" is not read as symbol "e5"
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    } else {
      ++i;
    }
  }
  return out;
}

/// Parses one launch record. `op` is the graph op it belongs to.
class RecordParser {
 public:
  RecordParser(const Checker& c, const Manifest& m, const json& op, std::string path)
      : c_(c), m_(m), op_(op), p_(std::move(path)) {}

  Launch parse(const json& r) {
    Launch l;
    if (!r.is_object()) c_.fail(p_, std::string("expected an object, got ") + r.type_name());
    l.kernel = c_.string(r, p_, "kernel");
    const Kernel* k = m_.find_kernel(l.kernel);
    if (!k) c_.fail(p_ + ".kernel", "'" + l.kernel + "' is not a kernels[] entry");
    l.kernel_index = static_cast<size_t>(k - m_.kernels.data());
    const std::string phase = c_.string(r, p_, "phase");
    if (phase == "all") l.phase = Phase::All;
    else if (phase == "decode") l.phase = Phase::Decode;
    else if (phase == "prefill") l.phase = Phase::Prefill;
    else c_.fail(p_ + ".phase", "unknown phase \"" + phase + "\" (expected all, decode or prefill)");
    const std::string scope = c_.string(r, p_, "scope");
    if (scope == "batch") l.scope = Scope::Batch;
    else if (scope == "sequence") l.scope = Scope::Sequence;
    else c_.fail(p_ + ".scope", "unknown scope \"" + scope + "\" (expected batch or sequence)");
    if (r.contains("rows")) {
      if (r["rows"] != "output") c_.fail(p_ + ".rows", "expected \"output\", got " + r["rows"].dump());
      l.output_rows = true;
    }
    const bool op_output = op_.contains("rows") && op_["rows"] == "output";
    if (l.output_rows != op_output)
      c_.fail(p_ + ".rows", op_output ? "the graph op runs on output rows only: the record needs \"rows\": \"output\""
                                      : "\"rows\": \"output\" on a graph op that runs on every row");
    parse_let(r, l);
    symbols_ = base_symbols();
    symbols_.insert(symbols_.end(), l.let_names.begin(), l.let_names.end());
    for (size_t i = 0; i < l.let_names.size(); ++i)
      l.let.push_back(expr(r["let"][l.let_names[i]], p_ + ".let." + l.let_names[i], symbols_));
    const json& grid = c_.array(r, p_, "grid");
    if (grid.size() != 3) c_.fail(p_ + ".grid", "expected 3 expressions (x, y, z), got " + std::to_string(grid.size()));
    for (size_t i = 0; i < 3; ++i) l.grid[i] = expr(grid[i], Checker::idx(p_ + ".grid", i), symbols_);
    l.dynamic_smem = expr(c_.field(r, p_, "dynamic_smem"), p_ + ".dynamic_smem", symbols_);

    const json& sig = k->signature;
    for (size_t a = 0; a < sig.size(); ++a) {
      const std::string dtype = sig[a].value("dtype", "");
      std::optional<ArgType> t = parse_arg_type(dtype);
      if (!t)
        c_.fail(p_ + ".kernel", "kernel " + l.kernel + " argument " + std::to_string(a) + " has type \"" + dtype +
                                    "\", which the launch contract cannot bind");
      l.arg_types.push_back(*t);
    }
    const json& args = c_.array(r, p_, "args");
    if (args.size() != sig.size())
      c_.fail(p_ + ".args", std::to_string(args.size()) + " bindings, kernel " + l.kernel + " has " +
                                std::to_string(sig.size()) + " arguments");
    for (size_t a = 0; a < args.size(); ++a) l.args.push_back(binding(args[a], a, l));
    return l;
  }

 private:
  /// `let` in dependency order: a symbol may use the fixed ones and other let symbols
  /// (JSON objects are unordered, so the order is derived, not read).
  void parse_let(const json& r, Launch& l) {
    if (!r.contains("let")) return;
    const json& let = c_.object(r, p_, "let");
    std::map<std::string, std::set<std::string>> deps;
    for (const auto& [name, e] : let.items()) {
      const std::string lp = p_ + ".let." + name;
      if (!identifier(name) || name == "ceil" || name == "floor" || name == "min" || name == "max")
        c_.fail(lp, "'" + name + "' is not a symbol name");
      const auto& fixed = base_symbols();
      if (std::find(fixed.begin(), fixed.end(), name) != fixed.end() || name == "max_T")
        c_.fail(lp, "'" + name + "' is a predefined symbol");
      if (!e.is_string() && !e.is_number()) c_.fail(lp, "expected an expression (string) or a number");
      deps[name] = e.is_string() ? names_in(e.get<std::string>()) : std::set<std::string>{};
    }
    std::set<std::string> done;
    while (done.size() < deps.size()) {
      bool progress = false;
      for (const auto& [name, uses] : deps) {
        if (done.count(name)) continue;
        if (std::all_of(uses.begin(), uses.end(), [&](const std::string& u) { return !deps.count(u) || done.count(u); })) {
          l.let_names.push_back(name);
          done.insert(name);
          progress = true;
        }
      }
      if (!progress) c_.fail(p_ + ".let", "its symbols depend on each other in a cycle");
    }
  }

  Expr expr(const json& e, const std::string& path, const std::vector<std::string>& symbols) const {
    std::string text;
    if (e.is_string()) text = e.get<std::string>();
    else if (e.is_number()) text = e.dump();
    else c_.fail(path, std::string("expected an expression (string), got ") + e.type_name());
    Expr x;
    try {
      x = Expr::parse(text, symbols);
    } catch (const ExprError& err) {
      c_.fail(path, err.what());
    }
    if (x.constant()) {  // a constant must already be a whole, non-negative number
      try {
        x.as_int(nullptr, "value");
      } catch (const ExprError& err) {
        c_.fail(path, err.what());
      }
    }
    return x;
  }

  Binding binding(const json& b, size_t a, const Launch& l) const {
    const std::string bp = Checker::idx(p_ + ".args", a);
    if (!b.is_object()) c_.fail(bp, std::string("expected a binding object, got ") + b.type_name());
    static const char* kinds[] = {"buffer",     "weight",  "tokens", "positions", "kv",  "block_table", "sequences",
                                  "row_tables", "kv_moves", "scratch", "absent",   "i32", "f32"};
    const char* kind = nullptr;
    for (const char* k : kinds)
      if (b.contains(k)) {
        if (kind) c_.fail(bp, std::string("both \"") + kind + "\" and \"" + k + "\": a binding is one of them");
        kind = k;
      }
    if (!kind)
      c_.fail(bp, "no binding (buffer, weight, tokens, positions, kv, block_table, sequences, row_tables, kv_moves, "
                  "scratch, absent, i32 or f32)");
    const std::string ks = kind;
    Binding out;
    const ArgType& t = l.arg_types[a];
    const bool memref = ks != "i32" && ks != "f32";
    auto describe = [&]() {
      if (ks == "buffer" || ks == "weight" || ks == "scratch" || ks == "kv")
        return ks + " " + b[ks].dump();
      if (ks == "i32" || ks == "f32") return ks + " " + b[ks].dump();
      return ks;
    };
    const bool matches = memref ? t.kind == ArgType::Memref : (ks == "i32" ? t.kind == ArgType::I32 : t.kind == ArgType::F32);
    if (!matches)
      c_.fail(bp, "kernel " + l.kernel + " argument " + std::to_string(a) + " is " +
                      m_.kernels[l.kernel_index].signature[a].value("dtype", "") + ", the binding is " +
                      (memref ? "a memref" : "an " + ks) + " (" + describe() + ")");
    if (ks == "i32") {
      out.kind = Binding::I32;
      out.value = expr(b["i32"], bp + ".i32", symbols_);
      return out;
    }
    if (ks == "f32") {
      out.kind = Binding::F32;
      if (!b["f32"].is_number()) c_.fail(bp + ".f32", "expected a number, got " + b["f32"].dump());
      out.f32 = b["f32"].get<float>();
      return out;
    }
    auto need_elem = [&](const std::string& elem) {
      if (t.elem != elem)
        c_.fail(bp, "kernel " + l.kernel + " argument " + std::to_string(a) + " is " +
                        m_.kernels[l.kernel_index].signature[a].value("dtype", "") + "; " + ks +
                        " binds memref<?x" + elem + ">");
    };
    if (ks == "buffer") {
      out.kind = Binding::Buffer;
      out.name = c_.string(b, bp, "buffer");
      if (!m_.graph["buffers"].contains(out.name)) c_.fail(bp + ".buffer", "'" + out.name + "' is not a graph buffer");
    } else if (ks == "weight") {
      out.kind = Binding::Weight;
      out.name = c_.string(b, bp, "weight");
      if (!m_.find_weight(out.name)) c_.fail(bp + ".weight", "'" + out.name + "' is not a weight_plan tensor");
    } else if (ks == "kv_moves") {
      if (b[ks] != true) c_.fail(bp + "." + ks, "expected true");
      if (op_.value("op", "") != "kv_move")
        c_.fail(bp, "kv_moves binds move_kv's table of moves: only graph.kv_move's records bind it");
      out.kind = Binding::KvMoves;
      need_elem("i32");
    } else if (ks == "tokens" || ks == "positions" || ks == "block_table" || ks == "sequences" || ks == "row_tables" ||
               ks == "absent") {
      if (b[ks] != true) c_.fail(bp + "." + ks, "expected true");
      out.kind = ks == "tokens" ? Binding::Tokens : ks == "positions" ? Binding::Positions
               : ks == "block_table" ? Binding::BlockTable : ks == "sequences" ? Binding::Sequences
               : ks == "row_tables" ? Binding::RowTables : Binding::Absent;
      if (out.kind != Binding::Absent) need_elem("i32");
      // Batch scope: every sequence's block table (sequence k's at k * table_stride);
      // sequences / row_tables say where a sequence's or a row's starts.
      if ((out.kind == Binding::Sequences || out.kind == Binding::RowTables) && l.scope != Scope::Batch)
        c_.fail(bp, ks + " describes the sequences of a batch-scope launch: the record's scope must be \"batch\"");
      // (A batch-scope block table holds the first n_seq sequences' tables: those of the
      // decode rows, which come first, or of every row; not the prefill rows' alone.)
      if (out.kind == Binding::BlockTable && l.scope == Scope::Batch && l.phase == Phase::Prefill)
        c_.fail(bp, "a batch-scope block_table holds the tables from the pass's first sequence on: phase \"prefill\" "
                    "(whose sequences come after the decode ones) binds it in sequence scope");
      if (out.kind == Binding::Sequences && (l.phase != Phase::Decode || l.output_rows))
        c_.fail(bp, "sequences binds the decode sequences of a pass (they come first): the record's phase must be "
                    "\"decode\", on every row");
    } else if (ks == "kv") {
      out.kind = Binding::Kv;
      out.name = c_.string(b, bp, "kv");
      if (out.name != "k" && out.name != "v") c_.fail(bp + ".kv", "expected \"k\" or \"v\", got \"" + out.name + "\"");
      const uint64_t layer = c_.uint(b, bp, "layer");
      const uint64_t n_layer = m_.model.hparams.value("n_layer", uint64_t{0});
      if (layer >= n_layer)
        c_.fail(bp + ".layer", "layer " + std::to_string(layer) + " is not below n_layer " + std::to_string(n_layer));
      out.layer = static_cast<int>(layer);
      need_elem("f16");
    } else {  // scratch
      out.kind = Binding::Scratch;
      out.name = c_.string(b, bp, "scratch");
      out.value = expr(c_.field(b, bp, "bytes"), bp + ".bytes", scratch_symbols());
    }
    const json& shape = c_.array(b, bp, "shape");
    if (shape.size() != static_cast<size_t>(t.rank))
      c_.fail(bp + ".shape", std::to_string(shape.size()) + " sizes, kernel " + l.kernel + " argument " +
                                 std::to_string(a) + " (" + m_.kernels[l.kernel_index].signature[a].value("dtype", "") +
                                 ") has rank " + std::to_string(t.rank));
    for (size_t d = 0; d < shape.size(); ++d) out.shape.push_back(expr(shape[d], Checker::idx(bp + ".shape", d), symbols_));
    return out;
  }

  const Checker& c_;
  const Manifest& m_;
  const json& op_;
  std::string p_;
  std::vector<std::string> symbols_;
};

}  // namespace

std::optional<ArgType> parse_arg_type(const std::string& s) {
  ArgType t;
  if (s == "i32") return t;
  if (s == "f32") {
    t.kind = ArgType::F32;
    return t;
  }
  const std::string pre = "memref<";
  if (s.rfind(pre, 0) != 0 || s.back() != '>') return std::nullopt;
  std::string body = s.substr(pre.size(), s.size() - pre.size() - 1);
  t.kind = ArgType::Memref;
  while (body.rfind("?x", 0) == 0) {
    ++t.rank;
    body = body.substr(2);
  }
  if (t.rank < 1 || t.rank > 4) return std::nullopt;
  t.elem = body;
  if (body == "f32" || body == "i32") t.elem_bytes = 4;
  else if (body == "f16") t.elem_bytes = 2;
  else if (body == "i8") t.elem_bytes = 1;
  else if (body == "vector<4xf32>" || body == "vector<4xi32>") t.elem_bytes = 16;
  else if (body == "vector<4xf16>" || body == "vector<2xi32>") t.elem_bytes = 8;
  else return std::nullopt;
  return t;
}

std::vector<std::string> Launch::symbols() const {
  std::vector<std::string> s = base_symbols();
  s.insert(s.end(), let_names.begin(), let_names.end());
  return s;
}

namespace detail {

std::vector<OpLaunches> parse_launches(const Checker& c, const Manifest& m) {
  std::vector<OpLaunches> out;
  const json& ops = m.graph["ops"];
  for (size_t i = 0; i < ops.size(); ++i) {
    const json& op = ops[i];
    if (!op.contains("launches")) continue;
    const std::string p = Checker::idx("graph.ops", i);
    const json& records = c.array(op, p, "launches");
    if (records.empty()) c.fail(p + ".launches", "must not be empty");
    OpLaunches ol;
    ol.op = i;
    bool all = false, decode = false, prefill = false;
    for (size_t j = 0; j < records.size(); ++j) {
      Launch l = RecordParser(c, m, op, Checker::idx(p + ".launches", j)).parse(records[j]);
      all |= l.phase == Phase::All;
      decode |= l.phase == Phase::Decode;
      prefill |= l.phase == Phase::Prefill;
      ol.launches.push_back(std::move(l));
    }
    if (op.contains("decode_into")) {  // its decode launch is in an earlier op's (merged GEMV)
      const json& into = op["decode_into"];
      const int64_t at = into.is_number_integer() ? into.get<int64_t>() : -1;
      if (at < 0 || size_t(at) >= i || !ops[size_t(at)].contains("launches"))
        c.fail(p + ".decode_into", "must be the index of an earlier graph op with launches");
      if (decode || all)
        c.fail(p + ".decode_into", "an op whose decode runs in another op's launch has no decode launch");
      decode = true;
    }
    if (decode != prefill || (!all && !decode))
      c.fail(p + ".launches", "must cover every forward pass: phase \"all\", or both \"decode\" and \"prefill\"");
    out.push_back(std::move(ol));
  }
  parse_argmax_launches(c, m);
  parse_kv_move_launches(c, m);
  return out;
}

std::vector<Launch> parse_argmax_launches(const Checker& c, const Manifest& m) {
  std::vector<Launch> out;
  if (!m.graph.contains("sampling")) return out;
  const json& sampling = c.object(m.graph, "graph", "sampling");
  if (!sampling.contains("argmax")) return out;
  const std::string p = "graph.sampling.argmax";
  const json& op = c.object(sampling, "graph.sampling", "argmax");
  if (op.value("op", "") != "argmax" || op.value("rows", "") != "output" || !op.contains("in") ||
      !op["in"].is_array() || op["in"].size() != 1 || op["in"][0] != m.graph["output"])
    c.fail(p, "expected {\"op\": \"argmax\", \"in\": [the graph's output], \"out\": ..., \"rows\": \"output\", \"launches\": [...]}");
  const json& records = c.array(op, p, "launches");
  if (records.empty()) c.fail(p + ".launches", "must not be empty");
  for (size_t j = 0; j < records.size(); ++j) {
    Launch l = RecordParser(c, m, op, Checker::idx(p + ".launches", j)).parse(records[j]);
    if (l.phase != Phase::All || l.scope != Scope::Batch)
      c.fail(Checker::idx(p + ".launches", j), "greedy sampling runs on every pass, over the batch (phase all, scope batch)");
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<Launch> parse_kv_move_launches(const Checker& c, const Manifest& m) {
  std::vector<Launch> out;
  if (!m.graph.contains("kv_move")) return out;
  const std::string p = "graph.kv_move";
  const json& op = c.object(m.graph, "graph", "kv_move");
  if (op.value("op", "") != "kv_move")
    c.fail(p, "expected {\"op\": \"kv_move\", \"launches\": [...]}");
  const json& records = c.array(op, p, "launches");
  if (records.empty()) c.fail(p + ".launches", "must not be empty");
  const uint64_t n_layer = m.model.hparams.value("n_layer", uint64_t{0});
  std::vector<int> bound(static_cast<size_t>(2 * n_layer), 0);  // per layer: K, V bound by some record
  for (size_t j = 0; j < records.size(); ++j) {
    const std::string rp = Checker::idx(p + ".launches", j);
    Launch l = RecordParser(c, m, op, rp).parse(records[j]);
    if (l.phase != Phase::All || l.scope != Scope::Batch)
      c.fail(rp, "moving K/V is no forward pass: phase all, scope batch");
    for (const Binding& b : l.args)
      if (b.kind == Binding::Kv) bound[static_cast<size_t>(2 * b.layer + (b.name == "v"))] = 1;
    out.push_back(std::move(l));
  }
  for (size_t i = 0; i < bound.size(); ++i)
    if (!bound[i])
      c.fail(p + ".launches", std::string("no record binds layer ") + std::to_string(i / 2) + "'s " + (i % 2 ? "V" : "K") +
                                  ": every layer's K and V move");
  return out;
}

}  // namespace detail

std::vector<OpLaunches> parse_launches(const Manifest& m) {
  return detail::parse_launches(Checker("manifest"), m);
}

int64_t prefill_split_len(const Manifest& m, int max_ctx) {
  for (const OpLaunches& op : parse_launches(m))
    for (const Launch& l : op.launches) {
      if (l.phase != Phase::Prefill) continue;
      const auto it = std::find(l.let_names.begin(), l.let_names.end(), "split_len");
      if (it == l.let_names.end()) continue;
      const package::Expr& e = l.let[static_cast<size_t>(it - l.let_names.begin())];
      std::vector<double> v(kSymLet0 + l.let.size(), 0.0);
      v[kSymMaxCtx] = max_ctx;
      for (int s = 0; s < static_cast<int>(v.size()); ++s)
        if (s != kSymMaxCtx && e.uses(s))
          throw std::runtime_error(l.kernel + " (prefill): split_len names " + l.symbols()[static_cast<size_t>(s)] +
                                   ", not max_ctx alone");
      return e.as_int(v.data(), l.kernel + " (prefill) split_len");
    }
  return 0;
}

std::vector<Launch> parse_argmax_launches(const Manifest& m) {
  return detail::parse_argmax_launches(Checker("manifest"), m);
}

std::vector<Launch> parse_kv_move_launches(const Manifest& m) {
  return detail::parse_kv_move_launches(Checker("manifest"), m);
}

}  // namespace swz::package
