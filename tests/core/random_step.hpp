// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Random draft trees, auxiliary blocks, step plans and targets for the step tests.

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"

namespace refdec_test {

// A random draft tree of one of several shapes (chain, star, narrow bushy, wide deep), cut to a
// random budget that often crosses 64-node mask word boundaries; sometimes only the root.
inline refdec::LinearTree random_tree(std::mt19937& rng) {
  refdec::DraftTree t;
  const auto pick = [&](unsigned n) { return static_cast<refdec::Token>(rng() % n); };
  switch (rng() % 4) {
    case 0: {  // a chain
      std::vector<refdec::Token> path(1 + rng() % 90);
      for (auto& x : path) x = pick(1000);
      t.insert(path, 1.0f);
      break;
    }
    case 1:  // a star: many distinct children of the root
      for (refdec::Token x = 0, n = pick(150); x < n; ++x) t.insert(std::vector<refdec::Token>{x}, 1.0f + static_cast<float>(rng() % 5));
      break;
    case 2:  // narrow and bushy: few token values, many short paths
      for (int p = 0, n = 1 + pick(40); p < n; ++p) {
        std::vector<refdec::Token> path(1 + rng() % 9);
        for (auto& x : path) x = pick(3);
        t.insert(path, 1.0f);
      }
      break;
    default:  // wide and deep
      for (int p = 0, n = 1 + pick(30); p < n; ++p) {
        std::vector<refdec::Token> path(1 + rng() % 12);
        for (auto& x : path) x = pick(50);
        t.insert(path, static_cast<float>(1 + rng() % 3));
      }
  }
  return t.linearize(pick(1000), rng() % 140);
}

/// The sizes of a random auxiliary block.
struct AuxShape {
  unsigned empty_one_in = 3;  ///< one block in this many is empty
  unsigned max_tokens = 40;   ///< otherwise 0 .. max_tokens - 1 tokens
  unsigned max_offset = 10;   ///< offsets 1 .. max_offset
  unsigned vocab = 1000;      ///< token ids below this
};

/// A random auxiliary block: tokens past the root that see the root and random earlier tokens.
inline refdec::AuxBlock random_aux(std::mt19937& rng, const AuxShape& shape = {}) {
  refdec::AuxBlock block;
  const unsigned n = rng() % shape.empty_one_in == 0 ? 0 : rng() % shape.max_tokens;
  for (unsigned j = 0; j < n; ++j) {
    std::vector<std::int32_t> visible;
    for (unsigned k = 0; k <= j; ++k)
      if (rng() % 3 == 0) visible.push_back(static_cast<std::int32_t>(k));
    block.add(static_cast<refdec::Token>(rng() % shape.vocab), 1 + static_cast<std::int32_t>(rng() % shape.max_offset), visible);
  }
  return block;
}

/// A plan of `batch` random trees (tokens below 1000) after random cached lengths below 50, with
/// auxiliary rows or without.
inline refdec::StepPlan random_plan(std::mt19937& rng, std::int32_t batch, bool with_aux) {
  std::vector<refdec::LinearTree> trees;
  std::vector<refdec::AuxBlock> aux;
  std::vector<std::int64_t> lengths;
  for (std::int32_t b = 0; b < batch; ++b) {
    trees.push_back(random_tree(rng));
    aux.push_back(random_aux(rng));
    lengths.push_back(static_cast<std::int64_t>(rng() % 50));
  }
  refdec::StepPlan plan;
  plan_step(trees, with_aux ? std::span<const refdec::AuxBlock>(aux) : std::span<const refdec::AuxBlock>{}, lengths, 1000, plan);
  return plan;
}

/// The target's token at each plan row ([R], below 1000): at a tree node mostly one of its
/// children (so that walks go deep), sometimes a token no child carries; anything at an auxiliary
/// row.
inline std::vector<refdec::Token> random_target(std::mt19937& rng, const refdec::StepPlan& plan) {
  std::vector<refdec::Token> target(static_cast<std::size_t>(plan.rows()));
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    const refdec::TreeView tree = plan.tree(b);
    for (std::int32_t i = 0; i < plan.rows(b); ++i) {
      refdec::Token& y = target[static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + i)];
      y = static_cast<refdec::Token>(rng() % 1000);
      if (i >= tree.num_nodes || rng() % 5 == 0) continue;
      std::vector<refdec::Token> children;
      for (std::int32_t c = tree.first_child[i]; c >= 0; c = tree.next_sibling[c]) children.push_back(tree.tokens[c]);
      if (!children.empty()) y = children[rng() % children.size()];
    }
  }
  return target;
}

}  // namespace refdec_test
