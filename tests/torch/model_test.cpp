// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The reference Llama model, the llama2.c loader, the KV cache and the step inputs.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "refdec/torch/attention_products.hpp"
#include "refdec/torch/calibrate.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/node_draws.hpp"
#include "refdec/torch/packed_linear.hpp"
#include "refdec/torch/verifier.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "refdec/core/step_plan.hpp"
#include "common/expect_error.hpp"
#include "core/random_step.hpp"
#include "common/tiny_llama.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

LlamaConfig small_config() { return refdec_test::tiny_llama_config(); }

// Runs the chains `prefixes[b]` (all their tokens) into new sequences of an empty `store`, keeping
// every entry.
template <KvStore S>
void prefill(const LlamaModel& model, S& store, const std::vector<std::vector<Token>>& prefixes) {
  ASSERT_EQ(store.batch(), 0) << "prefill() starts from an empty store";
  std::vector<LinearTree> chains;
  std::vector<Acceptance> accepted;
  for (const auto& p : prefixes) {
    store.add();
    chains.push_back(LinearTree::chain(p));
    auto& a = accepted.emplace_back();
    for (std::int32_t i = 1; i < static_cast<std::int32_t>(p.size()); ++i) a.nodes.push_back(i);
  }
  StepPlan plan;
  plan_step(chains, {}, store.lengths(), model.vocab_size(), plan);
  model.forward(plan, store);
  KeepPlan keep;
  keep_accepted(plan, accepted, keep);
  store.commit(keep);
}

// Logits [T, vocab] of a causal pass over `tokens` in a fresh store.
at::Tensor causal_logits(const LlamaModel& model, const std::vector<Token>& tokens) {
  ContiguousKvStore store(model.kv_layout(), static_cast<std::int64_t>(tokens.size()));
  store.add();
  StepPlan plan;
  const std::vector<LinearTree> chain = {LinearTree::chain(tokens)};
  plan_step(chain, {}, store.lengths(), model.vocab_size(), plan);
  return model.forward(plan, store);
}

// The dense-mask reference: sequence b of `plan` recomputed from scratch over its cached tokens
// `cached` (positions 0..) and its step rows, with an explicit [S, S] mask (a cached token sees
// the tokens before it, a step row every cached token and the step rows its plan bits list), as
// the model computed before step plans existed. Returns the step rows' logits [rows(b), vocab].
at::Tensor dense_reference(const LlamaModel& model, const std::vector<Token>& cached, const StepPlan& plan, std::int32_t b) {
  const auto& c = model.config();
  const auto& w = model.weights();
  const auto L = static_cast<std::int64_t>(cached.size());
  const std::int64_t n = plan.rows(b), S = L + n;
  const std::int64_t H = c.n_heads, KV = c.n_kv_heads, D = c.head_dim();
  std::vector<std::int64_t> ids(cached.begin(), cached.end()), pos(static_cast<std::size_t>(L));
  std::iota(pos.begin(), pos.end(), 0);
  auto mask = at::zeros({S, S}, at::kBool);
  for (std::int64_t i = 0; i < L; ++i) mask[i].slice(0, 0, i + 1).fill_(true);
  for (std::int32_t i = 0; i < n; ++i) {
    const auto r = static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + i);
    ids.push_back(plan.tokens[r]);
    pos.push_back(plan.positions[r]);
    mask[L + i].slice(0, 0, L).fill_(true);
    for (std::int32_t j = 0; j < n; ++j) mask[L + i][L + j] = plan.sees(b, i, j);
  }
  const auto dt = model.dtype();
  const auto angles = at::tensor(pos, at::kLong).to(at::kDouble).unsqueeze(1) *
                      at::pow(c.rope_theta, -at::arange(0, D, 2, at::kDouble) / static_cast<double>(D));  // [S, D/2]
  const auto cs = at::cos(angles).to(dt).unsqueeze(1), sn = at::sin(angles).to(dt).unsqueeze(1);          // [S, 1, D/2]
  const auto rope = [&](const at::Tensor& x) {  // [S, heads, D], pairs (2i, 2i+1)
    const auto pr = x.reshape({S, x.size(1), D / 2, 2});
    const auto x0 = pr.select(-1, 0), x1 = pr.select(-1, 1);
    return at::stack({x0 * cs - x1 * sn, x0 * sn + x1 * cs}, -1).flatten(-2);
  };
  const auto norm = [&](const at::Tensor& x, const at::Tensor& g) { return x * at::rsqrt(x.pow(2).mean(-1, true) + c.norm_eps) * g; };
  const auto bias = at::zeros({S, S}, dt).masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
  auto x = at::embedding(w.embedding, at::tensor(ids, at::kLong));  // [S, dim]
  for (const auto& l : w.layers) {
    auto h = norm(x, l.attn_norm);
    const auto q = rope(at::linear(h, l.wq).view({S, H, D})).permute({1, 0, 2});                                // [H, S, D]
    const auto k = rope(at::linear(h, l.wk).view({S, KV, D})).permute({1, 0, 2}).repeat_interleave(H / KV, 0);  // [H, S, D]
    const auto v = at::linear(h, l.wv).view({S, KV, D}).permute({1, 0, 2}).repeat_interleave(H / KV, 0);        // [H, S, D]
    const auto probs = at::softmax(at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(D)) + bias, -1);
    x = x + at::linear(at::matmul(probs, v).permute({1, 0, 2}).reshape({S, H * D}), l.wo);
    h = norm(x, l.ffn_norm);
    x = x + at::linear(at::silu(at::linear(h, l.w1)) * at::linear(h, l.w3), l.w2);
  }
  return at::linear(norm(x, w.final_norm), w.output).slice(0, L, S);
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

// A header whose sizes multiply past 2^63 is an impossible header, not a wrapped (small) size,
// and a FIFO or directory given as the checkpoint is rejected at once instead of blocking.
TEST(Llama2cLoader, OverflowingHeaderAndNonRegularFilesAreRejected) {
  const refdec_test::TempDir tmp;
  const auto& dir = tmp.path();
  {
    std::ofstream f(dir / "huge.bin", std::ios::binary);
    const std::int32_t header[7] = {1 << 30, 1 << 30, 1 << 30, 1, 1, -(1 << 30), 1 << 30};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  try {
    load_llama2c(dir / "huge.bin");
    ADD_FAILURE() << "an overflowing header loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("impossible header"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::mkfifo((dir / "pipe.bin").c_str(), 0600), 0);
  try {
    load_llama2c(dir / "pipe.bin");
    ADD_FAILURE() << "a FIFO loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_llama2c(dir), IoError);
}

TEST(LlamaModel, RejectsInconsistentConfigAndWeights) {
  auto c = small_config();
  c.n_kv_heads = 3;  // 4 heads are not a multiple of 3
  EXPECT_THROW(LlamaModel::random(c, 1), Error);
  auto model = LlamaModel::random(small_config(), 1);
  auto w = model.weights();
  w.layers[1].wk = at::zeros({5, 32});
  EXPECT_THROW(LlamaModel(small_config(), w), Error);
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
    const std::vector<LinearTree> trees = {draft.linearize(prefix.back(), 100)};
    const LinearTree& tree = trees[0];
    ContiguousKvStore store(model.kv_layout(), 64);
    prefill(model, store, {std::vector<Token>(prefix.begin(), prefix.end() - 1)});  // all but the root
    StepPlan plan;
    plan_step(trees, {}, store.lengths(), model.vocab_size(), plan);
    const auto logits = model.forward(plan, store);
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

// Random model shapes: multi-head, grouped-query and multi-query attention.
LlamaConfig attention_config(int kind) {
  LlamaConfig c = small_config();
  c.n_kv_heads = kind == 0 ? 4 : kind == 1 ? 2 : 1;
  return c;
}

// A small window-like auxiliary block over `vocab` tokens (empty every other time).
AuxBlock random_aux(std::mt19937& rng, std::int64_t vocab) {
  return refdec_test::random_aux(rng, {.empty_one_in = 2, .max_tokens = 9, .max_offset = 6, .vocab = static_cast<unsigned>(vocab)});
}

// A random draft tree over `vocab` tokens, sometimes the root alone.
LinearTree random_plan_tree(std::mt19937& rng, Token root, std::int64_t vocab) {
  DraftTree draft;
  for (int p = 0, n = static_cast<int>(rng() % 5); p < n; ++p) {
    std::vector<Token> path(1 + rng() % 5);
    for (auto& t : path) t = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
    draft.insert(path, 1.0f + static_cast<float>(rng() % 3));
  }
  return draft.linearize(root, rng() % 12);
}

// A random batch of B sequences over a vocabulary of 111: each a cached prefix of 1..max_cached
// tokens, a draft tree and an auxiliary block.
struct RandomBatch {
  std::vector<std::vector<Token>> cached;
  std::vector<LinearTree> trees;
  std::vector<AuxBlock> aux;
};

RandomBatch random_batch(std::mt19937& rng, int B, unsigned max_cached) {
  RandomBatch batch;
  batch.cached.resize(static_cast<std::size_t>(B));
  for (auto& c : batch.cached) {
    c.resize(1 + rng() % max_cached);
    for (auto& t : c) t = static_cast<Token>(rng() % 111);
  }
  for (int b = 0; b < B; ++b) {
    batch.trees.push_back(random_plan_tree(rng, static_cast<Token>(rng() % 111), 111));
    batch.aux.push_back(random_aux(rng, 111));
  }
  return batch;
}

// The plan's attention (prefix and step scores from one product, the step-local mask on the step
// columns only) equals the dense-mask computation in float64, over both stores: ragged lengths,
// auxiliary rows, single-node trees, MHA / GQA / MQA.
TEST(LlamaModel, PlanAttentionEqualsDenseMaskReference) {
  std::mt19937 rng(29);
  for (int kind = 0; kind < 3; ++kind) {
    const auto model = LlamaModel::random(attention_config(kind), 40 + static_cast<std::uint64_t>(kind), at::kDouble);
    for (int trial = 0; trial < 6; ++trial) {
      const int B = 1 + static_cast<int>(rng() % 4);
      const auto [cached, trees, aux] = random_batch(rng, B, 30);
      ContiguousKvStore contiguous(model.kv_layout(), 64);
      PagedKvStore paged(model.kv_layout(), 32, 4);
      prefill(model, contiguous, cached);
      prefill(model, paged, cached);
      StepPlan plan;
      plan_step(trees, aux, contiguous.lengths(), model.vocab_size(), plan);
      const auto a = model.forward(plan, contiguous);
      const auto p = model.forward(plan, paged);
      for (std::int32_t b = 0; b < B; ++b) {
        const auto want = dense_reference(model, cached[static_cast<std::size_t>(b)], plan, b);
        const auto got = a.slice(0, plan.indptr[static_cast<std::size_t>(b)], plan.indptr[static_cast<std::size_t>(b) + 1]);
        EXPECT_TRUE(at::allclose(got, want, 1e-10, 1e-10)) << "kind " << kind << " trial " << trial << " sequence " << b
                                                          << ": max difference " << (got - want).abs().max().item<double>();
      }
      EXPECT_TRUE(at::equal(a, p)) << "paged and contiguous stores give different logits";
    }
  }
}

// After committing an accepted path, the next logits equal a fresh prefill of the sequence, in
// either store.
template <class MakeStore>
void check_commit_then_step(MakeStore make_store) {
  const auto model = LlamaModel::random(small_config(), 11, at::kFloat);
  std::mt19937 rng(3);
  std::uniform_int_distribution<Token> tok(3, 110);
  for (int trial = 0; trial < 5; ++trial) {
    // Two sequences of different lengths in one batch, prefilled but for their last token.
    std::vector<std::vector<Token>> prefixes = {{1}, {1}};
    for (int i = 0; i < 6 + trial; ++i) prefixes[0].push_back(tok(rng));
    for (int i = 0; i < 2 + 2 * trial; ++i) prefixes[1].push_back(tok(rng));
    auto store = make_store(LlamaModel::random(small_config(), 11, at::kFloat).kv_layout());
    prefill(model, store, {std::vector<Token>(prefixes[0].begin(), prefixes[0].end() - 1),
                           std::vector<Token>(prefixes[1].begin(), prefixes[1].end() - 1)});
    // A random draft tree per sequence; keep a random root-to-leaf path.
    std::vector<LinearTree> trees(2);
    std::vector<Acceptance> accepted(2);
    std::vector<std::vector<Token>> accepted_tokens(2);
    for (std::size_t b = 0; b < 2; ++b) {
      DraftTree draft;
      for (int p = 0; p < 4; ++p) {
        std::vector<Token> path(static_cast<std::size_t>(1 + p));
        for (auto& t : path) t = tok(rng) % 7 + 3;
        draft.insert(path, 1.0f);
      }
      trees[b] = draft.linearize(prefixes[b].back(), 100);
      const std::int32_t node = trees[b].size() - 1 - static_cast<std::int32_t>(b);  // some leaf-ish node
      for (std::int32_t j = node; j > 0; j = trees[b].parent[static_cast<std::size_t>(j)]) {
        accepted[b].nodes.insert(accepted[b].nodes.begin(), j);
        accepted_tokens[b].insert(accepted_tokens[b].begin(), trees[b].tokens[static_cast<std::size_t>(j)]);
      }
    }
    StepPlan plan;
    KeepPlan keep;
    plan_step(trees, {}, store.lengths(), model.vocab_size(), plan);
    model.forward(plan, store);
    keep_accepted(plan, accepted, keep);
    store.commit(keep);
    // One more token each, against the compacted cache.
    for (std::size_t b = 0; b < 2; ++b) trees[b].reset(static_cast<Token>(20 + b));
    plan_step(trees, {}, store.lengths(), model.vocab_size(), plan);
    const auto logits = model.forward(plan, store);
    for (std::size_t b = 0; b < 2; ++b) {
      std::vector<Token> seq = prefixes[b];
      seq.insert(seq.end(), accepted_tokens[b].begin(), accepted_tokens[b].end());
      seq.push_back(static_cast<Token>(20 + b));
      EXPECT_EQ(store.lengths()[b], static_cast<std::int64_t>(seq.size()) - 1);
      const auto want = causal_logits(model, seq)[static_cast<std::int64_t>(seq.size()) - 1];
      EXPECT_TRUE(at::allclose(logits[static_cast<std::int64_t>(b)], want, 1e-4, 1e-4)) << "trial " << trial << " seq " << b;
    }
  }
}

TEST(KvStores, CommitThenStepEqualsFreshPrefill) {
  check_commit_then_step([](const KvLayout& layout) { return ContiguousKvStore(layout, 64); });
  check_commit_then_step([](const KvLayout& layout) { return PagedKvStore(layout, 40, 3); });
}

// Block accounting of a paged store: every sequence holds exactly the blocks its entries need, and
// held + free blocks are all the blocks.
void expect_blocks_accounted(const PagedKvStore& store) {
  std::int64_t held = 0;
  for (std::int64_t b = 0; b < store.batch(); ++b) {
    const auto table = store.block_table(b);
    EXPECT_EQ(static_cast<std::int64_t>(table.size()), (store.lengths()[static_cast<std::size_t>(b)] + store.block_size() - 1) / store.block_size())
        << "sequence " << b;
    held += static_cast<std::int64_t>(table.size());
  }
  EXPECT_EQ(held + store.free_blocks(), store.num_blocks());
}

// Random runs in which sequences join and leave between steps and each step keeps a random path of
// its trees: the paged store gives the contiguous store's logits exactly (float64), and every
// block returns to the pool when the last sequence leaves.
TEST(KvStores, PagedEqualsContiguousAsSequencesJoinAndLeave) {
  std::mt19937 rng(5);
  for (int kind = 0; kind < 3; ++kind) {
    const auto model = LlamaModel::random(attention_config(kind), 60 + static_cast<std::uint64_t>(kind), at::kDouble);
    for (int run = 0; run < 4; ++run) {
      ContiguousKvStore contiguous(model.kv_layout(), 128);
      PagedKvStore paged(model.kv_layout(), 200, 1 + static_cast<std::int64_t>(rng() % 8));
      std::vector<Token> roots;  // [batch] each sequence's next root
      StepPlan plan;
      KeepPlan keep;
      for (int step = 0; step < 14; ++step) {
        // Joins: a new sequence starts with a one-token step (its first root).
        while (contiguous.batch() < 5 && (contiguous.batch() == 0 || rng() % 3 == 0)) {
          contiguous.add();
          paged.add();
          roots.push_back(static_cast<Token>(rng() % 111));
        }
        std::vector<LinearTree> trees;
        std::vector<AuxBlock> aux;
        for (std::size_t b = 0; b < roots.size(); ++b) {
          trees.push_back(random_plan_tree(rng, roots[b], 111));
          aux.push_back(random_aux(rng, 111));
        }
        plan_step(trees, aux, contiguous.lengths(), model.vocab_size(), plan);
        const auto a = model.forward(plan, contiguous);
        const auto p = model.forward(plan, paged);
        ASSERT_TRUE(at::equal(a, p)) << "kind " << kind << " run " << run << " step " << step;
        // Keep a random path; its last node's token... the next root is random anyway.
        std::vector<Acceptance> accepted(trees.size());
        for (std::size_t b = 0; b < trees.size(); ++b) {
          for (std::int32_t c = trees[b].first_child[0]; c >= 0 && rng() % 4 != 0;) {
            accepted[b].nodes.push_back(c);
            std::int32_t pick = c;
            for (std::int32_t s = trees[b].next_sibling[static_cast<std::size_t>(c)]; s >= 0; s = trees[b].next_sibling[static_cast<std::size_t>(s)])
              if (rng() % 2 == 0) pick = s;
            accepted[b].nodes.back() = pick;
            c = trees[b].first_child[static_cast<std::size_t>(pick)];
          }
          roots[b] = static_cast<Token>(rng() % 111);
        }
        keep_accepted(plan, accepted, keep);
        contiguous.commit(keep);
        paged.commit(keep);
        ASSERT_TRUE(std::equal(contiguous.lengths().begin(), contiguous.lengths().end(), paged.lengths().begin(), paged.lengths().end()));
        expect_blocks_accounted(paged);
        // Leaves: a random sequence drops out now and then.
        if (!roots.empty() && rng() % 3 == 0) {
          const auto b = static_cast<std::int64_t>(rng() % roots.size());
          contiguous.remove(b);
          paged.remove(b);
          roots.erase(roots.begin() + b);
          expect_blocks_accounted(paged);
        }
      }
      while (paged.batch() > 0) paged.remove(paged.batch() - 1);
      EXPECT_EQ(paged.free_blocks(), paged.num_blocks()) << "blocks leaked";
    }
  }
}

TEST(KvStores, RejectBadUse) {
  const auto model = LlamaModel::random(small_config(), 1);
  ContiguousKvStore contiguous(model.kv_layout(), 8);
  PagedKvStore paged(model.kv_layout(), 3, 2);  // 6 entries in all
  for (int b = 0; b < 2; ++b) {
    contiguous.add();
    paged.add();
  }
  StepPlan plan;
  const std::vector<LinearTree> long_chains(2, LinearTree::chain(std::vector<Token>(9, 3)));
  plan_step(long_chains, {}, contiguous.lengths(), 0, plan);
  refdec_test::expect_error([&] { contiguous.begin_step(plan); }, "more than the capacity 8");
  refdec_test::expect_error([&] { paged.begin_step(plan); }, "only 3 of 3 are free");
  EXPECT_EQ(paged.free_blocks(), 3) << "a refused step allocates nothing";
  const std::vector<LinearTree> chains(2, LinearTree::chain(std::vector<Token>{3, 4}));
  plan_step(chains, {}, contiguous.lengths(), 0, plan);
  const std::vector<LinearTree> one(1, LinearTree::chain(std::vector<Token>{3}));
  StepPlan small;
  plan_step(one, {}, std::vector<std::int64_t>{0}, 0, small);
  refdec_test::expect_error([&] { contiguous.begin_step(small); }, "a plan of 1 sequences for a store of 2");
  refdec_test::expect_error([&] { paged.begin_step(small); }, "a plan of 1 sequences for a store of 2");
  KeepPlan keep;
  keep.indptr = {0, 2, 3};
  keep.rows = {1, 0, 0};
  keep.lengths = {2, 1};
  refdec_test::expect_error([&] { contiguous.commit(keep); }, "without a step");
  contiguous.begin_step(plan);
  paged.begin_step(plan);
  refdec_test::expect_error([&] { contiguous.commit(keep); }, "keeps step row 0 (rows must increase");
  refdec_test::expect_error([&] { paged.commit(keep); }, "keeps step row 0 (rows must increase");
  keep.rows = {0, 1, 0};
  keep.lengths = {2, 2};
  refdec_test::expect_error([&] { paged.commit(keep); }, "sequence 1 keeps 1 rows but its new length is 2");
  refdec_test::expect_error([&] { contiguous.remove(2); }, "sequence 2 out of range [0, 2)");
  refdec_test::expect_error([&] { paged.read(0, -1); }, "sequence -1 out of range");
  refdec_test::expect_error([] { ContiguousKvStore(KvLayout{1, 1, 1, {}}, 0); }, "capacity must be positive");
  refdec_test::expect_error([] { PagedKvStore(KvLayout{1, 1, 1, {}}, 0, 4); }, "must be positive");
  refdec_test::expect_error([] { PagedKvStore(KvLayout{0, 1, 1, {}}, 4, 4); }, "sizes must be positive");
}

// Auxiliary tokens (a lookahead window) ride in the step: each computes exactly what its causal
// chain (the root and the tokens it sees, by position) computes as a plain sequence, and the draft
// tree's logits do not change.
TEST(LlamaModel, AuxiliaryTokensComputeTheirChainAndLeaveTheTreeAlone) {
  const auto model = LlamaModel::random(small_config(), 13, at::kFloat);
  std::mt19937 rng(17);
  std::uniform_int_distribution<Token> tok(3, 110);
  const std::vector<std::vector<Token>> prefixes = {{1, 4, 5, 6, 7, 8}, {1, 9}};
  // A store holding every prefix token but the last (the step's root).
  const auto prefilled = [&] {
    ContiguousKvStore store(model.kv_layout(), 64);
    prefill(model, store, {std::vector<Token>(prefixes[0].begin(), prefixes[0].end() - 1),
                           std::vector<Token>(prefixes[1].begin(), prefixes[1].end() - 1)});
    return store;
  };
  auto store = prefilled();
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
  StepPlan with, without;
  plan_step(trees, aux, store.lengths(), model.vocab_size(), with);
  plan_step(trees, {}, store.lengths(), model.vocab_size(), without);
  const auto logits = model.forward(with, store);
  for (std::int32_t b = 0; b < 2; ++b) {
    const auto u = static_cast<std::size_t>(b);
    const std::int64_t nodes = trees[u].size(), first = with.indptr[u];
    ASSERT_GT(aux[u].size(), 0);
    for (std::int32_t j = 0; j < aux[u].size(); ++j) {
      std::vector<std::pair<std::int32_t, Token>> chain = {{0, prefixes[u].back()}};
      for (std::int32_t k = 1; k <= aux[u].size(); ++k)
        if (aux[u].attends(j, k)) chain.emplace_back(aux[u].offset[static_cast<std::size_t>(k - 1)], aux[u].tokens[static_cast<std::size_t>(k - 1)]);
      std::sort(chain.begin(), chain.end());
      std::vector<Token> seq = prefixes[u];
      for (std::size_t i = 1; i < chain.size(); ++i) seq.push_back(chain[i].second);
      const auto want = causal_logits(model, seq)[static_cast<std::int64_t>(seq.size()) - 1];
      EXPECT_TRUE(at::allclose(logits[first + nodes + j], want, 1e-4, 1e-4)) << "sequence " << b << " auxiliary token " << j;
    }
  }
  // The same step without the auxiliary tokens gives the same tree logits.
  auto store2 = prefilled();
  const auto plain = model.forward(without, store2);
  for (std::int32_t b = 0; b < 2; ++b) {
    const auto u = static_cast<std::size_t>(b);
    const std::int64_t nodes = trees[u].size();
    EXPECT_TRUE(at::allclose(logits.slice(0, with.indptr[u], with.indptr[u] + nodes),
                             plain.slice(0, without.indptr[u], without.indptr[u] + nodes), 1e-5, 1e-5));
  }
}

// Calibration runs every requested step size once untimed, then `repeats` rounds over all sizes
// from the largest to the smallest (each timed run after an untimed one of its size), and keeps
// each size's median. The clock is injected: reading k returns 0 + 1 + ... + k, so a run
// whose readings are k and k + 1 lasts k + 1 "seconds" and the samples are known exactly, however
// fast the machine is.
TEST(Calibration, MeasuresEveryStepSize) {
  const auto model = LlamaModel::random(small_config(), 2, at::kFloat);
  double t = 0, readings = 0;
  const auto fake_clock = [&] { return t += readings++; };
  const auto samples = measure_step_cost(model, {.tokens = {1, 4, 96}, .batch = 2, .context = 20, .repeats = 3, .clock = fake_clock});
  ASSERT_EQ(samples.size(), 3u);
  // Untimed runs read no clock; round r visits 96, 4, 1, so size i (ascending) is the (2 - i)th
  // of its round and reads 2(3r + 2 - i) and one more: its runs last 5 - 2i, 11 - 2i, 17 - 2i,
  // median 11 - 2i.
  EXPECT_EQ(readings, 3 * 3 * 2);
  const std::vector<std::size_t> sizes = {1, 4, 96};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(samples[i].first, sizes[i]);
    EXPECT_DOUBLE_EQ(samples[i].second, 11.0 - 2.0 * static_cast<double>(i)) << "size " << sizes[i];
  }
  EXPECT_THROW(measure_step_cost(model, {.tokens = {}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.tokens = {0, 2}}), Error);
  EXPECT_THROW(measure_step_cost(model, {.repeats = 0}), Error);
}

// Programs print libtorch's own errors as one sentence, without its C++ stack trace.
TEST(Errors, DescribeDropsLibtorchStackTraces) {
  try {
    TORCH_CHECK(false, "a libtorch check failed");  // what libtorch's inline checks throw
  } catch (const c10::Error& e) {
    const std::string message = describe(e);
    EXPECT_EQ(message.find("a libtorch check failed"), 0u) << message;
    EXPECT_EQ(message.find("frame #"), std::string::npos) << message;
  }
  EXPECT_EQ(describe(std::runtime_error("plain")), "plain");
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

// ---- PackedLinear (oneDNN's bf16 matmul, refdec's AVX2 kernel) against at::linear ----

// Skips visibly, with the reason, when `backend` cannot run `dtype` weights on this machine.
#define REFDEC_SKIP_UNLESS_BACKEND_RUNS(backend, dtype)                                                                 \
  if (const std::string why = packed_backend_unavailable(backend, dtype); !why.empty())                                 \
  GTEST_SKIP() << backend_name(backend) << " cannot run " << at::toString(dtype) << " weights here: " << why

// x W^T in float64 from the same half values: the reference both kernels approximate.
at::Tensor linear_reference(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x.to(at::kDouble), w.to(at::kDouble).t()); }

// Every epilogue of one backend and dtype against the float64 product, over row counts a step has.
void expect_products(PackedBackend backend, at::ScalarType dtype) {
  auto gen = at::detail::createCPUGenerator(3);
  // Rounding to the half dtype: its relative half-step.
  const double step = dtype == at::kHalf ? 1e-3 : 1e-2;
  for (const auto& [out, in] : {std::pair<std::int64_t, std::int64_t>{48, 32}, {130, 70}, {256, 512}}) {
    const auto w = at::randn({out, in}, gen, at::kFloat).to(dtype);
    const PackedLinear packed(w, backend);
    EXPECT_EQ(packed.backend(), backend);
    EXPECT_EQ(packed.dtype(), dtype);
    EXPECT_EQ(packed.in_features(), in);
    EXPECT_EQ(packed.out_features(), out);
    EXPECT_GE(packed.bytes(), out * in * 2);  // padded to its blocks where the sizes are not multiples
    for (const std::int64_t rows : {1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 130}) {
      const auto x = at::randn({rows, in}, gen, at::kFloat).to(dtype);
      const auto want = linear_reference(x, w);
      const double scale = want.abs().max().item<double>();
      const std::string where = std::string(backend_name(backend)) + " " + at::toString(dtype) + " " + std::to_string(out) + "x" +
                                std::to_string(in) + ", " + std::to_string(rows) + " rows";
      // float32 output: only the summation order differs from the reference.
      const auto f32 = packed(x, at::kFloat);
      EXPECT_EQ(f32.scalar_type(), at::kFloat);
      EXPECT_LT((f32.to(at::kDouble) - want).abs().max().item<double>(), 1e-4 * scale) << where;
      // Output in the weights' dtype: rounded, as at::linear's is.
      const auto rounded = packed(x);
      EXPECT_EQ(rounded.scalar_type(), dtype);
      EXPECT_LT((rounded.to(at::kDouble) - want).abs().max().item<double>(), step * scale) << where;
      // Accumulating adds to what the output holds (the residual connection).
      const auto residual = at::randn({rows, out}, gen, at::kFloat);
      auto sum = residual.clone();
      packed.run(x, sum, Epilogue::kAccumulate);
      EXPECT_LT((sum.to(at::kDouble) - residual.to(at::kDouble) - want).abs().max().item<double>(), 1e-4 * scale) << where;
      // SwiGLU's epilogues: silu of the product, the product times another tensor.
      const auto silu = packed(x, at::kFloat, Epilogue::kSilu).to(at::kDouble);
      EXPECT_LT((silu - want * at::sigmoid(want)).abs().max().item<double>(), 1e-4 * scale) << where;
      const auto other = at::randn({rows, out}, gen, at::kFloat).to(dtype);
      const auto product = packed(x, dtype, Epilogue::kMultiply, other).to(at::kDouble);
      const auto want_product = want * other.to(at::kDouble);
      EXPECT_LT((product - want_product).abs().max().item<double>(), step * want_product.abs().max().item<double>()) << where;
    }
  }
}

TEST(PackedLinear, OneDnnEqualsTheProductForEveryRowCount) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_products(PackedBackend::kOneDnn, at::kBFloat16);
}

TEST(PackedLinear, Avx2EqualsTheProductForEveryRowCountInBf16) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  expect_products(PackedBackend::kAvx2, at::kBFloat16);
}

TEST(PackedLinear, Avx2EqualsTheProductForEveryRowCountInFp16) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kHalf);
  expect_products(PackedBackend::kAvx2, at::kHalf);
}

// The default backend is the fastest that runs; one that cannot run says why and what the CPU has.
TEST(PackedLinear, PicksTheFastestBackendAndNamesWhatTheCpuLacks) {
  const auto w = at::randn({8, 4}).to(at::kBFloat16);
  const auto fastest = fastest_packed_backend(at::kBFloat16);
  EXPECT_EQ(PackedLinear::supported(w), fastest.has_value());
  EXPECT_EQ(fastest == PackedBackend::kOneDnn, packed_backend_unavailable(PackedBackend::kOneDnn, at::kBFloat16).empty());
  EXPECT_FALSE(packed_backend_unavailable(PackedBackend::kOneDnn, at::kHalf).empty()) << "oneDNN runs bf16 only";
  EXPECT_FALSE(packed_backend_unavailable(PackedBackend::kAvx2, at::kFloat).empty());
  for (const PackedBackend b : {PackedBackend::kOneDnn, PackedBackend::kAvx2}) {
    const std::string why = packed_backend_unavailable(b, at::kBFloat16);
    if (why.empty()) {
      EXPECT_EQ(PackedLinear(w, b).backend(), b);
    } else {
      EXPECT_NE(why.find("this"), std::string::npos) << why;  // this CPU / this build
      refdec_test::expect_error([&] { PackedLinear p(w, b); }, "PackedLinear: cannot pack");
    }
  }
  if (!fastest) GTEST_SKIP() << "no packed backend runs here: " << packed_backend_unavailable(PackedBackend::kAvx2, at::kBFloat16);
  EXPECT_EQ(PackedLinear(w).backend(), *fastest);
}

TEST(PackedLinear, RejectsWhatItCannotRun) {
  const auto f32 = at::randn({8, 4});
  EXPECT_FALSE(PackedLinear::supported(f32));
  EXPECT_FALSE(PackedLinear::supported(at::Tensor()));
  refdec_test::expect_error([&] { PackedLinear p(f32); }, "needs a 2-D bf16 or fp16 CPU weight");
  const auto fastest = fastest_packed_backend(at::kBFloat16);
  if (!fastest) GTEST_SKIP() << "no packed backend runs here: " << packed_backend_unavailable(PackedBackend::kAvx2, at::kBFloat16);
  const PackedLinear packed(f32.to(at::kBFloat16));
  const auto bf = [](at::IntArrayRef sizes) { return at::zeros(sizes, at::TensorOptions().dtype(at::kBFloat16)); };
  refdec_test::expect_error([&] { (void)packed(bf({3, 5})); }, "input must be a contiguous BFloat16 CPU [rows, 4]");
  refdec_test::expect_error([&] { (void)packed(at::zeros({3, 4})); }, "input must be a contiguous BFloat16 CPU");
  refdec_test::expect_error([&] { (void)packed(bf({4, 3}).t()); }, "input must be a contiguous BFloat16 CPU");
  refdec_test::expect_error([&] { packed.run(bf({3, 4}), bf({2, 8})); }, "output must be a contiguous BFloat16 or float32 CPU [3, 8]");
  refdec_test::expect_error([&] { packed.run(bf({3, 4}), at::zeros({3, 8}, at::kDouble)); }, "output must be");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kMultiply); }, "Epilogue::kMultiply needs the tensor");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kSilu, bf({3, 8})); }, "and only it takes one");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kMultiply, bf({3, 7})); },
                            "the tensor to multiply by must be a contiguous BFloat16 CPU [3, 8] apart from the output");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kMultiply, at::zeros({3, 8})); },
                            "the tensor to multiply by must be");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kFloat, Epilogue::kAccumulate); }, "adds to an output: call run()");
  const auto same = bf({3, 8});
  refdec_test::expect_error([&] { packed.run(bf({3, 4}), same, Epilogue::kMultiply, same); }, "apart from the output");
  EXPECT_EQ(packed(bf({0, 4})).size(0), 0);  // no rows: nothing to run
}

// Attention's two products over a cache read in place (a slice of a longer buffer, as the stores
// hand it out) equal the float64 products of the same bf16 values, for every head grouping, row
// count, length and head size, the length changing from call to call under one primitive.
void expect_attention_products(at::Tensor (*scores_of)(const at::Tensor&, const at::Tensor&, double),
                               at::Tensor (*values_of)(const at::Tensor&, const at::Tensor&)) {
  auto gen = at::detail::createCPUGenerator(9);
  const auto bf = [&](at::IntArrayRef sizes) { return at::randn(sizes, gen, at::kFloat).to(at::kBFloat16); };
  for (const std::int64_t kv : {1, 2, 4})
    for (const std::int64_t rows : {1, 3, 16})
      for (const std::int64_t d : {8, 64})
        for (const std::int64_t s : {1, 5, 17, 130}) {
          const auto keys = bf({s + 7, kv, d}).narrow(0, 0, s), values = bf({s + 7, kv, d}).narrow(0, 0, s);
          const auto q = bf({kv, rows, d});
          const auto scores = scores_of(q, keys, 0.25);
          const auto want = at::matmul(q.to(at::kDouble), keys.to(at::kDouble).permute({1, 2, 0})) * 0.25;
          ASSERT_EQ(scores.scalar_type(), at::kFloat);
          ASSERT_EQ(scores.sizes(), want.sizes());
          EXPECT_LT((scores.to(at::kDouble) - want).abs().max().item<double>(), 1e-4 * (1.0 + want.abs().max().item<double>()))
              << kv << " kv heads, " << rows << " rows, d " << d << ", length " << s;
          const auto probs = at::softmax(scores, -1).to(at::kBFloat16);
          const auto out = values_of(probs, values);
          const auto out_want = at::matmul(probs.to(at::kDouble), values.to(at::kDouble).permute({1, 0, 2}));
          ASSERT_EQ(out.scalar_type(), at::kBFloat16);
          ASSERT_EQ(out.sizes(), out_want.sizes());
          // bf16 output: within its rounding of values of magnitude up to max |v|.
          EXPECT_LT((out.to(at::kDouble) - out_want).abs().max().item<double>(), 1e-2 * values.to(at::kDouble).abs().max().item<double>())
              << kv << " kv heads, " << rows << " rows, d " << d << ", length " << s;
        }
}

TEST(AttentionProducts, EqualTheProductsOverTheCacheInPlace) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_attention_products(attention_scores, attention_values);
}

// The same through refdec's AVX2 kernel (the path of CPUs where oneDNN runs no bf16).
TEST(AttentionProducts, Avx2EqualTheProductsOverTheCacheInPlace) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  expect_attention_products(avx2_attention_scores, avx2_attention_values);
}

// The AVX2 path's whole attention (scores, the step's mask, softmax and values, each thread over
// its own kv heads) equals softmax(scale q k^T + mask) v in float64, with one and several threads,
// and refuses a mask that does not fit.
TEST(AttentionProducts, Avx2AttentionEqualsTheMaskedSoftmaxProduct) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  auto gen = at::detail::createCPUGenerator(10);
  const auto bf = [&](at::IntArrayRef sizes) { return at::randn(sizes, gen, at::kFloat).to(at::kBFloat16); };
  const int threads_before = at::get_num_threads();
  for (const int threads : {1, 2, 3})
    for (const std::int64_t kv : {1, 4})
      for (const std::int64_t n : {1, 3})
        for (const std::int64_t s : {3, 40}) {
          at::set_num_threads(threads);
          const std::int64_t groups = 2, d = 16;
          const auto keys = bf({s + 5, kv, d}).narrow(0, 0, s), values = bf({s + 5, kv, d}).narrow(0, 0, s);
          const auto q = bf({kv, groups * n, d});
          // The step's rows see themselves and the rows before them (a chain), as a plan's mask does.
          const auto mask = n == 1 ? at::Tensor() : at::triu(at::full({n, n}, -std::numeric_limits<double>::infinity()), 1).to(at::kBFloat16);
          auto scores = at::matmul(q.to(at::kDouble), keys.to(at::kDouble).permute({1, 2, 0})) * 0.25;  // [kv, groups * n, s]
          if (mask.defined()) scores.view({kv, groups, n, s}).narrow(-1, s - n, n).add_(mask.to(at::kDouble));
          const auto want = at::matmul(at::softmax(scores, -1), values.to(at::kDouble).permute({1, 0, 2}));
          const auto got = avx2_attention(q, keys, values, mask, 0.25);
          ASSERT_EQ(got.scalar_type(), at::kBFloat16);
          ASSERT_EQ(got.sizes(), want.sizes());
          EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>(), 1e-2 * values.to(at::kDouble).abs().max().item<double>())
              << threads << " threads, " << kv << " kv heads, " << n << " step rows, length " << s;
        }
  at::set_num_threads(threads_before);
  const auto keys = bf({8, 2, 16}), q = bf({2, 4, 16});
  refdec_test::expect_error([&] { (void)avx2_attention(q, keys, keys, at::zeros({3, 3}), 1.0); }, "the mask must be a floating CPU [n, n]");
  refdec_test::expect_error([&] { (void)avx2_attention(q, keys, bf({8, 2, 8}), {}, 1.0); }, "avx2_attention: needs queries");
}

TEST(AttentionProducts, RejectWhatTheyCannotRun) {
  const auto bf = [](at::IntArrayRef sizes) { return at::zeros(sizes, at::TensorOptions().dtype(at::kBFloat16)); };
  EXPECT_FALSE(attention_products_supported(at::zeros({4, 2, 8})));
  EXPECT_FALSE(attention_products_supported(bf({4, 8, 2}).transpose(1, 2)));  // last dimension strided
  EXPECT_FALSE(attention_products_supported(at::Tensor()));
  EXPECT_EQ(attention_products_supported(bf({4, 2, 8})), packed_backend_unavailable(PackedBackend::kOneDnn, at::kBFloat16).empty())
      << "the products run where oneDNN runs bf16";
  refdec_test::expect_error([&] { (void)attention_scores(bf({2, 1, 8}), at::zeros({4, 2, 8}), 1.0); }, "attention_scores: needs bf16 CPU");
  refdec_test::expect_error([&] { (void)attention_scores(bf({3, 1, 8}), bf({4, 2, 8}), 1.0); }, "attention_scores: needs bf16 CPU");
  refdec_test::expect_error([&] { (void)attention_values(bf({2, 1, 5}), bf({4, 2, 8})); }, "attention_values: needs bf16 CPU");
}

// One packed layer serves several threads at once (each row count's kernel is made once, under a
// lock); every thread gets what a lone call gives.
void expect_threads_share_one_layer(PackedBackend backend) {
  auto gen = at::detail::createCPUGenerator(4);
  const PackedLinear packed(at::randn({64, 96}, gen, at::kFloat).to(at::kBFloat16), backend);
  std::vector<at::Tensor> inputs, alone;
  for (std::int64_t rows = 1; rows <= 24; ++rows) inputs.push_back(at::randn({rows, 96}, gen, at::kFloat).to(at::kBFloat16));
  const PackedLinear fresh(at::randn({64, 96}, gen, at::kFloat).to(at::kBFloat16), backend);  // kernels not made yet
  for (const auto& x : inputs) alone.push_back(fresh(x, at::kFloat));
  std::vector<std::vector<at::Tensor>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < inputs.size(); ++i) got[t].push_back(packed(inputs[(i + 5 * t) % inputs.size()], at::kFloat));
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < got.size(); ++t)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& x = inputs[(i + 5 * t) % inputs.size()];
      EXPECT_TRUE(at::equal(got[t][i], packed(x, at::kFloat))) << backend_name(backend) << " thread " << t << ", " << x.size(0) << " rows";
    }
  EXPECT_EQ(alone.size(), inputs.size());
}

TEST(PackedLinear, ThreadsShareOneOneDnnLayer) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_threads_share_one_layer(PackedBackend::kOneDnn);
}

TEST(PackedLinear, ThreadsShareOneAvx2Layer) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  expect_threads_share_one_layer(PackedBackend::kAvx2);
}

// The AVX2 layer's column blocks are taken in runs by libtorch's threads as each finishes its
// previous run: with any number of threads (more than the runs, too) every column is written once,
// exactly as one thread writes it (the output starts as NaN, so a column left out shows).
TEST(PackedLinear, Avx2SplitsItsColumnsOverTheThreads) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  auto gen = at::detail::createCPUGenerator(6);
  const int threads_before = at::get_num_threads();
  for (const std::int64_t out : {16, 100, 1000}) {  // 1, 7 and 63 blocks of 16 columns
    const PackedLinear packed(at::randn({out, 40}, gen, at::kFloat).to(at::kBFloat16), PackedBackend::kAvx2);
    for (const std::int64_t rows : {1, 5}) {
      const auto x = at::randn({rows, 40}, gen, at::kFloat).to(at::kBFloat16);
      at::set_num_threads(1);
      const auto one = packed(x, at::kFloat);
      for (const int threads : {2, 3, 8}) {
        at::set_num_threads(threads);
        auto got = at::full({rows, out}, std::numeric_limits<float>::quiet_NaN());
        packed.run(x, got);
        EXPECT_TRUE(at::equal(got, one)) << threads << " threads, " << out << " columns, " << rows << " rows";
      }
    }
  }
  at::set_num_threads(threads_before);
}

// The packed model (fused q/k/v, SwiGLU and residuals in the products' epilogues, float32
// logits) computes what the at::linear model computes from the same half weights, over trees,
// auxiliary rows and ragged batches, with either rotary pairing (its fused element-wise kernels
// against the reference's ATen ops); its weights are released and it says so.
void expect_packed_model_matches_aten(LinearKernel kernel, at::ScalarType dtype) {
  std::mt19937 rng(31);
  for (int kind = 0; kind < 4; ++kind) {
    auto config = attention_config(kind % 3);
    if (kind == 3) config.rope_style = RopeStyle::kHalf;
    const auto seed = 50 + static_cast<std::uint64_t>(kind);
    const auto same = LlamaModel::random(config, seed, dtype, at::kCPU, LinearKernel::kAten);
    // libtorch 1.13 has no fp16 products on the CPU: the reference runs the same values in float32.
    const LlamaModel aten = dtype == at::kHalf ? same.to(at::kFloat, at::kCPU, LinearKernel::kAten) : same;
    const auto packed = LlamaModel::random(config, seed, dtype, at::kCPU, kernel);
    EXPECT_FALSE(aten.packed());
    EXPECT_EQ(aten.linear_kernel(), LinearKernel::kAten);
    EXPECT_TRUE(packed.packed());
    EXPECT_EQ(packed.linear_kernel(), kernel);
    EXPECT_EQ(packed.linear_path().find(linear_kernel_name(kernel)), 0u) << packed.linear_path();
    EXPECT_GE(packed.step_weight_bytes(), same.step_weight_bytes());  // blocks may pad
    EXPECT_FALSE(packed.weights().layers[0].wq.defined()) << "packed projections are released";
    EXPECT_TRUE(packed.weights().embedding.defined());
    refdec_test::expect_error([&] { (void)packed.to(at::kFloat, at::kCPU); }, "convert the model before packing");
    for (int trial = 0; trial < 4; ++trial) {
      const int B = 1 + static_cast<int>(rng() % 3);
      const auto [cached, trees, aux] = random_batch(rng, B, 20);
      ContiguousKvStore sa(aten.kv_layout(), 64), sp(packed.kv_layout(), 64);
      prefill(aten, sa, cached);
      prefill(packed, sp, cached);
      StepPlan plan;
      plan_step(trees, aux, sa.lengths(), aten.vocab_size(), plan);
      const auto a = aten.forward(plan, sa), p = packed.forward(plan, sp);
      EXPECT_EQ(p.scalar_type(), at::kFloat);
      // Half activations round differently between the kernels: a loose bound, and the same
      // argmax on nearly every row.
      EXPECT_LT((a - p).abs().max().item<double>(), 0.1 * a.abs().max().item<double>()) << "kind " << kind << " trial " << trial;
      EXPECT_GE(a.argmax(-1).eq(p.argmax(-1)).to(at::kDouble).mean().item<double>(), 0.8) << "kind " << kind << " trial " << trial;
    }
  }
}

TEST(LlamaModel, OneDnnLayersMatchAtLinearInBf16) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_packed_model_matches_aten(LinearKernel::kOneDnn, at::kBFloat16);
}

TEST(LlamaModel, Avx2LayersMatchAtLinearInBf16) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  expect_packed_model_matches_aten(LinearKernel::kAvx2, at::kBFloat16);
}

TEST(LlamaModel, Avx2LayersMatchAtLinearInFp16) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kHalf);
  expect_packed_model_matches_aten(LinearKernel::kAvx2, at::kHalf);
}

// kAuto and kPacked take the fastest kernel this CPU runs and say why; a kernel that cannot run
// is an error naming what the CPU lacks and the alternatives; float32 weights stay on at::linear.
TEST(LlamaModel, ChoosesItsLinearKernelByWhatTheCpuRuns) {
  const auto config = attention_config(0);
  const auto fp32 = LlamaModel::random(config, 1, at::kFloat);
  EXPECT_EQ(fp32.linear_kernel(), LinearKernel::kAten);
  EXPECT_NE(fp32.linear_path().find("bf16 or fp16"), std::string::npos) << fp32.linear_path();
  refdec_test::expect_error([&] { (void)LlamaModel::random(config, 1, at::kFloat, at::kCPU, LinearKernel::kPacked); },
                            "LinearKernel::kPacked cannot run");
  refdec_test::expect_error([&] { (void)LlamaModel::random(config, 1, at::kFloat, at::kCPU, LinearKernel::kAvx2); },
                            "LinearKernel::kAvx2 cannot run");
  for (const LinearKernel k : {LinearKernel::kAuto, LinearKernel::kAten, LinearKernel::kPacked, LinearKernel::kOneDnn, LinearKernel::kAvx2})
    EXPECT_EQ(parse_linear_kernel(linear_kernel_name(k)), k);
  refdec_test::expect_error([] { (void)parse_linear_kernel("mkl"); }, "unknown linear kernel 'mkl'");
  const std::string onednn_why = packed_backend_unavailable(PackedBackend::kOneDnn, at::kBFloat16);
  if (!onednn_why.empty())
    refdec_test::expect_error([&] { (void)LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kOneDnn); },
                              "use LinearKernel::kAuto (the fastest that runs) or kAten");
  const auto fastest = fastest_packed_backend(at::kBFloat16);
  const auto automatic = LlamaModel::random(config, 1, at::kBFloat16);
  if (!fastest) {
    EXPECT_EQ(automatic.linear_kernel(), LinearKernel::kAten) << automatic.linear_path();
    GTEST_SKIP() << "no packed kernel runs here (" << cpu_isa().describe() << "): kAuto keeps at::linear";
  }
  const LinearKernel want = *fastest == PackedBackend::kOneDnn ? LinearKernel::kOneDnn : LinearKernel::kAvx2;
  EXPECT_EQ(automatic.linear_kernel(), want) << automatic.linear_path();
  EXPECT_EQ(LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kPacked).linear_kernel(), want);
  if (want == LinearKernel::kAvx2) {  // the report says why oneDNN was passed over
    EXPECT_NE(automatic.linear_path().find(onednn_why), std::string::npos) << automatic.linear_path();
  }
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
