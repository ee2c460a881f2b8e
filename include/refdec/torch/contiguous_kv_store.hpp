// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The contiguous KV store: each sequence owns one preallocated buffer of `capacity` entries, so
// that read() is a view, never a copy. Sequences join and leave between steps.

#include <ATen/ATen.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/huge_page_tensor.hpp"
#include "refdec/torch/kv_store.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Keys and values of every layer, one buffer of `capacity` entries per sequence (KvStore). Not
/// thread-safe: one owner (e.g. a Session) at a time.
class ContiguousKvStore {
 public:
  /// A store whose sequences hold up to `capacity` entries each: cached ones plus one step's rows.
  ContiguousKvStore(KvLayout layout, std::int64_t capacity) : layout_(std::move(layout)), capacity_(capacity) {
    layout_.validate();
    REFDEC_CHECK(capacity > 0, "ContiguousKvStore: capacity must be positive, got " << capacity);
  }

  const KvLayout& layout() const { return layout_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t batch() const { return steps_.batch(); }
  /// [batch] cached entries per sequence.
  std::span<const std::int64_t> lengths() const { return steps_.lengths(); }

  /// Appends an empty sequence (allocating its buffer) and returns its index.
  std::int64_t add() {
    // [2 (keys, values), layers, capacity, kv_heads, head_dim]
    buffers_.push_back(huge_page_zeros({2, layout_.layers, capacity_, layout_.kv_heads, layout_.head_dim}, layout_.options));
    return steps_.add();
  }

  /// Drops sequence `b` (its buffer is freed); later sequences move down by one.
  void remove(std::int64_t b) {
    steps_.remove(b);
    buffers_.erase(buffers_.begin() + b);
  }

  /// Prepares `plan`'s step: its rows go after each sequence's cached entries.
  void begin_step(const StepPlan& plan) { steps_.begin_step(plan, capacity_); }

  /// Writes one layer's keys and values of every plan row, each [R, kv_heads, head_dim].
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    steps_.check_write(k, v);
    for (std::size_t b = 0; b < buffers_.size(); ++b) {
      const std::int64_t first = steps_.indptr()[b], n = steps_.rows()[b], len = steps_.lengths()[b];
      at::Tensor& buffer = buffers_[b];
      buffer[0][layer].narrow(0, len, n).copy_(k.narrow(0, first, n));
      buffer[1][layer].narrow(0, len, n).copy_(v.narrow(0, first, n));
    }
  }

  /// Sequence `b`'s cached entries then its step rows: keys and values, each a view
  /// [lengths()[b] + step rows, kv_heads, head_dim].
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    const std::int64_t n = steps_.visible(b);
    const auto u = static_cast<std::size_t>(b);
    return {buffers_[u][0][layer].narrow(0, 0, n), buffers_[u][1][layer].narrow(0, 0, n)};
  }

  /// Applies `keep` to the step begun last: the kept rows of each sequence move to its entries
  /// lengths()[b], lengths()[b] + 1, ... and its length becomes keep.lengths[b].
  void commit(const KeepPlan& keep) {
    steps_.check_commit(keep);
    for (std::int32_t b = 0; b < keep.batch(); ++b) {
      const auto u = static_cast<std::size_t>(b);
      std::vector<std::int64_t> src, dst;
      for_each_keep_move(keep, b, steps_.lengths()[u], [&](std::int64_t from, std::int64_t to) {
        src.push_back(from);
        dst.push_back(to);
      });
      if (!src.empty()) {
        // The gather copies, so overlapping sources and destinations are safe.
        const auto device = buffers_[u].device();
        const auto s = at::tensor(src, at::kLong).to(device), d = at::tensor(dst, at::kLong).to(device);
        buffers_[u].index_copy_(2, d, buffers_[u].index_select(2, s));
      }
    }
    steps_.commit(keep);
  }

 private:
  KvLayout layout_;
  std::int64_t capacity_;
  std::vector<at::Tensor> buffers_;  // [batch] each [2, layers, capacity, kv_heads, head_dim]
  torch_detail::SequenceSteps steps_{"ContiguousKvStore"};
};

REFDEC_TORCH_NAMESPACE_END
