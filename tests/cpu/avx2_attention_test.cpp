// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The AVX2 attention products over a strided cache against float64 sums of the same values:
// every head grouping, row count, length (blocks of 8 and 16 and their tails) and head size, bf16
// and fp16, heads split into ranges.

#include "refdec/cpu/avx2_attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/attention_cache.hpp"
#include "common/expect_error.hpp"

namespace {

using refdec::StreamLinear;
using refdec::CacheView;
using refdec::HalfFormat;

TEST(Avx2Attention, ProductsEqualTheFloat64SumsOverAStridedCache) {
  if (!StreamLinear::cpu_runs()) GTEST_SKIP() << "this CPU does not run AVX2 with FMA and F16C (" << refdec::cpu_isa().describe() << ")";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const HalfFormat f : {HalfFormat::kBf16, HalfFormat::kFp16})
    for (const std::int64_t kv : {1, 3})
      // Rows in tiles of 1-6 (13: 5, 4 and 4); head sizes of 8 and 24 end in a lone 8-value
      // stretch; lengths end within and at a block of 16 entries.
      for (const std::int64_t rows : {1, 5, 6, 7, 13, 16})
        for (const std::int64_t d : {8, 24, 64, 128})
          for (const std::int64_t len : {1, 7, 8, 16, 17, 40}) {
            // [len + 3, kv, d] with an extra head's room per entry: strides that are not the sizes.
            const std::int64_t head_stride = d, row_stride = (kv + 1) * d;
            std::vector<std::uint16_t> keys(static_cast<std::size_t>((len + 3) * row_stride)), vals(keys.size());
            for (auto& v : keys) v = StreamLinear::from_float(normal(rng), f);
            for (auto& v : vals) v = StreamLinear::from_float(normal(rng), f);
            std::vector<float> q(static_cast<std::size_t>(kv * rows * d)), p(static_cast<std::size_t>(kv * rows * len));
            for (auto& v : q) v = normal(rng);
            for (auto& v : p) v = std::abs(normal(rng)) / static_cast<float>(len);
            const CacheView kc{keys.data(), len, row_stride, head_stride, d}, vc{vals.data(), len, row_stride, head_stride, d};
            std::vector<float> scores(p.size(), -7.0f);
            std::vector<std::uint16_t> out(q.size());
            // Two head ranges, as two threads would take them.
            for (const auto& [a, b] : {std::pair<std::int64_t, std::int64_t>{0, kv / 2}, {kv / 2, kv}}) {
              refdec::avx2::attention_scores(q.data(), rows, kc, f, 0.5f, scores.data(), a, b);
              refdec::avx2::attention_values(p.data(), rows, vc, f, out.data(), a, b);
            }
            const double half_step = f == HalfFormat::kBf16 ? 1.0 / 256 : 1.0 / 2048;
            const auto at = [&](const std::vector<std::uint16_t>& cache, std::int64_t s, std::int64_t h, std::int64_t i) {
              return static_cast<double>(StreamLinear::to_float(cache[static_cast<std::size_t>(s * row_stride + h * head_stride + i)], f));
            };
            for (std::int64_t h = 0; h < kv; ++h)
              for (std::int64_t r = 0; r < rows; ++r) {
                for (std::int64_t s = 0; s < len; ++s) {
                  const auto [want, mag] = refdec_test::sum_with_magnitude(
                      d, [&](std::int64_t i) { return q[static_cast<std::size_t>((h * rows + r) * d + i)] * at(keys, s, h, i); });
                  ASSERT_NEAR(scores[static_cast<std::size_t>((h * rows + r) * len + s)], 0.5 * want, 1e-5 * (1 + mag))
                      << "kv " << kv << " rows " << rows << " d " << d << " len " << len << " head " << h << " row " << r << " entry " << s;
                }
                for (std::int64_t i = 0; i < d; ++i) {
                  const auto [want, mag] = refdec_test::sum_with_magnitude(
                      len, [&](std::int64_t s) { return p[static_cast<std::size_t>((h * rows + r) * len + s)] * at(vals, s, h, i); });
                  ASSERT_NEAR(StreamLinear::to_float(out[static_cast<std::size_t>((h * rows + r) * d + i)], f), want,
                              half_step * std::abs(want) + 1e-5 * (1 + mag))
                      << "kv " << kv << " rows " << rows << " d " << d << " len " << len << " head " << h << " row " << r << " dim " << i;
                }
              }
          }
}

// A paged cache read in place through a block table gives the products of the same entries laid
// out contiguously, bit for bit: block sizes that do and do not divide the length, blocks scattered
// over a pool in random order.
TEST(Avx2Attention, ProductsThroughABlockTableEqualTheContiguousProducts) {
  if (!StreamLinear::cpu_runs()) GTEST_SKIP() << "this CPU does not run AVX2 with FMA and F16C (" << refdec::cpu_isa().describe() << ")";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t kv = 2, rows = 3, d = 64;
  for (const HalfFormat f : {HalfFormat::kBf16, HalfFormat::kFp16})
    for (const std::int64_t block_size : {1, 3, 16})
      for (const std::int64_t len : {1, 16, 37}) {
        const std::int64_t row_stride = kv * d;
        std::vector<std::uint16_t> keys(static_cast<std::size_t>(len * row_stride)), vals(keys.size());
        for (auto& v : keys) v = StreamLinear::from_float(normal(rng), f);
        for (auto& v : vals) v = StreamLinear::from_float(normal(rng), f);
        // The pool holds noise wherever no entry of the sequence lies.
        const auto pool = refdec_test::scatter_into_blocks(keys, vals, len, row_stride, block_size, rng,
                                                           [&] { return StreamLinear::from_float(normal(rng), f); });
        const CacheView kc{keys.data(), len, row_stride, d, d}, vc{vals.data(), len, row_stride, d, d};
        const CacheView kp{pool.keys.data(), len, row_stride, d, d, pool.table.data(), block_size},
            vp{pool.vals.data(), len, row_stride, d, d, pool.table.data(), block_size};
        std::vector<float> q(static_cast<std::size_t>(kv * rows * d)), p(static_cast<std::size_t>(kv * rows * len));
        for (auto& v : q) v = normal(rng);
        for (auto& v : p) v = std::abs(normal(rng)) / static_cast<float>(len);
        std::vector<float> want_scores(p.size()), got_scores(p.size());
        std::vector<std::uint16_t> want_out(q.size()), got_out(q.size());
        refdec::avx2::attention_scores(q.data(), rows, kc, f, 0.5f, want_scores.data(), 0, kv);
        refdec::avx2::attention_scores(q.data(), rows, kp, f, 0.5f, got_scores.data(), 0, kv);
        refdec::avx2::attention_values(p.data(), rows, vc, f, want_out.data(), 0, kv);
        refdec::avx2::attention_values(p.data(), rows, vp, f, got_out.data(), 0, kv);
        EXPECT_EQ(got_scores, want_scores) << "block size " << block_size << " length " << len;
        EXPECT_EQ(got_out, want_out) << "block size " << block_size << " length " << len;
      }
  std::vector<std::uint16_t> cache(64);
  const std::int32_t table[] = {0};
  const CacheView zero_block{cache.data(), 1, 8, 8, 8, table, 0};
  std::vector<float> q(8), scores(1);
  refdec_test::expect_error([&] { refdec::avx2::attention_scores(q.data(), 1, zero_block, HalfFormat::kBf16, 1.0f, scores.data(), 0, 1); },
                            "block table needs a positive block size");
}

// The in-place softmax against float64: rows of every length (vector body and tail), a wide range
// of values, masked (-inf) entries, entries that underflow to 0, a row entirely masked (all 0).
TEST(Avx2Attention, SoftmaxEqualsTheFloat64Softmax) {
  if (!StreamLinear::cpu_runs()) GTEST_SKIP() << "this CPU does not run AVX2 with FMA and F16C (" << refdec::cpu_isa().describe() << ")";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (const float spread : {0.1f, 3.0f, 40.0f})
    for (const std::int64_t len : {1, 5, 8, 13, 64, 700}) {
      const std::int64_t rows = 3;
      std::vector<float> x(static_cast<std::size_t>(rows * len));
      for (auto& v : x) v = spread * normal(rng);
      x[static_cast<std::size_t>(len - 1)] = -inf;  // row 0: a masked entry (its only one when len is 1)
      if (len > 2) x[static_cast<std::size_t>(len + 1)] = x[static_cast<std::size_t>(len)] - 200.0f;  // row 1: underflows to 0
      const std::vector<float> in = x;
      refdec::avx2::softmax(x.data(), rows, len);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* row = in.data() + r * len;
        double top = -inf, sum = 0.0;
        for (std::int64_t i = 0; i < len; ++i) top = std::max(top, static_cast<double>(row[i]));
        if (top == -inf) top = 0.0;
        // e^ of the float difference the kernel takes (the difference's own rounding is not its error)
        const auto power = [&](std::int64_t i) { return std::exp(static_cast<double>(row[i] - static_cast<float>(top))); };
        for (std::int64_t i = 0; i < len; ++i) sum += power(i);
        for (std::int64_t i = 0; i < len; ++i) {
          const double want = sum > 0.0 ? power(i) / sum : 0.0;
          const double got = x[static_cast<std::size_t>(r * len + i)];
          if (std::isinf(row[i]) || row[i] - top < -87.3)
            EXPECT_EQ(got, 0.0) << "row " << r << " entry " << i;
          else
            EXPECT_NEAR(got, want, 1e-5 * want + 1e-30) << "spread " << spread << ", length " << len << ", row " << r << " entry " << i;
        }
      }
    }
  std::vector<float> masked(9, -inf);
  refdec::avx2::softmax(masked.data(), 1, 9);
  for (const float v : masked) EXPECT_EQ(v, 0.0f) << "a row entirely masked";
  // A step's mask: row r gets mask row r % n on its last n entries, exactly as adding it first.
  const std::int64_t n = 2, len = 11, rows = 3 * n;
  const std::vector<float> mask = {0.0f, -inf, 0.5f, -1.0f};
  std::vector<float> with(static_cast<std::size_t>(rows * len)), added;
  for (auto& v : with) v = normal(rng);
  added = with;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < n; ++c) added[static_cast<std::size_t>(r * len + len - n + c)] += mask[static_cast<std::size_t>((r % n) * n + c)];
  refdec::avx2::softmax(with.data(), rows, len, mask.data(), n);
  refdec::avx2::softmax(added.data(), rows, len);
  EXPECT_EQ(with, added);
  EXPECT_EQ(with[static_cast<std::size_t>(len - 1)], 0.0f) << "row 0's masked entry";
  refdec_test::expect_error([&] { refdec::avx2::softmax(with.data(), 5, len, mask.data(), n); }, "dividing the 5 rows");
}

TEST(Avx2Attention, RejectsWhatItCannotRun) {
  const std::vector<std::uint16_t> cache(64);
  const std::vector<float> q(16);
  std::vector<float> scores(16);
  if (!StreamLinear::cpu_runs()) {
    refdec_test::expect_error([&] { refdec::avx2::attention_scores(q.data(), 1, {cache.data(), 1, 8, 8, 8}, HalfFormat::kBf16, 1.0f, scores.data(), 0, 1); },
                              "does not run AVX2");
    refdec_test::expect_error([&] { refdec::avx2::softmax(scores.data(), 1, 16); }, "does not run AVX2");
    GTEST_SKIP() << "this CPU does not run AVX2 with FMA and F16C: only the error was checked";
  }
  refdec_test::expect_error([&] { refdec::avx2::attention_scores(q.data(), 1, {cache.data(), 1, 12, 12, 12}, HalfFormat::kBf16, 1.0f, scores.data(), 0, 1); },
                            "head size a multiple of 8 up to 256, got 12");
  refdec_test::expect_error([&] { refdec::avx2::attention_scores(q.data(), 1, {cache.data(), 1, 8, 8, 8}, HalfFormat::kBf16, 1.0f, scores.data(), 1, 0); },
                            "bad head range [1, 0)");
}

}  // namespace
