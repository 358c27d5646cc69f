#include "client_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace swz::server {
namespace {

bool endpoint_is(const sockaddr_storage& sa, socklen_t len, const std::string& addr, int port) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  return std::atoi(serv) == port && addr == host;
}

/// Walks this process's open file descriptors (/proc/self/fd) and calls
/// fn(fd, local, local_len, peer, peer_len) for each connected socket; returns the first fd
/// fn returns true for, or -1.
template <typename Fn>
int find_connected_socket(Fn&& fn) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    char* end = nullptr;
    const std::string name = e.path().filename().string();
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (end == name.c_str() || *end != '\0') continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;  // not a socket
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;  // not connected
    if (fn(static_cast<int>(fd), local, local_len, peer, peer_len)) return static_cast<int>(fd);
  }
  return -1;
}

}  // namespace

int find_client_socket(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port) {
  return find_connected_socket([&](int, const sockaddr_storage& local, socklen_t local_len, const sockaddr_storage& peer,
                                   socklen_t peer_len) {
    return endpoint_is(local, local_len, local_addr, local_port) && endpoint_is(peer, peer_len, remote_addr, remote_port);
  });
}

int shut_down_connection_reads(int local_port) {
  int n = 0;
  find_connected_socket([&](int fd, const sockaddr_storage& local, socklen_t, const sockaddr_storage&, socklen_t) {
    if (local.ss_family != AF_INET && local.ss_family != AF_INET6) return false;
    const int port = local.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in&>(local).sin_port)
                                                : ntohs(reinterpret_cast<const sockaddr_in6&>(local).sin6_port);
    if (port == local_port && ::shutdown(fd, SHUT_RD) == 0) ++n;
    return false;
  });
  return n;
}

bool client_socket_alive(int fd) {
  if (fd < 0) return true;
  pollfd p{fd, POLLIN, 0};
  const int n = poll(&p, 1, 0);
  if (n == 0) return true;
  if (n < 0) return errno != EBADF;
  if (p.revents & POLLNVAL) return false;
  char c;
  const ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0) return true;
  return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

}  // namespace swz::server
