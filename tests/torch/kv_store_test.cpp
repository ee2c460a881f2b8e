// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The KV stores (contiguous, paged, read in place): commits, joins and leaves, bad use; the
// huge-page tensors their CPU caches live in.

#include "common/counted_paged_store.hpp"
#include "refdec/torch/huge_page_tensor.hpp"
#include "torch/model_helpers.hpp"

namespace {

using namespace refdec;
using namespace refdec_test::model;
using refdec_test::CountedPagedStore;

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
    prefill(
        model, store,
        {std::vector<Token>(prefixes[0].begin(), prefixes[0].end() - 1), std::vector<Token>(prefixes[1].begin(), prefixes[1].end() - 1)});
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
    EXPECT_EQ(static_cast<std::int64_t>(table.size()),
              (store.lengths()[static_cast<std::size_t>(b)] + store.block_size() - 1) / store.block_size())
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
            for (std::int32_t s = trees[b].next_sibling[static_cast<std::size_t>(c)]; s >= 0;
                 s = trees[b].next_sibling[static_cast<std::size_t>(s)])
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

static_assert(PagedKvRead<PagedKvStore> && PagedKvRead<CountedPagedStore<true>> && !PagedKvRead<CountedPagedStore<false>>);
static_assert(!PagedKvRead<ContiguousKvStore>);

// In bf16 on the AVX2 kernels the model reads a paged store's blocks where they lie (read() is
// never called) and gets the logits of the same entries gathered: exactly, where the gathered
// prefix goes through the same AVX2 kernel; within bf16 rounding where oneDNN's bf16 products take
// it instead. Blocks of 3 entries, scattered over the pool by steps that interleave sequences.
TEST(KvStores, PagedBlocksAreReadInPlace) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
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

TEST(HugePageZeros, IsZerosInHugePageAlignedMemoryOnTheCpu) {
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    // Below and above one huge page (2 MiB): the first in plain memory, the second aligned to it.
    for (const std::int64_t rows : {3, 1024}) {
      const at::Tensor t = huge_page_zeros({rows, 1024}, at::TensorOptions().dtype(dtype));
      EXPECT_TRUE(t.equal(at::zeros({rows, 1024}, at::TensorOptions().dtype(dtype))));
      const auto address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
      EXPECT_EQ(address % (rows * 1024 * t.element_size() >= static_cast<std::int64_t>(HugePageBuffer::kHugePageBytes) ? HugePageBuffer::kHugePageBytes : 64), 0u);
      // Its own memory, writable to the end, and kept alive by views past the tensor's life.
      at::Tensor last_row;
      {
        at::Tensor owner = huge_page_zeros({rows, 1024}, at::TensorOptions().dtype(dtype));
        owner[rows - 1].fill_(2.0);
        last_row = owner[rows - 1];
      }
      EXPECT_TRUE(last_row.eq(2.0).all().item<bool>());
    }
  }
}

}  // namespace
