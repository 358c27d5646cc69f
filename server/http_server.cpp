#include "http_server.h"

#include "fiber.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

namespace swz::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

bool http::CaseLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) < std::tolower(y);
  });
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.remove_suffix(1);
  return v;
}

/// What the raw head says about framing, read before Beast parses it (Beast refuses a bad
/// Content-Length without saying which value it was).
struct RawHead {
  std::string method, target;
  std::vector<std::string> content_lengths;  // non-empty values, trimmed
  bool transfer_encoding = false;
};

RawHead scan_head(std::string_view head) {
  RawHead h;
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  if (sp1 != std::string_view::npos) {
    h.method = std::string(line.substr(0, sp1));
    size_t sp2 = line.find(' ', sp1 + 1);
    h.target = std::string(line.substr(sp1 + 1, sp2 == std::string_view::npos ? std::string_view::npos : sp2 - sp1 - 1));
  }
  while (eol != std::string_view::npos) {
    size_t start = eol + 2;
    eol = head.find("\r\n", start);
    std::string_view l = head.substr(start, eol == std::string_view::npos ? std::string_view::npos : eol - start);
    size_t colon = l.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = l.substr(0, colon), value = trim(l.substr(colon + 1));
    if (iequals(name, "Content-Length") && !value.empty()) h.content_lengths.emplace_back(value);
    if (iequals(name, "Transfer-Encoding") && !value.empty()) h.transfer_encoding = true;
  }
  return h;
}

/// RFC 9110 §8.6: Content-Length = 1*DIGIT, and several fields must agree; RFC 9112 §6.3:
/// an invalid one is unrecoverable framing. A POST / PUT / PATCH with neither
/// Content-Length nor Transfer-Encoding (an empty `Content-Length:` too) is 411: its body
/// would otherwise be read as the next request. Returns {status, message}, status 0 = fine.
std::pair<int, std::string> check_framing(const RawHead& h) {
  if ((h.method == "POST" || h.method == "PUT" || h.method == "PATCH") && h.content_lengths.empty() && !h.transfer_encoding)
    return {411, "A " + h.method + " request needs a Content-Length header (or Transfer-Encoding: chunked)."};
  std::optional<std::string> seen;
  for (const std::string& v : h.content_lengths) {
    const bool digits = v.size() <= 19 &&  // 19 digits always fit in int64
                        std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits)
      return {400, "Invalid Content-Length header '" + v + "': expected a non-negative decimal integer of at most 19 digits."};
    if (seen && std::stoull(*seen) != std::stoull(v)) return {400, "Conflicting Content-Length headers ('" + *seen + "' and '" + v + "')."};
    seen = v;
  }
  return {0, ""};
}

std::string path_of(const std::string& target) { return target.substr(0, target.find('?')); }

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o) : opts(o), acceptor(net::make_strand(io)), fibers(o.handler_threads) {}

  struct Route {
    Handler handler;
    On where = On::Fiber;
  };
  HttpServerOptions opts;
  std::unordered_map<std::string, Route> exact;                  // "METHOD path"
  std::vector<std::tuple<std::string, std::string, Route>> prefixes;  // method, prefix, route
  // Declared before the io_context: pending handlers (which own sessions) are destroyed
  // first, and a session's destructor deregisters itself here.
  mutable std::mutex sessions_mu;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  std::atomic<bool> draining{false};
  std::atomic<bool> idle_closed{false};  // close_idle() was called
  net::io_context io;
  tcp::acceptor acceptor;  // on a strand of its own: accepting and stop_accepting() never overlap
  FiberPool fibers;

  const Route* find(http::Request& req) const {
    if (auto it = exact.find(req.method + " " + req.path); it != exact.end()) return &it->second;
    for (const auto& [method, prefix, route] : prefixes)
      if (req.method == method && req.path.size() > prefix.size() && req.path.compare(0, prefix.size(), prefix) == 0) {
        req.path_param = req.path.substr(prefix.size());
        return &route;
      }
    return nullptr;
  }
};

/// One connection. Everything but `gone_` and the fiber's writes runs on the connection's
/// strand; the fiber posts its writes there and waits for their completion.
class HttpServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer& server, tcp::socket socket) : srv_(server), s_(*server.impl_), stream_(std::move(socket)) {}
  ~Session() {
    std::lock_guard<std::mutex> lock(s_.sessions_mu);
    s_.sessions.erase(this);
  }

  void start() {
    {
      std::lock_guard<std::mutex> lock(s_.sessions_mu);
      s_.sessions.emplace(this, weak_from_this());
    }
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_head(); });
  }

  /// close_idle(): on the strand, ends the connection unless a handler runs for it.
  void close_unless_handling() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->in_exchange_) self->close();
    });
  }

 private:
  // ---- reading a request ---------------------------------------------------------------

  void read_head() {
    if (closed_) return;
    // An empty line before a request-line is ignored (RFC 9112 §2.2), e.g. a CRLF a client
    // sent after a body.
    while (buf_.size() >= 2 && std::string_view(static_cast<const char*>(buf_.data().data()), 2) == "\r\n") buf_.consume(2);
    if (s_.idle_closed && buf_.size() == 0) return close();  // after close_idle(): no new request
    const std::string_view data(static_cast<const char*>(buf_.data().data()), buf_.size());
    const size_t end = data.find("\r\n\r\n");
    if (end != std::string_view::npos && end + 4 <= s_.opts.max_header_bytes) return on_head(end + 4);
    if (end != std::string_view::npos || buf_.size() > s_.opts.max_header_bytes) {
      req_ = std::make_shared<http::Request>();
      return answer_error(431, "Request header fields too large (limit " + std::to_string(s_.opts.max_header_bytes) + " bytes).");
    }
    // Idle between requests: the keep-alive timeout; inside a request: the read timeout.
    stream_.expires_after(buf_.size() == 0 ? s_.opts.keep_alive : s_.opts.read_timeout);
    stream_.async_read_some(buf_.prepare(16384), [self = shared_from_this()](error_code ec, size_t n) {
      self->buf_.commit(n);
      if (ec) return self->close();
      self->read_head();
    });
  }

  void on_head(size_t head_bytes) {
    const std::string_view head(static_cast<const char*>(buf_.data().data()), head_bytes);
    const RawHead raw = scan_head(head);
    req_ = std::make_shared<http::Request>();
    req_->method = raw.method;
    req_->target = raw.target;
    req_->path = path_of(raw.target);
    if (auto [status, message] = check_framing(raw); status) return answer_error(status, message);

    parser_.emplace();
    parser_->eager(false);
    parser_->header_limit(static_cast<std::uint32_t>(s_.opts.max_header_bytes));
    parser_->body_limit(s_.opts.max_body_bytes);
    error_code ec;
    const size_t used = parser_->put(net::buffer(head.data(), head.size()), ec);
    if (ec == bhttp::error::body_limit)
      return answer_error(413, "Request body too large (limit " + std::to_string(s_.opts.max_body_bytes) + " bytes).");
    if (ec || !parser_->is_header_done()) return answer_error(400, "Malformed HTTP request (" + ec.message() + ").");
    buf_.consume(used);
    const auto& msg = parser_->get();
    req_->version = msg.version();
    for (const auto& f : msg)
      if (!f.value().empty()) req_->headers.emplace(std::string(f.name_string()), std::string(f.value()));
    keep_alive_ = msg.keep_alive();

    if (s_.draining) keep_alive_ = false;
    if (srv_.pre_routing) {
      auto res = std::make_shared<http::Response>();
      if (srv_.pre_routing(*req_, *res)) {
        in_exchange_ = true;
        if (!parser_->is_done()) res->close = true;  // its body is unread: it cannot be skipped reliably
        return write_response(res);
      }
    }
    in_exchange_ = true;  // from here the request is answered before close_idle() may close it
    if (parser_->is_done()) return dispatch();
    if (iequals(req_->get_header_value("Expect"), "100-continue")) {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      stream_.expires_after(s_.opts.write_timeout);
      net::async_write(stream_, net::buffer(*cont), [self = shared_from_this(), cont](error_code e, size_t) {
        if (e) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(s_.opts.read_timeout);
    bhttp::async_read(stream_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec == bhttp::error::body_limit)
        return self->answer_error(413, "Request body too large (limit " + std::to_string(self->s_.opts.max_body_bytes) + " bytes).");
      if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout || ec == net::error::connection_reset)
        return self->close();
      if (ec) return self->answer_error(400, "Malformed HTTP request body (" + ec.message() + ").");
      self->req_->body = std::move(self->parser_->get().body());
      self->dispatch();
    });
  }

  // ---- running the route -----------------------------------------------------------------

  void dispatch() {
    const Impl::Route* route = s_.find(*req_);
    if (!route) return answer_error(404, "Invalid URL (" + req_->method + " " + req_->path + ")", /*close=*/false);
    if (route->where == On::IoThread) {
      auto res = std::make_shared<http::Response>();
      run_handler(route->handler, *req_, *res);
      return write_response(res);
    }
    // On a fiber: the socket keeps one read outstanding meanwhile (disconnects).
    handling_ = true;
    busy_.emplace(s_.io.get_executor());  // run() must not return while the fiber works (no socket op may be pending)
    stream_.expires_never();
    gone_ = std::make_shared<std::atomic<bool>>(false);
    req_->gone = gone_;
    watch();
    auto self = shared_from_this();
    fiber_ = s_.fibers.spawn([self, handler = route->handler, req = req_] { self->on_fiber(handler, *req); });
  }

  void run_handler(const Handler& handler, const http::Request& req, http::Response& res) {
    try {
      handler(req, res);
      return;
    } catch (const std::exception& e) {
      res = http::Response();
      if (srv_.on_exception) srv_.on_exception(req, res, e.what());
    } catch (...) {
      res = http::Response();
      if (srv_.on_exception) srv_.on_exception(req, res, "unknown exception");
    }
    if (!srv_.on_exception) res.status = 500;
  }

  /// The handler's fiber: runs the handler, then hands a plain response to the strand, or
  /// writes a streamed one itself (head, the provider's chunks, the last chunk).
  void on_fiber(const Handler& handler, const http::Request& req) {
    auto res = std::make_shared<http::Response>();
    run_handler(handler, req, *res);
    if (!res->stream) {
      net::post(stream_.get_executor(), [self = shared_from_this(), res] { self->write_response(res); });
      return;
    }
    bool ok = false, keep = false;
    {
      auto head = std::make_shared<bhttp::response<bhttp::empty_body>>();
      fill_head(*head, *res);
      head->chunked(true);
      keep = head->keep_alive();
      if (srv_.on_response) srv_.on_response(req, res->status);
      ok = fiber_write([head](Session& s, std::function<void(error_code)> done) {
        auto sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*head);
        bhttp::async_write_header(s.stream_, *sr, [sr, head, done](error_code ec, size_t) { done(ec); });
      });
    }
    if (ok) {
      struct Sink final : http::ChunkSink {
        Session& s;
        bool failed = false;
        explicit Sink(Session& session) : s(session) {}
        bool write(std::string_view data) override {
          if (failed) return false;
          if (data.empty()) return true;  // an empty chunk would end the body
          auto copy = std::make_shared<std::string>(data);
          failed = !s.fiber_write([copy](Session& ss, std::function<void(error_code)> done) {
            net::async_write(ss.stream_, bhttp::make_chunk(net::buffer(*copy)),
                             [copy, done](error_code ec, size_t) { done(ec); });
          });
          return !failed;
        }
      } sink(*this);
      bool complete = false;
      try {
        complete = res->stream(sink);
      } catch (...) {
        complete = false;
      }
      ok = complete && !sink.failed && fiber_write([](Session& ss, std::function<void(error_code)> done) {
             net::async_write(ss.stream_, bhttp::make_chunk_last(), [done](error_code ec, size_t) { done(ec); });
           });
    }
    res->stream = nullptr;  // its captures (the request's state) go here, on the fiber
    net::post(stream_.get_executor(), [self = shared_from_this(), ok, keep] { self->exchange_done(ok && keep); });
  }

  /// From the fiber: runs `op(session, done)` on the strand and suspends until it calls
  /// `done`; false when it failed or the write timeout passed (the connection is closed).
  bool fiber_write(std::function<void(Session&, std::function<void(error_code)>)> op) {
    Fiber* f = Fiber::current();
    auto state = std::make_shared<std::atomic<int>>(0);  // 0 pending, 1 written, 2 failed
    std::shared_ptr<Fiber> fiber = f->shared_from_this();
    net::post(stream_.get_executor(), [self = shared_from_this(), op = std::move(op), state, fiber] {
      if (self->closed_) {
        state->store(2);
        fiber->wake();
        return;
      }
      op(*self, [state, fiber](error_code ec) {
        state->store(ec ? 2 : 1);
        fiber->wake();
      });
    });
    if (!f->wait_until([&] { return state->load() != 0; }, s_.opts.write_timeout)) {
      net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });  // aborts the write
      f->wait_until([&] { return state->load() != 0; });
    }
    return state->load() == 1;
  }

  /// The outstanding read while a handler runs: end of stream or an error means the client
  /// is gone; data (a pipelined request) is kept in buf_ for later.
  void watch() {
    watching_ = true;
    stream_.async_read_some(buf_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->watching_ = false;
      self->buf_.commit(n);
      if (!self->handling_) {  // the exchange ended and cancelled this read
        if (ec && ec != net::error::operation_aborted) return self->close();
        return self->next();
      }
      if (ec) {
        if (ec != net::error::operation_aborted) {
          self->gone_->store(true);
          if (self->fiber_) self->fiber_->wake();  // a run() waiting for tokens polls its cancel check now
        }
        return;
      }
      if (self->buf_.size() < 65536) self->watch();
    });
  }

  // ---- writing ------------------------------------------------------------------------------

  template <class Message>
  void fill_head(Message& h, const http::Response& res) const {
    h.version(req_ && req_->version == 10 ? 10 : 11);
    h.result(static_cast<unsigned>(res.status));
    for (const auto& [k, v] : res.headers) h.insert(k, v);
    const bool keep = keep_alive_ && !res.close && !s_.draining && !(gone_ && gone_->load());
    h.keep_alive(keep);
  }

  /// An error the HTTP layer answers itself; `close` (the framing is unknown, or the body
  /// unread): nothing after it may be read as another request.
  void answer_error(int status, const std::string& message, bool close = true) {
    in_exchange_ = true;
    auto res = std::make_shared<http::Response>();
    res->status = status;
    res->close = close;
    if (srv_.error_page) srv_.error_page(*req_, *res, message);
    write_response(res);
  }

  /// On the strand: writes a plain response, then serves the next request or closes.
  void write_response(const std::shared_ptr<http::Response>& res) {
    if (closed_) return exchange_done(false);
    auto msg = std::make_shared<bhttp::response<bhttp::string_body>>();
    fill_head(*msg, *res);
    msg->body() = std::move(res->body);
    msg->prepare_payload();
    const bool keep = msg->keep_alive();
    if (srv_.on_response && req_) srv_.on_response(*req_, res->status);
    if (!handling_) stream_.expires_after(s_.opts.write_timeout);  // (a fiber's watch read must not time out)
    bhttp::async_write(stream_, *msg, [self = shared_from_this(), msg, res, keep](error_code ec, size_t) {
      res->hold.reset();  // e.g. the request's place in the shutdown's count
      self->exchange_done(!ec && keep);
    });
  }

  /// The response is written (`keep`: and the connection may serve another request).
  void exchange_done(bool keep) {
    const bool was_handling = handling_;
    handling_ = false;
    in_exchange_ = false;
    fiber_.reset();
    busy_.reset();
    if (!keep || (gone_ && gone_->load()) || closed_) return close();
    if (was_handling && watching_) {
      stream_.socket().cancel();  // the watch read ends with operation_aborted and calls next()
      return;
    }
    next();
  }

  void next() {
    req_.reset();
    parser_.reset();
    gone_.reset();
    read_head();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  HttpServer& srv_;
  Impl& s_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<http::Request> req_;
  std::shared_ptr<std::atomic<bool>> gone_;
  std::shared_ptr<Fiber> fiber_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> busy_;
  bool keep_alive_ = true;
  bool handling_ = false;  // a fiber handles the request (until its response is written)
  bool in_exchange_ = false;  // a request is being read past its head, handled or answered
  bool watching_ = false;  // watch()'s read is outstanding
  bool closed_ = false;
};

HttpServer::HttpServer(HttpServerOptions opts) : impl_(std::make_unique<Impl>(opts)) {}

HttpServer::~HttpServer() = default;

void HttpServer::route(const std::string& method, const std::string& path, Handler handler, On where) {
  impl_->exact[method + " " + path] = {std::move(handler), where};
}

void HttpServer::route_prefix(const std::string& method, const std::string& prefix, Handler handler, On where) {
  impl_->prefixes.emplace_back(method, prefix, Impl::Route{std::move(handler), where});
}

int HttpServer::bind(const std::string& host, int port) {
  Impl& s = *impl_;
  error_code ec;
  tcp::resolver resolver(s.io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) throw std::runtime_error("cannot resolve " + host + ": " + ec.message());
  const tcp::endpoint ep = results.begin()->endpoint();
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    error_code ignored;
    s.acceptor.close(ignored);
    throw std::runtime_error("cannot bind " + host + ":" + std::to_string(port) + " (" + ec.message() + ")");
  }
  return s.acceptor.local_endpoint().port();
}

namespace {
/// Accepts connections until the acceptor is closed. A failed accept (out of descriptors:
/// EMFILE / ENFILE) is retried after 50 ms instead of at once, which would spin an io thread.
template <class Accept>
void accept_loop(tcp::acceptor& acceptor, net::io_context& io, Accept on_socket) {
  acceptor.async_accept(net::make_strand(io), [&acceptor, &io, on_socket](error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      auto retry = std::make_shared<net::steady_timer>(acceptor.get_executor(), std::chrono::milliseconds(50));
      retry->async_wait([&acceptor, &io, on_socket, retry](error_code) {
        if (acceptor.is_open()) accept_loop(acceptor, io, on_socket);
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks leave at once
    on_socket(std::move(socket));
    accept_loop(acceptor, io, on_socket);
  });
}
}  // namespace

void HttpServer::run() {
  Impl& s = *impl_;
  if (!s.acceptor.is_open()) return;
  accept_loop(s.acceptor, s.io, [this](tcp::socket socket) { std::make_shared<Session>(*this, std::move(socket))->start(); });
  std::vector<std::thread> more;
  for (int i = 1; i < std::max(1, s.opts.io_threads); ++i) more.emplace_back([&s] { s.io.run(); });
  s.io.run();
  for (auto& t : more) t.join();
}

void HttpServer::stop_accepting() {
  net::post(impl_->acceptor.get_executor(), [this] {
    error_code ec;
    impl_->acceptor.close(ec);
  });
}

void HttpServer::set_draining() { impl_->draining = true; }

void HttpServer::close_idle() {
  impl_->idle_closed = true;
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->sessions_mu);
    for (auto& [p, w] : impl_->sessions)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->close_unless_handling();
}

int HttpServer::connections() const {
  std::lock_guard<std::mutex> lock(impl_->sessions_mu);
  return static_cast<int>(impl_->sessions.size());
}

engine::Admission::EventWait fiber_event_wait() {
  Fiber* f = Fiber::current();
  if (!f) return {};
  std::shared_ptr<Fiber> fiber = f->shared_from_this();
  return {[fiber] { fiber->wake(); }, [fiber](std::chrono::milliseconds timeout) { fiber->wait(timeout); }};
}

}  // namespace swz::server
