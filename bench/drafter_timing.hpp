// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The timing loops the drafter benchmarks share: one proposal at a time after the sequence ends
// in one of two tails, and accepted tokens fed in chunks.

#include <benchmark/benchmark.h>

#include <cstddef>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"

namespace refdec_bench {

// Times `drafter`'s propose(budget). `quote_tail`: the sequence first quotes 32 tokens of `text`
// from position 2000 (one long match); otherwise it ends in token 5000 then 0 (an unseen token,
// then the most frequent one: a short match that branches widely). Reports the draft's size.
template <class D>
void time_proposals(benchmark::State& state, D& drafter, std::span<const refdec::Token> text, bool quote_tail, std::size_t budget) {
  if (quote_tail) {
    drafter.accept(text.subspan(2000, 32));
  } else {
    drafter.accept(std::vector<refdec::Token>{5000, 0});
  }
  refdec::DraftTree tree;
  for (auto _ : state) {
    tree.clear();
    drafter.propose(budget, tree);
    benchmark::DoNotOptimize(tree);
  }
  state.counters["drafts"] = static_cast<double>(tree.size());
}

// Times `drafter`'s accept() of `output` in chunks of `chunk` tokens after begin(prompt,
// references), beginning again (untimed) once the output is used up. Reports the time per token.
template <class D>
void time_accepts(benchmark::State& state, D& drafter, std::span<const refdec::Token> prompt, refdec::References references,
                  std::span<const refdec::Token> output, std::size_t chunk) {
  drafter.begin(prompt, references);
  std::size_t pos = 0;
  for (auto _ : state) {
    if (pos + chunk > output.size()) {  // the output is used up: start the sequence again
      state.PauseTiming();
      drafter.begin(prompt, references);
      pos = 0;
      state.ResumeTiming();
    }
    drafter.accept(output.subspan(pos, chunk));
    pos += chunk;
  }
  const auto tokens = static_cast<double>(state.iterations()) * static_cast<double>(chunk);
  state.counters["per_token"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace refdec_bench
