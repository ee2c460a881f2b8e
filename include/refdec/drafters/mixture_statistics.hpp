// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What the mixture drafter (mixture.hpp) learns per source: acceptance counts by depth and
// context, with a prior and forgetting, as the per-source estimates its nodes are scored by.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/drafters/mixture_options.hpp"

REFDEC_NAMESPACE_BEGIN

class MixtureDrafter;
class MixtureScorer;

/// What a MixtureDrafter learned, per source. Outlives moves of the drafter (see
/// MixtureDrafter::statistics()), so a report can read it after the drafter went into an
/// AnyDrafter.
class MixtureStatistics {
 public:
  /// Raw counts for one source (no prior, no forgetting).
  struct Source {
    std::string name;
    std::vector<std::int64_t> evaluated;  // [max_depth] its nodes at depth d+1 whose parent was on the true path
    std::vector<std::int64_t> correct;    // [max_depth] of those, the ones on the true path
    std::int64_t accepted_tokens = 0;     // accepted draft tokens it had proposed (another source may have too)

    /// How often its nodes at depth `d + 1` were right given that their parent was (0 before any).
    double right_at(std::size_t d) const {
      if (d >= evaluated.size() || evaluated[d] == 0) return 0.0;
      return static_cast<double>(correct[d]) / static_cast<double>(evaluated[d]);
    }
  };

  /// Sources in the order the drafter was given them.
  const std::vector<Source>& sources() const { return sources_; }
  /// Steps proposed so far.
  std::int64_t steps() const { return steps_; }
  /// Mean number of draft nodes the step budget choice kept per step.
  double mean_budget() const { return steps_ > 0 ? static_cast<double>(kept_nodes_) / static_cast<double>(steps_) : 0.0; }

  /// The learned probability that a node of source `source` at depth `depth + 1` is accepted
  /// given that its parent was (prior and forgetting included, over all of its nodes at that depth).
  double acceptance(std::size_t source, std::size_t depth) const {
    REFDEC_CHECK(source < sources_.size(), "mixture statistics: source " << source << " of " << sources_.size());
    const std::size_t d = std::min(depth, max_depth_ - 1);
    return depth_estimate(source * max_depth_ + d);
  }

 private:
  friend class MixtureDrafter;
  friend class MixtureScorer;
  // A node's features: depth; its source's context this step (the source's match length and its
  // recent reach in this sequence, in bins: MixtureOptions::match_context, recent_rate); its share
  // of its parent's score in its source's tree and its absolute score (frequency, count), in bins.
  // Each cell has its own estimate, backed off to its context's (with context features), backed
  // off to the depth's.
  static constexpr std::size_t kShareBins = 5;
  static constexpr std::size_t kScoreBins = 5;
  static constexpr std::size_t kCellsPerContext = kShareBins * kScoreBins;
  static constexpr std::size_t kMatchBins = 6;
  static constexpr std::size_t kReachBins = 4;
  static constexpr std::size_t kContextsPerDepth = kMatchBins * kReachBins;
  static std::size_t share_bin(double share) { return share < 0.25 ? 0 : share < 0.5 ? 1 : share < 0.75 ? 2 : share < 0.95 ? 3 : 4; }
  static std::size_t score_bin(double score) { return score < 1.5 ? 0 : score < 3.5 ? 1 : score < 7.5 ? 2 : score < 31.5 ? 3 : 4; }
  // Match lengths 0 (none reported), 1, 2, 3-4, 5-8, 9+.
  static std::size_t match_bin(std::size_t match) { return match <= 2 ? match : match <= 4 ? 3 : match <= 8 ? 4 : 5; }
  // A moving average of true tokens in a row: below 0.2, 0.8, 2.5, and above.
  static std::size_t reach_bin(double reach) { return reach < 0.2 ? 0 : reach < 0.8 ? 1 : reach < 2.5 ? 2 : 3; }

  void reset(std::vector<std::string> names, const MixtureOptions& o) {
    max_depth_ = o.max_depth;
    prior_mean_ = o.prior_mean;
    prior_strength_ = o.prior_strength;
    forget_ = o.half_life > 0.0 ? std::exp2(-1.0 / o.half_life) : 1.0;
    contexts_ = o.match_context || o.recent_rate > 0.0;
    sources_.resize(names.size());
    for (std::size_t s = 0; s < names.size(); ++s) {
      sources_[s].name = std::move(names[s]);
      sources_[s].evaluated.assign(max_depth_, 0);
      sources_[s].correct.assign(max_depth_, 0);
    }
    depth_trials_.assign(names.size() * max_depth_, 0.0);
    depth_successes_.assign(depth_trials_.size(), 0.0);
    context_trials_.assign(depth_trials_.size() * kContextsPerDepth, 0.0);
    context_successes_.assign(context_trials_.size(), 0.0);
    cell_trials_.assign(context_trials_.size() * kCellsPerContext, 0.0);
    cell_successes_.assign(cell_trials_.size(), 0.0);
  }
  // The cell of a node of source `s` at `depth` (>= 1) with the given features (`match` and
  // `reach` are ignored without context features).
  std::size_t cell(std::size_t s, std::size_t depth, std::size_t match, double reach, double share, double score) const {
    const std::size_t d = std::min(depth, max_depth_) - 1;
    const std::size_t context = contexts_ ? match_bin(match) * kReachBins + reach_bin(reach) : 0;
    return ((s * max_depth_ + d) * kContextsPerDepth + context) * kCellsPerContext + share_bin(share) * kScoreBins + score_bin(score);
  }
  double depth_estimate(std::size_t sd) const {
    const double k = prior_strength_ * weight_;
    return (depth_successes_[sd] + k * prior_mean_) / (depth_trials_[sd] + k);
  }
  double context_estimate(std::size_t ctx) const {
    const double k = prior_strength_ * weight_;
    return (context_successes_[ctx] + k * depth_estimate(ctx / kContextsPerDepth)) / (context_trials_[ctx] + k);
  }
  double cell_estimate(std::size_t c) const {
    const double k = prior_strength_ * weight_;
    const std::size_t ctx = c / kCellsPerContext;
    const double prior = contexts_ ? context_estimate(ctx) : depth_estimate(ctx / kContextsPerDepth);
    return (cell_successes_[c] + k * prior) / (cell_trials_[c] + k);
  }
  void record(std::size_t s, std::size_t depth, std::size_t c, bool ok) {
    const std::size_t d = std::min(depth, max_depth_) - 1;
    ++sources_[s].evaluated[d];
    sources_[s].correct[d] += ok ? 1 : 0;
    const std::size_t ctx = c / kCellsPerContext;
    cell_trials_[c] += weight_;
    context_trials_[ctx] += weight_;
    depth_trials_[ctx / kContextsPerDepth] += weight_;
    if (ok) {
      cell_successes_[c] += weight_;
      context_successes_[ctx] += weight_;
      depth_successes_[ctx / kContextsPerDepth] += weight_;
    }
  }
  // Forgetting: instead of shrinking every count each step, later observations weigh more
  // (weight_ grows by 1/forget_ per step); counts are rescaled before they could overflow.
  void end_step() {
    weight_ /= forget_;
    if (weight_ < 1e100) return;
    for (auto* v : {&depth_trials_, &depth_successes_, &context_trials_, &context_successes_, &cell_trials_, &cell_successes_})
      for (double& x : *v) x /= weight_;
    weight_ = 1.0;
  }

  std::vector<Source> sources_;
  std::int64_t steps_ = 0;
  std::int64_t kept_nodes_ = 0;
  std::size_t max_depth_ = 1;
  double prior_mean_ = 0.5;
  double prior_strength_ = 1.0;
  double forget_ = 1.0;                    // per-step factor on older observations
  bool contexts_ = false;                  // context features on: cells back off to their context's estimate
  double weight_ = 1.0;                    // weight of an observation made now
  std::vector<double> depth_trials_;       // [sources, max_depth] weighted observations
  std::vector<double> depth_successes_;    // [sources, max_depth]
  std::vector<double> context_trials_;     // [sources, max_depth, kMatchBins, kReachBins] weighted observations
  std::vector<double> context_successes_;  // [sources, max_depth, kMatchBins, kReachBins]
  std::vector<double> cell_trials_;        // [sources, max_depth, kMatchBins, kReachBins, kShareBins, kScoreBins]
  std::vector<double> cell_successes_;     // [sources, max_depth, kMatchBins, kReachBins, kShareBins, kScoreBins]
};

REFDEC_NAMESPACE_END
