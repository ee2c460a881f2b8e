// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Replay evaluation: step counts of scripted drafters, end of output, statistics, aggregation.

#include "eval/replay.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "refdec/drafters/prompt_lookup.hpp"

namespace {

using namespace refdec;

// Knows the true output and proposes its next `k` tokens, corrupting the token at draft depth
// `wrong_at` (1-based; 0 never) so that exactly wrong_at - 1 tokens are accepted.
class OracleDrafter {
 public:
  OracleDrafter(std::vector<Token> output, std::size_t k, std::size_t wrong_at)
      : output_(std::move(output)), k_(k), wrong_at_(wrong_at) {}
  void begin(std::span<const Token>, References) { pos_ = 0; }
  void propose(std::size_t budget, DraftTree& out) {
    std::vector<Token> path;
    for (std::size_t i = 0; i < std::min(k_, budget); ++i) {
      const Token t = pos_ + i < output_.size() ? output_[pos_ + i] : Token{7};
      path.push_back(i + 1 == wrong_at_ ? t + 1000 : t);
    }
    if (!path.empty()) out.insert(path);
  }
  void accept(std::span<const Token> tokens) { pos_ += tokens.size(); }
  std::string name() const { return "oracle"; }

 private:
  std::vector<Token> output_;
  std::size_t k_, wrong_at_, pos_ = 0;
};

Trace make_trace(std::size_t n, const std::string& category = "") {
  Trace t;
  t.category = category;
  t.context = {1, 2, 3};
  for (std::size_t i = 0; i < n; ++i) t.output.push_back(static_cast<Token>(10 + i % 50));
  return t;
}

TEST(Replay, PlainDecodingTakesOneStepPerToken) {
  AnyDrafter none;
  const auto st = replay_trace(none, make_trace(37));
  EXPECT_EQ(st.tokens, 37);
  EXPECT_EQ(st.steps, 37);
  EXPECT_DOUBLE_EQ(st.tokens_per_step(), 1.0);
  EXPECT_EQ(st.drafting.proposed_tokens, 0);
  EXPECT_EQ(st.step_micros.size(), 37u);
}

TEST(Replay, PerfectDraftsOfKTokensGiveKPlusOnePerStep) {
  const Trace t = make_trace(60);
  for (const std::size_t k : {1, 4, 9}) {
    AnyDrafter d(OracleDrafter(t.output, k, 0));
    const auto st = replay_trace(d, t, ReplayOptions{.budget = 64});
    EXPECT_EQ(st.steps, static_cast<std::int64_t>((60 + k) / (k + 1))) << k;  // the last step may be short
    EXPECT_EQ(st.tokens, 60);
    EXPECT_NEAR(d.stats().acceptance_at(0), 1.0, 1e-12);
  }
}

TEST(Replay, BudgetCutsTheDraft) {
  const Trace t = make_trace(60);
  AnyDrafter d(OracleDrafter(t.output, 20, 0));
  const auto st = replay_trace(d, t, ReplayOptions{.budget = 2});
  EXPECT_EQ(st.steps, 20);  // 2 drafts + 1 bonus per step
  EXPECT_EQ(st.drafting.proposed_tokens, 40);
}

TEST(Replay, WrongTokenStopsAcceptanceAndStatsAddUp) {
  const Trace t = make_trace(100);
  AnyDrafter d(OracleDrafter(t.output, 8, 4));  // 3 accepted per step, 4 tokens per step
  const auto st = replay_trace(d, t);
  EXPECT_EQ(st.steps, 25);
  EXPECT_EQ(st.drafting.accepted_tokens + st.steps, st.tokens);
  EXPECT_NEAR(st.drafting.acceptance_at(2), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(st.drafting.acceptance_at(3), 0.0);
  ASSERT_GE(st.drafting.proposed_at_depth.size(), 8u);
  EXPECT_EQ(st.drafting.proposed_at_depth[7], 25);
}

TEST(Replay, DraftsPastTheEndOfTheOutputAreHarmless) {
  const Trace t = make_trace(5);
  AnyDrafter d(OracleDrafter(t.output, 16, 0));
  const auto st = replay_trace(d, t);
  EXPECT_EQ(st.steps, 1);  // all 5 accepted in one step; the end of output is the bonus
  EXPECT_EQ(st.tokens, 5);
  AnyDrafter empty_output(OracleDrafter({}, 4, 0));
  EXPECT_EQ(replay_trace(empty_output, make_trace(0)).steps, 0);
}

TEST(Replay, ReportAggregatesByCategory) {
  const std::vector<Trace> traces = {make_trace(10, "a"), make_trace(20, "b"), make_trace(30, "a"), make_trace(5)};
  AnyDrafter none;
  const auto report = replay(none, traces);
  EXPECT_EQ(report.overall.traces, 4);
  EXPECT_EQ(report.overall.tokens, 65);
  ASSERT_EQ(report.by_category.size(), 2u);
  EXPECT_EQ(report.by_category.at("a").tokens, 40);
  EXPECT_EQ(report.by_category.at("a").traces, 2);
  EXPECT_EQ(report.by_category.at("b").steps, 20);
}

TEST(Replay, QuantilesOfStepTimes) {
  ReplayStats st;
  EXPECT_EQ(st.step_micros_quantile(0.5), 0.0);
  for (int i = 100; i >= 1; --i) st.step_micros.push_back(i);
  EXPECT_DOUBLE_EQ(st.step_micros_quantile(0.0), 1.0);
  EXPECT_DOUBLE_EQ(st.step_micros_quantile(0.5), 51.0);
  EXPECT_DOUBLE_EQ(st.step_micros_quantile(0.99), 99.0);
  EXPECT_DOUBLE_EQ(st.step_micros_quantile(1.0), 100.0);
}

TEST(Replay, RejectsAnEmptyContext) {
  Trace t = make_trace(3);
  t.context.clear();
  AnyDrafter none;
  EXPECT_THROW(replay_trace(none, t), Error);
}

// Checks a trace's step log against the replay's statistics: one entry per step, the draft within
// the budget, the bonus token on every step but possibly the last, and the tokens adding up.
void expect_log_matches(const TrajectoryLog& log, const Trace& t, const ReplayStats& st, std::size_t budget) {
  ASSERT_EQ(static_cast<std::int64_t>(log.steps.size()), st.steps);
  EXPECT_EQ(log.id, t.id);
  EXPECT_EQ(log.category, t.category);
  EXPECT_EQ(log.context_tokens, static_cast<std::int64_t>(t.context.size()));
  std::int64_t emitted = 0, accepted = 0;
  for (std::size_t i = 0; i < log.steps.size(); ++i) {
    const ReplayStep& step = log.steps[i];
    EXPECT_LE(step.nodes, static_cast<std::int32_t>(budget)) << i;
    EXPECT_LE(step.accepted, step.nodes) << i;
    if (i + 1 < log.steps.size()) {
      EXPECT_EQ(step.emitted, step.accepted + 1) << i;
    } else {  // the documented last step: a draft reaching the end of the output has no bonus
      EXPECT_TRUE(step.emitted == step.accepted + 1 || step.emitted == step.accepted) << i;
    }
    emitted += step.emitted;
    accepted += step.accepted;
  }
  EXPECT_EQ(emitted, st.tokens);
  // The drafter statistics count the accepted draft tokens of the last step one fewer when it
  // had no bonus token (see replay_trace).
  const bool no_bonus = !log.steps.empty() && log.steps.back().emitted == log.steps.back().accepted;
  EXPECT_EQ(accepted - (no_bonus ? 1 : 0), st.drafting.accepted_tokens);
}

TEST(Replay, StepLogIsOffByDefault) {
  EXPECT_FALSE(ReplayOptions{}.record_steps);
  const Trace t = make_trace(40);
  AnyDrafter d(OracleDrafter(t.output, 8, 4));
  const auto st = replay_trace(d, t);
  EXPECT_GT(st.steps, 0);
  EXPECT_TRUE(st.trajectories.empty());
}

TEST(Replay, StepLogMatchesTheReplay) {
  {
    Trace t = make_trace(100, "code");
    t.id = "q1";
    AnyDrafter d(OracleDrafter(t.output, 8, 4));  // 8 nodes, 3 accepted, 4 emitted per step
    const auto st = replay_trace(d, t, ReplayOptions{.budget = 64, .record_steps = true});
    ASSERT_EQ(st.trajectories.size(), 1u);
    expect_log_matches(st.trajectories[0], t, st, 64);
    for (const ReplayStep& step : st.trajectories[0].steps) {
      EXPECT_EQ(step.nodes, 8);
      EXPECT_EQ(step.accepted, 3);
    }
  }
  {  // the last-step case: all 5 tokens accepted from a 16-node draft, no bonus
    Trace t = make_trace(5);
    AnyDrafter d(OracleDrafter(t.output, 16, 0));
    const auto st = replay_trace(d, t, ReplayOptions{.budget = 64, .record_steps = true});
    ASSERT_EQ(st.trajectories.size(), 1u);
    expect_log_matches(st.trajectories[0], t, st, 64);
    ASSERT_EQ(st.trajectories[0].steps.size(), 1u);
    EXPECT_EQ(st.trajectories[0].steps[0].nodes, 16);
    EXPECT_EQ(st.trajectories[0].steps[0].accepted, 5);
    EXPECT_EQ(st.trajectories[0].steps[0].emitted, 5);
  }
  {  // a real drafter under a budget that cuts its drafts
    std::mt19937 rng(5);
    Trace t;
    t.id = "random";
    for (int i = 0; i < 200; ++i) t.context.push_back(static_cast<Token>(rng() % 5));
    for (int i = 0; i < 300; ++i) t.output.push_back(static_cast<Token>(rng() % 5));
    AnyDrafter d(PromptLookupDrafter{});
    const auto st = replay_trace(d, t, ReplayOptions{.budget = 6, .record_steps = true});
    ASSERT_EQ(st.trajectories.size(), 1u);
    expect_log_matches(st.trajectories[0], t, st, 6);
  }
}

// An observer sees every step in order, before the proposal and after the drafter was told:
// what it sees is the step log, and the drafter state it may change (here: nothing) is the
// drafter's own.
TEST(Replay, ObserverSeesEveryStepAsTheLogRecordsIt) {
  std::mt19937 rng(9);
  Trace t;
  for (int i = 0; i < 200; ++i) t.context.push_back(static_cast<Token>(rng() % 5));
  for (int i = 0; i < 300; ++i) t.output.push_back(static_cast<Token>(rng() % 5));
  struct Recorder {
    std::vector<std::size_t> before;
    std::vector<std::pair<std::size_t, ReplayStep>> after;
    void before_step(std::size_t pos) { before.push_back(pos); }
    void after_step(std::size_t pos, const LinearTree& tree, std::size_t accepted, std::size_t emitted) {
      after.push_back({pos, {tree.num_drafts(), static_cast<std::int32_t>(accepted), static_cast<std::int32_t>(emitted)}});
    }
  } recorder;
  AnyDrafter d(PromptLookupDrafter{});
  const auto st = replay_trace(d, t, ReplayOptions{.budget = 6, .record_steps = true}, recorder);
  const auto& log = st.trajectories.at(0).steps;
  ASSERT_EQ(recorder.after.size(), log.size());
  ASSERT_EQ(recorder.before.size(), log.size());
  std::size_t pos = 0;
  for (std::size_t k = 0; k < log.size(); ++k) {
    EXPECT_EQ(recorder.before[k], pos);
    EXPECT_EQ(recorder.after[k].first, pos);
    EXPECT_EQ(recorder.after[k].second.nodes, log[k].nodes);
    EXPECT_EQ(recorder.after[k].second.accepted, log[k].accepted);
    EXPECT_EQ(recorder.after[k].second.emitted, log[k].emitted);
    pos += static_cast<std::size_t>(log[k].emitted);
  }
  EXPECT_EQ(pos, t.output.size());
  AnyDrafter again(PromptLookupDrafter{});
  EXPECT_EQ(replay_trace(again, t, ReplayOptions{.budget = 6}).steps, st.steps);  // the default observer
}

// The calibration of the estimates a batch budget allocates by: from the drafter's acceptance by
// depth (depths 1-2 always right, 3-4 never: high estimates accepted, low ones not), and from a
// cost-aware drafter's scores (taken as they are). Every verified node is counted once, and the
// accepted ones are the steps' accepted draft tokens.
TEST(Replay, AcceptanceCalibrationBinsEstimatesAgainstTheWalk) {
  const Trace t = make_trace(400);
  AnyDrafter oracle(OracleDrafter(t.output, 4, 3));
  AcceptanceCalibration calibration;
  const std::vector<Trace> traces = {t};
  const auto report = replay(oracle, traces, {.budget = 8, .record_steps = true}, &calibration);
  std::int64_t nodes = 0, accepted = 0, high = 0, high_accepted = 0, low = 0, low_accepted = 0;
  for (std::size_t k = 0; k < AcceptanceCalibration::kBins; ++k) {
    const auto& b = calibration.bins()[k];
    nodes += b.nodes, accepted += b.accepted;
    (k >= 5 ? high : low) += b.nodes;
    (k >= 5 ? high_accepted : low_accepted) += b.accepted;
    if (b.nodes > 0) {
      EXPECT_GE(b.estimated / static_cast<double>(b.nodes), static_cast<double>(k) / 10.0);
    }
  }
  std::int64_t walked = 0;
  for (const ReplayStep& step : report.overall.trajectories.at(0).steps) walked += step.accepted;
  EXPECT_EQ(nodes, report.overall.drafting.proposed_tokens);
  EXPECT_EQ(accepted, walked);
  EXPECT_GT(static_cast<double>(high_accepted), 0.9 * static_cast<double>(high));
  EXPECT_LT(static_cast<double>(low_accepted), 0.1 * static_cast<double>(low));

  struct Scored {  // proposes the true next two tokens, each scored 0.35
    OracleDrafter inner;
    void begin(std::span<const Token> p, References r) { inner.begin(p, r); }
    void propose(std::size_t budget, DraftTree& out) {
      DraftTree tmp;
      inner.propose(budget, tmp);
      std::vector<Token> path;
      for (std::int32_t u = tmp.node(0).first_child; u >= 0; u = tmp.node(u).first_child) path.push_back(tmp.node(u).token);
      out.insert(path, 0.35f);
    }
    void accept(std::span<const Token> tokens) { inner.accept(tokens); }
    std::string name() const { return "scored"; }
    void set_step_cost(const StepCost&) {}
  };
  AnyDrafter scored(Scored{OracleDrafter(t.output, 2, 0)});
  ASSERT_TRUE(scored.cost_aware());
  AcceptanceCalibration by_score;
  replay(scored, traces, {.budget = 8}, &by_score);
  for (std::size_t k = 0; k < AcceptanceCalibration::kBins; ++k) EXPECT_EQ(by_score.bins()[k].nodes > 0, k == 3) << "bin " << k;
  EXPECT_NEAR(by_score.bins()[3].estimated / static_cast<double>(by_score.bins()[3].nodes), 0.35, 1e-6);
  EXPECT_GT(by_score.bins()[3].accepted, by_score.bins()[3].nodes * 9 / 10);
}

TEST(Replay, MergedStepLogsKeepTracesSeparate) {
  std::vector<Trace> traces = {make_trace(10, "a"), make_trace(20, "b"), make_trace(30, "a"), make_trace(5)};
  for (std::size_t i = 0; i < traces.size(); ++i) traces[i].id = "t" + std::to_string(i);
  AnyDrafter none;
  const auto report = replay(none, traces, ReplayOptions{.budget = 64, .record_steps = true});
  ASSERT_EQ(report.overall.trajectories.size(), 4u);
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const TrajectoryLog& log = report.overall.trajectories[i];
    EXPECT_EQ(log.id, traces[i].id);  // input order
    ASSERT_EQ(log.steps.size(), traces[i].output.size());  // plain decoding: a token per step
    for (const ReplayStep& step : log.steps) {
      EXPECT_EQ(step.nodes, 0);
      EXPECT_EQ(step.emitted, 1);
    }
  }
  const auto& a = report.by_category.at("a").trajectories;
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].id, "t0");
  EXPECT_EQ(a[1].id, "t2");
  EXPECT_EQ(a[1].steps.size(), 30u);
  ASSERT_EQ(report.by_category.at("b").trajectories.size(), 1u);
  EXPECT_EQ(report.by_category.at("b").trajectories[0].id, "t1");
}

// Replaying a drafter is the same as driving it by hand with the true output.
TEST(Replay, PromptLookupAgreesWithAHandDrivenRun) {
  std::mt19937 rng(3);
  Trace t;
  for (int i = 0; i < 200; ++i) t.context.push_back(static_cast<Token>(rng() % 5));
  for (int i = 0; i < 300; ++i) t.output.push_back(static_cast<Token>(rng() % 5));
  AnyDrafter d(PromptLookupDrafter{});
  const auto st = replay_trace(d, t, ReplayOptions{.budget = 6});
  PromptLookupDrafter hand;
  hand.begin(t.context, {});
  std::int64_t steps = 0;
  for (std::size_t pos = 0; pos < t.output.size(); ++steps) {
    DraftTree tree;
    hand.propose(6, tree);
    const auto lin = tree.linearize(0, 6);
    std::size_t accepted = 0;  // prompt lookup proposes a chain
    while (accepted + 1 < static_cast<std::size_t>(lin.size()) && pos + accepted < t.output.size() &&
           lin.tokens[accepted + 1] == t.output[pos + accepted])
      ++accepted;
    const std::size_t emitted = std::min(accepted + 1, t.output.size() - pos);
    hand.accept(std::span<const Token>(t.output).subspan(pos, emitted));
    pos += emitted;
  }
  EXPECT_EQ(st.steps, steps);
  EXPECT_GT(st.tokens_per_step(), 1.0);
}

// Knows every trace's output (found by its context) and proposes the next `k` tokens of it, never
// past its end, each scored `score`: a cost-aware drafter whose estimates are exact at score 1.
class TraceOracle {
 public:
  TraceOracle(const std::vector<Trace>* traces, std::size_t k, float score = 1.0f) : traces_(traces), k_(k), score_(score) {}
  void begin(std::span<const Token> prompt, References) {
    output_ = nullptr;
    for (const Trace& t : *traces_)
      if (std::equal(prompt.begin(), prompt.end(), t.context.begin(), t.context.end())) output_ = &t.output;
    pos_ = 0;
  }
  void propose(std::size_t budget, DraftTree& out) {
    std::vector<Token> path;
    for (std::size_t i = 0; i < std::min(k_, budget) && pos_ + i < output_->size(); ++i) path.push_back((*output_)[pos_ + i]);
    if (!path.empty()) out.insert(path, score_);
  }
  void accept(std::span<const Token> tokens) { pos_ += tokens.size(); }
  void set_step_cost(const StepCost&) {}
  std::string name() const { return "trace-oracle"; }

 private:
  const std::vector<Trace>* traces_;
  std::size_t k_;
  float score_;
  const std::vector<Token>* output_ = nullptr;
  std::size_t pos_ = 0;
};

std::vector<Trace> batch_traces() {
  std::vector<Trace> traces;
  for (std::size_t i = 0; i < 5; ++i) {
    Trace t = make_trace(10 + 10 * i);
    t.context.push_back(static_cast<Token>(100 + i));  // each its own context
    traces.push_back(t);
  }
  return traces;
}

std::vector<AnyDrafter> oracles(const std::vector<Trace>& traces, std::size_t batch, std::size_t k, float score = 1.0f) {
  std::vector<AnyDrafter> d;
  for (std::size_t b = 0; b < batch; ++b) d.emplace_back(TraceOracle(&traces, k, score));
  return d;
}

// One slot decodes every trace: every token once, steps and rows as the policy implies; two slots
// keep the batch full and stop when one finds no trace left.
TEST(ReplayBatch, CountsTokensStepsAndRowsPerPolicy) {
  const std::vector<Trace> traces = batch_traces();
  std::int64_t total = 0, chunks_of_5 = 0;
  for (const Trace& t : traces) {
    total += static_cast<std::int64_t>(t.output.size());
    chunks_of_5 += static_cast<std::int64_t>((t.output.size() + 4) / 5);
  }
  auto d = oracles(traces, 1, 4);
  const BatchReplayStats plain = replay_batch(d, traces, 16, BatchPolicy::kPlain, StepCost::flat());
  EXPECT_EQ(plain.tokens, total);
  EXPECT_EQ(plain.steps, total);
  EXPECT_EQ(plain.rows, total);
  EXPECT_DOUBLE_EQ(plain.seconds, static_cast<double>(total));  // flat: one per step
  d = oracles(traces, 1, 4);
  const BatchReplayStats fixed = replay_batch(d, traces, 16, BatchPolicy::kFixed, StepCost::flat());
  EXPECT_EQ(fixed.tokens, total);
  EXPECT_EQ(fixed.sequence_steps, chunks_of_5);  // 4 drafts and the bonus per step
  EXPECT_EQ(fixed.rows, total);                  // the root and the 4 drafts of each 5 tokens (outputs of 10, 20, ... 50)
  EXPECT_EQ(fixed.expected_tokens, 0.0);
  // Under the flat cost the allocator keeps every node; its estimates are exact, so it expects
  // exactly what the walk produces.
  d = oracles(traces, 1, 4);
  const BatchReplayStats all = replay_batch(d, traces, 16, BatchPolicy::kAllocator, StepCost::flat());
  EXPECT_EQ(all.sequence_steps, fixed.sequence_steps);
  EXPECT_EQ(all.rows, fixed.rows);
  EXPECT_DOUBLE_EQ(all.expected_tokens, static_cast<double>(all.tokens));
  // Two slots: every step runs both; plain decoding yields one token per sequence step.
  d = oracles(traces, 2, 4);
  const BatchReplayStats two = replay_batch(d, traces, 16, BatchPolicy::kPlain, StepCost::flat());
  EXPECT_EQ(two.sequence_steps, 2 * two.steps);
  EXPECT_EQ(two.tokens, two.sequence_steps);
  EXPECT_LT(two.tokens, total);  // stopped when a slot found no trace left
  EXPECT_GE(two.tokens, total - 50);  // the longest trace, 50 tokens, is at most what the other slot left undone
  // Nodes estimated at 0.3 and rows a thousand times dearer than the step's fixed cost: nothing
  // pays, plain decoding (and it expects one token per sequence, as it gets).
  d = oracles(traces, 2, 4, 0.3f);
  const BatchReplayStats none = replay_batch(d, traces, 16, BatchPolicy::kAllocator, StepCost::affine(0.001, 1.0));
  EXPECT_EQ(none.rows, two.rows);
  EXPECT_EQ(none.sequence_steps, two.sequence_steps);
  EXPECT_DOUBLE_EQ(none.expected_tokens, static_cast<double>(none.tokens));
  std::vector<AnyDrafter> six = oracles(traces, 6, 4);
  EXPECT_THROW(replay_batch(six, traces, 16, BatchPolicy::kPlain, StepCost::flat()), ArgumentError);  // 5 traces
}

// Each category's tokens and seconds add up to the run's: a step's seconds shared by its
// sequences' rows. A price curve times the same steps (the drafts still chosen by the cost).
TEST(ReplayBatch, SharesTheSecondsByCategoryAndPricesAtTheCurveGiven) {
  std::vector<Trace> traces = batch_traces();
  for (std::size_t i = 0; i < traces.size(); ++i) traces[i].category = i % 2 == 0 ? "even" : "odd";
  for (const std::size_t batch : {1, 2}) {
    auto d = oracles(traces, batch, 4);
    const BatchReplayStats st = replay_batch(d, traces, 16, BatchPolicy::kFixed, StepCost::affine(1.0, 0.25));
    ASSERT_EQ(st.by_category.size(), 2u) << batch;
    std::int64_t tokens = 0;
    double seconds = 0.0;
    for (const auto& [category, share] : st.by_category) tokens += share.tokens, seconds += share.seconds;
    EXPECT_EQ(tokens, st.tokens) << batch;
    EXPECT_NEAR(seconds, st.seconds, 1e-9 * st.seconds) << batch;
  }
  // One slot: traces 0, 2, 4 (10, 30 and 50 tokens) are "even"; each step of 4 drafts costs 1 +
  // 0.25 * 5 rows, a last step of fewer rows less.
  auto d = oracles(traces, 1, 4);
  const BatchReplayStats one = replay_batch(d, traces, 16, BatchPolicy::kFixed, StepCost::affine(1.0, 0.25));
  EXPECT_EQ(one.by_category.at("even").tokens, 90);
  EXPECT_EQ(one.by_category.at("odd").tokens, 60);
  EXPECT_DOUBLE_EQ(one.by_category.at("even").seconds, 18 * 2.25);  // 90 tokens in steps of 5
  EXPECT_DOUBLE_EQ(one.by_category.at("odd").tokens_per_second(), 60.0 / (12 * 2.25));
  // Priced at another curve: the same steps, each at that curve's seconds.
  d = oracles(traces, 1, 4);
  const BatchReplayStats priced = replay_batch(d, traces, 16, BatchPolicy::kFixed, StepCost::affine(1.0, 0.25), 0.0, StepCost::affine(2.0, 0.0));
  EXPECT_EQ(priced.steps, one.steps);
  EXPECT_EQ(priced.rows, one.rows);
  EXPECT_DOUBLE_EQ(priced.seconds, 2.0 * static_cast<double>(one.steps));
  // The drafts follow the cost, not the price: rows a thousand times dearer than the step keep
  // the allocator at plain decoding, however cheap the price makes them.
  d = oracles(traces, 1, 4, 0.3f);
  const BatchReplayStats chosen = replay_batch(d, traces, 16, BatchPolicy::kAllocator, StepCost::affine(0.001, 1.0), 0.0, StepCost::affine(1.0, 0.0));
  EXPECT_EQ(chosen.rows, chosen.sequence_steps);
  EXPECT_DOUBLE_EQ(chosen.seconds, static_cast<double>(chosen.steps));
  EXPECT_THROW(replay_batch(d, traces, 16, BatchPolicy::kPlain, StepCost::flat(), 0.0, StepCost::affine(1.0, 0.0)), ArgumentError);
}

// The overhead per sequence beyond the first is charged per step, and makes rows relatively
// cheap: with it the allocator keeps the drafts a cost of rows alone refuses.
TEST(ReplayBatch, ChargesTheOverheadPerSequenceAndTheAllocatorSeesIt) {
  const std::vector<Trace> traces = batch_traces();
  auto d = oracles(traces, 3, 4);
  const BatchReplayStats plain = replay_batch(d, traces, 16, BatchPolicy::kPlain, StepCost::affine(1.0, 0.0), 0.5);
  auto p = oracles(traces, 3, 4);
  const BatchReplayStats again = replay_batch(p, traces, 16, BatchPolicy::kPlain, StepCost::affine(1.0, 0.0));
  // The same steps; each costs 1 + 0.5 for each of the 2 sequences beyond the first.
  EXPECT_EQ(plain.steps, again.steps);
  EXPECT_DOUBLE_EQ(plain.seconds - again.seconds, 1.0 * static_cast<double>(plain.steps));
  // Nodes estimated at 0.3 and a row costing 0.4 on top of a 0.1 step: no node pays for its row;
  // with 5 per sequence beyond the first, the rows are a small part of the step and they do.
  d = oracles(traces, 3, 4, 0.3f);
  const BatchReplayStats dear = replay_batch(d, traces, 16, BatchPolicy::kAllocator, StepCost::affine(0.1, 0.4));
  EXPECT_EQ(dear.rows, dear.sequence_steps);
  d = oracles(traces, 3, 4, 0.3f);
  const BatchReplayStats cheap = replay_batch(d, traces, 16, BatchPolicy::kAllocator, StepCost::affine(0.1, 0.4), 5.0);
  EXPECT_LT(cheap.sequence_steps, dear.sequence_steps);
  EXPECT_GT(cheap.rows, cheap.sequence_steps);
  std::vector<AnyDrafter> empty;
  EXPECT_THROW(replay_batch(empty, traces, 16, BatchPolicy::kPlain, StepCost::flat()), ArgumentError);
  EXPECT_THROW(replay_batch(d, traces, 16, BatchPolicy::kPlain, StepCost::affine(1.0, 0.0), -1.0), ArgumentError);
  EXPECT_THROW(replay_batch(d, traces, 16, BatchPolicy::kPlain, StepCost::flat(), 0.5), ArgumentError);
}

}  // namespace
