#include "frontend_ast/language.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
const TSLanguage* tree_sitter_python(void);
const TSLanguage* tree_sitter_c(void);
const TSLanguage* tree_sitter_cpp(void);
const TSLanguage* tree_sitter_javascript(void);
const TSLanguage* tree_sitter_typescript(void);
const TSLanguage* tree_sitter_tsx(void);
const TSLanguage* tree_sitter_go(void);
const TSLanguage* tree_sitter_rust(void);
const TSLanguage* tree_sitter_java(void);
}

namespace swz::frontend_ast {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The phrases language_from_content() counts.
constexpr std::array<std::string_view, 44> kWords = {
    "#include", "namespace ", "template<", "template <", "std::", "class ", "public:", "private:", "typedef ",
    "struct ", "int main(", "package ", "func ", ":= ", "fn ", "let mut ", "impl ", "pub fn ", "use std::",
    "def ", "from ", "import ", "self.", "elif ", "__init__", "public class ", "import java.", "private final ",
    "System.out.", "public static void ", "function ", "const ", "=> ", "require(", "export ", "let ",
    "interface ", ": string", ": number", "type ", ": boolean", "readonly ", "from '", "from \""};

/// Occurrences of each phrase of kWords in `text` that start a word (not preceded by an
/// identifier character), each capped at `cap`. One pass over the text, the phrases
/// looked up by their first byte (one find() pass per phrase cost 7% of a parse, 2026-12-03).
class WordCounts {
 public:
  explicit WordCounts(std::string_view text, int cap = 8) {
    static const std::array<std::vector<uint8_t>, 256> by_first = [] {
      std::array<std::vector<uint8_t>, 256> t;
      for (size_t w = 0; w < kWords.size(); ++w) t[static_cast<unsigned char>(kWords[w][0])].push_back(static_cast<uint8_t>(w));
      return t;
    }();
    for (size_t i = 0; i < text.size(); ++i) {
      const std::vector<uint8_t>& cands = by_first[static_cast<unsigned char>(text[i])];
      if (cands.empty() || (i > 0 && ident_char(text[i - 1]))) continue;
      for (uint8_t w : cands)
        if (counts_[w] < cap && text.compare(i, kWords[w].size(), kWords[w]) == 0) ++counts_[w];
    }
  }
  /// The count of `phrase`, which must be one of kWords (0 otherwise).
  int operator()(std::string_view phrase) const {
    for (size_t w = 0; w < kWords.size(); ++w)
      if (kWords[w] == phrase) return counts_[w];
    return 0;
  }

 private:
  std::array<int, kWords.size()> counts_{};
};
}  // namespace

std::string_view language_name(Language lang) {
  switch (lang) {
    case Language::Python: return "python";
    case Language::C: return "c";
    case Language::Cpp: return "cpp";
    case Language::JavaScript: return "javascript";
    case Language::TypeScript: return "typescript";
    case Language::Tsx: return "tsx";
    case Language::Go: return "go";
    case Language::Rust: return "rust";
    case Language::Java: return "java";
    case Language::None: break;
  }
  return "none";
}

Language language_from_tag(std::string_view tag) {
  const std::string t = lower(tag);
  if (t == "py" || t == "python" || t == "python3" || t == "py3") return Language::Python;
  if (t == "c" || t == "h") return Language::C;
  if (t == "cpp" || t == "c++" || t == "cc" || t == "cxx" || t == "hpp") return Language::Cpp;
  if (t == "js" || t == "javascript" || t == "jsx" || t == "mjs" || t == "cjs" || t == "node") return Language::JavaScript;
  if (t == "ts" || t == "typescript" || t == "mts" || t == "cts") return Language::TypeScript;
  if (t == "tsx") return Language::Tsx;
  if (t == "go" || t == "golang") return Language::Go;
  if (t == "rs" || t == "rust") return Language::Rust;
  if (t == "java") return Language::Java;
  return Language::None;
}

Language language_from_path(std::string_view path) {
  const size_t slash = path.find_last_of("/\\");
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const size_t dot = base.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == base.size()) return Language::None;
  const std::string ext = lower(base.substr(dot + 1));
  if (ext == "py" || ext == "pyi") return Language::Python;
  if (ext == "c" || ext == "h") return Language::C;
  if (ext == "cc" || ext == "cpp" || ext == "cxx" || ext == "hpp" || ext == "hh" || ext == "hxx") return Language::Cpp;
  if (ext == "js" || ext == "mjs" || ext == "cjs" || ext == "jsx") return Language::JavaScript;
  if (ext == "ts" || ext == "mts" || ext == "cts") return Language::TypeScript;
  if (ext == "tsx") return Language::Tsx;
  if (ext == "go") return Language::Go;
  if (ext == "rs") return Language::Rust;
  if (ext == "java") return Language::Java;
  return Language::None;
}

Language language_from_content(std::string_view code) {
  struct Score {
    Language lang;
    int points;
  };
  const WordCounts count_word(code);
  const int include = count_word("#include");
  const int cpp_marks = count_word("namespace ") + count_word("template<") + count_word("template <") +
                        count_word("std::") + count_word("class ") * (include > 0 ? 1 : 0) +
                        count_word("public:") + count_word("private:");
  const int c_marks = include + count_word("typedef ") + count_word("struct ") * (include > 0 ? 1 : 0) +
                      count_word("int main(");
  const int go = count_word("package ") * 2 + count_word("func ") * 2 + count_word(":= ");
  const int rust = count_word("fn ") * 2 + count_word("let mut ") * 2 + count_word("impl ") * 2 +
                   count_word("pub fn ") + count_word("use std::") * 2;
  // An ES module import (`import { a } from './a'`) is JavaScript's, not Python's `from x import y`.
  const int es_from = count_word("from '") + count_word("from \"");
  const int python = count_word("def ") * 2 + std::max(0, count_word("from ") - es_from) +
                     std::max(0, count_word("import ") - es_from) + count_word("self.") + count_word("elif ") * 2 +
                     count_word("__init__") * 2;
  const int java = count_word("public class ") * 3 + count_word("import java.") * 3 +
                   count_word("private final ") * 2 + count_word("System.out.") * 2 +
                   count_word("public static void ") * 2;
  const int js = count_word("function ") * 2 + count_word("const ") + count_word("=> ") +
                 count_word("require(") * 2 + count_word("export ") + count_word("let ") + es_from * 2;
  const int ts_marks = count_word("interface ") * 2 + count_word(": string") * 2 + count_word(": number") * 2 +
                       count_word("type ") + count_word(": boolean") * 2 + count_word("readonly ");
  std::array<Score, 8> s = {{{Language::Cpp, include > 0 ? c_marks + cpp_marks * 2 : 0},
                             {Language::C, cpp_marks == 0 ? c_marks * 2 : 0},
                             {Language::Go, go},
                             {Language::Rust, rust},
                             {Language::Python, python},
                             {Language::Java, java},
                             {Language::TypeScript, ts_marks > 0 ? js + ts_marks : 0},
                             {Language::JavaScript, ts_marks == 0 ? js : 0}}};
  const auto best = std::max_element(s.begin(), s.end(), [](const Score& a, const Score& b) { return a.points < b.points; });
  return best->points >= 3 ? best->lang : Language::None;
}

const TSLanguage* ts_language(Language lang) {
  switch (lang) {
    case Language::Python: return tree_sitter_python();
    case Language::C: return tree_sitter_c();
    case Language::Cpp: return tree_sitter_cpp();
    case Language::JavaScript: return tree_sitter_javascript();
    case Language::TypeScript: return tree_sitter_typescript();
    case Language::Tsx: return tree_sitter_tsx();
    case Language::Go: return tree_sitter_go();
    case Language::Rust: return tree_sitter_rust();
    case Language::Java: return tree_sitter_java();
    case Language::None: break;
  }
  return nullptr;
}

std::string_view line_comment(Language lang) { return lang == Language::Python ? "# " : "// "; }

}  // namespace swz::frontend_ast
