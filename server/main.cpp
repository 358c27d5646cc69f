// swizzle-rt: the runtime executable.
//   swizzle-rt serve model.swz [--host H] [--port P] [-c CTX] [-t THREADS] [--api-key KEY]...
//                    [--api-keys-file FILE] [--admin-key KEY] [--prices prices.json]
//                    [--kv-pages N] [--cache-ttl S] [--cache-host-mb M] [--cache-dir DIR]
//                    [--cache-disk-mb M] [--no-prefix-cache] [--shutdown-grace S]
//                    [--parallel N] [--batch-tokens N] [--max-queue N]
//   swizzle-rt run   model.swz -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p M]
//                    [--seed S] [--chat|--raw] [--system TEXT]
//   both: [--spec|--no-spec] [--draft-max N]   (prompt-lookup speculative decoding)
// See docs/server.md.
#include "engine/engine.h"
#include "serve_loop.h"
#include "text_stream.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>

namespace {

using swz::engine::Engine;
using swz::engine::EngineOptions;

/// Speculative-decoding settings shared by `serve` and `run`.
struct SpecFlags {
  bool on = true;
  int draft_max = 16;
};
SpecFlags g_spec;

std::unique_ptr<Engine> load_engine(const std::string& package, int n_ctx, int n_threads, EngineOptions eo = {}) {
  eo.n_ctx = n_ctx;
  eo.n_threads = n_threads;
  eo.speculative = g_spec.on;
  eo.spec_draft_max = g_spec.draft_max;
  return Engine::load(package, eo);
}

/// The paged KV cache and prefix cache options (docs/server.md, "Prefix cache").
void add_cache_options(CLI::App* cmd, EngineOptions& eo) {
  cmd->add_option("--kv-pages", eo.kv_pages,
                  "KV cache page pool, pages of 64 tokens (0 = room for 4 full contexts; at least ctx/64 + 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cache-ttl", eo.cache_ttl_s, "prefix cache: seconds an unused block stays in RAM (sliding; 0 = no TTL)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--cache-host-mb", eo.cache_host_mb, "prefix cache: host-RAM tier for blocks evicted from the page pool, MiB (0 = none)")
      ->capture_default_str();
  cmd->add_option("--cache-dir", eo.cache_dir, "prefix cache: disk tier directory (survives restarts; default: none)");
  cmd->add_option("--cache-disk-mb", eo.cache_disk_mb, "prefix cache: disk tier budget, MiB")->capture_default_str();
  cmd->add_flag("--no-prefix-cache", [&eo](int64_t) { eo.prefix_cache = false; }, "do not share or keep KV blocks between requests");
}

/// Serves until SIGINT/SIGTERM (serve_loop.h).
/// Keys and prices of the server, read before the model loads so a bad file fails fast.
struct Accounts {
  std::vector<std::string> api_keys;  ///< --api-key (repeatable)
  std::string api_keys_file;          ///< --api-keys-file: "NAME KEY" or "KEY" per line
  std::string admin_key;              ///< --admin-key
  std::string prices_file;            ///< --prices
};

int serve(const std::string& package, const std::string& host, int port, int n_ctx, int n_threads,
          const Accounts& accounts, int http_threads, bool quiet, const EngineOptions& cache_opts, double shutdown_grace_s) {
  swz::server::ServerOptions so;
  for (const std::string& k : accounts.api_keys) so.api_keys.push_back({"", k});
  so.admin_key = accounts.admin_key;
  if (!accounts.api_keys_file.empty()) {
    for (auto& k : swz::server::read_api_keys_file(accounts.api_keys_file)) {
      if (k.name != "admin") {
        so.api_keys.push_back(std::move(k));
      } else if (so.admin_key.empty()) {  // "admin KEY": the admin key, kept off the command line
        so.admin_key = k.secret;
      } else {
        throw std::invalid_argument(accounts.api_keys_file + ": an admin key is given twice (file and --admin-key, or two lines)");
      }
    }
  }
  if (!accounts.prices_file.empty()) so.prices = swz::server::PriceTable::load(accounts.prices_file);
  swz::server::ApiKeys check(so.api_keys, so.admin_key);  // duplicate keys/names: an error now, not at bind
  (void)check;
  if (!so.api_keys.empty() || !so.admin_key.empty() || !accounts.prices_file.empty())
    std::fprintf(stderr, "swizzle-rt: %zu API key(s)%s; prices %s\n", so.api_keys.size(),
                 so.admin_key.empty() ? "" : " and an admin key",
                 accounts.prices_file.empty() ? "none (every cost 0)" : ("from " + accounts.prices_file).c_str());

  swz::server::block_shutdown_signals();  // before the engine starts its threads
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Engine> engine = load_engine(package, n_ctx, n_threads, cache_opts);
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto& info = engine->info();
  std::fprintf(stderr, "swizzle-rt: loaded %s (%s, n_ctx %d, vocab %d) on %s in %.0f ms\n", info.id.c_str(),
               info.architecture.c_str(), info.n_ctx, info.n_vocab, info.backend.c_str(), load_ms);
  const swz::engine::CacheStats cs = engine->cache_stats();
  std::fprintf(stderr, "swizzle-rt: KV cache: %llu pages of 64 tokens; prefix cache %s (ttl %ds, host tier %llu MiB, disk tier %s)\n",
               static_cast<unsigned long long>(cs.pages_total), cache_opts.prefix_cache ? "on" : "off", cache_opts.cache_ttl_s,
               static_cast<unsigned long long>(cache_opts.cache_host_mb),
               cache_opts.cache_dir.empty() ? "off" : cache_opts.cache_dir.c_str());

  // Every queued or running request holds a connection thread while it waits for its
  // tokens: leave room for them and for /health, /metrics and other quick requests.
  so.http_threads = http_threads > 0 ? http_threads : cache_opts.parallel + cache_opts.max_queue + 8;
  so.shutdown_grace_s = shutdown_grace_s;
  if (!quiet) {
    auto mu = std::make_shared<std::mutex>();
    so.log = [mu](const std::string& line) {
      std::lock_guard<std::mutex> lock(*mu);
      std::fprintf(stderr, "%s\n", line.c_str());
    };
  }
  return swz::server::serve_until_signal(*engine, host, port, std::move(so));
}

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

/// Generates once, streaming the text to stdout as complete UTF-8 characters; timings to stderr.
int run(const std::string& package, const std::string& prompt, const std::string& system, bool raw, int n_predict,
        int n_ctx, int n_threads, const swz::engine::SamplingParams& sampling, const EngineOptions& cache_opts) {
  std::unique_ptr<Engine> engine = load_engine(package, n_ctx, n_threads, cache_opts);
  swz::engine::GenerateRequest req;
  if (raw) {
    req.prompt = engine->tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  } else {
    std::vector<swz::engine::ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", prompt});
    req.prompt = engine->tokenize_chat(msgs, /*add_generation_prompt=*/true);
  }
  req.max_tokens = n_predict;
  req.sampling = sampling;

  std::signal(SIGINT, on_interrupt);
  swz::server::CompletionText text;
  auto r = engine->generate(req, [&](const swz::engine::TokenEvent& ev) {
    std::string t = text.push(ev.piece);
    if (!t.empty()) {
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
    }
    return g_interrupted == 0;
  });
  std::string rest = text.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const char* finish = r.finish == swz::engine::FinishReason::Stop     ? "stop"
                       : r.finish == swz::engine::FinishReason::Length ? "length"
                                                                        : "cancelled";
  auto rate = [](int n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  std::fprintf(stderr, "\nprompt: %d tokens (%d cached) in %.1f ms (%.1f tok/s)\n", r.prompt_tokens, r.cached_tokens,
               r.prefill_ms, rate(r.prompt_tokens - r.cached_tokens, r.prefill_ms));
  std::fprintf(stderr, "generated: %d tokens in %.1f ms (%.1f tok/s), finish: %s\n", r.completion_tokens, r.decode_ms,
               rate(r.completion_tokens, r.decode_ms), finish);
  std::fprintf(stderr, "speculative: %s, drafted %d, accepted %d (acceptance rate %.3f)\n", g_spec.on ? "on" : "off",
               r.spec_drafted, r.spec_accepted, r.spec_drafted > 0 ? static_cast<double>(r.spec_accepted) / r.spec_drafted : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"swizzle-rt: run and serve models compiled by swizzlec (.swz packages)"};
  app.require_subcommand(1);

  std::string package;
  int n_ctx = 4096;
  int n_threads = 0;

  auto* serve_cmd = app.add_subcommand("serve", "Serve a package over an OpenAI-compatible HTTP API");
  std::string host = "127.0.0.1";
  int port = 8080;
  Accounts accounts;
  int http_threads = 0;
  double shutdown_grace_s = 10.0;
  bool quiet = false;
  serve_cmd->add_option("package", package, "the .swz package (swizzlec compile ... -o model.swz)")->required();
  serve_cmd->add_option("--host", host, "address to listen on")->capture_default_str();
  serve_cmd->add_option("--port", port, "TCP port (0 = any free port; the chosen one is printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve_cmd->add_option("-c,--ctx-size", n_ctx, "context size in tokens (clamped to the model's)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve_cmd->add_option("-t,--threads", n_threads, "CPU threads for the engine (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--api-key", accounts.api_keys, "require 'Authorization: Bearer KEY' on /v1/* (repeatable: any of them)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  serve_cmd->add_option("--api-keys-file", accounts.api_keys_file,
                        "accepted keys, one per line: 'NAME KEY' (NAME labels the usage ledger), 'KEY', or 'admin KEY' (the admin key)")
      ->check(CLI::ExistingFile);
  serve_cmd->add_option("--admin-key", accounts.admin_key, "a key that may read every row of GET /v1/usage");
  serve_cmd->add_option("--prices", accounts.prices_file,
                        "prices of the usage ledger, JSON (USD per million tokens; see docs/server.md)")
      ->check(CLI::ExistingFile);
  serve_cmd->add_option("--http-threads", http_threads, "HTTP connection threads (0 = --parallel + --max-queue + 8: each waiting or running request holds one)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--shutdown-grace", shutdown_grace_s,
                        "SIGINT/SIGTERM: seconds running requests may take to finish before they are cut (with an "
                        "error to their clients)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  serve_cmd->add_flag("-q,--quiet", quiet, "no per-request log lines");
  EngineOptions cache_opts;
  add_cache_options(serve_cmd, cache_opts);
  // The scheduler (docs/server.md, "Scheduling").
  serve_cmd->add_option("--parallel", cache_opts.parallel, "sequences decoded together at most (running slots)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  serve_cmd->add_option("--batch-tokens", cache_opts.batch_tokens,
                        "rows (tokens) per forward pass: decode tokens of the running sequences first, then prompt "
                        "tokens (chunked prefill) up to this budget; >= --parallel")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  serve_cmd->add_option("--max-queue", cache_opts.max_queue,
                        "requests that may wait for a slot or KV pages; beyond --parallel + --max-queue a request gets "
                        "429 with Retry-After")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();

  auto* run_cmd = app.add_subcommand("run", "Generate once from a prompt and print the text");
  std::string prompt;
  std::string system;
  int n_predict = 256;
  swz::engine::SamplingParams sp;  // llama.cpp's defaults for its CLI
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.top_p = 0.95f;
  sp.min_p = 0.05f;
  uint64_t seed = 0;
  bool raw = false;
  run_cmd->add_option("package", package, "the .swz package")->required();
  run_cmd->add_option("-p,--prompt", prompt, "the prompt (a user message with --chat, plain text with --raw)")->required();
  run_cmd->add_option("-n,--max-tokens", n_predict, "tokens to generate at most (-1 = until the end or a full context)")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  run_cmd->add_option("--temp", sp.temperature, "temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0))->capture_default_str();
  run_cmd->add_option("--top-k", sp.top_k, "top-k (0 = off)")->check(CLI::NonNegativeNumber)->capture_default_str();
  run_cmd->add_option("--top-p", sp.top_p, "top-p (1 = off)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  run_cmd->add_option("--min-p", sp.min_p, "min-p (0 = off)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  auto* seed_opt = run_cmd->add_option("--seed", seed, "sampling seed (default: random)");
  run_cmd->add_option("-s,--system", system, "system message (with --chat)");
  bool chat_mode = false;
  auto* chat_flag = run_cmd->add_flag("--chat", chat_mode, "apply the model's chat template (default)");
  auto* raw_flag = run_cmd->add_flag("--raw", raw, "tokenize the prompt as plain text (BOS per the model), no template");
  chat_flag->excludes(raw_flag);
  run_cmd->add_option("-c,--ctx-size", n_ctx, "context size in tokens")->check(CLI::PositiveNumber)->capture_default_str();
  run_cmd->add_option("-t,--threads", n_threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  add_cache_options(run_cmd, cache_opts);  // with --cache-dir, a second run hits the first one's blocks
  for (CLI::App* cmd : {serve_cmd, run_cmd}) {
    cmd->add_flag("--spec,!--no-spec", g_spec.on,
                  "prompt-lookup speculative decoding (default on; same output, faster when the answer repeats the prompt)");
    cmd->add_option("--draft-max", g_spec.draft_max, "longest speculative draft (tokens)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
  }

  CLI11_PARSE(app, argc, argv);

  try {
    if (serve_cmd->parsed()) return serve(package, host, port, n_ctx, n_threads, accounts, http_threads, quiet, cache_opts,
                                          shutdown_grace_s);
    if (*seed_opt) sp.seed = seed;
    return run(package, prompt, system, raw, n_predict, n_ctx, n_threads, sp, cache_opts);
  } catch (const swz::engine::LoadError& e) {
    std::fprintf(stderr, "swizzle-rt: cannot load %s: %s\n", package.c_str(), e.what());
    return 2;
  } catch (const swz::engine::InvalidRequest& e) {
    std::fprintf(stderr, "swizzle-rt: invalid request: %s\n", e.what());
    return 1;
  } catch (const std::invalid_argument& e) {  // keys or prices file
    std::fprintf(stderr, "swizzle-rt: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "swizzle-rt: error: %s\n", e.what());
    return 1;
  }
}
