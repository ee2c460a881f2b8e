// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The static-shape step (StaticLlama over a StaticKvStore) against its reference, LlamaModel over a
// ContiguousKvStore: the same logits at every bucket boundary of batch and rows, step after step
// with keep plans committed, for both rotary styles and every attention kind; the store's own
// KvStore path under the eager model; errors; and on a GPU the captured graphs against eager steps.
// Sessions over the static step (continuous batching, sampling) are in session_test.cpp.

#include "refdec/torch/static_llama.hpp"
#include "refdec/torch/static_paged_kv_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/expect_error.hpp"
#include "common/tiny_llama.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/session.hpp"
#include "refdec/torch/verifier.hpp"

#if REFDEC_EVAL_STATIC_KERNELS
#include "eval/static_kernels.hpp"
#endif

namespace {

using namespace refdec;

constexpr std::int64_t kVocab = 111;

// A draft tree of exactly `nodes` nodes (root included) over the vocabulary, of random shape.
LinearTree tree_of(std::mt19937& rng, Token root, std::int32_t nodes) {
  DraftTree trie;
  while (static_cast<std::int32_t>(trie.size()) < nodes - 1) {
    std::vector<Token> path(1 + rng() % 6);
    for (auto& t : path) t = static_cast<Token>(rng() % (rng() % 2 == 0 ? 4 : kVocab));
    trie.insert(path, 1.0f + static_cast<float>(rng() % 3));
  }
  LinearTree out;
  trie.linearize(root, static_cast<std::size_t>(nodes - 1), out);
  REFDEC_CHECK(out.size() == nodes, "tree_of: " << out.size() << " nodes, not " << nodes);
  return out;
}

// The row counts at a bucket boundary under max_rows 17 (buckets 1, 2, 3, 4, 6, 8, 12, 16, 17).
const std::vector<std::int32_t> kRowEdges = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17};

struct Case {
  at::ScalarType dtype;
  std::int64_t kv_heads;
  RopeStyle rope;
  bool paged = false;  ///< StaticPagedKvStore (blocks of 4 entries), else StaticKvStore
};

// How GoogleTest (and CTest's test names) print a case: its fields, not its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.dtype << ", " << c.kv_heads << " kv heads, " << (c.rope == RopeStyle::kHalf ? "half" : "interleaved") << " rotary"
      << (c.paged ? ", paged" : "");
}

// A static store of 150 entries per sequence, contiguous or paged.
template <class Store>
Store static_store(const StaticLlama& model, const StaticStoreOptions& options) {
  if constexpr (std::is_same_v<Store, StaticPagedKvStore>)
    return StaticPagedKvStore(model.kv_layout(), 5 * 150 / 4 + 5, 4, 150, options);
  else
    return StaticKvStore(model.kv_layout(), 150, options);
}

class StaticStepLogits : public ::testing::TestWithParam<Case> {};

// Steps at every (batch, rows) bucket edge, each committed with the keep plan of greedy
// acceptance, through both paths (graphs as `options` says) from the same prefill on `device`: the
// logits agree within `tolerance` and so does every argmax whose top two logits are 1e-3 apart.
template <class Store>
void expect_equal_at_bucket_edges(const LlamaConfig& config, at::ScalarType dtype, at::Device device, double tolerance,
                                  StaticStoreOptions options, const StaticKernels* kernels = nullptr) {
  const LlamaModel eager = LlamaModel::random(config, 5, dtype, device, LinearKernel::kAten);
  StaticLlama fixed(eager);
  if (kernels != nullptr) {
    fixed.set_kernels(*kernels);
    ASSERT_TRUE(fixed.fused());
  }
  std::mt19937 rng(11);
  for (const std::int64_t batch : {1, 2, 3, 5}) {
    ContiguousKvStore reference(eager.kv_layout(), 150);
    Store store = static_store<Store>(fixed, options);
    std::vector<Token> last(static_cast<std::size_t>(batch));
    {  // prefill: chains of different lengths
      std::vector<LinearTree> chains;
      std::vector<std::uint8_t> prefill(static_cast<std::size_t>(batch), 1);
      for (std::int64_t b = 0; b < batch; ++b) {
        std::vector<Token> prompt(static_cast<std::size_t>(3 + rng() % 14));
        for (auto& t : prompt) t = static_cast<Token>(rng() % kVocab);
        chains.push_back(LinearTree::chain(prompt));
        reference.add();
        store.add();
      }
      StepPlan plan;
      plan_step(chains, {}, reference.lengths(), kVocab, plan);
      Verification a, b;
      StepTimes times;
      verify(eager, reference, plan, a, times, {.prefill = prefill});
      verify(fixed, store, plan, b, times, {.prefill = prefill});
      reference.commit(a.keep);
      store.commit(b.keep);
      for (std::int64_t s = 0; s < batch; ++s) last[static_cast<std::size_t>(s)] = chains[static_cast<std::size_t>(s)].tokens.back();
    }
    std::int64_t compared = 0;
    for (const std::int32_t rows : kRowEdges) {
      std::vector<LinearTree> trees;
      for (std::int64_t b = 0; b < batch; ++b)  // sequence 0 sets the bucket, the others vary below it
        trees.push_back(tree_of(rng, last[static_cast<std::size_t>(b)], b == 0 ? rows : 1 + static_cast<std::int32_t>(rng() % rows)));
      StepPlan plan;
      plan_step(trees, {}, reference.lengths(), kVocab, plan);
      const at::Tensor want = eager.forward(plan, reference).cpu();
      const at::Tensor got = fixed.forward(plan, store).cpu();
      ASSERT_EQ(got.sizes(), want.sizes());
      ASSERT_EQ(got.scalar_type(), want.scalar_type());
      const double diff = (got - want).abs().max().item<double>();
      EXPECT_LT(diff, tolerance) << "batch " << batch << ", " << rows << " rows: logits differ by " << diff;
      // Greedy acceptance on the reference's logits, committed to both stores.
      const at::Tensor target = want.argmax(-1).to(at::kInt).contiguous();
      const auto top2 = std::get<0>(want.topk(2, -1));
      const auto gap = (top2.select(1, 0) - top2.select(1, 1)).contiguous();
      const at::Tensor got_target = got.argmax(-1).to(at::kInt).contiguous();
      for (std::int64_t r = 0; r < plan.rows(); ++r)
        if (gap[r].item<double>() > 1e-3) {
          EXPECT_EQ(got_target[r].item<int>(), target[r].item<int>()) << "batch " << batch << ", " << rows << " rows, row " << r;
          ++compared;
        }
      std::vector<Acceptance> accepted(static_cast<std::size_t>(batch));
      for (std::int32_t b = 0; b < plan.batch(); ++b) {
        accept(plan.tree(b), ChoiceArray{target.data_ptr<std::int32_t>() + plan.indptr[static_cast<std::size_t>(b)]},
               accepted[static_cast<std::size_t>(b)]);
        last[static_cast<std::size_t>(b)] = accepted[static_cast<std::size_t>(b)].tokens.back();
      }
      KeepPlan keep;
      keep_accepted(plan, accepted, keep);
      reference.commit(keep);
      store.commit(keep);
      ASSERT_TRUE(std::equal(store.lengths().begin(), store.lengths().end(), reference.lengths().begin()));
    }
    EXPECT_GT(compared, 0);
  }
}

// On the CPU, eagerly: float64 to 1e-9, float32 to 2e-4.
TEST_P(StaticStepLogits, EqualTheEagerModelAtEveryBucketBoundary) {
  const Case c = GetParam();
  LlamaConfig config = refdec_test::tiny_llama_config(c.kv_heads, kVocab, 160);
  config.rope_style = c.rope;
  const double tolerance = c.dtype == at::kDouble ? 1e-9 : 2e-4;
  const StaticStoreOptions options{.max_batch = 5, .max_rows = 17, .graphs = false};
  if (c.paged)
    expect_equal_at_bucket_edges<StaticPagedKvStore>(config, c.dtype, at::kCPU, tolerance, options);
  else
    expect_equal_at_bucket_edges<StaticKvStore>(config, c.dtype, at::kCPU, tolerance, options);
}

// On a GPU, float32, every bucket's step captured in a CUDA graph and replayed, against the eager
// LlamaModel there (cuBLAS's own rounding: 1e-3).
TEST(StaticStep, CapturedLogitsEqualTheEagerModelOnTheGpu) {
  if (!StepGraph::available()) GTEST_SKIP() << "this libtorch has no CUDA: no CUDA graphs to capture";
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (const RopeStyle rope : {RopeStyle::kInterleaved, RopeStyle::kHalf}) {
    LlamaConfig config = refdec_test::tiny_llama_config(2, kVocab, 160);
    config.rope_style = rope;
    expect_equal_at_bucket_edges<StaticKvStore>(config, at::kFloat, at::Device(at::kCUDA), 1e-3, {.max_batch = 5, .max_rows = 17});
    expect_equal_at_bucket_edges<StaticPagedKvStore>(config, at::kFloat, at::Device(at::kCUDA), 1e-3, {.max_batch = 5, .max_rows = 17});
  }
}

INSTANTIATE_TEST_SUITE_P(StaticStep, StaticStepLogits,
                         ::testing::Values(Case{at::kDouble, 4, RopeStyle::kInterleaved}, Case{at::kDouble, 2, RopeStyle::kHalf},
                                           Case{at::kDouble, 1, RopeStyle::kInterleaved}, Case{at::kFloat, 2, RopeStyle::kInterleaved},
                                           Case{at::kFloat, 4, RopeStyle::kHalf}, Case{at::kDouble, 2, RopeStyle::kInterleaved, true},
                                           Case{at::kDouble, 1, RopeStyle::kHalf, true}, Case{at::kFloat, 4, RopeStyle::kInterleaved, true}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.dtype == at::kDouble ? "fp64" : "fp32") + "_kv" +
                                  std::to_string(param_info.param.kv_heads) +
                                  (param_info.param.rope == RopeStyle::kHalf ? "_half" : "_interleaved") +
                                  (param_info.param.paged ? "_paged" : "");
                         });

// The same with the fused kernels (the rotary scatter and SwiGLU, refdec/cuda/static_kernels.cuh)
// in the captured steps.
TEST(StaticStep, FusedKernelsEqualTheEagerModelOnTheGpu) {
#if !REFDEC_EVAL_STATIC_KERNELS
  GTEST_SKIP() << "built without the static step's fused CUDA kernels (they need a CUDA compiler and a CUDA build of libtorch)";
#else
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (const RopeStyle rope : {RopeStyle::kInterleaved, RopeStyle::kHalf}) {
    LlamaConfig config = refdec_test::tiny_llama_config(2, kVocab, 160);
    config.rope_style = rope;
    const StaticStoreOptions options{.max_batch = 5, .max_rows = 17};
    expect_equal_at_bucket_edges<StaticKvStore>(config, at::kFloat, at::Device(at::kCUDA), 1e-3, options, &refdec_eval::static_kernels());
    expect_equal_at_bucket_edges<StaticPagedKvStore>(config, at::kFloat, at::Device(at::kCUDA), 1e-3, options, &refdec_eval::static_kernels());
  }
#endif
}

TEST(StaticStep, FusedKernelsAreUsedOnlyOnAGpu) {
  const LlamaModel model = LlamaModel::random(refdec_test::tiny_llama_config(2, kVocab, 64), 3, at::kFloat);
  StaticLlama fixed(model);
  EXPECT_FALSE(fixed.fused());
  StaticKernels fake;
  fake.rotary_scatter = [](const RotaryScatterArgs&, void*) { ADD_FAILURE() << "a fused kernel ran on the CPU"; };
  fake.swiglu = [](const SwigluArgs&, void*) { ADD_FAILURE() << "a fused kernel ran on the CPU"; };
  fake.linear = [](const LinearArgs&, void*) { ADD_FAILURE() << "a fused kernel ran on the CPU"; };
  fixed.set_kernels(fake);
  EXPECT_FALSE(fixed.fused()) << "a CPU model runs torch operations";
  StaticKvStore store(fixed.kv_layout(), 20, {.graphs = false});
  store.add();
  StepPlan plan;
  std::mt19937 rng(3);
  plan_step(std::vector<LinearTree>{tree_of(rng, 1, 3)}, {}, store.lengths(), kVocab, plan);
  EXPECT_EQ(fixed.forward(plan, store).size(0), 3);
}

TEST(StaticStep, BucketsArePowersOfTwoAndTheirMidpointsUpToTheLimit) {
  EXPECT_EQ(static_buckets(17), (std::vector<std::int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 17}));
  EXPECT_EQ(static_buckets(16), (std::vector<std::int64_t>{1, 2, 3, 4, 6, 8, 12, 16}));
  EXPECT_EQ(static_buckets(1), (std::vector<std::int64_t>{1}));
  for (const std::int64_t limit : {1, 5, 17, 64, 100}) {  // the bucket of n: the first of static_buckets() >= n
    const auto all = static_buckets(limit);
    for (std::int64_t n = 1; n <= limit; ++n)
      EXPECT_EQ(static_bucket(n, limit, "rows"), *std::lower_bound(all.begin(), all.end(), n)) << n << " under " << limit;
  }
  EXPECT_EQ(static_bucket(5, 7, "rows"), 6);
  EXPECT_EQ(static_bucket(7, 7, "rows"), 7);
  refdec_test::expect_error([&] { (void)(static_bucket(18, 17, "rows")); }, "18 rows outside the buckets' range [1, 17]");
  refdec_test::expect_error([&] { (void)(static_bucket(0, 17, "rows")); }, "outside the buckets' range");
}

// The eager model over a StaticKvStore or a StaticPagedKvStore (their write(), read() and
// commit()) decodes as over the contiguous store, with sequences joining and leaving.
TEST(StaticStep, StoresServeTheEagerModelAsTheContiguousStoreDoes) {
  const LlamaModel model = LlamaModel::random(refdec_test::tiny_llama_config(2, kVocab, 128), 9, at::kDouble);
  GenerateOptions options;
  options.limits.budget = 8;
  options.limits.max_new_tokens = 24;
  std::vector<Request> requests(4);
  std::mt19937 rng(4);
  for (auto& r : requests) {
    r.prompt = {1};
    for (int i = 0; i < 6; ++i) r.prompt.push_back(static_cast<Token>(rng() % kVocab));
    r.max_new_tokens = 6 + static_cast<std::int64_t>(rng() % 18);
  }
  const auto run = [&](auto store) {
    Session session(model, std::move(store), options);
    std::vector<std::vector<Token>> out(requests.size());
    std::map<RequestId, std::size_t> which;
    std::size_t next = 0;
    while (next < requests.size() || !session.idle()) {
      if (next < requests.size() && (next < 2 || session.active() < 2))
        which[session.add(requests[next], AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 6, .self_reference = true})))] = next, ++next;
      for (const RequestUpdate& u : session.step()) out[which.at(u.id)].insert(out[which.at(u.id)].end(), u.tokens.begin(), u.tokens.end());
    }
    return out;
  };
  const auto want = run(ContiguousKvStore(model.kv_layout(), 160));
  EXPECT_EQ(run(StaticKvStore(model.kv_layout(), 160, {.max_batch = 4, .max_rows = 32, .graphs = false})), want);
  EXPECT_EQ(run(StaticPagedKvStore(model.kv_layout(), 100, 8, 160, {.max_batch = 4, .max_rows = 32, .graphs = false})), want);
  for (const auto& o : want) EXPECT_FALSE(o.empty());
}

TEST(StaticStep, RejectsWhatItsBucketsCannotHold) {
  const LlamaModel model = LlamaModel::random(refdec_test::tiny_llama_config(2, kVocab, 64), 3, at::kFloat);
  const StaticLlama fixed(model);
  StaticKvStore store(fixed.kv_layout(), 20, {.max_batch = 2, .max_rows = 8, .max_step_rows = 8, .graphs = false});
  store.add();
  store.add();
  refdec_test::expect_error([&] { (void)(store.add()); }, "already 2 sequences, the store's max_batch");
  StepPlan plan;
  std::mt19937 rng(1);
  const auto plan_of = [&](std::int32_t rows0, std::int32_t rows1) {
    const std::vector<LinearTree> trees{tree_of(rng, 1, rows0), tree_of(rng, 2, rows1)};
    plan_step(trees, {}, store.lengths(), kVocab, plan);
    return plan;
  };
  refdec_test::expect_error([&] { (void)(fixed.forward(plan_of(9, 1), store)); }, "9 step rows of a sequence outside the buckets' range [1, 8]");
  refdec_test::expect_error([&] { (void)(fixed.forward(plan_of(5, 1), store)); }, "bucket of 2 sequences x 6 rows exceeds max_step_rows 8");
  EXPECT_EQ(store.lengths()[0], 0) << "a rejected step leaves the store as it was";
  EXPECT_NO_THROW(fixed.forward(plan_of(4, 3), store));
  StaticKvStore small(fixed.kv_layout(), 6, {.max_batch = 2, .max_rows = 8, .graphs = false});
  small.add();
  small.add();
  const std::vector<LinearTree> trees{tree_of(rng, 1, 7), tree_of(rng, 2, 1)};
  plan_step(trees, {}, small.lengths(), kVocab, plan);
  refdec_test::expect_error([&] { (void)(fixed.forward(plan, small)); }, "sequence 0 needs 7 entries (cached + step rows), more than the capacity 6");
  StaticKvStore other(LlamaModel::random(refdec_test::tiny_llama_config(4, kVocab, 64), 3).kv_layout(), 20, {.max_batch = 2, .graphs = false});
  other.add();
  other.add();
  plan_step(std::vector<LinearTree>{tree_of(rng, 1, 2), tree_of(rng, 2, 2)}, {}, other.lengths(), kVocab, plan);
  refdec_test::expect_error([&] { (void)(fixed.forward(plan, other)); }, "the store's layout does not match the model's kv_layout()");
  refdec_test::expect_error([&] { (void)(StaticKvStore(fixed.kv_layout(), 0)); }, "capacity must be positive, got 0");
  refdec_test::expect_error([&] { (void)(StaticKvStore(fixed.kv_layout(), 8, {.max_batch = 0})); }, "max_batch, max_rows and max_step_rows must be positive");
}

TEST(StaticStep, PagedStoreRejectsWhatItCannotHoldAndFreesBlocks) {
  const LlamaModel model = LlamaModel::random(refdec_test::tiny_llama_config(2, kVocab, 64), 3, at::kFloat);
  const StaticLlama fixed(model);
  StaticPagedKvStore store(fixed.kv_layout(), 3, 4, 10, {.max_batch = 2, .max_rows = 8, .graphs = false});
  store.add();
  store.add();
  std::mt19937 rng(1);
  StepPlan plan;
  plan_step(std::vector<LinearTree>{tree_of(rng, 1, 8), tree_of(rng, 2, 5)}, {}, store.lengths(), kVocab, plan);
  refdec_test::expect_error([&] { (void)fixed.forward(plan, store); }, "the step needs 4 more blocks of 4 entries but only 3 of 3 are free");
  EXPECT_EQ(store.free_blocks(), 3) << "a rejected step allocates nothing";
  plan_step(std::vector<LinearTree>{tree_of(rng, 1, 8), tree_of(rng, 2, 4)}, {}, store.lengths(), kVocab, plan);
  (void)fixed.forward(plan, store);
  EXPECT_EQ(store.free_blocks(), 0);
  KeepPlan keep;
  keep_accepted(plan, std::vector<Acceptance>(2), keep);  // each keeps its root alone
  store.commit(keep);
  EXPECT_EQ(store.free_blocks(), 1) << "blocks past the new lengths return to the pool";
  store.remove(0);
  EXPECT_EQ(store.free_blocks(), 2);
  EXPECT_EQ(store.lengths()[0], 1);
  StaticPagedKvStore small(fixed.kv_layout(), 3, 4, 6, {.max_rows = 8, .graphs = false});
  small.add();
  plan_step(std::vector<LinearTree>{tree_of(rng, 1, 7)}, {}, small.lengths(), kVocab, plan);
  refdec_test::expect_error([&] { (void)fixed.forward(plan, small); }, "sequence 0 needs 7 entries (cached + step rows), more than max_entries 6");
  refdec_test::expect_error([&] { (void)StaticPagedKvStore(fixed.kv_layout(), 0, 4, 10); }, "num_blocks and block_size must be positive");
}

TEST(StaticStep, RejectsPackedModels) {
  const LlamaConfig config = refdec_test::tiny_llama_config(2, kVocab, 64);
  const LlamaModel bf16 = LlamaModel::random(config, 3, at::kBFloat16);
  if (!bf16.packed()) GTEST_SKIP() << "no packed kernel runs bf16 on this CPU: " << bf16.linear_path();
  refdec_test::expect_error([&] { (void)(StaticLlama{bf16}); }, "build it with LinearKernel::kAten");
}

// On a GPU: the captured graphs replay exactly what the same steps compute eagerly (greedy
// logits at every bucket, then sessions sampling with a seed), and the graph of a bucket is
// captured once.
TEST(StaticStep, CapturedGraphsEqualEagerStepsOnTheGpu) {
  if (!StepGraph::available()) GTEST_SKIP() << "this libtorch has no CUDA: no CUDA graphs to capture";
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const LlamaModel model = LlamaModel::random(refdec_test::tiny_llama_config(2, kVocab, 160), 7, at::kFloat, at::Device(at::kCUDA));
  const StaticLlama fixed(model);
  StaticKvStore captured(fixed.kv_layout(), 150, {.max_batch = 3, .max_rows = 17});
  StaticKvStore eager(fixed.kv_layout(), 150, {.max_batch = 3, .max_rows = 17, .graphs = false});
  std::mt19937 rng(2);
  for (int b = 0; b < 3; ++b) captured.add(), eager.add();
  for (int round = 0; round < 2; ++round)
    for (const std::int32_t rows : kRowEdges) {
      std::vector<LinearTree> trees;
      for (int b = 0; b < 3; ++b) trees.push_back(tree_of(rng, static_cast<Token>(b), b == 0 ? rows : 1 + static_cast<std::int32_t>(rng() % rows)));
      StepPlan plan;
      plan_step(trees, {}, eager.lengths(), kVocab, plan);
      Verification a, c;
      StepTimes times;
      verify(fixed, eager, plan, a, times);
      const at::Tensor want = fixed.forward(plan, eager).clone();
      const at::Tensor got = fixed.forward(plan, captured).clone();
      EXPECT_LT((got - want).abs().max().item<double>(), 1e-5) << rows << " rows, round " << round;
      verify(fixed, captured, plan, c, times);
      for (int b = 0; b < 3; ++b) EXPECT_EQ(c.accepted[static_cast<std::size_t>(b)].tokens, a.accepted[static_cast<std::size_t>(b)].tokens);
      eager.commit(a.keep);
      captured.commit(c.keep);
    }
  std::size_t graphs = 0;
  for (const auto& [key, bucket] : captured.state().buckets) graphs += bucket.graph && bucket.graph->captured() ? 1 : 0;
  EXPECT_EQ(graphs, captured.state().buckets.size());
  // Sampled sessions: the captured path draws the same tokens as the eager one.
  GenerateOptions options;
  options.limits.max_new_tokens = 32;
  options.limits.budget = 8;
  options.sampling = SamplingOptions{.temperature = 0.8f, .top_k = 30, .seed = 17};
  Request request;
  request.prompt = {1, 5, 9, 5, 9, 5};
  request.references = {{5, 9, 5, 9, 5, 9, 5, 9, 7, 7}};
  const auto sample = [&](bool graphs_on) {
    Session session(fixed, StaticKvStore(fixed.kv_layout(), 150, {.max_batch = 1, .max_rows = 16, .graphs = graphs_on}), options);
    session.add(request, AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 6})));
    std::vector<Token> out;
    while (!session.idle())
      for (const RequestUpdate& u : session.step()) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    return out;
  };
  const auto want = sample(false);
  EXPECT_EQ(sample(true), want);
  EXPECT_EQ(want.size(), 32u);
}

}  // namespace
