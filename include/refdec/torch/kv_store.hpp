// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What a model's attention needs from a KV cache, as a concept, so that one model runs over any
// cache layout (contiguous_kv_store.hpp, paged_kv_store.hpp, an engine's own).
//
// Sequences are numbered 0 .. batch() - 1 in the order of the step plans the store serves: add()
// appends one, remove(b) drops sequence b and renumbers the later ones down. A step is
// begin_step(plan) (room for each sequence's step rows after its cached entries), then per layer
// write() of the step's keys and values and read() of each sequence's cached prefix followed by
// its step rows, then commit(keep) (keep the accepted rows, drop the rest), or nothing (a step
// that is only timed, or discarded: the next begin_step() overwrites its rows).

#include <ATen/ATen.h>

#include <concepts>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Shape and type of the keys and values a model stores per token.
struct KvLayout {
  std::int64_t layers = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  at::TensorOptions options;  ///< dtype and device of the entries

  /// Throws refdec::Error unless every size is positive.
  void validate() const {
    REFDEC_CHECK(layers > 0 && kv_heads > 0 && head_dim > 0,
                 "KvLayout: sizes must be positive, got layers=" << layers << " kv_heads=" << kv_heads << " head_dim=" << head_dim);
  }
};

/// A KV cache a model can attend over:
/// - `begin_step(plan)`: the plan's sequences are the store's, in order, with the store's lengths;
///   makes room for plan.rows(b) entries after sequence b's cached ones;
/// - `write(layer, k, v)`: keys and values of every plan row, each [R, kv_heads, head_dim];
/// - `read(layer, b)`: sequence b's cached entries then its step rows, keys and values each
///   [lengths()[b] + plan.rows(b), kv_heads, head_dim];
/// - `commit(keep)`: keeps the listed step rows after each sequence's cached entries;
/// - `add()` appends an empty sequence and returns its index, `remove(b)` drops sequence b;
/// - `batch()`, `lengths()` ([batch] cached entries), `layout()`.
template <class S>
concept KvStore = requires(S& s, const S& cs, const StepPlan& plan, const KeepPlan& keep, std::int64_t i, const at::Tensor& t) {
  s.begin_step(plan);
  s.write(i, t, t);
  { cs.read(i, i) } -> std::same_as<std::pair<at::Tensor, at::Tensor>>;
  s.commit(keep);
  { s.add() } -> std::convertible_to<std::int64_t>;
  s.remove(i);
  { cs.batch() } -> std::convertible_to<std::int64_t>;
  { cs.lengths() } -> std::convertible_to<std::span<const std::int64_t>>;
  { cs.layout() } -> std::convertible_to<KvLayout>;
};

/// A sequence's keys and values where a paged store keeps them, for attention that reads them in
/// place: entry e (cached entries, then the step rows) is row blocks[e / block_size] * block_size +
/// e % block_size of `keys` and `values`, the pool's rows of one layer ([pool rows, kv_heads,
/// head_dim] each). Valid until the store's next begin_step(), commit(), add() or remove().
struct PagedEntries {
  at::Tensor keys;
  at::Tensor values;
  std::span<const std::int32_t> blocks;  ///< the sequence's block table
  std::int64_t block_size = 0;
  std::int64_t length = 0;  ///< cached entries + step rows
};

/// A KvStore that can also hand out a sequence's entries in place (`read_paged(layer, b)`, see
/// PagedEntries): the model's attention then reads the blocks where they lie instead of a gathered
/// copy of the whole prefix per layer, where its attention kernel takes a block table.
template <class S>
concept PagedKvRead = KvStore<S> && requires(const S& cs, std::int64_t i) {
  { cs.read_paged(i, i) } -> std::same_as<PagedEntries>;
};

namespace torch_detail {
/// Checks that `plan` has rows, a token and a position per row, and every token in [0, vocab_size);
/// `who` names the model in the message.
inline void check_plan_rows(const StepPlan& plan, std::int64_t vocab_size, const char* who) {
  const std::int64_t R = plan.rows();
  REFDEC_CHECK(R > 0, who << ": the plan has no rows");
  REFDEC_CHECK(
      static_cast<std::int64_t>(plan.tokens.size()) == R && static_cast<std::int64_t>(plan.positions.size()) == R,
      who << ": the plan has " << plan.tokens.size() << " tokens and " << plan.positions.size() << " positions for " << R << " rows");
  for (std::int64_t r = 0; r < R; ++r)
    REFDEC_CHECK(plan.tokens[static_cast<std::size_t>(r)] >= 0 && plan.tokens[static_cast<std::size_t>(r)] < vocab_size,
                 who << ": row " << r << " has token id " << plan.tokens[static_cast<std::size_t>(r)] << " outside the vocabulary [0, "
                     << vocab_size << ")");
}

/// Checks that `plan` is a step of the store's sequences: same count, same cached lengths.
inline void check_plan_matches(const StepPlan& plan, std::span<const std::int64_t> lengths, const char* who) {
  REFDEC_CHECK(static_cast<std::size_t>(plan.batch()) == lengths.size(),
               who << ": a plan of " << plan.batch() << " sequences for a store of " << lengths.size());
  for (std::size_t b = 0; b < lengths.size(); ++b)
    REFDEC_CHECK(plan.lengths[b] == lengths[b],
                 who << ": sequence " << b << " has " << lengths[b] << " cached entries but the plan assumes " << plan.lengths[b]);
}

/// Checks a keep plan against the step it follows (`indptr`, [B + 1] plan rows, and `lengths`, [B]
/// cached entries before it): rows increase within each sequence's step rows and the new lengths
/// add them up.
inline void check_keep(const KeepPlan& keep, std::span<const std::int32_t> indptr, std::span<const std::int64_t> lengths, const char* who) {
  REFDEC_CHECK(static_cast<std::size_t>(keep.batch()) == lengths.size() && indptr.size() == lengths.size() + 1,
               who << ": a keep plan of " << keep.batch() << " sequences after a step of " << lengths.size());
  for (std::int32_t b = 0; b < keep.batch(); ++b) {
    const auto u = static_cast<std::size_t>(b);
    const auto rows = keep.kept(b);
    const std::int32_t step_rows = indptr[u + 1] - indptr[u];
    for (std::size_t k = 0; k < rows.size(); ++k)
      REFDEC_CHECK(rows[k] >= 0 && rows[k] < step_rows && (k == 0 || rows[k] > rows[k - 1]),
                   who << ": sequence " << b << " keeps step row " << rows[k] << " (rows must increase within [0, " << step_rows << "))");
    REFDEC_CHECK(keep.lengths[u] == lengths[u] + static_cast<std::int64_t>(rows.size()),
                 who << ": sequence " << b << " keeps " << rows.size() << " rows but its new length is " << keep.lengths[u]);
  }
}

/// What the contiguous and static stores keep per sequence besides their tensors: its cached
/// entries, the rows of the step in progress, and that step's plan rows. Errors name `who`.
class SequenceSteps {
 public:
  explicit SequenceSteps(const char* who) : who_(who) {}

  std::int64_t batch() const { return static_cast<std::int64_t>(lengths_.size()); }
  /// [batch] cached entries per sequence.
  std::span<const std::int64_t> lengths() const { return lengths_; }
  /// [batch] rows of the step in progress (0 outside a step).
  std::span<const std::int64_t> rows() const { return rows_; }
  /// [batch + 1] plan rows of the step begun last; empty outside a step.
  std::span<const std::int32_t> indptr() const { return indptr_; }
  /// Sequence `b`'s cached entries plus its step rows (what read() shows).
  std::int64_t visible(std::int64_t b) const {
    check_index(b);
    return lengths_[static_cast<std::size_t>(b)] + rows_[static_cast<std::size_t>(b)];
  }

  /// Appends an empty sequence (a step in progress is abandoned) and returns its index.
  std::int64_t add() {
    lengths_.push_back(0);
    rows_.push_back(0);
    indptr_.clear();
    return batch() - 1;
  }
  /// Drops sequence `b` (a step in progress is abandoned); later sequences move down by one.
  void remove(std::int64_t b) {
    check_index(b);
    indptr_.clear();
    lengths_.erase(lengths_.begin() + b);
    rows_.erase(rows_.begin() + b);
  }
  void check_index(std::int64_t b) const {
    REFDEC_CHECK(b >= 0 && b < batch(), who_ << ": sequence " << b << " out of range [0, " << batch() << ")");
  }

  /// Checks that `plan` is a step of these sequences that leaves each with `capacity` entries at
  /// most (`capacity_name` names the bound in the error).
  void check_step(const StepPlan& plan, std::int64_t capacity, const char* capacity_name = "the capacity") const {
    check_plan_matches(plan, lengths_, who_);
    for (std::int32_t b = 0; b < plan.batch(); ++b) {
      const auto u = static_cast<std::size_t>(b);
      REFDEC_CHECK(lengths_[u] + plan.rows(b) <= capacity, who_ << ": sequence " << b << " needs " << lengths_[u] + plan.rows(b)
                                                                << " entries (cached + step rows), more than " << capacity_name << " "
                                                                << capacity);
    }
  }
  /// Begins `plan`'s step (check_step() first), whose rows go after each sequence's cached entries.
  void begin_step(const StepPlan& plan, std::int64_t capacity, const char* capacity_name = "the capacity") {
    check_step(plan, capacity, capacity_name);
    for (std::int32_t b = 0; b < plan.batch(); ++b) rows_[static_cast<std::size_t>(b)] = plan.rows(b);
    indptr_ = plan.indptr;
  }
  /// Checks a write of one layer's keys and values of every plan row.
  void check_write(const at::Tensor& k, const at::Tensor& v) const {
    REFDEC_CHECK(!indptr_.empty(), who_ << ": write() outside a step");
    REFDEC_CHECK(k.size(0) == indptr_.back() && v.size(0) == indptr_.back(),
                 who_ << ": write of " << k.size(0) << " rows in a step of " << indptr_.back());
  }
  /// Checks `keep` against the step begun last.
  void check_commit(const KeepPlan& keep) const {
    REFDEC_CHECK(!indptr_.empty(), who_ << ": commit() without a step");
    check_keep(keep, indptr_, lengths_, who_);
  }
  /// Ends the step: each sequence's length becomes keep.lengths[b] (the store has moved the rows).
  void commit(const KeepPlan& keep) {
    for (std::size_t u = 0; u < lengths_.size(); ++u) lengths_[u] = keep.lengths[u], rows_[u] = 0;
    indptr_.clear();
  }

 private:
  const char* who_;
  std::vector<std::int64_t> lengths_;  // [batch] cached entries
  std::vector<std::int64_t> rows_;     // [batch] rows of the current step
  std::vector<std::int32_t> indptr_;   // [batch + 1] plan rows of the step begun last; empty outside a step
};
}  // namespace torch_detail

REFDEC_TORCH_NAMESPACE_END
