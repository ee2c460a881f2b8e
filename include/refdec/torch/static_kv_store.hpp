// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The static-shape KV store: every layer's keys and values of every sequence in one tensor of fixed
// capacity, [layers, 2, max_batch, kv_heads, entries, head_dim], so that a step's attention reads
// each sequence's entries where they lie, at addresses that never change, and a whole decoding
// step can be captured once in a CUDA graph and replayed (StaticLlama, static_llama.hpp).
//
// A step is padded to a bucket: its batch and its rows per sequence each to the next of 1, 2, 3,
// 4, 6, 8, 12, 16, 24, ... (static_buckets(), capped at max_batch and max_rows). The padded rows write their keys and values
// past their sequence's real rows, or into one scratch entry after each sequence's capacity where
// that runs out, and attend to that entry alone, so their results are finite and nothing reads
// them. Each bucket has its own input buffers and, once captured, its own graph; the store keeps
// them, and copies of a store share them (and the cache).
//
// It is a KvStore like the others (write()/read() serve the eager LlamaModel too), but its entries
// are written and read by one model: StaticLlama stores keys in its own order of a head's
// dimensions.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/cuda_graph.hpp"
#include "refdec/torch/huge_page_tensor.hpp"
#include "refdec/torch/kv_store.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Sizes and execution of a StaticKvStore.
struct StaticStoreOptions {
  std::int64_t max_batch = 1;         ///< sequences at once (batch buckets: static_buckets(max_batch))
  std::int64_t max_rows = 256;        ///< step rows per sequence at most (row buckets: static_buckets(max_rows))
  std::int64_t max_step_rows = 4096;  ///< padded rows of one step at most (batch bucket x row bucket)
  /// Capture each bucket's step in a CUDA graph the first time it runs and replay it after that
  /// (a CUDA device and a CUDA build of libtorch; elsewhere the step runs eagerly). false: every
  /// step runs eagerly, the same operations launched one by one (the reference of the graphs).
  bool graphs = true;

  /// Throws refdec::ArgumentError naming the first bad size.
  void validate() const {
    REFDEC_CHECK(max_batch > 0 && max_rows > 0 && max_step_rows > 0,
                 "StaticStoreOptions: max_batch, max_rows and max_step_rows must be positive, got max_batch="
                     << max_batch << " max_rows=" << max_rows << " max_step_rows=" << max_step_rows);
  }
};

/// The buckets up to `limit` (>= 1): powers of two and the midpoints between them (1, 2, 3, 4, 6,
/// 8, 12, 16, 24, ...), then `limit` itself, so that a step pads at most a third of its rows
/// (a tree of 17 rows, budget 16 and its root, takes 24, not 32).
inline std::vector<std::int64_t> static_buckets(std::int64_t limit) {
  std::vector<std::int64_t> out;
  for (std::int64_t p = 1; p < limit; p *= 2) {
    out.push_back(p);
    if (p >= 2 && p + p / 2 < limit) out.push_back(p + p / 2);
  }
  out.push_back(limit);
  return out;
}

/// The bucket of `n` (>= 1) under `limit`: the smallest of static_buckets(limit) >= n. Throws
/// refdec::ArgumentError when n is outside [1, limit], naming `what`.
inline std::int64_t static_bucket(std::int64_t n, std::int64_t limit, const char* what) {
  REFDEC_CHECK(n >= 1 && n <= limit, "StaticKvStore: " << n << " " << what << " outside the buckets' range [1, " << limit << "]");
  for (std::int64_t p = 1;; p *= 2) {
    if (p >= n) return std::min(p, limit);
    if (p >= 2 && p + p / 2 >= n) return std::min(p + p / 2, limit);
  }
}

/// One bucket's static buffers (StaticLlama fills and runs them; a store keeps them).
struct StaticBucket {
  std::int64_t batch = 0;  ///< Bb: padded sequences
  std::int64_t rows = 0;   ///< T: padded rows per sequence (P = Bb * T padded rows)
  /// The step's integer inputs on the host (pinned where the device is CUDA), then on the device:
  /// [4 P + Bb] int64: tokens [P], positions [P], cache entries written [P], the padded row of each
  /// plan row [P] (unused ones 0), cached lengths [Bb].
  at::Tensor host_ints, ints;
  /// [Bb, T, T + 1] uint8: [b, i, j < T] row i of sequence b sees its step row j; [b, i, T] row i
  /// is padding (it sees the scratch entry alone).
  at::Tensor host_mask, mask;
  at::Tensor sequence_of_row;  ///< [P] int64: b of padded row b * T + i (constant)
  at::Tensor logits;           ///< [P, vocab] float: the last run's output (the graph's, once captured)
  std::unique_ptr<StepGraph> graph;
};

/// What a StaticKvStore and its copies share besides the cache: the buckets and what they were
/// built for.
struct StaticStoreState {
  std::uint64_t model = 0;  ///< identity of the StaticLlama the buckets and the rotary table are for
  at::Tensor rotary;        ///< [entries, head_dim / 2] complex: e^(i position theta_k) of every entry
  std::map<std::pair<std::int64_t, std::int64_t>, StaticBucket> buckets;  ///< (Bb, T) -> buffers
  GraphPool pool;                                                         ///< the graphs' shared scratch memory
};

/// Keys and values of every layer and sequence in one tensor of fixed capacity (KvStore; see the
/// file comment). Not thread-safe: one owner (e.g. a Session) at a time.
class StaticKvStore {
 public:
  /// A store for up to options.max_batch sequences of up to `capacity` entries each (cached ones
  /// plus one step's rows).
  StaticKvStore(KvLayout layout, std::int64_t capacity, StaticStoreOptions options = {})
      : layout_(std::move(layout)), capacity_(capacity), options_(options), state_(std::make_shared<StaticStoreState>()) {
    layout_.validate();
    options_.validate();
    REFDEC_CHECK(capacity > 0, "StaticKvStore: capacity must be positive, got " << capacity);
    // Zeros, not garbage: attention multiplies every entry, masked ones by a probability of 0,
    // and 0 times a NaN bit pattern would poison the row.
    cache_ = huge_page_zeros({layout_.layers, 2, options_.max_batch, layout_.kv_heads, entries(), layout_.head_dim}, layout_.options);
  }

  const KvLayout& layout() const { return layout_; }
  std::int64_t capacity() const { return capacity_; }
  const StaticStoreOptions& options() const { return options_; }
  /// Whether steps over this store (this copy; copies made before keep theirs) capture graphs:
  /// StaticStoreOptions::graphs. Off for a one-off step, e.g. a long prefill, whose bucket would
  /// not be replayed.
  void set_graphs(bool on) { options_.graphs = on; }
  /// Entries per sequence in the cache: capacity() plus the padded rows' scratch entry (the last).
  std::int64_t entries() const { return capacity_ + 1; }
  std::int64_t batch() const { return steps_.batch(); }
  /// [batch] cached entries per sequence.
  std::span<const std::int64_t> lengths() const { return steps_.lengths(); }
  /// [layers, 2 (keys, values), max_batch, kv_heads, entries(), head_dim]: sequence b's entries are
  /// [:, :, b]. Its address never changes.
  const at::Tensor& cache() const { return cache_; }
  /// The buckets' buffers and graphs (shared with copies of this store).
  StaticStoreState& state() const { return *state_; }
  /// Appends an empty sequence and returns its index; throws refdec::ArgumentError when max_batch
  /// sequences are in the store.
  std::int64_t add() {
    REFDEC_CHECK(batch() < options_.max_batch, "StaticKvStore: already " << batch() << " sequences, the store's max_batch");
    return steps_.add();
  }

  /// Drops sequence `b`; later sequences move down by one (their entries are copied: a cost paid
  /// when a request leaves, so that every step reads the sequences in place).
  void remove(std::int64_t b) {
    steps_.check_index(b);
    const std::int64_t after = batch() - b - 1;
    if (after > 0) cache_.narrow(2, b, after).copy_(cache_.narrow(2, b + 1, after).clone());
    steps_.remove(b);
  }

  /// Prepares `plan`'s step: its rows go after each sequence's cached entries.
  void begin_step(const StepPlan& plan) {
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      REFDEC_CHECK(plan.rows(b) <= options_.max_rows,
                   "StaticKvStore: sequence " << b << " has " << plan.rows(b) << " step rows, more than max_rows " << options_.max_rows);
    steps_.begin_step(plan, capacity_);
  }

  /// Writes one layer's keys and values of every plan row, each [R, kv_heads, head_dim] (the eager
  /// model's path; StaticLlama writes the cache itself).
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    steps_.check_write(k, v);
    for (std::size_t b = 0; b < steps_.lengths().size(); ++b) {
      const std::int64_t first = steps_.indptr()[b], n = steps_.rows()[b], len = steps_.lengths()[b];
      const auto s = static_cast<std::int64_t>(b);
      cache_[layer][0][s].narrow(1, len, n).copy_(k.narrow(0, first, n).transpose(0, 1));
      cache_[layer][1][s].narrow(1, len, n).copy_(v.narrow(0, first, n).transpose(0, 1));
    }
  }

  /// Sequence `b`'s cached entries then its step rows: keys and values, each a view
  /// [lengths()[b] + step rows, kv_heads, head_dim].
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    const std::int64_t n = steps_.visible(b);
    return {cache_[layer][0][b].narrow(1, 0, n).transpose(0, 1), cache_[layer][1][b].narrow(1, 0, n).transpose(0, 1)};
  }

  /// Applies `keep` to the step begun last: the kept rows of each sequence move to its entries
  /// lengths()[b], lengths()[b] + 1, ... (one gather and one scatter for every layer and
  /// sequence, none when every kept row is already in place) and its length becomes keep.lengths[b].
  void commit(const KeepPlan& keep) {
    steps_.check_commit(keep);
    const std::int64_t KV = layout_.kv_heads, E = entries();
    std::vector<std::int64_t> src, dst;  // entries of the cache viewed as [2 layers, max_batch * kv_heads * entries, head_dim]
    for (std::int32_t b = 0; b < keep.batch(); ++b) {
      const auto u = static_cast<std::size_t>(b);
      for_each_keep_move(keep, b, steps_.lengths()[u], [&](std::int64_t from, std::int64_t to) {
        for (std::int64_t h = 0; h < KV; ++h) {
          src.push_back((b * KV + h) * E + from);
          dst.push_back((b * KV + h) * E + to);
        }
      });
    }
    if (!src.empty()) {
      // The gather copies, so overlapping sources and destinations are safe.
      const auto flat = cache_.view({layout_.layers * 2, options_.max_batch * KV * E, layout_.head_dim});
      const auto device = cache_.device();
      const auto s = at::tensor(src, at::kLong).to(device), d = at::tensor(dst, at::kLong).to(device);
      flat.index_copy_(1, d, flat.index_select(1, s));
    }
    steps_.commit(keep);
  }

 private:
  KvLayout layout_;
  std::int64_t capacity_;
  StaticStoreOptions options_;
  at::Tensor cache_;  // [layers, 2, max_batch, kv_heads, entries, head_dim]
  torch_detail::SequenceSteps steps_{"StaticKvStore"};
  std::shared_ptr<StaticStoreState> state_;
};

REFDEC_TORCH_NAMESPACE_END
