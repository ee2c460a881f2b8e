// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Greedy acceptance: walk a draft tree along the target model's own choices (walk.hpp).

#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/walk.hpp"

REFDEC_NAMESPACE_BEGIN

/// Greedy walk over raw arrays (walk() with the target's token at each node given): writes the
/// accepted draft nodes into `path` (room for num_nodes - 1 entries) and returns their count; the
/// bonus token is `target[path[count - 1]]` (or `target[0]` when nothing is accepted).
REFDEC_HOST_DEVICE std::int32_t greedy_walk(const Token* tokens,               // [num_nodes]
                                            const std::int32_t* first_child,   // [num_nodes]
                                            const std::int32_t* next_sibling,  // [num_nodes]
                                            const Token* target,               // [num_nodes]
                                            std::int32_t num_nodes, std::int32_t* path) {
  ChoiceArray choose{target};
  Token bonus = -1;
  return walk(TreeView{tokens, first_child, next_sibling, num_nodes}, choose, path, bonus);
}

/// Greedy acceptance over `tree` given the target's token at each node (`target`, [num_nodes]).
/// The tree must be finished and hold at least its root (refdec::ArgumentError otherwise).
inline void greedy_accept(const LinearTree& tree, std::span<const Token> target, Acceptance& out) {
  REFDEC_CHECK(tree.size() > 0, "greedy_accept: the tree is empty; it needs at least its root node");
  REFDEC_CHECK(static_cast<std::int32_t>(target.size()) == tree.size(),
               "greedy_accept: " << target.size() << " target tokens for a tree of " << tree.size() << " nodes");
  ChoiceArray choose{target.data()};
  accept(view(tree), choose, out);
}

REFDEC_NAMESPACE_END
