// The Anthropic Messages request parser (server/anthropic_messages.h) and the tool-call
// splitter shared with the OpenAI path (server/tool_calls.h).
#include "anthropic_messages.h"
#include "tool_calls.h"

#include <gtest/gtest.h>

namespace {

using swz::server::ApiError;
using swz::server::parse_messages_request;
using swz::server::ToolCallText;

ApiError error_of(const std::string& body) {
  try {
    parse_messages_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "accepted");
}

std::string with(const std::string& fields) {
  return R"({"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}])" +
         (fields.empty() ? std::string() : "," + fields) + "}";
}

TEST(MessagesRequest, MinimalBody) {
  auto r = parse_messages_request(with(""));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 16);
  ASSERT_EQ(r.prompt.messages.size(), 1u);
  EXPECT_EQ(r.prompt.messages[0].role, "user");
  EXPECT_EQ(r.prompt.messages[0].content, "hi");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.prompt.continue_final_message);
  EXPECT_FALSE(r.parse_tool_calls);
}

TEST(MessagesRequest, SystemBlocksDropBillingHeaderAndAcceptCacheControl) {
  auto r = parse_messages_request(with(
      R"("system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.3; cch=abc;"},)"
      R"({"type":"text","text":"You are helpful.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be brief."}])"));
  EXPECT_EQ(r.dropped_billing_blocks, 1);
  ASSERT_EQ(r.prompt.messages.size(), 2u);
  EXPECT_EQ(r.prompt.messages[0].role, "system");
  EXPECT_EQ(r.prompt.messages[0].content, "You are helpful.\nBe brief.");
  // Two requests that differ only in the billing header render the same prompt.
  auto r2 = parse_messages_request(with(
      R"("system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.3; cch=zzz;"},)"
      R"({"type":"text","text":"You are helpful."},{"type":"text","text":"Be brief."}])"));
  EXPECT_EQ(r2.prompt.messages[0].content, r.prompt.messages[0].content);
}

TEST(MessagesRequest, ToolUseAndToolResultBecomeToolMessages) {
  auto r = parse_messages_request(R"({"model":"m","max_tokens":5,
    "tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
    "messages":[{"role":"user","content":[{"type":"text","text":"Paris?"}]},
      {"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"},{"type":"text","text":"20C"}]},{"type":"text","text":"thanks"}]}]})");
  ASSERT_EQ(r.prompt.tools.size(), 1u);
  EXPECT_EQ(r.prompt.tools[0].name, "get_weather");
  EXPECT_EQ(r.prompt.tools[0].parameters, R"({"properties":{"city":{"type":"string"}},"type":"object"})");
  EXPECT_TRUE(r.parse_tool_calls);
  ASSERT_EQ(r.prompt.messages.size(), 4u);
  EXPECT_EQ(r.prompt.messages[1].role, "assistant");
  EXPECT_EQ(r.prompt.messages[1].content, "Checking.");
  ASSERT_EQ(r.prompt.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.prompt.messages[1].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(r.prompt.messages[1].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.prompt.messages[2].role, "tool");
  EXPECT_EQ(r.prompt.messages[2].content, "sunny\n20C");
  EXPECT_EQ(r.prompt.messages[2].tool_call_id, "toolu_1");
  EXPECT_EQ(r.prompt.messages[2].name, "get_weather");
  EXPECT_EQ(r.prompt.messages[3].role, "user");
  EXPECT_EQ(r.prompt.messages[3].content, "thanks");
}

TEST(MessagesRequest, ToolChoice) {
  const std::string tools = R"("tools":[{"name":"f","input_schema":{"type":"object"}}])";
  EXPECT_EQ(parse_messages_request(with(tools + R"(,"tool_choice":{"type":"any"})")).prompt.assistant_prefix,
            "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(parse_messages_request(with(tools + R"(,"tool_choice":{"type":"tool","name":"f"})")).prompt.assistant_prefix,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  auto none = parse_messages_request(with(tools + R"(,"tool_choice":{"type":"none"})"));
  EXPECT_TRUE(none.prompt.tools.empty());
  EXPECT_FALSE(none.parse_tool_calls);
  EXPECT_EQ(error_of(with(tools + R"(,"tool_choice":{"type":"tool","name":"g"})")).param, "tool_choice.name");
  EXPECT_EQ(error_of(with(R"("tool_choice":{"type":"any"})")).param, "tool_choice");
  EXPECT_EQ(error_of(with(tools + R"(,"tool_choice":{"type":"sometimes"})")).param, "tool_choice.type");
}

TEST(MessagesRequest, TrailingAssistantMessageIsContinued) {
  auto r = parse_messages_request(
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure,"}]})");
  EXPECT_TRUE(r.prompt.continue_final_message);
}

TEST(MessagesRequest, ValidationErrorsNameTheField) {
  EXPECT_EQ(error_of(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})").param, "max_tokens");
  EXPECT_EQ(error_of(with("").substr(0, 0) + R"({"max_tokens":1,"messages":[]})").param, "model");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]})").param, "max_tokens");
  EXPECT_EQ(error_of(with(R"("temperature":1.5)")).param, "temperature");
  EXPECT_EQ(error_of(with(R"("temperature":-1)")).param, "temperature");
  EXPECT_EQ(error_of(with(R"("top_p":1.01)")).param, "top_p");
  EXPECT_EQ(error_of(with(R"("top_k":-1)")).param, "top_k");
  EXPECT_EQ(error_of(with(R"("top_k":1.5)")).param, "top_k");
  EXPECT_EQ(error_of(with(R"("stop_sequences":["a",""])")).param, "stop_sequences.1");
  EXPECT_EQ(error_of(with(R"("metadata":"x")")).param, "metadata");
  EXPECT_EQ(error_of(with(R"("thinking":{"type":"enabled","budget_tokens":1024})")).param, "thinking");
  EXPECT_EQ(error_of(with(R"("tools":[{"type":"web_search_20250305","name":"web_search"}])")).param, "tools.0.type");
  EXPECT_EQ(error_of(with(R"("tools":[{"name":"f"}])")).param, "tools.0.input_schema");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]})").param,
            "messages.0.content.0.type");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]})").param,
            "messages.0.content.0.type");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]})").param, "messages.0.role");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}]})").param,
            "messages.0.content.0.content.0.type");
  EXPECT_EQ(error_of("[1]").status, 400);
  EXPECT_EQ(error_of("{").status, 400);
  EXPECT_EQ(error_of(with(R"("temperature":1e999)")).status, 400);
}

TEST(MessagesRequest, ErrorBodyUsesAnthropicSchema) {
  auto body = swz::server::anthropic_error_body(ApiError(400, "Field required.", "invalid_request_error", "max_tokens"));
  EXPECT_EQ(body.dump(), R"({"error":{"message":"max_tokens: Field required.","type":"invalid_request_error"},"type":"error"})");
  EXPECT_STREQ(swz::server::anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(swz::server::anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(swz::server::anthropic_error_type(529), "overloaded_error");
  EXPECT_STREQ(swz::server::anthropic_error_type(503), "overloaded_error");  // shutting down
  EXPECT_STREQ(swz::server::anthropic_error_type(500), "api_error");
}

TEST(MessagesRequest, UsageInputCountsAddUpToThePrompt) {
  auto u = swz::server::anthropic_usage(100, 30, 7);
  EXPECT_EQ(u["cache_read_input_tokens"], 30);
  EXPECT_EQ(u["cache_creation_input_tokens"], 70);
  EXPECT_EQ(u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>() +
                u["cache_creation_input_tokens"].get<int>(),
            100);
  EXPECT_EQ(u["output_tokens"], 7);
}

/// Runs `text` through ToolCallText cut at every pair of split points; all splits must
/// give the same events as one whole push.
std::string describe(const std::vector<ToolCallText::Event>& evs) {
  std::string s;
  for (const auto& e : evs) s += e.is_call ? "[call " + e.call.name + " " + e.call.arguments + "]" : "[text " + e.text + "]";
  return s;
}

std::string run_whole(const std::string& text, bool enabled, bool* done = nullptr) {
  ToolCallText t(enabled);
  auto evs = t.push(text);
  for (auto& e : t.finish()) evs.push_back(e);
  if (done) *done = t.done();
  return describe(evs);
}

void expect_split_invariant(const std::string& text, bool enabled = true) {
  const std::string whole = run_whole(text, enabled);
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); j += 3) {
      ToolCallText t(enabled);
      std::vector<ToolCallText::Event> evs;
      for (auto piece : {text.substr(0, i), text.substr(i, j - i), text.substr(j)})
        for (auto& e : t.push(piece)) evs.push_back(e);
      for (auto& e : t.finish()) evs.push_back(e);
      // Adjacent text events may be cut differently; compare the joined description.
      std::string a, b;
      for (auto& e : evs) a += e.is_call ? "|call " + e.call.name + e.call.arguments + "|" : e.text;
      ToolCallText w(enabled);
      auto wevs = w.push(text);
      for (auto& e : w.finish()) wevs.push_back(e);
      for (auto& e : wevs) b += e.is_call ? "|call " + e.call.name + e.call.arguments + "|" : e.text;
      ASSERT_EQ(a, b) << "split at " << i << "," << j << " of " << text;
    }
  }
  (void)whole;
}

TEST(ToolCallText, TextThenCall) {
  bool done = false;
  EXPECT_EQ(run_whole("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", true, &done),
            "[text Let me check.][call get_weather {\"city\":\"Paris\"}]");
  EXPECT_FALSE(done);
}

TEST(ToolCallText, NoEmptyTextBeforeACallAndParallelCalls) {
  EXPECT_EQ(run_whole("\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>\n", true),
            "[call a {}][call b {\"x\":1}]");
}

TEST(ToolCallText, TextAfterACallEndsTheTurn) {
  bool done = false;
  EXPECT_EQ(run_whole("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nAnd then", true, &done), "[call a {}]");
  EXPECT_TRUE(done);
}

TEST(ToolCallText, UnparseableCallIsGivenBackAsText) {
  EXPECT_EQ(run_whole("x <tool_call>{not json}</tool_call>", true), "[text x][text  <tool_call>{not json}</tool_call>]");
  EXPECT_EQ(run_whole("<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1", true), "[text <tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1]");
  // An unterminated call that parses (generation ended right after the JSON) is a call.
  EXPECT_EQ(run_whole("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": 1}}\n", true), "[call a {\"k\":1}]");
}

TEST(ToolCallText, BareJsonCallAtTheStartNamingAnOfferedTool) {
  auto run = [](const std::string& text, size_t cut) {
    ToolCallText t(true, {"Read", "get_weather"});
    auto evs = t.push(text.substr(0, cut));
    for (auto& e : t.push(text.substr(cut))) evs.push_back(e);
    for (auto& e : t.finish()) evs.push_back(e);
    return describe(evs);
  };
  const std::string call = "{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a}.txt\"}}";
  for (size_t cut = 0; cut <= call.size(); ++cut) {
    EXPECT_EQ(run(call, cut), "[call Read {\"file_path\":\"a}.txt\"}]");
    // Llama-3 spells the arguments "parameters".
    EXPECT_EQ(run("{\"name\": \"get_weather\", \"parameters\": {}}", cut % 20), "[call get_weather {}]");
  }
  // A Markdown-fenced call, as small models write it.
  const std::string fenced = "```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"x\"}}\n```";
  for (size_t cut = 0; cut <= fenced.size(); ++cut) EXPECT_EQ(run(fenced, cut), "[call Read {\"file_path\":\"x\"}]");
  EXPECT_EQ(run("```python\nprint(1)\n```", 4), "[text ```p][text ython\nprint(1)\n```]");
  EXPECT_EQ(run("```json\n{\"name\": \"Read\"}\nmore", 9), "[text ```json\n{\"name\": \"Read\"}\nmore]");
  // An object naming no offered tool, or JSON later in the text, is text.
  EXPECT_EQ(run("{\"name\": \"other\"} x", 5), "[text {\"name\": \"other\"} x]");
  EXPECT_EQ(run("Here: {\"name\": \"Read\"}", 5), "[text Here:][text  {\"name\": \"Read\"}]");
  EXPECT_EQ(run("{\"unterminated\": ", 3), "[text {\"unterminated\":][text  ]");
}

TEST(ToolCallText, DisabledIsPlainText) {
  EXPECT_EQ(run_whole("<tool_call>{\"name\": \"a\"}</tool_call>", false), "[text <tool_call>{\"name\": \"a\"}</tool_call>]");
}

TEST(ToolCallText, EverySplitGivesTheSameResult) {
  expect_split_invariant("Hi <tool <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"<tool_call>\"}}\n</tool_call>  \n");
  expect_split_invariant("plain text with < and <tool but no call  ");
  expect_split_invariant("<tool_call>{\"name\": \"f\"}</tool_call> tail");
  expect_split_invariant("<tool_call>{\"name\": \"f\"}</tool_call> tail", false);
}

}  // namespace
