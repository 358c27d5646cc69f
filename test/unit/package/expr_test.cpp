// Tests of package::Expr (runtime/package/expr.h), the launch contract's rule language:
// parsing, evaluation over symbol slots, whole-number results and the error messages.
#include "package/expr.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using swz::package::Expr;
using swz::package::ExprError;

const std::vector<std::string> kSymbols = {"T", "pos0", "ctx", "n_split"};

double eval(const std::string& text, std::vector<double> values = {5, 3, 8, 2}) {
  return Expr::parse(text, kSymbols).evaluate(values.data());
}

std::string error_of(const std::string& text) {
  try {
    Expr::parse(text, kSymbols);
  } catch (const ExprError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Expr, ArithmeticFollowsPrecedenceAndAssociativity) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("10 - 4 - 3"), 3);  // left-associative
  EXPECT_EQ(eval("64 / 4 / 2"), 8);
  EXPECT_EQ(eval("-T + 7"), 2);
  EXPECT_EQ(eval("--3"), 3);
  EXPECT_EQ(eval("2.5 * 4"), 10);
  EXPECT_EQ(eval("7 / 2"), 3.5);  // exact division
}

TEST(Expr, SymbolsReadTheirSlots) {
  EXPECT_EQ(eval("T"), 5);
  EXPECT_EQ(eval("pos0 + T"), 8);
  EXPECT_EQ(eval("T*576"), 2880);
  EXPECT_EQ(eval("n_split*T*9", {4, 0, 4, 3}), 108);
  Expr e = Expr::parse("ceil(ctx/256)", kSymbols);
  const double a[] = {1, 0, 256, 0}, b[] = {1, 0, 257, 0};
  EXPECT_EQ(e.evaluate(a), 1);
  EXPECT_EQ(e.evaluate(b), 2);
  EXPECT_FALSE(e.constant());
  EXPECT_TRUE(Expr::parse("ceil(576/4)", kSymbols).constant());
  EXPECT_EQ(e.text(), "ceil(ctx/256)");
}

TEST(Expr, Functions) {
  EXPECT_EQ(eval("ceil(T/8)"), 1);
  EXPECT_EQ(eval("ceil(17/8)"), 3);
  EXPECT_EQ(eval("floor(17/8)"), 2);
  EXPECT_EQ(eval("min(T, 3)"), 3);
  EXPECT_EQ(eval("max(T, 3)"), 5);
  EXPECT_EQ(eval("min(n_split - 1, 1) * T", {5, 0, 100, 1}), 0);
  EXPECT_EQ(eval("min(n_split - 1, 1) * T", {5, 0, 300, 2}), 5);
  EXPECT_EQ(eval("ceil(ctx/64)*64", {1, 0, 65, 0}), 128);
  // A quotient a rounding error off a whole number is not pushed to the next one.
  EXPECT_EQ(eval("ceil(T*9/3/8)", {8, 0, 0, 0}), 3);
  EXPECT_EQ(eval("floor(T*0.1*10)", {3, 0, 0, 0}), 3);
}

TEST(Expr, AsIntWantsAWholeNonNegativeNumber) {
  const double v[] = {12, 0, 0, 0};
  EXPECT_EQ(Expr::parse("T*3/4", kSymbols).as_int(v, "grid[0]"), 9);
  try {
    Expr::parse("T/8", kSymbols).as_int(v, "grid[1]");
    FAIL() << "expected ExprError";
  } catch (const ExprError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("grid[1]: 'T/8' = 1.5", 0), 0u) << e.what();
  }
  EXPECT_THROW(Expr::parse("pos0 - 1", kSymbols).as_int(v, "x"), ExprError);
}

TEST(Expr, ErrorsSayWhereAndWhat) {
  EXPECT_EQ(error_of("ceil(n/256)"), "unknown symbol 'n' at 5 in 'ceil(n/256)'; known: T, pos0, ctx, n_split");
  EXPECT_EQ(error_of("sqrt(T)"), "unknown function 'sqrt' at 0 in 'sqrt(T)'");
  EXPECT_EQ(error_of("(T + 1"), "expected ')' at 6 in '(T + 1'");
  EXPECT_EQ(error_of("T +"), "expression ends early at 3 in 'T +'");
  EXPECT_EQ(error_of("T 2"), "unexpected '2' at 2 in 'T 2'");
  EXPECT_EQ(error_of("min(T)"), "expected ',' in min() at 5 in 'min(T)'");
  EXPECT_EQ(error_of(""), "expression ends early at 0 in ''");
  EXPECT_EQ(error_of("T $ 2"), "unexpected '$' at 2 in 'T $ 2'");
  // Deeper than the evaluator's stack: refused when parsed, not when evaluated.
  std::string deep = "1";
  for (int i = 0; i < 40; ++i) deep = "(" + deep + ") + 1";
  std::string right = "T";
  for (int i = 0; i < 40; ++i) right = "T*(T+" + right + ")";
  EXPECT_NE(error_of(right).find("too deep"), std::string::npos);
  EXPECT_EQ(eval(deep), 41);  // left-leaning chains stay shallow
}

}  // namespace
