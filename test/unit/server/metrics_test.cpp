// /metrics building blocks: histogram buckets (Prometheus "le" semantics), the token
// clock, route labels, and the exposition text (format 0.0.4) with exact values.
#include "metrics.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

namespace {

using namespace swz::server;

/// The value of the sample line that starts with `series` + " ", or -1.
double value_of(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

TEST(Histogram, BucketsAreUpperInclusive) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le="0.1" includes 0.1
  h.observe(0.5);
  h.observe(7);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{2, 1, 1}));
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 7.65);
}

TEST(TokenClock, TtftAndItlFromTokenTimes) {
  TokenClock c(TokenClock::Clock::now() - std::chrono::milliseconds(50));
  EXPECT_FALSE(c.ttft_s());
  c.on_token();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  c.on_token();
  c.on_token();
  ASSERT_TRUE(c.ttft_s());
  EXPECT_GE(*c.ttft_s(), 0.05);
  ASSERT_EQ(c.itl_s().size(), 2u);
  EXPECT_GE(c.itl_s()[0], 0.005);
  EXPECT_GE(c.elapsed_s(), *c.ttft_s());
}

TEST(Metrics, EndpointLabelsAreBounded) {
  EXPECT_EQ(endpoint_label("/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(endpoint_label("/v1/messages"), "/v1/messages");
  EXPECT_EQ(endpoint_label("/v1/models/abc"), "/v1/models/{id}");
  EXPECT_EQ(endpoint_label("/v1/whatever/123"), "other");
  EXPECT_EQ(endpoint_label("/metrics"), "/metrics");
}

TEST(Metrics, RendersCountersGaugesAndHistograms) {
  Metrics m;
  m.count_response("/v1/chat/completions", 200);
  m.count_response("/v1/chat/completions", 200);
  m.count_response("/v1/chat/completions", 400);
  m.count_response("other", 404);
  TokenClock clock(TokenClock::Clock::now());
  clock.on_token();
  clock.on_token();
  m.observe_generation("/v1/chat/completions", "model \"q\"", 100, 40, 2, 0.25, &clock);
  m.observe_generation("/v1/chat/completions", "model \"q\"", 10, 0, 1, 0.5, nullptr);
  swz::engine::CacheStats cs;
  cs.hit_tokens = 30;
  cs.miss_tokens = 90;
  cs.blocks_device = 5;
  cs.blocks_host = 2;
  cs.evictions = 7;
  std::string t = m.render(cs);

  EXPECT_EQ(value_of(t, R"(swizzle_requests_total{endpoint="/v1/chat/completions",status="200"})"), 2);
  EXPECT_EQ(value_of(t, R"(swizzle_requests_total{endpoint="/v1/chat/completions",status="400"})"), 1);
  EXPECT_EQ(value_of(t, R"(swizzle_requests_total{endpoint="other",status="404"})"), 1);
  EXPECT_EQ(value_of(t, R"(swizzle_prompt_tokens_total{endpoint="/v1/chat/completions"})"), 110);
  EXPECT_EQ(value_of(t, R"(swizzle_prompt_cached_tokens_total{endpoint="/v1/chat/completions"})"), 40);
  EXPECT_EQ(value_of(t, R"(swizzle_generation_tokens_total{endpoint="/v1/chat/completions"})"), 3);
  EXPECT_EQ(value_of(t, R"(swizzle_cost_usd_total{model="model \"q\""})"), 0.75);  // label value escaped
  EXPECT_EQ(value_of(t, "swizzle_prefix_cache_hit_tokens_total"), 30);
  EXPECT_EQ(value_of(t, "swizzle_prefix_cache_miss_tokens_total"), 90);
  EXPECT_EQ(value_of(t, "swizzle_prefix_cache_hit_ratio"), 0.25);
  EXPECT_EQ(value_of(t, R"(swizzle_prefix_cache_blocks{tier="device"})"), 5);
  EXPECT_EQ(value_of(t, R"(swizzle_prefix_cache_blocks{tier="host"})"), 2);
  EXPECT_EQ(value_of(t, R"(swizzle_prefix_cache_blocks{tier="disk"})"), 0);
  EXPECT_EQ(value_of(t, "swizzle_prefix_cache_evictions_total"), 7);
  // One timed request: one TTFT, one ITL (2 tokens), one duration; cumulative buckets.
  EXPECT_EQ(value_of(t, R"(swizzle_time_to_first_token_seconds_count{endpoint="/v1/chat/completions"})"), 1);
  EXPECT_EQ(value_of(t, R"(swizzle_time_to_first_token_seconds_bucket{endpoint="/v1/chat/completions",le="+Inf"})"), 1);
  EXPECT_EQ(value_of(t, R"(swizzle_time_to_first_token_seconds_bucket{endpoint="/v1/chat/completions",le="640"})"), 1);
  EXPECT_EQ(value_of(t, R"(swizzle_inter_token_latency_seconds_count{endpoint="/v1/chat/completions"})"), 1);
  EXPECT_EQ(value_of(t, R"(swizzle_request_duration_seconds_count{endpoint="/v1/chat/completions"})"), 1);
  EXPECT_NE(t.find("# TYPE swizzle_time_to_first_token_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE swizzle_requests_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE swizzle_prefix_cache_hit_ratio gauge\n"), std::string::npos);
  EXPECT_EQ(t.back(), '\n');
}

TEST(Metrics, SpeculativeDecodingCountersAndAcceptanceRatio) {
  Metrics m;
  swz::engine::SpecStats sp;
  sp.drafted_tokens = 40;
  sp.accepted_tokens = 30;
  sp.decode_passes = 12;
  sp.decode_tokens = 42;
  const std::string t = m.render({}, sp);
  EXPECT_EQ(value_of(t, "swizzle_spec_drafted_tokens_total"), 40);
  EXPECT_EQ(value_of(t, "swizzle_spec_accepted_tokens_total"), 30);
  EXPECT_EQ(value_of(t, "swizzle_spec_acceptance_ratio"), 0.75);
  EXPECT_EQ(value_of(t, "swizzle_decode_passes_total"), 12);
  EXPECT_EQ(value_of(t, "swizzle_decode_tokens_total"), 42);
  EXPECT_EQ(value_of(m.render({}), "swizzle_spec_acceptance_ratio"), 0);
}

TEST(Metrics, HitRatioIsZeroBeforeAnyLookup) {
  Metrics m;
  EXPECT_EQ(value_of(m.render({}), "swizzle_prefix_cache_hit_ratio"), 0);
}

}  // namespace
