#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace swz::server {
namespace {

double seconds(TokenClock::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// A sample value: integers as integers, else the shortest round-trip form; +Inf as Prometheus spells it.
std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    // Prefer the shortest representation that round-trips.
    for (int prec = 1; prec <= 17; ++prec) {
      char tmp[32];
      std::snprintf(tmp, sizeof tmp, "%.*g", prec, v);
      if (std::strtod(tmp, nullptr) == v) {
        std::snprintf(buf, sizeof buf, "%s", tmp);
        break;
      }
    }
  }
  return buf;
}
std::string num(uint64_t v) { return std::to_string(v); }

/// A label value escaped as the format requires (backslash, double quote, line feed).
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels, const std::string& value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += ' ';
  out += value;
  out += '\n';
}

void histogram(std::string& out, const std::string& name, const std::string& labels, const Histogram& h) {
  const std::string sep = labels.empty() ? "" : labels + ",";
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cum += h.counts()[i];
    sample(out, name + "_bucket", sep + "le=\"" + num(h.bounds()[i]) + "\"", num(cum));
  }
  sample(out, name + "_bucket", sep + "le=\"+Inf\"", num(h.count()));
  sample(out, name + "_sum", labels, num(h.sum()));
  sample(out, name + "_count", labels, num(h.count()));
}

/// A histogram given as bounds and per-bucket counts (the last one +Inf), as the engine's
/// SchedulerStats carry them.
void histogram(std::string& out, const std::string& name, const std::vector<double>& bounds,
               const std::vector<uint64_t>& counts, double sum) {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds.size() && i < counts.size(); ++i) {
    cum += counts[i];
    sample(out, name + "_bucket", "le=\"" + num(bounds[i]) + "\"", num(cum));
  }
  if (counts.size() > bounds.size()) cum += counts.back();
  sample(out, name + "_bucket", "le=\"+Inf\"", num(cum));
  sample(out, name + "_sum", "", num(sum));
  sample(out, name + "_count", "", num(cum));
}

}  // namespace

void TokenClock::on_token() {
  const auto now = Clock::now();
  if (!first_) first_ = now;
  else itl_s_.push_back(seconds(now - *last_));
  last_ = now;
}

engine::TokenCallback timed(TokenClock& clock, engine::TokenCallback on_token) {
  clock.begin_run();
  return [&clock, on_token = std::move(on_token)](const engine::TokenEvent& ev) {
    clock.on_token();
    clock.record_token(ev.token);
    return on_token(ev);
  };
}

engine::ChoiceTokenCallback timed_choices(TokenClock& clock, int n, engine::ChoiceTokenCallback on_token) {
  const size_t first = clock.begin_runs(n);
  return [&clock, first, on_token = std::move(on_token)](int index, const engine::TokenEvent& ev) {
    clock.on_token();
    clock.record_token_in(first + static_cast<size_t>(index), ev.token);
    return on_token(index, ev);
  };
}

std::optional<double> TokenClock::ttft_s() const {
  if (!first_) return std::nullopt;
  return seconds(*first_ - start_);
}

double TokenClock::elapsed_s() const { return seconds(Clock::now() - start_); }

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double v) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());  // le: v <= bound
  ++counts_[i];
  sum_ += v;
  ++count_;
}

const std::vector<double>& Metrics::ttft_buckets() {
  // vLLM's TTFT buckets, extended down to 1 ms for cached prefixes.
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                        1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
  return b;
}
const std::vector<double>& Metrics::itl_buckets() {
  static const std::vector<double> b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                        0.075,  0.1,   0.15,   0.2,   0.3,  0.4,   0.5,  0.75,  1.0,  2.5};
  return b;
}
const std::vector<double>& Metrics::duration_buckets() {
  static const std::vector<double> b = {0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 300.0, 600.0};
  return b;
}

void Metrics::count_response(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{endpoint, status}];
}

void Metrics::observe_generation(const std::string& endpoint, const std::string& model, int prompt_tokens,
                                 int cached_tokens, int output_tokens, double cost_usd, const TokenClock* timing) {
  std::lock_guard<std::mutex> lock(mu_);
  PerEndpoint& e = per_endpoint_[endpoint];
  e.prompt += static_cast<uint64_t>(std::max(prompt_tokens, 0));
  e.cached += static_cast<uint64_t>(std::max(cached_tokens, 0));
  e.output += static_cast<uint64_t>(std::max(output_tokens, 0));
  cost_usd_[model] += cost_usd;
  if (timing) {
    if (auto t = timing->ttft_s()) e.ttft.observe(*t);
    for (double d : timing->itl_s()) e.itl.observe(d);
    e.duration.observe(timing->elapsed_s());
  }
}

std::string Metrics::render(const engine::CacheStats& cache, const engine::SpecStats& spec,
                            const engine::SchedulerStats& sched) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  family(out, "swizzle_requests_total", "counter", "HTTP responses by endpoint and status code.");
  for (const auto& [k, n] : responses_)
    sample(out, "swizzle_requests_total", "endpoint=\"" + esc(k.first) + "\",status=\"" + std::to_string(k.second) + "\"", num(n));

  auto per_endpoint_counter = [&](const char* name, const char* help, uint64_t PerEndpoint::*field) {
    family(out, name, "counter", help);
    for (const auto& [ep, e] : per_endpoint_) sample(out, name, "endpoint=\"" + esc(ep) + "\"", num(e.*field));
  };
  per_endpoint_counter("swizzle_prompt_tokens_total", "Prompt tokens of finished requests (cached and uncached).",
                       &PerEndpoint::prompt);
  per_endpoint_counter("swizzle_prompt_cached_tokens_total",
                       "Prompt tokens of finished requests served from the prefix cache (what usage reports as cached).",
                       &PerEndpoint::cached);
  per_endpoint_counter("swizzle_generation_tokens_total", "Generated tokens of finished requests.", &PerEndpoint::output);

  family(out, "swizzle_cost_usd_total", "counter", "Cost of finished requests in USD, priced by the prices file.");
  for (const auto& [model, usd] : cost_usd_) sample(out, "swizzle_cost_usd_total", "model=\"" + esc(model) + "\"", num(usd));

  family(out, "swizzle_prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the engine's prefix cache.");
  sample(out, "swizzle_prefix_cache_hit_tokens_total", "", num(cache.hit_tokens));
  family(out, "swizzle_prefix_cache_miss_tokens_total", "counter", "Prompt tokens the engine had to prefill.");
  sample(out, "swizzle_prefix_cache_miss_tokens_total", "", num(cache.miss_tokens));
  family(out, "swizzle_prefix_cache_hit_ratio", "gauge", "hit / (hit + miss) prompt tokens since start (0 before any).");
  const uint64_t looked_up = cache.hit_tokens + cache.miss_tokens;
  sample(out, "swizzle_prefix_cache_hit_ratio", "",
         num(looked_up ? static_cast<double>(cache.hit_tokens) / static_cast<double>(looked_up) : 0.0));
  family(out, "swizzle_prefix_cache_blocks", "gauge", "Cached KV blocks per tier (device, host RAM, disk).");
  sample(out, "swizzle_prefix_cache_blocks", "tier=\"device\"", num(cache.blocks_device));
  sample(out, "swizzle_prefix_cache_blocks", "tier=\"host\"", num(cache.blocks_host));
  sample(out, "swizzle_prefix_cache_blocks", "tier=\"disk\"", num(cache.blocks_disk));
  family(out, "swizzle_prefix_cache_evictions_total", "counter", "Cached blocks dropped from the last tier.");
  sample(out, "swizzle_prefix_cache_evictions_total", "", num(cache.evictions));
  family(out, "swizzle_kv_pages", "gauge",
         "KV page pool (64 tokens a page): all pages, and free ones (in no block table and holding no cached block).");
  sample(out, "swizzle_kv_pages", "state=\"total\"", num(cache.pages_total));
  sample(out, "swizzle_kv_pages", "state=\"free\"", num(cache.pages_free));
  family(out, "swizzle_approx_atoms", "gauge",
         "Code atoms the approx cache mode indexes for reuse at other positions (their K/V stays in the prefix cache's "
         "blocks; --approx-atoms bounds it).");
  sample(out, "swizzle_approx_atoms", "", num(cache.approx_atoms));
  family(out, "swizzle_approx_atom_hits_total", "counter", "Atoms approx requests found saved, their blocks cached, at admission.");
  sample(out, "swizzle_approx_atom_hits_total", "", num(cache.approx_atom_hits));
  family(out, "swizzle_approx_atom_stale_total", "counter",
         "Atoms approx requests found saved whose blocks the prefix cache did not hold (not reused, forgotten).");
  sample(out, "swizzle_approx_atom_stale_total", "", num(cache.approx_atom_stale));

  // The scheduler (engine/scheduler.h).
  auto gauge = [&](const char* name, const char* help, double v) {
    family(out, name, "gauge", help);
    sample(out, name, "", num(v));
  };
  gauge("swizzle_queue_length", "Requests waiting for a running slot or KV pages.", sched.queued);
  gauge("swizzle_running_sequences", "Sequences in the running batch.", sched.running);
  gauge("swizzle_parallel_slots", "Running sequences at most (--parallel).", sched.parallel);
  family(out, "swizzle_requests_rejected_total", "counter", "Requests refused with 429 because the queue was full (--max-queue).");
  sample(out, "swizzle_requests_rejected_total", "", num(sched.rejected));
  family(out, "swizzle_steps_total", "counter", "Scheduler steps (forward passes).");
  sample(out, "swizzle_steps_total", "", num(sched.steps));
  family(out, "swizzle_prefill_rows_total", "counter",
         "Prompt rows (tokens) evaluated by forward passes; a request's n choices share one prefill.");
  sample(out, "swizzle_prefill_rows_total", "", num(sched.prefill_rows));
  family(out, "swizzle_approx_probe_rows_total", "counter",
         "Prompt rows the approx cache mode's deviation probes evaluated (their first layers only).");
  sample(out, "swizzle_approx_probe_rows_total", "", num(sched.probe_rows));
  family(out, "swizzle_step_seconds", "histogram", "Seconds of one scheduler step's forward pass.");
  histogram(out, "swizzle_step_seconds", sched.step_seconds_bounds, sched.step_seconds_counts, sched.step_seconds_sum);
  family(out, "swizzle_batch_sequences", "histogram", "Sequences in one step (batch size).");
  histogram(out, "swizzle_batch_sequences", sched.batch_seqs_bounds, sched.batch_seqs_counts,
            static_cast<double>(sched.step_seqs));
  family(out, "swizzle_batch_rows", "histogram", "Rows (tokens) in one step: decode and draft tokens plus prompt chunks.");
  histogram(out, "swizzle_batch_rows", sched.batch_rows_bounds, sched.batch_rows_counts, static_cast<double>(sched.step_rows));

  // Speculative decoding (engine/speculative.h): acceptance rate = accepted / drafted.
  auto engine_counter = [&](const char* name, const char* help, uint64_t v) {
    family(out, name, "counter", help);
    sample(out, name, "", num(v));
  };
  engine_counter("swizzle_spec_drafted_tokens_total", "Draft tokens proposed by prompt lookup and verified.",
                 spec.drafted_tokens);
  engine_counter("swizzle_spec_accepted_tokens_total", "Draft tokens accepted by verification.", spec.accepted_tokens);
  family(out, "swizzle_spec_acceptance_ratio", "gauge", "accepted / drafted tokens since start (0 before any draft).");
  sample(out, "swizzle_spec_acceptance_ratio", "",
         num(spec.drafted_tokens ? static_cast<double>(spec.accepted_tokens) / static_cast<double>(spec.drafted_tokens) : 0.0));
  engine_counter("swizzle_decode_passes_total", "Decode forward passes (plain and verifying).", spec.decode_passes);
  engine_counter("swizzle_decode_tokens_total", "Tokens emitted by decode.", spec.decode_tokens);

  auto per_endpoint_histogram = [&](const char* name, const char* help, Histogram PerEndpoint::*field) {
    family(out, name, "histogram", help);
    for (const auto& [ep, e] : per_endpoint_) histogram(out, name, "endpoint=\"" + esc(ep) + "\"", e.*field);
  };
  per_endpoint_histogram("swizzle_time_to_first_token_seconds",
                         "Seconds from request arrival to the engine's first generated token.", &PerEndpoint::ttft);
  per_endpoint_histogram("swizzle_inter_token_latency_seconds", "Seconds between consecutive generated tokens.",
                         &PerEndpoint::itl);
  per_endpoint_histogram("swizzle_request_duration_seconds",
                         "Seconds from request arrival to the end of generation, for requests that ran the engine.",
                         &PerEndpoint::duration);
  return out;
}

std::string endpoint_label(const std::string& path) {
  if (path.rfind("/security/v1/", 0) == 0) return endpoint_label("/v1/security/" + path.substr(13));  // one label per route
  static const char* const kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages",
                                        "/v1/messages/count_tokens", "/v1/models", "/v1/usage",
                                        "/health", "/metrics", "/tokenize", "/detokenize",
                                        "/v1/security/chat/completions", "/v1/security/completions",
                                        "/v1/security/messages", "/v1/security/messages/count_tokens"};
  for (const char* r : kRoutes)
    if (path == r) return r;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

}  // namespace swz::server
