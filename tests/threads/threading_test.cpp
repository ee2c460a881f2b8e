// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// What refdec shares across threads, exercised from several threads at once; built and run under
// ThreadSanitizer by tests/tsan.cmake (the `tsan_threading_tests` CTest). Shared: a Datastore
// (queried by REST drafters, one per thread), an LlmaIndex (read by LLMA drafters, one per
// thread), const DraftTrees (linearised with per-thread
// scratch), const StepPlans (walked), an OutputHistory (written and read by the drafters a
// StepDriver runs on its drafting threads), a ReferenceIndex (read by drafters while others add
// to it); per thread: drafters, sessions of plans.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/rest.hpp"
#include "common/random_text.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

constexpr int kThreads = 8;


// One Datastore and one LlmaIndex over the same documents, eight threads each with its own REST
// and LLMA drafters drafting over them: every thread gets what it gets alone.
TEST(Threads, SharedDatastoreServesDraftersInEveryThread) {
  std::mt19937 rng(1);
  std::vector<std::vector<Token>> docs;
  for (int d = 0; d < 6; ++d) docs.push_back(refdec_test::random_text(rng, 2000));
  refdec_test::TempDir dir;
  build_datastore(docs, 50, dir / "shared.ds");
  const auto store = Datastore::open_shared(dir / "shared.ds");
  const auto index = std::make_shared<const LlmaIndex>(docs);
  const auto draft_all = [&](int t) {
    std::mt19937 local(100 + static_cast<unsigned>(t));
    const auto prompt = refdec_test::random_text(local, 300);
    RestDrafter rest(store);
    LlmaDrafter llma({.min_match = 1, .continuation = 8, .self_reference = true});
    LlmaDrafter shared_llma(index, {.min_match = 1, .continuation = 8, .self_reference = true});
    const std::vector<std::vector<Token>> references = {docs[static_cast<std::size_t>(t) % docs.size()]};
    rest.begin(prompt, {});
    llma.begin(prompt, references);
    shared_llma.begin(prompt, {});
    std::vector<std::vector<Token>> out;
    for (int step = 0; step < 200; ++step) {
      DraftTree a, b, c;
      rest.propose(32, a);
      llma.propose(32, b);
      shared_llma.propose(32, c);
      out.push_back(a.linearize(0, 32).tokens);
      out.push_back(b.linearize(0, 32).tokens);
      out.push_back(c.linearize(0, 32).tokens);
      const std::vector<Token> next = {static_cast<Token>(local() % 50)};
      rest.accept(next);
      llma.accept(next);
      shared_llma.accept(next);
    }
    return out;
  };
  std::vector<std::vector<std::vector<Token>>> alone, together(kThreads);
  for (int t = 0; t < kThreads; ++t) alone.push_back(draft_all(t));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { together[static_cast<std::size_t>(t)] = draft_all(t); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(together, alone);
}

// Const trees and plans are read from many threads: linearise (each thread its own scratch), plan
// and walk, all equal to a single-threaded run.
TEST(Threads, ConstTreesAndPlansAreSharedReadOnly) {
  std::mt19937 rng(2);
  DraftTree tree;
  for (int p = 0; p < 200; ++p) {
    std::vector<Token> path(1 + rng() % 10);
    for (auto& x : path) x = static_cast<Token>(rng() % 20);
    tree.insert(path, 1.0f + static_cast<float>(rng() % 4));
  }
  const DraftTree& shared = tree;
  const std::vector<LinearTree> trees = {shared.linearize(3, 64), shared.linearize(4, 16)};
  StepPlan plan_storage;
  plan_step(trees, {}, std::vector<std::int64_t>{10, 20}, 20, plan_storage);
  const StepPlan& plan = plan_storage;
  const auto work = [&](int t) {
    LinearizeScratch scratch;
    LinearTree lin;
    shared.linearize(static_cast<Token>(t % 20), 48, lin, scratch);
    StepPlan local;
    const std::vector<LinearTree> mine = {lin};
    plan_step(mine, {}, std::vector<std::int64_t>{5}, 20, local);
    std::vector<Token> target(static_cast<std::size_t>(plan.rows()));
    for (std::size_t i = 0; i < target.size(); ++i) target[i] = static_cast<Token>((i * 7 + static_cast<std::size_t>(t)) % 20);
    Acceptance a;
    accept(plan.tree(t % 2), ChoiceArray{target.data() + plan.indptr[static_cast<std::size_t>(t % 2)]}, a);
    return std::make_pair(local.tokens, a.tokens);
  };
  std::vector<std::pair<std::vector<Token>, std::vector<Token>>> alone, together(kThreads);
  for (int t = 0; t < kThreads; ++t) alone.push_back(work(t));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { together[static_cast<std::size_t>(t)] = work(t); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(together, alone);
}

// A StepDriver drafting on 4 threads, its sequences' drafters (history over LLMA and the n-gram
// trie) sharing one OutputHistory that sequences write as they finish: every sequence's output
// is the text its target continues (a fixed cycle), as on one thread.
TEST(Threads, StepDriverDraftsOnItsThreads) {
  const auto history = std::make_shared<OutputHistory>(4096);
  StepDriver driver({.vocab_size = 50, .max_context = 256, .prefill_chunk = 8, .drafting_threads = 4});
  const auto target = [](Token t) { return static_cast<Token>((t * 7 + 3) % 50); };  // the next token after t
  std::vector<std::vector<Token>> outputs(32);
  std::size_t added = 0;
  while (added < outputs.size() || !driver.idle()) {
    while (added < outputs.size() && driver.active() < 12) {  // sequences join as others leave
      const Token first = static_cast<Token>(added % 50);
      AnyDrafter inner = added % 2 == 0 ? AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .self_reference = true})) : AnyDrafter(NgramTrieDrafter());
      driver.add({first, target(first)}, {}, {.max_new_tokens = 24, .budget = 8}, AnyDrafter(HistoryDrafter(std::move(inner), history)));
      ++added;
    }
    if (driver.prepare()) {  // the target's token after each row is a function of the row's own token: no cache needed
      std::vector<Token> choices;
      for (const Token t : driver.plan().tokens) choices.push_back(target(t));
      driver.complete_greedy(choices);
    }
    for (const RequestUpdate& u : driver.updates())
      outputs[static_cast<std::size_t>(u.id)].insert(outputs[static_cast<std::size_t>(u.id)].end(), u.tokens.begin(), u.tokens.end());
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    std::vector<Token> want;
    Token t = target(static_cast<Token>(i % 50));
    while (want.size() < 24) want.push_back(t = target(t));
    EXPECT_EQ(outputs[i], want) << "sequence " << i;
  }
  EXPECT_GT(driver.stats().tokens_per_step(), 2.0) << "the history and the sequences' own text were drafted from";
}

// One draft (budget 16), then a random token accepted: how many of its scores are not counts of
// occurrences (whole, at least 1, at most the parent's), and whether it drafted anything.
std::pair<int, bool> draft_once(IndexDrafter& drafter, DraftTree& tree, std::mt19937& rng) {
  tree.clear();
  drafter.propose(16, tree);
  int not_counts = 0;
  for (std::int32_t i = 1; i <= static_cast<std::int32_t>(tree.size()); ++i) {
    const float score = tree.node(i).score;
    not_counts += !(score >= 1.0f && score == std::floor(score));
    for (std::int32_t c = tree.node(i).first_child; c >= 0; c = tree.node(c).next_sibling) not_counts += tree.node(c).score > score;
  }
  drafter.accept(std::vector<Token>{static_cast<Token>(rng() % 50)});
  return {not_counts, tree.size() > 0};
}

// One ReferenceIndex, merging on its own thread, read by seven threads' drafters while an eighth
// adds documents and the readers' own outputs join it as their sequences end: every proposal's
// scores are counts of occurrences, and every snapshot a reader takes holds at least what the one
// before it held, in at most kMaxSegments segments (a writer ahead of the merges waits).
TEST(Threads, SharedReferenceIndexServesReadersWhileOthersAdd) {
  const auto index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = 1 << 20, .depth = 16, .background_merge = true});
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    std::mt19937 rng(99);
    for (int d = 0; d < 300; ++d) index->add(refdec_test::random_text(rng, 64 + rng() % 64));
  });
  std::vector<int> bad(kThreads - 1, 0), proposals(kThreads - 1, 0);
  for (int r = 0; r < kThreads - 1; ++r)
    threads.emplace_back([&, r] {
      std::mt19937 rng(static_cast<std::uint32_t>(r));
      IndexDrafter drafter(index, {.max_match = 8});
      DraftTree tree;
      std::size_t seen = 0;
      for (int sequence = 0; sequence < 20; ++sequence) {
        drafter.begin(refdec_test::random_text(rng, 32), {});
        for (int step = 0; step < 20; ++step) {
          const auto snap = index->snapshot();
          const std::size_t now = snap->tokens;
          bad[static_cast<std::size_t>(r)] += now < seen;
          bad[static_cast<std::size_t>(r)] += snap->segments.size() > ReferenceIndex::kMaxSegments;
          seen = now;
          const auto [not_counts, drafted] = draft_once(drafter, tree, rng);
          bad[static_cast<std::size_t>(r)] += not_counts;
          proposals[static_cast<std::size_t>(r)] += drafted;
        }
        drafter.finish();
      }
    });
  for (auto& t : threads) t.join();
  index->wait_for_merges();
  EXPECT_LE(index->snapshot()->segments.size(), 24u);
  for (int r = 0; r < kThreads - 1; ++r) {
    EXPECT_EQ(bad[static_cast<std::size_t>(r)], 0) << "reader " << r;
    EXPECT_GT(proposals[static_cast<std::size_t>(r)], 0) << "reader " << r << " never found a match";
  }
  EXPECT_GE(index->tokens(), 300u * 64 + (kThreads - 1) * 20 * 20);
}

// The same with the index at its bound all along: a writer's adds cut the oldest documents while
// the index's thread merges and seven readers draft. Every snapshot stays within the bound, every
// score is a count, and the newest document is found once the merges settle.
TEST(Threads, SharedReferenceIndexCutsItsOldestWhileReadersDraft) {
  const auto index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = 3000, .depth = 16, .background_merge = true});
  std::vector<std::thread> threads;
  std::vector<Token> last;
  threads.emplace_back([&] {
    std::mt19937 rng(7);
    for (int d = 0; d < 600; ++d) {
      last = refdec_test::random_text(rng, 32 + rng() % 64);
      index->add(last);
    }
  });
  std::vector<int> bad(kThreads - 1, 0), proposals(kThreads - 1, 0);
  for (int r = 0; r < kThreads - 1; ++r)
    threads.emplace_back([&, r] {
      std::mt19937 rng(static_cast<std::uint32_t>(100 + r));
      IndexDrafter drafter(index, {.max_match = 8, .add_output = false});
      DraftTree tree;
      for (int sequence = 0; sequence < 20; ++sequence) {
        drafter.begin(refdec_test::random_text(rng, 32), {});
        for (int step = 0; step < 20; ++step) {
          bad[static_cast<std::size_t>(r)] += index->snapshot()->tokens > 3000;
          const auto [not_counts, drafted] = draft_once(drafter, tree, rng);
          bad[static_cast<std::size_t>(r)] += not_counts;
          proposals[static_cast<std::size_t>(r)] += drafted;
        }
      }
    });
  for (auto& t : threads) t.join();
  index->wait_for_merges();
  for (int r = 0; r < kThreads - 1; ++r) {
    EXPECT_EQ(bad[static_cast<std::size_t>(r)], 0) << "reader " << r;
    EXPECT_GT(proposals[static_cast<std::size_t>(r)], 0) << "reader " << r << " never found a match";
  }
  const auto snap = index->snapshot();
  EXPECT_LE(snap->tokens, 3000u);
  EXPECT_GE(snap->tokens, 3000u * 13 / 16) << "more than the oldest documents cut";
  std::size_t found = 0;
  for (const auto& segment : snap->segments) {
    const auto [lo, hi] = segment->find(std::span<const Token>(last).first(16));
    found += hi - lo;
  }
  EXPECT_GE(found, 1u) << "the newest document is gone";
}

}  // namespace
