// Server metrics in the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/), served at GET /metrics:
// requests by endpoint and status, prompt / cached / generated tokens, the engine's
// prefix-cache counters (Engine::cache_stats()), and histograms of time to first token
// (TTFT), inter-token latency (ITL) and request duration. Metric names and meanings:
// docs/server.md, "GET /metrics".
#pragma once

#include "engine/engine.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace swz::server {

/// Timestamps of one request's generated tokens, for TTFT and ITL. Not thread-safe: one
/// per request, fed from the engine's token callback.
class TokenClock {
 public:
  using Clock = std::chrono::steady_clock;
  /// `start`: when the request arrived (TTFT is measured from there).
  explicit TokenClock(Clock::time_point start = Clock::now()) : start_(start) {}
  /// Call once per generated token, as the engine hands it over.
  void on_token();
  /// A new engine run (one choice) begins: tokens recorded from now on are its own.
  /// timed() calls it when it wraps a run's callback.
  void begin_run() { runs_.emplace_back(); }
  /// Records a generated token id in the current run (timed() calls it per token).
  void record_token(int32_t id) {
    if (runs_.empty()) runs_.emplace_back();
    runs_.back().push_back(id);
  }
  /// `n` runs (the choices of one engine run) begin at once; returns the first one's
  /// index for record_token_in (timed_choices() calls it).
  size_t begin_runs(int n) {
    const size_t first = runs_.size();
    runs_.resize(first + static_cast<size_t>(n));
    return first;
  }
  /// Records a generated token id in run `run` (an index from begin_runs).
  void record_token_in(size_t run, int32_t id) { runs_.at(run).push_back(id); }
  /// The generated token ids per run (choice), in the order the runs began: what an
  /// execution receipt hashes (receipt.h).
  const std::vector<std::vector<int32_t>>& token_runs() const { return runs_; }
  /// Seconds from start to the first token; nullopt when no token was generated.
  std::optional<double> ttft_s() const;
  /// Seconds between consecutive tokens (size: tokens - 1).
  const std::vector<double>& itl_s() const { return itl_s_; }
  /// Seconds since start.
  double elapsed_s() const;
  Clock::time_point start() const { return start_; }

 private:
  Clock::time_point start_;
  std::optional<Clock::time_point> first_, last_;
  std::vector<double> itl_s_;
  std::vector<std::vector<int32_t>> runs_;
};

/// `on_token` with every token first stamped (and its id recorded) on `clock`, which
/// begins a new run (TokenClock::begin_run): how every endpoint hands its token
/// callback to Engine::run, so TTFT and ITL are measured at the same point for all of them
/// (route_hooks.h). `clock` must outlive the run.
engine::TokenCallback timed(TokenClock& clock, engine::TokenCallback on_token);
/// timed() for Engine::run_choices: `n` runs begin (TokenClock::begin_runs), and choice
/// i's tokens are stamped on `clock` and recorded in the i-th of them.
engine::ChoiceTokenCallback timed_choices(TokenClock& clock, int n, engine::ChoiceTokenCallback on_token);

/// A cumulative histogram with fixed upper bounds (seconds), as Prometheus defines it.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  /// Per-bucket counts (not cumulative); the last is the +Inf overflow.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

/// Everything /metrics reports that the server itself counts. Thread-safe.
class Metrics {
 public:
  /// A finished HTTP exchange (every response, any status). `endpoint` is a route label
  /// (see endpoint_label), never a raw path, to bound the label set.
  void count_response(const std::string& endpoint, int status);
  /// A request that ran the engine: its token counts, cost (USD) and timing.
  void observe_generation(const std::string& endpoint, const std::string& model, int prompt_tokens,
                          int cached_tokens, int output_tokens, double cost_usd, const TokenClock* timing);
  /// The exposition text (Content-Type: text/plain; version=0.0.4), with the engine's
  /// prefix-cache counters from `cache`.
  /// With `sched`, the scheduler's queue, running sequences, step time and batch size.
  std::string render(const engine::CacheStats& cache, const engine::SpecStats& spec = {},
                     const engine::SchedulerStats& sched = {}) const;

  /// Upper bounds (seconds) of the TTFT, ITL and duration histograms.
  static const std::vector<double>& ttft_buckets();
  static const std::vector<double>& itl_buckets();
  static const std::vector<double>& duration_buckets();

 private:
  struct PerEndpoint {
    uint64_t prompt = 0, cached = 0, output = 0;
    Histogram ttft{ttft_buckets()}, itl{itl_buckets()}, duration{duration_buckets()};
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  std::map<std::string, PerEndpoint> per_endpoint_;
  std::map<std::string, double> cost_usd_;  // by model
};

/// The route a path belongs to, as a metrics label: the known routes as themselves,
/// "/v1/models/{id}" for model lookups, "other" for anything else.
std::string endpoint_label(const std::string& path);

}  // namespace swz::server
