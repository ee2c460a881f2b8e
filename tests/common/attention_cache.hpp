// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What the attention kernels' tests (tests/cpu/avx2_attention_test.cpp, bf16_attention_test.cpp)
// share: float64 reference sums, and a sequence's cache scattered over a pool of blocks as a paged
// store holds it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace refdec_test {

/// sum of term(i) over i < n in float64, and the sum of the terms' magnitudes (the scale of
/// their float32 rounding).
template <typename Term>
std::pair<double, double> sum_with_magnitude(std::int64_t n, Term term) {
  double sum = 0, magnitude = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = term(i);
    sum += t, magnitude += std::abs(t);
  }
  return {sum, magnitude};
}

/// A sequence's `len` entries (rows of `row_stride` values of keys and of values) copied into
/// pools of blocks of `block_size` entries, the blocks taken from the pool in random order (the
/// table: the block of every block_size entries), the pools' other rows `noise()`.
struct PagedCopy {
  std::vector<std::int32_t> table;
  std::vector<std::uint16_t> keys, vals;
};

template <typename Noise>
PagedCopy scatter_into_blocks(const std::vector<std::uint16_t>& keys, const std::vector<std::uint16_t>& vals, std::int64_t len,
                              std::int64_t row_stride, std::int64_t block_size, std::mt19937& rng, Noise noise) {
  const std::int64_t blocks = (len + block_size - 1) / block_size, pool_blocks = blocks + 5;
  std::vector<std::int32_t> order(static_cast<std::size_t>(pool_blocks));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  PagedCopy copy{{order.begin(), order.begin() + blocks}, {}, {}};
  copy.keys.resize(static_cast<std::size_t>(pool_blocks * block_size * row_stride));
  copy.vals.resize(copy.keys.size());
  for (auto& v : copy.keys) v = noise();
  for (auto& v : copy.vals) v = noise();
  for (std::int64_t s = 0; s < len; ++s) {
    const std::int64_t row = std::int64_t{copy.table[static_cast<std::size_t>(s / block_size)]} * block_size + s % block_size;
    std::copy_n(keys.begin() + s * row_stride, row_stride, copy.keys.begin() + row * row_stride);
    std::copy_n(vals.begin() + s * row_stride, row_stride, copy.vals.begin() + row * row_stride);
  }
  return copy;
}

}  // namespace refdec_test
