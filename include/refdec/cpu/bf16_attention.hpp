// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Attention's two products over a sequence's cached bf16 keys and values with AVX512_BF16's
// vdpbf16ps, which multiplies 16 pairs of bf16 values into float32 sums per instruction, read in
// place through a CacheView as the AVX2 kernel (avx2_attention.hpp) reads them. The AVX2 kernel
// widens every cached value to float32 first and spends most of its instructions doing so, and
// over a cold cache, as a decoding step reads it (evicted by the weights streamed since the layer
// before), it took about twice its time over a warm one (bench/kernel_ab.sh, docs/speed.md).
//
// Scores: a block of 16 entries' keys is transposed once into [D / 2][16] pairs, so that each
// vdpbf16ps adds one pair of a query row's values times that pair of 16 entries' keys to the
// row's 16 scores. Values: two entries' rows are interleaved into pairs and each row's pair of
// probabilities (rounded to bf16 once, as oneDNN's bf16 products take them) multiplies them into
// 32 outputs. Every row's sums run in the same order whatever the number of rows, so a row's
// result does not depend on the step it is in. Plain C++20 and intrinsics under a target
// attribute: nothing here runs unless runs() says so.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/cpu/avx2_attention.hpp"
#include "refdec/cpu/bf16_kernels.hpp"
#include "refdec/cpu/cpu_isa.hpp"

REFDEC_NAMESPACE_BEGIN

namespace avx512bf16 {

/// Whether attention_scores() and attention_values() run here for heads of `head_dim` values:
/// a CPU with AVX512_BF16 (and F/BW/VL) and a head size that is a multiple of 32 up to 256.
inline bool runs(std::int64_t head_dim) {
  return REFDEC_X86 && cpu_isa().runs_avx512_bf16() && head_dim > 0 && head_dim % 32 == 0 && head_dim <= 256;
}

#if REFDEC_X86
namespace detail {

inline constexpr std::int64_t kBlockEntries = 16;  // the scores' lanes
inline constexpr int kTileRows = 12;               // query rows per tile: 12 score or 24 value accumulators

inline std::int32_t load32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The 16 x 16 dwords of r (r[j] dword i) transposed in place (r[i] dword j). (The zero-masked
// forms with every lane kept: GCC 12's unmasked ones start from an "undefined" vector that
// -Wmaybe-uninitialized reports, GCC bug 105593.)
REFDEC_AVX512_BF16_TARGET inline void transpose16(__m512i r[16]) {
  constexpr __mmask16 k16 = 0xFFFF;
  constexpr __mmask8 k8 = 0xFF;
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_maskz_unpacklo_epi32(k16, r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_maskz_unpackhi_epi32(k16, r[2 * k], r[2 * k + 1]);
  }
  // u[4k + e], 128-bit lane L: rows 4k..4k+3 of dword 4L + e.
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_maskz_unpacklo_epi64(k8, t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_maskz_unpackhi_epi64(k8, t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_maskz_unpacklo_epi64(k8, t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_maskz_unpackhi_epi64(k8, t[4 * k + 1], t[4 * k + 3]);
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512i x0 = _mm512_maskz_shuffle_i32x4(k16, u[e], u[4 + e], 0x44), x1 = _mm512_maskz_shuffle_i32x4(k16, u[e], u[4 + e], 0xEE);
    const __m512i y0 = _mm512_maskz_shuffle_i32x4(k16, u[8 + e], u[12 + e], 0x44),
                  y1 = _mm512_maskz_shuffle_i32x4(k16, u[8 + e], u[12 + e], 0xEE);
    r[e] = _mm512_maskz_shuffle_i32x4(k16, x0, y0, 0x88);
    r[4 + e] = _mm512_maskz_shuffle_i32x4(k16, x0, y0, 0xDD);
    r[8 + e] = _mm512_maskz_shuffle_i32x4(k16, x1, y1, 0x88);
    r[12 + e] = _mm512_maskz_shuffle_i32x4(k16, x1, y1, 0xDD);
  }
}

// The keys of entries [s, s + n) (n <= 16) of head h as pairs: kt[i * 16 + j] = entry j's values
// 2i and 2i + 1 (0 for j >= n).
REFDEC_AVX512_BF16_TARGET inline void transpose_keys(const CacheView& c, std::int64_t h, std::int64_t s, std::int64_t n, std::int32_t* kt) {
  const std::uint16_t* from[kBlockEntries] = {};
  avx2::detail::EntryRows rows(c, s);
  for (std::int64_t j = 0; j < n; ++j) {
    from[j] = c.data + rows.row * c.row_stride + h * c.head_stride;
    if (j + 1 < n) rows.next(s + j + 1);
  }
  for (std::int64_t i = 0; i < c.head_dim; i += 32) {  // 16 pairs of every entry at a time
    __m512i r[kBlockEntries];
#pragma GCC unroll 16
    for (int j = 0; j < kBlockEntries; ++j) r[j] = from[j] != nullptr ? _mm512_loadu_si512(from[j] + i) : _mm512_setzero_si512();
    transpose16(r);
#pragma GCC unroll 16
    for (int p = 0; p < kBlockEntries; ++p) _mm512_store_si512(kt + (i / 2 + p) * kBlockEntries, r[p]);
  }
}

// M query rows (bf16, D apart) against a block's transposed keys: the block's first n scores of
// each row, times scale, into out (out_stride apart).
template <int M>
REFDEC_AVX512_BF16_TARGET void scores_tile(const std::int32_t* kt, std::int64_t d, const std::uint16_t* q, float scale, float* out,
                                           std::int64_t out_stride, std::int64_t n) {
  __m512 acc[static_cast<std::size_t>(M)];
#pragma GCC unroll 12
  for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < d / 2; ++i) {
    const auto k = reinterpret_cast<__m512bh>(_mm512_load_si512(kt + i * kBlockEntries));
#pragma GCC unroll 12
    for (int m = 0; m < M; ++m)
      acc[m] = _mm512_dpbf16_ps(acc[m], reinterpret_cast<__m512bh>(_mm512_set1_epi32(load32(q + m * d + 2 * i))), k);
  }
  const __m512 k = _mm512_set1_ps(scale);
  const auto lanes = static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 12
  for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(out + m * out_stride, lanes, _mm512_mul_ps(acc[m], k));
}

// M rows' 32 outputs from value i on: sums over every entry of the row's probability pair
// (pairs, pair_stride apart per row) times the two entries' values, rounded to bf16 into out
// (D apart per row).
template <int M>
REFDEC_AVX512_BF16_TARGET void values_tile(const CacheView& c, std::int64_t h, std::int64_t i, const std::int32_t* pairs,
                                           std::int64_t pair_stride, std::uint16_t* out) {
  __m512 lo[static_cast<std::size_t>(M)], hi[static_cast<std::size_t>(M)];
#pragma GCC unroll 12
  for (int m = 0; m < M; ++m) lo[m] = hi[m] = _mm512_setzero_ps();
  avx2::detail::EntryRows rows(c, 0);
  for (std::int64_t s = 0; s < c.length; s += 2) {
    const __m512i a = _mm512_loadu_si512(c.data + rows.row * c.row_stride + h * c.head_stride + i);
    __m512i b = _mm512_setzero_si512();
    if (s + 1 < c.length) b = _mm512_loadu_si512(c.data + rows.next(s + 1) * c.row_stride + h * c.head_stride + i);
    if (s + 2 < c.length) rows.next(s + 2);
    // Per 128-bit lane L: lo holds values 8L..8L+3 of both entries, hi 8L+4..8L+7.
    constexpr __mmask32 kAll = 0xFFFFFFFF;
    const auto l = reinterpret_cast<__m512bh>(_mm512_maskz_unpacklo_epi16(kAll, a, b));
    const auto u = reinterpret_cast<__m512bh>(_mm512_maskz_unpackhi_epi16(kAll, a, b));
#pragma GCC unroll 12
    for (int m = 0; m < M; ++m) {
      const auto p = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pairs[m * pair_stride + s / 2]));
      lo[m] = _mm512_dpbf16_ps(lo[m], l, p);
      hi[m] = _mm512_dpbf16_ps(hi[m], u, p);
    }
  }
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
#pragma GCC unroll 12
  for (int m = 0; m < M; ++m) {
    const __m512 a = _mm512_permutex2var_ps(lo[m], first, hi[m]), b = _mm512_permutex2var_ps(lo[m], second, hi[m]);
    _mm512_storeu_si512(out + m * c.head_dim + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a)));
  }
}

template <int... M>
constexpr auto scores_tiles(std::integer_sequence<int, M...>) {
  return std::array{&scores_tile<M + 1>...};
}
template <int... M>
constexpr auto values_tiles(std::integer_sequence<int, M...>) {
  return std::array{&values_tile<M + 1>...};
}

using avx2::detail::for_each_tile;

REFDEC_AVX512_BF16_TARGET inline void scores(const std::uint16_t* q, std::int64_t rows, const CacheView& keys, float scale, float* out,
                                             std::int64_t first_head, std::int64_t last_head) {
  static constexpr auto kTiles = scores_tiles(std::make_integer_sequence<int, kTileRows>{});
  const std::int64_t d = keys.head_dim, len = keys.length;
  alignas(64) std::int32_t kt[128 * kBlockEntries];
  for (std::int64_t h = first_head; h < last_head; ++h)
    for (std::int64_t s = 0; s < len; s += kBlockEntries) {
      const std::int64_t n = std::min(kBlockEntries, len - s);
      transpose_keys(keys, h, s, n, kt);
      for_each_tile(rows, kTileRows, [&](std::int64_t r, std::int64_t m) {
        kTiles[static_cast<std::size_t>(m - 1)](kt, d, q + (h * rows + r) * d, scale, out + (h * rows + r) * len + s, len, n);
      });
    }
}

// Each row's probabilities as bf16 pairs (a last odd entry paired with 0): pairs[r * (len + 1) / 2 + j]
// holds entries 2j and 2j + 1 of row r.
REFDEC_AVX512_BF16_TARGET inline void probability_pairs(const float* p, std::int64_t rows, std::int64_t len, std::int32_t* pairs) {
  const std::int64_t width = (len + 1) / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = p + r * len;
    auto* to = reinterpret_cast<std::uint16_t*>(pairs + r * width);
    std::int64_t s = 0;
    for (; s + 32 <= len; s += 32)
      _mm512_storeu_si512(to + s, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + s + 16), _mm512_loadu_ps(row + s))));
    for (; s < len; ++s) to[s] = bf16::from_float(row[s]);
    if (len % 2 != 0) to[len] = 0;
  }
}

REFDEC_AVX512_BF16_TARGET inline void values(const float* p, std::int64_t rows, const CacheView& vals, std::uint16_t* out,
                                             std::int64_t first_head, std::int64_t last_head) {
  static constexpr auto kTiles = values_tiles(std::make_integer_sequence<int, kTileRows>{});
  const std::int64_t d = vals.head_dim, len = vals.length, width = (len + 1) / 2;
  if (len == 0) {  // no entries: every sum is 0
    std::fill(out + first_head * rows * d, out + last_head * rows * d, std::uint16_t{0});
    return;
  }
  std::vector<std::int32_t> pairs(static_cast<std::size_t>(rows * width));
  for (std::int64_t h = first_head; h < last_head; ++h) {
    probability_pairs(p + h * rows * len, rows, len, pairs.data());
    for_each_tile(rows, kTileRows, [&](std::int64_t r, std::int64_t m) {
      for (std::int64_t i = 0; i < d; i += 32)
        kTiles[static_cast<std::size_t>(m - 1)](vals, h, i, pairs.data() + r * width, width, out + (h * rows + r) * d);
    });
  }
}

inline void check_input(const CacheView& c, std::int64_t rows, std::int64_t first_head, std::int64_t last_head) {
  REFDEC_CHECK(runs(c.head_dim), "avx512-bf16 attention: needs a CPU with AVX512_BF16 (this one has "
                                     << cpu_isa().describe() << ") and a head size that is a multiple of 32 up to 256, got " << c.head_dim);
  REFDEC_CHECK(c.data != nullptr && c.length >= 0 && rows >= 0,
               "avx512-bf16 attention: bad cache of length " << c.length << ", rows " << rows);
  REFDEC_CHECK(c.blocks == nullptr || c.block_size > 0,
               "avx512-bf16 attention: a block table needs a positive block size, got " << c.block_size);
  REFDEC_CHECK(0 <= first_head && first_head <= last_head,
               "avx512-bf16 attention: bad head range [" << first_head << ", " << last_head << ")");
}

}  // namespace detail
#endif

/// scores[h][r][s] = scale * q[h][r] . keys[s][h] for kv heads [first_head, last_head): q
/// [KV, rows, D] bf16, keys bf16, scores [KV, rows, S] float32. Throws ArgumentError unless
/// runs(keys.head_dim).
inline void attention_scores(const std::uint16_t* q, std::int64_t rows, const CacheView& keys, float scale, float* scores,
                             std::int64_t first_head, std::int64_t last_head) {
  REFDEC_CHECK(REFDEC_X86, "avx512-bf16 attention: not an x86 CPU");
#if REFDEC_X86
  detail::check_input(keys, rows, first_head, last_head);
  detail::scores(q, rows, keys, scale, scores, first_head, last_head);
#endif
}

/// out[h][r] = sum_s probabilities[h][r][s] values[s][h] for kv heads [first_head, last_head):
/// probabilities [KV, rows, S] float32 (each rounded to bf16 before it multiplies), values bf16,
/// out [KV, rows, D] bf16 (rounded once). Throws as attention_scores() does.
inline void attention_values(const float* probabilities, std::int64_t rows, const CacheView& values, std::uint16_t* out,
                             std::int64_t first_head, std::int64_t last_head) {
  REFDEC_CHECK(REFDEC_X86, "avx512-bf16 attention: not an x86 CPU");
#if REFDEC_X86
  detail::check_input(values, rows, first_head, last_head);
  detail::values(probabilities, rows, values, out, first_head, last_head);
#endif
}

}  // namespace avx512bf16

REFDEC_NAMESPACE_END
