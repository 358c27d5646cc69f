#include "frontend_ast/atomize.h"

#include "frontend_ast/skeleton.h"

#include <tree_sitter/api.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace swz::frontend_ast {

std::string_view atom_kind_name(AtomKind kind) {
  switch (kind) {
    case AtomKind::Import: return "import";
    case AtomKind::Definition: return "definition";
    case AtomKind::Class: return "class";
    case AtomKind::Function: return "function";
    case AtomKind::Lines: break;
  }
  return "lines";
}

uint64_t content_hash(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

namespace {

constexpr int kMaxLineBlock = 40;   // lines per fallback block
constexpr size_t kCacheEntries = 512;
// The previous versions kept (TreeStore): at most 64 files and 4 MiB of their text. A Tree-sitter
// tree takes 18-35 bytes of heap per source byte (measured 2026-12-03 on the bench files:
// gtest.cc's 256 KB, 4.6 MB), so about 100 MB at most.
constexpr size_t kTreeEntries = 64;
constexpr size_t kTreeBytes = size_t{4} << 20;
constexpr int kMaxSplitDepth = 2;   // class -> members, namespace -> class -> members
// Skeleton parses of one version at most: the first, and again without the ranges near
// its parse errors (drop_ranges_near_errors), twice.
constexpr int kSkeletonRounds = 3;
// A parse that takes longer (a pathological input) is given up: line blocks. 1 s is far
// above any real file's parse (gtest.cc's 256 KB: about 60 ms on the 2-core VM). Until the
// core was built from the py-tree-sitter 0.23.2 sdist, Debian's 0.20.7 forced a whole number
// of seconds (its deadline dropped the carry from tv_nsec into tv_sec, so 500 ms fired on 5
// of 100 parses of gtest.cc; upstream eb549a89a) and crashed when the timeout fired right
// after a Rust comment (a null lookahead released; upstream 5337a678f, 0.20.8). 0.23.2 has
// both fixes (lib/src/clock.h, parser.c; unit test
// Atomize.ParseTimeoutRightAfterRustCommentsGivesLineBlocks). set_parse_timeout_micros()
// changes it (tests only).
constexpr uint64_t kParseTimeoutUs = 1'000'000;
std::atomic<uint64_t> parse_timeout_us{kParseTimeoutUs};

struct Anchor {
  int line;
  AtomKind kind;
  std::string name;
};

/// Byte offset of every line start; the code's last line need not end in '\n'.
std::vector<size_t> line_starts(std::string_view code) {
  std::vector<size_t> starts;
  if (code.empty()) return starts;
  starts.push_back(0);
  const char* const b = code.data();
  const char* const last = b + code.size() - 1;  // a '\n' there starts no line
  for (const char* p = b; p < last && (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(last - p)))); ++p)
    starts.push_back(static_cast<size_t>(p - b) + 1);
  return starts;
}

bool blank_line(std::string_view code, const std::vector<size_t>& starts, int line) {
  const size_t b = starts[static_cast<size_t>(line)];
  const size_t e = static_cast<size_t>(line) + 1 < starts.size() ? starts[static_cast<size_t>(line) + 1] : code.size();
  for (size_t i = b; i < e; ++i)
    if (!std::isspace(static_cast<unsigned char>(code[i]))) return false;
  return true;
}

bool contains(const char* type, const char* part) { return std::strstr(type, part) != nullptr; }

bool is_attachable(const char* t) {  // comments and attributes bind to the node below them
  return contains(t, "comment") || std::strcmp(t, "attribute_item") == 0 || std::strcmp(t, "decorator") == 0;
}

/// Calls f(child) for each named child of `parent`, in order, with a tree cursor: O(children).
/// (ts_node_named_child(parent, i) walks from the first child on every call, so indexing
/// a file's top level with it was O(children^2): 7% of blake3's lib.rs, 2026-12-03.)
template <class F>
void for_each_named_child(TSNode parent, F&& f) {
  TSTreeCursor cursor = ts_tree_cursor_new(parent);
  if (ts_tree_cursor_goto_first_child(&cursor)) {
    do {
      const TSNode n = ts_tree_cursor_current_node(&cursor);
      if (ts_node_is_named(n)) f(n);
    } while (ts_tree_cursor_goto_next_sibling(&cursor));
  }
  ts_tree_cursor_delete(&cursor);
}

/// The child of `n` in field `name` (a string literal: its id is looked up once per grammar
/// and thread; by name, the lookup compared every field name of the grammar on each call).
TSNode field(TSNode n, const char* name) {
  struct Id {
    const TSLanguage* lang;
    const char* name;
    TSFieldId id;
  };
  thread_local std::vector<Id> ids;
  const TSLanguage* lang = ts_tree_language(n.tree);
  for (const Id& i : ids)
    if (i.lang == lang && i.name == name) return ts_node_child_by_field_id(n, i.id);
  const TSFieldId id = ts_language_field_id_for_name(lang, name, static_cast<uint32_t>(std::strlen(name)));
  ids.push_back({lang, name, id});
  return ts_node_child_by_field_id(n, id);
}

/// Unwraps decorators, templates and exports to the node that defines something.
TSNode definition_of(TSNode n) {
  for (int guard = 0; guard < 4; ++guard) {
    const char* t = ts_node_type(n);
    TSNode inner = {};
    if (std::strcmp(t, "decorated_definition") == 0) {
      inner = field(n, "definition");
    } else if (std::strcmp(t, "export_statement") == 0) {
      inner = field(n, "declaration");
    } else if (std::strcmp(t, "template_declaration") == 0) {
      const uint32_t k = ts_node_named_child_count(n);
      if (k) inner = ts_node_named_child(n, k - 1);
    }
    if (ts_node_is_null(inner)) return n;
    n = inner;
  }
  return n;
}

AtomKind classify(const char* t) {
  if (contains(t, "import") || contains(t, "include") || contains(t, "use_declaration") || contains(t, "using_declaration") ||
      contains(t, "package_clause") || contains(t, "package_declaration") || contains(t, "extern_crate") ||
      std::strcmp(t, "future_import_statement") == 0)
    return AtomKind::Import;
  if (contains(t, "function") || contains(t, "method") || contains(t, "constructor")) return AtomKind::Function;
  if (contains(t, "class") || contains(t, "struct") || contains(t, "interface") || contains(t, "enum") ||
      std::strcmp(t, "impl_item") == 0 || std::strcmp(t, "trait_item") == 0 || contains(t, "namespace") ||
      std::strcmp(t, "mod_item") == 0 || contains(t, "union") || contains(t, "record"))
    return AtomKind::Class;
  return AtomKind::Definition;
}

class Cutter {
 public:
  Cutter(std::string_view code, const std::vector<size_t>& starts) : code_(code), starts_(starts) {}

  int lines() const { return static_cast<int>(starts_.size()); }

  /// Line blocks over [a, b): a new block after each blank line or every kMaxLineBlock lines.
  void line_blocks(int a, int b) {
    int block_start = -1;
    for (int l = a; l < b; ++l) {
      const bool new_block = block_start < 0 || l - block_start >= kMaxLineBlock ||
                             (l > a && blank_line(code_, starts_, l - 1) && !blank_line(code_, starts_, l));
      if (new_block) {
        add(l, AtomKind::Lines, "");
        block_start = l;
      }
    }
  }

  /// Anchors for the named children of `parent` (the tree's root, or a class body).
  void children(TSNode parent, int depth, int min_line) {
    int attach_start = -1, attach_end = -1;  // rows of the comment/attribute run above the next node
    AtomKind prev = AtomKind::Lines;
    bool have_prev = false;
    for_each_named_child(parent, [&](TSNode c) {
      const char* t = ts_node_type(c);
      const int row = static_cast<int>(ts_node_start_point(c).row);
      const int end_row = last_row(c);
      if (attachable(c)) {
        if (attach_start < 0 || row > attach_end + 1) attach_start = row;
        attach_end = end_row;
        return;
      }
      const int anchor = attach_start >= 0 && row <= attach_end + 1 ? attach_start : row;
      attach_start = attach_end = -1;
      if (ts_node_is_missing(c) || std::strcmp(t, "ERROR") == 0) {
        line_blocks(std::max(anchor, min_line), std::min(end_row + 1, lines()));
        have_prev = false;
        return;
      }
      TSNode def = definition_of(c);
      const AtomKind kind = kind_of(def);
      if (kind == AtomKind::Import && have_prev && prev == AtomKind::Import) return;  // one import group
      prev = kind;
      have_prev = true;
      if (anchor < min_line) return;
      add(anchor, depth > 0 && kind == AtomKind::Definition ? AtomKind::Definition : kind, name_of(def));
      if (kind == AtomKind::Class && depth < kMaxSplitDepth) {
        TSNode body = field(def, "body");
        if (!ts_node_is_null(body)) split_bodies.push_back(ts_node_start_byte(body));
        if (!ts_node_is_null(body) && members(body) >= 2) children(body, depth + 1, anchor + 1);
      }
    });
  }

  std::vector<Anchor> anchors;
  /// First bytes of the class-like bodies whose members were looked at (their insides
  /// decide atoms: a skeleton parse must not have skipped them).
  std::vector<uint32_t> split_bodies;

 private:
  int last_row(TSNode n) const {
    const TSPoint e = ts_node_end_point(n);
    const int row = static_cast<int>(e.row);
    return e.column == 0 && row > static_cast<int>(ts_node_start_point(n).row) ? row - 1 : row;
  }

  uint32_t members(TSNode body) {
    uint32_t n = 0;
    for_each_named_child(body, [&](TSNode c) { n += !attachable(c); });
    return n;
  }

  // is_attachable() and classify() by node symbol, computed once per symbol: their
  // strstr() calls over every node's type name were 8% of an incremental re-parse.
  bool attachable(TSNode n) {
    int8_t& m = memo(attach_memo_, ts_node_symbol(n));
    if (m < 0) m = is_attachable(ts_node_type(n)) ? 1 : 0;
    return m == 1;
  }
  AtomKind kind_of(TSNode def) {
    int8_t& m = memo(kind_memo_, ts_node_symbol(def));
    if (m < 0) m = static_cast<int8_t>(classify(ts_node_type(def)));
    return static_cast<AtomKind>(m);
  }
  static int8_t& memo(std::vector<int8_t>& v, TSSymbol sym) {
    if (sym >= v.size()) v.resize(static_cast<size_t>(sym) + 1, -1);
    return v[sym];
  }

  std::string name_of(TSNode def) const {
    TSNode n = field(def, "name");
    if (ts_node_is_null(n)) return "";
    const uint32_t b = ts_node_start_byte(n), e = ts_node_end_byte(n);
    if (e <= b || e > code_.size() || e - b > 200) return "";
    return std::string(code_.substr(b, e - b));
  }

  void add(int line, AtomKind kind, std::string name) {
    if (line >= lines()) return;
    if (!anchors.empty() && line <= anchors.back().line) return;  // same line as the previous atom
    anchors.push_back({line, kind, std::move(name)});
  }

  std::string_view code_;
  const std::vector<size_t>& starts_;
  std::vector<int8_t> attach_memo_, kind_memo_;  // by symbol: -1 not computed yet
};

struct ParserDeleter {
  void operator()(TSParser* p) const { ts_parser_delete(p); }
};
struct TreeDeleter {
  void operator()(TSTree* t) const { ts_tree_delete(t); }
};
using TreePtr = std::unique_ptr<TSTree, TreeDeleter>;

/// Parses `code` as `lang` (Language::None, a too large input or a timed-out parse: null).
/// `old_tree`, when given, is the tree of the previous version of this code, already
/// edited (ts_tree_edit) to match it: Tree-sitter then reuses its unchanged subtrees (also
/// across different included ranges: it re-parses where they differ). `included`: the
/// byte ranges the parser reads (ts_parser_set_included_ranges), empty for all of it.
TreePtr parse(std::string_view code, Language lang, const TSTree* old_tree, const std::vector<TSRange>& included = {}) {
  const TSLanguage* grammar = ts_language(lang);
  if (!grammar || code.size() >= UINT32_MAX) return nullptr;
  thread_local std::unique_ptr<TSParser, ParserDeleter> parser{ts_parser_new()};
  ts_parser_set_timeout_micros(parser.get(), parse_timeout_us.load(std::memory_order_relaxed));
  if (!ts_parser_set_language(parser.get(), grammar)) return nullptr;
  if (!ts_parser_set_included_ranges(parser.get(), included.empty() ? nullptr : included.data(), static_cast<uint32_t>(included.size())))
    return nullptr;
  TSTree* tree = ts_parser_parse_string(parser.get(), old_tree, code.data(), static_cast<uint32_t>(code.size()));
  if (!tree) ts_parser_reset(parser.get());  // timed out: line blocks
  return TreePtr(tree);
}

/// The atoms of `code` from its tree (`tree` null: line blocks). `starts`: line_starts(code).
/// `split_bodies`, when given, receives Cutter::split_bodies, ascending.
std::shared_ptr<Atomization> cut(std::string_view code, Language lang, const std::vector<size_t>& starts, const TSTree* tree,
                                 std::vector<uint32_t>* split_bodies = nullptr) {
  auto out = std::make_shared<Atomization>();
  out->lang = lang;
  if (starts.empty()) return out;
  Cutter cutter(code, starts);
  if (tree) {
    TSNode root = ts_tree_root_node(tree);
    out->parsed = true;
    out->has_error = ts_node_has_error(root);
    cutter.children(root, 0, 0);
  } else {
    cutter.line_blocks(0, cutter.lines());
  }
  if (split_bodies) {
    *split_bodies = std::move(cutter.split_bodies);
    std::sort(split_bodies->begin(), split_bodies->end());
  }
  std::vector<Anchor>& a = cutter.anchors;
  if (a.empty()) a.push_back({0, AtomKind::Lines, ""});
  a.front().line = 0;  // lines above the first node (a licence, a module docstring) join it
  out->atoms.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    Atom atom;
    atom.kind = a[i].kind;
    atom.name = std::move(a[i].name);
    atom.first_line = a[i].line;
    atom.end_line = i + 1 < a.size() ? a[i + 1].line : cutter.lines();
    atom.begin = starts[static_cast<size_t>(atom.first_line)];
    atom.end = static_cast<size_t>(atom.end_line) < starts.size() ? starts[static_cast<size_t>(atom.end_line)] : code.size();
    atom.hash = content_hash(code.substr(atom.begin, atom.end - atom.begin));
    out->atoms.push_back(std::move(atom));
  }
  return out;
}

/// The previous version of one file: its text, line starts and trees: the skeleton tree
/// (parsed with function bodies skipped; null when none was parsed) and the full tree
/// (null unless the skeleton could not be used, see parse_for_atoms).
struct PreviousVersion {
  TreePtr skeleton;
  TreePtr full;
  std::string text;
  std::vector<size_t> starts;       // line_starts(text)
  std::vector<SkipRange> scanned;   // skippable_ranges(text)
  std::vector<SkipRange> skipped;   // the ranges `skeleton` was parsed without (a subset of `scanned`)
};

/// Row and byte column of byte `offset` of `text` (`starts`: line_starts(text)).
TSPoint point_at(std::string_view text, const std::vector<size_t>& starts, size_t offset) {
  if (starts.empty()) return {0, 0};
  if (offset == text.size() && text.back() == '\n') return {static_cast<uint32_t>(starts.size()), 0};
  const size_t row = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), offset) - starts.begin()) - 1;
  return {static_cast<uint32_t>(row), static_cast<uint32_t>(offset - starts[row])};
}

/// Length of the common prefix of `a` and `b` (64-byte memcmp blocks, then bytes).
size_t common_prefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t p = 0;
  while (p + 64 <= n && std::memcmp(a.data() + p, b.data() + p, 64) == 0) p += 64;
  while (p < n && a[p] == b[p]) ++p;
  return p;
}

/// Length of the common suffix of `a` and `b`, at most `max`.
size_t common_suffix(std::string_view a, std::string_view b, size_t max) {
  size_t s = 0;
  while (s + 64 <= max && std::memcmp(a.data() + a.size() - s - 64, b.data() + b.size() - s - 64, 64) == 0) s += 64;
  while (s < max && a[a.size() - 1 - s] == b[b.size() - 1 - s]) ++s;
  return s;
}

/// The edit that turns `prev`'s text into `code` (`starts`: its line starts) as ts_tree_edit
/// takes it: the bytes between their common prefix and common suffix are replaced.
/// (Byte-exact: an edit widened to whole lines made Tree-sitter re-lex the rest of a Python
/// file after a one-word rename, its external scanner states at the line start no longer
/// matching; 2026-12-03.) One range: a version changed in two distant places re-parses
/// what lies between them.
TSInputEdit byte_edit(const PreviousVersion& prev, std::string_view code, const std::vector<size_t>& starts) {
  const std::string_view old = prev.text;
  const size_t p = common_prefix(old, code);
  const size_t s = common_suffix(old, code, std::min(old.size(), code.size()) - p);
  TSInputEdit e;
  e.start_byte = static_cast<uint32_t>(p);
  e.old_end_byte = static_cast<uint32_t>(old.size() - s);
  e.new_end_byte = static_cast<uint32_t>(code.size() - s);
  e.start_point = point_at(code, starts, p);
  e.old_end_point = point_at(old, prev.starts, old.size() - s);
  e.new_end_point = point_at(code, starts, code.size() - s);
  return e;
}

/// Whether the skeleton tree `tree` confirms every range it skipped: a brace body's
/// `{`..`}` is one node of the tree and not a class-like body whose members decide atoms
/// (`split_bodies`: Cutter::split_bodies, ascending); a Python range lies inside the
/// function_definition whose `def` (or `async`) is at the range's anchor.
bool skeleton_confirmed(const TSTree* tree, const std::vector<SkipRange>& ranges, const std::vector<uint32_t>& split_bodies,
                        Language lang) {
  const TSNode root = ts_tree_root_node(tree);
  for (const SkipRange& r : ranges) {
    if (r.comment) {  // one comment node from the first line's marker over the range
      const TSNode c = ts_node_descendant_for_byte_range(root, r.anchor, r.end);
      if (ts_node_is_null(c) || ts_node_start_byte(c) != r.anchor || ts_node_end_byte(c) < r.end || !contains(ts_node_type(c), "comment"))
        return false;
    } else if (lang == Language::Python) {
      const TSNode kw = ts_node_descendant_for_byte_range(root, r.anchor, r.anchor + 1);
      if (ts_node_is_null(kw) || ts_node_start_byte(kw) != r.anchor) return false;
      const TSNode f = ts_node_parent(kw);
      if (ts_node_is_null(f) || std::strcmp(ts_node_type(f), "function_definition") != 0 || ts_node_end_byte(f) < r.end) return false;
    } else {
      const TSNode b = ts_node_descendant_for_byte_range(root, r.anchor, r.end + 1);
      if (ts_node_is_null(b) || ts_node_start_byte(b) != r.anchor || ts_node_end_byte(b) != r.end + 1) return false;
      if (std::binary_search(split_bodies.begin(), split_bodies.end(), r.anchor)) return false;
    }
  }
  return true;
}

size_t skipped_bytes(const std::vector<SkipRange>& skip) {
  size_t n = 0;
  for (const SkipRange& r : skip) n += r.end - r.begin;
  return n;
}

/// Removes from `skip` the ranges whose anchor lies near an ERROR or MISSING node of
/// `tree`: within the node's statement (its ancestor that is a child of the root or of a
/// class-like body in `split_bodies`), the named sibling before it or the one after it.
/// (Tree-sitter's error recovery weighs the tokens around an error, so a body skipped there
/// could change how the code around it is recovered; further away it cannot, in practice.)
void drop_ranges_near_errors(const TSTree* tree, const std::vector<uint32_t>& split_bodies, std::vector<SkipRange>& skip) {
  std::vector<std::pair<uint32_t, uint32_t>> near;  // byte windows
  const auto is_error = [](TSNode n) { return ts_node_is_missing(n) || std::strcmp(ts_node_type(n), "ERROR") == 0; };
  // Walks only the subtrees that hold an error. `container`: the root or a split body, whose
  // named children are statements; `window`: the statement (with its neighbours) `n` is in.
  const auto walk = [&](auto& self, TSNode n, bool container, std::pair<uint32_t, uint32_t> window) -> void {
    std::vector<TSNode> kids;
    for_each_named_child(n, [&](TSNode c) { kids.push_back(c); });
    for (size_t i = 0; i < kids.size(); ++i) {
      const TSNode c = kids[i];
      if (!ts_node_has_error(c)) continue;
      std::pair<uint32_t, uint32_t> w = window;
      if (container)
        w = {ts_node_start_byte(i > 0 ? kids[i - 1] : c), ts_node_end_byte(i + 1 < kids.size() ? kids[i + 1] : c)};
      if (is_error(c)) {
        near.push_back(w);
        continue;
      }
      self(self, c, std::binary_search(split_bodies.begin(), split_bodies.end(), ts_node_start_byte(c)), w);
    }
    // An error among the anonymous children (a MISSING ";"): the whole window.
    if (ts_node_has_error(n) && std::none_of(kids.begin(), kids.end(), [](TSNode c) { return ts_node_has_error(c); })) near.push_back(window);
  };
  const TSNode root = ts_tree_root_node(tree);
  if (is_error(root)) {
    skip.clear();
    return;
  }
  walk(walk, root, true, {ts_node_start_byte(root), ts_node_end_byte(root)});
  std::erase_if(skip, [&](const SkipRange& r) {
    return std::any_of(near.begin(), near.end(), [&](const auto& w) { return r.anchor >= w.first && r.anchor < w.second; });
  });
}

/// The included ranges (ts_parser_set_included_ranges) that leave out `skip` (ascending,
/// disjoint). `starts`: line_starts(code).
std::vector<TSRange> included_ranges(std::string_view code, const std::vector<size_t>& starts, const std::vector<SkipRange>& skip) {
  std::vector<TSRange> out;
  out.reserve(skip.size() + 1);
  uint32_t from = 0;
  for (const SkipRange& r : skip) {
    if (r.begin > from) out.push_back({point_at(code, starts, from), point_at(code, starts, r.begin), from, r.begin});
    from = r.end;
  }
  out.push_back({point_at(code, starts, from), {UINT32_MAX, UINT32_MAX}, from, UINT32_MAX});
  return out;
}

/// What parse_for_atoms() gives: the atoms and the trees to keep for the next version.
struct ParsedVersion {
  std::shared_ptr<const Atomization> atoms;
  TreePtr skeleton, full;
  std::vector<SkipRange> scanned, skipped;  // as in PreviousVersion
  bool from_skeleton = false;  // the atoms were cut from the skeleton tree
  bool fell_back = false;      // a skeleton was parsed but not usable: a full parse made the atoms
};

/// The atoms of `code` (`starts`: line_starts(code)) as atomize() makes them. Skeleton mode:
/// a parse with the function bodies of skippable_ranges() left out (included ranges); its
/// atoms are used when its tree has no ERROR / MISSING node and confirms every skipped
/// range (skeleton_confirmed), else (or when nothing is skippable) a full parse makes them.
/// Full mode: only the full parse. `prev`, when given, holds the previous version's trees,
/// already edited to match `code`: each parse starts from the one of its kind, else from
/// the other (Tree-sitter re-parses where the included ranges differ).
ParsedVersion parse_for_atoms(std::string_view code, Language lang, const std::vector<size_t>& starts, const PreviousVersion* prev,
                              ParseMode mode, std::optional<std::vector<SkipRange>> scanned = std::nullopt) {
  ParsedVersion out;
  if (starts.empty() || !ts_language(lang)) {
    out.atoms = cut(code, lang, starts, nullptr);
    return out;
  }
  const TSTree* prev_skeleton = prev ? (prev->skeleton ? prev->skeleton.get() : prev->full.get()) : nullptr;
  const TSTree* prev_full = prev ? (prev->full ? prev->full.get() : prev->skeleton.get()) : nullptr;
  if (mode == ParseMode::Skeleton) {
    out.scanned = scanned ? std::move(*scanned) : skippable_ranges(code, lang);
    std::vector<SkipRange> skip = out.scanned;
    const bool tried = !skip.empty();
    // Each round parses without the ranges near the last round's ERROR / MISSING nodes
    // (from the last round's tree: only those bodies are parsed anew).
    for (int round = 0; round < kSkeletonRounds && !skip.empty(); ++round) {
      TreePtr tree = parse(code, lang, out.skeleton ? out.skeleton.get() : prev_skeleton, included_ranges(code, starts, skip));
      out.skeleton = std::move(tree);
      if (!out.skeleton) break;
      std::vector<uint32_t> split_bodies;
      auto atoms = cut(code, lang, starts, out.skeleton.get(), &split_bodies);
      const size_t before = skip.size();
      if (atoms->has_error) drop_ranges_near_errors(out.skeleton.get(), split_bodies, skip);
      if (skip.size() != before) continue;
      if (skeleton_confirmed(out.skeleton.get(), skip, split_bodies, lang)) {
        atoms->skipped_bytes = skipped_bytes(skip);
        out.atoms = std::move(atoms);
        out.from_skeleton = true;
        out.skipped = std::move(skip);
        return out;
      }
      break;
    }
    out.fell_back = tried;
  }
  out.full = parse(code, lang, prev_full);
  out.atoms = cut(code, lang, starts, out.full.get());
  if (!out.full) out.skeleton.reset();  // timed out: line blocks, and nothing kept
  return out;
}

/// `ranges` of the previous version moved by `edit`, which lies inside one of them: that
/// one grows or shrinks by the edit, those after it move.
std::vector<SkipRange> moved_by(const std::vector<SkipRange>& ranges, const TSInputEdit& edit) {
  std::vector<SkipRange> out = ranges;
  const auto move = [&](uint32_t& b) { b = b - edit.old_end_byte + edit.new_end_byte; };
  for (SkipRange& r : out) {
    if (r.begin >= edit.old_end_byte) {
      move(r.begin);
      move(r.anchor);
    }
    if (r.end >= edit.old_end_byte) move(r.end);
  }
  return out;
}

/// Whether `edit` lies inside a range the previous version's skeleton tree skipped, after
/// its first byte (an insertion right at a `{` would lengthen that token in ts_tree_edit).
bool edit_inside_skipped(const PreviousVersion& prev, const TSInputEdit& edit) {
  return std::any_of(prev.skipped.begin(), prev.skipped.end(),
                     [&](const SkipRange& r) { return r.begin < edit.start_byte && edit.old_end_byte <= r.end; });
}

/// A small LRU map under one mutex (most recently used first).
template <class V>
struct Lru {
  std::mutex mu;
  std::list<std::pair<uint64_t, V>> lru;
  std::unordered_map<uint64_t, typename std::list<std::pair<uint64_t, V>>::iterator> index;
};

struct Cache : Lru<std::shared_ptr<const Atomization>> {
  AtomizeCacheStats stats;
};

Cache& cache() {
  static Cache c;
  return c;
}

/// The previous version of each file identity (XXH3-64 of the identity, seeded by the
/// language), kTreeEntries entries and kTreeBytes bytes of text at most.
struct TreeStore : Lru<PreviousVersion> {
  size_t bytes = 0;
};

TreeStore& trees() {
  static TreeStore t;
  return t;
}

/// Takes (removes) the previous version of `key`, so that one thread edits it at a time.
std::optional<PreviousVersion> take_previous(uint64_t key) {
  TreeStore& t = trees();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.index.find(key);
  if (it == t.index.end()) return std::nullopt;
  PreviousVersion v = std::move(it->second->second);
  t.bytes -= v.text.size();
  t.lru.erase(it->second);
  t.index.erase(it);
  return v;
}

void put_previous(uint64_t key, PreviousVersion v) {
  TreeStore& t = trees();
  std::vector<PreviousVersion> evicted;  // their trees are freed outside the lock
  std::lock_guard<std::mutex> lock(t.mu);
  if (auto it = t.index.find(key); it != t.index.end()) {  // another thread stored one meanwhile
    t.bytes -= it->second->second.text.size();
    evicted.push_back(std::move(it->second->second));
    t.lru.erase(it->second);
    t.index.erase(it);
  }
  t.bytes += v.text.size();
  t.lru.emplace_front(key, std::move(v));
  t.index[key] = t.lru.begin();
  while (t.lru.size() > kTreeEntries || (t.bytes > kTreeBytes && t.lru.size() > 1)) {
    t.bytes -= t.lru.back().second.text.size();
    evicted.push_back(std::move(t.lru.back().second));
    t.index.erase(t.lru.back().first);
    t.lru.pop_back();
  }
}

}  // namespace

std::shared_ptr<const Atomization> atomize_uncached(std::string_view code, Language lang, ParseMode mode) {
  const std::vector<size_t> starts = line_starts(code);
  return parse_for_atoms(code, lang, starts, nullptr, mode).atoms;
}

std::shared_ptr<const Atomization> atomize(std::string_view code, Language lang, std::string_view file) {
  const uint64_t key = XXH3_64bits_withSeed(code.data(), code.size(), static_cast<uint64_t>(lang) + 1);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.index.find(key); it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      ++c.stats.hits;
      return it->second->second;
    }
  }
  ParsedVersion parsed;
  bool incremental = false, unparsed = false;
  std::vector<size_t> starts = line_starts(code);
  if (file.empty() || !ts_language(lang) || code.empty()) {
    parsed = parse_for_atoms(code, lang, starts, nullptr, ParseMode::Skeleton);
  } else {
    const uint64_t file_key = XXH3_64bits_withSeed(file.data(), file.size(), static_cast<uint64_t>(lang) + 1);
    std::optional<PreviousVersion> prev = take_previous(file_key);
    std::optional<std::vector<SkipRange>> scanned;
    if (prev) {
      const TSInputEdit edit = byte_edit(*prev, code, starts);
      if (prev->skeleton) ts_tree_edit(prev->skeleton.get(), &edit);
      if (prev->full) ts_tree_edit(prev->full.get(), &edit);
      // An edit inside a skipped body that leaves the skippable ranges as they were (moved by
      // the edit) leaves the bytes the skeleton parse reads as they were: a fresh parse
      // would give the edited tree (the same tokens, moved), so it is cut as it is.
      if (prev->skeleton && !prev->full && edit_inside_skipped(*prev, edit)) {
        scanned = skippable_ranges(code, lang);
        if (*scanned == moved_by(prev->scanned, edit)) {
          auto atoms = cut(code, lang, starts, prev->skeleton.get());
          parsed.skipped = moved_by(prev->skipped, edit);
          atoms->skipped_bytes = skipped_bytes(parsed.skipped);
          parsed.atoms = std::move(atoms);
          parsed.skeleton = std::move(prev->skeleton);
          parsed.scanned = std::move(*scanned);
          parsed.from_skeleton = unparsed = true;
        }
      }
    }
    if (!parsed.atoms) parsed = parse_for_atoms(code, lang, starts, prev ? &*prev : nullptr, ParseMode::Skeleton, std::move(scanned));
    incremental = prev && (parsed.skeleton || parsed.full);
    prev.reset();  // the old trees, freed outside any lock
    // The trees to start the next version from: the skeleton's alone when it made the atoms.
    if (parsed.from_skeleton) parsed.full.reset();
    if (parsed.skeleton || parsed.full)
      put_previous(file_key, {std::move(parsed.skeleton), std::move(parsed.full), std::string(code), std::move(starts),
                              std::move(parsed.scanned), std::move(parsed.skipped)});
  }
  std::shared_ptr<const Atomization> result = std::move(parsed.atoms);
  std::lock_guard<std::mutex> lock(c.mu);
  ++c.stats.parses;
  c.stats.incremental += incremental;
  c.stats.skeleton += parsed.from_skeleton;
  c.stats.fallbacks += parsed.fell_back;
  c.stats.unparsed += unparsed;
  if (c.index.count(key)) return result;
  c.lru.emplace_front(key, result);
  c.index[key] = c.lru.begin();
  if (c.lru.size() > kCacheEntries) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
  return result;
}

uint64_t set_parse_timeout_micros(uint64_t micros) { return parse_timeout_us.exchange(micros); }

AtomizeCacheStats atomize_cache_stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

}  // namespace swz::frontend_ast
