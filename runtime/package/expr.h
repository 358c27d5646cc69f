// Integer rules of the launch contract (docs/package-format.md, "The launch contract"):
// a launch record's grid, dynamic shared memory, memref shapes, i32 arguments, scratch
// sizes and `let` symbols are expressions over a few run-time symbols (T, pos0, ctx, ...),
// parsed once when a package is loaded and evaluated per launch without allocating.
//
// Grammar: expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := '-' unary | primary; primary := number | symbol | call | '(' expr ')';
// call := ('ceil'|'floor') '(' expr ')' | ('min'|'max') '(' expr ',' expr ')'.
// Numbers are decimal (a fraction allowed); `/` is exact (real) division, so integer
// results come from ceil()/floor(): "ceil(T*9/3/8)". Values are doubles; as_int() checks
// that a result is a whole number.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace swz::package {

/// A malformed expression, an unknown symbol, or a result that is not what was asked.
class ExprError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A parsed expression: a small postfix program over symbol slots. Copyable.
class Expr {
 public:
  Expr() = default;
  /// Parses `text`. Each symbol it names must be in `symbols`; its slot is that symbol's
  /// index there (evaluate() reads values[slot]). Throws ExprError naming the position
  /// and the problem ("unknown symbol 'n' at 5 in 'ceil(n/256)'; known: T, pos0, ctx").
  static Expr parse(const std::string& text, const std::vector<std::string>& symbols);
  /// The value with symbol slot i = values[i] (values must cover every slot parsed).
  double evaluate(const double* values) const;
  /// evaluate() as a whole, non-negative number; throws ExprError ("'T/8' = 0.125 is not a
  /// whole number") otherwise. `what` names the field in the message.
  int64_t as_int(const double* values, const std::string& what) const;
  /// as_int() without the message: false (and `out` untouched) where as_int() throws.
  /// For hot paths that build the message only on failure.
  bool try_int(const double* values, int64_t& out) const;
  const std::string& text() const { return text_; }
  /// True when the expression names no symbol (its value never changes).
  bool constant() const;
  /// True when the expression reads symbol slot `slot`.
  bool uses(int slot) const;

 private:
  enum Op : uint8_t { Num, Sym, Add, Sub, Mul, Div, Neg, Ceil, Floor, Min, Max };
  struct Step {
    Op op;
    int slot = 0;
    double value = 0;
  };
  std::vector<Step> code_;
  std::string text_;
  friend class ExprParser;
};

}  // namespace swz::package
