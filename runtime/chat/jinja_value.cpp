// Value semantics of the Jinja2 subset, following Python 3 (what jinja2 runs on): truthiness,
// ==, <, str(), repr() (float repr = shortest round-trip digits, exponent form when the
// decimal exponent is < -4 or >= 16), and json.dumps(ensure_ascii=False) for tojson.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "chat/jinja_internal.h"

namespace swz::chat::detail {

// ---- Str / Dict ------------------------------------------------------------------------------

void Str::append(const Str& o) {
  size_t off = s.size();
  s += o.s;
  for (const Span& sp : o.spans) {
    Span moved{sp.begin + off, sp.end + off};
    if (!spans.empty() && spans.back().end == moved.begin) {
      spans.back().end = moved.end;
    } else {
      spans.push_back(moved);
    }
  }
}

Str Str::substr(size_t b, size_t n) const {
  Str out;
  if (b > s.size()) b = s.size();
  size_t e = std::min(s.size(), b + std::min(n, s.size()));
  out.s = s.substr(b, e - b);
  for (const Span& sp : spans) {
    size_t lo = std::max(sp.begin, b), hi = std::min(sp.end, e);
    if (lo < hi) out.spans.push_back({lo - b, hi - b});
  }
  return out;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& kv : items)
    if (kv.first.s == key) return &kv.second;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  for (auto& kv : items)
    if (kv.first.s == key) return &kv.second;
  return nullptr;
}
void Dict::set(Str key, Value v) {
  if (Value* old = find(key.s)) {
    *old = std::move(v);
    return;
  }
  items.emplace_back(std::move(key), std::move(v));
}

void fault(std::string msg) { throw RuntimeFault{std::move(msg)}; }

// ---- UTF-8 -----------------------------------------------------------------------------------

uint32_t utf8_decode_at(std::string_view s, size_t& pos) {
  auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  size_t n = b0 >= 0xF0 && b0 < 0xF8 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (b0 >= 0xF8) n = 0;
  if (n == 0 || pos + n > s.size()) {
    ++pos;
    return 0xFFFD;
  }
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  pos += n;
  return cp;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  size_t p = 0;
  while (p < s.size()) {
    off.push_back(p);
    utf8_decode_at(s, p);
  }
  off.push_back(s.size());
  return off;
}

bool py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// ---- type names, truthiness, equality, ordering ----------------------------------------------

const char* type_name(const Value& v) {
  switch (v.t) {
    case Value::T::Undefined: return "Undefined";
    case Value::T::None: return "NoneType";
    case Value::T::Bool: return "bool";
    case Value::T::Int: return "int";
    case Value::T::Float: return "float";
    case Value::T::Str: return "str";
    case Value::T::List: return v.is_tuple ? "tuple" : "list";
    case Value::T::Dict: return "dict";
    case Value::T::Namespace: return "Namespace";
    case Value::T::Callable: return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.t) {
    case Value::T::Undefined: case Value::T::None: return false;
    case Value::T::Bool: return v.b;
    case Value::T::Int: return v.i != 0;
    case Value::T::Float: return v.f != 0.0;
    case Value::T::Str: return !v.str->s.empty();
    case Value::T::List: return !v.list->empty();
    case Value::T::Dict: return !v.dict->items.empty();
    case Value::T::Namespace: case Value::T::Callable: return true;
  }
  return false;
}

static double num(const Value& v) {
  return v.t == Value::T::Float ? v.f : v.t == Value::T::Int ? static_cast<double>(v.i) : (v.b ? 1.0 : 0.0);
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.t != Value::T::Float && b.t != Value::T::Float) {
      int64_t x = a.t == Value::T::Int ? a.i : a.b, y = b.t == Value::T::Int ? b.i : b.b;
      return x == y;
    }
    return num(a) == num(b);
  }
  if (a.t != b.t) return false;
  switch (a.t) {
    case Value::T::Undefined: case Value::T::None: return true;
    case Value::T::Str: return a.str->s == b.str->s;
    case Value::T::List: {
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Value::T::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& kv : a.dict->items) {
        const Value* o = b.dict->find(kv.first.s);
        if (!o || !equals(kv.second, *o)) return false;
      }
      return true;
    }
    case Value::T::Namespace: return a.dict == b.dict;
    case Value::T::Callable: return a.fn == b.fn;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.t != Value::T::Float && b.t != Value::T::Float) {
      int64_t x = a.t == Value::T::Int ? a.i : a.b, y = b.t == Value::T::Int ? b.i : b.b;
      return x < y ? -1 : x > y ? 1 : 0;
    }
    double x = num(a), y = num(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.t == Value::T::Str && b.t == Value::T::Str) {
    int c = a.str->s.compare(b.str->s);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.t == Value::T::List && b.t == Value::T::List && a.is_tuple == b.is_tuple) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      const Value &x = (*a.list)[k], &y = (*b.list)[k];
      if (equals(x, y)) continue;
      return compare(x, y);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  fault(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" + type_name(b) + "'");
}

// ---- str() / repr() --------------------------------------------------------------------------

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]d[.ddd]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (size_t k = 0; k < epos; ++k)
    if (sci[k] != '.') digits += sci[k];
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp >= 0) {
    size_t int_digits = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_digits) {
      out += digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  } else {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  return out;
}

static bool py_printable(uint32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD) return false;
  if (c >= 0x2000 && c <= 0x200F) return false;
  if (c >= 0x2028 && c <= 0x202F) return false;
  if (c >= 0x205F && c <= 0x206F) return false;
  if (c == 0x3000 || c == 0xFEFF || c == 0x1680) return false;
  if (c >= 0xD800 && c <= 0xDFFF) return false;
  if (c >= 0xE000 && c <= 0xF8FF) return false;  // private use
  return true;
}

static std::string str_repr(const std::string& s) {
  bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  std::string out(1, q);
  size_t p = 0;
  while (p < s.size()) {
    size_t start = p;
    uint32_t c = utf8_decode_at(s, p);
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!py_printable(c)) {
      char b[16];
      if (c < 0x100) std::snprintf(b, sizeof b, "\\x%02x", c);
      else if (c < 0x10000) std::snprintf(b, sizeof b, "\\u%04x", c);
      else std::snprintf(b, sizeof b, "\\U%08x", c);
      out += b;
    } else {
      out.append(s, start, p - start);
    }
  }
  out += q;
  return out;
}

std::string py_repr(const Value& v) {
  switch (v.t) {
    case Value::T::Undefined: return "Undefined";
    case Value::T::None: return "None";
    case Value::T::Bool: return v.b ? "True" : "False";
    case Value::T::Int: return std::to_string(v.i);
    case Value::T::Float: return float_repr(v.f);
    case Value::T::Str: return str_repr(v.str->s);
    case Value::T::List: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += py_repr((*v.list)[k]);
      }
      if (v.is_tuple && v.list->size() == 1) out += ",";
      out += v.is_tuple ? ")" : "]";
      return out;
    }
    case Value::T::Dict: case Value::T::Namespace: {
      std::string out = v.t == Value::T::Namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& kv : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += str_repr(kv.first.s) + ": " + py_repr(kv.second);
      }
      out += v.t == Value::T::Namespace ? "}>" : "}";
      return out;
    }
    case Value::T::Callable: return "<function " + v.fn->name + ">";
  }
  return "";
}

bool any_data(const Value& v) {
  switch (v.t) {
    case Value::T::Str: return v.str->has_data();
    case Value::T::List:
      for (const Value& x : *v.list)
        if (any_data(x)) return true;
      return false;
    case Value::T::Dict: case Value::T::Namespace:
      for (const auto& kv : v.dict->items)
        if (kv.first.has_data() || any_data(kv.second)) return true;
      return false;
    default: return false;
  }
}

Str py_str(const Value& v) {
  switch (v.t) {
    case Value::T::Undefined: return Str();
    case Value::T::Str: return *v.str;
    case Value::T::List: case Value::T::Dict: case Value::T::Namespace:
      return derived(py_repr(v), any_data(v));
    default: return Str(py_repr(v));
  }
}

// ---- JSON ------------------------------------------------------------------------------------

static void json_str(std::string& out, const std::string& s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string to_json(const Value& v, const std::string* indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys, size_t depth) {
  if (depth > 512) fault("tojson: nesting too deep");
  std::string out;
  auto newline = [&](size_t d) {
    if (!indent) return;
    out += '\n';
    for (size_t k = 0; k < d; ++k) out += *indent;
  };
  switch (v.t) {
    case Value::T::None: return "null";
    case Value::T::Bool: return v.b ? "true" : "false";
    case Value::T::Int: return std::to_string(v.i);
    case Value::T::Float:
      if (std::isnan(v.f)) return "NaN";
      if (std::isinf(v.f)) return v.f < 0 ? "-Infinity" : "Infinity";
      return float_repr(v.f);
    case Value::T::Str: json_str(out, v.str->s); return out;
    case Value::T::List: {
      if (v.list->empty()) return "[]";
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        out += to_json((*v.list)[k], indent, item_sep, key_sep, sort_keys, depth + 1);
      }
      newline(depth);
      out += ']';
      return out;
    }
    case Value::T::Dict: {
      if (v.dict->items.empty()) return "{}";
      std::vector<const std::pair<Str, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first.s < b->first.s; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        json_str(out, items[k]->first.s);
        out += key_sep;
        out += to_json(items[k]->second, indent, item_sep, key_sep, sort_keys, depth + 1);
      }
      newline(depth);
      out += '}';
      return out;
    }
    default:
      fault(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

Value from_json(const nlohmann::ordered_json& j) {
  using J = nlohmann::ordered_json;
  switch (j.type()) {
    case J::value_t::null: return Value::none();
    case J::value_t::boolean: return Value::boolean(j.get<bool>());
    case J::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case J::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) fault("context integer out of int64 range");
      return Value::integer(static_cast<int64_t>(u));
    }
    case J::value_t::number_float: return Value::floating(j.get<double>());
    case J::value_t::string: return Value::string(Str(j.get<std::string>(), true));
    case J::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json(x));
      return Value::make_list(std::move(l));
    }
    case J::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(Str(it.key(), true), from_json(it.value()));
      return Value::make_dict(std::move(d));
    }
    default: fault("unsupported JSON value in the render context (binary/discarded)");
  }
}

}  // namespace swz::chat::detail
