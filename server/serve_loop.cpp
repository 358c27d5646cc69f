#include "serve_loop.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

namespace swz::server {

namespace {
sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void block_shutdown_signals() {
  sigset_t set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int serve_until_signal(engine::Engine& engine, const std::string& host, int port, ServerOptions opts) {
  block_shutdown_signals();  // (again, for callers that forgot; threads made before keep their mask)
  Server server(engine, std::move(opts));
  const int bound = server.bind(host, port);

  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const sigset_t set = shutdown_set();
    bool stopping = false;
    const timespec tick{0, 100'000'000};
    while (!done) {
      int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig > 0) {
        if (stopping) {
          std::fprintf(stderr, "swizzle-rt: second signal, exiting now\n");
          std::_Exit(128 + sig);
        }
        stopping = true;
        std::fprintf(stderr, "swizzle-rt: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      }
      // Repeated every tick: also covers a signal that came before run() started.
      if (stopping) server.stop();
    }
  });

  std::printf("swizzle-rt: listening on http://%s:%d\n", host.c_str(), bound);
  std::fflush(stdout);
  const bool ok = server.run();
  done = true;
  watcher.join();
  std::fprintf(stderr, "swizzle-rt: stopped\n");
  return ok ? 0 : 1;
}

}  // namespace swz::server
