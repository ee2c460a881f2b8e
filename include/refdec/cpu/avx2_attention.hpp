// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Attention's two products over a sequence's cached keys and values in bf16 or fp16, read in
// place through their strides, on any x86-64 CPU with AVX2, FMA and F16C: the packed model's
// attention where oneDNN runs no bf16 products (attention_products.hpp is the AVX-512 path).
// Widening the cache to float32 for libtorch's products instead allocates and writes a copy of
// it per layer, and OpenBLAS's own threads then contend with the OpenMP team of the linear layers
// on a 2-core machine, stalling every step.
//
// Keys are widened eight rows at a time into a float block that every query row then reads;
// values sixteen rows at a time, each query row accumulating into a float row of its own. The
// caller splits the kv heads over threads. Plain C++20 and intrinsics under a target attribute:
// nothing here runs unless StreamLinear::cpu_runs().

#include <algorithm>
#include <cstdint>
#include <limits>
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

// `n` (<= 16) cache entries of head h from entry s on, widened into rows of D floats (the rest 0).
template <HalfFormat F>
REFDEC_AVX2_TARGET inline void widen_entries(const CacheView& c, std::int64_t h, std::int64_t s, std::int64_t n, std::int64_t block,
                                             float* to) {
  const std::int64_t d = c.head_dim;
  // Rows follow one another within a block: one division per call, not per entry.
  std::int64_t row = c.row(s), left_in_block = c.blocks == nullptr ? n : c.block_size - s % c.block_size;
  for (std::int64_t j = 0; j < n; ++j, ++row, --left_in_block) {
    if (left_in_block == 0) row = c.row(s + j), left_in_block = c.block_size;
    const std::uint16_t* from = c.data + row * c.row_stride + h * c.head_stride;
    float* to_row = to + j * d;
    for (std::int64_t i = 0; i < d; i += 8) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
      if constexpr (F == HalfFormat::kBf16)
        _mm256_storeu_ps(to_row + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)));
      else
        _mm256_storeu_ps(to_row + i, _mm256_cvtph_ps(v));
    }
  }
  std::fill(to + n * d, to + block * d, 0.0f);
}

// The eight sums of a[0..7], as one vector.
REFDEC_AVX2_TARGET inline __m256 sum8(const __m256* a) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

template <HalfFormat F>
REFDEC_AVX2_TARGET inline void scores(const float* q, std::int64_t rows, const CacheView& keys, float scale, float* out,
                                      std::int64_t first_head, std::int64_t last_head) {
  const std::int64_t d = keys.head_dim, len = keys.length;
  std::vector<float> block(static_cast<std::size_t>(8 * d));
  alignas(32) float eight[8];
  for (std::int64_t h = first_head; h < last_head; ++h)
    for (std::int64_t s = 0; s < len; s += 8) {
      const std::int64_t n = std::min<std::int64_t>(8, len - s);
      widen_entries<F>(keys, h, s, n, 8, block.data());
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* qr = q + (h * rows + r) * d;
        __m256 acc[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
        for (std::int64_t i = 0; i < d; i += 8) {
          const __m256 qv = _mm256_loadu_ps(qr + i);
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(block.data() + j * d + i), acc[j]);
        }
        _mm256_store_ps(eight, _mm256_mul_ps(sum8(acc), _mm256_set1_ps(scale)));
        std::copy(eight, eight + n, out + (h * rows + r) * len + s);
      }
    }
}

// sums[0 .. 8V) += sum_j p[j] block[j * d + (0 .. 8V)] for j < n: V independent accumulators, so
// that the additions over j do not wait on one another's latency.
template <int V>
REFDEC_AVX2_TARGET inline void accumulate(const float* p, std::int64_t n, const float* block, std::int64_t d, float* sums) {
  __m256 acc[static_cast<std::size_t>(V)];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) acc[v] = _mm256_loadu_ps(sums + 8 * v);
  for (std::int64_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(block + j * d + 8 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(sums + 8 * v, acc[v]);
}

template <HalfFormat F>
REFDEC_AVX2_TARGET inline void values(const float* p, std::int64_t rows, const CacheView& vals, std::uint16_t* out, std::int64_t first_head,
                                      std::int64_t last_head) {
  constexpr std::int64_t kBlock = 16;
  const std::int64_t d = vals.head_dim, len = vals.length;
  std::vector<float> block(static_cast<std::size_t>(kBlock * d)), sums(static_cast<std::size_t>(rows * d));
  for (std::int64_t h = first_head; h < last_head; ++h) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (std::int64_t s = 0; s < len; s += kBlock) {
      const std::int64_t n = std::min(kBlock, len - s);
      widen_entries<F>(vals, h, s, n, n, block.data());
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* pr = p + (h * rows + r) * len + s;
        float* sr = sums.data() + r * d;
        std::int64_t i = 0;
        for (; i + 64 <= d; i += 64) accumulate<8>(pr, n, block.data() + i, d, sr + i);
        for (; i < d; i += 8) accumulate<1>(pr, n, block.data() + i, d, sr + i);
      }
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
