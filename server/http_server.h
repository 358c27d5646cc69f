// The HTTP/1.1 layer of swizzle-rt: Boost.Asio + Boost.Beast, asynchronous throughout.
//
//   io threads (HttpServerOptions::io_threads, 2)   one io_context; accept, read, write of every
//                                                   connection, each on its own strand. An idle
//                                                   keep-alive connection is a pending read: no
//                                                   thread. Probes and other cheap routes
//                                                   (On::IoThread: /health, /metrics, /v1/models)
//                                                   are answered right there, so they answer at
//                                                   once whatever the generations do.
//   handler fibers (fiber.h, handler_threads)       a request for an On::Fiber route runs its
//                                                   handler on a fiber: parse the JSON, admit,
//                                                   run the engine. Waiting for the engine's
//                                                   next token (Admission::EventWait, see
//                                                   fiber_event_wait) and for each chunk's
//                                                   write suspends the fiber: a running stream
//                                                   holds a stack, not a thread.
//
// A request: the head is read (<= max_header_bytes) and its framing checked (Content-Length
// must be digits, several must agree, a POST needs one or chunked: 400 / 411 and close,
// RFC 9112 §6.3), then parsed by Beast's request_parser; pre_routing may answer before the
// body is read (auth, shutdown); the body is read (> max_body_bytes: 413 and close;
// "Expect: 100-continue" answered); then the route runs. While a fiber handles it, one read
// stays outstanding on the socket: end of stream or a reset marks the request's
// Request::gone and wakes the fiber, so the engine's cancel check sees the disconnect
// before its next step (no polling of sockets). Bytes a client pipelines meanwhile are kept
// for the next request. Keep-alive as the request asks, unless the response says close or
// the server drains.
#pragma once

#include "http.h"

#include "engine/engine.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace swz::server {

struct HttpServerOptions {
  size_t max_body_bytes = 32u << 20;   ///< larger bodies: 413, connection closed
  size_t max_header_bytes = 64u << 10; ///< larger request heads: 431, connection closed
  int io_threads = 2;                  ///< threads running the sockets' io_context
  int handler_threads = 2;             ///< threads of the handler fibers
  std::chrono::milliseconds keep_alive{120'000};   ///< an idle connection is closed after this
  std::chrono::milliseconds read_timeout{30'000};  ///< each read of a started request (head, body)
  std::chrono::milliseconds write_timeout{60'000}; ///< each write of a response (a stalled reader)
};

class HttpServer {
 public:
  using Handler = std::function<void(const http::Request&, http::Response&)>;
  /// Where a route's handler runs: on the io thread (must be quick and never block: probes,
  /// listings), or on a fiber of the handler pool (anything that parses bodies or runs the
  /// engine).
  enum class On { IoThread, Fiber };

  explicit HttpServer(HttpServerOptions opts);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// `method` `path` (exact) runs `handler`. Set routes before run().
  void route(const std::string& method, const std::string& path, Handler handler, On where = On::Fiber);
  /// `method` on any path that starts with `prefix` and is longer; Request::path_param is the rest.
  void route_prefix(const std::string& method, const std::string& prefix, Handler handler, On where = On::IoThread);

  /// After the head, before the body (io thread): return true when `res` answers the
  /// request (the body is then not read, and the connection closes if it had one).
  std::function<bool(const http::Request&, http::Response&)> pre_routing;
  /// Fills the body of an error the server itself answers (res.status: 400 malformed or
  /// bad Content-Length, 404 no route, 411, 413, 431) from `message` (io thread).
  std::function<void(const http::Request&, http::Response&, const std::string& message)> error_page;
  /// A handler threw `what`: fill `res` (500).
  std::function<void(const http::Request&, http::Response&, const std::string& what)> on_exception;
  /// Every response whose head was written, with its status (metrics).
  std::function<void(const http::Request&, int status)> on_response;

  /// Binds host:port (0 = any free port) and listens; returns the bound port. Throws
  /// std::runtime_error when the address cannot be bound.
  int bind(const std::string& host, int port);
  /// Accepts and serves until the listener is closed (stop_accepting) and every connection
  /// has ended; the calling thread is one of the io threads.
  void run();
  /// Closes the listener (new connections are refused); from any thread.
  void stop_accepting();
  /// From now on every response closes its connection after it is written.
  void set_draining();
  /// Closes every connection that is not handling a request (idle keep-alive ones, and
  /// those still reading a request), so run() need not wait for their timeouts.
  void close_idle();
  /// Connections open now (accepted, not yet closed).
  int connections() const;

 private:
  class Session;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// For a handler running on a fiber: makes run() suspend this fiber instead of blocking its
/// thread while it waits for the engine's next event (Admission::set_event_wait). Outside a
/// fiber, an empty EventWait (run() blocks as before).
engine::Admission::EventWait fiber_event_wait();

}  // namespace swz::server
