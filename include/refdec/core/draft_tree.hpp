// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Draft token trees: a trie of candidate continuations with scores (DraftTree), and its
// breadth-first linear form with everything a verifier needs (LinearTree).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// A draft tree in breadth-first order, ready for one verification step. Node 0 is the root: the
/// last token of the sequence, whose KV is not yet cached; nodes 1.. are draft tokens. A parent
/// always precedes its children, siblings are consecutive and ordered by descending score.
struct LinearTree {
  std::vector<Token> tokens;               // [num_nodes] token of each node
  std::vector<std::int32_t> parent;        // [num_nodes] parent index, -1 for the root
  std::vector<std::int32_t> depth;         // [num_nodes] 0 for the root
  std::vector<std::int32_t> first_child;   // [num_nodes] -1 for a leaf
  std::vector<std::int32_t> next_sibling;  // [num_nodes] -1 for the last sibling
  std::vector<float> score;                // [num_nodes] accumulated path score (root: 0)
  std::int32_t mask_words = 0;             // 64-bit words per mask row: ceil(num_nodes / 64)
  std::vector<std::uint64_t> mask;         // [num_nodes, mask_words] bit j of row i: j is i or an ancestor

  /// Number of nodes, the root included.
  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  /// Number of draft nodes (the root excluded).
  std::int32_t num_drafts() const { return size() > 0 ? size() - 1 : 0; }
  /// Depth of the deepest node (0 for a root-only tree).
  std::int32_t max_depth() const { return depth.empty() ? 0 : *std::max_element(depth.begin(), depth.end()); }
  /// Whether finish() has run since the nodes last changed: every per-node array and the mask
  /// sized to the nodes. What reads the links or the mask (plan_step, the walk, attends) checks it.
  bool finished() const {
    const std::size_t n = tokens.size();
    return parent.size() == n && depth.size() == n && score.size() == n && first_child.size() == n && next_sibling.size() == n &&
           mask_words == static_cast<std::int32_t>((n + 63) / 64) && mask.size() == n * static_cast<std::size_t>(mask_words);
  }

  /// True when node `i` may attend to node `j` (j is i or one of its ancestors). Both must be nodes
  /// of the finished tree (an empty tree has none): anything else throws refdec::ArgumentError.
  bool attends(std::int32_t i, std::int32_t j) const {
    const std::int32_t n = size();
    REFDEC_CHECK(i >= 0 && i < n && j >= 0 && j < n,
                 "LinearTree::attends(" << i << ", " << j << "): node indices must be in [0, " << n << ")");
    REFDEC_CHECK(finished(), "LinearTree::attends: the tree of " << n << " nodes is not finished (call finish())");
    return (mask[static_cast<std::size_t>(i) * static_cast<std::size_t>(mask_words) + static_cast<std::size_t>(j / 64)] >> (j % 64)) & 1U;
  }

  /// Resets to a single root node carrying `root`.
  void reset(Token root) {
    clear_nodes();
    add_node(root, -1, 0.0f);
    finish();
  }

  /// A chain: tokens[0] is the root and each token the child of the previous one (a causal block,
  /// e.g. a prompt to prefill). Empty for empty `chain_tokens`.
  static LinearTree chain(std::span<const Token> chain_tokens) {
    LinearTree t;
    for (std::size_t i = 0; i < chain_tokens.size(); ++i) t.add_node(chain_tokens[i], static_cast<std::int32_t>(i) - 1, 0.0f);
    t.finish();
    return t;
  }

  /// Appends a node; `parent_index` must be -1 for the first node (the root) and an existing node,
  /// in [0, size()), for every later one (refdec::ArgumentError otherwise). Call finish() after the
  /// last one.
  void add_node(Token token, std::int32_t parent_index, float node_score) {
    const std::int32_t n = size();
    if (n == 0)
      REFDEC_CHECK(parent_index == -1, "LinearTree::add_node: the first node is the root and needs parent -1, got " << parent_index);
    else
      REFDEC_CHECK(parent_index >= 0 && parent_index < n, "LinearTree::add_node: parent index " << parent_index << " of node " << n
                                                                                                << " is not an existing node [0, " << n
                                                                                                << ")");
    REFDEC_CHECK(parent.size() == tokens.size() && depth.size() == tokens.size() && score.size() == tokens.size(),
                 "LinearTree::add_node: the node arrays have different lengths (tokens "
                     << tokens.size() << ", parent " << parent.size() << ", depth " << depth.size() << ", score " << score.size() << ")");
    tokens.push_back(token);
    parent.push_back(parent_index);
    depth.push_back(parent_index < 0 ? 0 : depth[static_cast<std::size_t>(parent_index)] + 1);
    score.push_back(node_score);
  }

  /// Derives the child/sibling arrays and the ancestor mask from `parent`. Checks the links first:
  /// `parent`, `depth` and `score` one entry per node, node 0 the root (parent -1), every other node's
  /// parent an earlier node (refdec::ArgumentError naming the node otherwise, e.g. after the
  /// public arrays were edited by hand).
  void finish() {
    const std::int32_t n = size();
    REFDEC_CHECK(parent.size() == tokens.size() && depth.size() == tokens.size() && score.size() == tokens.size(),
                 "LinearTree::finish: " << tokens.size() << " tokens but " << parent.size() << " parents, " << depth.size()
                                        << " depths and " << score.size() << " scores");
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t p = parent[static_cast<std::size_t>(i)];
      if (i == 0)
        REFDEC_CHECK(p == -1, "LinearTree::finish: node 0 is the root and needs parent -1, got " << p);
      else
        REFDEC_CHECK(p >= 0 && p < i, "LinearTree::finish: parent " << p << " of node " << i << " is not an earlier node [0, " << i << ")");
    }
    first_child.assign(static_cast<std::size_t>(n), -1);
    next_sibling.assign(static_cast<std::size_t>(n), -1);
    for (std::int32_t i = n - 1; i >= 1; --i) {  // backwards so that siblings keep their order
      const auto p = static_cast<std::size_t>(parent[static_cast<std::size_t>(i)]);
      next_sibling[static_cast<std::size_t>(i)] = first_child[p];
      first_child[p] = i;
    }
    mask_words = (n + 63) / 64;
    mask.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(mask_words), 0);
    for (std::int32_t i = 0; i < n; ++i) {
      std::uint64_t* row = &mask[static_cast<std::size_t>(i) * static_cast<std::size_t>(mask_words)];
      if (i > 0) {  // a parent's row is complete before its children's (parents come first)
        const std::uint64_t* prow =
            &mask[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)]) * static_cast<std::size_t>(mask_words)];
        std::copy(prow, prow + mask_words, row);
      }
      row[i / 64] |= std::uint64_t{1} << (i % 64);
    }
  }

 private:
  void clear_nodes() {
    tokens.clear();
    parent.clear();
    depth.clear();
    score.clear();
  }
  friend class DraftTree;
};

/// Readable form for golden tests: one line per node in depth-first order, indented by depth,
/// `[index] token (score)`.
inline std::string to_string(const LinearTree& tree) {
  std::ostringstream os;
  std::vector<std::int32_t> stack;
  if (tree.size() > 0) stack.push_back(0);
  while (!stack.empty()) {
    const std::int32_t i = stack.back();
    stack.pop_back();
    const auto u = static_cast<std::size_t>(i);
    os << std::string(static_cast<std::size_t>(2 * tree.depth[u]), ' ') << '[' << i << "] " << tree.tokens[u];
    if (i > 0) os << " (" << tree.score[u] << ')';
    os << '\n';
    std::vector<std::int32_t> children;
    for (std::int32_t c = tree.first_child[u]; c >= 0; c = tree.next_sibling[static_cast<std::size_t>(c)]) children.push_back(c);
    stack.insert(stack.end(), children.rbegin(), children.rend());
  }
  return os.str();
}

/// Marks in `keep` ([nodes.size()], 1 = kept) the best `budget` nodes below node 0 of a trie whose
/// nodes have `first_child`, `next_sibling` and `depth` (a parent's index below its children's), by
/// best-first expansion from the root: the frontier holds children of kept nodes, so ancestors are
/// kept before descendants whatever the scores. Order: higher `score(index)`, then shallower, then
/// lower index. Returns the number kept. The one cut rule of DraftTree and of REST retrieval.
/// `frontier` is scratch memory, reusable across calls.
template <class Nodes, class Score>
std::size_t select_best_first(const Nodes& nodes, Score score, std::size_t budget, std::vector<std::uint8_t>& keep,
                              std::vector<std::int32_t>& frontier) {
  keep.assign(nodes.size(), 0);
  auto worse = [&](std::int32_t a, std::int32_t b) {
    const auto sa = score(a), sb = score(b);
    if (sa != sb) return sa < sb;
    const auto da = nodes[static_cast<std::size_t>(a)].depth, db = nodes[static_cast<std::size_t>(b)].depth;
    if (da != db) return da > db;
    return a > b;
  };
  // A max-heap under `worse`; the order is total, so the kept set does not depend on the heap.
  frontier.clear();
  auto push = [&](std::int32_t i) {
    frontier.push_back(i);
    std::push_heap(frontier.begin(), frontier.end(), worse);
  };
  for (std::int32_t c = nodes[0].first_child; c >= 0; c = nodes[static_cast<std::size_t>(c)].next_sibling) push(c);
  std::size_t kept = 0;
  while (kept < budget && !frontier.empty()) {
    std::pop_heap(frontier.begin(), frontier.end(), worse);
    const std::int32_t i = frontier.back();
    frontier.pop_back();
    keep[static_cast<std::size_t>(i)] = 1;
    ++kept;
    for (std::int32_t c = nodes[static_cast<std::size_t>(i)].first_child; c >= 0; c = nodes[static_cast<std::size_t>(c)].next_sibling)
      push(c);
  }
  return kept;
}

/// select_best_first() with frontier memory of its own.
template <class Nodes, class Score>
std::size_t select_best_first(const Nodes& nodes, Score score, std::size_t budget, std::vector<std::uint8_t>& keep) {
  std::vector<std::int32_t> frontier;
  return select_best_first(nodes, score, budget, keep, frontier);
}

/// Scratch memory for DraftTree::linearize(), reusable across calls and trees. Give each thread its
/// own: a DraftTree keeps none, so one const tree can be linearised by many threads at once.
struct LinearizeScratch {
  std::vector<std::uint8_t> keep;      // [tree nodes] 1 = kept by the cut
  std::vector<std::int32_t> frontier;  // [<= tree nodes] the cut's best-first frontier (a heap)
  std::vector<std::int32_t> queue;     // [kept nodes + 1] trie node of each output node, breadth-first
  std::vector<std::int32_t> children;  // [children of one node] its kept children, by descending score
};

/// A trie of candidate continuations of the current sequence. Paths are inserted with scores;
/// shared prefixes are merged (siblings are distinct tokens) and every node accumulates the scores
/// of the paths through it, so a node never scores below its descendants. add_child() and
/// set_score() build a trie node by node instead, with scores of the caller's choosing. A const
/// tree may be read (linearised) from many threads at once; changing it needs one owner.
class DraftTree {
 public:
  DraftTree() { clear(); }

  /// Removes all draft nodes.
  void clear() { nodes_.assign(1, Node{}); }

  /// Number of draft nodes (the implicit root excluded).
  std::size_t size() const { return nodes_.size() - 1; }
  bool empty() const { return nodes_.size() == 1; }

  /// The score insert() adds when given none: one path counted once.
  static constexpr float kDefaultPathScore = 1.0f;

  /// Inserts `path` (tokens that follow the root) and adds `score` to every node on it.
  /// `score` must be finite and non-negative.
  void insert(std::span<const Token> path, float path_score = kDefaultPathScore) {
    REFDEC_CHECK(std::isfinite(path_score) && path_score >= 0.0f, "draft path score must be finite and non-negative, got " << path_score);
    std::int32_t cur = 0;
    for (const Token t : path) {
      cur = add_child(cur, t);
      nodes_[static_cast<std::size_t>(cur)].score += path_score;
    }
  }

  /// A node of the trie as stored: index 0 is the implicit root (token -1, score 0), and a parent's
  /// index is always below its children's.
  struct Node {
    Token token = -1;
    float score = 0.0f;              ///< accumulated score of the paths through it
    std::int32_t first_child = -1;   ///< oldest child, -1 for a leaf
    std::int32_t next_sibling = -1;  ///< next younger sibling, -1 for the last one
    std::int32_t depth = 0;          ///< 0 for the root
  };

  /// Node `index` (0 is the root, 1..size() the draft nodes), for reading a drafter's proposal.
  const Node& node(std::int32_t index) const {
    REFDEC_CHECK(index >= 0 && static_cast<std::size_t>(index) < nodes_.size(),
                 "draft tree node index " << index << " is out of range [0, " << nodes_.size() << ")");
    return nodes_[static_cast<std::size_t>(index)];
  }

  /// The child of node `parent` that carries `token`, or -1 when there is none. Scans the
  /// siblings, so costs O(number of children).
  std::int32_t find_child(std::int32_t parent, Token token) const {
    std::int32_t last = -1;
    return find_child(parent, token, last);
  }

  /// The child of node `parent` that carries `token`, created with score 0 (after its siblings)
  /// when there is none. Returns its index. For building a tree node by node, e.g. merging trees.
  std::int32_t add_child(std::int32_t parent, Token token) {
    REFDEC_CHECK(token >= 0, "draft token ids must be non-negative, got " << token);
    std::int32_t last = -1;
    std::int32_t child = find_child(parent, token, last);
    if (child >= 0) return child;
    child = static_cast<std::int32_t>(nodes_.size());
    nodes_.push_back(Node{token, 0.0f, -1, -1, nodes_[static_cast<std::size_t>(parent)].depth + 1});
    if (last < 0)
      nodes_[static_cast<std::size_t>(parent)].first_child = child;
    else
      nodes_[static_cast<std::size_t>(last)].next_sibling = child;
    return child;
  }

  /// Sets the score of draft node `index` (>= 1); `node_score` must be finite and non-negative. Unlike
  /// insert(), nothing accumulates: a caller that sets scores keeps a node from scoring above its
  /// parent if it wants cuts to keep a top-scored set.
  void set_score(std::int32_t index, float node_score) {
    REFDEC_CHECK(index >= 1 && static_cast<std::size_t>(index) < nodes_.size(),
                 "draft node index " << index << " is out of range [1, " << nodes_.size() << ")");
    REFDEC_CHECK(std::isfinite(node_score) && node_score >= 0.0f, "draft node score must be finite and non-negative, got " << node_score);
    nodes_[static_cast<std::size_t>(index)].score = node_score;
  }

  /// Cuts the tree to at most `budget` draft nodes, keeping the best-scored ones (a kept node's
  /// ancestors are always kept; ties go to shallower, then earlier-inserted nodes), and writes
  /// its breadth-first form with root token `root` into `out`. With a reused `scratch` (and `out`)
  /// a step allocates nothing once the buffers have grown.
  void linearize(Token root, std::size_t budget, LinearTree& out, LinearizeScratch& scratch) const {
    out.clear_nodes();
    out.add_node(root, -1, 0.0f);
    select(budget, scratch.keep, scratch.frontier);
    // Breadth-first numbering; children of each node in descending score order.
    auto& queue = scratch.queue;
    auto& children = scratch.children;
    queue.assign(1, 0);
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const std::int32_t trie_node = queue[head];
      children.clear();
      for (std::int32_t c = nodes_[static_cast<std::size_t>(trie_node)].first_child; c >= 0;
           c = nodes_[static_cast<std::size_t>(c)].next_sibling)
        if (scratch.keep[static_cast<std::size_t>(c)]) children.push_back(c);
      std::stable_sort(children.begin(), children.end(), [this](std::int32_t a, std::int32_t b) {
        return nodes_[static_cast<std::size_t>(a)].score > nodes_[static_cast<std::size_t>(b)].score;
      });
      for (const std::int32_t c : children) {
        const Node& n = nodes_[static_cast<std::size_t>(c)];
        out.add_node(n.token, static_cast<std::int32_t>(head), n.score);
        queue.push_back(c);
      }
    }
    out.finish();
  }

  /// linearize() with scratch memory of its own.
  void linearize(Token root, std::size_t budget, LinearTree& out) const {
    LinearizeScratch scratch;
    linearize(root, budget, out, scratch);
  }

  /// Cuts the tree in place to the `budget` nodes linearize() would keep; scores are unchanged.
  /// For drafters that gather more candidates than they may return.
  void prune(std::size_t budget) {
    if (size() <= budget) return;
    DraftTree kept;
    PruneScratch scratch;
    pruned_into(budget, kept, scratch);
    nodes_.swap(kept.nodes_);
  }

  /// Memory pruned_into() reuses across calls.
  struct PruneScratch {
    std::vector<std::uint8_t> keep;        // [tree nodes] 1 = kept by the cut
    std::vector<std::int32_t> frontier;    // the cut's best-first frontier
    std::vector<std::int32_t> parent;      // [tree nodes]
    std::vector<std::int32_t> renumber;    // [tree nodes] index in `out`, -1 if cut
    std::vector<std::int32_t> last_child;  // [kept nodes] tail of each sibling list in `out`
  };

  /// Writes into `out` the tree prune(budget) leaves (all of it when it has at most `budget`
  /// nodes), reusing `out`'s and `scratch`'s memory; this tree is unchanged.
  void pruned_into(std::size_t budget, DraftTree& out, PruneScratch& scratch) const {
    if (size() <= budget) {
      out.nodes_.assign(nodes_.begin(), nodes_.end());
      return;
    }
    select(budget, scratch.keep, scratch.frontier);
    scratch.parent.assign(nodes_.size(), -1);
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      for (std::int32_t c = nodes_[i].first_child; c >= 0; c = nodes_[static_cast<std::size_t>(c)].next_sibling)
        scratch.parent[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(i);
    // Renumbering in index order keeps parents before children and the tie order of linearize().
    scratch.renumber.assign(nodes_.size(), -1);
    scratch.last_child.assign(nodes_.size(), -1);
    std::vector<Node>& kept = out.nodes_;
    kept.assign(1, Node{});
    scratch.renumber[0] = 0;
    for (std::size_t i = 1; i < nodes_.size(); ++i) {
      if (!scratch.keep[i]) continue;
      const auto id = static_cast<std::int32_t>(kept.size());
      scratch.renumber[i] = id;
      const auto p = static_cast<std::size_t>(scratch.renumber[static_cast<std::size_t>(scratch.parent[i])]);
      kept.push_back(Node{nodes_[i].token, nodes_[i].score, -1, -1, nodes_[i].depth});
      if (scratch.last_child[p] < 0)
        kept[p].first_child = id;
      else
        kept[static_cast<std::size_t>(scratch.last_child[p])].next_sibling = id;
      scratch.last_child[p] = id;
    }
  }

  /// Convenience form of linearize() that returns a fresh LinearTree.
  LinearTree linearize(Token root, std::size_t budget) const {
    LinearTree out;
    linearize(root, budget, out);
    return out;
  }

 private:
  // find_child() that also reports the last sibling scanned (-1 if none), where a new child goes.
  std::int32_t find_child(std::int32_t parent, Token token, std::int32_t& last) const {
    std::int32_t child = node(parent).first_child;
    while (child >= 0 && nodes_[static_cast<std::size_t>(child)].token != token) {
      last = child;
      child = nodes_[static_cast<std::size_t>(child)].next_sibling;
    }
    return child;
  }

  // Marks in `keep` the best `budget` nodes (select_best_first()).
  void select(std::size_t budget, std::vector<std::uint8_t>& keep, std::vector<std::int32_t>& frontier) const {
    select_best_first(
        nodes_, [this](std::int32_t i) { return nodes_[static_cast<std::size_t>(i)].score; }, budget, keep, frontier);
  }

  std::vector<Node> nodes_;  // [1 + size()] node 0 is the implicit root
};

REFDEC_NAMESPACE_END
