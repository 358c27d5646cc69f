// The HTTP layer's own mechanisms (server/fiber.h, server/http_server.h): fibers suspend
// and wake without losing a wake-up and without holding their thread; over raw sockets,
// pipelined requests, Expect: 100-continue, oversized heads and bodies, HTTP/1.0, and a
// client that hangs up while a non-streamed answer is generated (seen by the pending read,
// the engine's cancel check stops it).
#include "fiber.h"
#include "running_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace {

using nlohmann::json;
using swz::server::Fiber;
using swz::server::FiberPool;
using namespace std::chrono_literals;

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

TEST(Fiber, WaitSuspendsWithoutHoldingTheThreadAndWakeIsNeverLost) {
  FiberPool pool(1);  // one thread: the second fiber runs only if the first one let go of it
  std::atomic<int> stage{0};
  std::shared_ptr<Fiber> a = pool.spawn([&] {
    stage = 1;
    Fiber::current()->wait();  // until b wakes it
    stage = 3;
  });
  ASSERT_TRUE(eventually([&] { return stage == 1; }));
  std::shared_ptr<Fiber> b = pool.spawn([&] {
    stage = 2;
    a->wake();
  });
  EXPECT_TRUE(eventually([&] { return stage == 3; })) << "stage " << stage;

  // A wake before the wait makes that wait return at once (a binary semaphore).
  std::atomic<bool> done{false};
  std::atomic<double> waited_ms{-1};
  std::shared_ptr<Fiber> c;
  std::atomic<bool> go{false};
  c = pool.spawn([&] {
    while (!go) Fiber::current()->wait(1ms);
    c->wake();
    const auto t0 = std::chrono::steady_clock::now();
    Fiber::current()->wait(5000ms);
    waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    done = true;
  });
  go = true;
  ASSERT_TRUE(eventually([&] { return done.load(); }));
  EXPECT_LT(waited_ms.load(), 1000.0);
}

TEST(Fiber, TimeoutEndsAWaitAndManyFibersShareOneThread) {
  FiberPool pool(1);
  std::atomic<int> finished{0};
  std::atomic<std::thread::id> first_thread{};
  std::atomic<bool> one_thread{true};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Fiber>> fibers;
  for (int i = 0; i < 200; ++i)
    fibers.push_back(pool.spawn([&] {
      std::thread::id none{};
      first_thread.compare_exchange_strong(none, std::this_thread::get_id());
      for (int k = 0; k < 5; ++k) {
        Fiber::current()->wait(20ms);  // nobody wakes them: each wait ends by its timeout
        if (std::this_thread::get_id() != first_thread.load()) one_thread = false;
      }
      ++finished;
    }));
  ASSERT_TRUE(eventually([&] { return finished == 200; }, 10000ms)) << finished;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // 200 fibers each waiting 5 x 20 ms on one thread: together, not one after another (20 s).
  EXPECT_LT(ms, 5000.0);
  EXPECT_GE(ms, 95.0);
  EXPECT_TRUE(one_thread) << "a fiber never changes thread";
  EXPECT_EQ(Fiber::current(), nullptr);
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void send_all(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

/// Reads until `n` complete responses with a Content-Length body are in, or the peer closes.
std::string read_responses(int fd, int n, bool* closed = nullptr) {
  std::string got;
  char buf[4096];
  auto complete = [&] {
    size_t pos = 0;
    for (int i = 0; i < n; ++i) {
      size_t head = got.find("\r\n\r\n", pos);
      if (head == std::string::npos) return false;
      size_t cl = got.find("Content-Length: ", pos);
      if (cl == std::string::npos || cl > head) return false;
      pos = head + 4 + std::stoul(got.substr(cl + 16));
      if (pos > got.size()) return false;
    }
    return true;
  };
  if (closed) *closed = false;
  while (!complete()) {
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) {
      if (closed) *closed = r == 0;
      break;
    }
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

/// True when the peer closes `fd` within `ms`.
bool peer_closes(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    if (::poll(&p, 1, 50) > 0) {
      ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0) return true;
      if (r < 0 && errno != EAGAIN) return true;
    }
  }
  return false;
}

std::string chat_request(const std::string& content, bool stream = false, const std::string& extra_headers = "") {
  const std::string body =
      json({{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"stream", stream}}).dump();
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct Served : swz::test::RunningServer {
  Served() {
    engine.pieces = {"Hi", " there"};
    start({});
  }
};

TEST(HttpLayer, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  Served s;
  int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  // A generation (on a fiber) then a probe (on the io thread), sent together.
  send_all(fd, chat_request("hi") + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  bool closed = false;
  const std::string got = read_responses(fd, 2, &closed);
  ::close(fd);
  EXPECT_FALSE(closed);
  const size_t first = got.find("HTTP/1.1 200 OK"), second = got.find("HTTP/1.1 200 OK", first + 1);
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_NE(got.find("\"content\":\"Hi there\""), std::string::npos) << got;
  EXPECT_LT(got.find("chat.completion"), second) << "the chat answer comes first";
  EXPECT_NE(got.find("\"status\":\"ok\"", second), std::string::npos) << got;
}

TEST(HttpLayer, ExpectContinueIsAnsweredBeforeTheBody) {
  Served s;
  int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  const std::string full = chat_request("hi", false, "Expect: 100-continue\r\n");
  const size_t head_end = full.find("\r\n\r\n") + 4;
  send_all(fd, full.substr(0, head_end));
  char buf[256];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, full.substr(head_end));
  const std::string got = read_responses(fd, 1);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK", 0), 0u) << got;
}

TEST(HttpLayer, OversizedHeadIs431AndOversizedBodyIs413BothClosing) {
  Served s;
  int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n");
  bool closed = false;
  std::string got = read_responses(fd, 1, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 431 ", 0), 0u) << got.substr(0, 200);
  EXPECT_NE(got.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(closed || peer_closes(fd, 2000));
  ::close(fd);

  fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 40000000\r\n\r\n{");
  got = read_responses(fd, 1, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 413 ", 0), 0u) << got.substr(0, 200);
  EXPECT_NE(got.find("\"type\":\"request_too_large\""), std::string::npos) << got;  // Anthropic's schema
  EXPECT_NE(got.find("Request body too large (limit 33554432 bytes)."), std::string::npos) << got;
  EXPECT_TRUE(closed || peer_closes(fd, 2000));
  ::close(fd);
}

TEST(HttpLayer, Http10ClosesAfterItsAnswerAndKeepAliveIsTheDefaultFor11) {
  Served s;
  int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /health HTTP/1.0\r\n\r\n");
  bool closed = false;
  std::string got = read_responses(fd, 1, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.0 200 OK", 0), 0u) << got;
  EXPECT_TRUE(closed || peer_closes(fd, 2000));
  ::close(fd);

  fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) {
    send_all(fd, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    got = read_responses(fd, 1, &closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 200 OK", 0), 0u) << got;
    EXPECT_FALSE(closed);
  }
  ::close(fd);
}

TEST(HttpLayer, ClientGoneDuringANonStreamedAnswerCancelsIt) {
  Served s;
  s.engine.endless_trigger = "forever";
  s.engine.token_delay_ms = 2;
  s.engine.info_.n_ctx = 1 << 30;
  int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, chat_request("forever"));  // nothing is written until the answer is complete
  ASSERT_TRUE(eventually([&] { return s.engine.generate_calls == 1; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(s.engine.cancelled, 0);
  ::close(fd);  // the pending read sees the end of stream; the cancel check says stop
  EXPECT_TRUE(eventually([&] { return s.engine.cancelled == 1; }, 3000ms));
  // And the server goes on serving.
  fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, chat_request("hi"));
  const std::string got = read_responses(fd, 1);
  ::close(fd);
  EXPECT_NE(got.find("\"content\":\"Hi there\""), std::string::npos) << got;
}

}  // namespace
