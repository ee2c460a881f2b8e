// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/greedy_accept.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using namespace refdec;

TEST(GreedyAccept, FollowsTargetAndReturnsBonus) {
  DraftTree t;
  t.insert(std::vector<Token>{5, 6, 7}, 2.0f);
  t.insert(std::vector<Token>{5, 8}, 1.0f);
  const auto lin = t.linearize(1, 10);  // [0]1 [1]5 [2]6 [3]8 [4]7
  Acceptance a;
  // Target: after 1 comes 5, after 5 comes 8, after 8 comes 9.
  greedy_accept(lin, std::vector<Token>{5, 8, 0, 9, 0}, a);
  EXPECT_EQ(a.nodes, (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(a.tokens, (std::vector<Token>{5, 8, 9}));
  greedy_accept(lin, std::vector<Token>{4, 8, 0, 9, 0}, a);  // first draft rejected
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_EQ(a.tokens, std::vector<Token>{4});
  greedy_accept(lin, std::vector<Token>{5, 6, 7, 0, 3}, a);  // whole path
  EXPECT_EQ(a.tokens, (std::vector<Token>{5, 6, 7, 3}));
  EXPECT_THROW(greedy_accept(lin, std::vector<Token>{1, 2}, a), Error);
}

TEST(GreedyAccept, WalkIsBoundedOnMalformedTrees) {
  // A sibling cycle 1 -> 2 -> 1 that never matches: the walk must stop.
  const std::vector<Token> tokens = {0, 5, 6};
  const std::vector<std::int32_t> first_child = {1, -1, -1};
  const std::vector<std::int32_t> next_sibling = {-1, 2, 1};
  const std::vector<Token> target = {9, 9, 9};
  std::vector<std::int32_t> path(3);
  EXPECT_EQ(greedy_walk(tokens.data(), first_child.data(), next_sibling.data(), target.data(), 3, path.data()), 0);
  // A first-child cycle whose tokens match forever: at most num_nodes - 1 nodes are written.
  const std::vector<Token> same = {7, 7};
  const std::vector<std::int32_t> self_child = {1, 1};
  const std::vector<std::int32_t> no_sibling = {-1, -1};
  std::vector<std::int32_t> one(1, -1);
  EXPECT_EQ(greedy_walk(same.data(), self_child.data(), no_sibling.data(), same.data(), 2, one.data()), 1);
  EXPECT_EQ(one[0], 1);
}

TEST(GreedyAccept, RejectsEmptyAndUnfinishedTrees) {
  Acceptance a;
  const LinearTree empty;
  refdec_test::expect_error([&] { greedy_accept(empty, {}, a); }, "the tree is empty");
  LinearTree unfinished;
  unfinished.add_node(3, -1, 0.0f);
  unfinished.add_node(4, 0, 0.0f);
  const std::vector<Token> target = {4, 9};
  refdec_test::expect_error([&] { greedy_accept(unfinished, target, a); }, "not finished");
  unfinished.finish();
  greedy_accept(unfinished, target, a);
  EXPECT_EQ(a.tokens, (std::vector<Token>{4, 9}));
}

// Against a brute force: the accepted path is the longest tree path equal to the target chain.
TEST(GreedyAccept, MatchesBruteForceOnRandomTrees) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 500; ++trial) {
    const int vocab = 2 + static_cast<int>(rng() % 4);
    DraftTree t;
    for (int p = 0; p < 1 + static_cast<int>(rng() % 20); ++p) {
      std::vector<Token> path(1 + rng() % 7);
      for (auto& x : path) x = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
      t.insert(path, 1.0f);
    }
    const auto lin = t.linearize(0, 1 + rng() % 40);
    std::vector<Token> target(static_cast<std::size_t>(lin.size()));
    for (auto& x : target) x = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
    Acceptance a;
    greedy_accept(lin, target, a);
    // Brute force: deepest node whose every ancestor-child step agrees with the target.
    std::int32_t best = 0;
    for (std::int32_t i = 1; i < lin.size(); ++i) {
      bool ok = true;
      for (std::int32_t j = i; j > 0 && ok; j = lin.parent[static_cast<std::size_t>(j)])
        ok = target[static_cast<std::size_t>(lin.parent[static_cast<std::size_t>(j)])] == lin.tokens[static_cast<std::size_t>(j)];
      if (ok && lin.depth[static_cast<std::size_t>(i)] > lin.depth[static_cast<std::size_t>(best)]) best = i;
    }
    ASSERT_EQ(a.num_accepted(), lin.depth[static_cast<std::size_t>(best)]);
    if (best > 0) {
      EXPECT_EQ(a.nodes.back(), best);
    }
    EXPECT_EQ(a.tokens.back(), target[static_cast<std::size_t>(best)]);
    for (std::size_t i = 1; i < a.nodes.size(); ++i) EXPECT_EQ(lin.parent[static_cast<std::size_t>(a.nodes[i])], a.nodes[i - 1]);
  }
}

}  // namespace
