// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// node_draws (include/refdec/torch/node_draws.hpp): every tree node's draw by tensor ops, against
// LogitsProcessor and sampled acceptance on the host.

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/sampled_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/node_draws.hpp"

namespace {

using namespace refdec;

// ---- node_draws (include/refdec/torch/node_draws.hpp) against LogitsProcessor on the host ----

// A random draft tree over `vocab` tokens with at most `max_nodes` nodes (sometimes the root only).
LinearTree random_draw_tree(std::mt19937& rng, std::int32_t vocab, unsigned max_nodes) {
  DraftTree t;
  for (unsigned p = 0, n = rng() % 12; p < n; ++p) {
    std::vector<Token> path(1 + rng() % 8);
    for (auto& x : path) x = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
    t.insert(path, 1.0f + static_cast<float>(rng() % 3));
  }
  return t.linearize(static_cast<Token>(rng() % static_cast<unsigned>(vocab)), 1 + rng() % max_nodes);
}

// Random settings where each processing option is on about half the time; greedy sometimes.
SamplingOptions random_sampling_options(std::mt19937& rng, std::int32_t vocab) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const auto coin = [&](unsigned in) { return rng() % in == 0; };
  SamplingOptions o;
  if (coin(8)) o.temperature = 0.0f;
  else if (!coin(3)) o.temperature = 0.2f + 1.6f * unit(rng);
  if (coin(10)) o.top_k = 1;
  else if (coin(2)) o.top_k = 1 + static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab + 1));  // up to vocab + 1
  if (coin(2)) o.top_p = coin(6) ? 1.0f : 0.02f + 0.97f * unit(rng);
  if (coin(2)) o.min_p = coin(6) ? 1.0f : 0.4f * unit(rng);
  if (coin(2)) o.repetition_penalty = 0.5f + 1.5f * unit(rng);
  if (coin(2)) o.presence_penalty = -0.5f + 2.0f * unit(rng);
  if (coin(2)) o.frequency_penalty = -0.5f + 2.0f * unit(rng);
  o.seed = std::uint64_t{rng()} << 32 | rng();
  return o;
}

struct NodeDrawStats {
  std::int64_t nodes = 0, mismatches = 0, greedy_nodes = 0, greedy_mismatches = 0, walks = 0, walk_mismatches = 0;
};

// Runs `trials` random batches of `batch` trees over `vocab` tokens through node_draws() and
// through process_tree() + sample_from_probs() with the same uniforms, and compares the draws and
// the walks (greedy_accept over the draws against sampled_accept over the host rows).
NodeDrawStats compare_node_draws(std::uint32_t seed, std::int64_t batch, std::int32_t vocab, int trials,
                                 at::ScalarType compute) {
  std::mt19937 rng(seed);
  at::manual_seed(seed);
  NodeDrawStats st;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<LinearTree> trees;
    std::vector<TokenCounts> counts;
    std::vector<SamplingRow> rows;
    std::int64_t T = 1;
    for (std::int64_t b = 0; b < batch; ++b) {
      trees.push_back(random_draw_tree(rng, vocab, 40));
      T = std::max<std::int64_t>(T, trees.back().size());
      TokenCounts c(vocab);
      for (unsigned k = 0, n = rng() % 12; k < n; ++k) c.add_prompt(std::vector<Token>{static_cast<Token>(rng() % static_cast<unsigned>(vocab))});
      for (unsigned k = 0, n = rng() % 12; k < n; ++k) c.add_output(static_cast<Token>(rng() % static_cast<unsigned>(vocab)));
      SamplingRow row{random_sampling_options(rng, vocab), {}, rng() % 1000};
      if (row.options.has_penalties() || rng() % 2 == 0) row.counts = DeviceTokenCounts::from(c, at::kCPU);
      counts.push_back(std::move(c));
      rows.push_back(std::move(row));
    }
    if (rng() % 4 == 0 && batch > 1) trees[rng() % static_cast<unsigned>(batch)] = LinearTree{};  // an empty tree
    T += rng() % 3;
    at::Tensor logits = at::randn({batch, T, vocab}) * (0.5 + 0.5 * (rng() % 10));  // [B, T, V] float
    if (rng() % 3 == 0) logits = (logits * 2).round() / 2;  // many ties
    for (std::int64_t b = 0; b < batch; ++b)  // padding rows may hold anything
      logits[b].slice(0, trees[static_cast<std::size_t>(b)].size(), T).fill_(std::numeric_limits<float>::quiet_NaN());
    const at::Tensor draws = node_draws(logits, trees, rows, compute);  // [B, T] int32
    EXPECT_EQ(draws.sizes(), (at::IntArrayRef{batch, T}));
    const auto* dp = draws.data_ptr<std::int32_t>();
    for (std::int64_t b = 0; b < batch; ++b) {
      const LinearTree& tree = trees[static_cast<std::size_t>(b)];
      const SamplingRow& row = rows[static_cast<std::size_t>(b)];
      for (std::int64_t i = tree.size(); i < T; ++i) EXPECT_EQ(dp[b * T + i], -1);
      if (tree.size() == 0) continue;
      const at::Tensor raw = logits[b].slice(0, 0, tree.size()).contiguous();
      std::vector<float> probs(raw.data_ptr<float>(), raw.data_ptr<float>() + raw.numel());  // [nodes, V]
      LogitsProcessor proc(row.options);
      proc.process_tree(probs, vocab, tree, counts[static_cast<std::size_t>(b)]);
      const std::span<const Token> got(dp + b * T, static_cast<std::size_t>(tree.size()));
      for (std::int32_t i = 0; i < tree.size(); ++i) {
        const Token want = sample_from_probs(&probs[static_cast<std::size_t>(i) * static_cast<std::size_t>(vocab)], vocab,
                                             uniform(row.options.seed, row.generated + static_cast<std::uint64_t>(tree.depth[static_cast<std::size_t>(i)])));
        ++st.nodes;
        st.mismatches += got[static_cast<std::size_t>(i)] != want;
        if (row.options.is_greedy()) {
          ++st.greedy_nodes;
          st.greedy_mismatches += got[static_cast<std::size_t>(i)] != want;
        }
      }
      Acceptance walk, host;
      greedy_accept(tree, got, walk);
      sampled_accept(tree, probs, vocab, row.options.seed, row.generated, host);
      ++st.walks;
      st.walk_mismatches += walk.nodes != host.nodes || walk.tokens != host.tokens;
    }
  }
  return st;
}

class NodeDraws : public ::testing::TestWithParam<std::tuple<std::int64_t, std::int32_t>> {};

// float64: every draw and every walk equals the host path; float32: at most 0.1% of the draws move.
TEST_P(NodeDraws, MatchProcessTreeAndSampledAccept) {
  const auto [batch, vocab] = GetParam();
  const int trials = vocab > 200 ? 150 : 300;
  for (const at::ScalarType compute : {at::kDouble, at::kFloat}) {
    const NodeDrawStats st = compare_node_draws(static_cast<std::uint32_t>(1000 * batch + vocab), batch, vocab, trials, compute);
    std::printf("[node_draws] B=%lld V=%d %s: %lld/%lld draws differ (greedy %lld/%lld), %lld/%lld walks differ\n",
                static_cast<long long>(batch), vocab, compute == at::kDouble ? "float64" : "float32",
                static_cast<long long>(st.mismatches), static_cast<long long>(st.nodes), static_cast<long long>(st.greedy_mismatches),
                static_cast<long long>(st.greedy_nodes), static_cast<long long>(st.walk_mismatches), static_cast<long long>(st.walks));
    EXPECT_GT(st.greedy_nodes, 0);
    if (compute == at::kDouble) {
      EXPECT_EQ(st.mismatches, 0);
      EXPECT_EQ(st.walk_mismatches, 0);
    } else {
      EXPECT_LE(st.mismatches * 1000, st.nodes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, NodeDraws,
                         ::testing::Combine(::testing::Values<std::int64_t>(1, 3, 7), ::testing::Values<std::int32_t>(5, 111, 512)));

// The device counts equal the host counts they were copied from, also after an update.
TEST(NodeDrawsInput, DeviceTokenCountsFollowTokenCounts) {
  TokenCounts c(20);
  c.add_prompt(std::vector<Token>{3, 4, 3});
  c.add_output(std::vector<Token>{4, 7, 7, 19});
  auto d = DeviceTokenCounts::from(c, at::kCPU);
  d.add_output(std::vector<Token>{7, 0});
  d.add_prompt(std::vector<Token>{5});
  c.add_output(std::vector<Token>{7, 0});
  c.add_prompt(std::vector<Token>{5});
  ASSERT_EQ(d.vocab_size(), 20);
  for (Token t = 0; t < 20; ++t) {
    EXPECT_EQ(d.in_prompt[t].item<bool>(), c.in_prompt(t)) << t;
    EXPECT_EQ(d.output_count[t].item<std::int32_t>(), c.output_count(t)) << t;
  }
  EXPECT_THROW(d.add_output(std::vector<Token>{20}), Error);
}

// Bad input is rejected with the offending value; padding rows may hold NaN, real rows may not.
TEST(NodeDrawsInput, RejectsBadInput) {
  const std::int32_t V = 6;
  DraftTree dt;
  dt.insert(std::vector<Token>{1, 2}, 1.0f);
  dt.insert(std::vector<Token>{3}, 1.0f);
  const std::vector<LinearTree> trees = {dt.linearize(0, 8)};  // 4 nodes
  std::vector<SamplingRow> rows(1);
  auto logits = at::randn({1, 5, V});
  logits[0][4].fill_(std::numeric_limits<float>::infinity());
  EXPECT_NO_THROW(node_draws(logits, trees, rows));
  auto bad = logits.clone();
  bad[0][2][1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(node_draws(bad, trees, rows), Error);
  EXPECT_THROW(node_draws(logits.slice(1, 0, 3), trees, rows), Error);  // fewer rows than nodes
  EXPECT_THROW(node_draws(logits, trees, std::vector<SamplingRow>(2)), Error);
  rows[0].options.repetition_penalty = 1.2f;  // penalties without counts
  EXPECT_THROW(node_draws(logits, trees, rows), Error);
  rows[0].counts = DeviceTokenCounts::zeros(V + 1, at::kCPU);
  EXPECT_THROW(node_draws(logits, trees, rows), Error);
  rows[0].counts = DeviceTokenCounts::zeros(V, at::kCPU);
  EXPECT_NO_THROW(node_draws(logits, trees, rows));
  rows[0].options.top_p = 0.0f;
  EXPECT_THROW(node_draws(logits, trees, rows), Error);
  rows[0].options.top_p = 1.0f;
  auto cyclic = trees;
  cyclic[0].parent[2] = 3;
  EXPECT_THROW(node_draws(logits, cyclic, rows), Error);
  EXPECT_THROW(node_draws(logits.to(at::kInt), trees, rows), Error);
  // Only empty trees: all padding.
  const std::vector<LinearTree> empty(1);
  EXPECT_TRUE(node_draws(logits, empty, rows).eq(-1).all().item<bool>());
}

}  // namespace
