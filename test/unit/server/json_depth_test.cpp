// The JSON nesting limit (server/json_depth.h): the pre-scan's arithmetic, strings, and
// the parse paths that use it.
#include "json_depth.h"
#include "openai_chat.h"
#include "tool_calls.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using swz::server::ApiError;
using swz::server::json_depth_exceeded_at;
using swz::server::kMaxJsonDepth;

std::string nested(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

constexpr size_t npos = std::string_view::npos;

TEST(JsonDepth, CountsArraysAndObjectsOutermostFirst) {
  EXPECT_EQ(json_depth_exceeded_at("1", 0), npos);
  EXPECT_EQ(json_depth_exceeded_at("[]", 1), npos);
  EXPECT_EQ(json_depth_exceeded_at("[]", 0), 0u);
  EXPECT_EQ(json_depth_exceeded_at(R"({"a": [1, {"b": []}]})", 4), npos);
  EXPECT_EQ(json_depth_exceeded_at(R"({"a": [1, {"b": []}]})", 3), 16u);  // the innermost '['
  EXPECT_EQ(json_depth_exceeded_at("[[],[],[[]]]", 2), 8u);               // siblings do not add up
  EXPECT_EQ(json_depth_exceeded_at(nested(kMaxJsonDepth)), npos);
  EXPECT_EQ(json_depth_exceeded_at(nested(kMaxJsonDepth + 1)), static_cast<size_t>(kMaxJsonDepth));
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  EXPECT_EQ(json_depth_exceeded_at(R"(["[[[[", "{{{{"])", 1), npos);
  EXPECT_EQ(json_depth_exceeded_at(R"(["\"[[[", "\\"])", 1), npos);      // an escaped quote stays inside
  EXPECT_EQ(json_depth_exceeded_at(R"(["\\", [])", 1), 7u);              // an escaped backslash ends nothing
  std::string in_a_string = nested(100000);
  in_a_string.insert(in_a_string.begin(), '"');
  in_a_string.push_back('"');
  EXPECT_EQ(json_depth_exceeded_at(in_a_string, 1), npos);
}

TEST(JsonDepth, RequestBodiesDeeperThanTheLimitAre400NamingIt) {
  const std::string deep = nested(80000);
  try {
    swz::server::parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
        "function": {"name": "f", "parameters": {"a": )" + deep + "}}}]}");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "");
    EXPECT_NE(std::string(e.what()).find("deeper than the nesting limit of 512 levels"), std::string::npos) << e.what();
  }
  try {  // arguments as a string: its own JSON text, measured on its own
    nlohmann::json body = {{"messages",
                            {{{"role", "user"}, {"content", "hi"}},
                             {{"role", "assistant"},
                              {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep}}}}}}},
                             {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "ok"}}}}};
    swz::server::parse_chat_request(body.dump());
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "messages[1].tool_calls[0].function.arguments");
  }
}

TEST(JsonDepth, GeneratedToolCallsDeeperThanTheLimitAreText) {
  std::vector<swz::server::ParsedToolCall> c;
  EXPECT_TRUE(swz::server::parse_tool_call_json(R"({"name": "f", "arguments": {"a": )" + nested(kMaxJsonDepth - 2) + "}}", c));
  EXPECT_FALSE(swz::server::parse_tool_call_json(R"({"name": "f", "arguments": {"a": )" + nested(kMaxJsonDepth - 1) + "}}", c));
  EXPECT_FALSE(swz::server::parse_tool_call_json(R"({"name": "f", "arguments": "{\"a\": )" + nested(kMaxJsonDepth) + "}\"}", c));
}

}  // namespace
