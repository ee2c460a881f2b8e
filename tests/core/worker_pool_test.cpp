// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#include "refdec/core/worker_pool.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using refdec::WorkerPool;

// Every index once, on as many threads as asked (the caller's among them), loop after loop.
TEST(WorkerPool, RunsEveryIndexOnceOnItsThreads) {
  for (const std::size_t threads : {1u, 2u, 4u}) {
    WorkerPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (const std::size_t n : {0u, 1u, 3u, 100u}) {
      std::vector<std::atomic<int>> calls(n);
      std::mutex mutex;
      std::set<std::thread::id> ran_on;
      pool.for_each(n, [&](std::size_t i) {
        calls[i].fetch_add(1);
        if (threads > 1) std::this_thread::sleep_for(std::chrono::microseconds(200));  // room for every thread to take some
        const std::lock_guard lock(mutex);
        ran_on.insert(std::this_thread::get_id());
      });
      for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << "index " << i << " of " << n << ", " << threads << " threads";
      EXPECT_LE(ran_on.size(), threads);
      if (n <= 1) {
        EXPECT_TRUE(ran_on.empty() || *ran_on.begin() == std::this_thread::get_id()) << "a loop of one runs on the caller";
      }
    }
  }
}

// An exception from any call reaches the caller after the loop; the other calls still ran, and
// the pool runs the next loop.
TEST(WorkerPool, RethrowsAnErrorAfterTheLoopAndStaysUsable) {
  WorkerPool pool(3);
  std::atomic<int> ran{0};
  try {
    pool.for_each(50, [&](std::size_t i) {
      ran.fetch_add(1);
      if (i == 7) throw std::runtime_error("index 7 failed");
    });
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 7 failed");
  }
  EXPECT_EQ(ran.load(), 50);
  std::atomic<int> again{0};
  pool.for_each(20, [&](std::size_t) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 20);
}

// Thread counts are bounded: 0 and more than kMaxThreads are refused (40,000 drafting threads
// once exhausted a machine's process ids).
TEST(WorkerPool, RefusesThreadCountsOutsideItsBounds) {
  refdec_test::expect_error([] { WorkerPool pool(0); }, "WorkerPool: needs 1 to 256 threads, got 0");
  refdec_test::expect_error([] { WorkerPool pool(WorkerPool::kMaxThreads + 1); }, "needs 1 to 256 threads, got 257");
  EXPECT_EQ(WorkerPool(WorkerPool::kMaxThreads).threads(), WorkerPool::kMaxThreads);
}

// A thread the system cannot start is an error naming it, after the threads already started are
// stopped, never a hang (a pool used to block for ever cleaning up). In a child process whose
// address space leaves room for a few thread stacks only.
TEST(WorkerPool, AThreadThatCannotStartIsAnErrorNotAHang) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer reserves terabytes of address space: the address-space limit this test sets cannot apply";
#else
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{64} << 20);
    const rlimit r{limit, limit};
    if (::setrlimit(RLIMIT_AS, &r) != 0) ::_exit(6);
    try {
      WorkerPool pool(WorkerPool::kMaxThreads);
      ::_exit(3);  // every thread started: the limit did not bite
    } catch (const refdec::Error& e) {
      ::_exit(std::string(e.what()).find("WorkerPool: could not start thread") != std::string::npos ? 0 : 4);
    } catch (...) {
      ::_exit(5);
    }
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 300 && (done = ::waitpid(child, &status, WNOHANG)) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL() << "the pool hung when a thread could not start";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "every thread started under the address-space limit: nothing failed to test";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: no failure; 4: another message; 5: another exception; 6: setrlimit failed";
#endif
}

}  // namespace
