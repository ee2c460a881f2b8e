// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The per-thread logic of a verification step on the device, over the step plan's arrays
// (step_plan.hpp) copied to the device as they are: the target's argmax of a row, the greedy
// verification of one sequence (the one walk, walk.hpp), and the KV compaction of its keep rows.
// Each function handles what one GPU thread handles, so that the CUDA kernels
// (refdec/cuda/step_kernels.cuh) and the host tests run the same code; the host references are
// the core functions (accept(), keep_accepted(), KvStore::commit()).
//
// Keep rows on the device use the plan's row layout: the keep rows of sequence b are
// kept[indptr[b] .. indptr[b] + num_kept[b] - 1] ([R] int32, local step rows, increasing), with
// num_kept[b] ([B] int32) their count. A sequence keeps at most its own rows, so the plan's rows
// always have room. A host KeepPlan maps onto it with lay_out_keep(): keep.kept(b) goes to
// kept + indptr[b] and num_kept[b] = keep.kept(b).size(); its new cached length is
// lengths[b] + num_kept[b].
//
// Device code cannot reject its input, so every function here stays inside the arrays it is
// given whatever the plan holds: a sequence's rows are clamped to [0, R), its node count to its
// rows, every walk is bounded (walk()), and a keep list is cut at its first bad entry.

#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"

REFDEC_NAMESPACE_BEGIN

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

/// The plan rows of one sequence: rows first .. first + count - 1.
struct RowRange {
  std::int32_t first = 0;
  std::int32_t count = 0;
};

/// The rows of sequence `b` given the plan's `indptr` ([B + 1] int32) over `total_rows` rows (R):
/// [indptr[b], indptr[b + 1]), clamped to [0, R) so that a malformed indptr cannot reach outside
/// the plan's arrays (a decreasing pair gives no rows).
REFDEC_HOST_DEVICE RowRange sequence_rows(const std::int32_t* indptr,  // [B + 1]
                                          std::int32_t b, std::int32_t total_rows) {
  const std::int32_t lo = indptr[b], hi = indptr[b + 1];
  const std::int32_t first = lo < 0 ? 0 : lo > total_rows ? total_rows : lo;
  const std::int32_t last = hi < first ? first : hi > total_rows ? total_rows : hi;
  return {first, last - first};
}

/// Greedy verification of sequence `b` of a plan (one thread): walks its tree (walk() with the
/// target's token of each row, ChoiceArray) and writes its keep rows in the plan's row layout
/// (kept[indptr[b]] = 0 for the root, then the accepted draft nodes; rows after them are not
/// written), num_kept[b] = accepted + 1 and bonus[b], the target's token at the last kept row.
/// The node count is clamped to the sequence's rows; a sequence with no rows keeps nothing
/// (num_kept[b] = 0, bonus[b] = -1).
REFDEC_HOST_DEVICE void greedy_verify_sequence(const std::int32_t* indptr,        // [B + 1] plan.indptr
                                               const std::int32_t* num_nodes,     // [B] plan.num_nodes
                                               const Token* tokens,               // [R] plan.tokens
                                               const std::int32_t* first_child,   // [R] plan.first_child
                                               const std::int32_t* next_sibling,  // [R] plan.next_sibling
                                               const Token* target,               // [R] target's token of each row
                                               std::int32_t total_rows, std::int32_t b,
                                               std::int32_t* kept,      // [R] keep rows, the plan's row layout
                                               std::int32_t* num_kept,  // [B]
                                               Token* bonus) {          // [B]
  const RowRange rows = sequence_rows(indptr, b, total_rows);
  if (rows.count <= 0) {
    num_kept[b] = 0;
    bonus[b] = -1;
    return;
  }
  const std::int32_t nodes = num_nodes[b];
  const std::int32_t n = nodes < 1 ? 1 : nodes > rows.count ? rows.count : nodes;
  const TreeView tree{tokens + rows.first, first_child + rows.first, next_sibling + rows.first, n};
  ChoiceArray choose{target + rows.first};
  std::int32_t* out = kept + rows.first;
  out[0] = 0;
  Token y = -1;
  num_kept[b] = walk(tree, choose, out + 1, y) + 1;
  bonus[b] = y;
}

/// Number of leading keep rows of one sequence that form a valid compaction (one thread's check
/// before compact_element()): at most `num_kept` and at most `rows` entries (the sequence's step
/// rows), each row k at least k (entries only move down), rows strictly increasing and below
/// `rows`, and every source slot length + kept[k] inside the `capacity` (a negative length keeps
/// nothing). A malformed list is cut at its first bad entry.
REFDEC_HOST_DEVICE std::int32_t valid_kept(const std::int32_t* kept,  // [num_kept] local step rows
                                           std::int32_t num_kept, std::int32_t rows, std::int64_t length, std::int64_t capacity) {
  if (length < 0) return 0;
  const std::int32_t n = num_kept < rows ? num_kept : rows;
  std::int32_t k = 0;
  while (k < n && kept[k] >= k && kept[k] < rows && (k == 0 || kept[k] > kept[k - 1]) && length + kept[k] < capacity) ++k;
  return k;
}

/// The keep rows of one sequence that its compaction applies.
struct KeptRows {
  const std::int32_t* rows = nullptr;  // [count] local step rows, increasing
  std::int32_t count = 0;
};

/// The keep rows of sequence `b` in the plan's row layout (kept + indptr[b], num_kept[b] of them),
/// cut by valid_kept() for a sequence of `length` of `capacity` slots cached: what every thread of
/// its compaction computes before compact_element().
REFDEC_HOST_DEVICE KeptRows compaction_rows(const std::int32_t* indptr,    // [B + 1] plan.indptr
                                            std::int32_t total_rows,       // R
                                            const std::int32_t* kept,      // [R] keep rows, the plan's row layout
                                            const std::int32_t* num_kept,  // [B]
                                            std::int32_t b, std::int64_t length, std::int64_t capacity) {
  const RowRange rows = sequence_rows(indptr, b, total_rows);
  const std::int32_t* list = kept + rows.first;
  return {list, valid_kept(list, num_kept[b], rows.count, length, capacity)};
}

/// Compacts element `e` of every kept entry of one sequence in one layer: for k in increasing
/// order, slot length + kept[k] moves to slot length + k (what KvStore::commit does). `num_kept`
/// must come from valid_kept(). In increasing order, a destination slot (length + k) is only ever
/// the source of an earlier entry, which has already moved, and a source slot (>= length + k) is
/// only written by a later entry, after this one has read it: the move is exact in place. Entries
/// of different `e` are independent: threads may run them in any order.
template <typename Element>
REFDEC_HOST_DEVICE void compact_element(Element* sequence,  // [capacity, entry_size]
                                        std::int64_t entry_size, std::int64_t length,
                                        const std::int32_t* kept,  // [num_kept] local step rows
                                        std::int32_t num_kept, std::int64_t e) {
  for (std::int32_t k = 0; k < num_kept; ++k)
    if (kept[k] != k) sequence[(length + k) * entry_size + e] = sequence[(length + kept[k]) * entry_size + e];
}

/// Lays `keep` (a KeepPlan of `plan`'s step) out in the plan's row layout that the device reads:
/// `kept` becomes [R] with keep.kept(b) at kept[plan.indptr[b]...] (-1 elsewhere) and `num_kept`
/// [B] their counts. Throws refdec::Error when the batches differ or a sequence keeps more rows
/// than it has.
inline void lay_out_keep(const StepPlan& plan, const KeepPlan& keep,
                         std::vector<std::int32_t>& kept,        // [R] out
                         std::vector<std::int32_t>& num_kept) {  // [B] out
  REFDEC_CHECK(keep.batch() == plan.batch(),
               "lay_out_keep: a keep plan of " << keep.batch() << " sequences for a plan of " << plan.batch());
  kept.assign(static_cast<std::size_t>(plan.rows()), -1);
  num_kept.assign(static_cast<std::size_t>(plan.batch()), 0);
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    const std::span<const std::int32_t> rows = keep.kept(b);
    REFDEC_CHECK(static_cast<std::int64_t>(rows.size()) <= plan.rows(b),
                 "lay_out_keep: sequence " << b << " keeps " << rows.size() << " rows of its " << plan.rows(b));
    const auto first = static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)]);
    for (std::size_t k = 0; k < rows.size(); ++k) kept[first + k] = rows[k];
    num_kept[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(rows.size());
  }
}

REFDEC_NAMESPACE_END
