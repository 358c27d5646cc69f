// The ledger, the cost header, GET /v1/usage and GET /metrics over a real socket with the
// scripted FakeEngine: several keys, exact costs from the prices, who sees which rows,
// streaming (prompt cost in the header, the whole in the ledger), responses counted by status.
#include "accounting.h"
#include "fake_engine.h"
#include "running_server.h"
#include "server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <sstream>
#include <thread>

namespace {

using nlohmann::json;
using namespace swz::server;
using swz::test::FakeEngine;

struct Running : swz::test::RunningServer {
  explicit Running(ServerOptions opts) {
    engine.pieces = {"a", "b", "c", "d"};
    start(std::move(opts));
  }
  httplib::Result get(const std::string& path, const std::string& key = "") const {
    httplib::Client c("127.0.0.1", port);
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    return c.Get(path.c_str(), h);
  }
  httplib::Result chat(const std::string& content, const std::string& key, bool stream = false,
                       const char* header = "Authorization") const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    json body = {{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"stream", stream}};
    httplib::Headers h;
    if (!key.empty()) h.emplace(header, std::string(header) == "Authorization" ? "Bearer " + key : key);
    return c.Post("/v1/chat/completions", h, body.dump(), "application/json");
  }
  /// Polls /metrics until `series` has `want` (responses are counted after their last byte).
  double metric(const std::string& series, double want) const {
    double v = -1;
    for (int i = 0; i < 100; ++i) {
      auto r = get("/metrics");
      std::istringstream in(r ? r->body : "");
      v = -1;
      for (std::string line; std::getline(in, line);)
        if (line.rfind(series + " ", 0) == 0) v = std::stod(line.substr(series.size() + 1));
      if (v == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return v;
  }

};

ServerOptions priced_options() {
  ServerOptions o;
  o.api_keys = {{"alice", "sk-alice"}, {"bob", "sk-bob"}};
  o.admin_key = "sk-root";
  // fake-model: input 2, cached 0.5, output 8 USD per million tokens.
  o.prices = PriceTable::parse(R"({"models": {"fake-model": {"input": 2, "cached_input": 0.5, "output": 8}}})", "test");
  return o;
}

TEST(Accounting, CostHeaderAndLedgerAreExactPerKey) {
  Running s(priced_options());
  s.engine.cached_tokens = 4;
  // "user:hi\n" + 2 = 10 prompt tokens: 6 uncached, 4 cached; 4 output tokens.
  // 6*2e-6 + 4*0.5e-6 + 4*8e-6 = 12e-6 + 2e-6 + 32e-6 = 46e-6 USD.
  auto r1 = s.chat("hi", "sk-alice");
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  EXPECT_EQ(r1->get_header_value(kCostHeader), "0.000046");
  auto r2 = s.chat("hi", "sk-alice");
  ASSERT_TRUE(r2);
  auto r3 = s.chat("hello", "sk-bob", false, "x-api-key");  // Anthropic's header works too
  ASSERT_TRUE(r3);
  ASSERT_EQ(r3->status, 200) << r3->body;
  // 13 prompt tokens: 9*2 + 4*0.5 + 4*8 = 52 -> 52e-6 USD.
  EXPECT_EQ(r3->get_header_value(kCostHeader), "0.000052");

  json alice = json::parse(s.get("/v1/usage", "sk-alice")->body);
  EXPECT_EQ(alice["key_id"], "alice");
  EXPECT_EQ(alice["scope"], "own");
  ASSERT_EQ(alice["data"].size(), 1u);
  EXPECT_EQ(alice["data"][0]["model"], "fake-model");
  EXPECT_EQ(alice["data"][0]["requests"], 2);
  EXPECT_EQ(alice["data"][0]["input_tokens"], 12);
  EXPECT_EQ(alice["data"][0]["cached_input_tokens"], 8);
  EXPECT_EQ(alice["data"][0]["output_tokens"], 8);
  EXPECT_EQ(alice["data"][0]["cost_usd_exact"], "0.000092");
  EXPECT_DOUBLE_EQ(alice["data"][0]["cost_usd"].get<double>(), 0.000092);

  json bob = json::parse(s.get("/v1/usage", "sk-bob")->body);
  ASSERT_EQ(bob["data"].size(), 1u);
  EXPECT_EQ(bob["data"][0]["key_id"], "bob");
  EXPECT_EQ(bob["total"]["cost_usd_exact"], "0.000052");

  json all = json::parse(s.get("/v1/usage", "sk-root")->body);
  EXPECT_EQ(all["scope"], "all");
  ASSERT_EQ(all["data"].size(), 2u);
  EXPECT_EQ(all["total"]["requests"], 3);
  EXPECT_EQ(all["total"]["cost_usd_exact"], "0.000144");

  EXPECT_EQ(s.get("/v1/usage")->status, 401);  // keys configured: a key is needed
  EXPECT_EQ(s.get("/v1/usage", "sk-mallory")->status, 401);
}

TEST(Accounting, StreamHeaderHasThePromptCostAndTheLedgerTheWhole) {
  Running s(priced_options());
  s.engine.cached_tokens = 4;
  auto r = s.chat("hi", "sk-bob", true);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value(kCostHeader), "0.000014");  // 6*2e-6 + 4*0.5e-6, before any output
  json bob = json::parse(s.get("/v1/usage", "sk-bob")->body);
  ASSERT_EQ(bob["data"].size(), 1u) << "recorded before [DONE] reached the client";
  EXPECT_EQ(bob["data"][0]["output_tokens"], 4);
  EXPECT_EQ(bob["data"][0]["cost_usd_exact"], "0.000046");
}

TEST(Accounting, OpenServerAttributesToTheKeyFingerprintOrAnonymous) {
  ServerOptions o;
  o.admin_key = "sk-root";
  Running s(o);
  ASSERT_EQ(s.chat("hi", "")->status, 200);
  ASSERT_EQ(s.chat("hi", "client-chosen")->status, 200);
  json anon = json::parse(s.get("/v1/usage")->body);
  ASSERT_EQ(anon["data"].size(), 1u);
  EXPECT_EQ(anon["data"][0]["key_id"], "anonymous");
  EXPECT_EQ(anon["data"][0]["cost_usd_exact"], "0.0");  // no prices: free
  json mine = json::parse(s.get("/v1/usage", "client-chosen")->body);
  ASSERT_EQ(mine["data"].size(), 1u);
  EXPECT_EQ(mine["data"][0]["key_id"], key_fingerprint("client-chosen"));
  EXPECT_EQ(json::parse(s.get("/v1/usage", "sk-root")->body)["data"].size(), 2u);
}

TEST(Accounting, MetricsCountResponsesTokensAndEngineCacheStats) {
  Running s(priced_options());
  s.engine.cached_tokens = 4;
  s.engine.stats.hit_tokens = 12;
  s.engine.stats.miss_tokens = 36;
  s.engine.stats.blocks_host = 3;
  ASSERT_EQ(s.chat("hi", "sk-alice")->status, 200);
  ASSERT_EQ(s.chat("hi", "sk-bob", true)->status, 200);
  ASSERT_EQ(s.chat("hi", "wrong")->status, 401);
  ASSERT_EQ(s.get("/nope", "sk-alice")->status, 404);
  ASSERT_EQ(s.get("/nope")->status, 401);  // with keys configured every path but the probes needs one
  ASSERT_EQ(s.get("/metrics")->status, 200);
  const std::string chat = R"(endpoint="/v1/chat/completions")";
  EXPECT_EQ(s.metric("swizzle_requests_total{" + chat + ",status=\"200\"}", 2), 2);
  EXPECT_EQ(s.metric("swizzle_requests_total{" + chat + ",status=\"401\"}", 1), 1);
  EXPECT_EQ(s.metric(R"(swizzle_requests_total{endpoint="other",status="404"})", 1), 1);
  EXPECT_EQ(s.metric("swizzle_prompt_tokens_total{" + chat + "}", 20), 20);
  EXPECT_EQ(s.metric("swizzle_prompt_cached_tokens_total{" + chat + "}", 8), 8);
  EXPECT_EQ(s.metric("swizzle_generation_tokens_total{" + chat + "}", 8), 8);
  EXPECT_EQ(s.metric("swizzle_time_to_first_token_seconds_count{" + chat + "}", 2), 2);
  EXPECT_EQ(s.metric("swizzle_inter_token_latency_seconds_count{" + chat + "}", 6), 6);  // 3 gaps per 4 tokens
  EXPECT_EQ(s.metric("swizzle_prefix_cache_hit_ratio", 0.25), 0.25);
  EXPECT_EQ(s.metric(R"(swizzle_prefix_cache_blocks{tier="host"})", 3), 3);
  auto m = s.get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace
