// swz_fake_serve PORT [N_CTX [SHUTDOWN_GRACE_S]]: the real HTTP layer
// (serve_until_signal) over the scripted FakeEngine, so the official SDKs can be tested
// against the wire format with a known completion. The completion is kFakePieces (emoji
// and CJK cut inside characters); a prompt containing "forever" streams "tok " until
// cancelled; one containing "slowly" takes 50 ms per token (half a second in all).
#include "fake_engine.h"
#include "serve_loop.h"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  swz::server::block_shutdown_signals();
  int port = argc > 1 ? std::stoi(argv[1]) : 0;
  swz::test::FakeEngine engine;
  if (argc > 2) engine.info_.n_ctx = std::stoi(argv[2]);
  swz::server::ServerOptions opts;
  if (argc > 3) opts.shutdown_grace_s = std::stod(argv[3]);
  engine.pieces = {"Hel", "lo", " \xF0\x9F", "\x98", "\x80 \xE4", "\xB8\x96\xE7\x95\x8C", "!", " \xF0\x9F\x87\xAB",
                   "\xF0\x9F\x87\xB7", " done."};
  // Tool calls in the Hermes/Qwen2.5 syntax (server/tool_calls.h): a prompt offering a
  // tool named get_weather answers with text and a call; one whose assistant prefix
  // forces a call (tool_choice any) continues inside it.
  engine.scripts.push_back({"tools:get_weather,",
                            {"Let me check", ".\n", "<tool", "_call>\n{\"name\": \"get_weather\", ",
                             "\"arguments\": {\"city\": \"Par", "is\"}}\n</tool_call>", "\nignored"}});
  engine.scripts.push_back({"<tool_call>\n{\"name\": \"",
                            {"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "\n</tool_call>"}});
  engine.endless_trigger = "forever";
  engine.token_delay_ms = 1;
  engine.slow_trigger = "slowly";
  engine.slow_delay_ms = 50;
  opts.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return swz::server::serve_until_signal(engine, "127.0.0.1", port, opts);
}
