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
// GenerateOptions::prefill_chunk tokens, in the same forward passes as the other requests'
// verification (chunked prefill: a long prompt never stalls the batch, and no step's attention
// grows with the square of a whole prompt).

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/drafters/draft_step.hpp"
#include "refdec/drafters/drafter.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/verifier.hpp"

REFDEC_NAMESPACE_BEGIN

/// One sequence to decode. Unset limits take the session's defaults (GenerateOptions).
struct Request {
  std::vector<Token> prompt;                    ///< at least one token (e.g. BOS)
  std::vector<std::vector<Token>> references;   ///< given to the drafter's begin()
  std::optional<SamplingOptions> sampling = std::nullopt;  ///< this request's sampling (seed included); unset: the default
  std::optional<std::int64_t> max_new_tokens = std::nullopt;  ///< unset: GenerateOptions::max_new_tokens
  std::optional<std::vector<Token>> stop_tokens = std::nullopt;  ///< unset: GenerateOptions::stop_tokens
  std::optional<std::int64_t> budget = std::nullopt;  ///< draft nodes per step; unset: GenerateOptions::budget
};

/// Defaults and limits of a Session (and of generate()).
struct GenerateOptions {
  std::int64_t max_new_tokens = 256;  ///< tokens to generate at most per sequence
  std::int64_t budget = 16;           ///< draft nodes verified per step; 0 is plain decoding (auxiliary tokens still run)
  std::vector<Token> stop_tokens;     ///< generation stops before any of these (not emitted)
  std::int64_t max_context = 0;       ///< prompt + output at most; 0 means the model's max_seq_len()
  std::optional<SamplingOptions> sampling;  ///< for requests without their own; unset: greedy decoding
  SamplingPath sampling_path = SamplingPath::kAuto;  ///< where sampled steps process the logits (same output)
  std::int64_t prefill_chunk = 512;  ///< prompt tokens a step prefills per request at most; 0: the whole prompt at once
  /// A measured step cost (measure_step_cost()) that the session keeps current by timing its own
  /// steps (StepCostTracker) and gives, before each step, to every CostAwareDrafter (the mixture's
  /// adaptive budget): a calibration from another minute mis-sizes drafts when the machine's
  /// memory bandwidth moves. Learned from and given at steps that run one sequence only (a step of
  /// several is priced by all of their tokens, which one sequence's budget choice cannot see).
  /// Unset: drafters keep their own cost.
  std::optional<StepCost> step_cost;
  StepCostTrackerOptions step_cost_tracking;  ///< how fast the learned cost follows the steps
};

/// Why a sequence stopped.
enum class FinishReason {
  kStopToken,     ///< it produced a stop token (not emitted)
  kMaxNewTokens,  ///< it reached its token limit
  kMaxContext,    ///< prompt + output filled the context
  kCancelled,     ///< Session::cancel()
};

/// What decoding did, summed over sequences.
struct GenerateStats {
  std::int64_t tokens = 0;         ///< generated tokens
  std::int64_t steps = 0;          ///< verification steps, counted per sequence (prefill excluded)
  std::int64_t forward_passes = 0; ///< model calls for the whole batch, prefill included
  std::int64_t auxiliary_tokens = 0; ///< auxiliary tokens (e.g. lookahead windows) run, summed over steps
  std::int64_t prefill_tokens = 0; ///< prompt tokens run as prefill rows
  double draft_seconds = 0;        ///< propose() and the budget cut
  StepTimes verify;                ///< plan, model, acceptance and KV commit time
  double total_seconds = 0;        ///< wall time of the steps (generate(): of the whole call)
  DrafterStats drafting;           ///< the statistics of the drafters of requests that have left: acceptance by position

  /// Mean tokens per step (τ), the bonus token included; 0 before any step.
  double tokens_per_step() const { return steps > 0 ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0; }
};

/// Identifies a request inside its Session.
using RequestId = std::int64_t;

/// What one step did for one request.
struct RequestUpdate {
  RequestId id = -1;
  std::vector<Token> tokens;            ///< tokens appended by this step (stop token excluded)
  std::optional<FinishReason> finished;  ///< set when the request has left the session
};

/// Not thread-safe: one thread drives a session (run one session per thread; they may share a
/// const model). A decoding session over `model` and a KV store (KvStore) it owns: requests join with add(),
/// step() advances every active request by one verification step, finished requests leave.
/// Whatever the drafters propose, each request's output equals its own plain greedy decoding, and
/// under sampling it is distributed as plain sampling with the same seed (the same tokens, up to
/// rounding differences between batched and single-token forward passes).
template <CausalLM M, KvStore S>
class Session {
 public:
  /// A session with `defaults` for requests that do not set their own. The store must have room
  /// for every request: with the contiguous store, a capacity of max_context plus the largest
  /// drafter's max_auxiliary() (what generate() allocates); a paged store throws when its pool
  /// runs dry.
  Session(const M& model, S store, GenerateOptions defaults = {})
      : model_(&model), store_(std::move(store)), defaults_(std::move(defaults)) {
    REFDEC_CHECK(store_.batch() == 0, "Session: the store must start empty, it holds " << store_.batch() << " sequences");
    REFDEC_CHECK(defaults_.max_context >= 0, "Session: max_context must be >= 0, got " << defaults_.max_context);
    max_context_ = defaults_.max_context > 0 ? defaults_.max_context : model.max_seq_len();
    check_limits(defaults_.max_new_tokens, defaults_.budget, "Session defaults");
    REFDEC_CHECK(defaults_.prefill_chunk >= 0, "Session: prefill_chunk must be >= 0, got " << defaults_.prefill_chunk);
    if (defaults_.sampling) defaults_.sampling->validate();
    if (defaults_.step_cost) tracker_.emplace(*defaults_.step_cost, defaults_.step_cost_tracking);
  }

  /// Adds a request with a drafter the session owns (default: plain decoding). Checks everything
  /// about the request first (prompt non-empty, shorter than the context, prompt and reference ids
  /// in the vocabulary, limits, sampling settings) and throws refdec::Error without changing the session
  /// when something is wrong. Returns the request's id.
  RequestId add(Request request, AnyDrafter drafter = {}) {
    auto owned = std::make_unique<AnyDrafter>(std::move(drafter));
    AnyDrafter* borrowed = owned.get();
    return add(std::move(request), borrowed, std::move(owned));
  }

  /// Adds a request whose drafter the caller owns and keeps alive until the request has left
  /// (its statistics and learned state stay with the caller).
  RequestId add(Request request, AnyDrafter* drafter) {
    REFDEC_CHECK(drafter != nullptr, "Session::add: null drafter");
    return add(std::move(request), drafter, nullptr);
  }

  /// Ends request `id` now; it is reported as kCancelled by the next step(). Unknown ids (e.g.
  /// requests that have already left) are ignored and return false.
  bool cancel(RequestId id) {
    for (std::size_t i = 0; i < active_.size(); ++i)
      if (active_[i].id == id) {
        finished_.push_back({id, {}, FinishReason::kCancelled});
        leave(i);
        return true;
      }
    return false;
  }

  /// Number of requests in the session.
  std::int64_t active() const { return static_cast<std::int64_t>(active_.size()); }
  /// True when step() has nothing left to do or report.
  bool idle() const { return active_.empty() && finished_.empty(); }
  /// Tokens request `id` has generated so far (while it is active).
  const std::vector<Token>& output(RequestId id) const { return find(id).output; }
  const GenerateStats& stats() const { return stats_; }
  const S& store() const { return store_; }
  const M& model() const { return *model_; }
  /// The plan of the last step (for engines and tools that inspect it).
  const StepPlan& last_plan() const { return plan_; }
  /// The step cost learned so far (GenerateOptions::step_cost); null when the session learns none.
  const StepCostTracker* step_cost_tracker() const { return tracker_ ? &*tracker_ : nullptr; }

  /// Runs one step for every active request and returns what each did: the tokens it appended
  /// and, for requests that left (finished or cancelled), why. Requests that only prefilled in
  /// this step report nothing. The result is valid until the next call.
  const std::vector<RequestUpdate>& step() {
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    updates_.clear();
    std::swap(updates_, finished_);  // requests that left between steps
    if (active_.empty()) return updates_;
    const auto t_start = Clock::now();
    const std::size_t B = active_.size();
    trees_.resize(B);
    aux_.resize(B);
    prefill_.assign(B, 0);
    bool any_aux = false;
    const bool priced = tracker_ && B == 1;  // one sequence: the cost curve is its own
    if (priced && active_[0].drafter->cost_aware()) active_[0].drafter->set_step_cost(tracker_->current());
    for (std::size_t i = 0; i < B; ++i) {
      Active& r = active_[i];
      aux_[i].clear();
      if (r.prefilled + 1 < r.prompt.size()) {  // the next chunk of the prompt but its last token
        const std::size_t left = r.prompt.size() - 1 - r.prefilled;
        const std::size_t chunk = defaults_.prefill_chunk > 0 ? std::min(left, static_cast<std::size_t>(defaults_.prefill_chunk)) : left;
        trees_[i] = LinearTree::chain(std::span<const Token>(r.prompt).subspan(r.prefilled, chunk));
        prefill_[i] = 1;
        stats_.prefill_tokens += trees_[i].size();
        continue;
      }
      draft(r, trees_[i], aux_[i]);
      any_aux = any_aux || !aux_[i].empty();
    }
    const auto t_plan = Clock::now();
    plan_step(trees_, any_aux ? std::span<const AuxBlock>(aux_) : std::span<const AuxBlock>{}, store_.lengths(),
              model_->vocab_size(), plan_);
    const auto t_verify = Clock::now();
    verify(*model_, store_, plan_, verification_, stats_.verify,
           StepExtras{.sampling = sampling_, .prefill = prefill_, .sampling_path = defaults_.sampling_path});
    const auto t_commit = Clock::now();
    store_.commit(verification_.keep);
    const auto t_accept = Clock::now();
    if (priced && !prefill_[0]) tracker_->observe(static_cast<std::size_t>(plan_.rows()), seconds(t_plan, t_accept));
    ++stats_.forward_passes;

    std::vector<std::size_t> leaving;
    for (std::size_t i = 0; i < B; ++i) {
      Active& r = active_[i];
      if (prefill_[i]) {
        r.prefilled += static_cast<std::size_t>(trees_[i].size());
        continue;
      }
      // AuxiliaryDrafter's contract: observe() after every step, with no choices when the window
      // sat the step out.
      if (r.drafter->max_auxiliary() > 0) r.drafter->observe(verification_.aux_choices[i]);
      ++stats_.steps;
      RequestUpdate& u = updates_.emplace_back();
      u.id = r.id;
      for (const Token t : verification_.accepted[i].tokens) {
        if (std::find(r.stop_tokens.begin(), r.stop_tokens.end(), t) != r.stop_tokens.end()) {
          u.finished = FinishReason::kStopToken;
          break;
        }
        u.tokens.push_back(t);
        if (static_cast<std::int64_t>(r.output.size() + u.tokens.size()) >= r.max_new_tokens) {
          u.finished = FinishReason::kMaxNewTokens;
          break;
        }
        if (static_cast<std::int64_t>(r.prompt.size() + r.output.size() + u.tokens.size()) >= max_context_) {
          u.finished = FinishReason::kMaxContext;
          break;
        }
      }
      stats_.tokens += static_cast<std::int64_t>(u.tokens.size());
      r.output.insert(r.output.end(), u.tokens.begin(), u.tokens.end());
      if (!u.tokens.empty()) {
        if (sampling_[i]) sampling_[i]->add_output(u.tokens);
        r.drafter->accept(u.tokens);
      }
      if (u.finished) leaving.push_back(i);
    }
    for (auto it = leaving.rbegin(); it != leaving.rend(); ++it) leave(*it);
    const auto t_end = Clock::now();
    stats_.draft_seconds += seconds(t_start, t_plan);
    stats_.verify.plan += seconds(t_plan, t_verify);
    stats_.verify.commit += seconds(t_commit, t_accept);
    stats_.verify.accept += seconds(t_accept, t_end);
    stats_.total_seconds += seconds(t_start, t_end);
    return updates_;
  }

 private:
  struct Active {
    RequestId id = -1;
    std::vector<Token> prompt;
    std::vector<Token> output;
    std::vector<Token> stop_tokens;
    std::int64_t max_new_tokens = 0;
    std::int64_t budget = 0;
    std::size_t prefilled = 0;  // prompt tokens cached; the last one is the first step's root
    AnyDrafter* drafter = nullptr;
    std::unique_ptr<AnyDrafter> owned;  // set when the session owns the drafter
  };

  static void check_limits(std::int64_t max_new_tokens, std::int64_t budget, const char* who) {
    REFDEC_CHECK(max_new_tokens >= 0, who << ": max_new_tokens must be >= 0, got " << max_new_tokens);
    REFDEC_CHECK(budget >= 0, who << ": budget must be >= 0, got " << budget);
  }

  RequestId add(Request request, AnyDrafter* drafter, std::unique_ptr<AnyDrafter> owned) {
    const auto& prompt = request.prompt;
    REFDEC_CHECK(!prompt.empty(), "Session::add: the prompt is empty (start it with BOS)");
    REFDEC_CHECK(static_cast<std::int64_t>(prompt.size()) < max_context_,
                 "Session::add: a prompt of " << prompt.size() << " tokens leaves no room in a context of " << max_context_);
    for (std::size_t i = 0; i < prompt.size(); ++i)
      REFDEC_CHECK(prompt[i] >= 0 && prompt[i] < model_->vocab_size(),
                   "Session::add: prompt token " << i << " has id " << prompt[i] << " outside the vocabulary [0, "
                                                 << model_->vocab_size() << ")");
    for (std::size_t d = 0; d < request.references.size(); ++d)
      for (std::size_t i = 0; i < request.references[d].size(); ++i) {
        const Token t = request.references[d][i];
        REFDEC_CHECK(t >= 0 && t < model_->vocab_size(), "Session::add: reference " << d << " token " << i << " has id " << t
                                                                                   << " outside the vocabulary [0, "
                                                                                   << model_->vocab_size() << ")");
      }
    const std::int64_t max_new = request.max_new_tokens.value_or(defaults_.max_new_tokens);
    const std::int64_t budget = request.budget.value_or(defaults_.budget);
    check_limits(max_new, budget, "Session::add");
    const auto& settings = request.sampling ? request.sampling : defaults_.sampling;
    if (settings) settings->validate();

    Active r;
    r.id = next_id_++;
    r.prompt = std::move(request.prompt);
    r.stop_tokens = request.stop_tokens.value_or(defaults_.stop_tokens);
    r.max_new_tokens = max_new;
    r.budget = budget;
    r.drafter = drafter;
    r.owned = std::move(owned);
    if (max_new == 0) {  // nothing to generate: it leaves at once
      finished_.push_back({r.id, {}, FinishReason::kMaxNewTokens});
      return r.id;
    }
    std::optional<SequenceSampling> sampling;
    if (settings) {
      sampling.emplace(SequenceSampling{LogitsProcessor(*settings), TokenCounts(static_cast<std::int32_t>(model_->vocab_size())), 0, {}});
      sampling->counts.add_prompt(r.prompt);
      const bool tensor_path = defaults_.sampling_path == SamplingPath::kTensor ||
                               (defaults_.sampling_path == SamplingPath::kAuto && model_->device().is_cuda());
      if (tensor_path && settings->has_penalties()) sampling->device_counts = DeviceTokenCounts::from(sampling->counts, model_->device());
    }
    r.drafter->reset_stats();
    r.drafter->begin(r.prompt, request.references);
    store_.add();
    active_.push_back(std::move(r));
    sampling_.push_back(std::move(sampling));
    return active_.back().id;
  }

  // Drafts request r's step: its tree (cut to the budget and to the room it has left) and its
  // auxiliary tokens, checked (draft_step()).
  void draft(Active& r, LinearTree& tree, AuxBlock& aux) {
    const Token root = r.output.empty() ? r.prompt.back() : r.output.back();
    const auto length = static_cast<std::int64_t>(r.prompt.size() + r.output.size());
    const std::int64_t room = std::min(r.max_new_tokens - static_cast<std::int64_t>(r.output.size()), max_context_ - length);
    try {
      draft_step(*r.drafter, root, step_budget(room, r.budget), model_->vocab_size(), length - 1, max_context_, draft_, tree, aux);
    } catch (const Error& e) {
      REFDEC_CHECK(false, "Session: request " << r.id << ": " << e.what());
    }
    stats_.auxiliary_tokens += aux.size();
  }

  // Request i leaves: its KV entries, sampling state and slot go; its drafter's statistics stay.
  void leave(std::size_t i) {
    stats_.drafting.merge(active_[i].drafter->stats());
    store_.remove(static_cast<std::int64_t>(i));
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    sampling_.erase(sampling_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  const Active& find(RequestId id) const {
    for (const Active& r : active_)
      if (r.id == id) return r;
    REFDEC_CHECK(false, "Session: no active request " << id);
    return active_.front();  // unreachable
  }

  const M* model_;
  S store_;
  GenerateOptions defaults_;
  std::int64_t max_context_ = 0;
  RequestId next_id_ = 0;
  std::vector<Active> active_;                            // [B] in the store's order
  std::vector<std::optional<SequenceSampling>> sampling_;  // [B] unset: greedy
  std::vector<RequestUpdate> finished_;                   // left between steps, reported by the next one
  GenerateStats stats_;
  // Per-step scratch, reused.
  DraftScratch draft_;
  std::vector<LinearTree> trees_;     // [B]
  std::vector<AuxBlock> aux_;         // [B]
  std::vector<std::uint8_t> prefill_; // [B]
  StepPlan plan_;
  Verification verification_;
  std::vector<RequestUpdate> updates_;
  std::optional<StepCostTracker> tracker_;  // with GenerateOptions::step_cost
};

REFDEC_NAMESPACE_END
