#include "grammar/formats.h"

#include <functional>
#include <map>
#include <tuple>

#include "grammar/json_schema.h"

namespace swz::grammar {
namespace {
using json = nlohmann::ordered_json;
using Frag = Builder::Frag;
}  // namespace

const json& sarif_schema() {
  static const json k = json::parse(R"({
  "type": "object",
  "properties": {
    "version": {"const": "2.1.0"},
    "runs": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"$ref": "#/$defs/run"}}
  },
  "required": ["version", "runs"],
  "additionalProperties": false,
  "$defs": {
    "message": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 1000}}, "required": ["text"], "additionalProperties": false},
    "run": {
      "type": "object",
      "properties": {
        "tool": {
          "type": "object",
          "properties": {
            "driver": {
              "type": "object",
              "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 64},
                "rules": {"type": "array", "maxItems": 1, "items": {
                  "type": "object",
                  "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64},
                                 "shortDescription": {"$ref": "#/$defs/message"}},
                  "required": ["id"], "additionalProperties": false}}
              },
              "required": ["name"], "additionalProperties": false
            }
          },
          "required": ["driver"], "additionalProperties": false
        },
        "results": {"type": "array", "maxItems": 16, "items": {"$ref": "#/$defs/result"}}
      },
      "required": ["tool", "results"], "additionalProperties": false
    },
    "result": {
      "type": "object",
      "properties": {
        "ruleId": {"type": "string", "minLength": 1, "maxLength": 64},
        "level": {"enum": ["none", "note", "warning", "error"]},
        "message": {"$ref": "#/$defs/message"},
        "locations": {"type": "array", "maxItems": 4, "items": {
          "type": "object",
          "properties": {
            "physicalLocation": {
              "type": "object",
              "properties": {
                "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string", "minLength": 1, "maxLength": 256}},
                                     "required": ["uri"], "additionalProperties": false},
                "region": {"type": "object", "properties": {"startLine": {"type": "integer", "minimum": 1}},
                           "required": ["startLine"], "additionalProperties": false}
              },
              "required": ["artifactLocation", "region"], "additionalProperties": false
            }
          },
          "required": ["physicalLocation"], "additionalProperties": false}}
      },
      "required": ["ruleId", "level", "message", "locations"], "additionalProperties": false
    }
  }
})");
  return k;
}

namespace {

// A line's text: 0..kMaxDiffLineBytes bytes other than a newline.
Frag line_text(Builder& b) {
  return b.repeat([&] { return b.ranges({{0x00, 0x09}, {0x0B, 0xFF}}); }, kMaxDiffLineBytes, 1);
}

Frag number(Builder& b) {  // 0 or a positive decimal of up to 7 digits
  Frag tail = b.empty();
  for (int i = 0; i < 6; ++i) tail = b.opt(b.seq({b.range('0', '9'), tail}));
  return b.alt({b.lit("0"), b.seq({b.range('1', '9'), tail})});
}

}  // namespace

Grammar unified_diff_grammar(const DiffOriginal* original) {
  Builder b;
  const uint32_t text = b.declare_rule();  // the rest of a line, without its newline
  b.define_rule(text, line_text(b));
  const uint32_t root = b.declare_rule();
  if (!original) {
    const int M = kMaxHunkLines;
    // lines[i][j]: hunk lines with i old-side and j new-side lines still to come.
    std::vector<std::vector<uint32_t>> lines(M + 1, std::vector<uint32_t>(M + 1));
    for (auto& row : lines)
      for (auto& r : row) r = b.declare_rule();
    for (int i = 0; i <= M; ++i)
      for (int j = 0; j <= M; ++j) {
        std::vector<Frag> alts;
        if (i > 0 && j > 0) alts.push_back(b.seq({b.lit(" "), b.call(text), b.lit("\n"), b.call(lines[i - 1][j - 1])}));
        if (i > 0) alts.push_back(b.seq({b.lit("-"), b.call(text), b.lit("\n"), b.call(lines[i - 1][j])}));
        if (j > 0) alts.push_back(b.seq({b.lit("+"), b.call(text), b.lit("\n"), b.call(lines[i][j - 1])}));
        b.define_rule(lines[i][j], alts.empty() ? b.empty() : b.alt(alts));
      }
    const uint32_t num = b.declare_rule();
    b.define_rule(num, number(b));
    std::vector<Frag> olds;
    for (int i = 0; i <= M; ++i) {
      std::vector<Frag> news;
      for (int j = 0; j <= M; ++j) {
        if (i == 0 && j == 0) continue;
        news.push_back(b.seq({b.lit(std::to_string(j) + " @@"), b.opt(b.seq({b.lit(" "), b.call(text)})), b.lit("\n"),
                              b.call(lines[i][j])}));
      }
      olds.push_back(b.seq({b.lit(std::to_string(i) + " +"), b.call(num), b.lit(","), b.alt(news)}));
    }
    const uint32_t hunk = b.declare_rule();
    b.define_rule(hunk, b.seq({b.lit("@@ -"), b.call(num), b.lit(","), b.alt(olds)}));
    const uint32_t path = b.declare_rule();
    b.define_rule(path, b.plus(b.ranges({{0x21, 0xFF}})));
    b.define_rule(root, b.seq({b.lit("--- "), b.call(path), b.lit("\n+++ "), b.call(path), b.lit("\n"), b.plus(b.call(hunk))}));
    return b.finish(root, "unified-diff");
  }
  const std::string& c = original->content;
  if (original->path.empty() || original->path.find_first_of("\n\t") != std::string::npos)
    throw GrammarError("original", "", "'original.path' must be a non-empty path without newlines or tabs");
  if (c.empty() || c.back() != '\n') throw GrammarError("original", "", "'original.content' must end with a newline");
  std::vector<std::string> file;
  for (size_t at = 0; at < c.size();) {
    const size_t nl = c.find('\n', at);
    file.push_back(c.substr(at, nl - at));
    at = nl + 1;
  }
  const int N = static_cast<int>(file.size());
  if (N > kMaxAnchoredFileLines)
    throw GrammarError("original", "", "'original.content' has " + std::to_string(N) + " lines; at most " +
                                           std::to_string(kMaxAnchoredFileLines) + " are supported");
  const int M = kMaxAnchoredHunkLines;
  // at(k, i, j): at old line k (0-based), i old-side and j new-side lines to come. git
  // apply anchors a hunk without trailing context at the end of the file, so a hunk that
  // ends before the file's end must end with a context line; viable() says whether a
  // state can still finish its hunk that way.
  std::map<std::tuple<int, int, int>, bool> viable_memo;
  std::function<bool(int, int, int)> viable = [&](int k, int i, int j) -> bool {
    if (i == 0 && j == 0) return true;
    auto key = std::make_tuple(k, i, j);
    if (auto it = viable_memo.find(key); it != viable_memo.end()) return it->second;
    bool v = (i > 0 && j > 0 && viable(k + 1, i - 1, j - 1)) ||
             (i > 0 && !(i == 1 && j == 0 && k + 1 != N) && viable(k + 1, i - 1, j)) ||
             (j > 0 && !(j == 1 && i == 0 && k != N) && viable(k, i, j - 1));
    viable_memo.emplace(key, v);
    return v;
  };
  std::map<std::tuple<int, int, int>, uint32_t> rules;
  std::function<uint32_t(int, int, int)> at = [&](int k, int i, int j) -> uint32_t {
    auto key = std::make_tuple(k, i, j);
    if (auto it = rules.find(key); it != rules.end()) return it->second;
    const uint32_t r = b.declare_rule();
    rules.emplace(key, r);
    std::vector<Frag> alts;
    if (i > 0 && j > 0 && viable(k + 1, i - 1, j - 1))
      alts.push_back(b.seq({b.lit(" " + file[static_cast<size_t>(k)] + "\n"), b.call(at(k + 1, i - 1, j - 1))}));
    if (i > 0 && !(i == 1 && j == 0 && k + 1 != N) && viable(k + 1, i - 1, j))
      alts.push_back(b.seq({b.lit("-" + file[static_cast<size_t>(k)] + "\n"), b.call(at(k + 1, i - 1, j))}));
    if (j > 0 && !(j == 1 && i == 0 && k != N) && viable(k, i, j - 1))
      alts.push_back(b.seq({b.lit("+"), b.call(text), b.lit("\n"), b.call(at(k, i, j - 1))}));
    b.define_rule(r, alts.empty() ? b.empty() : b.alt(alts));  // empty only for (k, 0, 0)
    return r;
  };
  std::vector<Frag> starts;
  for (int s = 1; s <= N; ++s) {
    std::vector<Frag> olds;
    for (int i = 1; i <= std::min(M, N - s + 1); ++i) {
      std::vector<Frag> news;
      for (int j = 1; j <= M; ++j)
        if (viable(s - 1, i, j)) news.push_back(b.seq({b.lit(std::to_string(j) + " @@\n"), b.call(at(s - 1, i, j))}));
      if (!news.empty()) olds.push_back(b.seq({b.lit(std::to_string(i) + " +" + std::to_string(s) + ","), b.alt(news)}));
    }
    if (!olds.empty()) starts.push_back(b.seq({b.lit(std::to_string(s) + ","), b.alt(olds)}));
  }
  b.define_rule(root, b.seq({b.lit("--- a/" + original->path + "\n+++ b/" + original->path + "\n@@ -"), b.alt(starts)}));
  Grammar g = b.finish(root, "unified-diff");
  check_productive(g);
  return g;
}

Grammar forced_tool_call_grammar(const std::vector<ToolSchema>& tools, const std::string& forced, bool parallel) {
  Builder b;
  JsonSchemaCompiler c(b);
  // rest: the rest of one call after `{"name": "` (any allowed tool), args_forced: after
  // `"arguments": ` of the forced one.
  std::vector<Frag> rests;
  int32_t forced_args = -1;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSchema& t = tools[i];
    if (!forced.empty() && t.name != forced) continue;
    uint32_t args;
    try {
      args = parallel ? c.compile_repeatable(t.parameters) : c.compile(t.parameters);
    } catch (const GrammarError& e) {
      throw GrammarError(e.keyword, "tools[" + std::to_string(i) + "]" + e.path, e.what());
    }
    const std::string quoted = json(t.name).dump(-1, ' ', false, json::error_handler_t::replace);
    rests.push_back(b.seq({b.lit(quoted.substr(1) + ", \"arguments\": "), b.call(args), b.lit("}")}));
    if (!forced.empty()) forced_args = static_cast<int32_t>(args);
  }
  if (rests.empty()) throw GrammarError("tool_choice", "", "the forced tool is not among the tools");
  const uint32_t rest = b.declare_rule();
  b.define_rule(rest, b.alt(rests));
  // Parallel calls as Qwen2.5 writes them when a call is forced: more call objects in the
  // same tag (back to back, after a comma or a newline) or in new tags (server/tool_calls.h
  // parses all of them; parallel_tool_calls false / disable_parallel_tool_use keep the first).
  // ws: up to 3 spaces or newlines.
  auto ws = [&] {
    Frag f = b.empty();
    for (int i = 0; i < 3; ++i) f = b.opt(b.seq({b.ranges({{' ', ' '}, {'\n', '\n'}}), f}));
    return f;
  };
  const uint32_t sep = b.declare_rule();
  b.define_rule(sep, b.alt({b.seq({ws(), b.opt(b.lit(",")), ws()}),
                            b.seq({ws(), b.lit("</tool_call>"), ws(), b.lit("<tool_call>"), ws()})}));
  Frag more = b.empty();  // at most kMaxForcedCalls call objects in all
  for (int k = 1; k < kMaxForcedCalls; ++k) more = b.opt(b.seq({b.call(sep), b.lit("{\"name\": \""), b.call(rest), more}));
  const Frag first = forced.empty() ? b.call(rest) : b.seq({b.call(static_cast<uint32_t>(forced_args)), b.lit("}")});
  const uint32_t root = b.declare_rule();
  if (!parallel) {
    b.define_rule(root, b.seq({first, b.lit("\n</tool_call>")}));  // one call, then the turn is over
  } else {
    // The closing tag is optional: the model may end its turn right after a call (the
    // parser takes an unterminated call that parses).
    b.define_rule(root, b.seq({first, more, b.opt(b.seq({ws(), b.lit("</tool_call>")}))}));
  }
  Grammar g = b.finish(root, "tool_call");
  check_productive(g);
  return g;
}

Grammar builtin_format(std::string_view name) {
  if (name == "sarif-2.1.0") {
    Grammar g = compile_json_schema(sarif_schema());
    g.name = "sarif-2.1.0";
    return g;
  }
  if (name == "unified-diff") return unified_diff_grammar(nullptr);
  throw GrammarError("type", "", "unknown format '" + std::string(name) + "'");
}

}  // namespace swz::grammar
