// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// EdgeMap against std::map over random edges: lookups, misses, redirects, growth.

#include "refdec/core/edge_map.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <utility>

namespace {

using namespace refdec;

TEST(EdgeMap, AgreesWithAnOrderedMapThroughGrowth) {
  std::mt19937 rng(3);
  for (const std::size_t expected : {std::size_t{0}, std::size_t{100}, std::size_t{5000}}) {
    EdgeMap map;
    map.reset(expected);
    std::map<std::pair<std::int32_t, Token>, std::int32_t> want;
    const std::size_t initial_bytes = map.bytes();
    for (int i = 0; i < 20000; ++i) {
      const auto from = static_cast<std::int32_t>(rng() % 500);
      const auto t = static_cast<Token>(static_cast<int>(rng() % 64) - 8);  // negative tokens are keys too
      const auto to = static_cast<std::int32_t>(rng() % 100000);
      if (want.contains({from, t})) {
        const std::int32_t now = want[{from, t}];
        EXPECT_FALSE(map.replace(from, t, now + 1, to));  // not what it leads to: unchanged
        EXPECT_TRUE(map.replace(from, t, now, to));
      } else {
        EXPECT_FALSE(map.replace(from, t, 0, to));  // absent
        map.insert(from, t, to);
      }
      want[{from, t}] = to;
    }
    EXPECT_EQ(map.size(), want.size());
    EXPECT_GT(map.bytes(), initial_bytes);  // it grew, staying at most half full
    EXPECT_GE(map.bytes() / 12, 2 * map.size());
    for (const auto& [key, to] : want) EXPECT_EQ(map.find(key.first, key.second), to);
    for (int i = 0; i < 1000; ++i) EXPECT_EQ(map.find(500 + static_cast<std::int32_t>(rng() % 100), 1), -1);
    map.reset(0);
    EXPECT_EQ(map.size(), 0u);
    EXPECT_EQ(map.find(want.begin()->first.first, want.begin()->first.second), -1);
  }
}

}  // namespace
