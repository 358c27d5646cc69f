// Several calls inside one <tool_call> tag (issue 14, item 8): when a call is forced
// (tool_choice "required", Anthropic {type: any} / {type: tool}) Qwen2.5 writes its
// parallel calls into the one tag the prompt opened, as objects back to back or as an
// array. Every call must come out, in both APIs (they share ToolCallText); a body that is
// not entirely calls stays text.
#include "tool_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using swz::server::parse_tool_calls;
using swz::server::ParsedToolCall;
using swz::server::ToolCallText;

std::string describe(const std::vector<ParsedToolCall>& calls) {
  std::string s;
  for (const auto& c : calls) s += "[call " + c.name + " " + c.arguments + "]";
  return s;
}

std::string describe(const std::vector<ToolCallText::Event>& evs) {
  std::string s;
  for (const auto& e : evs) s += e.is_call ? "[call " + e.call.name + " " + e.call.arguments + "]" : "[text " + e.text + "]";
  return s;
}

/// `text` pushed in pieces of `step` bytes (0: whole), then finish().
std::string run(const std::string& text, size_t step = 0, bool* done = nullptr, int* calls = nullptr) {
  ToolCallText t(true, {"get_weather", "get_time"});
  std::vector<ToolCallText::Event> evs;
  if (step == 0) step = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += step)
    for (auto& e : t.push(text.substr(i, step))) evs.push_back(std::move(e));
  for (auto& e : t.finish()) evs.push_back(std::move(e));
  if (done) *done = t.done();
  if (calls) *calls = t.calls();
  return describe(evs);
}

const std::string kTwo = "[call get_weather {\"city\":\"Paris\"}][call get_time {\"tz\":\"CET\"}]";

TEST(ParseToolCalls, OneObject) {
  std::vector<ParsedToolCall> out;
  ASSERT_TRUE(parse_tool_calls("\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", out));
  EXPECT_EQ(describe(out), "[call get_weather {\"city\":\"Paris\"}]");
}

TEST(ParseToolCalls, ObjectsBackToBack) {
  for (const std::string sep : {"\n", "", " ", ",\n", ", ", "\n\n"}) {
    std::vector<ParsedToolCall> out;
    const std::string body = "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}" + sep +
                             "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n";
    ASSERT_TRUE(parse_tool_calls(body, out)) << "separator '" << sep << "'";
    EXPECT_EQ(describe(out), kTwo);
  }
}

TEST(ParseToolCalls, ArrayOfCalls) {
  std::vector<ParsedToolCall> out;
  ASSERT_TRUE(parse_tool_calls(
      "\n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", \"arguments\": "
      "\"{\\\"tz\\\": \\\"CET\\\"}\"}]\n",
      out));
  EXPECT_EQ(describe(out), kTwo);
  // Argument order is kept (ordered JSON), as for a single call.
  out.clear();
  ASSERT_TRUE(parse_tool_calls("[{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": 2}}]", out));
  EXPECT_EQ(out[0].arguments, "{\"z\":1,\"a\":2}");
}

TEST(ParseToolCalls, BracesInsideStringsDoNotSplit) {
  std::vector<ParsedToolCall> out;
  ASSERT_TRUE(parse_tool_calls("{\"name\": \"f\", \"arguments\": {\"s\": \"}{ ] [\\\"\"}}{\"name\": \"g\"}", out));
  EXPECT_EQ(describe(out), "[call f {\"s\":\"}{ ] [\\\"\"}][call g {}]");
}

/// Qwen2.5-Coder-0.5B, forced to call get_weather for Paris and Tokyo, writes both
/// cities into one arguments object: {"city": "Paris", "city": "Tokyo"}. A JSON parser
/// keeps only the last value (one call, for Tokyo); each repeated name starts the next call.
TEST(ParseToolCalls, RepeatedArgumentNamesAreSeveralCallsOfOneFunction) {
  std::vector<ParsedToolCall> out;
  ASSERT_TRUE(parse_tool_calls("\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"city\": \"Tokyo\"}}\n", out));
  EXPECT_EQ(describe(out), "[call get_weather {\"city\":\"Paris\"}][call get_weather {\"city\":\"Tokyo\"}]");
  // Several names per call, nested values, the arguments as a JSON string, "parameters",
  // and objects back to back after it: every value lands in its own call, in order.
  out.clear();
  ASSERT_TRUE(parse_tool_calls(
      "{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": {\"x\": [1, {\"a\": 0}]}, \"a\": 2, \"b\": [], \"a\": 3}}"
      "{\"name\": \"g\", \"arguments\": \"{\\\"q\\\": \\\"u\\\", \\\"q\\\": \\\"v\\\"}\"}"
      "{\"name\": \"h\", \"parameters\": {\"k\": true, \"k\": false}}",
      out));
  EXPECT_EQ(describe(out),
            "[call f {\"a\":1,\"b\":{\"x\":[1,{\"a\":0}]}}][call f {\"a\":2,\"b\":[]}][call f {\"a\":3}]"
            "[call g {\"q\":\"u\"}][call g {\"q\":\"v\"}][call h {\"k\":true}][call h {\"k\":false}]");
  // A name repeated only inside a nested value, or in another top-level member, splits nothing.
  out.clear();
  ASSERT_TRUE(parse_tool_calls("{\"arguments\": {\"o\": {\"a\": 1}, \"p\": {\"a\": 2}}, \"name\": \"f\", \"x\": {\"o\": 1}}", out));
  EXPECT_EQ(describe(out), "[call f {\"o\":{\"a\":1},\"p\":{\"a\":2}}]");
}

/// The exact text Qwen2.5-Coder-0.5B generates for "What is the weather in Paris and in
/// Tokyo?" with tool_choice "required" (greedy), after the forced prefix.
TEST(ToolCallText, RepeatedArgumentNamesAfterAForcedPrefix) {
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"city\": \"Tokyo\"}}";
  for (size_t step : {0, 1, 3, 7}) {
    int calls = 0;
    EXPECT_EQ(run(text, step, nullptr, &calls), "[call get_weather {\"city\":\"Paris\"}][call get_weather {\"city\":\"Tokyo\"}]")
        << "step " << step;
    EXPECT_EQ(calls, 2);
  }
  // A bare JSON call (no tag) is split the same way.
  EXPECT_EQ(run("{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\", \"tz\": \"JST\"}}"),
            "[call get_time {\"tz\":\"CET\"}][call get_time {\"tz\":\"JST\"}]");
}

TEST(ParseToolCalls, AllOrNothing) {
  const char* bad[] = {
      "",
      "  \n",
      "[]",
      "{\"name\": \"f\"} and some words",
      "{\"name\": \"f\"}\n{\"nome\": \"g\"}",                 // the second is no call
      "{\"name\": \"f\"}\n{\"name\": \"g\", \"arguments\": ",  // the second is unterminated
      "[{\"name\": \"f\"}, 3]",
      "[{\"name\": \"f\"}] {\"name\": \"g\"}",
      "{\"name\": \"f\"}]",
  };
  for (const char* b : bad) {
    std::vector<ParsedToolCall> out = {{"keep", "{}"}};
    EXPECT_FALSE(parse_tool_calls(b, out)) << b;
    ASSERT_EQ(out.size(), 1u) << "nothing appended for " << b;
  }
}

/// The exact text Qwen2.5-Coder-0.5B generates after a forced prefix
/// ("<tool_call>\n{\"name\": \"", which the endpoints push first): two calls in one tag.
TEST(ToolCallText, TwoCallsInOneTagAfterAForcedPrefix) {
  const std::string forced = "<tool_call>\n{\"name\": \"";
  const std::string generated =
      "get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>";
  for (size_t step : {0, 1, 2, 5, 7}) {
    bool done = true;
    int calls = 0;
    EXPECT_EQ(run(forced + generated, step, &done, &calls), kTwo) << "step " << step;
    EXPECT_EQ(calls, 2);
    EXPECT_FALSE(done);
  }
  // Generation ended before the closing tag (max_tokens, or the EOS right after the JSON).
  EXPECT_EQ(run(forced + generated.substr(0, generated.find("\n</tool_call>"))), kTwo);
}

TEST(ToolCallText, ArrayInOneTagAndMoreTagsAfterIt) {
  const std::string text =
      "<tool_call>\n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", "
      "\"arguments\": {\"tz\": \"CET\"}}]\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t step : {0, 1, 3}) EXPECT_EQ(run(text, step), kTwo + "[call get_time {}]") << "step " << step;
}

TEST(ToolCallText, ATagThatIsNotAllCallsStaysText) {
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\nnot json\n</tool_call>";
  EXPECT_EQ(run(text), "[text " + text + "]");
}

}  // namespace
