#include "frontend_ast/code_regions.h"

#include <cctype>
#include <optional>

namespace swz::frontend_ast {

namespace {

constexpr std::string_view kArrow = "\xE2\x86\x92";  // U+2192 RIGHTWARDS ARROW

struct Line {
  size_t begin;     // first byte
  size_t end;       // one past the '\n' (or the text's end)
  std::string_view body;  // without '\n' / "\r\n"
};

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view body = text.substr(pos, (nl == std::string_view::npos ? text.size() : nl) - pos);
    if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
    lines.push_back({pos, end, body});
    pos = end;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

struct Fence {
  char ch;
  size_t len;
  std::string_view info;
};

std::optional<Fence> fence_open(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return std::nullopt;
  const char ch = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == ch) ++n;
  if (n < 3) return std::nullopt;
  std::string_view info = trim(line.substr(i + n));
  if (ch == '`' && info.find('`') != std::string_view::npos) return std::nullopt;
  return Fence{ch, n, info};
}

bool fence_close(std::string_view line, const Fence& f) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == f.ch) ++n;
  return n >= f.len && trim(line.substr(i + n)).empty();
}

/// The number and the prefix length of a numbered line, for the given form.
std::optional<std::pair<long, size_t>> numbered(std::string_view line, Numbering form) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const size_t digits = i;
  long n = 0;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])) && i - digits < 9) n = n * 10 + (line[i++] - '0');
  if (i == digits) return std::nullopt;
  if (form == Numbering::Arrow && line.substr(i, kArrow.size()) == kArrow) return std::make_pair(n, i + kArrow.size());
  if (form == Numbering::Tab && i < line.size() && line[i] == '\t') return std::make_pair(n, i + 1);
  return std::nullopt;
}

/// A word of `s` that names a file of a known language (backticks, quotes, '*' and a
/// trailing ':' or ',' stripped), or "".
std::string path_in(std::string_view s) {
  std::string found;
  size_t pos = 0;
  while (pos < s.size()) {
    while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
    size_t end = pos;
    while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
    std::string_view w = s.substr(pos, end - pos);
    if (const size_t eq = w.find('='); eq != std::string_view::npos) w = w.substr(eq + 1);  // title="x.py"
    while (!w.empty() && std::string_view("`'\"*([<").find(w.front()) != std::string_view::npos) w.remove_prefix(1);
    while (!w.empty() && std::string_view("`'\"*:,.)]>").find(w.back()) != std::string_view::npos) w.remove_suffix(1);
    if (!w.empty() && language_from_path(w) != Language::None) return std::string(w);
    pos = end;
  }
  return found;
}

/// `<file path="P">` / `<file name="P">` / `<document path="P">` alone on a line (the
/// way agents pin files): the tag name and the path, or nullopt.
std::optional<std::pair<std::string, std::string>> file_tag_open(std::string_view line) {
  line = trim(line);
  if (line.size() < 4 || line.front() != '<' || line.back() != '>' || line[1] == '/') return std::nullopt;
  const size_t name_end = line.find_first_of(" >");
  const std::string tag(line.substr(1, name_end - 1));
  if (tag != "file" && tag != "document") return std::nullopt;
  for (std::string_view attr : {"path=\"", "name=\""}) {
    const size_t a = line.find(attr);
    if (a == std::string_view::npos) continue;
    const size_t b = a + attr.size(), e = line.find('"', b);
    if (e == std::string_view::npos) return std::nullopt;
    return std::make_pair(tag, std::string(line.substr(b, e - b)));
  }
  return std::nullopt;
}

}  // namespace

std::string region_code(std::string_view bytes, Numbering numbering) {
  if (numbering == Numbering::None) return std::string(bytes);
  std::string code;
  code.reserve(bytes.size());
  for (const Line& l : split_lines(bytes)) {
    std::string_view full = bytes.substr(l.begin, l.end - l.begin);
    if (auto num = numbered(full, numbering)) full.remove_prefix(num->second);
    code += full;
  }
  return code;
}

std::vector<CodeRegion> find_code_regions(std::string_view text, std::string_view path_hint) {
  std::vector<CodeRegion> out;
  const std::vector<Line> lines = split_lines(text);
  auto finish = [&](CodeRegion r, size_t first_line) {
    if (r.path.empty()) {
      for (size_t k = first_line; k-- > 0;) {  // the non-empty line above (above the fence, for fences)
        if (trim(lines[k].body).empty()) continue;
        if (r.fenced && k + 1 == first_line) continue;  // the fence line itself
        r.path = path_in(lines[k].body);
        break;
      }
    }
    if (r.path.empty()) r.path = path_in(path_hint);
    if (r.lang == Language::None && !r.path.empty()) r.lang = language_from_path(r.path);
    if (r.lang == Language::None) r.lang = language_from_content(region_code(text.substr(r.begin, r.end - r.begin), r.numbering));
    out.push_back(std::move(r));
  };
  size_t i = 0;
  while (i < lines.size()) {
    if (auto f = fence_open(lines[i].body)) {
      size_t j = i + 1;
      while (j < lines.size() && !fence_close(lines[j].body, *f)) ++j;
      if (j > i + 1) {
        CodeRegion r;
        r.fenced = true;
        r.begin = lines[i + 1].begin;
        r.end = lines[j - 1].end;
        std::string_view info = f->info;
        std::string_view tag = info.substr(0, info.find_first_of(" \t{"));
        std::string_view rest = tag.size() < info.size() ? info.substr(tag.size()) : std::string_view();
        if (const size_t colon = tag.find(':'); colon != std::string_view::npos) {
          rest = tag.substr(colon + 1);
          tag = tag.substr(0, colon);
        }
        r.lang = language_from_tag(tag);
        r.path = path_in(r.lang == Language::None ? info : rest);
        finish(std::move(r), i + 1);
      }
      i = j + 1;
      continue;
    }
    if (auto tag = file_tag_open(lines[i].body)) {
      const std::string close = "</" + tag->first + ">";
      size_t j = i + 1;
      while (j < lines.size() && trim(lines[j].body) != close) ++j;
      if (j < lines.size() && j > i + 1) {
        CodeRegion r;
        r.fenced = true;
        r.begin = lines[i + 1].begin;
        r.end = lines[j - 1].end;
        r.path = tag->second;
        r.lang = language_from_path(r.path);
        finish(std::move(r), i + 1);
        i = j + 1;
        continue;
      }
    }
    bool took = false;
    for (Numbering form : {Numbering::Arrow, Numbering::Tab}) {
      auto first = numbered(lines[i].body, form);
      if (!first) continue;
      size_t j = i + 1;
      long expect = first->first + 1;
      for (; j < lines.size(); ++j, ++expect) {
        auto n = numbered(lines[j].body, form);
        if (!n || n->first != expect) break;
      }
      if (j - i >= 2) {
        CodeRegion r;
        r.numbering = form;
        r.begin = lines[i].begin;
        r.end = lines[j - 1].end;
        finish(std::move(r), i);
        i = j;
        took = true;
        break;
      }
    }
    if (!took) ++i;
  }
  return out;
}

}  // namespace swz::frontend_ast
