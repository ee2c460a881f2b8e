// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Random token text that repeats itself: at least n tokens, half the runs an 8-token passage
// copied from earlier in the text, so that drafters and indexes find matches.

#include <cstddef>
#include <random>
#include <vector>

#include "refdec/core/config.hpp"

namespace refdec_test {

inline std::vector<refdec::Token> random_text(std::mt19937& rng, std::size_t n, refdec::Token vocab = 50) {
  std::vector<refdec::Token> t;
  while (t.size() < n) {
    if (t.size() > 16 && rng() % 2 == 0) {
      const std::size_t from = rng() % (t.size() - 8);
      t.insert(t.end(), t.begin() + static_cast<std::ptrdiff_t>(from), t.begin() + static_cast<std::ptrdiff_t>(from + 8));
    } else {
      t.push_back(static_cast<refdec::Token>(rng() % static_cast<unsigned>(vocab)));
    }
  }
  return t;
}

}  // namespace refdec_test
