// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/drafter.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"
#include "common/random_text.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/index_drafter.hpp"

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
static_assert(RewindableDrafter<LlmaDrafter> && RewindableDrafter<PromptLookupDrafter> && RewindableDrafter<NgramTrieDrafter> &&
              RewindableDrafter<LookaheadDrafter> && RewindableDrafter<NoDrafter>);
static_assert(!RewindableDrafter<FixedDrafter>);

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

// Drafters whose state is their sequence and their references' index: rewound to the first n
// tokens, each drafts what one begun on those n tokens drafts, step after step. (A trie or an
// n-gram pool keeps what the prompt gave it: EveryBuiltInDrafterRewinds.)
TEST(RewindableDrafters, DraftAfterTruncateAsIfBegunOnTheTokensKept) {
  using Make = std::function<AnyDrafter()>;
  const std::vector<std::pair<std::string, Make>> makers = {
      {"llma", [] { return AnyDrafter(LlmaDrafter({.continuation = 6, .spans = 3})); }},
      {"llma without self reference", [] { return AnyDrafter(LlmaDrafter({.continuation = 6, .self_reference = false})); }},
      {"prompt lookup", [] { return AnyDrafter(PromptLookupDrafter()); }},
      {"index, the request's text", [] {
         return AnyDrafter(IndexDrafter(std::make_shared<ReferenceIndex>(), {.continuation = 6, .shared = false}));
       }},
  };
  std::mt19937 rng(11);
  const std::vector<Token> text = refdec_test::random_text(rng, 90, 12);
  const std::vector<std::vector<Token>> refs = {refdec_test::random_text(rng, 40, 12), refdec_test::random_text(rng, 40, 12)};
  const auto first = [&](std::size_t n) { return std::span<const Token>(text).first(n); };
  for (const auto& [name, make] : makers)
    for (const std::size_t n : {1, 5, 29, 30, 44, 59}) {
      SCOPED_TRACE(name + ", truncated to " + std::to_string(n));
      AnyDrafter rewound = make();
      rewound.begin(first(30), refs);
      rewound.accept(std::span<const Token>(text).subspan(30, 15));
      rewound.accept(std::span<const Token>(text).subspan(45, 15));
      EXPECT_TRUE(rewound.can_truncate());
      rewound.truncate(n);
      AnyDrafter fresh = make();
      fresh.begin(first(n), refs);
      for (std::size_t at = n; at < n + 20; at += 4) {  // then both follow the text
        DraftTree a, b;
        rewound.propose(8, a);
        fresh.propose(8, b);
        const LinearTree la = a.linearize(text[at - 1], 8), lb = b.linearize(text[at - 1], 8);
        EXPECT_EQ(la.tokens, lb.tokens) << "at " << at;
        EXPECT_EQ(la.parent, lb.parent) << "at " << at;
        rewound.accept(std::span<const Token>(text).subspan(at, 4));
        fresh.accept(std::span<const Token>(text).subspan(at, 4));
      }
    }
}

// Drafters that learn from their output rewind too: the sequence is the tokens kept, so a
// truncation past its new end is refused, and drafting goes on.
TEST(RewindableDrafters, EveryBuiltInDrafterRewinds) {
  std::mt19937 rng(5);
  const std::vector<Token> text = refdec_test::random_text(rng, 60, 12);
  std::vector<AnyDrafter> sources;
  sources.emplace_back(LlmaDrafter());
  sources.emplace_back(NgramTrieDrafter());
  std::vector<AnyDrafter> drafters;
  drafters.emplace_back(NgramTrieDrafter());
  drafters.emplace_back(LookaheadDrafter({.window = 3, .ngram = 3}));
  drafters.emplace_back(MixtureDrafter(std::move(sources)));
  drafters.emplace_back(NoDrafter());
  for (AnyDrafter& d : drafters) {
    SCOPED_TRACE(d.name());
    d.begin(std::span<const Token>(text).first(20), {});
    d.accept(std::span<const Token>(text).subspan(20, 20));
    d.truncate(25);
    DraftTree tree;
    d.propose(8, tree);
    d.accept(std::span<const Token>(text).subspan(25, 5));
    if (d.name() != "none") refdec_test::expect_error([&] { d.truncate(31); }, "cannot truncate a sequence of 30 tokens to 31");
    d.truncate(0);
    d.accept(std::span<const Token>(text).first(3));
  }
  std::vector<Token> seen;
  AnyDrafter fixed(FixedDrafter{{4}, &seen});
  EXPECT_FALSE(fixed.can_truncate());
  refdec_test::expect_error([&] { fixed.truncate(0); }, "fixed: cannot truncate its sequence; begin() it again");
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
