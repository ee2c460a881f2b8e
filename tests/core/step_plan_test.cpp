// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/step_plan.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/expect_error.hpp"
#include "core/random_step.hpp"
#include "refdec/core/greedy_accept.hpp"

namespace {

using namespace refdec;
using refdec_test::random_tree;

// Larger blocks than the default: masks wider than one word.
AuxBlock random_aux(std::mt19937& rng) { return refdec_test::random_aux(rng, {.max_tokens = 80, .max_offset = 20}); }

bool is_ancestor_or_self(const LinearTree& tree, std::int32_t j, std::int32_t i) {
  for (std::int32_t a = i; a >= 0; a = tree.parent[static_cast<std::size_t>(a)])
    if (a == j) return true;
  return false;
}

class StepPlanShapes : public ::testing::TestWithParam<int> {};

// Every field of the plan against a brute force built from the trees and blocks directly.
TEST_P(StepPlanShapes, MatchesBruteForce) {
  const int batch = GetParam();
  std::mt19937 rng(100 + static_cast<unsigned>(batch));
  StepPlan plan;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<LinearTree> trees;
    std::vector<AuxBlock> aux;
    std::vector<std::int64_t> lengths;
    for (int b = 0; b < batch; ++b) {
      trees.push_back(random_tree(rng));
      aux.push_back(random_aux(rng));
      lengths.push_back(static_cast<std::int64_t>(rng() % 5000));
    }
    const bool with_aux = trial % 2 == 0;
    plan_step(trees, with_aux ? std::span<const AuxBlock>(aux) : std::span<const AuxBlock>{}, lengths, 1000, plan);
    ASSERT_EQ(plan.batch(), batch);
    std::int32_t row = 0;
    for (int b = 0; b < batch; ++b) {
      const LinearTree& tree = trees[static_cast<std::size_t>(b)];
      const AuxBlock& block = aux[static_cast<std::size_t>(b)];
      const std::int32_t nodes = tree.size(), extra = with_aux ? block.size() : 0;
      ASSERT_EQ(plan.indptr[static_cast<std::size_t>(b)], row);
      ASSERT_EQ(plan.rows(b), nodes + extra);
      ASSERT_EQ(plan.num_nodes[static_cast<std::size_t>(b)], nodes);
      for (std::int32_t i = 0; i < nodes + extra; ++i) {
        const auto r = static_cast<std::size_t>(row + i);
        const bool is_tree = i < nodes;
        const Token token = is_tree ? tree.tokens[static_cast<std::size_t>(i)] : block.tokens[static_cast<std::size_t>(i - nodes)];
        const std::int64_t position = lengths[static_cast<std::size_t>(b)] +
                                      (is_tree ? tree.depth[static_cast<std::size_t>(i)] : block.offset[static_cast<std::size_t>(i - nodes)]);
        ASSERT_EQ(plan.tokens[r], token);
        ASSERT_EQ(plan.positions[r], position) << "positions = length + depth (tree) or + offset (auxiliary)";
        for (std::int32_t j = 0; j < nodes + extra; ++j) {
          bool want;
          if (is_tree)
            want = j < nodes && is_ancestor_or_self(tree, j, i);
          else if (j < nodes)
            want = j == 0 && block.attends(i - nodes, 0);
          else
            want = block.attends(i - nodes, j - nodes + 1);
          ASSERT_EQ(plan.sees(b, i, j), want) << "sequence " << b << " row " << i << " column " << j;
        }
      }
      // The walk over the plan's tree is the walk over the LinearTree.
      std::vector<Token> target(static_cast<std::size_t>(nodes));
      for (auto& t : target) t = static_cast<Token>(rng() % 3 == 0 ? rng() % 1000 : tree.tokens[rng() % tree.tokens.size()]);
      Acceptance want, got;
      greedy_accept(tree, target, want);
      ChoiceArray choose{target.data()};
      accept(plan.tree(b), choose, got);
      ASSERT_EQ(got.nodes, want.nodes);
      ASSERT_EQ(got.tokens, want.tokens);
      row += nodes + extra;
    }
    ASSERT_EQ(plan.rows(), row);
    ASSERT_EQ(plan.tokens.size(), static_cast<std::size_t>(row));
  }
}

// The keep plan keeps the root and the accepted path, in order, and grows each length by them.
TEST_P(StepPlanShapes, KeepPlanIsTheAcceptedPath) {
  const int batch = GetParam();
  std::mt19937 rng(7 + static_cast<unsigned>(batch));
  StepPlan plan;
  KeepPlan keep;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LinearTree> trees;
    std::vector<AuxBlock> aux;
    std::vector<std::int64_t> lengths;
    std::vector<Acceptance> accepted(static_cast<std::size_t>(batch));
    for (int b = 0; b < batch; ++b) {
      trees.push_back(random_tree(rng));
      aux.push_back(random_aux(rng));
      lengths.push_back(static_cast<std::int64_t>(rng() % 100));
    }
    plan_step(trees, aux, lengths, 0, plan);
    for (int b = 0; b < batch; ++b) {
      // Follow the tree along a random branch: the target is the token of a random child.
      const LinearTree& tree = trees[static_cast<std::size_t>(b)];
      std::vector<Token> target(static_cast<std::size_t>(tree.size()), -1);
      for (std::int32_t i = 0; i < tree.size(); ++i)
        if (tree.first_child[static_cast<std::size_t>(i)] >= 0 && rng() % 5 != 0)
          target[static_cast<std::size_t>(i)] = tree.tokens[static_cast<std::size_t>(tree.first_child[static_cast<std::size_t>(i)])];
      greedy_accept(tree, target, accepted[static_cast<std::size_t>(b)]);
    }
    keep_accepted(plan, accepted, keep);
    ASSERT_EQ(keep.batch(), batch);
    for (int b = 0; b < batch; ++b) {
      const auto& a = accepted[static_cast<std::size_t>(b)];
      std::vector<std::int32_t> want{0};
      want.insert(want.end(), a.nodes.begin(), a.nodes.end());
      const auto got = keep.kept(b);
      ASSERT_EQ(std::vector<std::int32_t>(got.begin(), got.end()), want);
      for (std::size_t k = 1; k < want.size(); ++k) ASSERT_GT(want[k], want[k - 1]) << "kept rows increase";
      ASSERT_EQ(keep.lengths[static_cast<std::size_t>(b)], lengths[static_cast<std::size_t>(b)] + static_cast<std::int64_t>(want.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Batch, StepPlanShapes, ::testing::Values(1, 7));

TEST(StepPlan, SingleNodeTreesAndEmptyBatch) {
  StepPlan plan;
  plan_step({}, {}, {}, 0, plan);
  EXPECT_EQ(plan.batch(), 0);
  EXPECT_EQ(plan.rows(), 0);
  std::vector<LinearTree> trees(3);
  for (int b = 0; b < 3; ++b) trees[static_cast<std::size_t>(b)].reset(10 + b);
  const std::vector<std::int64_t> lengths = {0, 5, 9};
  plan_step(trees, {}, lengths, 20, plan);
  EXPECT_EQ(plan.indptr, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.positions, (std::vector<std::int64_t>{0, 5, 9}));
  EXPECT_EQ(plan.mask, (std::vector<std::uint64_t>{1, 1, 1}));
  std::vector<Acceptance> none(3);
  KeepPlan keep;
  keep_accepted(plan, none, keep);
  EXPECT_EQ(keep.rows, (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(keep.lengths, (std::vector<std::int64_t>{1, 6, 10}));
}

TEST(StepPlan, RejectsBadInput) {
  StepPlan plan;
  std::vector<LinearTree> trees(2);
  trees[0].reset(3);
  trees[1].reset(4);
  const std::vector<std::int64_t> two = {0, 0};
  refdec_test::expect_error([&] { plan_step(trees, {}, std::vector<std::int64_t>{0}, 0, plan); }, "1 lengths");
  refdec_test::expect_error([&] { plan_step(trees, std::vector<AuxBlock>(1), two, 0, plan); }, "1 auxiliary blocks");
  refdec_test::expect_error([&] { plan_step(trees, {}, std::vector<std::int64_t>{0, -1}, 0, plan); }, "cached length -1 outside [0, 1099511627776]");
  refdec_test::expect_error([&] { plan_step(trees, {}, std::vector<std::int64_t>{0, INT64_MAX}, 0, plan); }, "cached length 9223372036854775807 outside");
  refdec_test::expect_error([&] { plan_step(trees, {}, std::vector<std::int64_t>{0, 0}, -5, plan); }, "vocab_size must be positive (or 0: ids not checked), got -5");
  refdec_test::expect_error([&] { plan_step(trees, {}, two, 4, plan); }, "token id 4 outside the vocabulary [0, 4)");
  std::vector<AuxBlock> aux(2);
  aux[1].add(9, 1, std::vector<std::int32_t>{0});
  refdec_test::expect_error([&] { plan_step(trees, aux, two, 5, plan); }, "row 1 (auxiliary) has token id 9");
  std::vector<LinearTree> empty(1);
  refdec_test::expect_error([&] { plan_step(empty, {}, std::vector<std::int64_t>{0}, 0, plan); }, "empty tree");
  // Nodes added after finish(): the links and the mask are a node short, and are not read.
  std::vector<LinearTree> unfinished(1);
  unfinished[0].reset(3);
  unfinished[0].add_node(5, 0, 0.0f);
  EXPECT_FALSE(unfinished[0].finished());
  refdec_test::expect_error([&] { plan_step(unfinished, {}, std::vector<std::int64_t>{0}, 0, plan); },
                            "plan_step: sequence 0's tree of 2 nodes is not finished (call LinearTree::finish())");
  unfinished[0].finish();
  EXPECT_TRUE(unfinished[0].finished());
  plan_step(unfinished, {}, std::vector<std::int64_t>{0}, 0, plan);
  EXPECT_EQ(plan.rows(), 2);
  // A keep plan must follow the tree.
  DraftTree draft;
  draft.insert(std::vector<Token>{1, 2}, 1.0f);
  draft.insert(std::vector<Token>{3}, 0.5f);
  const std::vector<LinearTree> one = {draft.linearize(0, 8)};  // [0] 0, [1] 1, [2] 3, [3] 2
  plan_step(one, {}, std::vector<std::int64_t>{4}, 0, plan);
  KeepPlan keep;
  std::vector<Acceptance> bad(1);
  bad[0].nodes = {2, 3};  // 3 is a child of 1, not of 2
  refdec_test::expect_error([&] { keep_accepted(plan, bad, keep); }, "node 3, which is not a child of node 2");
  bad[0].nodes = {1, 3};
  keep_accepted(plan, bad, keep);
  EXPECT_EQ(keep.rows, (std::vector<std::int32_t>{0, 1, 3}));
  refdec_test::expect_error([&] { keep_accepted(plan, std::vector<Acceptance>(2), keep); }, "2 acceptances");
}

}  // namespace

// The raw-pointer view reads what the plan holds; FlashInfer's packed custom mask holds, per
// sequence, the [rows, cached + rows] mask row-major, little bit order, byte-aligned segments.
TEST(StepPlan, ViewAndFlashInferPackedMask) {
  std::vector<LinearTree> trees(3);
  trees[0].add_node(5, -1, 0.0f);  // root, two children
  trees[0].add_node(6, 0, 0.0f);
  trees[0].add_node(7, 0, 0.0f);
  trees[0].finish();
  trees[1] = LinearTree::chain(std::vector<Token>(70, 3));  // rows past one 64-bit mask word
  trees[2].reset(9);
  const std::vector<std::int64_t> lengths = {1, 0, 13};
  StepPlan plan;
  plan_step(trees, {}, lengths, 0, plan);
  const StepPlanView v = plan.view();
  ASSERT_EQ(v.batch, 3);
  EXPECT_EQ(v.rows(), plan.rows());
  for (std::int32_t b = 0; b < 3; ++b) {
    ASSERT_EQ(v.rows(b), plan.rows(b));
    EXPECT_EQ(v.tree(b).num_nodes, plan.num_nodes[static_cast<std::size_t>(b)]);
    EXPECT_EQ(v.tree(b).tokens, plan.tokens.data() + plan.indptr[static_cast<std::size_t>(b)]);
  }
  EXPECT_TRUE(v.sees(1, 69, 0) && v.sees(1, 69, 68) && !v.sees(1, 3, 4) && !v.sees(0, 1, 2) && v.sees(0, 2, 0));

  std::vector<std::uint8_t> packed;
  std::vector<std::int64_t> indptr;
  flashinfer_packed_mask(plan, packed, indptr);
  // Sequence 0 by hand: one cached entry, rows {root, child 6, child 7} -> 1100 1110 1101.
  ASSERT_EQ(indptr.size(), 4u);
  EXPECT_EQ(indptr[1], 2);
  EXPECT_EQ(packed[0], 0b01110011);
  EXPECT_EQ(packed[1], 0b00001011);
  for (std::int32_t b = 0; b < 3; ++b) {
    const std::int64_t rows = plan.rows(b), width = lengths[static_cast<std::size_t>(b)] + rows;
    ASSERT_EQ(indptr[static_cast<std::size_t>(b) + 1] - indptr[static_cast<std::size_t>(b)], (rows * width + 7) / 8);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t k = 0; k < width; ++k) {
        const std::int64_t bit = i * width + k;
        const bool got = (packed[static_cast<std::size_t>(indptr[static_cast<std::size_t>(b)] + bit / 8)] >> (bit % 8)) & 1;
        const std::int64_t cached = lengths[static_cast<std::size_t>(b)];
        const bool want = k < cached || plan.sees(b, static_cast<std::int32_t>(i), static_cast<std::int32_t>(k - cached));
        ASSERT_EQ(got, want) << "sequence " << b << " row " << i << " column " << k;
      }
  }
  // The padding bits of a segment's last byte are clear, and a second call reuses the buffers.
  EXPECT_EQ(packed[1] >> 4, 0);
  flashinfer_packed_mask(plan, packed, indptr);
  EXPECT_EQ(indptr.back(), static_cast<std::int64_t>(packed.size()));
}

// The moves a keep plan asks of one sequence: kept rows to the entries after the cached ones, in
// order, those already in place skipped; applied in place in that order, nothing is lost.
TEST(StepPlan, KeepMovesCompactInPlace) {
  KeepPlan keep;
  keep.indptr = {0, 4, 5};
  keep.rows = {0, 2, 5, 6, 0};
  keep.lengths = {7, 4};
  std::vector<std::pair<std::int64_t, std::int64_t>> moves;
  for_each_keep_move(keep, 0, 3, [&](std::int64_t from, std::int64_t to) { moves.emplace_back(from, to); });
  EXPECT_EQ(moves, (std::vector<std::pair<std::int64_t, std::int64_t>>{{5, 4}, {8, 5}, {9, 6}}));
  std::vector<int> cache = {10, 11, 12, 20, 21, 22, 23, 24, 25, 26};  // 3 cached, then 7 step rows
  for_each_keep_move(keep, 0, 3, [&](std::int64_t from, std::int64_t to) { cache[static_cast<std::size_t>(to)] = cache[static_cast<std::size_t>(from)]; });
  cache.resize(7);
  EXPECT_EQ(cache, (std::vector<int>{10, 11, 12, 20, 22, 25, 26}));
  moves.clear();
  for_each_keep_move(keep, 1, 3, [&](std::int64_t from, std::int64_t to) { moves.emplace_back(from, to); });
  EXPECT_TRUE(moves.empty());  // the root stays where it is
}
