// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The streaming half-precision linear kernels, each set of tiles (AVX2, AVX-512, AVX512_FP16,
// AVX512_BF16)
// against the float64 product of the same values: every row count a step has (1 to 64), sizes
// that are not multiples of the blocks, bf16 and fp16, every epilogue, and threads sharing one
// layer. A set this CPU does not run (or runs only above REFDEC_CPU_ISA's cap) skips with the
// reason. The CPU probe's cap and its errors.

#include "refdec/cpu/stream_linear.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using refdec::Epilogue;
using refdec::HalfFormat;
using refdec::StreamLinear;
using refdec::StreamShare;
using refdec::StreamTiles;

// The formats `tiles` run here; skips the test, naming why, where they run none.
#define REFDEC_FORMATS_OR_SKIP(tiles)                                      \
  std::vector<HalfFormat> formats;                                         \
  for (const HalfFormat f : {HalfFormat::kBf16, HalfFormat::kFp16})        \
    if (StreamLinear::unavailable(tiles, f).empty()) formats.push_back(f); \
  if (formats.empty()) GTEST_SKIP() << "not run on this CPU: " << StreamLinear::unavailable(tiles, HalfFormat::kBf16)

std::vector<std::uint16_t> random_halves(std::mt19937& rng, std::size_t n, HalfFormat format) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = StreamLinear::from_float(normal(rng), format);
  return v;
}

double value(std::uint16_t bits, HalfFormat format) { return StreamLinear::to_float(bits, format); }

// x W^T in float64 from the same half values: [rows, out].
std::vector<double> reference(const std::vector<std::uint16_t>& x, const std::vector<std::uint16_t>& w, std::int64_t rows, std::int64_t out,
                              std::int64_t in, HalfFormat format) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < out; ++c) {
      double s = 0;
      for (std::int64_t k = 0; k < in; ++k)
        s += value(x[static_cast<std::size_t>(r * in + k)], format) * value(w[static_cast<std::size_t>(c * in + k)], format);
      y[static_cast<std::size_t>(r * out + c)] = s;
    }
  return y;
}

const char* name(HalfFormat f) { return f == HalfFormat::kBf16 ? "bf16" : "fp16"; }

class StreamTilesTest : public ::testing::TestWithParam<StreamTiles> {};

INSTANTIATE_TEST_SUITE_P(StreamLinear, StreamTilesTest, ::testing::ValuesIn(refdec::kAllStreamTiles), [](const auto& param_info) {
  switch (param_info.param) {
    case StreamTiles::kAvx2: return std::string("Avx2");
    case StreamTiles::kAvx512: return std::string("Avx512");
    case StreamTiles::kAvx512Fp16: return std::string("Avx512Fp16");
    case StreamTiles::kAvx512Bf16: return std::string("Avx512Bf16");
  }
  return std::string("Unknown");
});

TEST_P(StreamTilesTest, EqualsTheFloat64ProductForEveryRowCountAndEpilogue) {
  const StreamTiles tiles = GetParam();
  REFDEC_FORMATS_OR_SKIP(tiles);
  std::mt19937 rng(7);
  for (const HalfFormat format : formats)
    for (const auto& [out, in] : {std::pair<std::int64_t, std::int64_t>{16, 2}, {37, 65}, {130, 96}, {5, 1}}) {
      const auto w = random_halves(rng, static_cast<std::size_t>(out * in), format);
      const StreamLinear linear(w.data(), out, in, format);
      EXPECT_EQ(linear.out_features(), out);
      EXPECT_EQ(linear.in_features(), in);
      EXPECT_EQ(linear.format(), format);
      EXPECT_EQ(linear.bytes(), (out + 15) / 16 * 16 * ((in + 1) / 2 * 2) * 2);  // padded to blocks and pairs
      for (std::int64_t rows = 1; rows <= 64; ++rows) {
        const auto x = random_halves(rng, static_cast<std::size_t>(rows * in), format);
        const auto want = reference(x, w, rows, out, in, format);
        const std::size_t n = want.size();
        // Summation order is the only difference in float32: relative to the sum of magnitudes.
        // The fp16 tiles' sums round to fp16 for a chunk of pairs: about 2^-11 of a chunk's sum at
        // each addition: within 2^-6 of a sum's typical size (sqrt(in) here).
        const double tol32 = (tiles == StreamTiles::kAvx512Fp16 ? std::ldexp(1.0, -6) : 4e-5) * std::sqrt(static_cast<double>(in));
        // Rounded to the format: its half-ulp relative error plus the float32 bound.
        const double tol16 = (format == HalfFormat::kBf16 ? 1.0 / 256 : 1.0 / 2048) + 1e-5;
        const auto check = [&](const std::vector<double>& expect, const auto& got, double rel, const char* what) {
          for (std::size_t i = 0; i < n; ++i) {
            const double g = [&] {
              if constexpr (std::is_same_v<std::decay_t<decltype(got)>, std::vector<float>>)
                return static_cast<double>(got[i]);
              else
                return value(got[i], format);
            }();
            ASSERT_NEAR(g, expect[i], rel * (1.0 + std::abs(expect[i])) + tol32)
                << what << " " << refdec::stream_tiles_name(tiles) << " " << name(format) << " " << out << "x" << in << ", " << rows
                << " rows, element " << i;
          }
        };
        std::vector<float> f32(n);
        linear.run(tiles, x.data(), rows, f32.data(), true);
        check(want, f32, 0.0, "store f32");
        std::vector<std::uint16_t> h(n);
        linear.run(tiles, x.data(), rows, h.data(), false);
        check(want, h, tol16, "store half");
        // Accumulate: adds to what the output holds (the residual connection), rounded once.
        std::vector<float> acc(n);
        std::vector<double> acc_want(n);
        for (std::size_t i = 0; i < n; ++i) acc[i] = static_cast<float>(i % 7) - 3.0f, acc_want[i] = acc[i] + want[i];
        linear.run(tiles, x.data(), rows, acc.data(), true, Epilogue::kAccumulate);
        check(acc_want, acc, 0.0, "accumulate f32");
        std::vector<std::uint16_t> acc_h(n);
        for (std::size_t i = 0; i < n; ++i)
          acc_h[i] = StreamLinear::from_float(static_cast<float>(i % 5) - 2.0f, format), acc_want[i] = value(acc_h[i], format) + want[i];
        linear.run(tiles, x.data(), rows, acc_h.data(), false, Epilogue::kAccumulate);
        check(acc_want, acc_h, tol16, "accumulate half");
        // SwiGLU's epilogues.
        std::vector<double> silu_want(n), mul_want(n);
        for (std::size_t i = 0; i < n; ++i) silu_want[i] = want[i] / (1.0 + std::exp(-want[i]));
        linear.run(tiles, x.data(), rows, f32.data(), true, Epilogue::kSilu);
        check(silu_want, f32, 1e-6, "silu f32");
        const auto other = random_halves(rng, n, format);
        for (std::size_t i = 0; i < n; ++i) mul_want[i] = want[i] * value(other[i], format);
        linear.run(tiles, x.data(), rows, h.data(), false, Epilogue::kMultiply, other.data());
        check(mul_want, h, tol16, "multiply half");
        if (HasFatalFailure()) return;
      }
    }
}

// Threads that each take a run of blocks write exactly what one thread writes.
TEST_P(StreamTilesTest, ThreadsSplittingTheBlocksWriteWhatOneThreadWrites) {
  const StreamTiles tiles = GetParam();
  REFDEC_FORMATS_OR_SKIP(tiles);
  std::mt19937 rng(11);
  for (const HalfFormat format : formats) {
    const std::int64_t out = 200, in = 77, rows = 9;
    const auto w = random_halves(rng, static_cast<std::size_t>(out * in), format);
    const auto x = random_halves(rng, static_cast<std::size_t>(rows * in), format);
    const StreamLinear linear(w.data(), out, in, format);
    std::vector<float> alone(static_cast<std::size_t>(rows * out)), split(alone.size(), -1.0f);
    linear.run(tiles, x.data(), rows, alone.data(), true);
    std::vector<float> xf(static_cast<std::size_t>(linear.prepared_bytes(tiles, rows) / 4));
    linear.prepare(tiles, x.data(), rows, xf.data());
    std::vector<std::thread> threads;
    const std::int64_t parts = 4, per = (linear.blocks() + parts - 1) / parts;
    for (std::int64_t t = 0; t < parts; ++t)
      threads.emplace_back([&, t] {
        const std::int64_t first = std::min(t * per, linear.blocks()), last = std::min(first + per, linear.blocks());
        linear.run_blocks(tiles, xf.data(), rows, split.data(), true, Epilogue::kStore, nullptr, first, last);
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(alone, split) << name(format);
    // The same with the blocks shared (run_shared(), PackedLinear's split) by 3 threads, and by
    // 5 sharers on 2 threads (a thread running two sharers in turn, as libtorch's pool may).
    for (const auto& [sharers, threads_n] : {std::pair<std::int64_t, std::int64_t>{3, 3}, {5, 2}}) {
      std::vector<float> shared(alone.size(), -1.0f);
      StreamShare share(linear.blocks(), sharers);
      threads.clear();
      for (std::int64_t t = 0; t < threads_n; ++t)
        threads.emplace_back([&, t] {
          for (std::int64_t s = t; s < sharers; s += threads_n)
            linear.run_shared(tiles, xf.data(), rows, shared.data(), true, Epilogue::kStore, nullptr, share, s);
        });
      for (auto& th : threads) th.join();
      EXPECT_EQ(alone, shared) << name(format) << ", " << sharers << " sharers on " << threads_n << " threads";
    }
  }
}

// Every prefetch writes what kAhead writes, bit for bit (it changes where the weights are asked
// for, never a sum), at row counts of every tile shape: one and two rows (kAhead's far request),
// two blocks, one wide tile, tiles over several passes; with the blocks shared by two threads as well.
TEST_P(StreamTilesTest, EveryPrefetchWritesWhatAheadWrites) {
  const StreamTiles tiles = GetParam();
  REFDEC_FORMATS_OR_SKIP(tiles);
  std::mt19937 rng(17);
  for (const HalfFormat format : formats) {
    const std::int64_t out = 90, in = 301;
    const auto w = random_halves(rng, static_cast<std::size_t>(out * in), format);
    const StreamLinear linear(w.data(), out, in, format);
    for (const std::int64_t rows : {1, 2, 3, 8, 14, 16, 29}) {
      const auto x = random_halves(rng, static_cast<std::size_t>(rows * in), format);
      std::vector<float> ahead(static_cast<std::size_t>(rows * out));
      linear.run(tiles, x.data(), rows, ahead.data(), true);
      for (const refdec::StreamPrefetch prefetch : refdec::kAllStreamPrefetch) {
        std::vector<float> got(ahead.size(), -1.0f);
        linear.run(tiles, x.data(), rows, got.data(), true, Epilogue::kStore, nullptr, prefetch);
        EXPECT_EQ(got, ahead) << name(format) << ", " << rows << " rows, prefetch " << refdec::stream_prefetch_name(prefetch);
        std::vector<float> xf(static_cast<std::size_t>(linear.prepared_bytes(tiles, rows) / 4)), taken(ahead.size(), -1.0f);
        linear.prepare(tiles, x.data(), rows, xf.data());
        StreamShare share(linear.blocks(), 2);
        std::thread other(
            [&] { linear.run_shared(tiles, xf.data(), rows, taken.data(), true, Epilogue::kStore, nullptr, share, 1, prefetch); });
        linear.run_shared(tiles, xf.data(), rows, taken.data(), true, Epilogue::kStore, nullptr, share, 0, prefetch);
        other.join();
        EXPECT_EQ(taken, ahead) << name(format) << ", " << rows << " rows, blocks shared, prefetch " << refdec::stream_prefetch_name(prefetch);
      }
    }
  }
}

TEST(StreamLinear, NamesEveryPrefetch) {
  std::vector<std::string> names;
  for (const refdec::StreamPrefetch p : refdec::kAllStreamPrefetch) names.emplace_back(refdec::stream_prefetch_name(p));
  EXPECT_EQ(names, (std::vector<std::string>{"ahead", "l2", "none"}));
  EXPECT_EQ(refdec::kAllStreamPrefetch.front(), refdec::StreamPrefetch::kAhead) << "the default comes first";
}

// The dot tiles' input as prepare() documents it, for row counts below, at and past 16 and
// lengths with and without whole runs of 16 pairs and an odd last position.
TEST(StreamLinear, PreparesTheDotTilesInputPairByPairRowsSideBySide) {
  const std::string why = StreamLinear::unavailable(StreamTiles::kAvx512Bf16, HalfFormat::kBf16);
  if (!why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(5);
  for (const std::int64_t in : {1, 2, 31, 32, 33, 64, 65, 97})
    for (std::int64_t rows = 1; rows <= 40; ++rows) {
      const std::vector<std::uint16_t> w(static_cast<std::size_t>(3 * in), 0x3f80);
      const StreamLinear linear(w.data(), 3, in, HalfFormat::kBf16);
      const auto x = random_halves(rng, static_cast<std::size_t>(rows * in), HalfFormat::kBf16);
      std::vector<std::uint32_t> got(static_cast<std::size_t>(linear.prepared_bytes(StreamTiles::kAvx512Bf16, rows) / 4), 0xDEADBEEF);
      linear.prepare(StreamTiles::kAvx512Bf16, x.data(), rows, got.data());
      for (std::int64_t p = 0; p < linear.padded_in() / 2; ++p)
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::uint32_t low = x[static_cast<std::size_t>(r * in + 2 * p)];
          const std::uint32_t high = 2 * p + 1 < in ? x[static_cast<std::size_t>(r * in + 2 * p + 1)] : 0;
          ASSERT_EQ(got[static_cast<std::size_t>(p * rows + r)], low | high << 16)
              << in << " inputs, " << rows << " rows, pair " << p << ", row " << r;
        }
    }
}

// The float tiles' input as prepare() documents it: each pair's two values of every row in
// turn, exact (bf16 and fp16 widen to float32 exactly), the odd last position's partner 0.
TEST(StreamLinear, PreparesTheFloatTilesInputPairByPairRowsSideBySide) {
  std::mt19937 rng(6);
  for (const HalfFormat format : {HalfFormat::kBf16, HalfFormat::kFp16})
    for (const StreamTiles tiles : {StreamTiles::kAvx2, StreamTiles::kAvx512})
      for (const std::int64_t in : {1, 2, 31, 32, 33, 97})
        for (const std::int64_t rows : {1, 2, 5, 16, 17}) {
          const std::vector<std::uint16_t> w(static_cast<std::size_t>(3 * in), 0x3c00);
          const StreamLinear linear(w.data(), 3, in, format);
          const auto x = random_halves(rng, static_cast<std::size_t>(rows * in), format);
          ASSERT_EQ(linear.prepared_bytes(tiles, rows), rows * linear.padded_in() * 4);
          std::vector<float> got(static_cast<std::size_t>(linear.prepared_bytes(tiles, rows) / 4), -7.0f);
          linear.prepare(tiles, x.data(), rows, got.data());
          for (std::int64_t k = 0; k < linear.padded_in(); ++k)
            for (std::int64_t r = 0; r < rows; ++r) {
              const float want = k < in ? StreamLinear::to_float(x[static_cast<std::size_t>(r * in + k)], format) : 0.0f;
              ASSERT_EQ(got[static_cast<std::size_t>((k / 2 * rows + r) * 2 + k % 2)], want)
                  << name(format) << ", " << stream_tiles_name(tiles) << ", " << in << " inputs, " << rows << " rows, position " << k
                  << ", row " << r;
            }
        }
}

// The fp16 tiles scale weights and inputs into fp16's range by powers of two: long sums of
// positive products (every addition growing the sum) at scales far outside fp16's range, where
// an unscaled fp16 sum would overflow or vanish and one chunk's sum too long would stall, keep
// within a few of fp16's units of the float64 product, relative to it.
TEST(StreamLinear, Fp16TilesKeepTheirSumsInRangeAtAnyScale) {
  const std::string why = StreamLinear::unavailable(StreamTiles::kAvx512Fp16, HalfFormat::kBf16);
  if (!why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> positive(0.5f, 1.0f);
  const std::int64_t out = 32, in = 4097, rows = 5;
  for (const int weight_scale : {-40, 0, 20})
    for (const int input_scale : {-30, 0, 30}) {
      std::vector<std::uint16_t> w(static_cast<std::size_t>(out * in)), x(static_cast<std::size_t>(rows * in));
      for (auto& v : w) v = StreamLinear::from_float(std::ldexp(positive(rng), weight_scale), HalfFormat::kBf16);
      for (auto& v : x) v = StreamLinear::from_float(std::ldexp(positive(rng), input_scale), HalfFormat::kBf16);
      const StreamLinear linear(w.data(), out, in, HalfFormat::kBf16);
      const auto want = reference(x, w, rows, out, in, HalfFormat::kBf16);
      std::vector<float> got(want.size());
      linear.run(StreamTiles::kAvx512Fp16, x.data(), rows, got.data(), true);
      for (std::size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i] / want[i], 1.0, std::ldexp(1.0, -9))
            << "weights 2^" << weight_scale << ", inputs 2^" << input_scale << ", element " << i;
    }
}

TEST(StreamLinear, RejectsBadInput) {
  const std::vector<std::uint16_t> w(8, 0);
  refdec_test::expect_error([&] { StreamLinear l(w.data(), 0, 8, HalfFormat::kBf16); },
                            "StreamLinear: needs a weight of positive sizes, got [0, 8]");
  refdec_test::expect_error([&] { StreamLinear l(nullptr, 1, 8, HalfFormat::kBf16); }, "StreamLinear: needs a weight of positive sizes");
  const StreamLinear linear(w.data(), 2, 4, HalfFormat::kBf16), fp16(w.data(), 2, 4, HalfFormat::kFp16);
  std::vector<float> xf(4), out(2);
  // Tiles the CPU (or the cap) does not run are refused by name, whatever the CPU.
  for (const StreamTiles tiles : refdec::kAllStreamTiles)
    if (!StreamLinear::unavailable(tiles, HalfFormat::kBf16).empty())
      refdec_test::expect_error([&] { linear.run_blocks(tiles, xf.data(), 1, out.data(), true, Epilogue::kStore, nullptr, 0, 1); },
                                std::string("StreamLinear: the ") + refdec::stream_tiles_name(tiles) + " tiles need");
  refdec_test::expect_error(
      [&] { fp16.run_blocks(StreamTiles::kAvx512Bf16, xf.data(), 1, out.data(), true, Epilogue::kStore, nullptr, 0, 1); },
      "StreamLinear: the avx512-bf16 tiles take bf16 weights only");
  refdec_test::expect_error(
      [&] { fp16.run_blocks(StreamTiles::kAvx512Fp16, xf.data(), 1, out.data(), true, Epilogue::kStore, nullptr, 0, 1); },
      "StreamLinear: the avx512-fp16 tiles take bf16 weights only");
  std::vector<std::uint16_t> x(4);
  refdec_test::expect_error([&] { fp16.prepare(StreamTiles::kAvx512Fp16, x.data(), 1, xf.data()); },
                            "StreamLinear: the avx512-fp16 tiles take bf16 weights only");
  EXPECT_EQ(StreamLinear::widest(HalfFormat::kFp16) == StreamTiles::kAvx512Bf16, false);
  if (!StreamLinear::cpu_runs()) GTEST_SKIP() << "this CPU does not run AVX2 with FMA and F16C: only the errors were checked";
  const StreamTiles tiles = StreamLinear::widest(HalfFormat::kBf16);
  refdec_test::expect_error([&] { linear.run_blocks(tiles, xf.data(), 1, out.data(), true, Epilogue::kStore, nullptr, 0, 2); },
                            "StreamLinear: blocks [0, 2) outside [0, 1)");
  refdec_test::expect_error([&] { linear.run_blocks(tiles, xf.data(), 1, out.data(), true, Epilogue::kMultiply, nullptr, 0, 1); },
                            "Epilogue::kMultiply needs the values to multiply by");
  refdec_test::expect_error([&] { linear.run_blocks(tiles, xf.data(), 1, out.data(), true, Epilogue::kStore, w.data(), 0, 1); },
                            "and only it takes them");
}

// The widest tiles are the widest the CPU runs under the cap, for each format.
TEST(StreamLinear, WidestFollowsTheCpu) {
  const auto& isa = refdec::cpu_isa();
  const StreamTiles bf16 = StreamLinear::widest(HalfFormat::kBf16), fp16 = StreamLinear::widest(HalfFormat::kFp16);
  EXPECT_EQ(bf16, isa.runs_avx512() && isa.avx512_bf16                              ? StreamTiles::kAvx512Bf16
                  : isa.runs_avx512() && isa.avx512_fp16 && REFDEC_HAVE_AVX512_FP16 ? StreamTiles::kAvx512Fp16
                  : isa.runs_avx512()                                               ? StreamTiles::kAvx512
                                                                                    : StreamTiles::kAvx2);
  EXPECT_EQ(fp16, isa.runs_avx512() ? StreamTiles::kAvx512 : StreamTiles::kAvx2);
  EXPECT_EQ(StreamLinear::tile_rows(StreamTiles::kAvx2), 4);
  EXPECT_EQ(StreamLinear::tile_rows(StreamTiles::kAvx512), 16);
  EXPECT_EQ(StreamLinear::tile_rows(StreamTiles::kAvx512Bf16), 16);
  EXPECT_EQ(StreamLinear::tile_rows(StreamTiles::kAvx512Fp16), 16);
}

#if REFDEC_X86
__attribute__((target("f16c"))) std::uint16_t f16c_from_float(float v) {
  return static_cast<std::uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
}
#endif

// fp16 conversions (cpu/bf16_kernels.hpp, no F16C needed): exact both ways for every half value;
// from float32 to nearest even, bit for bit what F16C gives where the CPU has it.
TEST(Fp16, ConversionsAreExactAndRoundAsF16cDoes) {
  namespace fp16 = refdec::fp16;
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = fp16::to_float(h);
    if (f != f) continue;  // NaN payloads are not kept
    ASSERT_EQ(fp16::from_float(f), h) << std::hex << bits;
  }
  EXPECT_EQ(fp16::to_float(0x3C00), 1.0f);
  EXPECT_EQ(fp16::to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16::from_float(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // a tie goes to the even neighbour
  EXPECT_EQ(fp16::from_float(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(fp16::from_float(70000.0f), 0x7C00);  // overflow to infinity
  EXPECT_EQ(fp16::from_float(std::numeric_limits<float>::quiet_NaN()), 0x7E00);
#if REFDEC_X86
  if (!refdec::detect_cpu_isa().f16c) GTEST_SKIP() << "this CPU has no F16C: the comparison with it was not run";
  std::mt19937 rng(2);
  for (int i = 0; i < 1000000; ++i) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (v != v) continue;
    ASSERT_EQ(fp16::from_float(v), f16c_from_float(v)) << v;
  }
#else
  GTEST_SKIP() << "not an x86 CPU: the comparison with F16C was not run";
#endif
}

TEST(CpuIsa, CapsRemoveWhatTheyNameAndDescribeThemselves) {
  refdec::CpuIsa all;
  all.avx2 = all.fma = all.f16c = all.avx512f = all.avx512bw = all.avx512vl = all.avx512_bf16 = all.avx512_fp16 = true;
  EXPECT_TRUE(all.runs_avx2());
  EXPECT_TRUE(all.runs_avx512_bf16());
  EXPECT_EQ(all.describe(), "avx2 fma f16c avx512f avx512bw avx512vl avx512_bf16 avx512_fp16");
  const auto avx2 = all.capped("avx2");
  EXPECT_TRUE(avx2.runs_avx2());
  EXPECT_FALSE(avx2.runs_avx512_bf16());
  EXPECT_EQ(avx2.describe(), "avx2 fma f16c (capped by REFDEC_CPU_ISA=avx2)");
  EXPECT_FALSE(avx2.runs_avx512());
  const auto f = all.capped("avx512f");
  EXPECT_TRUE(f.runs_avx512());
  EXPECT_FALSE(f.avx512_bf16);
  EXPECT_FALSE(f.avx512_fp16);
  EXPECT_EQ(f.describe(), "avx2 fma f16c avx512f avx512bw avx512vl (capped by REFDEC_CPU_ISA=avx512f)");
  const auto base = all.capped("baseline");
  EXPECT_FALSE(base.runs_avx2());
  EXPECT_EQ(base.describe(), "no AVX2 or AVX-512 (capped by REFDEC_CPU_ISA=baseline)");
  EXPECT_TRUE(all.capped("avx512").runs_avx512_bf16());
  EXPECT_TRUE(all.capped("avx512").avx512_fp16);
  refdec_test::expect_error([&] { (void)all.capped("sse"); }, "REFDEC_CPU_ISA must be avx512, avx512f, avx2 or baseline, got 'sse'");
  // The process's own view is the hardware's under the cap in the environment.
  const char* cap = std::getenv("REFDEC_CPU_ISA");
  const auto want = cap && *cap ? refdec::detect_cpu_isa().capped(cap) : refdec::detect_cpu_isa();
  EXPECT_EQ(refdec::cpu_isa().describe(), want.describe());
}

}  // namespace
