// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// StreamShare: every block handed out exactly once, in runs that start at even blocks, whatever
// the sharers and however their takes interleave (one thread in turn, or threads at once); each
// sharer's own range first, then the back half of the fullest; its errors.

#include "refdec/cpu/stream_share.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using refdec::StreamShare;
using BlockRun = std::pair<std::int64_t, std::int64_t>;

// Every block in exactly one run; each run non-empty, from an even block to an even block or the end.
void expect_runs_cover(const std::vector<BlockRun>& runs, std::int64_t blocks, const std::string& what) {
  std::vector<int> times(static_cast<std::size_t>(blocks));
  for (const auto& [first, last] : runs) {
    ASSERT_TRUE(first >= 0 && first < last && last <= blocks) << what << ": run [" << first << ", " << last << ")";
    EXPECT_EQ(first % 2, 0) << what << ": run [" << first << ", " << last << ")";
    EXPECT_TRUE(last % 2 == 0 || last == blocks) << what << ": run [" << first << ", " << last << ")";
    for (std::int64_t b = first; b < last; ++b) ++times[static_cast<std::size_t>(b)];
  }
  for (std::int64_t b = 0; b < blocks; ++b) EXPECT_EQ(times[static_cast<std::size_t>(b)], 1) << what << ": block " << b;
}

TEST(StreamShare, HandsOutEveryBlockOnceWhateverTheOrderOfTakes) {
  std::mt19937 rng(5);
  for (const std::int64_t blocks : {0, 1, 2, 3, 7, 13, 64, 1001})
    for (const std::int64_t sharers : {1, 2, 3, 8}) {
      StreamShare share(blocks, sharers);
      std::vector<BlockRun> runs;
      std::vector<bool> done(static_cast<std::size_t>(sharers));
      for (std::int64_t left = sharers; left > 0;) {  // random sharers take in turn until each is told none is left
        const auto s = static_cast<std::int64_t>(rng() % static_cast<unsigned>(sharers));
        if (done[static_cast<std::size_t>(s)]) continue;
        BlockRun run;
        if (share.take(s, run.first, run.second))
          runs.push_back(run);
        else
          done[static_cast<std::size_t>(s)] = true, --left;
      }
      expect_runs_cover(runs, blocks, std::to_string(blocks) + " blocks, " + std::to_string(sharers) + " sharers");
    }
}

TEST(StreamShare, ThreadsTakingAtOnceGetEveryBlockOnce) {
  for (const std::int64_t sharers : {2, 4}) {
    for (int round = 0; round < 20; ++round) {
      const std::int64_t blocks = 2001;
      StreamShare share(blocks, sharers);
      std::vector<std::vector<BlockRun>> per(static_cast<std::size_t>(sharers));
      std::vector<std::thread> threads;
      for (std::int64_t s = 0; s < sharers; ++s)
        threads.emplace_back([&, s] {
          for (BlockRun run; share.take(s, run.first, run.second);) per[static_cast<std::size_t>(s)].push_back(run);
        });
      for (auto& t : threads) t.join();
      std::vector<BlockRun> runs;
      for (const auto& p : per) runs.insert(runs.end(), p.begin(), p.end());
      expect_runs_cover(runs, blocks, std::to_string(sharers) + " threads, round " + std::to_string(round));
    }
  }
}

// One sharer alone: its own range front to back in runs of 4, then 2 near its end; then the back
// half of the other's range, and so on until all is taken.
TEST(StreamShare, RunsItsOwnRangeFirstThenTheBackHalfOfTheFullest) {
  StreamShare share(16, 2);
  EXPECT_EQ(share.sharers(), 2);
  std::vector<BlockRun> runs;
  for (BlockRun run; share.take(0, run.first, run.second);) runs.push_back(run);
  const std::vector<BlockRun> expected = {{0, 4}, {4, 6}, {6, 8}, {12, 14}, {14, 16}, {10, 12}, {8, 10}};
  EXPECT_EQ(runs, expected);
  BlockRun run;
  EXPECT_FALSE(share.take(1, run.first, run.second));
  // The other sharer's first run is the front of its own range.
  StreamShare fresh(16, 2);
  ASSERT_TRUE(fresh.take(1, run.first, run.second));
  EXPECT_EQ(run, BlockRun(8, 12));
}

TEST(StreamShare, RejectsBadInput) {
  refdec_test::expect_error([] { StreamShare(-1, 2); }, "blocks");
  refdec_test::expect_error([] { StreamShare(std::int64_t{1} << 31, 2); }, "blocks");
  refdec_test::expect_error([] { StreamShare(4, 0); }, "sharer");
  StreamShare share(4, 2);
  std::int64_t first = 0, last = 0;
  refdec_test::expect_error([&] { share.take(2, first, last); }, "sharer 2 of 2");
  refdec_test::expect_error([&] { share.take(-1, first, last); }, "sharer");
}

}  // namespace
