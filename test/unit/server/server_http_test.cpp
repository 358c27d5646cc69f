// The HTTP layer end to end over a real socket (cpp-httplib client and raw sockets)
// with a scripted FakeEngine: response schema, SSE framing, UTF-8-safe streaming,
// headers, errors in OpenAI's schema, disconnects, auth and concurrency.
#include "fake_engine.h"
#include "running_server.h"
#include "openai_chat.h"
#include "server.h"
#include "text_stream.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace {

using nlohmann::json;
using swz::server::Server;
using swz::server::ServerOptions;
using swz::test::FakeEngine;

// "Hello 😀 世界!" cut inside the emoji and inside 世.
const std::vector<std::string> kPieces = {"Hel", "lo", " \xF0\x9F", "\x98", "\x80 \xE4", "\xB8\x96\xE7\x95\x8C", "!"};
const std::string kText = "Hello \xF0\x9F\x98\x80 \xE4\xB8\x96\xE7\x95\x8C!";

struct Running : swz::test::RunningServer {
  explicit Running(ServerOptions opts = {}) {
    engine.pieces = kPieces;
    start(std::move(opts));
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    return c;
  }
  httplib::Result chat(const json& body, const httplib::Headers& headers = {}) const {
    return client().Post("/v1/chat/completions", headers, body.dump(), "application/json");
  }

};

json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

/// Splits an SSE body into its data payloads; checks the framing on the way.
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event at " << pos;
    if (end == std::string::npos) break;
    std::string ev = body.substr(pos, end - pos);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    EXPECT_EQ(ev.find('\n'), std::string::npos) << "one line per event: " << ev;
    out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

void expect_error_schema(const httplib::Result& r, int status, const std::string& param) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  json b = json::parse(r->body);
  ASSERT_TRUE(b["error"].is_object()) << r->body;
  EXPECT_TRUE(b["error"]["message"].is_string());
  EXPECT_TRUE(b["error"]["type"].is_string());
  EXPECT_TRUE(b["error"].contains("code"));
  if (param.empty()) {
    EXPECT_TRUE(b["error"]["param"].is_null()) << r->body;
  } else {
    EXPECT_EQ(b["error"]["param"], param) << r->body;
  }
  EXPECT_EQ(r->get_header_value_count(swz::server::kCacheHitHeader), 1u);
}

TEST(ServerHttp, HealthAndModels) {
  Running s;
  auto c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}, {"backend", "fake"}}));
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  json mb = json::parse(m->body);
  EXPECT_EQ(mb["object"], "list");
  ASSERT_EQ(mb["data"].size(), 1u);
  EXPECT_EQ(mb["data"][0]["id"], "fake-model");
  EXPECT_EQ(mb["data"][0]["object"], "model");
  auto one = c.Get("/v1/models/fake-model");
  ASSERT_TRUE(one);
  EXPECT_EQ(json::parse(one->body)["id"], "fake-model");
  expect_error_schema(c.Get("/v1/models/gpt-4"), 404, "model");
}

TEST(ServerHttp, NonStreamingCompletion) {
  Running s;
  s.engine.cached_tokens = 3;
  auto r = s.chat({{"model", "anything-goes"}, {"messages", user("hi")}, {"temperature", 0}, {"seed", 7}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_TRUE(b["created"].is_number_integer());
  EXPECT_EQ(b["model"], "fake-model");
  ASSERT_EQ(b["choices"].size(), 1u);
  EXPECT_EQ(b["choices"][0]["index"], 0);
  EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(b["choices"][0]["message"]["content"], kText);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  const int prompt = static_cast<int>(std::string("user:hi\n").size()) + 2;
  EXPECT_EQ(b["usage"]["prompt_tokens"], prompt);
  EXPECT_EQ(b["usage"]["completion_tokens"], static_cast<int>(kPieces.size()));
  EXPECT_EQ(b["usage"]["total_tokens"], prompt + static_cast<int>(kPieces.size()));
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(r->get_header_value(swz::server::kCacheHitHeader), "3");
  EXPECT_EQ(r->get_header_value(swz::server::kUncachedHeader), std::to_string(prompt - 3));
  EXPECT_EQ(r->get_header_value_count(swz::server::kCacheHitHeader), 1u);
  // Sampling reached the engine.
  EXPECT_FLOAT_EQ(s.engine.last_request.sampling.temperature, 0.0f);
  EXPECT_EQ(s.engine.last_request.sampling.seed, 7u);
  EXPECT_EQ(s.engine.last_request.max_tokens, -1);
}

TEST(ServerHttp, StreamingHeadersCarryTheAdmittedCacheCounts) {
  Running s;
  s.engine.cached_tokens = 3;
  auto r = s.chat({{"messages", user("hi")}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value(swz::server::kCacheHitHeader), "3");
  EXPECT_EQ(r->get_header_value(swz::server::kUncachedHeader), "7");
  auto events = sse_data(r->body);
  ASSERT_GE(events.size(), 2u);
  json usage = json::parse(events[events.size() - 2])["usage"];
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 3) << "the usage chunk repeats the header";
}

TEST(ServerHttp, StreamingJoinsToTheNonStreamedTextWithoutSplittingCharacters) {
  Running s;
  auto r = s.chat({{"messages", user("hi")}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->get_header_value_count(swz::server::kCacheHitHeader), 1u);
  EXPECT_EQ(r->get_header_value(swz::server::kCacheHitHeader), "0");
  EXPECT_EQ(r->get_header_value(swz::server::kUncachedHeader), "10");
  auto events = sse_data(r->body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  std::string joined;
  std::string id = first["id"];
  std::string finish;
  json usage;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i]);
    EXPECT_EQ(c["id"], id);
    if (c["choices"].empty()) {
      usage = c["usage"];
      EXPECT_EQ(i, events.size() - 2) << "usage chunk comes last";
      continue;
    }
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("content")) {
      std::string piece = ch["delta"]["content"];
      swz::server::Utf8Decoder d;
      std::string decoded = d.feed(piece);
      decoded += d.finish();
      EXPECT_EQ(decoded, piece) << "delta is whole UTF-8";
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(joined, kText);
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(usage["completion_tokens"], static_cast<int>(kPieces.size()));
  EXPECT_EQ(usage["prompt_tokens"], 10);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0);

  // Without include_usage: no usage chunk and no usage key.
  auto r2 = s.chat({{"messages", user("hi")}, {"stream", true}});
  ASSERT_TRUE(r2);
  auto ev2 = sse_data(r2->body);
  for (size_t i = 0; i + 1 < ev2.size(); ++i) {
    json c = json::parse(ev2[i]);
    EXPECT_FALSE(c.contains("usage"));
    EXPECT_EQ(c["choices"].size(), 1u);
  }
}

TEST(ServerHttp, MaxTokensEndsWithLengthAndMaxCompletionTokensWins) {
  Running s;
  auto r = s.chat({{"messages", user("hi")}, {"max_tokens", 1}, {"max_completion_tokens", 2}});
  ASSERT_TRUE(r);
  json b = json::parse(r->body);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["completion_tokens"], 2);
  EXPECT_EQ(b["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(s.engine.last_request.max_tokens, 2);
}

TEST(ServerHttp, StopSequenceGivesTheSameTextStreamedAndNot) {
  Running s;
  // Stop at "世" which arrives split over pieces; text before it is "Hello 😀 ".
  json req = {{"messages", user("hi")}, {"stop", "\xE4\xB8\x96"}};
  auto r = s.chat(req);
  ASSERT_TRUE(r);
  json b = json::parse(r->body);
  EXPECT_EQ(b["choices"][0]["message"]["content"], "Hello \xF0\x9F\x98\x80 ");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b["usage"]["completion_tokens"], 6);  // generation stopped at the piece completing the stop
  req["stream"] = true;
  auto rs = s.chat(req);
  ASSERT_TRUE(rs);
  std::string joined;
  for (const auto& e : sse_data(rs->body)) {
    if (e == "[DONE]") continue;
    json c = json::parse(e);
    if (c["choices"][0]["delta"].contains("content")) joined += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(joined, b["choices"][0]["message"]["content"]);
}

TEST(ServerHttp, OverlongPromptIs400BeforeAnyStreamByte) {
  Running s;
  s.engine.info_.n_ctx = 64;
  std::string long_text(60, 'x');  // "user:" + 60 + "\n" + 2 = 68 tokens > 64
  auto r = s.chat({{"messages", user(long_text)}, {"stream", true}});
  expect_error_schema(r, 400, "messages");
  json b = json::parse(r->body);
  EXPECT_EQ(b["error"]["code"], "context_length_exceeded");
  std::string msg = b["error"]["message"];
  EXPECT_NE(msg.find("68 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64 tokens"), std::string::npos) << msg;
  EXPECT_EQ(s.engine.generate_calls, 0);
  // Exactly full minus one token is accepted and ends with "length" after one token.
  std::string fits(55, 'x');  // 5 + 55 + 1 + 2 = 63 tokens, room for 1
  auto ok = s.chat({{"messages", user(fits)}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  json okb = json::parse(ok->body);
  EXPECT_EQ(okb["usage"]["completion_tokens"], 1);
  EXPECT_EQ(okb["choices"][0]["finish_reason"], "length");
}

TEST(ServerHttp, InvalidRequestsGet400InOpenAISchema) {
  Running s;
  auto c = s.client();
  expect_error_schema(c.Post("/v1/chat/completions", "{oops", "application/json"), 400, "");
  expect_error_schema(s.chat({{"messages", user("hi")}, {"temperature", "hot"}}), 400, "temperature");
  expect_error_schema(c.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"temperature":1e999})",
                             "application/json"),
                      400, "");  // JSON parser rejects the overflow before fields are known
  expect_error_schema(s.chat({{"messages", user("hi")}, {"n", 17}}), 400, "n");
  expect_error_schema(s.chat({{"model", "m"}}), 400, "messages");
  expect_error_schema(s.chat({{"messages", user("hi")}, {"stream", true}, {"top_p", 0}}), 400, "top_p");
  EXPECT_EQ(s.engine.generate_calls, 0);
}

TEST(ServerHttp, UnknownPathsAndMethodsAre404Json) {
  Running s;
  auto c = s.client();
  expect_error_schema(c.Get("/v1/nothing"), 404, "");
  expect_error_schema(c.Get("/v1/chat/completions"), 404, "");
  expect_error_schema(c.Post("/health", "{}", "application/json"), 404, "");
}

TEST(ServerHttp, EngineFailureIs500AndTheServerKeepsServing) {
  Running s;
  s.engine.throw_runtime = true;
  auto r = s.chat({{"messages", user("hi")}});
  expect_error_schema(r, 500, "");
  EXPECT_NE(r->body.find("fake engine exploded"), std::string::npos);
  // Streaming: headers are out, so the error comes as an SSE event and no [DONE].
  auto rs = s.chat({{"messages", user("hi")}, {"stream", true}});
  ASSERT_TRUE(rs);
  auto events = sse_data(rs->body);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(json::parse(events[1])["error"]["type"], "server_error");
  s.engine.throw_runtime = false;
  auto ok = s.chat({{"messages", user("hi")}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(ServerHttp, ClientDisconnectMidStreamCancelsGenerationAndServerKeepsServing) {
  Running s;
  s.engine.endless = true;
  s.engine.token_delay_ms = 2;
  s.engine.info_.n_ctx = 1 << 30;
  int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  std::string body = json({{"messages", user("hi")}, {"stream", true}}).dump();
  std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  auto count = [&got] {
    size_t n = 0;
    for (size_t p = got.find("\"content\":\"tok \""); p != std::string::npos; p = got.find("\"content\":\"tok \"", p + 1)) ++n;
    return n;
  };
  while (count() < 3) {  // a few content chunks have arrived
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(got.find("200 OK"), std::string::npos);
  ::close(fd);
  for (int i = 0; i < 500 && s.engine.cancelled == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.engine.cancelled, 1) << "the engine was told to stop";
  s.engine.endless = false;
  s.engine.token_delay_ms = 0;
  auto ok = s.chat({{"messages", user("hi")}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["choices"][0]["message"]["content"], kText);
}

TEST(ServerHttp, InvalidContentLengthIs400AndClosesTheConnection) {
  Running s;
  for (const std::string length : {"-1", "+5", "5x", "99999999999999999999"}) {
    int fd = connect_to(s.port);
    ASSERT_GE(fd, 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + length + "\r\n\r\n{}";
    ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
    EXPECT_EQ(n, 0) << "the server closes the connection after answering (" << length << ")";
    ::close(fd);
    EXPECT_EQ(got.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << got;
    const json body = json::parse(got.substr(got.find("\r\n\r\n") + 4));
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["message"], "Invalid Content-Length header '" + length +
                                            "': expected a non-negative decimal integer of at most 19 digits.");
  }
  auto ok = s.chat({{"messages", user("hi")}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

/// A POST without a length (no Content-Length, or one without a value) used to be read
/// until the client closed: the HTTP thread waited out the read timeout (5 s), then a bare
/// "HTTP error 400.". Now: 411 at once, in the API's error schema, connection closed.
TEST(ServerHttp, PostWithoutContentLengthIs411AtOnce) {
  Running s;
  for (const std::string path : {"/v1/chat/completions", "/v1/messages"}) {
    for (const std::string header : {"", "Content-Length: \r\n", "Content-Length:\r\n"}) {
      int fd = connect_to(s.port);
      ASSERT_GE(fd, 0);
      timeval tv{10, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + header +
                              "\r\n{}";
      ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
      std::string got;
      char buf[4096];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ::close(fd);
      EXPECT_EQ(n, 0) << "the server closes the connection after answering";
      EXPECT_LT(secs, 2.0) << "answered without waiting for a body (" << path << ", '" << header << "')";
      ASSERT_EQ(got.rfind("HTTP/1.1 411 Length Required\r\n", 0), 0u) << got;
      const json body = json::parse(got.substr(got.find("\r\n\r\n") + 4));
      const std::string msg = "A POST request needs a Content-Length header (or Transfer-Encoding: chunked).";
      if (path == "/v1/messages") {
        EXPECT_EQ(body["type"], "error");
        EXPECT_EQ(body["error"]["type"], "invalid_request_error");
        EXPECT_EQ(body["error"]["message"], msg);
      } else {
        EXPECT_EQ(body["error"]["type"], "invalid_request_error");
        EXPECT_EQ(body["error"]["code"], "length_required");
        EXPECT_EQ(body["error"]["message"], msg);
      }
    }
  }
  auto ok = s.chat({{"messages", user("hi")}});  // framed requests are still served
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto health = s.client().Get("/health");  // a GET needs no length
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(ServerHttp, ApiKeyIsRequiredOnV1WhenConfigured) {
  ServerOptions o;
  o.api_key = "sekret";
  Running s(o);
  auto none = s.chat({{"messages", user("hi")}});
  expect_error_schema(none, 401, "");
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "invalid_api_key");
  expect_error_schema(s.chat({{"messages", user("hi")}}, {{"Authorization", "Bearer wrong"}}), 401, "");
  expect_error_schema(s.client().Get("/v1/models"), 401, "");
  auto ok = s.chat({{"messages", user("hi")}}, {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto health = s.client().Get("/health");  // liveness stays open
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(ServerHttp, ConcurrentRequestsAllSucceed) {
  Running s;
  s.engine.token_delay_ms = 1;
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    ts.emplace_back([&, i] {
      json req = {{"messages", user("hi")}, {"stream", i % 2 == 0}};
      auto r = s.chat(req);
      if (!r || r->status != 200) return;
      // No throwing or undefined access in a worker thread: a bad body is a failed request.
      if (i % 2 == 1) {
        json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
        const json::json_pointer content("/choices/0/message/content");
        if (!body.is_object() || !body.contains(content) || body.at(content) != kText) return;
      }
      if (i % 2 == 0) {
        auto events = sse_data(r->body);
        if (events.empty() || events.back() != "[DONE]") return;
      }
      ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(s.engine.generate_calls, 6);
}


// After the engine's device failed, /health answers 503 with the reason (a supervisor
// restarts the process); before, 200 with the backend.
TEST(ServerHttp, HealthIs503OnceTheEngineDeviceFailed) {
  Running s;
  auto ok = s.client().Get("/health");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  s.engine.failed = "cuda: cuStreamSynchronize: an illegal memory access was encountered";
  auto bad = s.client().Get("/health");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 503);
  EXPECT_EQ(json::parse(bad->body),
            json({{"status", "error"}, {"backend", "fake"}, {"error", "cuda: cuStreamSynchronize: an illegal memory access was encountered"}}));
}

}  // namespace

namespace {

/// What Qwen2.5 generates after the forced prefix "<tool_call>\n{\"name\": \"" when it
/// calls two tools: both calls inside the one tag (issue 14, item 8).
void script_two_calls_in_one_tag(FakeEngine& e) {
  e.scripts.push_back({"<tool_call>\n{\"name\": \"",
                       {"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "\n{\"name\": \"get_time\", ",
                        "\"arguments\": {\"tz\": \"CET\"}}", "\n</tool_call>"}});
}

const json kTwoTools = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}},
                                    {{"type", "function"}, {"function", {{"name", "get_time"}}}}});
const json kTwoAnthropicTools = json::array({{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}},
                                             {{"name", "get_time"}, {"input_schema", {{"type", "object"}}}}});

}  // namespace

TEST(ServerHttp, ForcedToolCallWithTwoCallsInOneTagIsTwoCallsInChat) {
  Running s;
  script_two_calls_in_one_tag(s.engine);
  auto r = s.chat({{"messages", user("weather and time?")}, {"tools", kTwoTools}, {"tool_choice", "required"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json c = json::parse(r->body)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << r->body;
  EXPECT_TRUE(c["message"]["content"].is_null()) << r->body;
  ASSERT_EQ(c["message"]["tool_calls"].size(), 2u) << r->body;
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(c["message"]["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_EQ(c["message"]["tool_calls"][1]["function"]["arguments"], "{\"tz\":\"CET\"}");

  // Streamed: two tool-call deltas (index 0 and 1), then finish_reason tool_calls.
  auto st = s.chat({{"messages", user("weather and time?")}, {"tools", kTwoTools}, {"tool_choice", "required"}, {"stream", true}});
  ASSERT_TRUE(st);
  std::vector<std::string> names;
  std::string finish;
  for (const auto& d : sse_data(st->body)) {
    if (d == "[DONE]") continue;
    json ch = json::parse(d)["choices"][0];
    if (ch["delta"].contains("tool_calls")) names.push_back(ch["delta"]["tool_calls"][0]["function"]["name"]);
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_EQ(finish, "tool_calls");

  // parallel_tool_calls: false keeps the first call only.
  auto one = s.chat({{"messages", user("weather and time?")}, {"tools", kTwoTools}, {"tool_choice", "required"},
                     {"parallel_tool_calls", false}});
  ASSERT_TRUE(one);
  json c1 = json::parse(one->body)["choices"][0];
  EXPECT_EQ(c1["finish_reason"], "tool_calls");
  ASSERT_EQ(c1["message"]["tool_calls"].size(), 1u) << one->body;
  EXPECT_EQ(c1["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST(ServerHttp, ForcedToolCallWithTwoCallsInOneTagIsTwoToolUseBlocksInMessages) {
  Running s;
  script_two_calls_in_one_tag(s.engine);
  auto post = [&](json body) {
    body["model"] = "m";
    body["max_tokens"] = 100;
    body["messages"] = user("weather and time?");
    body["tools"] = kTwoAnthropicTools;
    return s.client().Post("/v1/messages", body.dump(), "application/json");
  };
  auto r = post({{"tool_choice", {{"type", "any"}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["stop_reason"], "tool_use") << r->body;
  ASSERT_EQ(b["content"].size(), 2u) << r->body;
  EXPECT_EQ(b["content"][0]["type"], "tool_use");
  EXPECT_EQ(b["content"][0]["name"], "get_weather");
  EXPECT_EQ(b["content"][0]["input"], json({{"city", "Paris"}}));
  EXPECT_EQ(b["content"][1]["name"], "get_time");
  EXPECT_EQ(b["content"][1]["input"], json({{"tz", "CET"}}));

  auto st = post({{"tool_choice", {{"type", "any"}}}, {"stream", true}});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->body.find("\"type\":\"text\""), std::string::npos) << st->body;
  EXPECT_NE(st->body.find("\"name\":\"get_weather\""), std::string::npos) << st->body;
  EXPECT_NE(st->body.find("\"name\":\"get_time\""), std::string::npos) << st->body;
  EXPECT_NE(st->body.find("\"stop_reason\":\"tool_use\""), std::string::npos) << st->body;

  auto one = post({{"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}}});
  ASSERT_TRUE(one);
  json b1 = json::parse(one->body);
  EXPECT_EQ(b1["stop_reason"], "tool_use");
  ASSERT_EQ(b1["content"].size(), 1u) << one->body;
  EXPECT_EQ(b1["content"][0]["name"], "get_weather");
}

/// Sends `body` to `path` on a fresh raw connection; returns the socket.
int post_raw(int port, const std::string& path, const json& body) {
  int fd = connect_to(port);
  if (fd < 0) return fd;
  const std::string b = body.dump();
  const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(b.size()) + "\r\n\r\n" + b;
  if (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string read_until_close(int fd) {
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return got;
}

TEST(ServerHttp, ShutdownCutsWhatOutlivesTheGracePeriodWithAnErrorNeverANormalEnd) {
  Running s;
  s.engine.info_.n_ctx = 1 << 30;
  s.engine.endless_trigger = "forever";
  s.engine.token_delay_ms = 1;
  // A long stream in each format (the engine runs one, the other waits for it).
  int chat = post_raw(s.port, "/v1/chat/completions", {{"messages", user("forever")}, {"stream", true}});
  int msgs = post_raw(s.port, "/v1/messages",
                      {{"model", "m"}, {"max_tokens", 1 << 30}, {"messages", user("forever")}, {"stream", true}});
  ASSERT_GE(chat, 0);
  ASSERT_GE(msgs, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> notes;
  s.server->shutdown(std::chrono::milliseconds(300), [&](const std::string& l) { notes.push_back(l); });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 290) << "the grace period was given";
  EXPECT_LT(ms, 3000);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[1], "grace period over, cutting 2 running request(s)");

  const std::string c = read_until_close(chat);
  EXPECT_EQ(c.find("[DONE]"), std::string::npos) << c.substr(c.size() - 300);
  EXPECT_EQ(c.find("\"finish_reason\":\"stop\""), std::string::npos);
  EXPECT_NE(c.find("data: {\"error\":{\"code\":\"server_shutting_down\""), std::string::npos) << c.substr(c.size() - 300);
  const std::string m = read_until_close(msgs);
  EXPECT_EQ(m.find("message_stop"), std::string::npos) << m.substr(m.size() - 300);
  EXPECT_EQ(m.find("end_turn"), std::string::npos);
  EXPECT_NE(m.find("event: error\ndata: {\"error\":{\"message\":\"The server is shutting down"), std::string::npos)
      << m.substr(m.size() - 300);
  EXPECT_NE(m.find("\"type\":\"overloaded_error\""), std::string::npos);
  // Refused afterwards.
  EXPECT_LT(connect_to(s.port), 0);
}

TEST(ServerHttp, ShutdownLetsRunningRequestsFinishWithinTheGracePeriod) {
  Running s;
  s.engine.token_delay_ms = 30;  // 7 tokens: ~0.2 s
  json body;
  std::thread client([&] {
    auto r = s.chat({{"messages", user("hi")}});
    if (r) body = json::parse(r->body);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto t0 = std::chrono::steady_clock::now();
  s.server->shutdown(std::chrono::seconds(10));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  client.join();
  EXPECT_LT(ms, 5000) << "returned when the request was done, not at the end of the period";
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop") << body;
  EXPECT_EQ(body["choices"][0]["message"]["content"], kText);
}
