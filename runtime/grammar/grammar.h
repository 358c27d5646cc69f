// Byte-level grammars for constrained decoding: a recursive transition network (RTN), i.e. a
// set of rules, each a Thompson NFA over bytes whose edges are byte ranges, epsilon moves or
// calls of other rules. Executed as a pushdown automaton (grammar/matcher.h): a configuration
// is a set of stacks of NFA states. Context-free (rules may recurse), vocabulary-independent;
// schemas and built-in formats compile to it (json_schema.h, formats.h).
//
// Why not a library: llguidance and outlines-core are Rust crates (their PyPI sdists need a
// Rust toolchain; the wheels hold only a CPython extension, with no C header), xgrammar's
// wheel holds only its Python binding (C++ symbols without headers, linked to
// apache-tvm-ffi), and none is packaged by Debian. docs/structured-output.md has the details.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace swz::grammar {

/// A schema or grammar that cannot be compiled. `keyword` names the offending JSON Schema
/// keyword (or the grammar feature), `path` its JSON pointer in the schema ("" for the
/// root); what() is a sentence for a client: "... at <path>: ...".
class GrammarError : public std::runtime_error {
 public:
  GrammarError(std::string keyword, std::string path, const std::string& what)
      : std::runtime_error(what), keyword(std::move(keyword)), path(std::move(path)) {}
  std::string keyword;
  std::string path;
};

/// The compiled network. Immutable once built (Builder::finish); shareable between threads.
struct Grammar {
  struct ByteEdge {
    uint8_t lo, hi;   ///< inclusive byte range
    uint32_t to;
  };
  struct Call {
    uint32_t rule;    ///< the rule entered
    uint32_t ret;     ///< the state continued in when it ends
  };
  struct State {
    std::vector<ByteEdge> bytes;
    std::vector<uint32_t> eps;
    std::vector<Call> calls;
    int32_t ends_rule = -1;  ///< >= 0: reaching this state ends that rule (pop)
  };
  /// A bounded repetition X{0,copies} unrolled by Builder::repeat: `copies` copies of X's
  /// states, each `states_per_copy` states from `first_state` on, all built by the same code
  /// (so state first + c * per + k of copy c is the k-th state of every copy). Copy c is
  /// followed by at most c more items. An item consumes at least `min_item_bytes` bytes, so
  /// two copies c, c' > D / min_item_bytes behave alike for D bytes (matcher.h uses this to
  /// share the masks of positions far from the bound).
  struct Repeat {
    uint32_t first_state;
    uint32_t states_per_copy;
    uint32_t copies;
    uint32_t min_item_bytes;
  };
  std::vector<State> states;
  std::vector<Repeat> repeats;
  std::vector<uint32_t> rule_start;  ///< per rule: its entry state
  uint32_t root = 0;                 ///< the rule a match starts in; its end accepts
  std::string name;                  ///< what it was compiled from (for messages)
};

/// Builds a Grammar from fragments (Thompson construction). A fragment is used once: its
/// states become part of whatever it is put into; reuse goes through rules (call()).
class Builder {
 public:
  struct Frag {
    uint32_t in, out;
  };
  /// The empty string.
  Frag empty();
  /// Exactly the bytes of `s`.
  Frag lit(std::string_view s);
  /// One byte in [lo, hi].
  Frag range(uint8_t lo, uint8_t hi);
  /// One byte in any of the ranges.
  Frag ranges(const std::vector<std::pair<uint8_t, uint8_t>>& rs);
  Frag seq(const std::vector<Frag>& parts);
  Frag alt(const std::vector<Frag>& alts);
  Frag opt(Frag f);
  Frag star(Frag f);
  Frag plus(Frag f);
  /// item{0,max}, unrolled (max copies of `item()`, each optional after the previous one),
  /// recorded in Grammar::repeats when every copy has the same number of states, so that
  /// masks can be shared between positions far from the bound. `item` must build the same
  /// fragment shape on every call (define any rule it calls before); `min_item_bytes` (>= 1)
  /// is a lower bound of the bytes one item consumes (0: not recorded).
  Frag repeat(const std::function<Frag()>& item, int max, uint32_t min_item_bytes);
  /// A new rule without a body yet (so it can be referenced before it is defined).
  uint32_t declare_rule();
  /// Sets a declared rule's body. Throws std::logic_error when defined twice.
  void define_rule(uint32_t rule, Frag body);
  /// A fragment that runs `rule` (recursion allowed).
  Frag call(uint32_t rule);
  /// The grammar starting in `root`. Throws std::logic_error for rules declared but never
  /// defined. The builder is empty afterwards.
  Grammar finish(uint32_t root, std::string name);
  size_t n_states() const { return g_.states.size(); }

 private:
  uint32_t state();
  Grammar g_;
  std::vector<bool> defined_;
};

/// The naive reference simulator (a set of explicit stacks, no caching), independent of
/// grammar/matcher.h: used by tests as the brute-force oracle. max_depth bounds the rule stack.
struct Simulation {
  bool alive = false;     ///< `text` is a prefix of some sentence (within max_depth)
  bool complete = false;  ///< `text` is a sentence
};
Simulation simulate(const Grammar& g, std::string_view text, int max_depth = 128);
/// simulate(g, text).complete.
bool matches(const Grammar& g, std::string_view text, int max_depth = 128);

}  // namespace swz::grammar
