// swizzle-rt: the runtime executable.
//   swizzle-rt serve model.swz [--host H] [--port P] [-c CTX] [-t THREADS] [--api-key KEY]...
//                    [--api-keys-file FILE] [--admin-key KEY] [--prices prices.json]
//                    [--kv-pages N] [--cache-ttl S] [--cache-host-mb M] [--cache-dir DIR]
//                    [--cache-disk-mb M] [--no-prefix-cache] [--shutdown-grace S]
//                    [--parallel N] [--batch-tokens N] [--max-queue N] [--cache-mode exact|reorder]
//   swizzle-rt run   model.swz -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p M]
//                    [--seed S] [--chat|--raw] [--system TEXT]
//                    [--receipts KEYFILE] [--key-store FILE]
//   both: [--spec|--no-spec] [--draft-max N]   (prompt-lookup speculative decoding)
//   swizzle-rt keys add --store FILE --org ORG [--scope general|security]... [--accept-terms V --accepted-by NAME]
//   swizzle-rt keys revoke --store FILE KEY_ID;  swizzle-rt keys list --store FILE
//   swizzle-rt keygen KEYFILE [--force]          (receipt signing key: KEYFILE and KEYFILE.pub)
//   swizzle-rt verify-receipt RECEIPT --pubkey KEY [--request FILE] [--response FILE] [--package DIR]
// See docs/server.md and docs/receipts.md.
#include "engine/engine.h"
#include "key_store.h"
#include "receipt.h"
#include "serve_loop.h"
#include "text_stream.h"

#include <CLI/CLI.hpp>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>

namespace {

using swz::engine::Engine;
using swz::engine::EngineOptions;

/// Speculative-decoding settings shared by `serve` and `run`.
struct SpecFlags {
  bool on = true;
  int draft_max = 16;
  bool pricing = true;
};
SpecFlags g_spec;
std::string g_cache_mode = "exact";  ///< serve --cache-mode (frontend_ast::parse_cache_mode names)
float g_approx_recompute = swz::engine::kApproxRecompute;  ///< serve --approx-recompute
std::string g_approx_select = "deviation";                 ///< serve --approx-select
/// --cache-key: the disk tier's master key file ("" = DIR.key beside --cache-dir DIR).
std::string g_cache_key_path;

/// The disk tier's 32-byte master key from `path`, created (random, mode 0600) when the
/// file does not exist. Kept outside the cache directory: a copy of the directory alone
/// reveals nothing (docs/server.md "Zero data retention"). Throws std::runtime_error.
std::string read_or_create_cache_key(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::string key(32, '\0');
    std::ifstream rnd("/dev/urandom", std::ios::binary);
    if (!rnd.read(key.data(), static_cast<std::streamsize>(key.size())))
      throw std::runtime_error("cannot read /dev/urandom for the disk tier key");
    if (fs::path parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, ec);
      f.write(key.data(), static_cast<std::streamsize>(key.size()));
      if (!f.flush()) throw std::runtime_error("cannot write the disk tier key " + tmp);
    }
    fs::rename(tmp, path, ec);
    if (ec) throw std::runtime_error("cannot write the disk tier key " + path + ": " + ec.message());
    std::fprintf(stderr, "swizzle-rt: created the disk tier key %s (keep it; without it the disk tier cannot be read)\n",
                 path.c_str());
    return key;
  }
  std::ifstream f(path, std::ios::binary);
  std::string key((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (key.size() != 32) throw std::runtime_error("the disk tier key " + path + " is not 32 bytes");
  return key;
}

std::unique_ptr<Engine> load_engine(const std::string& package, int n_ctx, int n_threads, EngineOptions eo = {}) {
  if (!eo.cache_dir.empty()) {
    std::string dir = eo.cache_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    eo.cache_key = read_or_create_cache_key(g_cache_key_path.empty() ? dir + ".key" : g_cache_key_path);
  }
  eo.n_ctx = n_ctx;
  eo.n_threads = n_threads;
  eo.speculative = g_spec.on;
  eo.spec_draft_max = g_spec.draft_max;
  eo.spec_pricing = g_spec.pricing;
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
  cmd->add_option("--approx-atoms", eo.approx_atoms,
                  "cache mode approx: code atoms indexed for reuse at other positions (their K/V stays in the prefix cache; 0 = none)")
      ->capture_default_str();
  cmd->add_option("--cache-dir", eo.cache_dir, "prefix cache: disk tier directory (survives restarts; default: none)");
  cmd->add_option("--cache-disk-mb", eo.cache_disk_mb, "prefix cache: disk tier budget, MiB")->capture_default_str();
  cmd->add_option("--cache-key", g_cache_key_path,
                  "prefix cache: the disk tier's 32-byte master key file, created when missing (default: DIR.key beside --cache-dir DIR)");
  cmd->add_flag("--no-prefix-cache", [&eo](int64_t) { eo.prefix_cache = false; }, "do not share or keep KV blocks between requests");
}

/// Serves until SIGINT/SIGTERM (serve_loop.h).
/// Keys and prices of the server, read before the model loads so a bad file fails fast.
struct Accounts {
  std::vector<std::string> api_keys;  ///< --api-key (repeatable)
  std::string api_keys_file;          ///< --api-keys-file: "NAME KEY" or "KEY" per line
  std::string admin_key;              ///< --admin-key
  std::string prices_file;            ///< --prices
  std::string receipts_key;           ///< --receipts: the Ed25519 signing key file (swizzle-rt keygen)
  std::string key_store;              ///< --key-store: per-organisation keys with scopes (swizzle-rt keys)
};

int serve(const std::string& package, const std::string& host, int port, int n_ctx, int n_threads,
          const Accounts& accounts, int http_threads, bool quiet, const EngineOptions& cache_opts, double shutdown_grace_s) {
  // Zero data retention: a crash must not write the process memory (prompts, completions,
  // KV) to disk. No core file (RLIMIT_CORE 0), and not dumpable, which also stops a
  // core_pattern pipe (systemd-coredump) and ptrace / /proc/PID/mem readers of the same uid.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
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
  std::optional<swz::server::ReceiptKey> receipt_key;  // read before the model loads: a bad file fails fast
  if (!accounts.receipts_key.empty()) receipt_key = swz::server::read_receipt_secret_key(accounts.receipts_key);
  if (!accounts.key_store.empty()) {  // a bad store fails now; the server re-reads it when it changes
    const swz::server::KeyStoreData ks = swz::server::KeyStoreData::load(accounts.key_store);
    size_t active = 0;
    for (const auto& k : ks.keys) active += k.revoked.empty();
    std::fprintf(stderr, "swizzle-rt: key store %s: %zu active key(s) of %zu organisation(s) with accepted terms\n",
                 accounts.key_store.c_str(), active, ks.terms.size());
    so.key_store = accounts.key_store;
  }
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

  if (receipt_key) {
    auto signer = std::make_shared<swz::server::ReceiptSigner>(
        *receipt_key, swz::server::read_model_identity(info.package_path, info.id));
    std::fprintf(stderr, "swizzle-rt: signing execution receipts with key %s (manifest blake3 %.16s...)\n",
                 signer->key_id().c_str(), signer->model().manifest_blake3.c_str());
    so.receipts = std::move(signer);
  }
  // Every queued or running request holds a connection thread while it waits for its
  // tokens: leave room for them and for /health, /metrics and other quick requests.
  so.http_threads = http_threads;  // 0: the server's default (http_server.h)
  so.shutdown_grace_s = shutdown_grace_s;
  so.cache_mode = *swz::frontend_ast::parse_cache_mode(g_cache_mode);  // checked by the option's validator
  so.approx_recompute = g_approx_recompute;
  so.approx_select = *swz::engine::parse_approx_select(g_approx_select);  // checked by the option's validator
  if (!quiet) {
    auto mu = std::make_shared<std::mutex>();
    so.log = [mu](const std::string& line) {
      std::lock_guard<std::mutex> lock(*mu);
      std::fprintf(stderr, "%s\n", line.c_str());
    };
  }
  return swz::server::serve_until_signal(*engine, host, port, std::move(so));
}

/// `swizzle-rt keygen KEYFILE`: a fresh Ed25519 key pair, KEYFILE (secret, 0600) and KEYFILE.pub.
int keygen(const std::string& path, bool force) {
  const swz::server::ReceiptKey key = swz::server::generate_receipt_key();
  swz::server::write_receipt_key(key, path, path + ".pub", force);
  std::printf("key id %s\nsecret key: %s (serve --receipts %s)\npublic key: %s.pub (verify-receipt --pubkey %s.pub)\n",
              swz::server::receipt_key_id(key.public_key).c_str(), path.c_str(), path.c_str(), path.c_str(), path.c_str());
  return 0;
}

std::string read_text(const std::string& path) {
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw std::invalid_argument(path + ": cannot be read");
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  if (f != stdin) std::fclose(f);
  return s;
}

/// `swizzle-rt verify-receipt`: prints one line per check ("ok   ..." / "FAIL ..."), then a
/// verdict. RECEIPT is the receipt itself, a file holding it, or a saved response that
/// carries one (then also checked as --response unless another is given). Exit status 0
/// when everything matches, 1 when something does not, 2 when an input cannot be used.
int verify_receipt_cmd(const std::string& receipt_arg, const std::string& pubkey, const std::string& request_file,
                       const std::string& response_file, const std::string& package_dir) {
  std::array<unsigned char, 32> pk;
  swz::server::VerifyInputs in;
  std::string receipt = receipt_arg;
  try {
    pk = swz::server::read_receipt_public_key(pubkey);
    if (receipt.rfind(std::string(swz::server::kReceiptPrefix) + ".", 0) != 0) {
      const std::string text = read_text(receipt_arg);
      const size_t first = text.find_first_not_of(" \t\r\n");
      if (first != std::string::npos && text.compare(first, 6, std::string(swz::server::kReceiptPrefix) + ".") == 0) {
        receipt = text;
      } else {  // a saved response: its own receipt
        receipt = swz::server::digest_response(text).receipt;
        if (receipt.empty()) throw std::invalid_argument(receipt_arg + ": neither a receipt nor a response carrying one");
        if (response_file.empty()) in.response = text;
      }
    }
    if (!request_file.empty()) in.request = read_text(request_file);
    if (!response_file.empty()) in.response = read_text(response_file);
    if (!package_dir.empty()) in.model = swz::server::read_model_identity(package_dir, "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "swizzle-rt: verify-receipt: %s\n", e.what());
    return 2;
  }
  const swz::server::ReceiptVerification v = swz::server::verify_receipt(receipt, pk, in);
  if (!v.payload.is_null()) std::printf("receipt: %s\n", v.payload.dump(2).c_str());
  for (const std::string& c : v.checked) std::printf("ok   %s\n", c.c_str());
  for (const std::string& p : v.problems) std::printf("FAIL %s\n", p.c_str());
  std::printf("%s\n", v.ok() ? "receipt verified" : "receipt NOT verified");
  return v.ok() ? 0 : 1;
}

/// `swizzle-rt keys add|revoke|list|set --store FILE` (key_store.h). `add` prints the secret
/// alone on stdout (shown once; the store keeps its SHA-256) and what was issued on stderr.
int keys_cmd(const std::string& action, const std::string& store, const std::string& org, const std::vector<std::string>& scopes,
             const std::string& terms_version, const std::string& accepted_by, const std::string& key_id,
             const std::string& security_disk_cache = "") {
  swz::server::KeyStoreData d = swz::server::KeyStoreData::load(store);
  if (action == "set") {
    const bool on = security_disk_cache == "on";
    d.set_security_disk_cache(org, on);
    d.save(store);
    std::fprintf(stderr, "swizzle-rt: organisation '%s': security keys %s the prefix cache's disk tier\n", org.c_str(),
                 on ? "may use" : "do not use");
    return 0;
  }
  if (action == "add") {
    std::optional<swz::server::TermsAcceptance> terms;
    if (!terms_version.empty() || !accepted_by.empty()) terms = swz::server::TermsAcceptance{terms_version, accepted_by, ""};
    auto [id, secret] = d.add(org, scopes.empty() ? std::vector<std::string>{swz::server::kScopeGeneral} : scopes, terms);
    d.save(store);
    const auto& k = d.keys.back();
    std::string sc;
    for (const auto& s : k.scopes) sc += (sc.empty() ? "" : ",") + s;
    std::printf("%s\n", secret.c_str());
    std::fprintf(stderr, "swizzle-rt: issued %s to organisation '%s' (scopes %s); the secret above is shown once, %s keeps only its SHA-256\n",
                 id.c_str(), org.c_str(), sc.c_str(), store.c_str());
    return 0;
  }
  if (action == "revoke") {
    d.revoke(key_id);
    d.save(store);
    std::fprintf(stderr, "swizzle-rt: revoked %s (a server with --key-store %s refuses it from its next request)\n",
                 key_id.c_str(), store.c_str());
    return 0;
  }
  std::printf("%-16s %-20s %-17s %-20s %s\n", "ID", "ORGANISATION", "SCOPES", "CREATED", "REVOKED");
  for (const auto& k : d.keys) {
    std::string sc;
    for (const auto& s : k.scopes) sc += (sc.empty() ? "" : ",") + s;
    std::printf("%-16s %-20s %-17s %-20s %s\n", k.id.c_str(), k.org.c_str(), sc.c_str(), k.created.c_str(),
                k.revoked.empty() ? "-" : k.revoked.c_str());
  }
  for (const auto& [o, t] : d.terms)
    std::printf("terms: organisation '%s' accepted version '%s' (by %s, %s)\n", o.c_str(), t.version.c_str(),
                t.accepted_by.c_str(), t.accepted_at.c_str());
  for (const auto& o : d.security_disk_cache)
    std::printf("disk tier: organisation '%s' lets its security keys use it\n", o.c_str());
  return 0;
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
  serve_cmd->add_option("--http-threads", http_threads, "Threads of the request handlers' fibers (0 = the CPU count, 2..8); connections and waiting or streaming requests hold no thread")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--shutdown-grace", shutdown_grace_s,
                        "SIGINT/SIGTERM: seconds running requests may take to finish before they are cut (with an "
                        "error to their clients)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  serve_cmd->add_flag("-q,--quiet", quiet, "no per-request log lines");
  serve_cmd
      ->add_option("--approx-recompute", g_approx_recompute,
                   "cache mode approx: share of each reused code atom recomputed, 0..1, for requests "
                   "without swizzle_approx_recompute")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  serve_cmd
      ->add_option("--approx-select", g_approx_select,
                   "cache mode approx: which tokens of each reused code atom are recomputed, for requests without "
                   "swizzle_approx_select: deviation (its first 2, then those whose layer-1 K/V deviates most, as "
                   "CacheBlend) or head (its first ones, as EPIC)")
      ->check(CLI::IsMember({"deviation", "head"}))
      ->capture_default_str();
  serve_cmd
      ->add_option("--cache-mode", g_cache_mode,
                   "prompt cache mode of requests that name none (field swizzle_cache_mode / header "
                   "X-Swizzle-Cache-Mode): exact (prompt untouched), reorder (code atoms in a canonical order) or "
                   "approx (experimental: code atoms' K/V reused at other positions, RoPE re-rotated; answers may "
                   "differ from exact's; docs/server.md)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "exact" || v == "reorder" || v == "approx") return "";
            return "expected exact, reorder or approx, got '" + v + "'";
          },
          "exact|reorder|approx"))
      ->capture_default_str();
  serve_cmd->add_option("--receipts", accounts.receipts_key,
                        "sign an execution receipt for every response with this Ed25519 key (swizzle-rt keygen; "
                        "docs/receipts.md)")
      ->check(CLI::ExistingFile);
  serve_cmd->add_option("--key-store", accounts.key_store,
                        "per-organisation keys with scopes (swizzle-rt keys; re-read when it changes); /v1/security/* "
                        "needs the security scope")
      ->check(CLI::ExistingFile);
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
  run_cmd->add_option("--batch-tokens", cache_opts.batch_tokens,
                      "rows (tokens) per forward pass: the prompt is prefilled in chunks of this many tokens")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  for (CLI::App* cmd : {serve_cmd, run_cmd}) {
    cmd->add_flag("--spec,!--no-spec", g_spec.on,
                  "prompt-lookup speculative decoding (default on; same output, faster when the answer repeats the prompt)");
    cmd->add_option("--draft-max", g_spec.draft_max, "longest speculative draft (tokens)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    cmd->add_flag("--spec-pricing,!--no-spec-pricing", g_spec.pricing,
                  "take a draft token only when its estimated acceptance pays for the row it costs, from the measured "
                  "step times (default on; --no-spec-pricing: every draft the prompt lookup proposes)");
  }

  auto* keygen_cmd = app.add_subcommand("keygen", "Write an Ed25519 key pair for execution receipts (KEYFILE, KEYFILE.pub)");
  std::string key_path;
  bool force = false;
  keygen_cmd->add_option("keyfile", key_path, "the secret key file to write (mode 0600); the public key goes to KEYFILE.pub")
      ->required();
  keygen_cmd->add_flag("--force", force, "replace an existing key file");

  auto* verify_cmd = app.add_subcommand("verify-receipt", "Check an execution receipt's signature and hashes (docs/receipts.md)");
  std::string receipt_arg, pubkey, request_file, response_file, package_dir;
  verify_cmd->add_option("receipt", receipt_arg,
                         "the receipt (swzr1....), a file holding it, or a saved response carrying one ('-' = stdin)")
      ->required();
  verify_cmd->add_option("--pubkey", pubkey, "the signer's public key: 64 hex digits or a KEYFILE.pub")->required();
  verify_cmd->add_option("--request", request_file, "the request body as sent: checks request_blake3 and the sampling fields");
  verify_cmd->add_option("--response", response_file,
                         "the response as received (JSON body, or the raw SSE bytes of a stream): checks response_blake3, "
                         "the receipt it carries and its usage");
  verify_cmd->add_option("--package", package_dir, "a local .swz package: checks manifest_blake3 and gguf_content_hash");

  auto* keys_app = app.add_subcommand("keys", "Manage per-organisation API keys with scopes (a --key-store file)");
  keys_app->require_subcommand(1);
  std::string store_path, org, terms_version, accepted_by, revoke_id;
  std::vector<std::string> scopes;
  auto* keys_add = keys_app->add_subcommand("add", "Issue a key to an organisation; prints the secret once");
  auto* keys_revoke = keys_app->add_subcommand("revoke", "Revoke a key by its id");
  auto* keys_list = keys_app->add_subcommand("list", "List keys (never secrets) and accepted terms");
  auto* keys_set = keys_app->add_subcommand("set", "Change an organisation's settings");
  std::string security_disk_cache;
  keys_set->add_option("--org", org, "the organisation")->required();
  keys_set->add_option("--security-disk-cache", security_disk_cache,
                       "on: the organisation's security keys may use the prefix cache's disk tier (default off)")
      ->required()
      ->check(CLI::IsMember({"on", "off"}));
  for (CLI::App* c : {keys_add, keys_revoke, keys_list, keys_set})
    c->add_option("--store", store_path, "the key store file (created by the first add)")->required();
  keys_add->add_option("--org", org, "the organisation")->required();
  keys_add->add_option("--scope", scopes, "general (default) and/or security (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  keys_add->add_option("--accept-terms", terms_version,
                       "record that the organisation accepted this version of the acceptable-use terms (needed once "
                       "before its first security key)");
  keys_add->add_option("--accepted-by", accepted_by, "who accepted the terms for the organisation");
  keys_revoke->add_option("key_id", revoke_id, "the key's id (keys list)")->required();

  CLI11_PARSE(app, argc, argv);

  if (keys_app->parsed()) {
    try {
      return keys_cmd(keys_add->parsed()      ? "add"
                      : keys_revoke->parsed() ? "revoke"
                      : keys_set->parsed()    ? "set"
                                              : "list",
                      store_path, org, scopes, terms_version, accepted_by, revoke_id, security_disk_cache);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "swizzle-rt: keys: %s\n", e.what());
      return 1;
    }
  }
  if (keygen_cmd->parsed()) {
    try {
      return keygen(key_path, force);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "swizzle-rt: keygen: %s\n", e.what());
      return 1;
    }
  }
  if (verify_cmd->parsed()) return verify_receipt_cmd(receipt_arg, pubkey, request_file, response_file, package_dir);

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
