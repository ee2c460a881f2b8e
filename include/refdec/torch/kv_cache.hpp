// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A preallocated KV cache for a batch of sequences of different lengths. A step writes its
// candidate tokens after each sequence's committed entries; commit() then keeps only the accepted
// path, moved to contiguous positions.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// Keys and values of every layer for B sequences, `capacity` slots each.
class KvCache {
 public:
  KvCache() = default;
  /// Allocates [layers, batch, capacity, kv_heads, head_dim] keys and values with `options`.
  KvCache(std::int64_t layers, std::int64_t batch, std::int64_t capacity, std::int64_t kv_heads,
          std::int64_t head_dim, at::TensorOptions options)
      : lengths_(static_cast<std::size_t>(batch), 0) {
    TORCH_CHECK(layers > 0 && batch > 0 && capacity > 0 && kv_heads > 0 && head_dim > 0,
                "KvCache: all sizes must be positive, got layers=", layers, " batch=", batch,
                " capacity=", capacity, " kv_heads=", kv_heads, " head_dim=", head_dim);
    k_ = at::zeros({layers, batch, capacity, kv_heads, head_dim}, options);
    v_ = at::zeros_like(k_);
  }

  std::int64_t layers() const { return k_.size(0); }
  std::int64_t batch() const { return k_.size(1); }
  std::int64_t capacity() const { return k_.size(2); }
  /// Committed entries per sequence.
  const std::vector<std::int64_t>& lengths() const { return lengths_; }
  std::int64_t max_length() const { return *std::max_element(lengths_.begin(), lengths_.end()); }

  /// Keys of one layer: [batch, capacity, kv_heads, head_dim].
  at::Tensor keys(std::int64_t layer) const { return k_[layer]; }
  /// Values of one layer: [batch, capacity, kv_heads, head_dim].
  at::Tensor values(std::int64_t layer) const { return v_[layer]; }

  /// Prepares a step of `num_tokens` tokens per sequence: token t of sequence b will be written
  /// at slot lengths[b] + t.
  void begin_step(std::int64_t num_tokens) {
    TORCH_CHECK(num_tokens > 0, "KvCache: a step needs at least one token");
    TORCH_CHECK(max_length() + num_tokens <= capacity(), "KvCache: a step of ", num_tokens,
                " tokens after ", max_length(), " cached ones exceeds the capacity ", capacity());
    std::vector<std::int64_t> index;  // [batch * num_tokens] flat slot in [batch * capacity]
    index.reserve(static_cast<std::size_t>(batch() * num_tokens));
    for (std::int64_t b = 0; b < batch(); ++b)
      for (std::int64_t t = 0; t < num_tokens; ++t)
        index.push_back(b * capacity() + lengths_[static_cast<std::size_t>(b)] + t);
    step_tokens_ = num_tokens;
    write_index_ = at::tensor(index, at::kLong).to(k_.device());
  }

  /// Writes one layer's new keys and values, each [batch, num_tokens, kv_heads, head_dim].
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    TORCH_CHECK(k.size(1) == step_tokens_, "KvCache: write of ", k.size(1), " tokens in a step of ", step_tokens_);
    const auto flat = [&](const at::Tensor& t) { return t.reshape({-1, t.size(2), t.size(3)}); };
    flat(k_[layer]).index_copy_(0, write_index_, flat(k).to(k_.scalar_type()));
    flat(v_[layer]).index_copy_(0, write_index_, flat(v).to(v_.scalar_type()));
  }

  /// Keeps, for each sequence b, the entries this step wrote at `kept[b]` (step token indices in
  /// increasing order), moved to slots lengths[b], lengths[b] + 1, ...; lengths grow accordingly.
  void commit(std::span<const std::vector<std::int32_t>> kept) {
    TORCH_CHECK(static_cast<std::int64_t>(kept.size()) == batch(), "KvCache: commit for ", kept.size(),
                " sequences in a batch of ", batch());
    std::vector<std::int64_t> src, dst;  // flat slots in [batch * capacity]
    for (std::int64_t b = 0; b < batch(); ++b) {
      const auto& rows = kept[static_cast<std::size_t>(b)];
      const std::int64_t base = b * capacity() + lengths_[static_cast<std::size_t>(b)];
      for (std::size_t i = 0; i < rows.size(); ++i) {
        TORCH_CHECK(rows[i] >= 0 && rows[i] < step_tokens_ && (i == 0 || rows[i] > rows[i - 1]),
                    "KvCache: kept indices must increase within the step, got ", rows[i]);
        if (rows[i] != static_cast<std::int32_t>(i)) {  // entries already in place stay
          src.push_back(base + rows[i]);
          dst.push_back(base + static_cast<std::int64_t>(i));
        }
      }
      lengths_[static_cast<std::size_t>(b)] += static_cast<std::int64_t>(rows.size());
    }
    if (src.empty()) return;
    // One gather and one scatter over all layers at once; the gather copies, so overlapping
    // source and destination slots are safe.
    const auto s = at::tensor(src, at::kLong).to(k_.device());
    const auto d = at::tensor(dst, at::kLong).to(k_.device());
    for (at::Tensor* t : {&k_, &v_}) {
      auto flat = t->view({t->size(0), -1, t->size(3), t->size(4)});  // [layers, batch * capacity, heads, dim]
      flat.index_copy_(1, d, flat.index_select(1, s));
    }
  }

  /// Forgets sequence b's entries (its slots are reused from 0).
  void reset(std::int64_t b) { lengths_.at(static_cast<std::size_t>(b)) = 0; }

 private:
  at::Tensor k_;  // [layers, batch, capacity, kv_heads, head_dim]
  at::Tensor v_;  // [layers, batch, capacity, kv_heads, head_dim]
  std::vector<std::int64_t> lengths_;  // [batch]
  std::int64_t step_tokens_ = 0;
  at::Tensor write_index_;  // [batch * step_tokens] int64 flat slots of the current step
};

REFDEC_NAMESPACE_END
