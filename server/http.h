// An HTTP request and response as the route handlers see them (server.cpp, openai_*.cpp,
// anthropic_messages.cpp). http_server.h reads and writes them on the wire (Boost.Beast);
// nothing here knows about sockets.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace swz::server::http {

/// Header names compare case-insensitively (RFC 9110 §5.1).
struct CaseLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using Headers = std::multimap<std::string, std::string, CaseLess>;

struct Request {
  std::string method;       ///< "GET", "POST", ...
  std::string target;       ///< the request-target as sent (path and query)
  std::string path;         ///< target without its query string
  unsigned version = 11;    ///< 10 = HTTP/1.0, 11 = HTTP/1.1
  Headers headers;          ///< as received (empty values dropped)
  std::string body;         ///< the body, transfer coding removed; empty before it is read
  std::string path_param;   ///< what a prefix route matched after its prefix (GET /v1/models/{id})
  /// Set by the server while a handler runs on a fiber: true once the client has closed or
  /// reset the connection (an outstanding read on the socket saw it; http_server.h).
  std::shared_ptr<const std::atomic<bool>> gone;

  bool has_header(const std::string& key) const { return headers.count(key) > 0; }
  /// The first value of `key`, "" when absent.
  std::string get_header_value(const std::string& key) const {
    auto it = headers.find(key);
    return it == headers.end() ? std::string() : it->second;
  }
  /// The client went away while this request is in progress (see `gone`).
  bool client_gone() const { return gone && gone->load(); }
};

/// Where a streamed response writes its body, one chunk (Transfer-Encoding: chunked) per
/// call, on the handler's fiber: write() returns once the chunk is on the socket, or false
/// once the client is gone or the write timed out (stop writing then).
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool write(std::string_view data) = 0;
};
/// Writes a streamed body after the response head went out; returns true when the body is
/// complete (the server writes the last chunk), false to close the connection without it.
using StreamProvider = std::function<bool(ChunkSink&)>;

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
  StreamProvider stream;       ///< set (set_stream): a chunked body written by the provider
  bool close = false;          ///< close the connection after this response
  std::shared_ptr<void> hold;  ///< kept until the response has been written (or its write failed)

  /// Replaces every value of `key` with `value`.
  void set_header(const std::string& key, const std::string& value) {
    headers.erase(key);
    headers.emplace(key, value);
  }
  void set_content(std::string content, const std::string& content_type) {
    body = std::move(content);
    set_header("Content-Type", content_type);
  }
  void set_stream(const std::string& content_type, StreamProvider provider) {
    stream = std::move(provider);
    set_header("Content-Type", content_type);
  }
};

}  // namespace swz::server::http
