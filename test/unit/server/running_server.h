// A swizzle-rt Server over a FakeEngine (fake_engine.h) on a free loopback port, serving on
// its own thread for the life of the object: the HTTP-level unit tests' fixture.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <thread>

#include "fake_engine.h"
#include "server.h"

namespace swz::test {

struct RunningServer {
  FakeEngine engine;
  std::unique_ptr<server::Server> server;
  std::thread thread;
  int port = 0;

  RunningServer() = default;
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;
  /// Binds 127.0.0.1:0, serves on `thread` and returns once /health answers 200 (a test
  /// failure after 2 s). Set `engine`'s script first.
  void start(server::ServerOptions opts) {
    server = std::make_unique<server::Server>(engine, std::move(opts));
    port = server->bind("127.0.0.1", 0);
    thread = std::thread([this] { server->run(); });
    httplib::Client c("127.0.0.1", port);
    for (int i = 0; i < 200; ++i) {
      if (auto r = c.Get("/health"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "server did not come up";
  }
  ~RunningServer() {
    if (!server) return;
    server->stop();
    if (thread.joinable()) thread.join();
  }
};

}  // namespace swz::test
