// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The shared reference index's costs at server scale: an index of REFDEC_BENCH_INDEX_TOKENS tokens
// (1M by default; docs/performance.md runs 10M) of synthetic text (Zipf words, one run in three a
// passage copied from earlier text), 1,000-token documents. begin() of an IndexDrafter, a draft
// (budget 16) over a fresh 128-token context and one in a sequence's later steps, add() of a
// document (tokens/s, merges included, the index at its bound so that the oldest documents are
// cut as it grows), and drafting by 1, 4 and 16 threads while another adds documents. Counters:
// the index's bytes per token and segments.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "refdec/drafters/index_drafter.hpp"
#include "synthetic_text.hpp"

namespace {

using namespace refdec;

constexpr std::size_t kDocument = 1000;

std::size_t index_tokens() {
  const char* v = std::getenv("REFDEC_BENCH_INDEX_TOKENS");
  return v != nullptr && *v != '\0' ? static_cast<std::size_t>(std::stoull(v)) : std::size_t{1} << 20;
}

// Documents cycle through 64 distinct texts, each passage-rich.
const std::vector<std::vector<Token>>& documents() {
  static const std::vector<std::vector<Token>> docs = [] {
    std::vector<std::vector<Token>> d;
    for (std::uint32_t i = 0; i < 64; ++i) d.push_back(refdec_bench::make_text(kDocument, d.empty() ? std::vector<Token>{} : d.back(), 11 + i));
    return d;
  }();
  return docs;
}

struct Filled {
  std::shared_ptr<ReferenceIndex> index;
  double add_seconds = 0;
};

const Filled& filled() {
  static const Filled f = [] {
    Filled out;
    out.index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = index_tokens()});
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t t = 0, i = 0; t < index_tokens(); t += kDocument, ++i) out.index->add(documents()[i % documents().size()]);
    out.add_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }();
  return f;
}

void report(benchmark::State& state, const ReferenceIndex& index) {
  const auto snap = index.snapshot();
  state.counters["index_tokens"] = static_cast<double>(snap->tokens);
  state.counters["bytes_per_token"] = static_cast<double>(snap->bytes) / static_cast<double>(snap->tokens);
  state.counters["segments"] = static_cast<double>(snap->segments.size());
}

// Contexts: 128 tokens of passage-rich text not in the index.
const std::vector<Token>& context(std::uint32_t seed) {
  static const std::vector<std::vector<Token>> contexts = [] {
    std::vector<std::vector<Token>> c;
    for (std::uint32_t i = 0; i < 32; ++i) c.push_back(refdec_bench::make_text(128, documents()[i % documents().size()], 1000 + i));
    return c;
  }();
  return contexts[seed % contexts.size()];
}

void BM_IndexBegin(benchmark::State& state) {
  IndexDrafter drafter(filled().index);
  const auto& prompt = context(1);
  for (auto _ : state) drafter.begin(prompt, {});
  report(state, *filled().index);
  state.counters["fill_tokens_per_s"] = static_cast<double>(filled().index->tokens()) / filled().add_seconds;
}
BENCHMARK(BM_IndexBegin)->Unit(benchmark::kMicrosecond);

void BM_IndexDraft(benchmark::State& state) {
  IndexDrafter drafter(filled().index);
  DraftTree tree;
  std::uint32_t seed = 0;
  std::int64_t nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    drafter.begin(context(seed++), {});
    tree.clear();
    state.ResumeTiming();
    drafter.propose(16, tree);
    nodes += static_cast<std::int64_t>(tree.size());
  }
  state.counters["nodes"] = static_cast<double>(nodes) / static_cast<double>(state.iterations());
  report(state, *filled().index);
}
BENCHMARK(BM_IndexDraft)->Unit(benchmark::kMicrosecond);

// The same draft while another thread adds documents as fast as it can to an index with
// background_merge (filled the same way first): readers then face up to kMaxSegments segments until
// the merges catch up (a server adds far more slowly). Counter: the segments a draft saw, on average.
void BM_IndexDraftWhileFlooded(benchmark::State& state) {
  auto index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = index_tokens(), .background_merge = true});
  std::size_t next = 0;
  for (std::size_t t = 0; t < index_tokens(); t += kDocument) index->add(documents()[next++ % documents().size()]);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load(std::memory_order_relaxed)) index->add(documents()[next++ % documents().size()]);
  });
  IndexDrafter drafter(index, {.add_output = false});
  DraftTree tree;
  std::uint32_t seed = 0;
  double segments = 0;
  for (auto _ : state) {
    state.PauseTiming();
    drafter.begin(context(seed++), {});
    tree.clear();
    segments += static_cast<double>(index->snapshot()->segments.size());
    state.ResumeTiming();
    drafter.propose(16, tree);
  }
  stop = true;
  writer.join();
  state.counters["segments_seen"] = segments / static_cast<double>(state.iterations());
  report(state, *index);
}
BENCHMARK(BM_IndexDraftWhileFlooded)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A draft (budget 16) in a sequence's later steps: after each draft the sequence accepts the first
// branch of it, up to 4 tokens (or, with nothing drafted, the next token of its context), so that
// each draft's first probe is the last match grown by what was accepted, as in decoding; a fresh
// context every 64 steps (outside the timing).
void BM_IndexDraftInSequence(benchmark::State& state) {
  IndexDrafter drafter(filled().index, {.add_output = false});  // the index stays as filled
  DraftTree tree;
  std::uint32_t seed = 0;
  std::size_t step = 0;
  std::int64_t nodes = 0, accepted = 0;
  std::vector<Token> chain;
  for (auto _ : state) {
    if (step++ % 64 == 0) {
      state.PauseTiming();
      drafter.begin(context(seed++), {});
      state.ResumeTiming();
    }
    tree.clear();
    drafter.propose(16, tree);
    state.PauseTiming();
    nodes += static_cast<std::int64_t>(tree.size());
    chain.clear();
    for (std::int32_t n = tree.node(0).first_child; n >= 0 && chain.size() < 4; n = tree.node(n).first_child) chain.push_back(tree.node(n).token);
    if (chain.empty()) chain.push_back(context(seed)[step % 128]);
    accepted += static_cast<std::int64_t>(chain.size());
    drafter.accept(chain);
    state.ResumeTiming();
  }
  state.counters["nodes"] = static_cast<double>(nodes) / static_cast<double>(state.iterations());
  state.counters["accepted"] = static_cast<double>(accepted) / static_cast<double>(state.iterations());
  report(state, *filled().index);
}
BENCHMARK(BM_IndexDraftInSequence)->Unit(benchmark::kMicrosecond);

// add() of 1,000-token documents into an index already at its bound; the merges in add() (0) or
// on the index's own thread (1: background_merge, the index settled before timing).
void BM_IndexAdd(benchmark::State& state) {
  ReferenceIndex index({.max_tokens = index_tokens(), .background_merge = state.range(0) != 0});
  for (std::size_t t = 0, i = 0; t < index_tokens(); t += kDocument, ++i) index.add(documents()[i % documents().size()]);
  index.wait_for_merges();
  std::size_t i = 0;
  for (auto _ : state) index.add(documents()[i++ % documents().size()]);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kDocument));
  report(state, index);
}
BENCHMARK(BM_IndexAdd)->ArgName("background")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

// `readers` threads drafting (budget 16) while one more thread adds documents all along, for 0.5 s
// per iteration: drafts per second over all readers and tokens added per second.
void BM_IndexReadersWhileAdding(benchmark::State& state) {
  const auto readers = static_cast<std::size_t>(state.range(0));
  const auto& index = filled().index;
  double drafts = 0, added = 0, seconds = 0;
  for (auto _ : state) {
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> draft_count{0}, add_count{0};
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      for (std::size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        index->add(documents()[i % documents().size()]);
        add_count.fetch_add(static_cast<std::int64_t>(kDocument), std::memory_order_relaxed);
      }
    });
    for (std::size_t r = 0; r < readers; ++r)
      threads.emplace_back([&, r] {
        IndexDrafter drafter(index);
        DraftTree tree;
        drafter.begin(context(static_cast<std::uint32_t>(r)), {});
        std::int64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          tree.clear();
          drafter.propose(16, tree);
          ++n;
        }
        draft_count.fetch_add(n, std::memory_order_relaxed);
      });
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stop = true;
    for (auto& t : threads) t.join();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    drafts += static_cast<double>(draft_count.load());
    added += static_cast<double>(add_count.load());
  }
  state.counters["drafts_per_s"] = drafts / seconds;
  state.counters["added_tokens_per_s"] = added / seconds;
}
BENCHMARK(BM_IndexReadersWhileAdding)->ArgName("readers")->Arg(1)->Arg(4)->Arg(16)->Iterations(2)->Unit(benchmark::kMillisecond);

}  // namespace
