// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Host sampling costs: logits processing of one row and of every node of a draft tree, sampled
// acceptance (sample-then-match) over a 64-node tree, and Philox uniform throughput.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/sampled_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "synthetic_text.hpp"

namespace {

using namespace refdec;

constexpr std::size_t kContext = 1000;  // tokens counted by the penalties: 500 prompt, 500 output

// The settings measured; the argument `setting` indexes them.
enum Setting : std::int64_t { kGreedy, kTemperature, kTopPPeaked, kTopPFlat, kPenalties, kNumSettings };

const char* setting_name(std::int64_t s) {
  switch (s) {
    case kGreedy: return "greedy";
    case kTemperature: return "temp0.8";
    case kTopPPeaked: return "top_p0.9/peaked";
    case kTopPFlat: return "top_p0.9/flat";
    default: return "penalties";
  }
}

SamplingOptions options_of(std::int64_t s) {
  SamplingOptions o;
  o.seed = 42;
  switch (s) {
    case kGreedy: o.temperature = 0.0f; break;
    case kTemperature: o.temperature = 0.8f; break;
    case kTopPPeaked:
    case kTopPFlat: o.top_p = 0.9f; break;
    default:  // every penalty, on top of temperature sampling
      o.temperature = 0.8f;
      o.repetition_penalty = 1.1f;
      o.presence_penalty = 0.5f;
      o.frequency_penalty = 0.5f;
      break;
  }
  return o;
}

// `rows` rows of realistic logits over `vocab` tokens: peaked rows are N(0, 2) with 8 tokens
// raised to 10-16 (a confident model: the top few hold most of the mass); flat rows are N(0, 1),
// so top-p 0.9 keeps most of the vocabulary. Row r of a peaked set favours `favoured[r]` when
// given (the draft token the walk should follow).
std::vector<float> make_logits(std::int32_t vocab, std::int32_t rows, bool peaked, std::uint32_t seed,
                               std::span<const Token> favoured = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, peaked ? 2.0f : 1.0f);
  std::vector<float> out(static_cast<std::size_t>(vocab) * static_cast<std::size_t>(rows));  // [rows, vocab] float
  for (float& x : out) x = normal(rng);
  if (peaked)
    for (std::int32_t r = 0; r < rows; ++r) {
      float* row = out.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(vocab);
      for (int k = 0; k < 8; ++k) row[rng() % static_cast<std::uint32_t>(vocab)] = 10.0f + static_cast<float>(rng() % 7);
      if (!favoured.empty() && favoured[static_cast<std::size_t>(r)] >= 0) row[favoured[static_cast<std::size_t>(r)]] = 19.0f;
    }
  return out;
}

// Token counts of a 1000-token Zipf context over the vocabulary (about a third copied passages).
TokenCounts make_counts(std::int32_t vocab) {
  const auto text = refdec_bench::make_text(kContext, {}, 7, static_cast<std::size_t>(vocab));
  TokenCounts counts(vocab);
  counts.add_prompt(std::span<const Token>(text).first(kContext / 2));
  counts.add_output(std::span<const Token>(text).subspan(kContext / 2));
  return counts;
}

// A draft tree of exactly `nodes` nodes (root included): 16 paths of 16 tokens from a 6-token
// alphabet (so prefixes are shared, as in tree_bench), spread over the vocabulary, cut to size.
LinearTree make_tree(std::int32_t nodes, std::int32_t vocab) {
  std::mt19937 rng(1);
  DraftTree tree;
  std::vector<Token> path(16);
  for (int p = 0; p < 16; ++p) {
    for (Token& t : path) t = static_cast<Token>((rng() % 6) * 97 + 3) % vocab;
    tree.insert(path, 1.0f / static_cast<float>(p + 1));
  }
  return tree.linearize(1, static_cast<std::size_t>(nodes - 1));
}

// Copying the logits back in before each call (processing is in place) costs this much.
void BM_CopyRows(benchmark::State& state) {
  const auto vocab = static_cast<std::int32_t>(state.range(0));
  const auto rows = static_cast<std::int32_t>(state.range(1));
  const auto logits = make_logits(vocab, rows, true, 3);
  std::vector<float> work(logits.size());
  for (auto _ : state) {
    std::copy(logits.begin(), logits.end(), work.begin());
    benchmark::DoNotOptimize(work.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_CopyRows)->ArgNames({"vocab", "rows"})->ArgsProduct({{512, 32000}, {1, 16, 64}})->Unit(benchmark::kMicrosecond);

// LogitsProcessor::process on one row (logits copied in each iteration).
void BM_ProcessRow(benchmark::State& state) {
  const auto vocab = static_cast<std::int32_t>(state.range(0));
  const std::int64_t setting = state.range(1);
  const auto logits = make_logits(vocab, 1, setting != kTopPFlat, 3);
  const TokenCounts counts = setting == kPenalties ? make_counts(vocab) : TokenCounts(vocab);
  LogitsProcessor proc(options_of(setting));
  std::vector<float> row(logits.size());  // [vocab] float
  for (auto _ : state) {
    std::copy(logits.begin(), logits.end(), row.begin());
    proc.process(row, counts);
    benchmark::DoNotOptimize(row.data());
  }
  state.SetLabel(setting_name(setting));
  state.SetItemsProcessed(state.iterations() * vocab);  // logits per second
}
BENCHMARK(BM_ProcessRow)
    ->ArgNames({"vocab", "setting"})
    ->ArgsProduct({{512, 32000}, {kGreedy, kTemperature, kTopPPeaked, kTopPFlat, kPenalties}})
    ->Unit(benchmark::kMicrosecond);

// LogitsProcessor::process_tree on a tree of `nodes` nodes, each row with its own prefix.
void BM_ProcessTree(benchmark::State& state) {
  const auto vocab = static_cast<std::int32_t>(state.range(0));
  const auto nodes = static_cast<std::int32_t>(state.range(1));
  const std::int64_t setting = state.range(2);
  const LinearTree tree = make_tree(nodes, vocab);
  const auto logits = make_logits(vocab, tree.size(), setting != kTopPFlat, 3);
  const TokenCounts counts = setting == kPenalties ? make_counts(vocab) : TokenCounts(vocab);
  LogitsProcessor proc(options_of(setting));
  std::vector<float> rows(logits.size());  // [nodes, vocab] float
  for (auto _ : state) {
    std::copy(logits.begin(), logits.end(), rows.begin());
    proc.process_tree(rows, vocab, tree, counts);
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetLabel(setting_name(setting));
  state.counters["nodes"] = tree.size();
  state.counters["per_row"] = benchmark::Counter(static_cast<double>(state.iterations()) * tree.size(),
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ProcessTree)
    ->ArgNames({"vocab", "nodes", "setting"})
    ->ArgsProduct({{512, 32000}, {16, 64}, {kGreedy, kTemperature, kTopPPeaked, kTopPFlat, kPenalties}})
    ->Unit(benchmark::kMicrosecond);

// sampled_accept over a 64-node tree of processed rows (temperature 0.8). `deep` 1: each row
// favours its first child's token, so the walk usually descends the first-child chain (the
// worst case: one vocab-sized draw per level); 0: random rows, the walk mostly stops at the root.
void BM_SampledAccept(benchmark::State& state) {
  const auto vocab = static_cast<std::int32_t>(state.range(0));
  const bool deep = state.range(1) != 0;
  const LinearTree tree = make_tree(64, vocab);
  std::vector<Token> favoured(static_cast<std::size_t>(tree.size()), -1);
  if (deep)
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      const std::int32_t c = tree.first_child[static_cast<std::size_t>(i)];
      if (c >= 0) favoured[static_cast<std::size_t>(i)] = tree.tokens[static_cast<std::size_t>(c)];
    }
  std::vector<float> probs = make_logits(vocab, tree.size(), true, 3, favoured);  // [nodes, vocab] float
  SamplingOptions o;
  o.temperature = 0.8f;
  LogitsProcessor(o).process_tree(probs, vocab, tree, TokenCounts(vocab));
  Acceptance a;
  std::uint64_t generated = 0;
  double accepted = 0;
  for (auto _ : state) {
    sampled_accept(tree, probs, vocab, 42, generated, a);
    generated += a.tokens.size();
    accepted += a.num_accepted();
    benchmark::DoNotOptimize(a.tokens.data());
  }
  state.counters["accepted"] = accepted / static_cast<double>(state.iterations());
  state.counters["depth"] = tree.max_depth();
}
BENCHMARK(BM_SampledAccept)->ArgNames({"vocab", "deep"})->ArgsProduct({{512, 32000}, {0, 1}})->Unit(benchmark::kMicrosecond);

// What verify() does per sampled sequence: raw logits of a 64-node tree in, acceptance out, either
// processing every node then walking (eager) or processing only the visited rows (lazy).
void BM_SampledStep(benchmark::State& state) {
  const auto vocab = static_cast<std::int32_t>(state.range(0));
  const bool lazy = state.range(1) != 0;
  const LinearTree tree = make_tree(64, vocab);
  std::vector<Token> favoured(static_cast<std::size_t>(tree.size()), -1);
  for (std::int32_t i = 0; i < tree.size(); ++i)
    if (const std::int32_t c = tree.first_child[static_cast<std::size_t>(i)]; c >= 0)
      favoured[static_cast<std::size_t>(i)] = tree.tokens[static_cast<std::size_t>(c)];
  const std::vector<float> logits = make_logits(vocab, tree.size(), true, 3, favoured);  // [nodes, vocab] float
  SamplingOptions o;
  o.temperature = 0.8f;
  LogitsProcessor proc(o);
  const TokenCounts counts(vocab);
  std::vector<float> rows;
  Acceptance a;
  std::uint64_t generated = 0;
  double accepted = 0;
  for (auto _ : state) {
    rows = logits;
    if (lazy) {
      sampled_accept_lazy(view(tree), rows, vocab, proc, counts, generated, a);
    } else {
      proc.process_tree(rows, vocab, tree, counts);
      sampled_accept(tree, rows, vocab, o.seed, generated, a);
    }
    generated += a.tokens.size();
    accepted += a.num_accepted();
    benchmark::DoNotOptimize(a.tokens.data());
  }
  state.counters["accepted"] = accepted / static_cast<double>(state.iterations());
}
BENCHMARK(BM_SampledStep)->ArgNames({"vocab", "lazy"})->ArgsProduct({{512, 32000}, {0, 1}})->Unit(benchmark::kMicrosecond);

// Philox4x32-10 uniforms: one block and one double per call.
void BM_PhiloxUniform(benchmark::State& state) {
  std::uint64_t counter = 0;
  double sum = 0.0;
  for (auto _ : state) {
    sum += uniform(0x1234'5678'9abc'def0ULL, counter++);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PhiloxUniform);

}  // namespace
