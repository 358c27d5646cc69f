#include "openai_completions.h"
#include "structured_output.h"

#include "accounting.h"
#include "json_depth.h"

#include "openai_chat.h"
#include "openai_logprobs.h"
#include "server.h"
#include "text_stream.h"
#include "tool_calls.h"

#include "http_server.h"
#include <nlohmann/json.hpp>

#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>

namespace swz::server {

using nlohmann::json;

namespace {

/// A token id of a token-id prompt: an integer >= 0 (the vocabulary bound is checked in prepare()).
int32_t token_id(const json& v, const std::string& param) {
  if (!v.is_number_integer())
    throw bad_param(param, "Invalid type for '" + param + "': expected a token id (an integer), but got " + json_type_name(v) + ".");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX) : v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    throw bad_param(param, "Invalid '" + param + "': token id " + v.dump() + " is outside the vocabulary.");
  return static_cast<int32_t>(v.get<int64_t>());
}

CompletionsPrompt token_prompt(const json& ids, const std::string& param) {
  if (ids.empty()) throw bad_param(param, "Invalid '" + param + "': a token-id prompt must not be empty.");
  CompletionsPrompt p;
  p.is_tokens = true;
  for (size_t k = 0; k < ids.size(); ++k) p.tokens.push_back(token_id(ids[k], param + "[" + std::to_string(k) + "]"));
  return p;
}

}  // namespace

CompletionsRequest parse_completions_request(std::string_view body_text) {
  const json body = parse_request_json(body_text, kNotJsonOpenAI);
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.");
  CompletionsRequest r;
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw bad_param("prompt", "Missing required parameter: 'prompt'.");
  if (it->is_string()) {
    r.prompts.push_back({it->get<std::string>(), {}, false});
  } else if (it->is_array() && !it->empty()) {
    if ((*it)[0].is_number()) {  // one prompt of token ids
      r.prompts.push_back(token_prompt(*it, "prompt"));
    } else {
      for (size_t i = 0; i < it->size(); ++i) {
        const json& p = (*it)[i];
        const std::string pp = "prompt[" + std::to_string(i) + "]";
        if (p.is_array()) {
          r.prompts.push_back(token_prompt(p, pp));
        } else if (p.is_string()) {
          r.prompts.push_back({p.get<std::string>(), {}, false});
        } else {
          throw bad_param(pp, "Invalid type for '" + pp + "': expected a string or an array of token ids, but got " +
                                  json_type_name(p) + ".");
        }
      }
    }
  } else {
    throw bad_param("prompt", "Invalid 'prompt': expected a string, an array of strings, an array of token ids or an "
                              "array of arrays of token ids (non-empty).");
  }
  for (const auto& p : r.prompts)
    if (!p.is_tokens && p.text.empty()) throw bad_param("prompt", "Invalid 'prompt': prompts must not be empty.");
  if (auto e = body.find("echo"); e != body.end() && !e->is_null()) {
    if (!e->is_boolean()) throw bad_param("echo", "Invalid type for 'echo': expected a boolean.");
    r.echo = e->get<bool>();
  }
  if (auto lp = body.find("logprobs"); lp != body.end() && !lp->is_null()) {
    if (!lp->is_number_integer())
      throw bad_param("logprobs", "Invalid type for 'logprobs': expected an integer, but got " + json_type_name(*lp) + ".");
    const int64_t k = lp->is_number_unsigned() && lp->get<uint64_t>() > INT32_MAX ? INT32_MAX : lp->get<int64_t>();
    if (k < 0 || k > kMaxLegacyLogprobs)
      throw bad_param("logprobs", "Invalid 'logprobs': " + std::to_string(k) + " (expected an integer in [0, " +
                                      std::to_string(kMaxLegacyLogprobs) + "]).");
    r.logprobs = static_cast<int>(k);
  }
  if (auto s = body.find("suffix"); s != body.end() && !s->is_null())
    throw bad_param("suffix", "'suffix' (insertion) is not supported by this server.");
  if (auto b = body.find("best_of"); b != body.end() && !b->is_null() && !(b->is_number_integer() && b->get<int64_t>() == 1))
    throw bad_param("best_of", "'best_of' other than 1 is not supported.");
  // The sampling fields are the chat endpoint's: validate them with its parser.
  json chat = body;
  for (const char* k : {"prompt", "echo", "logprobs", "top_logprobs", "suffix", "best_of", "response_format"}) chat.erase(k);
  chat["messages"] = json::array({{{"role", "user"}, {"content", "x"}}});
  ChatRequest c = parse_chat_request(chat.dump());
  if (c.continue_final_message || !c.tools.empty()) throw bad_param("tools", "'tools' are not supported on /v1/completions.");
  if (c.max_tokens) r.max_tokens = *c.max_tokens;
  r.sampling = c.sampling;
  r.stop = c.stop;
  r.stream = c.stream;
  r.include_usage = c.include_usage;
  r.n = c.n;
  r.speculative = c.speculative;
  r.ignore_eos = c.ignore_eos;
  r.output_chosen = json_field(body, "response_format") != nullptr;
  if (r.output_chosen)  // key order kept for the schema's properties
    r.grammar = openai_response_format(nlohmann::ordered_json::parse(body_text)["response_format"]);
  return r;
}

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

/// One prompt of the request and its req.n choices (GenerateRequest::n): choice j of
/// prompt i is the response's choice i * n + j.
struct Prompt {
  engine::GenerateRequest gen;
  std::string prompt;   ///< the prompt's text (echo)
};

struct Job {
  CompletionsRequest req;
  std::vector<Prompt> prompts;
  std::string id;
  int64_t created = 0;
  std::string model;
  TokenClock::Clock::time_point received = TokenClock::Clock::now();  ///< when prepare() began (TTFT origin)
};

/// `default_format`: the grammar of a request without `response_format`
/// (default_output_format(path), structured_output.h); null: text.
std::shared_ptr<Job> prepare(engine::Engine& engine, std::string_view body, bool cancelled,
                             const std::shared_ptr<const grammar::Grammar>& default_format) {
  if (cancelled) throw shutting_down_error();
  auto job = std::make_shared<Job>();
  job->req = parse_completions_request(body);
  if (!job->req.output_chosen) job->req.grammar = default_format;
  const int n_ctx = engine.info().n_ctx;
  const int n_vocab = engine.info().n_vocab;
  const bool several = job->req.prompts.size() > 1;
  for (size_t i = 0; i < job->req.prompts.size(); ++i) {
    const CompletionsPrompt& pr = job->req.prompts[i];
    Prompt c;
    if (pr.is_tokens) {
      for (size_t k = 0; k < pr.tokens.size(); ++k) {
        if (pr.tokens[k] >= n_vocab) {
          const std::string param = (several ? "prompt[" + std::to_string(i) + "]" : std::string("prompt")) + "[" + std::to_string(k) + "]";
          throw bad_param(param, "Invalid '" + param + "': token id " + std::to_string(pr.tokens[k]) +
                                     " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ").");
        }
      }
      c.gen.prompt = pr.tokens;
      if (job->req.echo) c.prompt = engine.detokenize(pr.tokens);
    } else {
      c.prompt = pr.text;
      // As llama.cpp's server and vLLM: control tokens written in a raw prompt are parsed
      // (a completions prompt is the caller's own rendering, e.g. ChatML by hand).
      c.gen.prompt = engine.tokenize(c.prompt, /*add_special=*/true, /*parse_special=*/true);
    }
    const int n = static_cast<int>(c.gen.prompt.size());
    if (n + 1 > n_ctx)
      throw ApiError(400, "This model's maximum context length is " + std::to_string(n_ctx) + " tokens, however you requested " +
                              std::to_string(n) + " tokens in your prompt (prompt tokens + 1 must be <= " + std::to_string(n_ctx) + ").",
                     "invalid_request_error", "prompt", "context_length_exceeded");
    c.gen.max_tokens = job->req.max_tokens;
    c.gen.speculative = job->req.speculative;
    c.gen.ignore_eos = job->req.ignore_eos;
    c.gen.grammar = job->req.grammar;
    c.gen.logprobs = job->req.logprobs;
    c.gen.prompt_logprobs = job->req.echo && job->req.logprobs >= 0;
    c.gen.sampling = job->req.sampling;  // choice j samples with engine::choice_seed(seed, j)
    c.gen.n = job->req.n;
    job->prompts.push_back(std::move(c));
  }
  job->id = random_id("cmpl-");
  job->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  job->model = engine.info().id;
  return job;
}

struct Totals {
  /// All choices: prompt and cached tokens once per prompt (its first choice reports
  /// them), generated and draft tokens summed.
  engine::GenerateResult result;
  bool gone = false;
  /// The shutdown's cancel (its grace period ended) stopped a choice before it was
  /// complete: the answer is an error (shutdown_cut_error), never a normal finish.
  bool cut = false;
  TokenClock clock;  ///< every choice's tokens, from Job::received
};

/// Text of a choice as it becomes final, and the logprobs object of the tokens since the
/// previous call (null when logprobs were not asked or, for a finish call, none are left).
using Emit = std::function<bool(int index, const std::string& text, const char* finish, json logprobs)>;

/// Engine::admit with its refusals as API errors: 400 for an invalid request, 429 (with
/// Retry-After) when the scheduler's queue is full.
std::unique_ptr<engine::Admission> admit(engine::Engine& engine, const engine::GenerateRequest& gen) {
  try {
    return engine.admit(gen);
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what());
  } catch (const engine::Overloaded& e) {
    throw queue_full_error(e.what(), e.retry_after_s);
  }
}

/// Runs every prompt's choices (one prompt after another; a prompt's n choices together,
/// Engine::run_choices); `emit` gets text as it is final and one call with the finish
/// reason per choice (none for a choice cut by the shutdown: Totals::cut, and the run
/// ends). Each non-empty text carries the logprob entries of the tokens generated since
/// the previous one of its choice (held-back text delays them; the finish call carries
/// the rest), so the joined entries are the same however the text was cut. `admissions`
/// holds one admission per prompt, taken before the response started (a full queue is a
/// 429 before any 200 headers).
Totals run_all(engine::Engine& engine, const Job& job, std::atomic<bool>& cancelled, const Emit& emit,
               std::vector<std::unique_ptr<engine::Admission>>& admissions) {
  Totals t;
  t.clock = TokenClock(job.received);
  const bool want = job.req.logprobs >= 0;
  const int n = job.req.n;
  for (size_t pi = 0; pi < job.prompts.size() && !t.gone; ++pi) {
    const Prompt& c = job.prompts[pi];
    engine::Admission& a = *admissions[pi];
    const int base = static_cast<int>(pi) * n;
    struct State {
      explicit State(engine::Engine& e, const std::vector<std::string>& stops) : lp(e), text(stops) {}
      LegacyLogprobs lp;
      CompletionText text;
    };
    std::vector<std::unique_ptr<State>> st;
    for (int j = 0; j < n; ++j) st.push_back(std::make_unique<State>(engine, job.req.stop));
    auto take = [&](State& s) { return want ? s.lp.take() : json(nullptr); };
    if (job.req.echo) {
      if (c.gen.prompt_logprobs) {
        // The prompt's logprobs exist once prefill ran: the echo is sent from there.
        a.set_prefill_callback([&](const std::vector<engine::TokenLogprobs>& plp) {
          for (int j = 0; j < n && !t.gone; ++j) {
            State& s = *st[static_cast<size_t>(j)];
            s.lp.add_first(c.gen.prompt.front());
            for (const auto& e : plp) s.lp.add(e);
            if (!emit(base + j, c.prompt, nullptr, take(s))) t.gone = true;
          }
        });
      } else {
        for (int j = 0; j < n && !t.gone; ++j)
          if (!emit(base + j, c.prompt, nullptr, nullptr)) t.gone = true;
        if (t.gone) break;
      }
    }
    auto on_token = [&](int j, const engine::TokenEvent& ev) {
      if (t.gone) return false;
      State& s = *st[static_cast<size_t>(j)];
      if (ev.logprobs) s.lp.add(*ev.logprobs);
      std::string text = s.text.push(ev.piece);
      if (!text.empty() && !emit(base + j, text, nullptr, take(s))) {
        t.gone = true;
        return false;
      }
      return !s.text.stopped() && !cancelled;
    };
    auto on_done = [&](int j, const engine::GenerateResult& r) {
      State& s = *st[static_cast<size_t>(j)];
      // Stopped by the shutdown (at a token, or by the cancel check before one), not by a
      // stop string: incomplete, so no finish_reason may be claimed for it.
      if (t.gone) return;
      if (r.finish == engine::FinishReason::Cancelled && cancelled && !s.text.stopped()) {
        t.cut = true;
        return;
      }
      if (t.cut) return;
      std::string rest = s.text.finish();
      if (!rest.empty() && !emit(base + j, rest, nullptr, take(s))) {
        t.gone = true;
        return;
      }
      if (!emit(base + j, "", finish_reason_name(r.finish, s.text.stopped()), want && !s.lp.empty() ? s.lp.take() : json(nullptr)))
        t.gone = true;
    };
    std::vector<engine::GenerateResult> rs = engine.run_choices(a, timed_choices(t.clock, n, on_token), on_done);
    // A prompt counts once, however many choices it has (as OpenAI bills n).
    t.result.prompt_tokens += rs.front().prompt_tokens;
    t.result.cached_tokens += rs.front().cached_tokens;
    t.result.prefill_ms += rs.front().prefill_ms;
    for (const engine::GenerateResult& r : rs) {
      t.result.completion_tokens += r.completion_tokens;
      t.result.spec_drafted += r.spec_drafted;
      t.result.spec_accepted += r.spec_accepted;
      t.result.decode_ms += r.decode_ms;
    }
    if (t.cut) break;
  }
  return t;
}

/// Appends the arrays of legacy logprobs object `more` to `into` (null: a fresh copy).
void append_logprobs(json& into, const json& more) {
  if (more.is_null()) return;
  if (into.is_null()) {
    into = more;
    return;
  }
  for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const auto& v : more[k]) into[k].push_back(v);
}

/// Chat's usage object (speculative drafts in completion_tokens_details, as chat reports them).
json usage(const Totals& t) {
  const engine::GenerateResult& r = t.result;
  return usage_json(r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.spec_drafted, r.spec_accepted);
}

void send_openai_error(http::Response& res, const ApiError& e) {
  res.status = e.status;
  set_error_headers(res, e);
  res.set_header(kCacheHitHeader, "0");
  res.set_header(kUncachedHeader, "0");
  res.set_content(dump(e.body()), "application/json");
}

}  // namespace

void add_completions_route(HttpServer& http, engine::Engine& engine, std::atomic<bool>& cancelled,
                           std::function<void(const std::string&)> log, GenerationHooks hooks, const std::string& base) {
  http.route("POST", base + "/completions", [&engine, &cancelled, log, hooks](const http::Request& req, http::Response& res) {
    auto admitted = [&req, hooks](engine::Admission& a) {
      if (hooks.admitted) hooks.admitted(req, a);
    };
    auto finished = [&req, hooks](const Totals& t) {
      return hooks.finished ? hooks.finished(req, "/v1/completions", t.result, t.clock) : std::string();
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto log_line = [&log, t0](int status, const Totals* t) {  // by value: streams log after the handler returned
      if (!log) return;
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      char buf[256];
      if (t) {
        const engine::GenerateResult& r = t->result;
        std::snprintf(buf, sizeof buf,
                      "POST /v1/completions %d prompt=%d cached=%d completion=%d%s drafted=%d accepted=%d prefill=%.1fms "
                      "decode=%.1fms total=%.1fms",
                      status, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
                      t->gone ? " (client disconnected)" : t->cut ? " (cut by shutdown)" : "",
                      r.spec_drafted, r.spec_accepted, r.prefill_ms, r.decode_ms, ms);
      } else {
        std::snprintf(buf, sizeof buf, "POST /v1/completions %d %.1fms", status, ms);
      }
      log(buf);
    };
    // The receipt facts of this request (route_hooks.h).
    auto receipt_of = [&req](const Job& job, const Totals& t) {
      return receipt_facts(endpoint_label(req.path), req.body, job.req.stream, job.req.sampling, job.req.max_tokens, job.req.n,
                           t.result, t.clock);
    };
    std::shared_ptr<void> running = hooks.enter ? hooks.enter() : std::make_shared<int>(0);
    res.hold = running;  // counted until the answer is written
    std::shared_ptr<Job> job;
    // Every prompt is admitted here (one admission for its n choices), so that a full
    // queue is a 429 for the whole request before the 200 headers go out (shared: the
    // content provider below is copied).
    auto admissions = std::make_shared<std::vector<std::unique_ptr<engine::Admission>>>();
    try {
      if (!running) throw shutting_down_error();
      job = prepare(engine, req.body, cancelled, default_output_format(req.path));
      for (Prompt& c : job->prompts) {
        if (hooks.cache_scope) hooks.cache_scope(req, c.gen);
        admissions->push_back(admit(engine, c.gen));
        admitted(*admissions->back());
      }
      if (!job->req.stream) {
        std::vector<json> choices(job->prompts.size() * static_cast<size_t>(job->req.n));
        for (size_t i = 0; i < choices.size(); ++i)
          choices[i] = {{"text", ""}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        const bool want = job->req.logprobs >= 0;
        Totals t = run_all(engine, *job, cancelled, [&](int i, const std::string& s, const char* finish, json lp) {
          choices[i]["text"] = choices[i]["text"].get<std::string>() + s;
          append_logprobs(choices[i]["logprobs"], lp);
          if (finish) {
            choices[i]["finish_reason"] = finish;
            if (want && choices[i]["logprobs"].is_null()) choices[i]["logprobs"] = LegacyLogprobs(engine).take();
          }
          return true;
        }, *admissions);
        if (t.cut) throw shutdown_cut_error(t.result.completion_tokens);
        json body = {{"id", job->id}, {"object", "text_completion"}, {"created", job->created}, {"model", job->model},
                     {"system_fingerprint", nullptr}, {"choices", choices}, {"usage", usage(t)}};
        set_generation_headers(res, t.result, finished(t));
        if (hooks.receipts)
          res.set_header(kReceiptHeader, seal_response_body(*hooks.receipts, receipt_of(*job, t), body));
        res.set_content(dump(body), "application/json");
        log_line(200, &t);
        return;
      }
    } catch (const ApiError& e) {
      send_openai_error(res, e);
      log_line(res.status, nullptr);
      return;
    } catch (const std::exception& e) {
      send_openai_error(res, ApiError(500, std::string("Internal error: ") + e.what(), "server_error"));
      log_line(res.status, nullptr);
      return;
    }
    // Streaming (several prompts: one prompt's choices interleave, prompts follow one another).
    // Every prompt was admitted: the cache counts and the prompts' cost go in the headers.
    int prompt_tokens = 0, cached_tokens = 0;
    for (const auto& a : *admissions) {
      prompt_tokens += a->prompt_tokens();
      cached_tokens += a->cached_tokens();
    }
    auto set = [&res](const char* key, const std::string& value) {
      res.headers.erase(key);
      res.headers.emplace(key, value);
    };
    set(kCacheHitHeader, std::to_string(cached_tokens));
    set(kUncachedHeader, std::to_string(prompt_tokens - cached_tokens));
    if (hooks.quote) set(kCostHeader, hooks.quote(prompt_tokens, cached_tokens));
    res.set_header("Cache-Control", "no-cache");
    res.set_stream("text/event-stream", [&engine, &cancelled, job, log_line, finished, running,
                                                           receipts = hooks.receipts, receipt_of, admissions](http::ChunkSink& sink) {
      // With receipts, the last chunk before [DONE] carries one (receipt.h, ReceiptStream).
      ReceiptStream out(
          ReceiptStream::Wire::OpenAI, [&sink](std::string_view s) { return sink.write(s); },
          receipts != nullptr);
      auto chunk = [&](json choices) {
        json c = {{"id", job->id}, {"object", "text_completion"}, {"created", job->created}, {"model", job->model},
                  {"system_fingerprint", nullptr}, {"choices", std::move(choices)}};
        if (job->req.include_usage) c["usage"] = nullptr;
        return c;
      };
      Totals t;
      bool recorded = false;
      try {
        t = run_all(engine, *job, cancelled, [&](int i, const std::string& s, const char* finish, json lp) {
          json ch = {{"text", s}, {"index", i}, {"logprobs", std::move(lp)}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
          return out.write(sse_event(chunk(json::array({ch}))));
        }, *admissions);
        if (t.cut) {  // an error event, no usage chunk and no [DONE]
          finished(t);
          recorded = true;
          t.gone = !out.write(sse_event(shutdown_cut_error(t.result.completion_tokens).body()));
        }
        if (!t.gone && !t.cut && job->req.include_usage) {
          json u = chunk(json::array());
          u["usage"] = usage(t);
          t.gone = !out.write(sse_event(u));
        }
        // Recorded before [DONE], so a client that has seen the end of the stream sees it
        // in /metrics and /v1/usage (as chat does).
        if (!recorded) finished(t);
        recorded = true;
        if (receipts && !t.gone && !t.cut) t.gone = !out.seal(*receipts, receipt_of(*job, t));
        if (!t.gone && !t.cut) t.gone = !out.write(kSseDone);
      } catch (const ApiError& e) {
        out.write(sse_event(e.body()));
      } catch (const std::exception& e) {
        out.write(sse_event(ApiError(500, std::string("The engine failed: ") + e.what(), "server_error").body()));
      }
      if (!recorded && t.result.prompt_tokens > 0) finished(t);  // an engine failure ran nothing billable
      log_line(200, &t);
      return !t.gone;
    });
  });
}

}  // namespace swz::server
