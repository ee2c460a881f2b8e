// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/step_cost.hpp"

#include <gtest/gtest.h>

#include "common/expect_error.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace refdec;

// Brute force: every n, ties to the smaller.
std::size_t best_budget_reference(const std::vector<float>& p, const StepCost& cost, std::size_t aux, std::size_t max_nodes) {
  std::size_t best = 0;
  double best_rate = -1.0;
  for (std::size_t n = 0; n <= std::min(max_nodes, p.size()); ++n) {
    double expected = 1.0;
    for (std::size_t i = 0; i < n; ++i) expected += p[i];
    const double rate = expected / cost.seconds(1 + n + aux);
    if (rate > best_rate) {
      best_rate = rate;
      best = n;
    }
  }
  return best;
}

TEST(StepCost, FlatCostsOneAndKeepsEveryUsefulNode) {
  const StepCost flat = StepCost::flat();
  EXPECT_TRUE(flat.is_flat());
  EXPECT_DOUBLE_EQ(flat.seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(flat.seconds(1000), 1.0);
  const std::vector<float> p{0.9f, 0.5f, 0.01f, 0.0f, 0.0f};
  EXPECT_EQ(choose_budget(p, flat, 0, 64), 3u);  // zero-probability nodes buy nothing
  EXPECT_EQ(choose_budget(p, flat, 0, 2), 2u);   // capped by the budget
  EXPECT_EQ(choose_budget({}, flat, 0, 64), 0u);
}

TEST(StepCost, AffineIsLinearInTokens) {
  const StepCost c = StepCost::affine(2.0, 0.25);
  EXPECT_FALSE(c.is_flat());
  EXPECT_DOUBLE_EQ(c.seconds(1), 2.25);
  EXPECT_DOUBLE_EQ(c.seconds(2), 2.5);
  EXPECT_DOUBLE_EQ(c.seconds(65), 2.0 + 0.25 * 65);
  EXPECT_DOUBLE_EQ(StepCost::affine(1.0, 0.0).seconds(500), 1.0);
}

TEST(StepCost, CalibratedInterpolatesAveragesAndNeverDecreases) {
  const std::vector<std::pair<std::size_t, double>> samples{
      {16, 2.0}, {1, 1.0}, {8, 1.4}, {8, 1.6}, {32, 1.9}, {64, 4.0}};
  const StepCost c = StepCost::calibrated(samples);
  EXPECT_DOUBLE_EQ(c.seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(c.seconds(8), 1.5);              // the two samples at 8 averaged
  EXPECT_DOUBLE_EQ(c.seconds(4), 1.0 + 0.5 * 3 / 7);  // between (1, 1.0) and (8, 1.5)
  EXPECT_DOUBLE_EQ(c.seconds(12), 1.75);
  EXPECT_DOUBLE_EQ(c.seconds(32), 2.0);             // 1.9 measured, but never cheaper than 16 tokens
  EXPECT_DOUBLE_EQ(c.seconds(48), 3.0);
  EXPECT_DOUBLE_EQ(c.seconds(96), 6.0);             // the last segment's slope (2 per 32 tokens)
  const std::vector<std::pair<std::size_t, double>> one{{4, 0.5}};
  EXPECT_DOUBLE_EQ(StepCost::calibrated(one).seconds(1), 0.5);
  EXPECT_DOUBLE_EQ(StepCost::calibrated(one).seconds(100), 0.5);
  // An affine calibration is reproduced exactly, and beyond its last sample.
  std::vector<std::pair<std::size_t, double>> line;
  for (std::size_t n : {3, 9, 17}) line.emplace_back(n, 0.5 + 0.01 * static_cast<double>(n));
  for (std::size_t n = 1; n < 200; n += 7)
    EXPECT_NEAR(StepCost::calibrated(line).seconds(n), std::max(0.53, 0.5 + 0.01 * static_cast<double>(n)), 1e-12) << n;
}

TEST(StepCost, PlusAddsSecondsToEveryStep) {
  const StepCost affine = StepCost::affine(1.0, 0.1).plus(0.5);
  EXPECT_DOUBLE_EQ(affine.seconds(1), 1.6);
  EXPECT_DOUBLE_EQ(affine.seconds(10), 2.5);
  const std::vector<std::pair<std::size_t, double>> samples{{1, 2.0}, {8, 3.0}};
  const StepCost measured = StepCost::calibrated(samples);
  for (const std::size_t n : {1, 4, 8, 20}) EXPECT_DOUBLE_EQ(measured.plus(0.25).seconds(n), measured.seconds(n) + 0.25) << n;
  EXPECT_DOUBLE_EQ(measured.plus(0.0).seconds(5), measured.seconds(5));
  refdec_test::expect_error([] { (void)StepCost::flat().plus(1.0); }, "not flat()");
  refdec_test::expect_error([&] { (void)measured.plus(-1.0); }, "got -1");
}

TEST(StepCost, RejectsBadParametersNamingThem) {
  refdec_test::expect_error([] { StepCost::affine(0.0, 1.0); }, "got 0");
  refdec_test::expect_error([] { StepCost::affine(1.0, -0.5); }, "got -0.5");
  refdec_test::expect_error([] { StepCost::affine(std::numeric_limits<double>::infinity(), 0.0); }, "got inf");
  refdec_test::expect_error([] { StepCost::calibrated({}); }, "at least one");
  const std::vector<std::pair<std::size_t, double>> zero_tokens{{0, 1.0}};
  refdec_test::expect_error([&] { StepCost::calibrated(zero_tokens); }, "got 0");
  const std::vector<std::pair<std::size_t, double>> bad_seconds{{1, 1.0}, {7, -3.0}};
  refdec_test::expect_error([&] { StepCost::calibrated(bad_seconds); }, "got -3 at 7 tokens");
  const std::vector<float> unsorted{0.5f, 0.7f};
  refdec_test::expect_error([&] { choose_budget(unsorted, StepCost::affine(1, 0.1), 0, 8); }, "1 is 0.7 after 0.5");
  const std::vector<float> too_big{1.5f};
  refdec_test::expect_error([&] { choose_budget(too_big, StepCost::affine(1, 0.1), 0, 8); }, "0 is 1.5");
}

TEST(StepCost, ChoosesPlainDecodingWhenNothingHelps) {
  // A node that is right 1% of the time never pays for itself when a token costs 10% of a step.
  const std::vector<float> p{0.01f, 0.01f, 0.005f};
  EXPECT_EQ(choose_budget(p, StepCost::affine(1.0, 0.1), 0, 64), 0u);
  // A sure node at a tiny per-token cost does.
  const std::vector<float> sure{1.0f, 1.0f, 0.0f};
  EXPECT_EQ(choose_budget(sure, StepCost::affine(1.0, 0.001), 0, 64), 2u);
}

TEST(StepCost, AuxiliaryTokensCountInTheCost) {
  // With a calibrated cost that jumps past 16 tokens, 10 auxiliary tokens leave room for 5 nodes.
  const std::vector<std::pair<std::size_t, double>> samples{{16, 1.0}, {17, 2.0}};
  const StepCost c = StepCost::calibrated(samples);
  const std::vector<float> p(12, 0.5f);
  EXPECT_EQ(choose_budget(p, c, 0, 64), 12u);
  EXPECT_EQ(choose_budget(p, c, 10, 64), 5u);
}

// A calibration taken when memory was slow: 8 tokens cost 1.25x one (a 1.1B model in bf16 on
// this project's CPU at 47 GB/s). At 80 GB/s one token costs 0.6x as much and 8 tokens 1.85x one.
StepCost slow_memory_curve() {
  const std::vector<std::pair<std::size_t, double>> samples{{1, 0.044}, {2, 0.045}, {4, 0.048}, {8, 0.055}, {16, 0.075}, {32, 0.12}};
  return StepCost::calibrated(samples);
}

TEST(StepCostTracker, StartsAtThePriorAndScalesWithAUniformChange) {
  StepCostTracker tracker(slow_memory_curve());
  for (std::size_t n : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48})
    EXPECT_NEAR(tracker.current().seconds(n), slow_memory_curve().seconds(n), 1e-12) << n;
  EXPECT_EQ(tracker.observations(), 0);
  // Every size 20% slower: the curve scales, its shape (what the budget choice uses) stays.
  for (int round = 0; round < 50; ++round)
    for (std::size_t n : {1, 5, 9, 17}) tracker.observe(n, 1.2 * slow_memory_curve().seconds(n));
  EXPECT_EQ(tracker.observations(), 200);
  for (std::size_t n : {1, 2, 5, 8, 9, 17, 30}) {
    EXPECT_NEAR(tracker.correction(n), 1.2, 1e-9) << n;
    EXPECT_NEAR(tracker.current().seconds(n), 1.2 * slow_memory_curve().seconds(n), 1e-9) << n;
  }
}

TEST(StepCostTracker, LearnsASteeperCurveAndTheBudgetFollows) {
  const StepCost prior = slow_memory_curve();
  StepCostTracker tracker(prior);
  // Faster memory: one token at 0.6x the calibration, 8 tokens at 1.85x that.
  const double one = 0.6 * prior.seconds(1);
  const std::vector<std::pair<std::size_t, double>> truth{{1, 1.0}, {2, 1.1}, {4, 1.35}, {8, 1.85}};
  for (int round = 0; round < 40; ++round)
    for (const auto& [n, x] : truth) tracker.observe(n, x * one);
  const StepCost learned = tracker.current();
  // Each class is pulled toward the mean correction by one observation's worth (fallback_weight).
  for (const auto& [n, x] : truth) EXPECT_NEAR(learned.seconds(n), x * one, 0.05 * x * one) << n;
  EXPECT_NEAR(learned.seconds(8) / learned.seconds(1), 1.85, 0.1);
  // Nodes each right 4% of the time: three pay under the calibration, none any more.
  const std::vector<float> p(6, 0.04f);
  EXPECT_EQ(choose_budget(p, prior, 0, 6), 3u);
  EXPECT_EQ(choose_budget(p, learned, 0, 6), 0u);
}

// A size class the budget stopped visiting leans, as its observations age, on the classes still
// timed: at budget 0 only one-token steps are, and the larger classes drift back to the prior's
// shape at the one-token class's speed, so that larger drafts are tried again.
TEST(StepCostTracker, AnUnvisitedClassFallsBackToTheOthersCorrection) {
  StepCostTracker tracker(slow_memory_curve(), {.half_life = 8.0, .fallback_weight = 1.0});
  for (int i = 0; i < 30; ++i) tracker.observe(8, 2.0 * slow_memory_curve().seconds(8));
  EXPECT_NEAR(tracker.correction(8), 2.0, 1e-6);
  EXPECT_NEAR(tracker.correction(1), 2.0, 1e-6);  // nothing else timed: every class follows
  for (int i = 0; i < 5; ++i) tracker.observe(1, 0.5 * slow_memory_curve().seconds(1));
  EXPECT_GT(tracker.correction(8), 1.8);  // 5 steps, under a half-life: the 8-token class holds
  EXPECT_LT(tracker.correction(1), 0.65);
  for (int i = 0; i < 200; ++i) tracker.observe(1, 0.5 * slow_memory_curve().seconds(1));
  EXPECT_NEAR(tracker.correction(8), 0.5, 0.01);
  EXPECT_NEAR(tracker.current().seconds(8) / tracker.current().seconds(1),
              slow_memory_curve().seconds(8) / slow_memory_curve().seconds(1), 0.01);
}

// A batch step's cost beyond one sequence's (host work per sequence, as on a GPU, where 64
// sequences took 270 ms whatever their rows) is learned per batch-size class as an overhead per
// sequence: the batch's curve is one sequence's plus that fixed part, so that at the margin its
// rows cost what one sequence's do.
TEST(StepCostTracker, LearnsTheOverheadOfABatchOnTopOfOneSequencesCurve) {
  const StepCost prior = StepCost::affine(0.016, 0.00003);  // 16 ms, plus 30 µs per token
  StepCostTracker tracker(prior);
  EXPECT_EQ(tracker.overhead(64), 0.0);
  for (const std::size_t rows : {64, 1000, 3000}) EXPECT_EQ(tracker.current(64).seconds(rows), tracker.current().seconds(rows)) << rows;
  // 64 sequences: 3.5 ms per sequence beyond the first.
  constexpr double kPerSequence = 0.0035;
  for (int round = 0; round < 40; ++round)
    for (const std::size_t rows : {800, 1500, 2500}) tracker.observe(rows, prior.seconds(rows) + 63 * kPerSequence, 64);
  EXPECT_NEAR(tracker.overhead(64), 63 * kPerSequence, 1e-9);
  const StepCost batch = tracker.current(64);
  for (const std::size_t rows : {64, 1000, 3000}) EXPECT_NEAR(batch.seconds(rows), prior.seconds(rows) + 63 * kPerSequence, 1e-9) << rows;
  // One sequence's curve is untouched; another batch class, never timed, leans on the one seen.
  for (const std::size_t n : {1, 100, 1000}) EXPECT_NEAR(tracker.current().seconds(n), prior.seconds(n), 1e-12) << n;
  EXPECT_EQ(tracker.current(1).seconds(10), tracker.current().seconds(10));
  EXPECT_NEAR(tracker.overhead(32), 31 * kPerSequence, 1e-9);
  // Its own steps take over that class.
  for (int round = 0; round < 200; ++round) tracker.observe(500, prior.seconds(500) + 31 * 0.001, 32);
  EXPECT_NEAR(tracker.overhead(32), 31 * 0.001, 1e-4);
  EXPECT_GT(tracker.overhead(64), 63 * 0.001);
  // A step cheaper than one sequence's of its tokens teaches no negative overhead.
  StepCostTracker cheap(prior);
  for (int i = 0; i < 50; ++i) cheap.observe(640, 0.5 * prior.seconds(640), 16);
  EXPECT_EQ(cheap.overhead(16), 0.0);
  EXPECT_EQ(cheap.current(16).seconds(640), cheap.current().seconds(640));
}

TEST(StepCostTracker, RejectsBadInputNamingIt) {
  refdec_test::expect_error([] { StepCostTracker t(StepCost::flat()); }, "not flat()");
  refdec_test::expect_error([] { StepCostTracker t(slow_memory_curve(), {.half_life = 0.0}); }, "half_life");
  refdec_test::expect_error([] { StepCostTracker t(slow_memory_curve(), {.fallback_weight = -1.0}); }, "fallback_weight");
  StepCostTracker tracker(StepCost::affine(1.0, 0.1));
  refdec_test::expect_error([&] { tracker.observe(0, 1.0); }, "at least one token");
  refdec_test::expect_error([&] { tracker.observe(4, 0.0); }, "got 0 at 4 tokens");
  refdec_test::expect_error([&] { tracker.observe(4, std::numeric_limits<double>::quiet_NaN()); }, "got nan");
  refdec_test::expect_error([&] { tracker.observe(4, 1.0, 0); }, "batch of 0");
  refdec_test::expect_error([&] { tracker.observe(3, 1.0, 4); }, "got 3 for 4");
  EXPECT_EQ(tracker.observations(), 0);
}

class ChooseBudgetRandom : public ::testing::TestWithParam<std::size_t> {};

// Matches the brute force on random sorted probabilities and costs of every form.
TEST_P(ChooseBudgetRandom, MatchesBruteForce) {
  const std::size_t len = GetParam();
  std::mt19937 rng(static_cast<unsigned>(len * 7 + 1));
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> p(len);
    for (float& x : p) x = u(rng) * u(rng);
    std::sort(p.begin(), p.end(), std::greater<>());
    std::vector<std::pair<std::size_t, double>> samples;
    double t = 0.5 + u(rng);
    for (std::size_t n = 1; n < 100; n += 1 + rng() % 20) samples.emplace_back(n, t += 0.3 * u(rng));
    const std::size_t aux = rng() % 4;
    const std::size_t max_nodes = 1 + rng() % (len + 3);
    for (const StepCost& cost : {StepCost::flat(), StepCost::affine(0.2 + u(rng), 0.1 * u(rng)), StepCost::calibrated(samples)})
      EXPECT_EQ(choose_budget(p, cost, aux, max_nodes), best_budget_reference(p, cost, aux, max_nodes));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ChooseBudgetRandom, ::testing::Values(1, 7, 64, 111));

}  // namespace
