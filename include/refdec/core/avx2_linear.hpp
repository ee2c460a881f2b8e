// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// y = x W^T for bf16 or fp16 weights on any x86-64 CPU with AVX2, FMA and F16C, for the row
// counts of a decoding or verification step (1 to a few dozen). A step at batch 1 is a stream
// over every weight, so the weights stay 2 bytes each in memory and become float32 in registers
// as they stream: bf16 by a shift or a mask, fp16 by F16C. oneDNN 2.6 (Debian's) has no bf16
// matmul below AVX-512, which is where this kernel serves (docs/speed.md has both machines' figures).
//
// Layout: the output columns in blocks of 16; a block holds, for each pair of input positions
// (k, k+1), 64 bytes: columns 0-7 then 8-15 at k and k+1 (bf16: each column's two values side by
// side, so that one 32-bit lane holds both and a shift or a mask yields either; fp16: eight
// values at k, then eight at k+1). A block streams contiguously and blocks follow one another,
// so threads that take runs of blocks each read one contiguous range. Rows are computed four at a
// time from float32 copies of x, each block's weights read once per four rows (from the cache
// after the first). Plain C++20 and intrinsics in functions compiled for AVX2 by attribute: the
// header builds without -mavx2, and nothing here runs unless cpu_isa().runs_avx2().

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "refdec/core/bf16_kernels.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/cpu_isa.hpp"

#if REFDEC_X86
#include <immintrin.h>
#define REFDEC_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#else
#define REFDEC_AVX2_TARGET
#endif

REFDEC_NAMESPACE_BEGIN

/// What a packed linear layer does with x W^T as it writes its output (no pass of its own over
/// the result).
enum class Epilogue {
  kStore,       ///< out = x W^T
  kAccumulate,  ///< out += x W^T: a residual connection
  kSilu,        ///< out = silu(x W^T): SwiGLU's gate
  kMultiply,    ///< out = (x W^T) * other: SwiGLU's up projection times the gate
};

/// A linear layer's weight packed for the AVX2 kernel, and the kernel. Immutable after
/// construction: run() and run_blocks() may be called from several threads at once.
class Avx2Linear {
 public:
  /// Output columns per block: the unit run_blocks() splits over threads.
  static constexpr std::int64_t kBlockColumns = 16;

  /// Whether this CPU runs the kernel (cpu_isa(): AVX2, FMA and F16C, and not capped below them).
  static bool cpu_runs() { return cpu_isa().runs_avx2(); }

  /// Packs `weight`: [out, in] row-major values of `format` (as torch.nn.Linear holds them).
  /// Throws ArgumentError for non-positive sizes or a null pointer.
  Avx2Linear(const std::uint16_t* weight, std::int64_t out, std::int64_t in, HalfFormat format) : out_(out), in_(in), format_(format) {
    REFDEC_CHECK(out > 0 && in > 0 && weight != nullptr, "Avx2Linear: needs a weight of positive sizes, got [" << out << ", " << in << "]");
    const std::int64_t pairs = padded_in() / 2;
    const std::size_t size = static_cast<std::size_t>(blocks() * pairs * 2 * kBlockColumns);
    packed_.reset(static_cast<std::uint16_t*>(std::aligned_alloc(64, (size * sizeof(std::uint16_t) + 63) / 64 * 64)));
    REFDEC_CHECK(packed_ != nullptr, "Avx2Linear: cannot allocate " << size * 2 << " bytes");
    std::memset(packed_.get(), 0, size * sizeof(std::uint16_t));  // padding columns and positions stay 0
    for (std::int64_t col = 0; col < out; ++col)
      for (std::int64_t k = 0; k < in; ++k) packed_[static_cast<std::size_t>(offset(col, k))] = weight[col * in + k];
  }

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  HalfFormat format() const { return format_; }
  /// Input positions as the kernel reads them: in_features() rounded up to even.
  std::int64_t padded_in() const { return (in_ + 1) / 2 * 2; }
  /// Blocks of kBlockColumns output columns.
  std::int64_t blocks() const { return (out_ + kBlockColumns - 1) / kBlockColumns; }
  /// Bytes of the packed weight (what one step streams).
  std::int64_t bytes() const { return blocks() * padded_in() * kBlockColumns * 2; }

  /// x ([rows, in_features()] values of format()) as float32 rows of padded_in() values (the
  /// padding 0), as run_blocks() reads them: `xf` holds rows * padded_in() floats.
  void to_float(const std::uint16_t* x, std::int64_t rows, float* xf) const {
    const std::int64_t width = padded_in();
    for (std::int64_t r = 0; r < rows; ++r) {
      convert_row(x + r * in_, xf + r * width, in_, format_);
      if (width != in_) xf[r * width + in_] = 0.0f;
    }
  }

  /// Output columns of blocks [first_block, last_block) of out = epilogue(xf W^T): xf as
  /// to_float() writes it; `out` [rows, out_features()] row-major, float32 (`out_f32`) or
  /// format(); `other` (Epilogue::kMultiply only) [rows, out_features()] of format(). Each output
  /// value is rounded once, after the epilogue. Requires cpu_runs().
  void run_blocks(const float* xf, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue, const std::uint16_t* other,
                  std::int64_t first_block, std::int64_t last_block) const {
    REFDEC_CHECK(cpu_runs(), "Avx2Linear: this CPU does not run AVX2 with FMA and F16C (it has " << cpu_isa().describe() << ")");
    REFDEC_CHECK(0 <= first_block && first_block <= last_block && last_block <= blocks(),
                 "Avx2Linear: blocks [" << first_block << ", " << last_block << ") outside [0, " << blocks() << ")");
    REFDEC_CHECK((epilogue == Epilogue::kMultiply) == (other != nullptr),
                 "Avx2Linear: Epilogue::kMultiply needs the values to multiply by, and only it takes them");
#if REFDEC_X86
    if (format_ == HalfFormat::kBf16)
      run_tiles<HalfFormat::kBf16>(xf, rows, out, out_f32, epilogue, other, first_block, last_block);
    else
      run_tiles<HalfFormat::kFp16>(xf, rows, out, out_f32, epilogue, other, first_block, last_block);
#endif
  }

  /// Column blocks run_taking() takes at a time: runs of 64 columns (64-180 KB of a TinyLlama-1.1B
  /// weight, streamed contiguously). On a shared 2-core AMD EPYC whose bandwidth moves from minute
  /// to minute, each thread taking half of the blocks up front left one waiting for the other at
  /// every layer's end; runs taken as threads finish keep both streaming.
  static constexpr std::int64_t kBlocksPerTake = 4;

  /// One thread's share of a product that several threads run at once: runs of kBlocksPerTake
  /// blocks taken from `next` (shared by those threads, 0 before the first takes) until none is
  /// left, each run as run_blocks() runs it.
  void run_taking(const float* xf, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue, const std::uint16_t* other,
                  std::atomic<std::int64_t>& next) const {
    for (std::int64_t first; (first = next.fetch_add(kBlocksPerTake, std::memory_order_relaxed)) < blocks();)
      run_blocks(xf, rows, out, out_f32, epilogue, other, first, std::min(blocks(), first + kBlocksPerTake));
  }

  /// The whole product on the calling thread: x [rows, in_features()] of format(), the rest as
  /// run_blocks() takes it.
  void run(const std::uint16_t* x, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue = Epilogue::kStore,
           const std::uint16_t* other = nullptr) const {
    std::unique_ptr<float[]> xf(new float[static_cast<std::size_t>(rows * padded_in())]);
    to_float(x, rows, xf.get());
    run_blocks(xf.get(), rows, out, out_f32, epilogue, other, 0, blocks());
  }

  /// One value of `format` as float32 (exact), and a float32 rounded to `format` (to nearest even).
  static float to_float(std::uint16_t bits, HalfFormat format) {
    return format == HalfFormat::kBf16 ? bf16::to_float(bits) : fp16::to_float(bits);
  }
  static std::uint16_t from_float(float v, HalfFormat format) {
    return format == HalfFormat::kBf16 ? bf16::from_float(v) : fp16::from_float(v);
  }

 private:
  // Where weight (col, k) lives in the packed layout (see the header comment).
  std::int64_t offset(std::int64_t col, std::int64_t k) const {
    const std::int64_t block = col / kBlockColumns, c = col % kBlockColumns, side = c / 8, lane = c % 8, pair = k / 2, parity = k % 2;
    const std::int64_t in_chunk = format_ == HalfFormat::kBf16 ? lane * 2 + parity : parity * 8 + lane;
    return ((block * (padded_in() / 2) + pair) * 2 + side) * 16 + in_chunk;
  }

  static void convert_row(const std::uint16_t* x, float* out, std::int64_t n, HalfFormat format) {
#if REFDEC_X86
    if (format == HalfFormat::kFp16 && cpu_runs()) return fp16_row_f16c(x, out, n);
#endif
    for (std::int64_t i = 0; i < n; ++i) out[i] = to_float(x[i], format);
  }

#if REFDEC_X86
  REFDEC_AVX2_TARGET static void fp16_row_f16c(const std::uint16_t* x, float* out, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
    for (; i < n; ++i) out[i] = _cvtsh_ss(x[i]);
  }

  // The 64 bytes of one input pair: columns 0-7 and 8-15 at k (even) and k+1 (odd).
  template <HalfFormat F>
  REFDEC_AVX2_TARGET static void decode(const std::uint16_t* p, __m256& a_even, __m256& a_odd, __m256& b_even, __m256& b_odd) {
    if constexpr (F == HalfFormat::kBf16) {
      const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 16));
      a_even = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
      a_odd = _mm256_castsi256_ps(_mm256_and_si256(a, high));
      b_even = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
      b_odd = _mm256_castsi256_ps(_mm256_and_si256(b, high));
    } else {
      a_even = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
      a_odd = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 8)));
      b_even = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 16)));
      b_odd = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 24)));
    }
  }

  // M rows (1 to 4) times one block: sums[m][c] = sum_k x[m][k] W[c][k]. Up to two rows keep the
  // even and odd positions in accumulators of their own, so that a lone row has four independent
  // chains of additions (a row's stream is otherwise bound by the addition's latency, not by the
  // memory); four rows have eight chains without the split.
  // How far ahead of the pair being read the weights are prefetched: with the hardware
  // prefetcher alone a lone row streamed at about 85% of a plain read on a 2-core AMD EPYC (Zen
  // 3); 1 KB ahead reached 91-95% there, 512 B and 1.5-2 KB a little less, 4-8 KB no better than
  // none (a copy of this loop at each distance, alternated with a read; refdec-avx2-stream
  // measures the kernel as built). Prefetching past a block reads the next one, as streamed.
  static constexpr std::int64_t kPrefetchBytes = 1024;

  template <HalfFormat F, int M>
  REFDEC_AVX2_TARGET static void tile(const std::uint16_t* block, std::int64_t pairs, const float* x, std::int64_t width,
                                      float (*sums)[kBlockColumns]) {
    constexpr int kSplit = M <= 2 ? 2 : 1;
    // The loops over rows are unrolled so that the accumulators live in registers.
    __m256 acc[static_cast<std::size_t>(M)][2][static_cast<std::size_t>(kSplit)];
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
        for (int s = 0; s < kSplit; ++s) acc[m][h][s] = _mm256_setzero_ps();
    for (std::int64_t p = 0; p < pairs; ++p) {
      __m256 ae, ao, be, bo;
      _mm_prefetch(reinterpret_cast<const char*>(block + p * 32) + kPrefetchBytes, _MM_HINT_T0);
      decode<F>(block + p * 32, ae, ao, be, bo);
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) {
        const __m256 xe = _mm256_broadcast_ss(x + m * width + 2 * p), xo = _mm256_broadcast_ss(x + m * width + 2 * p + 1);
        acc[m][0][0] = _mm256_fmadd_ps(ae, xe, acc[m][0][0]);
        acc[m][0][kSplit - 1] = _mm256_fmadd_ps(ao, xo, acc[m][0][kSplit - 1]);
        acc[m][1][0] = _mm256_fmadd_ps(be, xe, acc[m][1][0]);
        acc[m][1][kSplit - 1] = _mm256_fmadd_ps(bo, xo, acc[m][1][kSplit - 1]);
      }
    }
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(sums[m] + 8 * h, kSplit == 2 ? _mm256_add_ps(acc[m][h][0], acc[m][h][kSplit - 1]) : acc[m][h][0]);
  }

  template <HalfFormat F>
  REFDEC_AVX2_TARGET void run_tiles(const float* xf, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue,
                                    const std::uint16_t* other, std::int64_t first_block, std::int64_t last_block) const {
    const std::int64_t pairs = padded_in() / 2, width = padded_in();
    alignas(32) float sums[4][kBlockColumns];
    for (std::int64_t b = first_block; b < last_block; ++b) {
      const std::uint16_t* block = packed_.get() + b * pairs * 32;
      const std::int64_t col0 = b * kBlockColumns, cols = std::min(kBlockColumns, out_ - col0);
      for (std::int64_t r = 0; r < rows; r += 4) {
        const std::int64_t m = std::min<std::int64_t>(4, rows - r);
        const float* x = xf + r * width;
        switch (m) {
          case 1: tile<F, 1>(block, pairs, x, width, sums); break;
          case 2: tile<F, 2>(block, pairs, x, width, sums); break;
          case 3: tile<F, 3>(block, pairs, x, width, sums); break;
          default: tile<F, 4>(block, pairs, x, width, sums); break;
        }
        for (std::int64_t i = 0; i < m; ++i) finish<F>(sums[i], cols, (r + i) * out_ + col0, out, out_f32, epilogue, other);
      }
    }
  }

  // Applies the epilogue to `cols` sums and writes them at `at` (an index into out and other).
  template <HalfFormat F>
  REFDEC_AVX2_TARGET static void finish(const float* sums, std::int64_t cols, std::int64_t at, void* out, bool out_f32, Epilogue epilogue,
                                        const std::uint16_t* other) {
    auto* f32 = static_cast<float*>(out) + at;
    auto* h16 = static_cast<std::uint16_t*>(out) + at;
    for (std::int64_t c = 0; c < cols; ++c) {
      float v = sums[c];
      switch (epilogue) {
        case Epilogue::kStore: break;
        case Epilogue::kAccumulate: v += out_f32 ? f32[c] : half::to_float<F>(h16[c]); break;
        case Epilogue::kSilu: v = v / (1.0f + std::exp(-v)); break;
        case Epilogue::kMultiply: v *= half::to_float<F>(other[at + c]); break;
      }
      if (out_f32)
        f32[c] = v;
      else
        h16[c] = half::from_float<F>(v);
    }
  }
#endif

  struct Free {
    void operator()(std::uint16_t* p) const { std::free(p); }
  };
  std::int64_t out_ = 0, in_ = 0;
  HalfFormat format_ = HalfFormat::kBf16;
  std::unique_ptr<std::uint16_t[], Free> packed_;  // [blocks, padded_in / 2, 2 halves, 16]: see the header comment
};

REFDEC_NAMESPACE_END
