// Finding code inside prompt text: Markdown fences, and runs of line-numbered lines as
// Claude Code's Read tool returns them ("     1→code") or `cat -n` prints them
// ("     1\tcode").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frontend_ast/language.h"

namespace swz::frontend_ast {

/// How a region's lines carry line numbers.
enum class Numbering {
  None,   ///< plain code (a fenced block)
  Arrow,  ///< optional spaces, a decimal number, U+2192 "→" (Claude Code `Read` results)
  Tab,    ///< optional spaces, a decimal number, a tab (`cat -n`)
};

/// One piece of code in a text: the bytes [begin, end) of whole lines (each with its
/// '\n', the last one possibly without), fence lines excluded.
struct CodeRegion {
  size_t begin = 0;
  size_t end = 0;
  Numbering numbering = Numbering::None;
  Language lang = Language::None;
  std::string path;  ///< file name or path when one was found ("" otherwise)
  bool fenced = false;
};

/// The code regions of `text`, in order, non-overlapping:
/// - a fence opens with up to 3 spaces and ``` or ~~~ (3 or more) and an info string,
///   and closes with a line of the same character at least as long (CommonMark); an
///   unclosed fence runs to the end of the text. Its info string gives the language (first
///   word, or the part before ':' in "lang:path") and a path (a word with a known
///   extension, or title="..." / file="..."); an empty fence is not a region;
/// - a line `<file path="P">` (or `name=`, or `<document ...>`) up to a line `</file>`
///   (`</document>`) is a region with path P (the way agents pin files in prompts);
/// - outside fences, two or more consecutive lines numbered n, n+1, ... in the Arrow or
///   Tab form form a numbered region (the numbers stay part of the region's bytes).
/// The path falls back to a file name with a known extension on the non-empty line just
/// above the region, then to `path_hint` (e.g. the `file_path` argument of the tool call
/// a tool result answers). The language comes from the fence tag, else the path, else
/// language_from_content() of the code. Text without fences or numbered runs gives none.
std::vector<CodeRegion> find_code_regions(std::string_view text, std::string_view path_hint = "");

/// The code of a region's bytes: for Numbering::None the bytes themselves, otherwise each
/// line without its number prefix (same number of lines, so atom line ranges map 1:1).
std::string region_code(std::string_view region_bytes, Numbering numbering);

}  // namespace swz::frontend_ast
