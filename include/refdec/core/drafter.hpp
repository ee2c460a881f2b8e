// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The drafter interface: a C++20 concept, per-drafter statistics, and a type-erased wrapper that
// records those statistics for any drafter chosen at run time.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/references.hpp"
#include "refdec/core/step_cost.hpp"

REFDEC_NAMESPACE_BEGIN

/// A drafter proposes continuations of one sequence. Its life:
/// - `begin(prompt, references)`: a new sequence; `references` are token sequences it may draw from
///   (a view of the engine's buffers: read during begin() only, what the drafter keeps it copies).
/// - `propose(budget, out)`: add candidate continuations of the current sequence (prompt plus every
///   accepted token so far) to `out`, at most `budget` nodes; `out` arrives empty.
/// - `accept(tokens)`: the tokens the step appended (accepted draft tokens, then the bonus token).
/// - `name()`: a short name for reports.
/// - `finish()`, optional (SequenceEndingDrafter): the sequence has ended (a stop token, a limit,
///   a cancellation); called once, after its last accept() and before the next begin(). The only
///   call that publishes a sequence's output (to a shared index or history); errors are thrown.
/// - `truncate(n)`, optional (RewindableDrafter): between steps, the sequence becomes its first n
///   tokens (a context shift, a prompt cache reused).
/// - `reset()`, optional (ResettableDrafter): the sequence ends without publishing anything.
template <class D>
concept Drafter = requires(D& d, std::span<const Token> tokens, References references, std::size_t budget, DraftTree& out) {
  d.begin(tokens, references);
  d.propose(budget, out);
  d.accept(tokens);
  { d.name() } -> std::convertible_to<std::string>;
};

/// A drafter that also runs tokens of its own through the verifier's forward pass (an AuxBlock,
/// e.g. the lookahead drafter's Jacobi window). Per step, after `propose()`:
/// - `auxiliary(out)`: add this step's auxiliary tokens to `out` (arrives empty);
/// - `observe(choices)`: the target's greedy choice at each of them (empty when the verifier ran
///   no auxiliary tokens this step), before `accept()`;
/// - `max_auxiliary()`: the most auxiliary tokens it will ever add in one step (sizes the cache).
template <class D>
concept AuxiliaryDrafter = Drafter<D> && requires(D& d, const D& cd, AuxBlock& out, std::span<const Token> choices) {
  d.auxiliary(out);
  d.observe(choices);
  { cd.max_auxiliary() } -> std::convertible_to<std::size_t>;
};

/// A drafter that says how long a suffix of the sequence its last proposal was conditioned on:
/// `last_match()` after `propose()` is that length in tokens (the longest suffix found in its
/// references, datastore or trie), 0 when it proposed nothing. A mixture learns how far to trust
/// a proposal by it: a copy after a 12-token match is right far more often than after 1.
template <class D>
concept MatchReportingDrafter = Drafter<D> && requires(const D& cd) {
  { cd.last_match() } -> std::convertible_to<std::size_t>;
};

/// A drafter that sizes its own drafts by the cost of a step (e.g. the mixture's adaptive budget):
/// `set_step_cost(cost)` replaces the cost it weighs drafts against from the next `propose()` on,
/// so that a decoder that times its steps (StepCostTracker) can keep it current.
template <class D>
concept CostAwareDrafter = Drafter<D> && requires(D& d, const StepCost& cost) {
  d.set_step_cost(cost);
};

/// Whether `d` sizes its drafts by a step cost: a drafter that wraps another (HistoryDrafter, AnyDrafter)
/// has set_step_cost() whatever it wraps and answers at run time with `cost_aware()`; for the
/// others, whether they are a CostAwareDrafter.
template <Drafter D>
bool is_cost_aware(const D& d) {
  if constexpr (requires {
                  { d.cost_aware() } -> std::convertible_to<bool>;
                })
    return d.cost_aware();
  else
    return CostAwareDrafter<D>;
}

/// A drafter that acts when its sequence ends: `finish()` (e.g. HistoryDrafter adds the output to
/// its shared history then, not at the next begin()).
template <class D>
concept SequenceEndingDrafter = Drafter<D> && requires(D& d) {
  d.finish();
};

/// A drafter whose sequence can be rewound: `truncate(n)`, between steps, makes the sequence its
/// first n tokens (n at most its length; ArgumentError beyond). What it learned from the tokens
/// dropped (n-grams pooled, a trie grown, a mixture's estimates) may stay, as references would.
template <class D>
concept RewindableDrafter = Drafter<D> && requires(D& d, std::size_t n) {
  d.truncate(n);
};

/// A drafter that publishes its sequence's output at finish(): `reset()` ends the sequence
/// without publishing (an aborted request whose output should not be drafted from).
template <class D>
concept ResettableDrafter = Drafter<D> && requires(D& d) {
  d.reset();
};

/// Refuses a truncation to `n` tokens of a sequence of `length`: one message for every drafter.
inline void check_truncation(std::size_t n, std::size_t length, const char* drafter) {
  REFDEC_CHECK(n <= length, drafter << ": cannot truncate a sequence of " << length << " tokens to " << n);
}

/// What a drafter did over a run; AnyDrafter keeps one per drafter.
struct DrafterStats {
  std::int64_t steps = 0;                       // propose() calls
  std::int64_t proposals = 0;                   // propose() calls that returned at least one node
  std::int64_t proposed_tokens = 0;             // draft nodes returned, summed over steps
  std::int64_t accepted_tokens = 0;             // draft tokens accepted (bonus tokens excluded)
  std::vector<std::int64_t> proposed_at_depth;  // [max depth] steps whose draft reached depth d+1
  std::vector<std::int64_t> accepted_at_depth;  // [max depth] steps that accepted depth d+1
  double propose_seconds = 0;                   // wall time in propose()
  double accept_seconds = 0;                    // wall time in begin(), accept(), observe() and finish()

  /// Acceptance rate at draft depth `d + 1`, given that the draft reached it (0 when it never did).
  double acceptance_at(std::size_t d) const {
    if (d >= proposed_at_depth.size() || proposed_at_depth[d] == 0) return 0.0;
    return static_cast<double>(accepted_at_depth[d]) / static_cast<double>(proposed_at_depth[d]);
  }
  /// Records one proposal of `num_nodes` draft nodes whose deepest node is at `max_depth`.
  void record_proposal(std::int64_t num_nodes, std::int64_t max_depth) {
    ++steps;
    if (num_nodes > 0) ++proposals;
    proposed_tokens += num_nodes;
    grow(max_depth);
    for (std::int64_t d = 0; d < max_depth; ++d) ++proposed_at_depth[static_cast<std::size_t>(d)];
  }
  /// Records that the step accepted `num_accepted` draft tokens.
  void record_acceptance(std::int64_t num_accepted) {
    accepted_tokens += num_accepted;
    grow(num_accepted);
    for (std::int64_t d = 0; d < num_accepted; ++d) ++accepted_at_depth[static_cast<std::size_t>(d)];
  }
  /// Adds another run's statistics to these.
  void merge(const DrafterStats& o) {
    steps += o.steps;
    proposals += o.proposals;
    proposed_tokens += o.proposed_tokens;
    accepted_tokens += o.accepted_tokens;
    grow(static_cast<std::int64_t>(o.proposed_at_depth.size()));
    grow(static_cast<std::int64_t>(o.accepted_at_depth.size()));
    for (std::size_t d = 0; d < o.proposed_at_depth.size(); ++d) proposed_at_depth[d] += o.proposed_at_depth[d];
    for (std::size_t d = 0; d < o.accepted_at_depth.size(); ++d) accepted_at_depth[d] += o.accepted_at_depth[d];
    propose_seconds += o.propose_seconds;
    accept_seconds += o.accept_seconds;
  }
  /// What was recorded after `before`, an earlier copy of these statistics (a caller-owned
  /// drafter's statistics over one request).
  DrafterStats since(const DrafterStats& before) const {
    DrafterStats d = *this;
    d.steps -= before.steps;
    d.proposals -= before.proposals;
    d.proposed_tokens -= before.proposed_tokens;
    d.accepted_tokens -= before.accepted_tokens;
    for (std::size_t i = 0; i < before.proposed_at_depth.size() && i < d.proposed_at_depth.size(); ++i)
      d.proposed_at_depth[i] -= before.proposed_at_depth[i];
    for (std::size_t i = 0; i < before.accepted_at_depth.size() && i < d.accepted_at_depth.size(); ++i)
      d.accepted_at_depth[i] -= before.accepted_at_depth[i];
    d.propose_seconds -= before.propose_seconds;
    d.accept_seconds -= before.accept_seconds;
    return d;
  }

 private:
  void grow(std::int64_t depth) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(depth, 0));
    if (proposed_at_depth.size() < n) proposed_at_depth.resize(n, 0);
    if (accepted_at_depth.size() < n) accepted_at_depth.resize(n, 0);
  }
};

/// A drafter that never proposes anything: plain decoding.
class NoDrafter {
 public:
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t, DraftTree&) {}
  void accept(std::span<const Token>) {}
  void truncate(std::size_t) {}
  std::string name() const { return "none"; }
};

/// Holds any Drafter behind one type (for a drafter chosen at run time) and records its
/// DrafterStats: sizes and depths of the proposals, accepted counts, time spent. Drafters follow
/// one sequence and mutate on every call: one per sequence and thread (what they read, such as a
/// Datastore, may be shared).
class AnyDrafter {
 public:
  AnyDrafter() : AnyDrafter(NoDrafter{}) {}
  template <Drafter D>
  requires(!std::same_as<std::remove_cvref_t<D>, AnyDrafter>) AnyDrafter(D drafter)
      : impl_(std::make_unique<Model<D>>(std::move(drafter))) {}  // NOLINT: implicit on purpose

  void begin(std::span<const Token> prompt, References references) {
    const auto t0 = Clock::now();
    impl_->begin(prompt, references);
    stats_.accept_seconds += seconds_since(t0);
  }
  void propose(std::size_t budget, DraftTree& out) {
    const auto t0 = Clock::now();
    impl_->propose(budget, out);
    stats_.propose_seconds += seconds_since(t0);
  }
  /// Records the proposal as the verifier will use it (after its budget cut).
  void record_proposal(const LinearTree& tree) { stats_.record_proposal(tree.num_drafts(), tree.max_depth()); }
  /// Passes the step's appended tokens to the drafter and records how many drafts were accepted
  /// (all but the bonus token). An empty span is ignored: nothing was appended, so the drafter is
  /// not called and nothing is recorded (a step always appends at least its bonus token).
  void accept(std::span<const Token> tokens) {
    if (tokens.empty()) return;
    const auto t0 = Clock::now();
    impl_->accept(tokens);
    stats_.accept_seconds += seconds_since(t0);
    stats_.record_acceptance(static_cast<std::int64_t>(tokens.size()) - 1);
  }
  /// The sequence has ended: tells a SequenceEndingDrafter (others have nothing to do).
  void finish() {
    const auto t0 = Clock::now();
    impl_->finish();
    stats_.accept_seconds += seconds_since(t0);
  }
  /// Rewinds the sequence to its first `n` tokens (RewindableDrafter); ArgumentError for a drafter
  /// that cannot (begin() it again with the tokens kept).
  void truncate(std::size_t n) {
    const auto t0 = Clock::now();
    impl_->truncate(n);
    stats_.accept_seconds += seconds_since(t0);
  }
  /// Whether truncate() works for this drafter.
  bool can_truncate() const { return impl_->can_truncate(); }
  /// Ends the sequence without publishing its output (ResettableDrafter; nothing to do for others).
  void reset() { impl_->reset(); }
  /// This step's auxiliary tokens (none for a drafter that is not an AuxiliaryDrafter).
  void auxiliary(AuxBlock& out) {
    const auto t0 = Clock::now();
    impl_->auxiliary(out);
    stats_.propose_seconds += seconds_since(t0);
  }
  /// The target's greedy choices at this step's auxiliary tokens.
  void observe(std::span<const Token> choices) {
    const auto t0 = Clock::now();
    impl_->observe(choices);
    stats_.accept_seconds += seconds_since(t0);
  }
  /// The most auxiliary tokens one step may carry (0 for a drafter without them).
  std::size_t max_auxiliary() const { return impl_->max_auxiliary(); }
  /// The match length of the last proposal (MatchReportingDrafter; 0 for a drafter that reports none).
  std::size_t last_match() const { return impl_->last_match(); }
  /// Gives a CostAwareDrafter the step cost to size its drafts by; ignored by other drafters.
  void set_step_cost(const StepCost& cost) { impl_->set_step_cost(cost); }
  /// Whether the drafter sizes its drafts by a step cost (is_cost_aware()).
  bool cost_aware() const { return impl_->cost_aware(); }
  std::string name() const { return impl_->name(); }
  const DrafterStats& stats() const { return stats_; }
  void reset_stats() { stats_ = DrafterStats{}; }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
  struct Concept {
    virtual ~Concept() = default;
    virtual void begin(std::span<const Token>, References) = 0;
    virtual void propose(std::size_t, DraftTree&) = 0;
    virtual void accept(std::span<const Token>) = 0;
    virtual void finish() = 0;
    virtual void truncate(std::size_t) = 0;
    virtual bool can_truncate() const = 0;
    virtual void reset() = 0;
    virtual void auxiliary(AuxBlock&) = 0;
    virtual void observe(std::span<const Token>) = 0;
    virtual std::size_t max_auxiliary() const = 0;
    virtual std::size_t last_match() const = 0;
    virtual void set_step_cost(const StepCost&) = 0;
    virtual bool cost_aware() const = 0;
    virtual std::string name() const = 0;
  };
  template <class D>
  struct Model final : Concept {
    explicit Model(D d) : drafter(std::move(d)) {}
    void begin(std::span<const Token> p, References r) override { drafter.begin(p, r); }
    void propose(std::size_t b, DraftTree& out) override { drafter.propose(b, out); }
    void accept(std::span<const Token> t) override { drafter.accept(t); }
    void finish() override {
      if constexpr (SequenceEndingDrafter<D>) drafter.finish();
    }
    void truncate(std::size_t n) override {
      if constexpr (RewindableDrafter<D>)
        drafter.truncate(n);
      else
        throw ArgumentError(drafter.name() + ": cannot truncate its sequence; begin() it again with the tokens kept");
    }
    bool can_truncate() const override {
      if constexpr (requires { drafter.can_truncate(); })
        return drafter.can_truncate();
      else
        return RewindableDrafter<D>;
    }
    void reset() override {
      if constexpr (ResettableDrafter<D>) drafter.reset();
    }
    void auxiliary(AuxBlock& out) override {
      if constexpr (AuxiliaryDrafter<D>) drafter.auxiliary(out);
    }
    void observe(std::span<const Token> choices) override {
      if constexpr (AuxiliaryDrafter<D>) drafter.observe(choices);
    }
    std::size_t max_auxiliary() const override {
      if constexpr (AuxiliaryDrafter<D>)
        return drafter.max_auxiliary();
      else
        return 0;
    }
    std::size_t last_match() const override {
      if constexpr (MatchReportingDrafter<D>)
        return drafter.last_match();
      else
        return 0;
    }
    void set_step_cost(const StepCost& cost) override {
      if constexpr (CostAwareDrafter<D>) drafter.set_step_cost(cost);
    }
    bool cost_aware() const override { return is_cost_aware(drafter); }
    std::string name() const override { return drafter.name(); }
    D drafter;
  };
  std::unique_ptr<Concept> impl_;
  DrafterStats stats_;
};

static_assert(Drafter<NoDrafter>);
static_assert(Drafter<AnyDrafter>);
static_assert(AuxiliaryDrafter<AnyDrafter>);
static_assert(MatchReportingDrafter<AnyDrafter>);
static_assert(CostAwareDrafter<AnyDrafter>);
static_assert(SequenceEndingDrafter<AnyDrafter>);
static_assert(RewindableDrafter<AnyDrafter>);
static_assert(ResettableDrafter<AnyDrafter>);

REFDEC_NAMESPACE_END
