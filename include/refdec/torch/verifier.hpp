// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One verification step for a batch: draft trees -> model inputs -> one forward pass -> greedy or
// sampled acceptance per sequence -> KV commit of the accepted paths.

#include <ATen/ATen.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/sampled_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/torch/kv_cache.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/node_draws.hpp"

REFDEC_NAMESPACE_BEGIN

/// Model inputs of one step for B sequences, padded to a common node count T.
struct StepInputs {
  at::Tensor ids;        // [B, T] int64 node tokens (padding: 0)
  at::Tensor positions;  // [B, T] int64 cache length + node depth
  at::Tensor mask;       // [B, T, S] bool, S = max cache length + T
};

/// Builds the inputs that verify `trees[b]` after `lengths[b]` cached tokens, followed by the
/// auxiliary tokens `aux[b]` (empty `aux`: none). A node sees the cached prefix, itself and its
/// ancestors; an auxiliary token sees the prefix, itself and what its block lists (AuxBlock); a
/// padding row sees only its own slot, so that its softmax stays finite.
inline StepInputs build_step_inputs(std::span<const LinearTree> trees, std::span<const std::int64_t> lengths,
                                    std::span<const AuxBlock> aux = {}) {
  TORCH_CHECK(!trees.empty() && trees.size() == lengths.size(), "build_step_inputs: ", trees.size(), " trees for ",
              lengths.size(), " sequences");
  TORCH_CHECK(aux.empty() || aux.size() == trees.size(), "build_step_inputs: ", aux.size(), " auxiliary blocks for ",
              trees.size(), " sequences");
  const auto B = static_cast<std::int64_t>(trees.size());
  const auto aux_size = [&](std::size_t b) -> std::int64_t { return aux.empty() ? 0 : aux[b].size(); };
  std::int64_t T = 0, max_len = 0;
  for (std::size_t b = 0; b < trees.size(); ++b) {
    T = std::max<std::int64_t>(T, trees[b].size() + aux_size(b));
    max_len = std::max(max_len, lengths[b]);
  }
  const std::int64_t S = max_len + T;
  auto ids = at::zeros({B, T}, at::kLong);
  auto pos = at::zeros({B, T}, at::kLong);
  auto mask = at::zeros({B, T, S}, at::kBool);
  auto* id = ids.data_ptr<std::int64_t>();
  auto* ps = pos.data_ptr<std::int64_t>();
  auto* mk = mask.data_ptr<bool>();
  for (std::int64_t b = 0; b < B; ++b) {
    const LinearTree& tree = trees[static_cast<std::size_t>(b)];
    const std::int64_t len = lengths[static_cast<std::size_t>(b)];
    const std::int64_t nodes = tree.size();
    for (std::int64_t t = 0; t < T; ++t) {
      bool* row = mk + (b * T + t) * S;
      if (t >= nodes + aux_size(static_cast<std::size_t>(b))) {
        ps[b * T + t] = len;
        row[len + t] = true;
        continue;
      }
      std::fill(row, row + len, true);
      row[len + t] = true;
      if (t >= nodes) {
        const AuxBlock& block = aux[static_cast<std::size_t>(b)];
        const auto j = static_cast<std::int32_t>(t - nodes);
        id[b * T + t] = block.tokens[static_cast<std::size_t>(j)];
        ps[b * T + t] = len + block.offset[static_cast<std::size_t>(j)];
        for (const std::int32_t k : block.row(j)) row[len + (k == 0 ? 0 : nodes + k - 1)] = true;
        continue;
      }
      id[b * T + t] = tree.tokens[static_cast<std::size_t>(t)];
      ps[b * T + t] = len + tree.depth[static_cast<std::size_t>(t)];
      const std::uint64_t* bits = &tree.mask[static_cast<std::size_t>(t * tree.mask_words)];
      for (std::int32_t w = 0; w < tree.mask_words; ++w)
        for (std::uint64_t word = bits[w]; word != 0; word &= word - 1)
          row[len + w * 64 + std::countr_zero(word)] = true;
    }
  }
  return {ids, pos, mask};
}

/// Wall time of the parts of a step, in seconds.
struct StepTimes {
  double model = 0;   ///< input building, forward pass, argmax and its copy to the host
  double accept = 0;  ///< tree walks
  double commit = 0;  ///< KV cache compaction
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
/// sequence.
struct StepExtras {
  std::span<const std::uint8_t> active;                  ///< 0: a finished sequence's padding row
  std::span<const AuxBlock> aux;                         ///< auxiliary tokens riding in the pass
  std::span<std::vector<Token>> aux_choices;             ///< out: the target's greedy choices at them
  std::span<std::optional<SequenceSampling>> sampling;   ///< unset: greedy acceptance
  SamplingPath sampling_path = SamplingPath::kAuto;      ///< where sampled rows are processed
};

/// Verifies `trees`: one forward pass, then for each sequence the accepted path and the bonus
/// token (written to `out[b]`), greedily or by sample-then-match with the sequence's sampling
/// settings, then commits the accepted path (root included) in `cache`. Nothing is accepted or
/// committed for inactive rows. Auxiliary tokens always get the greedy choice (the lookahead
/// window stays greedy while verification samples).
template <CausalLM M>
void verify(const M& model, KvCache& cache, std::span<const LinearTree> trees, std::span<Acceptance> out,
            StepTimes& times, const StepExtras& extras = {}) {
  using Clock = std::chrono::steady_clock;
  const auto B = trees.size();
  TORCH_CHECK(out.size() == B && (extras.active.empty() || extras.active.size() == B) &&
                  (extras.aux.empty() || extras.aux.size() == B) && extras.aux_choices.size() == extras.aux.size() &&
                  (extras.sampling.empty() || extras.sampling.size() == B),
              "verify: per-sequence inputs do not match the ", B, " trees");
  const auto t0 = Clock::now();
  const StepInputs in = build_step_inputs(trees, cache.lengths(), extras.aux);
  const at::Tensor logits = model.forward(in.ids, in.positions, in.mask, cache);  // [B, T, vocab]
  const at::Tensor target = logits.argmax(-1).to(at::kCPU, at::kInt).contiguous();  // [B, T] int32
  const auto t1 = Clock::now();
  const std::int64_t T = target.size(1);
  const auto V = static_cast<std::int32_t>(logits.size(2));
  const auto* tp = target.data_ptr<std::int32_t>();
  std::vector<std::vector<std::int32_t>> kept(B);
  // The tensor path draws at every node of every sampled sequence in one go; greedy and inactive
  // rows ride along as temperature 0 (their draws are not used).
  const bool any_sampled = std::any_of(extras.sampling.begin(), extras.sampling.end(),
                                       [](const std::optional<SequenceSampling>& x) { return x.has_value(); });
  const bool tensor_path = any_sampled && (extras.sampling_path == SamplingPath::kTensor ||
                                           (extras.sampling_path == SamplingPath::kAuto && logits.is_cuda()));
  at::Tensor draws;  // [B, T] int32 on the host, tensor path only
  if (tensor_path) {
    std::vector<SamplingRow> rows(B);
    for (std::size_t b = 0; b < B; ++b) {
      if (extras.sampling[b] && (extras.active.empty() || extras.active[b] != 0)) {
        const SequenceSampling& s = *extras.sampling[b];
        TORCH_CHECK(!s.processor.options().has_penalties() || s.device_counts.output_count.defined(),
                    "verify: sequence ", b, " has penalties but no device counts for the tensor sampling path");
        rows[b] = SamplingRow{s.processor.options(), s.device_counts, s.generated};
      } else {
        rows[b].options.temperature = 0.0f;
      }
    }
    draws = node_draws(logits, trees, rows).contiguous();
  }
  for (std::size_t b = 0; b < B; ++b) {
    if (!extras.active.empty() && extras.active[b] == 0) continue;
    const auto nodes = static_cast<std::int64_t>(trees[b].size());
    if (tensor_path && extras.sampling[b].has_value()) {
      greedy_accept(trees[b], std::span<const Token>(draws.data_ptr<std::int32_t>() + static_cast<std::int64_t>(b) * draws.size(1),
                                                     static_cast<std::size_t>(nodes)),
                    out[b]);
    } else if (!extras.sampling.empty() && extras.sampling[b].has_value()) {
      SequenceSampling& s = *extras.sampling[b];
      // On a float CPU model this is a view of `logits` (processed in place, never read again);
      // otherwise the step's one copy of the tree's rows to the host.
      at::Tensor rows = logits[static_cast<std::int64_t>(b)].slice(0, 0, nodes).to(at::kCPU, at::kFloat).contiguous();
      sampled_accept_lazy(trees[b], std::span<float>(rows.data_ptr<float>(), static_cast<std::size_t>(nodes * V)), V,
                          s.processor, s.counts, s.generated, out[b]);
    } else {
      greedy_accept(trees[b], std::span<const Token>(tp + static_cast<std::int64_t>(b) * T, static_cast<std::size_t>(nodes)), out[b]);
    }
    kept[b].push_back(0);
    kept[b].insert(kept[b].end(), out[b].nodes.begin(), out[b].nodes.end());
    if (!extras.aux.empty()) {
      const Token* first = tp + static_cast<std::int64_t>(b) * T + nodes;
      extras.aux_choices[b].assign(first, first + extras.aux[b].size());
    }
  }
  const auto t2 = Clock::now();
  cache.commit(kept);
  const auto t3 = Clock::now();
  times.model += std::chrono::duration<double>(t1 - t0).count();
  times.accept += std::chrono::duration<double>(t2 - t1).count();
  times.commit += std::chrono::duration<double>(t3 - t2).count();
}

REFDEC_NAMESPACE_END
