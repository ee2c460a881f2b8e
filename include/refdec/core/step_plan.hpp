// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The step plan: one ragged, packed description of a verification step for a batch of sequences,
// which any engine can run with its own attention and cache, and the keep plan that tells its
// cache what to keep afterwards.
//
//   drafters -> trees (+ auxiliary blocks) -> plan_step() -> the engine's forward over the plan
//   -> walk() per sequence (plan.tree(b)) -> keep_accepted() -> the cache applies the keep plan
//   -> drafters accept
//
// Rows of sequence b are plan rows indptr[b] .. indptr[b + 1] - 1 (FlashInfer's qo_indptr): first
// its tree's nodes in breadth-first order (local row 0 is the root, the sequence's last token, not
// yet cached), then its auxiliary tokens. Every row attends to the sequence's whole cached prefix
// (lengths[b] entries); among the step's own rows it attends to those its packed mask row lists.
// Nothing is padded to a common length and no [batch, rows, cache] mask exists anywhere.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/walk.hpp"

REFDEC_NAMESPACE_BEGIN

/// 64-bit words per packed mask row over `num_rows` step rows: ceil(num_rows / 64).
REFDEC_HOST_DEVICE std::int32_t mask_words_for(std::int32_t num_rows) { return (num_rows + 63) / 64; }

/// A step plan's arrays as raw pointers (as TreeView is a tree's): what an engine hands to its
/// own kernels, host or device copies alike. Sizes as in StepPlan.
struct StepPlanView {
  std::int32_t batch = 0;
  const std::int32_t* indptr = nullptr;        // [batch + 1]
  const std::int32_t* num_nodes = nullptr;     // [batch]
  const std::int64_t* lengths = nullptr;       // [batch]
  const Token* tokens = nullptr;               // [rows]
  const std::int64_t* positions = nullptr;     // [rows]
  const std::int32_t* first_child = nullptr;   // [rows]
  const std::int32_t* next_sibling = nullptr;  // [rows]
  const std::int64_t* mask_indptr = nullptr;   // [batch + 1]
  const std::uint64_t* mask = nullptr;         // [mask_indptr[batch]]

  /// Number of rows of all sequences.
  REFDEC_HOST_DEVICE std::int32_t rows() const { return indptr[batch]; }
  /// Number of rows of sequence `b`.
  REFDEC_HOST_DEVICE std::int32_t rows(std::int32_t b) const { return indptr[b + 1] - indptr[b]; }
  /// True when local row `i` of sequence `b` attends to its local row `j`.
  REFDEC_HOST_DEVICE bool sees(std::int32_t b, std::int32_t i, std::int32_t j) const {
    const std::int64_t word = mask_indptr[b] + static_cast<std::int64_t>(i) * mask_words_for(rows(b)) + j / 64;
    return (mask[word] >> (j % 64)) & 1U;
  }
  /// The tree of sequence `b` as the walk reads it (local indices).
  REFDEC_HOST_DEVICE TreeView tree(std::int32_t b) const {
    return {tokens + indptr[b], first_child + indptr[b], next_sibling + indptr[b], num_nodes[b]};
  }
};

/// One step of a batch, packed and ragged (see the file comment). Plain data: a const plan may be
/// read from any number of threads.
struct StepPlan {
  std::vector<std::int32_t> indptr{0};       // [B + 1] first plan row of each sequence
  std::vector<std::int32_t> num_nodes;       // [B] tree rows of each sequence (root included); then auxiliary rows
  std::vector<std::int64_t> lengths;         // [B] cached entries of each sequence before the step
  std::vector<Token> tokens;                 // [R] token of each row
  std::vector<std::int64_t> positions;       // [R] rotary position: lengths[b] + depth (tree), + offset (auxiliary)
  std::vector<std::int32_t> first_child;     // [R] local index of a tree row's first child, -1 (leaf, auxiliary)
  std::vector<std::int32_t> next_sibling;    // [R] local index of a tree row's next sibling, -1 (last, auxiliary)
  std::vector<std::int64_t> mask_indptr{0};  // [B + 1] first mask word of each sequence
  /// Per sequence, [rows(b), mask_words(b)] 64-bit words: bit j of local row i is set when row i
  /// attends to local row j of the same sequence (a tree node: itself and its ancestors).
  std::vector<std::uint64_t> mask;

  /// Number of sequences.
  std::int32_t batch() const { return static_cast<std::int32_t>(indptr.size()) - 1; }
  /// Number of rows of all sequences.
  std::int32_t rows() const { return indptr.back(); }
  /// Number of rows of sequence `b` (tree and auxiliary).
  std::int32_t rows(std::int32_t b) const { return indptr[static_cast<std::size_t>(b) + 1] - indptr[static_cast<std::size_t>(b)]; }
  /// Number of auxiliary rows of sequence `b` (after its tree rows).
  std::int32_t aux_rows(std::int32_t b) const { return rows(b) - num_nodes[static_cast<std::size_t>(b)]; }
  /// Mask words per row of sequence `b`.
  std::int32_t mask_words(std::int32_t b) const { return mask_words_for(rows(b)); }
  /// True when local row `i` of sequence `b` attends to its local row `j`.
  bool sees(std::int32_t b, std::int32_t i, std::int32_t j) const { return view().sees(b, i, j); }
  /// The tree of sequence `b` as the walk reads it (local indices).
  TreeView tree(std::int32_t b) const { return view().tree(b); }
  /// The plan's arrays as raw pointers, valid until the plan is next written.
  StepPlanView view() const {
    return {batch(),          indptr.data(),      num_nodes.data(),    lengths.data(),     tokens.data(),
            positions.data(), first_child.data(), next_sibling.data(), mask_indptr.data(), mask.data()};
  }

  /// Removes every sequence.
  void clear() {
    indptr.assign(1, 0);
    num_nodes.clear();
    lengths.clear();
    tokens.clear();
    positions.clear();
    first_child.clear();
    next_sibling.clear();
    mask_indptr.assign(1, 0);
    mask.clear();
  }
};

/// The longest cached prefix plan_step() takes (2^40 tokens): far beyond any context, far from
/// overflowing a position.
inline constexpr std::int64_t kMaxCachedLength = std::int64_t{1} << 40;

/// Plans a step that verifies `trees[b]` (each finished, with at least its root) after `lengths[b]`
/// cached entries (0 to kMaxCachedLength), followed by the auxiliary tokens `aux[b]` (empty `aux`:
/// none). With `vocab_size` > 0 every token id must lie in [0, vocab_size): nothing out of range
/// reaches a model (0: not checked; negative: refused). Throws refdec::Error naming the bad
/// sequence and value. Reuses `out`'s storage.

inline void plan_step(std::span<const LinearTree> trees, std::span<const AuxBlock> aux, std::span<const std::int64_t> lengths,
                      std::int64_t vocab_size, StepPlan& out) {
  REFDEC_CHECK(trees.size() == lengths.size(), "plan_step: " << trees.size() << " trees for " << lengths.size() << " lengths");
  REFDEC_CHECK(aux.empty() || aux.size() == trees.size(),
               "plan_step: " << aux.size() << " auxiliary blocks for " << trees.size() << " sequences");
  REFDEC_CHECK(vocab_size >= 0, "plan_step: vocab_size must be positive (or 0: ids not checked), got " << vocab_size);
  out.clear();
  for (std::size_t b = 0; b < trees.size(); ++b) {
    const LinearTree& tree = trees[b];
    const std::int32_t nodes = tree.size();
    const std::int32_t extra = aux.empty() ? 0 : aux[b].size();
    const std::int64_t length = lengths[b];
    REFDEC_CHECK(nodes >= 1, "plan_step: sequence " << b << " has an empty tree (it needs at least its root)");
    REFDEC_CHECK(tree.finished(),
                 "plan_step: sequence " << b << "'s tree of " << nodes << " nodes is not finished (call LinearTree::finish())");
    // Positions are length + depth (or offset): a length near 2^63 would overflow them.
    REFDEC_CHECK(length >= 0 && length <= kMaxCachedLength,
                 "plan_step: sequence " << b << " has a cached length " << length << " outside [0, " << kMaxCachedLength << "]");
    const std::int32_t n = nodes + extra;
    const std::int32_t words = mask_words_for(n);
    out.indptr.push_back(out.indptr.back() + n);
    out.num_nodes.push_back(nodes);
    out.lengths.push_back(length);
    const std::size_t mask_base = out.mask.size();
    out.mask.resize(mask_base + static_cast<std::size_t>(n) * static_cast<std::size_t>(words), 0);
    out.mask_indptr.push_back(static_cast<std::int64_t>(out.mask.size()));
    std::uint64_t* mask = out.mask.data() + mask_base;
    for (std::int32_t i = 0; i < nodes; ++i) {
      const auto u = static_cast<std::size_t>(i);
      out.tokens.push_back(tree.tokens[u]);
      out.positions.push_back(length + tree.depth[u]);
      out.first_child.push_back(tree.first_child[u]);
      out.next_sibling.push_back(tree.next_sibling[u]);
      // The tree's own rows are narrower (or as wide): auxiliary rows only ever widen the mask.
      std::copy_n(&tree.mask[u * static_cast<std::size_t>(tree.mask_words)], tree.mask_words, mask + u * static_cast<std::size_t>(words));
    }
    for (std::int32_t j = 0; j < extra; ++j) {
      const AuxBlock& block = aux[b];
      const std::int32_t i = nodes + j;
      out.tokens.push_back(block.tokens[static_cast<std::size_t>(j)]);
      out.positions.push_back(length + block.offset[static_cast<std::size_t>(j)]);
      out.first_child.push_back(-1);
      out.next_sibling.push_back(-1);
      std::uint64_t* row = mask + static_cast<std::size_t>(i) * static_cast<std::size_t>(words);
      row[i / 64] |= std::uint64_t{1} << (i % 64);
      for (const std::int32_t k : block.row(j)) {
        const std::int32_t local = k == 0 ? 0 : nodes + k - 1;  // 0 is the root, 1 + m is auxiliary token m
        row[local / 64] |= std::uint64_t{1} << (local % 64);
      }
    }
    if (vocab_size > 0)
      for (std::int32_t i = 0; i < n; ++i) {
        const Token t = out.tokens[static_cast<std::size_t>(out.indptr[b] + i)];
        REFDEC_CHECK(t >= 0 && t < vocab_size, "plan_step: sequence " << b << " row " << i << (i < nodes ? " (tree)" : " (auxiliary)")
                                                                      << " has token id " << t << " outside the vocabulary [0, "
                                                                      << vocab_size << ")");
      }
  }
}

/// The plan's attention masks in FlashInfer's packed custom-mask layout (the `packed_custom_mask`
/// and `mask_indptr` of its batch prefill with a paged or ragged KV cache): per sequence b a
/// row-major [rows(b), lengths[b] + rows(b)] boolean mask over its cached entries then its step
/// rows (cached entries always seen), packed 8 to a byte with the first element in the lowest bit
/// (bitorder "little"), each sequence starting on a byte; `indptr` ([B + 1]) is where each
/// sequence's bytes start. Reuses `packed` and `indptr`.
inline void flashinfer_packed_mask(const StepPlan& plan, std::vector<std::uint8_t>& packed, std::vector<std::int64_t>& indptr) {
  packed.clear();
  indptr.assign(1, 0);
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    const std::int64_t rows = plan.rows(b), cached = plan.lengths[static_cast<std::size_t>(b)], width = cached + rows;
    const auto base = packed.size();
    packed.resize(base + static_cast<std::size_t>((rows * width + 7) / 8), 0);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t k = 0; k < width; ++k)
        if (k < cached || plan.sees(b, static_cast<std::int32_t>(i), static_cast<std::int32_t>(k - cached))) {
          const std::int64_t bit = i * width + k;
          packed[base + static_cast<std::size_t>(bit / 8)] |= static_cast<std::uint8_t>(1U << (bit % 8));
        }
    indptr.push_back(static_cast<std::int64_t>(packed.size()));
  }
}

/// Plain data, shareable read-only across threads. What each sequence's cache keeps after a step: the step rows to keep, in increasing
/// order, to be moved to the cache entries lengths_before[b], lengths_before[b] + 1, ... (in that order), and the cached length afterwards.
/// Rows not listed (rejected drafts, auxiliary tokens) are dropped.
struct KeepPlan {
  std::vector<std::int32_t> indptr{0};  // [B + 1] first entry of each sequence in `rows`
  std::vector<std::int32_t> rows;       // [K] local step rows kept, increasing
  std::vector<std::int64_t> lengths;    // [B] cached entries after the step

  std::int32_t batch() const { return static_cast<std::int32_t>(indptr.size()) - 1; }
  /// The kept local rows of sequence `b`.
  std::span<const std::int32_t> kept(std::int32_t b) const {
    const auto first = static_cast<std::size_t>(indptr[static_cast<std::size_t>(b)]);
    return std::span<const std::int32_t>(rows).subspan(first, static_cast<std::size_t>(indptr[static_cast<std::size_t>(b) + 1]) - first);
  }
};

/// Calls move(from, to) for each cache entry sequence `b` moves to apply `keep` after its `cached`
/// entries: the k-th kept step row goes from entry cached + row to entry cached + k, in increasing
/// k, rows already in place skipped. Kept rows increase, so no destination is a source still to be
/// moved: moving one entry at a time in this order, in place, loses nothing.
template <class F>
void for_each_keep_move(const KeepPlan& keep, std::int32_t b, std::int64_t cached, F&& move) {
  const auto rows = keep.kept(b);
  for (std::size_t k = 0; k < rows.size(); ++k)
    if (rows[k] != static_cast<std::int32_t>(k)) move(cached + rows[k], cached + static_cast<std::int64_t>(k));
}

/// The keep plan of a step: for each sequence, its root (row 0) and then its accepted draft nodes
/// (`accepted[b].nodes`, a root-to-leaf path of tree rows as walk() gives). Throws refdec::Error
/// when a path is not a chain of the sequence's tree.
inline void keep_accepted(const StepPlan& plan, std::span<const Acceptance> accepted, KeepPlan& out) {
  REFDEC_CHECK(static_cast<std::int32_t>(accepted.size()) == plan.batch(),
               "keep_accepted: " << accepted.size() << " acceptances for a plan of " << plan.batch() << " sequences");
  out.indptr.assign(1, 0);
  out.rows.clear();
  out.lengths.clear();
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    const auto& path = accepted[static_cast<std::size_t>(b)].nodes;
    const std::int32_t base = plan.indptr[static_cast<std::size_t>(b)];
    std::int32_t parent = 0;
    out.rows.push_back(0);
    for (const std::int32_t node : path) {
      // A child always follows its parent in breadth-first order, so the rows increase.
      bool is_child = false;
      for (std::int32_t c = parent < plan.num_nodes[static_cast<std::size_t>(b)] ? plan.first_child[static_cast<std::size_t>(base + parent)]
                                                                                 : -1,
                        visits = 0;
           c >= 0 && visits < plan.num_nodes[static_cast<std::size_t>(b)] && !is_child;
           c = plan.next_sibling[static_cast<std::size_t>(base + c)], ++visits)
        is_child = c == node;
      REFDEC_CHECK(is_child, "keep_accepted: sequence " << b << " accepts node " << node << ", which is not a child of node " << parent);
      out.rows.push_back(node);
      parent = node;
    }
    out.indptr.push_back(static_cast<std::int32_t>(out.rows.size()));
    out.lengths.push_back(plan.lengths[static_cast<std::size_t>(b)] + 1 + static_cast<std::int64_t>(path.size()));
  }
}

REFDEC_NAMESPACE_END
