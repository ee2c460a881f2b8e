// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A fixed set of threads that run the calls of one loop at a time, the calling thread among them:
// what StepDriver drafts a step's sequences on. Threads are started once and wait between loops,
// so that a loop costs a wake-up, not a thread start (tens of microseconds each, per step).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// Runs for_each() loops over `threads` threads: the caller and threads - 1 of its own. One loop at
/// a time: for_each() is not reentrant and one thread calls it at a time. Neither copyable nor
/// movable (hold it by pointer).
class WorkerPool {
 public:
  /// The most threads a pool runs: a bound well above any machine's cores, below what exhausts
  /// a system's process ids (40,000 threads broke unrelated programs on a test machine).
  static constexpr std::size_t kMaxThreads = 256;

  /// Throws ArgumentError unless 1 <= threads <= kMaxThreads, and refdec::Error when the system
  /// cannot start one of them (the threads already started are stopped first).
  explicit WorkerPool(std::size_t threads) {
    REFDEC_CHECK(threads >= 1 && threads <= kMaxThreads, "WorkerPool: needs 1 to " << kMaxThreads << " threads, got " << threads);
    workers_.reserve(threads - 1);
    std::string failure;
    try {
      for (std::size_t t = 1; t < threads; ++t) workers_.emplace_back([this] { serve(); });
    } catch (const std::system_error& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      stop_and_join();
      REFDEC_DETAIL_CHECK(::refdec::Error, false,
                          "WorkerPool: could not start thread " << workers_.size() + 1 << " of " << threads << ": " << failure);
    }
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() { stop_and_join(); }

  /// Threads a loop runs on, the caller included.
  std::size_t threads() const { return workers_.size() + 1; }

  /// Calls fn(i) once for each i in [0, n), on any of the threads, and returns when every call has
  /// returned. When calls throw, the other calls still run and the first exception caught is
  /// rethrown here.
  void for_each(std::size_t n, const std::function<void(std::size_t)>& fn) {
    if (workers_.empty() || n <= 1) {
      for (std::size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    {
      const std::lock_guard lock(mutex_);
      job_ = &fn;
      n_ = n;
      next_.store(0, std::memory_order_relaxed);
      busy_ = workers_.size();
      error_ = nullptr;
      ++generation_;
    }
    start_.notify_all();
    run();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void stop_and_join() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& w : workers_) w.join();
  }

  // Takes the current loop's indices until none is left.
  void run() {
    for (std::size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n_;) {
      try {
        (*job_)(i);
      } catch (...) {
        const std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void serve() {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      run();
      const std::lock_guard lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  bool stop_ = false;
  std::size_t generation_ = 0;  // loops started: a worker runs each generation once
  std::size_t busy_ = 0;        // workers still in the current loop
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  std::exception_ptr error_;
};

REFDEC_NAMESPACE_END
