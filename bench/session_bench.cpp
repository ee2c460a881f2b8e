// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The Session step's own work, everything but the model: drafting (LLMA over a 4K-token context,
// 64-node trees), the step plan, the walk, the keep plan and the KV commit, at batch 1, 16 and 64.
// The model is a stand-in whose forward only begins the store's step and returns fixed logits
// (vocabulary 2000, so the argmax and its copy to the host stay small). Beside it, the dense
// [B, T, S] mask the verifier built before step plans existed, for the same plans.

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "refdec/core/step_plan.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "refdec/torch/session.hpp"
#include "synthetic_text.hpp"

namespace {

using namespace refdec;

constexpr std::int64_t kVocab = 2000;
constexpr std::size_t kContext = 4096;
constexpr std::int64_t kMaxNew = 2048;

// A CausalLM that does no model work: the logits of a row are row (position mod 4096) of a fixed
// table whose argmax is a Zipf-distributed word, as in the prompts, so the target's choices look
// like text to the drafters (they find matches and propose full trees, few drafts are accepted),
// and cost a gather, not a forward pass.
class NullModel {
 public:
  NullModel() : table_(at::rand({kTableRows, kVocab}, at::kFloat)) {
    const auto words = refdec_bench::make_text(kTableRows, {}, 7, kVocab);  // [4096] Zipf words
    for (std::int64_t r = 0; r < kTableRows; ++r) table_[r][words[static_cast<std::size_t>(r)]] = 2.0f;
  }
  template <KvStore S>
  at::Tensor forward(const StepPlan& plan, S& store) const {
    store.begin_step(plan);
    const auto rows = at::tensor(at::ArrayRef<std::int64_t>(plan.positions), at::kLong).remainder(kTableRows);
    return table_.index_select(0, rows);  // [R, vocab]
  }
  KvLayout kv_layout() const { return {1, 1, 8, at::TensorOptions().dtype(at::kFloat)}; }
  std::int64_t vocab_size() const { return kVocab; }
  std::int64_t max_seq_len() const { return 1 << 20; }
  at::Device device() const { return at::kCPU; }

 private:
  static constexpr std::int64_t kTableRows = 4096;
  at::Tensor table_;  // [4096, vocab] float32
};
static_assert(CausalLM<NullModel, ContiguousKvStore>);
static_assert(CausalLM<NullModel, PagedKvStore>);

const NullModel& null_model() {
  static const NullModel model;
  return model;
}

// A session of `batch` requests, each with its own 4K-token synthetic prompt, prefilled (one
// request per step, so that no step holds more than one prompt).
Session<NullModel, ContiguousKvStore> make_session(std::int64_t batch) {
  GenerateOptions options;
  options.limits.budget = 64;
  options.limits.max_new_tokens = kMaxNew;
  Session session(null_model(), ContiguousKvStore(null_model().kv_layout(), static_cast<std::int64_t>(kContext) + kMaxNew + 128), options);
  for (std::int64_t b = 0; b < batch; ++b) {
    Request r;
    r.prompt = refdec_bench::make_text(kContext, {}, 100 + static_cast<std::uint32_t>(b), kVocab);
    session.add(r, AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 32, .spans = 8, .self_reference = true})));
    session.step();
  }
  return session;
}

// Seconds spent in each part of the steps since `from`.
struct Parts {
  double draft = 0, plan = 0, model = 0, accept = 0, commit = 0;
  void add(const GenerateStats& now, const GenerateStats& from) {
    draft += now.draft_seconds - from.draft_seconds;
    plan += now.verify.plan - from.verify.plan;
    model += now.verify.model - from.verify.model;
    accept += now.verify.accept - from.verify.accept;
    commit += now.verify.commit - from.verify.commit;
  }
};

// One Session step of `batch` requests (drafting, plan, stand-in forward, walk, keep plan, KV
// commit, drafters told); counters split it into its parts, in µs per step (accept: the walks,
// the keep plan and the drafters' accept()).
void BM_SessionStep(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  auto session = make_session(batch);
  GenerateStats from = session.stats();
  Parts parts;
  std::int64_t rows = 0;
  for (auto _ : state) {
    if (session.active() < batch) {  // requests that reached their limit start over
      state.PauseTiming();
      parts.add(session.stats(), from);
      session = make_session(batch);
      from = session.stats();
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(session.step().data());
    rows += session.last_plan().rows();
  }
  parts.add(session.stats(), from);
  const double steps = static_cast<double>(state.iterations());
  state.counters["rows_per_step"] = static_cast<double>(rows) / steps;
  state.counters["draft_us"] = 1e6 * parts.draft / steps;
  state.counters["plan_us"] = 1e6 * parts.plan / steps;
  state.counters["model_us"] = 1e6 * parts.model / steps;
  state.counters["accept_us"] = 1e6 * parts.accept / steps;
  state.counters["commit_us"] = 1e6 * parts.commit / steps;
}
BENCHMARK(BM_SessionStep)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

// The dense [B, T, S] mask (S = longest cache + T, padded to the longest tree) and the padded ids
// and positions that the verifier built from the same trees before step plans.
void dense_inputs(const StepPlan& plan, at::Tensor& ids, at::Tensor& pos, at::Tensor& mask) {
  const std::int64_t B = plan.batch();
  std::int64_t T = 0, max_len = 0;
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    T = std::max<std::int64_t>(T, plan.rows(b));
    max_len = std::max(max_len, plan.lengths[static_cast<std::size_t>(b)]);
  }
  const std::int64_t S = max_len + T;
  ids = at::zeros({B, T}, at::kLong);
  pos = at::zeros({B, T}, at::kLong);
  mask = at::zeros({B, T, S}, at::kBool);
  auto* id = ids.data_ptr<std::int64_t>();
  auto* ps = pos.data_ptr<std::int64_t>();
  auto* mk = mask.data_ptr<bool>();
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    const std::int64_t len = plan.lengths[static_cast<std::size_t>(b)], n = plan.rows(b);
    for (std::int64_t t = 0; t < T; ++t) {
      bool* row = mk + (b * T + t) * S;
      row[len + t] = true;
      if (t >= n) continue;
      std::fill(row, row + len, true);
      const auto r = static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + t);
      id[b * T + t] = plan.tokens[r];
      ps[b * T + t] = plan.positions[r];
      for (std::int64_t j = 0; j < n; ++j)
        if (plan.sees(b, static_cast<std::int32_t>(t), static_cast<std::int32_t>(j))) row[len + j] = true;
    }
  }
}

void BM_DenseMaskBuild(benchmark::State& state) {
  auto session = make_session(state.range(0));
  session.step();
  const StepPlan plan = session.last_plan();
  at::Tensor ids, pos, mask;
  for (auto _ : state) {
    dense_inputs(plan, ids, pos, mask);
    benchmark::DoNotOptimize(mask.data_ptr<bool>());
  }
  state.counters["mask_MB"] = static_cast<double>(mask.numel()) / 1e6;
}
BENCHMARK(BM_DenseMaskBuild)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

// The step plan alone, from the same trees (what BM_SessionStep's plan_us measures inside).
void BM_PlanStep(benchmark::State& state) {
  auto session = make_session(state.range(0));
  session.step();
  const StepPlan captured = session.last_plan();
  // Rebuild the trees of the captured plan: chains are enough for the plan's cost per row.
  std::vector<LinearTree> trees;
  for (std::int32_t b = 0; b < captured.batch(); ++b) {
    const auto first = captured.tokens.begin() + captured.indptr[static_cast<std::size_t>(b)];
    trees.push_back(LinearTree::chain(std::vector<Token>(first, first + captured.num_nodes[static_cast<std::size_t>(b)])));
  }
  StepPlan plan;
  for (auto _ : state) {
    plan_step(trees, {}, captured.lengths, kVocab, plan);
    benchmark::DoNotOptimize(plan.mask.data());
  }
}
BENCHMARK(BM_PlanStep)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
