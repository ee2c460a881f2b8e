// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The step driver: the protocol around an engine's forward pass. A toy engine keeps each slot's
// cached tokens as its "KV cache" and answers every plan row with a deterministic function of the
// row's whole prefix (cached tokens, then the step rows its mask lists), so that anything the
// driver gets wrong about lengths, prefill, keep plans or slots changes the output.

#include "refdec/core/step_driver.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"

namespace {

using namespace refdec;

constexpr std::int64_t kVocab = 50;

// The target's greedy token after `prefix`: a function of its last two tokens and of its length's
// parity, so that text falls into short cycles (drafts get accepted) while every row's answer
// depends on its parent row and on its position.
Token target(const std::vector<Token>& prefix) {
  std::uint64_t h = 1469598103934665603ull ^ (prefix.size() % 2);
  for (std::size_t i = prefix.size() >= 2 ? prefix.size() - 2 : 0; i < prefix.size(); ++i)
    h = (h ^ static_cast<std::uint64_t>(prefix[i])) * 1099511628211ull;
  return static_cast<Token>(h % 7) + 3;  // ids 3..9; 0..2 never appear unless prompted
}

// An engine whose cache per slot is the list of cached tokens.
struct ToyEngine {
  std::vector<std::vector<Token>> caches;
  int forward_passes = 0;

  std::vector<Token> forward(const StepPlan& plan) {
    ++forward_passes;
    EXPECT_EQ(static_cast<std::size_t>(plan.batch()), caches.size());
    std::vector<Token> choices;
    for (std::int32_t b = 0; b < plan.batch(); ++b) {
      const auto& cache = caches[static_cast<std::size_t>(b)];
      EXPECT_EQ(plan.lengths[static_cast<std::size_t>(b)], static_cast<std::int64_t>(cache.size())) << "slot " << b;
      for (std::int32_t i = 0; i < plan.rows(b); ++i) {
        std::vector<Token> prefix = cache;
        for (std::int32_t j = 0; j <= i; ++j)
          if (plan.sees(b, i, j)) prefix.push_back(plan.tokens[static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + j)]);
        choices.push_back(target(prefix));
      }
    }
    return choices;
  }
  // Applies the keep plan of `plan`'s step, then drops the slots that left.
  void commit(const StepPlan& plan, const KeepPlan& keep, std::span<const std::size_t> left) {
    for (std::int32_t b = 0; b < keep.batch(); ++b) {
      for (const std::int32_t row : keep.kept(b))
        caches[static_cast<std::size_t>(b)].push_back(plan.tokens[static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + row)]);
      EXPECT_EQ(static_cast<std::int64_t>(caches[static_cast<std::size_t>(b)].size()), keep.lengths[static_cast<std::size_t>(b)]);
    }
    for (const std::size_t slot : left) caches.erase(caches.begin() + static_cast<std::ptrdiff_t>(slot));
  }
};

// Plain greedy decoding of the target, token by token.
std::vector<Token> plain(std::vector<Token> sequence, std::size_t new_tokens, const std::vector<Token>& stops = {}) {
  std::vector<Token> out;
  while (out.size() < new_tokens) {
    const Token t = target(sequence);
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) break;
    out.push_back(t);
    sequence.push_back(t);
  }
  return out;
}

// Runs `driver` to the end over `engine`; returns each id's output and finish reason.
struct Outcome {
  std::map<RequestId, std::vector<Token>> tokens;
  std::map<RequestId, FinishReason> finish;
  std::map<RequestId, std::string> errors;  // RequestUpdate::error, where one was given
};
// Runs the driver to the end with greedy acceptance, `between_steps` called after each step's
// updates are read.
void run(StepDriver& driver, ToyEngine& engine, Outcome& out, const std::function<void()>& between_steps = {}) {
  while (!driver.idle()) {
    if (driver.prepare()) {
      driver.complete_greedy(engine.forward(driver.plan()));
      engine.commit(driver.plan(), driver.keep(), driver.left());
      ASSERT_EQ(engine.caches.size(), driver.active());
    }
    for (const RequestUpdate& u : driver.updates()) {
      out.tokens[u.id].insert(out.tokens[u.id].end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) out.finish[u.id] = *u.finished;
      if (!u.error.empty()) out.errors[u.id] = u.error;
    }
    if (between_steps) between_steps();
  }
}

// complete_walk() with a lazy chooser (the target computed only at the rows the walk asks for):
// each row asked at most once, tree rows with their depth, the lookahead window's auxiliary rows
// with depth -1, prefilling sequences never; the outputs equal plain greedy decoding.
TEST(StepDriver, CompleteWalkAsksEachRowOnceAndGivesPlainGreedyDecoding) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 64, .prefill_chunk = 2});
  ToyEngine engine;
  const std::vector<std::vector<Token>> prompts = {{1, 4, 5, 6, 4, 5}, {1, 9, 9}};
  driver.add(prompts[0], {}, {.max_new_tokens = 24, .budget = 8}, LlmaDrafter({.min_match = 1, .continuation = 8, .self_reference = true}));
  driver.add(prompts[1], {}, {.max_new_tokens = 24, .budget = 8}, LookaheadDrafter({.window = 3, .ngram = 3, .guesses = 3}));
  engine.caches.resize(2);
  Outcome out;
  std::int64_t asked_aux = 0, asked_tree = 0;
  while (!driver.idle()) {
    if (driver.prepare()) {
      const StepPlan& plan = driver.plan();
      const std::vector<Token> choices = engine.forward(plan);
      std::vector<int> asked(static_cast<std::size_t>(plan.rows()), 0);
      driver.complete_walk([&](std::int32_t slot, std::int32_t row, std::int32_t depth) {
        EXPECT_FALSE(driver.prefill()[static_cast<std::size_t>(slot)]) << "a prefilling sequence was asked";
        EXPECT_GE(row, plan.indptr[static_cast<std::size_t>(slot)]);
        EXPECT_LT(row, plan.indptr[static_cast<std::size_t>(slot) + 1]);
        const bool aux = row - plan.indptr[static_cast<std::size_t>(slot)] >= plan.num_nodes[static_cast<std::size_t>(slot)];
        EXPECT_EQ(depth < 0, aux) << "row " << row;
        ++(aux ? asked_aux : asked_tree);
        EXPECT_EQ(++asked[static_cast<std::size_t>(row)], 1) << "row " << row << " asked twice";
        return choices[static_cast<std::size_t>(row)];
      });
      engine.commit(plan, driver.keep(), driver.left());
    }
    for (const RequestUpdate& u : driver.updates()) out.tokens[u.id].insert(out.tokens[u.id].end(), u.tokens.begin(), u.tokens.end());
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out.tokens[static_cast<RequestId>(i)], plain(prompts[i], 24)) << "sequence " << i;
  EXPECT_GT(asked_aux, 0) << "the lookahead window's rows were never asked for";
  EXPECT_GT(asked_tree, 0);
  refdec_test::expect_error([&] { driver.complete_walk([](std::int32_t, std::int32_t, std::int32_t) { return Token{0}; }); },
                            "no prepared step");
}

// Sequences with drafters of every kind (copying, lookahead window, none), chunked prefill,
// joining and leaving at different times: each output equals plain greedy decoding.
TEST(StepDriver, EveryDrafterGivesPlainGreedyDecoding) {
  for (const std::int64_t chunk : {0, 1, 3}) {
    StepDriver driver({.vocab_size = kVocab, .max_context = 64, .prefill_chunk = chunk});
    ToyEngine engine;
    const std::vector<std::vector<Token>> prompts = {{1}, {1, 4, 5, 6, 7, 8, 9}, {1, 9, 9}, {1, 3, 4, 3, 4, 3}};
    Outcome out;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      AnyDrafter drafter = i == 2 ? AnyDrafter(LookaheadDrafter({.window = 3, .ngram = 3, .guesses = 3}))
                         : i == 3 ? AnyDrafter{}
                                  : AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .self_reference = true}));
      const RequestId id = driver.add(prompts[i], {}, {.max_new_tokens = 20 + 5 * static_cast<std::int64_t>(i), .budget = 8}, std::move(drafter));
      EXPECT_EQ(id, static_cast<RequestId>(i));
      engine.caches.emplace_back();
      if (i == 1) {  // one step before the others join
        ASSERT_TRUE(driver.prepare());
        driver.complete_greedy(engine.forward(driver.plan()));
        engine.commit(driver.plan(), driver.keep(), driver.left());
        for (const RequestUpdate& u : driver.updates()) out.tokens[u.id].insert(out.tokens[u.id].end(), u.tokens.begin(), u.tokens.end());
      }
    }
    run(driver, engine, out);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(out.tokens[static_cast<RequestId>(i)], plain(prompts[i], 20 + 5 * i)) << "sequence " << i << " chunk " << chunk;
      EXPECT_EQ(out.finish[static_cast<RequestId>(i)], FinishReason::kMaxNewTokens);
    }
    const StepDriverStats& st = driver.stats();
    EXPECT_EQ(st.tokens, 20 + 25 + 30 + 35);
    EXPECT_GT(st.tokens_per_step(), 1.2) << "drafts were accepted";
    EXPECT_EQ(st.prefill_tokens, 6 + 2 + 5);
    EXPECT_GT(st.auxiliary_tokens, 0);
    EXPECT_EQ(st.drafting.accepted_tokens, st.tokens - st.steps);
    EXPECT_LT(engine.forward_passes, st.steps);
  }
}

// Stop tokens (not emitted), the context, cancellation and a zero token limit: each finishes
// with its reason, and the slots left are reported in decreasing order.
TEST(StepDriver, FinishesSequencesWithTheirReasons) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 12, .prefill_chunk = 0});
  ToyEngine engine;
  const std::vector<Token> p = {1, 4, 5};
  const std::vector<Token> first = plain(p, 9);
  const RequestId stop = driver.add(p, {}, {.max_new_tokens = 50, .stop_tokens = {first[2]}, .budget = 4});
  const RequestId context = driver.add(p, {}, {.max_new_tokens = 50, .budget = 4});
  const RequestId cancelled = driver.add(p, {}, {.max_new_tokens = 50, .budget = 4});
  const RequestId nothing = driver.add(p, {}, {.max_new_tokens = 0});
  EXPECT_EQ(driver.active(), 3u);
  engine.caches.resize(3);
  EXPECT_EQ(driver.cancel(cancelled), std::optional<std::size_t>(2));
  EXPECT_EQ(driver.cancel(cancelled), std::nullopt);
  engine.caches.pop_back();
  Outcome out;
  run(driver, engine, out);
  EXPECT_EQ(out.finish[stop], FinishReason::kStopToken);
  EXPECT_EQ(out.tokens[stop], plain(p, 50, {first[2]}));  // what precedes the stop token's first appearance
  EXPECT_EQ(out.finish[context], FinishReason::kMaxContext);
  EXPECT_EQ(out.tokens[context], plain(p, 9));  // 3 + 9 = the context of 12
  EXPECT_EQ(out.finish[cancelled], FinishReason::kCancelled);
  EXPECT_TRUE(out.tokens[cancelled].empty());
  EXPECT_EQ(out.finish[nothing], FinishReason::kMaxNewTokens);
  refdec_test::expect_error([&] { driver.output(stop); }, "no active request");
}

// A drafter told when its sequence ends; the caller's drafter keeps its statistics.
struct EndingDrafter {
  std::shared_ptr<std::vector<std::string>> calls = std::make_shared<std::vector<std::string>>();
  void begin(std::span<const Token>, References) { calls->push_back("begin"); }
  void propose(std::size_t, DraftTree&) {}
  void accept(std::span<const Token>) { calls->push_back("accept"); }
  void finish() { calls->push_back("finish"); }
  std::string name() const { return "ending"; }
};

TEST(StepDriver, EndsDraftersSequencesAndKeepsCallerStatistics) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 32});
  ToyEngine engine;
  EndingDrafter ending;
  AnyDrafter drafter(ending);
  for (int round = 0; round < 2; ++round) {
    driver.add({1, 4}, {}, {.max_new_tokens = 2}, &drafter);
    engine.caches.emplace_back();
    Outcome out;
    run(driver, engine, out);
  }
  EXPECT_EQ(*ending.calls, (std::vector<std::string>{"begin", "accept", "accept", "finish", "begin", "accept", "accept", "finish"}));
  EXPECT_EQ(drafter.stats().steps, 4);
  EXPECT_EQ(driver.stats().drafting.steps, 4);
}

// A drafter that throws from propose() once its sequence has `fail_after` output tokens.
struct FailingDrafter {
  std::size_t fail_after = 0, seen = 0;
  void begin(std::span<const Token>, References) { seen = 0; }
  void propose(std::size_t, DraftTree&) {
    if (seen >= fail_after) throw Error("failing drafter: out of ideas");
  }
  void accept(std::span<const Token> tokens) { seen += tokens.size(); }
  std::string name() const { return "failing"; }
};

// The same sequences drafted on 1, 2 and 5 threads: the same plan at every step (tokens, masks,
// positions), the same outputs, each equal to plain greedy decoding.
TEST(StepDriver, DraftsOnThreadsAsOnOne) {
  std::vector<std::vector<Token>> prompts;
  for (Token i = 0; i < 24; ++i) prompts.push_back({1, static_cast<Token>(3 + i % 7), static_cast<Token>(3 + (i * 5) % 7), 4, 5});
  std::vector<std::vector<std::vector<Token>>> plans_by_threads;
  for (const std::int64_t threads : {1, 2, 5}) {
    StepDriver driver({.vocab_size = kVocab, .max_context = 64, .prefill_chunk = 2, .drafting_threads = threads});
    ToyEngine engine;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      AnyDrafter drafter = i % 3 == 0 ? AnyDrafter(LookaheadDrafter({.window = 3, .ngram = 3, .guesses = 3}))
                                      : AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .self_reference = true}));
      driver.add(prompts[i], {}, {.max_new_tokens = 10 + static_cast<std::int64_t>(i % 5) * 4, .budget = 8}, std::move(drafter));
      engine.caches.emplace_back();
    }
    std::vector<std::vector<Token>> plans;  // per step: its tokens, positions and parents
    Outcome out;
    while (!driver.idle()) {
      if (driver.prepare()) {
        const StepPlan& plan = driver.plan();
        plans.push_back(plan.tokens);
        for (const auto p : plan.positions) plans.back().push_back(static_cast<Token>(p));
        for (std::int32_t b = 0; b < plan.batch(); ++b)
          for (std::int32_t r = 0; r < plan.rows(b); ++r)
            for (std::int32_t c = 0; c <= r; ++c) plans.back().push_back(plan.sees(b, r, c) ? 1 : 0);
        driver.complete_greedy(engine.forward(plan));
        engine.commit(plan, driver.keep(), driver.left());
      }
      for (const RequestUpdate& u : driver.updates()) out.tokens[u.id].insert(out.tokens[u.id].end(), u.tokens.begin(), u.tokens.end());
    }
    for (std::size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(out.tokens[static_cast<RequestId>(i)], plain(prompts[i], 10 + (i % 5) * 4)) << "sequence " << i << ", threads " << threads;
    EXPECT_GT(driver.stats().tokens_per_step(), 1.2) << "drafts were accepted";
    plans_by_threads.push_back(std::move(plans));
  }
  EXPECT_EQ(plans_by_threads[1], plans_by_threads[0]) << "2 threads";
  EXPECT_EQ(plans_by_threads[2], plans_by_threads[0]) << "5 threads";
}

// A drafter failing on a worker thread: the error names its request and reaches the caller; the
// driver's threads stay usable for the next driver call.
TEST(StepDriver, ReportsADrafterErrorFromAThread) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 64, .drafting_threads = 3});
  // One-token prompts: the first step drafts (a longer prompt's first step prefills).
  for (int i = 0; i < 5; ++i) driver.add({1}, {}, {.max_new_tokens = 20}, AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 4, .self_reference = true})));
  driver.add({1}, {}, {.max_new_tokens = 20}, AnyDrafter(FailingDrafter{.fail_after = 0}));
  refdec_test::expect_error([&] { driver.prepare(); }, "request 5: failing drafter: out of ideas");
  EXPECT_TRUE(driver.cancel(5).has_value());
  ToyEngine engine;
  engine.caches.resize(5);
  Outcome out;
  run(driver, engine, out);
  for (RequestId id = 0; id < 5; ++id) EXPECT_EQ(out.tokens[id], plain({1}, 20)) << "request " << id;
}

// A cost-aware drafter proposing a fixed chain whose nodes all score `p` (its estimate of their
// acceptance); records the costs it is given.
struct ScoredChain {
  float p = 1.0f;
  std::shared_ptr<std::vector<bool>> given_flat = std::make_shared<std::vector<bool>>();
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t budget, DraftTree& out) {
    const std::vector<Token> chain{5, 6, 7, 8};
    out.insert(std::span<const Token>(chain).first(std::min<std::size_t>(budget, chain.size())), p);
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return "scored-chain"; }
  void set_step_cost(const StepCost& cost) { given_flat->push_back(cost.is_flat()); }
};

// With a batch cost, a step's draft nodes go where they pay across the batch: the sure chain keeps
// its nodes (up to its sequence's budget), the unlikely one loses them, the drafters (given the
// flat cost) record what was verified; the flat cost keeps everything.
TEST(StepDriver, BatchBudgetSpendsTheStepWhereItPays) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 64});
  ScoredChain sure{.p = 0.99f}, unlikely{.p = 0.05f}, capped{.p = 0.99f};
  AnyDrafter a(sure), b(unlikely), c(capped);
  driver.add({1}, {}, {.budget = 8}, &a);
  driver.add({1}, {}, {.budget = 8}, &b);
  driver.add({1}, {}, {.budget = 2}, &c);
  EXPECT_FALSE(driver.batch_cost().has_value());
  driver.set_batch_cost(StepCost::affine(1.0, 0.1));
  ASSERT_TRUE(driver.prepare());
  EXPECT_EQ(driver.plan().num_nodes, (std::vector<std::int32_t>{5, 1, 3}));  // roots included
  EXPECT_EQ(*sure.given_flat, std::vector<bool>{true});
  EXPECT_EQ(a.stats().proposed_tokens, 4);
  EXPECT_EQ(b.stats().proposed_tokens, 0);
  EXPECT_EQ(b.stats().steps, 1);
  EXPECT_EQ(c.stats().proposed_tokens, 2);
  ToyEngine engine;
  engine.caches.resize(3);
  driver.complete_greedy(engine.forward(driver.plan()));
  engine.commit(driver.plan(), driver.keep(), driver.left());
  driver.set_batch_cost(StepCost::flat());
  ASSERT_TRUE(driver.prepare());
  EXPECT_EQ(driver.plan().num_nodes, (std::vector<std::int32_t>{5, 5, 3}));
  driver.set_batch_cost(std::nullopt);  // each drafter its own: these draft to their budgets
  driver.complete_greedy(engine.forward(driver.plan()));
  engine.commit(driver.plan(), driver.keep(), driver.left());
  ASSERT_TRUE(driver.prepare());
  EXPECT_EQ(driver.plan().num_nodes, (std::vector<std::int32_t>{5, 5, 3}));
  EXPECT_EQ(sure.given_flat->size(), 2u);  // not given a cost without a batch cost
}

// Drafters of every kind under a batch cost: each output equals plain greedy decoding, and the
// drafters' statistics count exactly the nodes the steps verified.
TEST(StepDriver, BatchBudgetGivesPlainGreedyDecoding) {
  for (const double per_token : {0.0, 0.02, 0.5}) {
    StepDriver driver({.vocab_size = kVocab, .max_context = 64, .prefill_chunk = 2});
    driver.set_batch_cost(per_token == 0.0 ? StepCost::flat() : StepCost::affine(1.0, per_token));
    ToyEngine engine;
    const std::vector<std::vector<Token>> prompts = {{1}, {1, 4, 5, 6, 7, 8, 9}, {1, 9, 9}, {1, 3, 4, 3, 4, 3}};
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      AnyDrafter drafter = i == 2 ? AnyDrafter(LookaheadDrafter({.window = 3, .ngram = 3, .guesses = 3}))
                                  : AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .self_reference = true}));
      driver.add(prompts[i], {}, {.max_new_tokens = 24, .budget = 8}, std::move(drafter));
      engine.caches.emplace_back();
    }
    Outcome out;
    std::int64_t verified = 0;
    while (!driver.idle()) {
      if (driver.prepare()) {
        for (std::int32_t b = 0; b < driver.plan().batch(); ++b)
          if (!driver.prefill()[static_cast<std::size_t>(b)]) verified += driver.plan().num_nodes[static_cast<std::size_t>(b)] - 1;
        driver.complete_greedy(engine.forward(driver.plan()));
        engine.commit(driver.plan(), driver.keep(), driver.left());
      }
      for (const RequestUpdate& u : driver.updates()) out.tokens[u.id].insert(out.tokens[u.id].end(), u.tokens.begin(), u.tokens.end());
    }
    for (std::size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(out.tokens[static_cast<RequestId>(i)], plain(prompts[i], 24)) << "sequence " << i << " cost " << per_token;
    EXPECT_EQ(driver.stats().drafting.proposed_tokens, verified);
    if (per_token == 0.0) {
      EXPECT_GT(driver.stats().tokens_per_step(), 1.2);
    }
  }
}

TEST(StepDriver, RejectsBadInputNamingIt) {
  refdec_test::expect_error([] { StepDriver({.vocab_size = 8, .max_context = 8, .drafting_threads = 0}); }, "drafting_threads must be 1 to 256, got 0");
  refdec_test::expect_error([] { StepDriver({.vocab_size = 0, .max_context = 8}); }, "vocab_size must be positive");
  refdec_test::expect_error([] { StepDriver({.vocab_size = 8, .max_context = 0}); }, "max_context must be positive");
  StepDriver driver({.vocab_size = kVocab, .max_context = 8});
  refdec_test::expect_error([&] { driver.add({}, {}, {}); }, "the prompt is empty");
  refdec_test::expect_error([&] { driver.add({1, 50}, {}, {}); }, "prompt token 1 has id 50 outside the vocabulary [0, 50)");
  const std::vector<std::vector<Token>> refs = {{1, -1}};
  refdec_test::expect_error([&] { driver.add({1}, refs, {}); }, "reference 0 token 1 has id -1");
  refdec_test::expect_error([&] { driver.add(std::vector<Token>(8, 1), {}, {}); }, "leaves no room in a context of 8");
  refdec_test::expect_error([&] { driver.add({1}, {}, {.max_new_tokens = -1}); }, "max_new_tokens must be >= 0");
  refdec_test::expect_error([&] { driver.add({1}, {}, {.budget = -2}); }, "budget must be 0 to 4096, got -2");
  refdec_test::expect_error([&] { driver.add({1}, {}, {.budget = 100000}); }, "budget must be 0 to 4096, got 100000");
  EXPECT_EQ(driver.active(), 0u);
  {  // a caller's drafter follows one sequence at a time
    StepDriver other({.vocab_size = kVocab, .max_context = 8});
    AnyDrafter shared(LlmaDrafter(LlmaOptions{}));
    other.add({1}, {}, {}, &shared);
    refdec_test::expect_error([&] { other.add({1}, {}, {}, &shared); }, "add: the drafter is in use by request 0");
    EXPECT_EQ(other.active(), 1u);
  }
  const RequestId id = driver.add({1}, {}, {});
  ASSERT_TRUE(driver.prepare());
  refdec_test::expect_error([&] { driver.complete_greedy(std::vector<Token>(3, 4)); }, "3 choices for a plan of 1 rows");
  refdec_test::expect_error([&] { driver.complete({}, {}); }, "0 acceptances");
  // A target outside the vocabulary never becomes output, and the step can still complete.
  refdec_test::expect_error([&] { driver.complete_greedy(std::vector<Token>{-1}); }, "sequence 0 accepted token 0 has id -1 outside the vocabulary [0, 50)");
  refdec_test::expect_error([&] { driver.complete_greedy(std::vector<Token>{kVocab}); }, "has id 50 outside the vocabulary");
  EXPECT_TRUE(driver.output(id).empty());
  driver.complete_greedy(std::vector<Token>{7});
  EXPECT_EQ(driver.output(id), std::vector<Token>{7});
}

// A drafter that drafts nothing and throws where it is told to: in accept() once it has seen
// `accept_fails_after` tokens, or in finish().
struct ThrowingDrafter {
  std::size_t accept_fails_after = 1000;
  bool finish_fails = false;
  std::size_t seen = 0;
  void begin(std::span<const Token>, References) { seen = 0; }
  void propose(std::size_t, DraftTree&) {}
  void accept(std::span<const Token> tokens) {
    seen += tokens.size();
    if (seen > accept_fails_after) throw Error("throwing drafter: cannot take more");
  }
  void finish() {
    if (finish_fails) throw Error("throwing drafter: cannot finish");
  }
  std::string name() const { return "throwing"; }
};

// The prepared step is one state for every surface: completed once, add() and cancel() refused
// while it is open, prepare() again discards it; a refused call changes nothing.
TEST(StepDriver, APreparedStepCompletesOnceAndHoldsItsSequences) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 32});
  ToyEngine engine;
  const RequestId a = driver.add({1}, {}, {.max_new_tokens = 8});
  engine.caches.resize(1);
  EXPECT_FALSE(driver.step_prepared());
  refdec_test::expect_error([&] { driver.complete_greedy(std::vector<Token>{4}); }, "complete_greedy: no prepared step");
  ASSERT_TRUE(driver.prepare());
  EXPECT_TRUE(driver.step_prepared());
  refdec_test::expect_error([&] { driver.add({1}, {}, {}); }, "add: a step is prepared; complete it first");
  refdec_test::expect_error([&] { driver.cancel(a); }, "cancel: a step is prepared; complete it first");
  EXPECT_EQ(driver.active(), 1u);
  ASSERT_TRUE(driver.prepare());  // discards the open step, prepares the same again
  const auto choices = engine.forward(driver.plan());
  driver.complete_greedy(choices);
  EXPECT_FALSE(driver.step_prepared());
  refdec_test::expect_error([&] { driver.complete_greedy(choices); }, "complete_greedy: no prepared step (prepare() first; each step completes once)");
  std::vector<Acceptance> again(1);
  refdec_test::expect_error([&] { driver.complete(again, {}); }, "complete: no prepared step");
  refdec_test::expect_error([&] { driver.complete_walk([](std::int32_t, std::int32_t, std::int32_t) { return Token{4}; }); },
                            "complete_walk: no prepared step");
  EXPECT_EQ(driver.output(a).size(), 1u) << "the step's tokens were appended once";
}

// An acceptance the tree cannot give is refused before anything changes, and the step stays
// prepared: no tokens, the wrong node tokens, a node outside the draft.
TEST(StepDriver, RefusesAnAcceptanceItsTreeCannotGive) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 32});
  const RequestId id = driver.add({1, 4, 5, 6, 4, 5}, {}, {.max_new_tokens = 8, .budget = 4}, LlmaDrafter({.min_match = 1, .continuation = 4, .self_reference = true}));
  ToyEngine engine;
  engine.caches.resize(1);
  ASSERT_TRUE(driver.prepare());  // the prompt's prefill
  driver.complete_greedy(engine.forward(driver.plan()));
  engine.commit(driver.plan(), driver.keep(), driver.left());
  ASSERT_TRUE(driver.prepare());
  ASSERT_GT(driver.plan().num_nodes[0], 1) << "the prompt repeats itself: LLMA drafts";
  std::vector<Acceptance> empty(1);
  refdec_test::expect_error([&] { driver.complete(empty, {}); }, "complete: sequence 0 accepts 0 nodes with 0 tokens (want one more");
  std::vector<Acceptance> wrong(1);
  wrong[0].nodes = {1};
  wrong[0].tokens = {driver.plan().tokens[1] == 3 ? Token{4} : Token{3}, 7};
  refdec_test::expect_error([&] { driver.complete(wrong, {}); }, "complete: sequence 0 accepts node 1 with token");
  std::vector<Acceptance> outside(1);
  outside[0].nodes = {99};
  outside[0].tokens = {3, 7};
  refdec_test::expect_error([&] { driver.complete(outside, {}); }, "accepts node 99, outside its draft");
  EXPECT_TRUE(driver.step_prepared());
  EXPECT_TRUE(driver.output(id).empty());
  driver.complete_greedy(engine.forward(driver.plan()));
  EXPECT_FALSE(driver.output(id).empty());
}

// A drafter that throws after the step ends its own sequence, with the error in its report; the
// other sequences go on to plain greedy decoding. A finish() that throws still lets its sequence
// leave, whether it ends by its limit or by cancel().
TEST(StepDriver, ADrafterThatThrowsEndsOnlyItsOwnSequence) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 64});
  const RequestId good = driver.add({1}, {}, {.max_new_tokens = 12}, LlmaDrafter({.min_match = 1, .continuation = 4, .self_reference = true}));
  const RequestId bad_accept = driver.add({1}, {}, {.max_new_tokens = 12}, ThrowingDrafter{.accept_fails_after = 3});
  const RequestId bad_finish = driver.add({1}, {}, {.max_new_tokens = 5}, ThrowingDrafter{.finish_fails = true});
  const RequestId cancelled = driver.add({1}, {}, {.max_new_tokens = 12}, ThrowingDrafter{.finish_fails = true});
  ToyEngine engine;
  engine.caches.resize(4);
  Outcome out;
  run(driver, engine, out, [&] {
    if (out.tokens[cancelled].size() >= 2 && driver.active() == 4) {
      const auto slot = driver.cancel(cancelled);
      ASSERT_TRUE(slot.has_value());
      engine.caches.erase(engine.caches.begin() + static_cast<std::ptrdiff_t>(*slot));
    }
  });
  auto& errors = out.errors;
  EXPECT_EQ(out.tokens[good], plain({1}, 12));
  EXPECT_EQ(out.finish[good], FinishReason::kMaxNewTokens);
  EXPECT_FALSE(errors.count(good));
  EXPECT_EQ(out.finish[bad_accept], FinishReason::kDrafterError);
  EXPECT_EQ(out.tokens[bad_accept], plain({1}, 4)) << "the failing step's token is reported";
  EXPECT_NE(errors[bad_accept].find("its drafter failed after the step: throwing drafter: cannot take more"), std::string::npos)
      << errors[bad_accept];
  EXPECT_EQ(out.finish[bad_finish], FinishReason::kMaxNewTokens);
  EXPECT_EQ(out.tokens[bad_finish], plain({1}, 5));
  EXPECT_NE(errors[bad_finish].find("its drafter's finish() failed: throwing drafter: cannot finish"), std::string::npos);
  EXPECT_EQ(out.finish[cancelled], FinishReason::kCancelled);
  EXPECT_NE(errors[cancelled].find("cannot finish"), std::string::npos);
}

// A prepare() that fails keeps the reports of sequences that left between steps for the next one,
// and counts nothing of the step it did not prepare.
TEST(StepDriver, AFailedPrepareLosesNoReport) {
  StepDriver driver({.vocab_size = kVocab, .max_context = 64});
  const RequestId leaving = driver.add({1}, {}, {.max_new_tokens = 4});
  const RequestId failing = driver.add({1}, {}, {.max_new_tokens = 4}, FailingDrafter{.fail_after = 0});
  const RequestId prefilling = driver.add({1, 3, 4, 5}, {}, {.max_new_tokens = 4});
  ASSERT_TRUE(driver.cancel(leaving).has_value());
  const std::int64_t prefill_before = driver.stats().prefill_tokens;
  refdec_test::expect_error([&] { driver.prepare(); }, "request 1: failing drafter");
  EXPECT_FALSE(driver.step_prepared());
  EXPECT_EQ(driver.stats().prefill_tokens, prefill_before);
  ASSERT_TRUE(driver.cancel(failing).has_value());
  ASSERT_TRUE(driver.prepare());
  std::vector<RequestId> reported;
  for (const RequestUpdate& u : driver.updates()) reported.push_back(u.id);
  EXPECT_EQ(reported, (std::vector<RequestId>{leaving, failing}));
  EXPECT_EQ(driver.id(0), prefilling);
}

TEST(StepDriver, RefusesMoreDraftingThreadsThanItsPoolRuns) {
  refdec_test::expect_error([] { StepDriver({.vocab_size = 8, .max_context = 8, .drafting_threads = 40000}); },
                            "drafting_threads must be 1 to 256, got 40000");
}

}  // namespace
