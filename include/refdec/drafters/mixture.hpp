// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Mixture drafter: asks several drafters (sources) for candidates every step, merges them into
// one trie, scores every node by its estimated probability of acceptance (learned online per
// source, mixture_statistics.hpp, and corrected by a learned scorer), and cuts the tree to the
// budget that maximises expected tokens per unit of step time. Settings: mixture_options.hpp.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/drafters/mixture_options.hpp"
#include "refdec/drafters/mixture_scorer.hpp"
#include "refdec/drafters/mixture_statistics.hpp"

REFDEC_NAMESPACE_BEGIN

/// One draft tree from several drafters (sources). Every step each source proposes with the full
/// budget, and at least MixtureOptions::source_budget nodes; the proposals are merged into one trie (one node per distinct prefix), and
/// each node gets the estimated probability that the verifier accepts it:
/// - per source that proposed it, the learned probability that such a node (same source, depth,
///   share of its parent's score and absolute score in that source's tree: frequency, count or
///   span rank, whatever the source scores by; and the source's context this step: its match
///   length and how far it has lately been right in this sequence) is accepted given that its
///   parent was;
/// - combined over those sources (MixtureOptions::combine);
/// - with the learned scorer (MixtureOptions::scorer_rate, on by default) replaced by its
///   prediction from every source's estimate and context at once, the node's siblings, its
///   parent's estimate and its tokens;
/// - scaled down where the siblings' sum exceeds 1 (they are exclusive), and multiplied by the
///   parent's probability, so a node never scores above its parent.
/// The tree is then cut to the n best nodes, n chosen by choose_budget() under the options' step
/// cost (auxiliary tokens counted at max_auxiliary(), since propose() comes first), the
/// probabilities scaled for that choice by this sequence's calibration factor
/// (MixtureOptions::calibration_half_life: accepted over expected tokens so far). accept()
/// walks the whole merged trie (the cut nodes too) along the appended tokens: every node whose
/// parent is on the true path is an observation for each source that proposed it, and for the
/// scorer. A proposal that a source's exception interrupted is not learned from.
///
/// Sources that run auxiliary tokens (AuxiliaryDrafter) keep doing so: the mixture concatenates
/// their blocks in source order and hands each its part of the target's choices. One per sequence
/// (its learned statistics included): not for sharing across threads.
class MixtureDrafter {
 public:
  /// A mixture of `sources` (at least one), which it owns.
  explicit MixtureDrafter(std::vector<AnyDrafter> sources, MixtureOptions options = {})
      : sources_(std::move(sources)), opt_(std::move(options)), stats_(std::make_shared<MixtureStatistics>()) {
    REFDEC_CHECK(!sources_.empty(), "mixture: needs at least one source drafter");
    REFDEC_CHECK(std::isfinite(opt_.prior_mean) && opt_.prior_mean > 0.0 && opt_.prior_mean < 1.0,
                 "mixture: prior_mean must be in (0, 1), got " << opt_.prior_mean);
    REFDEC_CHECK(std::isfinite(opt_.prior_strength) && opt_.prior_strength > 0.0,
                 "mixture: prior_strength must be finite and positive, got " << opt_.prior_strength);
    REFDEC_CHECK(std::isfinite(opt_.half_life) && opt_.half_life >= 0.0,
                 "mixture: half_life must be finite and non-negative (0: never forget), got " << opt_.half_life);
    REFDEC_CHECK(opt_.max_depth >= 1 && opt_.max_depth <= 1024, "mixture: max_depth must be in [1, 1024], got " << opt_.max_depth);
    REFDEC_CHECK(opt_.source_budget <= kMaxSourceBudget,
                 "mixture: source_budget must be in [0, " << kMaxSourceBudget << "], got " << opt_.source_budget);
    REFDEC_CHECK(std::isfinite(opt_.recent_rate) && opt_.recent_rate >= 0.0 && opt_.recent_rate <= 1.0,
                 "mixture: recent_rate must be in [0, 1] (0: off), got " << opt_.recent_rate);
    REFDEC_CHECK(std::isfinite(opt_.calibration_half_life) && opt_.calibration_half_life >= 0.0,
                 "mixture: calibration_half_life must be finite and non-negative (0: off), got " << opt_.calibration_half_life);
    REFDEC_CHECK(std::isfinite(opt_.calibration_prior) && opt_.calibration_prior > 0.0,
                 "mixture: calibration_prior must be finite and positive, got " << opt_.calibration_prior);
    REFDEC_CHECK(std::isfinite(opt_.scorer_rate) && opt_.scorer_rate >= 0.0 && opt_.scorer_rate <= 1.0,
                 "mixture: scorer_rate must be in [0, 1] (0: off), got " << opt_.scorer_rate);
    if (opt_.scorer_rate > 0.0) scorer_.emplace(sources_.size(), opt_.scorer_rate);
    calibration_decay_ = opt_.calibration_half_life > 0.0 ? std::exp2(-1.0 / opt_.calibration_half_life) : 1.0;
    std::vector<std::string> names;
    for (const AnyDrafter& s : sources_) names.push_back(s.name());
    stats_->reset(std::move(names), opt_);
    trees_.resize(sources_.size());
    aux_sizes_.assign(sources_.size(), 0);
    match_.assign(sources_.size(), 0);
    reach_.assign(sources_.size(), 0);
    recent_.assign(sources_.size(), 0.0);
  }

  /// The largest MixtureOptions::source_budget accepted.
  static constexpr std::size_t kMaxSourceBudget = 65536;

  /// The settings it was made with, but for a cost replaced since by set_step_cost().
  const MixtureOptions& options() const { return opt_; }
  /// The step cost the budget choice uses from the next propose() on (CostAwareDrafter): a
  /// decoder that times its own steps keeps it current (StepCostTracker). Only the budget choice
  /// changes: what the mixture learned stays.
  void set_step_cost(const StepCost& cost) { opt_.cost = cost; }
  /// "mixture(a+b+...)" from the sources' names.
  std::string name() const {
    std::string n = "mixture(";
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      if (s > 0) n += '+';
      n += sources_[s].name();
    }
    n += ')';
    return n;
  }
  /// What it learned; the handle stays valid, and keeps following this drafter, when it is moved.
  std::shared_ptr<const MixtureStatistics> statistics() const { return stats_; }
  /// The number of draft nodes the last proposal kept.
  std::size_t last_budget() const { return last_budget_; }
  /// The factor by which the last proposal's budget choice scaled the estimated probabilities
  /// (MixtureOptions::calibration_half_life): this sequence's accepted over expected tokens, in
  /// [0, kMaxCalibration]; 1 with calibration off and at a sequence's start.
  double last_calibration() const { return last_calibration_; }
  /// The largest calibration factor: a sequence's lucky streak does not make every node look sure.
  static constexpr double kMaxCalibration = 4.0;

  /// Starts a sequence in every source. What was learned is kept.
  void begin(std::span<const Token> prompt, References references) {
    for (AnyDrafter& s : sources_) s.begin(prompt, references);
    sequence_.assign(prompt.begin(), prompt.end());
    restart();
    std::fill(recent_.begin(), recent_.end(), 0.0);  // recent reach is per sequence
    expected_ = accepted_ = 0.0;                     // so is the calibration
  }

  /// Rewinds every source's sequence to its first `n` tokens (RewindableDrafter, when every
  /// source is). What was learned is kept, this sequence's recent reach and calibration too.
  void truncate(std::size_t n) {
    check_truncation(n, sequence_.size(), "mixture");
    REFDEC_CHECK(can_truncate(), "mixture: a source cannot truncate its sequence; begin() it again with the tokens kept");
    for (AnyDrafter& s : sources_) s.truncate(n);
    sequence_.resize(n);
    restart();
  }
  /// Whether truncate() works: whether every source's does.
  bool can_truncate() const {
    return std::all_of(sources_.begin(), sources_.end(), [](const AnyDrafter& s) { return s.can_truncate(); });
  }
  /// Ends the sequence in every source without publishing (ResettableDrafter).
  void reset() {
    for (AnyDrafter& s : sources_) s.reset();
  }

  /// Writes the merged tree cut to the chosen number of nodes (at most `budget`) into `out`,
  /// scored by estimated probability of acceptance.
  void propose(std::size_t budget, DraftTree& out) {
    try {
      merge_sources(budget);
      score_merged();
    } catch (...) {
      merged_.clear();  // accept() learns from merged_: never from a half-built proposal
      throw;
    }
    // Probabilities best first, for the budget choice; under a flat cost every useful node is kept.
    sorted_.assign(prob_.begin() + 1, prob_.end());
    std::size_t n = 0;
    const bool calibrate = opt_.calibration_half_life > 0.0;
    last_calibration_ = calibrate
                            ? std::clamp((accepted_ + opt_.calibration_prior) / (expected_ + opt_.calibration_prior), 0.0, kMaxCalibration)
                            : 1.0;
    if (opt_.cost.is_flat()) {
      n = std::min<std::size_t>(budget,
                                static_cast<std::size_t>(std::count_if(sorted_.begin(), sorted_.end(), [](float p) { return p > 0.0f; })));
    } else {
      std::sort(sorted_.begin(), sorted_.end(), std::greater<>());
      if (last_calibration_ != 1.0) {  // a monotone map capped at 1: still sorted, still a tree
        const auto r = static_cast<float>(last_calibration_);
        for (float& p : sorted_) p = std::min(1.0f, p * r);
      }
      n = choose_budget(sorted_, opt_.cost, max_auxiliary(), budget);
    }
    merged_.pruned_into(n, out, prune_);
    last_budget_ = n;
    if (calibrate) {
      // The tree whose outcome calibrates: the kept nodes and every depth-1 node of the merged
      // trie. accept() sees the true token at depth 1 whatever was kept (the bonus token when
      // nothing was), so adding the depth-1 nodes gives a signal at budget 0 too: a sequence
      // that stopped being speculated on keeps telling whether its sources' first tokens became
      // right, instead of the ratio drifting back to 1 by decay alone and the budget returning
      // to the over-confident choice every few half-lives to find out. Scaling every node by r
      // is scaling the depth-1 nodes' (their descendants' are products of them), so the depth-1
      // outcomes are what r should follow when nothing deeper is seen.
      cut_ = out;
      step_expected_ = 0.0;
      for (std::int32_t c = merged_.node(0).first_child; c >= 0; c = merged_.node(c).next_sibling)
        step_expected_ += prob_[static_cast<std::size_t>(c)];
      for (std::int32_t i = 1; i <= static_cast<std::int32_t>(cut_.size()); ++i)
        if (cut_.node(i).depth >= 2) step_expected_ += cut_.node(i).score;
    }
    ++stats_->steps_;
    stats_->kept_nodes_ += static_cast<std::int64_t>(n);
  }

  /// The sequence has ended: tells every source (a history or index source stores its output).
  void finish() {
    for (AnyDrafter& s : sources_) s.finish();
  }

  /// Forwards the appended tokens to every source and learns from the last proposal.
  void accept(std::span<const Token> tokens) {
    for (AnyDrafter& s : sources_) s.accept(tokens);
    const std::size_t num_sources = sources_.size();
    // Walk the merged trie along the true continuation: the children of each node on it are
    // observations; the last token is the bonus, so its node was not an accepted draft.
    std::int32_t u = merged_.empty() ? -1 : 0;
    std::fill(reach_.begin(), reach_.end(), 0);
    for (std::size_t j = 0; j < tokens.size() && u >= 0; ++j) {
      std::int32_t next = -1;
      for (std::int32_t c = merged_.node(u).first_child; c >= 0; c = merged_.node(c).next_sibling) {
        const bool ok = merged_.node(c).token == tokens[j];
        if (ok) next = c;
        if (scorer_) scorer_->update(c, ok);
        for (std::size_t s = 0; s < num_sources; ++s) {
          const std::int32_t cell = proposer_[static_cast<std::size_t>(c) * num_sources + s];
          if (cell == kNone) continue;
          stats_->record(s, j + 1, static_cast<std::size_t>(cell), ok);
          if (ok && reach_[s] == j) reach_[s] = j + 1;  // its nodes on the true path, from the root
          if (ok && j + 1 < tokens.size()) ++stats_->sources_[s].accepted_tokens;
        }
      }
      u = next;
    }
    // Each source's reach this step, capped so that one long copy does not dominate the average.
    const double a = opt_.recent_rate > 0.0 ? opt_.recent_rate : kScorerRecentRate;
    for (std::size_t s = 0; s < num_sources; ++s)
      recent_[s] = (1.0 - a) * recent_[s] + a * static_cast<double>(std::min<std::size_t>(reach_[s], MixtureScorer::kReachCap));
    if (opt_.calibration_half_life > 0.0) calibrate(tokens);
    sequence_.insert(sequence_.end(), tokens.begin(), tokens.end());
    last_tokens();
    merged_.clear();  // learn from a proposal once
    stats_->end_step();
  }

  /// This step's auxiliary tokens: every source's block, in source order.
  void auxiliary(AuxBlock& out) {
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      aux_.clear();
      sources_[s].auxiliary(aux_);
      aux_sizes_[s] = static_cast<std::size_t>(aux_.size());
      out.append(aux_);
    }
  }

  /// Hands each source its part of the target's choices at the auxiliary tokens (empty: the
  /// verifier ran none, and each source is told so).
  void observe(std::span<const Token> choices) {
    std::size_t total = 0;
    for (const std::size_t a : aux_sizes_) total += a;
    REFDEC_CHECK(choices.empty() || choices.size() == total,
                 "mixture: got " << choices.size() << " auxiliary choices for " << total << " auxiliary tokens");
    std::size_t at = 0;
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      sources_[s].observe(choices.empty() ? choices : choices.subspan(at, aux_sizes_[s]));
      at += aux_sizes_[s];
    }
  }

  /// The sum of the sources' max_auxiliary().
  std::size_t max_auxiliary() const {
    std::size_t total = 0;
    for (const AnyDrafter& s : sources_) total += s.max_auxiliary();
    return total;
  }

 private:
  static constexpr std::int32_t kNone = -1;

  // Asks every source for its proposal and merges them into merged_, each node's statistics cell
  // per source in proposer_ (and its share and score for the learned scorer).
  void merge_sources(std::size_t budget) {
    const std::size_t num_sources = sources_.size();
    merged_.clear();
    proposer_.assign(num_sources, kNone);  // the root's row
    const std::size_t source_budget = budget == 0 ? 0 : std::max(budget, opt_.source_budget);
    for (std::size_t s = 0; s < num_sources; ++s) {
      DraftTree& tree = trees_[s];
      tree.clear();
      if (source_budget > 0) sources_[s].propose(source_budget, tree);
      match_[s] = opt_.match_context || scorer_ ? sources_[s].last_match() : 0;
      const std::size_t match = opt_.match_context ? match_[s] : 0;
      const double reach = opt_.recent_rate > 0.0 ? recent_[s] : 0.0;
      map_.assign(tree.size() + 1, 0);  // [source nodes] merged index of each
      double root_total = 0.0;
      for (std::int32_t c = tree.node(0).first_child; c >= 0; c = tree.node(c).next_sibling) root_total += tree.node(c).score;
      // Index order visits parents before children.
      for (std::int32_t i = 0; i <= static_cast<std::int32_t>(tree.size()); ++i) {
        const double parent_score = i == 0 ? root_total : static_cast<double>(tree.node(i).score);
        for (std::int32_t c = tree.node(i).first_child; c >= 0; c = tree.node(c).next_sibling) {
          const DraftTree::Node& n = tree.node(c);
          const std::int32_t m = merged_.add_child(map_[static_cast<std::size_t>(i)], n.token);
          map_[static_cast<std::size_t>(c)] = m;
          if (proposer_.size() < (static_cast<std::size_t>(m) + 1) * num_sources)
            proposer_.resize((static_cast<std::size_t>(m) + 1) * num_sources, kNone);
          const double share = parent_score > 0.0 ? n.score / parent_score : 0.0;
          proposer_[static_cast<std::size_t>(m) * num_sources + s] = static_cast<std::int32_t>(
              stats_->cell(s, static_cast<std::size_t>(n.depth), match, reach, share, n.score));
          if (scorer_) scorer_->record_source(static_cast<std::size_t>(m), s, share, n.score);
        }
      }
    }
  }

  // Adds the last proposal's expected and realised accepted tokens to the sequence's decayed sums
  // (MixtureOptions::calibration_half_life). Realised: the true path's length in the kept tree
  // (the accepted drafts, whatever the bonus), or 1 if only an uncut depth-1 node was right.
  void calibrate(std::span<const Token> tokens) {
    if (merged_.empty()) return;  // no proposal since the last accept()
    std::size_t got = 0;
    for (std::int32_t u = 0; got < tokens.size();) {
      const std::int32_t c = cut_.find_child(u, tokens[got]);
      if (c < 0) break;
      u = c;
      ++got;
    }
    if (got == 0 && !tokens.empty() && merged_.find_child(0, tokens[0]) >= 0) got = 1;
    expected_ = calibration_decay_ * expected_ + step_expected_;
    accepted_ = calibration_decay_ * accepted_ + static_cast<double>(got);
    cut_.clear();
  }

  // prob_[i]: estimated probability that merged node i is accepted (root: 1), set as its score.
  void score_merged() {
    const std::size_t num_sources = sources_.size();
    const auto count = static_cast<std::int32_t>(merged_.size() + 1);
    prob_.assign(static_cast<std::size_t>(count), 0.0f);
    prob_[0] = 1.0f;
    cond_.assign(static_cast<std::size_t>(count), 1.0);
    if (scorer_) scorer_->begin_step(static_cast<std::size_t>(count));
    const MixtureScorer::Step step{merged_, proposer_, *stats_, match_, recent_, last_token_, prev_token_};
    for (std::int32_t u = 0; u < count; ++u) {  // parents first, so prob_[u] is final here
      double sum = 0.0;
      double best = 0.0;
      std::size_t siblings = 0;
      for (std::int32_t c = merged_.node(u).first_child; c >= 0; c = merged_.node(c).next_sibling) {
        double miss = 1.0;  // probability that the node is wrong
        for (std::size_t s = 0; s < num_sources; ++s) {
          const std::int32_t cell = proposer_[static_cast<std::size_t>(c) * num_sources + s];
          if (cell == kNone) continue;
          const double m = 1.0 - stats_->cell_estimate(static_cast<std::size_t>(cell));
          miss = opt_.combine == MixtureCombine::max ? std::min(miss, m) : miss * m;
        }
        cond_[static_cast<std::size_t>(c)] = 1.0 - miss;
        sum += 1.0 - miss;
        best = std::max(best, 1.0 - miss);
        ++siblings;
      }
      if (scorer_) {  // the learned scorer's estimate replaces the per-source one
        const MixtureScorer::Siblings sibling{.count = siblings, .sum = sum, .best = best};
        for (std::int32_t c = merged_.node(u).first_child; c >= 0; c = merged_.node(c).next_sibling)
          scorer_->set(step, u, c, cond_[static_cast<std::size_t>(c)], cond_[static_cast<std::size_t>(u)], sibling);
        sum = 0.0;
        for (std::int32_t c = merged_.node(u).first_child; c >= 0; c = merged_.node(c).next_sibling) {
          cond_[static_cast<std::size_t>(c)] = scorer_->predict(c);
          sum += cond_[static_cast<std::size_t>(c)];
        }
      }
      const double scale = sum > 1.0 ? 1.0 / sum : 1.0;  // siblings are exclusive events
      for (std::int32_t c = merged_.node(u).first_child; c >= 0; c = merged_.node(c).next_sibling) {
        const auto p = static_cast<float>(prob_[static_cast<std::size_t>(u)] * cond_[static_cast<std::size_t>(c)] * scale);
        prob_[static_cast<std::size_t>(c)] = p;
        merged_.set_score(c, p);
      }
    }
  }

  // The recent reach's moving average when only the learned scorer uses it (recent_rate 0).
  static constexpr double kScorerRecentRate = 0.3;
  static constexpr Token kNoToken = -1;

  // A proposal starts from sequence_, with nothing pending from an earlier one.
  void restart() {
    last_tokens();
    merged_.clear();
    proposer_.clear();
    cut_.clear();
    step_expected_ = 0.0;
    last_calibration_ = 1.0;
  }
  void last_tokens() {
    const std::size_t n = sequence_.size();
    last_token_ = n == 0 ? kNoToken : sequence_[n - 1];
    prev_token_ = n < 2 ? kNoToken : sequence_[n - 2];
  }

  std::vector<AnyDrafter> sources_;
  std::vector<Token> sequence_;  // prompt and accepted tokens
  MixtureOptions opt_;
  std::shared_ptr<MixtureStatistics> stats_;
  std::vector<DraftTree> trees_;        // [sources] this step's proposals
  DraftTree merged_;                    // this step's merged trie, uncut, until accept()
  DraftTree::PruneScratch prune_;       // scratch of the cut into the proposal
  std::vector<std::int32_t> proposer_;  // [merged nodes + 1, sources] statistics cell, kNone: not proposed
  std::vector<std::size_t> match_;      // [sources] each one's last_match() this step (0 without match_context and the scorer)
  std::vector<std::size_t> reach_;      // [sources] true tokens in a row each proposed at the last step
  std::vector<double> recent_;          // [sources] moving average of reach_ over this sequence's steps
  std::vector<std::int32_t> map_;       // [source nodes + 1] merged index of a source's node
  std::vector<float> prob_;             // [merged nodes + 1] estimated probability of acceptance
  std::vector<double> cond_;            // [merged nodes + 1] the same given the parent's acceptance
  std::vector<float> sorted_;           // [merged nodes] prob_ best first
  std::vector<std::size_t> aux_sizes_;  // [sources] auxiliary tokens each added this step
  AuxBlock aux_;                        // scratch
  std::size_t last_budget_ = 0;
  // Per-sequence calibration (MixtureOptions::calibration_half_life).
  DraftTree cut_;                   // the last proposal as kept, until accept()
  double calibration_decay_ = 1.0;  // per-step factor on the sums below
  double expected_ = 0.0;           // decayed sum of expected accepted tokens (uncalibrated estimates)
  double accepted_ = 0.0;           // decayed sum of the accepted tokens they came to
  double step_expected_ = 0.0;      // the last proposal's expected accepted tokens
  double last_calibration_ = 1.0;
  std::optional<MixtureScorer> scorer_;  // the learned scorer (MixtureOptions::scorer_rate; unset: off)
  Token last_token_ = kNoToken;
  Token prev_token_ = kNoToken;  // the one before last_token_
};

/// A mixture of the given drafters, each taken by value: `make_mixture(LlmaDrafter(),
/// NgramTrieDrafter())`, or with the options first, `make_mixture(options, LlmaDrafter(), ...)`.
/// (A braced list, `MixtureDrafter({LlmaDrafter(), ...})`, cannot build the vector: it copies its
/// elements, and an AnyDrafter cannot be copied.)
template <Drafter... Sources>
requires(sizeof...(Sources) > 0) MixtureDrafter make_mixture(MixtureOptions options, Sources... sources) {
  std::vector<AnyDrafter> all;
  all.reserve(sizeof...(Sources));
  (all.emplace_back(std::move(sources)), ...);
  return MixtureDrafter(std::move(all), std::move(options));
}
/// make_mixture() with the default options.
template <Drafter... Sources>
requires(sizeof...(Sources) > 0) MixtureDrafter make_mixture(Sources... sources) {
  return make_mixture(MixtureOptions{}, std::move(sources)...);
}

static_assert(Drafter<MixtureDrafter>);
static_assert(AuxiliaryDrafter<MixtureDrafter>);
static_assert(CostAwareDrafter<MixtureDrafter>);
static_assert(SequenceEndingDrafter<MixtureDrafter>);
static_assert(RewindableDrafter<MixtureDrafter>);
static_assert(ResettableDrafter<MixtureDrafter>);

REFDEC_NAMESPACE_END
