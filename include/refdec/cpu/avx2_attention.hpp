// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Attention's two products over a sequence's cached keys and values in bf16 or fp16, read in
// place through their strides, on any x86-64 CPU with AVX2, FMA and F16C: the packed model's
// attention where oneDNN runs no bf16 products (attention_products.hpp is the AVX-512 path).
// Widening the cache to float32 for libtorch's products instead allocates and writes a copy of
// it per layer, and OpenBLAS's own threads then contend with the OpenMP team of the linear layers
// on a 2-core machine, stalling every step.
//
// Keys and values are widened sixteen entries at a time into float blocks that tiles of query
// rows then read (detail::kTileRows). The caller splits the kv heads over threads. Plain C++20
// and intrinsics under a target attribute: nothing here runs unless StreamLinear::cpu_runs().

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/cpu/bf16_kernels.hpp"
#include "refdec/cpu/stream_linear.hpp"

REFDEC_NAMESPACE_BEGIN

/// Where a cache's entries lie: entry s of kv head h starts at row(s) * row_stride + h *
/// head_stride values from the base pointer (a [rows, KV, D] tensor's strides), each entry
/// `head_dim` values. row(s) is s, or, with a block table (a paged cache read in place, as
/// PagedAttention does), blocks[s / block_size] * block_size + s % block_size.
struct CacheView {
  const std::uint16_t* data = nullptr;
  std::int64_t length = 0;  ///< S: entries
  std::int64_t row_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t head_dim = 0;             ///< D: a multiple of 8, at most 256
  const std::int32_t* blocks = nullptr;  ///< null, or the block of every block_size entries (ceil(S / block_size) of them)
  std::int64_t block_size = 0;           ///< entries per block, positive with a block table

  /// The row of entry s.
  std::int64_t row(std::int64_t s) const {
    return blocks == nullptr ? s : std::int64_t{blocks[s / block_size]} * block_size + s % block_size;
  }
};

namespace avx2 {

#if REFDEC_X86
namespace detail {

// Both products run as tiles of up to kTileRows query rows times 16 lanes (two vectors) of output,
// over a block of kBlockEntries cache entries widened to float32: each value loaded once per tile
// and broadcast, each of the 12 accumulators taking one FMA per step, so that the FMA units, not
// their latency, bound the tile (8 accumulators each taking one or two dependent FMAs a step put
// the chains' latency level with the units' throughput). The scores' 16 lanes are the block's
// entries, their keys transposed into [D][16] once per block for every tile to read; the values'
// 16 lanes are 16 of a row's D outputs. (The kernel before, a row against 8 keys summed across
// lanes at the end and each row's outputs through 16 entries, kept 8 accumulators; a 16-token
// step of the 1.1B shape with this one took 0.976 of its time: docs/speed.md.)
inline constexpr int kTileRows = 6;
inline constexpr std::int64_t kBlockEntries = 16;

// The row of entry s of `c` and the entries left in its block from s on (all of them without a
// block table): one division per call, not per entry.
struct EntryRows {
  const CacheView& c;
  std::int64_t row, left;
  EntryRows(const CacheView& view, std::int64_t s)
      : c(view), row(view.row(s)), left(view.blocks == nullptr ? view.length - s : view.block_size - s % view.block_size) {}
  // The row of the next entry (s + 1, s + 2, ... in turn).
  std::int64_t next(std::int64_t s) {
    if (--left == 0 && c.blocks != nullptr) return row = c.row(s), left = c.block_size, row;
    return ++row;
  }
};

using stream_detail::widen8;

// `n` cache entries of head h from entry s on, widened into rows of D floats.
template <HalfFormat F>
REFDEC_AVX2_TARGET inline void widen_entries(const CacheView& c, std::int64_t h, std::int64_t s, std::int64_t n, float* to) {
  const std::int64_t d = c.head_dim;
  EntryRows rows(c, s);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint16_t* from = c.data + rows.row * c.row_stride + h * c.head_stride;
    for (std::int64_t i = 0; i < d; i += 8) _mm256_storeu_ps(to + j * d + i, widen8<F>(from + i));
    if (j + 1 < n) rows.next(s + j + 1);
  }
}

// `n` (<= kBlockEntries) entries as widen_entries() reads them, transposed: to[i * kBlockEntries +
// j] = entry j's value i (0 for j >= n), eight entries by eight values at a time in registers.
template <HalfFormat F>
REFDEC_AVX2_TARGET inline void widen_entries_transposed(const CacheView& c, std::int64_t h, std::int64_t s, std::int64_t n, float* to) {
  const std::int64_t d = c.head_dim;
  const std::uint16_t* from[kBlockEntries] = {};
  EntryRows rows(c, s);
  for (std::int64_t j = 0; j < n; ++j) {
    from[j] = c.data + rows.row * c.row_stride + h * c.head_stride;
    if (j + 1 < n) rows.next(s + j + 1);
  }
  for (std::int64_t j0 = 0; j0 < kBlockEntries; j0 += 8)
    for (std::int64_t i = 0; i < d; i += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) r[j] = from[j0 + j] != nullptr ? widen8<F>(from[j0 + j] + i) : _mm256_setzero_ps();
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* o = to + i * kBlockEntries + j0;
      _mm256_store_ps(o + 0 * kBlockEntries, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_store_ps(o + 1 * kBlockEntries, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_store_ps(o + 2 * kBlockEntries, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_store_ps(o + 3 * kBlockEntries, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_store_ps(o + 4 * kBlockEntries, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_store_ps(o + 5 * kBlockEntries, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_store_ps(o + 6 * kBlockEntries, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_store_ps(o + 7 * kBlockEntries, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
}

// M query rows (q, D apart) against a block's transposed keys (kt): the block's first n scores of
// each row, times scale, into out (out_stride apart).
template <int M>
REFDEC_AVX2_TARGET void scores_tile(const float* kt, std::int64_t d, const float* q, float scale, float* out, std::int64_t out_stride,
                                    std::int64_t n) {
  __m256 acc[static_cast<std::size_t>(M)][2];
#pragma GCC unroll 6
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < d; ++i) {
    const __m256 a = _mm256_load_ps(kt + i * kBlockEntries), b = _mm256_load_ps(kt + i * kBlockEntries + 8);
#pragma GCC unroll 6
    for (int m = 0; m < M; ++m) {
      const __m256 x = _mm256_broadcast_ss(q + m * d + i);
      acc[m][0] = _mm256_fmadd_ps(a, x, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(b, x, acc[m][1]);
    }
  }
  const __m256 k = _mm256_set1_ps(scale);
  alignas(32) float part[kBlockEntries];
#pragma GCC unroll 6
  for (int m = 0; m < M; ++m) {
    float* o = out + m * out_stride;
    if (n == kBlockEntries) {
      _mm256_storeu_ps(o, _mm256_mul_ps(acc[m][0], k));
      _mm256_storeu_ps(o + 8, _mm256_mul_ps(acc[m][1], k));
    } else {
      _mm256_store_ps(part, _mm256_mul_ps(acc[m][0], k));
      _mm256_store_ps(part + 8, _mm256_mul_ps(acc[m][1], k));
      std::copy(part, part + n, o);
    }
  }
}

// M rows' sums (D apart) of 8 V outputs from i on, plus the block's n entries (widened, D apart)
// weighted by the rows' probabilities (p, p_stride apart).
template <int M, int V>
REFDEC_AVX2_TARGET void values_tile(const float* block, std::int64_t n, std::int64_t d, const float* p, std::int64_t p_stride,
                                    float* sums) {
  __m256 acc[static_cast<std::size_t>(M)][static_cast<std::size_t>(V)];
#pragma GCC unroll 6
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[m][v] = _mm256_loadu_ps(sums + m * d + 8 * v);
  for (std::int64_t j = 0; j < n; ++j) {
    __m256 w[static_cast<std::size_t>(V)];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) w[v] = _mm256_loadu_ps(block + j * d + 8 * v);
#pragma GCC unroll 6
    for (int m = 0; m < M; ++m) {
      const __m256 x = _mm256_broadcast_ss(p + m * p_stride + j);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[m][v] = _mm256_fmadd_ps(w[v], x, acc[m][v]);
    }
  }
#pragma GCC unroll 6
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(sums + m * d + 8 * v, acc[m][v]);
}

using ScoresTile = void (*)(const float*, std::int64_t, const float*, float, float*, std::int64_t, std::int64_t);
using ValuesTile = void (*)(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, float*);
template <int... M>
constexpr std::array<ScoresTile, sizeof...(M)> scores_tiles(std::integer_sequence<int, M...>) {
  return {&scores_tile<M + 1>...};
}
template <int V, int... M>
constexpr std::array<ValuesTile, sizeof...(M)> values_tiles(std::integer_sequence<int, M...>) {
  return {&values_tile<M + 1, V>...};
}

// `rows` rows in tiles of at most `most` (kTileRows here), sized alike (13 rows in tiles of at
// most 6: 5, 4 and 4, not 6, 6 and 1): calls each(first row, rows in the tile).
template <typename Each>
inline void for_each_tile(std::int64_t rows, std::int64_t most, Each each) {
  const std::int64_t tiles = (rows + most - 1) / most;
  for (std::int64_t t = 0, r = 0; t < tiles; ++t) {
    const std::int64_t m = (rows - r) / (tiles - t) + ((rows - r) % (tiles - t) != 0);
    each(r, m);
    r += m;
  }
}

// (Widening 256 entries at a time, so that each tile's rows stay in L1 while the entries stream
// from L2, ran no faster on a 2-core Zen 5 EPYC.)
template <HalfFormat F>
REFDEC_AVX2_TARGET inline void scores(const float* q, std::int64_t rows, const CacheView& keys, float scale, float* out,
                                      std::int64_t first_head, std::int64_t last_head) {
  static constexpr auto kTiles = scores_tiles(std::make_integer_sequence<int, kTileRows>{});
  const std::int64_t d = keys.head_dim, len = keys.length;
  alignas(32) float kt[256 * kBlockEntries];
  for (std::int64_t h = first_head; h < last_head; ++h)
    for (std::int64_t s = 0; s < len; s += kBlockEntries) {
      const std::int64_t n = std::min(kBlockEntries, len - s);
      widen_entries_transposed<F>(keys, h, s, n, kt);
      for_each_tile(rows, kTileRows, [&](std::int64_t r, std::int64_t m) {
        kTiles[static_cast<std::size_t>(m - 1)](kt, d, q + (h * rows + r) * d, scale, out + (h * rows + r) * len + s, len, n);
      });
    }
}

template <HalfFormat F>
REFDEC_AVX2_TARGET inline void values(const float* p, std::int64_t rows, const CacheView& vals, std::uint16_t* out, std::int64_t first_head,
                                      std::int64_t last_head) {
  static constexpr auto kTwo = values_tiles<2>(std::make_integer_sequence<int, kTileRows>{});
  static constexpr auto kOne = values_tiles<1>(std::make_integer_sequence<int, kTileRows>{});
  const std::int64_t d = vals.head_dim, len = vals.length;
  alignas(32) float block[256 * kBlockEntries];
  std::vector<float> sums(static_cast<std::size_t>(rows * d));
  for (std::int64_t h = first_head; h < last_head; ++h) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (std::int64_t s = 0; s < len; s += kBlockEntries) {
      const std::int64_t n = std::min(kBlockEntries, len - s);
      widen_entries<F>(vals, h, s, n, block);
      for_each_tile(rows, kTileRows, [&](std::int64_t r, std::int64_t m) {
        const float* pr = p + (h * rows + r) * len + s;
        float* sr = sums.data() + r * d;
        std::int64_t i = 0;
        for (; i + 16 <= d; i += 16) kTwo[static_cast<std::size_t>(m - 1)](block + i, n, d, pr, len, sr + i);
        if (i < d) kOne[static_cast<std::size_t>(m - 1)](block + i, n, d, pr, len, sr + i);
      });
    }
    for (std::int64_t i = 0; i < rows * d; ++i) out[h * rows * d + i] = half::from_float<F>(sums[static_cast<std::size_t>(i)]);
  }
}

// e^x for eight floats, within 2 ulp of the true value for x in [-87.3, 88.7]; 0 below
// (probabilities that underflow, masked entries at -inf), +inf above. Range reduction x = n ln2 + r
// with |r| <= ln2 / 2 (ln2 split in two for exactness), then e^r by its Taylor polynomial to r^6.
REFDEC_AVX2_TARGET inline __m256 exp8(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  for (const float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(scale)));
}

REFDEC_AVX2_TARGET inline void softmax_rows(float* x, std::int64_t rows, std::int64_t len) {
  alignas(32) float lanes[8];
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * len;
    __m256 tops = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    std::int64_t i = 0;
    for (; i + 8 <= len; i += 8) tops = _mm256_max_ps(tops, _mm256_loadu_ps(row + i));
    _mm256_store_ps(lanes, tops);
    float top = *std::max_element(lanes, lanes + 8);
    for (; i < len; ++i) top = std::max(top, row[i]);
    if (top == -std::numeric_limits<float>::infinity()) top = 0.0f;  // every entry masked: all 0 below, as 0 / 0 is avoided
    const __m256 shift = _mm256_set1_ps(top);
    __m256 total = _mm256_setzero_ps();
    for (i = 0; i + 8 <= len; i += 8) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + i), shift));
      _mm256_storeu_ps(row + i, e);
      total = _mm256_add_ps(total, e);
    }
    _mm256_store_ps(lanes, total);
    float sum = 0.0f;
    for (const float l : lanes) sum += l;
    for (; i < len; ++i) {  // the tail through the same exp, one lane used
      _mm256_store_ps(lanes, exp8(_mm256_set1_ps(row[i] - top)));
      row[i] = lanes[0];
      sum += lanes[0];
    }
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (i = 0; i + 8 <= len; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), _mm256_set1_ps(inverse)));
    for (; i < len; ++i) row[i] *= inverse;
  }
}

inline void check_attention_input(const CacheView& c, std::int64_t rows, std::int64_t first_head, std::int64_t last_head) {
  REFDEC_CHECK(StreamLinear::cpu_runs(),
               "avx2 attention: this CPU does not run AVX2 with FMA and F16C (it has " << cpu_isa().describe() << ")");
  REFDEC_CHECK(c.data != nullptr && c.length >= 0 && rows >= 0 && c.head_dim > 0 && c.head_dim % 8 == 0 && c.head_dim <= 256,
               "avx2 attention: needs a cache of head size a multiple of 8 up to 256, got " << c.head_dim << " (length " << c.length
                                                                                            << ", rows " << rows << ")");
  REFDEC_CHECK(c.blocks == nullptr || c.block_size > 0, "avx2 attention: a block table needs a positive block size, got " << c.block_size);
  REFDEC_CHECK(0 <= first_head && first_head <= last_head, "avx2 attention: bad head range [" << first_head << ", " << last_head << ")");
}

}  // namespace detail
#endif

/// scores[h][r][s] = scale * q[h][r] . keys[s][h] for kv heads [first_head, last_head): q
/// [KV, rows, D] float32, scores [KV, rows, S] float32. Throws ArgumentError unless
/// StreamLinear::cpu_runs() and the cache's head size is a multiple of 8 up to 256.
inline void attention_scores(const float* q, std::int64_t rows, const CacheView& keys, HalfFormat format, float scale, float* scores,
                             std::int64_t first_head, std::int64_t last_head) {
  REFDEC_CHECK(REFDEC_X86, "avx2 attention: not an x86 CPU");
#if REFDEC_X86
  detail::check_attention_input(keys, rows, first_head, last_head);
  if (format == HalfFormat::kBf16)
    detail::scores<HalfFormat::kBf16>(q, rows, keys, scale, scores, first_head, last_head);
  else
    detail::scores<HalfFormat::kFp16>(q, rows, keys, scale, scores, first_head, last_head);
#endif
}

/// Each of `rows` rows of `len` floats at x replaced in place by its softmax: e^(x - max) over
/// their sum, e^ within 2 ulp, entries below max - 87.3 (and -inf) 0; a row entirely -inf becomes
/// all 0. With a `mask` ([n, n] floats, row-major; n <= len, rows a multiple of n), row r first
/// has mask row r % n added to its last n entries: a step's n rows against their own entries.
/// Throws ArgumentError unless StreamLinear::cpu_runs().
inline void softmax(float* x, std::int64_t rows, std::int64_t len, const float* mask = nullptr, std::int64_t n = 0) {
  REFDEC_CHECK(REFDEC_X86 && StreamLinear::cpu_runs(),
               "avx2 softmax: this CPU does not run AVX2 with FMA and F16C (it has " << cpu_isa().describe() << ")");
  REFDEC_CHECK(rows >= 0 && len >= 0 && (x != nullptr || rows * len == 0), "avx2 softmax: bad rows " << rows << " of length " << len);
  REFDEC_CHECK(mask == nullptr || (0 < n && n <= len && rows % n == 0),
               "avx2 softmax: a mask of " << n << " rows needs 0 < n <= " << len << " dividing the " << rows << " rows");
  for (std::int64_t r = 0; mask != nullptr && r < rows; ++r)
    for (std::int64_t c = 0; c < n; ++c) x[r * len + len - n + c] += mask[(r % n) * n + c];
#if REFDEC_X86
  detail::softmax_rows(x, rows, len);
#endif
}

/// out[h][r] = sum_s probabilities[h][r][s] values[s][h] for kv heads [first_head, last_head):
/// probabilities [KV, rows, S] float32, out [KV, rows, D] of `format` (rounded once). Throws as
/// attention_scores() does.
inline void attention_values(const float* probabilities, std::int64_t rows, const CacheView& values, HalfFormat format, std::uint16_t* out,
                             std::int64_t first_head, std::int64_t last_head) {
  REFDEC_CHECK(REFDEC_X86, "avx2 attention: not an x86 CPU");
#if REFDEC_X86
  detail::check_attention_input(values, rows, first_head, last_head);
  if (format == HalfFormat::kBf16)
    detail::values<HalfFormat::kBf16>(probabilities, rows, values, out, first_head, last_head);
  else
    detail::values<HalfFormat::kFp16>(probabilities, rows, values, out, first_head, last_head);
#endif
}

}  // namespace avx2

REFDEC_NAMESPACE_END
