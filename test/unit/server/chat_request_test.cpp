// Request parsing/validation of POST /v1/chat/completions against the OpenAI API
// reference: which bodies are accepted, and which 400 (with which `param`) the others get.
#include "anthropic_messages.h"
#include "openai_chat.h"
#include "openai_completions.h"
#include "structured_output.h"

#include <gtest/gtest.h>

namespace {

using swz::server::ApiError;
using swz::server::parse_chat_request;

/// The ApiError a body produces; fails the test when it parses.
ApiError error_of(const std::string& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "accepted");
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

std::string with(const std::string& fields) { return "{" + kMsgs + (fields.empty() ? "" : "," + fields) + "}"; }

TEST(ChatRequest, MinimalBodyGetsOpenAIDefaults) {
  auto r = parse_chat_request(with(R"("model":"whatever")"));
  EXPECT_EQ(r.model, "whatever");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FALSE(r.sampling.seed.has_value());
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
}

TEST(ChatRequest, AllSupportedFieldsAreRead) {
  auto r = parse_chat_request(with(
      R"("max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":42,"stream":true,)"
      R"("stream_options":{"include_usage":true},"stop":["x","yz"],"n":1,"user":"ignored","presence_penalty":0)"));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
}

TEST(ChatRequest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(parse_chat_request(with(R"("max_tokens":5,"max_completion_tokens":9)")).max_tokens, 9);
  EXPECT_EQ(parse_chat_request(with(R"("max_completion_tokens":9,"max_tokens":5)")).max_tokens, 9);
  EXPECT_EQ(parse_chat_request(with(R"("max_completion_tokens":3)")).max_tokens, 3);
}

TEST(ChatRequest, NullMeansAbsent) {
  auto r = parse_chat_request(with(R"("temperature":null,"max_tokens":null,"stop":null,"seed":null)"));
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.max_tokens.has_value());
}

TEST(ChatRequest, ContentPartsAndRoles) {
  auto r = parse_chat_request(R"({"messages":[
      {"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null},
      {"role":"user","content":"c","name":"bob"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.messages[3].content, "c");
}

TEST(ChatRequest, MalformedBodies) {
  EXPECT_EQ(error_of("{not json").status, 400);
  EXPECT_NE(std::string(error_of("{not json").what()).find("parse"), std::string::npos);
  EXPECT_EQ(error_of("[1,2]").status, 400);
  EXPECT_EQ(error_of("{}").param, "messages");
  EXPECT_EQ(error_of(R"({"messages":[]})").param, "messages");
  EXPECT_EQ(error_of(R"({"messages":"hi"})").param, "messages");
  EXPECT_EQ(error_of(R"({"messages":[{"content":"x"}]})").param, "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"wizard","content":"x"}]})").param, "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"tool","content":"x"}]})").param, "messages[0].tool_call_id");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"function","content":"x"}]})").param, "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user"}]})").param, "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":5}]})").param, "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})").param,
            "messages[0].content[0].type");
  EXPECT_EQ(error_of(R"({"model":3,)" + kMsgs + "}").param, "model");
}

TEST(ChatRequest, WrongTypesNameTheField) {
  EXPECT_EQ(error_of(with(R"("temperature":"hot")")).param, "temperature");
  EXPECT_EQ(error_of(with(R"("max_tokens":1.5)")).param, "max_tokens");
  EXPECT_EQ(error_of(with(R"("max_tokens":"10")")).param, "max_tokens");
  EXPECT_EQ(error_of(with(R"("stream":1)")).param, "stream");
  EXPECT_EQ(error_of(with(R"("seed":1.5)")).param, "seed");
  EXPECT_EQ(error_of(with(R"("top_k":true)")).param, "top_k");
  EXPECT_EQ(error_of(with(R"("stop":5)")).param, "stop");
  EXPECT_EQ(error_of(with(R"("stop":["a",1])")).param, "stop[1]");
  EXPECT_EQ(error_of(with(R"("stream":true,"stream_options":{"include_usage":"yes"})")).param,
            "stream_options.include_usage");
  const ApiError e = error_of(with(R"("temperature":"hot")"));
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_NE(std::string(e.what()).find("a string"), std::string::npos);
}

TEST(ChatRequest, OutOfRangeAndNonFiniteNumbers) {
  // 1e999 overflows a double: nlohmann's parser refuses it (out_of_range 406), a 400.
  EXPECT_EQ(error_of(with(R"("temperature":1e999)")).status, 400);
  EXPECT_NE(std::string(error_of(with(R"("temperature":1e999)")).what()).find("1e999"), std::string::npos);
  EXPECT_EQ(error_of(with(R"("temperature":-1e999)")).status, 400);
  EXPECT_EQ(error_of(with(R"("temperature":-0.1)")).param, "temperature");
  EXPECT_EQ(error_of(with(R"("temperature":2.01)")).param, "temperature");
  EXPECT_EQ(error_of(with(R"("top_p":0)")).param, "top_p");
  EXPECT_EQ(error_of(with(R"("top_p":1.0001)")).param, "top_p");
  EXPECT_EQ(error_of(with(R"("min_p":-1)")).param, "min_p");
  EXPECT_EQ(error_of(with(R"("top_k":-1)")).param, "top_k");
  EXPECT_EQ(error_of(with(R"("max_tokens":0)")).param, "max_tokens");
  EXPECT_EQ(error_of(with(R"("max_completion_tokens":-5)")).param, "max_completion_tokens");
  EXPECT_EQ(error_of(with(R"("presence_penalty":3)")).param, "presence_penalty");
  // Boundaries are accepted.
  EXPECT_NO_THROW(parse_chat_request(with(R"("temperature":0,"top_p":1)")));
  EXPECT_NO_THROW(parse_chat_request(with(R"("temperature":2,"min_p":1)")));
}

TEST(ChatRequest, UnsupportedFeaturesAreRefusedByName) {
  EXPECT_EQ(error_of(with(R"("n":17)")).param, "n");
  EXPECT_NE(std::string(error_of(with(R"("n":17)")).what()).find("at most 16"), std::string::npos);
  EXPECT_EQ(parse_chat_request(with(R"("n":16)")).n, 16);
  EXPECT_EQ(error_of(with(R"("n":0)")).param, "n");
  EXPECT_EQ(error_of(with(R"("functions":[{"name":"f"}])")).param, "functions");
  EXPECT_EQ(error_of(with(R"("tools":[{"type":"web_search"}])")).param, "tools[0].type");
  EXPECT_EQ(error_of(with(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"maybe")")).param, "tool_choice");
  EXPECT_EQ(error_of(with(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})")).param, "tool_choice");
  EXPECT_EQ(error_of(with(R"("tool_choice":"required")")).param, "tool_choice");
  // Structured output (structured_output.h): known formats compile, an unknown type or a
  // schema keyword the engine cannot compile is refused by name.
  EXPECT_NE(parse_chat_request(with(R"("response_format":{"type":"json_object"})")).grammar, nullptr);
  EXPECT_EQ(parse_chat_request(with(R"("response_format":{"type":"text"})")).grammar, nullptr);
  EXPECT_EQ(error_of(with(R"("response_format":{"type":"yaml"})")).param, "response_format.type");
  const ApiError bad = error_of(with(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a"}}})"));
  EXPECT_EQ(bad.param, "response_format.json_schema.schema");
  EXPECT_NE(std::string(bad.what()).find("'pattern'"), std::string::npos) << bad.what();
  EXPECT_EQ(error_of(with(R"("logprobs":1)")).param, "logprobs");
  EXPECT_EQ(error_of(with(R"("top_logprobs":3)")).param, "top_logprobs");  // needs logprobs: true
  EXPECT_EQ(error_of(with(R"("logprobs":true,"top_logprobs":21)")).param, "top_logprobs");
  EXPECT_EQ(error_of(with(R"("logprobs":true,"top_logprobs":-1)")).param, "top_logprobs");
  EXPECT_EQ(parse_chat_request(with(R"("logprobs":true)")).logprobs, 0);
  EXPECT_EQ(parse_chat_request(with(R"("logprobs":true,"top_logprobs":20)")).logprobs, 20);
  EXPECT_EQ(parse_chat_request(with(R"("logprobs":false)")).logprobs, -1);
  EXPECT_EQ(error_of(with(R"("frequency_penalty":-2.5)")).param, "frequency_penalty");
  EXPECT_FLOAT_EQ(parse_chat_request(with(R"("frequency_penalty":0.5,"presence_penalty":-1)")).sampling.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(parse_chat_request(with(R"("frequency_penalty":0.5,"presence_penalty":-1)")).sampling.presence_penalty, -1.0f);
  EXPECT_EQ(error_of(with(R"("logit_bias":{"50256":-100})")).param, "logit_bias");
  EXPECT_EQ(error_of(with(R"("stream_options":{"include_usage":true})")).param, "stream_options");
  EXPECT_EQ(error_of(with(R"("stop":["a","b","c","d","e"])")).param, "stop");
  EXPECT_EQ(error_of(with(R"("stop":"")")).param, "stop");
  // Harmless forms of those fields are accepted.
  EXPECT_NO_THROW(parse_chat_request(with(R"("tools":[],"response_format":{"type":"text"},"logprobs":false)")));
}

// The security endpoint's default format (structured_output.h): SARIF under its prefixes
// for requests that chose no output; a format field (text included), a forced call or
// callable tools choose.
TEST(ChatRequest, SecurityEndpointDefaultsToSarif) {
  using swz::server::default_output_format;
  const auto sarif = default_output_format("/v1/security/chat/completions");
  ASSERT_NE(sarif, nullptr);
  EXPECT_EQ(sarif->name, "sarif-2.1.0");
  EXPECT_EQ(default_output_format("/security/v1/messages"), sarif);  // one shared grammar
  EXPECT_EQ(default_output_format("/v1/security/completions"), sarif);
  EXPECT_EQ(default_output_format("/v1/chat/completions"), nullptr);
  EXPECT_EQ(default_output_format("/v1/messages"), nullptr);
  const std::string tool = R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])";
  EXPECT_FALSE(parse_chat_request(with("")).output_chosen);
  EXPECT_TRUE(parse_chat_request(with(R"("response_format":{"type":"text"})")).output_chosen);
  EXPECT_TRUE(parse_chat_request(with(R"("response_format":{"type":"unified-diff"})")).output_chosen);
  EXPECT_TRUE(parse_chat_request(with(tool)).output_chosen);                              // auto: may call
  EXPECT_TRUE(parse_chat_request(with(tool + R"(,"tool_choice":"required")")).output_chosen);  // forced
  EXPECT_FALSE(parse_chat_request(with(tool + R"(,"tool_choice":"none")")).output_chosen);
  using swz::server::parse_messages_request;
  const std::string m = R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}])";
  EXPECT_FALSE(parse_messages_request(m + "}").output_chosen);
  EXPECT_FALSE(parse_messages_request(m + R"(,"output_config":{"effort":"low"}})").output_chosen);
  const auto text = parse_messages_request(m + R"(,"output_config":{"format":{"type":"text"}}})");
  EXPECT_TRUE(text.output_chosen);
  EXPECT_EQ(text.grammar, nullptr);
  EXPECT_TRUE(parse_messages_request(m + R"(,"tools":[{"name":"f","input_schema":{"type":"object"}}]})").output_chosen);
  using swz::server::parse_completions_request;
  EXPECT_FALSE(parse_completions_request(R"({"prompt":"x"})").output_chosen);
  EXPECT_TRUE(parse_completions_request(R"({"prompt":"x","response_format":{"type":"text"}})").output_chosen);
}

TEST(ChatRequest, ToolsToolCallsAndContinuation) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"w?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"sunny"}]}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"required"})");
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].content, "sunny");
  EXPECT_EQ(r.messages[2].name, "get_weather");
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_EQ(r.forced_prefix, "<tool_call>\n{\"name\": \"");
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_TRUE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"Sure"}]})")
                  .continue_final_message);
  EXPECT_EQ(error_of(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]})").param,
            "messages[0].tool_calls[0].function.arguments");
}

TEST(ChatRequest, ErrorBodyFollowsOpenAISchema) {
  ApiError e = error_of(with(R"("n":30)"));
  auto b = e.body();
  ASSERT_TRUE(b.contains("error"));
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "n");
  EXPECT_TRUE(b["error"]["code"].is_null());
  EXPECT_TRUE(b["error"]["message"].is_string());
}

}  // namespace
