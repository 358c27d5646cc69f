// swizzle-rt: the runtime executable.
//   swizzle-rt serve model.swz [--host H] [--port P] [-c CTX] [-t THREADS] [--api-key KEY]
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

std::unique_ptr<Engine> load_engine(const std::string& package, int n_ctx, int n_threads) {
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.n_threads = n_threads;
  eo.speculative = g_spec.on;
  eo.spec_draft_max = g_spec.draft_max;
  return Engine::load(package, eo);
}

/// Serves until SIGINT/SIGTERM (serve_loop.h).
int serve(const std::string& package, const std::string& host, int port, int n_ctx, int n_threads,
          const std::string& api_key, int http_threads, bool quiet) {
  swz::server::block_shutdown_signals();  // before the engine starts its threads
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Engine> engine = load_engine(package, n_ctx, n_threads);
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto& info = engine->info();
  std::fprintf(stderr, "swizzle-rt: loaded %s (%s, n_ctx %d, vocab %d) in %.0f ms\n", info.id.c_str(),
               info.architecture.c_str(), info.n_ctx, info.n_vocab, load_ms);

  swz::server::ServerOptions so;
  so.api_key = api_key;
  so.http_threads = http_threads;
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
        int n_ctx, int n_threads, const swz::engine::SamplingParams& sampling) {
  std::unique_ptr<Engine> engine = load_engine(package, n_ctx, n_threads);
  swz::engine::GenerateRequest req;
  if (raw) {
    req.prompt = engine->tokenize(prompt, /*add_special=*/true);
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
  std::string api_key;
  int http_threads = 0;
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
  serve_cmd->add_option("--api-key", api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  serve_cmd->add_option("--http-threads", http_threads, "HTTP connection threads (0 = max(8, cores))")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_flag("-q,--quiet", quiet, "no per-request log lines");

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
  for (CLI::App* cmd : {serve_cmd, run_cmd}) {
    cmd->add_flag("--spec,!--no-spec", g_spec.on,
                  "prompt-lookup speculative decoding (default on; same output, faster when the answer repeats the prompt)");
    cmd->add_option("--draft-max", g_spec.draft_max, "longest speculative draft (tokens)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
  }

  CLI11_PARSE(app, argc, argv);

  try {
    if (serve_cmd->parsed()) return serve(package, host, port, n_ctx, n_threads, api_key, http_threads, quiet);
    if (*seed_opt) sp.seed = seed;
    return run(package, prompt, system, raw, n_predict, n_ctx, n_threads, sp);
  } catch (const swz::engine::LoadError& e) {
    std::fprintf(stderr, "swizzle-rt: cannot load %s: %s\n", package.c_str(), e.what());
    return 2;
  } catch (const swz::engine::InvalidRequest& e) {
    std::fprintf(stderr, "swizzle-rt: invalid request: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "swizzle-rt: error: %s\n", e.what());
    return 1;
  }
}
