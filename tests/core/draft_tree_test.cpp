// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/draft_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using namespace refdec;

TEST(DraftTree, MergesSharedPrefixesAndAccumulatesScores) {
  DraftTree t;
  EXPECT_TRUE(t.empty());
  t.insert(std::vector<Token>{5, 6, 7}, 1.0f);
  t.insert(std::vector<Token>{5, 6, 8}, 2.0f);
  t.insert(std::vector<Token>{9}, 0.5f);
  t.insert(std::vector<Token>{5, 6, 7}, 1.0f);  // duplicate path
  EXPECT_EQ(t.size(), 5u);
  const auto lin = t.linearize(3, 100);
  EXPECT_EQ(to_string(lin),
            "[0] 3\n"
            "  [1] 5 (4)\n"
            "    [3] 6 (4)\n"
            "      [4] 7 (2)\n"
            "      [5] 8 (2)\n"
            "  [2] 9 (0.5)\n");
}

TEST(DraftTree, RejectsNegativeTokensAndBadScores) {
  DraftTree t;
  EXPECT_THROW(t.insert(std::vector<Token>{1, -2}, 1.0f), Error);
  EXPECT_THROW(t.insert(std::vector<Token>{1}, -1.0f), Error);
  EXPECT_THROW(t.insert(std::vector<Token>{1}, std::numeric_limits<float>::quiet_NaN()), Error);
}

TEST(DraftTree, BudgetKeepsBestNodesWithTheirAncestors) {
  DraftTree t;
  t.insert(std::vector<Token>{1, 2, 3, 4}, 1.0f);
  t.insert(std::vector<Token>{5}, 3.0f);
  t.insert(std::vector<Token>{1, 7}, 1.5f);
  const auto lin = t.linearize(0, 3);
  EXPECT_EQ(to_string(lin),
            "[0] 0\n"
            "  [1] 5 (3)\n"
            "  [2] 1 (2.5)\n"
            "    [3] 7 (1.5)\n");
  EXPECT_EQ(t.linearize(0, 0).size(), 1);
  const auto root_only = t.linearize(42, 0);
  EXPECT_EQ(root_only.tokens, std::vector<Token>{42});
  EXPECT_EQ(root_only.parent, std::vector<std::int32_t>{-1});
}

TEST(LinearTree, ChainIsACausalBlock) {
  const auto c = LinearTree::chain(std::vector<Token>{4, 5, 6});
  EXPECT_EQ(c.parent, (std::vector<std::int32_t>{-1, 0, 1}));
  EXPECT_EQ(c.depth, (std::vector<std::int32_t>{0, 1, 2}));
  for (std::int32_t i = 0; i < 3; ++i)
    for (std::int32_t j = 0; j < 3; ++j) EXPECT_EQ(c.attends(i, j), j <= i) << i << "," << j;
  EXPECT_EQ(LinearTree::chain({}).size(), 0);
}

TEST(LinearTree, AddNodeRejectsParentsThatAreNotExistingNodes) {
  LinearTree t;
  refdec_test::expect_error([&] { t.add_node(5, 0, 0.0f); }, "needs parent -1, got 0");
  EXPECT_EQ(t.size(), 0);
  t.add_node(5, -1, 0.0f);
  refdec_test::expect_error([&] { t.add_node(6, -1, 0.0f); }, "parent index -1 of node 1");
  refdec_test::expect_error([&] { t.add_node(6, 1, 0.0f); }, "parent index 1 of node 1");
  refdec_test::expect_error([&] { t.add_node(6, std::numeric_limits<std::int32_t>::max(), 0.0f); }, "parent index 2147483647");
  t.add_node(6, 0, 0.0f);
  t.add_node(7, 1, 0.0f);
  EXPECT_EQ(t.size(), 3);
  t.finish();
  EXPECT_EQ(t.depth, (std::vector<std::int32_t>{0, 1, 2}));
}

TEST(LinearTree, FinishRejectsParentLinksEditedOutOfRange) {
  LinearTree t = LinearTree::chain(std::vector<Token>{1, 2, 3});
  t.parent[2] = 7;
  refdec_test::expect_error([&] { t.finish(); }, "parent 7 of node 2");
  t.parent[2] = 2;  // itself: not an earlier node
  refdec_test::expect_error([&] { t.finish(); }, "parent 2 of node 2");
  t.parent[2] = 1;
  t.parent[0] = 0;
  refdec_test::expect_error([&] { t.finish(); }, "node 0 is the root");
  t.parent[0] = -1;
  t.depth.pop_back();
  refdec_test::expect_error([&] { t.finish(); }, "3 tokens but 3 parents, 2 depths");
  t.depth.push_back(2);
  t.finish();
  EXPECT_TRUE(t.attends(2, 0));
}

TEST(LinearTree, AttendsRejectsIndicesOutsideTheTree) {
  const LinearTree empty;
  refdec_test::expect_error([&] { (void)empty.attends(0, 0); }, "must be in [0, 0)");
  const LinearTree c = LinearTree::chain(std::vector<Token>{1, 2});
  EXPECT_TRUE(c.attends(1, 0));
  refdec_test::expect_error([&] { (void)c.attends(2, 0); }, "attends(2, 0)");
  refdec_test::expect_error([&] { (void)c.attends(0, -1); }, "attends(0, -1)");
  LinearTree unfinished;
  unfinished.add_node(1, -1, 0.0f);
  refdec_test::expect_error([&] { (void)unfinished.attends(0, 0); }, "not finished");
}

TEST(DraftTree, AddChildBuildsTheSameTrieAsInsert) {
  DraftTree by_path;
  by_path.insert(std::vector<Token>{5, 6, 7}, 1.0f);
  by_path.insert(std::vector<Token>{5, 8}, 2.0f);
  DraftTree by_node;
  const std::int32_t a = by_node.add_child(0, 5);
  const std::int32_t b = by_node.add_child(a, 6);
  const std::int32_t c = by_node.add_child(b, 7);
  EXPECT_EQ(by_node.add_child(0, 5), a);  // existing child: no new node
  const std::int32_t d = by_node.add_child(a, 8);
  EXPECT_EQ(by_node.size(), 4u);
  by_node.set_score(a, 3.0f);
  by_node.set_score(b, 1.0f);
  by_node.set_score(c, 1.0f);
  by_node.set_score(d, 2.0f);
  EXPECT_EQ(to_string(by_node.linearize(1, 10)), to_string(by_path.linearize(1, 10)));
  EXPECT_EQ(by_node.find_child(0, 5), a);
  EXPECT_EQ(by_node.find_child(a, 8), d);
  EXPECT_EQ(by_node.find_child(a, 7), -1);
  EXPECT_EQ(by_node.find_child(c, 7), -1);
  // Reading nodes: the root, then parents before children, siblings linked in creation order.
  EXPECT_EQ(by_path.node(0).token, -1);
  EXPECT_EQ(by_path.node(0).depth, 0);
  const auto& n5 = by_path.node(by_path.node(0).first_child);
  EXPECT_EQ(n5.token, 5);
  EXPECT_EQ(n5.score, 3.0f);
  EXPECT_EQ(n5.next_sibling, -1);
  const auto& n6 = by_path.node(n5.first_child);
  EXPECT_EQ(n6.token, 6);
  EXPECT_EQ(n6.depth, 2);
  EXPECT_EQ(by_path.node(n6.next_sibling).token, 8);
}

TEST(DraftTree, SetScoreReplacesAndCutsFollowIt) {
  DraftTree t;
  t.insert(std::vector<Token>{1}, 5.0f);
  t.insert(std::vector<Token>{2}, 1.0f);
  t.set_score(t.find_child(0, 2), 9.0f);  // replaces, does not add
  EXPECT_EQ(t.node(t.find_child(0, 2)).score, 9.0f);
  EXPECT_EQ(to_string(t.linearize(0, 1)), "[0] 0\n  [1] 2 (9)\n");
}

TEST(DraftTree, NodeAccessRejectsBadIndicesAndScores) {
  DraftTree t;
  t.insert(std::vector<Token>{1, 2}, 1.0f);
  EXPECT_THROW(t.node(3), Error);
  EXPECT_THROW(t.node(-1), Error);
  EXPECT_THROW(t.add_child(7, 1), Error);
  EXPECT_THROW(t.add_child(0, -4), Error);
  EXPECT_THROW(t.set_score(0, 1.0f), Error);  // the root has no score
  EXPECT_THROW(t.set_score(1, -1.0f), Error);
  EXPECT_THROW(t.set_score(1, std::numeric_limits<float>::infinity()), Error);
  EXPECT_EQ(t.size(), 2u);
}

struct Shape {
  int paths;
  int max_len;
  int vocab;
  std::size_t budget;
};

class RandomTree : public ::testing::TestWithParam<Shape> {};

// Properties on random trees: dedupe, ancestor-closed cut that keeps the top scores, breadth-first
// order, consistent child/sibling arrays, ancestor-only masks.
TEST_P(RandomTree, Properties) {
  const Shape s = GetParam();
  std::mt19937 rng(static_cast<unsigned>(s.paths * 131 + s.vocab));
  for (int trial = 0; trial < 20; ++trial) {
    DraftTree t;
    std::map<std::vector<Token>, float> prefix_score;  // brute force: every prefix and its score
    for (int p = 0; p < s.paths; ++p) {
      std::vector<Token> path(1 + rng() % static_cast<unsigned>(s.max_len));
      for (auto& x : path) x = static_cast<Token>(rng() % static_cast<unsigned>(s.vocab));
      const float score = static_cast<float>(1 + rng() % 8);
      t.insert(path, score);
      for (std::size_t i = 1; i <= path.size(); ++i) prefix_score[std::vector<Token>(path.begin(), path.begin() + static_cast<long>(i))] += score;
    }
    ASSERT_EQ(t.size(), prefix_score.size());
    const auto lin = t.linearize(7, s.budget);
    const auto n = lin.size();
    ASSERT_EQ(lin.num_drafts(), static_cast<std::int32_t>(std::min(s.budget, prefix_score.size())));
    std::vector<std::vector<Token>> paths(static_cast<std::size_t>(n));
    std::set<std::vector<Token>> seen;
    float min_kept = 1e30f;
    for (std::int32_t i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      if (i == 0) {
        EXPECT_EQ(lin.parent[0], -1);
        EXPECT_EQ(lin.depth[0], 0);
        continue;
      }
      const std::int32_t p = lin.parent[u];
      ASSERT_GE(p, 0);
      ASSERT_LT(p, i);                                   // parents first
      EXPECT_EQ(lin.depth[u], lin.depth[static_cast<std::size_t>(p)] + 1);
      EXPECT_GE(lin.depth[u], lin.depth[u - 1]);         // breadth-first: depths never decrease
      if (i > 1 && lin.depth[u] == lin.depth[u - 1]) {
        EXPECT_GE(p, lin.parent[u - 1]);
      }
      paths[u] = paths[static_cast<std::size_t>(p)];
      paths[u].push_back(lin.tokens[u]);
      EXPECT_TRUE(seen.insert(paths[u]).second) << "duplicate node";
      ASSERT_TRUE(prefix_score.count(paths[u]));
      EXPECT_EQ(lin.score[u], prefix_score[paths[u]]);
      min_kept = std::min(min_kept, lin.score[u]);
    }
    // Scores are monotone along paths, so the cut keeps a top-budget set: nothing dropped beats
    // the worst kept node.
    for (const auto& [path, score] : prefix_score)
      if (!seen.count(path)) {
        EXPECT_LE(score, min_kept);
      }
    // prune() keeps exactly the nodes the cut keeps, with their scores and order.
    DraftTree pruned = t;
    pruned.prune(s.budget);
    EXPECT_EQ(pruned.size(), static_cast<std::size_t>(lin.num_drafts()));
    EXPECT_EQ(to_string(pruned.linearize(7, prefix_score.size())), to_string(lin));
    // pruned_into() writes the same tree elsewhere, leaving this one whole, over reused memory.
    DraftTree into;
    into.insert(std::vector<Token>{99, 98}, 5.0f);  // stale content is replaced
    DraftTree::PruneScratch scratch;
    t.pruned_into(s.budget, into, scratch);
    EXPECT_EQ(to_string(into.linearize(7, prefix_score.size())), to_string(lin));
    EXPECT_EQ(t.size(), prefix_score.size());
    t.pruned_into(prefix_score.size(), into, scratch);  // a budget above the size: the whole tree
    EXPECT_EQ(into.size(), t.size());
    // Children and siblings: every node reachable exactly once, siblings distinct.
    std::vector<int> reached(static_cast<std::size_t>(n), 0);
    reached[0] = 1;
    for (std::int32_t i = 0; i < n; ++i) {
      std::set<Token> sib;
      float prev = 1e30f;
      for (std::int32_t c = lin.first_child[static_cast<std::size_t>(i)]; c >= 0; c = lin.next_sibling[static_cast<std::size_t>(c)]) {
        EXPECT_EQ(lin.parent[static_cast<std::size_t>(c)], i);
        EXPECT_TRUE(sib.insert(lin.tokens[static_cast<std::size_t>(c)]).second);
        EXPECT_LE(lin.score[static_cast<std::size_t>(c)], prev);  // best child first
        prev = lin.score[static_cast<std::size_t>(c)];
        ++reached[static_cast<std::size_t>(c)];
      }
    }
    for (const int r : reached) EXPECT_EQ(r, 1);
    // Mask row i has exactly i and its ancestors.
    for (std::int32_t i = 0; i < n; ++i) {
      std::set<std::int32_t> anc;
      for (std::int32_t j = i; j >= 0; j = lin.parent[static_cast<std::size_t>(j)]) anc.insert(j);
      for (std::int32_t j = 0; j < n; ++j) EXPECT_EQ(lin.attends(i, j), anc.count(j) == 1) << i << "," << j;
    }
  }
}

// A DraftTree keeps no scratch, so one const tree serves many threads at once: each linearises
// it at every budget, with scratch of its own and without, and gets what a lone caller gets.
TEST(DraftTree, ConstTreeLinearizesConcurrently) {
  std::mt19937 rng(17);
  DraftTree built;
  for (int p = 0; p < 60; ++p) {
    std::vector<Token> path(1 + rng() % 10);
    for (auto& x : path) x = static_cast<Token>(rng() % 7);
    built.insert(path, static_cast<float>(1 + rng() % 4));
  }
  const DraftTree& tree = built;
  std::vector<std::string> expected;
  std::vector<std::size_t> budgets;  // every cut size from 0 to past the whole tree, in steps of 3
  for (std::size_t budget = 0; budget <= tree.size() + 3; budget += 3) budgets.push_back(budget);
  for (const std::size_t budget : budgets) expected.push_back(to_string(tree.linearize(5, budget)));

  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      LinearTree out;
      LinearizeScratch scratch;
      for (int round = 0; round < 4; ++round) {
        for (std::size_t k = 0; k < budgets.size(); ++k) {
          // Threads walk the budgets in different orders so that their cuts differ at any moment.
          const std::size_t i = (t % 2 == 0) ? k : budgets.size() - 1 - k;
          if (round % 2 == 0)
            tree.linearize(5, budgets[i], out, scratch);
          else
            tree.linearize(5, budgets[i], out);
          mismatches[static_cast<std::size_t>(t)] += to_string(out) != expected[i];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[static_cast<std::size_t>(t)], 0) << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(Shapes, RandomTree,
                         ::testing::Values(Shape{1, 1, 3, 1}, Shape{1, 7, 3, 7}, Shape{8, 7, 3, 5},
                                           Shape{30, 6, 4, 64}, Shape{60, 12, 111, 100}, Shape{100, 3, 2, 200},
                                           Shape{40, 20, 5, 65}));

}  // namespace
