// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The fused operations' per-element logic (refdec/core/static_step_device.hpp), run on the host as
// the CUDA kernels run it on the device, against rotations and writes spelled out by hand: for a
// contiguous cache and a paged pool, with padded rows whose writes share an element.

#include "refdec/core/static_step_device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace refdec;

// The kernel's body for every pair, on the host (float elements).
void run_rotary_scatter(const RotaryScatterArgs& a) {
  for (std::int64_t i = 0; i < a.pairs(); ++i) {
    const RotaryPair p = rotary_pair(a, i);
    const auto* qkv = static_cast<const float*>(a.qkv);
    float y0 = qkv[p.source], y1 = qkv[p.source + 1];
    if (p.part != 2) turn_pair(qkv[p.source], qkv[p.source + 1], a.turns[p.turn], a.turns[p.turn + 1], p.part == 0 ? a.scale : 1.0f, y0, y1);
    auto* out = static_cast<float*>(p.part == 0 ? a.q : p.part == 1 ? a.keys : a.values);
    out[p.target] = y0;
    out[p.target + 1] = y1;
  }
}

struct Shape {
  std::int64_t rows, heads, kv_heads, head_dim;
  bool paged;
};

// How GoogleTest (and CTest's test names) print a shape: its fields, not its bytes.
void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.rows << " rows, " << s.heads << " heads, " << s.kv_heads << " kv heads, head_dim " << s.head_dim << (s.paged ? ", paged" : "");
}

class RotaryScatter : public ::testing::TestWithParam<Shape> {};

TEST_P(RotaryScatter, RotatesQAndKWritesKAndVWhereTheRowsSay) {
  const Shape s = GetParam();
  const std::int64_t D = s.head_dim, half = D / 2, all = s.heads + 2 * s.kv_heads;
  const std::int64_t positions_n = 40, sequences = 3, entries = 12, slots = 50;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> qkv(static_cast<std::size_t>(s.rows * all * D));
  for (auto& x : qkv) x = uniform(rng);
  std::vector<float> turns(static_cast<std::size_t>(positions_n * half * 2));
  for (std::int64_t pos = 0; pos < positions_n; ++pos)
    for (std::int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(pos) * std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(D));
      turns[static_cast<std::size_t>((pos * half + j) * 2)] = static_cast<float>(std::cos(angle));
      turns[static_cast<std::size_t>((pos * half + j) * 2 + 1)] = static_cast<float>(std::sin(angle));
    }
  std::vector<std::int64_t> positions, sequence, written;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    positions.push_back(static_cast<std::int64_t>(rng() % positions_n));
    sequence.push_back(static_cast<std::int64_t>(rng() % sequences));
    written.push_back(static_cast<std::int64_t>(rng() % (s.paged ? slots : entries)));
  }
  // Rows that write the same element: the last one's values stay (the host runs in order).
  const std::int64_t cache_size = s.paged ? slots * s.kv_heads * D : sequences * s.kv_heads * entries * D;
  std::vector<float> q(static_cast<std::size_t>(s.rows * s.heads * D), 0.0f), keys(static_cast<std::size_t>(cache_size), 0.0f),
      values(static_cast<std::size_t>(cache_size), 0.0f);
  RotaryScatterArgs a;
  a.qkv = qkv.data(), a.turns = turns.data(), a.positions = positions.data(), a.sequence = sequence.data(), a.written = written.data();
  a.q = q.data(), a.keys = keys.data(), a.values = values.data();
  a.rows = s.rows, a.heads = s.heads, a.kv_heads = s.kv_heads, a.head_dim = D;
  a.stride_sequence = s.paged ? 0 : s.kv_heads * entries * D;
  a.stride_head = s.paged ? D : entries * D;
  a.stride_element = s.paged ? s.kv_heads * D : D;
  a.scale = 0.25f;
  run_rotary_scatter(a);

  // By hand: element (r, h, d) of qkv is qkv[(r * all + h) * D + d].
  const auto at = [&](std::int64_t r, std::int64_t h, std::int64_t d) { return qkv[static_cast<std::size_t>((r * all + h) * D + d)]; };
  const auto cache_index = [&](std::int64_t r, std::int64_t kv, std::int64_t d) {
    return s.paged ? (written[static_cast<std::size_t>(r)] * s.kv_heads + kv) * D + d
                   : ((sequence[static_cast<std::size_t>(r)] * s.kv_heads + kv) * entries + written[static_cast<std::size_t>(r)]) * D + d;
  };
  std::vector<std::int64_t> last_writer(static_cast<std::size_t>(cache_size), -1);
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t kv = 0; kv < s.kv_heads; ++kv)
      for (std::int64_t d = 0; d < D; ++d) last_writer[static_cast<std::size_t>(cache_index(r, kv, d))] = r;
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t h = 0; h < all; ++h)
      for (std::int64_t j = 0; j < half; ++j) {
        const float c = turns[static_cast<std::size_t>((positions[static_cast<std::size_t>(r)] * half + j) * 2)];
        const float sn = turns[static_cast<std::size_t>((positions[static_cast<std::size_t>(r)] * half + j) * 2 + 1)];
        const float x0 = at(r, h, 2 * j), x1 = at(r, h, 2 * j + 1);
        if (h < s.heads) {
          const float* got = &q[static_cast<std::size_t>((r * s.heads + h) * D + 2 * j)];
          EXPECT_NEAR(got[0], (x0 * c - x1 * sn) * 0.25f, 1e-6f);
          EXPECT_NEAR(got[1], (x0 * sn + x1 * c) * 0.25f, 1e-6f);
          continue;
        }
        const bool key = h < s.heads + s.kv_heads;
        const std::int64_t kv = key ? h - s.heads : h - s.heads - s.kv_heads;
        const std::int64_t e = cache_index(r, kv, 2 * j);
        if (last_writer[static_cast<std::size_t>(e)] != r) continue;
        const float* got = &(key ? keys : values)[static_cast<std::size_t>(e)];
        EXPECT_NEAR(got[0], key ? x0 * c - x1 * sn : x0, 1e-6f) << "row " << r << " head " << h;
        EXPECT_NEAR(got[1], key ? x0 * sn + x1 * c : x1, 1e-6f) << "row " << r << " head " << h;
      }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RotaryScatter,
                         ::testing::Values(Shape{1, 4, 2, 8, false}, Shape{7, 4, 4, 4, false}, Shape{9, 4, 1, 16, true},
                                           Shape{5, 2, 2, 2, true}),
                         [](const auto& param_info) {
                           const Shape& s = param_info.param;
                           return "rows" + std::to_string(s.rows) + "_heads" + std::to_string(s.heads) + "_kv" + std::to_string(s.kv_heads) +
                                  "_dim" + std::to_string(s.head_dim) + (s.paged ? "_paged" : "_contiguous");
                         });

TEST(RotaryScatter, CountsOneThreadPerPair) {
  RotaryScatterArgs a;
  a.rows = 3, a.heads = 4, a.kv_heads = 2, a.head_dim = 8;
  EXPECT_EQ(a.pairs(), 3 * (4 + 2 * 2) * 4);
}

// The linear kernel takes 1 to kLinearKernelRows rows whose length is a whole number of 16-byte
// loads: 4 float32 or 8 16-bit elements.
TEST(LinearKernel, TakesFewRowsOfWholeLoads) {
  EXPECT_EQ(element_bytes(ElementType::kFloat32), 4);
  EXPECT_EQ(element_bytes(ElementType::kBFloat16), 2);
  EXPECT_EQ(element_bytes(ElementType::kFloat16), 2);
  EXPECT_TRUE(linear_kernel_takes(1, 4096, ElementType::kBFloat16));
  EXPECT_TRUE(linear_kernel_takes(kLinearKernelRows, 11008, ElementType::kFloat16));
  EXPECT_TRUE(linear_kernel_takes(3, 4, ElementType::kFloat32));
  EXPECT_FALSE(linear_kernel_takes(0, 4096, ElementType::kBFloat16));
  EXPECT_FALSE(linear_kernel_takes(kLinearKernelRows + 1, 4096, ElementType::kBFloat16));
  EXPECT_FALSE(linear_kernel_takes(1, 4, ElementType::kBFloat16));  // 8 bytes
  EXPECT_FALSE(linear_kernel_takes(1, 6, ElementType::kFloat32));   // 24 bytes
  EXPECT_FALSE(linear_kernel_takes(1, 0, ElementType::kFloat32));
}

// The fused kernels' 16-byte loads start at non-null, 16-byte aligned addresses only.
TEST(LinearKernel, LoadsStartAtAlignedAddresses) {
  alignas(16) static const float buffer[8] = {};
  EXPECT_TRUE(aligned_for_loads(buffer));
  EXPECT_TRUE(aligned_for_loads(buffer + 4));
  EXPECT_FALSE(aligned_for_loads(buffer + 1));
  EXPECT_FALSE(aligned_for_loads(nullptr));
}

}  // namespace
