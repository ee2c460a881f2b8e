// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The reference Llama model, the llama2.c loader, the KV cache and the step inputs.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "refdec/torch/calibrate.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/node_draws.hpp"
#include "refdec/torch/verifier.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

LlamaConfig small_config() {
  LlamaConfig c;
  c.dim = 32;
  c.hidden_dim = 48;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 111;
  c.max_seq_len = 128;
  return c;
}

// Logits [T, vocab] of a causal pass over `tokens` in a fresh cache.
at::Tensor causal_logits(const LlamaModel& model, const std::vector<Token>& tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  auto cache = model.make_cache(1, n);
  std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
  const auto logits = model.forward(at::tensor(ids, at::kLong).view({1, n}), at::arange(n, at::kLong).view({1, n}),
                                    at::ones({n, n}, at::kBool).tril().view({1, n, n}), cache);
  return logits[0];
}

std::filesystem::path stories_model() { return refdec_test::data_file("models/stories260K/stories260K.bin"); }

TEST(Llama2cLoader, StoriesGreedyOutputMatchesPublishedText) {
  const auto path = stories_model();
  const auto tok_path = refdec_test::data_file("models/stories260K/tok512.bin");
  if (path.empty() || tok_path.empty()) GTEST_SKIP() << "stories260K not found under " << refdec_test::data_dir();
  const auto model = load_llama2c(path);
  EXPECT_EQ(model.config().dim, 64);
  EXPECT_EQ(model.config().n_layers, 5);
  EXPECT_EQ(model.config().n_kv_heads, 4);
  EXPECT_EQ(model.vocab_size(), 512);
  const auto tokenizer = Llama2cTokenizer::load(tok_path, 512);
  GenerateOptions opt;
  opt.max_new_tokens = 255;  // llama2.c's run: 256 positions, BOS first
  opt.stop_tokens = {1};     // llama2.c stops when it samples BOS again
  const auto result = generate(model, Request{{1}, {}}, AnyDrafter{}, opt);
  const std::string text = tokenizer.decode(result.tokens[0]);
  const std::string published =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
      "saw a big, red ball. She wanted to play with it, but it was too high.";
  EXPECT_EQ(text.substr(0, published.size()), published) << text;
  EXPECT_DOUBLE_EQ(result.stats.tokens_per_step(), 1.0);
}

TEST(Llama2cLoader, RejectsMissingTruncatedAndInvalidFiles) {
  const refdec_test::TempDir tmp;
  const auto& dir = tmp.path();
  EXPECT_THROW(
      {
        try {
          load_llama2c(dir / "missing.bin");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  // A header with dim 0.
  {
    std::ofstream f(dir / "zero.bin", std::ios::binary);
    const std::int32_t header[7] = {0, 8, 1, 1, 1, 10, 8};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  EXPECT_THROW(load_llama2c(dir / "zero.bin"), Error);
  // A file shorter than its header.
  {
    std::ofstream f(dir / "short.bin", std::ios::binary);
    f.write("abc", 3);
  }
  EXPECT_THROW(load_llama2c(dir / "short.bin"), Error);
  const auto path = stories_model();
  if (path.empty()) GTEST_SKIP() << "stories260K not found: truncation case skipped";
  std::filesystem::copy_file(path, dir / "truncated.bin", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(dir / "truncated.bin", std::filesystem::file_size(path) - 100);
  try {
    load_llama2c(dir / "truncated.bin");
    ADD_FAILURE() << "a truncated checkpoint loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(LlamaModel, RejectsInconsistentConfigAndWeights) {
  auto c = small_config();
  c.n_kv_heads = 3;  // 4 heads are not a multiple of 3
  EXPECT_THROW(LlamaModel::random(c, 1), Error);
  auto model = LlamaModel::random(small_config(), 1);
  auto w = model.weights();
  w.layers[1].wk = at::zeros({5, 32});
  EXPECT_THROW(LlamaModel(small_config(), w), c10::Error);
}

// Every node's logits from one tree-masked pass equal a causal pass over its own path.
TEST(LlamaModel, TreeMaskedPassEqualsPerPathPasses) {
  for (const auto dtype : {at::kDouble, at::kFloat}) {
    const auto model = LlamaModel::random(small_config(), 7, dtype);
    const std::vector<Token> prefix = {1, 17, 42, 5, 99};
    DraftTree draft;
    draft.insert(std::vector<Token>{3, 4, 5}, 3.0f);
    draft.insert(std::vector<Token>{3, 8}, 2.0f);
    draft.insert(std::vector<Token>{9, 10, 11, 12}, 1.0f);
    const auto tree = draft.linearize(prefix.back(), 100);
    auto cache = model.make_cache(1, 64);
    // Cache the prefix but its last token (the root).
    const std::vector<LinearTree> chains = {LinearTree::chain(std::span<const Token>(prefix).first(prefix.size() - 1))};
    auto in = build_step_inputs(chains, cache.lengths());
    model.forward(in.ids, in.positions, in.mask, cache);
    std::vector<std::vector<std::int32_t>> kept = {{0, 1, 2, 3}};
    cache.commit(kept);
    const std::vector<LinearTree> trees = {tree};
    in = build_step_inputs(trees, cache.lengths());
    const auto logits = model.forward(in.ids, in.positions, in.mask, cache)[0];
    const double tol = dtype == at::kDouble ? 1e-10 : 1e-4;
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      std::vector<Token> path;
      for (std::int32_t j = i; j > 0; j = tree.parent[static_cast<std::size_t>(j)]) path.insert(path.begin(), tree.tokens[static_cast<std::size_t>(j)]);
      std::vector<Token> seq = prefix;
      seq.insert(seq.end(), path.begin(), path.end());
      const auto want = causal_logits(model, seq)[static_cast<std::int64_t>(seq.size()) - 1];
      EXPECT_TRUE(at::allclose(logits[i], want, tol, tol)) << "node " << i << " dtype " << dtype;
    }
  }
}

// After committing an accepted path, the next logits equal a fresh prefill of the sequence.
TEST(KvCache, CommitThenStepEqualsFreshPrefill) {
  const auto model = LlamaModel::random(small_config(), 11, at::kFloat);
  std::mt19937 rng(3);
  std::uniform_int_distribution<Token> tok(3, 110);
  for (int trial = 0; trial < 5; ++trial) {
    // Two sequences of different lengths in one batch.
    std::vector<std::vector<Token>> prefixes = {{1}, {1}};
    for (int i = 0; i < 6 + trial; ++i) prefixes[0].push_back(tok(rng));
    for (int i = 0; i < 2 + 2 * trial; ++i) prefixes[1].push_back(tok(rng));
    auto cache = model.make_cache(2, 64);
    std::vector<LinearTree> trees(2);
    std::vector<std::vector<std::int32_t>> kept(2);
    for (std::size_t b = 0; b < 2; ++b) {
      trees[b] = LinearTree::chain(std::span<const Token>(prefixes[b]).first(prefixes[b].size() - 1));
      for (std::int32_t i = 0; i < trees[b].size(); ++i) kept[b].push_back(i);
    }
    auto in = build_step_inputs(trees, cache.lengths());
    model.forward(in.ids, in.positions, in.mask, cache);
    cache.commit(kept);
    // A random draft tree per sequence; keep a random root-to-leaf path.
    std::vector<std::vector<Token>> accepted(2);
    for (std::size_t b = 0; b < 2; ++b) {
      DraftTree draft;
      for (int p = 0; p < 4; ++p) {
        std::vector<Token> path(static_cast<std::size_t>(1 + p));
        for (auto& t : path) t = tok(rng) % 7 + 3;
        draft.insert(path, 1.0f);
      }
      trees[b] = draft.linearize(prefixes[b].back(), 100);
      std::int32_t node = trees[b].size() - 1 - static_cast<std::int32_t>(b);  // some leaf-ish node
      kept[b].clear();
      for (std::int32_t j = node; j >= 0; j = trees[b].parent[static_cast<std::size_t>(j)]) kept[b].insert(kept[b].begin(), j);
      for (std::size_t i = 1; i < kept[b].size(); ++i) accepted[b].push_back(trees[b].tokens[static_cast<std::size_t>(kept[b][i])]);
    }
    in = build_step_inputs(trees, cache.lengths());
    model.forward(in.ids, in.positions, in.mask, cache);
    cache.commit(kept);
    // One more token each, against the compacted cache.
    for (std::size_t b = 0; b < 2; ++b) trees[b].reset(static_cast<Token>(20 + b));
    in = build_step_inputs(trees, cache.lengths());
    const auto logits = model.forward(in.ids, in.positions, in.mask, cache);
    for (std::size_t b = 0; b < 2; ++b) {
      std::vector<Token> seq = prefixes[b];
      seq.insert(seq.end(), accepted[b].begin(), accepted[b].end());
      seq.push_back(static_cast<Token>(20 + b));
      EXPECT_EQ(cache.lengths()[b], static_cast<std::int64_t>(seq.size()) - 1);
      const auto want = causal_logits(model, seq)[static_cast<std::int64_t>(seq.size()) - 1];
      EXPECT_TRUE(at::allclose(logits[static_cast<std::int64_t>(b)][0], want, 1e-4, 1e-4)) << "trial " << trial << " seq " << b;
    }
  }
}

TEST(KvCache, RejectsStepsBeyondCapacityAndBadCommits) {
  const auto model = LlamaModel::random(small_config(), 1);
  auto cache = model.make_cache(2, 8);
  EXPECT_THROW(cache.begin_step(9), c10::Error);
  cache.begin_step(4);
  std::vector<std::vector<std::int32_t>> bad = {{0, 2, 1}, {}};
  EXPECT_THROW(cache.commit(bad), c10::Error);
  std::vector<std::vector<std::int32_t>> wrong_batch = {{0}};
  EXPECT_THROW(cache.commit(wrong_batch), c10::Error);
}

TEST(StepInputs, MaskSeesPrefixAncestorsAndSelfOnly) {
  DraftTree draft;
  draft.insert(std::vector<Token>{5, 6}, 2.0f);
  draft.insert(std::vector<Token>{7}, 1.0f);
  const std::vector<LinearTree> trees = {draft.linearize(4, 10), draft.linearize(4, 1)};
  const std::vector<std::int64_t> lengths = {2, 3};
  const auto in = build_step_inputs(trees, lengths);
  ASSERT_EQ(in.mask.sizes(), (at::IntArrayRef{2, 4, 7}));
  // Tree 0: [0] root 4, [1] 5, [2] 7, [3] 6 (child of 1). Sequence 0 has 2 cached tokens.
  const std::vector<std::vector<int>> want0 = {
      {1, 1, 1, 0, 0, 0, 0}, {1, 1, 1, 1, 0, 0, 0}, {1, 1, 1, 0, 1, 0, 0}, {1, 1, 1, 1, 0, 1, 0}};
  // Tree 1 (budget 1): root and node 5; rows 2 and 3 are padding that sees only its own slot.
  const std::vector<std::vector<int>> want1 = {
      {1, 1, 1, 1, 0, 0, 0}, {1, 1, 1, 1, 1, 0, 0}, {0, 0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 0, 0, 1}};
  for (int t = 0; t < 4; ++t)
    for (int s = 0; s < 7; ++s) {
      EXPECT_EQ(in.mask[0][t][s].item<bool>(), want0[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)] != 0) << t << "," << s;
      EXPECT_EQ(in.mask[1][t][s].item<bool>(), want1[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)] != 0) << t << "," << s;
    }
  EXPECT_EQ(in.positions[0][3].item<std::int64_t>(), 4);  // depth 2 after 2 cached tokens
  EXPECT_EQ(in.ids[0][3].item<std::int64_t>(), 6);
  EXPECT_EQ(in.positions[1][1].item<std::int64_t>(), 4);
}

// Auxiliary tokens (a lookahead window) ride in the step: each computes exactly what its causal
// chain (the root and the tokens it sees, by position) computes as a plain sequence, and the draft
// tree's logits do not change.
TEST(StepInputs, AuxiliaryTokensComputeTheirChainAndLeaveTheTreeAlone) {
  const auto model = LlamaModel::random(small_config(), 13, at::kFloat);
  std::mt19937 rng(17);
  std::uniform_int_distribution<Token> tok(3, 110);
  const std::vector<std::vector<Token>> prefixes = {{1, 4, 5, 6, 7, 8}, {1, 9}};
  // A cache holding every prefix token but the last (the step's root).
  const auto prefilled = [&] {
    auto cache = model.make_cache(2, 64);
    std::vector<LinearTree> chains(2);
    std::vector<std::vector<std::int32_t>> rows(2);
    for (std::size_t b = 0; b < 2; ++b) {
      chains[b] = LinearTree::chain(std::span<const Token>(prefixes[b]).first(prefixes[b].size() - 1));
      for (std::int32_t i = 0; i < chains[b].size(); ++i) rows[b].push_back(i);
    }
    const auto pin = build_step_inputs(chains, cache.lengths());
    model.forward(pin.ids, pin.positions, pin.mask, cache);
    cache.commit(rows);
    return cache;
  };
  auto cache = prefilled();
  std::vector<LinearTree> trees(2);
  std::vector<AuxBlock> aux(2);
  for (std::size_t b = 0; b < 2; ++b) {
    DraftTree draft;
    draft.insert(std::vector<Token>{tok(rng), tok(rng)}, 2.0f);
    draft.insert(std::vector<Token>{tok(rng)}, 1.0f);
    trees[b] = draft.linearize(prefixes[b].back(), 8);
    LookaheadDrafter d({.window = 3 - static_cast<std::int32_t>(b), .ngram = 4});
    d.begin(prefixes[b], {});
    for (int level = 1; level < 3; ++level) {
      std::vector<Token> choices(static_cast<std::size_t>(level * (3 - static_cast<int>(b))));
      for (auto& t : choices) t = tok(rng);
      d.observe(choices);
    }
    d.auxiliary(aux[b]);
  }
  const auto lengths = cache.lengths();
  const auto without = build_step_inputs(trees, lengths);
  const auto in = build_step_inputs(trees, lengths, aux);
  const auto logits = model.forward(in.ids, in.positions, in.mask, cache);
  for (std::size_t b = 0; b < 2; ++b) {
    const auto nodes = static_cast<std::int64_t>(trees[b].size());
    // Tree rows never see auxiliary slots, and auxiliary rows see no draft node but the root.
    for (std::int64_t t = 0; t < nodes; ++t)
      for (std::int64_t j = 0; j < aux[b].size(); ++j)
        EXPECT_FALSE(in.mask[static_cast<std::int64_t>(b)][t][lengths[b] + nodes + j].item<bool>());
    for (std::int64_t j = 0; j < aux[b].size(); ++j) {
      for (std::int64_t t = 1; t < nodes; ++t)
        EXPECT_FALSE(in.mask[static_cast<std::int64_t>(b)][nodes + j][lengths[b] + t].item<bool>());
      std::vector<std::pair<std::int32_t, Token>> chain = {{0, prefixes[b].back()}};
      for (std::int32_t k = 1; k <= aux[b].size(); ++k)
        if (aux[b].attends(static_cast<std::int32_t>(j), k))
          chain.emplace_back(aux[b].offset[static_cast<std::size_t>(k - 1)], aux[b].tokens[static_cast<std::size_t>(k - 1)]);
      std::sort(chain.begin(), chain.end());
      std::vector<Token> seq = prefixes[b];
      for (std::size_t i = 1; i < chain.size(); ++i) seq.push_back(chain[i].second);
      const auto want = causal_logits(model, seq)[static_cast<std::int64_t>(seq.size()) - 1];
      EXPECT_TRUE(at::allclose(logits[static_cast<std::int64_t>(b)][nodes + j], want, 1e-4, 1e-4))
          << "sequence " << b << " auxiliary token " << j;
    }
  }
  // The same step without the auxiliary tokens gives the same tree logits.
  auto cache2 = prefilled();
  const auto plain = model.forward(without.ids, without.positions, without.mask, cache2);
  for (std::size_t b = 0; b < 2; ++b) {
    const auto nodes = static_cast<std::int64_t>(trees[b].size());
    EXPECT_TRUE(at::allclose(logits[static_cast<std::int64_t>(b)].slice(0, 0, nodes),
                             plain[static_cast<std::int64_t>(b)].slice(0, 0, nodes), 1e-5, 1e-5));
  }
}

// Calibration times every requested step size and feeds a usable cost model.
TEST(Calibration, MeasuresEveryStepSize) {
  const auto model = LlamaModel::random(small_config(), 2, at::kFloat);
  const auto samples = measure_step_cost(model, {.tokens = {1, 4, 96}, .batch = 2, .context = 20, .repeats = 3});
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].first, 1u);
  EXPECT_EQ(samples[2].first, 96u);
  for (const auto& [n, s] : samples) EXPECT_GT(s, 0.0) << n;
  const auto cost = StepCost::calibrated(samples);
  EXPECT_DOUBLE_EQ(cost.seconds(4), samples[1].second);
  EXPECT_THROW(measure_step_cost(model, {.tokens = {}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.tokens = {0, 2}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.repeats = 0}), Error);
}

TEST(LlamaModel, HalfPrecisionRunsCloseToFloat) {
  const auto model = LlamaModel::random(small_config(), 5, at::kFloat);
  const auto bf16 = model.to(at::kBFloat16, at::kCPU);
  EXPECT_EQ(bf16.dtype(), at::kBFloat16);
  const std::vector<Token> seq = {1, 4, 9, 16, 25};
  const auto a = causal_logits(model, seq);
  const auto b = causal_logits(bf16, seq);
  EXPECT_EQ(b.scalar_type(), at::kFloat);
  // bf16 keeps 8 bits of mantissa: a loose bound on the logits, and the same argmax mostly.
  EXPECT_LT((a - b).abs().max().item<double>(), 0.25 * a.abs().max().item<double>());
}

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
  EXPECT_THROW(d.add_output(std::vector<Token>{20}), c10::Error);
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
  EXPECT_THROW(node_draws(bad, trees, rows), c10::Error);
  EXPECT_THROW(node_draws(logits.slice(1, 0, 3), trees, rows), c10::Error);  // fewer rows than nodes
  EXPECT_THROW(node_draws(logits, trees, std::vector<SamplingRow>(2)), c10::Error);
  rows[0].options.repetition_penalty = 1.2f;  // penalties without counts
  EXPECT_THROW(node_draws(logits, trees, rows), c10::Error);
  rows[0].counts = DeviceTokenCounts::zeros(V + 1, at::kCPU);
  EXPECT_THROW(node_draws(logits, trees, rows), c10::Error);
  rows[0].counts = DeviceTokenCounts::zeros(V, at::kCPU);
  EXPECT_NO_THROW(node_draws(logits, trees, rows));
  rows[0].options.top_p = 0.0f;
  EXPECT_THROW(node_draws(logits, trees, rows), Error);
  rows[0].options.top_p = 1.0f;
  auto cyclic = trees;
  cyclic[0].parent[2] = 3;
  EXPECT_THROW(node_draws(logits, cyclic, rows), c10::Error);
  EXPECT_THROW(node_draws(logits.to(at::kInt), trees, rows), c10::Error);
  // Only empty trees: all padding.
  const std::vector<LinearTree> empty(1);
  EXPECT_TRUE(node_draws(logits, empty, rows).eq(-1).all().item<bool>());
}

}  // namespace
