// Internals of the Jinja2-subset engine behind chat_template.h: tainted strings, values,
// tokens and the AST. Not a public header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"

namespace swz::chat::detail {

// ---------------------------------------------------------------------------------------------
// Tainted strings
// ---------------------------------------------------------------------------------------------

/// A string plus the byte ranges of it that are data (sorted, disjoint, non-adjacent, non-empty).
struct Str {
  std::string s;
  std::vector<Span> spans;

  Str() = default;
  explicit Str(std::string text, bool data = false) : s(std::move(text)) {
    if (data && !s.empty()) spans.push_back({0, s.size()});
  }
  bool has_data() const { return !spans.empty(); }
  void append(const Str& o);
  void append_literal(std::string_view t) { s.append(t); }
  /// Exact sub-range [b, b+n) with the spans clipped to it.
  Str substr(size_t b, size_t n) const;
};

/// A result string that is entirely data when `data` is true (the "whole result" taint rule).
inline Str derived(std::string text, bool data) { return Str(std::move(text), data); }

// ---------------------------------------------------------------------------------------------
// Values (Python object model, restricted to what templates see)
// ---------------------------------------------------------------------------------------------

struct Value;
struct Dict;
struct Interp;
using List = std::vector<Value>;

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

/// A builtin or a macro. `fn` receives the interpreter so macros can render.
struct Callable {
  std::string name;
  std::function<Value(Interp&, CallArgs&)> fn;
};

struct Value {
  enum class T { Undefined, None, Bool, Int, Float, Str, List, Dict, Namespace, Callable };
  T t = T::Undefined;
  bool b = false;
  bool is_tuple = false;  // List printed as a tuple
  bool is_gen = false;    // List standing for a Python generator (map/select/...): no len(),
                          // no subscript, not JSON-serialisable, always truthy
  bool is_markup = false; // Str that is a markupsafe.Markup (safe/escape/macro output): `+`
                          // with a plain str HTML-escapes the plain operand
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const Str> str;
  std::shared_ptr<List> list;         // lists are immutable after construction (sandbox)
  std::shared_ptr<Dict> dict;         // Dict and Namespace; only namespaces mutate
  std::shared_ptr<const Callable> fn;
  std::string undef_hint;             // for Undefined: what jinja2 would say when it is used

  static Value undefined(std::string hint) {
    Value v;
    v.undef_hint = std::move(hint);
    return v;
  }
  static Value none() { Value v; v.t = T::None; return v; }
  static Value boolean(bool x) { Value v; v.t = T::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.t = T::Int; v.i = x; return v; }
  static Value floating(double x) { Value v; v.t = T::Float; v.f = x; return v; }
  static Value string(Str s) {
    Value v; v.t = T::Str; v.str = std::make_shared<const Str>(std::move(s)); return v;
  }
  static Value literal(std::string s) { return string(Str(std::move(s))); }
  static Value markup(Str s) { Value v = string(std::move(s)); v.is_markup = true; return v; }
  static Value generator(List l) { Value v = make_list(std::move(l)); v.is_gen = true; return v; }
  static Value make_list(List l, bool tuple = false) {
    Value v; v.t = T::List; v.list = std::make_shared<List>(std::move(l)); v.is_tuple = tuple;
    return v;
  }
  static Value make_dict(Dict d);
  static Value make_namespace(Dict d);
  static Value callable(std::string name, std::function<Value(Interp&, CallArgs&)> f) {
    Value v; v.t = T::Callable; v.fn = std::make_shared<const Callable>(Callable{std::move(name), std::move(f)});
    return v;
  }

  bool is_undefined() const { return t == T::Undefined; }
  bool is_str() const { return t == T::Str; }
  bool is_number() const { return t == T::Int || t == T::Float || t == T::Bool; }
};

/// An insertion-ordered string-keyed mapping (Python dict / jinja2 Namespace).
struct Dict {
  std::vector<std::pair<Str, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(Str key, Value v);
};

inline Value Value::make_dict(Dict d) {
  Value v; v.t = T::Dict; v.dict = std::make_shared<Dict>(std::move(d)); return v;
}
inline Value Value::make_namespace(Dict d) {
  Value v; v.t = T::Namespace; v.dict = std::make_shared<Dict>(std::move(d)); return v;
}

// Python-semantics helpers (jinja_value.cpp). Those that can fail throw RuntimeFault, which
// the interpreter turns into a TemplateError carrying the source position of the node.
struct RuntimeFault {
  std::string msg;
};
[[noreturn]] void fault(std::string msg);

const char* type_name(const Value& v);        // Python type name: 'str', 'dict object' ...
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);  // Python ==
int compare(const Value& a, const Value& b);  // Python <, raises TypeError-like fault on mismatch
std::string py_repr(const Value& v);          // Python repr()
Str py_str(const Value& v);                   // Python str() with taint (Undefined -> "")
std::string float_repr(double d);             // Python repr(float)
bool any_data(const Value& v);                // does any string inside v carry data?
std::string to_json(const Value& v, const std::string* indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys, size_t depth = 0);
Value from_json(const nlohmann::ordered_json& j);  // strings become data

// UTF-8 helpers: code point decoding for Python str semantics (len, index, slice).
std::vector<size_t> utf8_offsets(std::string_view s);  // byte offset of each code point, + end
bool py_isspace(uint32_t cp);
void append_utf8(std::string& out, uint32_t cp);  // encodes code point cp (< 0x110000) as UTF-8
uint32_t utf8_decode_at(std::string_view s, size_t& pos);  // advances pos; invalid byte -> U+FFFD

// ---------------------------------------------------------------------------------------------
// Tokens and AST
// ---------------------------------------------------------------------------------------------

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Text: the literal; Name/Op: spelling; String: decoded value; numbers: spelling
  size_t pos;        // byte offset in the source
};

/// Splits the source into text and tag tokens, applying whitespace control exactly as jinja2
/// with trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False.
std::vector<Token> lex(std::string_view source, std::string* normalized = nullptr);

struct Expr;
struct Stmt;
using ExprP = std::unique_ptr<Expr>;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

struct Expr {
  enum class K {
    Literal, Name, GetAttr, GetItem, Slice, Call, Filter, Test, Neg, Pos, Not, Bin, And, Or,
    Cond, ListLit, TupleLit, DictLit, Compare, Placeholder
  };
  K k;
  size_t pos = 0;
  Value lit;                 // Literal
  std::string name;          // Name, GetAttr attribute, Filter/Test name, Bin operator
  ExprP a, b, c;             // operands: GetAttr/GetItem/Slice/Call/Filter/Test object in a
  std::vector<ExprP> args;   // Call/Filter/Test positional args; list/tuple items; dict keys
  std::vector<ExprP> vals;   // dict values
  std::vector<std::pair<std::string, ExprP>> kwargs;
  std::vector<std::string> ops;  // Compare: operators between a and args[i]
  bool negated = false;      // Test: `is not`
  bool has_a = true, has_b = true, has_c = true;  // Slice parts present
};

struct Stmt {
  enum class K { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Scope };
  K k;
  size_t pos = 0;
  std::string text;                        // Text
  ExprP expr;                              // Output / Set value / For iterable / CallBlock call
  // If: branches of (condition, body); a null condition is the else branch.
  std::vector<std::pair<ExprP, Body>> branches;
  // For: targets; Set: targets (one name, a tuple of names, or ns.attr).
  std::vector<std::string> targets;
  std::string attr;                        // Set on namespace: `set ns.attr = ...`
  ExprP cond;                              // For: `for x in y if cond`
  Body body, else_body;
  // Macro: name, params with optional defaults.
  std::string name;
  std::vector<std::pair<std::string, ExprP>> params;
  // FilterBlock: the filter chain as an Expr whose innermost object is a placeholder.
  ExprP filter;
};

struct Program {
  std::string source;
  std::vector<size_t> line_starts;  // byte offset of each line start, for error positions
  Body body;
  void position(size_t pos, size_t& line, size_t& col) const;
};

/// Parses the token stream into `prog.body`; throws TemplateError.
void parse_program(Program& prog, const std::vector<Token>& toks);

/// Names of the supported filters and tests (checked at parse time).
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

/// Renders the program (jinja_eval.cpp).
Rendered render_program(const Program& prog, const nlohmann::ordered_json& context);

}  // namespace swz::chat::detail
