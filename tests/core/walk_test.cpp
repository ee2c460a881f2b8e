// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The one acceptance walk (walk.hpp): what it asks the chooser and when, what it writes, and its
// forms (accept, accept_all, ChoiceArray, view). greedy_accept_test.cpp covers malformed trees.

#include "refdec/core/walk.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/core/draft_tree.hpp"

namespace {

using namespace refdec;

// Root 1; children 5 (node 1) and 8 (node 2); 5 has children 6 (node 3) and 9 (node 4); 6 has 7.
LinearTree branching() {
  LinearTree t;
  t.add_node(1, -1, 0.0f);
  t.add_node(5, 0, 0.0f);
  t.add_node(8, 0, 0.0f);
  t.add_node(6, 1, 0.0f);
  t.add_node(9, 1, 0.0f);
  t.add_node(7, 3, 0.0f);
  t.finish();
  return t;
}

// The chooser is asked once per node on the accepted path and once more where the walk stops, in
// root-to-leaf order, with the number of drafts accepted so far: a sampler may draw per call.
TEST(Walk, AsksEachNodeOnceRootToLeafWithItsDepth) {
  const LinearTree t = branching();
  std::vector<std::pair<std::int32_t, std::int32_t>> asked;
  const std::vector<Token> next = {5, 6, 0, 7, 0, 2};  // the target after each node
  Acceptance a;
  accept(view(t), [&](std::int32_t node, std::int32_t depth) {
    asked.emplace_back(node, depth);
    return next[static_cast<std::size_t>(node)];
  }, a);
  EXPECT_EQ(asked, (std::vector<std::pair<std::int32_t, std::int32_t>>{{0, 0}, {1, 1}, {3, 2}, {5, 3}}));
  EXPECT_EQ(a.nodes, (std::vector<std::int32_t>{1, 3, 5}));
  EXPECT_EQ(a.tokens, (std::vector<Token>{5, 6, 7, 2}));  // the drafts, then the bonus
  EXPECT_EQ(a.num_accepted(), 3);
}

// A second sibling is found as well as a first; a negative choice ("no token") matches nothing and
// becomes the bonus as it is.
TEST(Walk, TakesAnySiblingAndNeverMatchesANegativeChoice) {
  const LinearTree t = branching();
  Acceptance a;
  const std::vector<Token> second = {8, 0, 4, 0, 0, 0};
  accept(view(t), ChoiceArray{second.data()}, a);
  EXPECT_EQ(a.nodes, std::vector<std::int32_t>{2});
  EXPECT_EQ(a.tokens, (std::vector<Token>{8, 4}));
  const std::vector<Token> none = {-1, 0, 0, 0, 0, 0};
  accept(view(t), ChoiceArray{none.data()}, a);
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_EQ(a.tokens, std::vector<Token>{-1});
  Token bonus = 0;
  std::vector<std::int32_t> path(6, -7);
  EXPECT_EQ(walk(view(t), ChoiceArray{none.data()}, path.data(), bonus), 0);
  EXPECT_EQ(path[0], -7);  // nothing written past what was accepted
}

// A prefill chain is accepted whole without asking anyone, and emits nothing.
TEST(Walk, AcceptAllKeepsEveryChainNodeAndEmitsNothing) {
  const LinearTree chain = LinearTree::chain(std::vector<Token>{3, 4, 5, 6});
  Acceptance a;
  a.tokens = {9};
  accept_all(view(chain), a);
  EXPECT_EQ(a.nodes, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_TRUE(a.tokens.empty());
}

TEST(Walk, RefusesTreesWithoutNodesOrLinks) {
  LinearTree unfinished;
  unfinished.add_node(1, -1, 0.0f);
  refdec_test::expect_error([&] { (void)view(unfinished); }, "is not finished");
  Acceptance a;
  const TreeView empty{};
  refdec_test::expect_error([&] { accept(empty, [](std::int32_t, std::int32_t) { return Token{0}; }, a); }, "at least its root");
}

}  // namespace
