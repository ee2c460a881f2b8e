// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/drafters/drafter.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "refdec/drafters/llma.hpp"

namespace {

using namespace refdec;

// Proposes a fixed chain and remembers what it was told.
struct FixedDrafter {
  std::vector<Token> chain;
  std::vector<Token>* seen;
  void begin(std::span<const Token> prompt, References) { seen->assign(prompt.begin(), prompt.end()); }
  void propose(std::size_t budget, DraftTree& out) {
    out.insert(std::span<const Token>(chain).first(std::min(budget, chain.size())), 1.0f);
  }
  void accept(std::span<const Token> tokens) { seen->insert(seen->end(), tokens.begin(), tokens.end()); }
  std::string name() const { return "fixed"; }
};

static_assert(Drafter<FixedDrafter>);
static_assert(Drafter<LlmaDrafter>);

TEST(AnyDrafter, ForwardsCallsAndRecordsStatistics) {
  std::vector<Token> seen;
  AnyDrafter d(FixedDrafter{{4, 5, 6}, &seen});
  EXPECT_EQ(d.name(), "fixed");
  d.begin(std::vector<Token>{1, 2}, {});
  DraftTree tree;
  d.propose(2, tree);
  auto lin = tree.linearize(2, 2);
  d.record_proposal(lin);
  d.accept(std::vector<Token>{4, 9});  // one draft accepted, then the bonus
  tree.clear();
  d.propose(3, tree);
  lin = tree.linearize(9, 3);
  d.record_proposal(lin);
  d.accept(std::vector<Token>{4, 5, 6, 7});  // all three accepted
  EXPECT_EQ(seen, (std::vector<Token>{1, 2, 4, 9, 4, 5, 6, 7}));
  const auto& s = d.stats();
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.proposals, 2);
  EXPECT_EQ(s.proposed_tokens, 5);
  EXPECT_EQ(s.accepted_tokens, 4);
  EXPECT_EQ(s.proposed_at_depth, (std::vector<std::int64_t>{2, 2, 1}));
  EXPECT_EQ(s.accepted_at_depth, (std::vector<std::int64_t>{2, 1, 1}));
  EXPECT_DOUBLE_EQ(s.acceptance_at(1), 0.5);
  EXPECT_DOUBLE_EQ(s.acceptance_at(5), 0.0);
  EXPECT_GE(s.propose_seconds, 0.0);
  DrafterStats sum;
  sum.merge(s);
  sum.merge(s);
  EXPECT_EQ(sum.accepted_at_depth, (std::vector<std::int64_t>{4, 2, 2}));
  // What the second merge added, as a caller-owned drafter's statistics over one request.
  const DrafterStats added = sum.since(s);
  EXPECT_EQ(added.steps, s.steps);
  EXPECT_EQ(added.accepted_tokens, s.accepted_tokens);
  EXPECT_EQ(added.proposed_at_depth, s.proposed_at_depth);
  EXPECT_EQ(added.accepted_at_depth, s.accepted_at_depth);
  EXPECT_DOUBLE_EQ(added.accept_seconds, s.accept_seconds);
  d.reset_stats();
  EXPECT_EQ(d.stats().steps, 0);
}

// A drafter told when its sequence ends; FixedDrafter has no finish() and is never told.
struct EndingDrafter : FixedDrafter {
  int* finished;
  void finish() { ++*finished; }
};
static_assert(SequenceEndingDrafter<EndingDrafter>);
static_assert(!SequenceEndingDrafter<FixedDrafter>);

TEST(AnyDrafter, PassesTheEndOfASequenceToDraftersThatWantIt) {
  std::vector<Token> seen;
  int finished = 0;
  AnyDrafter ending(EndingDrafter{{FixedDrafter{{4}, &seen}}, &finished});
  ending.begin(std::vector<Token>{1}, {});
  ending.finish();
  EXPECT_EQ(finished, 1);
  AnyDrafter plain(FixedDrafter{{4}, &seen});
  plain.begin(std::vector<Token>{1}, {});
  plain.finish();  // nothing to do, nothing recorded but its time
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(plain.stats().steps, 0);
}

TEST(AnyDrafter, EmptyAcceptIsIgnored) {
  std::vector<Token> seen;
  AnyDrafter d(FixedDrafter{{4, 5}, &seen});
  d.begin(std::vector<Token>{1}, {});
  d.accept({});  // nothing appended: neither forwarded nor recorded (it used to record -1 accepted)
  EXPECT_EQ(seen, (std::vector<Token>{1}));
  EXPECT_EQ(d.stats().accepted_tokens, 0);
  EXPECT_TRUE(d.stats().accepted_at_depth.empty());
  d.accept(std::vector<Token>{4, 7});
  EXPECT_EQ(d.stats().accepted_tokens, 1);
  EXPECT_EQ(seen, (std::vector<Token>{1, 4, 7}));
}

// Sizes its chain by the step cost it was last given: as many tokens as one step's cost in
// seconds (a stand-in for a budget choice), so the test sees which cost arrived.
struct CostSizedDrafter {
  StepCost cost = StepCost::flat();
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t budget, DraftTree& out) {
    const std::vector<Token> chain(std::min(budget, static_cast<std::size_t>(cost.seconds(1))), 3);
    out.insert(chain, 1.0f);
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return "cost-sized"; }
  void set_step_cost(const StepCost& c) { cost = c; }
};

static_assert(CostAwareDrafter<CostSizedDrafter>);
static_assert(!CostAwareDrafter<FixedDrafter>);

TEST(AnyDrafter, ForwardsTheStepCostToCostAwareDraftersOnly) {
  AnyDrafter aware(CostSizedDrafter{});
  EXPECT_TRUE(aware.cost_aware());
  aware.set_step_cost(StepCost::affine(2.0, 1.0));  // 3 "seconds" at one token
  DraftTree tree;
  aware.propose(16, tree);
  EXPECT_EQ(tree.linearize(0, 16).num_drafts(), 3);
  std::vector<Token> seen;
  AnyDrafter plain(FixedDrafter{{4, 5}, &seen});
  EXPECT_FALSE(plain.cost_aware());
  plain.set_step_cost(StepCost::affine(2.0, 1.0));  // ignored
  tree.clear();
  plain.propose(16, tree);
  EXPECT_EQ(tree.linearize(0, 16).num_drafts(), 2);
  EXPECT_FALSE(AnyDrafter().cost_aware());
}

TEST(AnyDrafter, DefaultIsPlainDecoding) {
  AnyDrafter d;
  EXPECT_EQ(d.name(), "none");
  d.begin(std::vector<Token>{1}, {});
  DraftTree tree;
  d.propose(16, tree);
  EXPECT_TRUE(tree.empty());
}

}  // namespace
