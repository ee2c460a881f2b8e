// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Synthetic token text for the benchmarks: repetitive the way documents are.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "refdec/core/config.hpp"

namespace refdec_bench {

using Tokens = std::vector<refdec::Token>;

/// Zipf-distributed words from a `vocab`-word vocabulary, with one run in three a passage of 8-64
/// tokens copied from `source` (or from the text itself when `source` is empty). Deterministic for
/// a given seed.
inline Tokens make_text(std::size_t len, const Tokens& source, std::uint32_t seed, std::size_t vocab = 2000) {
  std::mt19937 rng(seed);
  std::vector<double> weights(vocab);
  for (std::size_t r = 0; r < weights.size(); ++r) weights[r] = 1.0 / static_cast<double>(r + 1);
  std::discrete_distribution<refdec::Token> word(weights.begin(), weights.end());
  Tokens out;
  out.reserve(len);
  while (out.size() < len) {
    const Tokens& src = source.empty() ? out : source;
    if (rng() % 3 == 0 && src.size() > 64) {
      const std::size_t n = 8 + rng() % 57;
      const std::size_t from = rng() % (src.size() - n);
      const Tokens passage(src.begin() + static_cast<std::ptrdiff_t>(from),
                           src.begin() + static_cast<std::ptrdiff_t>(from + n));
      out.insert(out.end(), passage.begin(), passage.end());
    } else {
      for (std::size_t i = 1 + rng() % 16; i > 0; --i) out.push_back(word(rng));
    }
  }
  out.resize(len);
  return out;
}

}  // namespace refdec_bench
