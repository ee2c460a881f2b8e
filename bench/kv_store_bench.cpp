// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// What a step costs in its KV store at a long context: every sequence holds `context` cached
// entries (4096 by default) and the step decodes one row each, over
// - the contiguous store (each read a view),
// - the paged store read in place (read_paged: attention takes the block table),
// - the same paged store seen through the KvStore members alone, as before read_paged existed:
//   every read gathers the whole prefix of every layer with index_select.
// BM_StoreReads times the store's side of a step alone (begin_step, then each layer's read of each
// sequence); BM_Step the whole step through a bf16 model of the shape REFDEC_BENCH_SHAPE (tiny by
// default, 1b for TinyLlama-1.1B's) on the packed kernels. REFDEC_BENCH_CONTEXT sets the context.
// The stores are filled with random keys and values (no model pass), a block of 16 entries per
// sequence in turn, so that each sequence's blocks lie scattered over the pool as decoding leaves
// them.

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/counted_paged_store.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "shapes.hpp"

namespace {

using namespace refdec;

constexpr std::int64_t kBlockSize = 16;

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::int64_t context() {
  static const std::int64_t c = std::stoll(env_or("REFDEC_BENCH_CONTEXT", "4096"));
  return c;
}

const LlamaModel& model() {
  static const LlamaModel m = LlamaModel::random(refdec_bench::shape(env_or("REFDEC_BENCH_SHAPE", "tiny")), 1, at::kBFloat16);
  return m;
}

// A paged store seen through the KvStore members alone: the model gathers each prefix with read().
using GatheringStore = refdec_test::CountedPagedStore<false>;
static_assert(KvStore<GatheringStore> && !PagedKvRead<GatheringStore>);

// The plan of one step in which each of `batch` sequences runs a chain of `rows` tokens.
StepPlan chain_plan(std::span<const std::int64_t> lengths, std::int64_t rows) {
  std::vector<LinearTree> chains(lengths.size(), LinearTree::chain(std::vector<Token>(static_cast<std::size_t>(rows), 1)));
  StepPlan plan;
  plan_step(chains, {}, lengths, model().vocab_size(), plan);
  return plan;
}

// `batch` sequences of context() random entries each, filled a block per sequence in turn.
template <KvStore S>
void fill(S& store, std::int64_t batch) {
  const KvLayout layout = store.layout();
  for (std::int64_t b = 0; b < batch; ++b) store.add();
  for (std::int64_t done = 0; done < context(); done += kBlockSize) {
    const std::int64_t rows = std::min(kBlockSize, context() - done);
    const StepPlan plan = chain_plan(store.lengths(), rows);
    store.begin_step(plan);
    for (std::int64_t layer = 0; layer < layout.layers; ++layer)
      store.write(layer, at::randn({plan.rows(), layout.kv_heads, layout.head_dim}, layout.options),
                  at::randn({plan.rows(), layout.kv_heads, layout.head_dim}, layout.options));
    KeepPlan keep;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int32_t r = 0; r < rows; ++r) keep.rows.push_back(r);
      keep.indptr.push_back(static_cast<std::int32_t>(keep.rows.size()));
      keep.lengths.push_back(store.lengths()[static_cast<std::size_t>(b)] + rows);
    }
    store.commit(keep);
  }
}

enum Kind : std::int64_t { kContiguous = 0, kPagedInPlace = 1, kPagedGathered = 2 };
const char* kind_name(std::int64_t kind) {
  return kind == kContiguous ? "contiguous" : kind == kPagedInPlace ? "paged in place" : "paged gathered";
}

// Runs `body(store)` on a filled store of the benchmark's kind.
template <class F>
void with_store(benchmark::State& state, F&& body) {
  const std::int64_t batch = state.range(1);
  const KvLayout layout = model().kv_layout();
  const std::int64_t blocks = batch * ((context() + 1 + kBlockSize - 1) / kBlockSize);
  state.SetLabel(kind_name(state.range(0)));
  state.counters["context"] = static_cast<double>(context());
  switch (state.range(0)) {
    case kContiguous: {
      ContiguousKvStore store(layout, context() + 1);
      fill(store, batch);
      body(store);
      break;
    }
    case kPagedInPlace: {
      PagedKvStore store(layout, blocks, kBlockSize);
      fill(store, batch);
      body(store);
      break;
    }
    default: {
      GatheringStore store(layout, blocks, kBlockSize);
      fill(store, batch);
      body(store);
    }
  }
}

// The store's side of a decode step: begin_step, then every layer's read of every sequence, in
// place where the store can (read_paged), else through read().
void BM_StoreReads(benchmark::State& state) {
  with_store(state, [&](auto& store) {
    const StepPlan plan = chain_plan(store.lengths(), 1);
    const std::int64_t layers = store.layout().layers;
    for (auto _ : state) {
      store.begin_step(plan);
      for (std::int64_t layer = 0; layer < layers; ++layer)
        for (std::int64_t b = 0; b < store.batch(); ++b) {
          if constexpr (PagedKvRead<std::decay_t<decltype(store)>>)
            benchmark::DoNotOptimize(store.read_paged(layer, b).keys.data_ptr());
          else
            benchmark::DoNotOptimize(store.read(layer, b).first.data_ptr());
        }
    }
  });
}

// A whole decode step (one row per sequence) through the model over the store.
void BM_Step(benchmark::State& state) {
  with_store(state, [&](auto& store) {
    const StepPlan plan = chain_plan(store.lengths(), 1);
    for (auto _ : state) benchmark::DoNotOptimize(model().forward(plan, store).data_ptr());
  });
}

void kinds_and_batches(benchmark::internal::Benchmark* b) {
  b->ArgNames({"store", "batch"});
  for (const std::int64_t batch : {1, 4})
    for (const std::int64_t kind : {kContiguous, kPagedInPlace, kPagedGathered}) b->Args({kind, batch});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_StoreReads)->Apply(kinds_and_batches);
BENCHMARK(BM_Step)->Apply(kinds_and_batches);

}  // namespace
