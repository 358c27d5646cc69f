// Interpreter of the Jinja2 subset: statements, expressions, and the builtin filters, tests,
// methods and globals. Semantics follow jinja2 3.1 on Python 3 in transformers'
// ImmutableSandboxedEnvironment (mutating list/dict methods are "unsafe" and raise), with the
// default Undefined: printing/iterating/testing an undefined value is fine, using it in
// arithmetic, attribute access, calls or tojson is an error. Scoping as jinja2: `set` inside a
// for-loop body binds in that iteration's scope (each iteration starts from the outer values),
// `if` has no scope, macros see the template's variables and their own arguments.
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <unordered_map>

#include "chat/jinja_internal.h"

namespace swz::chat::detail {

namespace {

constexpr size_t kMaxOutput = 64u << 20;   // 64 MiB of rendered text
constexpr int64_t kMaxRange = 1000000;     // range() length
constexpr int kMaxCallDepth = 100;         // macro recursion
constexpr int kMaxEvalDepth = 1500;        // nested eval/exec frames (bounds native stack use)

struct RaisedFault {
  std::string msg;
};

using Frame = std::unordered_map<std::string, Value>;
using FrameP = std::shared_ptr<Frame>;
using Stack = std::vector<FrameP>;

enum class Flow { Normal, Break, Continue };

// ---- small helpers ---------------------------------------------------------------------------

const Str& as_str(const Value& v, const char* what) {
  if (v.t != Value::T::Str) fault(std::string(what) + ": expected a string, got " + type_name(v));
  return *v.str;
}

void check_defined(const Value& v) {
  if (v.is_undefined()) fault(v.undef_hint.empty() ? "value is undefined" : v.undef_hint);
}

int64_t as_int(const Value& v, const char* what) {
  check_defined(v);
  if (v.t == Value::T::Int) return v.i;
  if (v.t == Value::T::Bool) return v.b;
  fault(std::string(what) + ": expected an integer, got " + type_name(v));
}

std::vector<uint32_t> codepoints(std::string_view s) {
  std::vector<uint32_t> cps;
  size_t p = 0;
  while (p < s.size()) cps.push_back(utf8_decode_at(s, p));
  return cps;
}

// Case mapping over code points, as Python's str.upper()/lower() for the scripts chat text
// commonly uses: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, fullwidth Latin; 'ß'
// uppercases to "SS". Other scripts pass through unchanged (documented limitation).
uint32_t upper_cp(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xB5) return 0x39C;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    bool odd_lower = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    bool even_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower && (c & 1)) return c - 1;
    if (even_lower && !(c & 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}
uint32_t lower_cp(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';
    bool even_upper = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (even_upper && !(c & 1)) return c + 1;
    if (odd_upper && (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}
bool is_cased(uint32_t c) { return upper_cp(c) != c || lower_cp(c) != c || c == 0xDF; }
bool is_lower_cp(uint32_t c) { return upper_cp(c) != c || c == 0xDF; }
bool is_upper_cp(uint32_t c) { return lower_cp(c) != c; }

void put_upper(std::string& out, uint32_t c) {
  if (c == 0xDF) out += "SS";
  else append_utf8(out, upper_cp(c));
}

enum class CaseMode { Upper, Lower, Swap, Capitalize, TitleMethod, TitleFilter };

// Python str.upper/lower/swapcase/capitalize/title, and jinja2's title filter (words start
// after runs of [-\s({[<]).
std::string case_map(std::string_view s, CaseMode m) {
  std::string out;
  out.reserve(s.size());
  size_t p = 0;
  bool first = true, prev_cased = false, word_start = true;
  while (p < s.size()) {
    uint32_t c = utf8_decode_at(s, p);
    switch (m) {
      case CaseMode::Upper: put_upper(out, c); break;
      case CaseMode::Lower: append_utf8(out, lower_cp(c)); break;
      case CaseMode::Swap:
        if (is_upper_cp(c)) append_utf8(out, lower_cp(c));
        else put_upper(out, c);
        break;
      case CaseMode::Capitalize:
        if (first) put_upper(out, c);
        else append_utf8(out, lower_cp(c));
        break;
      case CaseMode::TitleMethod:
        if (prev_cased) append_utf8(out, lower_cp(c));
        else put_upper(out, c);
        prev_cased = is_cased(c);
        break;
      case CaseMode::TitleFilter: {
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
        if (sep) {
          append_utf8(out, c);
          word_start = true;
        } else {
          if (word_start) put_upper(out, c);
          else append_utf8(out, lower_cp(c));
          word_start = false;
        }
        break;
      }
    }
    first = false;
  }
  return out;
}
std::string lower(std::string_view s) { return case_map(s, CaseMode::Lower); }

// Python str.islower()/isupper(): at least one cased character and none of the other case.
bool case_test(std::string_view s, bool want_lower) {
  bool cased = false;
  size_t p = 0;
  while (p < s.size()) {
    uint32_t c = utf8_decode_at(s, p);
    if (is_lower_cp(c)) {
      cased = true;
      if (!want_lower) return false;
    } else if (is_upper_cp(c)) {
      cased = true;
      if (want_lower) return false;
    }
  }
  return cased;
}

// Python str.strip family over code points; exact (keeps taint ranges).
Str strip(const Str& s, bool left, bool right, const Value* chars) {
  std::vector<uint32_t> set;
  bool ws = !chars || chars->t == Value::T::None || chars->is_undefined();
  if (!ws) set = codepoints(as_str(*chars, "strip").s);
  auto match = [&](uint32_t c) { return ws ? py_isspace(c) : std::find(set.begin(), set.end(), c) != set.end(); };
  std::vector<size_t> off = utf8_offsets(s.s);
  size_t n = off.size() - 1, b = 0, e = n;
  if (left) {
    while (b < e) {
      size_t p = off[b];
      if (!match(utf8_decode_at(s.s, p))) break;
      ++b;
    }
  }
  if (right) {
    while (e > b) {
      size_t p = off[e - 1];
      if (!match(utf8_decode_at(s.s, p))) break;
      --e;
    }
  }
  return s.substr(off[b], off[e] - off[b]);
}

std::vector<Value> split(const Str& s, const Value* sepv, int64_t maxsplit, bool from_right) {
  std::vector<Str> parts;
  bool ws = !sepv || sepv->t == Value::T::None;
  if (ws) {
    // Runs of whitespace separate; leading/trailing whitespace ignored.
    std::vector<size_t> off = utf8_offsets(s.s);
    size_t n = off.size() - 1;
    auto space_at = [&](size_t k) { size_t p = off[k]; return py_isspace(utf8_decode_at(s.s, p)); };
    std::vector<std::pair<size_t, size_t>> words;
    size_t k = 0;
    while (k < n) {
      while (k < n && space_at(k)) ++k;
      if (k >= n) break;
      size_t b = k;
      while (k < n && !space_at(k)) ++k;
      words.emplace_back(b, k);
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      // Merge the words beyond maxsplit into the last (or first) part, trimming outer space.
      if (!from_right) {
        size_t b = words[static_cast<size_t>(maxsplit)].first;
        size_t e = n;
        while (e > b && space_at(e - 1)) --e;
        words.resize(static_cast<size_t>(maxsplit));
        words.emplace_back(b, e);
      } else {
        size_t keep = static_cast<size_t>(maxsplit);
        size_t e = words[words.size() - keep - 1].second;
        size_t b = 0;
        while (b < e && space_at(b)) ++b;
        std::vector<std::pair<size_t, size_t>> w2{{b, e}};
        w2.insert(w2.end(), words.end() - static_cast<long>(keep), words.end());
        words = std::move(w2);
      }
    }
    for (auto [b, e] : words) parts.push_back(s.substr(off[b], off[e] - off[b]));
  } else {
    const std::string& sep = as_str(*sepv, "split").s;
    if (sep.empty()) fault("ValueError: empty separator");
    std::vector<size_t> cuts;  // start offsets of separators used
    if (!from_right) {
      size_t p = 0;
      while (maxsplit < 0 || static_cast<int64_t>(cuts.size()) < maxsplit) {
        size_t f = s.s.find(sep, p);
        if (f == std::string::npos) break;
        cuts.push_back(f);
        p = f + sep.size();
      }
    } else {
      size_t end = s.s.size();
      while (maxsplit < 0 || static_cast<int64_t>(cuts.size()) < maxsplit) {
        if (end < sep.size()) break;
        size_t f = s.s.rfind(sep, end - sep.size());
        if (f == std::string::npos) break;
        cuts.insert(cuts.begin(), f);
        end = f;
      }
    }
    size_t p = 0;
    for (size_t c : cuts) {
      parts.push_back(s.substr(p, c - p));
      p = c + sep.size();
    }
    parts.push_back(s.substr(p, s.s.size() - p));
  }
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& nw, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `nw` before every code point and at the end.
    std::vector<size_t> off = utf8_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      if (count < 0 || done < count) { out += nw; ++done; }
      out.append(s, off[k], off[k + 1] - off[k]);
    }
    if (count < 0 || done < count) out += nw;
    return out;
  }
  size_t p = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, p);
    if (f == std::string::npos) break;
    out.append(s, p, f - p);
    out += nw;
    p = f + old.size();
    ++done;
  }
  out.append(s, p, std::string::npos);
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Python's str.splitlines() boundaries: returns [begin, end_without_terminator, end_with].
std::vector<std::array<size_t, 3>> splitlines(const std::string& s) {
  std::vector<std::array<size_t, 3>> lines;
  size_t p = 0, b = 0;
  while (p < s.size()) {
    size_t start = p;
    uint32_t c = utf8_decode_at(s, p);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && p < s.size() && s[p] == '\n') ++p;
    lines.push_back({b, start, p});
    b = p;
  }
  if (b < s.size()) lines.push_back({b, s.size(), s.size()});
  return lines;
}

// Python printf-style formatting: "%s" % x, "..."|format(...).
std::string percent_format(const std::string& fmt, const std::vector<Value>& args, const Value* mapping) {
  std::string out;
  size_t ai = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fault("ValueError: incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t e = fmt.find(')', i);
      if (e == std::string::npos || !mapping) fault("format requires a mapping");
      arg = mapping->dict->find(fmt.substr(i + 1, e - i - 1));
      if (!arg) fault("KeyError: '" + fmt.substr(i + 1, e - i - 1) + "'");
      i = e + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i])) spec += fmt[i++];
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) spec += fmt[i++];
    if (i < fmt.size() && fmt[i] == '.') {
      spec += fmt[i++];
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) spec += fmt[i++];
    }
    if (i >= fmt.size()) fault("ValueError: incomplete format");
    char conv = fmt[i];
    if (!arg) {
      if (ai >= args.size()) fault("TypeError: not enough arguments for format string");
      arg = &args[ai++];
    }
    char buf[512];
    switch (conv) {
      case 's': case 'r': {
        std::string v = conv == 's' ? py_str(*arg).s : py_repr(*arg);
        std::snprintf(buf, sizeof buf, (spec + "s").c_str(), "");
        // width/precision on strings: apply manually (snprintf cannot take embedded NULs safely).
        std::string s2 = spec.substr(1);
        bool left = s2.find('-') != std::string::npos;
        size_t dot = s2.find('.');
        std::string wpart = s2.substr(0, dot);
        wpart.erase(std::remove_if(wpart.begin(), wpart.end(), [](char c) { return !std::isdigit(static_cast<unsigned char>(c)); }), wpart.end());
        if (dot != std::string::npos) {
          size_t prec = static_cast<size_t>(std::atoi(s2.c_str() + dot + 1));
          std::vector<size_t> off = utf8_offsets(v);
          if (prec + 1 < off.size()) v = v.substr(0, off[prec]);
        }
        size_t width = wpart.empty() ? 0 : static_cast<size_t>(std::atoi(wpart.c_str()));
        size_t len = utf8_offsets(v).size() - 1;
        if (len < width) v = left ? v + std::string(width - len, ' ') : std::string(width - len, ' ') + v;
        out += v;
        break;
      }
      case 'd': case 'i': case 'x': case 'X': case 'o': {
        int64_t n;
        if (arg->t == Value::T::Float) n = static_cast<int64_t>(arg->f);
        else n = as_int(*arg, "format");
        std::string cs = spec + "ll" + (conv == 'i' ? 'd' : conv);
        std::snprintf(buf, sizeof buf, cs.c_str(), static_cast<long long>(n));
        out += buf;
        break;
      }
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
        check_defined(*arg);
        if (!arg->is_number()) fault(std::string("TypeError: must be real number, not ") + type_name(*arg));
        double d = arg->t == Value::T::Float ? arg->f : arg->t == Value::T::Int ? static_cast<double>(arg->i) : arg->b;
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), d);
        out += buf;
        break;
      }
      default:
        fault(std::string("ValueError: unsupported format character '") + conv + "'");
    }
  }
  if (!mapping && ai < args.size()) fault("TypeError: not all arguments converted during string formatting");
  return out;
}

// Python str.format with plain replacement fields: {}, {0}, {name}; {{ and }} escape.
std::string brace_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; ++i; continue; }
      size_t e = fmt.find('}', i);
      if (e == std::string::npos) fault("ValueError: Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, e - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        fault("str.format: conversions, format specs and attribute fields are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        if (auto_idx >= a.pos.size()) fault("IndexError: Replacement index out of range");
        v = &a.pos[auto_idx++];
      } else if (std::all_of(field.begin(), field.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
        size_t k = static_cast<size_t>(std::stoul(field));
        if (k >= a.pos.size()) fault("IndexError: Replacement index out of range");
        v = &a.pos[k];
      } else {
        for (const auto& kv : a.kw)
          if (kv.first == field) v = &kv.second;
        if (!v) fault("KeyError: '" + field + "'");
      }
      out += py_str(*v).s;
      i = e;
    } else if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') { out += '}'; ++i; continue; }
      fault("ValueError: Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

bool args_have_data(const CallArgs& a) {
  for (const Value& v : a.pos)
    if (any_data(v)) return true;
  for (const auto& kv : a.kw)
    if (any_data(kv.second)) return true;
  return false;
}

// Binds call arguments to a Python-style signature (positional names in order, then keywords).
struct Sig {
  std::vector<std::optional<Value>> v;
  Sig(const CallArgs& a, const char* fn, std::initializer_list<const char*> names, bool extra_pos = false) {
    std::vector<const char*> nm(names);
    v.resize(nm.size());
    if (!extra_pos && a.pos.size() > nm.size())
      fault(std::string(fn) + "() takes at most " + std::to_string(nm.size()) + " argument(s), " + std::to_string(a.pos.size()) + " given");
    for (size_t k = 0; k < a.pos.size() && k < nm.size(); ++k) v[k] = a.pos[k];
    for (const auto& kv : a.kw) {
      auto it = std::find_if(nm.begin(), nm.end(), [&](const char* s) { return kv.first == s; });
      if (it == nm.end()) fault(std::string(fn) + "() got an unexpected keyword argument '" + kv.first + "'");
      size_t k = static_cast<size_t>(it - nm.begin());
      if (v[k]) fault(std::string(fn) + "() got multiple values for argument '" + kv.first + "'");
      v[k] = kv.second;
    }
  }
  const Value* get(size_t k) const { return v[k] ? &*v[k] : nullptr; }
  Value get_or(size_t k, Value d) const { return v[k] ? *v[k] : d; }
  bool flag(size_t k, bool d) const { return v[k] ? truthy(*v[k]) : d; }
};

// Items of an iterable in Python order: list elements, dict keys, string characters.
List iterate(const Value& v) {
  switch (v.t) {
    case Value::T::Undefined: return {};
    case Value::T::List: return *v.list;
    case Value::T::Dict: {
      List l;
      for (const auto& kv : v.dict->items) l.push_back(Value::string(kv.first));
      return l;
    }
    case Value::T::Str: {
      List l;
      std::vector<size_t> off = utf8_offsets(v.str->s);
      for (size_t k = 0; k + 1 < off.size(); ++k) l.push_back(Value::string(v.str->substr(off[k], off[k + 1] - off[k])));
      return l;
    }
    default: fault(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

int64_t py_len(const Value& v) {
  if (v.is_gen) fault("object of type 'generator' has no len()");
  switch (v.t) {
    case Value::T::Undefined: return 0;
    case Value::T::Str: return static_cast<int64_t>(utf8_offsets(v.str->s).size() - 1);
    case Value::T::List: return static_cast<int64_t>(v.list->size());
    case Value::T::Dict: return static_cast<int64_t>(v.dict->items.size());
    default: fault(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

// Python float(str) syntax (after strip): decimal with optional exponent and '_' between
// digits, or inf/infinity/nan; no hex (strtod alone would accept "0x1A").
std::optional<double> py_parse_float(std::string t) {
  if (t.empty()) return std::nullopt;
  std::string low;
  for (char c : t) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") return std::strtod(low.c_str(), nullptr);
  std::string clean;
  size_t i = 0, n = body.size();
  bool digits = false;
  auto eat_digits = [&]() {
    bool any = false;
    while (i < n && (std::isdigit(static_cast<unsigned char>(body[i])) ||
                     (body[i] == '_' && any && i + 1 < n && std::isdigit(static_cast<unsigned char>(body[i + 1]))))) {
      if (body[i] != '_') clean += body[i];
      any = true;
      ++i;
    }
    return any;
  };
  digits = eat_digits();
  if (i < n && body[i] == '.') {
    clean += '.';
    ++i;
    digits = eat_digits() || digits;
  }
  if (!digits) return std::nullopt;
  if (i < n && body[i] == 'e') {
    clean += 'e';
    ++i;
    if (i < n && (body[i] == '+' || body[i] == '-')) clean += body[i++];
    if (!eat_digits()) return std::nullopt;
  }
  if (i != n) return std::nullopt;
  double d = std::strtod(clean.c_str(), nullptr);
  return low[0] == '-' ? -d : d;
}

std::string object_repr(const Value& v) {
  if (v.t == Value::T::None) return "None";
  return std::string(type_name(v)) + " object";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The interpreter
// ---------------------------------------------------------------------------------------------

struct Interp {
  const Program& prog;
  Stack stack;
  Frame globals;
  int call_depth = 0;
  int eval_depth = 0;
  const Value* placeholder = nullptr;

  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(x) {
      if (++d > kMaxEvalDepth) {
        --d;
        fault("template evaluation nested too deeply");
      }
    }
    ~DepthGuard() { --d; }
  };  // input of a filter block / set block filter

  explicit Interp(const Program& p) : prog(p) {}

  [[noreturn]] void error_at(size_t pos, const std::string& msg, bool raised = false) const {
    size_t line, col;
    prog.position(pos, line, col);
    TemplateError e(line, col, msg);
    if (raised) e.set_raised_by_template();
    throw e;
  }

  Value lookup(const std::string& name) const {
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    auto g = globals.find(name);
    if (g != globals.end()) return g->second;
    return Value::undefined("'" + name + "' is undefined");
  }

  // ---- attribute / item access ----------------------------------------------------------

  Value bound(const std::string& name, std::function<Value(Interp&, CallArgs&)> f) {
    return Value::callable(name, std::move(f));
  }

  Value unsafe(const Value& obj, const std::string& attr) {
    std::string msg = "access to attribute '" + attr + "' of '" + type_name(obj) + "' object is unsafe.";
    return bound(attr, [msg](Interp&, CallArgs&) -> Value { fault(msg); });
  }

  Value str_method(const Value& obj, const std::string& m);
  Value getattr(const Value& obj, const std::string& attr);
  Value getitem(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value* a, const Value* b, const Value* c);

  // ---- evaluation -----------------------------------------------------------------------

  Value eval(const Expr& e) {
    try {
      DepthGuard g(eval_depth);
      return eval_inner(e);
    } catch (const RuntimeFault& f) {
      error_at(e.pos, f.msg);
    } catch (const RaisedFault& f) {
      error_at(e.pos, f.msg, true);
    }
  }
  Value eval_inner(const Expr& e);
  Value binop(const std::string& op, const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  Value call(const Value& callee, CallArgs& args);
  CallArgs eval_args(const Expr& e);
  Value apply_filter(const std::string& name, const Value& in, CallArgs& args, size_t pos);
  bool apply_test(const std::string& name, const Value& in, const CallArgs& args);

  // ---- statements -----------------------------------------------------------------------

  Flow exec(const Body& body, Str& out);
  Flow exec_stmt(const Stmt& s, Str& out);
  void emit(Str& out, const Str& s) {
    if (out.s.size() + s.s.size() > kMaxOutput) fault("rendered output exceeds 64 MiB");
    out.append(s);
  }
  void assign_targets(const std::vector<std::string>& targets, const Value& v) {
    Frame& f = *stack.back();
    if (targets.size() == 1) {
      f[targets[0]] = v;
      return;
    }
    List items = iterate(v);
    if (items.size() != targets.size())
      fault(items.size() > targets.size() ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                                          : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
    for (size_t k = 0; k < targets.size(); ++k) f[targets[k]] = items[k];
  }
  Value make_macro(const Stmt& s);
  void install_globals();
};

Value Interp::getattr(const Value& obj, const std::string& attr) {
  switch (obj.t) {
    case Value::T::Undefined:
      check_defined(obj);
      break;
    case Value::T::Dict: {
      if (attr == "get") {
        auto d = obj.dict;
        return bound("get", [d](Interp&, CallArgs& a) {
          Sig s(a, "get", {"key", "default"});
          if (!s.get(0)) fault("get() missing required argument 'key'");
          const Value* v = s.get(0)->t == Value::T::Str ? d->find(s.get(0)->str->s) : nullptr;
          return v ? *v : s.get_or(1, Value::none());
        });
      }
      if (attr == "items" || attr == "keys" || attr == "values") {
        auto d = obj.dict;
        return bound(attr, [d, attr](Interp&, CallArgs& a) {
          Sig s(a, attr.c_str(), {});
          List l;
          for (const auto& kv : d->items) {
            if (attr == "items") l.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
            else if (attr == "keys") l.push_back(Value::string(kv.first));
            else l.push_back(kv.second);
          }
          return Value::make_list(std::move(l));
        });
      }
      if (attr == "pop" || attr == "popitem" || attr == "update" || attr == "clear" || attr == "setdefault")
        return unsafe(obj, attr);
      if (const Value* v = obj.dict->find(attr)) return *v;
      break;
    }
    case Value::T::Namespace:
      if (const Value* v = obj.dict->find(attr)) return *v;
      break;
    case Value::T::Str:
      return str_method(obj, attr);
    case Value::T::List: {
      if (attr == "append" || attr == "pop" || attr == "extend" || attr == "insert" || attr == "remove" ||
          attr == "clear" || attr == "sort" || attr == "reverse")
        return unsafe(obj, attr);
      if (attr == "index" || attr == "count") {
        auto l = obj.list;
        return bound(attr, [l, attr](Interp&, CallArgs& a) {
          Sig s(a, attr.c_str(), {"value"});
          if (!s.get(0)) fault(attr + "() takes exactly one argument");
          int64_t cnt = 0;
          for (size_t k = 0; k < l->size(); ++k) {
            if (equals((*l)[k], *s.get(0))) {
              if (attr == "index") return Value::integer(static_cast<int64_t>(k));
              ++cnt;
            }
          }
          if (attr == "index") fault("ValueError: value is not in list");
          return Value::integer(cnt);
        });
      }
      break;
    }
    default:
      break;
  }
  return Value::undefined("'" + object_repr(obj) + "' has no attribute '" + attr + "'");
}

Value Interp::str_method(const Value& obj, const std::string& m) {
  auto sp = obj.str;
  auto mk = [&](auto f) { return bound(m, f); };
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    return mk([sp, m](Interp&, CallArgs& a) {
      Sig s(a, m.c_str(), {"chars"});
      return Value::string(strip(*sp, m != "rstrip", m != "lstrip", s.get(0)));
    });
  }
  if (m == "split" || m == "rsplit") {
    return mk([sp, m](Interp&, CallArgs& a) {
      Sig s(a, m.c_str(), {"sep", "maxsplit"});
      int64_t maxsplit = s.get(1) ? as_int(*s.get(1), m.c_str()) : -1;
      return Value::make_list(split(*sp, s.get(0), maxsplit, m == "rsplit"));
    });
  }
  if (m == "splitlines") {
    return mk([sp](Interp&, CallArgs& a) {
      Sig s(a, "splitlines", {"keepends"});
      bool keep = s.flag(0, false);
      List l;
      for (auto& ln : splitlines(sp->s)) l.push_back(Value::string(sp->substr(ln[0], (keep ? ln[2] : ln[1]) - ln[0])));
      return Value::make_list(std::move(l));
    });
  }
  if (m == "startswith" || m == "endswith") {
    return mk([sp, m](Interp&, CallArgs& a) {
      Sig s(a, m.c_str(), {"prefix"});
      if (!s.get(0)) fault(m + "() takes at least 1 argument");
      List cands = s.get(0)->t == Value::T::List && s.get(0)->is_tuple ? *s.get(0)->list : List{*s.get(0)};
      for (const Value& c : cands) {
        const std::string& p = as_str(c, m.c_str()).s;
        bool ok = m == "startswith" ? sp->s.compare(0, p.size(), p) == 0
                                    : (sp->s.size() >= p.size() && sp->s.compare(sp->s.size() - p.size(), p.size(), p) == 0);
        if (ok) return Value::boolean(true);
      }
      return Value::boolean(false);
    });
  }
  if (m == "upper" || m == "lower" || m == "title" || m == "capitalize" || m == "swapcase") {
    return mk([sp, m](Interp&, CallArgs& a) {
      Sig s(a, m.c_str(), {});
      CaseMode cm = m == "upper" ? CaseMode::Upper : m == "lower" ? CaseMode::Lower : m == "swapcase" ? CaseMode::Swap
                  : m == "capitalize" ? CaseMode::Capitalize : CaseMode::TitleMethod;
      std::string r = case_map(sp->s, cm);
      return Value::string(derived(r, sp->has_data()));
    });
  }
  if (m == "replace") {
    return mk([sp](Interp&, CallArgs& a) {
      Sig s(a, "replace", {"old", "new", "count"});
      if (!s.get(0) || !s.get(1)) fault("replace() takes at least 2 arguments");
      const Str &o = as_str(*s.get(0), "replace"), &n = as_str(*s.get(1), "replace");
      int64_t cnt = s.get(2) ? as_int(*s.get(2), "replace") : -1;
      return Value::string(derived(py_replace(sp->s, o.s, n.s, cnt), sp->has_data() || n.has_data()));
    });
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    return mk([sp, m](Interp&, CallArgs& a) {
      Sig s(a, m.c_str(), {"sub"});
      if (!s.get(0)) fault(m + "() takes at least 1 argument");
      const std::string& sub = as_str(*s.get(0), m.c_str()).s;
      if (m == "count") {
        if (sub.empty()) return Value::integer(py_len(Value::string(*sp)) + 1);
        int64_t c = 0;
        for (size_t p = sp->s.find(sub); p != std::string::npos; p = sp->s.find(sub, p + sub.size())) ++c;
        return Value::integer(c);
      }
      size_t p = (m == "find" || m == "index") ? sp->s.find(sub) : sp->s.rfind(sub);
      if (p == std::string::npos) {
        if (m == "index" || m == "rindex") fault("ValueError: substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(utf8_offsets(sp->s.substr(0, p)).size() - 1));
    });
  }
  if (m == "join") {
    return mk([sp](Interp&, CallArgs& a) {
      Sig s(a, "join", {"iterable"});
      if (!s.get(0)) fault("join() takes exactly one argument");
      List items = iterate(*s.get(0));
      Str out;
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out.append(*sp);
        if (items[k].t != Value::T::Str)
          fault("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(items[k]) + " found");
        out.append(*items[k].str);
      }
      return Value::string(std::move(out));
    });
  }
  if (m == "format") {
    return mk([sp](Interp&, CallArgs& a) {
      return Value::string(derived(brace_format(sp->s, a), sp->has_data() || args_have_data(a)));
    });
  }
  if (m == "isdigit" || m == "isalpha" || m == "isalnum" || m == "isspace" || m == "islower" || m == "isupper") {
    return mk([sp, m](Interp&, CallArgs& a) {
      Sig s(a, m.c_str(), {});
      const std::string& t = sp->s;
      if (m == "islower" || m == "isupper") return Value::boolean(case_test(t, m == "islower"));
      if (t.empty()) return Value::boolean(false);
      for (char c : t) {
        auto u = static_cast<unsigned char>(c);
        bool ok = m == "isdigit" ? std::isdigit(u) : m == "isalpha" ? std::isalpha(u) : m == "isalnum" ? std::isalnum(u) : std::isspace(u);
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  }
  return Value::undefined("'str object' has no attribute '" + m + "'");
}

Value Interp::getitem(const Value& obj, const Value& key) {
  check_defined(obj);
  if (obj.is_gen) return Value::undefined("'generator object' has no element " + py_repr(key));
  switch (obj.t) {
    case Value::T::Dict:
    case Value::T::Namespace:
      if (key.t == Value::T::Str) {
        if (const Value* v = obj.dict->find(key.str->s)) return *v;
        if (obj.t == Value::T::Dict) {
          Value m = getattr(obj, key.str->s);
          if (!m.is_undefined()) return m;
        }
        return Value::undefined("'" + object_repr(obj) + "' has no attribute '" + key.str->s + "'");
      }
      break;
    case Value::T::List:
    case Value::T::Str:
      if (key.t == Value::T::Int || key.t == Value::T::Bool) {
        int64_t idx = key.t == Value::T::Int ? key.i : key.b;
        if (obj.t == Value::T::List) {
          int64_t n = static_cast<int64_t>(obj.list->size());
          if (idx < 0) idx += n;
          if (idx < 0 || idx >= n) return Value::undefined("'" + object_repr(obj) + "' has no element " + std::to_string(key.i));
          return (*obj.list)[static_cast<size_t>(idx)];
        }
        std::vector<size_t> off = utf8_offsets(obj.str->s);
        int64_t n = static_cast<int64_t>(off.size()) - 1;
        if (idx < 0) idx += n;
        if (idx < 0 || idx >= n) return Value::undefined("'str object' has no element " + std::to_string(key.i));
        size_t u = static_cast<size_t>(idx);
        return Value::string(obj.str->substr(off[u], off[u + 1] - off[u]));
      }
      if (key.t == Value::T::Str) return getattr(obj, key.str->s);
      break;
    default:
      if (key.t == Value::T::Str) return getattr(obj, key.str->s);
      break;
  }
  check_defined(key);
  return Value::undefined("'" + object_repr(obj) + "' has no element " + py_repr(key));
}

Value Interp::slice(const Value& obj, const Value* a, const Value* b, const Value* c) {
  check_defined(obj);
  if (obj.is_gen) fault("'generator' object is not subscriptable");
  if (obj.t != Value::T::List && obj.t != Value::T::Str) fault(std::string("'") + type_name(obj) + "' object is not subscriptable");
  std::vector<size_t> off;
  int64_t n;
  if (obj.t == Value::T::Str) {
    off = utf8_offsets(obj.str->s);
    n = static_cast<int64_t>(off.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.list->size());
  }
  auto opt = [&](const Value* v) -> std::optional<int64_t> {
    if (!v || v->t == Value::T::None) return std::nullopt;
    return as_int(*v, "slice");
  };
  std::optional<int64_t> os = opt(a), oe = opt(b), ost = opt(c);
  int64_t step = ost.value_or(1);
  if (step == 0) fault("ValueError: slice step cannot be zero");
  // CPython PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t start = adjust(os, step < 0 ? n - 1 : 0);
  int64_t stop = adjust(oe, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  if (step > 0) for (int64_t k = start; k < stop; k += step) idx.push_back(k);
  else for (int64_t k = start; k > stop; k += step) idx.push_back(k);
  if (obj.t == Value::T::List) {
    List l;
    for (int64_t k : idx) l.push_back((*obj.list)[static_cast<size_t>(k)]);
    return Value::make_list(std::move(l), obj.is_tuple);
  }
  if (step == 1) {
    if (idx.empty()) return Value::literal("");
    size_t bb = off[static_cast<size_t>(idx.front())], ee = off[static_cast<size_t>(idx.back()) + 1];
    return Value::string(obj.str->substr(bb, ee - bb));
  }
  std::string r;
  for (int64_t k : idx) r.append(obj.str->s, off[static_cast<size_t>(k)], off[static_cast<size_t>(k) + 1] - off[static_cast<size_t>(k)]);
  return Value::string(derived(r, obj.str->has_data()));
}

bool Interp::contains(const Value& container, const Value& item) {
  switch (container.t) {
    case Value::T::Undefined: return false;
    case Value::T::Str:
      if (item.t != Value::T::Str) fault(std::string("'in <string>' requires string as left operand, not ") + type_name(item));
      return container.str->s.find(item.str->s) != std::string::npos;
    case Value::T::List:
      for (const Value& x : *container.list)
        if (equals(x, item)) return true;
      return false;
    case Value::T::Dict:
      return item.t == Value::T::Str && container.dict->find(item.str->s) != nullptr;
    default:
      fault(std::string("argument of type '") + type_name(container) + "' is not iterable");
  }
}

Value Interp::binop(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    Str s = py_str(a);
    s.append(py_str(b));
    return Value::string(std::move(s));
  }
  check_defined(a);
  check_defined(b);
  auto unsupported = [&]() -> Value {
    fault("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  };
  bool ints = (a.t == Value::T::Int || a.t == Value::T::Bool) && (b.t == Value::T::Int || b.t == Value::T::Bool);
  int64_t x = a.t == Value::T::Int ? a.i : a.b, y = b.t == Value::T::Int ? b.i : b.b;
  double fx = a.t == Value::T::Float ? a.f : static_cast<double>(x), fy = b.t == Value::T::Float ? b.f : static_cast<double>(y);
  bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(x, y, &r)) fault("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(fx + fy);
    if (a.t == Value::T::Str && b.t == Value::T::Str) {
      if (a.is_markup != b.is_markup) {
        // markupsafe: Markup + str escapes the str operand; the result is Markup.
        auto esc = [](const Value& x) { return x.is_markup ? *x.str : derived(html_escape(x.str->s), x.str->has_data()); };
        Str s = esc(a);
        s.append(esc(b));
        return Value::markup(std::move(s));
      }
      Str s = *a.str;
      s.append(*b.str);
      if (a.is_markup) return Value::markup(std::move(s));
      if (s.s.size() > kMaxOutput) fault("string too long");
      return Value::string(std::move(s));
    }
    if (a.t == Value::T::List && b.t == Value::T::List) {
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(l), a.is_tuple);
    }
    if (a.t == Value::T::Str) fault(std::string("can only concatenate str (not \"") + type_name(b) + "\") to str");
    if (a.t == Value::T::List) fault(std::string("can only concatenate list (not \"") + type_name(b) + "\") to list");
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(x, y, &r)) fault("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(fx - fy);
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(x, y, &r)) fault("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(fx * fy);
    const Value* seq = (a.t == Value::T::Str || a.t == Value::T::List) ? &a : (b.t == Value::T::Str || b.t == Value::T::List) ? &b : nullptr;
    const Value* cnt = seq == &a ? &b : &a;
    if (seq && (cnt->t == Value::T::Int || cnt->t == Value::T::Bool)) {
      int64_t k = cnt->t == Value::T::Int ? cnt->i : cnt->b;
      if (k < 0) k = 0;
      if (seq->t == Value::T::Str) {
        if (seq->str->s.size() * static_cast<uint64_t>(k) > kMaxOutput) fault("string too long");
        Str s;
        for (int64_t r = 0; r < k; ++r) s.append(*seq->str);
        return Value::string(std::move(s));
      }
      if (seq->list->size() * static_cast<uint64_t>(k) > static_cast<uint64_t>(kMaxRange)) fault("list too long");
      List l;
      for (int64_t r = 0; r < k; ++r) l.insert(l.end(), seq->list->begin(), seq->list->end());
      return Value::make_list(std::move(l), seq->is_tuple);
    }
    return unsupported();
  }
  if (op == "/") {
    if (!nums) return unsupported();
    if (fy == 0) fault("division by zero");
    return Value::floating(fx / fy);
  }
  if (op == "//") {
    if (!nums) return unsupported();
    if (ints) {
      if (y == 0) fault("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fault("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    if (fy == 0) fault("float floor division by zero");
    return Value::floating(std::floor(fx / fy));
  }
  if (op == "%") {
    if (a.t == Value::T::Str) {
      std::vector<Value> args;
      const Value* mapping = nullptr;
      if (b.t == Value::T::List && b.is_tuple) args = *b.list;
      else if (b.t == Value::T::Dict) mapping = &b;
      else args.push_back(b);
      return Value::string(derived(percent_format(a.str->s, args, mapping), a.str->has_data() || any_data(b)));
    }
    if (!nums) return unsupported();
    if (ints) {
      if (y == 0) fault("integer division or modulo by zero");
      if (y == -1) return Value::integer(0);
      int64_t r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::integer(r);
    }
    if (fy == 0) fault("float modulo");
    double r = std::fmod(fx, fy);
    if (r != 0 && ((r < 0) != (fy < 0))) r += fy;
    return Value::floating(r);
  }
  if (op == "**") {
    if (!nums) return unsupported();
    if (ints && y >= 0) {
      int64_t r = 1, base = x;
      for (int64_t e = y; e > 0; --e)
        if (__builtin_mul_overflow(r, base, &r)) fault("integer overflow");
      return Value::integer(r);
    }
    if (fx == 0 && fy < 0) fault("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(fx, fy));
  }
  fault("unknown operator " + op);
}

CallArgs Interp::eval_args(const Expr& e) {
  CallArgs a;
  for (const auto& x : e.args) a.pos.push_back(eval(*x));
  for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second));
  return a;
}

Value Interp::call(const Value& callee, CallArgs& args) {
  check_defined(callee);
  if (callee.t != Value::T::Callable) fault(std::string("'") + type_name(callee) + "' object is not callable");
  return callee.fn->fn(*this, args);
}

Value Interp::eval_inner(const Expr& e) {
  switch (e.k) {
    case Expr::K::Literal: return e.lit;
    case Expr::K::Placeholder:
      if (!placeholder) fault("internal: filter block input missing");
      return *placeholder;
    case Expr::K::Name: return lookup(e.name);
    case Expr::K::GetAttr: return getattr(eval(*e.a), e.name);
    case Expr::K::GetItem: {
      Value o = eval(*e.a);
      Value k = eval(*e.b);
      return getitem(o, k);
    }
    case Expr::K::Slice: {
      Value o = eval(*e.args[0]);
      std::optional<Value> a, b, c;
      if (e.has_a) a = eval(*e.a);
      if (e.has_b) b = eval(*e.b);
      if (e.has_c) c = eval(*e.c);
      return slice(o, a ? &*a : nullptr, b ? &*b : nullptr, c ? &*c : nullptr);
    }
    case Expr::K::Call: {
      Value f = eval(*e.a);
      CallArgs args = eval_args(e);
      return call(f, args);
    }
    case Expr::K::Filter: {
      Value in = eval(*e.a);
      CallArgs args = eval_args(e);
      Value r = apply_filter(e.name, in, args, e.pos);
      // jinja2's string filters work on soft_str(value), so a Markup input gives a Markup result.
      static const char* const kKeepMarkup[] = {"trim", "upper", "lower", "capitalize", "title", "replace",
                                                "indent", "center", "format", "string"};
      if (in.is_markup && r.t == Value::T::Str &&
          std::any_of(std::begin(kKeepMarkup), std::end(kKeepMarkup), [&](const char* f) { return e.name == f; }))
        r.is_markup = true;
      return r;
    }
    case Expr::K::Test: {
      Value in = eval(*e.a);
      CallArgs args = eval_args(e);
      bool r = apply_test(e.name, in, args);
      return Value::boolean(e.negated ? !r : r);
    }
    case Expr::K::Neg:
    case Expr::K::Pos: {
      Value v = eval(*e.a);
      check_defined(v);
      if (v.t == Value::T::Int || v.t == Value::T::Bool) {
        int64_t x = v.t == Value::T::Int ? v.i : v.b;
        if (e.k == Expr::K::Pos) return Value::integer(x);
        if (x == INT64_MIN) fault("integer overflow");
        return Value::integer(-x);
      }
      if (v.t == Value::T::Float) return Value::floating(e.k == Expr::K::Neg ? -v.f : v.f);
      fault(std::string("bad operand type for unary ") + (e.k == Expr::K::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
    }
    case Expr::K::Not: return Value::boolean(!truthy(eval(*e.a)));
    case Expr::K::And: {
      Value l = eval(*e.a);
      return truthy(l) ? eval(*e.b) : l;
    }
    case Expr::K::Or: {
      Value l = eval(*e.a);
      return truthy(l) ? l : eval(*e.b);
    }
    case Expr::K::Bin: {
      Value l = eval(*e.a);
      Value r = eval(*e.b);
      return binop(e.name, l, r);
    }
    case Expr::K::Compare: {
      Value l = eval(*e.a);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value r = eval(*e.args[k]);
        const std::string& op = e.ops[k];
        bool ok;
        if (op == "==") ok = equals(l, r);
        else if (op == "!=") ok = !equals(l, r);
        else if (op == "in") ok = contains(r, l);
        else if (op == "notin") ok = !contains(r, l);
        else {
          check_defined(l);
          check_defined(r);
          int c = compare(l, r);
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value::boolean(false);
        l = std::move(r);
      }
      return Value::boolean(true);
    }
    case Expr::K::Cond: {
      if (truthy(eval(*e.a))) return eval(*e.b);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
    case Expr::K::ListLit:
    case Expr::K::TupleLit: {
      List l;
      for (const auto& x : e.args) l.push_back(eval(*x));
      return Value::make_list(std::move(l), e.k == Expr::K::TupleLit);
    }
    case Expr::K::DictLit: {
      Dict d;
      for (size_t k = 0; k < e.args.size(); ++k) {
        Value key = eval(*e.args[k]);
        if (key.t != Value::T::Str) fault("only string keys are supported in dict literals");
        d.set(*key.str, eval(*e.vals[k]));
      }
      return Value::make_dict(std::move(d));
    }
  }
  fault("internal: unknown expression");
}

// ---------------------------------------------------------------------------------------------
// Filters and tests
// ---------------------------------------------------------------------------------------------

namespace {

const char* const kFilters[] = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "format", "indent", "int", "items", "join", "last", "length", "list",
    "lower", "map", "max", "min", "pprint", "reject", "rejectattr", "replace", "reverse", "round",
    "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique",
    "upper", "wordcount", "forceescape"};
const char* const kTests[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "sequence",
    "iterable", "boolean", "true", "false", "equalto", "eq", "==", "ne", "!=", "lt", "<",
    "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in", "odd", "even",
    "divisibleby", "sameas", "callable", "lower", "upper", "filter", "test", "escaped"};

}  // namespace

bool is_known_filter(std::string_view name) {
  for (const char* f : kFilters)
    if (name == f) return true;
  return false;
}
bool is_known_test(std::string_view name) {
  for (const char* t : kTests)
    if (name == t) return true;
  return false;
}

bool Interp::apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  auto arg0 = [&]() -> const Value& {
    if (args.pos.empty()) {
      if (!args.kw.empty()) return args.kw[0].second;
      fault("test '" + name + "' needs an argument");
    }
    return args.pos[0];
  };
  using T = Value::T;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.t == T::None;
  if (name == "string") return v.t == T::Str;
  if (name == "number") return v.t == T::Int || v.t == T::Float || v.t == T::Bool;
  if (name == "integer") return v.t == T::Int;
  if (name == "float") return v.t == T::Float;
  if (name == "boolean") return v.t == T::Bool;
  if (name == "true") return v.t == T::Bool && v.b;
  if (name == "false") return v.t == T::Bool && !v.b;
  if (name == "mapping") return v.t == T::Dict;
  // Undefined defines __len__ and __getitem__, so jinja2 calls it a sequence.
  if (name == "sequence") return v.t == T::Str || (v.t == T::List && !v.is_gen) || v.t == T::Dict || v.t == T::Undefined;
  if (name == "iterable") return v.t == T::Str || v.t == T::List || v.t == T::Dict || v.t == T::Undefined;
  if (name == "callable") return v.t == T::Callable;
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") return v.t == T::Str && case_test(v.str->s, name == "lower");
  if (name == "odd" || name == "even") {
    int64_t x = as_int(v, name.c_str());
    return name == "odd" ? (x % 2 != 0) : (x % 2 == 0);
  }
  if (name == "divisibleby") {
    int64_t x = as_int(v, "divisibleby"), d = as_int(arg0(), "divisibleby");
    if (d == 0) fault("integer division or modulo by zero");
    return x % d == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==") return equals(v, arg0());
  if (name == "ne" || name == "!=") return !equals(v, arg0());
  if (name == "sameas") {
    const Value& o = arg0();
    if (v.t != o.t) return false;
    if (v.t == T::None || v.t == T::Undefined) return true;
    if (v.t == T::Bool) return v.b == o.b;
    if (v.t == T::List) return v.list == o.list;
    if (v.t == T::Dict || v.t == T::Namespace) return v.dict == o.dict;
    return false;
  }
  if (name == "in") return contains(arg0(), v);
  if (name == "filter") return v.t == T::Str && is_known_filter(v.str->s);
  if (name == "test") return v.t == T::Str && is_known_test(v.str->s);
  const Value& o = arg0();
  check_defined(v);
  check_defined(o);
  int c = compare(v, o);
  if (name == "lt" || name == "<" || name == "lessthan") return c < 0;
  if (name == "le" || name == "<=") return c <= 0;
  if (name == "gt" || name == ">" || name == "greaterthan") return c > 0;
  if (name == "ge" || name == ">=") return c >= 0;
  fault("unsupported test '" + name + "'");
}

Value Interp::apply_filter(const std::string& name, const Value& v, CallArgs& args, size_t pos) {
  using T = Value::T;
  (void)pos;
  // Attribute path "a.b.0" lookup as jinja2's make_attrgetter.
  auto attr_get = [&](const Value& item, const Value& attr) -> Value {
    if (attr.t == T::Int) return getitem(item, attr);
    const std::string& path = as_str(attr, name.c_str()).s;
    Value cur = item;
    size_t p = 0;
    for (;;) {
      size_t dot = path.find('.', p);
      std::string part = path.substr(p, dot == std::string::npos ? std::string::npos : dot - p);
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
      cur = digits ? getitem(cur, Value::integer(std::stoll(part))) : getitem(cur, Value::literal(part));
      if (dot == std::string::npos) break;
      p = dot + 1;
    }
    return cur;
  };
  auto sort_key = [&](const Value& x, bool case_sensitive) -> Value {
    if (!case_sensitive && x.t == T::Str) return Value::literal(lower(x.str->s));
    return x;
  };

  if (name == "safe" || name == "string") {
    Sig s(args, name.c_str(), {});
    if (name == "safe") return Value::markup(py_str(v));
    if (v.t == T::Str) return v;  // soft_str keeps Markup
    return Value::string(py_str(v));
  }
  if (name == "trim") {
    Sig s(args, "trim", {"chars"});
    return Value::string(strip(py_str(v), true, true, s.get(0)));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    Sig s(args, name.c_str(), {});
    Str in = py_str(v);
    CaseMode cm = name == "upper" ? CaseMode::Upper : name == "lower" ? CaseMode::Lower
                  : name == "capitalize" ? CaseMode::Capitalize : CaseMode::TitleFilter;
    std::string r = case_map(in.s, cm);
    return Value::string(derived(r, in.has_data()));
  }
  if (name == "length" || name == "count") {
    Sig s(args, name.c_str(), {});
    return Value::integer(py_len(v));
  }
  if (name == "tojson") {
    Sig s(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
    bool ensure_ascii = s.flag(0, false);
    std::optional<std::string> indent;
    if (const Value* iv = s.get(1); iv && iv->t != T::None) {
      if (iv->t == T::Str) indent = iv->str->s;
      else indent = std::string(static_cast<size_t>(std::max<int64_t>(0, as_int(*iv, "tojson"))), ' ');
    }
    std::string item_sep = indent ? "," : ", ", key_sep = ": ";
    if (const Value* sv = s.get(2); sv && sv->t != T::None) {
      if (sv->t != T::List || sv->list->size() != 2) fault("tojson: separators must be a (item, key) pair");
      item_sep = as_str((*sv->list)[0], "tojson").s;
      key_sep = as_str((*sv->list)[1], "tojson").s;
    }
    check_defined(v);
    std::string j = to_json(v, indent ? &*indent : nullptr, item_sep, key_sep, s.flag(3, false));
    if (ensure_ascii) {
      std::string a;
      size_t p = 0;
      while (p < j.size()) {
        size_t st = p;
        uint32_t cp = utf8_decode_at(j, p);
        if (cp < 0x80) { a.append(j, st, p - st); continue; }
        char b[16];
        if (cp >= 0x10000) {
          uint32_t u = cp - 0x10000;
          std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
        } else {
          std::snprintf(b, sizeof b, "\\u%04x", cp);
        }
        a += b;
      }
      j = a;
    }
    return Value::string(derived(j, any_data(v)));
  }
  if (name == "int") {
    Sig s(args, "int", {"default", "base"});
    Value dflt = s.get_or(0, Value::integer(0));
    switch (v.t) {
      case T::Int: return v;
      case T::Bool: return Value::integer(v.b);
      case T::Float:
        if (!std::isfinite(v.f)) return dflt;
        return Value::integer(static_cast<int64_t>(v.f));
      case T::Str: {
        std::string t = strip(*v.str, true, true, nullptr).s;
        t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
        if (t.empty()) return dflt;
        // int(str): optional sign and decimal digits only.
        size_t k = (t[0] == '+' || t[0] == '-') ? 1 : 0;
        bool all_digits = k < t.size() && std::all_of(t.begin() + static_cast<long>(k), t.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
        if (all_digits) {
          errno = 0;
          long long x = std::strtoll(t.c_str(), nullptr, 10);
          if (errno == ERANGE) fault("int: value out of int64 range");
          return Value::integer(x);
        }
        std::optional<double> d = py_parse_float(t);
        if (d && std::isfinite(*d)) return Value::integer(static_cast<int64_t>(*d));
        return dflt;
      }
      default: return dflt;
    }
  }
  if (name == "float") {
    Sig s(args, "float", {"default"});
    Value dflt = s.get_or(0, Value::floating(0.0));
    switch (v.t) {
      case T::Float: return v;
      case T::Int: return Value::floating(static_cast<double>(v.i));
      case T::Bool: return Value::floating(v.b);
      case T::Str: {
        std::optional<double> d = py_parse_float(strip(*v.str, true, true, nullptr).s);
        return d ? Value::floating(*d) : dflt;
      }
      default: return dflt;
    }
  }
  if (name == "abs") {
    Sig s(args, "abs", {});
    check_defined(v);
    if (v.t == T::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.t == T::Bool) return Value::integer(v.b);
    if (v.t == T::Float) return Value::floating(std::fabs(v.f));
    fault(std::string("bad operand type for abs(): '") + type_name(v) + "'");
  }
  if (name == "round") {
    Sig s(args, "round", {"precision", "method"});
    int64_t prec = s.get(0) ? as_int(*s.get(0), "round") : 0;
    std::string method = s.get(1) ? as_str(*s.get(1), "round").s : "common";
    check_defined(v);
    if (!v.is_number()) fault(std::string("round: expected a number, got ") + type_name(v));
    double d = v.t == T::Float ? v.f : v.t == T::Int ? static_cast<double>(v.i) : v.b;
    if (method == "common") {
      if (prec < 0 || prec > 300) fault("round: precision out of range");
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), d);  // exact, half-even like Python
      return Value::floating(std::strtod(buf, nullptr));
    }
    double m = std::pow(10.0, static_cast<double>(prec));
    if (method == "ceil") return Value::floating(std::ceil(d * m) / m);
    if (method == "floor") return Value::floating(std::floor(d * m) / m);
    fault("method must be common, ceil or floor");
  }
  if (name == "default" || name == "d") {
    Sig s(args, name.c_str(), {"default_value", "boolean"});
    bool boolean = s.flag(1, false);
    if (v.is_undefined() || (boolean && !truthy(v))) return s.get_or(0, Value::literal(""));
    return v;
  }
  if (name == "join") {
    Sig s(args, "join", {"d", "attribute"});
    Str sep = s.get(0) ? py_str(*s.get(0)) : Str();
    List items = iterate(v);
    Str out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out.append(sep);
      out.append(py_str(s.get(1) ? attr_get(items[k], *s.get(1)) : items[k]));
    }
    return Value::string(std::move(out));
  }
  if (name == "first" || name == "last") {
    Sig s(args, name.c_str(), {});
    List items = iterate(v);
    if (items.empty()) return Value::undefined(std::string("No ") + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    Sig s(args, "list", {});
    return Value::make_list(iterate(v));
  }
  if (name == "items") {
    Sig s(args, "items", {});
    if (v.is_undefined()) return Value::make_list({});
    if (v.t != T::Dict) fault("Can only get item pairs from a mapping.");
    List l;
    for (const auto& kv : v.dict->items) l.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
    return Value::make_list(std::move(l));
  }
  if (name == "dictsort") {
    Sig s(args, "dictsort", {"case_sensitive", "by", "reverse"});
    if (v.t != T::Dict) fault("You can only sort by either 'key' or 'value' of a mapping");
    bool cs = s.flag(0, false), rev = s.flag(2, false);
    std::string by = s.get(1) ? as_str(*s.get(1), "dictsort").s : "key";
    List l;
    for (const auto& kv : v.dict->items) l.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
    size_t idx = by == "value" ? 1 : 0;
    std::stable_sort(l.begin(), l.end(), [&](const Value& a, const Value& b) {
      int c = compare(sort_key((*a.list)[idx], cs), sort_key((*b.list)[idx], cs));
      return rev ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(l));
  }
  if (name == "map") {
    List items = truthy(v) ? iterate(v) : List{};
    List out;
    const Value* attribute = nullptr;
    Value dflt;
    bool has_default = false;
    for (const auto& kv : args.kw) {
      if (kv.first == "attribute") attribute = &kv.second;
      else if (kv.first == "default") { dflt = kv.second; has_default = true; }
    }
    if (attribute) {
      for (const Value& x : items) {
        Value r = attr_get(x, *attribute);
        if (r.is_undefined() && has_default) r = dflt;
        out.push_back(r);
      }
      return Value::generator(std::move(out));
    }
    if (args.pos.empty()) fault("map requires a filter name or attribute=");
    std::string f = as_str(args.pos[0], "map").s;
    if (!is_known_filter(f)) fault("no filter named '" + f + "'");
    CallArgs rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    for (const Value& x : items) {
      CallArgs a2 = rest;
      out.push_back(apply_filter(f, x, a2, pos));
    }
    return Value::generator(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool attr_mode = name.size() > 6;
    bool want = name[0] == 's';
    size_t k = 0;
    const Value* attribute = nullptr;
    if (attr_mode) {
      if (args.pos.empty()) fault(name + " requires an attribute name");
      attribute = &args.pos[k++];
    }
    std::optional<std::string> test;
    if (k < args.pos.size()) test = as_str(args.pos[k++], name.c_str()).s;
    if (test && !is_known_test(*test)) fault("no test named '" + *test + "'");
    CallArgs targs;
    targs.pos.assign(args.pos.begin() + static_cast<long>(std::min(k, args.pos.size())), args.pos.end());
    targs.kw = args.kw;
    List out;
    for (const Value& x : truthy(v) ? iterate(v) : List{}) {
      Value subject = attribute ? attr_get(x, *attribute) : x;
      bool r = test ? apply_test(*test, subject, targs) : truthy(subject);
      if (r == want) out.push_back(x);
    }
    return Value::generator(std::move(out));
  }
  if (name == "attr") {
    Sig s(args, "attr", {"name"});
    if (!s.get(0)) fault("attr() needs a name");
    return getattr(v, as_str(*s.get(0), "attr").s);
  }
  if (name == "replace") {
    Sig s(args, "replace", {"old", "new", "count"});
    if (!s.get(0) || !s.get(1)) fault("replace() needs old and new");
    Str in = py_str(v), o = py_str(*s.get(0)), n = py_str(*s.get(1));
    int64_t cnt = s.get(2) && s.get(2)->t != T::None ? as_int(*s.get(2), "replace") : -1;
    return Value::string(derived(py_replace(in.s, o.s, n.s, cnt), in.has_data() || n.has_data()));
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    Sig s(args, name.c_str(), {});
    if (name != "forceescape" && v.is_markup) return v;
    Str in = py_str(v);
    return Value::markup(derived(html_escape(in.s), in.has_data()));
  }
  if (name == "unique") {
    Sig s(args, "unique", {"case_sensitive", "attribute"});
    bool cs = s.flag(0, false);
    List out, keys;
    for (const Value& x : iterate(v)) {
      Value key = sort_key(s.get(1) ? attr_get(x, *s.get(1)) : x, cs);
      bool seen = false;
      for (const Value& kk : keys)
        if (equals(kk, key)) { seen = true; break; }
      if (!seen) {
        keys.push_back(key);
        out.push_back(x);
      }
    }
    return Value::generator(std::move(out));
  }
  if (name == "sort") {
    Sig s(args, "sort", {"reverse", "case_sensitive", "attribute"});
    bool rev = s.flag(0, false), cs = s.flag(1, false);
    List l = iterate(v);
    std::vector<Value> keys;
    for (const Value& x : l) keys.push_back(sort_key(s.get(2) ? attr_get(x, *s.get(2)) : x, cs));
    std::vector<size_t> order(l.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      int c = compare(keys[a], keys[b]);
      return rev ? c > 0 : c < 0;
    });
    List out;
    for (size_t k : order) out.push_back(l[k]);
    return Value::make_list(std::move(out));
  }
  if (name == "reverse") {
    Sig s(args, "reverse", {});
    if (v.t == T::Str) {
      std::vector<size_t> off = utf8_offsets(v.str->s);
      std::string r;
      for (size_t k = off.size() - 1; k > 0; --k) r.append(v.str->s, off[k - 1], off[k] - off[k - 1]);
      return Value::string(derived(r, v.str->has_data()));
    }
    List l = iterate(v);
    std::reverse(l.begin(), l.end());
    return Value::generator(std::move(l));  // reversed() iterator
  }
  if (name == "sum") {
    Sig s(args, "sum", {"attribute", "start"});
    Value acc = s.get_or(1, Value::integer(0));
    for (const Value& x : iterate(v)) acc = binop("+", acc, s.get(0) ? attr_get(x, *s.get(0)) : x);
    return acc;
  }
  if (name == "min" || name == "max") {
    Sig s(args, name.c_str(), {"case_sensitive", "attribute"});
    bool cs = s.flag(0, false);
    List l = iterate(v);
    if (l.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    for (size_t k = 1; k < l.size(); ++k) {
      Value a = sort_key(s.get(1) ? attr_get(l[k], *s.get(1)) : l[k], cs);
      Value b = sort_key(s.get(1) ? attr_get(l[best], *s.get(1)) : l[best], cs);
      int c = compare(a, b);
      if (name == "min" ? c < 0 : c > 0) best = k;
    }
    return l[best];
  }
  if (name == "indent") {
    Sig s(args, "indent", {"width", "first", "blank"});
    std::string ind;
    if (s.get(0) && s.get(0)->t == T::Str) ind = s.get(0)->str->s;
    else ind = std::string(static_cast<size_t>(std::max<int64_t>(0, s.get(0) ? as_int(*s.get(0), "indent") : 4)), ' ');
    bool first = s.flag(1, false), blank = s.flag(2, false);
    Str in = py_str(v);
    std::string src = in.s + "\n";
    auto lines = splitlines(src);
    std::string r;
    for (size_t k = 0; k < lines.size(); ++k) {
      std::string line = src.substr(lines[k][0], lines[k][1] - lines[k][0]);
      if (k == 0) { r = line; continue; }
      r += "\n";
      if (blank || !line.empty()) r += ind;
      r += line;
    }
    if (first) r = ind + r;
    return Value::string(derived(r, in.has_data()));
  }
  if (name == "center") {
    Sig s(args, "center", {"width"});
    Str in = py_str(v);
    int64_t w = s.get(0) ? as_int(*s.get(0), "center") : 80;
    int64_t len = py_len(Value::string(in));
    if (w <= len) return Value::string(in);
    int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
    return Value::string(derived(std::string(static_cast<size_t>(left), ' ') + in.s + std::string(static_cast<size_t>(pad - left), ' '), in.has_data()));
  }
  if (name == "wordcount") {
    Sig s(args, "wordcount", {});
    Str in = py_str(v);
    int64_t n = 0;
    bool inword = false;
    for (char c : in.s) {
      auto u = static_cast<unsigned char>(c);
      bool w = std::isalnum(u) || c == '_' || u >= 0x80;
      if (w && !inword) ++n;
      inword = w;
    }
    return Value::integer(n);
  }
  if (name == "format") {
    Str in = py_str(v);
    const Value* mapping = nullptr;
    Value kwdict;
    if (!args.kw.empty()) {
      if (!args.pos.empty()) fault("can't handle positional and keyword arguments at the same time");
      Dict d;
      for (const auto& kv : args.kw) d.set(Str(kv.first), kv.second);
      kwdict = Value::make_dict(std::move(d));
      mapping = &kwdict;
    }
    return Value::string(derived(percent_format(in.s, args.pos, mapping), in.has_data() || args_have_data(args)));
  }
  if (name == "pprint") {
    Sig s(args, "pprint", {});
    return Value::string(derived(py_repr(v), any_data(v)));
  }
  fault("unsupported filter '" + name + "'");
}

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

Flow Interp::exec(const Body& body, Str& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Value Interp::make_macro(const Stmt& s) {
  const Stmt* sp = &s;
  // The scopes visible where the macro is defined, held weakly: the macro is stored in one of
  // them, and a strong reference would be a cycle (a leak per render).
  std::vector<std::weak_ptr<Frame>> def_stack(stack.begin(), stack.end());
  return Value::callable(s.name, [sp, def_stack](Interp& in, CallArgs& a) -> Value {
    Stack scopes;
    for (const auto& w : def_stack) {
      FrameP f = w.lock();
      if (!f) fault("macro '" + sp->name + "' called after its defining scope ended");
      scopes.push_back(std::move(f));
    }
    if (++in.call_depth > kMaxCallDepth) {
      --in.call_depth;
      fault("macro recursion too deep");
    }
    struct Restore {
      Interp& in;
      Stack saved;
      ~Restore() {
        in.stack = std::move(saved);
        --in.call_depth;
      }
    } restore{in, std::move(in.stack)};
    in.stack = std::move(scopes);
    auto frame = std::make_shared<Frame>();
    in.stack.push_back(frame);
    const auto& params = sp->params;
    if (a.pos.size() > params.size())
      fault("macro '" + sp->name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    std::vector<bool> set(params.size(), false);
    for (size_t k = 0; k < a.pos.size(); ++k) {
      (*frame)[params[k].first] = a.pos[k];
      set[k] = true;
    }
    for (const auto& kv : a.kw) {
      if (kv.first == "caller") {
        (*frame)["caller"] = kv.second;
        continue;
      }
      auto it = std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == kv.first; });
      if (it == params.end()) fault("macro '" + sp->name + "' takes no keyword argument '" + kv.first + "'");
      size_t k = static_cast<size_t>(it - params.begin());
      if (set[k]) fault("macro '" + sp->name + "' got multiple values for argument '" + kv.first + "'");
      (*frame)[kv.first] = kv.second;
      set[k] = true;
    }
    for (size_t k = 0; k < params.size(); ++k) {
      if (set[k]) continue;
      (*frame)[params[k].first] = params[k].second ? in.eval(*params[k].second)
                                                   : Value::undefined("parameter '" + params[k].first + "' was not provided");
    }
    Str out;
    in.exec(sp->body, out);
    return Value::string(std::move(out));  // Markup only under autoescape, which HF leaves off
  });
}

Flow Interp::exec_stmt(const Stmt& s, Str& out) {
  try {
    DepthGuard g(eval_depth);
    switch (s.k) {
      case Stmt::K::Text:
        emit(out, Str(s.text));
        return Flow::Normal;
      case Stmt::K::Output:
        emit(out, py_str(eval(*s.expr)));
        return Flow::Normal;
      case Stmt::K::If:
        for (const auto& br : s.branches) {
          if (!br.first || truthy(eval(*br.first))) return exec(br.second, out);
        }
        return Flow::Normal;
      case Stmt::K::For: {
        List items = iterate(eval(*s.expr));
        if (s.cond) {
          List kept;
          for (const Value& x : items) {
            stack.push_back(std::make_shared<Frame>());
            struct Pop { Stack& st; ~Pop() { st.pop_back(); } } pop{stack};
            assign_targets(s.targets, x);
            if (truthy(eval(*s.cond))) kept.push_back(x);
          }
          items = std::move(kept);
        }
        if (items.empty()) {
          stack.push_back(std::make_shared<Frame>());
          struct Pop { Stack& st; ~Pop() { st.pop_back(); } } pop{stack};
          exec(s.else_body, out);
          return Flow::Normal;
        }
        const int64_t n = static_cast<int64_t>(items.size());
        for (int64_t k = 0; k < n; ++k) {
          auto frame = std::make_shared<Frame>();
          stack.push_back(frame);
          struct Pop { Stack& st; ~Pop() { st.pop_back(); } } pop{stack};
          assign_targets(s.targets, items[static_cast<size_t>(k)]);
          Dict loop;
          loop.set(Str("index"), Value::integer(k + 1));
          loop.set(Str("index0"), Value::integer(k));
          loop.set(Str("revindex"), Value::integer(n - k));
          loop.set(Str("revindex0"), Value::integer(n - k - 1));
          loop.set(Str("first"), Value::boolean(k == 0));
          loop.set(Str("last"), Value::boolean(k == n - 1));
          loop.set(Str("length"), Value::integer(n));
          loop.set(Str("depth"), Value::integer(1));
          loop.set(Str("depth0"), Value::integer(0));
          loop.set(Str("previtem"), k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("there is no previous item"));
          loop.set(Str("nextitem"), k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("there is no next item"));
          loop.set(Str("cycle"), Value::callable("cycle", [k](Interp&, CallArgs& a) -> Value {
                     if (a.pos.empty()) fault("no items for cycling given");
                     return a.pos[static_cast<size_t>(k) % a.pos.size()];
                   }));
          (*frame)["loop"] = Value::make_namespace(std::move(loop));
          Flow f = exec(s.body, out);
          if (f == Flow::Break) break;
        }
        return Flow::Normal;
      }
      case Stmt::K::Set: {
        Value v = eval(*s.expr);
        if (!s.attr.empty()) {
          Value ns = lookup(s.targets[0]);
          if (ns.t != Value::T::Namespace) fault("cannot assign attribute on non-namespace object");
          ns.dict->set(Str(s.attr), std::move(v));
          return Flow::Normal;
        }
        assign_targets(s.targets, v);
        return Flow::Normal;
      }
      case Stmt::K::SetBlock: {
        Str captured;
        exec(s.body, captured);
        Value v = Value::string(std::move(captured));
        if (s.filter) {
          const Value* saved = placeholder;
          placeholder = &v;
          Value r = eval(*s.filter);
          placeholder = saved;
          v = std::move(r);
        }
        (*stack.back())[s.targets[0]] = std::move(v);
        return Flow::Normal;
      }
      case Stmt::K::FilterBlock: {
        Str captured;
        exec(s.body, captured);
        Value v = Value::string(std::move(captured));
        const Value* saved = placeholder;
        placeholder = &v;
        Value r = eval(*s.filter);
        placeholder = saved;
        emit(out, py_str(r));
        return Flow::Normal;
      }
      case Stmt::K::Macro:
        (*stack.back())[s.name] = make_macro(s);
        return Flow::Normal;
      case Stmt::K::CallBlock: {
        const Expr& c = *s.expr;
        Value callee = eval(*c.a);
        CallArgs args = eval_args(c);
        const Body* body = &s.body;
        Stack site = stack;
        args.kw.emplace_back("caller", Value::callable("caller", [body, site](Interp& in, CallArgs&) -> Value {
                               Stack saved = std::move(in.stack);
                               in.stack = site;
                               in.stack.push_back(std::make_shared<Frame>());
                               Str o;
                               try {
                                 in.exec(*body, o);
                               } catch (...) {
                                 in.stack = std::move(saved);
                                 throw;
                               }
                               in.stack = std::move(saved);
                               return Value::string(std::move(o));
                             }));
        emit(out, py_str(call(callee, args)));
        return Flow::Normal;
      }
      case Stmt::K::Break: return Flow::Break;
      case Stmt::K::Continue: return Flow::Continue;
      case Stmt::K::Scope:
        return exec(s.body, out);
    }
  } catch (const RuntimeFault& f) {
    error_at(s.pos, f.msg);
  } catch (const RaisedFault& f) {
    error_at(s.pos, f.msg, true);
  }
  return Flow::Normal;
}

void Interp::install_globals() {
  globals["range"] = Value::callable("range", [](Interp&, CallArgs& a) -> Value {
    if (!a.kw.empty()) fault("range() takes no keyword arguments");
    if (a.pos.empty() || a.pos.size() > 3) fault("range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = as_int(a.pos[0], "range");
    } else {
      start = as_int(a.pos[0], "range");
      stop = as_int(a.pos[1], "range");
      if (a.pos.size() == 3) step = as_int(a.pos[2], "range");
    }
    if (step == 0) fault("range() arg 3 must not be zero");
    List l;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (static_cast<int64_t>(l.size()) >= kMaxRange) fault("range too big");
      l.push_back(Value::integer(k));
    }
    return Value::make_list(std::move(l));
  });
  auto kwdict = [](const char* fn, CallArgs& a) {
    Dict d;
    if (a.pos.size() > 1) fault(std::string(fn) + "() takes at most 1 positional argument");
    if (!a.pos.empty()) {
      if (a.pos[0].t != Value::T::Dict) fault(std::string(fn) + "(): positional argument must be a mapping");
      d = *a.pos[0].dict;
    }
    for (const auto& kv : a.kw) d.set(Str(kv.first), kv.second);
    return d;
  };
  globals["dict"] = Value::callable("dict", [kwdict](Interp&, CallArgs& a) { return Value::make_dict(kwdict("dict", a)); });
  globals["namespace"] = Value::callable("namespace", [kwdict](Interp&, CallArgs& a) { return Value::make_namespace(kwdict("namespace", a)); });
  globals["raise_exception"] = Value::callable("raise_exception", [](Interp&, CallArgs& a) -> Value {
    std::string msg = a.pos.empty() ? std::string() : py_str(a.pos[0]).s;
    throw RaisedFault{msg};
  });
  globals["strftime_now"] = Value::callable("strftime_now", [](Interp&, CallArgs& a) -> Value {
    if (a.pos.size() != 1) fault("strftime_now() takes exactly one argument");
    const std::string& fmt = as_str(a.pos[0], "strftime_now").s;
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    std::string buf(256 + fmt.size() * 8, '\0');
    size_t n = fmt.empty() ? 0 : std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    buf.resize(n);
    return Value::literal(buf);
  });
}

Rendered render_program(const Program& prog, const nlohmann::ordered_json& context) {
  Interp in(prog);
  in.install_globals();
  auto root = std::make_shared<Frame>();
  if (!context.is_object()) throw TemplateError(0, 0, "render context must be a JSON object");
  try {
    // The model's own special tokens (transformers' names) are trusted template material, not
    // data: "{{ bos_token }}" must tokenize as the control token.
    static const char* const kSpecial[] = {"bos_token", "eos_token", "unk_token", "pad_token",
                                           "sep_token", "cls_token", "mask_token"};
    for (auto it = context.begin(); it != context.end(); ++it) {
      bool special = it.value().is_string() &&
                     std::any_of(std::begin(kSpecial), std::end(kSpecial), [&](const char* k) { return it.key() == k; });
      (*root)[it.key()] = special ? Value::literal(it.value().get<std::string>()) : from_json(it.value());
    }
  } catch (const RuntimeFault& f) {
    throw TemplateError(0, 0, f.msg);
  }
  in.stack.push_back(root);
  Str out;
  in.exec(prog.body, out);
  return Rendered{std::move(out.s), std::move(out.spans)};
}

}  // namespace swz::chat::detail
