// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// LlmaDrafter host costs on a 4K-token context: indexing (begin), one proposal, one accepted token.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "synthetic_text.hpp"
#include "refdec/drafters/llma.hpp"

namespace {

using namespace refdec;
using refdec_bench::make_text;
using refdec_bench::Tokens;

constexpr std::size_t kContext = 4096;
constexpr std::size_t kPrompt = 64;

// A reference document, a prompt and an output that quotes the reference.
struct Workload {
  std::vector<Tokens> references;
  Tokens prompt;
  Tokens output;
};

const Workload& workload(std::size_t context) {
  static const Workload w4k = [] {
    Workload w;
    w.references.push_back(make_text(kContext, {}, 1));
    w.prompt = make_text(kPrompt, {}, 2);
    w.output = make_text(kContext, w.references[0], 3);
    return w;
  }();
  static const Workload w16k = [] {
    Workload w;
    w.references.push_back(make_text(4 * kContext, {}, 1));
    w.prompt = make_text(kPrompt, {}, 2);
    w.output = make_text(kContext, w.references[0], 3);
    return w;
  }();
  return context == kContext ? w4k : w16k;
}

// Index building: the reference (and the prompt) into the suffix automaton. The drafter is
// reused across iterations, as it is across requests.
void BM_LlmaBegin(benchmark::State& state) {
  const Workload& w = workload(static_cast<std::size_t>(state.range(0)));
  LlmaDrafter d(LlmaOptions{.self_reference = state.range(1) != 0});
  for (auto _ : state) {
    d.begin(w.prompt, w.references);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(w.references[0].size() + w.prompt.size()));
}
BENCHMARK(BM_LlmaBegin)
    ->ArgNames({"context", "self"})
    ->Args({static_cast<std::int64_t>(kContext), 0})
    ->Args({static_cast<std::int64_t>(kContext), 1})
    ->Args({static_cast<std::int64_t>(4 * kContext), 0})
    ->Unit(benchmark::kMicrosecond);

// One proposal of up to `budget` tokens per span in `m` spans, without a pending continuation, so
// the lookup is included. `tail` 0: the sequence quotes a reference passage (one long match);
// 1: it ends in the most frequent word after an unseen one (a short match that branches widely).
void BM_LlmaPropose(benchmark::State& state) {
  const Workload& w = workload(kContext);
  const auto budget = static_cast<std::size_t>(state.range(0));
  LlmaDrafter d(LlmaOptions{.n = 1, .k = budget, .m = static_cast<std::size_t>(state.range(1)),
                            .self_reference = state.range(2) != 0});
  d.begin(w.prompt, w.references);
  d.accept(std::span<const Token>(w.output).first(512));
  if (state.range(3) == 0) {
    d.accept(std::span<const Token>(w.references[0]).subspan(2000, 32));
  } else {
    d.accept(Tokens{5000, 0});
  }
  DraftTree tree;
  for (auto _ : state) {
    tree.clear();
    d.propose(budget, tree);
    benchmark::DoNotOptimize(tree);
  }
  state.counters["drafts"] = static_cast<double>(tree.size());
}
BENCHMARK(BM_LlmaPropose)
    ->ArgNames({"budget", "m", "self", "tail"})
    ->Args({16, 1, 0, 0})
    ->Args({16, 1, 1, 0})
    ->Args({64, 1, 0, 0})
    ->Args({16, 1, 0, 1})
    ->Args({16, 4, 0, 1})
    ->Args({16, 4, 1, 1});

// accept() with `chunk` tokens per call (1: plain decoding, 8: a typical accepted span), over a
// 4K-token output that quotes the reference; per_token is the cost of one appended token.
void BM_LlmaAccept(benchmark::State& state) {
  const Workload& w = workload(kContext);
  const auto chunk = static_cast<std::size_t>(state.range(0));
  LlmaDrafter d(LlmaOptions{.self_reference = state.range(1) != 0});
  d.begin(w.prompt, w.references);
  const std::span<const Token> output(w.output);
  std::size_t pos = 0;
  for (auto _ : state) {
    if (pos + chunk > output.size()) {  // the output is used up: start the sequence again
      state.PauseTiming();
      d.begin(w.prompt, w.references);
      pos = 0;
      state.ResumeTiming();
    }
    d.accept(output.subspan(pos, chunk));
    pos += chunk;
  }
  const auto tokens = static_cast<double>(state.iterations()) * static_cast<double>(chunk);
  state.counters["per_token"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LlmaAccept)->ArgNames({"chunk", "self"})->Args({1, 0})->Args({1, 1})->Args({8, 0})->Args({8, 1});

}  // namespace
