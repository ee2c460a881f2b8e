// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One draft budget for a whole verification step: the batch's draft nodes, chosen together under
// the cost of the step's total rows. A budget chosen per sequence prices a step by that sequence's
// tokens alone; at batch > 1 every sequence then verifies nodes the full step cannot afford, or
// an engine turns speculation off for all. Here every sequence offers its tree with each node's
// estimated probability of acceptance, and the nodes kept are the ones that maximise expected
// tokens per second of the step, wherever in the batch they are.
// Torch-free.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_cost.hpp"

REFDEC_NAMESPACE_BEGIN

/// Prior pseudo-steps of the default estimate (estimate_acceptance()): before a drafter has
/// statistics its nodes count as accepted at kDefaultAcceptance, and it takes about this many
/// proposals reaching a depth for that depth's own rate to dominate.
inline constexpr double kDefaultAcceptancePrior = 4.0;
/// The default estimate's acceptance rate of a depth the drafter has no statistics for.
inline constexpr double kDefaultAcceptance = 0.5;

/// Per-node estimated probabilities of acceptance for `tree` ([tree.size()], root 1), each at most
/// its parent's, into `out`:
/// - `scores_are_probabilities` (a drafter that scores nodes by estimated acceptance, such as the
///   mixture): the tree's scores, clamped to [0, 1];
/// - otherwise, from the drafter's statistics: a node at depth d is accepted with the drafter's
///   measured rate at d given a draft reaching d (`accepted_at_depth[d-1]` over
///   `proposed_at_depth[d-1]`, smoothed towards kDefaultAcceptance by kDefaultAcceptancePrior
///   pseudo-steps), scaled for a later sibling by its score over its best sibling's.
inline void estimate_acceptance(const LinearTree& tree, bool scores_are_probabilities, std::span<const std::int64_t> proposed_at_depth,
                                std::span<const std::int64_t> accepted_at_depth, std::vector<float>& out) {
  const auto n = static_cast<std::size_t>(tree.size());
  out.assign(n, 1.0f);
  for (std::size_t i = 1; i < n; ++i) {
    const auto parent = static_cast<std::size_t>(tree.parent[i]);
    double p;
    if (scores_are_probabilities) {
      const float s = tree.score[i];
      p = std::isfinite(s) ? std::clamp(static_cast<double>(s), 0.0, 1.0) : 0.0;
    } else {
      const auto d = static_cast<std::size_t>(tree.depth[i] - 1);
      const double proposed = d < proposed_at_depth.size() ? static_cast<double>(proposed_at_depth[d]) : 0.0;
      const double accepted = d < accepted_at_depth.size() ? static_cast<double>(accepted_at_depth[d]) : 0.0;
      const double rate = (accepted + kDefaultAcceptancePrior * kDefaultAcceptance) / (proposed + kDefaultAcceptancePrior);
      // Siblings are ordered by descending score: the first is the best.
      const float best = tree.score[static_cast<std::size_t>(tree.first_child[parent])];
      const double share = best > 0.0f && std::isfinite(best) && std::isfinite(tree.score[i])
                               ? std::clamp(static_cast<double>(tree.score[i] / best), 0.0, 1.0)
                               : (static_cast<std::int32_t>(i) == tree.first_child[parent] ? 1.0 : 0.0);
      // The walk reaches a node only through its parent: the product of the rates on its path.
      p = static_cast<double>(out[parent]) * std::clamp(rate, 0.0, 1.0) * share;
    }
    out[i] = std::min(out[parent], static_cast<float>(p));
  }
}

/// The nodes of `tree` kept by a cut to its `n` draft nodes of highest `probabilities`
/// ([tree.size()], each at most its parent's), written as a tree into `out` (root first, the kept
/// nodes in their order in `tree`, so parents still precede children and siblings keep their
/// order). Ties go to the earlier node, so a parent always comes before its equally likely child
/// and the kept set is closed under parents. n above the draft nodes keeps them all.
inline void cut_tree(const LinearTree& tree, std::span<const float> probabilities, std::size_t n, LinearTree& out,
                     std::vector<std::int32_t>& scratch) {
  REFDEC_CHECK(probabilities.size() == tree.tokens.size(),
               "cut_tree: " << probabilities.size() << " probabilities for a tree of " << tree.size() << " nodes");
  const auto size = static_cast<std::size_t>(tree.size());
  out.tokens.clear(), out.parent.clear(), out.depth.clear(), out.score.clear();
  if (size == 0) {
    out.finish();
    return;
  }
  // scratch[0 .. drafts): draft nodes by descending probability; then the old -> new index map.
  scratch.resize(size - 1);
  for (std::size_t i = 1; i < size; ++i) scratch[i - 1] = static_cast<std::int32_t>(i);
  const std::size_t keep = std::min(n, size - 1);
  const auto by_probability = [&](std::int32_t a, std::int32_t b) {
    const float pa = probabilities[static_cast<std::size_t>(a)], pb = probabilities[static_cast<std::size_t>(b)];
    return pa != pb ? pa > pb : a < b;
  };
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(keep), scratch.end(), by_probability);
  std::vector<std::int32_t> kept(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(keep));
  std::sort(kept.begin(), kept.end());
  scratch.assign(size, -1);
  scratch[0] = 0;
  out.add_node(tree.tokens[0], -1, tree.score[0]);
  for (const std::int32_t i : kept) {
    const auto u = static_cast<std::size_t>(i);
    const std::int32_t parent = scratch[static_cast<std::size_t>(tree.parent[u])];
    REFDEC_CHECK(parent >= 0,
                 "cut_tree: node " << i << " is kept without its parent " << tree.parent[u] << " (a probability above its parent's)");
    scratch[u] = out.size();
    out.add_node(tree.tokens[u], parent, tree.score[u]);
  }
  out.finish();
}

/// A drafted tree offered to the batch choice (BatchBudget::cut()): the tree, cut in place; whether
/// its scores are estimated probabilities of acceptance (a cost-aware drafter's); its drafter's
/// proposals and acceptances by depth (DrafterStats), for the estimate otherwise.
struct BudgetOffer {
  LinearTree* tree = nullptr;
  bool scores_are_probabilities = false;
  std::span<const std::int64_t> proposed_at_depth, accepted_at_depth;
};

/// Chooses how many draft nodes each sequence of a step verifies. Sequence b offers `offers[b]`:
/// its nodes' estimated probabilities of acceptance, best first (each node's at most its parent's,
/// so a sequence's best n nodes form a tree). The step also runs `fixed_rows` rows nobody chooses
/// (each drafting sequence's root, auxiliary tokens, prompt chunks being prefilled). Writes to
/// `counts[b]` the number of sequence b's best nodes to keep, maximising the step's expected
/// tokens per second,
///     (drafting sequences + sum of the kept probabilities) / cost.seconds(fixed_rows + kept nodes),
/// where each drafting sequence yields its bonus token. For every total N the best nodes are the N
/// most likely in the batch, so the choice is exact: a merge of the offers, scored at every N. Ties
/// go to fewer nodes; all zero (plain decoding) is a valid answer. Under the flat cost every node
/// with a positive probability is kept. A cap per sequence is the length of its offer.
class BatchBudget {
 public:
  /// `offers.size() == counts.size()`; the probabilities in [0, 1] and non-increasing per offer
  /// (refdec::ArgumentError otherwise). Returns the expected tokens per second of the choice (per
  /// unit of relative cost under flat()).
  double allocate(std::span<const std::span<const float>> offers, std::size_t fixed_rows, const StepCost& cost,
                  std::span<std::size_t> counts) {
    REFDEC_CHECK(offers.size() == counts.size(), "BatchBudget: " << offers.size() << " offers but " << counts.size() << " counts");
    std::fill(counts.begin(), counts.end(), 0);
    heap_.clear();
    for (std::size_t b = 0; b < offers.size(); ++b) {
      const auto offer = offers[b];
      for (std::size_t i = 0; i < offer.size(); ++i) {
        REFDEC_CHECK(offer[i] >= 0.0f && offer[i] <= 1.0f,
                     "BatchBudget: sequence " << b << " node " << i << " has probability " << offer[i] << ", outside [0, 1]");
        REFDEC_CHECK(i == 0 || offer[i] <= offer[i - 1], "BatchBudget: sequence " << b << "'s probabilities must be best first, but " << i
                                                                                  << " is " << offer[i] << " after " << offer[i - 1]);
      }
      if (!offer.empty()) heap_.push_back({offer[0], b});
    }
    std::make_heap(heap_.begin(), heap_.end(), Entry::lower);
    const auto drafting = static_cast<double>(offers.size());
    double expected = drafting;
    double best_rate = expected / cost.seconds(std::max<std::size_t>(fixed_rows, 1));
    // order_: the sequence of each node taken, in merge order; the best prefix is replayed into counts.
    order_.clear();
    std::size_t best = 0;
    taken_.assign(offers.size(), 0);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Entry::lower);
      const Entry e = heap_.back();
      heap_.pop_back();
      if (cost.is_flat() && e.p <= 0.0f) break;
      order_.push_back(e.sequence);
      expected += e.p;
      const double rate = expected / cost.seconds(fixed_rows + order_.size());
      if (cost.is_flat() || rate > best_rate) {
        best_rate = rate;
        best = order_.size();
      }
      const std::size_t next = ++taken_[e.sequence];
      if (next < offers[e.sequence].size()) {
        heap_.push_back({offers[e.sequence][next], e.sequence});
        std::push_heap(heap_.begin(), heap_.end(), Entry::lower);
      }
    }
    for (std::size_t k = 0; k < best; ++k) ++counts[order_[k]];
    return best_rate;
  }

  /// The whole batch choice over drafted trees: each tree's nodes estimated
  /// (estimate_acceptance()), allocate(), and each tree cut in place to its count (cut_tree()).
  /// `fixed_rows` as for allocate(). Returns allocate()'s rate; counts() holds the counts.
  double cut(std::span<const BudgetOffer> offers, std::size_t fixed_rows, const StepCost& cost) {
    const std::size_t n = offers.size();
    if (probabilities_.size() < n) probabilities_.resize(n), sorted_.resize(n);
    spans_.resize(n);
    counts_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      const BudgetOffer& o = offers[k];
      REFDEC_CHECK(o.tree != nullptr, "BatchBudget::cut: offer " << k << " has no tree");
      estimate_acceptance(*o.tree, o.scores_are_probabilities, o.proposed_at_depth, o.accepted_at_depth, probabilities_[k]);
      sorted_[k].assign(probabilities_[k].begin() + (o.tree->size() > 0 ? 1 : 0), probabilities_[k].end());
      std::sort(sorted_[k].begin(), sorted_[k].end(), std::greater<>());
      spans_[k] = sorted_[k];
    }
    const double rate = allocate(spans_, fixed_rows, cost, counts_);
    for (std::size_t k = 0; k < n; ++k) {
      cut_tree(*offers[k].tree, probabilities_[k], counts_[k], cut_, cut_scratch_);
      std::swap(*offers[k].tree, cut_);
    }
    return rate;
  }
  /// The counts of the last cut(), one per offer.
  std::span<const std::size_t> counts() const { return counts_; }

 private:
  struct Entry {
    float p;
    std::size_t sequence;
    // Max-heap on p; among equal p the lower sequence first, so the choice does not depend on
    // the heap's internal order.
    static bool lower(const Entry& a, const Entry& b) { return a.p != b.p ? a.p < b.p : a.sequence > b.sequence; }
  };
  std::vector<Entry> heap_;
  std::vector<std::size_t> order_, taken_;
  // cut()'s scratch: per offer the estimates by node and sorted best first.
  std::vector<std::vector<float>> probabilities_, sorted_;
  std::vector<std::span<const float>> spans_;
  std::vector<std::size_t> counts_;
  LinearTree cut_;
  std::vector<std::int32_t> cut_scratch_;
};

REFDEC_NAMESPACE_END
