// Running a Server as a foreground process: block SIGINT/SIGTERM, print the
// "listening" line, serve until a signal. Shared by `swizzle-rt serve` and test servers.
#pragma once

#include "server.h"

#include <string>

namespace swz::server {

/// Blocks SIGINT and SIGTERM in the calling thread; threads created afterwards inherit
/// the mask, so only serve_until_signal's watcher receives them. Call first in main(),
/// before anything starts a thread (the engine's thread pool included).
void block_shutdown_signals();

/// Raises the soft limit of open descriptors to the hard one (each connection is one), then
/// binds host:port (0 = any free port), prints "swizzle-rt: listening on
/// http://HOST:PORT" to stdout (flushed; tests and scripts wait for it), then serves
/// until SIGINT/SIGTERM: the first starts Server::shutdown with opts.shutdown_grace_s
/// (stop accepting, let running generations finish within the grace period, cut the rest
/// with an error to their clients), a second exits immediately with 128+signal. Returns 0
/// after a clean shutdown. Throws std::runtime_error if the address cannot be bound.
int serve_until_signal(engine::Engine& engine, const std::string& host, int port, ServerOptions opts);

}  // namespace swz::server
