// Cache modes through both wire formats over the FakeEngine: the request field and the
// header select the mode, the server default applies otherwise, `reorder` rewrites the
// code the engine is given (and nothing else), `approx` leaves the prompt untouched and
// hands the engine the token ranges of the code atoms (in plain text and inside a JSON tool
// result), conflicts and bad values are 400, and every response names the mode in
// X-Swizzle-Cache-Mode and usage.swizzle_cache_mode.
#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cache_mode.h"
#include "running_server.h"

namespace {

using json = nlohmann::json;
using swz::server::ServerOptions;

struct Running : swz::test::RunningServer {
  explicit Running(ServerOptions opts = {}) {
    engine.pieces = {"ok"};
    start(std::move(opts));
  }
  httplib::Result post(const std::string& path, const json& body, const httplib::Headers& h = {}) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    return c.Post(path.c_str(), h, body.dump(), "application/json");
  }
};

const std::string kFile =
    "Review this file.\n```python app.py\nimport os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n```\nThanks.\n";

json chat_body(const std::string& text) { return {{"messages", json::array({{{"role", "user"}, {"content", text}}})}}; }
json messages_body(const std::string& text) {
  return {{"model", "m"}, {"max_tokens", 4}, {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

TEST(CacheModeHttp, ExactIsTheDefaultAndLeavesThePromptUntouched) {
  Running s;
  auto r = s.post("/v1/chat/completions", chat_body(kFile));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value(swz::server::kCacheModeHeader), "exact");
  EXPECT_EQ(json::parse(r->body)["usage"]["swizzle_cache_mode"], "exact");
  ASSERT_EQ(s.engine.last_prompt.messages.size(), 1u);
  EXPECT_EQ(s.engine.last_prompt.messages[0].content, kFile);
}

TEST(CacheModeHttp, ReorderByFieldOrHeaderInBothWireFormats) {
  Running s;
  json body = chat_body(kFile);
  body["swizzle_cache_mode"] = "reorder";
  auto r = s.post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value(swz::server::kCacheModeHeader), "reorder");
  EXPECT_EQ(json::parse(r->body)["usage"]["swizzle_cache_mode"], "reorder");
  EXPECT_EQ(s.engine.last_prompt.messages[0].content, kFile);  // first sighting: source order, unchanged

  // Anthropic, by header, after an edit of a(): a() moves behind b().
  std::string edited = kFile;
  edited.replace(edited.find("return 1"), 8, "return 10");
  auto m = s.post("/v1/messages", messages_body(edited), {{"X-Swizzle-Cache-Mode", "reorder"}});
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200) << m->body;
  EXPECT_EQ(m->get_header_value(swz::server::kCacheModeHeader), "reorder");
  EXPECT_EQ(json::parse(m->body)["usage"]["swizzle_cache_mode"], "reorder");
  const std::string& got = s.engine.last_prompt.messages.back().content;
  EXPECT_LT(got.find("def b()"), got.find("def a()")) << got;
  EXPECT_EQ(got,
            "Review this file.\n```python app.py\nimport os\n\n\ndef b():\n    return 2\n"
            "# [app.py, out of file order]\ndef a():\n    return 10\n\n\n```\nThanks.\n");

  // Streaming responses carry the header too.
  json stream = chat_body(kFile);
  stream["stream"] = true;
  auto st = s.post("/v1/chat/completions", stream, {{"X-Swizzle-Cache-Mode", "reorder"}});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->get_header_value(swz::server::kCacheModeHeader), "reorder");
}

TEST(CacheModeHttp, CodeInsideAJsonToolResult) {
  Running s;
  auto messages = [](const std::string& first_body) {
    const json result = {{"path", "lib/calc.py"},
                         {"content", "import math\n\n\ndef a():\n    return " + first_body + "\n\n\ndef b():\n    return 2\n"}};
    return json::array({{{"role", "user"}, {"content", "Read lib/calc.py"}},
                        {{"role", "assistant"},
                         {"content", nullptr},
                         {"tool_calls", json::array({{{"id", "call_1"},
                                                      {"type", "function"},
                                                      {"function", {{"name", "read"}, {"arguments", "{}"}}}}})}},
                        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", result.dump(2)}}});
  };
  auto send = [&](const json& msgs) {
    json body = {{"messages", msgs}, {"swizzle_cache_mode", "reorder"}};
    auto r = s.post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  };
  const json first = messages("1");
  send(first);
  // Nothing moved: the JSON text is left exactly as sent (its 2-space indentation included).
  EXPECT_EQ(s.engine.last_prompt.messages.back().content, first[2]["content"].get<std::string>());
  send(messages("10"));
  const json got = json::parse(s.engine.last_prompt.messages.back().content);
  EXPECT_EQ(got["path"], "lib/calc.py");
  EXPECT_EQ(got["content"],
            "import math\n\n\ndef b():\n    return 2\n# [lib/calc.py, out of file order]\ndef a():\n    return 10\n\n\n");
}

TEST(CacheModeHttp, PromptWithoutCodeIsByteIdenticalInReorder) {
  Running s;
  const std::string prose = "Tell me about the weather in Lisbon.\n1. briefly\n2. kindly\n";
  json body = chat_body(prose);
  body["swizzle_cache_mode"] = "reorder";
  auto r = s.post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(s.engine.last_prompt.messages[0].content, prose);
}

TEST(CacheModeHttp, ServerDefaultApplies) {
  ServerOptions o;
  o.cache_mode = swz::frontend_ast::CacheMode::Reorder;
  Running s(o);
  auto r = s.post("/v1/messages", messages_body(kFile));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value(swz::server::kCacheModeHeader), "reorder");
  // A request can still ask for exact.
  auto e = s.post("/v1/chat/completions", chat_body(kFile), {{"X-Swizzle-Cache-Mode", "exact"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->get_header_value(swz::server::kCacheModeHeader), "exact");
  EXPECT_EQ(s.engine.last_prompt.messages[0].content, kFile);
  // An approx default (the operator's choice) applies to requests that name no mode.
  ServerOptions ao;
  ao.cache_mode = swz::frontend_ast::CacheMode::Approx;
  ao.approx_recompute = 0.25f;
  ao.approx_select = swz::engine::ApproxSelect::Head;
  Running as(ao);
  auto a = as.post("/v1/chat/completions", chat_body(kFile));
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  EXPECT_EQ(a->get_header_value(swz::server::kCacheModeHeader), "approx");
  EXPECT_EQ(as.engine.last_request.approx_atoms.size(), 3u);
  EXPECT_EQ(as.engine.last_request.approx_recompute, 0.25f);
  EXPECT_EQ(as.engine.last_request.approx_select, swz::engine::ApproxSelect::Head);
}

TEST(CacheModeHttp, ApproxPassesTheAtomsTokenRangesInBothWireFormats) {
  Running s;
  json approx = chat_body(kFile);
  approx["swizzle_cache_mode"] = "approx";
  auto a = s.post("/v1/chat/completions", approx);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  EXPECT_EQ(a->get_header_value(swz::server::kCacheModeHeader), "approx");
  EXPECT_EQ(json::parse(a->body)["usage"]["swizzle_cache_mode"], "approx");
  EXPECT_EQ(s.engine.last_prompt.messages[0].content, kFile);  // the prompt as it is
  // The fake tokenizer has a token per byte after "user:": the atoms' byte ranges.
  auto at = [&](const std::string& text, const std::string& atom) {
    const int b = 5 + static_cast<int>(text.find(atom));
    return swz::engine::TokenSpan{b, b + static_cast<int>(atom.size())};
  };
  const std::vector<swz::engine::TokenSpan> want = {at(kFile, "import os\n\n\n"), at(kFile, "def a():\n    return 1\n\n\n"),
                                                    at(kFile, "def b():\n    return 2\n")};
  EXPECT_EQ(s.engine.last_request.approx_atoms, want);
  EXPECT_EQ(s.engine.last_request.approx_recompute, swz::engine::kApproxRecompute);  // the default share
  approx["swizzle_approx_recompute"] = 0.5;
  auto half = s.post("/v1/chat/completions", approx);
  ASSERT_TRUE(half);
  ASSERT_EQ(half->status, 200) << half->body;
  EXPECT_EQ(s.engine.last_request.approx_recompute, 0.5f);
  approx["swizzle_approx_recompute"] = 1.5;
  auto bad = s.post("/v1/chat/completions", approx);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "swizzle_approx_recompute");
  EXPECT_EQ(s.engine.last_request.approx_select, swz::engine::ApproxSelect::Deviation);  // the default selection
  approx.erase("swizzle_approx_recompute");
  approx["swizzle_approx_select"] = "head";
  auto head = s.post("/v1/chat/completions", approx);
  ASSERT_TRUE(head);
  ASSERT_EQ(head->status, 200) << head->body;
  EXPECT_EQ(s.engine.last_request.approx_select, swz::engine::ApproxSelect::Head);
  approx["swizzle_approx_select"] = "random";
  auto bad_select = s.post("/v1/chat/completions", approx);
  ASSERT_TRUE(bad_select);
  EXPECT_EQ(bad_select->status, 400);
  EXPECT_EQ(json::parse(bad_select->body)["error"]["param"], "swizzle_approx_select");
  // Anthropic, by header, with the file inside a JSON tool result: found in its escaped form.
  const std::string code = "import os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n";
  const std::string result = json{{"path", "app.py"}, {"content", code}}.dump();
  json m = {{"model", "m"},
            {"max_tokens", 4},
            {"messages", json::array({{{"role", "user"}, {"content", "Read app.py"}},
                                      {{"role", "assistant"},
                                       {"content", json::array({{{"type", "tool_use"}, {"id", "t1"}, {"name", "read"},
                                                                 {"input", {{"path", "app.py"}}}}})}},
                                      {{"role", "user"},
                                       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "t1"},
                                                                 {"content", result}}})}}})}};
  m["swizzle_approx_select"] = "head";
  auto am = s.post("/v1/messages", m, {{"X-Swizzle-Cache-Mode", "approx"}});
  ASSERT_TRUE(am);
  ASSERT_EQ(am->status, 200) << am->body;
  EXPECT_EQ(s.engine.last_request.approx_select, swz::engine::ApproxSelect::Head);
  EXPECT_EQ(am->get_header_value(swz::server::kCacheModeHeader), "approx");
  EXPECT_EQ(json::parse(am->body)["usage"]["swizzle_cache_mode"], "approx");
  const std::vector<int32_t>& prompt = s.engine.last_request.prompt;
  const std::string spelled(prompt.begin(), prompt.end());
  std::vector<std::string> got;
  for (const swz::engine::TokenSpan& sp : s.engine.last_request.approx_atoms)
    got.push_back(spelled.substr(static_cast<size_t>(sp.begin), static_cast<size_t>(sp.end - sp.begin)));
  const std::vector<std::string> escaped = {"import os\\n\\n\\n", "def a():\\n    return 1\\n\\n\\n", "def b():\\n    return 2\\n"};
  EXPECT_EQ(got, escaped);
  // A prompt without code: no atoms.
  json plain = chat_body("Name three colours.");
  plain["swizzle_cache_mode"] = "approx";
  auto p = s.post("/v1/chat/completions", plain);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->status, 200) << p->body;
  EXPECT_TRUE(s.engine.last_request.approx_atoms.empty());
}

TEST(CacheModeHttp, ConflictsAndBadValuesAre400) {
  Running s;
  json conflict = chat_body(kFile);
  conflict["swizzle_cache_mode"] = "exact";
  auto c = s.post("/v1/chat/completions", conflict, {{"X-Swizzle-Cache-Mode", "reorder"}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 400);
  json bad = chat_body(kFile);
  bad["swizzle_cache_mode"] = 3;
  auto b = s.post("/v1/chat/completions", bad);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 400);
  auto h = s.post("/v1/chat/completions", chat_body(kFile), {{"X-Swizzle-Cache-Mode", "fast"}});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 400);
}

}  // namespace
