// The skeleton of a piece of code: the byte ranges inside function bodies that a parse for
// atoms may skip (atomize.cpp parses the rest with Tree-sitter's included ranges). Atoms
// only need the top level and the members of class-like nodes; what a function body holds
// never changes them. Internal to frontend_ast.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "frontend_ast/language.h"

namespace swz::frontend_ast {

/// One range a skeleton parse skips: bytes [begin, end) of the code. `anchor` is the byte
/// the tree must confirm the range by: for brace languages the body's `{` (begin - 1; the
/// body's `}` is at `end`), for Python the start of the `def` line's first token.
struct SkipRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t anchor = 0;
  bool comment = false;  ///< inside a run of comment lines (anchor: the first line's comment marker)
  bool operator==(const SkipRange&) const = default;
};

/// The function-body interiors of `code` a skeleton parse may skip, ascending and disjoint,
/// found by a lexical pre-scan that knows `lang`'s comments, strings, character literals,
/// raw strings, template literals, regular expressions (JavaScript/TypeScript, by the
/// token before the `/`), Rust lifetimes and C/C++ preprocessor lines.
///
/// Brace languages (C, C++, Java, JavaScript, TypeScript, TSX, Go, Rust): the interior of
/// each outermost `{ }` block whose opening is not a class-like body: the tokens since the
/// last `;` or kept block at that depth hold, after the last class-like keyword (class,
/// struct, union, enum, namespace, interface, impl, trait, mod, extern, record, module,
/// macro_rules, ...), a `)` or an `=` (C, C++, Java, JavaScript, TypeScript) or a function
/// keyword (`fn`, `func`, `function`); in Rust and Go an `=` counts only with no class-like
/// keyword at all. Python: each `def` whose header ends in `:`: its body from the first
/// statement's first token to the last statement's (the last one then stands where the
/// first stood), and the same inside the blocks of that last statement. All languages:
/// runs of three or more comment lines (`//`; Python `#`) from the first line's end to the
/// last line's last character (the parser reads one comment token). Ranges under 32 bytes
/// are not returned.
///
/// Empty when the language is not one of these, or when the scan does not end balanced
/// (an open bracket, string or comment at the end): a parse then takes the whole code. A
/// wrong range can only make the skeleton parse disagree with a full one; atomize.cpp
/// checks each range against the skeleton tree and parses in full when one fails.
/// O(bytes).
std::vector<SkipRange> skippable_ranges(std::string_view code, Language lang);

}  // namespace swz::frontend_ast
