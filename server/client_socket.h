// Client-disconnect detection while no byte is being written (prefill of a long prompt).
//
// cpp-httplib 0.11.4 hands handlers no socket, so the connection's socket is found by
// its TCP 4-tuple (the request's local and remote address and port, unique per
// connection in this process), and its liveness is httplib's own later test
// (`detail::is_socket_alive`, httplib >= 0.14): a socket with nothing to read is alive; a
// readable one is alive only if a peeked byte arrives (0 = the peer closed, < 0 = reset).
#pragma once

#include <string>

namespace swz::server {

/// The descriptor of this process's TCP socket whose local end is local_addr:local_port
/// and remote end remote_addr:remote_port (numeric hosts, as httplib::Request has them),
/// or -1 when none is found. Scans /proc/self/fd (Linux); O(open descriptors).
int find_client_socket(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

/// False when the peer of `fd` has closed or reset the connection. Never blocks, never
/// consumes data. A negative fd counts as alive (unknown).
bool client_socket_alive(int fd);

/// Shuts down the reading side of every connected TCP socket of this process whose local
/// port is `local_port` (a server's accepted connections): a worker waiting for the next
/// request on a keep-alive connection sees the end of the stream at once and closes it,
/// while a response still being written goes out unharmed (writes are not shut down).
/// For the end of Server::shutdown(), once nothing polls these sockets for a disconnect
/// (client_socket_alive would read it as one). Returns how many it shut down.
int shut_down_connection_reads(int local_port);

}  // namespace swz::server
