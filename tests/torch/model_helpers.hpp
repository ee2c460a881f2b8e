// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What the model, store and loader tests share: a small config, prefills, causal and dense-mask
// references, random step batches.

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

namespace refdec_test::model {

using namespace refdec;

inline LlamaConfig small_config() { return refdec_test::tiny_llama_config(); }

// Runs the chains `prefixes[b]` (all their tokens) into new sequences of an empty `store`, keeping
// every entry.
template <KvStore S>
inline void prefill(const LlamaModel& model, S& store, const std::vector<std::vector<Token>>& prefixes) {
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
inline at::Tensor causal_logits(const LlamaModel& model, const std::vector<Token>& tokens) {
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
inline at::Tensor dense_reference(const LlamaModel& model, const std::vector<Token>& cached, const StepPlan& plan, std::int32_t b) {
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

// A small window-like auxiliary block over `vocab` tokens (empty every other time).
inline AuxBlock random_aux(std::mt19937& rng, std::int64_t vocab) {
  return refdec_test::random_aux(rng, {.empty_one_in = 2, .max_tokens = 9, .max_offset = 6, .vocab = static_cast<unsigned>(vocab)});
}

// A random draft tree over `vocab` tokens, sometimes the root alone.
inline LinearTree random_plan_tree(std::mt19937& rng, Token root, std::int64_t vocab) {
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

inline RandomBatch random_batch(std::mt19937& rng, int B, unsigned max_cached) {
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

}  // namespace refdec_test::model
