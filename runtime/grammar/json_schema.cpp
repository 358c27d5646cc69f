#include "grammar/json_schema.h"

#include <functional>
#include <map>
#include <set>

namespace swz::grammar {
namespace {

using json = nlohmann::ordered_json;
using Frag = Builder::Frag;

const std::set<std::string>& unsupported() {
  static const std::set<std::string> k = {
      "pattern",          "patternProperties", "maximum",          "exclusiveMinimum",
      "exclusiveMaximum", "multipleOf",        "not",              "if",               "then",
      "else",             "dependentRequired", "dependentSchemas", "dependencies",     "contains",
      "minContains",      "maxContains",       "prefixItems",      "propertyNames",    "unevaluatedProperties",
      "unevaluatedItems", "minProperties",     "maxProperties",    "$dynamicRef",      "$recursiveRef",
      "additionalItems",  "contentEncoding",   "contentMediaType", "contentSchema"};
  return k;
}

// Keywords that constrain a value of some type (siblings of anyOf / $ref are checked against these).
const std::set<std::string>& validation() {
  static const std::set<std::string> k = {"type",     "properties", "required", "additionalProperties", "items",
                                          "minItems", "maxItems",   "enum",     "const",                "minLength",
                                          "maxLength", "anyOf",     "oneOf",    "allOf",                "$ref"};
  return k;
}

std::string escape_pointer(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '~') o += "~0";
    else if (c == '/') o += "~1";
    else o += c;
  }
  return o;
}

}  // namespace

struct JsonSchemaCompiler::Impl {
  Builder& b;
  const json* root = nullptr;
  int32_t ws_rule = -1, chr_rule = -1, str_rule = -1, num_rule = -1, int_rule = -1, any_rule = -1;
  std::map<std::string, uint32_t> ref_rules;  // JSON pointer -> rule
  bool repeat_root = false;  // compile_repeatable(): the root object's member list may repeat

  explicit Impl(Builder& b) : b(b) {}

  [[noreturn]] void fail(const std::string& kw, const std::string& path, const std::string& msg) {
    throw GrammarError(kw, path, "Invalid JSON schema at '#" + path + "': " + msg);
  }

  uint32_t ws() {
    if (ws_rule < 0) {
      const uint32_t r = b.declare_rule();
      ws_rule = static_cast<int32_t>(r);
      b.define_rule(r, b.repeat([&] { return b.ranges({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}); },
                                kMaxWhitespace, 1));
    }
    return static_cast<uint32_t>(ws_rule);
  }
  Frag w() { return b.call(ws()); }

  // One JSON string character (escapes, valid UTF-8), as fresh states.
  Frag chr_frag() {
      auto cont = [&] { return b.range(0x80, 0xBF); };
      auto hex = [&] { return b.ranges({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}); };
      Frag esc = b.seq({b.lit("\\"), b.alt({b.ranges({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                             b.seq({b.lit("u"), hex(), hex(), hex(), hex()})})});
      Frag f = b.alt({b.ranges({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}}), esc, b.seq({b.range(0xC2, 0xDF), cont()}),
                      b.seq({b.range(0xE0, 0xE0), b.range(0xA0, 0xBF), cont()}), b.seq({b.range(0xE1, 0xEC), cont(), cont()}),
                      b.seq({b.range(0xED, 0xED), b.range(0x80, 0x9F), cont()}), b.seq({b.range(0xEE, 0xEF), cont(), cont()}),
                      b.seq({b.range(0xF0, 0xF0), b.range(0x90, 0xBF), cont(), cont()}),
                      b.seq({b.range(0xF1, 0xF3), cont(), cont(), cont()}),
                      b.seq({b.range(0xF4, 0xF4), b.range(0x80, 0x8F), cont(), cont()})});
      return f;
  }

  uint32_t chr() {  // the rule of one character (bounded strings call it)
    if (chr_rule < 0) {
      const uint32_t r = b.declare_rule();
      chr_rule = static_cast<int32_t>(r);
      b.define_rule(r, chr_frag());
    }
    return static_cast<uint32_t>(chr_rule);
  }

  Frag string(int min_len, int max_len) {  // max_len < 0: unbounded
    if (min_len == 0 && max_len < 0) {
      if (str_rule < 0) {
        const uint32_t r = b.declare_rule();
        str_rule = static_cast<int32_t>(r);
        // The characters inline (not a call per character): a string's inside is then one
        // configuration whatever the context (matcher.h's local masks cache it).
        b.define_rule(r, b.seq({b.lit("\""), b.star(chr_frag()), b.lit("\"")}));
      }
      return b.call(static_cast<uint32_t>(str_rule));
    }
    std::vector<Frag> parts{b.lit("\"")};
    for (int i = 0; i < min_len; ++i) parts.push_back(b.call(chr()));
    if (max_len < 0) {
      parts.push_back(b.star(chr_frag()));
    } else {
      const uint32_t c = chr();  // defined before the copies, so that they are alike
      parts.push_back(b.repeat([&] { return b.call(c); }, max_len - min_len, 1));
    }
    parts.push_back(b.lit("\""));
    return b.seq(parts);
  }

  Frag digits(int min, int max) {
    std::vector<Frag> parts;
    for (int i = 0; i < min; ++i) parts.push_back(b.range('0', '9'));
    parts.push_back(b.repeat([&] { return b.range('0', '9'); }, max - min, 1));
    return b.seq(parts);
  }

  uint32_t integer() {
    if (int_rule < 0) {
      const uint32_t r = b.declare_rule();
      int_rule = static_cast<int32_t>(r);
      b.define_rule(r, b.seq({b.opt(b.lit("-")), b.alt({b.lit("0"), b.seq({b.range('1', '9'), digits(0, 15)})})}));
    }
    return static_cast<uint32_t>(int_rule);
  }

  uint32_t number() {
    if (num_rule < 0) {
      const uint32_t r = b.declare_rule();
      num_rule = static_cast<int32_t>(r);
      b.define_rule(r, b.seq({b.call(integer()), b.opt(b.seq({b.lit("."), digits(1, 16)})),
                              b.opt(b.seq({b.ranges({{'e', 'e'}, {'E', 'E'}}), b.opt(b.ranges({{'+', '+'}, {'-', '-'}})), digits(1, 3)}))}));
    }
    return static_cast<uint32_t>(num_rule);
  }

  // "[" ws (V (ws "," ws V)*)? ws "]" with an item count in [min, max] (max < 0: unbounded).
  Frag array_of(const std::function<Frag()>& item, int min, int max) {
    auto sep_item = [&] { return b.seq({w(), b.lit(","), w(), item()}); };
    Frag body;
    if (max == 0) {
      body = b.empty();
    } else {
      std::vector<Frag> parts;
      const int req = std::max(min, 1);  // the first item is written without a comma
      parts.push_back(item());
      for (int i = 1; i < req; ++i) parts.push_back(sep_item());
      if (max < 0) {
        parts.push_back(b.star(sep_item()));
      } else {
        Frag tail = b.empty();
        for (int i = req; i < max; ++i) tail = b.opt(b.seq({sep_item(), tail}));
        parts.push_back(tail);
      }
      body = b.seq(parts);
      if (min == 0) body = b.opt(body);
    }
    return b.seq({b.lit("["), w(), body, w(), b.lit("]")});
  }

  uint32_t any_value() {
    if (any_rule < 0) {
      const uint32_t r = b.declare_rule();
      any_rule = static_cast<int32_t>(r);
      auto member = [&] { return b.seq({string(0, -1), w(), b.lit(":"), w(), b.call(r)}); };
      Frag obj = b.seq({b.lit("{"), w(), b.opt(b.seq({member(), b.star(b.seq({w(), b.lit(","), w(), member()}))})), w(), b.lit("}")});
      Frag arr = array_of([&] { return b.call(r); }, 0, -1);
      b.define_rule(r, b.alt({obj, arr, string(0, -1), b.call(number()), b.lit("true"), b.lit("false"), b.lit("null")}));
    }
    return static_cast<uint32_t>(any_rule);
  }

  Frag any_object() {
    auto member = [&] { return b.seq({string(0, -1), w(), b.lit(":"), w(), b.call(any_value())}); };
    return b.seq({b.lit("{"), w(), b.opt(b.seq({member(), b.star(b.seq({w(), b.lit(","), w(), member()}))})), w(), b.lit("}")});
  }

  int get_count(const json& s, const char* kw, const std::string& path, int limit) {
    const json& v = s.at(kw);
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(kw, path, std::string("'") + kw + "' must be a non-negative integer");
    if (v.get<int64_t>() > limit)
      fail(kw, path, std::string("'") + kw + "' above " + std::to_string(limit) + " is not supported");
    return static_cast<int>(v.get<int64_t>());
  }

  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') fail("$ref", path, "only local references ('#...') are supported, got '" + ref + "'");
    try {
      const json::json_pointer ptr(ref.substr(1));
      if (!root->contains(ptr)) fail("$ref", path, "'" + ref + "' does not resolve");
      return root->at(ptr);
    } catch (const json::exception&) {
      fail("$ref", path, "'" + ref + "' is not a valid JSON pointer");
    }
  }

  Frag schema(const json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth)
      fail("depth", path, "the schema nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
    if (b.n_states() > kMaxStates) fail("size", path, "the schema is too large to compile");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("false", path, "the schema 'false' matches nothing");
      return b.call(any_value());
    }
    if (!s.is_object()) fail("type", path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (unsupported().count(k)) fail(k, path, "the keyword '" + k + "' is not supported");
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>())) fail(k, path, "the keyword 'uniqueItems' is not supported");
    }
    auto has_validation_besides = [&](std::initializer_list<const char*> own) {
      for (const auto& [k, v] : s.items()) {
        if (!validation().count(k)) continue;
        bool mine = false;
        for (const char* o : own) mine = mine || k == o;
        if (!mine) return k;
      }
      return std::string();
    };
    if (s.contains("$ref")) {
      const std::string other = has_validation_besides({"$ref"});
      if (!other.empty()) fail(other, path, "'" + other + "' next to '$ref' is not supported");
      if (!s["$ref"].is_string()) fail("$ref", path, "'$ref' must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      auto it = ref_rules.find(ref);
      if (it == ref_rules.end()) {
        const json& target = resolve(ref, path);
        const uint32_t r = b.declare_rule();
        ref_rules.emplace(ref, r);
        b.define_rule(r, schema(target, ref.substr(1), depth + 1));
        it = ref_rules.find(ref);
      }
      return b.call(it->second);
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      const std::string other = has_validation_besides({kw});
      if (!other.empty()) fail(other, path, "'" + other + "' next to '" + kw + "' is not supported");
      const json& alts = s[kw];
      if (!alts.is_array() || alts.empty()) fail(kw, path, std::string("'") + kw + "' must be a non-empty array");
      std::vector<Frag> fs;
      for (size_t i = 0; i < alts.size(); ++i) fs.push_back(schema(alts[i], path + "/" + kw + "/" + std::to_string(i), depth + 1));
      return b.alt(fs);
    }
    if (s.contains("allOf")) {
      const std::string other = has_validation_besides({"allOf"});
      if (!other.empty()) fail(other, path, "'" + other + "' next to 'allOf' is not supported");
      const json& all = s["allOf"];
      if (!all.is_array() || all.empty()) fail("allOf", path, "'allOf' must be a non-empty array");
      if (all.size() > 1) fail("allOf", path, "'allOf' with more than one schema is not supported");
      return schema(all[0], path + "/allOf/0", depth + 1);
    }
    if (s.contains("const")) return b.lit(s["const"].dump(-1, ' ', false, json::error_handler_t::strict));
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail("enum", path, "'enum' must be a non-empty array");
      std::vector<Frag> fs;
      std::set<std::string> seen;
      for (const json& v : e) {
        const std::string text = v.dump(-1, ' ', false, json::error_handler_t::strict);
        if (seen.insert(text).second) fs.push_back(b.lit(text));
      }
      return b.alt(fs);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) fail("type", path, "'type' must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail("type", path, "'type' must be a string or an array of strings");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return b.call(any_value());
    }
    std::vector<Frag> fs;
    for (const std::string& t : types) fs.push_back(typed(s, t, path, depth));
    return fs.size() == 1 ? fs[0] : b.alt(fs);
  }

  Frag typed(const json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "null") return b.lit("null");
    if (t == "boolean") return b.alt({b.lit("true"), b.lit("false")});
    if (s.contains("minimum")) {
      // Only the bounds of non-negative / positive integers (SARIF's line numbers...).
      const json& m = s["minimum"];
      if (t != "integer" || !m.is_number_integer() || (m.get<int64_t>() != 0 && m.get<int64_t>() != 1))
        fail("minimum", path, "the keyword 'minimum' is supported only as 0 or 1 on integers");
      if (t == "integer") {
        if (m.get<int64_t>() == 0) return b.alt({b.lit("0"), b.seq({b.range('1', '9'), digits(0, 15)})});
        return b.seq({b.range('1', '9'), digits(0, 15)});
      }
    }
    if (t == "integer") return b.call(integer());
    if (t == "number") return b.call(number());
    if (t == "string") {
      const int lo = s.contains("minLength") ? get_count(s, "minLength", path, 10000) : 0;
      const int hi = s.contains("maxLength") ? get_count(s, "maxLength", path, 10000) : -1;
      if (hi >= 0 && hi < lo) fail("maxLength", path, "'maxLength' is below 'minLength'");
      return string(lo, hi);
    }
    if (t == "array") {
      const int lo = s.contains("minItems") ? get_count(s, "minItems", path, 256) : 0;
      const int hi = s.contains("maxItems") ? (s["maxItems"].is_number_integer() && s["maxItems"].get<int64_t>() > 256 ? -1 : get_count(s, "maxItems", path, 256)) : -1;
      if (hi >= 0 && hi < lo) fail("maxItems", path, "'maxItems' is below 'minItems'");
      if (s.contains("items")) {
        const json& it = s["items"];
        if (it.is_boolean() && !it.get<bool>()) {
          if (lo > 0) fail("minItems", path, "'minItems' > 0 with 'items': false matches nothing");
          return b.seq({b.lit("["), w(), b.lit("]")});
        }
        if (!it.is_object() && !it.is_boolean()) fail("items", path, "'items' must be a schema (an array of schemas is 'prefixItems', not supported)");
        const uint32_t r = b.declare_rule();
        b.define_rule(r, schema(it, path + "/items", depth + 1));
        return array_of([&] { return b.call(r); }, lo, hi);
      }
      return array_of([&] { return b.call(any_value()); }, lo, hi);
    }
    if (t == "object") return object(s, path, depth);
    fail("type", path, "unknown type '" + t + "'");
  }

  Frag object(const json& s, const std::string& path, int depth) {
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    if (props && !props->is_object()) fail("properties", path, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) fail("required", path, "'required' must be an array of strings");
      for (const json& x : r) {
        if (!x.is_string()) fail("required", path, "'required' must be an array of strings");
        if (!props || !props->contains(x.get<std::string>()))
          fail("required", path, "required property '" + x.get<std::string>() + "' is not in 'properties'");
        required.insert(x.get<std::string>());
      }
    }
    const json* addl = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (addl && !addl->is_boolean() && !addl->is_object())
      fail("additionalProperties", path, "'additionalProperties' must be a boolean or a schema");
    if (!props || props->empty()) {
      if (addl && addl->is_boolean() && !addl->get<bool>()) return b.seq({b.lit("{"), w(), b.lit("}")});
      if (!addl || addl->is_boolean()) return any_object();
      const uint32_t v = b.declare_rule();
      b.define_rule(v, schema(*addl, path + "/additionalProperties", depth + 1));
      auto member = [&] { return b.seq({string(0, -1), w(), b.lit(":"), w(), b.call(v)}); };
      return b.seq({b.lit("{"), w(), b.opt(b.seq({member(), b.star(b.seq({w(), b.lit(","), w(), member()}))})), w(), b.lit("}")});
    }
    // Members in order: first[i] = the members from i on when none was written yet,
    // more[i] = the same after at least one (each then starts with a comma).
    struct P {
      std::string key;
      uint32_t value;
      bool required;
    };
    std::vector<P> ps;
    for (const auto& [k, v] : props->items()) {
      const uint32_t r = b.declare_rule();
      b.define_rule(r, schema(v, path + "/properties/" + escape_pointer(k), depth + 1));
      ps.push_back({k, r, required.count(k) > 0});
    }
    const size_t n = ps.size();
    std::vector<uint32_t> first(n + 1), more(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      first[i] = b.declare_rule();
      more[i] = b.declare_rule();
    }
    b.define_rule(first[n], b.empty());
    b.define_rule(more[n], b.empty());
    for (size_t i = n; i-- > 0;) {
      auto member = [&] {
        return b.seq({b.lit(json(ps[i].key).dump(-1, ' ', false, json::error_handler_t::replace)), w(), b.lit(":"), w(),
                      b.call(ps[i].value)});
      };
      Frag f = b.seq({member(), b.call(more[i + 1])});
      Frag m = b.seq({w(), b.lit(","), w(), member(), b.call(more[i + 1])});
      if (ps[i].required) {
        b.define_rule(first[i], f);
        b.define_rule(more[i], m);
      } else {
        b.define_rule(first[i], b.alt({f, b.call(first[i + 1])}));
        b.define_rule(more[i], b.alt({m, b.call(more[i + 1])}));
      }
    }
    if (repeat_root && depth == 0 && !required.empty()) {
      // Several calls' arguments in one object (server/tool_calls.h: a repeated name starts
      // the next call); non-empty since a property is required.
      Frag again = b.empty();  // at most kMaxRepeatedMembers lists in all
      for (int k = 1; k < kMaxRepeatedMembers; ++k) again = b.opt(b.seq({w(), b.lit(","), w(), b.call(first[0]), again}));
      return b.seq({b.lit("{"), w(), b.call(first[0]), again, w(), b.lit("}")});
    }
    return b.seq({b.lit("{"), w(), b.call(first[0]), w(), b.lit("}")});
  }
};

JsonSchemaCompiler::JsonSchemaCompiler(Builder& b) : impl_(std::make_shared<Impl>(b)) {}

uint32_t JsonSchemaCompiler::compile(const json& schema) {
  impl_->root = &schema;
  impl_->ref_rules.clear();
  const uint32_t r = impl_->b.declare_rule();
  impl_->b.define_rule(r, impl_->schema(schema, "", 0));
  return r;
}

uint32_t JsonSchemaCompiler::compile_repeatable(const json& schema) {
  impl_->repeat_root = true;
  try {
    const uint32_t r = compile(schema);
    impl_->repeat_root = false;
    return r;
  } catch (...) {
    impl_->repeat_root = false;
    throw;
  }
}

uint32_t JsonSchemaCompiler::any_value() { return impl_->any_value(); }
uint32_t JsonSchemaCompiler::ws() { return impl_->ws(); }

void check_productive(const Grammar& g) {
  // A rule is productive when its end is reachable from its start through byte edges,
  // epsilon moves and calls of productive rules. Fixpoint over all rules.
  const size_t nr = g.rule_start.size();
  std::vector<bool> prod(nr, false);
  bool changed = true;
  std::vector<uint32_t> stack;
  std::vector<bool> seen(g.states.size());
  while (changed) {
    changed = false;
    for (size_t r = 0; r < nr; ++r) {
      if (prod[r]) continue;
      std::fill(seen.begin(), seen.end(), false);
      stack.assign(1, g.rule_start[r]);
      bool ok = false;
      while (!stack.empty() && !ok) {
        const uint32_t s = stack.back();
        stack.pop_back();
        if (seen[s]) continue;
        seen[s] = true;
        const Grammar::State& st = g.states[s];
        if (st.ends_rule == static_cast<int32_t>(r)) ok = true;
        for (const auto& e : st.bytes) stack.push_back(e.to);
        for (uint32_t e : st.eps) stack.push_back(e);
        for (const auto& c : st.calls)
          if (prod[c.rule]) stack.push_back(c.ret);
      }
      if (ok) {
        prod[r] = true;
        changed = true;
      }
    }
  }
  for (size_t r = 0; r < nr; ++r)
    if (!prod[r])
      throw GrammarError("$ref", "", "Invalid JSON schema: a '$ref' recursion has no base case (no finite instance)");
}

Grammar compile_json_schema(const json& schema) {
  Builder b;
  JsonSchemaCompiler c(b);
  const uint32_t root = c.compile(schema);
  Grammar g = b.finish(root, "json_schema");
  check_productive(g);
  return g;
}

Grammar json_object_grammar() {
  Builder b;
  JsonSchemaCompiler c(b);
  const uint32_t root = c.compile(json{{"type", "object"}});
  return b.finish(root, "json_object");
}

}  // namespace swz::grammar
