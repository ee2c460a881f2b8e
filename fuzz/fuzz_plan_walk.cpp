// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The step plan and the walk on arbitrary trees: draft trees and auxiliary blocks built from the
// input (and one with nodes added after finish(), which plan_step must refuse), then plan_step, walks with input-chosen targets, keep_accepted; and raw TreeViews with
// arbitrary (malformed) links, which the walk must survive without looping or writing out of
// bounds. Invariants are checked with __builtin_trap (a crash for libFuzzer).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common.hpp"
#include "refdec/core/aux_block.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace refdec;
  refdec_fuzz::Bytes in(data, size);
  constexpr Token kVocab = 64;
  const int batch = 1 + in.byte() % 4;
  std::vector<LinearTree> trees;
  std::vector<AuxBlock> aux(static_cast<std::size_t>(batch));
  std::vector<std::int64_t> lengths;
  for (int b = 0; b < batch; ++b) {
    DraftTree draft;
    for (int p = 0, paths = in.byte() % 8; p < paths; ++p) {
      std::vector<Token> path(1 + in.byte() % 12);
      for (auto& t : path) t = static_cast<Token>(in.byte() % kVocab);
      draft.insert(path, static_cast<float>(in.byte() % 5));
    }
    trees.push_back(draft.linearize(static_cast<Token>(in.byte() % kVocab), in.byte() % 100));
    for (int j = 0, n = in.byte() % 6; j < n; ++j) {
      std::vector<std::int32_t> visible;
      for (int k = 0; k <= j; ++k)
        if (in.byte() % 2 == 0) visible.push_back(k);
      aux[static_cast<std::size_t>(b)].add(static_cast<Token>(in.byte() % kVocab), 1 + in.byte() % 8, visible);
    }
    lengths.push_back(in.byte());
  }
  StepPlan plan;
  // Nodes added to one tree after it was finished: plan_step must refuse it, reading nothing of its
  // short links and mask (AddressSanitizer sees any read past them).
  if (in.byte() % 4 == 0) {
    std::vector<LinearTree> unfinished = trees;
    LinearTree& tree = unfinished[in.byte() % unfinished.size()];
    for (int k = 0, added = 1 + in.byte() % 70; k < added; ++k)
      tree.add_node(static_cast<Token>(in.byte() % kVocab), static_cast<std::int32_t>(in.byte() % tree.tokens.size()), 0.0f);
    bool refused = false;
    try {
      plan_step(unfinished, aux, lengths, kVocab, plan);
    } catch (const ArgumentError&) {
      refused = true;
    }
    if (!refused) __builtin_trap();
  }
  plan_step(trees, aux, lengths, kVocab, plan);
  std::vector<Acceptance> accepted(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    std::vector<Token> target(static_cast<std::size_t>(plan.rows(b)));
    for (auto& t : target) t = static_cast<Token>(in.byte() % kVocab);
    accept(plan.tree(b), ChoiceArray{target.data()}, accepted[static_cast<std::size_t>(b)]);
  }
  KeepPlan keep;
  keep_accepted(plan, accepted, keep);
  for (int b = 0; b < batch; ++b) {
    const auto rows = keep.kept(b);
    for (std::size_t k = 1; k < rows.size(); ++k)
      if (rows[k] <= rows[k - 1] || rows[k] >= plan.num_nodes[static_cast<std::size_t>(b)]) __builtin_trap();
  }

  // A raw tree with arbitrary links: the walk is bounded and writes at most num_nodes - 1 entries.
  const std::int32_t n = 1 + in.byte() % 40;
  std::vector<Token> tokens(static_cast<std::size_t>(n)), target(static_cast<std::size_t>(n));
  std::vector<std::int32_t> first(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    tokens[static_cast<std::size_t>(i)] = static_cast<Token>(in.byte() % 4);
    target[static_cast<std::size_t>(i)] = static_cast<Token>(in.byte() % 4);
    first[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(static_cast<std::int8_t>(in.byte()));
    next[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(static_cast<std::int8_t>(in.byte()));
  }
  std::vector<std::int32_t> path(static_cast<std::size_t>(n - 1 > 0 ? n - 1 : 1), -7);
  Token bonus = -1;
  const std::int32_t count = walk(TreeView{tokens.data(), first.data(), next.data(), n}, ChoiceArray{target.data()}, path.data(), bonus);
  if (count < 0 || count > n - 1) __builtin_trap();
  return 0;
}
