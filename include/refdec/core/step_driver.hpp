// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The step protocol of speculative decoding, once, for every engine: per sequence, its drafter,
// prompt, output, limits and prefill progress. An engine's loop is
//
//   driver.prepare()                   chunked prefill or drafting per sequence -> driver.plan()
//   engine: forward(plan) and the walk  (or driver.complete_greedy(choices) walks greedily)
//   driver.complete(accepted, aux)     observe, then accept; stop tokens and limits; finish()
//   engine: apply driver.keep() to its cache, drop the caches of driver.left()
//
// refdec's Session (torch/session.hpp) is this driver around a model's forward pass and a KV
// store; examples/engine_without_torch.cpp is this driver around a plain C++ forward pass.
// Torch-free.

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
#include "refdec/core/batch_budget.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/core/worker_pool.hpp"

REFDEC_NAMESPACE_BEGIN

/// Identifies a sequence (a request) inside its StepDriver or Session.
using RequestId = std::int64_t;

/// Why a sequence stopped.
enum class FinishReason {
  kStopToken,     ///< it produced a stop token (not emitted)
  kMaxNewTokens,  ///< it reached its token limit
  kMaxContext,    ///< prompt + output filled the context
  kCancelled,     ///< cancel()
  kDrafterError,  ///< its drafter threw after the step was verified (RequestUpdate::error says what)
};

/// What one step did for one sequence.
struct RequestUpdate {
  RequestId id = -1;
  std::vector<Token> tokens;             ///< tokens appended by this step (stop token excluded)
  std::optional<FinishReason> finished;  ///< set when the sequence has left
  /// What its drafter threw in observe(), accept() or finish() (the sequence left all the same;
  /// the other sequences are not affected); empty when nothing did.
  std::string error;
};

/// The largest draft budget a sequence takes: a step's mask grows with the square of its rows (a
/// 100,000-node draft needed 3.9 GB).
inline constexpr std::int64_t kMaxDraftBudget = 4096;

/// One sequence's limits.
struct SequenceLimits {
  std::int64_t max_new_tokens = 256;    ///< tokens to generate at most (0: it leaves at once)
  std::vector<Token> stop_tokens = {};  ///< generation stops before any of these (not emitted)
  std::int64_t budget = 16;             ///< draft nodes verified per step, 0 to kMaxDraftBudget; 0 is plain decoding

  /// Throws refdec::ArgumentError, naming `who`, unless the token limit and the budget are >= 0.
  void validate(const char* who) const {
    REFDEC_CHECK(max_new_tokens >= 0, who << ": max_new_tokens must be >= 0, got " << max_new_tokens);
    REFDEC_CHECK(budget >= 0 && budget <= kMaxDraftBudget, who << ": budget must be 0 to " << kMaxDraftBudget << ", got " << budget);
  }
};

/// Settings of a StepDriver.
struct StepDriverOptions {
  std::int64_t vocab_size = 0;       ///< token ids lie in [0, vocab_size); > 0
  std::int64_t max_context = 0;      ///< prompt + output at most per sequence; > 0
  std::int64_t prefill_chunk = 512;  ///< prompt tokens a step prefills per sequence at most; 0: the whole prompt at once
  /// Threads that draft a step's sequences at once (the caller's among them); 1 to
  /// WorkerPool::kMaxThreads. Each
  /// sequence's drafter is its own object (add() refuses one already in use), and drafters that
  /// share state share only what is thread-safe (OutputHistory, a Datastore), so their proposals
  /// are the same on any number of threads.
  std::int64_t drafting_threads = 1;
};

/// What the driver's steps did, summed over sequences.
struct StepDriverStats {
  std::int64_t tokens = 0;            ///< generated tokens
  std::int64_t steps = 0;             ///< verification steps, counted per sequence (prefill excluded)
  std::int64_t auxiliary_tokens = 0;  ///< auxiliary tokens (e.g. lookahead windows) run, summed over steps
  std::int64_t prefill_tokens = 0;    ///< prompt tokens run as prefill rows
  /// The drafters' part of the steps: propose() and the budget cut before the forward pass, and
  /// their accept(), observe() and finish() after it.
  double draft_seconds = 0;
  /// The drafters' statistics over the sequences that have left (each over its own sequence, from
  /// its begin() to its finish()): acceptance by position, time.
  DrafterStats drafting;

  /// Mean tokens per step (τ), the bonus token included; 0 before any step.
  double tokens_per_step() const { return steps > 0 ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0; }
};

/// Runs the step protocol for a batch of sequences that join and leave between steps (see the
/// file comment). The engine keeps one cache per active sequence in the driver's order (slots
/// 0 .. active() - 1): a sequence added takes the next slot, and the slots in left() (after
/// complete(), or the one cancel() returns) are dropped, the later ones moving down. Not
/// thread-safe: one thread drives a driver.
class StepDriver {
 public:
  explicit StepDriver(StepDriverOptions options) : options_(options) {
    REFDEC_CHECK(options_.vocab_size > 0, "StepDriver: vocab_size must be positive, got " << options_.vocab_size);
    REFDEC_CHECK(options_.max_context > 0, "StepDriver: max_context must be positive, got " << options_.max_context);
    REFDEC_CHECK(options_.prefill_chunk >= 0, "StepDriver: prefill_chunk must be >= 0, got " << options_.prefill_chunk);
    REFDEC_CHECK(options_.drafting_threads >= 1 && options_.drafting_threads <= static_cast<std::int64_t>(WorkerPool::kMaxThreads),
                 "StepDriver: drafting_threads must be 1 to " << WorkerPool::kMaxThreads << ", got " << options_.drafting_threads);
    if (options_.drafting_threads > 1) pool_ = std::make_unique<WorkerPool>(static_cast<std::size_t>(options_.drafting_threads));
  }

  /// Adds a sequence with a drafter the driver owns (default: plain decoding). Checks everything
  /// first (prompt non-empty and shorter than the context, prompt and reference ids in the
  /// vocabulary, limits) and throws refdec::ArgumentError without changing the driver when
  /// something is wrong; then begins the drafter on the prompt and references. Returns its id.
  RequestId add(std::vector<Token> prompt, References references, const SequenceLimits& limits, AnyDrafter drafter = {}) {
    auto owned = std::make_unique<AnyDrafter>(std::move(drafter));
    AnyDrafter* borrowed = owned.get();
    return add(std::move(prompt), references, limits, borrowed, std::move(owned));
  }
  /// Adds a sequence whose drafter the caller owns and keeps alive until the sequence has left
  /// (its statistics and learned state stay with the caller: the driver adds to them and never
  /// resets them). Throws ArgumentError for a drafter an active sequence is using: a drafter
  /// follows one sequence at a time.
  RequestId add(std::vector<Token> prompt, References references, const SequenceLimits& limits, AnyDrafter* drafter) {
    REFDEC_CHECK(drafter != nullptr, "add: null drafter");
    for (const Sequence& s : active_)
      REFDEC_CHECK(s.drafter != drafter, "add: the drafter is in use by request " << s.id << " (a drafter follows one sequence at a time)");
    return add(std::move(prompt), references, limits, drafter, nullptr);
  }

  /// Ends sequence `id` now (its drafter's finish() is called; what it throws becomes the
  /// report's error); it is reported as kCancelled by the next prepare()'s updates(). Returns the
  /// slot the engine drops, or nothing for an unknown id (a sequence that has already left).
  /// Throws refdec::ArgumentError while a step is prepared (step_prepared()): complete it first.
  std::optional<std::size_t> cancel(RequestId id) {
    check_no_prepared_step("cancel");
    for (std::size_t i = 0; i < active_.size(); ++i)
      if (active_[i].id == id) {
        RequestUpdate& u = pending_.emplace_back(RequestUpdate{id, {}, FinishReason::kCancelled, {}});
        u.error = leave(i);
        return i;
      }
    return std::nullopt;
  }

  /// True between a prepare() that returned true and the complete() of its step: plan(),
  /// prefill() and the complete functions are valid; add() and cancel() throw (the step's plan
  /// names the sequences as they were). Another prepare() discards the step.
  bool step_prepared() const { return step_prepared_; }

  /// From the next prepare() on, chooses the draft nodes of each step across the batch
  /// (BatchBudget) under `cost`, the cost of a step by its total rows: every sequence drafts up to
  /// its own budget (a cap), each node gets an estimated probability of acceptance
  /// (estimate_acceptance(): a cost-aware drafter's scores, else its statistics by depth), and the
  /// trees are cut to the nodes that maximise the step's expected tokens per second. Cost-aware
  /// drafters (the mixture) are given the flat cost while it is on, so that they offer every node
  /// up to their cap and leave the choice to the batch. nullopt (the default): each sequence's
  /// drafter sizes its own draft.
  void set_batch_cost(std::optional<StepCost> cost) { batch_cost_ = std::move(cost); }
  /// The cost the batch choice uses; nullopt when each sequence sizes its own draft.
  const std::optional<StepCost>& batch_cost() const { return batch_cost_; }

  /// Prepares a step: clears updates() (which then holds the sequences that left between steps),
  /// and for each active sequence either its next prompt chunk (a chain whose rows are all kept) or
  /// its draft, cut to its budget and to the room it has left, with its auxiliary tokens; then
  /// the plan. Returns false when no sequence is active (nothing to run). Throws refdec::Error
  /// naming the request when a drafter fails or proposes an id outside the vocabulary; then no
  /// step is prepared, and the reports of sequences that left between steps wait for the next
  /// prepare().
  bool prepare() {
    step_prepared_ = false;
    updates_.clear();
    std::swap(updates_, pending_);
    left_.clear();
    if (active_.empty()) return false;
    try {
      prepare_step();
    } catch (...) {
      std::swap(updates_, pending_);  // pending_ was empty: nothing that left is lost
      updates_.clear();
      throw;
    }
    step_prepared_ = true;
    return true;
  }

 private:
  // prepare()'s step; what it counts joins stats_ only when the whole step is prepared.
  void prepare_step() {
    const auto t0 = Clock::now();
    const std::size_t B = active_.size();
    std::int64_t prefill_tokens = 0, auxiliary_tokens = 0;
    trees_.resize(B);
    aux_.resize(B);
    prefill_.assign(B, 0);
    lengths_.resize(B);
    drafting_.clear();
    for (std::size_t i = 0; i < B; ++i) {
      Sequence& s = active_[i];
      aux_[i].clear();
      lengths_[i] = s.cached();
      if (s.prefilled + 1 < s.prompt.size()) {  // the next chunk of the prompt but its last token
        const std::size_t left = s.prompt.size() - 1 - s.prefilled;
        const std::size_t chunk = options_.prefill_chunk > 0 ? std::min(left, static_cast<std::size_t>(options_.prefill_chunk)) : left;
        trees_[i] = LinearTree::chain(std::span<const Token>(s.prompt).subspan(s.prefilled, chunk));
        prefill_[i] = 1;
        prefill_tokens += trees_[i].size();
        continue;
      }
      drafting_.push_back(i);
    }
    if (scratch_.size() < B) scratch_.resize(B);
    const auto draft = [&](std::size_t k) {
      const std::size_t i = drafting_[k];
      Sequence& s = active_[i];
      const auto length = static_cast<std::int64_t>(s.prompt.size() + s.output.size());
      const std::int64_t room = std::min(s.limits.max_new_tokens - static_cast<std::int64_t>(s.output.size()),
                                         options_.max_context - length);
      try {
        if (batch_cost_ && s.drafter->cost_aware()) s.drafter->set_step_cost(StepCost::flat());
        draft_step(*s.drafter, s.last(), step_budget(room, s.limits.budget), options_.vocab_size, length - 1, options_.max_context,
                   scratch_[i], trees_[i], aux_[i], !batch_cost_);
      } catch (const Error& e) {
        detail::rethrow_in_context(e, "request " + std::to_string(s.id));
      }
    };
    if (pool_)
      pool_->for_each(drafting_.size(), draft);
    else
      for (std::size_t k = 0; k < drafting_.size(); ++k) draft(k);
    if (batch_cost_) cut_to_batch_budget();
    bool any_aux = false;
    for (const std::size_t i : drafting_) {
      auxiliary_tokens += aux_[i].size();
      any_aux = any_aux || !aux_[i].empty();
    }
    const auto t_plan = Clock::now();
    plan_step(trees_, any_aux ? std::span<const AuxBlock>(aux_) : std::span<const AuxBlock>{}, lengths_, options_.vocab_size, plan_);
    stats_.prefill_tokens += prefill_tokens;
    stats_.auxiliary_tokens += auxiliary_tokens;
    stats_.draft_seconds += std::chrono::duration<double>(t_plan - t0).count();
    last_plan_seconds_ = seconds_since(t_plan);
  }

 public:
  /// The plan of the prepared step: its sequences are the active ones, in slot order, with the
  /// cached lengths the engine's caches must have (prompt tokens prefilled, then every output
  /// token but the last).
  const StepPlan& plan() const { return plan_; }
  /// [active()] 1 where the prepared step prefills the sequence's prompt (walk nothing: every row
  /// is kept), 0 where it verifies a draft.
  std::span<const std::uint8_t> prefill() const { return prefill_; }

  /// Completes the prepared step with the engine's walk: `accepted[b]` for each sequence of the
  /// plan (a prefilling sequence's is overwritten with accept_all(), whatever it held) and
  /// `aux_choices[b]`, the target's greedy choice at
  /// each of its auxiliary rows (empty span: no sequence ran any). Tells each drafter
  /// (observe(), then accept()), applies stop tokens and limits, computes keep(), and removes the
  /// sequences that finished (their drafters' finish() called): updates() says what each did,
  /// left() which slots the engine drops after applying keep(). Everything given is checked
  /// before anything changes (a step prepared, each acceptance a path of its tree with the nodes'
  /// own tokens and one bonus token, every token in the vocabulary): refdec::ArgumentError leaves
  /// the step prepared as it was. A drafter that throws ends its own sequence
  /// (FinishReason::kDrafterError, RequestUpdate::error) after its tokens are reported; the step
  /// completes for every sequence.
  void complete(std::span<Acceptance> accepted, std::span<const std::vector<Token>> aux_choices) {
    REFDEC_CHECK(step_prepared_, "complete: no prepared step (prepare() first; each step completes once)");
    const std::size_t B = active_.size();
    REFDEC_CHECK(static_cast<std::int32_t>(B) == plan_.batch() && accepted.size() == B && (aux_choices.empty() || aux_choices.size() == B),
                 "complete: " << accepted.size() << " acceptances and " << aux_choices.size() << " auxiliary choices for a step of "
                              << plan_.batch() << " sequences (" << B << " active)");
    // The target's tokens become output and drafters' context: every one in the vocabulary, and
    // the acceptance one the tree can give, checked before anything changes.
    for (std::size_t i = 0; i < B; ++i) {
      if (prefill_[i]) continue;
      const Acceptance& a = accepted[i];
      REFDEC_CHECK(a.tokens.size() == a.nodes.size() + 1, "complete: sequence " << i << " accepts " << a.nodes.size() << " nodes with "
                                                                                << a.tokens.size() << " tokens (want one more: the nodes' "
                                                                                << "tokens, then the bonus token)");
      const std::int32_t base = plan_.indptr[i], nodes = plan_.num_nodes[i];
      for (std::size_t k = 0; k < a.nodes.size(); ++k) {
        const std::int32_t node = a.nodes[k];
        REFDEC_CHECK(node > 0 && node < nodes,
                     "complete: sequence " << i << " accepts node " << node << ", outside its draft [1, " << nodes << ")");
        REFDEC_CHECK(a.tokens[k] == plan_.tokens[static_cast<std::size_t>(base + node)],
                     "complete: sequence " << i << " accepts node " << node << " with token " << a.tokens[k] << ", but the node's token is "
                                           << plan_.tokens[static_cast<std::size_t>(base + node)]);
      }
      for (std::size_t k = 0; k < accepted[i].tokens.size(); ++k)
        REFDEC_CHECK(accepted[i].tokens[k] >= 0 && accepted[i].tokens[k] < options_.vocab_size,
                     "complete: sequence " << i << " accepted token " << k << " has id " << accepted[i].tokens[k]
                                           << " outside the vocabulary [0, " << options_.vocab_size << ")");
      if (!aux_choices.empty())
        for (std::size_t k = 0; k < aux_choices[i].size(); ++k)
          REFDEC_CHECK(aux_choices[i][k] >= 0 && aux_choices[i][k] < options_.vocab_size,
                       "complete: sequence " << i << " auxiliary choice " << k << " has id " << aux_choices[i][k]
                                             << " outside the vocabulary [0, " << options_.vocab_size << ")");
    }
    for (std::size_t i = 0; i < B; ++i)
      if (prefill_[i]) accept_all(plan_.tree(static_cast<std::int32_t>(i)), accepted[i]);
    keep_accepted(plan_, accepted, next_keep_);  // the last check: the nodes a path of the tree
    std::swap(keep_, next_keep_);
    step_prepared_ = false;
    last_drafter_seconds_ = 0;
    std::vector<std::size_t> leaving;
    for (std::size_t i = 0; i < B; ++i) {
      Sequence& s = active_[i];
      if (prefill_[i]) {
        s.prefilled += static_cast<std::size_t>(trees_[i].size());
        continue;
      }
      const double before = s.drafter->stats().accept_seconds;
      ++stats_.steps;
      RequestUpdate& u = updates_.emplace_back();
      u.id = s.id;
      for (const Token t : accepted[i].tokens) {
        if (std::find(s.limits.stop_tokens.begin(), s.limits.stop_tokens.end(), t) != s.limits.stop_tokens.end()) {
          u.finished = FinishReason::kStopToken;
          break;
        }
        u.tokens.push_back(t);
        if (static_cast<std::int64_t>(s.output.size() + u.tokens.size()) >= s.limits.max_new_tokens) {
          u.finished = FinishReason::kMaxNewTokens;
          break;
        }
        if (static_cast<std::int64_t>(s.prompt.size() + s.output.size() + u.tokens.size()) >= options_.max_context) {
          u.finished = FinishReason::kMaxContext;
          break;
        }
      }
      stats_.tokens += static_cast<std::int64_t>(u.tokens.size());
      s.output.insert(s.output.end(), u.tokens.begin(), u.tokens.end());
      try {
        // AuxiliaryDrafter's contract: observe() after every step, with no choices when the
        // window sat the step out.
        if (s.drafter->max_auxiliary() > 0)
          s.drafter->observe(aux_choices.empty() ? std::span<const Token>{} : std::span<const Token>(aux_choices[i]));
        s.drafter->accept(u.tokens);  // nothing appended (a stop token first): not called
      } catch (const std::exception& e) {
        u.error = std::string("its drafter failed after the step: ") + e.what();
        u.finished = FinishReason::kDrafterError;
      }
      last_drafter_seconds_ += s.drafter->stats().accept_seconds - before;
      if (u.finished) leaving.push_back(i);
    }
    for (auto it = leaving.rbegin(); it != leaving.rend(); ++it) {
      const RequestId id = active_[*it].id;
      const std::string error = leave(*it);
      if (!error.empty()) {
        RequestUpdate& u = *std::find_if(updates_.begin(), updates_.end(), [&](const RequestUpdate& x) { return x.id == id; });
        u.error += (u.error.empty() ? "" : "; ") + error;
      }
      left_.push_back(*it);
    }
    stats_.draft_seconds += last_drafter_seconds_;
  }

  /// Completes the prepared step by walking each sequence's tree with `choose(slot, row, depth)`,
  /// the target's token at plan row `row` (of sequence `slot`, after `depth` accepted drafts; each
  /// row asked at most once, root to leaf, so a chooser may sample lazily), and asking it for every
  /// auxiliary row's greedy choice with depth -1; then complete(). Prefilling sequences are not
  /// asked.
  template <class Choose>
  void complete_walk(Choose&& choose) {
    REFDEC_CHECK(step_prepared_, "complete_walk: no prepared step (prepare() first; each step completes once)");
    const std::size_t B = active_.size();
    walked_.resize(B);
    walked_aux_.resize(B);
    for (std::size_t b = 0; b < B; ++b) {
      const auto bi = static_cast<std::int32_t>(b);
      const std::int32_t first = plan_.indptr[b];
      walked_aux_[b].clear();
      if (prefill_[b]) continue;
      accept(
          plan_.tree(bi), [&](std::int32_t node, std::int32_t depth) { return choose(bi, first + node, depth); }, walked_[b]);
      for (std::int32_t row = first + plan_.num_nodes[b]; row < plan_.indptr[b + 1]; ++row) walked_aux_[b].push_back(choose(bi, row, -1));
    }
    complete(walked_, walked_aux_);
  }

  /// Completes the prepared step by greedy acceptance: `choices` holds the target's greedy token
  /// at every row of the plan ([plan().rows()]); complete_walk() over them.
  void complete_greedy(std::span<const Token> choices) {
    REFDEC_CHECK(step_prepared_, "complete_greedy: no prepared step (prepare() first; each step completes once)");
    REFDEC_CHECK(static_cast<std::int64_t>(choices.size()) == plan_.rows(),
                 "complete_greedy: " << choices.size() << " choices for a plan of " << plan_.rows() << " rows");
    complete_walk([&](std::int32_t, std::int32_t row, std::int32_t) { return choices[static_cast<std::size_t>(row)]; });
  }

  /// What the last prepare() and complete() did per sequence: the sequences that left between
  /// steps (cancelled, or given no tokens to generate), then one update per verified sequence.
  /// Prefilling sequences report nothing. Valid until the next prepare().
  const std::vector<RequestUpdate>& updates() const { return updates_; }
  /// What each sequence's cache keeps from the completed step (for every sequence of the plan,
  /// those that left included): apply it before dropping the slots of left().
  const KeepPlan& keep() const { return keep_; }
  /// The slots of the sequences the completed step removed, in decreasing order (drop them in this
  /// order and the later slots stay valid until dropped).
  std::span<const std::size_t> left() const { return left_; }
  /// The drafters' time in the completed step's observe(), accept() and finish() (part of
  /// stats().draft_seconds), for an engine that times the step's other parts.
  double last_drafter_seconds() const { return last_drafter_seconds_; }
  /// The time the prepared step's plan_step() took (not part of stats().draft_seconds).
  double last_plan_seconds() const { return last_plan_seconds_; }

  /// Number of active sequences (the engine's caches).
  std::size_t active() const { return active_.size(); }
  /// True when prepare() has nothing to run or report.
  bool idle() const { return active_.empty() && pending_.empty(); }
  /// The slot of active sequence `id`; throws refdec::ArgumentError for an unknown id.
  std::size_t slot(RequestId id) const { return static_cast<std::size_t>(&find(id) - active_.data()); }
  /// The id of the sequence in `slot`.
  RequestId id(std::size_t slot) const { return active_.at(slot).id; }
  /// The drafter of the sequence in `slot`.
  AnyDrafter& drafter(std::size_t slot) { return *active_.at(slot).drafter; }
  /// Tokens sequence `id` has generated so far (while it is active).
  const std::vector<Token>& output(RequestId id) const { return find(id).output; }
  const StepDriverStats& stats() const { return stats_; }
  const StepDriverOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  struct Sequence {
    RequestId id = -1;
    std::vector<Token> prompt;
    std::vector<Token> output;
    SequenceLimits limits;
    std::size_t prefilled = 0;  // prompt tokens cached; the last one is the first step's root
    AnyDrafter* drafter = nullptr;
    std::unique_ptr<AnyDrafter> owned;  // set when the driver owns the drafter
    DrafterStats drafter_stats_before;  // the drafter's statistics before this sequence's begin()

    Token last() const { return output.empty() ? prompt.back() : output.back(); }
    // Cached entries: the prompt as prefilled, then (once it is) every output token but the last.
    std::int64_t cached() const {
      return static_cast<std::int64_t>(prefilled + 1 < prompt.size() ? prefilled : prompt.size() - 1 + output.size());
    }
  };

  RequestId add(std::vector<Token> prompt, References references, const SequenceLimits& limits, AnyDrafter* drafter,
                std::unique_ptr<AnyDrafter> owned) {
    check_no_prepared_step("add");
    const std::int64_t vocab = options_.vocab_size;
    REFDEC_CHECK(!prompt.empty(), "add: the prompt is empty (start it with BOS)");
    REFDEC_CHECK(static_cast<std::int64_t>(prompt.size()) < options_.max_context,
                 "add: a prompt of " << prompt.size() << " tokens leaves no room in a context of " << options_.max_context);
    for (std::size_t i = 0; i < prompt.size(); ++i)
      REFDEC_CHECK(prompt[i] >= 0 && prompt[i] < vocab,
                   "add: prompt token " << i << " has id " << prompt[i] << " outside the vocabulary [0, " << vocab << ")");
    for (std::size_t d = 0; d < references.size(); ++d)
      for (std::size_t i = 0; i < references[d].size(); ++i) {
        const Token t = references[d][i];
        REFDEC_CHECK(t >= 0 && t < vocab,
                     "add: reference " << d << " token " << i << " has id " << t << " outside the vocabulary [0, " << vocab << ")");
      }
    limits.validate("add");

    Sequence s;
    s.id = next_id_++;
    s.prompt = std::move(prompt);
    s.limits = limits;
    s.drafter = drafter;
    s.owned = std::move(owned);
    if (limits.max_new_tokens == 0) {  // nothing to generate: it leaves at once
      pending_.push_back({s.id, {}, FinishReason::kMaxNewTokens, {}});
      return s.id;
    }
    s.drafter_stats_before = s.drafter->stats();
    s.drafter->begin(s.prompt, references);
    active_.push_back(std::move(s));
    return active_.back().id;
  }

  // The sequence in slot i leaves: its drafter is told (finish()) and its statistics over the
  // sequence join the driver's. It leaves whatever finish() throws, so that one drafter cannot
  // hold up the batch: what it threw is returned for the sequence's report.
  std::string leave(std::size_t i) {
    AnyDrafter& drafter = *active_[i].drafter;
    const double before = drafter.stats().accept_seconds;
    std::string error;
    try {
      drafter.finish();
    } catch (const std::exception& e) {
      error = std::string("its drafter's finish() failed: ") + e.what();
    }
    last_drafter_seconds_ += drafter.stats().accept_seconds - before;
    stats_.drafting.merge(drafter.stats().since(active_[i].drafter_stats_before));
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    return error;
  }

  void check_no_prepared_step(const char* who) const {
    REFDEC_CHECK(!step_prepared_, who << ": a step is prepared; complete it first (or prepare() again to discard it)");
  }

  // The batch choice (set_batch_cost()): estimates, BatchBudget, each drafted tree cut to its count
  // and recorded as its drafter's proposal.
  void cut_to_batch_budget() {
    std::size_t fixed_rows = 0;
    for (std::size_t i = 0; i < active_.size(); ++i)
      fixed_rows += prefill_[i] ? static_cast<std::size_t>(trees_[i].size()) : 1 + static_cast<std::size_t>(aux_[i].size());
    offers_.clear();
    for (const std::size_t i : drafting_) {
      const AnyDrafter& d = *active_[i].drafter;
      offers_.push_back({&trees_[i], d.cost_aware(), d.stats().proposed_at_depth, d.stats().accepted_at_depth});
    }
    batch_budget_.cut(offers_, fixed_rows, *batch_cost_);
    for (const std::size_t i : drafting_) active_[i].drafter->record_proposal(trees_[i]);
  }

  const Sequence& find(RequestId id) const {
    for (const Sequence& s : active_)
      if (s.id == id) return s;
    REFDEC_CHECK(false, "no active request " << id);
    return active_.front();  // unreachable
  }

  StepDriverOptions options_;
  RequestId next_id_ = 0;
  bool step_prepared_ = false;          // step_prepared()
  std::vector<Sequence> active_;        // [B] in slot order
  std::vector<RequestUpdate> pending_;  // left between steps, reported by the next prepare()
  std::vector<RequestUpdate> updates_;
  std::vector<std::size_t> left_;
  StepDriverStats stats_;
  double last_drafter_seconds_ = 0;
  double last_plan_seconds_ = 0;
  std::unique_ptr<WorkerPool> pool_;    // set when options_.drafting_threads > 1
  std::optional<StepCost> batch_cost_;  // set_batch_cost()
  BatchBudget batch_budget_;
  std::vector<BudgetOffer> offers_;  // [drafting]
  // Per-step scratch, reused.
  std::vector<DraftScratch> scratch_;  // [>= B] per slot, so that slots draft on any thread
  std::vector<std::size_t> drafting_;  // slots that draft this step (the others prefill)
  std::vector<LinearTree> trees_;      // [B]
  std::vector<AuxBlock> aux_;          // [B]
  std::vector<std::uint8_t> prefill_;  // [B]
  std::vector<std::int64_t> lengths_;  // [B]
  StepPlan plan_;
  KeepPlan keep_;
  KeepPlan next_keep_;                          // complete()'s keep plan until every check has passed (storage reused)
  std::vector<Acceptance> walked_;              // [B] complete_walk()'s walks
  std::vector<std::vector<Token>> walked_aux_;  // [B] their auxiliary rows' choices
};

REFDEC_NAMESPACE_END
