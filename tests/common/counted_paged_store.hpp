// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A paged KV store wrapped to count the model's reads, and to hide read_paged() where an engine's
// own store would not have it.

#include <cstdint>
#include <span>
#include <utility>

#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/paged_kv_store.hpp"

namespace refdec_test {

// A paged store that counts the model's reads; without read_paged (kInPlace false) it is seen
// through the KvStore members alone, as an engine's own store would be, and the model gathers.
template <bool kInPlace>
class CountedPagedStore {
 public:
  CountedPagedStore(const refdec::KvLayout& layout, std::int64_t blocks, std::int64_t block_size) : store_(layout, blocks, block_size) {}
  void begin_step(const refdec::StepPlan& plan) { store_.begin_step(plan); }
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) { store_.write(layer, k, v); }
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    ++reads;
    return store_.read(layer, b);
  }
  refdec::PagedEntries read_paged(std::int64_t layer, std::int64_t b) const requires kInPlace {
    ++paged_reads;
    return store_.read_paged(layer, b);
  }
  void commit(const refdec::KeepPlan& keep) { store_.commit(keep); }
  std::int64_t add() { return store_.add(); }
  void remove(std::int64_t b) { store_.remove(b); }
  std::int64_t batch() const { return store_.batch(); }
  std::span<const std::int64_t> lengths() const { return store_.lengths(); }
  const refdec::KvLayout& layout() const { return store_.layout(); }

  mutable std::int64_t reads = 0, paged_reads = 0;

 private:
  refdec::PagedKvStore store_;
};

}  // namespace refdec_test
