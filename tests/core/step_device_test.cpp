// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/step_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "common/expect_error.hpp"
#include "core/random_step.hpp"
#include "refdec/core/aux_block.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"

namespace {

using namespace refdec;
using Index = std::size_t;
using refdec_test::random_aux;
using refdec_test::random_plan;
using refdec_test::random_target;
using refdec_test::random_tree;

// The host reference of a greedy step: accept() per sequence, then keep_accepted().
struct Reference {
  std::vector<Acceptance> accepted;  // [B]
  KeepPlan keep;
};

Reference reference_step(const StepPlan& plan, const std::vector<Token>& target) {
  Reference out;
  out.accepted.resize(static_cast<Index>(plan.batch()));
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    ChoiceArray choose{target.data() + plan.indptr[static_cast<Index>(b)]};
    accept(plan.tree(b), choose, out.accepted[static_cast<Index>(b)]);
  }
  keep_accepted(plan, out.accepted, out.keep);
  return out;
}

class StepDeviceBatch : public ::testing::TestWithParam<std::int32_t> {};

// One "thread" per sequence, in a random order, gives exactly the host's acceptance and keep plan.
TEST_P(StepDeviceBatch, VerifyMatchesAcceptAndKeepAccepted) {
  std::mt19937 rng(static_cast<unsigned>(23 + GetParam()));
  std::int32_t accepted_total = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const StepPlan plan = random_plan(rng, GetParam(), trial % 2 == 0);
    const std::vector<Token> target = random_target(rng, plan);
    const Reference want = reference_step(plan, target);
    const auto B = static_cast<Index>(plan.batch());
    std::vector<std::int32_t> kept(static_cast<Index>(plan.rows()), -7);  // rows past the keep rows stay -7
    std::vector<std::int32_t> num_kept(B, -1);
    std::vector<Token> bonus(B, -1);
    std::vector<std::int32_t> order(B);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (const std::int32_t b : order)
      greedy_verify_sequence(plan.indptr.data(), plan.num_nodes.data(), plan.tokens.data(), plan.first_child.data(),
                             plan.next_sibling.data(), target.data(), plan.rows(), b, kept.data(), num_kept.data(),
                             bonus.data());
    for (std::int32_t b = 0; b < plan.batch(); ++b) {
      const auto u = static_cast<Index>(b);
      const auto rows = want.keep.kept(b);
      ASSERT_EQ(num_kept[u], static_cast<std::int32_t>(rows.size())) << "b=" << b;
      EXPECT_EQ(plan.lengths[u] + num_kept[u], want.keep.lengths[u]);
      const auto first = kept.begin() + plan.indptr[u];
      EXPECT_TRUE(std::equal(rows.begin(), rows.end(), first)) << "b=" << b;
      EXPECT_TRUE(std::all_of(first + num_kept[u], first + plan.rows(b), [](std::int32_t x) { return x == -7; }))
          << "b=" << b << ": rows after the keep rows were written";
      EXPECT_EQ(bonus[u], want.accepted[u].tokens.back()) << "b=" << b;
      accepted_total += num_kept[u] - 1;
    }
    // The host keep plan laid out for the device is the same array (-1 where the verifier writes nothing).
    std::vector<std::int32_t> laid_out, laid_out_counts;
    lay_out_keep(plan, want.keep, laid_out, laid_out_counts);
    EXPECT_EQ(laid_out_counts, num_kept);
    std::replace(kept.begin(), kept.end(), -7, -1);
    EXPECT_EQ(laid_out, kept);
  }
  EXPECT_GT(accepted_total, 0);  // the targets do exercise deep walks
}

// A keep plan applied directly to per-sequence buffers laid out as ContiguousKvStore's
// ([2 * layers, capacity, entry]): each part's kept rows gathered, then written after the cached
// entries.
void apply_keep(std::vector<std::vector<float>>& sequences, Index parts, Index capacity, Index entry,
                const StepPlan& plan, const KeepPlan& keep) {
  for (std::int32_t b = 0; b < keep.batch(); ++b) {
    const auto u = static_cast<Index>(b);
    const auto base = static_cast<Index>(plan.lengths[u]);
    for (Index p = 0; p < parts; ++p) {
      float* part = sequences[u].data() + p * capacity * entry;
      std::vector<float> gathered;
      for (const std::int32_t row : keep.kept(b))
        gathered.insert(gathered.end(), part + (base + static_cast<Index>(row)) * entry,
                        part + (base + static_cast<Index>(row) + 1) * entry);
      std::copy(gathered.begin(), gathered.end(), part + base * entry);
    }
  }
}

// A random keep plan of `plan`: any increasing subset of each sequence's rows, auxiliary rows too
// (compaction does not care where the rows come from).
KeepPlan random_keep(std::mt19937& rng, const StepPlan& plan) {
  KeepPlan keep;
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    const unsigned density = rng() % 4;
    for (std::int32_t i = 0; i < plan.rows(b); ++i)
      if (density == 3 || rng() % 4 < density) keep.rows.push_back(i);
    keep.indptr.push_back(static_cast<std::int32_t>(keep.rows.size()));
    keep.lengths.push_back(plan.lengths[static_cast<Index>(b)] + keep.indptr.back() - keep.indptr[keep.indptr.size() - 2]);
  }
  return keep;
}

TEST_P(StepDeviceBatch, CompactionMatchesKeepPlanInAnyThreadOrder) {
  std::mt19937 rng(static_cast<unsigned>(37 + GetParam()));
  std::int32_t moved = 0;  // keep rows not already in place
  for (int trial = 0; trial < 8; ++trial) {
    const StepPlan plan = random_plan(rng, GetParam(), trial % 2 == 1);
    KeepPlan keep;
    if (trial % 4 < 2) {
      keep = reference_step(plan, random_target(rng, plan)).keep;  // what a greedy step keeps
    } else {
      keep = random_keep(rng, plan);
    }
    std::vector<std::int32_t> kept, num_kept;
    lay_out_keep(plan, keep, kept, num_kept);
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      for (std::int32_t k = 0; k < num_kept[static_cast<Index>(b)]; ++k)
        moved += kept[static_cast<Index>(plan.indptr[static_cast<Index>(b)] + k)] != k;
    const auto B = static_cast<Index>(plan.batch());
    const Index parts = 2 * (1 + rng() % 3), entry = 1 + rng() % 5;
    std::int64_t needed = 1;
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      needed = std::max(needed, plan.lengths[static_cast<Index>(b)] + plan.rows(b));
    const std::int64_t capacity = needed + static_cast<std::int64_t>(rng() % 4);
    const auto C = static_cast<Index>(capacity);
    std::vector<std::vector<float>> want(B);
    float next = 0;
    for (auto& sequence : want) {
      sequence.resize(parts * C * entry);
      for (auto& x : sequence) x = next++;  // every element distinct
    }
    std::vector<std::vector<float>> got = want;
    apply_keep(want, parts, C, entry, plan, keep);
    // One "thread" per (sequence, part, element), run in a random order, each with its own
    // compaction_rows() as on the device.
    std::vector<std::array<Index, 3>> threads;
    for (Index b = 0; b < B; ++b)
      for (Index p = 0; p < parts; ++p)
        for (Index e = 0; e < entry; ++e) threads.push_back({b, p, e});
    std::shuffle(threads.begin(), threads.end(), rng);
    for (const auto& [b, p, e] : threads) {
      const std::int64_t length = plan.lengths[b];
      const KeptRows rows = compaction_rows(plan.indptr.data(), plan.rows(), kept.data(), num_kept.data(),
                                            static_cast<std::int32_t>(b), length, capacity);
      ASSERT_EQ(rows.count, num_kept[b]);  // a keep plan of the step is always valid
      compact_element(got[b].data() + p * C * entry, static_cast<std::int64_t>(entry), length, rows.rows, rows.count,
                      static_cast<std::int64_t>(e));
    }
    ASSERT_EQ(got, want);
  }
  EXPECT_GT(moved, 0);
}

INSTANTIATE_TEST_SUITE_P(Batches, StepDeviceBatch, ::testing::Values(1, 7, 64));

// Plans no plan_step() would build: random indptr (negative, past R, decreasing), node counts,
// links (out of range, cycles, self loops) and keep lists. Every walk ends, writes only the
// sequence's own rows and keeps a chain of them; every compaction stays inside the buffer (the
// sanitized build checks the accesses of the exactly sized arrays too).
TEST(StepDevice, MalformedPlansStayBounded) {
  std::mt19937 rng(5);
  const auto any = [&](std::int32_t lo, std::int32_t hi) {  // in [lo, hi]
    return lo + static_cast<std::int32_t>(rng() % static_cast<unsigned>(hi - lo + 1));
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const std::int32_t B = any(1, 5);
    const std::int32_t R = any(B, 140);
    std::vector<std::int32_t> indptr(static_cast<Index>(B) + 1), num_nodes(static_cast<Index>(B));
    for (std::int32_t b = 0; b <= B; ++b)  // mostly increasing, sometimes anything
      indptr[static_cast<Index>(b)] = rng() % 6 == 0 ? any(-20, R + 20) : b == 0 ? 0 : b == B ? R : any(0, R);
    if (trial % 2 == 0) std::sort(indptr.begin(), indptr.end());
    for (auto& n : num_nodes) n = rng() % 5 == 0 ? any(-5, 1000) : any(1, R);
    std::vector<Token> tokens(static_cast<Index>(R)), target(static_cast<Index>(R));
    std::vector<std::int32_t> first_child(static_cast<Index>(R)), next_sibling(static_cast<Index>(R));
    for (std::int32_t i = 0; i < R; ++i) {
      const auto u = static_cast<Index>(i);
      tokens[u] = any(0, 2);  // few token values: walks follow the links far
      target[u] = any(0, 2);
      first_child[u] = rng() % 8 == 0 ? any(-300, 300) : any(-1, 40);
      next_sibling[u] = rng() % 8 == 0 ? any(-300, 300) : any(-1, 40);
    }
    for (std::int32_t b = 0; b < B; ++b) {
      std::vector<std::int32_t> kept(static_cast<Index>(R), -7), num_kept(static_cast<Index>(B), -9);
      std::vector<Token> bonus(static_cast<Index>(B), -9);
      greedy_verify_sequence(indptr.data(), num_nodes.data(), tokens.data(), first_child.data(), next_sibling.data(),
                             target.data(), R, b, kept.data(), num_kept.data(), bonus.data());
      const RowRange rows = sequence_rows(indptr.data(), b, R);
      ASSERT_GE(rows.first, 0);
      ASSERT_GE(rows.count, 0);
      ASSERT_LE(rows.first + rows.count, R);
      const std::int32_t n = num_kept[static_cast<Index>(b)];
      ASSERT_GE(n, rows.count > 0 ? 1 : 0);
      ASSERT_LE(n, rows.count);
      for (std::int32_t i = 0; i < R; ++i) {
        const bool written = i >= rows.first && i < rows.first + n;
        ASSERT_EQ(kept[static_cast<Index>(i)] != -7, written) << "trial " << trial << " b=" << b << " row " << i;
      }
      // The keep rows are the root and then nodes within the clamped node count (a cycle of links
      // may lead back to the root: compaction's valid_kept() cuts such a list).
      const std::int32_t nodes = std::clamp(num_nodes[static_cast<Index>(b)], 1, std::max(rows.count, 1));
      for (std::int32_t k = 0; k < n; ++k) {
        const std::int32_t node = kept[static_cast<Index>(rows.first + k)];
        ASSERT_TRUE(k == 0 ? node == 0 : node >= 0 && node < nodes) << "trial " << trial;
      }
      if (n > 0) {
        const std::int32_t last = kept[static_cast<Index>(rows.first + n - 1)];
        EXPECT_EQ(bonus[static_cast<Index>(b)], target[static_cast<Index>(rows.first + last)]);
      } else {
        EXPECT_EQ(bonus[static_cast<Index>(b)], -1);
      }
      for (std::int32_t c = 0; c < B; ++c)
        if (c != b) {
          EXPECT_EQ(num_kept[static_cast<Index>(c)], -9);
          EXPECT_EQ(bonus[static_cast<Index>(c)], -9);
        }
    }
    // Arbitrary keep lists: the cut prefix is a valid compaction, which stays inside the buffer.
    std::vector<std::int32_t> kept(static_cast<Index>(R)), num_kept(static_cast<Index>(B));
    for (auto& k : kept) k = rng() % 3 == 0 ? any(-5, R + 5) : any(0, 40);
    for (Index i = 1; i < kept.size(); ++i)
      if (rng() % 2 == 0) kept[i] = kept[i - 1] + any(0, 3);  // long increasing runs
    for (auto& n : num_kept) n = any(-3, R + 3);
    const std::int64_t capacity = any(1, 2 * R), entry = any(1, 3);
    for (std::int32_t b = 0; b < B; ++b) {
      const std::int64_t length = any(-3, static_cast<std::int32_t>(capacity));
      const RowRange rows = sequence_rows(indptr.data(), b, R);
      const KeptRows keep = compaction_rows(indptr.data(), R, kept.data(), num_kept.data(), b, length, capacity);
      ASSERT_GE(keep.count, 0);
      ASSERT_LE(keep.count, std::max(0, std::min(num_kept[static_cast<Index>(b)], rows.count)));
      for (std::int32_t k = 0; k < keep.count; ++k) {
        ASSERT_GE(keep.rows[k], k);
        ASSERT_LT(keep.rows[k], rows.count);
        ASSERT_TRUE(k == 0 || keep.rows[k] > keep.rows[k - 1]);
        ASSERT_LT(length + keep.rows[k], capacity);
      }
      std::vector<std::int16_t> buffer(static_cast<Index>(capacity * entry));
      for (Index i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::int16_t>(i);
      for (std::int64_t e = 0; e < entry; ++e) compact_element(buffer.data(), entry, length, keep.rows, keep.count, e);
    }
  }
}

TEST(StepDevice, SequenceRowsClampToThePlan) {
  const auto rows = [](std::vector<std::int32_t> indptr, std::int32_t b, std::int32_t total) {
    const RowRange r = sequence_rows(indptr.data(), b, total);
    return std::array<std::int32_t, 2>{r.first, r.count};
  };
  EXPECT_EQ(rows({0, 3, 5}, 0, 5), (std::array<std::int32_t, 2>{0, 3}));
  EXPECT_EQ(rows({0, 3, 5}, 1, 5), (std::array<std::int32_t, 2>{3, 2}));
  EXPECT_EQ(rows({0, 3, 9}, 1, 5), (std::array<std::int32_t, 2>{3, 2}));   // past R
  EXPECT_EQ(rows({-4, 3}, 0, 5), (std::array<std::int32_t, 2>{0, 3}));     // before 0
  EXPECT_EQ(rows({4, 2}, 0, 5), (std::array<std::int32_t, 2>{4, 0}));      // decreasing
  EXPECT_EQ(rows({7, 9}, 0, 5), (std::array<std::int32_t, 2>{5, 0}));      // wholly past R
}

TEST(StepDevice, VerifyClampsTheNodeCount) {
  // One sequence of 3 rows, a chain 0 -> 1 -> 2; a node count beyond the rows is clamped to them,
  // a zero count leaves only the root.
  const std::vector<std::int32_t> indptr = {0, 3};
  const std::vector<Token> tokens = {1, 5, 6};
  const std::vector<std::int32_t> first_child = {1, 2, -1};
  const std::vector<std::int32_t> next_sibling = {-1, -1, -1};
  const std::vector<Token> target = {5, 6, 9};
  for (const auto& [nodes, want_kept, want_bonus] :
       {std::tuple{1000, std::vector<std::int32_t>{0, 1, 2}, 9}, std::tuple{0, std::vector<std::int32_t>{0}, 5},
        std::tuple{2, std::vector<std::int32_t>{0, 1}, 6}}) {
    const std::vector<std::int32_t> num_nodes = {nodes};
    std::vector<std::int32_t> kept(3, -1), num_kept(1);
    std::vector<Token> bonus(1);
    greedy_verify_sequence(indptr.data(), num_nodes.data(), tokens.data(), first_child.data(), next_sibling.data(),
                           target.data(), 3, 0, kept.data(), num_kept.data(), bonus.data());
    ASSERT_EQ(num_kept[0], static_cast<std::int32_t>(want_kept.size())) << "num_nodes " << nodes;
    EXPECT_TRUE(std::equal(want_kept.begin(), want_kept.end(), kept.begin())) << "num_nodes " << nodes;
    EXPECT_EQ(bonus[0], want_bonus) << "num_nodes " << nodes;
  }
  // A sequence without rows keeps nothing and has no bonus token.
  const std::vector<std::int32_t> empty_indptr = {2, 2}, num_nodes = {1};
  std::vector<std::int32_t> kept(3, -1), num_kept(1, 5);
  std::vector<Token> bonus(1, 5);
  greedy_verify_sequence(empty_indptr.data(), num_nodes.data(), tokens.data(), first_child.data(), next_sibling.data(),
                         target.data(), 3, 0, kept.data(), num_kept.data(), bonus.data());
  EXPECT_EQ(num_kept[0], 0);
  EXPECT_EQ(bonus[0], -1);
  EXPECT_EQ(kept, (std::vector<std::int32_t>{-1, -1, -1}));
}

TEST(StepDevice, ValidKeptCutsMalformedPlans) {
  const auto valid = [](std::vector<std::int32_t> kept, std::int32_t rows, std::int64_t length, std::int64_t capacity) {
    return valid_kept(kept.data(), static_cast<std::int32_t>(kept.size()), rows, length, capacity);
  };
  EXPECT_EQ(valid({0, 2, 5}, 6, 3, 10), 3);
  EXPECT_EQ(valid({0, 2, 5}, 6, 5, 10), 2);   // slot 10 is outside the cache
  EXPECT_EQ(valid({0, 2, 5}, 5, 3, 10), 2);   // row 5 is not a row of a 5-row step
  EXPECT_EQ(valid({0, 0, 5}, 6, 0, 10), 1);   // a row below its entry would move up
  EXPECT_EQ(valid({0, 3, 2}, 6, 0, 10), 2);   // rows must increase
  EXPECT_EQ(valid({1, 3}, 6, 0, 10), 2);      // the root's row may move too
  EXPECT_EQ(valid({-1, 3}, 6, 0, 10), 0);
  EXPECT_EQ(valid({0, 1}, 6, -1, 10), 0);     // a negative length keeps nothing
  EXPECT_EQ(valid({0, 1, 2}, 2, 0, 10), 2);   // never more entries than rows
  EXPECT_EQ(valid_kept(nullptr, -3, 4, 0, 10), 0);
}

TEST(StepDevice, LayOutKeepChecksItsPlan) {
  std::mt19937 rng(9);
  const StepPlan plan = random_plan(rng, 3, false);
  KeepPlan keep;
  keep.indptr = {0, 1};
  keep.rows = {0};
  keep.lengths = {1};
  std::vector<std::int32_t> kept, num_kept;
  refdec_test::expect_error([&] { lay_out_keep(plan, keep, kept, num_kept); }, "a keep plan of 1 sequences for a plan of 3");
  keep.indptr = {0, 1, 1, 1 + plan.rows(2) + 1};
  keep.rows.resize(static_cast<Index>(keep.indptr.back()), 0);
  keep.lengths = {0, 0, 0};
  refdec_test::expect_error([&] { lay_out_keep(plan, keep, kept, num_kept); }, "sequence 2 keeps");
}

TEST(StepDevice, ArgmaxPrefersLargestThenFirstAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}.data(), 4), 1);
  EXPECT_EQ(argmax(std::vector<float>{-inf, -inf}.data(), 2), 0);
  EXPECT_EQ(argmax(std::vector<float>{1, inf, nan, nan}.data(), 4), 2);  // NaN wins, the first one
  EXPECT_EQ(argmax(std::vector<float>{7}.data(), 1), 0);
  EXPECT_EQ(argmax(nullptr, 0), 0);
  // A total order: every pair is decided one way, so reductions may combine in any order.
  const std::vector<float> values = {nan, -inf, -1, 0, -0.0f, 2, inf};
  for (std::int32_t i = 0; i < 7; ++i)
    for (std::int32_t j = 0; j < 7; ++j)
      if (i != j) {
        EXPECT_NE(argmax_prefers(values[static_cast<Index>(i)], i, values[static_cast<Index>(j)], j),
                  argmax_prefers(values[static_cast<Index>(j)], j, values[static_cast<Index>(i)], i));
      }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-5, 5);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> row(1 + rng() % 111);
    for (auto& x : row) x = std::round(u(rng));  // many ties
    EXPECT_EQ(argmax(row.data(), static_cast<std::int32_t>(row.size())),
              std::max_element(row.begin(), row.end()) - row.begin());
  }
}

}  // namespace
