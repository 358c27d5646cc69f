#include "package/expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace swz::package {

class ExprParser {
 public:
  ExprParser(const std::string& text, const std::vector<std::string>& symbols, Expr& out)
      : s_(text), symbols_(symbols), out_(out) {}

  void parse() {
    expr();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::string known;
    for (const std::string& s : symbols_) known += (known.empty() ? "" : ", ") + s;
    throw ExprError(what + " at " + std::to_string(i_) + " in '" + s_ + "'" +
                    (what.rfind("unknown symbol", 0) == 0 ? "; known: " + known : ""));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void emit(Expr::Op op, int slot = 0, double v = 0) { out_.code_.push_back({op, slot, v}); }
  void expr() {
    term();
    for (;;) {
      if (eat('+')) {
        term();
        emit(Expr::Add);
      } else if (eat('-')) {
        term();
        emit(Expr::Sub);
      } else {
        return;
      }
    }
  }
  void term() {
    unary();
    for (;;) {
      if (eat('*')) {
        unary();
        emit(Expr::Mul);
      } else if (eat('/')) {
        unary();
        emit(Expr::Div);
      } else {
        return;
      }
    }
  }
  void unary() {
    if (eat('-')) {
      unary();
      emit(Expr::Neg);
      return;
    }
    primary();
  }
  void primary() {
    skip();
    if (i_ >= s_.size()) fail("expression ends early");
    const char c = s_[i_];
    if (eat('(')) {
      expr();
      if (!eat(')')) fail("expected ')'");
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = s_.c_str() + i_;
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      if (end == begin) fail("bad number");
      i_ += static_cast<size_t>(end - begin);
      emit(Expr::Num, 0, v);
      return;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t b = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      const std::string name = s_.substr(b, i_ - b);
      skip();
      if (i_ < s_.size() && s_[i_] == '(') {
        ++i_;
        Expr::Op op;
        int arity = 1;
        if (name == "ceil") op = Expr::Ceil;
        else if (name == "floor") op = Expr::Floor;
        else if (name == "min") op = Expr::Min, arity = 2;
        else if (name == "max") op = Expr::Max, arity = 2;
        else {
          i_ = b;
          fail("unknown function '" + name + "'");
        }
        expr();
        if (arity == 2 && !eat(',')) fail("expected ',' in " + name + "()");
        if (arity == 2) expr();
        if (!eat(')')) fail("expected ')' after " + name + "(...");
        emit(op);
        return;
      }
      for (size_t k = 0; k < symbols_.size(); ++k)
        if (symbols_[k] == name) {
          emit(Expr::Sym, static_cast<int>(k));
          return;
        }
      i_ = b;
      fail("unknown symbol '" + name + "'");
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& s_;
  const std::vector<std::string>& symbols_;
  Expr& out_;
  size_t i_ = 0;
};

Expr Expr::parse(const std::string& text, const std::vector<std::string>& symbols) {
  Expr e;
  e.text_ = text;
  ExprParser(text, symbols, e).parse();
  // evaluate() runs on a fixed stack of 32: refuse deeper expressions here, at load.
  int depth = 0, deepest = 0;
  for (const Step& s : e.code_) {
    depth += s.op == Num || s.op == Sym ? 1 : (s.op == Neg || s.op == Ceil || s.op == Floor ? 0 : -1);
    deepest = std::max(deepest, depth);
  }
  if (deepest >= 32) throw ExprError("expression too deep (nested more than 31 levels): '" + text + "'");
  return e;
}

double Expr::evaluate(const double* values) const {
  double stack[32];
  int n = 0;
  for (const Step& s : code_) {
    switch (s.op) {
      case Num: stack[n++] = s.value; break;
      case Sym: stack[n++] = values[s.slot]; break;
      case Add: --n; stack[n - 1] += stack[n]; break;
      case Sub: --n; stack[n - 1] -= stack[n]; break;
      case Mul: --n; stack[n - 1] *= stack[n]; break;
      case Div: --n; stack[n - 1] /= stack[n]; break;
      case Neg: stack[n - 1] = -stack[n - 1]; break;
      // A quotient such as 9*T/3 may land a rounding error off a whole number.
      case Ceil: stack[n - 1] = std::ceil(stack[n - 1] - 1e-9); break;
      case Floor: stack[n - 1] = std::floor(stack[n - 1] + 1e-9); break;
      case Min: --n; stack[n - 1] = std::min(stack[n - 1], stack[n]); break;
      case Max: --n; stack[n - 1] = std::max(stack[n - 1], stack[n]); break;
    }
    if (n >= 32) throw ExprError("expression too deep: '" + text_ + "'");
  }
  return n == 1 ? stack[0] : 0.0;
}

bool Expr::try_int(const double* values, int64_t& out) const {
  const double v = evaluate(values);
  const double r = std::round(v);
  if (!(std::fabs(v - r) < 1e-6) || r < 0 || r > 9.0e15) return false;
  out = static_cast<int64_t>(r);
  return true;
}

int64_t Expr::as_int(const double* values, const std::string& what) const {
  int64_t out = 0;
  if (!try_int(values, out))
    throw ExprError(what + ": '" + text_ + "' = " + std::to_string(evaluate(values)) +
                    " is not a non-negative whole number");
  return out;
}

bool Expr::uses(int slot) const {
  for (const Step& s : code_)
    if (s.op == Sym && s.slot == slot) return true;
  return false;
}

bool Expr::constant() const {
  for (const Step& s : code_)
    if (s.op == Sym) return false;
  return true;
}

}  // namespace swz::package
