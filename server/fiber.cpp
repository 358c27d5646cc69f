#include "fiber.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace swz::server {

namespace {
thread_local Fiber* t_current = nullptr;
}  // namespace

Fiber* Fiber::current() { return t_current; }

Fiber::Fiber(boost::asio::io_context& ctx, std::function<void()> fn, size_t stack_bytes)
    : ctx_(ctx), timer_(ctx), fn_(std::move(fn)) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page + page;  // + the guard page
  stack_ = mmap(nullptr, stack_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                -1, 0);
  if (stack_ == MAP_FAILED) {
    stack_ = nullptr;
    throw std::system_error(errno, std::generic_category(), "fiber stack");
  }
  mprotect(stack_, page, PROT_NONE);  // the stack grows down into this page: a fault, not corruption
  getcontext(&self_);
  self_.uc_stack.ss_sp = stack_;
  self_.uc_stack.ss_size = stack_bytes_;
  self_.uc_link = nullptr;
  makecontext(&self_, &Fiber::entry, 0);
}

Fiber::~Fiber() {
  if (stack_) munmap(stack_, stack_bytes_);
}

void Fiber::entry() {
  Fiber* f = t_current;
  try {
    f->fn_();
  } catch (...) {
  }
  f->fn_ = nullptr;  // its captures are destroyed here, still on the fiber
  f->state_.store(kDone);
  swapcontext(&f->self_, f->caller_);  // never resumed
}

void Fiber::resume() {
  if (state_.load() == kDone) return;
  ucontext_t here;
  Fiber* outer = t_current;
  t_current = this;
  caller_ = &here;
  swapcontext(&here, &self_);
  t_current = outer;
  if (state_.load() == kDone && stack_) {
    munmap(stack_, stack_bytes_);
    stack_ = nullptr;
  }
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
  swapcontext(&self_, caller_);
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
