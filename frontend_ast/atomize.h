// Cutting one piece of source code into AST atoms: line ranges that each hold one import
// group, top-level definition, class (or, for a class with several members, its header
// and one atom per member) or function, with the comments and attributes right above it.
// Code that does not parse falls back to line blocks; atomize() never fails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend_ast/language.h"

namespace swz::frontend_ast {

/// What an atom holds.
enum class AtomKind {
  Import,      ///< one or more consecutive import / include / use / package lines
  Definition,  ///< any other top-level declaration or statement (variables, types, macros, ...)
  Class,       ///< a class / struct / interface / enum / impl / trait / namespace (or its header)
  Function,    ///< a function or method
  Lines,       ///< a line block: code that did not parse (ERROR node), or Language::None
};

/// "import", "definition", "class", "function" or "lines".
std::string_view atom_kind_name(AtomKind kind);

/// One atom: lines [first_line, end_line) of the atomized code (0-based), and the byte
/// range [begin, end) of those lines (each line with its '\n'). Atoms of one
/// Atomization partition the code: the first starts at line 0 / byte 0, each next one
/// where the previous ends, the last ends at the code's end.
struct Atom {
  AtomKind kind = AtomKind::Lines;
  int first_line = 0;
  int end_line = 0;
  size_t begin = 0;
  size_t end = 0;
  std::string name;   ///< the defined name where the grammar gives one ("" otherwise)
  uint64_t hash = 0;  ///< XXH3-64 of the atom's bytes: content-addressed, independent of position
};

/// The atoms of one piece of code.
struct Atomization {
  Language lang = Language::None;
  bool parsed = false;     ///< a grammar parsed it (false: Language::None, or no tree)
  bool has_error = false;  ///< the tree holds ERROR / MISSING nodes (those parts are line blocks); a
                           ///< skeleton parse does not see those inside the bodies it skipped
  size_t skipped_bytes = 0;  ///< bytes a skeleton parse left out (0: the whole code was parsed)
  std::vector<Atom> atoms;
};

/// Atomizes `code` as `lang`. Top-level nodes of the Tree-sitter tree start atoms;
/// comments and attribute lines directly above a node (no blank line between) belong to
/// it; consecutive imports form one atom; two nodes starting on one line share an atom;
/// a class-like node with at least two members in its `body` field is split into a header
/// atom and one atom per member (the closing lines stay with the last member). ERROR
/// nodes and Language::None are cut into line blocks at blank lines, at most 40 lines
/// each; so is code whose parse takes over 1 s (Tree-sitter's parser timeout). Empty
/// code gives no atoms. Thread-safe.
///
/// How it parses (a skeleton parse): atoms never depend on what a function body holds, so
/// a lexical pre-scan (skeleton.h: strings, comments, character literals, raw strings,
/// template literals and regular expressions of each language) finds function-body
/// interiors (Python: a def's blocks down to their last statement) and runs of three or
/// more comment lines, and Tree-sitter parses the code with those bytes left out
/// (ts_parser_set_included_ranges; offsets and lines unchanged). Ranges near an ERROR or
/// MISSING node of that parse (its statement and the statements on either side) are parsed
/// again (at most twice), so error recovery sees what a full parse sees around an error.
/// The tree must confirm each skipped range (a body `{`..`}` is one node and not a
/// class-like body whose members make atoms; a Python range lies inside its def; a comment
/// range is one comment node), else the whole code is parsed. For well-formed code the
/// atoms equal a full parse's (atomize_uncached with ParseMode::Full; unit tests on 62 real
/// files and hand-written snippets of every language; 1,800 more real files checked
/// 2026-12-05). has_error does not see errors inside skipped bodies (9 of 527 real C, C++,
/// Python and Rust files had errors only there).
///
/// Results are cached by content hash (XXH3-64 of language and bytes, 512 entries, least
/// recently used evicted), so unchanged code is parsed once per process.
///
/// `file` names the file the code is a version of (a path, or any identity that stays the
/// same from one prompt to the next; "" for none). For each (file, language) the text and
/// tree of the last version parsed are kept (64 files and 4 MiB of their text at most,
/// least recently used evicted; a tree takes 18-35 bytes of heap per byte of text). When a
/// new version of that file misses the content cache, the bytes between its common prefix
/// and common suffix with the kept text are the edit: the old tree is edited to match
/// (ts_tree_edit) and the new version is parsed incrementally from it (Tree-sitter's
/// ts_parser_parse with the old tree: unchanged subtrees are reused), so a small edit costs
/// a fraction of a first parse. The kept tree is the skeleton tree (or, when the skeleton
/// could not be used, the full tree), and the new version is parsed the same way as a first
/// parse, from the kept tree (Tree-sitter re-parses where the skipped ranges changed). An
/// edit that lies inside a skipped range and leaves the pre-scan's ranges as they were
/// (moved by the edit) is not parsed at all: the bytes the parser reads are unchanged, so the
/// edited tree is cut as it is. The atoms are those of a fresh parse of the same bytes
/// (atomize_uncached; checked on edited real files by the unit tests). A version answered
/// from the content cache is not parsed and leaves the kept version as it is.
std::shared_ptr<const Atomization> atomize(std::string_view code, Language lang, std::string_view file = {});

/// How atomize_uncached() parses: Skeleton as atomize() does (function bodies skipped
/// where the pre-scan and the tree allow, else a full parse); Full: always the whole code.
enum class ParseMode { Skeleton, Full };

/// atomize() without the content cache or any previous tree: a fresh parse, the way
/// `mode` says. For tests and benchmarks: with Skeleton, the reference an incremental
/// re-parse must equal; with Full, the reference a skeleton parse of well-formed code must
/// equal (has_error aside: ERROR nodes inside skipped bodies are not seen).
std::shared_ptr<const Atomization> atomize_uncached(std::string_view code, Language lang, ParseMode mode = ParseMode::Skeleton);

/// Statistics of atomize() since start: parses done (incremental ones included), parses
/// that reused a previous version's tree, content-cache hits, parses whose atoms came from
/// a skeleton tree, skeleton trees that could not be used (a full parse followed), and
/// edited versions that needed no parse (the edit inside a skipped body).
struct AtomizeCacheStats {
  uint64_t parses = 0;
  uint64_t incremental = 0;
  uint64_t hits = 0;
  uint64_t skeleton = 0;
  uint64_t fallbacks = 0;
  uint64_t unparsed = 0;  ///< edited versions cut from the previous skeleton tree without a parse
};
AtomizeCacheStats atomize_cache_stats();

/// Sets the parse timeout of atomize() and atomize_uncached() (Tree-sitter's
/// ts_parser_set_timeout_micros; default 1'000'000, 0: none) for every thread and returns
/// the previous value. For tests only: with 1 us a parse gives up at its first timeout
/// check (Tree-sitter checks every 100 parse operations, which take longer than 1 us), so
/// the line-block fallback can be tested without an input that parses for a second. Results already cached are kept.
uint64_t set_parse_timeout_micros(uint64_t micros);

/// XXH3-64 of `bytes` (the hash Atom::hash uses).
uint64_t content_hash(std::string_view bytes);

}  // namespace swz::frontend_ast
