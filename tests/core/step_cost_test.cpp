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
