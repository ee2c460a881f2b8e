// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Datastore costs: REST retrieval latency per step (median and p99 as counters), suffix search,
// checksum throughput, build throughput, and a shared ReferenceIndex filled with the datastore's
// documents in order (real outputs when the datastore holds them: appending text that is not the
// index bench's cycled copies). The retrieval benchmarks use the datastore named by
// $REFDEC_BENCH_DATASTORE when set (e.g. a 500M-token file), else a small synthetic one built here.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "refdec/io/file_io.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/index/index_files.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/datastore/retrieval.hpp"
#include "refdec/drafters/rest.hpp"
#include "synthetic_text.hpp"

namespace {

using namespace refdec;
using refdec_bench::Tokens;

constexpr std::int32_t kVocab = 32000;
constexpr std::size_t kSmallTokens = 200'000;

// Synthetic text (Zipf words from a 32000-token vocabulary, one run in three copied from earlier
// text) cut into documents of `doc_len` tokens.
std::vector<Tokens> synthetic_corpus(std::size_t num_tokens, std::size_t doc_len, std::uint32_t seed) {
  const Tokens all = refdec_bench::make_text(num_tokens, {}, seed, kVocab);
  std::vector<Tokens> docs;
  for (std::size_t at = 0; at < all.size(); at += doc_len)
    docs.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at),
                      all.begin() + static_cast<std::ptrdiff_t>(std::min(at + doc_len, all.size())));
  return docs;
}

struct Store {
  std::filesystem::path dir;
  std::shared_ptr<const Datastore> ds;
  ~Store() {
    if (!dir.empty()) refdec::remove_tree(dir);
  }
};

const Datastore& store() {
  static const Store s = [] {
    Store st;
    if (const char* env = std::getenv("REFDEC_BENCH_DATASTORE"); env != nullptr && *env != '\0') {
      // The checksum pass at open also maps every page: queries then pay no page faults.
      // REFDEC_BENCH_VERIFY=0 skips it (and measures with faults on first touch).
      DatastoreOpenOptions opt;
      const char* verify = std::getenv("REFDEC_BENCH_VERIFY");
      opt.verify = verify == nullptr || std::string(verify) != "0";
      st.ds = Datastore::open_shared(env, opt);
      return st;
    }
    st.dir = std::filesystem::temp_directory_path() / ("refdec_datastore_bench_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(st.dir);
    // REFDEC_BENCH_TOKENS=N sizes the synthetic store (e.g. 500000000: ~5 min, ~11 GB of memory).
    std::size_t tokens = kSmallTokens;
    if (const char* n = std::getenv("REFDEC_BENCH_TOKENS"); n != nullptr && *n != '\0') tokens = std::stoull(n);
    build_datastore(synthetic_corpus(tokens, 2000, 1), kVocab, st.dir / "bench.ds");
    st.ds = Datastore::open_shared(st.dir / "bench.ds");
    return st;
  }();
  return *s.ds;
}

// Contexts of 16 tokens: read from random datastore positions (long matches, few occurrences), or,
// with `random_tail`, the same with the last `tail` tokens drawn at random (short matches of
// frequent tokens: many occurrences, so K continuations are read).
std::vector<Tokens> contexts(const Datastore& ds, std::size_t count, std::size_t tail, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tokens> out;
  while (out.size() < count) {
    const std::uint64_t p = rng() % (ds.size() - 16);
    Tokens c;
    for (std::uint64_t i = p; i < p + 16; ++i) {
      const Token t = ds.token(i);
      c.push_back(t < 0 ? 0 : t);
    }
    for (std::size_t i = 16 - tail; i < 16; ++i) c[i] = static_cast<Token>(rng() % std::min<std::uint64_t>(500, static_cast<std::uint64_t>(ds.vocab_size())));  // frequent words
    out.push_back(std::move(c));
  }
  return out;
}

// One REST step (retrieval plus draft tree) per iteration; counters p50_us and p99_us.
void BM_RestStep(benchmark::State& state) {
  const Datastore& ds = store();
  const auto ctx = contexts(ds, 1 << 16, static_cast<std::size_t>(state.range(0)), 7);
  RetrievalOptions opt;
  opt.max_occurrences = static_cast<std::size_t>(state.range(1));
  RetrievalScratch scratch;
  DraftTree out;
  std::vector<double> us;
  std::size_t i = 0;
  double nodes = 0, match = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = retrieve(ds, ctx[i++ % ctx.size()], opt, 64, out, scratch);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    benchmark::DoNotOptimize(out);
    nodes += static_cast<double>(r.nodes);
    match += static_cast<double>(r.match_length);
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  state.counters["nodes"] = nodes / static_cast<double>(us.size());
  state.counters["match_len"] = match / static_cast<double>(us.size());
  state.counters["tokens"] = static_cast<double>(ds.num_corpus_tokens());
}
BENCHMARK(BM_RestStep)->ArgNames({"random_tail", "K"})->Args({0, 256})->Args({1, 256})->Args({3, 256})->Args({1, 1024});

// The same step with DraftTree doing the counting: every sampled continuation inserted into
// `out`, then out.prune(c). Retrieval's own trie (BM_RestStep) is the faster way to the same tree.
void BM_RestStepViaDraftTree(benchmark::State& state) {
  const Datastore& ds = store();
  const auto ctx = contexts(ds, 1 << 16, static_cast<std::size_t>(state.range(0)), 7);
  const auto k_max = static_cast<std::uint64_t>(state.range(1));
  DraftTree out;
  Tokens cont;
  std::size_t i = 0;
  for (auto _ : state) {
    out.clear();
    const auto [len, range] = ds.longest_suffix_match(ctx[i++ % ctx.size()], 16);
    const std::uint64_t n = range.size();
    const std::uint64_t k = std::min(n, k_max);
    for (std::uint64_t j = 0; j < k; ++j) {
      cont.clear();
      ds.continuation(ds.suffix(range.begin + j * (n / k) + j * (n % k) / k) + len - 1, 10, cont);
      out.insert(cont, 1.0f);
    }
    out.prune(64);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_RestStepViaDraftTree)->ArgNames({"random_tail", "K"})->Args({0, 256})->Args({1, 256})->Args({1, 1024});

// Suffix search of a 4-token pattern.
void BM_Find(benchmark::State& state) {
  const Datastore& ds = store();
  auto ctx = contexts(ds, 1 << 16, 0, 9);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& c = ctx[i++ % ctx.size()];
    benchmark::DoNotOptimize(ds.find(std::span<const Token>(c).last(4)));
  }
}
BENCHMARK(BM_Find);

// Checksum throughput over 64 MiB.
void BM_Checksum(benchmark::State& state) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(state.range(0)), 0x5A);
  for (auto _ : state) benchmark::DoNotOptimize(datastore_hash(bytes));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Checksum)->Arg(64 << 20)->Unit(benchmark::kMillisecond);

// Opening the store with each level of checking (the file in the page cache): 0 none, 1 the
// sampled suffix-array order check alone, 2 the default (checksum, ranges and the sampled check),
// 3 everything, the full order check included.
void BM_Open(benchmark::State& state) {
  const std::filesystem::path path = store().path();
  DatastoreOpenOptions options;
  options.verify = state.range(0) >= 2;
  options.order_samples = state.range(0) == 0 ? 0 : 1024;
  options.verify_order = state.range(0) == 3;
  for (auto _ : state) benchmark::DoNotOptimize(Datastore::open(path, options).size());
}
BENCHMARK(BM_Open)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

// The datastore's documents added in order, one add() each, to a ReferenceIndex bounded at half
// of them (so that the second half cuts the oldest as it comes): tokens added per second, merges
// and cuts included.
void BM_IndexAddDocuments(benchmark::State& state) {
  const Datastore& ds = store();
  const auto documents = index_files_detail::split_documents(ds.size(), [&](std::uint64_t k) { return ds.token(k); });
  std::size_t tokens = 0, segments = 0;
  for (auto _ : state) {
    ReferenceIndex index({.max_tokens = ds.num_corpus_tokens() / 2});
    for (const auto& d : documents) index.add(d);
    tokens += ds.num_corpus_tokens();
    segments = index.snapshot()->segments.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(tokens));
  state.counters["documents"] = static_cast<double>(documents.size());
  state.counters["segments"] = static_cast<double>(segments);
}
BENCHMARK(BM_IndexAddDocuments)->Unit(benchmark::kMillisecond);

// Build throughput (encode, suffix sort, write, checksum) in corpus tokens per second.
void BM_Build(benchmark::State& state) {
  const auto docs = synthetic_corpus(static_cast<std::size_t>(state.range(0)), 2000, 3);
  const auto dir = std::filesystem::temp_directory_path() / ("refdec_datastore_build_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  for (auto _ : state) benchmark::DoNotOptimize(build_datastore(docs, kVocab, dir / "b.ds"));
  refdec::remove_tree(dir);
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(state.range(0)),
                                                      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Build)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace
