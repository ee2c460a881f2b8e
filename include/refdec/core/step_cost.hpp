// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The cost of a verification step as a function of the tokens it runs through the model, and the
// draft budget that maximises expected tokens per unit of time under it.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// Seconds one verification step takes as a function of the tokens it runs (the root, the draft
/// nodes and any auxiliary tokens). Three forms:
/// - flat(): every step costs the same (1), so more draft nodes never hurt: what replay assumes;
/// - affine(a, b): a + b * tokens, e.g. a fixed launch and weight-read cost plus a per-token cost;
/// - calibrated(samples): measured (tokens, seconds) pairs, piecewise linear in between.
/// Immutable once built: may be shared across threads.
class StepCost {
 public:
  /// The flat model: 1 whatever the step runs.
  StepCost() = default;

  /// The flat model: 1 whatever the step runs.
  static StepCost flat() { return StepCost{}; }

  /// a + b * tokens seconds; a > 0 and b >= 0, both finite.
  static StepCost affine(double a, double b) {
    REFDEC_CHECK(std::isfinite(a) && a > 0.0, "step cost: the fixed cost a must be finite and positive, got " << a);
    REFDEC_CHECK(std::isfinite(b) && b >= 0.0, "step cost: the per-token cost b must be finite and non-negative, got " << b);
    StepCost c;
    c.table_ = {{1.0, a + b}, {2.0, a + 2.0 * b}};
    return c;
  }

  /// From measured samples (tokens >= 1, seconds > 0; any order, repeats allowed): the seconds
  /// of the samples of one token count are averaged, the cost is made non-decreasing in tokens
  /// (a step never gets cheaper by running more; timing noise would otherwise reward it), and it
  /// is interpolated linearly between the measured counts, held at the first below the smallest
  /// and extended with the last segment's slope above the largest.
  static StepCost calibrated(std::span<const std::pair<std::size_t, double>> samples) {
    REFDEC_CHECK(!samples.empty(), "step cost: calibration needs at least one (tokens, seconds) sample");
    std::vector<std::pair<std::size_t, double>> sorted(samples.begin(), samples.end());
    for (const auto& [tokens, seconds] : sorted) {
      REFDEC_CHECK(tokens >= 1, "step cost: a sample's token count must be at least 1, got " << tokens);
      REFDEC_CHECK(std::isfinite(seconds) && seconds > 0.0,
                   "step cost: a sample's seconds must be finite and positive, got " << seconds << " at " << tokens << " tokens");
    }
    std::sort(sorted.begin(), sorted.end());
    StepCost c;
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t j = i;
      double sum = 0.0;
      for (; j < sorted.size() && sorted[j].first == sorted[i].first; ++j) sum += sorted[j].second;
      const double mean = sum / static_cast<double>(j - i);
      c.table_.emplace_back(static_cast<double>(sorted[i].first), c.table_.empty() ? mean : std::max(mean, c.table_.back().second));
      i = j;
    }
    return c;
  }

  /// Seconds (or, for flat(), relative cost) of a step that runs `tokens` tokens (>= 1).
  double seconds(std::size_t tokens) const {
    if (table_.empty()) return 1.0;
    const auto x = static_cast<double>(std::max<std::size_t>(tokens, 1));
    if (x <= table_.front().first || table_.size() == 1) return table_.front().second;
    // The segment [lo, hi] holding x, or the last one beyond the table.
    const auto hi_it = std::lower_bound(table_.begin() + 1, table_.end() - 1, x,
                                        [](const std::pair<double, double>& p, double v) { return p.first < v; });
    const auto& hi = *hi_it;
    const auto& lo = *(hi_it - 1);
    return lo.second + (hi.second - lo.second) * (x - lo.first) / (hi.first - lo.first);
  }

  /// True for the flat model, under which the best budget is always the largest.
  bool is_flat() const { return table_.empty(); }

  /// This cost plus `seconds` (finite, >= 0) per step, whatever it runs (e.g. the work a step of
  /// several sequences does per sequence). Not for flat(), which has no unit.
  StepCost plus(double seconds) const {
    REFDEC_CHECK(!is_flat(), "step cost: plus() needs a cost in seconds, not flat()");
    REFDEC_CHECK(std::isfinite(seconds) && seconds >= 0.0, "step cost: plus() takes finite non-negative seconds, got " << seconds);
    StepCost c = *this;
    for (auto& point : c.table_) point.second += seconds;
    return c;
  }

 private:
  std::vector<std::pair<double, double>> table_;  // [points] (tokens, seconds), tokens ascending; empty: flat
};

/// Settings of a StepCostTracker.
struct StepCostTrackerOptions {
  /// Observations after which an earlier one counts half. Every size class ages with every
  /// observation, so a class the budget no longer visits falls back to what the visited ones say.
  double half_life = 32.0;
  /// Observations' worth of that fallback in each size class: how many recent steps of a size
  /// it takes to overrule the other sizes' correction.
  double fallback_weight = 1.0;
};

/// The step cost learned from the steps a decoder actually times. A calibration (StepCost) is
/// taken at one moment, but on a shared machine the memory bandwidth moves by tens of percent
/// within minutes, and with it the shape of the curve: when the weights stream faster, a step of
/// several tokens reaches the CPU's arithmetic limit sooner and costs relatively more than the
/// calibration said, so the budget it chose verifies nodes that no longer pay. The tracker keeps
/// the calibration as the prior and learns, per size class (1, 2-3, 4-7, ... tokens, powers of
/// two), an exponentially decayed mean of log(observed seconds / prior seconds). A class with
/// few recent observations leans on the mean correction over all classes (which a budget at 0,
/// timing only one-token steps, keeps current): the curve then has the prior's shape at the
/// current speed, so larger drafts get tried again and their class relearned.
///
/// A step of several sequences costs more than one sequence's step of the same tokens wherever
/// the engine does work per sequence (its host-side bookkeeping, a kernel launch per sequence's
/// cache): on a GPU a 64-sequence step took 270 ms whatever its rows, against 16-48 ms for one
/// sequence's 1-1,024. The tracker learns that as an additive overhead per sequence beyond the
/// first, per batch-size class (2-3, 4-7, ... 256 and more): an exponentially decayed mean of
/// (observed seconds - the one-sequence curve at the step's tokens) / (batch - 1), never below 0
/// (a batch step costs at least one sequence's step of its tokens). A class not yet seen leans
/// on the mean over the classes seen, as the size classes do. So a batch's curve keeps the
/// one-sequence curve's marginal cost per row on top of its fixed part, and a step budget priced
/// under it (BatchBudget) does not mistake the batch's fixed cost for the rows' cost.
class StepCostTracker {
 public:
  /// Learns around `prior`, a measured or affine cost in seconds (not flat(), which has no unit).
  explicit StepCostTracker(StepCost prior, StepCostTrackerOptions options = {}) : prior_(std::move(prior)), options_(options) {
    REFDEC_CHECK(!prior_.is_flat(), "step cost tracker: the prior must be a measured or affine cost in seconds, not flat()");
    REFDEC_CHECK(std::isfinite(options_.half_life) && options_.half_life > 0.0,
                 "step cost tracker: half_life must be finite and positive, got " << options_.half_life);
    REFDEC_CHECK(std::isfinite(options_.fallback_weight) && options_.fallback_weight > 0.0,
                 "step cost tracker: fallback_weight must be finite and positive, got " << options_.fallback_weight);
    decay_ = std::exp2(-1.0 / options_.half_life);
    current_ = learned();
  }

  /// The batch observe() and Python's current() take when given none: a step of one sequence.
  static constexpr std::size_t kDefaultBatch = 1;

  /// One timed step of `batch` sequences (>= 1) that ran `tokens` tokens in all (>= batch) in
  /// `seconds` (finite, > 0). One sequence's step teaches the curve; a step of several, the
  /// overhead per sequence of its batch-size class (see above).
  void observe(std::size_t tokens, double seconds, std::size_t batch = kDefaultBatch) {
    REFDEC_CHECK(batch >= 1, "step cost tracker: a step runs at least one sequence, got a batch of " << batch);
    REFDEC_CHECK(tokens >= batch, "step cost tracker: a step runs at least one token per sequence, got " << tokens << " for " << batch);
    REFDEC_CHECK(std::isfinite(seconds) && seconds > 0.0,
                 "step cost tracker: seconds must be finite and positive, got " << seconds << " at " << tokens << " tokens");
    for (std::size_t c = 0; c < kClasses; ++c) sum_[c] *= decay_, weight_[c] *= decay_;
    for (std::size_t k = 0; k < kBatchClasses; ++k) overhead_sum_[k] *= decay_, overhead_weight_[k] *= decay_;
    if (batch == 1) {
      const std::size_t c = size_class(tokens);
      sum_[c] += std::log(seconds / prior_.seconds(tokens));
      weight_[c] += 1.0;
    } else {
      const std::size_t k = batch_class(batch);
      overhead_sum_[k] += (seconds - current_.seconds(tokens)) / static_cast<double>(batch - 1);
      overhead_weight_[k] += 1.0;
    }
    ++observations_;
    current_ = learned();  // once per observation: a decoder asks for the cost every step
  }

  /// The factor the prior is multiplied by at `tokens` tokens (1 before any observation).
  double correction(std::size_t tokens) const {
    double all_sum = 0.0, all_weight = 0.0;
    for (std::size_t c = 0; c < kClasses; ++c) all_sum += sum_[c], all_weight += weight_[c];
    const double fallback = all_weight > 0.0 ? all_sum / all_weight : 0.0;
    const std::size_t c = size_class(std::max<std::size_t>(tokens, 1));
    return std::exp((sum_[c] + options_.fallback_weight * fallback) / (weight_[c] + options_.fallback_weight));
  }

  /// The learned cost of one sequence's step: the prior times each size class's correction,
  /// sampled at 1, 2, 3, 4, 6, 8, ... 256 tokens (two points per class), made non-decreasing by
  /// StepCost::calibrated().
  const StepCost& current() const { return current_; }

  /// Seconds a step of `batch` sequences costs beyond one sequence's step of the same tokens (0
  /// for one sequence, and before any step of several was observed).
  double overhead(std::size_t batch) const {
    if (batch <= 1) return 0.0;
    double all_sum = 0.0, all_weight = 0.0;
    for (std::size_t k = 0; k < kBatchClasses; ++k) all_sum += overhead_sum_[k], all_weight += overhead_weight_[k];
    const double fallback = all_weight > 0.0 ? all_sum / all_weight : 0.0;
    const std::size_t k = batch_class(batch);
    const double per_sequence = (overhead_sum_[k] + options_.fallback_weight * fallback) / (overhead_weight_[k] + options_.fallback_weight);
    return static_cast<double>(batch - 1) * std::max(per_sequence, 0.0);
  }

  /// The learned cost of a step of `batch` sequences by its total tokens: current() plus
  /// overhead(batch).
  StepCost current(std::size_t batch) const { return current_.plus(overhead(batch)); }

  /// The calibration it learns around.
  const StepCost& prior() const { return prior_; }
  /// Steps observed so far.
  std::int64_t observations() const { return observations_; }

 private:
  static constexpr std::size_t kClasses = 9;       // 1, 2-3, 4-7, ..., 128-255, 256 and more
  static constexpr std::size_t kBatchClasses = 8;  // 2-3, 4-7, ..., 128-255, 256 and more
  static std::size_t size_class(std::size_t tokens) {
    return std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(tokens)) - 1, kClasses - 1);
  }
  static std::size_t batch_class(std::size_t batch) {
    return std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(batch)) - 2, kBatchClasses - 1);
  }
  // The prior corrected at two token counts per size class: 1, 2, 3, 4, 6, 8, ... 256.
  StepCost learned() const {
    std::array<std::pair<std::size_t, double>, 2 * kClasses - 2> samples{};
    std::size_t k = 0;
    for (std::size_t base = 1; base <= (std::size_t{1} << (kClasses - 1)); base *= 2) {
      samples[k++] = {base, prior_.seconds(base) * correction(base)};
      if (base > 1 && base < (std::size_t{1} << (kClasses - 1)))
        samples[k++] = {base + base / 2, prior_.seconds(base + base / 2) * correction(base + base / 2)};
    }
    return StepCost::calibrated(samples);
  }
  StepCost prior_;
  StepCostTrackerOptions options_;
  double decay_ = 1.0;
  std::array<double, kClasses> sum_{}, weight_{};                         // decayed sums of log(observed / prior) and their weights
  std::array<double, kBatchClasses> overhead_sum_{}, overhead_weight_{};  // decayed sums of the overhead per sequence
  std::int64_t observations_ = 0;
  StepCost current_;  // learned() as of the last observation
};

/// The number of draft nodes n in [0, min(max_nodes, probabilities.size())] that maximises the
/// expected tokens per second (1 + p_1 + ... + p_n) / cost.seconds(1 + n + auxiliary_tokens),
/// where `probabilities` are the nodes' estimated probabilities of being accepted, best first (a
/// node never above its parent, so the top n form a tree). The 1s are the bonus token and the
/// root. Ties go to the smaller n; 0 means plain decoding is best. Each probability must be in
/// [0, 1] and none above the one before it.
inline std::size_t choose_budget(std::span<const float> probabilities, const StepCost& cost, std::size_t auxiliary_tokens,
                                 std::size_t max_nodes) {
  const std::size_t limit = std::min(max_nodes, probabilities.size());
  double expected = 1.0;  // tokens the step yields with the best n nodes so far
  double best_rate = expected / cost.seconds(1 + auxiliary_tokens);
  std::size_t best = 0;
  for (std::size_t n = 1; n <= limit; ++n) {
    const float p = probabilities[n - 1];
    REFDEC_CHECK(p >= 0.0f && p <= 1.0f, "choose_budget: probability " << n - 1 << " is " << p << ", outside [0, 1]");
    REFDEC_CHECK(n == 1 || p <= probabilities[n - 2], "choose_budget: probabilities must be sorted best first, but "
                                                          << n - 1 << " is " << p << " after " << probabilities[n - 2]);
    expected += p;
    const double rate = expected / cost.seconds(1 + n + auxiliary_tokens);
    if (rate > best_rate) {
      best_rate = rate;
      best = n;
    }
  }
  return best;
}

REFDEC_NAMESPACE_END
