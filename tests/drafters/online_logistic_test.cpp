// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/drafters/online_logistic.hpp"

#include <gtest/gtest.h>

#include "common/expect_error.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace {

using namespace refdec;

TEST(OnlineLogistic, StartsAtItsInitialWeightsWithTheHashedOnesAtZero) {
  const OnlineLogistic m({0.5, -1.0});
  const std::vector<float> x{1.0f, 2.0f};
  const std::vector<std::uint64_t> h{OnlineLogistic::hash(1, 7), OnlineLogistic::hash(2, 7, 8)};
  EXPECT_DOUBLE_EQ(m.logit(x, h), 0.5 - 2.0);
  EXPECT_DOUBLE_EQ(m.predict(x, h), 1.0 / (1.0 + std::exp(1.5)));
  EXPECT_DOUBLE_EQ(m.predict(x, {}), m.predict(x, h));
  EXPECT_EQ(m.dense_size(), 2u);
  EXPECT_EQ(m.updates(), 0);
}

// A bias alone, labels drawn with probability 0.7: the estimate converges to 0.7 (the log loss
// is a proper scoring rule, so the fitted probability is calibrated).
TEST(OnlineLogistic, ConvergesToTheTrueProbability) {
  OnlineLogistic m({0.0});
  std::mt19937 rng(3);
  std::bernoulli_distribution label(0.7);
  const std::vector<float> x{1.0f};
  for (int i = 0; i < 20000; ++i) m.update(x, {}, label(rng));
  EXPECT_NEAR(m.predict(x, {}), 0.7, 0.03);
  EXPECT_EQ(m.updates(), 20000);
}

// Labels given by a linear rule of two dense features: learned to near-perfect accuracy.
TEST(OnlineLogistic, LearnsALinearRuleOfTheDenseFeatures) {
  OnlineLogistic m({0.0, 0.0, 0.0}, {.learning_rate = 0.5});
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto example = [&] {
    const float a = n(rng), b = n(rng);
    return std::pair{std::vector<float>{1.0f, a, b}, a + 2.0f * b > 0.3f};
  };
  for (int i = 0; i < 5000; ++i) {
    const auto [x, y] = example();
    m.update(x, {}, y);
  }
  int right = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto [x, y] = example();
    right += (m.predict(x, {}) > 0.5) == y ? 1 : 0;
  }
  EXPECT_GT(right, 950);
  EXPECT_GT(m.dense_weights()[2], m.dense_weights()[1]);  // b weighs twice a
}

// A hashed indicator per token: each token gets its own learned bias, the dense feature none.
TEST(OnlineLogistic, LearnsABiasPerHashedFeature) {
  OnlineLogistic m({0.0}, {.learning_rate = 0.3});
  const std::vector<float> x{1.0f};
  for (int round = 0; round < 300; ++round)
    for (std::uint64_t token = 0; token < 10; ++token) {
      const std::vector<std::uint64_t> h{OnlineLogistic::hash(1, token)};
      m.update(x, h, token % 2 == 0);
    }
  for (std::uint64_t token = 0; token < 10; ++token) {
    const std::vector<std::uint64_t> h{OnlineLogistic::hash(1, token)};
    if (token % 2 == 0)
      EXPECT_GT(m.predict(x, h), 0.9) << token;
    else
      EXPECT_LT(m.predict(x, h), 0.1) << token;
  }
  EXPECT_NEAR(m.predict(x, {}), 0.5, 0.1);
}

TEST(OnlineLogistic, ClampsTheLogitSoThatNoEstimateIsCertain) {
  const OnlineLogistic m({1e6}, {.max_logit = 12.0});
  const std::vector<float> x{1.0f};
  EXPECT_DOUBLE_EQ(m.logit(x, {}), 12.0);
  EXPECT_LT(m.predict(x, {}), 1.0);
  EXPECT_DOUBLE_EQ(OnlineLogistic::logit_of(0.0), std::log(1e-6 / (1.0 - 1e-6)));
  EXPECT_DOUBLE_EQ(OnlineLogistic::logit_of(0.5), 0.0);
  EXPECT_TRUE(std::isfinite(OnlineLogistic::logit_of(1.0)));
}

// A non-finite feature neither yields a non-finite estimate nor poisons the weights.
TEST(OnlineLogistic, NonFiniteFeaturesLeaveTheWeightsFinite) {
  OnlineLogistic m({0.5, 0.5});
  const std::vector<float> bad{1.0f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> inf{1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_DOUBLE_EQ(m.logit(bad, {}), 0.0);
  EXPECT_DOUBLE_EQ(m.logit(inf, {}), 12.0);
  m.update(bad, {}, true);
  m.update(inf, {}, false);
  for (const double w : m.dense_weights()) EXPECT_TRUE(std::isfinite(w));
  EXPECT_DOUBLE_EQ(m.dense_weights()[1], 0.5);  // its gradient was never finite
  EXPECT_NE(m.dense_weights()[0], 0.5);         // the bias learned
}

TEST(OnlineLogistic, HashesTellKindsAndArgumentOrderApart) {
  std::set<std::uint64_t> seen;
  for (std::uint64_t kind = 0; kind < 4; ++kind)
    for (std::uint64_t a = 0; a < 50; ++a)
      for (std::uint64_t b = 0; b < 50; ++b) seen.insert(OnlineLogistic::hash(kind, a, b));
  EXPECT_EQ(seen.size(), 4u * 50u * 50u);
  EXPECT_NE(OnlineLogistic::hash(1, 2, 3), OnlineLogistic::hash(1, 3, 2));
  EXPECT_EQ(OnlineLogistic::hash(1, 2), OnlineLogistic::hash(1, 2, 0));
}

TEST(OnlineLogistic, RejectsBadInputNamingIt) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  refdec_test::expect_error([] { OnlineLogistic({}); }, "needs at least one dense feature");
  refdec_test::expect_error([&] { OnlineLogistic({nan}); }, "initial weight is not finite: nan");
  refdec_test::expect_error([] { OnlineLogistic({0.0}, {.learning_rate = 0.0}); },
                            "learning_rate must be finite and positive, got 0");
  refdec_test::expect_error([] { OnlineLogistic({0.0}, {.hash_bits = 25}); }, "hash_bits must be in [1, 24], got 25");
  refdec_test::expect_error([] { OnlineLogistic({0.0}, {.hash_bits = 0}); }, "hash_bits must be in [1, 24], got 0");
  refdec_test::expect_error([&] { OnlineLogistic({0.0}, {.max_logit = nan}); },
                            "max_logit must be finite and positive, got nan");
  OnlineLogistic m({0.0, 0.0});
  const std::vector<float> one{1.0f};
  refdec_test::expect_error([&] { (void)m.predict(one, {}); }, "got 1 dense features for 2");
  refdec_test::expect_error([&] { m.update(one, {}, true); }, "got 1 dense features for 2");
}

}  // namespace
