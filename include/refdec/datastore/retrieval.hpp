// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The REST retrieval step ("REST: Retrieval-Based Speculative Decoding", He et al. 2023) over a
// Datastore: longest context-suffix match, continuations of its occurrences counted in a trie,
// the most frequent prefixes as a draft tree.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/datastore/reader.hpp"

REFDEC_NAMESPACE_BEGIN

/// Upper bounds of RetrievalOptions (and of RestOptions): retrieve() rejects larger values, which
/// would only spend memory and time (REST uses n_max 16, m 10, c 64).
inline constexpr std::size_t kMaxRetrievalMatch = 1024;                        ///< max_match (n_max)
inline constexpr std::size_t kMaxRetrievalContinuation = 1024;                 ///< continuation (m)
inline constexpr std::size_t kMaxRetrievalNodes = 65536;                       ///< max_nodes (c)
inline constexpr std::size_t kMaxRetrievalOccurrences = std::size_t{1} << 31;  ///< max_occurrences (K)

/// Settings of retrieve() (the REST retrieval step). Each is at most its bound above.
struct RetrievalOptions {
  std::size_t max_match = 16;     ///< REST's n_max: the longest context suffix searched
  std::size_t continuation = 10;  ///< REST's m: tokens read after each occurrence
  std::size_t max_nodes = 64;     ///< REST's c: draft nodes kept (also capped by the budget)
  /// K: occurrences read, sampled evenly by suffix rank when there are more. Each costs a cache
  /// and TLB miss on a large datastore; on Spec-Bench with the MT-Bench datastore, K = 64, 256,
  /// 1024 and 100000 replay to the same tau (1.787-1.791), while the p99 step grows with K.
  std::size_t max_occurrences = 256;
};

/// What retrieve() found.
struct RetrievalResult {
  std::size_t match_length = 0;  ///< length of the longest context suffix found (0: none)
  SuffixRange range;             ///< its suffix array range
  std::size_t occurrences = 0;   ///< occurrences whose continuations were counted (<= K)
  std::size_t nodes = 0;         ///< draft nodes written
};

/// Scratch memory for retrieve(), reusable across calls of one thread.
struct RetrievalScratch {
  struct Node {
    Token token;
    std::int32_t count;
    std::int32_t depth;
    std::int32_t parent;
    std::int32_t first_child;
    std::int32_t next_sibling;
  };
  std::vector<Node> nodes;               // [trie nodes] counting trie, node 0 the root, preorder ids
  std::vector<std::int32_t> path;        // [m] trie nodes of the previous continuation
  std::vector<Token> prev;               // [m] the previous continuation
  std::vector<Token> cur;                // [m] the current continuation
  std::vector<std::uint8_t> keep;        // [trie nodes] selected for the draft
  std::vector<std::int32_t> frontier;    // [<= trie nodes] the selection's best-first frontier
  std::vector<std::int32_t> out_id;      // [trie nodes] the selected node's index in the output DraftTree
  std::vector<std::uint64_t> positions;  // [K] sampled occurrence positions
};

/// The REST retrieval step: finds the longest suffix of `context` (at most `max_match` tokens)
/// in `store`, reads the `continuation` tokens after each of up to `max_occurrences` of its
/// occurrences (evenly sampled by rank when there are more: rank begin + floor(i * n / K)),
/// counts them in a trie and writes the min(max_nodes, budget) best nodes into `out` (cleared
/// first) with their counts as scores. Ties between equal counts go to shallower, then
/// lexicographically smaller paths: the nodes DraftTree::prune keeps after inserting the
/// continuations in lexicographic order.
inline RetrievalResult retrieve(const Datastore& store, std::span<const Token> context, const RetrievalOptions& options, std::size_t budget,
                                DraftTree& out, RetrievalScratch& scratch) {
  out.clear();
  RetrievalResult result;
  REFDEC_CHECK(options.max_match <= kMaxRetrievalMatch,
               "retrieval: max_match must be at most " << kMaxRetrievalMatch << ", got " << options.max_match);
  REFDEC_CHECK(options.continuation <= kMaxRetrievalContinuation,
               "retrieval: continuation must be at most " << kMaxRetrievalContinuation << ", got " << options.continuation);
  REFDEC_CHECK(options.max_nodes <= kMaxRetrievalNodes,
               "retrieval: max_nodes must be at most " << kMaxRetrievalNodes << ", got " << options.max_nodes);
  REFDEC_CHECK(options.max_occurrences <= kMaxRetrievalOccurrences,
               "retrieval: max_occurrences must be at most 2^31, got " << options.max_occurrences);
  // Not a structured binding: the lambdas below capture `range`, which clang before 16 refuses.
  const auto match = store.longest_suffix_match(context, options.max_match);
  const auto len = match.first;
  const auto range = match.second;
  result.match_length = len;
  result.range = range;
  const std::size_t keep_nodes = std::min(options.max_nodes, budget);
  if (len == 0 || keep_nodes == 0 || options.continuation == 0 || options.max_occurrences == 0) return result;
  const std::uint64_t n = range.size();
  const std::uint64_t k = std::min<std::uint64_t>(n, options.max_occurrences);
  const std::size_t m = options.continuation;

  // Counting trie. Ranks in a range are sorted by the text after the match, so the sampled
  // continuations arrive in lexicographic order: each shares a prefix with the previous one and
  // adds the rest as new nodes, which gives preorder node ids.
  auto& nodes = scratch.nodes;
  nodes.clear();
  nodes.push_back({-1, 0, 0, -1, -1, -1});
  scratch.path.assign(m + 1, 0);  // path[d]: trie node at depth d of the previous continuation
  scratch.prev.clear();
  // Sampled ranks: floor(i * n / k) without overflow (n = q k + r, and i r < k^2 <= 2^62).
  auto rank_of = [&](std::uint64_t i) { return range.begin + i * (n / k) + i * (n % k) / k; };
  // Occurrences of a frequent match lie all over a large file: each read is a cache (and TLB)
  // miss, so the suffix array entries and then the continuations are prefetched a few ahead.
  constexpr std::uint64_t kAhead = 16;
  auto& positions = scratch.positions;
  positions.resize(k);
  for (std::uint64_t i = 0; i < std::min(k, kAhead); ++i) store.prefetch_suffix(rank_of(i));
  for (std::uint64_t i = 0; i < k; ++i) {
    if (i + kAhead < k) store.prefetch_suffix(rank_of(i + kAhead));
    positions[i] = store.suffix(rank_of(i));
  }
  for (std::uint64_t i = 0; i < std::min(k, kAhead); ++i) store.prefetch_token(positions[i] + len);
  for (std::uint64_t i = 0; i < k; ++i) {
    if (i + kAhead < k) store.prefetch_token(positions[i + kAhead] + len);
    scratch.cur.clear();
    store.continuation(positions[i] + len - 1, m, scratch.cur);
    if (scratch.cur.empty()) {
      scratch.prev.clear();
      continue;
    }
    ++result.occurrences;
    std::size_t common = 0;
    while (common < scratch.cur.size() && common < scratch.prev.size() && scratch.cur[common] == scratch.prev[common]) ++common;
    for (std::size_t d = 1; d <= common; ++d) ++nodes[static_cast<std::size_t>(scratch.path[d])].count;
    for (std::size_t d = common + 1; d <= scratch.cur.size(); ++d) {
      const auto id = static_cast<std::int32_t>(nodes.size());
      const std::int32_t parent = scratch.path[d - 1];
      nodes.push_back({scratch.cur[d - 1], 1, static_cast<std::int32_t>(d), parent, -1, -1});
      // Sorted input: a new child is the parent's last; link it through the previous last.
      auto& pn = nodes[static_cast<std::size_t>(parent)];
      if (pn.first_child < 0) {
        pn.first_child = id;
      } else {
        // The previous child of `parent` is the node that was at depth d of the previous path.
        nodes[static_cast<std::size_t>(scratch.path[d])].next_sibling = id;
      }
      scratch.path[d] = id;
    }
    std::swap(scratch.prev, scratch.cur);
  }
  if (nodes.size() == 1) return result;

  // DraftTree's cut rule: count, then shallower, then lower (preorder, so lexicographic) id.
  const std::size_t kept = select_best_first(
      nodes, [&nodes](std::int32_t i) { return nodes[static_cast<std::size_t>(i)].count; }, keep_nodes, scratch.keep, scratch.frontier);
  // Kept nodes in preorder: a parent is written before its children, siblings in order.
  scratch.out_id.assign(nodes.size(), 0);
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    if (!scratch.keep[i]) continue;
    const std::int32_t id = out.add_child(scratch.out_id[static_cast<std::size_t>(nodes[i].parent)], nodes[i].token);
    out.set_score(id, static_cast<float>(nodes[i].count));
    scratch.out_id[i] = id;
  }
  result.nodes = kept;
  return result;
}

/// retrieve() with scratch memory of its own.
inline RetrievalResult retrieve(const Datastore& store, std::span<const Token> context, const RetrievalOptions& options, std::size_t budget,
                                DraftTree& out) {
  RetrievalScratch scratch;
  return retrieve(store, context, options, budget, out, scratch);
}

REFDEC_NAMESPACE_END
