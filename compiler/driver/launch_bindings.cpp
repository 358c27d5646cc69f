//===- launch_bindings.cpp - launch records of the launch contract --------===//
//
// One binder per kernel family (the table `binders()` at the end): given the graph op a
// kernel runs for, it says what binds to each of the kernel's arguments (its gpu.func
// signature in codegen/kernels/*.mlir, whose header comments and the numeric cases in
// test/gpu/cases_*.cpp are the reference), the values of the symbols of the
// kernel's `swz.grid` rule, and the record's derived (`let`) symbols. The grid is the
// kernel's own rule with those symbols substituted and constants folded, so it cannot
// drift from the kernel. Plain C++: no MLIR.
//
//===----------------------------------------------------------------------===//
#include "launch_bindings.h"

#include "compile.h"

#include <charconv>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

namespace swz::compiler {
namespace {

using nlohmann::json;
using package::ArgType;

//===----------------------------------------------------------------------===//
// Expressions: parse, substitute, fold, print
//===----------------------------------------------------------------------===//

struct Node {
  enum Kind { Num, Sym, Add, Sub, Mul, Div, Neg, Ceil, Floor, Min, Max } kind = Num;
  double value = 0;
  std::string name;
  std::vector<Node> kids;
};

Node num(double v) { return Node{Node::Num, v, "", {}}; }
Node binary(Node::Kind k, Node a, Node b) { return Node{k, 0, "", {std::move(a), std::move(b)}}; }

/// Recursive descent over the grammar of runtime/package/expr.h.
class Parser {
public:
  Parser(const std::string &s, const std::map<std::string, std::string> *values)
      : s_(s), values_(values) {}
  Node parse() {
    Node n = expr();
    skip();
    if (i_ != s_.size())
      fail("unexpected '" + std::string(1, s_[i_]) + "'");
    return n;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw CompileError("launch rule '" + s_ + "': " + what + " at " + std::to_string(i_));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Node expr() {
    Node n = term();
    for (;;) {
      if (eat('+'))
        n = binary(Node::Add, std::move(n), term());
      else if (eat('-'))
        n = binary(Node::Sub, std::move(n), term());
      else
        return n;
    }
  }
  Node term() {
    Node n = unary();
    for (;;) {
      if (eat('*'))
        n = binary(Node::Mul, std::move(n), unary());
      else if (eat('/'))
        n = binary(Node::Div, std::move(n), unary());
      else
        return n;
    }
  }
  Node unary() {
    if (eat('-'))
      return Node{Node::Neg, 0, "", {unary()}};
    return primary();
  }
  Node primary() {
    skip();
    if (i_ >= s_.size())
      fail("expression ends early");
    if (eat('(')) {
      Node n = expr();
      if (!eat(')'))
        fail("expected ')'");
      return n;
    }
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char *b = s_.c_str() + i_;
      char *e = nullptr;
      double v = std::strtod(b, &e);
      i_ += size_t(e - b);
      return num(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
        ++i_;
      std::string name = s_.substr(b, i_ - b);
      if (eat('(')) {
        Node::Kind k;
        if (name == "ceil")
          k = Node::Ceil;
        else if (name == "floor")
          k = Node::Floor;
        else if (name == "min")
          k = Node::Min;
        else if (name == "max")
          k = Node::Max;
        else
          fail("unknown function '" + name + "'");
        Node n{k, 0, "", {expr()}};
        if (k == Node::Min || k == Node::Max) {
          if (!eat(','))
            fail("expected ','");
          n.kids.push_back(expr());
        }
        if (!eat(')'))
          fail("expected ')'");
        return n;
      }
      if (values_) {
        auto it = values_->find(name);
        if (it != values_->end())
          return Parser(it->second, nullptr).parse();
      }
      return Node{Node::Sym, 0, name, {}};
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string &s_;
  const std::map<std::string, std::string> *values_;
  size_t i_ = 0;
};

bool whole(double v) { return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15; }

/// Flattens a product/quotient into factors (node, in the denominator?).
void factors(const Node &n, bool inverted, std::vector<std::pair<Node, bool>> &out) {
  if (n.kind == Node::Mul || n.kind == Node::Div) {
    factors(n.kids[0], inverted, out);
    factors(n.kids[1], n.kind == Node::Div ? !inverted : inverted, out);
    return;
  }
  out.emplace_back(n, inverted);
}

Node simplify(Node n) {
  for (Node &k : n.kids)
    k = simplify(std::move(k));
  if (n.kind == Node::Num || n.kind == Node::Sym)
    return n;
  if (n.kind == Node::Mul || n.kind == Node::Div) {
    std::vector<std::pair<Node, bool>> fs;
    factors(n, false, fs);
    int64_t p = 1, q = 1;
    std::vector<Node> top, bottom;
    for (auto &[f, inv] : fs) {
      if (f.kind == Node::Num && whole(f.value) && f.value != 0 && std::fabs(f.value) < 1e12) {
        int64_t v = int64_t(f.value);
        (inv ? q : p) *= v;
        int64_t g = std::gcd(p, q);
        p /= g, q /= g;
      } else if (f.kind == Node::Num && f.value == 0 && !inv) {
        return num(0);
      } else {
        (inv ? bottom : top).push_back(std::move(f));
      }
    }
    if (q < 0)
      p = -p, q = -q;
    std::optional<Node> out;
    for (Node &t : top)
      out = out ? binary(Node::Mul, std::move(*out), std::move(t)) : std::move(t);
    if (p != 1 || !out)
      out = out ? binary(Node::Mul, std::move(*out), num(double(p))) : num(double(p));
    for (Node &b : bottom)
      out = binary(Node::Div, std::move(*out), std::move(b));
    if (q != 1)
      out = binary(Node::Div, std::move(*out), num(double(q)));
    return std::move(*out);
  }
  bool constant = true;
  for (const Node &k : n.kids)
    constant &= k.kind == Node::Num;
  if (constant) {
    const double a = n.kids[0].value, b = n.kids.size() > 1 ? n.kids[1].value : 0;
    switch (n.kind) {
    case Node::Add: return num(a + b);
    case Node::Sub: return num(a - b);
    case Node::Neg: return num(-a);
    case Node::Ceil: return num(std::ceil(a));
    case Node::Floor: return num(std::floor(a));
    case Node::Min: return num(std::min(a, b));
    case Node::Max: return num(std::max(a, b));
    default: break;
    }
  }
  if ((n.kind == Node::Add || n.kind == Node::Sub) && n.kids[1].kind == Node::Num &&
      n.kids[1].value == 0)
    return std::move(n.kids[0]);
  if (n.kind == Node::Add && n.kids[0].kind == Node::Num && n.kids[0].value == 0)
    return std::move(n.kids[1]);
  return n;
}

int precedence(const Node &n) {
  switch (n.kind) {
  case Node::Add:
  case Node::Sub: return 1;
  case Node::Mul:
  case Node::Div: return 2;
  case Node::Neg: return 3;
  case Node::Num: return n.value < 0 ? 3 : 4;
  default: return 4;
  }
}

std::string print(const Node &n) {
  auto child = [&](const Node &k, bool right) {
    const int pk = precedence(k), pn = precedence(n);
    const bool paren = pk < pn || (right && pk == pn && (n.kind == Node::Sub || n.kind == Node::Div));
    if (!paren)
      return print(k);
    std::string s = "(";  // appended, not "(" + ...: GCC 12's -Wrestrict misfires on that when inlined
    return s.append(print(k)).append(")");
  };
  switch (n.kind) {
  case Node::Num: {
    if (whole(n.value))
      return std::to_string(int64_t(n.value));
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), n.value);
    return std::string(buf, r.ptr);
  }
  case Node::Sym: return n.name;
  case Node::Add: return child(n.kids[0], false) + "+" + child(n.kids[1], true);
  case Node::Sub: return child(n.kids[0], false) + "-" + child(n.kids[1], true);
  case Node::Mul: return child(n.kids[0], false) + "*" + child(n.kids[1], true);
  case Node::Div: return child(n.kids[0], false) + "/" + child(n.kids[1], true);
  case Node::Neg: return "-" + child(n.kids[0], true);
  case Node::Ceil: return "ceil(" + print(n.kids[0]) + ")";
  case Node::Floor: return "floor(" + print(n.kids[0]) + ")";
  case Node::Min: return "min(" + print(n.kids[0]) + ", " + print(n.kids[1]) + ")";
  case Node::Max: return "max(" + print(n.kids[0]) + ", " + print(n.kids[1]) + ")";
  }
  return "";
}

void symbolsOf(const Node &n, std::set<std::string> &out) {
  if (n.kind == Node::Sym)
    out.insert(n.name);
  for (const Node &k : n.kids)
    symbolsOf(k, out);
}

/// The three comma-separated rules of a `swz.grid` attribute ("ceil(N/4), ceil(T/8), 1").
std::vector<std::string> splitGrid(const std::string &grid) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char c : grid) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (c == ',' && depth == 0)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The graph facts a binder reads
//===----------------------------------------------------------------------===//

std::string str(int64_t v) { return std::to_string(v); }

/// A launch group: its anchor graph op and the ops fused into it.
struct Group {
  const package::Manifest &m;
  const codegen::LaunchGroup &g;
  const json &op;
  const json *residualAdd = nullptr;  ///< matmul groups: the fused `x = x + y`
  const json *ropeK = nullptr;        ///< attention groups: the fused rope on k
  const json *ropeQ = nullptr;        ///< attention groups: the fused rope on q
  const json *normQ = nullptr;        ///< attention groups: the fused head_norm on q
  const json *normK = nullptr;        ///< attention groups: the fused head_norm on k
  std::string where;                  ///< "graph op 12 (matmul)" for errors

  [[noreturn]] void fail(const std::string &what) const {
    throw CompileError("target " + m.target + ": " + where + ": " + what);
  }
  const json &attr(const std::string &name) const {
    if (!op.contains(name))
      fail("has no attribute '" + name + "'");
    return op.at(name);
  }
  std::string in(size_t i) const {
    const json &ins = op.at("in");
    if (i >= ins.size())
      fail("has no input " + std::to_string(i));
    return ins.at(i).get<std::string>();
  }
  std::string out() const { return op.at("out").get<std::string>(); }
  int64_t width(const std::string &buffer) const {
    const json &b = m.graph.at("buffers");
    if (!b.contains(buffer))
      fail("'" + buffer + "' is not a graph buffer");
    return b.at(buffer).get<int64_t>();
  }
  const package::WeightTensor &weight(const std::string &name) const {
    const package::WeightTensor *w = m.find_weight(name);
    if (!w)
      fail("'" + name + "' is not a weight_plan tensor");
    return *w;
  }
  /// The GGUF bytes of weight `name` (from its type and shape).
  int64_t weightBytes(const std::string &name) const {
    const package::WeightTensor &w = weight(name);
    int64_t rows = 1;
    for (size_t d = 1; d < w.ne.size(); ++d)
      rows *= w.ne[d];
    return int64_t(ggml::row_size(w.type, w.ne.at(0))) * rows;
  }
  int64_t hparam(const std::string &name) const {
    const json &hp = m.graph.at("hparams");
    if (!hp.contains(name))
      fail("the graph's hparams have no '" + name + "'");
    return hp.at(name).get<int64_t>();
  }
  int64_t headDim() const {
    return op.contains("head_dim") ? op.at("head_dim").get<int64_t>() : hparam("head_dim");
  }
};

/// A launch record under construction.
struct Record {
  json args = json::array();
  std::map<std::string, std::string> gridSymbols;  ///< swz.grid symbol -> expression
  std::vector<std::pair<std::string, std::string>> let;
  std::string scope = "batch";
  std::optional<std::array<std::string, 3>> grid;  ///< replaces the kernel's rule
};

/// Memref sizes, simplified.
json shape(std::initializer_list<std::string> dims) {
  json s = json::array();
  for (const std::string &d : dims)
    s.push_back(simplifyExpr(d));
  return s;
}

/// `count` elements of `countBytes` bytes as elements of the argument's element type.
std::string elems(const ArgType &t, const std::string &count, int countBytes) {
  return simplifyExpr("(" + count + ")*" + str(countBytes) + "/" + str(t.elem_bytes));
}

json buffer(const std::string &name, json shape) { return {{"buffer", name}, {"shape", std::move(shape)}}; }
/// An f32 activation buffer of `count` floats, bound as argument type `t` (rank 1).
json activation(const std::string &name, const ArgType &t, const std::string &count) {
  return buffer(name, json::array({elems(t, count, 4)}));
}
/// Weight `name` as a rank-1 argument of type `t`: its bytes in elements, rounded up
/// (the executor zero-pads each weight's device copy to a multiple of 16 bytes).
json weight(const Group &g, const std::string &name, const ArgType &t) {
  const int64_t bytes = g.weightBytes(name);
  return {{"weight", name}, {"shape", {str((bytes + t.elem_bytes - 1) / t.elem_bytes)}}};
}
json absent(const ArgType &t) {
  json s = json::array();
  for (int d = 0; d < t.rank; ++d)
    s.push_back("1");
  return {{"absent", true}, {"shape", s}};
}
json scratch(const std::string &name, const std::string &bytes, json shape) {
  return {{"scratch", name}, {"bytes", simplifyExpr(bytes)}, {"shape", std::move(shape)}};
}
json i32(const std::string &e) { return {{"i32", simplifyExpr(e)}}; }
json i32(int64_t v) { return {{"i32", str(v)}}; }
json f32(double v) { return {{"f32", v}}; }

using Types = std::vector<ArgType>;

//===----------------------------------------------------------------------===//
// Binders, one per kernel family (codegen/kernels/<source>.mlir)
//===----------------------------------------------------------------------===//

/// Matmul facts: x [T, K] Wᵀ -> [T, N], optional bias, optional fused residual.
struct Matmul {
  std::string x, w, bias, y, residual, result;  ///< residual/result empty without fusion
  int64_t K = 0, N = 0;
};

Matmul matmulOf(const Group &g) {
  Matmul mm;
  mm.x = g.in(0);
  mm.w = g.in(1);
  if (g.op.at("in").size() > 2)
    mm.bias = g.in(2);
  mm.y = g.out();
  const package::WeightTensor &w = g.weight(mm.w);
  if (w.ne.size() != 2)
    g.fail("weight " + mm.w + " is not a matrix");
  mm.K = w.ne[0];
  mm.N = w.ne[1];
  if (g.width(mm.x) != mm.K || g.width(mm.y) != mm.N)
    g.fail("input width " + str(g.width(mm.x)) + " / output width " + str(g.width(mm.y)) +
           " do not match weight " + mm.w + " [" + str(mm.K) + ", " + str(mm.N) + "]");
  if (g.residualAdd) {
    const json &ins = g.residualAdd->at("in");
    const std::string a = ins.at(0), b = ins.at(1);
    if (a != mm.y && b != mm.y)
      g.fail("the fused add does not read the matmul's output " + mm.y);
    mm.residual = a == mm.y ? b : a;
    mm.result = g.residualAdd->at("out");
  }
  return mm;
}

/// The int8 activations of the q8x GEMVs: x_q8, T*K int8 (bound as i32 words or 16-byte
/// vectors), and x_q8_ds, a vec4 (d, d * sum q of each 16-element half, 0) per 32 elements.
json xQ8(const Matmul &mm, const ArgType &t) {
  return scratch("x_q8", "max_T*" + str(mm.K), json::array({elems(t, "T*" + str(mm.K), 1)}));
}
json xQ8Scales(const Matmul &mm, const ArgType &t) {
  return scratch("x_q8_ds", "max_T*" + str(mm.K / 32) + "*16",
                 json::array({elems(t, "T*" + str(mm.K / 32), 16)}));
}

/// get_rows_<type>(w, tokens, out, K): out[t] = dequant(W[tokens[t]]); grid (T).
void bindGetRows(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const std::string w = g.in(0), out = g.out();
  const int64_t K = g.width(out);
  r.args = {weight(g, w, t[0]), {{"tokens", true}, {"shape", {"T"}}},
            activation(out, t[2], "T*" + str(K)), i32(K)};
  r.gridSymbols = {{"T", "T"}};
}

/// matmul_<type>(w, x, y, bias, res, N, K, T, flags): the dequantizing GEMV. flags 1 adds
/// bias[n], 2 adds res[t, n] (read, then y written, by the same thread: res may be y).
/// A fused residual `r = a + y` writes r with res = the other input (in place for the
/// graph's `x = x + matmul(...)`).
/// matmul_<type>_q8x(w0, w1, w2, xq, xds, y0, y1, y2, bias0, bias1, bias2, res, N0, N1, N2,
/// K, T, flags) (gemv_q8x.mlir, PTX) reads the activations from quantize_q8_x's scratches
/// and computes up to three matmuls of one input; bound here as one (output 0; outputs 1
/// and 2 empty: N1 = N2 = 0), compile_gpu.cpp merges consecutive ones (q, k, v; gate, up).
/// flags: 1 bias0, 2 res (output 0), 4 bias1, 8 bias2.
void bindGemv(const Group &g, const codegen::KernelRef &ref, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  const std::string TK = "T*" + str(mm.K), TN = "T*" + str(mm.N);
  const bool residual = !mm.residual.empty();
  const bool q8x = ref.entry.size() > 4 && ref.entry.compare(ref.entry.size() - 4, 4, "_q8x") == 0;
  const json y = activation(residual ? mm.result : mm.y, t[q8x ? 5 : 2], TN);
  const json bias = mm.bias.empty() ? absent(t[q8x ? 8 : 3]) : weight(g, mm.bias, t[q8x ? 8 : 3]);
  const json res = residual ? activation(mm.residual, t[q8x ? 11 : 4], TN) : absent(t[q8x ? 11 : 4]);
  const json flags = i32((mm.bias.empty() ? 0 : 1) | (residual ? 2 : 0));
  if (q8x) {
    const json w = weight(g, mm.w, t[0]);
    r.args = {w, w, w, xQ8(mm, t[3]), xQ8Scales(mm, t[4]), y, y, y, bias, absent(t[9]), absent(t[10]),
              res, i32(mm.N), i32(0), i32(0), i32(mm.K), i32("T"), flags};
    r.gridSymbols = {{"N0", str(mm.N)}, {"N1", "0"}, {"N2", "0"}, {"T", "T"}};
  } else {
    r.args = {weight(g, mm.w, t[0]), activation(mm.x, t[1], TK), y, bias, res,
              i32(mm.N), i32(mm.K), i32("T"), flags};
    r.gridSymbols = {{"N", str(mm.N)}, {"T", "T"}};
  }
}

/// quantize_q8_x(x, xq, xds, nblk): the matmul's input rounded to int8 per 32 elements
/// into the scratches x_q8 (T*K bytes) and x_q8_ds (a vec4 per 32 elements).
void bindQuantizeQ8(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  if (mm.K % 32 != 0)
    g.fail("quantize_q8_x needs K % 32 == 0, the matmul has K = " + str(mm.K));
  const std::string nblk = "T*" + str(mm.K / 32);
  r.args = {activation(mm.x, t[0], "T*" + str(mm.K)), xQ8(mm, t[1]), xQ8Scales(mm, t[2]), i32(nblk)};
  r.gridSymbols = {{"nblk", nblk}};
}

/// convert_f32_f16(x, out, rows, k): the activations rounded to f16 into scratch x_f16.
void bindConvert(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  const std::string TK = "T*" + str(mm.K);
  r.args = {activation(mm.x, t[0], TK),
            scratch("x_f16", "max_T*" + str(mm.K) + "*2", json::array({elems(t[1], TK, 2)})),
            i32("T"), i32(mm.K)};
  r.gridSymbols = {{"rows", "T"}};
}

/// dequant_<type>_f16(w, out, rows, k): the weight dequantized to f16 [N, K] into scratch
/// w_f16. Block (blockIdx.x + blockIdx.y * gridDim.x) owns row n, so N > 65535 (Vulkan's
/// usual grid-x limit) launches (65535, ceil(N/65535)).
void bindDequant(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  const std::string NK = str(mm.N * mm.K);
  r.args = {weight(g, mm.w, t[0]),
            scratch("w_f16", NK + "*2", json::array({elems(t[1], NK, 2)})),
            i32(mm.N), i32(mm.K)};
  r.gridSymbols = {{"rows", str(mm.N)}};
  if (mm.N > 65535)
    r.grid = std::array<std::string, 3>{"65535", str((mm.N + 65534) / 65535), "1"};
}

/// The prefill GEMM's f16 weight: the GGUF tensor itself for F16 weights, else the
/// dequant_<type>_f16 scratch.
json f16Weight(const Group &g, const Matmul &mm, json shape) {
  if (g.weight(mm.w).type == ggml::Type::F16)
    return {{"weight", mm.w}, {"shape", std::move(shape)}};
  return scratch("w_f16", str(mm.N * mm.K) + "*2", std::move(shape));
}

/// The prefill GEMMs' epilogue arguments: y (the matmul's output, or with a fused residual
/// `r = a + y` the sum r), bias, res (the other input of the add: read, then y written,
/// by the same thread, so res may be y) and flags (1 bias, 2 res), as the GEMVs' flags.
struct GemmEpilogue {
  std::string y;
  json bias, res, flags;
};
/// Both kernels take bias as argument 3 and res as argument 4, res shaped `resShape`.
GemmEpilogue gemmEpilogue(const Group &g, const Matmul &mm, const Types &t, json resShape) {
  const bool residual = !mm.residual.empty();
  GemmEpilogue e;
  e.y = residual ? mm.result : mm.y;
  e.bias = mm.bias.empty() ? absent(t[3]) : weight(g, mm.bias, t[3]);
  e.res = residual ? buffer(mm.residual, std::move(resShape)) : absent(t[4]);
  e.flags = i32((mm.bias.empty() ? 0 : 1) | (residual ? 2 : 0));
  return e;
}

/// gemm_f16(x, w, y, bias, res, flags): tensor-core GEMM of the f16 scratches, y [T, N] f32
/// (+ bias, + res: gemmEpilogue).
void bindGemmF16(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  const std::string K = str(mm.K), N = str(mm.N);
  const GemmEpilogue e = gemmEpilogue(g, mm, t, shape({"T", N}));
  r.args = {scratch("x_f16", "max_T*" + K + "*2", shape({"T", K})),
            f16Weight(g, mm, shape({N, K})),
            buffer(e.y, shape({"T", N})), e.bias, e.res, e.flags};
  r.gridSymbols = {{"N", N}, {"T", "T"}};
}

/// gemm_skinny_<type>(x, w, y, bias, res, T, N, K, flags): the prefill GEMM of passes with
/// few prompt rows (gemm_skinny.mlir), on the f32 activations and the GGUF blocks
/// themselves (bytes as f16 units); epilogue as gemm_f16's.
void bindGemmSkinny(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  const std::string TN = "T*" + str(mm.N);
  const GemmEpilogue e = gemmEpilogue(g, mm, t, json::array({elems(t[4], TN, 4)}));
  r.args = {activation(mm.x, t[0], "T*" + str(mm.K)), weight(g, mm.w, t[1]),
            activation(e.y, t[2], TN), e.bias, e.res,
            i32("T"), i32(mm.N), i32(mm.K), e.flags};
  r.gridSymbols = {{"N", str(mm.N)}};
}

/// gemm_f32_f16w(x, w, y, bias, T, N, K, has_bias): the portable GEMM (SPIR-V) of the f32
/// activations and the f16 weight.
void bindGemmF32F16w(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Matmul mm = matmulOf(g);
  r.args = {activation(mm.x, t[0], "T*" + str(mm.K)),
            f16Weight(g, mm, json::array({str(mm.N * mm.K)})),
            activation(mm.y, t[2], "T*" + str(mm.N)),
            mm.bias.empty() ? absent(t[3]) : weight(g, mm.bias, t[3]),
            i32("T"), i32(mm.N), i32(mm.K), i32(mm.bias.empty() ? 0 : 1)};
  r.gridSymbols = {{"N", str(mm.N)}, {"T", "T"}};
}

/// add_f32(a, b, out, n): the graph's `add`, or a matmul's fused residual after its GEMM.
void bindAdd(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const json &add = g.residualAdd ? *g.residualAdd : g.op;
  const std::string a = add.at("in").at(0), b = add.at("in").at(1), out = add.at("out");
  const std::string n = "T*" + str(g.width(out));
  r.args = {activation(a, t[0], n), activation(b, t[1], n), activation(out, t[2], n), i32(n)};
  r.gridSymbols = {{"n", n}};
}

/// rms_norm_f32(x, gamma, y, d, eps) over rows of d: the graph's rms_norm (rows of the
/// buffer), or head_norm (T * n_head rows of head_dim).
void bindRmsNorm(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const std::string x = g.in(0), gamma = g.in(1), y = g.out();
  const int64_t W = g.width(x);
  const bool head = g.op.at("op") == "head_norm";
  const int64_t d = head ? g.headDim() : W;
  if (W % d != 0)
    g.fail("width " + str(W) + " is not a multiple of head_dim " + str(d));
  const std::string n = "T*" + str(W);
  r.args = {activation(x, t[0], n), weight(g, gamma, t[1]), activation(y, t[2], n), i32(d),
            f32(g.attr("eps").get<double>())};
  r.gridSymbols = {{"rows", "T*" + str(W / d)}};
}

/// The rows' positions (batch scope: each row's, from the launch's first row).
json positions() { return {{"positions", true}, {"shape", {"T"}}}; }

/// rope_f32(x, positions, head_dim, n_rot, theta, neox): in place on x; grid (T, n_head).
void bindRope(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const std::string x = g.in(0);
  if (g.out() != x)
    g.fail("rope_f32 rotates in place: the op's out must be its input " + x);
  const int64_t hd = g.headDim(), W = g.width(x);
  const int64_t nHead = g.op.contains("n_head") ? g.op.at("n_head").get<int64_t>() : W / hd;
  r.args = {activation(x, t[0], "T*" + str(W)), positions(), i32(hd),
            i32(g.op.value("n_rot", hd)), f32(g.attr("theta").get<double>()),
            i32(g.op.value("mode", std::string("norm")) == "neox" ? 1 : 0)};
  r.gridSymbols = {{"T", "T"}, {"n_head", str(nHead)}};
}

/// swiglu_f32(gate, up, out, n).
void bindSwiglu(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const std::string n = "T*" + str(g.width(g.out()));
  r.args = {activation(g.in(0), t[0], n), activation(g.in(1), t[1], n),
            activation(g.out(), t[2], n), i32(n)};
  r.gridSymbols = {{"n", n}};
}

/// Attention facts (graph op attention: q, k, v -> out; layer; heads).
struct Attention {
  std::string q, k, v, out;
  int64_t layer = 0, hd = 0, nHead = 0, nKv = 0;
  double scale = 0;
};

Attention attentionOf(const Group &g) {
  Attention a{g.in(0), g.in(1), g.in(2), g.out()};
  a.layer = g.attr("layer").get<int64_t>();
  a.hd = g.headDim();
  a.nHead = g.op.contains("n_head") ? g.op.at("n_head").get<int64_t>() : g.width(a.q) / a.hd;
  a.nKv = g.op.contains("n_head_kv") ? g.op.at("n_head_kv").get<int64_t>() : g.width(a.k) / a.hd;
  a.scale = g.op.contains("scale") ? g.op.at("scale").get<double>() : 1.0 / std::sqrt(double(a.hd));
  if (a.nHead * a.hd != g.width(a.q) || a.nKv * a.hd != g.width(a.k) ||
      g.width(a.v) != g.width(a.k) || g.width(a.out) != g.width(a.q))
    g.fail("q/k/v/out widths do not match n_head " + str(a.nHead) + ", n_head_kv " +
           str(a.nKv) + " x head_dim " + str(a.hd));
  return a;
}

/// Pages hold 64 positions (runtime/kvcache/block_manager.h; attention_f16kv.mlir).
constexpr int64_t kPage = 64;
/// Decode's split-K ("flash decoding"): the context in n_split splits of split_len keys
/// (a multiple of the portable kernel's 32-key tiles), one partial per split, then
/// attention_split_reduce. A workgroup walks its split's keys one tile after another, so
/// the splits are what spreads a decode step's attention over the SMs: one split (one
/// tile) per 32 keys up to kDecodeMaxSplits (the grid is n_split x n_head_kv workgroups
/// per sequence; 256-key splits left a 600-key context at 3 x n_head_kv workgroups, and
/// 64-key splits one workgroup per KV head up to 64 keys), then longer splits.
/// The partials' scratch is sized for kDecodeMaxSplits.
constexpr int64_t kDecodeMinSplit = 32;
// flash_decode_f16kv_hd128 splits each sequence by this rule itself (schedule::kDecodeSplitUnit).
static_assert(kDecodeMinSplit == schedule::kDecodeSplitUnit);
constexpr int64_t kDecodeMaxSplits = 16;
const std::string kDecodeNSplit =
    "min(ceil(ctx/" + std::to_string(kDecodeMinSplit) + "), " + std::to_string(kDecodeMaxSplits) + ")";

/// The `let` of a split launch: at most `nSplitMax` splits of split_len keys, a multiple
/// of `granule`, and then only as many splits as have keys, ceil(ctx/split_len) (16 splits
/// of 64 keys at a 540-key context were 9 with keys and 7 empty workgroups). Which split a
/// key falls in depends on split_len alone, so the result does not change with it.
std::vector<std::pair<std::string, std::string>> splitLet(const std::string &nSplitMax, int64_t granule) {
  const std::string g = str(granule);
  return {{"n_split_max", nSplitMax},
          {"split_len", "ceil(ctx/(n_split_max*" + g + "))*" + g},
          {"n_split", "ceil(ctx/split_len)"}};
}

/// Prefill's split-K: the keys in splits of a fixed length, prefillSplitLen(), so that
/// which split a key falls in depends on the executor's context size alone, never on the
/// pass. A prompt row's attention is then the same computation whatever pass it is in: a
/// cold prefill in one pass, a late chunk, or the short tail after a prefix-cache hit
/// (the warm TTFT of a long prompt edited at its end: before, 16 splits for a 1-row tail
/// but one for the whole prompt in one pass, and the rounding of the merge made a cached
/// prompt's last row differ from the cold one's on the GPU). Splits past a row's position
/// hold no key of it: the flash kernel writes a zero partial with lse -inf, and
/// attention_split_reduce's weights and sums then add exact zeros, so the merge of a
/// row's splits does not depend on how many empty ones follow; a context of one split is
/// written by the flash kernel as the reduction of one split would (weight exp(0) = 1).
/// The length is a multiple of 64 (the tensor-core kernel's key tile), at least the
/// target schedule's attention.prefill_split_min, and long enough that max_ctx takes at
/// most kDecodeMaxSplits splits (the partials' scratch): on sm_* (minimum 2,048) 2,048
/// keys up to a 32,768 context, then max_ctx / 16, which the 1-row tail of a 32k prompt
/// took before, with 16 x n_head_kv workgroups; at the 256 of spirv, 256 keys up to 4,096.
std::string prefillSplitLen(int64_t minKeys) {
  return "max(" + str(minKeys) + ", ceil(max_ctx/" + str(kDecodeMaxSplits * kPage) + ")*" + str(kPage) + ")";
}

/// The split `let` of a phase's attention launches (the flash kernel and its
/// attention_split_reduce share it): decode's kDecodeNSplit splits of 32-key tiles,
/// prefill's splits of prefillSplitLen keys.
std::vector<std::pair<std::string, std::string>> phaseSplitLet(const Group &g, const std::string &phase) {
  if (phase == "decode") return splitLet(kDecodeNSplit, kDecodeMinSplit);
  return {{"split_len", prefillSplitLen(g.g.prefillSplitMin)}, {"n_split", "ceil(ctx/split_len)"}};
}

json kvPool(const Attention &a, const char *which) {
  return {{"kv", which},
          {"layer", a.layer},
          {"shape", {simplifyExpr("kv_pages*" + str(a.nKv * kPage * a.hd))}}};
}
json blockTable() { return {{"block_table", true}, {"shape", {"ceil(ctx/64)"}}}; }
/// Batch scope: every sequence's block table, sequence k's at k * table_stride
/// (docs/package-format.md, "Bindings").
json blockTables() { return {{"block_table", true}, {"shape", {"n_seq*table_stride"}}}; }
json rowTables() { return {{"row_tables", true}, {"shape", {"T"}}}; }

/// kv_store_f16(k, v, k_cache, v_cache, block_table, row_tables, positions, head_dim)
/// and rope_kv_store_f16(q, k, v, k_cache, v_cache, block_table, row_tables, head_dim,
/// positions, n_rot, theta, neox, q_gamma, k_gamma, eps, norm, n_q) (swz-fuse's rope on k,
/// and with it rope on q and the two head norms when those were fused too): one launch
/// for the rows of every sequence of the pass (each row's position and block table from
/// positions and row_tables), grid (T, n_head_kv) or (T, n_q + n_head_kv).
void bindKvStore(const Group &g, const codegen::KernelRef &ref, const Types &t, Record &r) {
  const Attention a = attentionOf(g);
  const std::string n = "T*" + str(a.nKv * a.hd);
  r.gridSymbols = {{"T", "T"}, {"n_head_kv", str(a.nKv)}};
  if (ref.entry != "rope_kv_store_f16") {
    r.args = {activation(a.k, t[0], n), activation(a.v, t[1], n), kvPool(a, "k"),
              kvPool(a, "v"), blockTables(), rowTables(), positions(), i32(a.hd)};
    return;
  }
  if (!g.ropeK)
    g.fail("rope_kv_store_f16 without a fused rope op on k");
  const json &rope = *g.ropeK;
  const int64_t nRot = rope.value("n_rot", a.hd);
  if (a.hd > 256 || a.hd % 2 != 0 || nRot % 2 != 0 || nRot > a.hd)
    g.fail("rope_kv_store_f16 needs an even head_dim <= 256 and an even n_rot <= head_dim "
           "(head_dim " + str(a.hd) + ", n_rot " + str(nRot) + ")");
  if (g.ropeQ && (g.ropeQ->at("theta") != rope.at("theta") ||
                  g.ropeQ->value("n_rot", a.hd) != nRot || g.ropeQ->value("mode", "") != rope.value("mode", "")))
    g.fail("the fused ropes on q and k differ");
  if (bool(g.normQ) != bool(g.normK) || (g.normQ && !g.ropeQ))
    g.fail("rope_kv_store_f16 fuses both head norms with the rope on q, or none");
  const bool norm = g.normQ != nullptr;
  if (norm && g.normQ->at("eps") != g.normK->at("eps"))
    g.fail("the fused head norms on q and k have different eps");
  const int64_t nQ = g.ropeQ ? a.nHead : 0;
  r.args = {activation(a.q, t[0], "T*" + str(a.nHead * a.hd)), activation(a.k, t[1], n),
            activation(a.v, t[2], n), kvPool(a, "k"), kvPool(a, "v"), blockTables(), rowTables(),
            i32(a.hd), positions(), i32(nRot),
            f32(rope.at("theta").get<double>()),
            i32(rope.value("mode", std::string("norm")) == "neox" ? 1 : 0),
            norm ? weight(g, g.normQ->at("in").at(1).get<std::string>(), t[12]) : absent(t[12]),
            norm ? weight(g, g.normK->at("in").at(1).get<std::string>(), t[13]) : absent(t[13]),
            f32(norm ? g.normQ->at("eps").get<double>() : 0.0), i32(norm ? 1 : 0), i32(nQ)};
  r.gridSymbols["n_q"] = str(nQ);
}

/// kv_move_rope_f16(k_cache, v_cache, moves, head_dim, n_rot, theta, neox): the record of
/// graph.kv_move for the layer of the attention op `op` (exec::BatchModel::move_kv): T
/// moves {source slot, destination slot, RoPE offset} (i32 x 3, the `kv_moves` binding),
/// grid (T, n_head_kv); n_rot, theta and the pairing those of the graph's rope on the
/// attention's k (n_rot 0, K copied as it is, in a graph without RoPE; a graph with rope
/// ops none of which writes this k is refused).
void bindKvMove(const Group &g, const codegen::KernelRef &, const Types &, Record &r) {
  const Attention a = attentionOf(g);
  const json *rope = nullptr;
  bool anyRope = false;
  for (const json &op : g.m.graph.at("ops")) {
    anyRope |= op.value("op", "") == "rope";
    if (&op == &g.op)
      break;
    if (op.value("op", "") == "rope" && op.at("out") == a.k)
      rope = &op;
  }
  // A graph with RoPE whose k this attention does not take from a rope would move K
  // unrotated: refused rather than guessed.
  if (!rope && anyRope)
    g.fail("kv_move_rope_f16: no rope op before the attention writes its k ('" + a.k + "')");
  const int64_t nRot = rope ? rope->value("n_rot", a.hd) : 0;
  if (a.hd > 256 || a.hd % 2 != 0 || nRot % 2 != 0 || nRot > a.hd)
    g.fail("kv_move_rope_f16 needs an even head_dim <= 256 and an even n_rot <= head_dim "
           "(head_dim " + str(a.hd) + ", n_rot " + str(nRot) + ")");
  r.gridSymbols = {{"T", "T"}, {"n_head_kv", str(a.nKv)}};
  r.args = {kvPool(a, "k"), kvPool(a, "v"), {{"kv_moves", true}, {"shape", {"T*3"}}}, i32(a.hd), i32(nRot),
            f32(rope ? rope->at("theta").get<double>() : 10000.0),
            i32(rope && rope->value("mode", std::string("norm")) == "neox" ? 1 : 0)};
}

/// The partials of decode's split-K: o_part [n_split, T, n_head, head_dim] and lse_part
/// [n_split, T, n_head] f32, scratches sized for the longest context and row budget.
json oPart(const Attention &a) {
  const std::string per = str(a.nHead * a.hd);
  return scratch("attn_o_part", "min(ceil(max_ctx/" + str(kDecodeMinSplit) + "), " + str(kDecodeMaxSplits) + ")*max_T*" + per + "*4",
                 shape({"n_split*T*" + per}));
}
json lsePart(const Attention &a) {
  const std::string per = str(a.nHead);
  return scratch("attn_lse_part", "min(ceil(max_ctx/" + str(kDecodeMinSplit) + "), " + str(kDecodeMaxSplits) + ")*max_T*" + per + "*4",
                 shape({"n_split*T*" + per}));
}

/// flash_attention_f16kv[_mma[_hd128]](q, k_cache, v_cache, block_table, out, o_part,
/// lse_part, T, pos0, n_head, head_dim, split_len, scale), one launch per sequence.
/// Prefill: splits of prefillSplitLen keys (a multiple of 64, as the tensor-core kernel
/// needs), then attention_split_reduce when more than one. Decode: at most kDecodeNSplit splits into
/// the partials (splitLet: only those that hold keys).
void bindFlash(const Group &g, const codegen::KernelRef &ref, const Types &t, Record &r) {
  const Attention a = attentionOf(g);
  if (ref.entry == "flash_attention_f16kv" && a.hd % 4 != 0)
    g.fail("flash_attention_f16kv needs head_dim % 4 == 0 (its dot products run four "
           "features at a time); this model's head_dim is " + str(a.hd));
  const std::string n = "T*" + str(a.nHead * a.hd);
  r.scope = "sequence";
  r.let = phaseSplitLet(g, ref.phase);
  r.args = {activation(a.q, t[0], n), kvPool(a, "k"), kvPool(a, "v"), blockTable(),
            activation(a.out, t[4], n), oPart(a), lsePart(a)};
  for (json arg : {i32("T"), i32("pos0"), i32(a.nHead), i32(a.hd), i32("split_len"), f32(a.scale)})
    r.args.push_back(std::move(arg));
  r.gridSymbols = {{"T", "T"}, {"n_head", str(a.nHead)}, {"n_head_kv", str(a.nKv)},
                   {"n_split", "n_split"}};
}

/// flash_decode_f16kv_hd128(q, k_cache, v_cache, block_table, out, o_part, lse_part, count,
/// seqs, T, seq_tiles, n_head, head_dim, max_splits, scale): one launch for the decode rows
/// of every sequence of the pass (attention_decode.mlir), each sequence split over its own
/// context as a sequence-scope launch would (kDecodeNSplit: at most kDecodeMaxSplits splits
/// of a multiple of 32 keys), the grid's z the most splits any of them can have (at the
/// longest context of the pass: `ctx` in batch scope). The kernel merges the splits itself: one i32
/// count per (row tile, KV head), < T * n_head of them; scratch starts zeroed and the
/// kernel leaves it so. The partials are [n_split, T, n_head(, head_dim)] over the pass's
/// decode rows, the first rows of the scratch: the same bytes a sequence-scope launch
/// over those rows would use (Scratch::row_bytes), so a prefill sequence's never overlap.
void bindDecode(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const Attention a = attentionOf(g);
  const std::string n = "T*" + str(a.nHead * a.hd), G = str(a.nHead / a.nKv);
  r.let = {{"seq_tiles", "ceil(seq_T*" + G + "/" + str(schedule::kDecodeRows) + ")"},
           {"n_split", kDecodeNSplit}};
  r.args = {activation(a.q, t[0], n), kvPool(a, "k"), kvPool(a, "v"), blockTables(),
            activation(a.out, t[4], n), oPart(a), lsePart(a),
            scratch("attn_split_count", "max_T*" + str(a.nHead) + "*4", shape({"T*" + str(a.nHead)})),
            {{"sequences", true}, {"shape", {"n_seq*4"}}}, i32("T"), i32("seq_tiles"), i32(a.nHead),
            i32(a.hd), i32(kDecodeMaxSplits), f32(a.scale)};
  r.gridSymbols = {{"n_seq", "n_seq"}, {"seq_tiles", "seq_tiles"}, {"n_head_kv", str(a.nKv)},
                   {"n_split", "n_split"}};
}

/// attention_split_reduce(o_part, lse_part, out, n_split, head_dim) after the partials of
/// a split decode or prefill (the phase's own n_split rule). With one split the flash kernel wrote `out` itself: the grid is then 0 and
/// the executor skips the launch.
void bindSplitReduce(const Group &g, const codegen::KernelRef &ref, const Types &t, Record &r) {
  const Attention a = attentionOf(g);
  r.scope = "sequence";
  r.let = phaseSplitLet(g, ref.phase);
  r.args = {oPart(a), lsePart(a), activation(a.out, t[2], "T*" + str(a.nHead * a.hd)),
            i32("n_split"), i32(a.hd)};
  r.gridSymbols = {{"T", "min(n_split-1, 1)*T"}, {"n_head", str(a.nHead)}};
}

/// argmax_f32(logits, out, n_vocab): one workgroup per output row of the graph's output,
/// token ids into the scratch "argmax_ids" (package-format.md, "Greedy sampling").
void bindArgmax(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const int64_t nVocab = g.width(g.in(0));
  r.args = {activation(g.in(0), t[0], "T*" + str(nVocab)), scratch(g.out(), "max_T*4", shape({"T"})), i32(nVocab)};
  r.gridSymbols = {{"T", "T"}};
}

/// The two-pass argmax (PTX): argmax_split_f32(logits, part_v, part_i, n_vocab, chunk) on
/// n_part = ceil(n_vocab / kArgmaxChunk) workgroups a row, then argmax_reduce_f32(part_v,
/// part_i, out, n_part, n_vocab) one workgroup a row, into "argmax_ids" as argmax_f32.
constexpr int64_t kArgmaxChunk = 4096;
int64_t argmaxParts(const Group &g) { return (g.width(g.in(0)) + kArgmaxChunk - 1) / kArgmaxChunk; }
json argmaxPart(const Group &g, const char *name) {
  const std::string n = str(argmaxParts(g));
  return scratch(name, "max_T*" + n + "*4", shape({"T*" + n}));
}
void bindArgmaxSplit(const Group &g, const codegen::KernelRef &, const Types &t, Record &r) {
  const int64_t nVocab = g.width(g.in(0));
  r.args = {activation(g.in(0), t[0], "T*" + str(nVocab)), argmaxPart(g, "argmax_part_v"),
            argmaxPart(g, "argmax_part_i"), i32(nVocab), i32(kArgmaxChunk)};
  r.gridSymbols = {{"T", "T"}, {"n_part", str(argmaxParts(g))}};
}
void bindArgmaxReduce(const Group &g, const codegen::KernelRef &, const Types &, Record &r) {
  r.args = {argmaxPart(g, "argmax_part_v"), argmaxPart(g, "argmax_part_i"),
            scratch(g.out(), "max_T*4", shape({"T"})), i32(argmaxParts(g)), i32(g.width(g.in(0)))};
  r.gridSymbols = {{"T", "T"}};
}

using Binder = void (*)(const Group &, const codegen::KernelRef &, const Types &, Record &);

/// The binder of each kernel entry: exact names, or prefixes ending in '_'.
const std::vector<std::pair<std::string, Binder>> &binders() {
  static const std::vector<std::pair<std::string, Binder>> table = {
      {"get_rows_", bindGetRows},         // gemv_<type>.mlir
      {"matmul_", bindGemv},              // gemv_<type>.mlir, gemv_q8x.mlir
      {"quantize_q8_x", bindQuantizeQ8},  // gemv_q8x.mlir
      {"convert_f32_f16", bindConvert},   // dequant_f16.mlir
      {"dequant_", bindDequant},          // dequant_f16.mlir
      {"gemm_f16", bindGemmF16},          // gemm_f16.mlir
      {"gemm_f16_", bindGemmF16},         // its shape classes' kernels (gemm_f16_<class>)
      {"gemm_skinny_", bindGemmSkinny},   // gemm_skinny.mlir
      {"gemm_f32_f16w", bindGemmF32F16w}, // gemm_f32_f16w.mlir
      {"add_f32", bindAdd},
      {"rms_norm_f32", bindRmsNorm},
      {"rope_f32", bindRope},
      {"swiglu_f32", bindSwiglu},
      {"kv_store_f16", bindKvStore},      // attention_f16kv.mlir
      {"rope_kv_store_f16", bindKvStore},
      {"kv_move_rope_f16", bindKvMove},
      {"flash_attention_f16kv", bindFlash}, // + attention_f16kv_mma.mlir's variants
      {"flash_attention_f16kv_mma", bindFlash},
      {"flash_attention_f16kv_mma_hd128", bindFlash},
      {"flash_decode_f16kv_hd128", bindDecode},  // attention_decode.mlir (PTX decode)
      {"attention_split_reduce", bindSplitReduce},
      {"argmax_f32", bindArgmax},         // argmax_f32.mlir: greedy sampling
      {"argmax_split_f32", bindArgmaxSplit},
      {"argmax_reduce_f32", bindArgmaxReduce},
  };
  return table;
}

Binder binderFor(const std::string &entry) {
  for (const auto &[name, b] : binders())
    if (name == entry || (name.back() == '_' && entry.rfind(name, 0) == 0))
      return b;
  return nullptr;
}

} // namespace

std::string simplifyExpr(const std::string &expr) {
  return print(simplify(Parser(expr, nullptr).parse()));
}

std::string substituteExpr(const std::string &expr,
                           const std::map<std::string, std::string> &values) {
  return print(simplify(Parser(expr, &values).parse()));
}

std::vector<std::string> splitGridRules(const std::string &grid) { return splitGrid(grid); }

namespace {

/// The records of `kernels` for the op of `g`.
json records(const Group &g, const std::vector<codegen::KernelRef> &kernels, const KernelLookup &kernelOf) {
  const package::Manifest &m = g.m;
  // Output-row ops (final norm, LM head) run few rows: their decode kernels on every pass.
  const bool outputRows = g.op.contains("rows") && g.op.at("rows") == "output";
  json records = json::array();
  for (const codegen::KernelRef &ref : kernels) {
    if (outputRows && ref.phase == "prefill")
      continue;
    const codegen::CompiledKernel &k = kernelOf(ref);
    Binder bind = binderFor(ref.entry);
    if (!bind)
      g.fail("kernel " + ref.entry + " has no launch binding (compiler/driver/launch_bindings.cpp)");
    Types types;
    for (const std::string &a : k.arguments) {
      std::optional<ArgType> t = package::parse_arg_type(a);
      if (!t)
        g.fail("kernel " + ref.entry + " has an argument of type " + a +
               ", which the launch contract cannot bind");
      types.push_back(*t);
    }
    Record r;
    bind(g, ref, types, r);
    // The binder against the kernel: one binding per argument, of its kind and rank.
    if (r.args.size() != types.size())
      g.fail("the binder of " + ref.entry + " gives " + std::to_string(r.args.size()) +
             " arguments, the kernel has " + std::to_string(types.size()));
    for (size_t i = 0; i < types.size(); ++i) {
      const json &b = r.args[i];
      const bool isI32 = b.contains("i32"), isF32 = b.contains("f32");
      const bool ok = types[i].kind == ArgType::I32   ? isI32
                      : types[i].kind == ArgType::F32 ? isF32
                                                      : !isI32 && !isF32 &&
                                                            b.at("shape").size() == size_t(types[i].rank);
      if (!ok)
        g.fail("the binder of " + ref.entry + " binds argument " + std::to_string(i) + " (" +
               k.arguments[i] + ") as " + b.dump());
    }
    std::array<std::string, 3> grid;
    if (r.grid) {
      grid = *r.grid;
    } else {
      std::vector<std::string> rule = splitGrid(k.grid);
      if (rule.size() != 3)
        g.fail("kernel " + ref.entry + "'s swz.grid '" + k.grid + "' is not three rules");
      for (size_t d = 0; d < 3; ++d) {
        std::set<std::string> syms;
        symbolsOf(Parser(rule[d], nullptr).parse(), syms);
        for (const std::string &s : syms)
          if (!r.gridSymbols.count(s))
            g.fail("kernel " + ref.entry + "'s grid rule '" + k.grid + "' uses '" + s +
                   "', which its binder does not define");
        grid[d] = substituteExpr(rule[d], r.gridSymbols);
      }
    }
    // A kernel for some prefill passes only (KernelRef::Rows): its grid is zero on the
    // others, by the prompt-row count T of the pass against the group's skinny_max_rows.
    if (ref.rows != codegen::KernelRef::Rows::Any) {
      if (g.g.skinnyMaxRows <= 0 || ref.phase != "prefill")
        g.fail("kernel " + ref.entry + " runs on some prefill passes only, and the launch group has no "
               "skinny_max_rows");
      const std::string lim = std::to_string(g.g.skinnyMaxRows);
      const std::string on = ref.rows == codegen::KernelRef::Rows::Small ? "max(0, min(1, " + lim + " + 1 - T))"
                                                                          : "max(0, min(1, T - " + lim + "))";
      grid[0] = simplifyExpr("(" + grid[0] + ") * " + on);
    }
    json rec = {{"kernel", m.target + "." + ref.entry},
                {"phase", outputRows ? "all" : ref.phase},
                {"scope", r.scope}};
    if (outputRows)
      rec["rows"] = "output";
    if (!r.let.empty()) {
      json let = json::object();
      for (const auto &[name, e] : r.let)
        let[name] = simplifyExpr(e);
      rec["let"] = let;
    }
    rec["grid"] = grid;
    rec["dynamic_smem"] = k.dynamicSmem.empty() ? "0" : substituteExpr(k.dynamicSmem, r.gridSymbols);
    rec["args"] = std::move(r.args);
    records.push_back(std::move(rec));
  }
  return records;
}

} // namespace

json launchRecords(const package::Manifest &m, const codegen::LaunchGroup &group,
                   const KernelLookup &kernelOf) {
  const json &ops = m.graph.at("ops");
  const int64_t anchor = group.graphOps.front();
  Group g{m, group, ops.at(anchor), nullptr, nullptr, nullptr, nullptr, nullptr, ""};
  g.where = "graph op " + std::to_string(anchor) + " (" + g.op.at("op").get<std::string>() + ")";
  for (size_t i = 1; i < group.graphOps.size(); ++i) {
    const json &f = ops.at(group.graphOps[i]);
    const std::string kind = f.at("op").get<std::string>();
    // An attention's fused rope / head_norm works in place on its q or k buffer: which
    // one it is follows from the buffer.
    auto onAttentionInput = [&](const json *&onQ, const json *&onK) {
      const std::string x = f.at("in").at(0).get<std::string>();
      if (g.op.at("op") != "attention" || f.at("out") != x)
        g.fail("fused op " + std::to_string(group.graphOps[i]) + " (" + kind +
               ") is not in place on the attention's q or k");
      if (x == g.in(0) && !onQ)
        onQ = &f;
      else if (x == g.in(1) && !onK)
        onK = &f;
      else
        g.fail("fused op " + std::to_string(group.graphOps[i]) + " (" + kind + ") on " + x +
               " is not the attention's q or k, or is a second one");
    };
    if (kind == "add")
      g.residualAdd = &f;
    else if (kind == "rope")
      onAttentionInput(g.ropeQ, g.ropeK);
    else if (kind == "head_norm")
      onAttentionInput(g.normQ, g.normK);
    else
      g.fail("fused op " + std::to_string(group.graphOps[i]) + " (" + kind +
             ") has no launch binding");
  }
  return records(g, group.kernels, kernelOf);
}

json samplingRecord(const package::Manifest &m, const std::vector<codegen::KernelRef> &argmax,
                    const KernelLookup &kernelOf) {
  const json op = {{"op", "argmax"},
                   {"in", {m.graph.at("output")}},
                   {"out", "argmax_ids"},
                   {"rows", "output"}};
  const codegen::LaunchGroup none;
  Group g{m, none, op, nullptr, nullptr, nullptr, nullptr, nullptr, "greedy sampling (argmax of " + m.graph.at("output").get<std::string>() + ")"};
  json r = op;
  r["launches"] = records(g, argmax, kernelOf);
  return r;
}

json kvMoveRecord(const package::Manifest &m, const codegen::KernelRef &move, const KernelLookup &kernelOf) {
  const codegen::LaunchGroup none;
  json launches = json::array();
  for (const json &op : m.graph.at("ops")) {
    if (op.value("op", "") != "attention")
      continue;
    Group g{m, none, op, nullptr, nullptr, nullptr, nullptr, nullptr,
            "K/V moves of layer " + op.value("layer", json(-1)).dump()};
    for (json &r : records(g, {move}, kernelOf))
      launches.push_back(std::move(r));
  }
  if (launches.empty())
    return nullptr;
  return {{"op", "kv_move"}, {"launches", std::move(launches)}};
}

} // namespace swz::compiler
