// A fork-join thread pool for the decode hot path (hundreds of parallel regions per token).
//
// run(fn) calls fn(i, n) exactly once for every work index i in [0, n) and returns when all
// calls are done. Index 0 runs on the calling thread; index i normally runs on worker i, but
// a worker that has not started by the time the caller finished its own share gets its index
// claimed and run by the caller (so an oversubscribed machine, where a worker may wait a
// scheduler slice to be woken, does not stall the hot path). Hence `ith` is a work index,
// not a thread identity: fn must not rely on thread-local state. fn that hands out work
// dynamically (an atomic counter) loses nothing when an index is claimed late.
// Workers spin briefly (back-to-back regions start in well under a microsecond), then sleep
// on a condition variable, so an idle pool costs no CPU. run() calls are serialised; calling
// run() from inside fn deadlocks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace swz::ggml {

class ThreadPool {
 public:
  /// `n_threads` total threads including the caller; 0 = std::thread::hardware_concurrency().
  /// Throws std::invalid_argument for negative counts.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Number of threads taking part in run(), the caller included (>= 1).
  int size() const { return n_; }

  /// Runs fn(ith, nth) for ith in [0, size()) in parallel (ith 0 on the calling thread) and
  /// waits for all. If any call throws, the first exception is rethrown after all finish.
  void run(const std::function<void(int ith, int nth)>& fn);

  /// How long a waiting thread spins before it sleeps, in microseconds (default 200).
  void set_spin_us(int us) { spin_us_ = us; }

 private:
  void worker(int ith);
  void record_exception();
  bool claim(int ith, uint64_t gen);
  void run_slot(int ith);

  int n_ = 1;
  int spin_us_ = 200;
  std::vector<std::thread> threads_;
  std::mutex run_mu_;  // serialises run()

  const std::function<void(int, int)>* fn_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_;  // per index: last generation claimed

  std::mutex sleep_mu_;
  std::condition_variable wake_cv_;   // workers sleep here
  std::condition_variable done_cv_;   // the caller sleeps here
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};

  std::mutex exc_mu_;
  std::exception_ptr exc_;
};

}  // namespace swz::ggml
