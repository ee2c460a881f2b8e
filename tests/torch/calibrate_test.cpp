// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Step cost calibration with an injected clock.

#include "refdec/torch/static_llama.hpp"
#include "torch/model_helpers.hpp"

namespace {

using namespace refdec;
using namespace refdec_test::model;

// Calibration runs every requested step size once untimed, then `repeats` rounds over all sizes
// from the largest to the smallest (each timed run after an untimed one of its size), and keeps
// each size's median. The clock is injected: reading k returns 0 + 1 + ... + k, so a run
// whose readings are k and k + 1 lasts k + 1 "seconds" and the samples are known exactly, however
// fast the machine is.
TEST(Calibration, MeasuresEveryStepSize) {
  const auto model = LlamaModel::random(small_config(), 2, at::kFloat);
  double t = 0, readings = 0;
  const auto fake_clock = [&] { return t += readings++; };
  const auto samples = measure_step_cost(model, {.tokens = {1, 4, 96}, .batch = 2, .context = 20, .repeats = 3, .clock = fake_clock});
  ASSERT_EQ(samples.size(), 3u);
  // Untimed runs read no clock; round r visits 96, 4, 1, so size i (ascending) is the (2 - i)th
  // of its round and reads 2(3r + 2 - i) and one more: its runs last 5 - 2i, 11 - 2i, 17 - 2i,
  // median 11 - 2i.
  EXPECT_EQ(readings, 3 * 3 * 2);
  const std::vector<std::size_t> sizes = {1, 4, 96};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(samples[i].first, sizes[i]);
    EXPECT_DOUBLE_EQ(samples[i].second, 11.0 - 2.0 * static_cast<double>(i)) << "size " << sizes[i];
  }
  EXPECT_THROW(measure_step_cost(model, {.tokens = {}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.tokens = {0, 2}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.repeats = 0}), Error);
}

// Calibration in a store of the caller's making, the context prefilled in chunks: a static store
// whose steps hold at most 8 rows per sequence takes a 20-token context only in chunks of 8.
// The same injected clock: the n-th timed run lasts 2n + 1, rounds visit 4 then 1, and the median
// of two runs is the later one.
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
  EXPECT_EQ(samples[0], (std::pair<std::size_t, double>{1, 7.0}));
  EXPECT_EQ(samples[1], (std::pair<std::size_t, double>{4, 5.0}));
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
