// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/drafters/history.hpp"
#include "refdec/drafters/prompt_lookup.hpp"

#include <gtest/gtest.h>

#include "common/expect_error.hpp"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"

namespace {

using namespace refdec;
using Texts = std::vector<std::vector<Token>>;

Texts outputs_of(const OutputHistory& h) {
  Texts out;
  h.append_to(out);
  return out;
}

TEST(OutputHistory, KeepsTheNewestOutputsWithinItsBound) {
  OutputHistory h(10);
  EXPECT_EQ(h.max_tokens(), 10u);
  h.add(std::vector<Token>{1, 2, 3, 4});
  h.add(std::vector<Token>{});  // ignored
  h.add(std::vector<Token>{5, 6, 7, 8});
  EXPECT_EQ(outputs_of(h), (Texts{{1, 2, 3, 4}, {5, 6, 7, 8}}));
  h.add(std::vector<Token>{9, 10, 11});  // 11 tokens would not fit: the oldest goes
  EXPECT_EQ(outputs_of(h), (Texts{{5, 6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(h.size(), 2u);
  EXPECT_EQ(h.tokens(), 7u);
  std::vector<Token> long_output;
  for (Token t = 0; t < 25; ++t) long_output.push_back(t);
  h.add(long_output);  // longer than the bound: its last 10 tokens, alone
  EXPECT_EQ(outputs_of(h), (Texts{{15, 16, 17, 18, 19, 20, 21, 22, 23, 24}}));
  EXPECT_EQ(h.tokens(), 10u);
  Texts out{{42}};
  h.append_to(out);  // appends after what `out` holds
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], std::vector<Token>{42});
}

TEST(OutputHistory, RejectsBadInputNamingIt) {
  refdec_test::expect_error([] { OutputHistory(0); }, "max_tokens must be in [1, 67108864], got 0");
  refdec_test::expect_error([] { OutputHistory(OutputHistory::kMaxTokens + 1); }, "got 67108865");
  OutputHistory h;
  EXPECT_EQ(h.max_tokens(), OutputHistory::kDefaultMaxTokens);
  refdec_test::expect_error([&] { h.add(std::vector<Token>{3, -1}); }, "token ids must be non-negative, got -1");
  EXPECT_EQ(h.size(), 0u);  // nothing of a rejected output is kept
}

TEST(OutputHistory, IsSharedByThreadsThatAddAndRead) {
  OutputHistory h(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 200; ++i) {
        h.add(std::vector<Token>{t, i, t});
        Texts seen;
        h.append_to(seen);
        for (const auto& o : seen) ASSERT_EQ(o.size(), 3u);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(h.tokens(), 999u);  // 333 outputs of 3 tokens fit in 1000
  EXPECT_EQ(h.size(), 333u);
}

// Records what it was begun with and proposes a fixed path.
struct RecordingDrafter {
  std::shared_ptr<std::vector<Texts>> begun = std::make_shared<std::vector<Texts>>();
  std::shared_ptr<std::vector<Token>> accepted = std::make_shared<std::vector<Token>>();
  void begin(std::span<const Token>, References references) {
    Texts& texts = begun->emplace_back();
    for (const std::span<const Token> r : references) texts.emplace_back(r.begin(), r.end());
  }
  void propose(std::size_t budget, DraftTree& out) {
    out.insert(std::vector<Token>{7, 8}, 1.0f);
    out.prune(budget);
  }
  void accept(std::span<const Token> tokens) { accepted->insert(accepted->end(), tokens.begin(), tokens.end()); }
  std::string name() const { return "rec"; }
  std::size_t last_match() const { return 3; }
};

TEST(HistoryDrafter, GivesTheInnerDrafterTheEarlierOutputsAfterTheReferences) {
  const auto history = std::make_shared<OutputHistory>();
  RecordingDrafter inner;
  const auto begun = inner.begun;
  HistoryDrafter d(AnyDrafter(inner), history);
  EXPECT_EQ(d.name(), "history(rec)");
  EXPECT_EQ(d.history(), history);
  const Texts refs{{100, 101}};
  d.begin(std::vector<Token>{1}, refs);
  EXPECT_EQ(begun->back(), refs);  // nothing written yet
  DraftTree out;
  d.propose(8, out);
  EXPECT_EQ(out.size(), 2u);  // the inner drafter's proposal
  EXPECT_EQ(d.last_match(), 3u);
  d.accept(std::vector<Token>{7, 8, 5});
  d.accept(std::vector<Token>{6});
  EXPECT_EQ(history->size(), 0u);  // the sequence is still running
  d.begin(std::vector<Token>{2}, refs);  // the first sequence ended
  EXPECT_EQ(begun->back(), (Texts{{100, 101}, {7, 8, 5, 6}}));
  d.accept(std::vector<Token>{4});
  d.finish();
  d.finish();  // once
  EXPECT_EQ(outputs_of(*history), (Texts{{7, 8, 5, 6}, {4}}));
  d.begin(std::vector<Token>{3}, {});
  EXPECT_EQ(begun->back(), (Texts{{7, 8, 5, 6}, {4}}));
}

TEST(HistoryDrafter, AddsItsOutputAtFinishOnlyWhateverItWasMovedThrough) {
  const auto history = std::make_shared<OutputHistory>();
  {
    HistoryDrafter d(AnyDrafter(RecordingDrafter{}), history);
    d.begin(std::vector<Token>{1}, {});
    d.accept(std::vector<Token>{5, 6});
    HistoryDrafter moved(std::move(d));
    AnyDrafter any(std::move(moved));  // as a Session holds it
    any.accept(std::vector<Token>{7});
    any.finish();
    any.begin(std::vector<Token>{1}, {});
    any.accept(std::vector<Token>{8});
  }
  EXPECT_EQ(outputs_of(*history), (Texts{{5, 6, 7}})) << "destroyed unfinished: nothing added";
  HistoryDrafter a(AnyDrafter(RecordingDrafter{}), history);
  a.begin(std::vector<Token>{1}, {});
  a.accept(std::vector<Token>{9});
  a.reset();
  a.finish();
  EXPECT_EQ(history->size(), 1u) << "reset: nothing added";
  HistoryDrafter never(AnyDrafter(RecordingDrafter{}), history);  // begun, nothing accepted: nothing added
  never.begin(std::vector<Token>{1}, {});
  never.finish();
  EXPECT_EQ(history->size(), 1u);
}

TEST(HistoryDrafter, TruncateRewindsTheInnerDrafterAndTheOutput) {
  const auto history = std::make_shared<OutputHistory>();
  HistoryDrafter d(AnyDrafter(PromptLookupDrafter()), history);
  d.begin(std::vector<Token>{1, 2}, {});
  d.accept(std::vector<Token>{3, 4, 5});
  d.truncate(3);
  d.accept(std::vector<Token>{6});
  d.finish();
  EXPECT_EQ(outputs_of(*history), (Texts{{3, 6}}));
  refdec_test::expect_error([&] { d.truncate(5); }, "prompt lookup: cannot truncate a sequence of 4 tokens to 5");
  HistoryDrafter fixed(AnyDrafter(RecordingDrafter{}), history);
  EXPECT_FALSE(fixed.can_truncate());
  fixed.begin(std::vector<Token>{1}, {});
  refdec_test::expect_error([&] { fixed.truncate(0); }, "cannot truncate its sequence");
}

TEST(HistoryDrafter, RejectsANullHistoryAndUseAfterAMove) {
  refdec_test::expect_error([] { HistoryDrafter(AnyDrafter(RecordingDrafter{}), nullptr); }, "needs an OutputHistory");
  HistoryDrafter d(AnyDrafter(RecordingDrafter{}), std::make_shared<OutputHistory>());
  HistoryDrafter other(std::move(d));
  refdec_test::expect_error([&] { d.begin(std::vector<Token>{1}, {}); }, "used after it was moved from");  // NOLINT: on purpose
}

// Records the step costs it is given.
struct CostRecordingDrafter : RecordingDrafter {
  std::shared_ptr<std::vector<double>> costs = std::make_shared<std::vector<double>>();
  void set_step_cost(const StepCost& cost) { costs->push_back(cost.seconds(1)); }
};
static_assert(CostAwareDrafter<CostRecordingDrafter>);

TEST(HistoryDrafter, PassesTheStepCostToACostAwareInnerDrafter) {
  CostRecordingDrafter inner;
  const auto costs = inner.costs;
  AnyDrafter d(HistoryDrafter(AnyDrafter(inner), std::make_shared<OutputHistory>()));
  EXPECT_TRUE(d.cost_aware());
  d.set_step_cost(StepCost::affine(2.0, 0.5));
  ASSERT_EQ(costs->size(), 1u);
  EXPECT_DOUBLE_EQ(costs->front(), 2.5);
}

// set_step_cost() exists on every HistoryDrafter, so whether it sizes drafts by a cost is its
// inner drafter's answer, not its type's.
TEST(HistoryDrafter, IsCostAwareOnlyAroundACostAwareInnerDrafter) {
  const auto history = std::make_shared<OutputHistory>();
  const AnyDrafter plain(HistoryDrafter(AnyDrafter(RecordingDrafter{}), history));
  EXPECT_FALSE(plain.cost_aware());
  EXPECT_FALSE(is_cost_aware(HistoryDrafter(AnyDrafter(RecordingDrafter{}), history)));
  EXPECT_TRUE(is_cost_aware(HistoryDrafter(AnyDrafter(CostRecordingDrafter{}), history)));
  // Wrapped twice, the answer still comes from the innermost drafter.
  EXPECT_FALSE(AnyDrafter(HistoryDrafter(AnyDrafter(HistoryDrafter(AnyDrafter(RecordingDrafter{}), history)), history)).cost_aware());
}

// finish() ends the sequence for the inner drafter too, once per begin(), and adds the output to
// the history at once.
struct FinishCountingDrafter : RecordingDrafter {
  std::shared_ptr<int> finished = std::make_shared<int>(0);
  void finish() { ++*finished; }
};

TEST(HistoryDrafter, TellsTheInnerDrafterWhenTheSequenceEnds) {
  const auto history = std::make_shared<OutputHistory>();
  FinishCountingDrafter inner;
  const auto finished = inner.finished;
  HistoryDrafter d(AnyDrafter(inner), history);
  d.finish();  // no sequence yet: nothing to end
  EXPECT_EQ(*finished, 0);
  d.begin(std::vector<Token>{1}, {});
  d.accept(std::vector<Token>{4, 5});
  d.finish();
  EXPECT_EQ(*finished, 1);
  EXPECT_EQ(history->size(), 1u);
  d.finish();
  d.begin(std::vector<Token>{1}, {});  // the previous sequence has already ended
  EXPECT_EQ(*finished, 1);
  d.accept(std::vector<Token>{6});
  d.begin(std::vector<Token>{1}, {});  // ends the second sequence
  EXPECT_EQ(*finished, 2);
  EXPECT_EQ(history->size(), 2u);
}

// With an n-gram trie inside, a phrase the model wrote in an earlier sequence is drafted in a
// later one, though neither the prompt nor the references hold it.
// A mixture tells its sources when the sequence ends: a history source stores its output then,
// not at the next begin().
TEST(HistoryDrafter, StoresItsOutputWhenTheMixtureAroundItFinishes) {
  auto history = std::make_shared<OutputHistory>();
  std::vector<AnyDrafter> sources;
  sources.emplace_back(HistoryDrafter(AnyDrafter(NgramTrieDrafter{}), history));
  MixtureDrafter mixture(std::move(sources));
  mixture.begin(std::vector<Token>{1, 2}, {});
  mixture.accept(std::vector<Token>{3, 4, 5});
  EXPECT_EQ(history->tokens(), 0u);
  mixture.finish();
  EXPECT_EQ(history->tokens(), 3u);
}

TEST(HistoryDrafter, DraftsAnEarlierSequencesPhraseWithAnNgramTrie) {
  const auto history = std::make_shared<OutputHistory>();
  HistoryDrafter d(AnyDrafter(NgramTrieDrafter({.ngram = 6, .max_match = 2, .max_nodes = 8})), history);
  d.begin(std::vector<Token>{1, 2}, {});
  d.accept(std::vector<Token>{30, 31, 32, 33, 34});
  d.begin(std::vector<Token>{3, 30}, {});
  DraftTree out;
  d.propose(8, out);
  const std::int32_t first = out.find_child(0, 31);
  ASSERT_GE(first, 0);
  EXPECT_GE(out.find_child(first, 32), 0);
  NgramTrieDrafter alone({.ngram = 6, .max_match = 2, .max_nodes = 8});
  alone.begin(std::vector<Token>{3, 30}, {});
  DraftTree none;
  alone.propose(8, none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
