// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Replay evaluation ("target-guided simulation", LLMA §3.2): under greedy decoding a speculative
// run is determined by the true output, so a drafter can be measured without a model. Per step the
// drafter proposes, the longest draft path equal to the true next tokens is accepted, plus one
// bonus token, and the drafter is told what was accepted.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "refdec/core/batch_budget.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/core/drafter.hpp"

REFDEC_NAMESPACE_BEGIN

/// One decoding run to replay: the model saw `context` and produced `output` greedily.
struct Trace {
  std::string id;                              ///< where it came from (question id and turn, row number, ...)
  std::string category;                        ///< for per-category reports; may be empty
  std::vector<Token> context;                  ///< [context length] the prompt
  std::vector<Token> output;                   ///< [output length] the true greedy output
  std::vector<std::vector<Token>> references;  ///< given to the drafter's begin()
};

/// Settings of a replay.
struct ReplayOptions {
  std::size_t budget = 64;  ///< draft nodes per step after the verifier's cut (0: plain decoding)
  /// Keep every step's draft size and acceptance in ReplayStats::trajectories (a forced
  /// trajectory, LLMA's method: a model benchmark re-runs exactly these steps). Off by default
  /// so that a plain replay allocates nothing for it.
  bool record_steps = false;
};

/// One verification step of a replay.
struct ReplayStep {
  std::int32_t nodes = 0;     ///< draft nodes the verifier ran (the linearised tree, root excluded)
  std::int32_t accepted = 0;  ///< draft tokens accepted (the bonus token excluded)
  /// Output tokens the step produced: accepted + 1, except on a last step whose accepted draft
  /// reaches the end of the output, which has no bonus token (emitted == accepted).
  std::int32_t emitted = 0;
};

/// The steps of one trace's replay (ReplayOptions::record_steps).
struct TrajectoryLog {
  std::string id;                   ///< the trace's id
  std::string category;             ///< the trace's category; may be empty
  std::int64_t context_tokens = 0;  ///< prompt length, where the first step's verification starts
  std::vector<ReplayStep> steps;    ///< [steps] in order; the emitted tokens sum to the output length
};

/// What a replay measured over one or more traces.
struct ReplayStats {
  std::int64_t traces = 0;
  std::int64_t tokens = 0;          ///< output tokens
  std::int64_t steps = 0;           ///< verification steps
  DrafterStats drafting;            ///< proposals and acceptance by draft position
  std::vector<double> step_micros;  ///< [steps] drafter time per step (propose, cut, accept), µs
  /// [traces] each trace's steps, in replay order, with ReplayOptions::record_steps (else empty).
  /// One log per trace rather than one flat list, so that merged statistics keep traces apart.
  std::vector<TrajectoryLog> trajectories;

  /// Mean tokens per step (τ), the bonus token included; 0 before any step.
  double tokens_per_step() const { return steps > 0 ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0; }
  /// The `q`-quantile (0..1, nearest rank) of the per-step drafter time in µs; 0 without steps.
  double step_micros_quantile(double q) const {
    if (step_micros.empty()) return 0.0;
    std::vector<double> sorted = step_micros;
    const auto k = static_cast<std::size_t>(std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1) + 0.5);
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
    return sorted[k];
  }
  /// Adds another replay's statistics to these.
  void merge(const ReplayStats& o) {
    traces += o.traces;
    tokens += o.tokens;
    steps += o.steps;
    drafting.merge(o.drafting);
    step_micros.insert(step_micros.end(), o.step_micros.begin(), o.step_micros.end());
    trajectories.insert(trajectories.end(), o.trajectories.begin(), o.trajectories.end());
  }
};

/// Sees each step of a replay as it happens (replay_trace()'s `observer`): a benchmark that runs
/// some of a replay's steps through a model, or feeds the drafter a step cost it measured, hooks
/// in here instead of repeating the replay loop. The default sees nothing.
struct ReplayObserver {
  /// Before the drafter proposes for the step that starts at output token `pos`.
  void before_step(std::size_t /*pos*/) {}
  /// After the drafter was told what the step appended: `tree` was verified (its num_drafts()
  /// nodes), `accepted` draft tokens were accepted and `emitted` output tokens appended from `pos`.
  void after_step(std::size_t /*pos*/, const LinearTree& /*tree*/, std::size_t /*accepted*/, std::size_t /*emitted*/) {}
};

/// The draft tokens the walk accepts in `tree` when the target's greedy choice at draft depth d is
/// the true token at `output[pos + d]` (past the output's end nothing matches: -1 is never a draft
/// token). `path` is scratch.
inline std::size_t accepted_on_trace(const LinearTree& tree, std::span<const Token> output, std::size_t pos,
                                     std::vector<std::int32_t>& path) {
  auto truth = [&](std::int32_t /*node*/, std::int32_t depth) {
    const std::size_t at = pos + static_cast<std::size_t>(depth);
    return at < output.size() ? output[at] : Token{-1};
  };
  path.resize(static_cast<std::size_t>(tree.size()));
  Token bonus = -1;
  return static_cast<std::size_t>(walk(view(tree), truth, path.data(), bonus));
}

/// Replays one trace with `drafter` (restarted with begin()) and returns its statistics. The
/// last step may accept draft tokens up to the end of the output with no bonus token after them
/// (in a real run the end-of-sequence token would be that bonus; the drafter statistics then count
/// one accepted token fewer, as AnyDrafter counts all but the last appended token as accepted).
/// `observer` (a ReplayObserver or any type with its two methods) sees every step; the drafter
/// time of a step (ReplayStats::step_micros) excludes what the observer does.
template <class Observer = ReplayObserver>
ReplayStats replay_trace(AnyDrafter& drafter, const Trace& trace, const ReplayOptions& options = {}, Observer&& observer = {}) {
  using Clock = std::chrono::steady_clock;
  REFDEC_CHECK(!trace.context.empty(), "replay: trace '" << trace.id << "' has an empty context");
  ReplayStats st;
  st.traces = 1;
  drafter.reset_stats();
  drafter.begin(trace.context, trace.references);
  DraftTree draft;
  LinearTree tree;
  LinearizeScratch cut;
  std::vector<std::int32_t> path;
  TrajectoryLog* log = nullptr;  // only with record_steps, so that the default path skips it
  if (options.record_steps) {
    log = &st.trajectories.emplace_back();
    log->id = trace.id;
    log->category = trace.category;
    log->context_tokens = static_cast<std::int64_t>(trace.context.size());
  }
  const auto& out = trace.output;
  const std::size_t n = out.size();
  std::size_t pos = 0;  // output tokens produced so far
  while (pos < n) {
    const Token root = pos == 0 ? trace.context.back() : out[pos - 1];
    observer.before_step(pos);
    const auto t0 = Clock::now();
    draft.clear();
    drafter.propose(options.budget, draft);
    draft.linearize(root, options.budget, tree, cut);
    const auto t1 = Clock::now();
    drafter.record_proposal(tree);
    const std::size_t accepted = accepted_on_trace(tree, out, pos, path);
    const std::size_t emitted = std::min(accepted + 1, n - pos);
    const auto t2 = Clock::now();
    drafter.accept(std::span<const Token>(out).subspan(pos, emitted));
    const auto t3 = Clock::now();
    st.step_micros.push_back(std::chrono::duration<double, std::micro>((t1 - t0) + (t3 - t2)).count());
    if (log != nullptr)
      log->steps.push_back(
          {.nodes = tree.num_drafts(), .accepted = static_cast<std::int32_t>(accepted), .emitted = static_cast<std::int32_t>(emitted)});
    observer.after_step(pos, tree, accepted, emitted);
    pos += emitted;
    ++st.steps;
  }
  st.tokens = static_cast<std::int64_t>(n);
  st.drafting = drafter.stats();
  return st;
}

/// A replay over many traces: overall and per category (traces with an empty category count
/// only overall). With ReplayOptions::record_steps, overall.trajectories holds every trace's log in
/// input order and each category's stats the logs of its own traces.
struct ReplayReport {
  ReplayStats overall;                             ///< every trace
  std::map<std::string, ReplayStats> by_category;  ///< the traces of each non-empty category
};

/// How well a step's estimated probabilities of acceptance (estimate_acceptance(): what
/// BatchBudget allocates by) match what the walk accepts, per decile of the estimate: an observer
/// for replay_trace(). A node counts as accepted when it lies on the step's accepted path.
/// Estimates of a drafter that is not cost-aware use its statistics as they stand after the step
/// (the step's own outcome included, a one-step lag a long replay does not notice).
class AcceptanceCalibration {
 public:
  static constexpr std::size_t kBins = 10;
  /// Nodes whose estimate fell in [bin / 10, (bin + 1) / 10) (the last bin includes 1), the sum of
  /// their estimates and how many were accepted.
  struct Bin {
    std::int64_t nodes = 0;
    double estimated = 0.0;
    std::int64_t accepted = 0;
  };

  /// Observes `drafter`'s steps over `trace` (rebind with watch() before each trace).
  void watch(const AnyDrafter& drafter, const Trace& trace) { drafter_ = &drafter, trace_ = &trace; }
  void before_step(std::size_t) {}
  void after_step(std::size_t pos, const LinearTree& tree, std::size_t accepted, std::size_t) {
    REFDEC_CHECK(drafter_ != nullptr && trace_ != nullptr, "AcceptanceCalibration: watch() a drafter and a trace first");
    const auto& stats = drafter_->stats();
    estimate_acceptance(tree, drafter_->cost_aware(), stats.proposed_at_depth, stats.accepted_at_depth, estimate_);
    on_path_.assign(static_cast<std::size_t>(tree.size()), 0);
    if (!on_path_.empty()) on_path_[0] = 1;
    const auto& out = trace_->output;
    for (std::size_t i = 1; i < on_path_.size(); ++i) {
      const auto d = static_cast<std::size_t>(tree.depth[i]);
      const bool ok = on_path_[static_cast<std::size_t>(tree.parent[i])] && d <= accepted && pos + d - 1 < out.size() &&
                      tree.tokens[i] == out[pos + d - 1];
      on_path_[i] = ok ? 1 : 0;
      Bin& b = bins_[std::min(kBins - 1, static_cast<std::size_t>(estimate_[i] * static_cast<float>(kBins)))];
      ++b.nodes;
      b.estimated += estimate_[i];
      b.accepted += ok ? 1 : 0;
    }
  }
  const std::array<Bin, kBins>& bins() const { return bins_; }

 private:
  const AnyDrafter* drafter_ = nullptr;
  const Trace* trace_ = nullptr;
  std::array<Bin, kBins> bins_{};
  std::vector<float> estimate_;
  std::vector<std::uint8_t> on_path_;
};

/// Replays every trace with `drafter` (restarted per trace); `calibration`, when given, observes
/// every step.
inline ReplayReport replay(AnyDrafter& drafter, std::span<const Trace> traces, const ReplayOptions& options = {},
                           AcceptanceCalibration* calibration = nullptr) {
  ReplayReport report;
  for (const Trace& t : traces) {
    if (calibration != nullptr) calibration->watch(drafter, t);
    const ReplayStats st = calibration != nullptr ? replay_trace(drafter, t, options, *calibration) : replay_trace(drafter, t, options);
    report.overall.merge(st);
    if (!t.category.empty()) report.by_category[t.category].merge(st);
  }
  return report;
}

/// How a batch replay (replay_batch()) chooses each step's draft nodes.
enum class BatchPolicy {
  kPlain,       ///< none: one row per sequence
  kFixed,       ///< every node each drafter offers, up to the budget
  kPerRequest,  ///< each drafter sizes its own draft under the step cost (its CostAwareDrafter choice)
  kAllocator,   ///< one choice for the whole step (BatchBudget) under the cost of its total rows
};

/// One step's drafting for a batch: each drafter proposes up to `budget` nodes (none under kPlain),
/// its tree is linearised under its root, and under kAllocator one BatchBudget choice cuts the
/// trees under the cost of the step's total rows. Each drafter's proposal is then recorded (what
/// is verified). Scratch reused across steps.
class BatchDrafting {
 public:
  /// Drafts for `drafters` (roots[b]: sequence b's last token) and returns the tokens the
  /// allocator expects the step to yield, bonus tokens included (0 under the other policies).
  double draft(std::span<AnyDrafter> drafters, std::span<const Token> roots, std::size_t budget, BatchPolicy policy, const StepCost& cost) {
    const std::size_t B = drafters.size();
    REFDEC_CHECK(roots.size() == B, "BatchDrafting: " << roots.size() << " roots for " << B << " drafters");
    trees_.resize(B);
    for (std::size_t b = 0; b < B; ++b) {
      draft_.clear();
      if (policy != BatchPolicy::kPlain) drafters[b].propose(budget, draft_);
      draft_.linearize(roots[b], budget, trees_[b], cut_);
    }
    double expected = 0.0;
    if (policy == BatchPolicy::kAllocator) {
      offers_.clear();
      for (std::size_t b = 0; b < B; ++b)
        offers_.push_back(
            {&trees_[b], drafters[b].cost_aware(), drafters[b].stats().proposed_at_depth, drafters[b].stats().accepted_at_depth});
      const double rate = allocator_.cut(offers_, B, cost);
      std::size_t kept = 0;
      for (const std::size_t c : allocator_.counts()) kept += c;
      expected = rate * cost.seconds(B + kept);
    }
    for (std::size_t b = 0; b < B; ++b) drafters[b].record_proposal(trees_[b]);
    return expected;
  }
  /// The step's trees, one per drafter, as verified.
  std::span<const LinearTree> trees() const { return trees_; }

 private:
  DraftTree draft_;
  LinearizeScratch cut_;
  std::vector<LinearTree> trees_;
  std::vector<BudgetOffer> offers_;
  BatchBudget allocator_;
};

/// What a batch replay measured under its cost model.
struct BatchReplayStats {
  std::int64_t steps = 0;           ///< batch steps
  std::int64_t sequence_steps = 0;  ///< steps summed over sequences (a step of B sequences counts B)
  std::int64_t tokens = 0;          ///< output tokens produced
  std::int64_t rows = 0;            ///< rows verified: a root per sequence, and the kept draft nodes
  double seconds = 0.0;             ///< the steps' cost under the model
  /// kAllocator: the tokens BatchBudget expected its choices to yield (bonus tokens included), to
  /// set against `tokens` (what the walk produced on the same steps).
  double expected_tokens = 0.0;
  /// The tokens and seconds of each trace category (Trace::category; "" for none): a step's
  /// seconds shared by its sequences in proportion to their rows (at batch 1, all of them to the
  /// one sequence).
  struct Share {
    std::int64_t tokens = 0;
    double seconds = 0.0;
    double tokens_per_second() const { return seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0; }
  };
  std::map<std::string, Share> by_category;

  /// Output tokens per second of the model's time (per unit of relative cost under a flat cost).
  double tokens_per_second() const { return seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0; }
  /// Mean tokens per sequence per step (τ).
  double tokens_per_sequence_step() const {
    return sequence_steps > 0 ? static_cast<double>(tokens) / static_cast<double>(sequence_steps) : 0.0;
  }
};

/// Replays `traces` as a server decoding `batch` sequences at once would, with no model: `batch`
/// slots, each with a drafter of its own, take the traces in order (a slot whose trace ends begins
/// the next one not yet started, on the same drafter, as a server reuses a slot); per step every
/// slot drafts up to `budget` nodes, `policy` keeps some, each tree is walked against its
/// trace's output, and the step costs `cost` at its total rows plus `overhead` seconds per
/// sequence beyond the first (host work per sequence). The allocator and the per-request drafters
/// are given that same curve (the allocator's at the step's batch size), so what they expected
/// can be set against what the walk produced. With `price`, the steps cost that curve (plus the
/// overhead) instead while the drafts are still chosen by `cost`: a calibration taken when the
/// machine ran at another speed, say, against the curve it runs at now. `drafters.size()` is the batch size (>= 1); they
/// are restarted per trace. Every step runs the full batch: the replay stops when a slot finds no
/// trace left to begin (the tail where a server's batch empties is not a step at this batch size).
inline BatchReplayStats replay_batch(std::span<AnyDrafter> drafters, std::span<const Trace> traces, std::size_t budget, BatchPolicy policy,
                                     const StepCost& cost, double overhead = 0.0, const std::optional<StepCost>& price = std::nullopt) {
  REFDEC_CHECK(!drafters.empty(), "replay_batch: needs at least one drafter (the batch size)");
  REFDEC_CHECK(std::isfinite(overhead) && overhead >= 0.0, "replay_batch: overhead must be finite and >= 0, got " << overhead);
  REFDEC_CHECK(overhead == 0.0 || !cost.is_flat(), "replay_batch: an overhead in seconds needs a cost in seconds, not flat()");
  REFDEC_CHECK(!price || price->is_flat() == cost.is_flat(), "replay_batch: the price and the cost must both be in seconds, or both flat()");
  const std::size_t B = drafters.size();
  REFDEC_CHECK(static_cast<std::size_t>(std::count_if(traces.begin(), traces.end(), [](const Trace& t) { return !t.output.empty(); })) >= B,
               "replay_batch: a batch of " << B << " needs at least as many traces with an output, got " << traces.size());
  struct Slot {
    const Trace* trace = nullptr;
    std::size_t pos = 0;
  };
  std::vector<Slot> slots(B);
  std::size_t next = 0;
  const auto begin_next = [&](std::size_t b) {
    slots[b] = {};
    while (next < traces.size() && traces[next].output.empty()) ++next;
    if (next == traces.size()) return;
    const Trace& t = traces[next++];
    REFDEC_CHECK(!t.context.empty(), "replay: trace '" << t.id << "' has an empty context");
    drafters[b].begin(t.context, t.references);
    slots[b].trace = &t;
  };
  for (std::size_t b = 0; b < B; ++b) begin_next(b);
  for (AnyDrafter& d : drafters) d.set_step_cost(policy == BatchPolicy::kPerRequest ? cost : StepCost::flat());
  BatchReplayStats st;
  BatchDrafting drafting;
  std::vector<Token> roots(B);
  std::vector<std::int32_t> path;
  const double extra = static_cast<double>(B - 1) * overhead;
  const StepCost step_cost = extra > 0.0 ? cost.plus(extra) : cost;
  const StepCost& priced = price ? *price : cost;
  const StepCost step_price = extra > 0.0 ? priced.plus(extra) : priced;
  std::vector<std::pair<const std::string*, std::size_t>> shares(B);  // each sequence's category and rows this step
  while (std::all_of(slots.begin(), slots.end(), [](const Slot& slot) { return slot.trace != nullptr; })) {
    for (std::size_t b = 0; b < B; ++b)
      roots[b] = slots[b].pos == 0 ? slots[b].trace->context.back() : slots[b].trace->output[slots[b].pos - 1];
    st.expected_tokens += drafting.draft(drafters, roots, budget, policy, step_cost);
    std::size_t rows = 0;
    for (std::size_t b = 0; b < B; ++b) {
      Slot& s = slots[b];
      const auto& out = s.trace->output;
      const LinearTree& tree = drafting.trees()[b];
      rows += static_cast<std::size_t>(tree.size());
      shares[b] = {&s.trace->category, static_cast<std::size_t>(tree.size())};
      const std::size_t emitted = std::min(accepted_on_trace(tree, out, s.pos, path) + 1, out.size() - s.pos);
      drafters[b].accept(std::span<const Token>(out).subspan(s.pos, emitted));
      s.pos += emitted;
      st.tokens += static_cast<std::int64_t>(emitted);
      st.by_category[s.trace->category].tokens += static_cast<std::int64_t>(emitted);
      if (s.pos == out.size()) {
        drafters[b].finish();
        begin_next(b);
      }
    }
    ++st.steps;
    st.sequence_steps += static_cast<std::int64_t>(B);
    st.rows += static_cast<std::int64_t>(rows);
    const double seconds = step_price.seconds(rows);
    st.seconds += seconds;
    for (const auto& [category, own] : shares)
      st.by_category[*category].seconds += seconds * static_cast<double>(own) / static_cast<double>(rows);
  }
  return st;
}

REFDEC_NAMESPACE_END
