// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Attention of one sequence's step rows over its cache on the CPU in bf16, one layer: the
// reference path of the model (libtorch's batched products over permuted views, which copy the
// keys) against the packed path's (attention_products.hpp: oneDNN over the cache in place, where
// oneDNN runs bf16; float32 products otherwise, as on AVX2 machines), with the same softmax between. Shapes: TinyLlama's heads (32 query heads over 4 kv heads of 64) and
// Llama-2-7B's (32 of 128, one per kv head); args: cached length, step rows, shape (0 / 1).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <thread>

#include "refdec/torch/attention_products.hpp"
#include "refdec/torch/packed_linear.hpp"

namespace {

using namespace refdec;

struct Inputs {
  at::Tensor q, keys, values;  // [KV, G*n, D]; [S, KV, D] views of a longer cache, as a store hands them out
  double scale;
};

Inputs make(const benchmark::State& state) {
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  const std::int64_t s = state.range(0), n = state.range(1);
  const bool llama7b = state.range(2) == 1;
  const std::int64_t kv = llama7b ? 32 : 4, g = llama7b ? 1 : 8, d = llama7b ? 128 : 64;
  const auto bf = [](at::IntArrayRef sizes) { return at::randn(sizes).to(at::kBFloat16); };
  return {bf({kv, g * n, d}), bf({s + 64, kv, d}).narrow(0, 0, s), bf({s + 64, kv, d}).narrow(0, 0, s),
          1.0 / std::sqrt(static_cast<double>(d))};
}

void args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t shape : {0, 1})
    for (const std::int64_t s : {128, 512, 2048})
      for (const std::int64_t n : {1, 8, 16, 24, 32}) b->Args({s, n, shape});
  b->Unit(benchmark::kMicrosecond);
}

void BM_AtenProducts(benchmark::State& state) {
  const Inputs in = make(state);
  for (auto _ : state) {
    const auto scores = at::matmul(in.q, in.keys.permute({1, 2, 0})) * in.scale;
    const auto probs = at::softmax(scores, -1, at::kFloat).to(at::kBFloat16);
    benchmark::DoNotOptimize(at::matmul(probs, in.values.permute({1, 0, 2})));
  }
}
BENCHMARK(BM_AtenProducts)->Apply(args);

void BM_PackedPathProducts(benchmark::State& state) {
  const Inputs in = make(state);
  if (!attention_products_supported(in.keys)) {
    state.SkipWithError(("oneDNN's bf16 products do not run here: " + packed_backend_unavailable(PackedBackend::kOneDnn, at::kBFloat16)).c_str());
    return;
  }
  for (auto _ : state) {
    const auto probs = at::softmax(attention_scores(in.q, in.keys, in.scale), -1, at::kFloat).to(at::kBFloat16);
    benchmark::DoNotOptimize(attention_values(probs, in.values));
  }
}
BENCHMARK(BM_PackedPathProducts)->Apply(args);

// refdec's AVX2 attention (scores, softmax and values per kv head, the cache read in place), which
// the packed path takes where oneDNN runs no bf16, and for a paged store's blocks.
void BM_Avx2Attention(benchmark::State& state) {
  const Inputs in = make(state);
  if (!avx2_attention_supported(in.keys)) {
    state.SkipWithError("refdec's AVX2 attention does not run here (no AVX2 and FMA)");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(avx2_attention(in.q, in.keys, in.values, at::Tensor(), in.scale));
}
BENCHMARK(BM_Avx2Attention)->Apply(args);

// The packed path where oneDNN runs no bf16 (llama.hpp): the products in float32.
void BM_Float32Products(benchmark::State& state) {
  const Inputs in = make(state);
  for (auto _ : state) {
    const auto scores = at::matmul(in.q.to(at::kFloat), in.keys.permute({1, 2, 0}).to(at::kFloat)) * in.scale;
    const auto probs = at::softmax(scores, -1, at::kFloat);
    benchmark::DoNotOptimize(at::matmul(probs, in.values.permute({1, 0, 2}).to(at::kFloat)).to(at::kBFloat16));
  }
}
BENCHMARK(BM_Float32Products)->Apply(args);

}  // namespace
