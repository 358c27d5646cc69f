#include "frontend_ast/atomize.h"

#include <tree_sitter/api.h>
#include <xxhash.h>

#include <algorithm>
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
// The previous trees kept (TreeStore): at most 64 files and 4 MiB of source. A Tree-sitter
// tree takes 18-35 bytes of heap per source byte (measured 2026-12-03 on the bench files:
// gtest.cc's 256 KB, 4.6 MB), so about 100 MB at most.
constexpr size_t kTreeEntries = 64;
constexpr size_t kTreeBytes = size_t{4} << 20;
constexpr int kMaxSplitDepth = 2;   // class -> members, namespace -> class -> members
// A parse that takes longer (a pathological input) is given up: line blocks. A whole number
// of seconds on purpose: Debian's Tree-sitter 0.20.7 adds the timeout's sub-second part to
// tv_nsec without carrying into tv_sec (clock.h; fixed upstream in eb549a89a, after 0.20.7),
// so a 500 ms timeout expired whenever a parse crossed a second boundary: 5 of 100 parses
// of gtest.cc (60 ms each) came back null, 0 of 100 with 1 s (measured 2026-12-03).
// Not worked around: 0.20.7 releases a null lookahead when the timeout fires right after a
// non-terminal extra (only Rust's grammar has them: its comments), a null dereference fixed
// upstream in 5337a678f (0.20.8); a Rust input whose parse really takes over 1 s can crash.
constexpr uint64_t kParseTimeoutUs = 1'000'000;

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
  for (size_t i = 0; i + 1 < code.size(); ++i)
    if (code[i] == '\n') starts.push_back(i + 1);
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

TSNode field(TSNode n, const char* name) {
  return ts_node_child_by_field_name(n, name, static_cast<uint32_t>(std::strlen(name)));
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
      if (is_attachable(t)) {
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
      const AtomKind kind = classify(ts_node_type(def));
      if (kind == AtomKind::Import && have_prev && prev == AtomKind::Import) return;  // one import group
      prev = kind;
      have_prev = true;
      if (anchor < min_line) return;
      add(anchor, depth > 0 && kind == AtomKind::Definition ? AtomKind::Definition : kind, name_of(def));
      if (kind == AtomKind::Class && depth < kMaxSplitDepth) {
        TSNode body = field(def, "body");
        if (!ts_node_is_null(body) && members(body) >= 2) children(body, depth + 1, anchor + 1);
      }
    });
  }

  std::vector<Anchor> anchors;

 private:
  int last_row(TSNode n) const {
    const TSPoint e = ts_node_end_point(n);
    const int row = static_cast<int>(e.row);
    return e.column == 0 && row > static_cast<int>(ts_node_start_point(n).row) ? row - 1 : row;
  }

  static uint32_t members(TSNode body) {
    uint32_t n = 0;
    for_each_named_child(body, [&](TSNode c) { n += !is_attachable(ts_node_type(c)); });
    return n;
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
/// edited (ts_tree_edit) to match it: Tree-sitter then reuses its unchanged subtrees.
TreePtr parse(std::string_view code, Language lang, const TSTree* old_tree) {
  const TSLanguage* grammar = ts_language(lang);
  if (!grammar || code.size() >= UINT32_MAX) return nullptr;
  thread_local std::unique_ptr<TSParser, ParserDeleter> parser{ts_parser_new()};
  ts_parser_set_timeout_micros(parser.get(), kParseTimeoutUs);
  if (!ts_parser_set_language(parser.get(), grammar)) return nullptr;
  TSTree* tree = ts_parser_parse_string(parser.get(), old_tree, code.data(), static_cast<uint32_t>(code.size()));
  if (!tree) ts_parser_reset(parser.get());  // timed out: line blocks
  return TreePtr(tree);
}

/// The atoms of `code` from its tree (`tree` null: line blocks). `starts`: line_starts(code).
std::shared_ptr<Atomization> cut(std::string_view code, Language lang, const std::vector<size_t>& starts, const TSTree* tree) {
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

/// The previous version of one file: its tree, and what is needed to describe an edit of
/// it to Tree-sitter without keeping its text (XXH3-64 of each line, '\n' included).
struct PreviousVersion {
  TreePtr tree;
  std::vector<uint64_t> line_hashes;
  uint32_t bytes = 0;
  TSPoint end{};  // row and byte column of the text's end
};

std::vector<uint64_t> line_hashes(std::string_view code, const std::vector<size_t>& starts) {
  std::vector<uint64_t> h(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t e = i + 1 < starts.size() ? starts[i + 1] : code.size();
    h[i] = XXH3_64bits(code.data() + starts[i], e - starts[i]);
  }
  return h;
}

TSPoint end_point(std::string_view code, const std::vector<size_t>& starts) {
  if (starts.empty()) return {0, 0};
  if (code.back() == '\n') return {static_cast<uint32_t>(starts.size()), 0};
  return {static_cast<uint32_t>(starts.size() - 1), static_cast<uint32_t>(code.size() - starts.back())};
}

/// The edit that turns `prev`'s text into `code`, at line granularity: the lines before
/// the first changed line and after the last one are unchanged (equal line hashes); the
/// range between is replaced. Byte offsets and points as ts_tree_edit takes them.
TSInputEdit line_edit(const PreviousVersion& prev, std::string_view code, const std::vector<size_t>& starts,
                      const std::vector<uint64_t>& hashes) {
  const std::vector<uint64_t>& old = prev.line_hashes;
  const size_t n_old = old.size(), n_new = hashes.size();
  size_t p = 0;
  while (p < n_old && p < n_new && old[p] == hashes[p]) ++p;
  size_t s = 0;
  while (s < n_old - p && s < n_new - p && old[n_old - 1 - s] == hashes[n_new - 1 - s]) ++s;
  // The common prefix lines end in '\n' unless they are the whole of both texts (no edit).
  const uint32_t start = p < n_new ? static_cast<uint32_t>(starts[p]) : static_cast<uint32_t>(code.size());
  const uint32_t suffix = s ? static_cast<uint32_t>(code.size() - starts[n_new - s]) : 0;
  TSInputEdit e;
  e.start_byte = start;
  e.old_end_byte = prev.bytes - suffix;
  e.new_end_byte = static_cast<uint32_t>(code.size()) - suffix;
  e.start_point = p < n_new ? TSPoint{static_cast<uint32_t>(p), 0} : end_point(code, starts);
  e.old_end_point = s ? TSPoint{static_cast<uint32_t>(n_old - s), 0} : prev.end;
  e.new_end_point = s ? TSPoint{static_cast<uint32_t>(n_new - s), 0} : end_point(code, starts);
  return e;
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
/// language), kTreeEntries entries and kTreeBytes bytes of source at most.
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
  t.bytes -= v.bytes;
  t.lru.erase(it->second);
  t.index.erase(it);
  return v;
}

void put_previous(uint64_t key, PreviousVersion v) {
  TreeStore& t = trees();
  std::vector<PreviousVersion> evicted;  // their trees are freed outside the lock
  std::lock_guard<std::mutex> lock(t.mu);
  if (auto it = t.index.find(key); it != t.index.end()) {  // another thread stored one meanwhile
    t.bytes -= it->second->second.bytes;
    evicted.push_back(std::move(it->second->second));
    t.lru.erase(it->second);
    t.index.erase(it);
  }
  t.bytes += v.bytes;
  t.lru.emplace_front(key, std::move(v));
  t.index[key] = t.lru.begin();
  while (t.lru.size() > kTreeEntries || (t.bytes > kTreeBytes && t.lru.size() > 1)) {
    t.bytes -= t.lru.back().second.bytes;
    evicted.push_back(std::move(t.lru.back().second));
    t.index.erase(t.lru.back().first);
    t.lru.pop_back();
  }
}

}  // namespace

std::shared_ptr<const Atomization> atomize_uncached(std::string_view code, Language lang) {
  const std::vector<size_t> starts = line_starts(code);
  const TreePtr tree = starts.empty() ? nullptr : parse(code, lang, nullptr);
  return cut(code, lang, starts, tree.get());
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
  std::shared_ptr<const Atomization> result;
  bool incremental = false;
  if (file.empty() || !ts_language(lang) || code.empty()) {
    result = atomize_uncached(code, lang);
  } else {
    const uint64_t file_key = XXH3_64bits_withSeed(file.data(), file.size(), static_cast<uint64_t>(lang) + 1);
    const std::vector<size_t> starts = line_starts(code);
    std::vector<uint64_t> hashes = line_hashes(code, starts);
    std::optional<PreviousVersion> prev = take_previous(file_key);
    if (prev) {
      const TSInputEdit edit = line_edit(*prev, code, starts, hashes);
      ts_tree_edit(prev->tree.get(), &edit);
    }
    TreePtr tree = parse(code, lang, prev ? prev->tree.get() : nullptr);
    incremental = prev && tree;
    result = cut(code, lang, starts, tree.get());
    prev.reset();  // the old tree, freed outside any lock
    if (tree) put_previous(file_key, {std::move(tree), std::move(hashes), static_cast<uint32_t>(code.size()), end_point(code, starts)});
  }
  std::lock_guard<std::mutex> lock(c.mu);
  ++c.stats.parses;
  c.stats.incremental += incremental;
  if (c.index.count(key)) return result;
  c.lru.emplace_front(key, result);
  c.index[key] = c.lru.begin();
  if (c.lru.size() > kCacheEntries) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
  return result;
}

AtomizeCacheStats atomize_cache_stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

}  // namespace swz::frontend_ast
