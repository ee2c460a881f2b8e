// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The mixture drafter's learned scorer (MixtureOptions::scorer_rate): a logistic regression
// (OnlineLogistic), learned online from the accepted tokens, that predicts each merged node's
// acceptance given its parent's from what the per-source tables (mixture_statistics.hpp) see one
// source at a time and what they cannot see at all.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/drafters/mixture_statistics.hpp"
#include "refdec/drafters/online_logistic.hpp"

REFDEC_NAMESPACE_BEGIN

/// The learned scorer of a MixtureDrafter: per step, the features of every merged node (set(),
/// parents first), its prediction (predict()) and, once the true continuation is known, the
/// update (update()). It starts as the per-source estimate (weight 1 on that estimate's logit, 0
/// elsewhere), so a fresh mixture proposes what its tables would, and learns a correction.
///
/// Dense features: a bias, the logit of the per-source estimate, depth 1, 2 and 3-4, log of the
/// number of merged siblings, the node's share of their estimates, whether it leads them, the
/// logit of its parent's estimate (0 at depth 1), the number of sources that proposed it; then
/// kPerSource per source: proposed, the logit of that source's estimate, log(1 + its match
/// length), its recent reach, the node's share of its parent's score in its tree and log(1 + its
/// score there) (all 0 when it did not propose the node). Hashed (kHashed): the node's token; the
/// pairs (parent's token, its token), (grandparent's and parent's tokens, its token), (the set of
/// sources that proposed it, its token) and (that set, its depth). The tokens before the root are
/// the last accepted ones.
class MixtureScorer {
 public:
  /// The most true tokens in a row a source's recent reach counts (the mixture caps it there).
  static constexpr std::size_t kReachCap = 8;

  /// A scorer over `num_sources` sources, AdaGrad at `learning_rate` (in (0, 1]).
  MixtureScorer(std::size_t num_sources, double learning_rate)
      : num_sources_(num_sources), model_(initial_weights(num_sources), OnlineLogisticOptions{.learning_rate = learning_rate}) {}

  /// What a node's merged siblings (itself included) look like: their number, and the sum and the
  /// largest of their per-source estimates.
  struct Siblings {
    std::size_t count = 0;
    double sum = 0.0;
    double best = 0.0;
  };

  /// This step's context, shared by every node: the merged trie, each node's statistics cell per
  /// source ([nodes + 1, sources], -1: not proposed), the tables, each source's match length and
  /// recent reach, and the two tokens before the root.
  struct Step {
    const DraftTree& merged;
    std::span<const std::int32_t> proposer;
    const MixtureStatistics& stats;
    std::span<const std::size_t> match;
    std::span<const double> recent;
    Token last_token;
    Token prev_token;
  };

  /// Records what source `s`'s tree says of merged node `m`: its share of its parent's score there
  /// and its score (while the proposals are merged).
  void record_source(std::size_t m, std::size_t s, double share, float score) {
    const std::size_t k = m * num_sources_ + s;
    if (source_share_.size() <= k) {
      source_share_.resize((m + 1) * num_sources_, 0.0f);
      source_score_.resize((m + 1) * num_sources_, 0.0f);
    }
    source_share_[k] = static_cast<float>(std::min(share, kMaxShare));
    source_score_[k] = score;
  }

  /// Sizes the features for a merged trie of `count` nodes, the root included.
  void begin_step(std::size_t count) {
    dense_.assign(count * model_.dense_size(), 0.0f);
    hashed_.assign(count * kHashed, 0);
    parent_.resize(count);
    parent_[0] = 0;
  }

  /// Sets the features of merged node `c`, child of `u`: `table` is its per-source estimate,
  /// `parent` its parent's final estimate (unused at depth 1).
  void set(const Step& step, std::int32_t u, std::int32_t c, double table, double parent, const Siblings& siblings) {
    const auto ci = static_cast<std::size_t>(c);
    const auto ui = static_cast<std::size_t>(u);
    const std::int32_t depth = step.merged.node(c).depth;
    float* x = dense_.data() + ci * model_.dense_size();
    x[kBias] = 1.0f;
    x[kTableLogit] = static_cast<float>(OnlineLogistic::logit_of(table));
    x[kDepth1] = depth == 1 ? 1.0f : 0.0f;
    x[kDepth2] = depth == 2 ? 1.0f : 0.0f;
    x[kDepth3To4] = depth == 3 || depth == 4 ? 1.0f : 0.0f;
    x[kSiblings] = static_cast<float>(std::log(static_cast<double>(siblings.count)));
    x[kSiblingShare] = static_cast<float>(siblings.sum > 0.0 ? table / siblings.sum : 0.0);
    x[kLeads] = table >= siblings.best ? 1.0f : 0.0f;
    x[kParentLogit] = u == 0 ? 0.0f : static_cast<float>(OnlineLogistic::logit_of(parent));
    std::uint64_t proposers = 0;  // bit s: source s proposed c
    float* xs = x + kDense;
    for (std::size_t s = 0; s < num_sources_; ++s, xs += kPerSource) {
      const std::size_t k = ci * num_sources_ + s;
      const std::int32_t cell = step.proposer[k];
      if (cell < 0) continue;
      proposers |= std::uint64_t{1} << std::min<std::size_t>(s, 63);
      x[kProposers] += 1.0f;
      xs[0] = 1.0f;
      xs[1] = static_cast<float>(OnlineLogistic::logit_of(step.stats.cell_estimate(static_cast<std::size_t>(cell))));
      xs[2] = static_cast<float>(std::log1p(static_cast<double>(step.match[s])));
      xs[3] = static_cast<float>(std::min(step.recent[s], static_cast<double>(kReachCap)));
      xs[4] = source_share_[k];
      xs[5] = static_cast<float>(std::log1p(std::max(0.0f, source_score_[k])));
    }
    parent_[ci] = u;
    // A node's token as a hash argument; the root's is the last accepted token.
    const auto id = [&](std::int32_t i) {
      return static_cast<std::uint64_t>(static_cast<std::uint32_t>(i == 0 ? step.last_token : step.merged.node(i).token));
    };
    const std::uint64_t tok = id(c);
    const std::uint64_t parent_token = id(u);
    const std::uint64_t grand = u == 0 ? static_cast<std::uint64_t>(static_cast<std::uint32_t>(step.prev_token)) : id(parent_[ui]);
    std::uint64_t* h = hashed_.data() + ci * kHashed;
    h[0] = OnlineLogistic::hash(1, tok);
    h[1] = OnlineLogistic::hash(2, parent_token, tok);
    h[2] = OnlineLogistic::hash(3, OnlineLogistic::hash(0, grand, parent_token), tok);
    h[3] = OnlineLogistic::hash(4, proposers, tok);
    h[4] = OnlineLogistic::hash(5, proposers, static_cast<std::uint64_t>(std::min(depth, 8)));
  }

  /// The predicted probability that node `c` (its features set this step) is accepted given that
  /// its parent was.
  double predict(std::int32_t c) const { return model_.predict(dense(c), hashed(c)); }
  /// Learns from node `c` of the last step: whether it was on the true continuation.
  void update(std::int32_t c, bool ok) { model_.update(dense(c), hashed(c), ok); }

 private:
  enum : std::size_t {
    kBias,
    kTableLogit,
    kDepth1,
    kDepth2,
    kDepth3To4,
    kSiblings,
    kSiblingShare,
    kLeads,
    kParentLogit,
    kProposers,
    kDense
  };
  static constexpr std::size_t kPerSource = 6;
  static constexpr std::size_t kHashed = 5;
  // The largest share of its parent's score a node's feature takes (a source may score a child
  // far above its parent).
  static constexpr double kMaxShare = 16.0;

  static std::vector<double> initial_weights(std::size_t num_sources) {
    std::vector<double> w(kDense + kPerSource * num_sources, 0.0);
    w[kTableLogit] = 1.0;
    return w;
  }
  std::span<const float> dense(std::int32_t c) const {
    return {dense_.data() + static_cast<std::size_t>(c) * model_.dense_size(), model_.dense_size()};
  }
  std::span<const std::uint64_t> hashed(std::int32_t c) const { return {hashed_.data() + static_cast<std::size_t>(c) * kHashed, kHashed}; }

  std::size_t num_sources_;
  OnlineLogistic model_;
  std::vector<float> source_share_;    // [merged nodes + 1, sources] a node's share of its parent's score in a source's tree
  std::vector<float> source_score_;    // [merged nodes + 1, sources] its score there
  std::vector<float> dense_;           // [merged nodes + 1, dense features]
  std::vector<std::uint64_t> hashed_;  // [merged nodes + 1, kHashed]
  std::vector<std::int32_t> parent_;   // [merged nodes + 1] each node's parent in the merged trie
};

REFDEC_NAMESPACE_END
