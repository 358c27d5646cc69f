#include "serve_loop.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
  // Every connection is a descriptor (an idle keep-alive one too, and it costs no thread):
  // allow as many as the hard limit permits, not the usual soft 1024.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, opts.shutdown_grace_s) * 1000.0));
  Server server(engine, std::move(opts));
  const int bound = server.bind(host, port);

  std::atomic<bool> done{false};
  std::thread stopper;  // runs Server::shutdown (it blocks for up to the grace period)
  std::thread watcher([&] {
    const sigset_t set = shutdown_set();
    const timespec tick{0, 100'000'000};
    while (!done) {
      int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig <= 0) continue;
      if (stopper.joinable()) {
        std::fprintf(stderr, "swizzle-rt: second signal, exiting now\n");
        std::_Exit(128 + sig);
      }
      std::fprintf(stderr, "swizzle-rt: %s received, shutting down (grace period %.1f s; a second signal exits at once)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM", grace.count() / 1000.0);
      // Also right for a signal that came before run() started (shutdown() waits for it).
      stopper = std::thread([&server, grace] {
        server.shutdown(grace, [](const std::string& line) { std::fprintf(stderr, "swizzle-rt: %s\n", line.c_str()); });
      });
    }
  });

  std::printf("swizzle-rt: listening on http://%s:%d\n", host.c_str(), bound);
  std::fflush(stdout);
  const bool ok = server.run();
  done = true;
  watcher.join();
  if (stopper.joinable()) stopper.join();
  std::fprintf(stderr, "swizzle-rt: stopped\n");
  return ok ? 0 : 1;
}

}  // namespace swz::server
