// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The C++ side of the Python binding's overhead benchmark (python/bench/overhead.py runs this and
// the same loop from Python): per step and per sequence, LLMA drafts a 64-node tree, the batch is
// planned, a stand-in target (the true next token of each row's position) is walked greedily, the
// keep plan is built and the drafters accept. The texts come from lcg_text(), which the Python
// side reproduces exactly, so both sides run the same trees and accept the same tokens.

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/drafters/llma.hpp"

namespace {

using namespace refdec;

constexpr std::int64_t kVocab = 2000;
constexpr std::size_t kPrompt = 4096;
constexpr std::size_t kText = kPrompt + 4096;
constexpr std::size_t kBudget = 64;

// A 64-bit LCG (Knuth's MMIX constants); python/bench/overhead.py has the same one.
struct Lcg {
  std::uint64_t state;
  std::uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  }
};

// Log-uniform words (about Zipf's law) with one run in three a passage of 8..64 earlier tokens.
std::vector<Token> lcg_text(std::size_t len, std::uint64_t seed) {
  Lcg rng{seed};
  std::vector<Token> out;
  while (out.size() < len) {
    if (rng.next() % 3 == 0 && out.size() > 64) {
      const std::size_t n = 8 + rng.next() % 57;
      const std::size_t from = rng.next() % (out.size() - n);
      for (std::size_t i = 0; i < n; ++i) out.push_back(out[from + i]);
    } else {
      for (std::uint64_t i = 1 + rng.next() % 16; i > 0; --i) {
        const double u = static_cast<double>(rng.next() % 1000000) / 1e6;
        out.push_back(static_cast<Token>(std::floor(std::pow(static_cast<double>(kVocab), u))) - 1);
      }
    }
  }
  out.resize(len);
  return out;
}

struct Sequences {
  std::vector<std::vector<Token>> truth;  // [B][kText]
  std::vector<AnyDrafter> drafters;       // [B]
  std::vector<std::int64_t> lengths;      // [B] cached entries (the root is truth[length])

  explicit Sequences(std::int64_t batch) {
    for (std::int64_t b = 0; b < batch; ++b) {
      truth.push_back(lcg_text(kText, 100 + static_cast<std::uint64_t>(b)));
      drafters.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 32, .spans = 8, .self_reference = true}));
    }
    restart();
  }
  void restart() {
    lengths.clear();
    for (std::size_t b = 0; b < truth.size(); ++b) {
      drafters[b].begin(std::span<const Token>(truth[b]).first(kPrompt), {});
      lengths.push_back(static_cast<std::int64_t>(kPrompt) - 1);
    }
  }
  bool near_end() const {
    for (const auto l : lengths)
      if (static_cast<std::size_t>(l) + kBudget + 2 >= kText) return true;
    return false;
  }
};

void BM_EngineStep(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  Sequences seqs(batch);
  std::vector<LinearTree> trees(static_cast<std::size_t>(batch));
  std::vector<AuxBlock> aux(static_cast<std::size_t>(batch));
  std::vector<DraftScratch> scratch(static_cast<std::size_t>(batch));
  std::vector<Acceptance> accepted(static_cast<std::size_t>(batch));
  std::vector<Token> targets;
  StepPlan plan;
  KeepPlan keep;
  std::int64_t rows = 0, tokens = 0;
  for (auto _ : state) {
    if (seqs.near_end()) {
      state.PauseTiming();
      seqs.restart();
      state.ResumeTiming();
    }
    for (std::size_t b = 0; b < trees.size(); ++b) {
      const auto length = seqs.lengths[b];
      draft_step(seqs.drafters[b], seqs.truth[b][static_cast<std::size_t>(length)], kBudget, kVocab, length,
                 std::numeric_limits<std::int64_t>::max(), scratch[b], trees[b], aux[b]);
    }
    plan_step(trees, {}, seqs.lengths, kVocab, plan);
    // The stand-in model: each row's target is the true token after its position.
    targets.resize(static_cast<std::size_t>(plan.rows()));
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      for (std::int32_t r = plan.indptr[static_cast<std::size_t>(b)]; r < plan.indptr[static_cast<std::size_t>(b) + 1]; ++r)
        targets[static_cast<std::size_t>(r)] = seqs.truth[static_cast<std::size_t>(b)][static_cast<std::size_t>(plan.positions[static_cast<std::size_t>(r)] + 1)];
    for (std::int32_t b = 0; b < plan.batch(); ++b)
      accept(plan.tree(b), ChoiceArray{targets.data() + plan.indptr[static_cast<std::size_t>(b)]}, accepted[static_cast<std::size_t>(b)]);
    keep_accepted(plan, accepted, keep);
    for (std::size_t b = 0; b < trees.size(); ++b) {
      seqs.drafters[b].accept(accepted[b].tokens);
      seqs.lengths[b] = keep.lengths[b];
      tokens += static_cast<std::int64_t>(accepted[b].tokens.size());
    }
    rows += plan.rows();
  }
  const double steps = static_cast<double>(state.iterations());
  state.counters["rows_per_step"] = static_cast<double>(rows) / steps;
  state.counters["tokens_per_step"] = static_cast<double>(tokens) / steps / static_cast<double>(batch);
}
BENCHMARK(BM_EngineStep)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);

}  // namespace
