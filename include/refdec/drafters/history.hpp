// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Drafting from what the model wrote before: the outputs of the sequences an engine has finished
// (earlier requests, earlier conversations) kept in a bounded shared history, and a drafter that
// hands them to another drafter as references. A model repeats its own phrasing across answers
// far more than another model's answers or the prompt do.
//
// Deprecated: IndexDrafter over one shared ReferenceIndex (drafters/index_drafter.hpp,
// index_sources() for a mixture) drafts from the same outputs without rebuilding its inner
// drafter over the whole history for every sequence, and drafts better at every budget
// (docs/drafters.md). HistoryDrafter stays for engines that use it until the next major version
// (CHANGELOG.md); new code should not.

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/step_cost.hpp"

REFDEC_NAMESPACE_BEGIN

/// The outputs of finished sequences, newest last, at most max_tokens() tokens in all: adding one
/// drops the oldest outputs until the rest fit (an output longer than the bound keeps its last
/// max_tokens() tokens). Thread-safe: one history may be shared by the drafters of every sequence
/// an engine serves, each adding its output when its sequence ends.
class OutputHistory {
 public:
  /// The default bound: enough for a few hundred answers, and a HistoryDrafter's begin() (which
  /// indexes the whole history for its inner drafter) stays a few milliseconds.
  static constexpr std::size_t kDefaultMaxTokens = std::size_t{1} << 14;
  /// The largest bound accepted.
  static constexpr std::size_t kMaxTokens = std::size_t{1} << 26;

  /// An empty history of at most `max_tokens` tokens, in [1, kMaxTokens].
  explicit OutputHistory(std::size_t max_tokens = kDefaultMaxTokens) : max_tokens_(max_tokens) {
    REFDEC_CHECK(max_tokens >= 1 && max_tokens <= kMaxTokens,
                 "output history: max_tokens must be in [1, " << kMaxTokens << "], got " << max_tokens);
  }

  /// Adds one finished output (token ids >= 0; an empty one is ignored).
  void add(std::span<const Token> output) {
    for (const Token t : output) REFDEC_CHECK(t >= 0, "output history: token ids must be non-negative, got " << t);
    if (output.empty()) return;
    if (output.size() > max_tokens_) output = output.last(max_tokens_);
    auto copy = std::make_shared<const std::vector<Token>>(output.begin(), output.end());
    const std::lock_guard lock(mutex_);
    while (!outputs_.empty() && tokens_ + copy->size() > max_tokens_) {
      tokens_ -= outputs_.front()->size();
      outputs_.pop_front();
    }
    tokens_ += copy->size();
    outputs_.push_back(std::move(copy));
  }

  /// The outputs, oldest first: handles on immutable token vectors, which stay valid while held
  /// whatever the history drops meanwhile. Only the handles are taken under the lock.
  std::vector<std::shared_ptr<const std::vector<Token>>> outputs() const {
    const std::lock_guard lock(mutex_);
    return {outputs_.begin(), outputs_.end()};
  }
  /// A copy of the outputs, oldest first, appended to `out` (copied outside the lock).
  void append_to(std::vector<std::vector<Token>>& out) const {
    const auto held = outputs();
    out.reserve(out.size() + held.size());
    for (const auto& o : held) out.push_back(*o);
  }

  /// The number of outputs held.
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return outputs_.size();
  }
  /// The number of tokens held, at most max_tokens().
  std::size_t tokens() const {
    const std::lock_guard lock(mutex_);
    return tokens_;
  }
  /// The bound on tokens().
  std::size_t max_tokens() const { return max_tokens_; }

 private:
  const std::size_t max_tokens_;
  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<const std::vector<Token>>> outputs_;  // oldest first, never modified
  std::size_t tokens_ = 0;                                         // sum of outputs_' sizes
};

/// A drafter that drafts with another (the inner drafter) from the model's earlier outputs: at
/// begin() the inner drafter gets the request's references followed by every output in the
/// shared OutputHistory, and the tokens this drafter accepted become an output of the history when
/// its sequence ends: at finish() (which the Session calls when a request leaves) or the next
/// begin(); a drafter destroyed or reset() before adds nothing. The history never holds the
/// sequence being drafted (unless finish() is called in the middle of it). Everything else
/// (proposals, match length, auxiliary tokens, the step cost of a cost-aware inner drafter) is the
/// inner drafter's. An n-gram trie inner (NgramTrieDrafter) ranks continuations by how often the
/// model wrote them. begin() costs what the inner drafter's begin() costs over the whole history
/// (OutputHistory::kDefaultMaxTokens). One per sequence at a time, like any drafter; the history
/// may be shared.
class HistoryDrafter {
 public:
  /// Drafts with `inner` over `history` (not null).
  HistoryDrafter(AnyDrafter inner, std::shared_ptr<OutputHistory> history) : inner_(std::move(inner)), history_(std::move(history)) {
    REFDEC_CHECK(history_ != nullptr, "history drafter: needs an OutputHistory, got null");
  }
  /// "history(inner)".
  std::string name() const { return "history(" + inner_.name() + ")"; }
  /// The shared history.
  const std::shared_ptr<OutputHistory>& history() const { return history_; }

  /// Ends the previous sequence (finish()) and starts the inner drafter on `prompt` with
  /// `references` followed by the history's outputs.
  void begin(std::span<const Token> prompt, References references) {
    REFDEC_CHECK(history_ != nullptr, "history drafter: used after it was moved from");
    finish();
    // The inner drafter reads views: the request's references and the history's outputs where they
    // are (held for the call), nothing copied here.
    const auto held = history_->outputs();
    std::vector<std::span<const Token>> views(references.begin(), references.end());
    for (const auto& o : held) views.emplace_back(*o);
    inner_.begin(prompt, views);
    in_sequence_ = true;
    length_ = prompt.size();
  }
  /// The inner drafter's proposal.
  void propose(std::size_t budget, DraftTree& out) { inner_.propose(budget, out); }
  /// Tells the inner drafter, and remembers the tokens as this sequence's output.
  void accept(std::span<const Token> tokens) {
    inner_.accept(tokens);
    output_.insert(output_.end(), tokens.begin(), tokens.end());
    length_ += tokens.size();
  }
  /// Rewinds the inner drafter's sequence to its first `n` tokens and this sequence's output with
  /// it (RewindableDrafter, when the inner drafter is).
  void truncate(std::size_t n) {
    inner_.truncate(n);
    const std::size_t dropped = length_ - n;  // the output's last tokens, then the prompt's
    output_.resize(output_.size() - std::min(output_.size(), dropped));
    length_ = n;
  }
  /// Whether truncate() works: whether the inner drafter's does.
  bool can_truncate() const { return inner_.can_truncate(); }
  /// Ends the sequence without adding its output to the history (ResettableDrafter).
  void reset() {
    output_.clear();
    if (std::exchange(in_sequence_, false)) inner_.reset();
  }
  /// Adds the tokens accepted since begin() (or the last finish()) to the history as one output,
  /// now (nothing if none), and tells the inner drafter the sequence ended. In the middle of a
  /// sequence, the rest of it becomes a later output.
  void finish() {
    if (!history_) return;  // moved from
    if (std::exchange(in_sequence_, false)) inner_.finish();
    if (output_.empty()) return;
    history_->add(output_);
    output_.clear();
  }

  /// The inner drafter's match length (MatchReportingDrafter).
  std::size_t last_match() const { return inner_.last_match(); }
  /// The inner drafter's auxiliary tokens, if it runs any (AuxiliaryDrafter).
  void auxiliary(AuxBlock& out) { inner_.auxiliary(out); }
  /// The target's choices at them.
  void observe(std::span<const Token> choices) { inner_.observe(choices); }
  /// The inner drafter's bound on them.
  std::size_t max_auxiliary() const { return inner_.max_auxiliary(); }
  /// Gives a cost-aware inner drafter (e.g. a MixtureDrafter) the step cost (CostAwareDrafter).
  void set_step_cost(const StepCost& cost) { inner_.set_step_cost(cost); }
  /// Whether the inner drafter sizes its drafts by a step cost.
  bool cost_aware() const { return inner_.cost_aware(); }

 private:
  AnyDrafter inner_;
  std::shared_ptr<OutputHistory> history_;
  std::vector<Token> output_;  // tokens accepted since begin() or the last finish()
  bool in_sequence_ = false;   // begun and not finished: the inner drafter is owed a finish()
  std::size_t length_ = 0;     // the sequence's tokens (prompt and output)
};

static_assert(Drafter<HistoryDrafter>);
static_assert(MatchReportingDrafter<HistoryDrafter>);
static_assert(AuxiliaryDrafter<HistoryDrafter>);
static_assert(CostAwareDrafter<HistoryDrafter>);
static_assert(SequenceEndingDrafter<HistoryDrafter>);
static_assert(RewindableDrafter<HistoryDrafter>);
static_assert(ResettableDrafter<HistoryDrafter>);

REFDEC_NAMESPACE_END
