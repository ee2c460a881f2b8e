// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// NgramTrieDrafter host costs: building the trie for 1K-16K-token contexts (begin), one proposal,
// one accepted token. The target: under 1 ms to build for a 4K-token prompt.

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "drafter_timing.hpp"
#include "synthetic_text.hpp"
#include "refdec/drafters/ngram_trie.hpp"

namespace {

using namespace refdec;
using refdec_bench::make_text;
using refdec_bench::Tokens;

constexpr std::size_t kContext = 4096;

// A 16K-token prompt (its first `context` tokens are the shorter prompts) and a 4K-token output
// that quotes it.
const Tokens& prompt_text() {
  static const Tokens t = make_text(4 * kContext, {}, 1);
  return t;
}
const Tokens& output_text() {
  static const Tokens t = make_text(kContext, Tokens(prompt_text().begin(), prompt_text().begin() + kContext), 3);
  return t;
}

// Trie building for a `context`-token prompt (ref 0) or reference with a 64-token prompt
// (ref 1). The drafter is reused across iterations, as it is across requests.
void BM_NgramTrieBuild(benchmark::State& state) {
  const auto context = static_cast<std::size_t>(state.range(0));
  const Tokens text(prompt_text().begin(), prompt_text().begin() + static_cast<std::ptrdiff_t>(context));
  const Tokens short_prompt(output_text().begin(), output_text().begin() + 64);
  const std::vector<Tokens> references = {text};
  const bool as_reference = state.range(1) != 0;
  NgramTrieDrafter d(NgramTrieOptions{.ngram = static_cast<std::size_t>(state.range(2))});
  for (auto _ : state) {
    if (as_reference)
      d.begin(short_prompt, references);
    else
      d.begin(text, {});
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(context));
  state.counters["nodes"] = static_cast<double>(d.num_nodes());
}
BENCHMARK(BM_NgramTrieBuild)
    ->ArgNames({"context", "ref", "n"})
    ->Args({1024, 0, 13})
    ->Args({4096, 0, 13})
    ->Args({16384, 0, 13})
    ->Args({4096, 1, 13})
    ->Args({4096, 0, 5})
    ->Unit(benchmark::kMicrosecond);

// One proposal of `num_draft` nodes after a 4K-token prompt and 512 accepted tokens. `tail` 0:
// the sequence quotes a passage of the prompt (a deep, narrow match); 1: it ends in the most
// frequent word (a shallow match that branches widely).
void BM_NgramTriePropose(benchmark::State& state) {
  const auto num_draft = static_cast<std::size_t>(state.range(0));
  NgramTrieDrafter d(NgramTrieOptions{.max_nodes = num_draft});
  d.begin(std::span<const Token>(prompt_text()).first(kContext), {});
  d.accept(std::span<const Token>(output_text()).first(512));
  refdec_bench::time_proposals(state, d, prompt_text(), state.range(1) == 0, num_draft);
}
BENCHMARK(BM_NgramTriePropose)
    ->ArgNames({"num_draft", "tail"})
    ->Args({8, 0})
    ->Args({32, 0})
    ->Args({64, 0})
    ->Args({8, 1})
    ->Args({32, 1})
    ->Args({64, 1});

// accept() with `chunk` tokens per call (1: plain decoding, 8: a typical accepted span) over a
// 4K-token output after a 4K-token prompt; per_token is the cost of one appended token.
void BM_NgramTrieAccept(benchmark::State& state) {
  const auto chunk = static_cast<std::size_t>(state.range(0));
  const std::span<const Token> prompt = std::span<const Token>(prompt_text()).first(kContext);
  NgramTrieDrafter d;
  refdec_bench::time_accepts(state, d, prompt, {}, output_text(), chunk);
}
BENCHMARK(BM_NgramTrieAccept)->ArgNames({"chunk"})->Arg(1)->Arg(8);

}  // namespace
