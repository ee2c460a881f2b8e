// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The paged KV store: one pool of fixed-size blocks shared by all sequences, a block table per
// sequence and a free list (vLLM's PagedAttention layout). A sequence holds only the blocks its
// entries need: blocks return to the pool when it leaves or when a keep plan shortens it.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/block_tables.hpp"
#include "refdec/torch/huge_page_tensor.hpp"
#include "refdec/torch/kv_store.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Keys and values of every layer in `num_blocks` blocks of `block_size` entries (KvStore). Not
/// thread-safe: one owner (e.g. a Session) at a time.
class PagedKvStore {
 public:
  PagedKvStore(KvLayout layout, std::int64_t num_blocks, std::int64_t block_size)
      : layout_(std::move(layout)), blocks_(num_blocks, block_size, "PagedKvStore") {
    layout_.validate();
    // [2 (keys, values), layers, num_blocks * block_size, kv_heads, head_dim]
    pool_ = huge_page_zeros({2, layout_.layers, num_blocks * block_size, layout_.kv_heads, layout_.head_dim}, layout_.options);
  }

  const KvLayout& layout() const { return layout_; }
  std::int64_t block_size() const { return blocks_.block_size(); }
  std::int64_t num_blocks() const { return blocks_.num_blocks(); }
  /// Blocks in the free list.
  std::int64_t free_blocks() const { return blocks_.free_blocks(); }
  std::int64_t batch() const { return blocks_.batch(); }
  /// [batch] cached entries per sequence.
  std::span<const std::int64_t> lengths() const { return lengths_; }
  /// The blocks of sequence `b`, in order: entry e lives in block table[e / block_size].
  std::span<const std::int32_t> block_table(std::int64_t b) const {
    check_index(b);
    return blocks_.table(b);
  }

  /// Appends an empty sequence (no blocks yet) and returns its index.
  std::int64_t add() {
    blocks_.add();
    lengths_.push_back(0);
    read_index_.emplace_back();
    step_ = false;
    return batch() - 1;
  }

  /// Drops sequence `b` and returns its blocks to the pool; later sequences move down by one.
  void remove(std::int64_t b) {
    check_index(b);
    blocks_.remove(b);
    lengths_.erase(lengths_.begin() + b);
    read_index_.erase(read_index_.begin() + b);
    step_ = false;
  }

  /// Prepares `plan`'s step: allocates the blocks each sequence's step rows need after its cached
  /// entries. Throws refdec::Error, allocating nothing, when the pool has too few free blocks.
  void begin_step(const StepPlan& plan) {
    torch_detail::check_plan_matches(plan, lengths_, "PagedKvStore");
    std::vector<std::int64_t> ends(lengths_.size());  // [B] entries after the step
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      ends[static_cast<std::size_t>(b)] = lengths_[static_cast<std::size_t>(b)] + plan.rows(b);
    blocks_.reserve(ends);
    std::vector<std::int64_t> write;  // [R] pool slot of each plan row
    write.reserve(static_cast<std::size_t>(plan.rows()));
    for (std::int32_t b = 0; b < plan.batch(); ++b) {
      const auto u = static_cast<std::size_t>(b);
      for (std::int64_t e = lengths_[u]; e < ends[u]; ++e) write.push_back(blocks_.slot(b, e));
      read_index_[u] = at::Tensor();  // gathered by read() on demand
    }
    write_index_ = at::tensor(write, at::kLong).to(pool_.device());
    indptr_ = plan.indptr;
    step_ = true;
  }

  /// Writes one layer's keys and values of every plan row, each [R, kv_heads, head_dim].
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    REFDEC_CHECK(step_, "PagedKvStore: write() outside a step");
    REFDEC_CHECK(k.size(0) == write_index_.size(0) && v.size(0) == write_index_.size(0),
                 "PagedKvStore: write of " << k.size(0) << " rows in a step of " << write_index_.size(0));
    pool_[0][layer].index_copy_(0, write_index_, k.to(pool_.scalar_type()));
    pool_[1][layer].index_copy_(0, write_index_, v.to(pool_.scalar_type()));
  }

  /// Sequence `b`'s cached entries then its step rows, gathered from its blocks: keys and values,
  /// each [lengths()[b] + step rows, kv_heads, head_dim]. A copy of the whole prefix per call:
  /// attention that takes a block table reads read_paged() instead.
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    check_index(b);
    REFDEC_CHECK(step_, "PagedKvStore: read() outside a step");
    const auto u = static_cast<std::size_t>(b);
    at::Tensor& index = read_index_[u];
    if (!index.defined()) {  // once per step and sequence, for every layer
      const std::int64_t end = lengths_[u] + indptr_[u + 1] - indptr_[u];
      std::vector<std::int64_t> slots(static_cast<std::size_t>(end));
      for (std::int64_t e = 0; e < end; ++e) slots[static_cast<std::size_t>(e)] = blocks_.slot(b, e);
      index = at::tensor(slots, at::kLong).to(pool_.device());
    }
    return {pool_[0][layer].index_select(0, index), pool_[1][layer].index_select(0, index)};
  }

  /// Sequence `b`'s cached entries then its step rows where they lie: the pool's rows of `layer`
  /// and the sequence's block table (PagedEntries), no copy.
  PagedEntries read_paged(std::int64_t layer, std::int64_t b) const {
    check_index(b);
    REFDEC_CHECK(step_, "PagedKvStore: read_paged() outside a step");
    REFDEC_CHECK(layer >= 0 && layer < layout_.layers, "PagedKvStore: layer " << layer << " out of range [0, " << layout_.layers << ")");
    const auto u = static_cast<std::size_t>(b);
    return {pool_[0][layer], pool_[1][layer], blocks_.table(b), blocks_.block_size(), lengths_[u] + indptr_[u + 1] - indptr_[u]};
  }

  /// Applies `keep` to the step begun last: kept rows move to entries lengths()[b], ...; blocks
  /// past each sequence's new length return to the pool.
  void commit(const KeepPlan& keep) {
    REFDEC_CHECK(step_, "PagedKvStore: commit() without a step");
    torch_detail::check_keep(keep, indptr_, lengths_, "PagedKvStore");
    std::vector<std::int64_t> src, dst;  // pool slots
    for (std::int32_t b = 0; b < keep.batch(); ++b)
      for_each_keep_move(keep, b, lengths_[static_cast<std::size_t>(b)], [&](std::int64_t from, std::int64_t to) {
        src.push_back(blocks_.slot(b, from));
        dst.push_back(blocks_.slot(b, to));
      });
    if (!src.empty()) {
      // One gather and one scatter for all layers, keys and values; the gather copies, so
      // overlapping slots are safe.
      const auto s = at::tensor(src, at::kLong).to(pool_.device()), d = at::tensor(dst, at::kLong).to(pool_.device());
      pool_.index_copy_(2, d, pool_.index_select(2, s));
    }
    for (std::int32_t b = 0; b < keep.batch(); ++b) {
      const auto u = static_cast<std::size_t>(b);
      lengths_[u] = keep.lengths[u];
      blocks_.shrink(b, lengths_[u]);
    }
    step_ = false;
  }

 private:
  void check_index(std::int64_t b) const {
    REFDEC_CHECK(b >= 0 && b < batch(), "PagedKvStore: sequence " << b << " out of range [0, " << batch() << ")");
  }

  KvLayout layout_;
  BlockTables blocks_;
  at::Tensor pool_;                    // [2, layers, num_blocks * block_size, kv_heads, head_dim]
  std::vector<std::int64_t> lengths_;  // [batch] cached entries
  // The step begun last: pool slots of the plan rows, and of each sequence's readable entries
  // once read() has gathered them.
  bool step_ = false;
  std::vector<std::int32_t> indptr_;            // [batch + 1]
  at::Tensor write_index_;                      // [R] int64
  mutable std::vector<at::Tensor> read_index_;  // [batch] each [cached + step rows] int64, or undefined
};

REFDEC_TORCH_NAMESPACE_END
