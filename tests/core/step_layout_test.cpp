// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/step_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "core/random_tree.hpp"

namespace {

using namespace refdec;
using Index = std::size_t;
using refdec_test::random_tree;

// A batch of random trees padded to a common node count (sometimes with extra padding).
struct Batch {
  std::vector<LinearTree> trees;
  std::int32_t padded = 0;
  std::vector<std::int32_t> parents;  // [B, T]
  std::vector<Token> tokens;          // [B, T] padding: 0
  std::vector<std::int64_t> lengths;  // [B]
};

Batch random_batch(std::mt19937& rng, std::size_t batch) {
  Batch out;
  for (std::size_t b = 0; b < batch; ++b) {
    out.trees.push_back(random_tree(rng));
    out.padded = std::max(out.padded, out.trees.back().size());
    out.lengths.push_back(static_cast<std::int64_t>(rng() % 50));
  }
  out.padded += static_cast<std::int32_t>(rng() % 3);
  const auto T = static_cast<Index>(out.padded);
  out.parents.assign(batch * T, -1);
  out.tokens.assign(batch * T, 0);
  for (Index b = 0; b < batch; ++b)
    for (Index i = 0; i < out.trees[b].parent.size(); ++i) {
      out.parents[b * T + i] = out.trees[b].parent[i];
      out.tokens[b * T + i] = out.trees[b].tokens[i];
    }
  return out;
}

// The target's token at each node of a batch ([B, T]): mostly one of the node's children, so that
// walks go deep, sometimes a token no child carries.
std::vector<Token> random_target(std::mt19937& rng, const Batch& batch) {
  const auto T = static_cast<Index>(batch.padded);
  std::vector<Token> target(batch.trees.size() * T, 0);
  for (Index b = 0; b < batch.trees.size(); ++b) {
    const LinearTree& tree = batch.trees[b];
    for (Index i = 0; i < T; ++i) {
      Token& y = target[b * T + i];
      y = static_cast<Token>(rng() % 1000);
      if (i >= static_cast<Index>(tree.size()) || rng() % 5 == 0) continue;
      std::vector<Token> children;
      for (std::int32_t c = tree.first_child[i]; c >= 0; c = tree.next_sibling[static_cast<Index>(c)])
        children.push_back(tree.tokens[static_cast<Index>(c)]);
      if (!children.empty()) y = children[rng() % children.size()];
    }
  }
  return target;
}

class StepLayoutBatch : public ::testing::TestWithParam<std::size_t> {};

TEST_P(StepLayoutBatch, LayoutMatchesLinearTreeBitForBit) {
  std::mt19937 rng(static_cast<unsigned>(11 + GetParam()));
  for (int trial = 0; trial < 20; ++trial) {
    const Batch batch = random_batch(rng, GetParam());
    StepLayout layout;
    build_step_layout(batch.parents, batch.lengths, batch.padded, layout);
    const auto T = static_cast<Index>(batch.padded);
    const auto W = static_cast<Index>(layout.mask_words);
    ASSERT_EQ(layout.mask_words, (batch.padded + 63) / 64);
    for (Index b = 0; b < batch.trees.size(); ++b) {
      const LinearTree& tree = batch.trees[b];
      const auto n = static_cast<Index>(tree.size());
      ASSERT_EQ(layout.num_nodes[b], tree.size());
      for (Index i = 0; i < T; ++i) {
        const Index k = b * T + i;
        const bool node = i < n;
        EXPECT_EQ(layout.depth[k], node ? tree.depth[i] : 0) << "b=" << b << " i=" << i;
        EXPECT_EQ(layout.positions[k], batch.lengths[b] + layout.depth[k]);
        EXPECT_EQ(layout.first_child[k], node ? tree.first_child[i] : -1) << "b=" << b << " i=" << i;
        EXPECT_EQ(layout.next_sibling[k], node ? tree.next_sibling[i] : -1) << "b=" << b << " i=" << i;
        for (Index w = 0; w < W; ++w) {
          // A padding row sees only itself; a tree row equals LinearTree's, zero-extended to W words.
          const std::uint64_t want =
              !node ? (w == i / 64 ? std::uint64_t{1} << (i % 64) : 0)
                    : (w < static_cast<Index>(tree.mask_words) ? tree.mask[i * static_cast<Index>(tree.mask_words) + w] : 0);
          ASSERT_EQ(layout.mask[k * W + w], want) << "b=" << b << " i=" << i << " w=" << w;
        }
      }
    }
  }
}

TEST_P(StepLayoutBatch, VerifyMatchesGreedyAccept) {
  std::mt19937 rng(static_cast<unsigned>(23 + GetParam()));
  std::int32_t accepted_total = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const Batch batch = random_batch(rng, GetParam());
    const std::vector<Token> target = random_target(rng, batch);
    StepLayout layout;
    build_step_layout(batch.parents, batch.lengths, batch.padded, layout);
    const auto T = static_cast<Index>(batch.padded);
    for (Index b = 0; b < batch.trees.size(); ++b) {
      std::vector<std::int32_t> kept(T, 7);  // [T] overwritten entirely
      std::int32_t num_accepted = -1;
      Token bonus = -1;
      greedy_verify_sequence(&batch.tokens[b * T], &layout.first_child[b * T], &layout.next_sibling[b * T],
                             &target[b * T], layout.num_nodes[b], batch.padded, kept.data(), num_accepted, bonus);
      Acceptance want;
      greedy_accept(batch.trees[b],
                    std::span<const Token>(&target[b * T], static_cast<Index>(batch.trees[b].size())), want);
      // The kept rows are exactly what the verifier hands KvCache::commit: the root, then the path.
      std::vector<std::int32_t> want_kept{0};
      want_kept.insert(want_kept.end(), want.nodes.begin(), want.nodes.end());
      want_kept.resize(T, -1);
      ASSERT_EQ(num_accepted, want.num_accepted()) << "b=" << b;
      EXPECT_EQ(kept, want_kept) << "b=" << b;
      EXPECT_EQ(bonus, want.tokens.back()) << "b=" << b;
      accepted_total += num_accepted;
    }
  }
  EXPECT_GT(accepted_total, 0);  // the targets do exercise deep walks
}

// KvCache::commit over a [layers, batch, capacity, entry] buffer: gather the kept entries of each
// sequence, then scatter them to contiguous slots after its cached ones.
void reference_commit(std::vector<float>& cache, Index layers, Index batch, Index capacity, Index entry,
                      const std::vector<std::int64_t>& lengths, const std::vector<std::vector<std::int32_t>>& kept) {
  for (Index l = 0; l < layers; ++l)
    for (Index b = 0; b < batch; ++b) {
      float* seq = &cache[(l * batch + b) * capacity * entry];
      const auto base = static_cast<Index>(lengths[b]);
      std::vector<float> gathered;
      for (const std::int32_t row : kept[b])
        gathered.insert(gathered.end(), seq + (base + static_cast<Index>(row)) * entry,
                        seq + (base + static_cast<Index>(row) + 1) * entry);
      std::copy(gathered.begin(), gathered.end(), seq + base * entry);
    }
}

TEST_P(StepLayoutBatch, CompactionMatchesCommitInAnyThreadOrder) {
  std::mt19937 rng(static_cast<unsigned>(37 + GetParam()));
  for (int trial = 0; trial < 5; ++trial) {
    const Batch batch = random_batch(rng, GetParam());
    const std::vector<Token> target = random_target(rng, batch);
    StepLayout layout;
    build_step_layout(batch.parents, batch.lengths, batch.padded, layout);
    const auto T = static_cast<Index>(batch.padded);
    const Index B = batch.trees.size(), layers = 1 + rng() % 3, entry = 1 + rng() % 5;
    const Index capacity = 50 + T + rng() % 4;  // lengths are below 50
    std::vector<std::int32_t> kept(B * T);
    std::vector<std::int32_t> num_kept(B);
    std::vector<std::vector<std::int32_t>> kept_lists(B);
    for (Index b = 0; b < B; ++b) {
      std::int32_t num_accepted = 0;
      Token bonus = 0;
      greedy_verify_sequence(&batch.tokens[b * T], &layout.first_child[b * T], &layout.next_sibling[b * T],
                             &target[b * T], layout.num_nodes[b], batch.padded, &kept[b * T], num_accepted, bonus);
      num_kept[b] = valid_kept(&kept[b * T], num_accepted + 1, batch.lengths[b], static_cast<std::int64_t>(capacity));
      ASSERT_EQ(num_kept[b], num_accepted + 1);  // a verified path is always a valid plan
      kept_lists[b].assign(&kept[b * T], &kept[b * T] + num_kept[b]);
    }
    std::vector<float> want(layers * B * capacity * entry);
    for (Index i = 0; i < want.size(); ++i) want[i] = static_cast<float>(i);  // every element distinct
    std::vector<float> got = want;
    reference_commit(want, layers, B, capacity, entry, batch.lengths, kept_lists);
    // One "thread" per (layer, sequence, element), run in a random order.
    std::vector<std::array<Index, 3>> threads;
    for (Index l = 0; l < layers; ++l)
      for (Index b = 0; b < B; ++b)
        for (Index e = 0; e < entry; ++e) threads.push_back({l, b, e});
    std::shuffle(threads.begin(), threads.end(), rng);
    for (const auto& [l, b, e] : threads)
      compact_element(&got[(l * B + b) * capacity * entry], static_cast<std::int64_t>(entry), batch.lengths[b],
                      &kept[b * T], num_kept[b], static_cast<std::int64_t>(e));
    ASSERT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, StepLayoutBatch, ::testing::Values(std::size_t{1}, std::size_t{7}, std::size_t{64}));

TEST(StepLayout, ChecksParents) {
  EXPECT_NO_THROW(check_parents(std::vector<std::int32_t>{-1, 0, 0, 1, -1, -1}));
  EXPECT_NO_THROW(check_parents(std::vector<std::int32_t>{-1}));
  EXPECT_THROW(check_parents(std::vector<std::int32_t>{}), Error);
  EXPECT_THROW(check_parents(std::vector<std::int32_t>{0, 0}), Error);         // root with a parent
  EXPECT_THROW(check_parents(std::vector<std::int32_t>{-1, 1}), Error);        // its own parent
  EXPECT_THROW(check_parents(std::vector<std::int32_t>{-1, 0, 3, 0}), Error);  // parent after the child
  EXPECT_THROW(check_parents(std::vector<std::int32_t>{-1, 0, -2}), Error);    // bad padding
  EXPECT_THROW(check_parents(std::vector<std::int32_t>{-1, -1, 0}), Error);    // a node after padding
  StepLayout layout;
  EXPECT_THROW(build_step_layout(std::vector<std::int32_t>{-1, 0, -1, 5}, std::vector<std::int64_t>{0, 0}, 2, layout),
               Error);
  EXPECT_THROW(build_step_layout(std::vector<std::int32_t>{-1, 0, -1}, std::vector<std::int64_t>{0, 0}, 2, layout),
               Error);
}

// What device code does with rows check_parents() rejects: the tree ends at the first bad parent,
// everything after it is padding, and nothing is read or written outside the row (the sanitized
// build checks the accesses).
TEST(StepLayout, MalformedParentsStayBounded) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    const auto T = static_cast<std::int32_t>(1 + rng() % 130);
    std::vector<std::int32_t> parent(static_cast<Index>(T));
    for (std::int32_t i = 0; i < T; ++i)  // mostly valid parents, sometimes anything
      parent[static_cast<Index>(i)] = rng() % 8 == 0 || i == 0 ? static_cast<std::int32_t>(rng() % 300) - 150
                                                                : static_cast<std::int32_t>(rng() % static_cast<unsigned>(i));
    const std::int32_t n = tree_size(parent.data(), T);
    ASSERT_GE(n, 1);
    ASSERT_LE(n, T);
    if (n < T) {
      EXPECT_FALSE(parent[static_cast<Index>(n)] >= 0 && parent[static_cast<Index>(n)] < n);
    }
    const auto W = static_cast<Index>(mask_words_for(T));
    // The true count, and a wrong one that claims the whole row and more.
    for (const std::int32_t count : {n, T + 3}) {
      for (std::int32_t i = 0; i < T; ++i) {
        std::vector<std::uint64_t> row(W);
        std::int32_t depth = -1, first_child = -2, next_sibling = -2;
        layout_node(parent.data(), T, count, i, depth, row.data(), first_child, next_sibling);
        if (i >= count) {
          EXPECT_EQ(depth, 0);
          EXPECT_EQ(first_child, -1);
          EXPECT_EQ(next_sibling, -1);
        }
        // Only ancestors (lower indices) and the node itself, one bit per level.
        std::int32_t bits = 0;
        for (Index w = 0; w < W; ++w) bits += std::popcount(row[w]);
        EXPECT_EQ(bits, depth + 1);
        EXPECT_TRUE((row[static_cast<Index>(i) / 64] >> (i % 64)) & 1U);
        for (Index w = static_cast<Index>(i) / 64 + 1; w < W; ++w) EXPECT_EQ(row[w], 0U);
        EXPECT_TRUE(first_child < 0 || (first_child > i && first_child < std::min(count, T)));
        EXPECT_TRUE(next_sibling < 0 || (next_sibling > i && next_sibling < std::min(count, T)));
      }
    }
  }
  EXPECT_EQ(tree_size(nullptr, 0), 0);
}

TEST(StepLayout, VerifyClampsTheNodeCount) {
  // A node count beyond the row is clamped to T; a zero count leaves only the root.
  const std::vector<Token> tokens = {1, 5, 6};
  const std::vector<std::int32_t> first_child = {1, 2, -1};
  const std::vector<std::int32_t> next_sibling = {-1, -1, -1};
  const std::vector<Token> target = {5, 6, 9};
  std::vector<std::int32_t> kept(3);
  std::int32_t num_accepted = -1;
  Token bonus = -1;
  greedy_verify_sequence(tokens.data(), first_child.data(), next_sibling.data(), target.data(), 1000, 3, kept.data(),
                         num_accepted, bonus);
  EXPECT_EQ(num_accepted, 2);
  EXPECT_EQ(kept, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(bonus, 9);
  greedy_verify_sequence(tokens.data(), first_child.data(), next_sibling.data(), target.data(), 0, 3, kept.data(),
                         num_accepted, bonus);
  EXPECT_EQ(num_accepted, 0);
  EXPECT_EQ(kept, (std::vector<std::int32_t>{0, -1, -1}));
  EXPECT_EQ(bonus, 5);
}

TEST(StepLayout, ValidKeptCutsMalformedPlans) {
  const auto valid = [](std::vector<std::int32_t> kept, std::int64_t length, std::int64_t capacity) {
    return valid_kept(kept.data(), static_cast<std::int32_t>(kept.size()), length, capacity);
  };
  EXPECT_EQ(valid({0, 2, 5}, 3, 10), 3);
  EXPECT_EQ(valid({0, 2, 5}, 5, 10), 2);   // slot 10 is outside the cache
  EXPECT_EQ(valid({0, 0, 5}, 0, 10), 1);   // a row below its entry would move up
  EXPECT_EQ(valid({0, 3, 2}, 0, 10), 2);   // rows must increase
  EXPECT_EQ(valid({1, 3}, 0, 10), 2);      // the root's row may move too
  EXPECT_EQ(valid({-1, 3}, 0, 10), 0);
  EXPECT_EQ(valid({0, 1}, -1, 10), 0);     // a negative length keeps nothing
}

TEST(StepLayout, ArgmaxPrefersLargestThenFirstAndNaN) {
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
