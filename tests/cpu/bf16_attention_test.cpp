// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The AVX512_BF16 attention products (bf16_attention.hpp) against float64 sums of the same
// values over a strided cache: every head size it takes, row counts across its tiles, lengths
// within, at and past a block of 16 entries, odd and even; a block table's entries bit for bit
// as the contiguous ones; each row's result the same whatever rows share its step.

#include "refdec/cpu/bf16_attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/attention_cache.hpp"
#include "common/expect_error.hpp"

namespace {

using refdec::CacheView;
using refdec::StreamLinear;
namespace kernel = refdec::avx512bf16;

float bf16(std::uint16_t bits) { return refdec::bf16::to_float(bits); }

struct Cache {
  std::int64_t kv, d, len, row_stride, head_stride;
  std::vector<std::uint16_t> keys, vals;
  CacheView view(const std::vector<std::uint16_t>& c) const { return {c.data(), len, row_stride, head_stride, d}; }
};

// [len + 3, kv, d] with an extra head's room per entry: strides that are not the sizes.
Cache random_cache(std::int64_t kv, std::int64_t d, std::int64_t len, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Cache c{kv, d, len, (kv + 1) * d, d, {}, {}};
  c.keys.resize(static_cast<std::size_t>((len + 3) * c.row_stride));
  c.vals.resize(c.keys.size());
  for (auto& v : c.keys) v = refdec::bf16::from_float(normal(rng));
  for (auto& v : c.vals) v = refdec::bf16::from_float(normal(rng));
  return c;
}

TEST(Bf16Attention, ProductsEqualTheFloat64SumsOverAStridedCache) {
  if (!kernel::runs(64)) GTEST_SKIP() << "this CPU does not run AVX512_BF16 (" << refdec::cpu_isa().describe() << ")";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::int64_t kv : {1, 3})
    // Tiles of 1-12 rows (13: 7 and 6; 25: 9, 8 and 8).
    for (const std::int64_t rows : {1, 5, 12, 13, 25})
      for (const std::int64_t d : {32, 64, 128, 256})
        for (const std::int64_t len : {0, 1, 2, 7, 16, 17, 40, 67}) {
          const Cache c = random_cache(kv, d, len, rng);
          std::vector<std::uint16_t> q(static_cast<std::size_t>(kv * rows * d));
          for (auto& v : q) v = refdec::bf16::from_float(normal(rng));
          std::vector<float> p(static_cast<std::size_t>(kv * rows * len));
          for (auto& v : p) v = std::abs(normal(rng)) / static_cast<float>(len);
          std::vector<float> scores(p.size(), -7.0f);
          std::vector<std::uint16_t> out(q.size(), 0xffff);
          // Two head ranges, as two threads would take them.
          for (const auto& [a, b] : {std::pair<std::int64_t, std::int64_t>{0, kv / 2}, {kv / 2, kv}}) {
            kernel::attention_scores(q.data(), rows, c.view(c.keys), 0.5f, scores.data(), a, b);
            kernel::attention_values(p.data(), rows, c.view(c.vals), out.data(), a, b);
          }
          const auto at = [&](const std::vector<std::uint16_t>& cache, std::int64_t s, std::int64_t h, std::int64_t i) {
            return static_cast<double>(bf16(cache[static_cast<std::size_t>(s * c.row_stride + h * c.head_stride + i)]));
          };
          for (std::int64_t h = 0; h < kv; ++h)
            for (std::int64_t r = 0; r < rows; ++r) {
              for (std::int64_t s = 0; s < len; ++s) {
                const auto [want, mag] = refdec_test::sum_with_magnitude(
                    d, [&](std::int64_t i) { return bf16(q[static_cast<std::size_t>((h * rows + r) * d + i)]) * at(c.keys, s, h, i); });
                ASSERT_NEAR(scores[static_cast<std::size_t>((h * rows + r) * len + s)], 0.5 * want, 1e-5 * (1 + mag))
                    << "kv " << kv << " rows " << rows << " d " << d << " len " << len << " head " << h << " row " << r << " entry " << s;
              }
              for (std::int64_t i = 0; i < d; ++i) {
                const auto [want, mag] = refdec_test::sum_with_magnitude(
                    len, [&](std::int64_t s) { return p[static_cast<std::size_t>((h * rows + r) * len + s)] * at(c.vals, s, h, i); });
                // Each probability rounds to bf16 (within 2^-8 of it), the sum once more.
                ASSERT_NEAR(bf16(out[static_cast<std::size_t>((h * rows + r) * d + i)]), want, (std::abs(want) + mag) / 256 + 1e-6)
                    << "kv " << kv << " rows " << rows << " d " << d << " len " << len << " head " << h << " row " << r << " dim " << i;
              }
            }
        }
}

// Row r's scores and outputs among 25 rows (tiles of 9, 8 and 8) are those of row r alone.
TEST(Bf16Attention, EachRowIsTheSameWhateverRowsShareTheStep) {
  if (!kernel::runs(64)) GTEST_SKIP() << "this CPU does not run AVX512_BF16 (" << refdec::cpu_isa().describe() << ")";
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t rows = 25, d = 64, len = 45;
  const Cache c = random_cache(1, d, len, rng);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(rows * d));
  for (auto& v : q) v = refdec::bf16::from_float(normal(rng));
  std::vector<float> p(static_cast<std::size_t>(rows * len));
  for (auto& v : p) v = std::abs(normal(rng)) / static_cast<float>(len);
  std::vector<float> all_scores(p.size());
  std::vector<std::uint16_t> all_out(q.size());
  kernel::attention_scores(q.data(), rows, c.view(c.keys), 0.125f, all_scores.data(), 0, 1);
  kernel::attention_values(p.data(), rows, c.view(c.vals), all_out.data(), 0, 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> scores(static_cast<std::size_t>(len));
    std::vector<std::uint16_t> out(static_cast<std::size_t>(d));
    kernel::attention_scores(q.data() + r * d, 1, c.view(c.keys), 0.125f, scores.data(), 0, 1);
    kernel::attention_values(p.data() + r * len, 1, c.view(c.vals), out.data(), 0, 1);
    EXPECT_TRUE(std::equal(scores.begin(), scores.end(), all_scores.begin() + r * len)) << "row " << r;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), all_out.begin() + r * d)) << "row " << r;
  }
}

// A paged cache read in place through a block table gives the products of the same entries laid
// out contiguously, bit for bit: block sizes that do and do not divide the length, blocks scattered
// over a pool in random order.
TEST(Bf16Attention, ProductsThroughABlockTableEqualTheContiguousProducts) {
  if (!kernel::runs(64)) GTEST_SKIP() << "this CPU does not run AVX512_BF16 (" << refdec::cpu_isa().describe() << ")";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t kv = 2, rows = 3, d = 64;
  for (const std::int64_t block_size : {1, 3, 16})
    for (const std::int64_t len : {1, 16, 37}) {
      const std::int64_t row_stride = kv * d;
      std::vector<std::uint16_t> keys(static_cast<std::size_t>(len * row_stride)), vals(keys.size());
      for (auto* v : {&keys, &vals})
        for (auto& x : *v) x = refdec::bf16::from_float(normal(rng));
      // The pool holds noise wherever no entry of the sequence lies.
      const auto pool = refdec_test::scatter_into_blocks(keys, vals, len, row_stride, block_size, rng,
                                                         [&] { return refdec::bf16::from_float(normal(rng)); });
      const CacheView kc{keys.data(), len, row_stride, d, d}, vc{vals.data(), len, row_stride, d, d};
      const CacheView kp{pool.keys.data(), len, row_stride, d, d, pool.table.data(), block_size},
          vp{pool.vals.data(), len, row_stride, d, d, pool.table.data(), block_size};
      std::vector<std::uint16_t> q(static_cast<std::size_t>(kv * rows * d));
      for (auto& v : q) v = refdec::bf16::from_float(normal(rng));
      std::vector<float> p(static_cast<std::size_t>(kv * rows * len));
      for (auto& v : p) v = std::abs(normal(rng)) / static_cast<float>(len);
      std::vector<float> want_scores(p.size()), got_scores(p.size());
      std::vector<std::uint16_t> want_out(q.size()), got_out(q.size());
      kernel::attention_scores(q.data(), rows, kc, 0.5f, want_scores.data(), 0, kv);
      kernel::attention_scores(q.data(), rows, kp, 0.5f, got_scores.data(), 0, kv);
      kernel::attention_values(p.data(), rows, vc, want_out.data(), 0, kv);
      kernel::attention_values(p.data(), rows, vp, got_out.data(), 0, kv);
      EXPECT_EQ(got_scores, want_scores) << "block size " << block_size << " length " << len;
      EXPECT_EQ(got_out, want_out) << "block size " << block_size << " length " << len;
    }
}

TEST(Bf16Attention, RejectsWhatItCannotRun) {
  const std::vector<std::uint16_t> cache(256);
  const std::vector<std::uint16_t> q(64);
  std::vector<float> scores(16);
  if (!kernel::runs(64)) {
    refdec_test::expect_error(
        [&] {
          kernel::attention_scores(q.data(), 1, {cache.data(), 1, 64, 64, 64}, 1.0f, scores.data(), 0, 1);
        },
        "needs a CPU with AVX512_BF16");
    GTEST_SKIP() << "this CPU does not run AVX512_BF16 (" << refdec::cpu_isa().describe() << "): only the error was checked";
  }
  EXPECT_FALSE(kernel::runs(48)) << "a head size that is not a multiple of 32";
  EXPECT_FALSE(kernel::runs(512)) << "a head size above 256";
  refdec_test::expect_error(
      [&] {
        kernel::attention_scores(q.data(), 1, {cache.data(), 1, 48, 48, 48}, 1.0f, scores.data(), 0, 1);
      },
      "multiple of 32 up to 256, got 48");
  refdec_test::expect_error(
      [&] {
        kernel::attention_scores(q.data(), 1, {cache.data(), 1, 64, 64, 64}, 1.0f, scores.data(), 1, 0);
      },
      "bad head range [1, 0)");
  const std::int32_t table[] = {0};
  refdec_test::expect_error(
      [&] {
        kernel::attention_values(scores.data(), 1, {cache.data(), 1, 64, 64, 64, table, 0}, nullptr, 0, 1);
      },
      "block table needs a positive block size");
}

}  // namespace
