// Fibers for the HTTP layer's request handlers (http_server.h): each generation request runs
// its handler on a stack of its own, on one thread of a small FiberPool, and suspends (holding
// no thread) while it waits for the engine's next event or for a socket write to complete.
// So 64 streams need 64 stacks, not 64 threads, and the handler code stays straight-line
// (parse, admit, run the engine with callbacks, write) instead of a chain of callbacks.
//
// Mechanism: Boost.Context's boost::context::fiber (libboost-context-dev) on a
// protected_fixedsize_stack (mmap'd, with a guard page); one boost::asio::io_context per
// pool thread. A fiber never changes thread: it
// is started, and every later resumption is posted, on its own thread's io_context, so
// thread-local state (errno, allocator caches) seen before a suspension is the same after.
// Waking is thread-safe and never lost: wake() before wait() makes that wait() return at
// once (a binary semaphore). Every wait may also return early, so callers loop on their
// condition (Fiber::wait_until).
//
// AddressSanitizer builds define BOOST_USE_ASAN (server/CMakeLists.txt), so Boost.Context
// tells ASan about every stack switch.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <boost/context/fiber.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace swz::server {

class FiberPool;

class Fiber : public std::enable_shared_from_this<Fiber> {
 public:
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// The fiber running on the calling thread, or null outside any fiber.
  static Fiber* current();

  /// From inside this fiber: suspends it (its thread runs other fibers meanwhile) until
  /// wake() is called, or returns at once if wake() was called since the previous return.
  /// `timeout` >= 0: also returns after that long. Early returns are possible: loop.
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  /// Waits (as wait(), repeatedly) until `done()` is true or `timeout` has passed
  /// (negative: none); returns done()'s last value.
  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  /// From any thread: makes the fiber's current or next wait() return. Never blocks.
  void wake();

 private:
  friend class FiberPool;
  Fiber(boost::asio::io_context& ctx, std::function<void()> fn, size_t stack_bytes);
  void resume();  // on ctx's thread: runs the fiber until it waits or ends

  enum State : int { kRunning = 0, kWakePending = 1, kSuspended = 2, kDone = 3 };
  boost::asio::io_context& ctx_;
  boost::asio::steady_timer timer_;  // wait()'s timeout; used on ctx_'s thread only
  std::function<void()> fn_;
  boost::context::fiber self_;    // the fiber while suspended (empty while it runs, and once done)
  boost::context::fiber caller_;  // the thread's context while the fiber runs
  std::atomic<int> state_{kRunning};
};

/// `threads` threads, each running its own io_context; spawn() starts fibers on them in
/// turn. The destructor stops the threads (fibers still suspended then are abandoned:
/// stop only once no request is in progress).
class FiberPool {
 public:
  /// `stack_bytes`: each fiber's stack, mapped with a guard page (Boost.Context's
  /// protected_fixedsize_stack, without MAP_NORESERVE: under Linux's default overcommit
  /// policy pages are committed only as they are touched; with vm.overcommit_memory=2 each
  /// stack counts in full); 8 MiB = a default thread stack.
  FiberPool(int threads, size_t stack_bytes = size_t(8) << 20);
  ~FiberPool();
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;

  /// Starts `fn` on a new fiber of the next thread (round robin); returns at once. An
  /// exception escaping `fn` is swallowed (handlers catch their own). Throws
  /// std::bad_alloc when no stack can be mapped.
  std::shared_ptr<Fiber> spawn(std::function<void()> fn);

 private:
  struct Worker {
    boost::asio::io_context ctx;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<size_t> next_{0};
  size_t stack_bytes_;
};

}  // namespace swz::server
