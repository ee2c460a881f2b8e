// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The static-shape step over a paged cache: one pool of fixed-size blocks shared by all sequences
// (vLLM's PagedAttention layout, as PagedKvStore), for StaticLlama. Each step ships, besides the
// bucket's inputs, the pool slot of every entry a padded sequence may attend to ([Bb, entries]:
// its block table spelled out), so the step's shape stays fixed whatever blocks the sequences
// hold. Attention gathers each sequence's entries by those slots (a copy of the prefix per layer,
// where the contiguous StaticKvStore reads in place): the reference of a paged static step, for
// engines whose cache is paged.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/block_tables.hpp"
#include "refdec/torch/huge_page_tensor.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/static_kv_store.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Keys and values of every layer in `num_blocks` blocks of `block_size` entries, and one scratch
/// slot after them, for StaticLlama's static-shape step (see the file comment). A KvStore (the
/// eager model runs over it too). A sequence holds at most `max_entries` entries (cached plus one
/// step's rows): attention spans that many. Not thread-safe: one owner at a time; copies share the
/// pool and the buckets.
class StaticPagedKvStore {
 public:
  StaticPagedKvStore(KvLayout layout, std::int64_t num_blocks, std::int64_t block_size, std::int64_t max_entries,
                     StaticStoreOptions options = {})
      : layout_(std::move(layout)),
        blocks_(num_blocks, block_size, "StaticPagedKvStore"),
        max_entries_(max_entries),
        options_(options),
        state_(std::make_shared<StaticStoreState>()) {
    layout_.validate();
    options_.validate();
    REFDEC_CHECK(max_entries > 0, "StaticPagedKvStore: max_entries must be positive, got " << max_entries);
    // [layers, 2 (keys, values), num_blocks * block_size + 1 (the scratch slot), kv_heads, head_dim];
    // zeros: attention multiplies masked entries by a probability of 0.
    pool_ = huge_page_zeros({layout_.layers, 2, num_blocks * block_size + 1, layout_.kv_heads, layout_.head_dim}, layout_.options);
  }

  const KvLayout& layout() const { return layout_; }
  const StaticStoreOptions& options() const { return options_; }
  /// Whether steps over this copy capture graphs (StaticKvStore::set_graphs()).
  void set_graphs(bool on) { options_.graphs = on; }
  std::int64_t block_size() const { return blocks_.block_size(); }
  std::int64_t num_blocks() const { return blocks_.num_blocks(); }
  std::int64_t free_blocks() const { return blocks_.free_blocks(); }
  /// Entries a sequence may hold: cached ones plus one step's rows.
  std::int64_t capacity() const { return max_entries_; }
  /// Entries a step's attention spans per sequence: capacity() plus the padded rows' scratch entry.
  std::int64_t entries() const { return max_entries_ + 1; }
  /// The pool slot nothing but padded rows writes or reads.
  std::int64_t scratch_slot() const { return pool_.size(2) - 1; }
  std::int64_t batch() const { return blocks_.batch(); }
  /// [batch] cached entries per sequence.
  std::span<const std::int64_t> lengths() const { return steps_.lengths(); }
  /// [layers, 2, num_blocks * block_size + 1, kv_heads, head_dim]; its address never changes.
  const at::Tensor& pool() const { return pool_; }
  /// The buckets' buffers and graphs (shared with copies of this store).
  StaticStoreState& state() const { return *state_; }
  /// The blocks of sequence `b`, in order: entry e lives in slot table[e / block_size] * block_size + e % block_size.
  std::span<const std::int32_t> block_table(std::int64_t b) const {
    steps_.check_index(b);
    return blocks_.table(b);
  }
  /// The pool slot of entry `e` of sequence `b`, the scratch slot where its blocks do not reach.
  std::int64_t slot_or_scratch(std::int64_t b, std::int64_t e) const { return blocks_.holds(b, e) ? blocks_.slot(b, e) : scratch_slot(); }

  /// Appends an empty sequence (no blocks yet) and returns its index; at most options().max_batch.
  std::int64_t add() {
    REFDEC_CHECK(batch() < options_.max_batch, "StaticPagedKvStore: already " << batch() << " sequences, the store's max_batch");
    blocks_.add();
    return steps_.add();
  }

  /// Drops sequence `b` and returns its blocks to the pool; later sequences move down by one
  /// (their block tables only: no entry is copied).
  void remove(std::int64_t b) {
    steps_.check_index(b);
    blocks_.remove(b);
    steps_.remove(b);
  }

  /// Prepares `plan`'s step: allocates the blocks each sequence's step rows need. Throws
  /// refdec::ArgumentError, allocating nothing, when a sequence would pass capacity() or the pool
  /// has too few free blocks.
  void begin_step(const StepPlan& plan) {
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      REFDEC_CHECK(plan.rows(b) <= options_.max_rows, "StaticPagedKvStore: sequence " << b << " has " << plan.rows(b)
                                                                                      << " step rows, more than max_rows "
                                                                                      << options_.max_rows);
    steps_.check_step(plan, max_entries_, "max_entries");
    std::vector<std::int64_t> ends(steps_.lengths().size());  // [B] entries after the step
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      ends[static_cast<std::size_t>(b)] = steps_.lengths()[static_cast<std::size_t>(b)] + plan.rows(b);
    blocks_.reserve(ends);
    steps_.begin_step(plan, max_entries_, "max_entries");
  }

  /// Writes one layer's keys and values of every plan row, each [R, kv_heads, head_dim] (the eager
  /// model's path).
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    steps_.check_write(k, v);
    std::vector<std::int64_t> slots;
    for (std::size_t b = 0; b < steps_.lengths().size(); ++b)
      for (std::int64_t i = 0; i < steps_.rows()[b]; ++i)
        slots.push_back(slot_or_scratch(static_cast<std::int64_t>(b), steps_.lengths()[b] + i));
    const auto index = at::tensor(slots, at::kLong).to(pool_.device());
    pool_[layer][0].index_copy_(0, index, k.to(pool_.scalar_type()));
    pool_[layer][1].index_copy_(0, index, v.to(pool_.scalar_type()));
  }

  /// Sequence `b`'s cached entries then its step rows, gathered from its blocks: keys and values,
  /// each [lengths()[b] + step rows, kv_heads, head_dim].
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    const std::int64_t n = steps_.visible(b);
    std::vector<std::int64_t> slots;
    for (std::int64_t e = 0; e < n; ++e) slots.push_back(slot_or_scratch(b, e));
    const auto index = at::tensor(slots, at::kLong).to(pool_.device());
    return {pool_[layer][0].index_select(0, index), pool_[layer][1].index_select(0, index)};
  }

  /// Applies `keep` to the step begun last: kept rows move to entries lengths()[b], ... (one gather
  /// and one scatter for every layer and sequence, none when every kept row is in place); blocks
  /// past each sequence's new length return to the pool.
  void commit(const KeepPlan& keep) {
    steps_.check_commit(keep);
    std::vector<std::int64_t> src, dst;
    for (std::int32_t b = 0; b < keep.batch(); ++b)
      for_each_keep_move(keep, b, steps_.lengths()[static_cast<std::size_t>(b)], [&](std::int64_t from, std::int64_t to) {
        src.push_back(slot_or_scratch(b, from));
        dst.push_back(slot_or_scratch(b, to));
      });
    if (!src.empty()) {
      // The gather copies, so overlapping slots are safe.
      const auto flat = pool_.view({layout_.layers * 2, pool_.size(2), layout_.kv_heads * layout_.head_dim});
      const auto s = at::tensor(src, at::kLong).to(pool_.device()), d = at::tensor(dst, at::kLong).to(pool_.device());
      flat.index_copy_(1, d, flat.index_select(1, s));
    }
    steps_.commit(keep);
    for (std::int32_t b = 0; b < keep.batch(); ++b) blocks_.shrink(b, steps_.lengths()[static_cast<std::size_t>(b)]);
  }

 private:
  KvLayout layout_;
  BlockTables blocks_;
  std::int64_t max_entries_;
  StaticStoreOptions options_;
  at::Tensor pool_;  // [layers, 2, num_blocks * block_size + 1, kv_heads, head_dim]
  torch_detail::SequenceSteps steps_{"StaticPagedKvStore"};
  std::shared_ptr<StaticStoreState> state_;
};

REFDEC_TORCH_NAMESPACE_END
