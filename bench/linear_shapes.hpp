// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The linear layers and attention heads of the speed benchmarks' model shapes, without libtorch:
// what refdec-stream-linear and refdec-kernel-ab stream (bench/shapes.hpp is the whole model's
// configuration, for the benchmarks that run it).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace refdec_bench {

/// A decoder's sizes, as far as its linear layers and attention go.
struct LinearShape {
  std::int64_t dim, hidden, layers, heads, kv_heads;

  std::int64_t head_dim() const { return dim / heads; }
  std::int64_t kv_dim() const { return head_dim() * kv_heads; }
  /// Query heads per kv head.
  std::int64_t group() const { return heads / kv_heads; }

  /// [out, in] of every linear layer, layer by layer, as the packed model holds them: q, k and v
  /// fused, o, gate, up, down.
  std::vector<std::pair<std::int64_t, std::int64_t>> products() const {
    std::vector<std::pair<std::int64_t, std::int64_t>> all;
    for (std::int64_t l = 0; l < layers; ++l)
      all.insert(all.end(), {{dim + 2 * kv_dim(), dim}, {dim, dim}, {hidden, dim}, {hidden, dim}, {dim, hidden}});
    return all;
  }
};

/// `1b` (TinyLlama-1.1B), `7b` (Llama-2-7B) or `tiny` (stories260K's shape), as bench/shapes.hpp
/// has them; nothing for another name.
inline std::optional<LinearShape> linear_shape(const std::string& name) {
  if (name == "1b") return LinearShape{2048, 5632, 22, 32, 4};
  if (name == "7b") return LinearShape{4096, 11008, 32, 32, 32};
  if (name == "tiny") return LinearShape{64, 172, 5, 8, 4};
  return std::nullopt;
}

/// `count` bf16 values between 1.0 and 1.99, varied, continuing the sequence `bits` holds: weights
/// whose products no compiler or CPU can shortcut.
inline std::vector<std::uint16_t> varied_weights(std::int64_t count, std::uint16_t& bits) {
  std::vector<std::uint16_t> w(static_cast<std::size_t>(count));
  for (auto& v : w) v = bits = static_cast<std::uint16_t>(0x3c00 | ((bits * 75u + 74u) & 0xff));
  return w;
}

}  // namespace refdec_bench
