// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Prompt lookup: the reference code's matching rules, token by token.

#include "refdec/drafters/prompt_lookup.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "refdec/core/drafter.hpp"

namespace {

using namespace refdec;
using V = std::vector<Token>;

// The proposed chain (the tree must be a chain).
V propose(PromptLookupDrafter& d, std::size_t budget = 64) {
  DraftTree tree;
  d.propose(budget, tree);
  const auto lin = tree.linearize(0, 1000);
  V chain;
  for (std::int32_t i = 1; i < lin.size(); ++i) {
    EXPECT_EQ(lin.parent[static_cast<std::size_t>(i)], i - 1) << "not a chain";
    chain.push_back(lin.tokens[static_cast<std::size_t>(i)]);
  }
  return chain;
}

PromptLookupDrafter started(const V& prompt, PromptLookupOptions opt = {}) {
  PromptLookupDrafter d(opt);
  d.begin(prompt, {});
  return d;
}

TEST(PromptLookup, LongestNgramWinsThenEarliestOccurrence) {
  // The 3-gram 1 2 3 occurs at 0 (followed by 9 9) and at 5; the 1-gram 3 occurs earlier still.
  auto d = started({1, 2, 3, 9, 9, 1, 2, 3, 8, 8, 4, 1, 2, 3}, {.continuation = 3});
  EXPECT_EQ(propose(d), (V{9, 9, 1}));
  EXPECT_EQ(d.last_match(), 3u);
  // Only a 1-gram matches: its earliest occurrence.
  auto e = started({5, 6, 7, 5, 6, 8, 0, 7}, {.continuation = 2});
  EXPECT_EQ(propose(e), (V{5, 6}));
  EXPECT_EQ(e.last_match(), 1u);
  auto none = started({1, 2, 3}, {.continuation = 2});
  EXPECT_TRUE(propose(none).empty());
  EXPECT_EQ(none.last_match(), 0u);
}

TEST(PromptLookup, MatchMustEndNTokensBeforeTheEnd) {
  // 1 2 occurs at 0 (2-gram): start 2 < 4 - 2 is false for length 4, so it falls back to the
  // 1-gram "2" at index 1: start 2 < 4 - 1 holds.
  auto d = started({1, 2, 1, 2}, {.continuation = 5});
  EXPECT_EQ(propose(d), (V{1, 2}));
  // Nothing but the trailing occurrence itself: no proposal.
  auto e = started({1, 2, 3, 4});
  EXPECT_TRUE(propose(e).empty());
  auto one = started({7});
  EXPECT_TRUE(propose(one).empty());
}

TEST(PromptLookup, FullSpanOnlySkipsShortContinuations) {
  const V prompt = {4, 5, 6, 4, 5, 1, 2, 3, 9, 9, 9, 4, 5};
  auto partial = started(prompt, {.continuation = 9});
  EXPECT_EQ(propose(partial), (V{6, 4, 5, 1, 2, 3, 9, 9, 9}));  // the earliest 4 5 at 0
  auto full = started(prompt, {.continuation = 9, .full_span_only = true});
  EXPECT_EQ(propose(full), (V{6, 4, 5, 1, 2, 3, 9, 9, 9}));     // still fits
  auto full12 = started(prompt, {.continuation = 12, .full_span_only = true});
  EXPECT_TRUE(propose(full12).empty());  // no match has 12 tokens after it
  auto partial12 = started(prompt, {.continuation = 12});
  EXPECT_EQ(propose(partial12).size(), 11u);  // copies up to the end of the sequence
}

TEST(PromptLookup, BudgetAndNgramRange) {
  auto d = started({1, 2, 3, 4, 5, 6, 1, 2, 3});
  EXPECT_EQ(propose(d, 2), (V{4, 5}));
  EXPECT_TRUE(propose(d, 0).empty());
  auto only_long = started({9, 3, 1, 2, 3}, {.max_match = 3, .min_match = 2});
  EXPECT_TRUE(propose(only_long).empty());  // "3" would match as a 1-gram
}

TEST(PromptLookup, AcceptedTokensBecomeSearchable) {
  auto d = started({1, 2, 3});
  EXPECT_TRUE(propose(d).empty());
  d.accept(V{4, 1, 2});
  EXPECT_EQ(propose(d, 3), (V{3, 4, 1}));
  d.begin(V{1, 2, 3}, {});  // begin() forgets the accepted tokens
  EXPECT_TRUE(propose(d).empty());
}

TEST(PromptLookup, RejectsBadOptionsAndTokens) {
  EXPECT_THROW(PromptLookupDrafter({.min_match = 0}), Error);
  EXPECT_THROW(PromptLookupDrafter({.max_match = 1, .min_match = 2}), Error);
  EXPECT_THROW(PromptLookupDrafter({.continuation = 0}), Error);
  PromptLookupDrafter d;
  EXPECT_THROW(d.begin(V{1, -2}, {}), Error);
  static_assert(Drafter<PromptLookupDrafter>);
}

}  // namespace
