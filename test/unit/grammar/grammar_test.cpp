#include <gtest/gtest.h>

#include <random>

#include "grammar/formats.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

using namespace swz::grammar;
using json = nlohmann::ordered_json;

namespace {

std::shared_ptr<const Grammar> schema_grammar(const json& s) { return std::make_shared<const Grammar>(compile_json_schema(s)); }

// A toy vocabulary: single bytes, JSON-ish multi-byte pieces, UTF-8, and two EOG tokens.
std::shared_ptr<const Vocabulary> toy_vocab() {
  std::vector<std::string> pieces;
  for (int c = 0x20; c < 0x7f; ++c) pieces.emplace_back(1, static_cast<char>(c));
  for (const char* p : {"\n", "\t", "{\"", "\":", "\": ", ", \"", "\"}", "}}", "[{", "}]", "null", "true", "false", "12", "0.5",
                        "-3", "e+", "\\n", "\\u00", "é", "日本", "\xff", "\xc3", "\xa9", " {", "\"name\"", "\"age\"", ": \"",
                        "\",", "ab", "cd", "--- ", "+++ ", "@@ -", " @@\n", "\n+", "\n-", "\n ", "1,", "</tool_call>", "}\n", ""})
    pieces.emplace_back(p);
  std::vector<bool> eog(pieces.size(), false);
  pieces.emplace_back("<eos>");
  eog.push_back(true);
  pieces.emplace_back("<|im_end|>");
  eog.push_back(true);
  return std::make_shared<const Vocabulary>(pieces, eog);
}

bool bit(const uint64_t* m, int t) { return (m[t >> 6] >> (t & 63)) & 1; }

// Random walks: every mask equals the brute-force answer of the reference simulator.
void check_masks(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const Vocabulary>& v, int walks, int steps,
                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks; ++w) {
    Matcher m(g, v);
    std::string text;
    for (int s = 0; s < steps; ++s) {
      const uint64_t* mask = m.mask();
      std::vector<int32_t> ok;
      const Simulation now = simulate(*g, text);
      ASSERT_TRUE(now.alive) << text;
      ASSERT_EQ(m.can_end(), now.complete) << text;
      for (int t = 0; t < v->n_vocab(); ++t) {
        bool ref;
        if (v->is_eog(t)) ref = now.complete;
        else ref = !v->piece(t).empty() && simulate(*g, text + v->piece(t)).alive;
        ASSERT_EQ(bit(mask, t), ref) << "token '" << v->piece(t) << "' after '" << text << "'";
        ASSERT_EQ(m.allowed(t), ref);
        if (ref) ok.push_back(t);
      }
      if (ok.empty()) {
        ASSERT_TRUE(m.must_end());
        break;
      }
      // Prefer non-EOG tokens so walks get deep; end sometimes.
      int32_t t = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      if (v->is_eog(t) && ok.size() > 2 && s < steps / 2) t = ok[0] == t ? ok[1] : ok[0];
      ASSERT_TRUE(m.accept(t));
      if (v->is_eog(t)) {
        ASSERT_TRUE(m.must_end());
        break;
      }
      text += v->piece(t);
      if (m.must_end()) {
        ASSERT_TRUE(matches(*g, text)) << text;
        break;
      }
    }
  }
}

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "maxItems": 3},
    "ok": {"type": ["boolean", "null"]},
    "score": {"type": "number"}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})");

}  // namespace

TEST(GrammarMask, MatchesBruteForceOnSchema) { check_masks(schema_grammar(kPerson), toy_vocab(), 12, 50, 1); }

TEST(GrammarMask, MatchesBruteForceOnJsonObject) {
  check_masks(std::make_shared<const Grammar>(json_object_grammar()), toy_vocab(), 12, 50, 2);
}

TEST(GrammarMask, MatchesBruteForceOnRecursiveRef) {
  const json s = json::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
      "required": ["v"], "additionalProperties": false}}})");
  check_masks(schema_grammar(s), toy_vocab(), 10, 50, 3);
}

TEST(GrammarMask, MatchesBruteForceOnDiff) {
  check_masks(std::make_shared<const Grammar>(unified_diff_grammar()), toy_vocab(), 8, 40, 4);
}

// Short tokens (at most 3 bytes): positions of a bounded repetition more than 4 items from
// its bound share canonical configurations (Grammar::repeats); masks stay exact.
static std::shared_ptr<const Vocabulary> short_vocab() {
  std::vector<std::string> pieces;
  for (int c = 0x20; c < 0x7f; ++c) pieces.emplace_back(1, static_cast<char>(c));
  for (const char* p : {"\n", "ab", "a\"", "\",", "\"}", "\n+", "\n-", "\n ", "@@ ", "\\n", "é", "x\ny"}) pieces.emplace_back(p);
  std::vector<bool> eog(pieces.size(), false);
  pieces.emplace_back("<eos>");
  eog.push_back(true);
  return std::make_shared<const Vocabulary>(pieces, eog);
}

TEST(GrammarMask, MatchesBruteForceOnBoundedRepetitions) {
  const json s = json::parse(R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 30},
      "b": {"type": "string", "minLength": 2, "maxLength": 12}}, "required": ["a", "b"], "additionalProperties": false})");
  check_masks(schema_grammar(s), short_vocab(), 10, 80, 5);
  check_masks(std::make_shared<const Grammar>(unified_diff_grammar()), short_vocab(), 6, 120, 6);
  const std::string file = "def f():\n    return 1\n\nprint(f())\n";
  const DiffOriginal o{"m.py", file};
  check_masks(std::make_shared<const Grammar>(unified_diff_grammar(&o)), short_vocab(), 6, 120, 7);
}

TEST(GrammarMask, BoundedRepetitionSharesMasks) {
  const auto g = schema_grammar(json::parse(R"({"type": "string", "maxLength": 300})"));
  ASSERT_EQ(g->repeats.size(), 1u);
  auto v = short_vocab();
  Matcher m(g, v);
  int32_t a = -1, quote = -1;
  for (int t = 0; t < v->n_vocab(); ++t) {
    if (v->piece(t) == "a") a = t;
    if (v->piece(t) == "\"") quote = t;
  }
  ASSERT_TRUE(m.accept(quote));
  for (int i = 0; i < 300; ++i) {
    const uint64_t* mask = m.mask();
    ASSERT_TRUE(bit(mask, a)) << i;
    ASSERT_TRUE(bit(mask, quote));
    ASSERT_TRUE(m.accept(a));
  }
  EXPECT_FALSE(bit(m.mask(), a));  // the bound
  // Positions 1..300-K-1 (K = 3 bytes / 1 + 1) share one mask: computed once.
  EXPECT_GE(m.stats().mask_hits, 290u);
}

TEST(GrammarMask, CacheHitsInsideStrings) {
  auto v = toy_vocab();
  Matcher m(schema_grammar(json{{"type", "string"}}), v);
  int32_t quote = -1, a = -1;
  for (int t = 0; t < v->n_vocab(); ++t) {
    if (v->piece(t) == "\"") quote = t;
    if (v->piece(t) == "a") a = t;
  }
  m.mask();
  ASSERT_TRUE(m.accept(quote));
  for (int i = 0; i < 10; ++i) {
    m.mask();
    ASSERT_TRUE(m.accept(a));
  }
  EXPECT_GE(m.stats().mask_hits, 9u);
  ASSERT_TRUE(m.accept(quote));
  EXPECT_TRUE(m.must_end());
  EXPECT_FALSE(m.allowed(a));
}

TEST(JsonSchema, AcceptsValidAndRejectsInvalid) {
  const Grammar g = compile_json_schema(kPerson);
  EXPECT_TRUE(matches(g, R"({"name": "Ann", "age": 31})"));
  EXPECT_TRUE(matches(g, R"({"name":"Ann","age":-1,"tags":["a",3,null],"ok":null,"score":1.5e+3})"));
  EXPECT_TRUE(matches(g, "{\n  \"name\": \"\\u00e9\",\n  \"age\": 0\n}"));
  EXPECT_FALSE(matches(g, R"({"age": 31, "name": "Ann"})"));         // order of properties
  EXPECT_FALSE(matches(g, R"({"name": "Ann"})"));                    // missing required
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 1.5})"));        // integer
  EXPECT_FALSE(matches(g, R"({"name": "Annabelle", "age": 1})"));    // maxLength
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 1, "x": 1})"));  // additional property
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 01})"));         // leading zero
  EXPECT_FALSE(matches(g, R"({"name": "A)" "\x01" R"(", "age": 1})"));  // control character
  EXPECT_FALSE(matches(g, R"( {"name": "Ann", "age": 1})"));        // nothing before the value
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 1, "tags": ["a", "b", 3, null]})"));  // maxItems
}

TEST(JsonSchema, OptionalPropertiesAnyOfConstAndRefs) {
  const json s = json::parse(R"({"type": "object", "properties": {
      "a": {"const": {"k": [1, 2]}}, "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/n"}]}, "c": {"type": "boolean"}},
      "required": ["c"], "$defs": {"n": {"type": "integer", "minimum": 1}}})");
  const Grammar g = compile_json_schema(s);
  EXPECT_TRUE(matches(g, R"({"c": true})"));
  EXPECT_TRUE(matches(g, R"({"a": {"k":[1,2]}, "c": false})"));
  EXPECT_TRUE(matches(g, R"({"b": 7, "c": false})"));
  EXPECT_TRUE(matches(g, R"({"a":{"k":[1,2]},"b":"x","c":true})"));
  EXPECT_FALSE(matches(g, R"({"b": 0, "c": false})"));  // minimum 1
  EXPECT_FALSE(matches(g, R"({"a": 1, "c": false})"));
  EXPECT_FALSE(matches(g, R"({, "c": false})"));
  EXPECT_FALSE(matches(g, R"({"c": false,})"));
}

TEST(JsonSchema, CompileErrorsNameTheKeyword) {
  auto keyword = [](const std::string& text) -> std::string {
    try {
      compile_json_schema(json::parse(text));
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find("Invalid JSON schema"), std::string::npos) << e.what();
      return e.keyword + "@" + e.path;
    }
    return "compiled";
  };
  EXPECT_EQ(keyword(R"({"type": "string", "pattern": "^a+$"})"), "pattern@");
  EXPECT_EQ(keyword(R"({"type": "object", "properties": {"n": {"type": "number", "minimum": 5}}})"), "minimum@/properties/n");
  EXPECT_EQ(keyword(R"({"type": "integer", "maximum": 5})"), "maximum@");
  EXPECT_EQ(keyword(R"({"type": "strung"})"), "type@");
  EXPECT_EQ(keyword(R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})"), "required@");
  EXPECT_EQ(keyword(R"({"$ref": "#/$defs/missing"})"), "$ref@");
  EXPECT_EQ(keyword(R"({"$ref": "https://example.com/s.json"})"), "$ref@");
  EXPECT_EQ(keyword(R"({"allOf": [{"type": "object"}, {"required": []}]})"), "allOf@");
  EXPECT_EQ(keyword(R"({"type": "array", "items": {"type": "integer"}, "uniqueItems": true})"), "uniqueItems@");
  EXPECT_EQ(keyword(R"({"enum": []})"), "enum@");
  EXPECT_EQ(keyword(R"({"not": {"type": "null"}})"), "not@");
  // Recursion with no base case, and nesting beyond the limit.
  EXPECT_EQ(keyword(R"({"$ref": "#/$defs/a", "$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
                        "required": ["x"]}}})"), "$ref@");
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < kMaxSchemaDepth + 2; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_EQ(keyword(deep).substr(0, 6), "depth@");
  // Supported things compile.
  EXPECT_EQ(keyword(R"({"type": "array", "items": {"type": "string", "format": "date-time", "title": "t"}, "uniqueItems": false})"), "compiled");
}

TEST(Formats, UnifiedDiffCountsMustAgree) {
  const Grammar g = unified_diff_grammar();
  EXPECT_TRUE(matches(g, "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"));
  EXPECT_TRUE(matches(g, "--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,2 @@ def f():\n a\n+b\n@@ -9,1 +10,0 @@\n-z\n"));
  EXPECT_FALSE(matches(g, "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n+c\n"));  // one old line missing
  EXPECT_FALSE(matches(g, "--- a/x.py\n+++ b/x.py\n"));                         // no hunk
}

TEST(Formats, AnchoredDiffFollowsTheFile) {
  DiffOriginal o{"src/m.py", "def f():\n    return 1\n\nprint(f())\n"};
  const Grammar g = unified_diff_grammar(&o);
  EXPECT_TRUE(matches(g, "--- a/src/m.py\n+++ b/src/m.py\n@@ -1,3 +1,3 @@\n def f():\n-    return 1\n+    return 2\n \n"));
  // No trailing context before the file's end: git would look for it at the end.
  EXPECT_FALSE(matches(g, "--- a/src/m.py\n+++ b/src/m.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"));
  EXPECT_TRUE(matches(g, "--- a/src/m.py\n+++ b/src/m.py\n@@ -4,1 +4,2 @@\n print(f())\n+print(3)\n"));
  EXPECT_FALSE(matches(g, "--- a/src/m.py\n+++ b/src/m.py\n@@ -1,2 +1,2 @@\n def g():\n-    return 1\n+    return 2\n"));
  EXPECT_FALSE(matches(g, "--- a/src/m.py\n+++ b/src/m.py\n@@ -2,2 +2,2 @@\n def f():\n-    return 1\n+    return 2\n"));
  DiffOriginal bad{"m.py", "no final newline"};
  EXPECT_THROW(unified_diff_grammar(&bad), GrammarError);
}

TEST(Formats, SarifSchemaCompiles) {
  const Grammar g = builtin_format("sarif-2.1.0");
  EXPECT_TRUE(matches(g, R"({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "swz"}}, "results": [{"ruleId": "R1",
      "level": "error", "message": {"text": "bad"}, "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.c"},
      "region": {"startLine": 3}}}]}]}]})"));
  EXPECT_FALSE(matches(g, R"({"version": "2.1.0", "runs": []})"));
  // One rule at most: SARIF's rules must be unique items (a grammar cannot compare two).
  const std::string rule = R"({"id": "R1", "shortDescription": {"text": "x"}})";
  EXPECT_TRUE(matches(g, R"({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "swz", "rules": [)" + rule +
                             R"(]}}, "results": []}]})"));
  EXPECT_FALSE(matches(g, R"({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "swz", "rules": [)" + rule + ", " +
                              rule + R"(]}}, "results": []}]})"));
  EXPECT_THROW(builtin_format("yaml"), GrammarError);
}

TEST(Formats, ForcedToolCall) {
  std::vector<ToolSchema> tools = {
      {"get_weather", json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})")},
      {"add", json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                              "required": ["a", "b"], "additionalProperties": false})")}};
  const Grammar named = forced_tool_call_grammar(tools, "add");
  EXPECT_TRUE(matches(named, "{\"a\": 1, \"b\": 2}}\n</tool_call>"));
  EXPECT_TRUE(matches(named, "{\"a\": 1, \"b\": 2}}"));  // the turn may end after a call
  EXPECT_FALSE(matches(named, "{\"city\": \"x\"}}\n</tool_call>"));
  const Grammar single = forced_tool_call_grammar(tools, "add", /*parallel=*/false);
  EXPECT_TRUE(matches(single, "{\"a\": 1, \"b\": 2}}\n</tool_call>"));
  EXPECT_FALSE(matches(single, "{\"a\": 1, \"b\": 2}}"));
  EXPECT_FALSE(matches(single, "{\"a\": 1, \"b\": 2, \"a\": 3, \"b\": 4}}\n</tool_call>"));
  EXPECT_FALSE(matches(single, "{\"a\": 1, \"b\": 2}}\n{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}\n</tool_call>"));
  const Grammar any = forced_tool_call_grammar(tools, "");
  EXPECT_TRUE(matches(any, "get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(matches(any, "add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"));
  EXPECT_FALSE(matches(any, "sub\", \"arguments\": {}}\n</tool_call>"));
  // Parallel calls: a repeated member list, calls back to back, new tags.
  EXPECT_TRUE(matches(named, "{\"a\": 1, \"b\": 2, \"a\": 3, \"b\": 4}}\n</tool_call>"));
  EXPECT_FALSE(matches(named, "{\"a\": 1, \"b\": 2, \"a\": 3}}\n</tool_call>"));
  EXPECT_FALSE(matches(named, "{\"a\": 1, \"b\": 2, \"a\": 1, \"b\": 2, \"a\": 1, \"b\": 2, \"a\": 1, \"b\": 2, \"a\": 1, \"b\": 2}}"));
  EXPECT_TRUE(matches(named, "{\"a\": 1, \"b\": 2}}\n{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}\n</tool_call>"));
  EXPECT_FALSE(matches(named, "{\"a\": 1, \"b\": 2}}\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
  EXPECT_TRUE(matches(any, "add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
                           "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  tools[1].parameters = json::parse(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}})");
  try {
    forced_tool_call_grammar(tools, "");
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword, "pattern");
    EXPECT_EQ(e.path, "tools[1]/properties/a");
  }
}
