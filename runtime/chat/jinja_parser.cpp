// Parser of the Jinja2 subset: token stream -> AST. Grammar and operator precedence follow
// jinja2 3.1's parser (jinja2/parser.py), lowest to highest:
//   cond-expr (a if c else b) < or < and < not < comparisons (== != < <= > >= in, not in)
//   < + - < ~ < * / // % < ** (left-assoc) < unary - + < primary/postfix (. [] ())
//   with filters (|f) and tests (is t) binding to the unary operand.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "chat/jinja_internal.h"

namespace swz::chat::detail {

void Program::position(size_t pos, size_t& line, size_t& col) const {
  size_t lo = 0, hi = line_starts.size();
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (line_starts[mid] <= pos) lo = mid; else hi = mid;
  }
  line = lo + 1;
  col = pos - (line_starts.empty() ? 0 : line_starts[lo]) + 1;
}

namespace {

constexpr int kMaxDepth = 200;  // nesting limit for expressions and blocks (no stack overflow)

class Parser {
 public:
  Parser(const Program& prog, const std::vector<Token>& toks) : prog_(prog), t_(toks) {}

  Body parse_all() {
    std::string stop;
    Body b = parse_body({}, stop);
    return b;
  }

 private:
  const Program& prog_;
  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser, size_t pos) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail(pos, "template nesting too deep");
    }
    ~DepthGuard() { --p.depth_; }
  };

  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    size_t line, col;
    prog_.position(pos, line, col);
    throw TemplateError(line, col, msg);
  }
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Text: return "template text";
      case Tok::VarBegin: return "'{{'";
      case Tok::VarEnd: return "'}}'";
      case Tok::BlockBegin: return "'{%'";
      case Tok::BlockEnd: return "'%}'";
      case Tok::Name: return "'" + t.text + "'";
      case Tok::String: return "string literal";
      case Tok::Int: case Tok::Float: return "number " + t.text;
      case Tok::Op: return "'" + t.text + "'";
      case Tok::Eof: return "end of template";
    }
    return "token";
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur().pos, std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail(cur().pos, "expected a name, got " + describe(cur()));
    return t_[i_++].text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail(cur().pos, "expected '%}', got " + describe(cur()));
    ++i_;
  }

  static ExprP node(Expr::K k, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->pos = pos;
    return e;
  }
  static StmtP stmt(Stmt::K k, size_t pos) {
    auto s = std::make_unique<Stmt>();
    s->k = k;
    s->pos = pos;
    return s;
  }

  // ---- statements -----------------------------------------------------------------------

  // Parses until a block tag whose name is in `stops` (consumes "{%" and the name, sets `stop`).
  // With no stops, parses to the end of the template.
  Body parse_body(std::initializer_list<const char*> stops, std::string& stop) {
    DepthGuard g(*this, cur().pos);
    Body body;
    for (;;) {
      const Token& tk = cur();
      if (tk.type == Tok::Eof) {
        if (stops.size() != 0) {
          std::string want;
          for (const char* s : stops) want += std::string(want.empty() ? "" : " or ") + "'" + s + "'";
          fail(tk.pos, "unexpected end of template, expected " + want);
        }
        return body;
      }
      if (tk.type == Tok::Text) {
        auto s = stmt(Stmt::K::Text, tk.pos);
        s->text = tk.text;
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (tk.type == Tok::VarBegin) {
        ++i_;
        auto s = stmt(Stmt::K::Output, tk.pos);
        s->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) fail(cur().pos, "expected '}}', got " + describe(cur()));
        ++i_;
        body.push_back(std::move(s));
        continue;
      }
      if (tk.type != Tok::BlockBegin) fail(tk.pos, "unexpected " + describe(tk));
      const Token& nm = peek();
      if (nm.type != Tok::Name) fail(nm.pos, "expected a tag name, got " + describe(nm));
      for (const char* s : stops) {
        if (nm.text == s) {
          i_ += 2;
          stop = s;
          return body;
        }
      }
      i_ += 2;
      body.push_back(parse_statement(nm));
    }
  }

  StmtP parse_statement(const Token& nm) {
    const std::string& tag = nm.text;
    size_t pos = nm.pos;
    std::string stop;
    if (tag == "if") {
      auto s = stmt(Stmt::K::If, pos);
      ExprP c = parse_tuple(false);
      expect_block_end();
      for (;;) {
        Body b = parse_body({"elif", "else", "endif"}, stop);
        s->branches.emplace_back(std::move(c), std::move(b));
        if (stop == "elif") {
          c = parse_tuple(false);
          expect_block_end();
          continue;
        }
        if (stop == "else") {
          expect_block_end();
          Body eb = parse_body({"endif"}, stop);
          s->branches.emplace_back(nullptr, std::move(eb));
        }
        expect_block_end();
        return s;
      }
    }
    if (tag == "for") {
      auto s = stmt(Stmt::K::For, pos);
      s->targets = parse_targets();
      if (!skip_name("in")) fail(cur().pos, "expected 'in' in for loop, got " + describe(cur()));
      s->expr = parse_tuple(false, /*no_cond=*/true);
      if (skip_name("if")) s->cond = parse_expression(true);
      if (is_name("recursive")) fail(cur().pos, "recursive for loops are not supported");
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"endfor", "else"}, stop);
      --loop_depth_;
      if (stop == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, stop);
      }
      expect_block_end();
      return s;
    }
    if (tag == "set") {
      size_t tpos = cur().pos;
      std::string first = expect_name();
      if (is_op(".")) {
        ++i_;
        auto s = stmt(Stmt::K::Set, pos);
        s->targets = {first};
        s->attr = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true);
        expect_block_end();
        return s;
      }
      std::vector<std::string> names{first};
      while (skip_op(",")) {
        if (cur().type != Tok::Name) break;
        names.push_back(expect_name());
      }
      (void)tpos;
      if (skip_op("=")) {
        auto s = stmt(Stmt::K::Set, pos);
        s->targets = std::move(names);
        s->expr = parse_tuple(true);
        expect_block_end();
        return s;
      }
      if (names.size() != 1) fail(cur().pos, "expected '=' after set targets");
      auto s = stmt(Stmt::K::SetBlock, pos);
      s->targets = std::move(names);
      if (is_op("|")) {
        auto ph = node(Expr::K::Placeholder, cur().pos);
        s->filter = parse_filters(std::move(ph));
      }
      expect_block_end();
      s->body = parse_body({"endset"}, stop);
      expect_block_end();
      return s;
    }
    if (tag == "macro") {
      auto s = stmt(Stmt::K::Macro, pos);
      s->name = expect_name();
      expect_op("(");
      bool seen_default = false;
      while (!is_op(")")) {
        if (!s->params.empty()) expect_op(",");
        if (is_op(")")) break;
        std::string p = expect_name();
        ExprP def;
        if (skip_op("=")) {
          def = parse_expression(true);
          seen_default = true;
        } else if (seen_default) {
          fail(cur().pos, "non-default argument follows default argument");
        }
        s->params.emplace_back(std::move(p), std::move(def));
      }
      expect_op(")");
      expect_block_end();
      int saved = loop_depth_;
      loop_depth_ = 0;
      s->body = parse_body({"endmacro"}, stop);
      loop_depth_ = saved;
      if (cur().type == Tok::Name && cur().text == s->name) ++i_;
      expect_block_end();
      return s;
    }
    if (tag == "call") {
      auto s = stmt(Stmt::K::CallBlock, pos);
      if (is_op("(")) fail(cur().pos, "call blocks with caller arguments are not supported");
      s->expr = parse_expression(true);
      if (s->expr->k != Expr::K::Call) fail(pos, "expected a macro call after 'call'");
      expect_block_end();
      s->body = parse_body({"endcall"}, stop);
      expect_block_end();
      return s;
    }
    if (tag == "filter") {
      auto s = stmt(Stmt::K::FilterBlock, pos);
      auto ph = node(Expr::K::Placeholder, cur().pos);
      // The first filter has no leading pipe.
      s->filter = parse_one_filter(std::move(ph));
      s->filter = parse_filters(std::move(s->filter));
      expect_block_end();
      s->body = parse_body({"endfilter"}, stop);
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(pos, "'" + tag + "' outside of a for loop");
      expect_block_end();
      return stmt(tag == "break" ? Stmt::K::Break : Stmt::K::Continue, pos);
    }
    if (tag == "generation") {
      // transformers' AssistantTracker extension: marks assistant text; renders its body as is.
      expect_block_end();
      auto s = stmt(Stmt::K::Scope, pos);
      s->body = parse_body({"endgeneration"}, stop);
      expect_block_end();
      return s;
    }
    static const std::unordered_set<std::string> known_end = {
        "endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "endgeneration",
        "elif", "else", "endraw"};
    if (known_end.count(tag)) fail(pos, "unexpected '" + tag + "' tag");
    fail(pos, "unsupported tag '" + tag + "'");
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    names.push_back(expect_name());
    while (skip_op(",")) {
      if (cur().type != Tok::Name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  // ---- expressions ----------------------------------------------------------------------

  // expression {, expression} -> tuple when a comma is present.
  ExprP parse_tuple(bool with_cond, bool no_cond = false) {
    size_t pos = cur().pos;
    ExprP first = parse_expression(with_cond && !no_cond);
    if (!is_op(",")) return first;
    auto t = node(Expr::K::TupleLit, pos);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")") ||
          (no_cond && is_name("if")))
        break;
      t->args.push_back(parse_expression(with_cond && !no_cond));
    }
    return t;
  }

  ExprP parse_expression(bool with_cond) {
    DepthGuard g(*this, cur().pos);
    if (!with_cond) return parse_or();
    return parse_condexpr();
  }

  ExprP parse_condexpr() {
    size_t pos = cur().pos;
    ExprP e1 = parse_or();
    while (skip_name("if")) {
      ExprP e2 = parse_or();
      ExprP e3;
      if (skip_name("else")) e3 = parse_condexpr();
      auto c = node(Expr::K::Cond, pos);
      c->a = std::move(e2);  // condition
      c->b = std::move(e1);  // value when true
      c->c = std::move(e3);  // value when false (may be null -> undefined)
      e1 = std::move(c);
    }
    return e1;
  }

  ExprP parse_or() {
    ExprP l = parse_and();
    while (is_name("or")) {
      size_t pos = cur().pos;
      ++i_;
      auto n = node(Expr::K::Or, pos);
      n->a = std::move(l);
      n->b = parse_and();
      l = std::move(n);
    }
    return l;
  }

  ExprP parse_and() {
    ExprP l = parse_not();
    while (is_name("and")) {
      size_t pos = cur().pos;
      ++i_;
      auto n = node(Expr::K::And, pos);
      n->a = std::move(l);
      n->b = parse_not();
      l = std::move(n);
    }
    return l;
  }

  ExprP parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, cur().pos);
      auto n = node(Expr::K::Not, cur().pos);
      ++i_;
      n->a = parse_not();
      return n;
    }
    return parse_compare();
  }

  ExprP parse_compare() {
    size_t pos = cur().pos;
    ExprP first = parse_math1();
    ExprP cmp;
    for (;;) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        op = "notin";
        i_ += 2;
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::K::Compare, pos);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprP bin(const std::string& op, ExprP l, ExprP r, size_t pos) {
    auto n = node(Expr::K::Bin, pos);
    n->name = op;
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  ExprP parse_math1() {
    ExprP l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      size_t pos = cur().pos;
      ++i_;
      l = bin(op, std::move(l), parse_concat(), pos);
    }
    return l;
  }

  ExprP parse_concat() {
    ExprP l = parse_math2();
    while (is_op("~")) {
      size_t pos = cur().pos;
      ++i_;
      l = bin("~", std::move(l), parse_math2(), pos);
    }
    return l;
  }

  ExprP parse_math2() {
    ExprP l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      size_t pos = cur().pos;
      ++i_;
      l = bin(op, std::move(l), parse_pow(), pos);
    }
    return l;
  }

  ExprP parse_pow() {
    ExprP l = parse_unary(true);
    while (is_op("**")) {
      size_t pos = cur().pos;
      ++i_;
      l = bin("**", std::move(l), parse_unary(true), pos);
    }
    return l;
  }

  ExprP parse_unary(bool with_filter) {
    DepthGuard g(*this, cur().pos);
    size_t pos = cur().pos;
    ExprP n;
    if (is_op("-")) {
      ++i_;
      n = node(Expr::K::Neg, pos);
      n->a = parse_unary(false);
    } else if (is_op("+")) {
      ++i_;
      n = node(Expr::K::Pos, pos);
      n->a = parse_unary(false);
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  ExprP parse_primary() {
    const Token& tk = cur();
    size_t pos = tk.pos;
    switch (tk.type) {
      case Tok::Name: {
        ++i_;
        auto n = node(Expr::K::Literal, pos);
        if (tk.text == "true" || tk.text == "True") { n->lit = Value::boolean(true); return n; }
        if (tk.text == "false" || tk.text == "False") { n->lit = Value::boolean(false); return n; }
        if (tk.text == "none" || tk.text == "None") { n->lit = Value::none(); return n; }
        n->k = Expr::K::Name;
        n->name = tk.text;
        return n;
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) s += t_[i_++].text;  // adjacent literals concatenate
        auto n = node(Expr::K::Literal, pos);
        n->lit = Value::literal(std::move(s));
        return n;
      }
      case Tok::Int: {
        ++i_;
        auto n = node(Expr::K::Literal, pos);
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(tk.text.c_str(), &end, 10);
        if (errno == ERANGE) fail(pos, "integer literal out of range: " + tk.text);
        n->lit = Value::integer(v);
        return n;
      }
      case Tok::Float: {
        ++i_;
        auto n = node(Expr::K::Literal, pos);
        n->lit = Value::floating(std::strtod(tk.text.c_str(), nullptr));
        return n;
      }
      case Tok::Op: {
        if (tk.text == "(") {
          ++i_;
          if (skip_op(")")) return node(Expr::K::TupleLit, pos);
          ExprP first = parse_expression(true);
          if (skip_op(")")) return first;
          auto t = node(Expr::K::TupleLit, pos);
          t->args.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            t->args.push_back(parse_expression(true));
          }
          expect_op(")");
          return t;
        }
        if (tk.text == "[") {
          ++i_;
          auto l = node(Expr::K::ListLit, pos);
          while (!is_op("]")) {
            if (!l->args.empty()) expect_op(",");
            if (is_op("]")) break;
            l->args.push_back(parse_expression(true));
          }
          expect_op("]");
          return l;
        }
        if (tk.text == "{") {
          ++i_;
          auto d = node(Expr::K::DictLit, pos);
          while (!is_op("}")) {
            if (!d->args.empty()) expect_op(",");
            if (is_op("}")) break;
            d->args.push_back(parse_expression(true));
            expect_op(":");
            d->vals.push_back(parse_expression(true));
          }
          expect_op("}");
          return d;
        }
        break;
      }
      default:
        break;
    }
    fail(pos, "unexpected " + describe(tk));
  }

  ExprP parse_postfix(ExprP n) {
    for (;;) {
      if (is_op(".")) {
        size_t pos = cur().pos;
        ++i_;
        if (cur().type == Tok::Name) {
          auto g = node(Expr::K::GetAttr, pos);
          g->a = std::move(n);
          g->name = t_[i_++].text;
          n = std::move(g);
        } else if (cur().type == Tok::Int) {
          auto g = node(Expr::K::GetItem, pos);
          g->a = std::move(n);
          auto lit = node(Expr::K::Literal, cur().pos);
          lit->lit = Value::integer(std::strtoll(cur().text.c_str(), nullptr, 10));
          ++i_;
          g->b = std::move(lit);
          n = std::move(g);
        } else {
          fail(cur().pos, "expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        n = parse_subscript(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  ExprP parse_subscript(ExprP obj) {
    size_t pos = cur().pos;
    expect_op("[");
    ExprP parts[3];
    bool present[3] = {false, false, false};
    int idx = 0;
    bool is_slice = false;
    for (;;) {
      if (is_op(":")) {
        if (idx >= 2) fail(cur().pos, "too many ':' in slice");
        is_slice = true;
        ++i_;
        ++idx;
        continue;
      }
      if (is_op("]")) break;
      if (present[idx]) fail(cur().pos, "expected ':' or ']' in subscript, got " + describe(cur()));
      parts[idx] = parse_expression(true);
      present[idx] = true;
    }
    expect_op("]");
    if (!is_slice) {
      if (!present[0]) fail(pos, "empty subscript");
      auto g = node(Expr::K::GetItem, pos);
      g->a = std::move(obj);
      g->b = std::move(parts[0]);
      return g;
    }
    auto s = node(Expr::K::Slice, pos);
    s->args.push_back(std::move(obj));
    s->a = std::move(parts[0]);
    s->b = std::move(parts[1]);
    s->c = std::move(parts[2]);
    s->has_a = present[0];
    s->has_b = present[1];
    s->has_c = present[2];
    return s;
  }

  void parse_call_args(Expr& n) {
    expect_op("(");
    while (!is_op(")")) {
      if (!n.args.empty() || !n.kwargs.empty()) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur().pos, "*args / **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string k = t_[i_].text;
        i_ += 2;
        n.kwargs.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!n.kwargs.empty()) fail(cur().pos, "positional argument follows keyword argument");
        n.args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprP parse_call(ExprP callee) {
    auto c = node(Expr::K::Call, cur().pos);
    c->a = std::move(callee);
    parse_call_args(*c);
    return c;
  }

  ExprP parse_one_filter(ExprP obj) {
    size_t pos = cur().pos;
    std::string name = expect_name();
    while (is_op(".") && peek().type == Tok::Name) {
      i_ += 1;
      name += "." + expect_name();
    }
    if (!is_known_filter(name)) fail(pos, "unsupported filter '" + name + "'");
    auto f = node(Expr::K::Filter, pos);
    f->name = name;
    f->a = std::move(obj);
    if (is_op("(")) parse_call_args(*f);
    return f;
  }

  ExprP parse_filters(ExprP obj) {
    while (skip_op("|")) obj = parse_one_filter(std::move(obj));
    return obj;
  }

  ExprP parse_test(ExprP obj) {
    size_t pos = cur().pos;
    ++i_;  // 'is'
    bool neg = skip_name("not");
    std::string name;
    if (cur().type == Tok::Name) {
      name = expect_name();
    } else if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                         cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      name = t_[i_++].text;
    } else {
      fail(cur().pos, "expected a test name after 'is', got " + describe(cur()));
    }
    while (is_op(".") && peek().type == Tok::Name) {
      i_ += 1;
      name += "." + expect_name();
    }
    if (!is_known_test(name)) fail(pos, "unsupported test '" + name + "'");
    auto t = node(Expr::K::Test, pos);
    t->name = name;
    t->negated = neg;
    t->a = std::move(obj);
    if (is_op("(")) {
      parse_call_args(*t);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                cur().type == Tok::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(cur().pos, "you cannot chain multiple tests with 'is'");
      ExprP arg = parse_postfix(parse_primary());
      t->args.push_back(std::move(arg));
    }
    return t;
  }

  ExprP parse_filter_expr(ExprP n) {
    for (;;) {
      if (is_op("|")) {
        n = parse_filters(std::move(n));
      } else if (is_name("is")) {
        n = parse_test(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }
};

}  // namespace

void parse_program(Program& prog, const std::vector<Token>& toks) {
  Parser p(prog, toks);
  prog.body = p.parse_all();
}

}  // namespace swz::chat::detail
