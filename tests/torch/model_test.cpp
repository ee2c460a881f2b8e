// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The reference Llama model: its plan attention against a dense-mask reference, trees, auxiliary rows,
// half precision and the packed kernels.

#include "torch/model_helpers.hpp"

namespace {

using namespace refdec;
using namespace refdec_test::model;

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
      for (std::int32_t j = i; j > 0; j = tree.parent[static_cast<std::size_t>(j)])
        path.insert(path.begin(), tree.tokens[static_cast<std::size_t>(j)]);
      std::vector<Token> seq = prefix;
      seq.insert(seq.end(), path.begin(), path.end());
      const auto want = causal_logits(model, seq)[static_cast<std::int64_t>(seq.size()) - 1];
      EXPECT_TRUE(at::allclose(logits[i], want, tol, tol)) << "node " << i << " dtype " << dtype;
    }
  }
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
        EXPECT_TRUE(at::allclose(got, want, 1e-10, 1e-10))
            << "kind " << kind << " trial " << trial << " sequence " << b << ": max difference " << (got - want).abs().max().item<double>();
      }
      EXPECT_TRUE(at::equal(a, p)) << "paged and contiguous stores give different logits";
    }
  }
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
    prefill(
        model, store,
        {std::vector<Token>(prefixes[0].begin(), prefixes[0].end() - 1), std::vector<Token>(prefixes[1].begin(), prefixes[1].end() - 1)});
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
    LookaheadDrafter d({.window = 3 - static_cast<std::size_t>(b), .ngram = 4});
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
        if (aux[u].attends(j, k))
          chain.emplace_back(aux[u].offset[static_cast<std::size_t>(k - 1)], aux[u].tokens[static_cast<std::size_t>(k - 1)]);
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
    EXPECT_EQ(packed.linear_kernel(), kernel == LinearKernel::kOneDnn ? LinearKernel::kOneDnn : LinearKernel::kStream);
    EXPECT_NE(packed.linear_path().find(linear_kernel_name(kernel)), std::string::npos) << packed.linear_path();
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

// Each of the streaming kernel's tile sets that runs here, in both formats (the sets above this
// CPU or REFDEC_CPU_ISA's cap named in the skip).
void expect_stream_layers_match_aten(at::ScalarType dtype) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, dtype);
  const HalfFormat format = dtype == at::kHalf ? HalfFormat::kFp16 : HalfFormat::kBf16;
  std::string not_run;
  for (const LinearKernel k : {LinearKernel::kAvx2, LinearKernel::kAvx512, LinearKernel::kAvx512Fp16, LinearKernel::kAvx512Bf16}) {
    const StreamTiles t = k == LinearKernel::kAvx2         ? StreamTiles::kAvx2
                          : k == LinearKernel::kAvx512     ? StreamTiles::kAvx512
                          : k == LinearKernel::kAvx512Fp16 ? StreamTiles::kAvx512Fp16
                                                           : StreamTiles::kAvx512Bf16;
    if (t >= StreamTiles::kAvx512Fp16 && format == HalfFormat::kFp16) continue;  // bf16 weights only
    if (const std::string why = StreamLinear::unavailable(t, format); !why.empty()) {
      not_run += (not_run.empty() ? "" : "; ") + why;
      refdec_test::expect_error([&] { (void)LlamaModel::random(refdec_test::attention_kind_config(0), 1, dtype, at::kCPU, k); }, why);
      continue;
    }
    expect_packed_model_matches_aten(k, dtype);
  }
  if (!not_run.empty()) GTEST_SKIP() << "tile sets not run on this CPU: " << not_run;
}

TEST(LlamaModel, StreamLayersMatchAtLinearInBf16) { expect_stream_layers_match_aten(at::kBFloat16); }

TEST(LlamaModel, StreamLayersMatchAtLinearInFp16) { expect_stream_layers_match_aten(at::kHalf); }

// kAuto and kPacked measure the kernels this CPU runs (or take the choice given) and say why; a
// kernel that cannot run is an error naming what the CPU lacks and the alternatives; float32
// weights stay on at::linear.
TEST(LlamaModel, ChoosesItsLinearKernelByMeasurementOrTheChoiceGiven) {
  const auto config = refdec_test::attention_kind_config(0);
  const auto fp32 = LlamaModel::random(config, 1, at::kFloat);
  EXPECT_EQ(fp32.linear_kernel(), LinearKernel::kAten);
  EXPECT_NE(fp32.linear_path().find("bf16 or fp16"), std::string::npos) << fp32.linear_path();
  refdec_test::expect_error([&] { (void)LlamaModel::random(config, 1, at::kFloat, at::kCPU, LinearKernel::kPacked); },
                            "LinearKernel \"packed\" cannot run");
  refdec_test::expect_error([&] { (void)LlamaModel::random(config, 1, at::kFloat, at::kCPU, LinearKernel::kAvx2); },
                            "LinearKernel \"avx2\" cannot run");
  for (const LinearKernel k : kAllLinearKernels) EXPECT_EQ(parse_linear_kernel(linear_kernel_name(k)), k);
  refdec_test::expect_error([] { (void)parse_linear_kernel("mkl"); }, "unknown linear kernel 'mkl'");
  EXPECT_EQ(LinearChoice::parse("onednn").backend, PackedBackend::kOneDnn);
  EXPECT_EQ(LinearChoice::parse("stream (avx2 for 1-3 rows, avx512 from 4 rows)").describe(),
            "stream (avx2 for 1-3 rows, avx512 from 4 rows)");
  EXPECT_EQ(LinearChoice::parse("stream (the widest tiles here)").tiles, TilesByRows());
  refdec_test::expect_error([] { (void)LinearChoice::parse("mkl"); }, "'mkl' is neither \"onednn\" nor \"stream (...)\"");
  refdec_test::expect_error([] { (void)LinearChoice::parse("stream (avx2 for 1-3 rows)"); }, "must reach every larger row count");
  const std::string onednn_why = packed_backend_unavailable(PackedBackend::kOneDnn, at::kBFloat16);
  if (!onednn_why.empty())
    refdec_test::expect_error([&] { (void)LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kOneDnn); },
                              "use LinearKernel::kAuto (the fastest that runs) or kAten");
  const auto candidates = linear_candidates_here(at::kBFloat16);
  const auto automatic = LlamaModel::random(config, 1, at::kBFloat16);
  if (candidates.empty()) {
    EXPECT_EQ(automatic.linear_kernel(), LinearKernel::kAten) << automatic.linear_path();
    GTEST_SKIP() << "no packed kernel runs here (" << cpu_isa().describe() << "): kAuto keeps at::linear";
  }
  const LinearChoice& chosen = automatic.linear_choice();
  EXPECT_EQ(automatic.linear_kernel(), chosen.backend == PackedBackend::kOneDnn ? LinearKernel::kOneDnn : LinearKernel::kStream);
  EXPECT_EQ(automatic.linear_path().find(chosen.describe()), 0u) << automatic.linear_path();
  const bool measured = automatic.linear_path().find("measured: one layer's products at 1/2/4/8/16/32 rows") != std::string::npos;
  EXPECT_EQ(measured, candidates.size() > 1) << automatic.linear_path();
  // The default measurement leaves out the fp16 tiles; stream-fp16 measures them too.
  EXPECT_EQ(automatic.linear_path().find("avx512-fp16"), std::string::npos) << automatic.linear_path();
  if (StreamLinear::unavailable(StreamTiles::kAvx512Fp16, HalfFormat::kBf16).empty() &&
      packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16).empty()) {
    const auto fp16 = LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kStreamFp16);
    EXPECT_EQ(fp16.linear_kernel(), LinearKernel::kStream);
    EXPECT_NE(fp16.linear_path().find("avx512-fp16 "), std::string::npos) << fp16.linear_path();
  }
  // A second model of the same shapes takes the process's calibration: the same choice.
  const auto again = LlamaModel::random(config, 2, at::kBFloat16, at::kCPU, LinearKernel::kPacked);
  EXPECT_EQ(again.linear_choice().backend, chosen.backend);
  EXPECT_EQ(again.linear_choice().tiles, chosen.tiles);
  // A choice given is taken as it is, and one that cannot run here is refused.
  LinearChoice given{PackedBackend::kStream, TilesByRows(StreamTiles::kAvx2), ""};
  const auto injected = LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kAuto, given);
  EXPECT_EQ(injected.linear_kernel(), LinearKernel::kStream);
  EXPECT_EQ(injected.linear_path(), "stream (avx2 for every row count) (given)");
  // The measured choice kept as text and given back: the same kernels, nothing measured.
  const LinearChoice read = LinearChoice::parse(chosen.describe());
  EXPECT_EQ(read.backend, chosen.backend);
  EXPECT_EQ(read.tiles, chosen.tiles);
  const auto from_text = LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kAuto, read);
  EXPECT_EQ(from_text.linear_path(), chosen.describe() + " (given)");
  const std::vector<Token> tokens{1, 5, 9, 2, 7};
  EXPECT_TRUE(at::equal(causal_logits(from_text, tokens), causal_logits(automatic, tokens))) << chosen.describe();
  // A kernel named outright ignores the choice; one the request excludes is refused.
  const auto named = LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kAvx2,
                                        LinearChoice{PackedBackend::kStream, TilesByRows(StreamLinear::widest(HalfFormat::kBf16)), ""});
  EXPECT_EQ(named.linear_choice().tiles, TilesByRows(StreamTiles::kAvx2));
  if (onednn_why.empty())
    refdec_test::expect_error(
        [&] {
          (void)LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kStream, LinearChoice{PackedBackend::kOneDnn, {}, ""});
        },
        "does not run CPUBFloat16Type weights here under LinearKernel \"stream\"");
  for (const StreamTiles t : kAllStreamTiles) {
    if (StreamLinear::unavailable(t, HalfFormat::kBf16).empty()) continue;
    refdec_test::expect_error(
        [&] {
          (void)LlamaModel::random(config, 1, at::kBFloat16, at::kCPU, LinearKernel::kAuto,
                                   LinearChoice{PackedBackend::kStream, TilesByRows(t), ""});
        },
        "does not run");
  }
}

}  // namespace
