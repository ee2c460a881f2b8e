// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/drafters/lookahead.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/core/drafter.hpp"

namespace {

using namespace refdec;

static_assert(AuxiliaryDrafter<LookaheadDrafter>);

// Every local index (0 = root, 1 + j = token j) token j sees, itself included.
std::set<std::int32_t> visible(const AuxBlock& b, std::int32_t j) {
  std::set<std::int32_t> s;
  for (std::int32_t k = 0; k <= b.size(); ++k)
    if (b.attends(j, k)) s.insert(k);
  return s;
}

// Fills the window to all N-1 levels with arbitrary choices.
void fill_window(LookaheadDrafter& d) {
  const auto& o = d.options();
  for (std::size_t l = 1; l < o.ngram - 1; ++l) {
    std::vector<Token> choices(o.window * l);
    for (std::size_t i = 0; i < choices.size(); ++i) choices[i] = static_cast<Token>(100 + i);
    d.observe(choices);
  }
}

// The paper's Figure 5 pattern for W = 3, N = 4: level l, column c sits c + l after the root and
// sees the root, level 0 up to its column and its own column's earlier levels.
TEST(Lookahead, WindowMaskIsThePapersPattern) {
  LookaheadDrafter d({.window = 3, .ngram = 4, .guesses = 2});
  const std::vector<Token> prompt = {7, 8, 9, 10};
  d.begin(prompt, {});
  fill_window(d);
  AuxBlock b;
  d.auxiliary(b);
  ASSERT_EQ(b.size(), 9);
  EXPECT_EQ(b.offset, (std::vector<std::int32_t>{1, 2, 3, 2, 3, 4, 3, 4, 5}));
  const std::vector<std::set<std::int32_t>> golden = {
      {0, 1},          {0, 1, 2},          {0, 1, 2, 3},      // level 0 (causal, like Jacobi decoding)
      {0, 1, 4},       {0, 1, 2, 5},       {0, 1, 2, 3, 6},   // level 1
      {0, 1, 4, 7},    {0, 1, 2, 5, 8},    {0, 1, 2, 3, 6, 9}};  // level 2
  for (std::int32_t j = 0; j < b.size(); ++j) EXPECT_EQ(visible(b, j), golden[static_cast<std::size_t>(j)]) << "token " << j;
  // Level 0 is drawn from the prompt; the later levels are the observed choices.
  for (std::int32_t j = 0; j < 3; ++j)
    EXPECT_NE(std::find(prompt.begin(), prompt.end(), b.tokens[static_cast<std::size_t>(j)]), prompt.end());
  EXPECT_EQ(std::vector<Token>(b.tokens.begin() + 3, b.tokens.end()), (std::vector<Token>{100, 101, 102, 103, 104, 105}));
}

// For any W and N, every window token sees exactly one token per position from the root to
// itself: a causal chain.
TEST(Lookahead, EveryWindowTokenSeesACausalChain) {
  for (const std::size_t W : {1, 2, 5, 15})
    for (const std::size_t N : {2, 3, 5, 7}) {
      LookaheadDrafter d({.window = W, .ngram = N});
      d.begin(std::vector<Token>{1, 2, 3}, {});
      fill_window(d);
      AuxBlock b;
      d.auxiliary(b);
      ASSERT_EQ(static_cast<std::size_t>(b.size()), d.max_auxiliary());
      for (std::int32_t j = 0; j < b.size(); ++j) {
        std::vector<std::int32_t> offsets;
        for (const std::int32_t k : visible(b, j)) offsets.push_back(k == 0 ? 0 : b.offset[static_cast<std::size_t>(k - 1)]);
        std::sort(offsets.begin(), offsets.end());
        std::vector<std::int32_t> chain(static_cast<std::size_t>(b.offset[static_cast<std::size_t>(j)] + 1));
        std::iota(chain.begin(), chain.end(), 0);
        EXPECT_EQ(offsets, chain) << "W " << W << " N " << N << " token " << j;
      }
    }
}

// Prefill phase: choices become new levels; then each step closes W n-grams and shifts.
TEST(Lookahead, WindowGrowsThenShiftsAndHarvestsNgrams) {
  LookaheadDrafter d({.window = 2, .ngram = 3, .guesses = 4, .pool_from_output = false});
  d.begin(std::vector<Token>{5}, {});
  ASSERT_EQ(d.window().size(), 1u);
  EXPECT_EQ(d.window()[0], (std::vector<Token>{5, 5}));
  d.observe(std::vector<Token>{20, 21});  // level 0's choices: the second level
  ASSERT_EQ(d.window().size(), 2u);
  EXPECT_EQ(d.window()[1], (std::vector<Token>{20, 21}));
  EXPECT_TRUE(d.pool(5).empty());
  d.observe(std::vector<Token>{0, 0, 30, 31});  // only the last level's choices matter
  // Columns give the 3-grams (5, 20, 30) and (5, 21, 31), the newest (column 2) first.
  EXPECT_EQ(std::vector<Token>(d.pool(5).begin(), d.pool(5).end()), (std::vector<Token>{21, 31, 20, 30}));
  ASSERT_EQ(d.window().size(), 2u);
  EXPECT_EQ(d.window()[0], (std::vector<Token>{20, 21}));
  EXPECT_EQ(d.window()[1], (std::vector<Token>{30, 31}));
  d.observe({});  // the window did not run: nothing changes
  EXPECT_EQ(d.window()[1], (std::vector<Token>{30, 31}));
  EXPECT_THROW(d.observe(std::vector<Token>{1, 2, 3}), Error);
}

// The pool keeps at most G continuations per first token, newest first, without duplicates; it
// is seeded from the references and the prompt and grows with the output.
TEST(Lookahead, PoolIsBoundedNewestFirstAndDeduplicated) {
  LookaheadDrafter d({.window = 0, .ngram = 3, .guesses = 2});
  EXPECT_EQ(d.name(), "ngram-pool");
  EXPECT_EQ(d.max_auxiliary(), 0u);
  d.begin(std::vector<Token>{1, 2, 3, 1, 4}, std::vector<std::vector<Token>>{{1, 9, 9, 1, 2, 3}});
  // Reference 3-grams starting with 1: (1,9,9) then (1,2,3); the prompt's (1,2,3) again (moves to
  // the front) and (1,4) is too short.
  EXPECT_EQ(std::vector<Token>(d.pool(1).begin(), d.pool(1).end()), (std::vector<Token>{2, 3, 9, 9}));
  AuxBlock b;
  d.auxiliary(b);
  EXPECT_TRUE(b.empty());
  d.accept(std::vector<Token>{5, 1});  // completes (1, 4, 5) and (4, 5, 1)
  EXPECT_EQ(std::vector<Token>(d.pool(1).begin(), d.pool(1).end()), (std::vector<Token>{4, 5, 2, 3}));  // G = 2
  EXPECT_EQ(std::vector<Token>(d.pool(4).begin(), d.pool(4).end()), (std::vector<Token>{5, 1}));
  // The last token is 1: both continuations are proposed, the newest with the higher score.
  DraftTree t;
  d.propose(16, t);
  const auto lin = t.linearize(1, 16);
  EXPECT_EQ(to_string(lin), "[0] 1\n  [1] 4 (2)\n    [3] 5 (2)\n  [2] 2 (1)\n    [4] 3 (1)\n");
}

// Candidates that share a prefix are merged by the trie and verified once.
TEST(Lookahead, CandidatesSharingAPrefixAreMerged) {
  LookaheadDrafter d({.window = 0, .ngram = 4, .guesses = 3});
  d.begin(std::vector<Token>{1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 6, 7, 1}, {});
  DraftTree t;
  d.propose(64, t);
  // (2,6,7), (2,3,5), (2,3,4): 2 once, 3 once, then 4, 5, 6, 7.
  EXPECT_EQ(t.size(), 6u);
  t.clear();
  d.propose(4, t);  // the budget cuts the merged trie: the newest n-gram's branch first
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(to_string(t.linearize(1, 4)), "[0] 1\n  [1] 2 (6)\n    [2] 6 (3)\n      [4] 7 (3)\n    [3] 3 (3)\n");
  t.clear();
  d.propose(0, t);
  EXPECT_TRUE(t.empty());
}

// Options outside their bounds are refused by name, the largest ones too (a window of 2^31-1 once
// asked for about 16 GB).
TEST(Lookahead, RejectsBadOptions) {
  refdec_test::expect_error([] { LookaheadDrafter({.window = 257}); }, "lookahead: window (W) must be 0 to 256, got 257");
  refdec_test::expect_error([] { LookaheadDrafter({.window = SIZE_MAX}); }, "window (W) must be 0 to 256, got 18446744073709551615");
  refdec_test::expect_error([] { LookaheadDrafter({.ngram = 1}); }, "n-gram size (N) must be 2 to 32, got 1");
  refdec_test::expect_error([] { LookaheadDrafter({.ngram = 33}); }, "n-gram size (N) must be 2 to 32, got 33");
  refdec_test::expect_error([] { LookaheadDrafter({.guesses = 0}); }, "guesses (G) must be 1 to 1024, got 0");
  refdec_test::expect_error([] { LookaheadDrafter({.guesses = 1025}); }, "guesses (G) must be 1 to 1024, got 1025");
  LookaheadDrafter largest({.window = LookaheadDrafter::kMaxWindow, .ngram = LookaheadDrafter::kMaxNgram, .guesses = LookaheadDrafter::kMaxGuesses});
  EXPECT_EQ(largest.max_auxiliary(), static_cast<std::size_t>(256 * 31));
}

TEST(AuxBlock, AddAppendAndErrors) {
  AuxBlock a;
  EXPECT_EQ(a.add(5, 1, std::vector<std::int32_t>{0}), 0);
  EXPECT_EQ(a.add(6, 2, std::vector<std::int32_t>{1, 0, 1}), 1);  // sorted, deduplicated
  EXPECT_EQ(std::vector<std::int32_t>(a.row(1).begin(), a.row(1).end()), (std::vector<std::int32_t>{0, 1}));
  AuxBlock c;
  c.add(7, 1, std::vector<std::int32_t>{});
  c.append(a);  // a's token 0 (local 1) becomes local 2
  EXPECT_EQ(c.tokens, (std::vector<Token>{7, 5, 6}));
  EXPECT_EQ(c.offset, (std::vector<std::int32_t>{1, 1, 2}));
  EXPECT_TRUE(c.attends(2, 0));
  EXPECT_TRUE(c.attends(2, 2));
  EXPECT_FALSE(c.attends(2, 1));
  EXPECT_TRUE(c.attends(1, 0));
  EXPECT_FALSE(c.attends(0, 0));  // token 7 listed nothing
  EXPECT_THROW(a.add(5, 0, std::vector<std::int32_t>{}), Error);       // must sit after the root
  EXPECT_THROW(a.add(-1, 1, std::vector<std::int32_t>{}), Error);      // bad token
  EXPECT_THROW(a.add(5, 1, std::vector<std::int32_t>{4}), Error);      // a later token
  EXPECT_NO_THROW(c.validate(8));
  EXPECT_THROW(c.validate(7), Error);  // token 7 outside a vocabulary of 7
  AuxBlock bad = c;
  bad.sees[0] = 3;  // token 1 seeing token 2 (local 3), a later one
  EXPECT_THROW(bad.validate(8), Error);
  bad = c;
  bad.offset.pop_back();
  EXPECT_THROW(bad.validate(8), Error);
  bad = c;
  bad.row_begin[1] = 5;
  EXPECT_THROW(bad.validate(8), Error);
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.row_begin.size(), 1u);
  EXPECT_NO_THROW(a.validate(1));
}

}  // namespace
