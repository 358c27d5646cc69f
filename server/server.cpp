#include "server.h"

#include "accounting.h"
#include "anthropic_messages.h"
#include "api_error.h"
#include "http_server.h"
#include "json_depth.h"
#include "key_store.h"
#include "openai_chat.h"
#include "openai_completions.h"
#include "openai_logprobs.h"
#include "receipt.h"
#include "route_hooks.h"
#include "structured_output.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

namespace swz::server {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void set_unique_header(http::Response& res, const std::string& key, const std::string& value) { res.set_header(key, value); }

void set_cache_headers(http::Response& res, int cached, int uncached) {
  set_unique_header(res, kCacheHitHeader, std::to_string(cached));
  set_unique_header(res, kUncachedHeader, std::to_string(uncached));
}

void send_error(http::Response& res, const ApiError& e) {
  res.status = e.status;
  set_error_headers(res, e);
  set_cache_headers(res, 0, 0);
  res.set_content(dump(e.body()), "application/json");
}

/// Every configured key: `--api-key` (named by its fingerprint) and the named ones.
ApiKeys make_keys(const ServerOptions& o) {
  std::vector<ApiKey> keys = o.api_keys;
  if (!o.api_key.empty()) keys.insert(keys.begin(), ApiKey{"", o.api_key});
  return ApiKeys(std::move(keys), o.admin_key);
}

void send_anthropic_error(http::Response& res, const ApiError& e) {
  res.status = e.status;
  set_error_headers(res, e);
  set_cache_headers(res, 0, 0);
  res.set_content(dump(anthropic_error_body(e)), "application/json");
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct Server::Impl {
  Impl(engine::Engine& e, ServerOptions o)
      : engine(e), opts(std::move(o)), chat(e), keys(make_keys(opts)), accounting(opts.prices), anthropic(e),
        created(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
        http(http_options(opts)) {
    if (!opts.key_store.empty()) {
      store = std::make_unique<KeyStore>(opts.key_store, opts.key_store_recheck_ms);
      store->note = [this](const std::string& line) { log(line); };
    }
    CacheModePolicy policy;  // one atom-order memory for both wire formats
    policy.default_mode = opts.cache_mode;
    policy.approx_recompute = opts.approx_recompute;
    policy.approx_select = opts.approx_select;
    chat.set_cache_policy(policy);
    anthropic.set_cache_policy(policy);
    // From here on the keys exist only as digests inside `keys`.
    opts.api_key.clear();
    opts.api_keys.clear();
    opts.admin_key.clear();
  }

  engine::Engine& engine;
  ServerOptions opts;
  ChatCompletions chat;
  ApiKeys keys;
  std::unique_ptr<KeyStore> store;  ///< --key-store: per-organisation keys with scopes (key_store.h); null = none
  Accounting accounting;  ///< the usage ledger and the metrics; every endpoint reports finished requests here
  AnthropicMessages anthropic;  // POST /v1/messages (anthropic_messages.h)
  GenerationHooks hooks;  ///< what every endpoint calls around a generation (route_hooks.h); filled by setup()
  std::atomic<bool> completions_cancelled{false};  // POST /v1/completions (openai_completions.h)
  int64_t created;
  HttpServer http;
  int port = -1;  ///< bound port (bind())

  // Graceful shutdown (Server::shutdown). `draining` and `generating` are a handshake: a
  // generation request counts itself in `generating`, then checks `draining`; shutdown
  // sets `draining`, then reads `generating` (both sequentially consistent), so every
  // request is either refused or waited for.
  std::atomic<bool> draining{false};
  std::atomic<int> generating{0};  ///< generation requests from GenerationHooks::enter to their response's end
  std::mutex shutdown_mu;  ///< one shutdown at a time

  /// GenerationHooks::enter.
  std::shared_ptr<void> enter_generation() {
    generating.fetch_add(1);
    if (draining.load()) {
      generating.fetch_sub(1);
      return nullptr;
    }
    // Non-null (a null shared_ptr reads as "refused"); the deleter only counts.
    return std::shared_ptr<void>(static_cast<void*>(this), [this](void*) { generating.fetch_sub(1); });
  }

  /// Cuts every running and future generation at its next token (reported as errors).
  void cancel_generations() {
    chat.cancel_all();
    anthropic.cancel_all();
    completions_cancelled = true;
  }

  void log(const std::string& line) {
    if (opts.log) opts.log(line);
  }

  void log_request(const http::Request& req, int status, const ChatCompletions::Outcome* o, double total_ms) {
    if (!opts.log) return;
    char buf[512];
    if (o) {
      const auto& r = o->result;
      std::snprintf(buf, sizeof buf,
                    "%s %s %d prompt=%d cached=%d completion=%d%s drafted=%d accepted=%d prefill=%.1fms decode=%.1fms "
                    "total=%.1fms",
                    req.method.c_str(), req.path.c_str(), status, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
                    o->client_gone ? " (client disconnected)" : o->cut ? " (cut by shutdown)" : "", r.spec_drafted, r.spec_accepted, r.prefill_ms,
                    r.decode_ms, total_ms);
    } else {
      std::snprintf(buf, sizeof buf, "%s %s %d %.1fms", req.method.c_str(), req.path.c_str(), status, total_ms);
    }
    log(buf);
  }

  /// Who sent a request and what it may do.
  struct Who {
    bool ok = false;          ///< the credential is accepted
    Caller caller;            ///< ledger identity: a configured key's name, "org:<org>" for a store key, ...
    bool general = false;     ///< may use the generation routes under /v1/
    bool security = false;    ///< may use /v1/security/...
    std::string label;        ///< how error messages name the key
    std::string org;          ///< a store key's organisation ("" for other keys)
    bool disk_cache = true;   ///< the prefix cache's disk tier may hold its requests (KeyIdentity::disk_cache)
  };

  /// A store key (key_store.h) is {"org:<org>", its scopes}; any other accepted credential
  /// (--api-key, --api-keys-file, the admin key, or anyone on a server without keys) has
  /// the general scope only. With a key store, only configured or stored keys are accepted.
  Who who(const http::Request& req) const {
    const std::string credential =
        request_credential(req.get_header_value("Authorization"), req.get_header_value("x-api-key"));
    if (store)
      if (std::optional<KeyIdentity> k = store->resolve(credential))
        return {true, Caller{"org:" + k->org, false}, k->general, k->security,
                "Key " + k->id + " of organisation '" + k->org + "'", k->org, k->disk_cache};
    std::optional<Caller> c = keys.resolve(credential);
    if (store && c && !keys.required() && !c->admin) c.reset();
    if (!c) return {};
    return {true, *c, true, false, "This API key", "", true};
  }

  /// The ledger identity of a request (already authenticated by the pre-routing handler
  /// when keys are required; a rejected credential here means the path is not under /v1/).
  Caller caller_of(const http::Request& req) const {
    Who w = who(req);
    return w.ok ? w.caller : Caller{"anonymous", false};
  }

  /// The scope a path needs: security under /v1/security/ and /security/, general for the other
  /// generation and tokenizer routes, none for the rest (models, usage, probes).
  static const char* required_scope(const std::string& path) {
    if (path.rfind("/v1/security/", 0) == 0 || path.rfind("/security/", 0) == 0) return kScopeSecurity;
    for (const char* p : {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
                          "/tokenize", "/detokenize"})
      if (path == p) return kScopeGeneral;
    return nullptr;
  }

  /// The receipt facts of a chat completion (route_hooks.h).
  static ReceiptFacts chat_receipt_facts(const http::Request& req, const ChatCompletions::Prepared& p,
                                         const ChatCompletions::Outcome& o) {
    return receipt_facts(endpoint_label(req.path), req.body, p.req.stream, p.req.sampling, p.req.max_tokens.value_or(-1),
                         p.req.n, o.result, o.clock);
  }

  json model_json() const {
    return {{"id", engine.info().id}, {"object", "model"}, {"created", created}, {"owned_by", "swizzle"}};
  }

  void chat_completions(const http::Request& req, http::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<void> running = enter_generation();
    res.hold = running;  // counted until the response is written
    std::shared_ptr<ChatCompletions::Prepared> p;
    try {
      if (!running) throw shutting_down_error();
      p = std::make_shared<ChatCompletions::Prepared>(chat.prepare(
          req.body, [&](engine::GenerateRequest& g) { if (hooks.cache_scope) hooks.cache_scope(req, g); },
          req.get_header_value(kCacheModeHeader), default_output_format(req.path)));
      set_unique_header(res, kCacheModeHeader, std::string(frontend_ast::cache_mode_name(p->cache_mode)));
    } catch (const ApiError& e) {
      send_error(res, e);
      log_request(req, res.status, nullptr, ms_since(t0));
      return;
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("Internal error: ") + e.what(), "server_error"));
      log_request(req, res.status, nullptr, ms_since(t0));
      return;
    }

    // A client that goes away during prefill (nothing is written then) or while a
    // non-streamed answer is generated is seen by the HTTP layer's outstanding read on its
    // socket (Request::gone); the engine polls this before each prefill chunk and decode
    // step (Admission::set_cancel_check), and waiting for tokens suspends this fiber.
    auto gone = std::make_shared<std::atomic<bool>>(false);
    p->admission->set_cancel_check([this, &req, gone] {
      if (chat.cancelling()) return true;
      if (!req.client_gone()) return false;
      gone->store(true);
      return true;
    });
    p->admission->set_event_wait(fiber_event_wait());

    if (!p->req.stream) {
      try {
        json body;
        ChatCompletions::Outcome o = chat.complete(*p, body);
        if (gone->load()) o.client_gone = true;
        set_generation_headers(res, o.result, hooks.finished(req, "/v1/chat/completions", o.result, o.clock));
        if (hooks.receipts)
          set_unique_header(res, kReceiptHeader, seal_response_body(*hooks.receipts, chat_receipt_facts(req, *p, o), body));
        res.set_content(dump(body), "application/json");
        log_request(req, 200, &o, ms_since(t0));
      } catch (const ApiError& e) {
        send_error(res, e);
        log_request(req, res.status, nullptr, ms_since(t0));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("Internal error: ") + e.what(), "server_error"));
        log_request(req, res.status, nullptr, ms_since(t0));
      }
      return;
    }

    // Streaming: the headers leave before generation starts; admission already looked up
    // the cached prefix, so they carry the counts the usage chunk will repeat.
    // The cost header can only carry the prompt's cost here; the ledger gets the whole.
    const engine::Admission& first = *p->admission;
    set_cache_headers(res, first.cached_tokens(), first.uncached_tokens());
    set_unique_header(res, kCostHeader, hooks.quote(first.prompt_tokens(), first.cached_tokens()));
    set_unique_header(res, "Cache-Control", "no-cache");
    set_unique_header(res, "X-Accel-Buffering", "no");
    res.set_stream("text/event-stream", [this, p, t0, &req, gone, running](http::ChunkSink& sink) {
      ChatCompletions::Outcome o;
      bool recorded = false;
      // Recorded before [DONE] is written, or after a client went away mid-stream (the
      // tokens it consumed are billed); an engine failure ran nothing billable.
      auto record = [&](const ChatCompletions::Outcome& done) {
        if (recorded) return;
        recorded = true;
        hooks.finished(req, "/v1/chat/completions", done.result, done.clock);
      };
      // With receipts, the last chunk before [DONE] carries one (receipt.h, ReceiptStream).
      ReceiptStream out(
          ReceiptStream::Wire::OpenAI, [&sink](std::string_view s) { return sink.write(s); },
          hooks.receipts != nullptr);
      try {
        o = chat.stream(
            *p, [&out](std::string_view s) { return out.write(s); },
            [&](const ChatCompletions::Outcome& done) {
              record(done);
              if (hooks.receipts) out.seal(*hooks.receipts, chat_receipt_facts(req, *p, done));
            });
        // A stream cut by the shutdown is billed for what its client received, as one the
        // client left.
        if ((o.client_gone || o.cut) && o.result.prompt_tokens > 0) record(o);
      } catch (...) {
        o.client_gone = true;  // stream() does not throw; never let anything cross into the HTTP layer
      }
      if (gone->load()) o.client_gone = true;
      log_request(req, 200, &o, ms_since(t0));
      return !o.client_gone;
    });
  }

  static HttpServerOptions http_options(const ServerOptions& o) {
    HttpServerOptions h;
    h.max_body_bytes = o.max_body_bytes;
    h.handler_threads = o.http_threads > 0 ? o.http_threads
                                           : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8);
    return h;
  }

  void setup() {
    // Runs after the head is read and before the body is (http_server.h): shutdown, then auth.
    http.pre_routing = [this](const http::Request& req, http::Response& res) {
      if (draining && req.path != "/metrics") {
        // A request on a connection opened before the shutdown began (new ones are no
        // longer accepted). The connection closes after this answer.
        if (req.path == "/health") {
          res.status = 503;
          set_cache_headers(res, 0, 0);
          res.set_content(dump({{"status", "shutting_down"}, {"backend", engine.info().backend}}), "application/json");
        } else if (is_anthropic_path(req.path)) {
          send_anthropic_error(res, shutting_down_error());
        } else {
          send_error(res, shutting_down_error());
        }
        res.close = true;
        return true;
      }
      // Everything needs an accepted key but the probes (as llama.cpp's server: /health;
      // and /metrics, which carries no request content).
      if (req.path == "/health" || req.path == "/metrics") return false;
      const Who w = who(req);
      if (w.ok) {
        // The key's scopes (key_store.h): 403 in the API's schema when it lacks the path's.
        const char* scope = required_scope(req.path);
        const bool security = scope && std::string_view(scope) == kScopeSecurity;
        if (!scope || (security ? w.security : w.general)) return false;
        std::string msg = w.label + " lacks the '" + scope + "' scope that " + req.path + " requires.";
        if (security && !store)
          msg += " This server has no key store, so no key has it (swizzle-rt serve --key-store FILE).";
        ApiError e(403, msg, "permission_error", "", "missing_scope");
        if (is_anthropic_path(req.path)) send_anthropic_error(res, e);
        else send_error(res, e);
        return true;
      }
      const std::string credential =
          request_credential(req.get_header_value("Authorization"), req.get_header_value("x-api-key"));
      if (is_anthropic_path(req.path)) {
        send_anthropic_error(res, ApiError(401, credential.empty() ? "x-api-key header is required." : "invalid x-api-key"));
        return true;
      }
      send_error(res, ApiError(401,
                               credential.empty() ? "You didn't provide an API key. Provide it in the Authorization header "
                                                    "(Authorization: Bearer YOUR_KEY)."
                                                  : "Incorrect API key provided.",
                               "invalid_request_error", "", "invalid_api_key"));
      return true;
    };

    using On = HttpServer::On;
    http.route("GET", "/health", [this](const http::Request&, http::Response& res) {
      set_cache_headers(res, 0, 0);
      // 503 once the engine's device failed (Engine::failure()): a supervisor restarts it.
      const std::string failure = engine.failure();
      if (!failure.empty()) res.status = 503;
      res.set_content(failure.empty() ? dump({{"status", "ok"}, {"backend", engine.info().backend}})
                                      : dump({{"status", "error"}, {"backend", engine.info().backend}, {"error", failure}}),
                      "application/json");
    }, On::IoThread);
    http.route("GET", "/v1/models", [this](const http::Request&, http::Response& res) {
      set_cache_headers(res, 0, 0);
      res.set_content(dump({{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
    }, On::IoThread);
    http.route_prefix("GET", "/v1/models/", [this](const http::Request& req, http::Response& res) {
      if (req.path_param != engine.info().id) {
        send_error(res, ApiError(404, "The model '" + req.path_param + "' does not exist; this server serves '" +
                                          engine.info().id + "'.",
                                 "invalid_request_error", "model", "model_not_found"));
        return;
      }
      set_cache_headers(res, 0, 0);
      res.set_content(dump(model_json()), "application/json");
    }, On::IoThread);
    for (const char* path : {"/v1/chat/completions", "/v1/security/chat/completions", "/security/v1/chat/completions"})
      http.route("POST", path, [this](const http::Request& req, http::Response& res) { chat_completions(req, res); });
    // llama.cpp server's tokenizer endpoints, with its defaults: POST /tokenize {"content":
    // str, "add_special": bool = false, "parse_special": bool = true, "with_pieces": bool =
    // false} -> {"tokens": [ids]} or, with pieces, {"tokens": [{"id", "piece"}]} (piece a
    // string when valid UTF-8, else its bytes); POST /detokenize {"tokens": [ids]} ->
    // {"content": str}.
    http.route("POST", "/tokenize", [this](const http::Request& req, http::Response& res) {
      try {
        const json body = parse_request_json(req.body, kNotJsonOpenAI);
        if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.");
        const json* content = json_field(body, "content");
        if (!content || !content->is_string()) throw bad_param("content", "Missing or invalid 'content': expected a string.");
        auto flag = [&](const char* name, bool dflt) {
          const json* a = json_field(body, name);
          return a ? get_bool(*a, name) : dflt;
        };
        const bool add_special = flag("add_special", false), parse_special = flag("parse_special", true);
        const bool with_pieces = flag("with_pieces", false);
        const std::vector<int32_t> ids = engine.tokenize(content->get<std::string>(), add_special, parse_special);
        json tokens = json::array();
        for (int32_t id : ids) {
          if (!with_pieces) {
            tokens.push_back(id);
            continue;
          }
          const std::string piece = engine.token_piece(id);
          if (logprob_token_text(piece) == piece) tokens.push_back({{"id", id}, {"piece", piece}});  // valid UTF-8
          else tokens.push_back({{"id", id}, {"piece", std::vector<int>(piece.begin(), piece.end())}});
        }
        set_cache_headers(res, 0, 0);
        res.set_content(dump({{"tokens", tokens}}), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
    http.route("POST", "/detokenize", [this](const http::Request& req, http::Response& res) {
      try {
        const json body = parse_request_json(req.body, kNotJsonOpenAI);
        if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.");
        const json* tokens = json_field(body, "tokens");
        if (!tokens || !tokens->is_array()) throw bad_param("tokens", "Missing or invalid 'tokens': expected an array of token ids.");
        std::vector<int32_t> ids;
        for (size_t i = 0; i < tokens->size(); ++i) {
          const json& t = (*tokens)[i];
          if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= engine.info().n_vocab)
            throw bad_param("tokens[" + std::to_string(i) + "]", "Invalid 'tokens[" + std::to_string(i) + "]': not a token id of this model.");
          ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
        }
        set_cache_headers(res, 0, 0);
        res.set_content(dump({{"content", engine.detokenize(ids)}}), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
    http.route("GET", "/v1/usage", [this](const http::Request& req, http::Response& res) {
      const Caller who = caller_of(req);
      set_cache_headers(res, 0, 0);
      res.set_content(dump(accounting.ledger.usage_json(who.key_id, who.admin)), "application/json");
    }, On::IoThread);
    http.route("GET", "/metrics", [this](const http::Request&, http::Response& res) {
      set_cache_headers(res, 0, 0);
      res.set_content(accounting.metrics.render(engine.cache_stats(), engine.spec_stats(), engine.scheduler_stats()), "text/plain; version=0.0.4; charset=utf-8");
    }, On::IoThread);
    // Every response, whatever produced it (handler, auth, error page), by route and status.
    http.on_response = [this](const http::Request& req, int status) {
      accounting.metrics.count_response(endpoint_label(req.path), status);
    };
    hooks.receipts = opts.receipts;
    hooks.enter = [this] { return enter_generation(); };
    hooks.admitted = [this](const http::Request& req, engine::Admission& a) {
      a.set_cancel_check([this, &req] { return chat.cancelling() || req.client_gone(); });
      a.set_event_wait(fiber_event_wait());
    };
    hooks.finished = [this](const http::Request& req, const std::string& endpoint, const engine::GenerateResult& r,
                            const TokenClock& clock) {
      return accounting.finish({endpoint, caller_of(req).key_id, engine.info().id, r.prompt_tokens, r.cached_tokens,
                                r.completion_tokens, &clock})
          .usd();
    };
    // Zero data retention (docs/server.md): each organisation's disk tier files are its
    // own, encrypted with its key; a security key's requests stay off the disk unless its
    // organisation enabled it.
    hooks.cache_scope = [this](const http::Request& req, engine::GenerateRequest& g) {
      const Who w = who(req);
      g.cache_tenant = w.org;
      g.cache_scope = !w.org.empty() ? "org:" + w.org : w.ok ? "key:" + w.caller.key_id : "";
      g.disk_cache = !w.ok || w.disk_cache;
    };
    hooks.quote = [this](int prompt, int cached) { return accounting.quote_prompt(engine.info().id, prompt, cached).usd(); };
    add_anthropic_routes(http, anthropic, opts.log, hooks);
    add_completions_route(http, engine, completions_cancelled, opts.log, hooks);
    // The security endpoint: the same routes under /v1/security/, for keys with the
    // security scope (pre-routing handler above; docs/server.md).
    // Both spellings, so that SDKs whose base URL ends in /v1 (OpenAI: base_url
    // http://host/v1/security) and those that add /v1 themselves (Anthropic: base_url
    // http://host/security) reach it.
    for (const char* base : {"/v1/security", "/security/v1"}) {
      add_anthropic_routes(http, anthropic, opts.log, hooks, base);
      add_completions_route(http, engine, completions_cancelled, opts.log, hooks, base);
    }

    // The errors the HTTP layer answers itself (malformed or unframed requests: 400 / 411,
    // no route: 404, body too large: 413, head too large: 431), in the path's API schema.
    http.error_page = [this](const http::Request& req, http::Response& res, const std::string& message) {
      const char* code = res.status == 404 ? "unknown_url" : res.status == 411 ? "length_required" : "";
      ApiError e(res.status, message, res.status >= 500 ? "server_error" : "invalid_request_error", "", code);
      if (is_anthropic_path(req.path)) send_anthropic_error(res, e);
      else send_error(res, e);
    };
    http.on_exception = [this](const http::Request& req, http::Response& res, const std::string& what) {
      ApiError e(500, "Internal error: " + what, "server_error");
      if (is_anthropic_path(req.path)) send_anthropic_error(res, e);
      else send_error(res, e);
    };
  }
};

Server::Server(engine::Engine& engine, ServerOptions opts) : impl_(std::make_unique<Impl>(engine, std::move(opts))) {
  // A client that disconnects mid-stream must surface as a failed write, not kill the
  // process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  impl_->setup();
}

Server::~Server() { stop(); }

int Server::bind(const std::string& host, int port) {
  impl_->port = impl_->http.bind(host, port);
  return impl_->port;
}

bool Server::run() {
  // A shutdown() that came first has nothing to stop; one that comes later closes the
  // listener through the io_context that run() is running.
  if (!impl_->draining) impl_->http.run();
  return true;
}

bool Server::listen(const std::string& host, int port) {
  bind(host, port);
  return run();
}

void Server::shutdown(std::chrono::milliseconds grace, const std::function<void(const std::string&)>& note) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> one_at_a_time(s.shutdown_mu);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + grace;
  auto sleep = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  // 1. Refuse new requests (pre-routing answers 503), stop accepting connections, and
  // close each connection after its current answer.
  s.draining = true;
  s.http.set_draining();
  s.http.stop_accepting();
  // 2. Let running generations finish within the grace period.
  if (s.generating > 0 && note) {
    char line[160];
    std::snprintf(line, sizeof line, "waiting up to %.1f s for %d running request(s)", grace.count() / 1000.0,
                  s.generating.load());
    note(line);
  }
  while (s.generating > 0 && Clock::now() < deadline) sleep();
  // 3. Cut the rest: each stops at its next token and answers an error.
  if (s.generating > 0) {
    if (note) {
      char line[160];
      std::snprintf(line, sizeof line, "grace period over, cutting %d running request(s)", s.generating.load());
      note(line);
    }
    s.cancel_generations();
    while (s.generating > 0) sleep();
  }
  s.cancel_generations();  // anything still on its way in is refused
  // 4. Idle keep-alive connections (and half-read requests) would hold run() for their
  // timeouts: close them. run() returns once the last connection has ended.
  s.http.close_idle();
}

void Server::stop() { shutdown(std::chrono::milliseconds(0)); }

}  // namespace swz::server
