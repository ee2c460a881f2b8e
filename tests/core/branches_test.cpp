// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Branches for engines without custom masks: the layout of trees, and a toy engine that verifies
// trees the way llama.cpp does (cells that never move, tagged with sequence ids; a token attends
// to the cells of its own sequence at positions up to its own) decoding exactly what plain greedy
// decoding gives.

#include "refdec/core/branches.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"

namespace {

using namespace refdec;

// A tree from parents (node 0 the root, parents before children, siblings in index order).
LinearTree tree_of(const std::vector<std::int32_t>& parent) {
  LinearTree t;
  for (std::size_t i = 0; i < parent.size(); ++i) t.add_node(static_cast<Token>(i), parent[i], 0.0f);
  t.finish();
  return t;
}

TEST(Branches, NumbersLeavesDepthFirstAndGivesEachNodeItsRun) {
  // 0 -> 1 -> {3, 4}, 0 -> 2 -> 5 -> 6: leaves 3, 4, 6.
  const LinearTree t = tree_of({-1, 0, 0, 1, 1, 2, 5});
  Branches b;
  b.build(view(t), 40);
  EXPECT_EQ(b.count, 3);
  EXPECT_EQ(b.positions, (std::vector<std::int64_t>{40, 41, 41, 42, 42, 42, 43}));
  EXPECT_EQ(b.begin, (std::vector<std::int32_t>{0, 0, 2, 0, 1, 2, 2}));
  EXPECT_EQ(b.end, (std::vector<std::int32_t>{3, 2, 3, 1, 2, 3, 3}));
  EXPECT_EQ(b.winner(std::vector<std::int32_t>{}), 0);
  EXPECT_EQ(b.winner(std::vector<std::int32_t>{1, 4}), 1);
  EXPECT_EQ(b.winner(std::vector<std::int32_t>{2}), 2);
  refdec_test::expect_error([&] { (void)b.winner(std::vector<std::int32_t>{9}); }, "accepted node 9 is not one of the tree's 7");
  b.build(view(tree_of({-1})), 0);  // the root alone: one branch
  EXPECT_EQ(b.count, 1);
  EXPECT_EQ(b.end, (std::vector<std::int32_t>{1}));
}

TEST(Branches, RefusesLinksThatAreNotATree) {
  const Token tokens[3] = {1, 2, 3};
  std::int32_t first_child[3] = {1, -1, -1}, next_sibling[3] = {-1, -1, -1};  // node 2 never reached
  std::vector<std::int64_t> positions(3);
  std::vector<std::int32_t> begin(3), end(3);
  refdec_test::expect_error([&] { tree_branches({tokens, first_child, next_sibling, 3}, 0, positions, begin, end); },
                            "1 of 3 nodes are not reached from the root");
  next_sibling[1] = 1;  // a node its own sibling
  refdec_test::expect_error([&] { tree_branches({tokens, first_child, next_sibling, 3}, 0, positions, begin, end); },
                            "node 0 links to node 1, reached before");
  first_child[0] = 7;
  refdec_test::expect_error([&] { tree_branches({tokens, first_child, next_sibling, 3}, 0, positions, begin, end); }, "out of range");
  refdec_test::expect_error([&] { tree_branches({tokens, first_child, next_sibling, 3}, 0, positions, begin, std::span(end).first(2)); },
                            "for 3 nodes");
}

// The toy engine: a KV store of cells that never move, each with a position, a token and the
// sequence ids it belongs to (kMain: the committed sequence; 0.. a step's branches). Its "model"
// reads the tokens it attends to in position order and checks that they are exactly one per
// position from 0 to its own: the mask a tree needs, obtained by sequence membership alone.
constexpr std::int32_t kMain = -1;
constexpr Token kVocab = 12;

struct Cell {
  std::int64_t pos = -1;
  Token token = -1;
  std::set<std::int32_t> seqs;  // empty: free
};

class ToyEngine {
 public:
  explicit ToyEngine(std::size_t capacity) : cells_(capacity) {}

  // Writes a cell for (pos, token) in sequences `seqs` into a free slot; returns the slot.
  std::size_t write(std::int64_t pos, Token token, std::set<std::int32_t> seqs) {
    for (std::size_t c = 0; c < cells_.size(); ++c)
      if (cells_[c].seqs.empty()) {
        cells_[c] = {pos, token, std::move(seqs)};
        written_.push_back({c, pos, token});
        return c;
      }
    ADD_FAILURE() << "out of cells";
    return 0;
  }
  // The model's next token after the cells of sequence `seq` (and the committed ones) up to `pos`.
  Token next(std::int32_t seq, std::int64_t pos) const {
    std::vector<const Cell*> seen;
    for (const Cell& c : cells_)
      if (c.pos <= pos && (c.seqs.count(kMain) > 0 || c.seqs.count(seq) > 0)) seen.push_back(&c);
    std::sort(seen.begin(), seen.end(), [](const Cell* a, const Cell* b) { return a->pos < b->pos; });
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (seen[i]->pos != static_cast<std::int64_t>(i)) {
        ADD_FAILURE() << "a token at " << pos << " attends to positions that are not 0.." << pos;
        return 0;
      }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), pos + 1);
    std::uint32_t h = 0;
    for (std::size_t i = seen.size() >= 3 ? seen.size() - 3 : 0; i < seen.size(); ++i)
      h = h * 31 + static_cast<std::uint32_t>(seen[i]->token) + 7;
    // A function of the last three tokens: its greedy text falls into cycles the drafters copy.
    return static_cast<Token>((h * 2654435761u >> 7) % static_cast<std::uint32_t>(kVocab));
  }
  // Keeps sequence `seq`'s cells before `end` as committed and frees every other branch cell.
  void keep(std::int32_t seq, std::int64_t end) {
    for (Cell& c : cells_) {
      if (c.seqs.empty() || c.seqs.count(kMain) > 0) continue;
      if (c.seqs.count(seq) > 0 && c.pos < end)
        c.seqs = {kMain};
      else
        c.seqs.clear();
    }
  }
  // Every cell written still holds what it was written with, where it was written, or is free.
  void expect_no_cell_moved() const {
    for (const auto& w : written_) {
      const Cell& c = cells_[w.slot];
      if (c.seqs.empty()) continue;
      if (c.pos == w.pos && c.token == w.token) continue;
      bool rewritten = false;  // a later write into a slot freed meanwhile
      for (const auto& v : written_)
        if (v.slot == w.slot && &v > &w) rewritten = true;
      EXPECT_TRUE(rewritten) << "cell " << w.slot << " changed in place";
    }
  }

 private:
  struct Write {
    std::size_t slot;
    std::int64_t pos;
    Token token;
  };
  std::vector<Cell> cells_;
  std::vector<Write> written_;
};

// Decodes `max_new` tokens after `prompt` by verifying `drafter`'s trees through branches (budget
// 0: plain greedy decoding). Returns the output; *steps counts verifications, *branched those with
// more than one branch.
std::vector<Token> decode(const std::vector<Token>& prompt, AnyDrafter drafter, std::size_t budget, std::size_t max_new, int& steps,
                          int& branched) {
  ToyEngine engine(4096);
  for (std::size_t i = 0; i + 1 < prompt.size(); ++i) engine.write(static_cast<std::int64_t>(i), prompt[i], {kMain});
  std::vector<Token> seq = prompt, out;
  drafter.begin(prompt, {});
  DraftScratch scratch;
  LinearTree tree;
  AuxBlock aux;
  Branches br;
  std::vector<std::int32_t> path;
  steps = branched = 0;
  while (out.size() < max_new) {
    const auto first = static_cast<std::int64_t>(seq.size()) - 1;  // the root: the last token, not yet cached
    draft_step(drafter, seq.back(), budget, kVocab, first, std::numeric_limits<std::int64_t>::max(), scratch, tree, aux);
    br.build(view(tree), first);
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      const auto n = static_cast<std::size_t>(i);
      std::set<std::int32_t> ids;
      for (std::int32_t b = br.begin[n]; b < br.end[n]; ++b) ids.insert(b);
      engine.write(br.positions[n], tree.tokens[n], ids);
    }
    // Each node's next token, through any one of its branches (here the first).
    std::vector<Token> target(static_cast<std::size_t>(tree.size()));
    for (std::size_t n = 0; n < target.size(); ++n) target[n] = engine.next(br.begin[n], br.positions[n]);
    path.assign(static_cast<std::size_t>(tree.size()), 0);
    Token bonus = -1;
    const std::int32_t accepted = walk(
        view(tree), [&](std::int32_t node, std::int32_t) { return target[static_cast<std::size_t>(node)]; }, path.data(), bonus);
    path.resize(static_cast<std::size_t>(accepted));
    engine.keep(br.winner(path), first + 1 + accepted);
    std::vector<Token> appended;
    for (const std::int32_t n : path) appended.push_back(tree.tokens[static_cast<std::size_t>(n)]);
    appended.push_back(bonus);
    drafter.accept(appended);
    seq.insert(seq.end(), appended.begin(), appended.end());
    out.insert(out.end(), appended.begin(), appended.end());
    ++steps;
    if (br.count > 1) ++branched;
  }
  engine.expect_no_cell_moved();
  out.resize(max_new);
  return out;
}

TEST(Branches, AnEngineWithoutMasksDecodesTreesLosslessly) {
  const std::vector<Token> prompt = {1, 5, 3, 7, 2, 9, 4};
  constexpr std::size_t kNew = 200;
  int plain_steps = 0, branched = 0;
  const std::vector<Token> plain = decode(prompt, AnyDrafter(), 0, kNew, plain_steps, branched);
  EXPECT_EQ(plain_steps, static_cast<int>(kNew));
  const auto llma = [] { return AnyDrafter(LlmaDrafter({.continuation = 8, .spans = 4})); };
  const auto mixture = [] {
    std::vector<AnyDrafter> sources;
    sources.emplace_back(LlmaDrafter({.continuation = 8, .spans = 2}));
    sources.emplace_back(NgramTrieDrafter());
    return AnyDrafter(MixtureDrafter(std::move(sources)));
  };
  int any_branched = 0;
  for (const std::size_t budget : {1, 4, 16, 64})
    for (const bool mixed : {false, true}) {
      SCOPED_TRACE(std::string(mixed ? "mixture" : "llma") + ", budget " + std::to_string(budget));
      int steps = 0;
      const std::vector<Token> got = decode(prompt, mixed ? mixture() : llma(), budget, kNew, steps, branched);
      EXPECT_EQ(got, plain);
      if (budget >= 4) {
        EXPECT_LT(steps, static_cast<int>(kNew) / 2) << "the drafts were accepted";
      }
      any_branched += branched;
    }
  EXPECT_GT(any_branched, 0) << "some steps verified trees of several branches";
}

}  // namespace
