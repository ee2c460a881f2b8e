// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The cost of a verification step as a function of the tokens it runs through the model, and the
// draft budget that maximises expected tokens per unit of time under it.

#include <algorithm>
#include <cmath>
#include <cstddef>
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
                   "step cost: a sample's seconds must be finite and positive, got " << seconds << " at " << tokens
                                                                                      << " tokens");
    }
    std::sort(sorted.begin(), sorted.end());
    StepCost c;
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t j = i;
      double sum = 0.0;
      for (; j < sorted.size() && sorted[j].first == sorted[i].first; ++j) sum += sorted[j].second;
      const double mean = sum / static_cast<double>(j - i);
      c.table_.emplace_back(static_cast<double>(sorted[i].first),
                            c.table_.empty() ? mean : std::max(mean, c.table_.back().second));
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

 private:
  std::vector<std::pair<double, double>> table_;  // [points] (tokens, seconds), tokens ascending; empty: flat
};

/// The number of draft nodes n in [0, min(max_nodes, probabilities.size())] that maximises the
/// expected tokens per second (1 + p_1 + ... + p_n) / cost.seconds(1 + n + auxiliary_tokens),
/// where `probabilities` are the nodes' estimated probabilities of being accepted, best first (a
/// node never above its parent, so the top n form a tree). The 1s are the bonus token and the
/// root. Ties go to the smaller n; 0 means plain decoding is best. Each probability must be in
/// [0, 1] and none above the one before it.
inline std::size_t choose_budget(std::span<const float> probabilities, const StepCost& cost,
                                 std::size_t auxiliary_tokens, std::size_t max_nodes) {
  const std::size_t limit = std::min(max_nodes, probabilities.size());
  double expected = 1.0;  // tokens the step yields with the best n nodes so far
  double best_rate = expected / cost.seconds(1 + auxiliary_tokens);
  std::size_t best = 0;
  for (std::size_t n = 1; n <= limit; ++n) {
    const float p = probabilities[n - 1];
    REFDEC_CHECK(p >= 0.0f && p <= 1.0f, "choose_budget: probability " << n - 1 << " is " << p << ", outside [0, 1]");
    REFDEC_CHECK(n == 1 || p <= probabilities[n - 2],
                 "choose_budget: probabilities must be sorted best first, but " << n - 1 << " is " << p
                                                                                << " after " << probabilities[n - 2]);
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
