// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Step cost calibration with an injected clock.

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

}  // namespace
