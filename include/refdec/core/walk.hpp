// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The one acceptance walk over a draft tree. How the target's token at a node is obtained is the
// caller's: a greedy argmax, a sample-then-match draw, a replayed true token, an engine's own
// sampler. Greedy, sampled and replayed acceptance and the device verification all walk here.

#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"

REFDEC_NAMESPACE_BEGIN

/// The links of a linearised tree that a walk follows, as raw pointers so that device code and
/// any engine's arrays can provide them. Node 0 is the root; children of a node are linked from
/// `first_child` through `next_sibling`, -1 ending a list.
struct TreeView {
  const Token* tokens = nullptr;               // [num_nodes]
  const std::int32_t* first_child = nullptr;   // [num_nodes]
  const std::int32_t* next_sibling = nullptr;  // [num_nodes]
  std::int32_t num_nodes = 0;
};

/// The links of `tree`, which must be finished (LinearTree::finish(); refdec::ArgumentError
/// otherwise: an unfinished tree has no links to walk).
inline TreeView view(const LinearTree& tree) {
  REFDEC_CHECK(tree.finished(), "draft tree of " << tree.tokens.size() << " nodes is not finished (" << tree.first_child.size()
                                                 << " first-child and " << tree.next_sibling.size()
                                                 << " next-sibling links): call LinearTree::finish()");
  return {tree.tokens.data(), tree.first_child.data(), tree.next_sibling.data(), tree.size()};
}

#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // host-only choosers are fine in host instantiations
#endif
/// Walks `tree` from the root: at the node reached after `depth` accepted drafts, asks
/// `choose(node, depth)` for the target's token y there, descends to the child carrying y, or stops
/// with y as the bonus token (written to `bonus`). Writes the accepted draft nodes into `path`
/// (room for num_nodes - 1 entries) and returns their count. Each node is asked at most once, in
/// root-to-leaf order, so a chooser may draw randomness or process a row lazily. Every sibling
/// scan is bounded by the node count and at most num_nodes - 1 nodes are accepted, so a malformed
/// tree (a cycle of links, an index out of range) can neither loop nor write past `path`. A
/// negative choice never matches a draft (e.g. "no token": a replay past its end).
template <class Choose>
REFDEC_HOST_DEVICE std::int32_t walk(const TreeView& tree, Choose&& choose, std::int32_t* path, Token& bonus) {
  const std::int32_t n = tree.num_nodes;
  std::int32_t count = 0;
  std::int32_t cur = 0;
  std::int32_t visits = n;  // total sibling visits; each node is visited at most once
  while (true) {
    const Token y = choose(cur, count);
    std::int32_t c = tree.first_child[cur];
    while (c >= 0 && c < n && visits-- > 0 && tree.tokens[c] != y) c = tree.next_sibling[c];
    if (c < 0 || c >= n || visits < 0 || tree.tokens[c] != y || count + 1 >= n) {
      bonus = y;
      return count;
    }
    path[count++] = c;
    cur = c;
  }
}

/// The target's token at each node is given in an array: greedy verification (the argmax at each
/// node), or any precomputed choice (every node's draw of the tensor sampling path).
struct ChoiceArray {
  const Token* target;  // [num_nodes]
  REFDEC_HOST_DEVICE Token operator()(std::int32_t node, std::int32_t /*depth*/) const { return target[node]; }
};

/// The outcome of one verification step for one sequence.
struct Acceptance {
  std::vector<std::int32_t> nodes;  // [num_accepted] accepted draft nodes, root to leaf
  std::vector<Token> tokens;        // [num_accepted + 1] their tokens, then the bonus token
  /// Number of accepted draft tokens (the bonus token excluded).
  std::int32_t num_accepted() const { return static_cast<std::int32_t>(nodes.size()); }
};

/// walk() into an Acceptance: the accepted nodes, their tokens and the bonus token.
template <class Choose>
void accept(const TreeView& tree, Choose&& choose, Acceptance& out) {
  REFDEC_CHECK(tree.num_nodes > 0, "accept: a tree needs at least its root node");
  out.nodes.resize(static_cast<std::size_t>(tree.num_nodes));
  Token bonus = -1;
  const std::int32_t n = walk(tree, choose, out.nodes.data(), bonus);
  out.nodes.resize(static_cast<std::size_t>(n));
  out.tokens.clear();
  for (const std::int32_t i : out.nodes) out.tokens.push_back(tree.tokens[i]);
  out.tokens.push_back(bonus);
}

/// The acceptance of a chain of forced tokens (a prompt being prefilled): every node after the
/// root is accepted, so that keep_accepted() keeps every row, and nothing is emitted (no tokens).
inline void accept_all(const TreeView& tree, Acceptance& out) {
  out.nodes.clear();
  for (std::int32_t i = 1; i < tree.num_nodes; ++i) out.nodes.push_back(i);
  out.tokens.clear();
}

REFDEC_NAMESPACE_END
