// Languages frontend_ast parses, and how a piece of code's language is found: a Markdown
// fence tag, a file name, or the code itself (in that order of trust).
#pragma once

#include <string_view>

struct TSLanguage;

namespace swz::frontend_ast {

/// The languages with a Tree-sitter grammar built in (frontend_ast/grammars.txt).
/// None: not code we recognise (atomized as line blocks).
enum class Language { None, Python, C, Cpp, JavaScript, TypeScript, Tsx, Go, Rust, Java };

/// Lower-case name ("python", "cpp", "tsx", ...; "none" for None).
std::string_view language_name(Language lang);

/// The language of a Markdown fence info-string's first word, case-insensitive:
/// "py"/"python"/"python3", "c"/"h", "cpp"/"c++"/"cc"/"cxx"/"hpp", "js"/"javascript"/"jsx"/
/// "mjs"/"node", "ts"/"typescript", "tsx", "go"/"golang", "rs"/"rust", "java".
/// None for anything else (including "" and "text").
Language language_from_tag(std::string_view tag);

/// The language of a file name or path by its extension (.py .pyi; .c .h; .cc .cpp .cxx
/// .hpp .hh .hxx; .js .mjs .cjs .jsx; .ts .mts .cts; .tsx; .go; .rs; .java). None otherwise.
/// A .h file is taken as C (C++ headers are recognised by their content, see below).
Language language_from_path(std::string_view path);

/// A guess from the code's own text: keyword evidence per language (e.g. `#include` for
/// C/C++, and C++ over C when `class`/`namespace`/`template`/`std::` appear; `package` +
/// `func` for Go; `fn`/`let mut`/`impl` for Rust; `def`/`import x`/`self` for Python;
/// `public class` for Java; type annotations or `interface` over plain JavaScript for
/// TypeScript). None when no language has enough evidence (prose, shell, JSON).
/// Cost: one pass over the text, O(bytes).
Language language_from_content(std::string_view code);

/// The grammar of `lang` (nullptr for None). The returned pointer lives for the process.
const TSLanguage* ts_language(Language lang);

/// The line-comment prefix used for atom labels ("# " for Python, "// " otherwise).
std::string_view line_comment(Language lang);

}  // namespace swz::frontend_ast
