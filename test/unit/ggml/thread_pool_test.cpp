#include "ggml/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace swz::ggml {
namespace {

TEST(ThreadPool, RunsEveryIndexExactlyOncePerCall) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    ASSERT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (int iter = 0; iter < 2000; ++iter) {
      pool.run([&](int ith, int nth) {
        ASSERT_EQ(nth, n);
        hits[static_cast<size_t>(ith)].fetch_add(1);
      });
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 2000) << "n=" << n << " index " << i;
  }
}

TEST(ThreadPool, WorkIsDoneBeforeRunReturns) {
  ThreadPool pool(4);
  std::vector<int> out(4000);
  for (int iter = 0; iter < 200; ++iter) {
    pool.run([&](int ith, int nth) {
      for (size_t i = static_cast<size_t>(ith); i < out.size(); i += static_cast<size_t>(nth)) out[i] = iter;
    });
    for (int v : out) ASSERT_EQ(v, iter);
  }
}

TEST(ThreadPool, WakesUpAfterSleeping) {
  ThreadPool pool(3);
  pool.set_spin_us(0);  // force the sleep path
  std::atomic<int> sum{0};
  for (int iter = 0; iter < 50; ++iter) pool.run([&](int ith, int) { sum += ith + 1; });
  EXPECT_EQ(sum.load(), 50 * 6);
}

TEST(ThreadPool, RethrowsExceptionsAfterAllFinish) {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run([&](int ith, int) {
    ran++;
    if (ith == 2) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 3);
  // Still usable afterwards.
  ran = 0;
  pool.run([&](int, int) { ran++; });
  EXPECT_EQ(ran.load(), 3);
}

TEST(ThreadPool, ZeroMeansHardwareAndNegativeThrows) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
  EXPECT_THROW(ThreadPool(-1), std::invalid_argument);
}

}  // namespace
}  // namespace swz::ggml
