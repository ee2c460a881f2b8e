// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A product's column blocks shared by the threads that stream it (StreamLinear::run_shared()).
// Each thread owns a contiguous range of blocks and runs it front to back a few blocks at a time,
// so that its weights stream as one contiguous read: each run's prefetch already reaches into the
// next run. A thread whose range is done takes the back half of the range with most blocks left
// and goes on with it as its own, so that the threads finish together however their speeds move
// (on a shared machine one thread's bandwidth often lags the other's for a while). Runs shrink to
// 2 blocks at a range's end, so that the last one to finish runs little after the other.
//
// A run starts at an even block and ends at an even block or the last one, so that the tiles over
// two neighbouring blocks pair them as one thread over all of them does: the output is the same
// bit for bit whoever runs which run.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "refdec/core/config.hpp"

namespace refdec {
inline namespace v1 {

/// Column blocks [0, blocks) of one product, split among `sharers` threads (see above). Sharer s
/// calls take(s, ...) until it returns false; by then every block has been handed out exactly
/// once, to whichever sharer took it.
class StreamShare {
 public:
  /// Blocks a sharer takes from the front of its range at a time while at least twice as many
  /// are left in it, else 2: each take is one compare-and-swap on the sharer's own cache line.
  static constexpr std::int64_t kRunBlocks = 4;

  /// `blocks` in [0, 2^31), `sharers` ≥ 1: sharer s first owns the blocks from
  /// even(s * blocks / sharers) to even((s + 1) * blocks / sharers), the last one up to `blocks`
  /// (even(v): v rounded down to an even number).
  StreamShare(std::int64_t blocks, std::int64_t sharers) : ranges_(checked(blocks, sharers)) {
    const std::int64_t n = this->sharers();
    std::int64_t lo = 0;
    for (Range& range : ranges_) {
      const std::int64_t s = &range - ranges_.data(), hi = s + 1 == n ? blocks : (s + 1) * blocks / n / 2 * 2;
      range.bounds.store(pack(lo, hi), std::memory_order_relaxed);
      lo = hi;
    }
  }

  /// The number of sharers.
  std::int64_t sharers() const { return static_cast<std::int64_t>(ranges_.size()); }

  /// The next run of sharer `s` (in [0, sharers())) as [first, last): the front of its own range,
  /// else, once that is empty, the back half of the range with most blocks left (all of it where
  /// 3 or fewer are), which becomes its own. False once no block is left anywhere. One thread per
  /// sharer; sharers take at once from any threads.
  bool take(std::int64_t s, std::int64_t& first, std::int64_t& last) {
    REFDEC_CHECK(s >= 0 && s < sharers(), "StreamShare: sharer " << s << " of " << sharers());
    std::atomic<std::uint64_t>& mine = ranges_[static_cast<std::size_t>(s)].bounds;
    for (;;) {
      std::uint64_t v = mine.load(std::memory_order_relaxed);
      if (size(v) > 0) {
        const std::int64_t end = std::min(hi(v), lo(v) + (size(v) >= 2 * kRunBlocks ? kRunBlocks : 2));
        if (mine.compare_exchange_weak(v, pack(end, hi(v)), std::memory_order_relaxed)) {
          first = lo(v), last = end;
          return true;
        }
        continue;
      }
      // An empty range changes only by its owner's hand (a thief's compare-and-swap expects the
      // blocks it saw, and a block never returns to a range once taken from it).
      std::size_t victim = ranges_.size();
      std::uint64_t seen = 0;
      for (std::size_t r = 0; r < ranges_.size(); ++r) {
        const std::uint64_t w = ranges_[r].bounds.load(std::memory_order_relaxed);
        if (size(w) > size(seen)) victim = r, seen = w;
      }
      if (victim == ranges_.size()) return false;
      const std::int64_t mid = lo(seen) + size(seen) / 4 * 2;  // lo is even, so mid is
      if (ranges_[victim].bounds.compare_exchange_strong(seen, pack(lo(seen), mid), std::memory_order_relaxed))
        mine.store(pack(mid, hi(seen)), std::memory_order_relaxed);
    }
  }

 private:
  // One cache line each: a sharer's takes from its own range touch no other sharer's line.
  struct alignas(64) Range {
    std::atomic<std::uint64_t> bounds{0};  // lo << 32 | hi
  };

  static std::size_t checked(std::int64_t blocks, std::int64_t sharers) {
    REFDEC_CHECK(blocks >= 0 && blocks < (std::int64_t{1} << 31), "StreamShare: blocks must be in [0, 2^31), got " << blocks);
    REFDEC_CHECK(sharers >= 1, "StreamShare: needs at least one sharer, got " << sharers);
    return static_cast<std::size_t>(sharers);
  }
  static std::uint64_t pack(std::int64_t lo, std::int64_t hi) {
    return static_cast<std::uint64_t>(lo) << 32 | static_cast<std::uint64_t>(hi);
  }
  static std::int64_t lo(std::uint64_t v) { return static_cast<std::int64_t>(v >> 32); }
  static std::int64_t hi(std::uint64_t v) { return static_cast<std::int64_t>(v & 0xFFFFFFFFu); }
  static std::int64_t size(std::uint64_t v) { return hi(v) - lo(v); }

  std::vector<Range> ranges_;
};

}  // namespace v1
}  // namespace refdec
