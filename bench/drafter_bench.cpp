// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// LlmaDrafter host costs on a 4K-token context: indexing (begin), one proposal, one accepted token;
// and one propose + accept step of LookaheadDrafter and MixtureDrafter over the same context; a
// StepDriver's step (drafting, plan, completion) for 64 sequences on 1 or more drafting threads;
// 16 sequences begun over one 2M-token document set, each indexing it or all sharing one index.

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_driver.hpp"
#include "drafter_timing.hpp"
#include "synthetic_text.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"

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
  LlmaDrafter d(LlmaOptions{.min_match = 1, .continuation = budget, .spans = static_cast<std::size_t>(state.range(1)),
                            .self_reference = state.range(2) != 0});
  d.begin(w.prompt, w.references);
  d.accept(std::span<const Token>(w.output).first(512));
  refdec_bench::time_proposals(state, d, w.references[0], state.range(3) == 0, budget);
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
  refdec_bench::time_accepts(state, d, w.prompt, w.references, w.output, chunk);
}
BENCHMARK(BM_LlmaAccept)->ArgNames({"chunk", "self"})->Args({1, 0})->Args({1, 1})->Args({8, 0})->Args({8, 1});

// One decoding step with budget `kStepBudget` along the 4K-token output: propose, run the
// drafter's auxiliary block if it has one (the target's choices there are taken from the output
// ahead, as a perfect window would see them), then accept the longest drafted prefix of the true
// continuation plus the bonus token. When the output is used up the sequence starts again (not
// timed). Counters: drafts per step, tokens per step, per_token (step time / tokens appended).
constexpr std::size_t kStepBudget = 64;

template <class D>
void run_steps(benchmark::State& state, D& d) {
  const Workload& w = workload(kContext);
  const std::span<const Token> output(w.output);
  d.begin(w.prompt, w.references);
  DraftTree tree;
  AuxBlock block;
  std::vector<Token> choices;
  std::size_t pos = 0;
  double drafts = 0, tokens = 0;
  for (auto _ : state) {
    if (pos + kStepBudget + 1 > output.size()) {  // the output is used up: start the sequence again
      state.PauseTiming();
      d.begin(w.prompt, w.references);
      pos = 0;
      state.ResumeTiming();
    }
    tree.clear();
    d.propose(kStepBudget, tree);
    if constexpr (AuxiliaryDrafter<D>) {
      block.clear();
      d.auxiliary(block);
      choices.resize(static_cast<std::size_t>(block.size()));
      for (std::size_t i = 0; i < choices.size(); ++i) choices[i] = output[(pos + 1 + i) % output.size()];
      d.observe(choices);
    }
    std::size_t n = 0;  // accepted drafts: walk the tree along the true continuation
    for (std::int32_t u = 0; (u = tree.find_child(u, output[pos + n])) >= 0;) ++n;
    d.accept(output.subspan(pos, n + 1));
    pos += n + 1;
    drafts += static_cast<double>(tree.size());
    tokens += static_cast<double>(n + 1);
  }
  const auto steps = static_cast<double>(state.iterations());
  state.counters["drafts"] = drafts / steps;
  state.counters["tokens"] = tokens / steps;
  state.counters["per_token"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// LookaheadDrafter, pool from the reference, prompt and output. `window` 0: a pure n-gram pool;
// 15: the paper's 7B defaults (W = 15, N = 5, G = 15), with the window's auxiliary block and
// observe() every step.
void BM_LookaheadStep(benchmark::State& state) {
  LookaheadDrafter d(LookaheadOptions{.window = static_cast<std::size_t>(state.range(0))});
  run_steps(state, d);
}
BENCHMARK(BM_LookaheadStep)->ArgNames({"window"})->Arg(0)->Arg(15)->Unit(benchmark::kMicrosecond);

// The same step for LlmaDrafter alone (k = 16, references only), for comparison.
void BM_LlmaStep(benchmark::State& state) {
  LlmaDrafter d;
  run_steps(state, d);
}
BENCHMARK(BM_LlmaStep)->Unit(benchmark::kMicrosecond);

// MixtureDrafter over LLMA, the n-gram trie and the lookahead pool (W = 0), all with their
// default settings, under the default (flat) step cost: three proposals merged, scored and cut.
void BM_MixtureStep(benchmark::State& state) {
  std::vector<AnyDrafter> sources;
  sources.emplace_back(LlmaDrafter{});
  sources.emplace_back(NgramTrieDrafter{});
  sources.emplace_back(LookaheadDrafter(LookaheadOptions{.window = 0}));
  MixtureDrafter d(std::move(sources));
  run_steps(state, d);
}
BENCHMARK(BM_MixtureStep)->Unit(benchmark::kMicrosecond);

// One StepDriver step for 64 sequences, each a mixture of LLMA and the n-gram trie over the 4K
// reference: prepare() (their drafts, on `threads` drafting threads, and the plan), then
// complete_greedy() with a target that continues the output's bigrams (drafts are accepted now
// and then). The sequences grow by the steps' accepted tokens: every run times the same 400 steps;
// no forward pass is timed.
void BM_StepDriverStep(benchmark::State& state) {
  const Workload& w = workload(kContext);
  constexpr std::size_t kSequences = 64;
  std::vector<Token> next(2000, 0);  // the target: the token that follows t in the output (its last occurrence)
  for (std::size_t i = 0; i + 1 < w.output.size(); ++i) next[static_cast<std::size_t>(w.output[i])] = w.output[i + 1];
  StepDriver driver({.vocab_size = 2000, .max_context = 1 << 20, .prefill_chunk = 0, .drafting_threads = state.range(0)});
  for (std::size_t i = 0; i < kSequences; ++i) {
    Tokens prompt = w.prompt;
    prompt.insert(prompt.end(), w.output.begin() + static_cast<std::ptrdiff_t>(i * 16), w.output.begin() + static_cast<std::ptrdiff_t>(i * 16 + 32));
    driver.add(prompt, w.references, {.max_new_tokens = 1 << 30, .budget = 16}, AnyDrafter(make_mixture(LlmaDrafter(), NgramTrieDrafter())));
  }
  std::vector<Token> choices;
  // The first step prefills every prompt: run it before timing.
  driver.prepare();
  for (const Token t : driver.plan().tokens) choices.push_back(next[static_cast<std::size_t>(t)]);
  driver.complete_greedy(choices);
  for (auto _ : state) {
    driver.prepare();
    choices.clear();
    for (const Token t : driver.plan().tokens) choices.push_back(next[static_cast<std::size_t>(t)]);
    driver.complete_greedy(choices);
  }
  state.counters["tokens_per_step"] = driver.stats().tokens_per_step();
  state.counters["per_sequence"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kSequences), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StepDriverStep)->ArgNames({"threads"})->Arg(1)->Arg(2)->Arg(4)->Iterations(400)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Resident memory of this process, in bytes (/proc/self/statm), after handing freed memory back to
// the system: what a set of drafters holds is the difference across their construction.
double resident_bytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// 16 sequences begin over one document set of 16 documents, 2M tokens in all (each with its own
// 64-token prompt): `shared` 0, each LlmaDrafter indexes the documents in its begin() (what every
// sequence paid before LlmaIndex); 1, one LlmaIndex is built and every drafter is given it. One
// iteration: the index (shared), the 16 begin() calls, the memory they hold; then all is freed.
// REFDEC_BENCH_REFERENCE_TOKENS sets the set's size (the CTest smoke run takes a small one).
void BM_SharedReferenceBegin(benchmark::State& state) {
  constexpr std::size_t kSequences = 16, kDocuments = 16;
  static const std::vector<Tokens> documents = [] {
    const char* env = std::getenv("REFDEC_BENCH_REFERENCE_TOKENS");
    const std::size_t total = env != nullptr && *env != '\0' ? static_cast<std::size_t>(std::stoull(env)) : std::size_t{1} << 21;
    std::vector<Tokens> d;
    for (std::uint32_t i = 0; i < kDocuments; ++i) d.push_back(make_text(std::max<std::size_t>(total / kDocuments, 1), {}, 100 + i));
    return d;
  }();
  std::vector<Tokens> prompts;
  for (std::uint32_t i = 0; i < kSequences; ++i) prompts.push_back(make_text(kPrompt, documents[i % kDocuments], 200 + i));
  const bool shared = state.range(0) != 0;
  double index_s = 0, begin_s = 0, held = 0;
  for (auto _ : state) {
    const double before = resident_bytes();
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<const LlmaIndex> index;
    if (shared) index = std::make_shared<const LlmaIndex>(documents);
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<LlmaDrafter> drafters;
    for (std::size_t i = 0; i < kSequences; ++i) {
      drafters.push_back(shared ? LlmaDrafter(index) : LlmaDrafter());
      if (shared)
        drafters.back().begin(prompts[i], {});
      else
        drafters.back().begin(prompts[i], documents);
    }
    const auto t2 = std::chrono::steady_clock::now();
    index_s += std::chrono::duration<double>(t1 - t0).count();
    begin_s += std::chrono::duration<double>(t2 - t1).count();
    held += resident_bytes() - before;
    benchmark::DoNotOptimize(drafters.data());
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["index_ms"] = 1e3 * index_s / n;
  state.counters["begin_ms_per_sequence"] = 1e3 * begin_s / n / kSequences;
  state.counters["held_MiB"] = held / n / (1 << 20);
  if (shared) state.counters["index_MiB"] = static_cast<double>(LlmaIndex(documents).bytes()) / (1 << 20);
  std::size_t tokens = 0;
  for (const Tokens& d : documents) tokens += d.size();
  state.counters["reference_tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_SharedReferenceBegin)->ArgNames({"shared"})->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
