#include "ggml/thread_pool.h"

#include <chrono>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define SWZ_CPU_RELAX() _mm_pause()
#else
#define SWZ_CPU_RELAX() ((void)0)
#endif

namespace swz::ggml {

// Protocol.
// - run() publishes fn_ and pending_ = n-1, then bumps generation_ (seq_cst).
// - Index i (1..n-1) is executed by whoever first moves claimed_[i] to the current generation
//   (CAS): worker i when it wakes, or the caller after its own share. Each executed index
//   decrements pending_; the caller returns when pending_ is 0. A worker only reads fn_ after
//   a successful claim, and the caller cannot leave run() while a claimed index is running,
//   so fn_ is always the current job's.
// - Sleep/wake without lost wake-ups: a sleeper announces itself (seq_cst) and re-checks its
//   condition under sleep_mu_; a waker publishes its state change (seq_cst) and notifies under
//   sleep_mu_ only if it sees a sleeper. No sleeper -> no syscall.

namespace {
// Spins until pred() or `us` microseconds pass; true if pred() became true.
template <class Pred>
bool spin_until(Pred pred, int us) {
  if (pred()) return true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      SWZ_CPU_RELAX();
      if (pred()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 0) throw std::invalid_argument("ThreadPool: negative thread count " + std::to_string(n_threads));
  if (n_threads == 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_ = n_threads < 1 ? 1 : n_threads;
  claimed_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(n_));
  for (int i = 0; i < n_; ++i) claimed_[i].store(0, std::memory_order_relaxed);
  threads_.reserve(static_cast<size_t>(n_ - 1));
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  { std::lock_guard<std::mutex> lk(sleep_mu_); }
  wake_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::record_exception() {
  std::lock_guard<std::mutex> lk(exc_mu_);
  if (!exc_) exc_ = std::current_exception();
}

bool ThreadPool::claim(int ith, uint64_t gen) {
  uint64_t v = claimed_[ith].load(std::memory_order_relaxed);
  while (v < gen) {
    if (claimed_[ith].compare_exchange_weak(v, gen, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
  }
  return false;
}

void ThreadPool::run_slot(int ith) {
  try {
    (*fn_)(ith, n_);
  } catch (...) {
    record_exception();
  }
  if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    if (caller_sleeping_.load(std::memory_order_seq_cst)) {
      { std::lock_guard<std::mutex> lk(sleep_mu_); }
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, spin_us_)) {
      std::unique_lock<std::mutex> lk(sleep_mu_);
      sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
      wake_cv_.wait(lk, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleeping_workers_.fetch_sub(1, std::memory_order_seq_cst);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (claim(ith, seen)) run_slot(ith);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  fn_ = &fn;
  exc_ = nullptr;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  const uint64_t gen = generation_.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lk(sleep_mu_); }
    wake_cv_.notify_all();
  }
  try {
    fn(0, n_);
  } catch (...) {
    record_exception();
  }
  for (int i = 1; i < n_; ++i)
    if (claim(i, gen)) run_slot(i);
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; }, spin_us_)) {
    std::unique_lock<std::mutex> lk(sleep_mu_);
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(lk, [&] { return pending_.load(std::memory_order_seq_cst) == 0; });
    caller_sleeping_.store(false, std::memory_order_seq_cst);
  }
  fn_ = nullptr;
  if (exc_) {
    std::exception_ptr e = exc_;
    exc_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace swz::ggml
