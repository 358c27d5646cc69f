#include "frontend_ast/skeleton.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace swz::frontend_ast {

namespace {

constexpr uint32_t kMinRange = 32;  // shorter bodies are parsed: a range costs more than it saves
constexpr size_t kFail = std::string_view::npos;

bool ident_char(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' || c >= 0x80;
}
bool digit(char c) { return c >= '0' && c <= '9'; }

bool one_of(std::string_view word, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

/// A run of three or more comment lines starting at `at` (the `marker` of the first, with
/// only blanks before it on its line; each next line the same, no blank line between):
/// the range from the first line's end to the last line's last character, so the parser
/// reads one comment token from the first line's marker to the last line's end (a token
/// ends at a range's end unless the character after the gap continues it). Empty if none (or
/// shorter than kMinRange; or, `continued`, a line ends in a backslash).
SkipRange comment_run(std::string_view s, size_t at, std::string_view marker, bool continued) {
  const size_t n = s.size();
  const auto line_end = [&](size_t from) {
    const size_t e = s.find('\n', from);
    return e == std::string_view::npos ? n : e;
  };
  const size_t first_end = line_end(at);
  size_t last_end = first_end;
  int lines = 1;
  for (;;) {
    if (continued && last_end > 0 && s[last_end - 1] == '\\') return {};
    if (last_end >= n) break;
    size_t k = last_end + 1;
    while (k < n && (s[k] == ' ' || s[k] == '\t')) ++k;
    if (s.substr(k, marker.size()) != marker) break;
    last_end = line_end(k);
    ++lines;
  }
  if (lines < 3 || last_end >= n || last_end - first_end < kMinRange) return {};
  return {static_cast<uint32_t>(first_end), static_cast<uint32_t>(last_end - 1), static_cast<uint32_t>(at), true};
}

/// The pre-scan of the brace languages (skeleton.h).
class BraceScan {
 public:
  BraceScan(std::string_view code, Language lang)
      : s_(code),
        lang_(lang),
        c_family_(lang == Language::C || lang == Language::Cpp),
        js_(lang == Language::JavaScript || lang == Language::TypeScript || lang == Language::Tsx),
        rust_(lang == Language::Rust),
        go_(lang == Language::Go),
        java_(lang == Language::Java) {}

  /// The ranges, or empty when the scan does not end balanced.
  std::vector<SkipRange> run() {
    std::vector<SkipRange> out;
    const size_t n = s_.size();
    size_t i = 0;
    int depth = 0, brackets = 0;
    int excluded_at = -1;  // depth outside the excluded block being skipped (-1: none)
    size_t excluded_open = 0;
    bool line_start = true;  // only blanks since the last newline
    reset_prefix();
    while (i < n) {
      const char c = s_[i];
      if (c == '\n') {
        line_start = true;
        ++i;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++i;
        continue;
      }
      const bool at_line_start = line_start;
      line_start = false;
      if (c_family_ && c == '#' && at_line_start) {  // a preprocessor line: no braces counted
        i = directive(i);
        if (i == kFail) return {};
        line_start = true;
        continue;
      }
      if (excluded_at < 0 && at_line_start && c == '/' && i + 1 < n && s_[i + 1] == '/') {  // a run of comment lines
        if (const SkipRange r = comment_run(s_, i, "//", c_family_); r.end > r.begin) {
          out.push_back(r);
          i = r.end + 1;  // the last line's last character, a comment's
          continue;
        }
      }
      if (size_t j = literal_or_comment(i); j != i) {
        if (j == kFail) return {};
        if (c != '/') prev_ = 'l';  // a string: an operand (a comment changes nothing)
        i = j;
        continue;
      }
      if (js_ && c == '/' && regex_allowed()) {
        i = regex(i);
        if (i == kFail) return {};
        prev_ = 'l';
        continue;
      }
      if (ident_char(c)) {
        size_t j = i;
        while (j < n && ident_char(s_[j])) ++j;
        if (digit(c)) {  // a number; C++14 digit separators (1'000) stay inside it
          while (j < n && (ident_char(s_[j]) || s_[j] == '.' || (c_family_ && s_[j] == '\'' && j + 1 < n && ident_char(s_[j + 1])))) ++j;
          prev_ = 'n';
          i = j;
          continue;
        }
        const std::string_view word = s_.substr(i, j - i);
        if (size_t r = raw_string(word, j); r != j) {
          if (r == kFail) return {};
          prev_ = 'l';
          i = r;
          continue;
        }
        if (excluded_at < 0) note_word(word, i);
        prev_ = js_ && one_of(word, {"return", "typeof", "case", "do", "else", "in", "of", "void", "yield", "await", "delete", "throw",
                                     "new", "instanceof"})
                    ? 'k'
                    : 'i';
        i = j;
        continue;
      }
      prev_ = c;
      switch (c) {
        case '{':
          if (excluded_at < 0 && excludes()) {
            excluded_at = depth;
            excluded_open = i;
          } else if (excluded_at < 0) {
            reset_prefix();
          }
          ++depth;
          break;
        case '}':
          if (--depth < 0) return {};
          if (excluded_at >= 0 && depth == excluded_at) {
            excluded_at = -1;
            if (i - excluded_open - 1 >= kMinRange)
              out.push_back({static_cast<uint32_t>(excluded_open + 1), static_cast<uint32_t>(i), static_cast<uint32_t>(excluded_open)});
            // The prefix goes on: a constructor's `b_{x} {`, `fn f() {} impl X {`.
          } else if (excluded_at < 0) {
            reset_prefix();
          }
          break;
        case '(':
        case '[': ++brackets; break;
        case ')':
        case ']':
          if (--brackets < 0) return {};
          if (c == ')' && excluded_at < 0 && !go_ && !rust_) last_open_ = i;
          break;
        case ';':  // (not the one in Rust's `-> [u8; 32]`)
          if (excluded_at < 0 && brackets == 0) reset_prefix();
          break;
        case '=':
          if (excluded_at < 0 && (i + 1 >= n || s_[i + 1] != '=') && (i == 0 || !std::strchr("<>!=", s_[i - 1]))) last_open_ = i;
          break;
        default: break;
      }
      ++i;
    }
    if (depth != 0 || brackets != 0 || excluded_at >= 0) return {};
    return out;
  }

 private:
  void reset_prefix() { last_open_ = last_fn_ = last_keep_ = kFail; }

  /// Whether the `{` now opening starts a block whose inside may be skipped: something that
  /// makes it a function body or an initializer came after the last class-like keyword.
  /// Rust and Go: a function keyword after it, or `=` with no class-like keyword at all
  /// (`impl<I: Iterator<Item = u8>> X for Y {` is a class-like body).
  bool excludes() const {
    const auto after_keep = [&](size_t at) { return at != kFail && (last_keep_ == kFail || at > last_keep_); };
    if (rust_ || go_) return after_keep(last_fn_) || (last_keep_ == kFail && last_open_ != kFail);
    return after_keep(last_open_) || after_keep(last_fn_);
  }

  void note_word(std::string_view w, size_t at) {
    if ((rust_ && w == "fn") || (go_ && w == "func") || (js_ && w == "function")) {
      last_fn_ = at;
      return;
    }
    bool keep = false;
    if (c_family_) keep = one_of(w, {"class", "struct", "union", "enum", "namespace", "extern"});
    else if (java_) keep = one_of(w, {"class", "interface", "enum", "record"});
    else if (js_) keep = one_of(w, {"class", "interface", "enum", "namespace", "module", "declare"});
    else if (go_) keep = one_of(w, {"struct", "interface"});
    else if (rust_) keep = one_of(w, {"struct", "enum", "union", "trait", "impl", "mod", "extern", "macro_rules"});
    if (keep) last_keep_ = at;
  }

  /// After a string, comment or character literal starting at `i`; `i` if none starts there;
  /// kFail when one is not closed.
  size_t literal_or_comment(size_t i) const {
    const size_t n = s_.size();
    const char c = s_[i];
    if (c == '/' && i + 1 < n && s_[i + 1] == '/') return line_comment_end(i);
    if (c == '/' && i + 1 < n && s_[i + 1] == '*') {
      int nest = 1;
      for (size_t j = i + 2; j + 1 < n; ++j) {
        if (s_[j] == '*' && s_[j + 1] == '/') {
          if (--nest == 0) return j + 2;
          ++j;
        } else if (rust_ && s_[j] == '/' && s_[j + 1] == '*') {  // Rust block comments nest
          ++nest;
          ++j;
        }
      }
      return kFail;
    }
    if (c == '"') {
      if (java_ && s_.substr(i, 3) == "\"\"\"") {  // a text block
        for (size_t j = i + 3; j + 2 < n; ++j) {
          if (s_[j] == '\\') ++j;
          else if (s_.substr(j, 3) == "\"\"\"") return j + 3;
        }
        return kFail;
      }
      return quoted(i, '"', rust_);
    }
    if (c == '\'') {
      if (js_) return quoted(i, '\'', false);
      if (rust_) {  // a char literal, or a lifetime / loop label ('a)
        if (i + 1 < n && s_[i + 1] == '\\') return quoted(i, '\'', false);
        size_t j = i + 1;  // one code point, then the closing quote
        if (j < n) ++j;
        while (j < n && (static_cast<unsigned char>(s_[j]) & 0xC0) == 0x80) ++j;
        return j < n && s_[j] == '\'' ? j + 1 : i + 1;
      }
      return quoted(i, '\'', false);
    }
    if (c == '`') {
      if (go_) {
        const size_t e = s_.find('`', i + 1);
        return e == std::string_view::npos ? kFail : e + 1;
      }
      if (js_) return template_literal(i + 1);
    }
    return i;
  }

  /// After a `//` comment at `i` (a C/C++ one goes on after a backslash-newline).
  size_t line_comment_end(size_t i) const {
    for (;;) {
      const size_t e = s_.find('\n', i);
      if (e == std::string_view::npos) return s_.size();
      size_t k = e;
      if (k > i && s_[k - 1] == '\r') --k;
      if (!(c_family_ && k > i && s_[k - 1] == '\\')) return e;
      i = e + 1;
    }
  }

  /// After a literal quoted by `q` starting at `i` (backslash escapes); a newline inside
  /// fails unless `multiline` (Rust strings) or escaped.
  size_t quoted(size_t i, char q, bool multiline) const {
    for (size_t j = i + 1; j < s_.size(); ++j) {
      if (s_[j] == '\\') ++j;
      else if (s_[j] == q) return j + 1;
      else if (s_[j] == '\n' && !multiline) return kFail;
    }
    return kFail;
  }

  /// After a JavaScript template literal whose text starts at `i` (after the backquote).
  size_t template_literal(size_t i) const {
    const size_t n = s_.size();
    for (size_t j = i; j < n; ++j) {
      if (s_[j] == '\\') {
        ++j;
      } else if (s_[j] == '`') {
        return j + 1;
      } else if (s_[j] == '$' && j + 1 < n && s_[j + 1] == '{') {  // ${ code }: to its closing brace
        int depth = 1;
        size_t k = j + 2;
        while (k < n && depth > 0) {
          if (size_t e = literal_or_comment(k); e != k) {
            if (e == kFail) return kFail;
            k = e;
            continue;
          }
          depth += s_[k] == '{' ? 1 : s_[k] == '}' ? -1 : 0;
          ++k;
        }
        if (depth > 0) return kFail;
        j = k - 1;
      }
    }
    return kFail;
  }

  /// Whether a `/` here starts a regular expression: not after an operand.
  bool regex_allowed() const {
    // `prev_`: 'i' identifier, 'n' number, 'l' literal, 'k' keyword before an expression, else the punctuation.
    return !(prev_ == 'i' || prev_ == 'n' || prev_ == 'l' || prev_ == ')' || prev_ == ']' || prev_ == '}');
  }

  /// After a regular expression literal at `i` (its flags included).
  size_t regex(size_t i) const {
    bool in_class = false;
    for (size_t j = i + 1; j < s_.size(); ++j) {
      const char c = s_[j];
      if (c == '\\') ++j;
      else if (c == '\n') return kFail;
      else if (c == '[') in_class = true;
      else if (c == ']') in_class = false;
      else if (c == '/' && !in_class) {
        ++j;
        while (j < s_.size() && ident_char(s_[j])) ++j;
        return j;
      }
    }
    return kFail;
  }

  /// After a raw string whose prefix `word` ends at `j` (Rust r"..", r#".."#, br".."; C++
  /// R"d(..)d" and its u8R/uR/UR/LR forms); `j` if `word` starts none.
  size_t raw_string(std::string_view word, size_t j) const {
    const size_t n = s_.size();
    if (rust_ && (word == "r" || word == "br" || word == "cr") && j < n && (s_[j] == '"' || s_[j] == '#')) {
      size_t k = j, hashes = 0;
      while (k < n && s_[k] == '#') ++k, ++hashes;
      if (k >= n || s_[k] != '"') return j;
      std::string close(hashes + 1, '#');
      close[0] = '"';
      const size_t e = s_.find(close, k + 1);
      return e == std::string_view::npos ? kFail : e + close.size();
    }
    if (lang_ == Language::Cpp && one_of(word, {"R", "u8R", "uR", "UR", "LR"}) && j < n && s_[j] == '"') {
      const size_t open = s_.find('(', j + 1);
      if (open == std::string_view::npos || open - j - 1 > 16) return kFail;
      std::string close(1, ')');
      close.append(s_.substr(j + 1, open - j - 1));
      close.push_back('"');
      const size_t e = s_.find(close, open + 1);
      return e == std::string_view::npos ? kFail : e + close.size();
    }
    return j;
  }

  /// After the preprocessor line starting at `i` (continuation lines and comments in it included).
  size_t directive(size_t i) const {
    const size_t n = s_.size();
    while (i < n) {
      const char c = s_[i];
      if (c == '\n') return i + 1;
      if (c == '\\' && i + 1 < n && (s_[i + 1] == '\n' || (s_[i + 1] == '\r' && i + 2 < n && s_[i + 2] == '\n'))) {
        i += s_[i + 1] == '\r' ? 3 : 2;
        continue;
      }
      if ((c == '/' && i + 1 < n && (s_[i + 1] == '/' || s_[i + 1] == '*')) || c == '"') {
        const size_t e = literal_or_comment(i);
        if (e == kFail) return kFail;
        if (c == '/' && s_[i + 1] == '/') return e;  // the comment ran to the line's end
        i = e;
        continue;
      }
      ++i;
    }
    return n;
  }

  std::string_view s_;
  Language lang_;
  bool c_family_, js_, rust_, go_, java_;
  size_t last_open_ = kFail;  // the last `)` (not Rust, Go) or `=` of the prefix
  size_t last_fn_ = kFail;    // the last function keyword (fn, func, function) of the prefix
  size_t last_keep_ = kFail;  // the last class-like keyword of the prefix
  char prev_ = 0;             // the token before (regex_allowed)
};

/// One logical line of Python (physical lines joined by brackets, strings, backslashes).
struct PyLine {
  size_t begin = 0, end = 0;  // bytes, `end` after its last '\n'
  uint32_t indent = 0;        // as Tree-sitter's scanner counts it (a tab is 8)
  bool blank = false;         // only blanks or a comment
  bool colon = false;         // its last token (comments aside) is ':'
  bool def = false;           // starts with `def` or `async def`
  bool decorator = false;     // starts with '@'
  bool clause = false;        // starts with else, elif, except or finally (not a statement of its own)
  size_t text = 0;            // byte of its first token
};

/// The logical lines of Python `code`; false when a bracket or string is left open.
bool python_lines(std::string_view s, std::vector<PyLine>& out) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    PyLine line;
    line.begin = i;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f')) {
      line.indent = s[i] == '\f' ? 0 : line.indent + (s[i] == '\t' ? 8 : 1);
      ++i;
    }
    line.text = i;
    line.decorator = i < n && s[i] == '@';
    int brackets = 0;
    char last = 0;  // last significant character
    bool first_token = true;
    while (i < n) {
      const char c = s[i];
      if (c == '\n') {
        ++i;
        if (brackets == 0) break;
        continue;
      }
      if (c == '#') {
        while (i < n && s[i] != '\n') ++i;
        continue;
      }
      if (c == '\\' && i + 1 < n && s[i + 1] == '\n') {
        i += 2;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        ++i;
        continue;
      }
      if (c == '"' || c == '\'') {
        const bool triple = s.substr(i, 3) == std::string(3, c);
        size_t j = i + (triple ? 3 : 1);
        bool closed = false;
        for (; j < n; ++j) {
          if (s[j] == '\\') {
            ++j;
          } else if (s[j] == c && (!triple || s.substr(j, 3) == std::string(3, c))) {
            j += triple ? 3 : 1;
            closed = true;
            break;
          } else if (s[j] == '\n' && !triple) {
            return false;
          }
        }
        if (!closed) return false;
        i = j;
        last = c;
        first_token = false;
        continue;
      }
      if (ident_char(c)) {
        size_t j = i;
        while (j < n && ident_char(s[j])) ++j;
        const std::string_view w = s.substr(i, j - i);
        if (first_token) {
          line.clause = w == "else" || w == "elif" || w == "except" || w == "finally";
          if (w == "def") line.def = true;
          if (w == "async") {
            size_t k = j;
            while (k < n && (s[k] == ' ' || s[k] == '\t')) ++k;
            line.def = s.substr(k, 4) == "def " || s.substr(k, 4) == "def\t";
          }
        }
        first_token = false;
        last = 'a';
        i = j;
        continue;
      }
      if (c == '(' || c == '[' || c == '{') ++brackets;
      if (c == ')' || c == ']' || c == '}') {
        if (--brackets < 0) return false;
      }
      first_token = false;
      last = c;
      ++i;
    }
    if (brackets != 0) return false;
    line.end = i;
    line.blank = last == 0;
    line.colon = last == ':';
    out.push_back(line);
  }
  return true;
}

/// The ranges of the Python block of `lines` [first, last] (`first`: its first code line,
/// `last`: its last line; every code line between is indented at least as deep as
/// `first`), inside the def whose first token is at byte `anchor`, appended to `out`.
///
/// Kept: the block's last statement (its first line at the block's indentation that is not
/// a clause of the one before, with the decorators above it). Skipped: from the first
/// statement's first token to the kept one's, so the kept statement sits where the first
/// stood, at the same indentation. The kept statement's own blocks (a compound statement's
/// and its clauses') are treated the same way. (Not the first statement kept and the rest
/// skipped: the NEWLINE token after it looks ahead across the skipped bytes to the next
/// line's indentation, and an edit there made Tree-sitter re-parse the rest of the file: the
/// external scanner state before the next reusable node no longer matched, 2026-12-05.)
void python_block(const std::vector<PyLine>& lines, size_t first, size_t last, uint32_t anchor, std::vector<SkipRange>& out) {
  const uint32_t indent = lines[first].indent;
  size_t kept = first;
  for (size_t j = last; j > first; --j)
    if (!lines[j].blank && lines[j].indent == indent && !lines[j].clause) {
      kept = j;
      break;
    }
  while (kept > first) {  // decorators (and comment lines between them) above it
    size_t above = kept - 1;
    while (above > first && lines[above].blank) --above;
    if (!lines[above].decorator || lines[above].indent != indent) break;
    kept = above;
  }
  if (kept > first && lines[kept].text - lines[first].text >= kMinRange)
    out.push_back({static_cast<uint32_t>(lines[first].text), static_cast<uint32_t>(lines[kept].text), anchor});
  else
    kept = first;
  // The blocks of the kept statement: after each of its header lines (ending in ':').
  for (size_t j = kept; j <= last; ++j) {
    if (lines[j].blank || lines[j].indent != indent || !lines[j].colon) continue;
    size_t sub_first = 0, sub_last = j;
    for (size_t k = j + 1; k <= last; ++k) {
      if (lines[k].blank) continue;
      if (lines[k].indent <= indent) break;
      if (sub_first == 0) sub_first = k;
      sub_last = k;
    }
    if (sub_first == 0) continue;
    python_block(lines, sub_first, sub_last, anchor, out);
    j = sub_last;
  }
}

std::vector<SkipRange> python_ranges(std::string_view code) {
  std::vector<PyLine> lines;
  if (!python_lines(code, lines)) return {};
  std::vector<SkipRange> out;
  const size_t count = lines.size();
  for (size_t k = 0; k < count; ++k) {
    const PyLine& head = lines[k];
    if (head.blank && head.text < code.size() && code[head.text] == '#') {  // a run of comment lines
      if (const SkipRange r = comment_run(code, head.text, "#", false); r.end > r.begin) {
        out.push_back(r);
        while (k + 1 < count && lines[k + 1].begin < r.end) ++k;
      }
      continue;
    }
    if (head.blank || !head.def || !head.colon) continue;
    // The body: the lines after the header up to the next code line indented no deeper.
    size_t last = k, first = 0;
    for (size_t j = k + 1; j < count; ++j) {
      if (lines[j].blank) continue;
      if (lines[j].indent <= head.indent) break;
      if (first == 0) first = j;
      last = j;
    }
    if (first == 0) continue;
    python_block(lines, first, last, static_cast<uint32_t>(head.text), out);
    k = last;  // defs inside the body are skipped with it (or kept as they are)
  }
  return out;
}

}  // namespace

std::vector<SkipRange> skippable_ranges(std::string_view code, Language lang) {
  if (code.size() >= UINT32_MAX) return {};
  switch (lang) {
    case Language::Python: return python_ranges(code);
    case Language::C:
    case Language::Cpp:
    case Language::Java:
    case Language::JavaScript:
    case Language::TypeScript:
    case Language::Tsx:
    case Language::Go:
    case Language::Rust: return BraceScan(code, lang).run();
    case Language::None: break;
  }
  return {};
}

}  // namespace swz::frontend_ast
