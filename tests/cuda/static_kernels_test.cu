// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The static step's fused kernels (refdec/cuda/static_kernels.cuh) against their per-element logic
// run on the host (refdec/core/static_step_device.hpp), in float32 and bf16, for a contiguous
// cache and a paged pool. Each device test skips without a CUDA device; the launchers' argument
// checks run without one.

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "refdec/core/static_step_device.hpp"
#include "refdec/cuda/check.cuh"
#include "refdec/cuda/static_kernels.cuh"
#include "device_buffer.cuh"

namespace {

using namespace refdec;

template <typename T>
using Device = refdec_test::DeviceBuffer<T>;

bool has_device(std::string& why) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err == cudaSuccess && devices > 0) return true;
  why = err != cudaSuccess ? cudaGetErrorString(err) : "0 devices";
  return false;
}

float to_float(float x) { return x; }
float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
T from_float(float x);
template <>
float from_float<float>(float x) {
  return x;
}
template <>
__nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

template <typename T>
void check_rotary_scatter(bool paged, ElementType type, float tolerance) {
  const std::int64_t rows = 12, H = 4, KV = 2, D = 16, half = D / 2, all = H + 2 * KV, positions_n = 30, sequences = 3, entries = 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<T> qkv(static_cast<std::size_t>(rows * all * D));
  for (auto& x : qkv) x = from_float<T>(uniform(rng));
  std::vector<float> turns(static_cast<std::size_t>(positions_n * half * 2));
  for (std::size_t i = 0; i < turns.size(); i += 2) {
    const float angle = uniform(rng) * 3.0f;
    turns[i] = std::cos(angle), turns[i + 1] = std::sin(angle);
  }
  std::vector<std::int64_t> positions, sequence, written;
  for (std::int64_t r = 0; r < rows; ++r) {  // distinct targets: the device writes in no set order
    positions.push_back(static_cast<std::int64_t>(rng() % positions_n));
    sequence.push_back(r % sequences);
    written.push_back(paged ? r * 3 + 1 : r / sequences);
  }
  const std::int64_t cache = paged ? 40 * KV * D : sequences * KV * entries * D;
  RotaryScatterArgs a;
  a.rows = rows, a.heads = H, a.kv_heads = KV, a.head_dim = D, a.scale = 0.5f, a.type = type;
  a.stride_sequence = paged ? 0 : KV * entries * D;
  a.stride_head = paged ? D : entries * D;
  a.stride_element = paged ? KV * D : D;
  // On the host, in float over the elements as stored.
  std::vector<float> host_qkv(qkv.size());
  for (std::size_t i = 0; i < qkv.size(); ++i) host_qkv[i] = to_float(qkv[i]);
  std::vector<float> want_q(static_cast<std::size_t>(rows * H * D)), want_k(static_cast<std::size_t>(cache)), want_v(want_k.size());
  RotaryScatterArgs host = a;
  host.qkv = host_qkv.data(), host.turns = turns.data(), host.positions = positions.data(), host.sequence = sequence.data();
  host.written = written.data(), host.q = want_q.data(), host.keys = want_k.data(), host.values = want_v.data();
  for (std::int64_t i = 0; i < host.pairs(); ++i) {
    const RotaryPair p = rotary_pair(host, i);
    float y0 = host_qkv[static_cast<std::size_t>(p.source)], y1 = host_qkv[static_cast<std::size_t>(p.source + 1)];
    if (p.part != 2) turn_pair(y0, y1, turns[static_cast<std::size_t>(p.turn)], turns[static_cast<std::size_t>(p.turn + 1)], p.part == 0 ? a.scale : 1.0f, y0, y1);
    auto& out = p.part == 0 ? want_q : p.part == 1 ? want_k : want_v;
    out[static_cast<std::size_t>(p.target)] = y0, out[static_cast<std::size_t>(p.target + 1)] = y1;
  }
  // On the device.
  Device<T> d_qkv(qkv), d_q(std::vector<T>(want_q.size(), from_float<T>(0.0f))), d_k(std::vector<T>(want_k.size(), from_float<T>(0.0f))),
      d_v(std::vector<T>(want_v.size(), from_float<T>(0.0f)));
  Device<float> d_turns(turns);
  Device<std::int64_t> d_positions(positions), d_sequence(sequence), d_written(written);
  a.qkv = d_qkv.get(), a.turns = d_turns.get(), a.positions = d_positions.get(), a.sequence = d_sequence.get(), a.written = d_written.get();
  a.q = d_q.get(), a.keys = d_k.get(), a.values = d_v.get();
  cuda_static_kernels().rotary_scatter(a, nullptr);
  REFDEC_CUDA_CHECK(cudaDeviceSynchronize());
  const auto expect_near = [&](const std::vector<T>& got, const std::vector<float>& want, const char* what) {
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(to_float(got[i]), want[i], tolerance) << what << " element " << i;
  };
  expect_near(d_q.download(), want_q, "q");
  expect_near(d_k.download(), want_k, "keys");
  expect_near(d_v.download(), want_v, "values");
}

TEST(StaticKernels, RotaryScatterEqualsItsHostLogic) {
  std::string why;
  if (!has_device(why)) GTEST_SKIP() << "no CUDA device (" << why << ")";
  check_rotary_scatter<float>(false, ElementType::kFloat32, 1e-5f);
  check_rotary_scatter<float>(true, ElementType::kFloat32, 1e-5f);
  check_rotary_scatter<__nv_bfloat16>(false, ElementType::kBFloat16, 2e-2f);
  check_rotary_scatter<__nv_bfloat16>(true, ElementType::kBFloat16, 2e-2f);
}

TEST(StaticKernels, SwigluEqualsSiluTimesUp) {
  std::string why;
  if (!has_device(why)) GTEST_SKIP() << "no CUDA device (" << why << ")";
  const std::int64_t rows = 5, hidden = 300;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> gate_up(static_cast<std::size_t>(rows * 2 * hidden));
  for (auto& x : gate_up) x = uniform(rng);
  Device<float> d_in(gate_up), d_out(std::vector<float>(static_cast<std::size_t>(rows * hidden)));
  cuda_static_kernels().swiglu({d_in.get(), d_out.get(), rows, hidden, ElementType::kFloat32}, nullptr);
  REFDEC_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = d_out.download();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < hidden; ++j) {
      const float g = gate_up[static_cast<std::size_t>(r * 2 * hidden + j)], u = gate_up[static_cast<std::size_t>(r * 2 * hidden + hidden + j)];
      ASSERT_NEAR(got[static_cast<std::size_t>(r * hidden + j)], g / (1.0f + std::exp(-g)) * u, 1e-4f) << r << ", " << j;
    }
}

// The few-row linear product against a double-precision product of the same rounded inputs, at
// every row count it takes, with and without accumulating, where the weight rows end inside a
// run of loads ahead (in 1032) and where they take one load per lane at most (in 40), and with
// output features that do not fill the last block's warps.
template <typename T>
void check_linear(ElementType type, double tolerance) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const std::int64_t in : {40, 1032}) {
    const std::int64_t out_features = 37;
    std::vector<T> w(static_cast<std::size_t>(out_features * in)), x(static_cast<std::size_t>(kLinearKernelRows * in));
    for (auto& v : w) v = from_float<T>(uniform(rng));
    for (auto& v : x) v = from_float<T>(uniform(rng));
    const Device<T> d_w(w), d_x(x);
    for (std::int64_t rows = 1; rows <= kLinearKernelRows; ++rows)
      for (const bool accumulate : {false, true}) {
        std::vector<T> start(static_cast<std::size_t>(rows * out_features));
        for (auto& v : start) v = from_float<T>(accumulate ? uniform(rng) : 0.0f);
        Device<T> d_out(start);
        cuda_static_kernels().linear({d_x.get(), d_w.get(), d_out.get(), rows, in, out_features, accumulate, type}, nullptr);
        REFDEC_CUDA_CHECK(cudaDeviceSynchronize());
        const auto got = d_out.download();
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t f = 0; f < out_features; ++f) {
            double want = accumulate ? to_float(start[static_cast<std::size_t>(r * out_features + f)]) : 0.0;
            for (std::int64_t k = 0; k < in; ++k)
              want += static_cast<double>(to_float(x[static_cast<std::size_t>(r * in + k)])) * to_float(w[static_cast<std::size_t>(f * in + k)]);
            const double g = to_float(got[static_cast<std::size_t>(r * out_features + f)]);
            ASSERT_NEAR(g, want, tolerance * (1.0 + std::abs(want)))
                << "in " << in << ", rows " << rows << (accumulate ? ", accumulating" : "") << ", row " << r << ", feature " << f;
          }
      }
  }
}

TEST(StaticKernels, LinearEqualsTheProductAtEveryRowCount) {
  std::string why;
  if (!has_device(why)) GTEST_SKIP() << "no CUDA device (" << why << ")";
  check_linear<float>(ElementType::kFloat32, 1e-5);
  check_linear<__nv_bfloat16>(ElementType::kBFloat16, 1e-2);
}

// Attention against a double-precision softmax attention on the host, for a contiguous cache
// and a paged pool, grouped-query heads, two sequences of two step rows: each row sees a prefix
// of its sequence and a pattern of entries. Every entry no row sees holds NaN, so that a read of
// one would show.
template <typename T>
void check_attention(bool paged, ElementType type, double tolerance) {
  const std::int64_t batch = 2, T_rows = 2, H = 4, KV = 2, D = 16, E = 40, G = H / KV, slots_n = 100;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Which entries each row sees: entries below a per-row length, and every third one after.
  std::vector<T> bias(static_cast<std::size_t>(batch * T_rows * E));
  std::vector<bool> used(static_cast<std::size_t>(batch * E), false);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < T_rows; ++t)
      for (std::int64_t e = 0; e < E; ++e) {
        const bool sees = e < 10 + 7 * b + t || (e < 35 && e % 3 == 0);
        bias[static_cast<std::size_t>((b * T_rows + t) * E + e)] = from_float<T>(sees ? 0.0f : -inf);
        if (sees) used[static_cast<std::size_t>(b * E + e)] = true;
      }
  // The cache, and where entry e of sequence b lies in it.
  std::vector<std::int64_t> slots(static_cast<std::size_t>(batch * E));
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int64_t>((i * 37 + 11) % slots_n);
  AttentionArgs a;
  a.batch = batch, a.step_rows = T_rows, a.heads = H, a.kv_heads = KV, a.head_dim = D, a.entries = E, a.type = type;
  a.stride_sequence = paged ? 0 : KV * E * D, a.stride_head = paged ? D : E * D, a.stride_element = paged ? KV * D : D;
  std::vector<T> keys(static_cast<std::size_t>(paged ? slots_n * KV * D : batch * KV * E * D), from_float<T>(nan)), values = keys;
  a.slots = paged ? slots.data() : nullptr;  // host pointers first, for attention_entry() here
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t kv = 0; kv < KV; ++kv)
      for (std::int64_t e = 0; e < E; ++e)
        if (used[static_cast<std::size_t>(b * E + e)])
          for (std::int64_t d = 0; d < D; ++d) {
            const auto at = static_cast<std::size_t>(attention_entry(a, b, kv, e) + d);
            keys[at] = from_float<T>(uniform(rng)), values[at] = from_float<T>(uniform(rng));
          }
  std::vector<T> q(static_cast<std::size_t>(batch * T_rows * H * D));
  for (auto& v : q) v = from_float<T>(uniform(rng));
  std::vector<double> want(q.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < T_rows; ++t)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t row = ((b * T_rows + t) * H + h) * D;
        std::vector<double> score(static_cast<std::size_t>(E), -std::numeric_limits<double>::infinity());
        double top = -std::numeric_limits<double>::infinity(), sum = 0.0;
        for (std::int64_t e = 0; e < E; ++e) {
          if (to_float(bias[static_cast<std::size_t>((b * T_rows + t) * E + e)]) != 0.0f) continue;
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += static_cast<double>(to_float(q[static_cast<std::size_t>(row + d)])) *
                   to_float(keys[static_cast<std::size_t>(attention_entry(a, b, h / G, e) + d)]);
          score[static_cast<std::size_t>(e)] = dot;
          top = std::max(top, dot);
        }
        for (auto& v : score) sum += v = std::exp(v - top);
        for (std::int64_t e = 0; e < E; ++e)
          for (std::int64_t d = 0; d < D; ++d)
            if (score[static_cast<std::size_t>(e)] > 0.0)
              want[static_cast<std::size_t>(row + d)] += score[static_cast<std::size_t>(e)] / sum *
                                                          to_float(values[static_cast<std::size_t>(attention_entry(a, b, h / G, e) + d)]);
      }
  Device<T> d_q(q), d_keys(keys), d_values(values), d_bias(bias), d_out(q.size());
  Device<std::int64_t> d_slots(slots);
  a.q = d_q.get(), a.keys = d_keys.get(), a.values = d_values.get(), a.bias = d_bias.get(), a.out = d_out.get();
  a.slots = paged ? d_slots.get() : nullptr;
  cuda_static_kernels().attention(a, nullptr);
  REFDEC_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = d_out.download();
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(to_float(got[i]), want[i], tolerance * (1.0 + std::abs(want[i]))) << (paged ? "paged" : "contiguous") << ", element " << i;
}

TEST(StaticKernels, AttentionEqualsSoftmaxAttentionAndReadsOnlySeenEntries) {
  std::string why;
  if (!has_device(why)) GTEST_SKIP() << "no CUDA device (" << why << ")";
  check_attention<float>(false, ElementType::kFloat32, 1e-4);
  check_attention<float>(true, ElementType::kFloat32, 1e-4);
  check_attention<__nv_bfloat16>(false, ElementType::kBFloat16, 2e-2);
  check_attention<__nv_bfloat16>(true, ElementType::kBFloat16, 2e-2);
}

TEST(StaticKernels, LaunchersRejectBadSizesBeforeAnyCudaCall) {
  RotaryScatterArgs a;
  a.rows = 0;
  try {
    launch_rotary_scatter(a, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("launch_rotary_scatter: rows 0"), std::string::npos) << e.what();
  }
  try {
    launch_swiglu({nullptr, nullptr, 2, 3, ElementType::kFloat32}, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("launch_swiglu: rows 2, hidden 3"), std::string::npos) << e.what();
  }
  alignas(16) static float buffer[64];
  const auto expect_linear_error = [](const LinearArgs& a, const std::string& part) {
    try {
      launch_linear(a, nullptr);
      ADD_FAILURE() << "no error for " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_linear_error({buffer, buffer, buffer, 0, 8, 4, false, ElementType::kFloat32}, "launch_linear: rows 0 (1 to 4)");
  expect_linear_error({buffer, buffer, buffer, 5, 8, 4, false, ElementType::kFloat32}, "rows 5");
  expect_linear_error({buffer, buffer, buffer, 1, 12, 4, false, ElementType::kBFloat16}, "in 12 (a whole number of 16 bytes)");
  expect_linear_error({buffer, buffer, buffer, 1, 8, 0, false, ElementType::kFloat32}, "out 0");
  expect_linear_error({buffer + 1, buffer, buffer, 1, 8, 4, false, ElementType::kFloat32}, "16-byte aligned");
  expect_linear_error({buffer, buffer, nullptr, 1, 8, 4, false, ElementType::kFloat32}, "out not null");
  AttentionArgs attention;
  attention.q = attention.keys = attention.values = attention.bias = buffer, attention.out = buffer;
  attention.batch = 1, attention.step_rows = 1, attention.heads = 2, attention.kv_heads = 1, attention.head_dim = 6, attention.entries = 4;
  try {
    launch_attention(attention, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("launch_attention: batch 1, step rows 1, heads 2, kv_heads 1, head_dim 6"), std::string::npos)
        << e.what();
  }
  attention.head_dim = 8, attention.stride_element = 3;
  try {
    launch_attention(attention, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("strides whole 16-byte loads"), std::string::npos) << e.what();
  }
}

}  // namespace
