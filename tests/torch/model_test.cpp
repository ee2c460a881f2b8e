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
#include "common/skip_backend.hpp"
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
    const auto model = LlamaModel::random(refdec_test::attention_kind_config(kind), 40 + static_cast<std::uint64_t>(kind), at::kDouble);
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
    const auto model = LlamaModel::random(refdec_test::attention_kind_config(kind), 60 + static_cast<std::uint64_t>(kind), at::kDouble);
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

// A paged store that counts the model's reads; without read_paged (kInPlace false) it is seen
// through the KvStore members alone, as an engine's own store would be, and the model gathers.
template <bool kInPlace>
class CountedPagedStore {
 public:
  CountedPagedStore(const KvLayout& layout, std::int64_t blocks, std::int64_t block_size) : store_(layout, blocks, block_size) {}
  void begin_step(const StepPlan& plan) { store_.begin_step(plan); }
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) { store_.write(layer, k, v); }
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    ++reads;
    return store_.read(layer, b);
  }
  PagedEntries read_paged(std::int64_t layer, std::int64_t b) const
    requires kInPlace
  {
    ++paged_reads;
    return store_.read_paged(layer, b);
  }
  void commit(const KeepPlan& keep) { store_.commit(keep); }
  std::int64_t add() { return store_.add(); }
  void remove(std::int64_t b) { store_.remove(b); }
  std::int64_t batch() const { return store_.batch(); }
  std::span<const std::int64_t> lengths() const { return store_.lengths(); }
  const KvLayout& layout() const { return store_.layout(); }

  mutable std::int64_t reads = 0, paged_reads = 0;

 private:
  PagedKvStore store_;
};
static_assert(PagedKvRead<PagedKvStore> && PagedKvRead<CountedPagedStore<true>> && !PagedKvRead<CountedPagedStore<false>>);
static_assert(!PagedKvRead<ContiguousKvStore>);

// In bf16 on the AVX2 kernels the model reads a paged store's blocks where they lie (read() is
// never called) and gets the logits of the same entries gathered: exactly, where the gathered
// prefix goes through the same AVX2 kernel; within bf16 rounding where oneDNN's bf16 products take
// it instead. Blocks of 3 entries, scattered over the pool by steps that interleave sequences.
TEST(KvStores, PagedBlocksAreReadInPlace) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kAvx2, at::kBFloat16);
  std::mt19937 rng(17);
  const auto model = LlamaModel::random(refdec_test::attention_kind_config(1), 70, at::kBFloat16, at::kCPU, LinearKernel::kAvx2);
  CountedPagedStore<true> in_place(model.kv_layout(), 150, 3);
  CountedPagedStore<false> gathered(model.kv_layout(), 150, 3);
  const int B = 3;
  const auto batch = random_batch(rng, B, 20);
  prefill(model, in_place, batch.cached);
  prefill(model, gathered, batch.cached);
  const bool same_kernel = !torch_detail::onednn_bf16_matmul_runs();
  StepPlan plan;
  KeepPlan keep;
  for (int step = 0; step < 5; ++step) {
    std::vector<LinearTree> trees;
    std::vector<AuxBlock> aux;
    for (int b = 0; b < B; ++b) {
      trees.push_back(random_plan_tree(rng, static_cast<Token>(rng() % 111), 111));
      aux.push_back(random_aux(rng, 111));
    }
    plan_step(trees, aux, in_place.lengths(), model.vocab_size(), plan);
    in_place.reads = in_place.paged_reads = gathered.reads = 0;
    const auto a = model.forward(plan, in_place), g = model.forward(plan, gathered);
    const std::int64_t layers = model.config().n_layers;
    EXPECT_EQ(in_place.reads, 0) << "step " << step << ": a paged read gathered the prefix";
    EXPECT_EQ(in_place.paged_reads, layers * B) << "step " << step;
    EXPECT_EQ(gathered.reads, layers * B) << "step " << step;
    if (same_kernel)
      EXPECT_TRUE(at::equal(a, g)) << "step " << step << ": max difference " << (a - g).abs().max().item<double>();
    else
      EXPECT_LT((a - g).abs().max().item<double>(), 0.05 * g.abs().max().item<double>()) << "step " << step;
    std::vector<Acceptance> accepted(trees.size());
    for (std::size_t b = 0; b < trees.size(); ++b)
      for (std::int32_t c = trees[b].first_child[0]; c >= 0 && rng() % 3 != 0; c = trees[b].first_child[static_cast<std::size_t>(c)])
        accepted[b].nodes.push_back(c);
    keep_accepted(plan, accepted, keep);
    in_place.commit(keep);
    gathered.commit(keep);
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

// The packed model (fused q/k/v, SwiGLU and residuals in the products' epilogues, float32
// logits) computes what the at::linear model computes from the same half weights, over trees,
// auxiliary rows and ragged batches, with either rotary pairing (its fused element-wise kernels
// against the reference's ATen ops); its weights are released and it says so.
void expect_packed_model_matches_aten(LinearKernel kernel, at::ScalarType dtype) {
  std::mt19937 rng(31);
  for (int kind = 0; kind < 4; ++kind) {
    auto config = refdec_test::attention_kind_config(kind % 3);
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
  const auto config = refdec_test::attention_kind_config(0);
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

}  // namespace
