#include "fiber.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <boost/context/protected_fixedsize_stack.hpp>

#include <memory>

namespace swz::server {

namespace {
thread_local Fiber* t_current = nullptr;
}  // namespace

Fiber* Fiber::current() { return t_current; }

Fiber::Fiber(boost::asio::io_context& ctx, std::function<void()> fn, size_t stack_bytes)
    : ctx_(ctx), timer_(ctx), fn_(std::move(fn)) {
  namespace bc = boost::context;
  // protected_fixedsize_stack: mmap'd with a guard page below, so an overflow faults
  // instead of corrupting memory; throws std::bad_alloc when it cannot be mapped.
  self_ = bc::fiber(std::allocator_arg, bc::protected_fixedsize_stack(stack_bytes), [this](bc::fiber&& caller) {
    caller_ = std::move(caller);
    try {
      fn_();
    } catch (const bc::detail::forced_unwind&) {
      throw;  // the fiber is being destroyed while suspended: Boost.Context unwinds its stack
    } catch (...) {
    }
    fn_ = nullptr;  // its captures are destroyed here, still on the fiber
    state_.store(kDone);
    return std::move(caller_);  // back to resume(); the stack is released
  });
}

Fiber::~Fiber() {
  // A fiber destroyed while suspended (the pool stopped with a request in progress) is
  // abandoned, not unwound: Boost.Context would unwind its stack here, on whatever thread
  // drops the last reference, through handlers whose catch (...) would stop the unwind.
  // Its stack stays mapped (virtual memory, at shutdown only).
  if (self_) new boost::context::fiber(std::move(self_));
}

void Fiber::resume() {
  if (state_.load() == kDone || !self_) return;
  Fiber* outer = t_current;
  t_current = this;
  self_ = std::move(self_).resume();  // returns when the fiber waits (self_ = it) or ends (empty)
  t_current = outer;
}

void Fiber::wait(std::chrono::milliseconds timeout) {
  int expected = kRunning;
  if (!state_.compare_exchange_strong(expected, kSuspended)) {  // a wake() is pending: consume it
    state_.store(kRunning);
    return;
  }
  // From here a wake() from another thread posts resume() to ctx_, which this thread runs
  // only after the swap below: it cannot resume a fiber that has not yet left.
  if (timeout.count() >= 0) {
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->wake();
    });
  }
  caller_ = std::move(caller_).resume();  // back to resume(); returns when resumed again
  if (timeout.count() >= 0) timer_.cancel();
}

bool Fiber::wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (timeout.count() < 0) {
      wait();
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return done();
    wait(left + std::chrono::milliseconds(1));
  }
  return true;
}

void Fiber::wake() {
  int s = state_.load();
  for (;;) {
    if (s == kSuspended) {
      if (state_.compare_exchange_weak(s, kRunning)) {
        boost::asio::post(ctx_, [self = shared_from_this()] { self->resume(); });
        return;
      }
    } else if (s == kRunning) {
      if (state_.compare_exchange_weak(s, kWakePending)) return;
    } else {
      return;  // already pending, or done
    }
  }
}

FiberPool::FiberPool(int threads, size_t stack_bytes) : stack_bytes_(stack_bytes) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    auto w = std::make_unique<Worker>();
    Worker* raw = w.get();
    w->thread = std::thread([raw] {
      auto guard = boost::asio::make_work_guard(raw->ctx);
      raw->ctx.run();
    });
    workers_.push_back(std::move(w));
  }
}

FiberPool::~FiberPool() {
  for (auto& w : workers_) w->ctx.stop();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

std::shared_ptr<Fiber> FiberPool::spawn(std::function<void()> fn) {
  Worker& w = *workers_[next_.fetch_add(1) % workers_.size()];
  std::shared_ptr<Fiber> f(new Fiber(w.ctx, std::move(fn), stack_bytes_));
  boost::asio::post(w.ctx, [f] { f->resume(); });
  return f;
}

}  // namespace swz::server
