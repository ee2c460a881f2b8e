// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Building, cutting and linearising draft trees, and the greedy walk: per-step host work.

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"

namespace {

using namespace refdec;

// `paths` candidate paths of `len` tokens from a small vocabulary, so prefixes are shared.
std::vector<std::vector<Token>> candidates(int paths, int len, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<Token>> out(static_cast<std::size_t>(paths), std::vector<Token>(static_cast<std::size_t>(len)));
  for (auto& p : out)
    for (auto& t : p) t = static_cast<Token>(rng() % 6);
  return out;
}

// Insert `paths` paths of 16 tokens, cut to a budget of 64 nodes, linearise with masks.
void BM_BuildAndLinearize(benchmark::State& state) {
  const auto paths = candidates(static_cast<int>(state.range(0)), 16, 1);
  DraftTree tree;
  LinearTree lin;
  for (auto _ : state) {
    tree.clear();
    for (std::size_t i = 0; i < paths.size(); ++i) tree.insert(paths[i], 1.0f / static_cast<float>(i + 1));
    tree.linearize(0, static_cast<std::size_t>(state.range(1)), lin);
    benchmark::DoNotOptimize(lin.mask.data());
  }
  state.counters["nodes"] = static_cast<double>(lin.size());
}
BENCHMARK(BM_BuildAndLinearize)->Args({1, 16})->Args({4, 64})->Args({16, 64})->Args({64, 64})->Args({64, 128});

// Cut and linearise alone, from a const tree of `paths` paths of 16 tokens: the per-step cost
// that a shared, read-only tree pays.
// A tree of `paths` candidate paths of 16 tokens, scored by rank.
DraftTree tree_of(int paths) {
  DraftTree tree;
  const auto candidate_paths = candidates(paths, 16, 1);
  for (std::size_t i = 0; i < candidate_paths.size(); ++i) tree.insert(candidate_paths[i], 1.0f / static_cast<float>(i + 1));
  return tree;
}

void BM_Linearize(benchmark::State& state) {
  const DraftTree tree = tree_of(static_cast<int>(state.range(0)));
  LinearTree lin;
  for (auto _ : state) {
    tree.linearize(0, static_cast<std::size_t>(state.range(1)), lin);
    benchmark::DoNotOptimize(lin.mask.data());
  }
  state.counters["nodes"] = static_cast<double>(lin.size());
}
BENCHMARK(BM_Linearize)->Args({4, 64})->Args({64, 64})->Args({64, 128});

// The same with scratch memory reused across steps, as engines and the replay loop run it.
void BM_LinearizeReusedScratch(benchmark::State& state) {
  const DraftTree tree = tree_of(static_cast<int>(state.range(0)));
  LinearTree lin;
  LinearizeScratch scratch;
  for (auto _ : state) {
    tree.linearize(0, static_cast<std::size_t>(state.range(1)), lin, scratch);
    benchmark::DoNotOptimize(lin.mask.data());
  }
  state.counters["nodes"] = static_cast<double>(lin.size());
}
BENCHMARK(BM_LinearizeReusedScratch)->Args({4, 64})->Args({64, 64})->Args({64, 128});

void BM_GreedyWalk(benchmark::State& state) {
  DraftTree tree;
  for (const auto& p : candidates(16, 16, 2)) tree.insert(p, 1.0f);
  const auto lin = tree.linearize(0, 64);
  std::vector<Token> target(static_cast<std::size_t>(lin.size()));
  for (std::int32_t i = 0; i < lin.size(); ++i) {  // follow the first child as deep as it goes
    const std::int32_t c = lin.first_child[static_cast<std::size_t>(i)];
    target[static_cast<std::size_t>(i)] = c >= 0 ? lin.tokens[static_cast<std::size_t>(c)] : 0;
  }
  Acceptance a;
  for (auto _ : state) {
    greedy_accept(lin, target, a);
    benchmark::DoNotOptimize(a.tokens.data());
  }
  state.counters["accepted"] = a.num_accepted();
}
BENCHMARK(BM_GreedyWalk);

}  // namespace
