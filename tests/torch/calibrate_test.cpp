// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Step cost calibration with an injected clock.

#include "refdec/torch/static_llama.hpp"
#include "torch/model_helpers.hpp"

namespace {

using namespace refdec;
using namespace refdec_test::model;

// Calibration runs every requested step size once untimed, then `repeats` rounds over the sizes
// from the largest to the smallest, each timed right after a one-token step (every timed run after
// an untimed one of its size); a size's sample is the median of its ratios to those one-token
// steps times their median. The clock is injected: reading k returns 0 + 1 + ... + k, so timed run
// j (readings 2j and 2j + 1) lasts 2j + 1 "seconds" and the samples are known exactly, however
// fast the machine is.
TEST(Calibration, MeasuresEveryStepSize) {
  const auto model = LlamaModel::random(small_config(), 2, at::kFloat);
  double t = 0, readings = 0;
  const auto fake_clock = [&] { return t += readings++; };
  const auto samples = measure_step_cost(model, {.tokens = {1, 4, 96}, .batch = 2, .context = 20, .repeats = 3, .clock = fake_clock});
  ASSERT_EQ(samples.size(), 3u);
  // Untimed runs read no clock. Round r times one token (8r + 1), 96 (8r + 3), one (8r + 5), 4
  // (8r + 7): 96's ratios 3, 11/9, 19/17, median 11/9; 4's 7/5, 15/13, 23/21, median 15/13; the
  // one-token steps 1, 5, ..., 21, median (the upper of the middle two) 13.
  EXPECT_EQ(readings, 3 * 4 * 2);
  EXPECT_EQ(samples[0], (std::pair<std::size_t, double>{1, 13.0}));
  EXPECT_EQ(samples[1].first, 4u);
  EXPECT_DOUBLE_EQ(samples[1].second, 13.0 * 15.0 / 13.0);
  EXPECT_EQ(samples[2].first, 96u);
  EXPECT_DOUBLE_EQ(samples[2].second, 13.0 * 11.0 / 9.0);
  // Without 1 among the sizes the one-token step is still timed beside each, and not returned:
  // ratios 3 / 1 and 7 / 5, the upper one; one-token steps 1 and 5, the upper one.
  t = 0, readings = 0;
  const auto four = measure_step_cost(model, {.tokens = {4}, .context = 4, .repeats = 2, .clock = fake_clock});
  EXPECT_EQ(readings, 2 * 2 * 2);
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(four[0].first, 4u);
  EXPECT_DOUBLE_EQ(four[0].second, 5.0 * 3.0);
  EXPECT_THROW(measure_step_cost(model, {.tokens = {}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.tokens = {0, 2}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.repeats = 0}), Error);
}

// A machine that halves its speed mid-calibration (a shared VM's memory switching mode) moves the
// whole curve, not its shape: each size is timed beside a one-token step, so the ratios, which
// the adaptive budget weighs drafts by, are those of the step costs. Sizes timed apart would not
// give them: the median of the 8-token runs could come from one speed, the one-token runs' from
// the other.
TEST(Calibration, CurveKeepsItsShapeWhenTheMachineChangesSpeed) {
  const auto model = LlamaModel::random(small_config(), 1, at::kFloat);
  const auto cost = [](std::size_t n) { return static_cast<double>(n) + 3.0; };  // per step, at the first speed
  // Each round times one token, 8, one token, 2; the speed halves from the tenth timed run on
  // (round 2's 8-token run: its pair straddles the switch, and the median leaves it out).
  std::vector<double> durations;
  for (int r = 0; r < 5; ++r)
    for (const std::size_t n : {1, 8, 1, 2}) durations.push_back(cost(n) * (durations.size() >= 9 ? 2.0 : 1.0));
  double t = 0;
  std::size_t reading = 0;
  const auto clock = [&] {
    if (reading++ % 2 == 1) t += durations.at(reading / 2 - 1);
    return t;
  };
  const auto samples = measure_step_cost(model, {.tokens = {1, 2, 8}, .context = 4, .repeats = 5, .clock = clock});
  EXPECT_EQ(reading, durations.size() * 2);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_DOUBLE_EQ(samples[1].second / samples[0].second, cost(2) / cost(1));
  EXPECT_DOUBLE_EQ(samples[2].second / samples[0].second, cost(8) / cost(1));
  EXPECT_DOUBLE_EQ(samples[0].second, 2.0 * cost(1));  // five one-token steps at each speed: the upper middle one
}

// Calibration in a store of the caller's making, the context prefilled in chunks: a static store
// whose steps hold at most 8 rows per sequence takes a 20-token context only in chunks of 8.
// The same injected clock: timed run j lasts 2j + 1; round r times one token (4r + 1) then 4 (4r +
// 3); the median of two values is the upper one: ratios 3 and 7/5, one-token steps 1 and 5.
TEST(Calibration, RunsInTheStoreGivenAndPrefillsInChunks) {
  const auto model = LlamaModel::random(small_config(), 2, at::kFloat);
  const StaticLlama fixed(model);
  double t = 0, readings = 0;
  const auto fake_clock = [&] { return t += readings++; };
  std::vector<std::pair<std::int64_t, std::int64_t>> made;  // (capacity, rows) asked for
  const auto make = [&](std::int64_t capacity, std::int64_t rows) {
    made.emplace_back(capacity, rows);
    return StaticKvStore(fixed.kv_layout(), capacity, {.max_batch = 2, .max_rows = rows, .graphs = false});
  };
  const CalibrationOptions options{.tokens = {1, 4}, .batch = 2, .context = 20, .prefill_chunk = 8, .repeats = 2, .clock = fake_clock};
  const auto samples = measure_step_cost(fixed, options, make);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0], (std::pair<std::int64_t, std::int64_t>{20 + 4 + 1, 8}));
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0], (std::pair<std::size_t, double>{1, 5.0}));
  EXPECT_EQ(samples[1], (std::pair<std::size_t, double>{4, 15.0}));
  // Without chunks the 20-token prefill exceeds the store's 8 rows per step, and says so.
  CalibrationOptions whole = options;
  whole.prefill_chunk = 0;
  refdec_test::expect_error([&] { (void)measure_step_cost(fixed, whole, [&](std::int64_t capacity, std::int64_t) {
                              return StaticKvStore(fixed.kv_layout(), capacity, {.max_batch = 2, .max_rows = 8, .graphs = false});
                            }); },
                            "20 step rows of a sequence outside the buckets' range [1, 8]");
  CalibrationOptions negative = options;
  negative.prefill_chunk = -1;
  refdec_test::expect_error([&] { (void)measure_step_cost(fixed, negative, make); }, "prefill_chunk must be >= 0, got -1");
}

}  // namespace
