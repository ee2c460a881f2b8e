// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Greedy acceptance: walk a draft tree along the target model's own choices.

#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"

REFDEC_NAMESPACE_BEGIN

/// Walks a linearised tree from the root: at each node, descends to the child whose token equals
/// the target's token there, and stops where no child does. Writes the accepted draft nodes into
/// `path` (room for num_nodes - 1 entries) and returns their count; the bonus token is
/// `target[path[count - 1]]` (or `target[0]` when nothing is accepted). Every sibling scan is
/// bounded by the node count and at most num_nodes - 1 nodes are accepted, so a malformed tree (a
/// cycle of links) can neither loop nor write past `path`.
REFDEC_HOST_DEVICE std::int32_t greedy_walk(const Token* tokens,              // [num_nodes]
                                            const std::int32_t* first_child,  // [num_nodes]
                                            const std::int32_t* next_sibling, // [num_nodes]
                                            const Token* target,              // [num_nodes]
                                            std::int32_t num_nodes,
                                            std::int32_t* path) {
  std::int32_t count = 0;
  std::int32_t cur = 0;
  std::int32_t budget = num_nodes;  // total sibling visits; each node is visited at most once
  while (true) {
    const Token want = target[cur];
    std::int32_t c = first_child[cur];
    while (c >= 0 && c < num_nodes && budget-- > 0 && tokens[c] != want) c = next_sibling[c];
    if (c < 0 || c >= num_nodes || budget < 0 || tokens[c] != want || count + 1 >= num_nodes) break;
    path[count++] = c;
    cur = c;
  }
  return count;
}

/// The outcome of one verification step for one sequence.
struct Acceptance {
  std::vector<std::int32_t> nodes;  // [num_accepted] accepted draft nodes, root to leaf
  std::vector<Token> tokens;        // [num_accepted + 1] their tokens, then the bonus token
  /// Number of accepted draft tokens (the bonus token excluded).
  std::int32_t num_accepted() const { return static_cast<std::int32_t>(nodes.size()); }
};

/// Greedy acceptance over `tree` given the target's token at each node (`target`, [num_nodes]).
inline void greedy_accept(const LinearTree& tree, std::span<const Token> target, Acceptance& out) {
  REFDEC_CHECK(static_cast<std::int32_t>(target.size()) == tree.size(),
               "greedy_accept: " << target.size() << " target tokens for a tree of " << tree.size() << " nodes");
  out.nodes.resize(static_cast<std::size_t>(tree.size()));
  const std::int32_t n = greedy_walk(tree.tokens.data(), tree.first_child.data(), tree.next_sibling.data(),
                                     target.data(), tree.size(), out.nodes.data());
  out.nodes.resize(static_cast<std::size_t>(n));
  out.tokens.clear();
  for (const std::int32_t i : out.nodes) out.tokens.push_back(tree.tokens[static_cast<std::size_t>(i)]);
  out.tokens.push_back(target[static_cast<std::size_t>(n > 0 ? out.nodes.back() : 0)]);
}

REFDEC_NAMESPACE_END
