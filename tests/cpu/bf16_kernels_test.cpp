// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The bf16 row kernels against float64 references: conversions bit-exact, RMSNorm within the two
// roundings the reference model makes, rotary pairs in both pairings.

#include "refdec/cpu/bf16_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace {

using refdec::bf16::from_float;
using refdec::bf16::to_float;

std::vector<std::uint16_t> random_row(std::mt19937& rng, std::size_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<std::uint16_t> row(n);
  for (auto& v : row) v = from_float(normal(rng));
  return row;
}

// Distance in bf16 steps between two finite values of the same sign (0 for equal bits).
int steps_apart(std::uint16_t a, std::uint16_t b) { return std::abs(static_cast<int>(a) - static_cast<int>(b)); }

TEST(Bf16Kernels, ConversionsRoundToNearestEven) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {  // every bf16 value comes back as itself
    const auto b = static_cast<std::uint16_t>(bits);
    if (std::isnan(to_float(b))) {
      EXPECT_EQ(from_float(to_float(b)), 0x7FC0) << std::hex << bits;
    } else {
      ASSERT_EQ(from_float(to_float(b)), b) << std::hex << bits;
    }
  }
  EXPECT_EQ(to_float(0x3F80), 1.0f);
  EXPECT_EQ(to_float(0xC040), -3.0f);
  const float ulp = 1.0f / 128.0f;  // bf16's spacing at 1
  EXPECT_EQ(from_float(1.0f + ulp / 2), 0x3F80) << "a tie goes to the even neighbour, down";
  EXPECT_EQ(from_float(1.0f + 3 * ulp / 2), 0x3F82) << "a tie goes to the even neighbour, up";
  EXPECT_EQ(from_float(1.0f + ulp / 2 + ulp / 64), 0x3F81) << "above the tie goes up";
  EXPECT_EQ(from_float(-1.0f - ulp / 2 - ulp / 64), 0xBF81);
  EXPECT_EQ(from_float(std::numeric_limits<float>::max()), 0x7F80) << "rounds to infinity as c10::BFloat16 does";
  EXPECT_EQ(from_float(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(from_float(std::numeric_limits<float>::quiet_NaN()), 0x7FC0);
}

// Every instruction set's copy of RMSNorm writes the same bits as the baseline's, for both
// formats (the squares are exact in float, so fused multiply-adds change no sum). A set this CPU
// does not run is left out, named.
TEST(Bf16Kernels, RmsNormIsTheSameOnEveryInstructionSet) {
  namespace detail = refdec::half::detail;
  const refdec::CpuIsa& isa = refdec::cpu_isa();
  if (!isa.runs_avx2()) GTEST_SKIP() << "this CPU runs only x86-64's baseline (" << isa.describe() << "): nothing to compare";
  if (!isa.runs_avx512()) std::cout << "[ NOTE     ] AVX-512 copy not compared: this CPU runs " << isa.describe() << "\n";
  std::mt19937 rng(9);
  for (const std::size_t n : {1, 15, 16, 33, 2048, 5000})
    for (const float scale : {1e-3f, 1.0f, 300.0f}) {
      auto x = random_row(rng, n, scale), w = random_row(rng, n, 1.0f);
      std::vector<std::uint16_t> xh(n), wh(n);  // the same values' bits read as fp16 (finite, any range)
      for (std::size_t i = 0; i < n; ++i) xh[i] = x[i] & 0xBBFF, wh[i] = w[i] & 0xBBFF;
      const auto check = [&](auto format, const std::vector<std::uint16_t>& in, const std::vector<std::uint16_t>& weight) {
        constexpr refdec::HalfFormat F = decltype(format)::value;
        std::vector<std::uint16_t> base(n), avx2(n), avx512(n);
        detail::rms_norm_row<F>(in.data(), weight.data(), base.data(), n, 1e-5f);
        detail::rms_norm_avx2<F>(in.data(), weight.data(), avx2.data(), n, 1e-5f);
        EXPECT_EQ(avx2, base) << n << " values of scale " << scale;
        if (!isa.runs_avx512()) return;
        detail::rms_norm_avx512<F>(in.data(), weight.data(), avx512.data(), n, 1e-5f);
        EXPECT_EQ(avx512, base) << n << " values of scale " << scale;
      };
      check(std::integral_constant<refdec::HalfFormat, refdec::HalfFormat::kBf16>{}, x, w);
      check(std::integral_constant<refdec::HalfFormat, refdec::HalfFormat::kFp16>{}, xh, wh);
    }
}

// RMSNorm in float64, then the reference model's two roundings (after the scaling, after the
// weight): the kernel accumulates in float, so it may land one bf16 step away.
TEST(Bf16Kernels, RmsNormIsTheReferenceModelsUpToOneStep) {
  std::mt19937 rng(3);
  for (const std::size_t n : {1, 7, 64, 2048, 5000}) {
    for (const float scale : {1e-3f, 1.0f, 300.0f}) {
      const auto x = random_row(rng, n, scale), w = random_row(rng, n, 1.0f);
      const float eps = 1e-5f;
      std::vector<std::uint16_t> out(n);
      refdec::half::rms_norm<refdec::HalfFormat::kBf16>(x.data(), w.data(), out.data(), n, eps);
      double squares = 0;
      for (const auto v : x) squares += static_cast<double>(to_float(v)) * to_float(v);
      const double r = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
      int worst = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto want = from_float(static_cast<float>(to_float(from_float(static_cast<float>(to_float(x[i]) * r))) *
                                                        static_cast<double>(to_float(w[i]))));
        worst = std::max(worst, steps_apart(out[i], want));
      }
      EXPECT_LE(worst, 1) << "n " << n << ", scale " << scale;
    }
  }
  // In place, as the header allows.
  auto x = random_row(rng, 33, 2.0f);
  const auto w = random_row(rng, 33, 1.0f);
  std::vector<std::uint16_t> separate(33);
  refdec::half::rms_norm<refdec::HalfFormat::kBf16>(x.data(), w.data(), separate.data(), 33, 1e-6f);
  refdec::half::rms_norm<refdec::HalfFormat::kBf16>(x.data(), w.data(), x.data(), 33, 1e-6f);
  EXPECT_EQ(x, separate);
}

// Both pairings: pair i is (2i, 2i+1) or (i, i + d/2); a quarter turn maps (a, b) to (-b, a)
// exactly, which pins down the pairing; general angles match float64 within one rounding.
TEST(Bf16Kernels, RotateTurnsEachPairOfEachHead) {
  std::mt19937 rng(5);
  const std::size_t heads = 3, d = 8, pairs = d / 2;
  for (const bool half : {false, true}) {
    const auto x = random_row(rng, heads * d, 1.0f);
    const auto pair_of = [&](std::size_t i) { return half ? std::pair{i, i + pairs} : std::pair{2 * i, 2 * i + 1}; };
    std::vector<float> cos(pairs, 0.0f), sin(pairs, 1.0f);
    auto turned = x;
    refdec::half::rotate<refdec::HalfFormat::kBf16>(turned.data(), heads, d, cos.data(), sin.data(), half);
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < pairs; ++i) {
        const auto [a, b] = pair_of(i);
        EXPECT_EQ(to_float(turned[h * d + a]), -to_float(x[h * d + b])) << "half " << half << " head " << h << " pair " << i;
        EXPECT_EQ(to_float(turned[h * d + b]), to_float(x[h * d + a])) << "half " << half << " head " << h << " pair " << i;
      }
    std::vector<double> angle(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
      angle[i] = 0.3 + 1.7 * static_cast<double>(i);
      cos[i] = static_cast<float>(std::cos(angle[i]));
      sin[i] = static_cast<float>(std::sin(angle[i]));
    }
    auto rotated = x;
    refdec::half::rotate<refdec::HalfFormat::kBf16>(rotated.data(), heads, d, cos.data(), sin.data(), half);
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < pairs; ++i) {
        const auto [a, b] = pair_of(i);
        const double va = to_float(x[h * d + a]), vb = to_float(x[h * d + b]);
        EXPECT_LE(steps_apart(rotated[h * d + a], from_float(static_cast<float>(va * std::cos(angle[i]) - vb * std::sin(angle[i])))), 1);
        EXPECT_LE(steps_apart(rotated[h * d + b], from_float(static_cast<float>(va * std::sin(angle[i]) + vb * std::cos(angle[i])))), 1);
      }
  }
}

// The same RMSNorm and rotation on fp16 rows: within one fp16 step of the float64 reference.
TEST(Bf16Kernels, Fp16RowsNormAndRotateToTheReference) {
  using refdec::HalfFormat;
  namespace fp16 = refdec::fp16;
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = 96;
  std::vector<std::uint16_t> x(n), w(n), out(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = fp16::from_float(3.0f * normal(rng)), w[i] = fp16::from_float(normal(rng));
  refdec::half::rms_norm<HalfFormat::kFp16>(x.data(), w.data(), out.data(), n, 1e-5f);
  double squares = 0;
  for (const auto v : x) squares += static_cast<double>(fp16::to_float(v)) * fp16::to_float(v);
  const double r = 1.0 / std::sqrt(squares / static_cast<double>(n) + 1e-5);
  for (std::size_t i = 0; i < n; ++i) {
    const auto want = fp16::from_float(static_cast<float>(fp16::to_float(fp16::from_float(static_cast<float>(fp16::to_float(x[i]) * r))) *
                                                          static_cast<double>(fp16::to_float(w[i]))));
    EXPECT_LE(steps_apart(out[i], want), 1) << i;
  }
  std::vector<float> cos(4, 0.0f), sin(4, 1.0f);  // a quarter turn: exact
  auto turned = x;
  refdec::half::rotate<HalfFormat::kFp16>(turned.data(), 1, 8, cos.data(), sin.data(), false);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(fp16::to_float(turned[2 * i]), -fp16::to_float(x[2 * i + 1]));
    EXPECT_EQ(fp16::to_float(turned[2 * i + 1]), fp16::to_float(x[2 * i]));
  }
}

}  // namespace
