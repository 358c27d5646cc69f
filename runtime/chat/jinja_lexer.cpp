// Lexer of the Jinja2 subset. Follows jinja2 3.1's lexer (jinja2/lexer.py) with the options
// transformers uses: trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
// newline_sequence="\n". Rules reproduced here:
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}", "-#}" strip all
//    whitespace after it (Python str.rstrip / \s*).
//  - trim_blocks: the first "\n" after "%}" or "#}" is removed (not after "}}"; "+%}" keeps it).
//  - lstrip_blocks: spaces/tabs between the start of a line and "{%" or "{#" are removed
//    (not before "{{"; "{%+" keeps them).
//  - Inside a tag, the end delimiter only counts when (), [] and {} are balanced, so
//    "{{ {'a': {'b': 1}} }}" is one expression.
//  - Newlines in the source are normalised to "\n" and one trailing newline is dropped.
#include <cstring>
#include <string>

#include "chat/jinja_internal.h"

namespace swz::chat::detail {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

[[noreturn]] void lex_fail(std::string_view src, size_t pos, const std::string& msg) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < src.size(); ++i) {
    if (src[i] == '\n') { ++line; col = 1; } else { ++col; }
  }
  throw TemplateError(line, col, msg);
}

// Python str.rstrip() / lstrip() over ASCII and Unicode whitespace.
std::string rstrip_ws(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    // Step back one code point.
    size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    size_t p = b;
    uint32_t cp = utf8_decode_at(s, p);
    if (!py_isspace(cp)) break;
    end = b;
  }
  return std::string(s.substr(0, end));
}


int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes a string literal body like Python's "unicode-escape" codec (what jinja2 does).
std::string unescape(std::string_view src, size_t body_pos, std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': case 'u': case 'U': {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          int h = i + 1 + k < body.size() ? hexval(body[i + 1 + k]) : -1;
          if (h < 0) lex_fail(src, body_pos + i, std::string("truncated \\") + e + " escape in string literal");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF) lex_fail(src, body_pos + i, "escape out of Unicode range in string literal");
        i += n;
        append_utf8(out, cp);
        break;
      }
      case 'N':
        lex_fail(src, body_pos + i, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<Token> lex(std::string_view raw, std::string* normalized) {
  // Normalise newlines like jinja2 (str.splitlines + "\n".join, minus the trailing newline).
  std::string src;
  src.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      src += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      src += raw[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  if (normalized) *normalized = src;

  std::vector<Token> out;
  size_t pos = 0;
  bool line_starting = true;
  const size_t n = src.size();
  while (pos < n) {
    // Find the next tag start.
    size_t start = pos;
    while (start + 1 < n && !(src[start] == '{' && (src[start + 1] == '{' || src[start + 1] == '%' || src[start + 1] == '#')))
      ++start;
    if (start + 1 >= n) {
      out.push_back({Tok::Text, src.substr(pos), pos});
      break;
    }
    char kind = src[start + 1];
    char mod = start + 2 < n ? src[start + 2] : '\0';
    std::string text = src.substr(pos, start - pos);
    // {% raw %} ... {% endraw %}: text verbatim.
    bool is_raw = false;
    if (kind == '%') {
      size_t p = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      while (p < n && is_ws(src[p])) ++p;
      if (src.compare(p, 3, "raw") == 0 && (p + 3 >= n || !is_name_char(src[p + 3]))) is_raw = true;
    }
    if (mod == '-') {
      text = rstrip_ws(text);
    } else if (mod != '+' && (kind == '%' || kind == '#')) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool all_ws = l_pos < text.size();
        for (size_t k = l_pos; k < text.size() && all_ws; ++k) all_ws = is_ws(text[k]);
        if (all_ws) text.resize(l_pos);
      }
    }
    if (!text.empty()) out.push_back({Tok::Text, text, pos});
    size_t p = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);

    // Consumes the end delimiter at `q` (pointing at '-', '+' or the first end char) and applies
    // trailing whitespace control. Returns the position after it.
    auto finish_tag = [&](size_t q, size_t delim_len, bool trim_newline) {
      char m = src[q];
      size_t after;
      if (m == '-') {
        after = q + 1 + delim_len;
        while (after < n && is_ws(src[after])) ++after;
      } else if (m == '+') {
        after = q + 1 + delim_len;
      } else {
        after = q + delim_len;
        if (trim_newline && after < n && src[after] == '\n') ++after;
      }
      line_starting = after > 0 && src[after - 1] == '\n';
      return after;
    };

    if (kind == '#') {
      size_t e = src.find("#}", p);
      if (e == std::string::npos) lex_fail(src, start, "missing end of comment tag '#}'");
      size_t q = (e > p && (src[e - 1] == '-' || src[e - 1] == '+')) ? e - 1 : e;
      pos = finish_tag(q, 2, true);
      continue;
    }
    if (is_raw) {
      // Find {% endraw %} (with optional whitespace control).
      size_t body_start = src.find("%}", p);
      if (body_start == std::string::npos) lex_fail(src, start, "missing end of raw tag");
      size_t q = src[body_start - 1] == '-' || src[body_start - 1] == '+' ? body_start - 1 : body_start;
      size_t body = finish_tag(q, 2, true);
      size_t s = body;
      for (;;) {
        size_t t = src.find("{%", s);
        if (t == std::string::npos) lex_fail(src, start, "missing {% endraw %}");
        size_t r = t + 2;
        char m2 = r < n ? src[r] : '\0';
        if (m2 == '-' || m2 == '+') ++r;
        while (r < n && is_ws(src[r])) ++r;
        if (src.compare(r, 6, "endraw") == 0) {
          r += 6;
          while (r < n && is_ws(src[r])) ++r;
          if (r + 1 < n && (src[r] == '-' || src[r] == '+') && src.compare(r + 1, 2, "%}") == 0) {
          } else if (src.compare(r, 2, "%}") != 0) {
            lex_fail(src, t, "malformed {% endraw %}");
          }
          std::string rawtext = src.substr(body, t - body);
          if (m2 == '-') rawtext = rstrip_ws(rawtext);
          if (!rawtext.empty()) out.push_back({Tok::Text, rawtext, body});
          pos = finish_tag(r, 2, true);
          break;
        }
        s = t + 2;
      }
      continue;
    }

    const bool is_var = kind == '{';
    out.push_back({is_var ? Tok::VarBegin : Tok::BlockBegin, "", start});
    int depth = 0;
    std::string brackets;
    bool closed = false;
    bool prev_dot = false;
    while (p < n) {
      while (p < n && is_ws(src[p])) ++p;
      if (p >= n) break;
      if (depth == 0) {
        const char* end = is_var ? "}}" : "%}";
        if ((src[p] == '-' || (!is_var && src[p] == '+')) && src.compare(p + 1, 2, end) == 0) {
          out.push_back({is_var ? Tok::VarEnd : Tok::BlockEnd, "", p});
          pos = finish_tag(p, 2, !is_var);
          closed = true;
          break;
        }
        if (src.compare(p, 2, end) == 0) {
          out.push_back({is_var ? Tok::VarEnd : Tok::BlockEnd, "", p});
          pos = finish_tag(p, 2, !is_var);
          closed = true;
          break;
        }
      }
      char c = src[p];
      size_t tpos = p;
      if (is_name_start(c)) {
        size_t e = p;
        while (e < n && is_name_char(src[e])) ++e;
        out.push_back({Tok::Name, src.substr(p, e - p), tpos});
        p = e;
        prev_dot = false;
        continue;
      }
      if (is_digit(c)) {
        size_t e = p;
        while (e < n && (is_digit(src[e]) || src[e] == '_')) ++e;
        bool is_float = false;
        if (!prev_dot && e + 1 < n && src[e] == '.' && is_digit(src[e + 1])) {
          is_float = true;
          ++e;
          while (e < n && (is_digit(src[e]) || src[e] == '_')) ++e;
        }
        if (!prev_dot && e < n && (src[e] == 'e' || src[e] == 'E')) {
          size_t f = e + 1;
          if (f < n && (src[f] == '+' || src[f] == '-')) ++f;
          if (f < n && is_digit(src[f])) {
            is_float = true;
            e = f;
            while (e < n && (is_digit(src[e]) || src[e] == '_')) ++e;
          }
        }
        std::string spelled;
        for (size_t k = p; k < e; ++k)
          if (src[k] != '_') spelled += src[k];
        out.push_back({is_float ? Tok::Float : Tok::Int, spelled, tpos});
        p = e;
        prev_dot = false;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < n && src[e] != c) {
          if (src[e] == '\\') ++e;
          ++e;
        }
        if (e >= n) lex_fail(src, p, "unterminated string literal");
        out.push_back({Tok::String, unescape(src, p + 1, std::string_view(src).substr(p + 1, e - p - 1)), tpos});
        p = e + 1;
        prev_dot = false;
        continue;
      }
      static const char* ops2[] = {"//", "**", "==", "!=", "<=", ">="};
      bool matched = false;
      for (const char* op : ops2) {
        if (src.compare(p, 2, op) == 0) {
          out.push_back({Tok::Op, op, tpos});
          p += 2;
          matched = true;
          break;
        }
      }
      if (matched) {
        prev_dot = false;
        continue;
      }
      if (std::strchr("+-*/%~<>=()[]{},.:|;", c) != nullptr) {
        if (c == '(' || c == '[' || c == '{') {
          brackets.push_back(c);
          ++depth;
        }
        if (c == ')' || c == ']' || c == '}') {
          if (depth == 0) lex_fail(src, p, std::string("unexpected '") + c + "'");
          char open = brackets.back();
          char want = open == '(' ? ')' : open == '[' ? ']' : '}';
          if (c != want) lex_fail(src, p, std::string("unexpected '") + c + "', expected '" + want + "'");
          brackets.pop_back();
          --depth;
        }
        out.push_back({Tok::Op, std::string(1, c), tpos});
        prev_dot = c == '.';
        ++p;
        continue;
      }
      lex_fail(src, p, std::string("unexpected character '") + c + "'");
    }
    if (!closed) lex_fail(src, start, is_var ? "missing end of expression '}}'" : "missing end of tag '%}'");
  }
  out.push_back({Tok::Eof, "", n});
  return out;
}

}  // namespace swz::chat::detail
