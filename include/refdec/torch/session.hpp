// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A decoding session with continuous batching: requests join and leave between steps, each with
// its own drafter, sampling settings, stop tokens, token limit and references. One step drafts for
// every active request, plans the step, runs one forward pass over the plan, walks each tree,
// commits the keep plan to the KV store and tells the drafters what was accepted:
//
//   drafters -> trees -> plan_step -> model.forward -> walk -> store.commit(keep) -> drafters
//
// A request's prompt is prefilled by the steps after it joins, in chunks of at most
// GenerateOptions::driver.prefill_chunk tokens, in the same forward passes as the other requests'
// verification (chunked prefill: a long prompt never stalls the batch, and no step's attention
// grows with the square of a whole prompt).

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/verifier.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// One sequence to decode. Each limit it leaves unset is the session's (GenerateOptions::limits).
struct Request {
  std::vector<Token> prompt;                                     ///< at least one token (e.g. BOS)
  std::vector<std::vector<Token>> references;                    ///< given to the drafter's begin()
  std::optional<SamplingOptions> sampling = std::nullopt;        ///< this request's sampling (seed included); unset: the default
  std::optional<std::int64_t> max_new_tokens = std::nullopt;     ///< overrides SequenceLimits::max_new_tokens
  std::optional<std::vector<Token>> stop_tokens = std::nullopt;  ///< overrides SequenceLimits::stop_tokens
  std::optional<std::int64_t> budget = std::nullopt;             ///< overrides SequenceLimits::budget (draft nodes per step)
};

/// Defaults and limits of a Session (and of generate()).
struct GenerateOptions {
  /// Each request's limits (tokens to generate, stop tokens, draft budget; 0 is plain decoding,
  /// auxiliary tokens still run), where the request sets none of its own.
  SequenceLimits limits;
  /// The step driver's settings: prompt tokens a step prefills per request, drafting threads,
  /// the context. Their 0s mean the model's: vocab_size is model.vocab_size() (another value is
  /// refused), max_context (prompt + output at most) its max_seq_len().
  StepDriverOptions driver;
  std::optional<SamplingOptions> sampling;           ///< for requests without their own; unset: greedy decoding
  SamplingPath sampling_path = SamplingPath::kAuto;  ///< where sampled steps process the logits (same output)
  /// A measured step cost (measure_step_cost()) that the session keeps current by timing its own
  /// steps (StepCostTracker): a calibration from another minute mis-sizes drafts when the machine's
  /// memory bandwidth moves. With batch_budget, every step's draft nodes are chosen across the
  /// batch under it (StepDriver::set_batch_cost(), BatchBudget, the curve of the step's batch
  /// size: StepCostTracker::current(batch)), and it is learned from every step that prefills
  /// nothing, at its total rows and batch size. Without, it is given before each step that runs
  /// one sequence to that sequence's CostAwareDrafter (the mixture's adaptive budget) and learned
  /// from such steps only. Unset: drafters keep their own cost.
  std::optional<StepCost> step_cost;
  StepCostTrackerOptions step_cost_tracking;  ///< how fast the learned cost follows the steps
  /// With step_cost: one budget for the whole step, spent where it pays across the batch (each
  /// request's budget is its cap). false: each request's drafter chooses its own.
  bool batch_budget = true;
};

/// What decoding did, summed over sequences: the step driver's counts (tokens, steps, auxiliary
/// and prefill tokens, drafting time and the drafters' statistics) and the model's part.
struct GenerateStats : StepDriverStats {
  std::int64_t forward_passes = 0;  ///< model calls for the whole batch, prefill included
  StepTimes verify;                 ///< plan, model, acceptance and KV commit time (no drafter's)
  double total_seconds = 0;         ///< wall time of the steps (generate(): of the whole call)
};

/// `options` with the model's vocabulary and, where it is 0, its context (max_seq_len()). Throws
/// refdec::ArgumentError, naming `who`, for another vocabulary size or a negative context.
template <class M>
StepDriverOptions model_driver_options(const M& model, StepDriverOptions options, const char* who) {
  REFDEC_CHECK(options.vocab_size == 0 || options.vocab_size == model.vocab_size(),
               who << ": vocab_size " << options.vocab_size << " is not the model's " << model.vocab_size() << " (0 takes the model's)");
  REFDEC_CHECK(options.max_context >= 0, who << ": max_context must be >= 0, got " << options.max_context);
  options.vocab_size = model.vocab_size();
  if (options.max_context == 0) options.max_context = model.max_seq_len();
  return options;
}

/// Not thread-safe: one thread drives a session (run one session per thread; they may share a
/// const model). A decoding session over `model` and a KV store (KvStore) it owns: requests join with add(),
/// step() advances every active request by one verification step, finished requests leave.
/// Whatever the drafters propose, each request's output equals its own plain greedy decoding, and
/// under sampling it is distributed as plain sampling with the same seed (the same tokens, up to
/// rounding differences between batched and single-token forward passes).
template <class M, KvStore S>
requires CausalLM<M, S>
class Session {
 public:
  /// A session with `defaults` for requests that do not set their own. The store must have room
  /// for every request: with the contiguous store, a capacity of max_context plus the largest
  /// drafter's max_auxiliary() (what generate() allocates); a paged store throws when its pool
  /// runs dry.
  Session(const M& model, S store, GenerateOptions defaults = {})
      : model_(&model), store_(std::move(store)), defaults_(std::move(defaults)), driver_(driver_options(model, defaults_)) {
    REFDEC_CHECK(store_.batch() == 0, "Session: the store must start empty, it holds " << store_.batch() << " sequences");
    defaults_.limits.validate("Session defaults");
    if (defaults_.sampling) defaults_.sampling->validate();
    if (defaults_.step_cost) tracker_.emplace(*defaults_.step_cost, defaults_.step_cost_tracking);
  }

  /// Adds a request with a drafter the session owns (default: plain decoding). Checks everything
  /// about the request first (prompt non-empty, shorter than the context, prompt and reference ids
  /// in the vocabulary, limits, sampling settings) and throws refdec::Error without changing the session
  /// when something is wrong. Returns the request's id.
  RequestId add(Request request, AnyDrafter drafter = {}) {
    const SamplingOptions* settings = settings_of(request);
    const RequestId id = driver_.add(request.prompt, request.references, limits_of(request), std::move(drafter));
    joined(request.prompt, settings);
    return id;
  }

  /// Adds a request whose drafter the caller owns and keeps alive until the request has left
  /// (its statistics and learned state stay with the caller: the session adds to them, and never
  /// resets them).
  RequestId add(Request request, AnyDrafter* drafter) {
    REFDEC_CHECK(drafter != nullptr, "Session::add: null drafter");
    const SamplingOptions* settings = settings_of(request);
    const RequestId id = driver_.add(request.prompt, request.references, limits_of(request), drafter);
    joined(request.prompt, settings);
    return id;
  }

  /// Ends request `id` now; it is reported as kCancelled by the next step(). Unknown ids (e.g.
  /// requests that have already left) are ignored and return false.
  bool cancel(RequestId id) {
    const auto slot = driver_.cancel(id);
    if (slot) drop(*slot);
    return slot.has_value();
  }

  /// Number of requests in the session.
  std::int64_t active() const { return static_cast<std::int64_t>(driver_.active()); }
  /// True when step() has nothing left to do or report.
  bool idle() const { return driver_.idle(); }
  /// Tokens request `id` has generated so far (while it is active).
  const std::vector<Token>& output(RequestId id) const { return driver_.output(id); }
  /// What the steps did so far (the driver's counts joined with the model's part).
  const GenerateStats& stats() const {
    static_cast<StepDriverStats&>(stats_) = driver_.stats();
    return stats_;
  }
  const S& store() const { return store_; }
  const M& model() const { return *model_; }
  /// The plan of the last step (for engines and tools that inspect it).
  const StepPlan& last_plan() const { return driver_.plan(); }
  /// The step cost learned so far (GenerateOptions::step_cost); null when the session learns none.
  const StepCostTracker* step_cost_tracker() const { return tracker_ ? &*tracker_ : nullptr; }

  /// Runs one step for every active request and returns what each did: the tokens it appended
  /// and, for requests that left (finished or cancelled), why. Requests that only prefilled in
  /// this step report nothing. The result is valid until the next call.
  const std::vector<RequestUpdate>& step() {
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    const auto t_start = Clock::now();
    const bool batch = tracker_ && defaults_.batch_budget;
    const bool priced = tracker_ && (batch || driver_.active() == 1);  // alone, the cost curve is one sequence's own
    if (batch)
      driver_.set_batch_cost(tracker_->current(std::max<std::size_t>(driver_.active(), 1)));
    else if (priced && driver_.drafter(0).cost_aware())
      driver_.drafter(0).set_step_cost(tracker_->current());
    if (!driver_.prepare()) return driver_.updates();
    const StepPlan& plan = driver_.plan();
    const auto t_verify = Clock::now();
    verify(*model_, store_, plan, verification_, stats_.verify,
           StepExtras{.sampling = sampling_, .prefill = driver_.prefill(), .sampling_path = defaults_.sampling_path});
    const auto t_commit = Clock::now();
    store_.commit(verification_.keep);
    const auto t_accept = Clock::now();
    const auto prefill = driver_.prefill();
    if (priced && std::none_of(prefill.begin(), prefill.end(), [](std::uint8_t p) { return p != 0; }))
      tracker_->observe(static_cast<std::size_t>(plan.rows()), driver_.last_plan_seconds() + seconds(t_verify, t_accept),
                        static_cast<std::size_t>(plan.batch()));
    ++stats_.forward_passes;
    driver_.complete(verification_.accepted, verification_.aux_choices);
    for (const std::size_t slot : driver_.left()) drop(slot);
    for (const RequestUpdate& u : driver_.updates())
      if (!u.finished && !u.tokens.empty()) {
        auto& sampling = sampling_[driver_.slot(u.id)];
        if (sampling) sampling->add_output(u.tokens);
      }
    const auto t_end = Clock::now();
    stats_.verify.plan += driver_.last_plan_seconds();
    stats_.verify.commit += seconds(t_commit, t_accept);
    stats_.verify.accept += seconds(t_accept, t_end) - driver_.last_drafter_seconds();
    stats_.total_seconds += seconds(t_start, t_end);
    return driver_.updates();
  }

 private:
  static StepDriverOptions driver_options(const M& model, const GenerateOptions& defaults) {
    return model_driver_options(model, defaults.driver, "Session");
  }

  SequenceLimits limits_of(const Request& request) const {
    return {.max_new_tokens = request.max_new_tokens.value_or(defaults_.limits.max_new_tokens),
            .stop_tokens = request.stop_tokens.value_or(defaults_.limits.stop_tokens),
            .budget = request.budget.value_or(defaults_.limits.budget)};
  }

  // The request's sampling settings (null: greedy), checked before the driver takes the request.
  const SamplingOptions* settings_of(const Request& request) const {
    const auto& settings = request.sampling ? request.sampling : defaults_.sampling;
    if (settings) settings->validate();
    return settings ? &*settings : nullptr;
  }

  // A request joined the driver (which checked its prompt): its KV slot and sampling state, unless
  // it left at once (nothing to generate).
  void joined(const std::vector<Token>& prompt, const SamplingOptions* settings) {
    if (driver_.active() == sampling_.size()) return;
    std::optional<SequenceSampling> sampling;
    if (settings) {
      sampling.emplace(SequenceSampling{LogitsProcessor(*settings), TokenCounts(static_cast<std::int32_t>(model_->vocab_size())), 0, {}});
      sampling->counts.add_prompt(prompt);
      const bool tensor_path = defaults_.sampling_path == SamplingPath::kTensor ||
                               (defaults_.sampling_path == SamplingPath::kAuto && model_->device().is_cuda());
      if (tensor_path && settings->has_penalties()) sampling->device_counts = DeviceTokenCounts::from(sampling->counts, model_->device());
    }
    store_.add();
    sampling_.push_back(std::move(sampling));
  }

  // The sequence in `slot` has left the driver: its KV entries and sampling state go.
  void drop(std::size_t slot) {
    store_.remove(static_cast<std::int64_t>(slot));
    sampling_.erase(sampling_.begin() + static_cast<std::ptrdiff_t>(slot));
  }

  const M* model_;
  S store_;
  GenerateOptions defaults_;
  StepDriver driver_;
  std::vector<std::optional<SequenceSampling>> sampling_;  // [B] in the driver's slot order; unset: greedy
  mutable GenerateStats stats_;                            // the model's part; the driver's counts join it in stats()
  Verification verification_;
  std::optional<StepCostTracker> tracker_;  // with GenerateOptions::step_cost
};

REFDEC_TORCH_NAMESPACE_END
