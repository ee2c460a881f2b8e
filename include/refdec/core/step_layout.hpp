// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The per-node and per-sequence logic of a batched verification step over a padded tree
// description: layout (depth, positions, packed ancestor mask, child/sibling links) from the parent
// array, the target's argmax, the greedy walk, and KV compaction of the accepted path. Each
// function handles what one GPU thread handles, so the CUDA kernels (refdec/cuda/step_kernels.cuh)
// and the host loops here run the same code.
//
// The padded description of B sequences: parents [B, T] int32. Row b holds one LinearTree's
// parent array (node 0, the root, has parent -1) followed by padding (-1). The tree ends at the
// first node i >= 1 whose parent is not in [0, i); a well-formed row has only -1 after that
// (check_parents() verifies it on the host), and device code treats whatever follows as padding.

#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/step_plan.hpp"

REFDEC_NAMESPACE_BEGIN

/// Number of tree nodes in one padded parent row of `padded` entries: the root plus the nodes up to
/// the first whose parent does not precede it. 0 for an empty row.
REFDEC_HOST_DEVICE std::int32_t tree_size(const std::int32_t* parent,  // [padded]
                                          std::int32_t padded) {
  if (padded <= 0) return 0;
  std::int32_t n = 1;
  while (n < padded && parent[n] >= 0 && parent[n] < n) ++n;
  return n;
}

/// Writes the layout of node `i` (in [0, padded)) of a padded row with `num_nodes` tree nodes (tree_size()): its
/// depth, its packed mask row (bit j: j is i or an ancestor of i), its first child and next
/// sibling (-1 for none, siblings in index order as in LinearTree). A padding node (i >= num_nodes)
/// gets depth 0, only its own mask bit (so that its attention row is not empty) and no links.
/// Costs O(padded) per node; every loop is bounded by the node count.
REFDEC_HOST_DEVICE void layout_node(const std::int32_t* parent,  // [padded]
                                    std::int32_t padded, std::int32_t num_nodes, std::int32_t i,
                                    std::int32_t& depth, std::uint64_t* mask_row,  // [mask_words_for(padded)]
                                    std::int32_t& first_child, std::int32_t& next_sibling) {
  const std::int32_t words = mask_words_for(padded);
  for (std::int32_t w = 0; w < words; ++w) mask_row[w] = 0;
  mask_row[i / 64] = std::uint64_t{1} << (i % 64);
  depth = 0;
  first_child = -1;
  next_sibling = -1;
  const std::int32_t n = num_nodes < padded ? num_nodes : padded;
  if (i >= n) return;
  // Each step climbs to a strictly smaller index, so it ends within i steps even for a count
  // that does not come from tree_size().
  for (std::int32_t a = i; a > 0 && parent[a] >= 0 && parent[a] < a;) {
    a = parent[a];
    mask_row[a / 64] |= std::uint64_t{1} << (a % 64);
    ++depth;
  }
  for (std::int32_t j = i + 1; j < n && first_child < 0; ++j)
    if (parent[j] == i) first_child = j;
  if (i == 0) return;
  for (std::int32_t j = i + 1; j < n && next_sibling < 0; ++j)
    if (parent[j] == parent[i]) next_sibling = j;
}

/// Rejects a padded parent row that is not a tree followed by padding: node 0 must have parent
/// -1, every node up to the tree's end a parent that precedes it, and every later entry -1.
inline void check_parents(std::span<const std::int32_t> parent) {
  const auto padded = static_cast<std::int32_t>(parent.size());
  REFDEC_CHECK(padded >= 1, "a padded tree needs at least the root node");
  REFDEC_CHECK(parent[0] == -1, "the root's parent must be -1, got " << parent[0]);
  const std::int32_t n = tree_size(parent.data(), padded);
  for (std::int32_t i = n; i < padded; ++i)
    REFDEC_CHECK(parent[static_cast<std::size_t>(i)] == -1,
                 "node " << i << " has parent " << parent[static_cast<std::size_t>(i)] << ": a parent must precede its child"
                         << " and padding after the tree's " << n << " nodes must be -1");
}

/// The layout of a padded batch of trees, built on the host (the reference for the CUDA kernel).
struct StepLayout {
  std::int32_t batch = 0;
  std::int32_t padded = 0;       ///< T, nodes per sequence including padding
  std::int32_t mask_words = 0;   ///< mask_words_for(T)
  std::vector<std::int32_t> num_nodes;     // [B] tree nodes per sequence
  std::vector<std::int32_t> depth;         // [B, T] 0 for the root and padding
  std::vector<std::int64_t> positions;     // [B, T] cached length + depth
  std::vector<std::uint64_t> mask;         // [B, T, mask_words] bit j of row i: j is i or an ancestor
  std::vector<std::int32_t> first_child;   // [B, T] -1 for a leaf or padding
  std::vector<std::int32_t> next_sibling;  // [B, T] -1 for the last sibling or padding
};

/// Lays out `parents` ([B, T] int32, checked by check_parents()) for sequences with `lengths`
/// ([B]) cached tokens.
inline void build_step_layout(std::span<const std::int32_t> parents, std::span<const std::int64_t> lengths,
                              std::int32_t padded, StepLayout& out) {
  REFDEC_CHECK(padded >= 1 && !lengths.empty() && parents.size() == lengths.size() * static_cast<std::size_t>(padded),
               "build_step_layout: " << parents.size() << " parents for " << lengths.size() << " sequences of "
                                     << padded << " nodes");
  const auto T = static_cast<std::size_t>(padded);
  const std::size_t B = lengths.size();
  for (std::size_t b = 0; b < B; ++b) check_parents(parents.subspan(b * T, T));
  out.batch = static_cast<std::int32_t>(B);
  out.padded = padded;
  out.mask_words = mask_words_for(padded);
  const auto W = static_cast<std::size_t>(out.mask_words);
  out.num_nodes.resize(B);
  out.depth.resize(B * T);
  out.positions.resize(B * T);
  out.mask.resize(B * T * W);
  out.first_child.resize(B * T);
  out.next_sibling.resize(B * T);
  for (std::size_t b = 0; b < B; ++b) {
    const std::int32_t* row = parents.data() + b * T;
    out.num_nodes[b] = tree_size(row, padded);
    for (std::size_t i = 0; i < T; ++i) {
      const std::size_t k = b * T + i;
      layout_node(row, padded, out.num_nodes[b], static_cast<std::int32_t>(i), out.depth[k], &out.mask[k * W],
                  out.first_child[k], out.next_sibling[k]);
      out.positions[k] = lengths[b] + out.depth[k];
    }
  }
}

/// True when logit `a` at vocabulary index `ia` beats `b` at `ib` for the argmax: the larger value
/// wins, NaN beats every number, and ties go to the smaller index (torch's argmax). A total order,
/// so a parallel reduction gives the same answer in any order.
REFDEC_HOST_DEVICE bool argmax_prefers(float a, std::int32_t ia, float b, std::int32_t ib) {
  const bool a_nan = a != a;
  const bool b_nan = b != b;
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

/// Index of the largest of `vocab` logits (argmax_prefers()); 0 for an empty row.
inline std::int32_t argmax(const float* logits,  // [vocab]
                           std::int32_t vocab) {
  std::int32_t best = 0;
  for (std::int32_t v = 1; v < vocab; ++v)
    if (argmax_prefers(logits[v], v, logits[best], best)) best = v;
  return best;
}

/// Greedy verification of one sequence of a padded batch: walks the tree (greedy_walk) and writes
/// the kept step rows `kept` (0 for the root, then the accepted draft nodes, then -1 up to T), the
/// number of accepted draft nodes and the bonus token (the target's token at the last kept row).
/// `num_nodes` is clamped to [1, T] (T = `padded` >= 1) so that a bad count cannot read past the row.
REFDEC_HOST_DEVICE void greedy_verify_sequence(const Token* tokens,              // [T]
                                               const std::int32_t* first_child,  // [T]
                                               const std::int32_t* next_sibling, // [T]
                                               const Token* target,              // [T]
                                               std::int32_t num_nodes, std::int32_t padded,
                                               std::int32_t* kept,  // [T]
                                               std::int32_t& num_accepted, Token& bonus) {
  const std::int32_t n = num_nodes < 1 ? 1 : num_nodes > padded ? padded : num_nodes;
  kept[0] = 0;
  num_accepted = greedy_walk(tokens, first_child, next_sibling, target, n, kept + 1);
  for (std::int32_t k = num_accepted + 1; k < padded; ++k) kept[k] = -1;
  bonus = target[kept[num_accepted]];
}

/// Number of leading entries of `kept` ([T] step rows, as greedy_verify_sequence() writes them)
/// that form a valid compaction plan for a sequence with `length` of `capacity` slots cached:
/// at most `num_kept` entries, each row k at least k (so that entries only move down), rows strictly
/// increasing, and every source slot inside the cache (a negative length keeps nothing). A
/// malformed plan is cut at its first bad entry.
REFDEC_HOST_DEVICE std::int32_t valid_kept(const std::int32_t* kept, std::int32_t num_kept, std::int64_t length,
                                           std::int64_t capacity) {
  if (length < 0) return 0;
  std::int32_t k = 0;
  while (k < num_kept && kept[k] >= k && (k == 0 || kept[k] > kept[k - 1]) && length + kept[k] < capacity) ++k;
  return k;
}

/// Compacts element `e` of every kept entry of one sequence in one layer: for k in increasing
/// order, slot length + kept[k] moves to slot length + k (what KvCache::commit does). `num_kept`
/// must come from valid_kept(). In increasing order, a destination slot (length + k) is only ever
/// the source of an earlier entry, which has already moved, and a source slot (>= length + k) is
/// only written by a later entry, after this one has read it: the move is exact in place. Entries of different `e` are
/// independent: threads may run them in any order.
template <typename Element>
REFDEC_HOST_DEVICE void compact_element(Element* sequence,  // [capacity, entry_size]
                                        std::int64_t entry_size, std::int64_t length, const std::int32_t* kept,
                                        std::int32_t num_kept, std::int64_t e) {
  for (std::int32_t k = 0; k < num_kept; ++k)
    if (kept[k] != k) sequence[(length + k) * entry_size + e] = sequence[(length + kept[k]) * entry_size + e];
}

REFDEC_NAMESPACE_END
