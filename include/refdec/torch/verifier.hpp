// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One verification step for a batch: a step plan -> one forward pass -> greedy or sampled
// acceptance per sequence -> the keep plan. verify() commits nothing: the caller applies the keep
// plan to its KV store (or does not, for a step that is only timed).

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/sampled_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/node_draws.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Wall time of the parts of a step, in seconds.
struct StepTimes {
  double plan = 0;    ///< building the step plan
  double model = 0;   ///< forward pass, argmax and its copy to the host
  double accept = 0;  ///< tree walks and the keep plan
  double commit = 0;  ///< applying the keep plan to the KV store
};

/// The sampling state of one sequence: its processor (settings and scratch), the counts of the
/// tokens it has seen (prompt and output, for the penalties) and how many tokens it has generated
/// (the position of its random stream).
struct SequenceSampling {
  LogitsProcessor processor;
  TokenCounts counts;
  std::uint64_t generated = 0;
  DeviceTokenCounts device_counts;  ///< the counts on the model's device, for the tensor path (else undefined)

  /// Counts tokens the sequence appended, on the host and, when kept, on the device.
  void add_output(std::span<const Token> tokens) {
    counts.add_output(tokens);
    if (device_counts.output_count.defined()) device_counts.add_output(tokens);
    generated += tokens.size();
  }
};

/// Where sampled acceptance processes the logits.
enum class SamplingPath {
  kAuto,    ///< tensor ops where the logits are on a GPU, the host elsewhere
  kHost,    ///< copy the tree's logits to the host, process the rows the walk visits (sampled_accept_lazy)
  kTensor,  ///< every node's draw by tensor ops on the logits' device (node_draws), then the greedy walk
};

/// Optional per-sequence parts of a verification step; each span is empty or has one entry per
/// sequence of the plan.
struct StepExtras {
  std::span<std::optional<SequenceSampling>> sampling = {};  ///< unset: greedy acceptance
  /// 1: the sequence's tree is a chain of forced tokens (a prompt being prefilled): every row is
  /// kept and nothing is walked or emitted.
  std::span<const std::uint8_t> prefill = {};
  SamplingPath sampling_path = SamplingPath::kAuto;  ///< where sampled rows are processed
};

/// What a verification step decided, per sequence of the plan.
struct Verification {
  std::vector<Acceptance> accepted;             ///< [B] accepted nodes and tokens (bonus last; no tokens for a prefill)
  KeepPlan keep;                                ///< the KV entries to keep: root, then the accepted nodes
  std::vector<std::vector<Token>> aux_choices;  ///< [B] the target's greedy choice at each auxiliary row
};

namespace torch_detail {
// The LinearTree of sequence b of a plan (the tensor sampling path reads parents and depths).
inline LinearTree plan_tree(const StepPlan& plan, std::int32_t b) {
  const TreeView view = plan.tree(b);
  std::vector<std::int32_t> parent(static_cast<std::size_t>(view.num_nodes), -1);
  for (std::int32_t i = 0; i < view.num_nodes; ++i)
    for (std::int32_t c = view.first_child[i], visits = 0; c >= 0 && c < view.num_nodes && visits < view.num_nodes;
         c = view.next_sibling[c], ++visits)
      parent[static_cast<std::size_t>(c)] = i;
  LinearTree tree;
  for (std::int32_t i = 0; i < view.num_nodes; ++i) tree.add_node(view.tokens[i], parent[static_cast<std::size_t>(i)], 0.0f);
  tree.finish();
  return tree;
}
}  // namespace torch_detail

/// Verifies the step `plan` over `store` (whose sequences are the plan's): one forward pass, then
/// for each sequence the accepted path and the bonus token, greedily or by sample-then-match with
/// the sequence's sampling settings, and the keep plan. Commits nothing: apply `out.keep` with
/// store.commit(). Auxiliary rows always get the greedy choice (the lookahead window stays greedy
/// while verification samples).
template <class M, KvStore S>
requires CausalLM<M, S>
void verify(const M& model, S& store, const StepPlan& plan, Verification& out, StepTimes& times, const StepExtras& extras = {}) {
  using Clock = std::chrono::steady_clock;
  const auto B = static_cast<std::size_t>(plan.batch());
  REFDEC_CHECK((extras.sampling.empty() || extras.sampling.size() == B) && (extras.prefill.empty() || extras.prefill.size() == B),
               "verify: per-sequence inputs do not match the " << B << " sequences of the plan");
  const auto t0 = Clock::now();
  const at::Tensor logits = model.forward(plan, store);                             // [R, vocab]
  const at::Tensor target = logits.argmax(-1).to(at::kCPU, at::kInt).contiguous();  // [R] int32
  const auto t1 = Clock::now();
  const auto V = static_cast<std::int32_t>(logits.size(1));
  const auto* tp = target.data_ptr<std::int32_t>();
  const auto is_prefill = [&](std::size_t b) { return !extras.prefill.empty() && extras.prefill[b] != 0; };
  const auto is_sampled = [&](std::size_t b) { return !extras.sampling.empty() && extras.sampling[b].has_value() && !is_prefill(b); };
  out.accepted.resize(B);
  out.aux_choices.resize(B);
  // The tensor path draws at every node of every sampled sequence in one go; other sequences ride
  // along as temperature 0 (their draws are not used).
  bool any_sampled = false;
  for (std::size_t b = 0; b < B; ++b) any_sampled = any_sampled || is_sampled(b);
  const bool tensor_path = any_sampled && (extras.sampling_path == SamplingPath::kTensor ||
                                           (extras.sampling_path == SamplingPath::kAuto && logits.is_cuda()));
  at::Tensor draws;  // [R] int32 on the host, tensor path only
  if (tensor_path) {
    std::vector<SamplingRow> rows(B);
    std::vector<LinearTree> trees(B);
    for (std::size_t b = 0; b < B; ++b) {
      trees[b] = torch_detail::plan_tree(plan, static_cast<std::int32_t>(b));
      if (is_sampled(b)) {
        const SequenceSampling& s = *extras.sampling[b];
        REFDEC_CHECK(!s.processor.options().has_penalties() || s.device_counts.output_count.defined(),
                     "verify: sequence " << b << " has penalties but no device counts for the tensor sampling path");
        rows[b] = SamplingRow{s.processor.options(), s.device_counts, s.generated};
      } else {
        rows[b].options.temperature = 0.0f;
      }
    }
    draws = node_draws(logits, plan.indptr, trees, rows).contiguous();
  }
  for (std::size_t b = 0; b < B; ++b) {
    const auto bi = static_cast<std::int32_t>(b);
    const std::int32_t first = plan.indptr[b];
    const std::int32_t nodes = plan.num_nodes[b];
    Acceptance& acc = out.accepted[b];
    if (is_prefill(b)) {
      accept_all(plan.tree(bi), acc);
    } else if (tensor_path && is_sampled(b)) {
      accept(plan.tree(bi), ChoiceArray{draws.data_ptr<std::int32_t>() + first}, acc);
    } else if (is_sampled(b)) {
      SequenceSampling& s = *extras.sampling[b];
      // On a float CPU model this is a view of `logits` (processed in place, never read again);
      // otherwise the step's one copy of the tree's rows to the host.
      at::Tensor rows = logits.slice(0, first, first + nodes).to(at::kCPU, at::kFloat).contiguous();
      sampled_accept_lazy(plan.tree(bi),
                          std::span<float>(rows.data_ptr<float>(), static_cast<std::size_t>(nodes) * static_cast<std::size_t>(V)), V,
                          s.processor, s.counts, s.generated, acc);
    } else {
      accept(plan.tree(bi), ChoiceArray{tp + first}, acc);
    }
    out.aux_choices[b].assign(tp + first + nodes, tp + plan.indptr[b + 1]);
  }
  keep_accepted(plan, out.accepted, out.keep);
  const auto t2 = Clock::now();
  times.model += std::chrono::duration<double>(t1 - t0).count();
  times.accept += std::chrono::duration<double>(t2 - t1).count();
}

REFDEC_TORCH_NAMESPACE_END
