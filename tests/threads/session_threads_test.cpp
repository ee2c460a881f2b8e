// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// One Session per thread over one shared const model: each thread gets what it gets alone. Also
// run under ThreadSanitizer (tests/tsan.cmake); libtorch itself is not instrumented, so its own
// thread pool is kept to one thread here and only refdec's code is checked.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/tiny_llama.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "refdec/torch/session.hpp"

namespace {

using namespace refdec;

TEST(Threads, OneSessionPerThreadOverASharedModel) {
  at::set_num_threads(1);
  const LlamaModel model = LlamaModel::random(refdec_test::tiny_llama_config(2, 97, 64), 3);
  GenerateOptions options;
  options.limits.max_new_tokens = 24;
  const auto decode = [&](int t) {
    Session session(model, PagedKvStore(model.kv_layout(), 32, 8), options);
    session.add(Request{{1, static_cast<Token>(5 + t)}, {{static_cast<Token>(5 + t), 7, 8, 9}}},
                AnyDrafter(LlmaDrafter({.self_reference = true})));
    session.add(Request{{1, 2, static_cast<Token>(9 + t)}, {}});
    std::vector<Token> out;
    while (!session.idle())
      for (const auto& u : session.step()) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    return out;
  };
  constexpr int kThreads = 4;
  std::vector<std::vector<Token>> alone, together(kThreads);
  for (int t = 0; t < kThreads; ++t) alone.push_back(decode(t));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { together[static_cast<std::size_t>(t)] = decode(t); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(together, alone);
  EXPECT_EQ(alone[0].size(), 48u);
}

}  // namespace
