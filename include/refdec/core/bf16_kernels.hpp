// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The element-wise parts of a Llama layer on bf16 rows, each in one pass: RMSNorm and rotary
// embeddings (SwiGLU runs in the products' epilogues, packed_linear.hpp). A decoding step on the
// CPU runs them on one to a few dozen rows per layer, where libtorch spends its time dispatching
// rather than computing: RMSNorm is 8 ATen ops, a rotary embedding 11, each allocating its
// result (docs/speed.md has the step's time before and after). Plain loops over bf16 bits
// (uint16_t), written so that the compiler vectorises them; no libtorch.

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

namespace bf16 {

/// The float a bf16 value (its bits) stands for: exact.
inline float to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

/// The bf16 nearest to `x`, ties to even, and NaN as 0x7FC0: as c10::BFloat16 rounds.
inline std::uint16_t from_float(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const auto rounded = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  return x != x ? std::uint16_t{0x7FC0} : rounded;
}

/// One row of RMSNorm as the reference model computes it in bf16: with r = 1 / sqrt(mean(x^2) +
/// eps) in float, out = bf16(bf16(x r) w). x, weight, out: `n` values each (out may be x).
inline void rms_norm(const std::uint16_t* x, const std::uint16_t* weight, std::uint16_t* out, std::size_t n, float eps) {
  float squares = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = to_float(x[i]);
    squares += v * v;
  }
  const float r = 1.0f / std::sqrt(squares / static_cast<float>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) out[i] = from_float(to_float(from_float(to_float(x[i]) * r)) * to_float(weight[i]));
}

/// Rotary embedding of one token's `heads` heads of size `d` (even), in place: each pair (a, b)
/// of a head becomes (a cos - b sin, a sin + b cos), in float, rounded once. Pair i of a head is
/// dimensions (2i, 2i + 1) (`half` false: llama2.c) or (i, i + d/2) (`half`: Hugging Face); cos
/// and sin hold the token's d/2 angles' values.
inline void rotate(std::uint16_t* x, std::size_t heads, std::size_t d, const float* cos, const float* sin, bool half) {
  const std::size_t pairs = d / 2;
  const std::size_t second = half ? pairs : 1, step = half ? 1 : 2;  // offset of b from a, of pair i+1 from pair i
  for (std::size_t h = 0; h < heads; ++h) {
    std::uint16_t* head = x + h * d;
    for (std::size_t i = 0; i < pairs; ++i) {
      std::uint16_t* a = head + i * step;
      const float va = to_float(a[0]), vb = to_float(a[second]);
      a[0] = from_float(va * cos[i] - vb * sin[i]);
      a[second] = from_float(va * sin[i] + vb * cos[i]);
    }
  }
}

}  // namespace bf16

REFDEC_NAMESPACE_END
