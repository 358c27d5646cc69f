#include "openai_completions.h"

#include "accounting.h"

#include "openai_chat.h"
#include "server.h"
#include "text_stream.h"
#include "tool_calls.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace swz::server {

using nlohmann::json;

CompletionsRequest parse_completions_request(std::string_view body_text) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("We could not parse the JSON body of your request: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.");
  CompletionsRequest r;
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw bad_param("prompt", "Missing required parameter: 'prompt'.");
  if (it->is_string()) {
    r.prompts.push_back(it->get<std::string>());
  } else if (it->is_array() && !it->empty()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const json& p = (*it)[i];
      if (p.is_number_integer() || p.is_array())
        throw bad_param("prompt", "Token-id prompts are not supported yet; send the prompt as text.");
      if (!p.is_string()) throw bad_param("prompt[" + std::to_string(i) + "]", "Invalid type: expected a string.");
      r.prompts.push_back(p.get<std::string>());
    }
  } else {
    throw bad_param("prompt", "Invalid 'prompt': expected a string or a non-empty array of strings.");
  }
  for (const auto& p : r.prompts)
    if (p.empty()) throw bad_param("prompt", "Invalid 'prompt': prompts must not be empty.");
  if (auto e = body.find("echo"); e != body.end() && !e->is_null()) {
    if (!e->is_boolean()) throw bad_param("echo", "Invalid type for 'echo': expected a boolean.");
    r.echo = e->get<bool>();
  }
  if (auto lp = body.find("logprobs"); lp != body.end() && !lp->is_null())
    throw bad_param("logprobs", "'logprobs' is not supported yet by this server.");
  if (auto s = body.find("suffix"); s != body.end() && !s->is_null())
    throw bad_param("suffix", "'suffix' (insertion) is not supported by this server.");
  if (auto b = body.find("best_of"); b != body.end() && !b->is_null() && !(b->is_number_integer() && b->get<int64_t>() == 1))
    throw bad_param("best_of", "'best_of' other than 1 is not supported.");
  // The sampling fields are the chat endpoint's: validate them with its parser.
  json chat = body;
  for (const char* k : {"prompt", "echo", "logprobs", "suffix", "best_of"}) chat.erase(k);
  chat["messages"] = json::array({{{"role", "user"}, {"content", "x"}}});
  ChatRequest c = parse_chat_request(chat.dump());
  if (c.continue_final_message || !c.tools.empty()) throw bad_param("tools", "'tools' are not supported on /v1/completions.");
  if (c.max_tokens) r.max_tokens = *c.max_tokens;
  r.sampling = c.sampling;
  r.stop = c.stop;
  r.stream = c.stream;
  r.include_usage = c.include_usage;
  return r;
}

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

struct Choice {
  engine::GenerateRequest gen;
  std::string prompt;
};

struct Job {
  CompletionsRequest req;
  std::vector<Choice> choices;
  std::string id;
  int64_t created = 0;
  std::string model;
};

std::shared_ptr<Job> prepare(engine::Engine& engine, std::string_view body, bool cancelled) {
  if (cancelled) throw ApiError(503, "The server is shutting down.", "server_error");
  auto job = std::make_shared<Job>();
  job->req = parse_completions_request(body);
  const int n_ctx = engine.info().n_ctx;
  for (size_t i = 0; i < job->req.prompts.size(); ++i) {
    Choice c;
    c.prompt = job->req.prompts[i];
    c.gen.prompt = engine.tokenize(c.prompt, /*add_special=*/true);
    const int n = static_cast<int>(c.gen.prompt.size());
    if (n + 1 > n_ctx)
      throw ApiError(400, "This model's maximum context length is " + std::to_string(n_ctx) + " tokens, however you requested " +
                              std::to_string(n) + " tokens in your prompt (prompt tokens + 1 must be <= " + std::to_string(n_ctx) + ").",
                     "invalid_request_error", "prompt", "context_length_exceeded");
    c.gen.max_tokens = job->req.max_tokens;
    c.gen.sampling = job->req.sampling;
    job->choices.push_back(std::move(c));
  }
  job->id = random_id("cmpl-");
  job->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  job->model = engine.info().id;
  return job;
}

struct Totals {
  int prompt = 0, completion = 0, cached = 0;
  bool gone = false;
};

/// Runs every choice; `emit(index, text, finish_reason or nullptr)` gets text as it is
/// final and one call with the finish reason per choice. Returns false when emit did.
Totals run_all(engine::Engine& engine, const Job& job, std::atomic<bool>& cancelled,
               const std::function<bool(int, const std::string&, const char*)>& emit,
               const std::function<void(engine::Admission&)>& admitted) {
  Totals t;
  for (size_t i = 0; i < job.choices.size() && !t.gone; ++i) {
    const Choice& c = job.choices[i];
    const int idx = static_cast<int>(i);
    std::unique_ptr<engine::Admission> a;
    try {
      a = engine.admit(c.gen);
    } catch (const engine::InvalidRequest& e) {
      throw ApiError(400, e.what());
    }
    if (admitted) admitted(*a);
    if (job.req.echo && !emit(idx, c.prompt, nullptr)) {
      t.gone = true;
      break;
    }
    CompletionText text(job.req.stop);
    auto on_token = [&](const engine::TokenEvent& ev) {
      std::string s = text.push(ev.piece);
      if (!s.empty() && !emit(idx, s, nullptr)) {
        t.gone = true;
        return false;
      }
      return !text.stopped() && !cancelled;
    };
    engine::GenerateResult r = engine.run(*a, on_token);
    if (t.gone) break;
    std::string rest = text.finish();
    if (!rest.empty() && !emit(idx, rest, nullptr)) {
      t.gone = true;
      break;
    }
    if (!emit(idx, "", finish_reason_name(r.finish, text.stopped()))) t.gone = true;
    t.prompt += r.prompt_tokens;
    t.completion += r.completion_tokens;
    t.cached += r.cached_tokens;
  }
  return t;
}

json usage(const Totals& t) {
  return {{"prompt_tokens", t.prompt}, {"completion_tokens", t.completion}, {"total_tokens", t.prompt + t.completion},
          {"prompt_tokens_details", {{"cached_tokens", t.cached}}}};
}

void send_openai_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_header(kCacheHitHeader, "0");
  res.set_header(kUncachedHeader, "0");
  res.set_content(dump(e.body()), "application/json");
}

}  // namespace

void add_completions_route(httplib::Server& http, engine::Engine& engine, std::atomic<bool>& cancelled,
                           std::function<void(const std::string&)> log, GenerationHooks hooks) {
  http.Post("/v1/completions", [&engine, &cancelled, log, hooks](const httplib::Request& req, httplib::Response& res) {
    auto admitted = [&req, hooks](engine::Admission& a) {
      if (hooks.admitted) hooks.admitted(req, a);
    };
    auto finished = [&req, hooks](const Totals& t) {
      return hooks.finished ? hooks.finished("/v1/completions", req, t.prompt, t.cached, t.completion) : std::string();
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto log_line = [&](int status, const Totals* t) {
      if (!log) return;
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      char buf[256];
      if (t) {
        std::snprintf(buf, sizeof buf, "POST /v1/completions %d prompt=%d cached=%d completion=%d%s total=%.1fms", status,
                      t->prompt, t->cached, t->completion, t->gone ? " (client disconnected)" : "", ms);
      } else {
        std::snprintf(buf, sizeof buf, "POST /v1/completions %d %.1fms", status, ms);
      }
      log(buf);
    };
    std::shared_ptr<Job> job;
    try {
      job = prepare(engine, req.body, cancelled);
      if (!job->req.stream) {
        std::vector<json> choices(job->choices.size());
        for (size_t i = 0; i < choices.size(); ++i)
          choices[i] = {{"text", ""}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        Totals t = run_all(engine, *job, cancelled, [&](int i, const std::string& s, const char* finish) {
          choices[i]["text"] = choices[i]["text"].get<std::string>() + s;
          if (finish) choices[i]["finish_reason"] = finish;
          return true;
        }, admitted);
        json body = {{"id", job->id}, {"object", "text_completion"}, {"created", job->created}, {"model", job->model},
                     {"system_fingerprint", nullptr}, {"choices", choices}, {"usage", usage(t)}};
        res.set_header(kCacheHitHeader, std::to_string(t.cached));
        res.set_header(kUncachedHeader, std::to_string(t.prompt - t.cached));
        if (hooks.finished) res.set_header(kCostHeader, finished(t));
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
    // Streaming (several prompts: their choices follow one another).
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&engine, &cancelled, job, log_line, admitted, finished](size_t, httplib::DataSink& sink) {
      auto chunk = [&](json choices) {
        json c = {{"id", job->id}, {"object", "text_completion"}, {"created", job->created}, {"model", job->model},
                  {"system_fingerprint", nullptr}, {"choices", std::move(choices)}};
        if (job->req.include_usage) c["usage"] = nullptr;
        return c;
      };
      Totals t;
      try {
        t = run_all(engine, *job, cancelled, [&](int i, const std::string& s, const char* finish) {
          json ch = {{"text", s}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
          std::string ev = sse_event(chunk(json::array({ch})));
          return sink.write(ev.data(), ev.size());
        }, admitted);
        if (!t.gone && job->req.include_usage) {
          json u = chunk(json::array());
          u["usage"] = usage(t);
          std::string ev = sse_event(u);
          t.gone = !sink.write(ev.data(), ev.size());
        }
        if (!t.gone) t.gone = !sink.write(kSseDone.data(), kSseDone.size());
      } catch (const ApiError& e) {
        std::string ev = sse_event(e.body());
        sink.write(ev.data(), ev.size());
      } catch (const std::exception& e) {
        std::string ev = sse_event(ApiError(500, std::string("The engine failed: ") + e.what(), "server_error").body());
        sink.write(ev.data(), ev.size());
      }
      finished(t);
      log_line(200, &t);
      if (t.gone) return false;
      sink.done();
      return true;
    });
  });
}

}  // namespace swz::server
