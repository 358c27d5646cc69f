#include "frontend_ast/language.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

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

/// Occurrences of `needle` in `text` that start a word (not preceded by an identifier
/// character), capped at `cap`.
int count_word(std::string_view text, std::string_view needle, int cap = 8) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string_view::npos && n < cap; pos = text.find(needle, pos + 1)) {
    const bool starts = pos == 0 || !(std::isalnum(static_cast<unsigned char>(text[pos - 1])) || text[pos - 1] == '_');
    if (starts) ++n;
  }
  return n;
}
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
  const int include = count_word(code, "#include");
  const int cpp_marks = count_word(code, "namespace ") + count_word(code, "template<") + count_word(code, "template <") +
                        count_word(code, "std::") + count_word(code, "class ") * (include > 0 ? 1 : 0) +
                        count_word(code, "public:") + count_word(code, "private:");
  const int c_marks = include + count_word(code, "typedef ") + count_word(code, "struct ") * (include > 0 ? 1 : 0) +
                      count_word(code, "int main(");
  const int go = count_word(code, "package ") * 2 + count_word(code, "func ") * 2 + count_word(code, ":= ");
  const int rust = count_word(code, "fn ") * 2 + count_word(code, "let mut ") * 2 + count_word(code, "impl ") * 2 +
                   count_word(code, "pub fn ") + count_word(code, "use std::") * 2;
  const int python = count_word(code, "def ") * 2 + count_word(code, "from ") + count_word(code, "import ") +
                     count_word(code, "self.") + count_word(code, "elif ") * 2 + count_word(code, "__init__") * 2;
  const int java = count_word(code, "public class ") * 3 + count_word(code, "import java.") * 3 +
                   count_word(code, "private final ") * 2 + count_word(code, "System.out.") * 2 +
                   count_word(code, "public static void ") * 2;
  const int js = count_word(code, "function ") * 2 + count_word(code, "const ") + count_word(code, "=> ") +
                 count_word(code, "require(") * 2 + count_word(code, "export ") + count_word(code, "let ");
  const int ts_marks = count_word(code, "interface ") * 2 + count_word(code, ": string") * 2 + count_word(code, ": number") * 2 +
                       count_word(code, "type ") + count_word(code, ": boolean") * 2 + count_word(code, "readonly ");
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
