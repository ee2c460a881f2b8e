// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Random draft trees for the step tests.

#include <random>
#include <vector>

#include "refdec/core/draft_tree.hpp"

namespace refdec_test {

// A random draft tree of one of several shapes (chain, star, narrow bushy, wide deep), cut to a
// random budget that often crosses 64-node mask word boundaries; sometimes only the root.
inline refdec::LinearTree random_tree(std::mt19937& rng) {
  refdec::DraftTree t;
  const auto pick = [&](unsigned n) { return static_cast<refdec::Token>(rng() % n); };
  switch (rng() % 4) {
    case 0: {  // a chain
      std::vector<refdec::Token> path(1 + rng() % 90);
      for (auto& x : path) x = pick(1000);
      t.insert(path, 1.0f);
      break;
    }
    case 1:  // a star: many distinct children of the root
      for (refdec::Token x = 0, n = pick(150); x < n; ++x) t.insert(std::vector<refdec::Token>{x}, 1.0f + static_cast<float>(rng() % 5));
      break;
    case 2:  // narrow and bushy: few token values, many short paths
      for (int p = 0, n = 1 + pick(40); p < n; ++p) {
        std::vector<refdec::Token> path(1 + rng() % 9);
        for (auto& x : path) x = pick(3);
        t.insert(path, 1.0f);
      }
      break;
    default:  // wide and deep
      for (int p = 0, n = 1 + pick(30); p < n; ++p) {
        std::vector<refdec::Token> path(1 + rng() % 12);
        for (auto& x : path) x = pick(50);
        t.insert(path, static_cast<float>(1 + rng() % 3));
      }
  }
  return t.linearize(pick(1000), rng() % 140);
}

}  // namespace refdec_test
