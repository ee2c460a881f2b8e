// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// y = x W^T for bf16 or fp16 weights on x86-64 CPUs, for the row counts of a decoding or
// verification step (1 to a few dozen). A step at batch 1 is a stream over every weight, so the
// weights stay 2 bytes each in memory, packed once into the layout the kernels read, and the
// kernels spend as few instructions per byte as the CPU allows. Three sets of tiles read one
// packed layout, so that the set is chosen per call (per row count, by measurement:
// torch/packed_linear.hpp) without a second copy of the weights:
//  - kAvx2 (AVX2, FMA, F16C): 8 columns per instruction, weights widened to float32 in registers
//    (bf16 by a shift or a mask, fp16 by F16C), 4 rows per tile;
//  - kAvx512 (AVX-512 F/BW/VL): the same at 16 columns, up to 16 rows per tile (an Intel Xeon
//    whose vdpbf16ps runs at half its FMAs' rate multiplies many rows fastest this way);
//  - kAvx512Bf16 (AVX512_BF16, bf16 weights): vdpbf16ps multiplies each column's pair of weights
//    by the pair of inputs and adds both products in one instruction, with no widening: about two
//    instructions per 64 bytes of weights at one row, where kAvx2 spends a dozen. The inputs are
//    the rows' own bf16 values and the products exact, so the sums differ from the float32
//    tiles' only in their order. Up to 16 rows per tile, so that the 16 tokens of a speculative
//    step cost one pass over the weights with every row's products beside the stream;
//  - kAvx512Fp16 (AVX512_FP16, bf16 weights): vfmadd231ph multiplies 32 half-precision pairs per
//    instruction, twice the float32 FMA's products, where an Intel Xeon (model 207) multiplies
//    more slowly with vdpbf16ps than with float32 FMAs (16 rows of the 1.1B shape: 0.78 of a
//    plain read against 0.58 and 0.44, refdec-stream-linear). Weights and inputs are scaled by powers of two into fp16's range
//    (exact: a bf16 value has fewer significant bits than fp16), each product is exact, and the
//    sums run in fp16 for kFp16Chunk pairs, then in float32: so the sums carry fp16's rounding
//    over a few dozen additions, about the size of a bf16 input's own (see kFp16Chunk).
//
// Layout: the output columns in blocks of 16; a block holds, for each pair of input positions
// (k, k+1), 64 bytes: columns 0-7 then 8-15 at k and k+1 (bf16: each column's two values side by
// side, so that one 32-bit lane holds both, as vdpbf16ps reads them, and a shift or a mask
// yields either; fp16: eight values at k, then eight at k+1). A block streams contiguously and
// blocks follow one another, so threads that take runs of blocks each read one contiguous range.
// A tile of rows reads each block's weights once (from the cache after the first tile). Plain
// C++20 and intrinsics in functions compiled for their ISA by attribute: the header builds
// without -mavx2, and no tile runs unless cpu_isa() runs its ISA.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/cpu/bf16_kernels.hpp"
#include "refdec/cpu/cpu_isa.hpp"
#include "refdec/cpu/huge_pages.hpp"
#include "refdec/cpu/stream_share.hpp"

#if REFDEC_X86
#include <immintrin.h>
#endif

REFDEC_NAMESPACE_BEGIN

#if REFDEC_X86
namespace stream_detail {
// Eight values of format F from `from` (unaligned) widened to float32, exactly: the AVX2 tiles'
// inputs and the AVX2 attention's cache entries.
template <HalfFormat F>
REFDEC_AVX2_TARGET inline __m256 widen8(const std::uint16_t* from) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from));
  if constexpr (F == HalfFormat::kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  return _mm256_cvtph_ps(v);
}
}  // namespace stream_detail
#endif

/// What a packed linear layer does with x W^T as it writes its output (no pass of its own over
/// the result).
enum class Epilogue {
  kStore,       ///< out = x W^T
  kAccumulate,  ///< out += x W^T: a residual connection
  kSilu,        ///< out = silu(x W^T): SwiGLU's gate
  kMultiply,    ///< out = (x W^T) * other: SwiGLU's up projection times the gate
};

/// The instruction sets StreamLinear's tiles are written for, narrowest first (where two sets
/// measure alike, the later is preferred: kAvx512Bf16, whose sums are float32's, over
/// kAvx512Fp16, whose are not quite).
enum class StreamTiles {
  kAvx2,        ///< AVX2, FMA and F16C; bf16 and fp16 weights
  kAvx512,      ///< AVX-512 F, BW and VL (with AVX2, FMA and F16C); bf16 and fp16 weights
  kAvx512Fp16,  ///< the same with AVX512_FP16's half-precision FMAs; bf16 weights only
  kAvx512Bf16,  ///< the same with AVX512_BF16's dot products; bf16 weights only
};

/// Every StreamTiles value, narrowest first.
inline constexpr std::array<StreamTiles, 4> kAllStreamTiles = {StreamTiles::kAvx2, StreamTiles::kAvx512, StreamTiles::kAvx512Fp16,
                                                               StreamTiles::kAvx512Bf16};

/// The tiles' name as options and reports spell it: "avx2", "avx512", "avx512-fp16", "avx512-bf16".
inline const char* stream_tiles_name(StreamTiles tiles) {
  switch (tiles) {
    case StreamTiles::kAvx2: return "avx2";
    case StreamTiles::kAvx512: return "avx512";
    case StreamTiles::kAvx512Fp16: return "avx512-fp16";
    case StreamTiles::kAvx512Bf16: return "avx512-bf16";
  }
  return "?";
}

/// How the tiles ask for the weights ahead of their loads. Which streams fastest depends on the
/// CPU's memory system and on how long a tile spends on each byte, so a model measures these with
/// the tile sets at load (torch/linear_choice.hpp). On a 2-core Zen 4 EPYC the AVX512_BF16 tiles
/// streamed one row at 0.83 / 0.82 / 0.90 of a plain read with kAhead / kL2 / kNone and 16 rows
/// at 0.63 / 0.75 / 0.49 (refdec-stream-linear --prefetch), where on an Intel Xeon (model 207)
/// kAhead was tuned to gain 5-14% over the hardware's prefetchers alone (the distances below).
enum class StreamPrefetch {
  kAhead,  ///< into L1 1-16 KB ahead; the tiles of one or two rows, and the AVX512_FP16 ones, also twice as far into L2
  kL2,     ///< into L2 only, as far ahead as kAhead's request into L1
  kNone,   ///< no request: the hardware's prefetchers alone
};

/// Every StreamPrefetch value, kAhead (the default) first.
inline constexpr std::array<StreamPrefetch, 3> kAllStreamPrefetch = {StreamPrefetch::kAhead, StreamPrefetch::kL2, StreamPrefetch::kNone};

/// The prefetch's name as reports spell it: "ahead", "l2", "none".
inline const char* stream_prefetch_name(StreamPrefetch prefetch) {
  switch (prefetch) {
    case StreamPrefetch::kAhead: return "ahead";
    case StreamPrefetch::kL2: return "l2";
    case StreamPrefetch::kNone: return "none";
  }
  return "?";
}

/// A linear layer's weight packed for streaming, and the kernels that stream it. Immutable after
/// construction: every run function may be called from several threads at once.
class StreamLinear {
 public:
  /// Output columns per block: the unit run_blocks() splits over threads.
  static constexpr std::int64_t kBlockColumns = 16;

  /// Whether this CPU runs some tiles (cpu_isa(): AVX2, FMA and F16C at least, not capped below).
  static bool cpu_runs() { return cpu_isa().runs_avx2(); }

  /// Why `tiles` cannot run `format` weights on this CPU, or "" when they can.
  static std::string unavailable(StreamTiles tiles, HalfFormat format) {
    const CpuIsa& isa = cpu_isa();
    switch (tiles) {
      case StreamTiles::kAvx2:
        return isa.runs_avx2() ? "" : "the avx2 tiles need AVX2, FMA and F16C (this CPU runs " + isa.describe() + ")";
      case StreamTiles::kAvx512:
        return isa.runs_avx512() ? "" : "the avx512 tiles need AVX-512 F, BW and VL (this CPU runs " + isa.describe() + ")";
      case StreamTiles::kAvx512Bf16:
        if (format != HalfFormat::kBf16) return "the avx512-bf16 tiles take bf16 weights only";
        return isa.runs_avx512() && isa.avx512_bf16 ? "" : "the avx512-bf16 tiles need AVX512_BF16 (this CPU runs " + isa.describe() + ")";
      case StreamTiles::kAvx512Fp16:
        if (format != HalfFormat::kBf16) return "the avx512-fp16 tiles take bf16 weights only";
        if (!REFDEC_HAVE_AVX512_FP16) return "the avx512-fp16 tiles were not compiled: this compiler has no AVX512_FP16 intrinsics";
        return isa.runs_avx512() && isa.avx512_fp16 ? "" : "the avx512-fp16 tiles need AVX512_FP16 (this CPU runs " + isa.describe() + ")";
    }
    return "unknown tiles";
  }

  /// The widest tiles this CPU runs for `format` weights (kAvx2 where none runs: check cpu_runs()):
  /// the last of kAllStreamTiles that runs.
  static StreamTiles widest(HalfFormat format) {
    for (auto it = kAllStreamTiles.rbegin(); it != kAllStreamTiles.rend(); ++it)
      if (unavailable(*it, format).empty()) return *it;
    return StreamTiles::kAvx2;
  }

  /// Rows one tile of `tiles` computes per pass over a block's weights: 4 for kAvx2, 16 for the AVX-512 sets.
  static constexpr std::int64_t tile_rows(StreamTiles tiles) { return tiles == StreamTiles::kAvx2 ? 4 : kDotRows; }

  /// Packs `weight`: [out, in] row-major values of `format` (as torch.nn.Linear holds them).
  /// Throws ArgumentError for non-positive sizes or a null pointer.
  StreamLinear(const std::uint16_t* weight, std::int64_t out, std::int64_t in, HalfFormat format) : out_(out), in_(in), format_(format) {
    REFDEC_CHECK(out > 0 && in > 0 && weight != nullptr,
                 "StreamLinear: needs a weight of positive sizes, got [" << out << ", " << in << "]");
    const std::int64_t pairs = padded_in() / 2;
    const std::size_t size = static_cast<std::size_t>(blocks() * pairs * 2 * kBlockColumns);
    packed_ = HugePageBuffer(size * sizeof(std::uint16_t));  // zeroed: padding columns and positions stay 0
    std::uint16_t* to = packed();
    int top = 0;  // the largest finite weight's exponent field (bf16)
    for (std::int64_t col = 0; col < out; ++col)
      for (std::int64_t k = 0; k < in; ++k) {
        const std::uint16_t w = weight[col * in + k];
        to[offset(col, k)] = w;
        if (const int e = (w & 0x7FFF) >> 7; e < 0xFF) top = std::max(top, e);
      }
    // The fp16 tiles' weights: the largest at fp16's exponent field 29, below 2^15 (kFp16Chunk).
    fp16_shift_ = std::max(0, top - 29);
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

  /// Bytes of `rows` rows of input as prepare() writes them for `tiles`: padded_in() float32
  /// values per row, (kAvx512Bf16) padded_in() bf16 values, or (kAvx512Fp16) a float32 scale and
  /// padded_in() fp16 values.
  std::int64_t prepared_bytes(StreamTiles tiles, std::int64_t rows) const {
    switch (tiles) {
      case StreamTiles::kAvx512Bf16: return rows * padded_in() * 2;
      case StreamTiles::kAvx512Fp16: return rows * (4 + padded_in() * 2);
      default: return rows * padded_in() * 4;
    }
  }

  /// x ([rows, in_features()] values of format()) as `tiles` read it, into `prepared`
  /// (prepared_bytes(tiles, rows) bytes, 4-byte aligned), the padding 0: (kAvx2, kAvx512) each
  /// input pair's two float32 values (k, k+1) of every row in turn, or (kAvx512Bf16) each input
  /// pair's 32-bit (k, k+1) of every row in turn, or (kAvx512Fp16) each row's float32 factor,
  /// then the pairs as kAvx512Bf16's, of the rows' values in fp16 scaled by a power of two (the
  /// factor undoes both scales; throws ArgumentError where those tiles do not run, as their
  /// input would not fit the float tiles' prepared_bytes()).
  /// Every tile broadcasts each row's input pair at each step; rows side by side keep a tile's
  /// broadcasts in one or two cache lines, all at fixed distances from one pointer. Rows of a
  /// power-of-two size apart (2048 inputs: 4 KB) all fell into one set of the L1 cache and 16
  /// rows of them evicted one another; rows apart at any distance cost the float tiles an
  /// address register per row and an indexed load per product, which GCC 12 ran out of
  /// registers for at 16 rows (on a 2-core Intel Xeon, model 207, the 16-row tile streamed the
  /// 1.1B shape at 0.46-0.55 of a plain read with rows an odd number of cache lines apart,
  /// 0.62-0.67 side by side: refdec-stream-linear, alternated).
  void prepare(StreamTiles tiles, const std::uint16_t* x, std::int64_t rows, void* prepared) const {
    if (tiles == StreamTiles::kAvx512Fp16) {
      REFDEC_CHECK(unavailable(tiles, format_).empty(), "StreamLinear: " << unavailable(tiles, format_));
#if REFDEC_HAVE_AVX512_FP16
      // The scaled rows before their transpose: kept per thread, not allocated per product (up to
      // 180 KB for 16 rows of 5632 inputs, each step's every layer).
      thread_local std::vector<std::uint16_t> scaled;
      scaled.resize(static_cast<std::size_t>(rows * in_));
      auto* factors = static_cast<float*>(prepared);
      for (std::int64_t r = 0; r < rows; ++r) factors[r] = scale_fp16(x + r * in_, scaled.data() + r * in_);
      return prepare_pairs(scaled.data(), rows, reinterpret_cast<std::uint32_t*>(factors + rows));
#endif
    }
    if (tiles == StreamTiles::kAvx512Bf16) return prepare_pairs(x, rows, static_cast<std::uint32_t*>(prepared));
    // The float tiles' values are the dot tiles' pairs widened, each pair's two halves in turn
    // (a transpose row by row, value by value, took 5x as long: 88 us for 16 rows of 5632, timed
    // alone on a 2-core Intel Xeon, model 207).
    thread_local std::vector<std::uint32_t> pairs;  // per thread, as the fp16 tiles' scaled rows
    pairs.resize(static_cast<std::size_t>(rows * padded_in() / 2));
    prepare_pairs(x, rows, pairs.data());
    widen_pairs(pairs.data(), static_cast<std::int64_t>(pairs.size()), static_cast<float*>(prepared));
  }

  /// Output columns of blocks [first_block, last_block) of out = epilogue(x W^T) by `tiles`:
  /// `prepared` as prepare(tiles, ...) wrote it; `out` [rows, out_features()] row-major, float32
  /// (`out_f32`) or format(); `other` (Epilogue::kMultiply only) [rows, out_features()] of
  /// format(). Each output value is rounded once, after the epilogue; `prefetch` changes the
  /// speed, never a value. Throws ArgumentError where the tiles do not run (unavailable()).
  void run_blocks(StreamTiles tiles, const void* prepared, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue,
                  const std::uint16_t* other, std::int64_t first_block, std::int64_t last_block,
                  StreamPrefetch prefetch = StreamPrefetch::kAhead) const {
    const std::string why = unavailable(tiles, format_);
    REFDEC_CHECK(why.empty(), "StreamLinear: " << why);
    REFDEC_CHECK(0 <= first_block && first_block <= last_block && last_block <= blocks(),
                 "StreamLinear: blocks [" << first_block << ", " << last_block << ") outside [0, " << blocks() << ")");
    REFDEC_CHECK((epilogue == Epilogue::kMultiply) == (other != nullptr),
                 "StreamLinear: Epilogue::kMultiply needs the values to multiply by, and only it takes them");
#if REFDEC_X86
    const Output o{out, out_f32, epilogue, other};
#if REFDEC_HAVE_AVX512_FP16
    if (tiles == StreamTiles::kAvx512Fp16) return run_fp16(static_cast<const float*>(prepared), rows, o, first_block, last_block, prefetch);
#endif
    if (tiles == StreamTiles::kAvx512Bf16)
      return run_bf16_dot(static_cast<const std::uint32_t*>(prepared), rows, o, first_block, last_block, prefetch);
    const auto* xf = static_cast<const float*>(prepared);
    if (format_ == HalfFormat::kBf16) {
      if (tiles == StreamTiles::kAvx512) return run_avx512<HalfFormat::kBf16>(xf, rows, o, first_block, last_block, prefetch);
      return run_avx2<HalfFormat::kBf16>(xf, rows, o, first_block, last_block, prefetch);
    }
    if (tiles == StreamTiles::kAvx512) return run_avx512<HalfFormat::kFp16>(xf, rows, o, first_block, last_block, prefetch);
    run_avx2<HalfFormat::kFp16>(xf, rows, o, first_block, last_block, prefetch);
#endif
  }

  /// Sharer `sharer`'s part of a product that several threads stream at once: the runs of
  /// blocks `share` (over blocks() blocks) hands it, each as run_blocks() runs it, until none is
  /// left. Each output is what one thread's run_blocks() over all blocks writes.
  void run_shared(StreamTiles tiles, const void* prepared, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue,
                  const std::uint16_t* other, StreamShare& share, std::int64_t sharer,
                  StreamPrefetch prefetch = StreamPrefetch::kAhead) const {
    for (std::int64_t first = 0, last = 0; share.take(sharer, first, last);)
      run_blocks(tiles, prepared, rows, out, out_f32, epilogue, other, first, last, prefetch);
  }

  /// The whole product on the calling thread by `tiles`: x [rows, in_features()] of format(), the
  /// rest as run_blocks() takes it.
  void run(StreamTiles tiles, const std::uint16_t* x, std::int64_t rows, void* out, bool out_f32, Epilogue epilogue = Epilogue::kStore,
           const std::uint16_t* other = nullptr, StreamPrefetch prefetch = StreamPrefetch::kAhead) const {
    std::unique_ptr<float[]> prepared(new float[static_cast<std::size_t>((prepared_bytes(tiles, rows) + 3) / 4)]);
    prepare(tiles, x, rows, prepared.get());
    run_blocks(tiles, prepared.get(), rows, out, out_f32, epilogue, other, 0, blocks(), prefetch);
  }

  /// One value of `format` as float32 (exact), and a float32 rounded to `format` (to nearest even).
  static float to_float(std::uint16_t bits, HalfFormat format) {
    return format == HalfFormat::kBf16 ? bf16::to_float(bits) : fp16::to_float(bits);
  }
  static std::uint16_t from_float(float v, HalfFormat format) {
    return format == HalfFormat::kBf16 ? bf16::from_float(v) : fp16::from_float(v);
  }

 private:
  // x's rows as the dot tiles read them: each input pair's 32-bit (k, k+1) of every row in turn
  // (the bits as they are, bf16 or fp16).
  void prepare_pairs(const std::uint16_t* x, std::int64_t rows, std::uint32_t* to) const {
    const std::int64_t pairs = in_ / 2;
#if REFDEC_X86
    // A transpose of the rows' pairs in blocks of 16 rows by 16 pairs, in registers. It runs
    // on one thread while the others wait: element by element it took 2 ms of a 16-token step
    // of the 1.1B shape (perf, 2-core Zen 5), in registers a fifteenth of that. The step itself
    // shortened by only 0.3-0.7% there (bench/step_ab.sh), but the more threads share the
    // products, the larger a serial part's share.
    const std::int64_t done = rows > 1 && cpu_isa().runs_avx512() ? transpose_pairs(x, rows, pairs, to) : 0;
#else
    const std::int64_t done = 0;
#endif
    // The pairs past the last whole 16 (all of them for one row, a copy).
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t p = done; p < pairs; ++p) to[p * rows + r] = pair_at(x + r * in_, p);
    if (padded_in() != in_)
      for (std::int64_t r = 0; r < rows; ++r) to[pairs * rows + r] = x[r * in_ + in_ - 1];
  }

  // Where weight (col, k) lives in the packed layout (see the header comment).
  std::int64_t offset(std::int64_t col, std::int64_t k) const {
    const std::int64_t block = col / kBlockColumns, c = col % kBlockColumns, side = c / 8, lane = c % 8, pair = k / 2, parity = k % 2;
    const std::int64_t in_chunk = format_ == HalfFormat::kBf16 ? lane * 2 + parity : parity * 8 + lane;
    return ((block * (padded_in() / 2) + pair) * 2 + side) * 16 + in_chunk;
  }

  // n pairs as prepare_pairs() writes them into 2n float32 values, each pair's k then k + 1.
  void widen_pairs(const std::uint32_t* pairs, std::int64_t n, float* out) const {
    std::int64_t i = 0;
#if REFDEC_X86
    if (cpu_runs()) i = widen_pairs_avx2(pairs, n, out, format_ == HalfFormat::kBf16);
#endif
    for (; i < n; ++i) {
      out[2 * i] = to_float(static_cast<std::uint16_t>(pairs[i] & 0xFFFFu), format_);
      out[2 * i + 1] = to_float(static_cast<std::uint16_t>(pairs[i] >> 16), format_);
    }
  }

  // Input pair p of a row of bf16 values, as the dot tiles read it: k = 2p in the low half.
  static std::uint32_t pair_at(const std::uint16_t* row, std::int64_t p) {
    return static_cast<std::uint32_t>(row[2 * p]) | static_cast<std::uint32_t>(row[2 * p + 1]) << 16;
  }

  // Where a run writes and what it applies as it does.
  struct Output {
    void* out;
    bool f32;
    Epilogue epilogue;
    const std::uint16_t* other;
  };

#if REFDEC_X86
  // widen_pairs() 4 pairs at a time; returns the pairs done.
  REFDEC_AVX2_TARGET static std::int64_t widen_pairs_avx2(const std::uint32_t* pairs, std::int64_t n, float* out, bool bf16) {
    std::int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const auto* h = reinterpret_cast<const std::uint16_t*>(pairs + i);
      _mm256_storeu_ps(out + 2 * i, bf16 ? stream_detail::widen8<HalfFormat::kBf16>(h) : stream_detail::widen8<HalfFormat::kFp16>(h));
    }
    return i;
  }

  // prepare_pairs()'s transpose where the CPU runs AVX-512: pairs [0, 16 (pairs / 16))
  // of each of the `rows` rows of x to to[p * rows + r], 16 rows by 16 pairs at a time (rows past
  // the last masked off). Returns the pairs done.
  REFDEC_AVX512_TARGET std::int64_t transpose_pairs(const std::uint16_t* x, std::int64_t rows, std::int64_t pairs,
                                                    std::uint32_t* to) const {
    // (The zero-masked forms with every lane kept, as in decode512: GCC bug 105593.)
    constexpr __mmask16 kAll = 0xFFFF;
    constexpr __mmask8 kAll8 = 0xFF;
    const std::int64_t whole = pairs / 16 * 16;
    for (std::int64_t r0 = 0; r0 < rows; r0 += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, rows - r0);
      const auto lanes = static_cast<__mmask16>((1u << n) - 1u);
      for (std::int64_t p0 = 0; p0 < whole; p0 += 16) {
        __m512i v[16], t[16];
        // Row r's 16 pairs (64 bytes; a row of an odd length starts 2 bytes off alignment).
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          v[i] = _mm512_maskz_loadu_epi32(i < n ? kAll : __mmask16{0}, x + std::min(r0 + i, rows - 1) * in_ + 2 * p0);
        }
        // 4x4 blocks of 32-bit elements within each 128-bit lane: t[4k + q]'s lane j holds rows
        // 4k..4k+3 of pair 4j + q.
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m512i a = _mm512_maskz_unpacklo_epi32(kAll, v[4 * k], v[4 * k + 1]),
                        b = _mm512_maskz_unpackhi_epi32(kAll, v[4 * k], v[4 * k + 1]);
          const __m512i c = _mm512_maskz_unpacklo_epi32(kAll, v[4 * k + 2], v[4 * k + 3]),
                        d = _mm512_maskz_unpackhi_epi32(kAll, v[4 * k + 2], v[4 * k + 3]);
          t[4 * k] = _mm512_maskz_unpacklo_epi64(kAll8, a, c), t[4 * k + 1] = _mm512_maskz_unpackhi_epi64(kAll8, a, c);
          t[4 * k + 2] = _mm512_maskz_unpacklo_epi64(kAll8, b, d), t[4 * k + 3] = _mm512_maskz_unpackhi_epi64(kAll8, b, d);
        }
        // Then the 128-bit lanes across vectors: pair 4j + q's rows 4k..4k+3 into lane k.
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m512i a = _mm512_maskz_shuffle_i32x4(kAll, t[q], t[4 + q], 0x88),
                        b = _mm512_maskz_shuffle_i32x4(kAll, t[q], t[4 + q], 0xDD);
          const __m512i c = _mm512_maskz_shuffle_i32x4(kAll, t[8 + q], t[12 + q], 0x88),
                        d = _mm512_maskz_shuffle_i32x4(kAll, t[8 + q], t[12 + q], 0xDD);
          v[q] = _mm512_maskz_shuffle_i32x4(kAll, a, c, 0x88), v[8 + q] = _mm512_maskz_shuffle_i32x4(kAll, a, c, 0xDD);
          v[4 + q] = _mm512_maskz_shuffle_i32x4(kAll, b, d, 0x88), v[12 + q] = _mm512_maskz_shuffle_i32x4(kAll, b, d, 0xDD);
        }
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) _mm512_mask_storeu_epi32(to + (p0 + i) * rows + r0, lanes, v[i]);
      }
    }
    return whole;
  }

  // How far ahead of the pair being read the weights are prefetched. The AVX2 tiles: with the
  // hardware prefetcher alone a lone row streamed at about 85% of a plain read on a 2-core AMD
  // EPYC (Zen 3); 1 KB ahead reached 91-95% there, 512 B and 1.5-2 KB a little less, 4-8 KB no
  // better than none (a copy of this loop at each distance, alternated with a read). The AVX-512
  // tiles spend more time per byte at many rows, so 1 KB is less time ahead: on a 2-core Zen 5
  // EPYC the 16-row dot tile streamed at 0.57 of a plain read 1 KB ahead, 0.76-0.83 at 4 KB and
  // 0.80-0.89 at 8 KB, one row at 0.91-1.04 at every distance (refdec-stream-linear with the
  // distance varied, alternated runs). The 13-16-row dot tile, the most time per byte of all,
  // goes further: a 16-token step of the 1.1B shape took 0.95x its time at 4 KB with 8 KB, 0.92x
  // with 16 or 32 KB, where the tiles of 5-12 rows over two blocks took 1.06x at 16 KB
  // (bench/step_ab.sh). The AVX2 tiles of 3-4 rows, the same: on the Zen 5 EPYC 4 rows streamed
  // at 1.11-1.14 of their speed without a prefetch 4 KB ahead, where 1 KB ran them at 0.93-0.99 of
  // it (refdec-stream-linear --tiles avx2 --prefetch all; docs/speed.md). Prefetching past a
  // block reads the next one, as streamed.
  static constexpr std::int64_t kAvx2PrefetchBytes = 1024, kAvx2WidePrefetchBytes = 4096, kAvx512PrefetchBytes = 4096,
                                kDotWidePrefetchBytes = 16384;
  // Always inlined: GCC 12 inlines a plain function into the always-inlined steps of the AVX-512
  // tiles and then drops its prefetch, silently (they streamed without one until this was seen).
  // kFar: the AVX-512 tiles of at most kFarRows rows also ask for the weights twice as far ahead
  // into L2 (`prefetcht2`), so that the next stretch of the stream is already on its way from
  // memory while the near prefetch brings it into L1 from L2. On a 2-core Intel Xeon (model
  // 207), streaming the 1.1B shape's 110 linear layers, one row ran in 0.91-0.96 of its time, two
  // rows 0.94-0.97, four within 1.5% either way, 8-16 rows up to 2% slower (their tiles spend
  // more time per byte; a copy of the header per variant, alternated, median of 16-20 rounds).
  // The AVX512_FP16 tiles (one block, one stream) ask at every row count: there 4 / 8 / 12 / 16
  // rows ran in 0.89-0.90 / 0.91-0.92 / 0.92-0.95 / 0.93-0.99 of their time (the same probe,
  // 12-16 rounds), and a step of 4 / 8 / 12 / 16 tokens with them only in 0.86 / 0.94 / 0.98 /
  // 0.97 (STEP_AB_LINEAR=avx512-fp16 bench/step_ab.sh). The float and AVX512_BF16 tiles of 3-8
  // rows, over two blocks, ran no faster with it (within 2% either way).
  static constexpr int kFarRows = 2;

  // A tile's prefetch distances in bytes, into L1 and into L2, from its kAhead distance into L1
  // (`near`) and whether it also asks twice as far into L2 (`far`). Both requests are always made,
  // at run-time distances (the tiles are compiled once for every StreamPrefetch): a distance of 0
  // asks for the line the tile is about to load, a request that joins the load's own.
  struct Ahead {
    std::int64_t l1 = 0, l2 = 0;
  };
  static constexpr Ahead ahead(StreamPrefetch mode, std::int64_t near, bool far) {
    switch (mode) {
      case StreamPrefetch::kAhead: return {near, far ? 2 * near : 0};
      case StreamPrefetch::kL2: return {0, near};
      case StreamPrefetch::kNone: return {};
    }
    return {};
  }
  __attribute__((always_inline)) static inline void prefetch(const std::uint16_t* pair, Ahead a) {
    _mm_prefetch(reinterpret_cast<const char*>(pair) + a.l1, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pair) + a.l2, _MM_HINT_T2);
  }

  // ---- kAvx2: 8 columns per vector.

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
  // memory). Three and four rows have no registers for that split (16 ymm registers: 8
  // accumulators, 4 weight vectors, 2 inputs); two FMAs a pair into each of 8 accumulators put
  // the chains' latency (2 x 4 cycles) level with the FMA units' throughput, and the 4-row tile ran
  // at 81% of the FMA peak. So each pair's even and odd products are summed apart from the
  // accumulator (a multiply and an FMA) and added to it once: a chain of one addition per pair, the
  // addition on AMD's separate adders (Zen), the multiplies alone on the FMA units. On the Zen 5
  // EPYC, weights held in L2, 4 / 8 / 16 rows: 2.95 / 5.94 / 11.79 -> 2.46 / 4.78 / 9.90 ns per 64
  // bytes (96% of the peak; refdec-stream-linear --resident --tiles avx2). Where additions share
  // the FMA ports (Intel before Golden Cove) this costs a third more instructions there; such a
  // CPU with AVX-512 runs the kAvx512 tiles at many rows (measured at load).
  template <HalfFormat F, int M>
  REFDEC_AVX2_TARGET static void tile_avx2(const std::uint16_t* block, std::int64_t pairs, const float* x, std::int64_t stride,
                                           float (*sums)[kBlockColumns], StreamPrefetch mode) {
    constexpr int kSplit = M <= 2 ? 2 : 1;
    const Ahead a = ahead(mode, M <= 2 ? kAvx2PrefetchBytes : kAvx2WidePrefetchBytes, false);
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
      prefetch(block + p * 32, a);
      decode<F>(block + p * 32, ae, ao, be, bo);
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) {
        const __m256 xe = _mm256_broadcast_ss(x + p * stride + 2 * m), xo = _mm256_broadcast_ss(x + p * stride + 2 * m + 1);
        if constexpr (kSplit == 2) {
          acc[m][0][0] = _mm256_fmadd_ps(ae, xe, acc[m][0][0]);
          acc[m][0][1] = _mm256_fmadd_ps(ao, xo, acc[m][0][1]);
          acc[m][1][0] = _mm256_fmadd_ps(be, xe, acc[m][1][0]);
          acc[m][1][1] = _mm256_fmadd_ps(bo, xo, acc[m][1][1]);
        } else {
          acc[m][0][0] = _mm256_add_ps(acc[m][0][0], _mm256_fmadd_ps(ao, xo, _mm256_mul_ps(ae, xe)));
          acc[m][1][0] = _mm256_add_ps(acc[m][1][0], _mm256_fmadd_ps(bo, xo, _mm256_mul_ps(be, xe)));
        }
      }
    }
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(sums[m] + 8 * h, kSplit == 2 ? _mm256_add_ps(acc[m][h][0], acc[m][h][kSplit - 1]) : acc[m][h][0]);
  }

  // ---- kAvx512: 16 columns per vector.

  // The 64 bytes of one input pair as columns 0-15 at k (even) and at k+1 (odd).
  // (The zero-masked forms with every lane kept: GCC 12's unmasked ones start from an
  // "undefined" vector that -Wmaybe-uninitialized reports, GCC bug 105593.)
  template <HalfFormat F>
  REFDEC_AVX512_TARGET static void decode512(const std::uint16_t* p, __m512& even, __m512& odd) {
    constexpr __mmask16 kAll = 0xFFFF;
    if constexpr (F == HalfFormat::kBf16) {
      const __m512i w = _mm512_load_si512(p);
      even = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, w, 16));
      odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    } else {  // each half of the block is columns c..c+7 at k then at k+1
      const __m512 a = _mm512_maskz_cvtph_ps(kAll, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
      const __m512 b = _mm512_maskz_cvtph_ps(kAll, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 16)));
      even = _mm512_maskz_shuffle_f32x4(kAll, a, b, 0x44);  // a's and b's first 8 lanes
      odd = _mm512_maskz_shuffle_f32x4(kAll, a, b, 0xEE);   // their last 8
    }
  }

  // Accumulators per row, block and chain in the AVX-512 float tiles: even and odd positions apart
  // (two more chains of additions) up to 8 rows over one block or 2 rows over two, one for both
  // beyond, so that the accumulators and a pair's weights fit AVX-512's 32 registers (16 rows
  // over one block, 12 over two).
  template <int M, int NB>
  static constexpr int kAvx512Parities = M <= (NB == 1 ? 8 : 2) ? 2 : 1;

  // One pair of NB neighbouring blocks into chain c of M rows' accumulators ([M][NB][parities][chains]).
  template <HalfFormat F, int M, int NB, int C>
  REFDEC_AVX512_TARGET __attribute__((always_inline)) static inline void step_avx512(
      const std::uint16_t* block, std::int64_t block_stride, std::int64_t p, const float* x, std::int64_t stride,
      __m512 (&acc)[static_cast<std::size_t>(M)][static_cast<std::size_t>(NB)][static_cast<std::size_t>(kAvx512Parities<M, NB>)]
                   [static_cast<std::size_t>(C)],
      int c, Ahead a) {
    constexpr int kOdd = kAvx512Parities<M, NB> - 1;
    __m512 even[static_cast<std::size_t>(NB)], odd[static_cast<std::size_t>(NB)];
#pragma GCC unroll 2
    for (int n = 0; n < NB; ++n) {
      prefetch(block + n * block_stride + p * 32, a);
      decode512<F>(block + n * block_stride + p * 32, even[n], odd[n]);
    }
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      const __m512 xe = _mm512_set1_ps(x[p * stride + 2 * m]), xo = _mm512_set1_ps(x[p * stride + 2 * m + 1]);
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n) {
        acc[m][n][0][c] = _mm512_fmadd_ps(even[n], xe, acc[m][n][0][c]);
        acc[m][n][kOdd][c] = _mm512_fmadd_ps(odd[n], xo, acc[m][n][kOdd][c]);
      }
    }
  }

  // M rows (1 to 16) times NB neighbouring blocks (1 or 2), as tile_avx2: even and odd positions
  // in accumulators of their own (kAvx512Parities), and one or two rows over one block alternate
  // pairs between two sets, so that a lone row has four chains of additions in flight. Rows are
  // tiled as the dot tiles' (run_tiles()): 9 to 16 rows in one tile over one block, not two
  // tiles: the second tile's products would no longer run beside the stream. On a 2-core Intel
  // Xeon (model 207) 12 and 16 rows of the 1.1B shape streamed at 0.66-0.72 and 0.57-0.59 of a
  // plain read in one tile against 0.53-0.56 and 0.48-0.52 in two (refdec-stream-linear,
  // alternated; each row's inputs then in a row of their own: side by side, 16 rows reach
  // 0.62-0.70). Two blocks at once read two streams and use each broadcast input twice: there
  // 2 / 4 / 8 / 12 rows streamed at 1.00 / 0.94-1.07 / 0.90-0.91 / 0.80-0.81 of a plain read,
  // against 0.96 / 0.88-0.91 / 0.79-0.80 / 0.72-0.74 over one block (alternated).
  template <HalfFormat F, int M, int NB>
  REFDEC_AVX512_TARGET static void tile_avx512(const std::uint16_t* block, std::int64_t pairs, const float* x, std::int64_t stride,
                                               float (*sums)[kBlockColumns], StreamPrefetch mode) {
    constexpr int kChains = NB == 1 && M <= 2 ? 2 : 1, kParities = kAvx512Parities<M, NB>;
    const Ahead a = ahead(mode, kAvx512PrefetchBytes, M <= kFarRows);
    const std::int64_t block_stride = pairs * 32;
    __m512 acc[static_cast<std::size_t>(M)][static_cast<std::size_t>(NB)][static_cast<std::size_t>(kParities)]
              [static_cast<std::size_t>(kChains)];
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n)
#pragma GCC unroll 2
        for (int q = 0; q < kParities; ++q)
#pragma GCC unroll 2
          for (int c = 0; c < kChains; ++c) acc[m][n][q][c] = _mm512_setzero_ps();
    std::int64_t p = 0;
    for (; p + kChains <= pairs; p += kChains)
#pragma GCC unroll 2
      for (int c = 0; c < kChains; ++c) step_avx512<F, M, NB, kChains>(block, block_stride, p + c, x, stride, acc, c, a);
    for (; p < pairs; ++p) step_avx512<F, M, NB, kChains>(block, block_stride, p, x, stride, acc, 0, a);
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n) {
        __m512 s = acc[m][n][0][0];
        if constexpr (kParities == 2) s = _mm512_add_ps(s, acc[m][n][1][0]);
        if constexpr (kChains == 2) s = _mm512_add_ps(s, _mm512_add_ps(acc[m][n][0][1], acc[m][n][kParities - 1][1]));
        _mm512_storeu_ps(sums[m * NB + n], s);
      }
  }

  // ---- The float tiles' run: blocks in turn, rows in tiles of up to kRows, each tile by the
  // set's function for its row count (tiles[m - 1]). A tile reads row m's values at pair p from
  // x[p * stride + 2m] and x[p * stride + 2m + 1] (prepare()'s layout).
  using FloatTile = void (*)(const std::uint16_t* block, std::int64_t pairs, const float* x, std::int64_t stride,
                             float (*sums)[kBlockColumns], StreamPrefetch mode);

  template <HalfFormat F, int... M>
  static constexpr std::array<FloatTile, sizeof...(M)> avx2_tiles(std::integer_sequence<int, M...>) {
    return {&tile_avx2<F, M + 1>...};
  }
  template <HalfFormat F, int NB, int... M>
  static constexpr std::array<FloatTile, sizeof...(M)> avx512_tiles(std::integer_sequence<int, M...>) {
    return {&tile_avx512<F, M + 1, NB>...};
  }

  template <HalfFormat F, std::size_t kRows>
  void run_float(const std::array<FloatTile, kRows>& tiles, const float* xf, std::int64_t rows, const Output& o, std::int64_t first_block,
                 std::int64_t last_block, StreamPrefetch mode) const {
    const std::int64_t pairs = padded_in() / 2;
    alignas(64) float sums[kRows][kBlockColumns];
    for (std::int64_t b = first_block; b < last_block; ++b) {
      const std::uint16_t* block = packed() + b * pairs * 32;
      for (std::int64_t r = 0; r < rows; r += static_cast<std::int64_t>(kRows)) {
        const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(kRows), rows - r);
        tiles[static_cast<std::size_t>(m - 1)](block, pairs, xf + 2 * r, 2 * rows, sums, mode);
        finish_tile<F>(sums, r, m, b, o);
      }
    }
  }

  template <HalfFormat F>
  void run_avx2(const float* xf, std::int64_t rows, const Output& o, std::int64_t first_block, std::int64_t last_block,
                StreamPrefetch mode) const {
    static constexpr auto kTiles = avx2_tiles<F>(std::make_integer_sequence<int, 4>{});
    run_float<F>(kTiles, xf, rows, o, first_block, last_block, mode);
  }
  template <HalfFormat F>
  void run_avx512(const float* xf, std::int64_t rows, const Output& o, std::int64_t first_block, std::int64_t last_block,
                  StreamPrefetch mode) const {
    static constexpr auto kOne = avx512_tiles<F, 1>(std::make_integer_sequence<int, kDotRows>{});
    static constexpr auto kTwo = avx512_tiles<F, 2>(std::make_integer_sequence<int, kDotRows2>{});
    run_tiles<F>(kOne, kTwo, xf, 2, rows, o, first_block, last_block, mode);
  }

  // ---- kAvx512Bf16: each 32-bit lane a column's weight pair, dotted with the input pair.

  // One pair of NB neighbouring blocks into chain c of M rows' accumulators ([M][NB][chains]).
  template <int M, int NB, int C>
  REFDEC_AVX512_BF16_TARGET __attribute__((always_inline)) static inline void step_bf16_dot(
      const std::uint16_t* block, std::int64_t block_stride, std::int64_t p, const std::uint32_t* x, std::int64_t stride,
      __m512 (&acc)[static_cast<std::size_t>(M)][static_cast<std::size_t>(NB)][static_cast<std::size_t>(C)], int c, Ahead a) {
    __m512bh w[static_cast<std::size_t>(NB)];
#pragma GCC unroll 2
    for (int n = 0; n < NB; ++n) {
      prefetch(block + n * block_stride + p * 32, a);
      w[n] = reinterpret_cast<__m512bh>(_mm512_load_si512(block + n * block_stride + p * 32));
    }
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      const auto xm = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(x[p * stride + m])));
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n) acc[m][n][c] = _mm512_dpbf16_ps(acc[m][n][c], w[n], xm);
    }
  }

  using DotTile = void (*)(const std::uint16_t* block, std::int64_t pairs, const std::uint32_t* x, std::int64_t stride,
                           float (*sums)[kBlockColumns], StreamPrefetch mode);

  // M rows (1 to 16) times NB neighbouring blocks (1 or 2); x holds the rows' input pairs as
  // 32-bit values, pair p of row m at x[p * stride + m]. Two blocks at once read two streams and use each row's broadcast input twice;
  // fewer than four accumulators spread the pairs over more, so that at least four dot products
  // are in flight.
  template <int M, int NB>
  REFDEC_AVX512_BF16_TARGET static void tile_bf16_dot(const std::uint16_t* block, std::int64_t pairs, const std::uint32_t* x,
                                                      std::int64_t stride, float (*sums)[kBlockColumns], StreamPrefetch mode) {
    constexpr int kChains = M * NB >= 4 ? 1 : 4 / (M * NB);
    const Ahead a = ahead(mode, M > kDotRows2 ? kDotWidePrefetchBytes : kAvx512PrefetchBytes, M <= kFarRows);
    const std::int64_t block_stride = pairs * 32;
    __m512 acc[static_cast<std::size_t>(M)][static_cast<std::size_t>(NB)][static_cast<std::size_t>(kChains)];
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n)
#pragma GCC unroll 4
        for (int c = 0; c < kChains; ++c) acc[m][n][c] = _mm512_setzero_ps();
    std::int64_t p = 0;
    for (; p + kChains <= pairs; p += kChains)
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) step_bf16_dot<M, NB, kChains>(block, block_stride, p + c, x, stride, acc, c, a);
    for (; p < pairs; ++p) step_bf16_dot<M, NB, kChains>(block, block_stride, p, x, stride, acc, 0, a);
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n) {
        __m512 s = acc[m][n][0];
#pragma GCC unroll 4
        for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[m][n][c]);
        _mm512_storeu_ps(sums[m * NB + n], s);
      }
  }

  template <int NB, int... M>
  static constexpr std::array<DotTile, sizeof...(M)> bf16_dot_tiles(std::integer_sequence<int, M...>) {
    return {&tile_bf16_dot<M + 1, NB>...};
  }

  // The dot tiles (and the AVX-512 float tiles) by row count (index m - 1): one block for up to
  // kDotRows rows, two blocks for up to kDotRows2 rows (their accumulators and weights fill
  // AVX-512's 32 registers).
  static constexpr int kDotRows = 16, kDotRows2 = 12;

  // Rows split into tiles, for both AVX-512 sets whose tiles take one or two blocks (the float
  // tiles and the dot tiles; x holds `per_row` values per row and pair). A tile computes its rows
  // from one load of each weight vector, so that while the weights stream from memory every
  // row's products run beside the stream; a second tile over the same blocks reads them from the
  // cache, its products no longer beside the stream. So 13 to 16 rows take one tile over one
  // block at a time (the dot tiles: two 8-row tiles over two blocks ran at 0.70-0.74 of a plain
  // read on a 2-core Zen 5 EPYC, one 16-row tile at 0.78-0.86), and other row counts tiles of at
  // most kDotRows2 sized alike over two blocks at a time (each broadcast input used twice: 24
  // rows 0.64 against 0.52 for two 12-row tiles over one block, 32 rows 0.49 against 0.44).
  template <HalfFormat F, typename Tile, typename X>
  void run_tiles(const std::array<Tile, kDotRows>& one, const std::array<Tile, kDotRows2>& two_blocks, const X* x, std::int64_t per_row,
                 std::int64_t rows, const Output& o, std::int64_t first_block, std::int64_t last_block, StreamPrefetch mode) const {
    const std::int64_t pairs = padded_in() / 2;
    const bool two = rows <= kDotRows2 || rows > kDotRows;
    const std::int64_t tiles = two ? (rows + kDotRows2 - 1) / kDotRows2 : 1, tile = (rows + tiles - 1) / tiles;
    alignas(64) float sums[2 * kDotRows2][kBlockColumns], block_sums[kDotRows][kBlockColumns];
    for (std::int64_t b = first_block; b < last_block;) {
      const std::int64_t nb = two ? std::min<std::int64_t>(2, last_block - b) : 1;
      const std::uint16_t* block = packed() + b * pairs * 32;
      for (std::int64_t r = 0; r < rows; r += tile) {
        const std::int64_t m = std::min(tile, rows - r);
        const Tile run_tile = nb == 2 ? two_blocks[static_cast<std::size_t>(m - 1)] : one[static_cast<std::size_t>(m - 1)];
        run_tile(block, pairs, x + r * per_row, rows * per_row, sums, mode);
        for (std::int64_t n = 0; n < nb; ++n) {
          for (std::int64_t i = 0; i < m; ++i) std::memcpy(block_sums[i], sums[i * nb + n], sizeof(block_sums[i]));
          finish_tile<F>(block_sums, r, m, b + n, o);
        }
      }
      b += nb;
    }
  }

  REFDEC_AVX512_BF16_TARGET void run_bf16_dot(const std::uint32_t* xp, std::int64_t rows, const Output& o, std::int64_t first_block,
                                              std::int64_t last_block, StreamPrefetch mode) const {
    static constexpr auto kOne = bf16_dot_tiles<1>(std::make_integer_sequence<int, kDotRows>{});
    static constexpr auto kTwo = bf16_dot_tiles<2>(std::make_integer_sequence<int, kDotRows2>{});
    run_tiles<HalfFormat::kBf16>(kOne, kTwo, xp, 1, rows, o, first_block, last_block, mode);
  }

#if REFDEC_HAVE_AVX512_FP16
  // ---- kAvx512Fp16: the packed bf16 pairs as 32 fp16 lanes, each lane a column's value at k or
  // k+1, times the row's (k, k+1) broadcast to every 32-bit lane.

  // Pairs whose products one fp16 accumulator sums before they go into float32. A chunk's sums
  // are bounded by kFp16Chunk products of a weight below 2^15 (the largest weight's exponent at
  // fp16's 29) and an input below 2^-5 (prepare()'s scale): 2^15, within fp16's 65504, so no sum
  // overflows whatever the values. Each of the chunk's additions rounds to fp16's 11 bits; the
  // longer the chunk, the fewer float32 additions per product (each row's chunk ends in two
  // conversions and two additions: at 16 rows a chunk of 32 pairs spends 21 instructions per
  // pair against the float32 tiles' 34).
  static constexpr std::int64_t kFp16Chunk = 32;
  static constexpr int kFp16ChunkLog2 = 5;
  static_assert(std::int64_t{1} << kFp16ChunkLog2 == kFp16Chunk);

  // A row of bf16 inputs times 2^-t into `to` as fp16, t such that every value is below 2^-5
  // (exact where the result is a normal fp16: 2^-5 down to 2^-14, beneath which tiny values keep
  // fewer bits). Returns 2^t times the weights' 2^(fp16_shift_ - 112): the tile's factor.
  REFDEC_AVX512_TARGET float scale_fp16(const std::uint16_t* x, std::uint16_t* to) const {
    constexpr __mmask16 kAll = 0xFFFF;  // (the zero-masked forms with every lane kept: GCC bug 105593)
    // The largest finite magnitude's bits (an inf or NaN input stays one through the scale).
    __m512i top = _mm512_setzero_si512();
    const __m512i finite = _mm512_set1_epi16(0x7F7F), magnitude = _mm512_set1_epi16(0x7FFF);
    std::int64_t i = 0;
    for (; i + 32 <= in_; i += 32)
      top = _mm512_max_epu16(top, _mm512_min_epu16(finite, _mm512_and_si512(magnitude, _mm512_loadu_si512(x + i))));
    alignas(64) std::uint16_t lanes[32];
    _mm512_store_si512(lanes, top);
    int largest = 0;
    for (const std::uint16_t v : lanes) largest = std::max<int>(largest, v);
    for (; i < in_; ++i) largest = std::max<int>(largest, std::min<int>(0x7F7F, x[i] & 0x7FFF));
    // Values below 2^(e - 126), e the largest's exponent field; two factors, each a normal float.
    const int t = (largest >> 7) - 126 + kFp16ChunkLog2;
    const __m512 down = _mm512_set1_ps(std::ldexp(1.0f, -(t / 2))), down2 = _mm512_set1_ps(std::ldexp(1.0f, t / 2 - t));
    for (i = 0; i + 16 <= in_; i += 16) {
      const __m512i wide = _mm512_maskz_slli_epi32(
          kAll, _mm512_maskz_cvtepu16_epi32(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))), 16);
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(wide), down), down2);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + i),
                          _mm512_maskz_cvtps_ph(kAll, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < in_; ++i) to[i] = fp16::from_float(std::ldexp(bf16::to_float(x[i]), -t));
    return std::ldexp(1.0f, t + fp16_shift_ - 112);
  }

  // The 32 bf16 weights at p as fp16 times 2^(112 - fp16_shift_): the exponent field lowered by
  // the shift and the mantissa widened, integer arithmetic on 16-bit lanes. Below fp16's normals
  // (2^-28 of the largest weight and less) the saturating subtraction leaves 0 or a subnormal of
  // the mantissa alone: off by less than 2^-14, 2^-28 of the largest weight.
  REFDEC_AVX512_FP16_TARGET __attribute__((always_inline)) static inline __m512h decode_fp16(const std::uint16_t* p, __m512i shift) {
    const __m512i w = _mm512_load_si512(p);
    const __m512i magnitude = _mm512_and_si512(w, _mm512_set1_epi16(0x7FFF));
    const __m512i h = _mm512_slli_epi16(_mm512_subs_epu16(magnitude, shift), 3);
    // h | (w & sign)
    return _mm512_castsi512_ph(_mm512_ternarylogic_epi32(h, w, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8));
  }

  using Fp16Tile = void (*)(const std::uint16_t* block, std::int64_t pairs, const std::uint32_t* x, std::int64_t stride,
                            const float* factors, int shift, float (*sums)[kBlockColumns], StreamPrefetch mode);

  // M rows (1 to 16) times one block: x as the dot tiles read it, factors[m] row m's scale.
  // Lane 2c of a sum holds column c's products at even positions, lane 2c + 1 at odd ones.
  template <int M>
  REFDEC_AVX512_FP16_TARGET static void tile_fp16(const std::uint16_t* block, std::int64_t pairs, const std::uint32_t* x,
                                                  std::int64_t stride, const float* factors, int shift, float (*sums)[kBlockColumns],
                                                  StreamPrefetch mode) {
    constexpr __mmask16 kAll = 0xFFFF;  // (the zero-masked forms with every lane kept: GCC bug 105593)
    constexpr __mmask8 kAll8 = 0xFF;
    const Ahead a = ahead(mode, kAvx512PrefetchBytes, true);
    const __m512i lower = _mm512_set1_epi16(static_cast<short>(shift << 7));
    __m512 wide[static_cast<std::size_t>(M)][2];
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) wide[m][0] = wide[m][1] = _mm512_setzero_ps();
    for (std::int64_t p0 = 0; p0 < pairs; p0 += kFp16Chunk) {
      const std::int64_t end = std::min(pairs, p0 + kFp16Chunk);
      __m512h h[static_cast<std::size_t>(M)];
#pragma GCC unroll 16
      for (int m = 0; m < M; ++m) h[m] = _mm512_setzero_ph();
      for (std::int64_t p = p0; p < end; ++p) {
        prefetch(block + p * 32, a);
        const __m512h w = decode_fp16(block + p * 32, lower);
#pragma GCC unroll 16
        for (int m = 0; m < M; ++m)
          h[m] = _mm512_fmadd_ph(w, _mm512_castsi512_ph(_mm512_set1_epi32(static_cast<int>(x[p * stride + m]))), h[m]);
      }
#pragma GCC unroll 16
      for (int m = 0; m < M; ++m) {
        const __m512i bits = _mm512_castph_si512(h[m]);
        wide[m][0] = _mm512_add_ps(wide[m][0], _mm512_maskz_cvtph_ps(kAll, _mm512_maskz_extracti64x4_epi64(kAll8, bits, 0)));
        wide[m][1] = _mm512_add_ps(wide[m][1], _mm512_maskz_cvtph_ps(kAll, _mm512_maskz_extracti64x4_epi64(kAll8, bits, 1)));
      }
    }
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      const __m512 s = _mm512_add_ps(_mm512_permutex2var_ps(wide[m][0], even, wide[m][1]),
                                     _mm512_permutex2var_ps(wide[m][0], odd, wide[m][1]));
      _mm512_storeu_ps(sums[m], _mm512_mul_ps(s, _mm512_set1_ps(factors[m])));
    }
  }

  template <int... M>
  static constexpr std::array<Fp16Tile, sizeof...(M)> fp16_tiles(std::integer_sequence<int, M...>) {
    return {&tile_fp16<M + 1>...};
  }

  // Rows in tiles of at most 16, sized alike, one block at a time.
  void run_fp16(const float* factors, std::int64_t rows, const Output& o, std::int64_t first_block, std::int64_t last_block,
                StreamPrefetch mode) const {
    static constexpr auto kTiles = fp16_tiles(std::make_integer_sequence<int, tile_rows(StreamTiles::kAvx512Fp16)>{});
    constexpr std::int64_t kRows = kTiles.size();
    const auto* xp = reinterpret_cast<const std::uint32_t*>(factors + rows);
    const std::int64_t pairs = padded_in() / 2, tiles = (rows + kRows - 1) / kRows, tile = (rows + tiles - 1) / tiles;
    alignas(64) float sums[kRows][kBlockColumns];
    for (std::int64_t b = first_block; b < last_block; ++b) {
      const std::uint16_t* block = packed() + b * pairs * 32;
      for (std::int64_t r = 0; r < rows; r += tile) {
        const std::int64_t m = std::min(tile, rows - r);
        kTiles[static_cast<std::size_t>(m - 1)](block, pairs, xp + r, rows, factors + r, fp16_shift_, sums, mode);
        finish_tile<HalfFormat::kBf16>(sums, r, m, b, o);
      }
    }
  }
#endif

  // ---- Every set's epilogue: the tile's sums of rows [r, r + m) and block b written out.
  template <HalfFormat F>
  REFDEC_VECTORISE REFDEC_AVX2_TARGET void finish_tile(const float (*sums)[kBlockColumns], std::int64_t r, std::int64_t m, std::int64_t b,
                                                       const Output& o) const {
    const std::int64_t col0 = b * kBlockColumns, cols = std::min(kBlockColumns, out_ - col0);
    for (std::int64_t i = 0; i < m; ++i) finish<F>(sums[i], cols, (r + i) * out_ + col0, o);
  }

  // e^x on 8 lanes within 2 ulp (std::exp is a call per value; GCC 12 left this polynomial's
  // scalar loop unvectorised, a twentieth of a 16-row step): x clamped to where e^x is a normal
  // float, x = n ln 2 + r with |r| <= ln 2 / 2, e^r by Cephes' expf polynomial, 2^n built in the
  // exponent bits.
  REFDEC_AVX2_TARGET static __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x));
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(two_n));
  }

  // Applies the epilogue to `cols` sums and writes them at `at` (an index into out and other):
  // one plain loop per epilogue and per output format, which the compiler vectorises (a loop over
  // the values with the epilogue chosen per value took a fifth of a 16-row product's time).
  template <HalfFormat F>
  REFDEC_VECTORISE REFDEC_AVX2_TARGET static void finish(const float* sums, std::int64_t cols, std::int64_t at, const Output& o) {
    auto* f32 = static_cast<float*>(o.out) + at;
    auto* h16 = static_cast<std::uint16_t*>(o.out) + at;
    float v[kBlockColumns];
    for (std::int64_t c = 0; c < cols; ++c) v[c] = sums[c];
    switch (o.epilogue) {
      case Epilogue::kStore: break;
      case Epilogue::kAccumulate:
        if (o.f32)
          for (std::int64_t c = 0; c < cols; ++c) v[c] += f32[c];
        else
          for (std::int64_t c = 0; c < cols; ++c) v[c] += half::to_float<F>(h16[c]);
        break;
      case Epilogue::kSilu:
        // All 16 lanes: a block's sums past `cols` exist and are never stored.
        for (std::int64_t c = 0; c < kBlockColumns; c += 8) {
          const __m256 x = _mm256_loadu_ps(sums + c);
          _mm256_storeu_ps(v + c, _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), x)))));
        }
        break;
      case Epilogue::kMultiply:
        for (std::int64_t c = 0; c < cols; ++c) v[c] *= half::to_float<F>(o.other[at + c]);
        break;
    }
    if (o.f32)
      for (std::int64_t c = 0; c < cols; ++c) f32[c] = v[c];
    else
      for (std::int64_t c = 0; c < cols; ++c) h16[c] = half::from_float<F>(v[c]);
  }
#endif

  std::uint16_t* packed() const { return static_cast<std::uint16_t*>(packed_.data()); }

  std::int64_t out_ = 0, in_ = 0;
  HalfFormat format_ = HalfFormat::kBf16;
  int fp16_shift_ = 0;     // what the fp16 tiles subtract from a weight's bf16 exponent field
  HugePageBuffer packed_;  // [blocks, padded_in / 2, 2 halves, 16]: see the header comment
};

REFDEC_NAMESPACE_END
