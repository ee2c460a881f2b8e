// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The SuffixDecoding baseline: the suffix trie's counts against counting the substrings directly
// (as sequences are added and removed), its speculation rules one by one, and the drafter's two
// trees (the request's own, the global one with its bound).

#include "refdec/drafters/suffix_decoding.hpp"

#include <gtest/gtest.h>

#include <limits>

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using refdec::DraftTree;
using refdec::SuffixDecodingCache;
using refdec::SuffixDecodingDrafter;
using refdec::SuffixDecodingOptions;
using refdec::SuffixTrie;
using refdec::Token;
using Tokens = std::vector<Token>;

// Occurrences of every substring of at most `depth` tokens of the sequences.
std::map<Tokens, std::int64_t> substring_counts(const std::map<std::int64_t, Tokens>& sequences, std::size_t depth) {
  std::map<Tokens, std::int64_t> counts;
  for (const auto& [id, s] : sequences)
    for (std::size_t i = 0; i < s.size(); ++i)
      for (std::size_t n = 1; n <= depth && i + n <= s.size(); ++n) ++counts[Tokens(s.begin() + static_cast<std::ptrdiff_t>(i), s.begin() + static_cast<std::ptrdiff_t>(i + n))];
  return counts;
}

// Random sequences over a small vocabulary are appended token by token, interleaved, and some
// removed: every substring's count equals the direct count over the sequences kept, and a
// substring of none counts 0.
TEST(SuffixTrie, CountsEverySubstringUpToItsDepth) {
  std::mt19937 rng(3);
  for (const std::size_t depth : {1, 3, 8}) {
    SuffixTrie trie(depth);
    std::map<std::int64_t, Tokens> kept;
    for (int round = 0; round < 40; ++round) {
      const auto id = static_cast<std::int64_t>(rng() % 6);
      if (rng() % 5 == 0) {
        trie.remove(id);
        kept.erase(id);
      } else {
        for (int i = 0, n = 1 + static_cast<int>(rng() % 9); i < n; ++i) {
          const auto t = static_cast<Token>(rng() % 4);
          trie.append(id, t);
          kept[id].push_back(t);
        }
      }
      const auto want = substring_counts(kept, depth);
      std::int64_t tokens = 0;
      for (const auto& [id2, s] : kept) tokens += static_cast<std::int64_t>(s.size());
      ASSERT_EQ(trie.tokens(), tokens);
      for (const auto& [path, count] : want) ASSERT_EQ(trie.count(path), count) << "depth " << depth << " round " << round;
      // Every path of length <= depth + 1 over the vocabulary that occurs nowhere counts 0.
      for (Token a = 0; a < 4; ++a)
        for (Token b = 0; b < 4; ++b) {
          const Tokens p{a, b};
          EXPECT_EQ(trie.count(p), want.contains(p) ? want.at(p) : 0);
        }
    }
  }
  refdec_test::expect_error([] { SuffixTrie(0); }, "max_depth must be at least 1");
  SuffixTrie trie(4);
  refdec_test::expect_error([&] { trie.append(0, -1); }, "non-negative");
}

// The rules of a speculation: probabilities are count(child) / count(parent) multiplied down the
// most frequent path; a token below min_token_prob ends it; max_spec_factor * match length (and the
// budget) caps it; the best score over match lengths wins, ties going to the longer match.
TEST(SuffixTrie, SpeculatesTheMostFrequentPathWithinItsCaps) {
  SuffixDecodingOptions opt;
  opt.max_depth = 16;
  SuffixTrie trie(opt.max_depth);
  // 1 2 3 occurs 3 times, followed by 4 twice and 5 once; 4 is followed by 6 then 7.
  for (const Token t : Tokens{1, 2, 3, 4, 6, 7, 9, 1, 2, 3, 4, 6, 7, 9, 1, 2, 3, 5, 8}) trie.append(0, t);
  // Context "0 1 2 3": the matches "3", "2 3" and "1 2 3" ("0 1 2 3" is the context itself).
  const Tokens context{0, 1, 2, 3};
  const auto d = trie.speculate(context, 10, opt);
  ASSERT_EQ(d.tokens, (Tokens{4, 6, 7}));  // match 3 allows 3 tokens
  for (const float p : d.probs) EXPECT_FLOAT_EQ(p, 2.0f / 3.0f);
  EXPECT_EQ(d.match_len, 3u);
  EXPECT_FLOAT_EQ(d.score, 2.0f);
  // The budget caps the path (matches 2 and 3 then tie: the longer wins).
  const auto two = trie.speculate(context, 2, opt);
  EXPECT_EQ(two.tokens, (Tokens{4, 6}));
  EXPECT_EQ(two.match_len, 3u);
  // So does the match length times the factor, plus the offset.
  SuffixDecodingOptions half = opt;
  half.max_spec_factor = 0.5;  // 1 token for matches 2 and 3
  EXPECT_EQ(trie.speculate(context, 10, half).tokens, (Tokens{4}));
  half.max_spec_offset = 1.0;  // 2 tokens
  EXPECT_EQ(trie.speculate(context, 10, half).tokens, (Tokens{4, 6}));
  // min_token_prob: at 0.7 the first token (2/3) is already too unlikely.
  SuffixDecodingOptions strict = opt;
  strict.min_token_prob = 0.7f;
  EXPECT_TRUE(trie.speculate(context, 10, strict).tokens.empty());
  // No match: nothing; the whole context is never its own match.
  EXPECT_TRUE(trie.speculate(Tokens{42, 43}, 10, opt).tokens.empty());
  EXPECT_TRUE(trie.speculate(Tokens{3}, 10, opt).tokens.empty());
  // Equal scores from matches 1 and 2 ("2" and "1 2" both lead to 3 alone): the longer match.
  SuffixTrie once(opt.max_depth);
  for (const Token t : Tokens{1, 2, 3}) once.append(0, t);
  const auto tie = once.speculate(Tokens{5, 1, 2}, 10, opt);
  EXPECT_EQ(tie.tokens, (Tokens{3}));
  EXPECT_EQ(tie.match_len, 2u);
  // The depth bounds match + path: at depth 3, "2 3" leaves room for one token.
  SuffixTrie shallow(3);
  for (const Token t : Tokens{1, 2, 3, 4, 6, 1, 2, 3, 4, 6}) shallow.append(0, t);
  const auto s = shallow.speculate(Tokens{0, 1, 2, 3}, 10, opt);
  EXPECT_EQ(s.tokens, (Tokens{4}));
  EXPECT_EQ(s.match_len, 2u);
}

// Tree mode (ArcticInference's use_tree_spec): the most probable nodes below the match, each with
// its parent, while the same caps hold; the drafter puts the tree, not a chain, into its draft.
TEST(SuffixTrie, SpeculatesTheMostProbableTreeWithinItsCaps) {
  SuffixDecodingOptions opt;
  opt.max_depth = 16;
  opt.tree = true;
  SuffixTrie trie(opt.max_depth);
  // After "1 2 3": 4 6 7 twice, 5 8 once (three sequences).
  const std::vector<Tokens> sequences = {{1, 2, 3, 4, 6, 7}, {1, 2, 3, 4, 6, 7}, {1, 2, 3, 5, 8}};
  for (std::size_t i = 0; i < sequences.size(); ++i)
    for (const Token t : sequences[i]) trie.append(static_cast<std::int64_t>(i), t);
  const Tokens context{0, 1, 2, 3};
  const auto d = trie.speculate(context, 10, opt);  // match 3 allows 3 tokens: 4, 6, then 7 (2/3) before 5 (1/3)
  EXPECT_EQ(d.tokens, (Tokens{4, 6, 7}));
  EXPECT_EQ(d.parents, (std::vector<std::int32_t>{-1, 0, 1}));
  SuffixDecodingOptions wide = opt;
  wide.max_spec_offset = 2.0;  // 5 tokens: 4 6 7 (2/3 each), then 5 and 8 (1/3 each)
  const auto w = trie.speculate(context, 10, wide);
  EXPECT_EQ(w.tokens, (Tokens{4, 6, 7, 5, 8}));
  EXPECT_EQ(w.parents, (std::vector<std::int32_t>{-1, 0, 1, -1, 3}));
  EXPECT_FLOAT_EQ(w.probs[3], 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(w.score, 2.0f + 2.0f / 3.0f);
  SuffixDecodingOptions strict = wide;
  strict.min_token_prob = 0.5f;  // 5 and 8 (1/3) are cut
  EXPECT_EQ(trie.speculate(context, 10, strict).tokens, (Tokens{4, 6, 7}));
  // The drafter: the tree's branches side by side under the root.
  SuffixDecodingOptions cache_opt = wide;
  auto cache = std::make_shared<SuffixDecodingCache>(cache_opt);
  SuffixDecodingDrafter drafter(cache);
  drafter.begin(context, sequences);  // "1 2 3" also ends the prompt: 4 is 1/2 likely, 5 1/4
  DraftTree tree;
  drafter.propose(10, tree);
  ASSERT_EQ(tree.size(), 5u);
  EXPECT_GE(tree.find_child(0, 4), 0);
  EXPECT_GE(tree.find_child(0, 5), 0);
  EXPECT_GE(tree.find_child(tree.find_child(0, 5), 8), 0);
}

// The drafter: the request's own tree holds its prompt and references; the global tree the earlier
// responses (not their prompts), and its bound evicts the oldest.
TEST(SuffixDecodingDrafter, DraftsFromItsPromptAndFromEarlierResponses) {
  auto cache = std::make_shared<SuffixDecodingCache>();
  SuffixDecodingDrafter d(cache);
  DraftTree tree;
  // From the prompt: "5 6 7 8" then "5 6" -> 7 8.
  d.begin(Tokens{5, 6, 7, 8, 1, 5, 6}, {});
  d.propose(8, tree);
  ASSERT_GE(tree.size(), 2u);
  EXPECT_EQ(tree.node(1).token, 7);
  EXPECT_EQ(tree.node(2).token, 8);
  EXPECT_EQ(d.last_match(), 2u);
  // From a reference.
  d.begin(Tokens{30, 31}, std::vector<Tokens>{{30, 31, 32, 33}});
  tree.clear();
  d.propose(8, tree);
  ASSERT_GE(tree.size(), 1u);
  EXPECT_EQ(tree.node(1).token, 32);
  // A response joins the global tree; a later request with another prompt drafts from it.
  d.begin(Tokens{1}, {});
  d.accept(Tokens{20, 21, 22, 23, 24});
  d.finish();
  EXPECT_EQ(cache->tokens(), 5);
  d.begin(Tokens{2, 20, 21}, {});
  tree.clear();
  d.propose(8, tree);
  ASSERT_GE(tree.size(), 2u);
  EXPECT_EQ(tree.node(1).token, 22);
  EXPECT_EQ(tree.node(2).token, 23);
  // Budget 0: nothing.
  tree.clear();
  d.propose(0, tree);
  EXPECT_EQ(tree.size(), 0u);
  refdec_test::expect_error([] { SuffixDecodingDrafter(nullptr); }, "needs a SuffixDecodingCache");
}

// Settings out of range are refused by name: NaN and negative factors, a NaN offset, a
// probability outside [0, 1], a depth of 0.
TEST(SuffixDecodingCache, RefusesSettingsOutOfRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  refdec_test::expect_error([&] { SuffixDecodingCache c({.max_spec_factor = nan}); }, "max_spec_factor must be finite and >= 0, got nan");
  refdec_test::expect_error([&] { SuffixDecodingCache c({.max_spec_factor = -1.0}); }, "max_spec_factor must be finite and >= 0, got -1");
  refdec_test::expect_error([&] { SuffixDecodingCache c({.max_spec_offset = nan}); }, "max_spec_offset must be finite");
  refdec_test::expect_error([&] { SuffixDecodingCache c({.min_token_prob = -0.5f}); }, "min_token_prob must be in [0, 1], got -0.5");
  refdec_test::expect_error([&] { SuffixDecodingCache c({.min_token_prob = static_cast<float>(nan)}); }, "min_token_prob must be in [0, 1]");
  refdec_test::expect_error([&] { SuffixDecodingCache c({.max_depth = 0}); }, "max_depth must be at least 1, got 0");
}

TEST(SuffixDecodingCache, KeepsTheLastRequestsResponses) {
  SuffixDecodingOptions opt;
  opt.max_cached_requests = 2;
  auto cache = std::make_shared<SuffixDecodingCache>(opt);
  for (Token r = 0; r < 4; ++r) {
    const auto id = cache->start_request();
    cache->append(id, Tokens{100 + r, 200 + r, 300 + r});
  }
  EXPECT_EQ(cache->tokens(), 6);  // requests 2 and 3
  EXPECT_TRUE(cache->speculate(Tokens{0, 100, 200}, 4).tokens.empty()) << "request 0 was evicted";
  EXPECT_EQ(cache->speculate(Tokens{0, 103, 203}, 4).tokens, (Tokens{303}));
  SuffixDecodingOptions none;
  none.max_cached_requests = 0;
  SuffixDecodingCache off(none);
  off.append(off.start_request(), Tokens{1, 2, 3});
  EXPECT_EQ(off.tokens(), 0);
}

}  // namespace
