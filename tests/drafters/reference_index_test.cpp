// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The shared reference index: its segments' suffix arrays and occurrence counts against counting
// directly over the documents (through merges and eviction), snapshots that do not change, and the
// index drafter's proposals.

#include "refdec/drafters/index_drafter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"
#include "common/random_text.hpp"

namespace {

using refdec::DraftTree;
using refdec::IndexDrafter;
using refdec::IndexDrafterOptions;
using refdec::IndexSegment;
using refdec::ReferenceIndex;
using refdec::ReferenceIndexOptions;
using refdec::Token;
using Tokens = std::vector<Token>;

std::size_t count_in(const std::deque<Tokens>& docs, const Tokens& pattern) {
  std::size_t n = 0;
  for (const Tokens& d : docs)
    for (std::size_t i = 0; i + pattern.size() <= d.size(); ++i)
      n += std::equal(pattern.begin(), pattern.end(), d.begin() + static_cast<std::ptrdiff_t>(i));
  return n;
}

std::size_t count_in(const ReferenceIndex::Snapshot& snap, const Tokens& pattern) {
  std::size_t n = 0;
  for (const auto& s : snap.segments) {
    const auto [lo, hi] = s->find(pattern);
    n += hi - lo;
  }
  return n;
}

// Documents of random lengths over a 3-token vocabulary, added one by one: every pattern of up to
// 3 tokens occurs in the index as often as in the documents kept (the newest ones within the
// bound), each segment's suffixes are in order with their common prefixes, and the segments stay
// few.
TEST(ReferenceIndex, CountsEveryPatternThroughMergesAndEviction) {
  std::mt19937 rng(7);
  ReferenceIndex index({.max_tokens = 400, .depth = 6});
  std::deque<Tokens> kept;
  std::size_t kept_tokens = 0;
  for (int d = 0; d < 120; ++d) {
    const Tokens doc = refdec_test::random_text(rng, 1 + rng() % 12, 3);
    index.add(doc);
    kept.push_back(doc);
    kept_tokens += doc.size();
    const auto snap = index.snapshot();
    // Eviction drops whole segments, oldest first: the kept documents are the newest snap->tokens.
    while (kept_tokens > snap->tokens) {
      kept_tokens -= kept.front().size();
      kept.pop_front();
    }
    ASSERT_EQ(kept_tokens, snap->tokens) << "document " << d;
    ASSERT_LE(snap->tokens, 400u);
    ASSERT_LE(snap->segments.size(), 12u) << "document " << d;
    for (Token a = 0; a < 3; ++a) {
      ASSERT_EQ(count_in(*snap, {a}), count_in(kept, {a}));
      for (Token b = 0; b < 3; ++b) {
        ASSERT_EQ(count_in(*snap, {a, b}), count_in(kept, {a, b}));
        for (Token c = 0; c < 3; ++c) ASSERT_EQ(count_in(*snap, {a, b, c}), count_in(kept, {a, b, c})) << "document " << d;
      }
    }
    for (const auto& s : snap->segments) {
      Tokens text(s->text_size());
      for (std::size_t i = 0; i < text.size(); ++i) text[i] = s->token(i);
      for (std::size_t r = 1; r < s->tokens(); ++r) {
        const auto from = [&](std::size_t rank) { return text.begin() + static_cast<std::ptrdiff_t>(s->suffix(rank)); };
        const Tokens x(from(r - 1), std::find(from(r - 1), text.end(), IndexSegment::kEnd));
        const Tokens y(from(r), std::find(from(r), text.end(), IndexSegment::kEnd));
        ASSERT_LE(Tokens(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(6, x.size()))),
                  Tokens(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(6, y.size()))));
        // Their common prefix, the depth when equal over it (or ending together), ties older first.
        std::size_t l = 0;
        while (l < 6 && l < x.size() && l < y.size() && x[l] == y[l]) ++l;
        if (l == x.size() && l == y.size()) l = 6;
        ASSERT_EQ(s->lcp()[r], l) << "rank " << r << ", document " << d;
        if (l == 6) {
          ASSERT_LT(s->suffix(r - 1), s->suffix(r));
        }
      }
      if (s->tokens() > 0) {
        ASSERT_EQ(s->lcp()[0], 0);
      }
    }
  }
  EXPECT_GT(index.bytes(), 0u);
}

// With the merges on the index's own thread, every snapshot still counts every pattern right, and
// once the merges settle the segments are as few as add() would have left them.
// The largest token id round-trips through a segment's codes (token + 1 as 4 bytes) without
// overflowing a signed integer (UBSan flagged token 2^31 - 1), and is found where it is.
TEST(ReferenceIndex, KeepsTheLargestTokenId) {
  constexpr Token kLargest = 2147483647;
  ReferenceIndex index;
  index.add(std::vector<Token>{5, kLargest, 6});
  const auto& segment = *index.snapshot()->segments.front();
  EXPECT_EQ(segment.token(1), kLargest);
  EXPECT_EQ(segment.token(3), IndexSegment::kEnd);
  EXPECT_EQ(count_in(*index.snapshot(), {5, kLargest}), 1u);
  EXPECT_EQ(count_in(*index.snapshot(), {kLargest, 6}), 1u);
}

TEST(ReferenceIndex, MergesInTheBackgroundWithoutChangingAnyCount) {
  std::mt19937 rng(8);
  ReferenceIndex index({.max_tokens = 1 << 20, .depth = 6, .background_merge = true});
  std::deque<Tokens> kept;
  for (int d = 0; d < 200; ++d) {
    const Tokens doc = refdec_test::random_text(rng, 1 + rng() % 12, 3);
    index.add(doc);
    kept.push_back(doc);
    const auto snap = index.snapshot();
    ASSERT_LE(snap->segments.size(), ReferenceIndex::kMaxSegments);
    for (Token a = 0; a < 3; ++a)
      for (Token b = 0; b < 3; ++b) ASSERT_EQ(count_in(*snap, {a, b}), count_in(kept, {a, b})) << "document " << d;
  }
  index.wait_for_merges();
  const auto settled = index.snapshot();
  EXPECT_LE(settled->segments.size(), 12u);
  for (std::size_t i = 1; i < settled->segments.size(); ++i)
    EXPECT_GT(settled->segments[i - 1]->tokens(), 2 * settled->segments[i]->tokens()) << "a merge still due at " << i;
  for (Token a = 0; a < 3; ++a)
    for (Token b = 0; b < 3; ++b)
      for (Token c = 0; c < 3; ++c) EXPECT_EQ(count_in(*settled, {a, b, c}), count_in(kept, {a, b, c}));
}

// max_bytes bounds the grown segments' bytes as max_tokens bounds their tokens: once full, the
// index keeps within an eighth (and a document) below the bound, the newest documents countable.
TEST(ReferenceIndex, KeepsItsBytesWithinMaxBytes) {
  std::mt19937 rng(4);
  const std::size_t max_bytes = 9 * 4000;
  ReferenceIndex index({.max_bytes = max_bytes});
  std::deque<Tokens> docs;
  bool full = false;
  for (int d = 0; d < 200; ++d) {
    const Tokens doc = refdec_test::random_text(rng, 20 + rng() % 60, 50);
    index.add(doc);
    docs.push_back(doc);
    const auto snap = index.snapshot();
    ASSERT_LE(snap->bytes, max_bytes) << "document " << d;
    full = full || snap->bytes > max_bytes * 7 / 8;
    if (full) {
      ASSERT_GE(snap->bytes, max_bytes * 13 / 16) << "more than the oldest dropped at document " << d;
    }
    ASSERT_LE(snap->segments.size(), 12u);
  }
  const auto snap = index.snapshot();
  for (std::size_t i = docs.size() - 20; i < docs.size(); ++i) EXPECT_GE(count_in(*snap, docs[i]), 1u) << "a newest document gone";
}

TEST(ReferenceIndex, SnapshotsStayAsTheyWere) {
  ReferenceIndex index;
  index.add(Tokens{1, 2, 3});
  const auto before = index.snapshot();
  index.add(Tokens{1, 2, 4});
  index.add(Tokens{});  // ignored
  EXPECT_EQ(before->tokens, 3u);
  EXPECT_EQ(count_in(*before, {1, 2}), 1u);
  EXPECT_EQ(count_in(*index.snapshot(), {1, 2}), 2u);
  EXPECT_EQ(index.tokens(), 6u);
  refdec_test::expect_error([&] { index.add(Tokens{1, -2}); }, "non-negative");
  refdec_test::expect_error([] { ReferenceIndex({.max_tokens = 0}); }, "max_tokens");
  refdec_test::expect_error([] { ReferenceIndex({.depth = 0}); }, "depth must be in [2, 255], got 0");
  refdec_test::expect_error([] { ReferenceIndex({.depth = 256}); }, "depth must be in [2, 255], got 256");
  refdec_test::expect_error([] { IndexSegment(Tokens{1, 2}, 1); }, "a segment's depth must be in [2, 255], got 1");
  // A document longer than the bound keeps its last max_tokens tokens.
  ReferenceIndex small({.max_tokens = 2});
  small.add(Tokens{7, 8, 9});
  EXPECT_EQ(small.tokens(), 2u);
  EXPECT_EQ(count_in(*small.snapshot(), {8, 9}), 1u);
}

// The score of the node at the end of `path`, or -1 when the tree has no such path.
float score_of(const DraftTree& tree, const Tokens& path) {
  std::int32_t node = 0;
  for (const Token t : path) {
    std::int32_t c = tree.node(node).first_child;
    while (c >= 0 && tree.node(c).token != t) c = tree.node(c).next_sibling;
    if (c < 0) return -1.0f;
    node = c;
  }
  return tree.node(node).score;
}

// The drafter: earlier sequences' outputs are drafted from, each continuation scored by how many
// occurrences it continues; its own output joins the index when the sequence ends; no match, nothing.
TEST(IndexDrafter, DraftsWhatFollowedTheContextInEarlierOutputs) {
  auto index = std::make_shared<ReferenceIndex>();
  IndexDrafter d(index, {.max_match = 4, .continuation = 3});
  DraftTree tree;
  d.begin(Tokens{1, 2}, {});
  d.propose(8, tree);
  EXPECT_EQ(tree.size(), 0u) << "an empty index";
  d.accept(Tokens{5, 6, 7, 8});
  d.accept(Tokens{5, 6, 9});
  d.finish();
  EXPECT_EQ(index->tokens(), 7u);
  d.finish();  // nothing more
  EXPECT_EQ(index->tokens(), 7u);
  index->add(Tokens{3, 5, 6, 7, 1});
  d.begin(Tokens{0, 5, 6}, {});
  tree.clear();
  d.propose(8, tree);
  EXPECT_EQ(d.last_match(), 2u);
  // "5 6" occurred 3 times: followed by 7 twice (then 8, then 1) and by 9 once.
  EXPECT_FLOAT_EQ(score_of(tree, {7}), 2.0f);
  EXPECT_FLOAT_EQ(score_of(tree, {7, 8}), 1.0f);
  EXPECT_FLOAT_EQ(score_of(tree, {7, 1}), 1.0f);
  EXPECT_FLOAT_EQ(score_of(tree, {9}), 1.0f);
  EXPECT_EQ(tree.size(), 5u);  // and 7 8 5
  tree.clear();
  d.propose(1, tree);
  EXPECT_EQ(tree.size(), 1u) << "the budget caps the nodes";
  // begin() ends the previous sequence: its output (nothing accepted) adds nothing; a new one does.
  d.accept(Tokens{42});
  d.begin(Tokens{42}, {});
  EXPECT_EQ(index->tokens(), 13u);
  tree.clear();
  d.propose(8, tree);
  EXPECT_EQ(tree.size(), 0u) << "42 ends every document it is in";
  refdec_test::expect_error([] { IndexDrafter(nullptr); }, "needs a ReferenceIndex");
}

// A negative id would take the place of the index's end-of-document code and let a match run past
// a document's end (it read past the last one): refused wherever it would enter, nothing changed.
TEST(IndexDrafter, RefusesNegativeTokenIds) {
  auto index = std::make_shared<ReferenceIndex>();
  index->add(Tokens{5, 6});
  IndexDrafter d(index, {.request = false});
  d.begin(Tokens{5}, {});
  refdec_test::expect_error([&] { d.accept(Tokens{6, -1}); }, "index drafter: accept token 1 has the negative id -1");
  refdec_test::expect_error([&] { d.begin(Tokens{5, -3}, {}); }, "begin: prompt token 1 has the negative id -3");
  const std::vector<Tokens> references = {{1, -2}};
  refdec_test::expect_error([&] { d.begin(Tokens{5}, references); }, "begin: reference token 1 has the negative id -2");
  DraftTree tree;
  d.propose(16, tree);  // the context is still [5]: "5" is followed by 6
  EXPECT_FLOAT_EQ(score_of(tree, {6}), 1.0f);
}

// The drafter against counting over the documents directly: the longest context suffix found
// followed by a token (at most max_match and the index's depth less one), every continuation path
// below it up to the depth allowed with its count of occurrences, over many segments of short
// random documents, and with `request` over the request's references and context too, or (shared
// off) over those alone; and, with a small budget, a prefix-closed subset of those nodes that
// leaves none better outside.
TEST(IndexDrafter, DraftsEveryContinuationWithItsCountOfOccurrences) {
  for (const auto& [request, shared] : {std::pair{false, true}, std::pair{true, true}, std::pair{true, false}})
    for (const std::size_t depth : {std::size_t{6}, std::size_t{64}}) {
      std::mt19937 rng(11);
      auto index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.depth = depth});
      std::deque<Tokens> docs;
      for (int d = 0; d < 60; ++d) {
        Tokens doc(1 + rng() % 40);
        for (Token& t : doc) t = static_cast<Token>(rng() % 4);
        index->add(doc);
        docs.push_back(doc);
      }
      ASSERT_GT(index->snapshot()->segments.size(), 2u);
      const IndexDrafterOptions opt{.max_match = 5, .continuation = 4, .request = request, .shared = shared};
      for (int trial = 0; trial < 200; ++trial) {
        SCOPED_TRACE("depth " + std::to_string(depth) + ", trial " + std::to_string(trial) + (request ? ", request" : "") +
                     (shared ? "" : " only"));
        const Tokens context = refdec_test::random_text(rng, 1 + rng() % 8, 5);  // 4: found nowhere
        std::vector<Tokens> references(rng() % 3);
        for (Tokens& r : references) r = refdec_test::random_text(rng, rng() % 12, 6);  // 5: only in references
        std::deque<Tokens> searched;
        if (shared) searched = docs;
        if (request) {
          searched.push_back(context);
          searched.insert(searched.end(), references.begin(), references.end());
        }
        // The longest suffix found with a token after it, its occurrences' continuations and their counts.
        std::size_t len = std::min({opt.max_match, context.size(), depth - 1});
        const auto suffix = [&](std::size_t l) { return Tokens(context.end() - static_cast<std::ptrdiff_t>(l), context.end()); };
        const auto continued = [&](const Tokens& pattern) {
          for (const Tokens& doc : searched)
            for (std::size_t i = 0; i + pattern.size() < doc.size(); ++i)
              if (std::equal(pattern.begin(), pattern.end(), doc.begin() + static_cast<std::ptrdiff_t>(i))) return true;
          return false;
        };
        while (len > 0 && !continued(suffix(len))) --len;
        const std::size_t max_depth = len == 0 ? 0 : std::min(opt.continuation, depth - len);
        std::map<Tokens, std::size_t> counts;
        std::size_t total = 0;
        if (len > 0) {
          const Tokens pattern = suffix(len);
          for (const Tokens& doc : searched)
            for (std::size_t i = 0; i + len <= doc.size(); ++i) {
              if (!std::equal(pattern.begin(), pattern.end(), doc.begin() + static_cast<std::ptrdiff_t>(i))) continue;
              total += i + len < doc.size();
              for (std::size_t d = 1; d <= max_depth && i + len + d <= doc.size(); ++d)
                ++counts[Tokens(doc.begin() + static_cast<std::ptrdiff_t>(i + len),
                                doc.begin() + static_cast<std::ptrdiff_t>(i + len + d))];
            }
        }
        IndexDrafter drafter(index, opt);
        drafter.begin(context, references);
        DraftTree all;
        drafter.propose(1 << 20, all);
        EXPECT_EQ(drafter.last_match(), total > 0 ? len : 0);
        ASSERT_EQ(all.size(), counts.size());
        for (const auto& [path, n] : counts)
          EXPECT_FLOAT_EQ(score_of(all, path), static_cast<float>(n)) << "path of " << path.size();
        // A small budget keeps nodes whose parents are kept, none worse than a node left out.
        const std::size_t budget = 1 + rng() % 6;
        DraftTree some;
        drafter.propose(budget, some);
        ASSERT_EQ(some.size(), std::min(budget, counts.size()));
        std::size_t worst_kept = total;
        for (const auto& [path, n] : counts)
          if (score_of(some, path) >= 0) worst_kept = std::min(worst_kept, n);
        for (const auto& [path, n] : counts) {
          const bool kept = score_of(some, path) >= 0;
          const bool parent_kept = path.size() == 1 || score_of(some, Tokens(path.begin(), path.end() - 1)) >= 0;
          if (!kept && parent_kept) {
            EXPECT_LE(n, worst_kept) << "a better node was left out";
          }
        }
      }
    }
}

// With `request` (the default) the request's references and its own context are searched as well:
// the references from begin(), the context as it was when it last doubled. A match must have a
// token after it: a document that ends with the context's suffix does not make it the match.
TEST(IndexDrafter, DraftsFromTheRequestsReferencesAndItsOwnContext) {
  const std::vector<Tokens> references = {{7, 8, 9, 10}, {}};
  for (const bool request : {true, false}) {
    SCOPED_TRACE(request ? "request" : "index only");
    auto index = std::make_shared<ReferenceIndex>();
    IndexDrafter d(index, {.request = request});
    DraftTree tree;
    d.begin(Tokens{1, 2, 3}, references);
    d.propose(8, tree);
    EXPECT_EQ(tree.size(), 0u) << "the context's own end continues nowhere";
    d.accept(Tokens{7, 8});
    tree.clear();
    d.propose(8, tree);
    if (request) {
      EXPECT_EQ(d.last_match(), 2u);
      EXPECT_FLOAT_EQ(score_of(tree, {9, 10}), 1.0f);
      EXPECT_EQ(tree.size(), 2u);
    } else {
      EXPECT_EQ(tree.size(), 0u);
    }
    d.accept(Tokens{5, 7});  // the context has doubled: indexed again at the next proposal
    tree.clear();
    d.propose(8, tree);
    d.accept(Tokens{1, 2});
    tree.clear();
    d.propose(8, tree);
    if (request) {
      EXPECT_FLOAT_EQ(score_of(tree, {3, 7, 8}), 1.0f) << "what followed 1 2 in its own context";
    } else {
      EXPECT_EQ(tree.size(), 0u);
    }
    d.begin(Tokens{}, {});  // its output joins the index, not its references
    EXPECT_EQ(index->tokens(), 6u);
  }
  // "9 1 2" ends a document, so the longest match of "9 1 2" that continues is "1 2".
  auto index = std::make_shared<ReferenceIndex>();
  index->add(Tokens{1, 2, 3});
  index->add(Tokens{9, 1, 2});
  IndexDrafter d(index, {.request = false});
  DraftTree tree;
  d.begin(Tokens{9, 1, 2}, {});
  d.propose(8, tree);
  EXPECT_EQ(d.last_match(), 2u);
  EXPECT_FLOAT_EQ(score_of(tree, {3}), 1.0f);
}

// index_sources(): a drafter of the index alone, which adds the output, and one of the request's
// own text alone (shared off), which neither reads nor grows the index; without `request` only the
// first. A drafter with neither is refused.
TEST(IndexDrafter, IndexSourcesSplitTheIndexFromTheRequestsOwnText) {
  auto index = std::make_shared<ReferenceIndex>();
  index->add(Tokens{1, 2, 3});
  auto sources = index_sources(index, {.max_match = 4});
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0].name(), "index");
  EXPECT_EQ(sources[1].name(), "index-request");
  EXPECT_EQ(sources[0].index(), index);
  const std::vector<Tokens> references = {{1, 2, 4}};
  DraftTree tree;
  for (IndexDrafter& d : sources) d.begin(Tokens{1, 2}, references);
  sources[0].propose(8, tree);
  EXPECT_FLOAT_EQ(score_of(tree, {3}), 1.0f) << "the index";
  EXPECT_LT(score_of(tree, {4}), 0.0f) << "not the references";
  tree.clear();
  sources[1].propose(8, tree);
  EXPECT_FLOAT_EQ(score_of(tree, {4}), 1.0f) << "the references";
  EXPECT_LT(score_of(tree, {3}), 0.0f) << "not the index";
  for (IndexDrafter& d : sources) d.accept(Tokens{5, 6});
  for (IndexDrafter& d : sources) d.finish();
  EXPECT_EQ(index->tokens(), 5u) << "one copy of the output, added by the first";
  EXPECT_EQ(index_sources(index, {.request = false}).size(), 1u);
  refdec_test::expect_error([&] { IndexDrafter(index, {.request = false, .shared = false}); }, "nothing to draft from");
}

TEST(IndexDrafter, AddsItsOutputAtFinishOrTheNextBeginOnly) {
  auto index = std::make_shared<ReferenceIndex>();
  {
    IndexDrafter d(index);
    d.begin(Tokens{1}, {});
    d.accept(Tokens{2, 3});
    IndexDrafter moved(std::move(d));
  }
  EXPECT_EQ(index->tokens(), 0u) << "destroyed unfinished: nothing added";
  IndexDrafter a(index), b(index);
  a.begin(Tokens{1}, {});
  a.accept(Tokens{4});
  b.begin(Tokens{1}, {});
  b.accept(Tokens{5, 6});
  a = std::move(b);  // a's own sequence is dropped, b's goes on in a
  EXPECT_EQ(index->tokens(), 0u);
  a.finish();
  EXPECT_EQ(index->tokens(), 2u);
  a.begin(Tokens{1}, {});
  a.accept(Tokens{7});
  a.reset();
  a.finish();
  EXPECT_EQ(index->tokens(), 2u) << "reset: the sequence ends with nothing to add";
  a.begin(Tokens{1}, {});
  a.accept(Tokens{8, 9});
  a.begin(Tokens{1}, {});  // the previous sequence ends here
  EXPECT_EQ(index->tokens(), 4u);
  {  // add_output off: a sequence's output stays out of the index, however it ends
    IndexDrafter quiet(index, {.add_output = false});
    quiet.begin(Tokens{1}, {});
    quiet.accept(Tokens{7, 8});
    quiet.finish();
    quiet.begin(Tokens{1}, {});
    quiet.accept(Tokens{9});
  }
  EXPECT_EQ(index->tokens(), 4u);
}

TEST(IndexDrafter, TruncateRewindsTheSequenceAndTheOutputItAdds) {
  auto index = std::make_shared<ReferenceIndex>();
  IndexDrafter d(index);
  d.begin(Tokens{1, 2}, {});
  d.accept(Tokens{3, 4, 5});
  d.truncate(3);  // 1 2 3
  d.accept(Tokens{6});
  d.finish();
  EXPECT_EQ(index->tokens(), 2u) << "the output kept: 3 6";
  // The request's own text is drafted from as truncated: 2 3 4, not 2 3 4 5.
  IndexDrafter own(index, {.shared = false});
  own.begin(Tokens{2, 3, 4, 5, 2}, {});
  own.truncate(3);
  own.accept(Tokens{6, 2});
  DraftTree tree;
  own.propose(8, tree);
  EXPECT_FLOAT_EQ(score_of(tree, {3, 4}), 1.0f);
  EXPECT_LT(score_of(tree, {3, 4, 5}), 0.0f) << "the tokens truncated are no longer the sequence's";
  d.begin(Tokens{1, 2, 3}, {});
  d.accept(Tokens{7});
  d.truncate(2);  // into the prompt: no output left
  d.accept(Tokens{8});
  d.finish();
  EXPECT_EQ(index->tokens(), 3u) << "the output: 8";
  refdec_test::expect_error([&] { d.truncate(4); }, "index drafter: cannot truncate a sequence of 3 tokens to 4");
}

}  // namespace
