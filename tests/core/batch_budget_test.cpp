// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// One budget for a whole step: the allocator against exhaustive search, the cut of a tree to its
// most likely nodes, the default acceptance estimates.

#include "refdec/core/batch_budget.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using namespace refdec;

// The step's expected tokens per second with `counts` of each offer's best nodes.
double rate(const std::vector<std::vector<float>>& offers, const std::vector<std::size_t>& counts, std::size_t fixed,
            const StepCost& cost) {
  double expected = static_cast<double>(offers.size());
  std::size_t nodes = 0;
  for (std::size_t b = 0; b < offers.size(); ++b) {
    for (std::size_t i = 0; i < counts[b]; ++i) expected += offers[b][i];
    nodes += counts[b];
  }
  return expected / cost.seconds(std::max<std::size_t>(fixed + nodes, 1));
}

std::vector<std::span<const float>> spans(const std::vector<std::vector<float>>& offers) {
  return {offers.begin(), offers.end()};
}

std::vector<float> random_offer(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(n);
  for (float& x : p) x = u(rng) * u(rng);
  std::sort(p.begin(), p.end(), std::greater<>());
  return p;
}

// On random batches and costs (affine, measured with a knee), the allocation reaches the best rate
// that any combination of counts reaches (exhaustive search over every count of every sequence).
TEST(BatchBudget, MatchesExhaustiveSearch) {
  std::mt19937 rng(5);
  const std::vector<std::pair<std::size_t, double>> knee = {{1, 1.0}, {4, 1.05}, {8, 1.3}, {16, 2.2}, {32, 4.0}};
  const std::vector<StepCost> costs = {StepCost::affine(1.0, 0.02), StepCost::affine(1.0, 0.3), StepCost::calibrated(knee),
                                       StepCost::affine(1.0, 5.0)};
  BatchBudget allocator;
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t batch = 1 + static_cast<std::size_t>(rng() % 3);
    std::vector<std::vector<float>> offers;
    for (std::size_t b = 0; b < batch; ++b) offers.push_back(random_offer(rng, rng() % 6));
    const std::size_t fixed = batch + rng() % 3;
    for (const StepCost& cost : costs) {
      std::vector<std::size_t> counts(batch);
      const double got = allocator.allocate(spans(offers), fixed, cost, counts);
      for (std::size_t b = 0; b < batch; ++b) ASSERT_LE(counts[b], offers[b].size());
      EXPECT_NEAR(got, rate(offers, counts, fixed, cost), 1e-9);
      // Every combination of counts.
      double best = 0.0;
      std::vector<std::size_t> c(batch, 0);
      while (true) {
        best = std::max(best, rate(offers, c, fixed, cost));
        std::size_t b = 0;
        while (b < batch && c[b] == offers[b].size()) c[b++] = 0;
        if (b == batch) break;
        ++c[b];
      }
      EXPECT_NEAR(got, best, 1e-6 * best) << "trial " << trial;
    }
  }
}

// One sequence: the same count as the per-sequence choice (choose_budget).
TEST(BatchBudget, OneSequenceChoosesAsChooseBudget) {
  std::mt19937 rng(8);
  BatchBudget allocator;
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<std::vector<float>> offers = {random_offer(rng, 1 + rng() % 20)};
    const std::size_t aux = rng() % 4;
    const StepCost cost = StepCost::affine(1.0, 0.01 * static_cast<double>(1 + rng() % 30));
    std::vector<std::size_t> counts(1);
    allocator.allocate(spans(offers), 1 + aux, cost, counts);
    EXPECT_EQ(counts[0], choose_budget(offers[0], cost, aux, offers[0].size())) << "trial " << trial;
  }
}

// The batch's nodes go where they pay: a sure draft keeps its nodes, a coin flip loses them when
// rows are dear; the flat cost keeps every node with a chance; a prohibitive cost keeps none.
TEST(BatchBudget, SpendsTheStepWhereItPays) {
  const std::vector<std::vector<float>> offers = {{0.99f, 0.98f, 0.97f, 0.96f}, {0.3f, 0.1f, 0.05f, 0.0f}};
  BatchBudget allocator;
  std::vector<std::size_t> counts(2);
  allocator.allocate(spans(offers), 2, StepCost::affine(1.0, 0.1), counts);
  EXPECT_EQ(counts, (std::vector<std::size_t>{4, 0}));
  allocator.allocate(spans(offers), 2, StepCost::flat(), counts);
  EXPECT_EQ(counts, (std::vector<std::size_t>{4, 3}));
  allocator.allocate(spans(offers), 2, StepCost::affine(0.001, 10.0), counts);  // every row dearer than a token
  EXPECT_EQ(counts, (std::vector<std::size_t>{0, 0}));
  allocator.allocate({}, 3, StepCost::affine(1.0, 0.1), std::span<std::size_t>{});  // nobody drafts: nothing to choose
}

// cut(): estimates, allocation and the cut in one, each tree cut in place to its count.
TEST(BatchBudget, CutsDraftedTreesInPlace) {
  const auto chain = [](float p) {
    LinearTree t;
    t.add_node(1, -1, 0.0f);
    for (std::int32_t i = 0; i < 4; ++i) t.add_node(10 + i, i, p);
    t.finish();
    return t;
  };
  LinearTree sure = chain(0.99f), unlikely = chain(0.05f), by_depth = chain(3.0f);
  const std::vector<std::int64_t> proposed = {100, 100, 100, 100}, accepted = {99, 98, 97, 96};
  const std::vector<BudgetOffer> offers = {{&sure, true, {}, {}}, {&unlikely, true, {}, {}}, {&by_depth, false, proposed, accepted}};
  BatchBudget allocator;
  allocator.cut(offers, 3, StepCost::affine(1.0, 0.1));
  EXPECT_EQ(std::vector<std::size_t>(allocator.counts().begin(), allocator.counts().end()), (std::vector<std::size_t>{4, 0, 4}));
  EXPECT_EQ(sure.num_drafts(), 4);
  EXPECT_EQ(unlikely.num_drafts(), 0);
  EXPECT_EQ(by_depth.tokens, (std::vector<Token>{1, 10, 11, 12, 13}));
  EXPECT_TRUE(unlikely.finished());
  refdec_test::expect_error([&] { allocator.cut(std::vector<BudgetOffer>{{}}, 1, StepCost::flat()); }, "offer 0 has no tree");
}

TEST(BatchBudget, RejectsBadOffers) {
  BatchBudget allocator;
  std::vector<std::size_t> counts(1);
  const std::vector<std::vector<float>> unsorted = {{0.2f, 0.5f}}, outside = {{1.5f}}, nan = {{0.5f, std::nanf("")}};
  refdec_test::expect_error([&] { allocator.allocate(spans(unsorted), 1, StepCost::flat(), counts); }, "best first");
  refdec_test::expect_error([&] { allocator.allocate(spans(outside), 1, StepCost::flat(), counts); }, "outside [0, 1]");
  refdec_test::expect_error([&] { allocator.allocate(spans(nan), 1, StepCost::flat(), counts); }, "outside [0, 1]");
  std::vector<std::size_t> two(2);
  refdec_test::expect_error([&] { allocator.allocate(spans(outside), 1, StepCost::flat(), two); }, "1 offers but 2 counts");
}

// root -> a (0.9) -> c (0.8), root -> b (0.5) -> d (0.5): built in breadth-first order.
LinearTree small_tree() {
  LinearTree t;
  t.add_node(1, -1, 0.0f);
  t.add_node(10, 0, 0.9f);  // a
  t.add_node(11, 0, 0.5f);  // b
  t.add_node(12, 1, 0.8f);  // c
  t.add_node(13, 2, 0.5f);  // d: ties its parent, which comes first
  t.finish();
  return t;
}

TEST(CutTree, KeepsTheMostLikelyNodesClosedUnderParents) {
  const LinearTree t = small_tree();
  const std::vector<float> p = {1.0f, 0.9f, 0.5f, 0.8f, 0.5f};
  LinearTree out;
  std::vector<std::int32_t> scratch;
  cut_tree(t, p, 2, out, scratch);
  EXPECT_EQ(out.tokens, (std::vector<Token>{1, 10, 12}));
  EXPECT_EQ(out.parent, (std::vector<std::int32_t>{-1, 0, 1}));
  EXPECT_TRUE(out.finished());
  cut_tree(t, p, 3, out, scratch);  // b before its equally likely child d
  EXPECT_EQ(out.tokens, (std::vector<Token>{1, 10, 11, 12}));
  EXPECT_EQ(out.parent, (std::vector<std::int32_t>{-1, 0, 0, 1}));
  EXPECT_EQ(out.score, (std::vector<float>{0.0f, 0.9f, 0.5f, 0.8f}));
  cut_tree(t, p, 99, out, scratch);  // everything, in the original order
  EXPECT_EQ(out.tokens, t.tokens);
  EXPECT_EQ(out.parent, t.parent);
  cut_tree(t, p, 0, out, scratch);
  EXPECT_EQ(out.tokens, (std::vector<Token>{1}));
  EXPECT_TRUE(out.finished());
  const std::vector<float> child_above_parent = {1.0f, 0.9f, 0.1f, 0.8f, 0.5f};
  refdec_test::expect_error([&] { cut_tree(t, child_above_parent, 3, out, scratch); }, "kept without its parent");
  refdec_test::expect_error([&] { cut_tree(t, std::vector<float>{1.0f}, 3, out, scratch); }, "1 probabilities for a tree of 5");
}

TEST(EstimateAcceptance, ScoresOrDepthRatesNeverAboveTheParent) {
  const LinearTree t = small_tree();
  std::vector<float> p;
  // Scores as probabilities: clamped to [0, 1] and to the parent's.
  LinearTree wild = t;
  wild.score = {0.0f, 1.7f, -0.2f, 0.95f, 0.4f};
  estimate_acceptance(wild, true, {}, {}, p);
  EXPECT_EQ(p, (std::vector<float>{1.0f, 1.0f, 0.0f, 0.95f, 0.0f}));
  // No statistics: every depth at the default rate; b at its score share of a's.
  estimate_acceptance(t, false, {}, {}, p);
  const float r = static_cast<float>(kDefaultAcceptance);
  EXPECT_FLOAT_EQ(p[1], r);
  EXPECT_FLOAT_EQ(p[2], r * 0.5f / 0.9f);
  EXPECT_FLOAT_EQ(p[3], r * r);
  EXPECT_FLOAT_EQ(p[4], p[2] * r);
  // Measured: depth 1 accepted 90 of 100 times, depth 2 never in 100.
  const std::vector<std::int64_t> proposed = {100, 100}, accepted = {90, 0};
  estimate_acceptance(t, false, proposed, accepted, p);
  const double d1 = (90.0 + kDefaultAcceptancePrior * kDefaultAcceptance) / (100.0 + kDefaultAcceptancePrior);
  const double d2 = (kDefaultAcceptancePrior * kDefaultAcceptance) / (100.0 + kDefaultAcceptancePrior);
  EXPECT_FLOAT_EQ(p[1], static_cast<float>(d1));
  EXPECT_FLOAT_EQ(p[3], static_cast<float>(d1 * d2));
  for (std::size_t i = 1; i < p.size(); ++i) EXPECT_LE(p[i], p[static_cast<std::size_t>(t.parent[i])]);
}

}  // namespace
