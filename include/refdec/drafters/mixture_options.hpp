// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The settings of the mixture drafter (mixture.hpp).

#include <cstddef>

#include "refdec/core/config.hpp"
#include "refdec/core/step_cost.hpp"

REFDEC_NAMESPACE_BEGIN

/// How MixtureDrafter combines the estimates of several sources that proposed the same node.
enum class MixtureCombine {
  max,       ///< the best single estimate: sources that copy from the same text are not independent
  noisy_or,  ///< 1 - prod(1 - p): as if the sources erred independently
};

/// Settings of MixtureDrafter.
struct MixtureOptions {
  /// Cost of a step by tokens run; each step's budget maximises expected tokens per second under
  /// it. The default (flat) keeps every node with a positive estimate, up to the budget: what
  /// replay assumes, where a step costs the same whatever it verifies.
  StepCost cost = StepCost::flat();
  /// Prior probability that a source's node is accepted given that its parent was; a source
  /// starts from it at every depth, so that a new source gets tried.
  double prior_mean = 0.3;
  /// Weight of the prior, in observations.
  double prior_strength = 2.0;
  /// Steps after which an observation weighs half as much (0: never forget). Lets estimates follow
  /// a change of topic or of the sequence a drafter serves.
  double half_life = 2000.0;
  /// Depths with statistics of their own; deeper nodes share the deepest one's.
  std::size_t max_depth = 16;
  /// Combination of the estimates of sources that proposed the same node. On Spec-Bench with LLMA,
  /// the n-gram trie and REST, max replays to a slightly higher tau than noisy-or.
  MixtureCombine combine = MixtureCombine::max;
  /// Draft nodes each source is asked for at least, whatever the step's budget (0: the budget).
  /// The cut then picks the step's budget from every source's best candidates instead of from
  /// each source's own top `budget`, which at small budgets is not the mixture's: a source ranks
  /// by its own score, the mixture by learned acceptance. Costs drafting time, not verification.
  /// With the two context features below and the learned scorer (the defaults) it raises replay
  /// tau at budgets 8 and 16 and lowers it nowhere measured (docs/drafters.md, "The mixture").
  std::size_t source_budget = 64;
  /// Condition the estimates on each source's match length this step (a MatchReportingDrafter's
  /// last_match(): the context suffix its proposal rests on; 0 for a source that reports none).
  bool match_context = true;
  /// Weight of the newest step in each source's moving average of how many true tokens in a row
  /// it had proposed (its reach), per sequence; the estimates are conditioned on it, so a source
  /// that has been right lately in this sequence is trusted more (0: off). In [0, 1].
  double recent_rate = 0.3;
  /// AdaGrad learning rate of the learned scorer (0: off). On, each merged node's probability
  /// given its parent's acceptance is a logistic regression (OnlineLogistic), learned online from
  /// the accepted tokens, over what the per-source estimates see one source at a time and what
  /// they cannot: every source's estimate, match length, recent reach and score at once, the
  /// node's depth, its merged siblings (how many, its share of their estimates, whether it leads
  /// them), its parent's estimate, and hashed indicators of its token in the context of the two
  /// tokens before it and of the set of sources that proposed it. It starts as the per-source
  /// estimate (weight 1 on its logit, 0 elsewhere) and learns a correction, so a fresh mixture
  /// proposes what it would without it. In [0, 1]. 2 MiB of weights per mixture.
  double scorer_rate = 0.1;
  /// Steps after which a step weighs half in the per-sequence calibration of the adaptive budget
  /// (0: off). The learned estimates are shared by every sequence the drafter serves, so on a
  /// sequence where the sources are worse (or better) than on average they are over- (or under-)
  /// confident, and the budget choice verifies nodes that do not pay (or too few). With a half-life,
  /// the mixture keeps per sequence the decayed sums of the accepted tokens it expected and of those
  /// it got, and scales the probabilities behind the budget choice by their ratio
  /// (last_calibration()). Only the budget choice (a step cost that is not flat) uses it: the tree
  /// and a flat cost's cut are unchanged. Finite, non-negative.
  double calibration_half_life = 12.0;
  /// Weight, in expected accepted tokens, of the prior ratio 1 in the calibration: the ratio is
  /// (accepted + prior) / (expected + prior), so a few steps do not swing it. Finite, positive.
  double calibration_prior = 1.0;
};

REFDEC_NAMESPACE_END
