// frontend_ast: every grammar parses real code of its language into the expected atoms,
// broken code falls back to line blocks, code is found in fences and in numbered tool
// output, and the reorder rewrite keeps unchanged atoms' order after an early edit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <sstream>

#include "frontend_ast/atomize.h"
#include "frontend_ast/code_regions.h"
#include "frontend_ast/language.h"
#include "frontend_ast/reorder.h"

namespace fa = swz::frontend_ast;
using fa::AtomKind;
using fa::Language;

void expect_same_atoms(const fa::Atomization& a, const fa::Atomization& b, const std::string& what);

namespace {

struct Expect {
  AtomKind kind;
  std::string name;  // "" = not checked
};

/// The atoms' kinds and names, that they partition the code, and that they are a full
/// parse's (atomize() may skip function bodies).
void expect_atoms(const std::string& code, Language lang, const std::vector<Expect>& want) {
  auto az = fa::atomize(code, lang);
  expect_same_atoms(*az, *fa::atomize_uncached(code, lang, fa::ParseMode::Full), std::string(fa::language_name(lang)) + " vs a full parse");
  ASSERT_TRUE(az->parsed) << fa::language_name(lang);
  EXPECT_FALSE(az->has_error) << fa::language_name(lang);
  ASSERT_EQ(az->atoms.size(), want.size()) << fa::language_name(lang);
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const fa::Atom& a = az->atoms[i];
    EXPECT_EQ(a.begin, at) << i;
    at = a.end;
    EXPECT_EQ(fa::atom_kind_name(a.kind), fa::atom_kind_name(want[i].kind)) << fa::language_name(lang) << " atom " << i << ": "
                                                                               << code.substr(a.begin, a.end - a.begin);
    if (!want[i].name.empty()) {
      EXPECT_EQ(a.name, want[i].name) << i;
    }
  }
  EXPECT_EQ(at, code.size());
}

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::filesystem::path grammar_file(const std::string& glob_dir, const std::string& rel) {
  for (const auto& e : std::filesystem::directory_iterator(SWZ_GRAMMAR_SRC_DIR))
    if (e.path().filename().string().rfind(glob_dir, 0) == 0) return e.path() / rel;
  return {};
}

}  // namespace

TEST(Language, FromTagPathAndContent) {
  EXPECT_EQ(fa::language_from_tag("Python"), Language::Python);
  EXPECT_EQ(fa::language_from_tag("c++"), Language::Cpp);
  EXPECT_EQ(fa::language_from_tag("ts"), Language::TypeScript);
  EXPECT_EQ(fa::language_from_tag("text"), Language::None);
  EXPECT_EQ(fa::language_from_path("src/lib.rs"), Language::Rust);
  EXPECT_EQ(fa::language_from_path("a/B.java"), Language::Java);
  EXPECT_EQ(fa::language_from_path("x.tsx"), Language::Tsx);
  EXPECT_EQ(fa::language_from_path("Makefile"), Language::None);
  EXPECT_EQ(fa::language_from_content("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tx := 1\n\tfmt.Println(x)\n}\n"),
            Language::Go);
  EXPECT_EQ(fa::language_from_content("use std::io;\n\nfn main() {\n    let mut s = String::new();\n}\n"), Language::Rust);
  EXPECT_EQ(fa::language_from_content("import os\n\ndef main():\n    return os.getcwd()\n"), Language::Python);
  EXPECT_EQ(fa::language_from_content("#include <vector>\nnamespace a {\ntemplate <class T> T f(std::vector<T> v);\n}\n"),
            Language::Cpp);
  EXPECT_EQ(fa::language_from_content("#include <stdio.h>\ntypedef struct { int x; } P;\nint main(void) { return 0; }\n"),
            Language::C);
  EXPECT_EQ(fa::language_from_content("The quick brown fox jumps over the lazy dog.\nNothing here is code."), Language::None);
}

TEST(Atomize, Python) {
  const std::string code =
      "\"\"\"Module docstring.\"\"\"\n"
      "import os\n"
      "from typing import List\n"
      "\n"
      "LIMIT = 10\n"
      "\n"
      "\n"
      "# Reads a file.\n"
      "def read(path: str) -> str:\n"
      "    with open(path) as f:\n"
      "        return f.read()\n"
      "\n"
      "\n"
      "@dataclass\n"
      "class Point:\n"
      "    x: int\n"
      "    y: int\n"
      "\n"
      "    def norm(self) -> float:\n"
      "        return (self.x ** 2 + self.y ** 2) ** 0.5\n";
  // The docstring (an expression statement) opens the file: the imports' group follows it.
  expect_atoms(code, Language::Python,
               {{AtomKind::Definition, ""},
                {AtomKind::Import, ""},
                {AtomKind::Definition, ""},
                {AtomKind::Function, "read"},
                {AtomKind::Class, "Point"},  // split into its header and members
                {AtomKind::Definition, ""},
                {AtomKind::Definition, ""},
                {AtomKind::Function, "norm"}});
  auto az = fa::atomize(code, Language::Python);
  EXPECT_EQ(az->atoms[3].first_line, 7);  // the comment above `def read` belongs to it
  EXPECT_EQ(az->atoms[4].first_line, 13);  // the decorator belongs to the class
}

TEST(Atomize, C) {
  const std::string code =
      "#include <stdio.h>\n#include <stdlib.h>\n\n"
      "typedef struct node {\n  int value;\n  struct node *next;\n} node;\n\n"
      "static int count(const node *n) {\n  int k = 0;\n  for (; n; n = n->next) ++k;\n  return k;\n}\n\n"
      "int main(void) {\n  printf(\"%d\\n\", count(NULL));\n  return 0;\n}\n";
  expect_atoms(code, Language::C,
               {{AtomKind::Import, ""}, {AtomKind::Definition, ""}, {AtomKind::Function, ""}, {AtomKind::Function, ""}});
}

TEST(Atomize, Cpp) {
  const std::string code =
      "#include <string>\n#include <vector>\n\n"
      "namespace demo {\n\n"
      "class Stack {\n public:\n  void push(int v) { items_.push_back(v); }\n  int pop() {\n    int v = items_.back();\n"
      "    items_.pop_back();\n    return v;\n  }\n\n private:\n  std::vector<int> items_;\n};\n\n"
      "template <class T>\nT twice(T x) {\n  return x + x;\n}\n\n"
      "}  // namespace demo\n";
  auto az = fa::atomize(code, Language::Cpp);
  ASSERT_TRUE(az->parsed);
  EXPECT_FALSE(az->has_error);
  ASSERT_GE(az->atoms.size(), 4u);
  EXPECT_EQ(az->atoms[0].kind, AtomKind::Import);
  EXPECT_EQ(az->atoms[1].kind, AtomKind::Class);  // the namespace, split into its members
  bool saw_template_function = false, saw_class = false;
  for (const auto& a : az->atoms) {
    if (a.kind == AtomKind::Function && code.substr(a.begin, a.end - a.begin).find("template <class T>") != std::string::npos)
      saw_template_function = true;
    if (a.kind == AtomKind::Class && a.name == "Stack") saw_class = true;
  }
  EXPECT_TRUE(saw_template_function);
  EXPECT_TRUE(saw_class);
}

TEST(Atomize, JavaScript) {
  const std::string code =
      "const fs = require('fs');\nimport path from 'path';\nimport { a } from './a.js';\n\n"
      "export function load(file) {\n  return fs.readFileSync(path.resolve(file), 'utf8');\n}\n\n"
      "class Cache {\n  constructor() {\n    this.map = new Map();\n  }\n  get(k) {\n    return this.map.get(k);\n  }\n}\n\n"
      "const greet = (name) => `hello ${name}`;\n";
  expect_atoms(code, Language::JavaScript,
               {{AtomKind::Definition, ""},
                {AtomKind::Import, ""},
                {AtomKind::Function, "load"},
                {AtomKind::Class, "Cache"},
                {AtomKind::Function, "constructor"},
                {AtomKind::Function, "get"},
                {AtomKind::Definition, ""}});
}

TEST(Atomize, TypeScript) {
  const std::string code =
      "import { readFile } from 'fs/promises';\n\n"
      "export interface User {\n  id: number;\n  name: string;\n}\n\n"
      "type Id = number | string\n\n"
      "export async function loadUser(id: Id): Promise<User> {\n  const raw = await readFile(`users/${id}.json`, 'utf8')\n"
      "  return JSON.parse(raw) as User\n}\n\n"
      "export class Repo<T extends { id: number }> {\n  private items: T[] = [];\n"
      "  add(item: T): void {\n    this.items.push(item)\n  }\n}\n";
  expect_atoms(code, Language::TypeScript,
               {{AtomKind::Import, ""},
                {AtomKind::Class, "User"},
                {AtomKind::Definition, "id"},
                {AtomKind::Definition, "name"},
                {AtomKind::Definition, ""},
                {AtomKind::Function, "loadUser"},
                {AtomKind::Class, "Repo"},
                {AtomKind::Definition, ""},
                {AtomKind::Function, "add"}});
  // The same in TSX, with JSX.
  const std::string tsx = "import React from 'react';\n\nexport function Hello(p: { name: string }) {\n  return <b>{p.name}</b>;\n}\n";
  expect_atoms(tsx, Language::Tsx, {{AtomKind::Import, ""}, {AtomKind::Function, "Hello"}});
}

TEST(Atomize, Go) {
  const std::string code =
      "package main\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\n"
      "// Point is a 2-D point.\ntype Point struct {\n\tX, Y int\n}\n\n"
      "func (p Point) String() string {\n\treturn fmt.Sprintf(\"(%d, %d)\", p.X, p.Y)\n}\n\n"
      "func main() {\n\tfmt.Println(strings.ToUpper(Point{1, 2}.String()))\n}\n";
  expect_atoms(code, Language::Go,
               {{AtomKind::Import, ""}, {AtomKind::Definition, ""}, {AtomKind::Function, "String"}, {AtomKind::Function, "main"}});
  auto az = fa::atomize(code, Language::Go);
  EXPECT_EQ(az->atoms[1].first_line, 7);  // with its doc comment
}

TEST(Atomize, Rust) {
  const std::string code =
      "use std::collections::HashMap;\nuse std::fmt;\n\n"
      "#[derive(Debug, Clone)]\npub struct Counter {\n    counts: HashMap<String, usize>,\n}\n\n"
      "impl Counter {\n    pub fn new() -> Self {\n        Counter { counts: HashMap::new() }\n    }\n\n"
      "    pub fn add(&mut self, word: &str) {\n        *self.counts.entry(word.to_string()).or_insert(0) += 1;\n    }\n}\n\n"
      "fn main() {\n    let mut c = Counter::new();\n    c.add(\"a\");\n    println!(\"{:?}\", c);\n}\n";
  expect_atoms(code, Language::Rust,
               {{AtomKind::Import, ""},
                {AtomKind::Class, "Counter"},
                {AtomKind::Class, ""},
                {AtomKind::Function, "new"},
                {AtomKind::Function, "add"},
                {AtomKind::Function, "main"}});
  auto az = fa::atomize(code, Language::Rust);
  EXPECT_EQ(az->atoms[1].first_line, 3);  // the attribute belongs to the struct
}

TEST(Atomize, Java) {
  const std::string code =
      "package com.example;\n\nimport java.util.ArrayList;\nimport java.util.List;\n\n"
      "public class Inventory {\n    private final List<String> items = new ArrayList<>();\n\n"
      "    /** Adds one item. */\n    public void add(String item) {\n        items.add(item);\n    }\n\n"
      "    public int size() {\n        return items.size();\n    }\n}\n";
  expect_atoms(code, Language::Java,
               {{AtomKind::Import, ""},
                {AtomKind::Class, "Inventory"},
                {AtomKind::Definition, ""},
                {AtomKind::Function, "add"},
                {AtomKind::Function, "size"}});
}

TEST(Atomize, RealSourcesFromTheGrammarSdists) {
  // Real C: tree-sitter-python's external scanner; real Python: py-tree-sitter's package.
  const std::string c = read(grammar_file("tree_sitter_python-", "src/scanner.c"));
  ASSERT_GT(c.size(), 5000u);
  auto az = fa::atomize(c, Language::C);
  EXPECT_TRUE(az->parsed);
  EXPECT_FALSE(az->has_error);
  int functions = 0;
  for (const auto& a : az->atoms) functions += a.kind == AtomKind::Function;
  EXPECT_GE(functions, 5);
  EXPECT_EQ(az->atoms.front().kind, AtomKind::Import);
  const std::string py = read(grammar_file("tree-sitter-", "setup.py"));
  ASSERT_GT(py.size(), 200u);
  auto pz = fa::atomize(py, Language::Python);
  EXPECT_FALSE(pz->has_error);
  EXPECT_GE(pz->atoms.size(), 2u);
  EXPECT_EQ(fa::language_from_content(py), Language::Python);
  EXPECT_EQ(fa::language_from_content(c), Language::C);
}

/// The first file matching `dir_glob_prefix`*/`rel` under `root` (empty if none).
std::filesystem::path installed_file(const std::string& root, const std::string& prefix, const std::string& rel) {
  if (!std::filesystem::is_directory(root)) return {};
  for (const auto& e : std::filesystem::directory_iterator(root))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && std::filesystem::exists(e.path() / rel)) return e.path() / rel;
  return {};
}

TEST(Atomize, RealSourcesFromDebianPackagesOfTheSetup) {
  // Rust: the blake3 crate's sources (librust-blake3-dev); C++: GoogleTest's (libgtest-dev).
  // Both are in scripts/setup.sh's APT_PKGS, so a missing file is a failure, not a skip.
  const auto rs = installed_file("/usr/share/cargo/registry", "blake3-", "src/lib.rs");
  ASSERT_FALSE(rs.empty()) << "apt-get install librust-blake3-dev";
  const std::string rust = read(rs);
  auto rz = fa::atomize(rust, Language::Rust);
  EXPECT_TRUE(rz->parsed);
  EXPECT_FALSE(rz->has_error);
  int rust_functions = 0, rust_types = 0;
  for (const auto& a : rz->atoms) {
    rust_functions += a.kind == AtomKind::Function;
    rust_types += a.kind == AtomKind::Class;
  }
  EXPECT_GE(rust_functions, 20);  // blake3's hash(), keyed_hash(), Hasher methods, ...
  EXPECT_GE(rust_types, 5);       // Hash, Hasher, OutputReader and their impls
  EXPECT_EQ(fa::language_from_content(rust), Language::Rust);

  const std::filesystem::path cc = "/usr/src/googletest/googletest/src/gtest-printers.cc";
  ASSERT_TRUE(std::filesystem::exists(cc)) << "apt-get install libgtest-dev";
  const std::string cpp = read(cc);
  auto cz = fa::atomize(cpp, Language::Cpp);
  EXPECT_TRUE(cz->parsed);
  int cpp_functions = 0;
  for (const auto& a : cz->atoms) cpp_functions += a.kind == AtomKind::Function;
  // Real C++ with its macros (GTEST_API_, ...) holds a few ERROR nodes: those parts are
  // line blocks, the rest stays AST atoms.
  size_t line_bytes = 0;
  for (const auto& a : cz->atoms)
    if (a.kind == AtomKind::Lines) line_bytes += a.end - a.begin;
  std::printf("gtest-printers.cc: %zu atoms, %zu of %zu bytes in line blocks\n", cz->atoms.size(), line_bytes, cpp.size());
  EXPECT_LT(line_bytes * 4, cpp.size());
  EXPECT_GE(cpp_functions, 10);
  EXPECT_EQ(cz->atoms.front().kind, AtomKind::Import);
}

TEST(Atomize, BrokenCodeFallsBackToLineBlocks) {
  const std::string code = "def ok():\n    return 1\n\nclass (((:\n  ]]]\n\n  }}} oops\n\ndef fine():\n    return 2\n";
  auto az = fa::atomize(code, Language::Python);
  EXPECT_TRUE(az->has_error);
  ASSERT_FALSE(az->atoms.empty());
  EXPECT_EQ(az->atoms.back().end, code.size());
  bool lines = false;
  for (const auto& a : az->atoms) lines |= a.kind == AtomKind::Lines;
  EXPECT_TRUE(lines);
  // Not code at all: line blocks split at blank lines.
  const std::string prose = "first paragraph\nstill first\n\nsecond paragraph\n";
  auto pz = fa::atomize(prose, Language::None);
  ASSERT_EQ(pz->atoms.size(), 2u);
  EXPECT_EQ(pz->atoms[1].kind, AtomKind::Lines);
  EXPECT_EQ(pz->atoms[1].first_line, 3);
  EXPECT_TRUE(fa::atomize("", Language::Go)->atoms.empty());
}

TEST(Atomize, CachedByContentHash) {
  const std::string code = "fn unique_for_cache_test() -> u32 { 7 }\nfn two() -> u32 { 2 }\n";
  const auto before = fa::atomize_cache_stats();
  auto a = fa::atomize(code, Language::Rust);
  auto b = fa::atomize(code, Language::Rust);
  const auto after = fa::atomize_cache_stats();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(after.parses - before.parses, 1u);
  EXPECT_EQ(after.hits - before.hits, 1u);
}

/// Atomizations `a` and `b` are the same: flags and every atom's fields.
void expect_same_atoms(const fa::Atomization& a, const fa::Atomization& b, const std::string& what) {
  EXPECT_EQ(a.parsed, b.parsed) << what;
  EXPECT_EQ(a.has_error, b.has_error) << what;
  ASSERT_EQ(a.atoms.size(), b.atoms.size()) << what;
  for (size_t i = 0; i < a.atoms.size(); ++i) {
    const fa::Atom &x = a.atoms[i], &y = b.atoms[i];
    EXPECT_TRUE(x.kind == y.kind && x.first_line == y.first_line && x.end_line == y.end_line && x.begin == y.begin &&
                x.end == y.end && x.name == y.name && x.hash == y.hash)
        << what << ": atom " << i << " lines " << x.first_line << ".." << x.end_line << " '" << x.name << "' vs " << y.first_line
        << ".." << y.end_line << " '" << y.name << "'";
  }
}

/// Byte offset of the start of the line holding `frac` of the text's bytes.
size_t line_at(const std::string& code, double frac) {
  const size_t at = static_cast<size_t>(static_cast<double>(code.size()) * frac);
  const size_t nl = code.rfind('\n', at);
  return nl == std::string::npos ? 0 : nl + 1;
}

/// The edits a coding agent makes, at a line: an identifier renamed, the line duplicated,
/// the line deleted, a comment line inserted, a syntax error (an unbalanced bracket).
std::string edited(const std::string& code, size_t line, int kind, std::string_view comment) {
  const size_t eol = std::min(code.find('\n', line), code.size());
  std::string out = code;
  switch (kind) {
    case 0: {  // rename: the first identifier of 3+ characters on the line gets "_v2"
      size_t i = line;
      while (i < eol) {
        size_t j = i;
        while (j < eol && (std::isalnum(static_cast<unsigned char>(code[j])) || code[j] == '_')) ++j;
        if (j - i >= 3 && !std::isdigit(static_cast<unsigned char>(code[i]))) return out.insert(j, "_v2");
        i = j + 1;
      }
      return out.insert(line, std::string(comment) + "renamed nothing\n");
    }
    case 1: return out.insert(line, code.substr(line, eol + 1 - line));
    case 2: return out.erase(line, eol + 1 - line);
    case 3: return out.insert(line, std::string(comment) + "a comment the agent added\n");
    default: return out.insert(line, "(((\n");
  }
}

TEST(Atomize, IncrementalReparseOfEditedRealFilesEqualsAFreshParse) {
  // Real files of four grammars: Python's textwrap (libpython3.11-minimal, under the
  // setup's python3-venv), Tree-sitter's own subtree.c (py-tree-sitter sdist), blake3's
  // lib.rs and GoogleTest's gtest-printers.cc (C++ with ERROR nodes: GTEST_API_ macros).
  struct Case {
    std::filesystem::path path;
    Language lang;
  };
  const std::vector<Case> cases = {
      {"/usr/lib/python3.11/textwrap.py", Language::Python},
      {grammar_file("tree-sitter-", "tree_sitter/core/lib/src/subtree.c"), Language::C},
      {installed_file("/usr/share/cargo/registry", "blake3-", "src/lib.rs"), Language::Rust},
      {"/usr/src/googletest/googletest/src/gtest-printers.cc", Language::Cpp},
  };
  const auto before = fa::atomize_cache_stats();
  std::set<std::string> versions;  // distinct versions atomized after the first of each file
  for (const Case& c : cases) {
    ASSERT_TRUE(!c.path.empty() && std::filesystem::exists(c.path)) << c.path;
    const std::string original = read(c.path);
    const std::string file = "incremental-test/" + c.path.filename().string();
    const std::string_view comment = fa::line_comment(c.lang);
    // One chain of versions under one file identity, as turns of an agent session: each
    // version is an edit of the previous one (a syntax error, then its repair, included).
    // (The first version gets a line of its own: other tests atomized the original, and a
    // version the content cache answers is not parsed, so it leaves no tree behind.)
    std::string code = original + std::string(comment) + "first version\n";
    fa::atomize(code, c.lang, file);
    for (double frac : {0.0, 0.1, 0.5, 0.9, 1.0}) {
      for (int kind = 0; kind < 5; ++kind) {
        const std::string next = edited(code, line_at(code, frac), kind, comment);
        const std::string what = c.path.string() + " at " + std::to_string(frac) + " edit " + std::to_string(kind);
        auto inc = fa::atomize(next, c.lang, file);
        expect_same_atoms(*inc, *fa::atomize_uncached(next, c.lang), what);
        versions.insert(next);  // a deletion after a duplication is the version before: a cache hit
        if (kind == 4) {  // repaired: back to the version before the error
          auto back = fa::atomize(code, c.lang, file);
          expect_same_atoms(*back, *fa::atomize_uncached(code, c.lang), what + " repaired");
        } else {
          code = next;
        }
      }
    }
    // A version far from the last one (the original plus a line, after 25 edits).
    auto far = fa::atomize(original + std::string(comment) + "far\n", c.lang, file);
    expect_same_atoms(*far, *fa::atomize_uncached(original + std::string(comment) + "far\n", c.lang), c.path.string() + " far");
    versions.insert(original + std::string(comment) + "far\n");
  }
  const auto after = fa::atomize_cache_stats();
  // Every new version was parsed from the previous version's tree.
  EXPECT_EQ(after.incremental - before.incremental, versions.size());
}

TEST(Atomize, ConcurrentVersionsOfOneFileEqualAFreshParse) {
  // Four threads send versions of one file under one identity at once: each takes the kept
  // tree, or parses afresh when another thread holds it; every result equals a fresh parse.
  const std::string original = read(grammar_file("tree-sitter-", "tree_sitter/core/lib/src/subtree.c"));
  ASSERT_GT(original.size(), 10000u);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const std::string v = edited(original, line_at(original, 0.15 * i), i % 4, "// ") + "// thread " + std::to_string(t) + "\n";
        const auto inc = fa::atomize(v, Language::C, "concurrent-test/subtree.c");
        const auto fresh = fa::atomize_uncached(v, Language::C);
        bool same = inc->atoms.size() == fresh->atoms.size();
        for (size_t a = 0; same && a < inc->atoms.size(); ++a) same = inc->atoms[a].hash == fresh->atoms[a].hash && inc->atoms[a].begin == fresh->atoms[a].begin;
        if (!same) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

/// The atoms of a skeleton parse equal a full parse's: kind, lines, bytes, name and hash of
/// each (has_error may differ: a skeleton parse does not see errors inside skipped bodies,
/// but never sees more). Returns whether the skeleton skipped anything.
bool expect_skeleton_equals_full(const std::string& code, Language lang, const std::string& what) {
  const auto sk = fa::atomize_uncached(code, lang, fa::ParseMode::Skeleton);
  const auto full = fa::atomize_uncached(code, lang, fa::ParseMode::Full);
  EXPECT_EQ(sk->parsed, full->parsed) << what;
  EXPECT_TRUE(!sk->has_error || full->has_error) << what;
  EXPECT_EQ(full->skipped_bytes, 0u) << what;
  EXPECT_EQ(sk->atoms.size(), full->atoms.size()) << what;
  for (size_t i = 0; i < std::min(sk->atoms.size(), full->atoms.size()); ++i) {
    const fa::Atom &x = sk->atoms[i], &y = full->atoms[i];
    EXPECT_TRUE(x.kind == y.kind && x.first_line == y.first_line && x.end_line == y.end_line && x.begin == y.begin && x.end == y.end &&
                x.name == y.name && x.hash == y.hash)
        << what << ": atom " << i << " lines " << x.first_line << ".." << x.end_line << " '" << x.name << "' vs " << y.first_line << ".."
        << y.end_line << " '" << y.name << "'";
  }
  return sk->skipped_bytes > 0;
}

TEST(Skeleton, RealFilesGiveTheAtomsOfAFullParse) {
  // Every real file the other tests use, and their neighbours: C (Tree-sitter's core and
  // the Python grammar's scanner), Python (the standard library), Rust (blake3), C++
  // (GoogleTest and GoogleMock, with ERROR nodes from their macros).
  std::vector<std::pair<std::filesystem::path, Language>> files;
  for (const auto& e : std::filesystem::directory_iterator(grammar_file("tree-sitter-", "tree_sitter/core/lib/src")))
    if (e.path().extension() == ".c") files.push_back({e.path(), Language::C});
  files.push_back({grammar_file("tree_sitter_python-", "src/scanner.c"), Language::C});
  files.push_back({grammar_file("tree-sitter-", "setup.py"), Language::Python});
  for (const char* py : {"textwrap", "argparse", "ast", "dataclasses", "difflib", "enum", "functools", "inspect", "json/decoder", "pathlib",
                         "string", "subprocess", "tokenize", "typing"})
    files.push_back({std::string("/usr/lib/python3.11/") + py + ".py", Language::Python});
  const auto rs = installed_file("/usr/share/cargo/registry", "blake3-", "src");
  ASSERT_FALSE(rs.empty());
  for (const auto& e : std::filesystem::recursive_directory_iterator(rs))
    if (e.path().extension() == ".rs") files.push_back({e.path(), Language::Rust});
  for (const char* dir : {"/usr/src/googletest/googletest/src", "/usr/src/googletest/googlemock/src"})
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".cc") files.push_back({e.path(), Language::Cpp});
  int skeletons = 0;
  for (const auto& [path, lang] : files) {
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    skeletons += expect_skeleton_equals_full(read(path), lang, path.string());
  }
  std::printf("%d of %zu files parsed as skeletons\n", skeletons, files.size());
  EXPECT_GE(skeletons * 10, static_cast<int>(files.size()) * 8);  // (a few are too small or hold no body)
}

TEST(Skeleton, BracesInsideLiteralsAndCommentsGiveTheAtomsOfAFullParse) {
  const std::vector<std::pair<Language, std::string>> cases = {
      {Language::C,
       "#include <stdio.h>\n"
       "static const char* s = \"}{\";\n"
       "int f(int x) {\n  const char* a = \"{ \\\" }\";  // } comment {\n  char c = '{'; char d = '\\'';\n  /* } */\n"
       "  if (x) { return '}'; }\n  return 0;\n}\n"
       "#define OPEN {\n"
       "struct point { int x; int y; };\n"
       "int g(void) {\n  return sizeof(struct point) /* { */ ;\n}\n"},
      {Language::Cpp,
       "namespace ns {\nint big = 1'000'000;\nconst char* r = R\"x(} \" { )x\";\n"
       "template <class T> T id(T v) {\n  auto s = R\"(})\";\n  return v;\n}\n"
       "class A {\n public:\n  int m() const { return '}' + 0x1'0; }\n"
       "  void n() {\n    auto l = [](int a) { return a + 1'0; };\n    (void)l;\n  }\n};\n}  // namespace ns\n"},
      {Language::Rust,
       "use std::fmt;\n\n"
       "fn longest<'a>(x: &'a str, y: &'a str) -> &'a str {\n    let c = '{';\n    let q = '\\'';\n    let s = r#\"}\"#;\n"
       "    let b = b'}';\n    'outer: loop { break 'outer; }\n    /* nested /* } */ { */\n"
       "    if x.len() > y.len() { x } else { y }\n}\n\n"
       "struct S<'a> {\n    r: &'a str,\n}\n\n"
       "impl<'a> fmt::Display for S<'a> {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n"
       "        write!(f, \"{{}}{}\", self.r)\n    }\n    fn other(&self) -> [u8; 4] {\n        [0; 4]\n    }\n}\n\n"
       "impl<I: Iterator<Item = u8>> Wrapper<I> {\n    fn a(&self) {}\n    fn b(&self) {\n        let _ = \"} {\";\n    }\n}\n"},
      {Language::JavaScript,
       "import x from \"y\";\nconst re = /[}{]\"/g;\n"
       "function f(a) {\n  const t = `}${a + `{`}` + \"}\";\n  const r = a.replace(/\\/}/g, '{');\n  return t / 2 / r;\n}\n"
       "class K extends Base {\n  m() { return /}/.test(this.s) ? '{' : \"}\"; }\n"
       "  get n() { return `${this.m()}}`; }\n  static x = () => { return 1; };\n}\n"
       "export default function g() {\n  return 1;\n}\n"},
      {Language::TypeScript,
       "interface P { x: number; y: { z: string } }\nenum E { A = 1, B = 2 }\ntype T = { a: string };\n"
       "export class C<T extends { id: number }> implements P {\n  x = 1;\n  y = { z: \"}\" };\n"
       "  constructor(private readonly s: string) { this.s = `{${s}`; }\n"
       "  method(a: number): { r: number } { return { r: a }; }\n}\n"
       "function h(a: string): string {\n  const quoted = a.replace(/\"/g, \"}\");\n  return quoted + `${a}{`;\n}\n"},
      {Language::Go,
       "package main\n\nimport \"fmt\"\n\ntype S struct {\n\tA int\n\tB string\n}\n\n"
       "func (s *S) M() string {\n\tr := '}'\n\traw := `}{\n`\n\treturn fmt.Sprintf(\"%c%s{\", r, raw)\n}\n\n"
       "func main() {\n\tm := map[string]int{\"a\": 1}\n\tfmt.Println(m)\n}\n"},
      {Language::Java,
       "package p;\n\nimport java.util.List;\n\npublic class A {\n    private static final String S = \"}{\";\n"
       "    private final char c = '}';\n    @Override\n    public String toString() {\n"
       "        String block = \"\"\"\n            } {\n            \"\"\";\n        return block + c + '{';\n    }\n"
       "    int f(int x) { return x > 0 ? x : -x; }\n    enum Kind { ONE, TWO }\n}\n"},
      {Language::Python,
       "import os\n\nX = \"\"\"\ndef not_a_function():\n    }\n\"\"\"\n\n"
       "def f(a,\n      b=(1,\n         2)):\n    \"\"\"Doc with a def: inside\n    def g(): pass\n    \"\"\"\n"
       "    s = '''\nx'''\n    t = {\"a\": [1,\n               2]}\n    if a:\n        return b\n"
       "# a comment at column 0 inside the body\n    return t  # }\n\n"
       "class C:\n    def m(self):\n        x = 1\n        return x\n\n    @property\n    def n(self):\n"
       "        y = (\n            1\n        )\n        try:\n            pass\n        except E:\n            y = 2\n\n"
       "# trailing comment\n# more\n# and more of it\ndef last(): return 1\n"},
  };
  for (const auto& [lang, code] : cases) {
    const std::string what = std::string(fa::language_name(lang)) + " literals";
    EXPECT_TRUE(expect_skeleton_equals_full(code, lang, what)) << what << ": nothing skipped";
    EXPECT_FALSE(fa::atomize_uncached(code, lang, fa::ParseMode::Full)->has_error) << what;
  }
}

TEST(Skeleton, EditsInsideSkippedBodiesNeedNoParse) {
  // Renames inside function bodies of blake3's lib.rs: each version is cut from the
  // previous skeleton tree moved by ts_tree_edit, and equals a fresh parse.
  const std::string original = read(installed_file("/usr/share/cargo/registry", "blake3-", "src/lib.rs"));
  ASSERT_GT(original.size(), 10000u);
  std::string code = original + "// edits-test\n";
  fa::atomize(code, Language::Rust, "edits-test/lib.rs");
  const auto before = fa::atomize_cache_stats();
  for (double frac : {0.3, 0.5, 0.7, 0.9}) {
    const size_t at = code.find("    let ", line_at(code, frac));
    ASSERT_NE(at, std::string::npos);
    code.insert(at + 8, "renamed_");
    auto z = fa::atomize(code, Language::Rust, "edits-test/lib.rs");
    expect_same_atoms(*z, *fa::atomize_uncached(code, Language::Rust), "rename at " + std::to_string(frac));
    expect_skeleton_equals_full(code, Language::Rust, "rename at " + std::to_string(frac));
  }
  EXPECT_GE(fa::atomize_cache_stats().unparsed - before.unparsed, 3u);
}

/// Sets atomize()'s parse timeout for one scope.
struct ParseTimeout {
  explicit ParseTimeout(uint64_t us) : previous(fa::set_parse_timeout_micros(us)) {}
  ~ParseTimeout() { fa::set_parse_timeout_micros(previous); }
  uint64_t previous;
};

/// `k` use lines, then 2000 Rust line comments (`block` false) or block comments.
std::string rust_comments(int k, bool block) {
  std::string code;
  for (int i = 0; i < k; ++i) code += "use a::b" + std::to_string(i) + ";\n";
  for (int i = 0; i < 2000; ++i) code += block ? "/* c " + std::to_string(i) + " */\n" : "// c " + std::to_string(i) + "\n";
  return code;
}

// A parse that times out right after a Rust comment (a non-terminal extra: the lexer's
// lookahead is null there) gives line blocks, the documented fallback. Debian's Tree-sitter
// 0.20.7, linked before, released that null lookahead: 7 of these 24 inputs segfaulted with
// a 1 us timeout (a standalone program over its libtree-sitter.a and this Rust grammar,
// 2026-12-03); 0.23.2 checks for it (upstream 5337a678f). The timeout is lowered to 1 us
// (set_parse_timeout_micros) so that the parse gives up at its first check, after 100 parse
// operations, instead of needing an input that parses for over a second.
TEST(Atomize, ParseTimeoutRightAfterRustCommentsGivesLineBlocks) {
  const ParseTimeout timeout(1);
  for (const bool block : {false, true}) {
    for (int k = 0; k < 12; ++k) {
      const std::string code = rust_comments(k, block);
      const std::string what = std::string(block ? "block" : "line") + " comments after " + std::to_string(k) + " use lines";
      // A full parse: a skeleton parse reads a run of line comments as one token, and
      // finishes before the first timeout check.
      auto az = fa::atomize_uncached(code, Language::Rust, fa::ParseMode::Full);
      EXPECT_FALSE(az->parsed) << what;
      for (const auto& a : az->atoms) EXPECT_EQ(a.kind, AtomKind::Lines) << what;
      expect_same_atoms(*az, *fa::atomize_uncached(code, Language::None), what);
    }
  }
  // An incremental re-parse of a kept version that times out: line blocks, and nothing kept,
  // so the next version (timeout restored) is a first parse again.
  const std::string v1 = rust_comments(0, true) + "fn timeout_test_v1() {}\n";  // (block comments: no run is skipped)
  const std::string v2 = "use a::b;\n" + v1;
  const std::string v3 = "use a::c;\n" + v1;
  {
    const ParseTimeout normal(1'000'000);
    EXPECT_TRUE(fa::atomize(v1, Language::Rust, "timeout.rs")->parsed);
  }
  auto z2 = fa::atomize(v2, Language::Rust, "timeout.rs");
  EXPECT_FALSE(z2->parsed);
  expect_same_atoms(*z2, *fa::atomize_uncached(v2, Language::None), "edited version");
  const ParseTimeout normal(1'000'000);
  const auto before = fa::atomize_cache_stats();
  auto z3 = fa::atomize(v3, Language::Rust, "timeout.rs");
  EXPECT_EQ(fa::atomize_cache_stats().incremental, before.incremental);
  expect_same_atoms(*z3, *fa::atomize_uncached(v3, Language::Rust), "next version");
  EXPECT_TRUE(z3->parsed);
}

TEST(CodeRegions, FencesAndNumberedToolOutput) {
  const std::string text =
      "Please fix this.\n\n```python src/app.py\nimport os\n\ndef f():\n    pass\n```\n\nAnd main.go:\n"
      "```\npackage main\n\nfunc main() {}\n```\n"
      "Tool output:\n     1\xE2\x86\x92use std::fmt;\n     2\xE2\x86\x92\n     3\xE2\x86\x92" "fn main() {}\n"
      "cat -n:\n     7\tint x = 1;\n     8\tint y = 2;\n";
  auto regions = fa::find_code_regions(text);
  ASSERT_EQ(regions.size(), 4u);
  EXPECT_EQ(regions[0].lang, Language::Python);
  EXPECT_EQ(regions[0].path, "src/app.py");
  EXPECT_EQ(text.substr(regions[0].begin, regions[0].end - regions[0].begin), "import os\n\ndef f():\n    pass\n");
  EXPECT_EQ(regions[1].lang, Language::Go);
  EXPECT_EQ(regions[1].path, "main.go");  // from the line above the fence
  EXPECT_EQ(regions[2].numbering, fa::Numbering::Arrow);
  EXPECT_EQ(regions[2].lang, Language::Rust);
  EXPECT_EQ(fa::region_code(text.substr(regions[2].begin, regions[2].end - regions[2].begin), regions[2].numbering),
            "use std::fmt;\n\nfn main() {}\n");
  EXPECT_EQ(regions[3].numbering, fa::Numbering::Tab);
  // The path hint names the file of a bare numbered tool result.
  auto hinted = fa::find_code_regions("     1\xE2\x86\x92x = 1\n     2\xE2\x86\x92y = 2\n", "/repo/pkg/mod.py");
  ASSERT_EQ(hinted.size(), 1u);
  EXPECT_EQ(hinted[0].path, "/repo/pkg/mod.py");
  EXPECT_EQ(hinted[0].lang, Language::Python);
  EXPECT_TRUE(fa::find_code_regions("No code here, 1. a list\n2. of things\n").empty());
  // Pinned files in <file path="..."> tags.
  const std::string pinned = "Pinned files:\n<file path=\"pkg/enc.py\">\nimport base64\n\ndef enc(b):\n    return b\n</file>\n";
  auto tagged = fa::find_code_regions(pinned);
  ASSERT_EQ(tagged.size(), 1u);
  EXPECT_EQ(tagged[0].path, "pkg/enc.py");
  EXPECT_EQ(tagged[0].lang, Language::Python);
  EXPECT_EQ(pinned.substr(tagged[0].begin, tagged[0].end - tagged[0].begin), "import base64\n\ndef enc(b):\n    return b\n");
}

TEST(Reorder, UnchangedAtomsKeepTheirOrderAfterAnEarlyEdit) {
  fa::AtomOrderMemory memory;
  auto file = [](const std::string& first) {
    return "Here is the file:\n```python app.py\nimport os\n\n" + first +
           "\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n```\nWhat does it do?\n";
  };
  fa::ReorderStats s1;
  int unnamed = 0;
  const std::string t1 = fa::reorder_prompt_text(file("def a():\n    return 1"), memory, s1, unnamed);
  EXPECT_EQ(s1.reordered, 1);
  EXPECT_EQ(s1.atoms, 4);
  EXPECT_EQ(s1.moved, 0);
  EXPECT_EQ(t1, file("def a():\n    return 1"));  // in source order: byte-identical, no labels
  // Edit a(): the unchanged atoms keep their order, the edited one goes last.
  fa::ReorderStats s2;
  unnamed = 0;
  const std::string t2 = fa::reorder_prompt_text(file("def a():\n    return 100"), memory, s2, unnamed);
  EXPECT_EQ(s2.moved, 1);
  EXPECT_EQ(t2,
            "Here is the file:\n```python app.py\nimport os\n\ndef b():\n    return 2\n\n\n"
            "def c():\n    return 3\n# [app.py, out of file order]\ndef a():\n    return 100\n\n```\nWhat does it do?\n");
  // Edit a() again: everything before it is the previous rendering's prefix.
  fa::ReorderStats s3;
  unnamed = 0;
  const std::string t3 = fa::reorder_prompt_text(file("def a():\n    return 7"), memory, s3, unnamed);
  const size_t common = std::mismatch(t2.begin(), t2.end(), t3.begin()).first - t2.begin();
  EXPECT_GT(common, t2.find("def a"));  // all of b, c and a's first line are shared
  EXPECT_EQ(t3.substr(common, 1), "7");
  // Another session sends the original file again: rendered exactly as the first time.
  fa::ReorderStats s4;
  unnamed = 0;
  EXPECT_EQ(fa::reorder_prompt_text(file("def a():\n    return 1"), memory, s4, unnamed), t1);
}

TEST(Reorder, TextWithoutCodeOrWithBrokenCodeIsByteIdentical) {
  fa::AtomOrderMemory memory;
  fa::ReorderStats s;
  int unnamed = 0;
  const std::string prose = "Summarise the meeting notes.\nThey mention `foo()` once.\n";
  EXPECT_EQ(fa::reorder_prompt_text(prose, memory, s, unnamed), prose);
  const std::string broken = "```python\ndef a(:\n  pass\n\ndef b():\n  pass\n```\n";
  EXPECT_EQ(fa::reorder_prompt_text(broken, memory, s, unnamed), broken);
  EXPECT_EQ(s.reordered, 0);
  EXPECT_EQ(fa::parse_cache_mode("reorder"), fa::CacheMode::Reorder);
  EXPECT_FALSE(fa::parse_cache_mode("Reorder").has_value());
}
