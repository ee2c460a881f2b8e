// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The 16-bit float formats (bf16, fp16) and their exact conversions, and the element-wise parts
// of a Llama layer on rows of them, each in one pass: RMSNorm and rotary
// embeddings (SwiGLU runs in the products' epilogues, packed_linear.hpp). A decoding step on the
// CPU runs them on one to a few dozen rows per layer, where libtorch spends its time dispatching
// rather than computing: RMSNorm is 8 ATen ops, a rotary embedding 11, each allocating its
// result (bench/step_ab.sh measured whole steps 3-9% shorter with these passes). Plain loops over the values' bits
// (uint16_t), written so that the compiler vectorises them; no libtorch.

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "refdec/core/config.hpp"
#include "refdec/cpu/cpu_isa.hpp"

REFDEC_NAMESPACE_BEGIN

/// The 16-bit floating-point formats of weights and activations.
enum class HalfFormat {
  kBf16,  ///< bfloat16: 8 exponent bits, 7 mantissa bits
  kFp16,  ///< IEEE half: 5 exponent bits, 10 mantissa bits
};

namespace bf16 {

/// The float a bf16 value (its bits) stands for: exact.
inline float to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

/// The bf16 nearest to `x`, ties to even, and NaN as 0x7FC0: as c10::BFloat16 rounds.
inline std::uint16_t from_float(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const auto rounded = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  return x != x ? std::uint16_t{0x7FC0} : rounded;
}

}  // namespace bf16

namespace fp16 {

/// The float an IEEE half value (its bits) stands for: exact.
inline float to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: man 2^-24
    const float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  const std::uint32_t bits = exp == 0x1F ? sign | 0x7F800000u | (man << 13) : sign | ((exp + 112) << 23) | (man << 13);
  return std::bit_cast<float>(bits);
}

/// The half nearest to `x`, ties to even (overflow to infinity, NaN as 0x7E00): as F16C's
/// conversion rounds.
inline std::uint16_t from_float(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // 65520 and up round to infinity
  if (a < 0x38800000u) {  // below 2^-14: a multiple of 2^-24, rounded by adding 0.5 (whose ulp is 2^-24)
    const float v = std::bit_cast<float>(a) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(v) - 0x3F000000u));
  }
  // Rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits, ties to even.
  return static_cast<std::uint16_t>(sign | ((a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13));
}

}  // namespace fp16

namespace half {

/// The float a value of format F stands for (exact), and the value of F nearest a float.
template <HalfFormat F>
inline float to_float(std::uint16_t bits) {
  return F == HalfFormat::kBf16 ? bf16::to_float(bits) : fp16::to_float(bits);
}
template <HalfFormat F>
inline std::uint16_t from_float(float x) {
  return F == HalfFormat::kBf16 ? bf16::from_float(x) : fp16::from_float(x);
}

namespace detail {

// RMSNorm's row as rms_norm() documents it, inlined into each instruction set's copy below: the
// same plain loops, which the compiler vectorises for the set of the function it lands in (16
// rows of the 1.1B shape: 21 us a layer for x86-64's baseline, 10 for AVX2, 6 for AVX-512, one
// thread), at -O2 too (REFDEC_VECTORISE: without it GCC 12 left the AVX-512 copy scalar there).
// Every copy computes the same values: the squares of 16-bit values are exact in float, so a fused
// multiply-add sums them as a multiply then an add does.
template <HalfFormat F>
__attribute__((always_inline)) inline void rms_norm_row(const std::uint16_t* x, const std::uint16_t* weight, std::uint16_t* out,
                                                        std::size_t n, float eps) {
  // Sixteen partial sums, which the compiler vectorises: one sum is a chain of dependent additions
  // (at 16 rows of the 1.1B shape, 1.4 ms of a step, on one thread).
  float part[16] = {};
  const std::size_t whole = n / 16 * 16;
  for (std::size_t k = 0; k < whole; k += 16)
    for (std::size_t j = 0; j < 16; ++j) {
      const float v = to_float<F>(x[k + j]);
      part[j] += v * v;
    }
  for (std::size_t k = whole; k < n; ++k) {
    const float v = to_float<F>(x[k]);
    part[k - whole] += v * v;
  }
  float squares = 0.0f;
  for (const float p : part) squares += p;
  const float r = 1.0f / std::sqrt(squares / static_cast<float>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) out[i] = from_float<F>(to_float<F>(from_float<F>(to_float<F>(x[i]) * r)) * to_float<F>(weight[i]));
}

template <HalfFormat F>
REFDEC_VECTORISE REFDEC_AVX2_TARGET void rms_norm_avx2(const std::uint16_t* x, const std::uint16_t* weight, std::uint16_t* out,
                                                       std::size_t n, float eps) {
  rms_norm_row<F>(x, weight, out, n, eps);
}
template <HalfFormat F>
REFDEC_VECTORISE REFDEC_AVX512_TARGET void rms_norm_avx512(const std::uint16_t* x, const std::uint16_t* weight, std::uint16_t* out,
                                                           std::size_t n, float eps) {
  rms_norm_row<F>(x, weight, out, n, eps);
}

}  // namespace detail

/// One row of RMSNorm as the reference model computes it in format F: with r = 1 / sqrt(mean(x^2) +
/// eps) in float, out = F(F(x r) w). x, weight, out: `n` values each (out may be x). The same
/// values on every CPU, in the widest instruction set it runs (cpu_isa()).
template <HalfFormat F>
inline void rms_norm(const std::uint16_t* x, const std::uint16_t* weight, std::uint16_t* out, std::size_t n, float eps) {
#if REFDEC_X86
  if (cpu_isa().runs_avx512()) return detail::rms_norm_avx512<F>(x, weight, out, n, eps);
  if (cpu_isa().runs_avx2()) return detail::rms_norm_avx2<F>(x, weight, out, n, eps);
#endif
  detail::rms_norm_row<F>(x, weight, out, n, eps);
}

/// Rotary embedding of one token's `heads` heads of size `d` (even), in place: each pair (a, b)
/// of a head becomes (a cos - b sin, a sin + b cos), in float, rounded once. Pair i of a head is
/// dimensions (2i, 2i + 1) (`half` false: llama2.c) or (i, i + d/2) (`half`: Hugging Face); cos
/// and sin hold the token's d/2 angles' values. Values of format F.
template <HalfFormat F>
inline void rotate(std::uint16_t* x, std::size_t heads, std::size_t d, const float* cos, const float* sin, bool half) {
  const std::size_t pairs = d / 2;
  const std::size_t second = half ? pairs : 1, step = half ? 1 : 2;  // offset of b from a, of pair i+1 from pair i
  for (std::size_t h = 0; h < heads; ++h) {
    std::uint16_t* head = x + h * d;
    for (std::size_t i = 0; i < pairs; ++i) {
      std::uint16_t* a = head + i * step;
      const float va = to_float<F>(a[0]), vb = to_float<F>(a[second]);
      a[0] = from_float<F>(va * cos[i] - vb * sin[i]);
      a[second] = from_float<F>(va * sin[i] + vb * cos[i]);
    }
  }
}

}  // namespace half

REFDEC_NAMESPACE_END
