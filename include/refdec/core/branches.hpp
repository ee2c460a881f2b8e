// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A draft tree as branches, for engines without custom attention masks (llama.cpp's batches of
// sequence ids): every root-to-leaf path is a branch, each node carries the branches through it
// and its position, and after the walk one branch's cells stay. No KV cell ever moves: a step's
// cells are kept or dropped in place by branch id.
//
// Why it is exact: a node attends to the sequence's cached cells and to the step's cells of one
// of its branches at positions up to its own. Every branch through a node contains all of its
// ancestors, one per position below it, and nothing else at those positions, so that is exactly
// the tree mask's row of the node.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/walk.hpp"

REFDEC_NAMESPACE_BEGIN

/// Writes, for each node i of `tree`: positions[i] = first_position + its depth, and the branches
/// through it, numbered in depth-first order so that they are the run begin[i] .. end[i] - 1 (the
/// root's: all of them). Returns the number of branches (the leaves; 1 for a tree of the root
/// alone). Every span has the tree's num_nodes entries. refdec::ArgumentError for links that do
/// not make a tree over all the nodes (out of range, a node reached twice, one never reached).
inline std::int32_t tree_branches(TreeView tree, std::int64_t first_position, std::span<std::int64_t> positions,
                                  std::span<std::int32_t> begin, std::span<std::int32_t> end) {
  const std::int32_t n = tree.num_nodes;
  REFDEC_CHECK(n >= 1 && tree.first_child != nullptr && tree.next_sibling != nullptr, "tree_branches: a tree needs its root and its links");
  const auto size = static_cast<std::size_t>(n);
  REFDEC_CHECK(
      positions.size() >= size && begin.size() >= size && end.size() >= size,
      "tree_branches: arrays of " << positions.size() << ", " << begin.size() << " and " << end.size() << " entries for " << n << " nodes");
  std::fill_n(begin.begin(), size, -1);  // -1: not reached yet
  // end[v] holds v's next child to visit while v is on the path, its branches' end afterwards.
  std::vector<std::int32_t> path{0};
  positions[0] = first_position;
  begin[0] = 0;
  end[0] = tree.first_child[0];
  std::int32_t count = 0, reached = 1;
  while (!path.empty()) {
    const std::int32_t v = path.back();
    const std::int32_t c = end[static_cast<std::size_t>(v)];
    if (c >= 0) {
      REFDEC_CHECK(c < n && begin[static_cast<std::size_t>(c)] < 0,
                   "tree_branches: node " << v << " links to node " << c << (c < n ? ", reached before" : ", out of range"));
      const auto ci = static_cast<std::size_t>(c);
      end[static_cast<std::size_t>(v)] = tree.next_sibling[ci];
      positions[ci] = positions[static_cast<std::size_t>(v)] + 1;
      begin[ci] = count;
      end[ci] = tree.first_child[ci];
      path.push_back(c);
      ++reached;
      continue;
    }
    if (tree.first_child[static_cast<std::size_t>(v)] < 0) ++count;  // a leaf ends its branch
    end[static_cast<std::size_t>(v)] = count;
    path.pop_back();
  }
  REFDEC_CHECK(reached == n, "tree_branches: " << n - reached << " of " << n << " nodes are not reached from the root");
  return count;
}

/// The branch whose cells stay after a walk that accepted the nodes `path` (root excluded): the
/// first branch through the last of them (or, when none was accepted, through the root). Keep its
/// cells at positions before first_position + 1 + path.size() and drop every other cell the step
/// wrote.
inline std::int32_t winning_branch(std::span<const std::int32_t> begin, std::span<const std::int32_t> path) {
  const std::int32_t last = path.empty() ? 0 : path.back();
  REFDEC_CHECK(last >= 0 && static_cast<std::size_t>(last) < begin.size(),
               "winning_branch: accepted node " << last << " is not one of the tree's " << begin.size());
  return begin[static_cast<std::size_t>(last)];
}

/// tree_branches() into vectors of its own, for C++ and Python engines.
struct Branches {
  std::vector<std::int64_t> positions;  // [nodes] first_position + depth
  std::vector<std::int32_t> begin;      // [nodes] first branch through each node
  std::vector<std::int32_t> end;        // [nodes] one past its last
  std::int32_t count = 0;               // branches

  /// Lays out `tree` (its links; see tree_branches()).
  void build(TreeView tree, std::int64_t first_position) {
    const auto n = static_cast<std::size_t>(std::max(tree.num_nodes, 0));
    positions.resize(n);
    begin.resize(n);
    end.resize(n);
    count = tree_branches(tree, first_position, positions, begin, end);
  }
  /// The branch that stays after a walk that accepted `path` (winning_branch()).
  std::int32_t winner(std::span<const std::int32_t> path) const { return winning_branch(begin, path); }
};

REFDEC_NAMESPACE_END
