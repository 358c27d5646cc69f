// frontend_ast on real JavaScript, TypeScript, Go, Java, Rust and C++ files from PyPI sdists
// (test/unit/frontend_ast/real_sources.txt, downloaded at configure time into the build
// directory): each parses without error into atoms that cover the file exactly, with the
// definitions read from the file as atoms of the right kind; two of them in one prompt,
// and a file cut off mid-function.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend_ast/atomize.h"
#include "frontend_ast/code_regions.h"
#include "frontend_ast/language.h"
#include "frontend_ast/reorder.h"

namespace fa = swz::frontend_ast;
using fa::AtomKind;
using fa::Language;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// `rel` inside the unpacked sdist whose folder starts with `prefix` (empty if none).
std::filesystem::path real_source(const std::string& prefix, const std::string& rel) {
  if (!std::filesystem::is_directory(SWZ_REAL_SOURCES_DIR)) return {};
  for (const auto& e : std::filesystem::directory_iterator(SWZ_REAL_SOURCES_DIR))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && std::filesystem::exists(e.path() / rel)) return e.path() / rel;
  return {};
}

bool required() {
  const char* r = std::getenv("SWZ_REQUIRE");
  return r && std::string(r) == "1";
}

}  // namespace

/// Reads a real file into `var` (std::string); a missing one fails under SWZ_REQUIRE=1
/// (scripts/test-all.sh) and skips the test otherwise.
#define SWZ_REAL_SOURCE(var, prefix, rel)                                                                          \
  std::string var;                                                                                                  \
  {                                                                                                                 \
    const std::filesystem::path p_ = real_source(prefix, rel);                                                      \
    const std::string why_ = std::string(rel) + " of the " + prefix + "* sdist is not under " SWZ_REAL_SOURCES_DIR \
                             " (the configure step downloads test/unit/frontend_ast/real_sources.txt)";             \
    if (p_.empty()) {                                                                                               \
      if (required()) FAIL() << why_ << " (SWZ_REQUIRE=1)";                                                         \
      GTEST_SKIP() << why_;                                                                                         \
    }                                                                                                               \
    var = slurp(p_);                                                                                                \
  }

namespace {

struct Named {
  AtomKind kind;
  std::string name;
};

int count(const fa::Atomization& az, AtomKind kind) {
  int n = 0;
  for (const auto& a : az.atoms) n += a.kind == kind;
  return n;
}

/// `code` atomized as `lang`: parsed without error, the atoms cover it exactly (contiguous,
/// none empty, lines matching bytes), and each of `want` is an atom of that kind and name
/// whose text holds the name.
std::shared_ptr<const fa::Atomization> expect_real_file(const std::string& code, Language lang, const std::vector<Named>& want,
                                                        const std::string& what) {
  auto az = fa::atomize(code, lang);
  EXPECT_TRUE(az->parsed) << what;
  EXPECT_FALSE(az->has_error) << what;
  EXPECT_FALSE(az->atoms.empty()) << what;
  size_t at = 0;
  int line = 0;
  for (size_t i = 0; i < az->atoms.size(); ++i) {
    const fa::Atom& a = az->atoms[i];
    EXPECT_EQ(a.begin, at) << what << " atom " << i;
    EXPECT_LT(a.begin, a.end) << what << " atom " << i;
    EXPECT_EQ(a.first_line, line) << what << " atom " << i;
    line += static_cast<int>(std::count(code.begin() + static_cast<long>(a.begin), code.begin() + static_cast<long>(a.end), '\n'));
    at = a.end;
  }
  EXPECT_EQ(at, code.size()) << what;
  for (const Named& n : want) {
    bool found = false;
    for (const auto& a : az->atoms)
      if (a.kind == n.kind && a.name == n.name && code.substr(a.begin, a.end - a.begin).find(n.name) != std::string::npos) found = true;
    EXPECT_TRUE(found) << what << ": no " << fa::atom_kind_name(n.kind) << " atom named " << n.name;
  }
  return az;
}

/// The file cut in the middle of the function or method named `name` (at the start of
/// the line holding the middle byte of its atom), as an agent's view of a file being
/// written: the parse holds ERROR or MISSING nodes, the atoms still cover the text, the
/// atoms before the function are those of the whole file, and the reorder rewrite leaves
/// the file (in a fence) byte-identical. Tree-sitter mostly recovers from a cut with
/// MISSING nodes (closing braces), not ERROR nodes: the atoms then stay AST atoms rather
/// than line blocks (0 line blocks for these four cuts, 2026-12-05); an ERROR node's part
/// is a line block (Atomize.BrokenCodeFallsBackToLineBlocks).
std::shared_ptr<const fa::Atomization> expect_truncated(const std::string& code, Language lang, const std::string& name,
                                                        const std::string& what) {
  const auto whole = fa::atomize(code, lang);
  size_t fi = whole->atoms.size();
  for (size_t i = 0; i < whole->atoms.size(); ++i)
    if (whole->atoms[i].kind == AtomKind::Function && whole->atoms[i].name == name) fi = i;
  if (fi == whole->atoms.size()) {
    ADD_FAILURE() << what << ": no function " << name;
    return whole;
  }
  const fa::Atom& f = whole->atoms[fi];
  const size_t cut = code.rfind('\n', (f.begin + f.end) / 2) + 1;
  EXPECT_GT(cut, code.find(name, f.begin)) << what;  // inside the body
  const std::string broken = code.substr(0, cut);

  auto bz = fa::atomize(broken, lang);
  EXPECT_TRUE(bz->parsed) << what;
  EXPECT_TRUE(bz->has_error) << what;
  size_t at = 0;
  for (const auto& a : bz->atoms) {
    EXPECT_EQ(a.begin, at) << what;
    at = a.end;
  }
  EXPECT_EQ(at, broken.size()) << what;
  size_t same = 0;  // atoms equal to the whole file's, from the start
  while (same < bz->atoms.size() && same < fi && bz->atoms[same].hash == whole->atoms[same].hash &&
         bz->atoms[same].end == whole->atoms[same].end)
    ++same;
  int lines = 0;
  for (const auto& a : bz->atoms) lines += a.kind == AtomKind::Lines;
  std::printf("%s cut in %s (line %d): %zu atoms, %d line blocks, the first %zu as in the whole file (function at atom %zu)\n",
              what.c_str(), name.c_str(), static_cast<int>(std::count(broken.begin(), broken.end(), '\n')), bz->atoms.size(),
              lines, same, fi);
  EXPECT_GE(same, 1u) << what;
  const std::string fenced = "Why does this not compile?\n```" + std::string(fa::language_name(lang)) + "\n" + broken + "```\n";
  fa::AtomOrderMemory memory;
  fa::ReorderStats stats;
  int unnamed = 0;
  EXPECT_EQ(fa::reorder_prompt_text(fenced, memory, stats, unnamed), fenced) << what;
  EXPECT_EQ(stats.reordered, 0) << what;
  return bz;
}

}  // namespace

TEST(RealSources, JavaScriptCoverageHtmlJs) {
  // coverage.py's HTML report script: six function declarations, then `coverage.x = function`
  // assignments (expression statements: definitions without a name) and a DOMContentLoaded handler.
  SWZ_REAL_SOURCE(js, "coverage-", "coverage/htmlfiles/coverage_html.js");
  ASSERT_GT(js.size(), 20000u);
  EXPECT_EQ(fa::language_from_path("coverage/htmlfiles/coverage_html.js"), Language::JavaScript);
  EXPECT_EQ(fa::language_from_content(js), Language::JavaScript);
  auto az = expect_real_file(js, Language::JavaScript,
                             {{AtomKind::Function, "debounce"},
                              {AtomKind::Function, "checkVisible"},
                              {AtomKind::Function, "on_click"},
                              {AtomKind::Function, "getCellValue"},
                              {AtomKind::Function, "rowComparator"},
                              {AtomKind::Function, "sortColumn"}},
                             "coverage_html.js");
  EXPECT_EQ(count(*az, AtomKind::Function), 6);
  EXPECT_GE(count(*az, AtomKind::Definition), 30);  // one per `coverage.* = ` (about 35)
  // `coverage.pyfile_ready = function () {...};` is an atom of its own.
  const size_t ready = js.find("coverage.pyfile_ready = function");
  const size_t next = js.find("coverage.toggle_lines = function");
  ASSERT_LT(ready, next);
  const fa::Atom* atom = nullptr;
  for (const auto& a : az->atoms)
    if (a.begin <= ready && ready < a.end) atom = &a;
  ASSERT_NE(atom, nullptr);
  EXPECT_EQ(atom->kind, AtomKind::Definition);
  EXPECT_LE(atom->end, next);
  EXPECT_NE(js.substr(atom->begin, atom->end - atom->begin).find("\n};\n"), std::string::npos);
  expect_truncated(js, Language::JavaScript, "sortColumn", "coverage_html.js");
}

TEST(RealSources, TypeScriptJupyterlabWidgets) {
  // ipywidgets' JupyterLab extension. Its optional parameters (`data?: any`) made ERROR
  // nodes before ts_scanner_adapter.c told them from a ternary "?".
  SWZ_REAL_SOURCE(manager, "jupyterlab_widgets-", "src/manager.ts");
  SWZ_REAL_SOURCE(plugin, "jupyterlab_widgets-", "src/plugin.ts");
  EXPECT_EQ(fa::language_from_path("src/manager.ts"), Language::TypeScript);
  EXPECT_EQ(fa::language_from_content(manager), Language::TypeScript);
  EXPECT_EQ(fa::language_from_content(plugin), Language::TypeScript);
  // Mostly ES module imports (`import { Panel } from '@lumino/widgets';`): once taken for
  // Python's `from x import y` (language_from_content counted "from " and "import ").
  SWZ_REAL_SOURCE(output, "jupyterlab_widgets-", "src/output.ts");
  SWZ_REAL_SOURCE(renderer, "jupyterlab_widgets-", "src/renderer.ts");
  EXPECT_EQ(fa::language_from_content(output), Language::TypeScript);
  EXPECT_EQ(fa::language_from_content(renderer), Language::TypeScript);
  auto mz = expect_real_file(manager, Language::TypeScript,
                             {{AtomKind::Class, "LabWidgetManager"},  // `export abstract class`, split into members
                              {AtomKind::Class, "KernelWidgetManager"},
                              {AtomKind::Function, "_create_comm"},  // async, optional parameters
                              {AtomKind::Function, "loadClass"},
                              {AtomKind::Function, "get_state_sync"},
                              {AtomKind::Function, "restoreWidgets"},
                              {AtomKind::Definition, "_handleCommOpen"}},  // an arrow function in a field
                             "manager.ts");
  EXPECT_GE(count(*mz, AtomKind::Function), 30);
  EXPECT_GE(mz->atoms.size(), 50u);
  EXPECT_EQ(mz->atoms.front().kind, AtomKind::Import);
  auto pz = expect_real_file(plugin, Language::TypeScript,
                             {{AtomKind::Class, "WidgetRegistry"},
                              {AtomKind::Function, "registerWidgetHandler"},
                              {AtomKind::Function, "registerWidgetManager"},
                              {AtomKind::Function, "activateWidgetExtension"}},
                             "plugin.ts");
  EXPECT_GE(count(*pz, AtomKind::Function), 12);
  // As TSX (a .tsx file of the same code, no JSX in it): the same atoms.
  auto tz = fa::atomize(manager, Language::Tsx);
  EXPECT_FALSE(tz->has_error);
  EXPECT_EQ(tz->atoms.size(), mz->atoms.size());
  // The optional-parameter marker in both grammars, next to ternaries it must not break.
  for (const Language l : {Language::TypeScript, Language::Tsx}) {
    const std::string code =
        "function f(a?: number, b?, c ? : string) {}\nconst g = (x?) => x;\nconst t = a ? b : c;\nconst u = a?.b ?? (c ? 1 : .5);\n";
    EXPECT_FALSE(fa::atomize(code, l)->has_error) << fa::language_name(l);
  }
  expect_truncated(manager, Language::TypeScript, "restoreWidgets", "manager.ts");
}

TEST(RealSources, GoJsonnetLexer) {
  // go-jsonnet's lexer (the gojsonnet sdist): an import block, token types, methods of *lexer.
  SWZ_REAL_SOURCE(go, "gojsonnet-", "internal/parser/lexer.go");
  EXPECT_EQ(fa::language_from_content(go), Language::Go);
  auto az = expect_real_file(go, Language::Go,
                             {{AtomKind::Function, "makeLexer"},
                              {AtomKind::Function, "next"},  // func (l *lexer) next() rune
                              {AtomKind::Function, "lexNumber"},
                              {AtomKind::Function, "lexSymbol"},
                              {AtomKind::Function, "IsValidIdentifier"},
                              {AtomKind::Function, "Lex"}},
                             "lexer.go");
  EXPECT_EQ(az->atoms.front().kind, AtomKind::Import);
  EXPECT_EQ(count(*az, AtomKind::Function), 33);  // its 33 funcs and methods
  EXPECT_EQ(az->atoms.back().name, "Lex");        // the file ends with Lex()
  expect_truncated(go, Language::Go, "lexNumber", "lexer.go");
}

TEST(RealSources, JavaJPypeTypeManager) {
  // JPype's TypeManager: one public class (split into its members) with a nested class.
  SWZ_REAL_SOURCE(java, "jpype1-", "native/jpype_module/src/main/java/org/jpype/manager/TypeManager.java");
  EXPECT_EQ(fa::language_from_content(java), Language::Java);
  auto az = expect_real_file(java, Language::Java,
                             {{AtomKind::Class, "TypeManager"},
                              {AtomKind::Function, "TypeManager"},  // its constructors
                              {AtomKind::Function, "findClass"},
                              {AtomKind::Function, "createClass"},
                              {AtomKind::Function, "createMethods"},
                              {AtomKind::Function, "isBeanAccessor"},
                              {AtomKind::Class, "Destroyer"},
                              {AtomKind::Function, "flush"}},
                             "TypeManager.java");
  EXPECT_EQ(az->atoms.front().kind, AtomKind::Import);
  EXPECT_GE(count(*az, AtomKind::Function), 30);  // 33 methods and constructors
  expect_truncated(java, Language::Java, "createMethods", "TypeManager.java");
}

TEST(RealSources, RustCryptographyCertificate) {
  // cryptography's X.509 certificate bindings (pyo3): a use block, a struct with an
  // attribute, impl blocks (split into their methods), #[pyfunction]s and plain functions.
  SWZ_REAL_SOURCE(rs, "cryptography-", "src/rust/src/x509/certificate.rs");
  EXPECT_EQ(fa::language_from_content(rs), Language::Rust);
  auto az = expect_real_file(rs, Language::Rust,
                             {{AtomKind::Class, "OwnedCertificate"},
                              {AtomKind::Function, "fingerprint"},  // a method of impl Certificate
                              {AtomKind::Function, "load_pem_x509_certificate"},
                              {AtomKind::Function, "parse_cert_ext"},
                              {AtomKind::Function, "create_x509_certificate"},
                              {AtomKind::Function, "add_to_module"}},
                             "certificate.rs");
  EXPECT_EQ(az->atoms.front().kind, AtomKind::Import);
  EXPECT_EQ(count(*az, AtomKind::Function), 24 + 23);  // 24 functions, 23 methods in impl blocks
  EXPECT_EQ(az->atoms.back().name, "add_to_module");   // the file ends with it
  expect_truncated(rs, Language::Rust, "parse_cert_ext", "certificate.rs");
}

TEST(RealSources, CppJPypeClassHints) {
  // JPype's native jp_classhints.cpp: conversion classes and out-of-class member functions
  // (qualified names: the atoms carry none).
  SWZ_REAL_SOURCE(cpp, "jpype1-", "native/common/jp_classhints.cpp");
  EXPECT_EQ(fa::language_from_content(cpp), Language::Cpp);
  auto az = expect_real_file(cpp, Language::Cpp,
                             {{AtomKind::Class, "JPPythonConversion"},
                              {AtomKind::Class, "JPAttributeConversion"},
                              {AtomKind::Class, "JPNoneConversion"},
                              {AtomKind::Class, "JPTypeConversion"}},
                             "jp_classhints.cpp");
  EXPECT_EQ(az->atoms.front().kind, AtomKind::Import);
  EXPECT_GE(count(*az, AtomKind::Function), 30);  // 35
  EXPECT_GE(count(*az, AtomKind::Class), 4);
}

namespace {

/// `code` as Claude Code's Read tool prints it: "     1→line".
std::string numbered(const std::string& code) {
  std::string out;
  int n = 0;
  for (size_t at = 0; at < code.size();) {
    const size_t nl = code.find('\n', at);
    const size_t end = nl == std::string::npos ? code.size() : nl + 1;
    char num[16];
    std::snprintf(num, sizeof num, "%6d", ++n);
    out += num;
    out += "\xE2\x86\x92";
    out += code.substr(at, end - at);
    at = end;
  }
  return out;
}

}  // namespace

TEST(RealSources, MixedLanguagePrompt) {
  // One prompt with a fenced Go file, a pinned Java file and a TypeScript file as a Read
  // tool printed it: three regions of the right languages, each region's code is the file,
  // and atomizing it gives the file's atoms.
  SWZ_REAL_SOURCE(go, "gojsonnet-", "internal/parser/lexer.go");
  SWZ_REAL_SOURCE(java, "jpype1-", "native/jpype_module/src/main/java/org/jpype/manager/TypeManager.java");
  SWZ_REAL_SOURCE(ts, "jupyterlab_widgets-", "src/plugin.ts");
  const std::string prompt = "Compare how these tokenize and load classes.\n\n```go internal/parser/lexer.go\n" + go +
                             "```\n\nAnd the Java side:\n<file path=\"org/jpype/manager/TypeManager.java\">\n" + java +
                             "</file>\n\nTool output:\n" + numbered(ts) + "\nWhich one caches more?\n";
  const auto regions = fa::find_code_regions(prompt);
  ASSERT_EQ(regions.size(), 3u);
  const std::vector<std::pair<Language, std::string>> want = {
      {Language::Go, go}, {Language::Java, java}, {Language::TypeScript, ts}};
  for (size_t i = 0; i < regions.size(); ++i) {
    const fa::CodeRegion& r = regions[i];
    EXPECT_EQ(r.lang, want[i].first) << i;
    const std::string code = fa::region_code(prompt.substr(r.begin, r.end - r.begin), r.numbering);
    EXPECT_EQ(code, want[i].second) << i;
    auto in_prompt = fa::atomize(code, r.lang);
    auto alone = fa::atomize(want[i].second, want[i].first);
    EXPECT_EQ(in_prompt.get(), alone.get()) << i;  // the same content hash: one cached atomization
    EXPECT_FALSE(in_prompt->has_error) << i;
  }
  EXPECT_EQ(regions[0].path, "internal/parser/lexer.go");
  EXPECT_EQ(regions[1].path, "org/jpype/manager/TypeManager.java");
  EXPECT_EQ(regions[2].numbering, fa::Numbering::Arrow);
  // reorder: seen for the first time, byte-identical; the Go file with one function edited
  // keeps the Java region's bytes and moves only that function, labelled, to its region's end.
  fa::AtomOrderMemory memory;
  fa::ReorderStats s1;
  int unnamed = 0;
  EXPECT_EQ(fa::reorder_prompt_text(prompt, memory, s1, unnamed), prompt);
  EXPECT_EQ(s1.regions, 3);
  EXPECT_EQ(s1.reordered, 3);
  EXPECT_EQ(s1.moved, 0);
  std::string edited = prompt;
  const size_t fn = edited.find("func (l *lexer) lexNumber() error {");
  ASSERT_NE(fn, std::string::npos);
  edited.insert(edited.find('\n', fn) + 1, "\t// lexNumber: edited by the agent\n");
  fa::ReorderStats s2;
  unnamed = 0;
  const std::string out = fa::reorder_prompt_text(edited, memory, s2, unnamed);
  EXPECT_EQ(s2.moved, 1);
  // (with its doc comment, "// lexNumber will consume a number and emit a token.")
  const size_t label = out.find("// [internal/parser/lexer.go, out of file order]\n// lexNumber will consume");
  ASSERT_NE(label, std::string::npos);
  EXPECT_LT(label, out.find("```\n\nAnd the Java side:"));  // at the end of the Go region
  EXPECT_GT(label, out.find("func Lex("));
  EXPECT_NE(out.find("<file path=\"org/jpype/manager/TypeManager.java\">\n" + java + "</file>\n"), std::string::npos);
  EXPECT_EQ(out.substr(out.find("\nAnd the Java side:")), edited.substr(edited.find("\nAnd the Java side:")));
}
