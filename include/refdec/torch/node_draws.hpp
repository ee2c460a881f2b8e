// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The sampled draw at every node of a batch of draft trees, computed with tensor operations on
// the logits' device (no host loop over the vocabulary), for sample-then-match on a GPU.
//
// In sample-then-match (sampled_accept.hpp) the node at depth d of a sequence that has generated
// g tokens draws with uniform(seed, g + d) from its own processed distribution. The uniform
// depends only on the depth, so every node's draw y can be computed in parallel before the walk,
// and the accepted path is then greedy_walk() with y as the target tokens: the same tokens as
// LogitsProcessor::process_tree() followed by sampled_accept().
//
// Processing follows LogitsProcessor (sampling.hpp) step by step, with the same operation order
// and, in float64 (the default), the same rounding on the CPU: repetition, presence and frequency
// penalties over the sequence's counts plus the node's ancestors; greedy rows take the first
// maximum of the penalised logits; otherwise temperature, top-k (ties with the k-th kept),
// softmax weights exp(z - max), top-p (stable descending sort: ties to the lower id), min-p,
// normalisation, rounding of the probabilities to float, and the inverse CDF of
// sample_from_probs() over ascending token ids, summed in double.
//
// Settings differ per sequence: they become per-row parameter columns ([N, 1]), so one batch of
// tensor operations serves every setting; top-k and top-p run only on the rows that use them
// (index_select / index_copy_ with row lists built on the host).

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// The token statistics the penalties need for one sequence, kept on the logits' device: the
/// device counterpart of TokenCounts. Updating it after a step costs one small host-to-device
/// copy of the accepted tokens and one scatter, never a vocabulary-sized transfer.
struct DeviceTokenCounts {
  at::Tensor in_prompt;     // [vocab] bool: the token occurs in the prompt
  at::Tensor output_count;  // [vocab] int32: occurrences of the token in the output

  /// A copy of `counts` on `device` (work and transfer O(distinct tokens seen)).
  static DeviceTokenCounts from(const TokenCounts& counts, at::Device device) {
    const std::int64_t vocab = counts.vocab_size();
    std::vector<std::int64_t> prompt_ids, output_ids;  // [distinct] tokens in the prompt / output
    std::vector<std::int32_t> output_n;                // [distinct] their output counts
    for (const Token t : counts.present()) {
      if (counts.in_prompt(t)) prompt_ids.push_back(t);
      if (counts.output_count(t) > 0) {
        output_ids.push_back(t);
        output_n.push_back(counts.output_count(t));
      }
    }
    auto prompt = at::zeros({vocab}, at::kBool);
    auto output = at::zeros({vocab}, at::kInt);
    if (!prompt_ids.empty()) prompt.index_fill_(0, at::tensor(at::ArrayRef<std::int64_t>(prompt_ids), at::kLong), true);
    if (!output_ids.empty())
      output.index_copy_(0, at::tensor(at::ArrayRef<std::int64_t>(output_ids), at::kLong),
                         at::tensor(at::ArrayRef<std::int32_t>(output_n), at::kInt));
    return {prompt.to(device), output.to(device)};
  }

  /// Empty counts over `vocab` tokens on `device`.
  static DeviceTokenCounts zeros(std::int64_t vocab, at::Device device) {
    REFDEC_CHECK(vocab > 0, "DeviceTokenCounts: vocabulary size must be > 0, got " << vocab);
    return {at::zeros({vocab}, at::TensorOptions(device).dtype(at::kBool)), at::zeros({vocab}, at::TensorOptions(device).dtype(at::kInt))};
  }

  /// Vocabulary size (0 when undefined).
  std::int64_t vocab_size() const { return output_count.defined() ? output_count.size(0) : 0; }

  /// Counts output tokens (e.g. a step's accepted drafts and bonus token).
  void add_output(std::span<const Token> tokens) {
    if (tokens.empty()) return;
    const std::int64_t vocab = vocab_size();
    for (const Token t : tokens)
      REFDEC_CHECK(t >= 0 && t < vocab, "DeviceTokenCounts: token " << t << " outside the vocabulary [0, " << vocab << ")");
    std::vector<std::int64_t> ids(tokens.begin(), tokens.end());  // [n]
    const auto index = at::tensor(at::ArrayRef<std::int64_t>(ids), at::kLong).to(output_count.device());
    output_count.index_add_(0, index, at::ones({index.size(0)}, output_count.options()));
  }
  /// Counts prompt tokens (seen by the repetition penalty only).
  void add_prompt(std::span<const Token> tokens) {
    if (tokens.empty()) return;
    const std::int64_t vocab = vocab_size();
    for (const Token t : tokens)
      REFDEC_CHECK(t >= 0 && t < vocab, "DeviceTokenCounts: token " << t << " outside the vocabulary [0, " << vocab << ")");
    std::vector<std::int64_t> ids(tokens.begin(), tokens.end());  // [n]
    in_prompt.index_fill_(0, at::tensor(at::ArrayRef<std::int64_t>(ids), at::kLong).to(in_prompt.device()), true);
  }
};

/// The sampling state of one sequence for node_draws(): its settings, its token statistics (may
/// be left undefined when the settings have no penalty) and how many tokens it has generated
/// (the position of its random stream).
struct SamplingRow {
  SamplingOptions options;
  DeviceTokenCounts counts;
  std::uint64_t generated = 0;
};

namespace node_draws_detail {

// The real nodes of a step, flattened on the host: O(nodes x depth) work, never O(vocab).
struct Nodes {
  std::int64_t count = 0;  // N: real nodes
  std::int64_t path = 0;   // D: the longest ancestor path the penalties count (0 without them)
  bool any_penalty = false, any_greedy = false, any_sampled = false;
  std::vector<std::int32_t> depth;  // [N] depth of each real node
};

// Checks every tree and sampling row against the logits' shape and gives their real nodes.
inline Nodes flatten(std::span<const std::int32_t> indptr, std::span<const LinearTree> trees, std::span<const SamplingRow> rows,
                     std::int64_t R, std::int64_t V, at::Device device) {
  const auto B = static_cast<std::int64_t>(trees.size());
  Nodes nodes;
  for (std::int64_t b = 0; b < B; ++b) {
    const LinearTree& tree = trees[static_cast<std::size_t>(b)];
    const SamplingRow& row = rows[static_cast<std::size_t>(b)];
    const std::int64_t first_row = indptr[static_cast<std::size_t>(b)], end_row = indptr[static_cast<std::size_t>(b) + 1];
    REFDEC_CHECK(first_row >= 0 && first_row + tree.size() <= end_row && end_row <= R,
                 "node_draws: tree " << b << " has " << tree.size() << " nodes but rows [" << first_row << ", " << end_row << ") of " << R);
    REFDEC_CHECK(tree.parent.size() == tree.tokens.size(),
                 "node_draws: tree " << b << " has " << tree.parent.size() << " parents for " << tree.size() << " nodes");
    row.options.validate();
    if (row.options.has_penalties()) {
      REFDEC_CHECK(row.counts.in_prompt.defined() && row.counts.output_count.defined() && row.counts.in_prompt.dim() == 1 &&
                       row.counts.in_prompt.size(0) == V && row.counts.vocab_size() == V && row.counts.output_count.dim() == 1 &&
                       row.counts.in_prompt.scalar_type() == at::kBool && row.counts.output_count.scalar_type() == at::kInt &&
                       row.counts.in_prompt.device() == device && row.counts.output_count.device() == device,
                   "node_draws: sequence " << b << " has penalties but no [" << V << "] bool / int32 token counts on " << device);
      nodes.any_penalty = true;
    }
    if (tree.size() > 0) (row.options.is_greedy() ? nodes.any_greedy : nodes.any_sampled) = true;
    nodes.count += tree.size();
  }
  nodes.depth.reserve(static_cast<std::size_t>(nodes.count));
  for (std::int64_t b = 0; b < B; ++b) {
    const LinearTree& tree = trees[static_cast<std::size_t>(b)];
    const std::size_t first = nodes.depth.size();
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      const std::int32_t p = tree.parent[static_cast<std::size_t>(i)];
      REFDEC_CHECK(i == 0 ? p < 0 : (p >= 0 && p < i),
                   "node_draws: node " << i << " of tree " << b << " has parent " << p << ", which does not precede it");
      const Token t = tree.tokens[static_cast<std::size_t>(i)];
      REFDEC_CHECK(i == 0 || (t >= 0 && t < V),
                   "node_draws: token " << t << " of node " << i << " of tree " << b << " outside the vocabulary [0, " << V << ")");
      nodes.depth.push_back(i == 0 ? 0 : nodes.depth[first + static_cast<std::size_t>(p)] + 1);
      if (nodes.any_penalty) nodes.path = std::max<std::int64_t>(nodes.path, nodes.depth.back());
    }
  }
  return nodes;
}

// Rows of the packed per-node parameters: doubles, then integers followed by the path tokens
// (rows kNumInt + k) and their use (rows kNumInt + D + k).
enum : std::int64_t { kU, kTemperature, kRepetition, kPresence, kFrequency, kTopP, kMinP, kNumReal };
enum : std::int64_t { kGather, kSequence, kTopK, kGreedy, kNumInt };

// The per-node parameters on the device: one host-to-device copy for the doubles, one for the
// integers; the rows that use top-k and top-p.
struct Params {
  at::Tensor real;  // [7, N] float64
  at::Tensor ints;  // [4 + 2D, N] int64
  std::vector<std::int64_t> topk_rows, topp_rows;
  std::int64_t max_k = 0;
};

inline Params pack(const Nodes& nodes, std::span<const std::int32_t> indptr, std::span<const LinearTree> trees,
                   std::span<const SamplingRow> rows, std::int64_t V, at::Device device) {
  const std::int64_t N = nodes.count, D = nodes.path;
  Params params;
  auto real_host = at::empty({kNumReal, N}, at::kDouble);
  auto int_host = at::zeros({kNumInt + 2 * D, N}, at::kLong);
  double* rp = real_host.data_ptr<double>();
  std::int64_t* ip = int_host.data_ptr<std::int64_t>();
  std::int64_t n = 0;
  for (std::size_t b = 0; b < trees.size(); ++b) {
    const LinearTree& tree = trees[b];
    const SamplingOptions& o = rows[b].options;
    const bool greedy = o.is_greedy();
    const bool use_k = !greedy && o.top_k > 0 && o.top_k < V;
    for (std::int32_t i = 0; i < tree.size(); ++i, ++n) {
      const std::int32_t d = nodes.depth[static_cast<std::size_t>(n)];
      rp[kU * N + n] = uniform(o.seed, rows[b].generated + static_cast<std::uint64_t>(d));
      rp[kTemperature * N + n] = greedy ? 1.0 : static_cast<double>(o.temperature);
      rp[kRepetition * N + n] = o.repetition_penalty;
      rp[kPresence * N + n] = o.presence_penalty;
      rp[kFrequency * N + n] = o.frequency_penalty;
      rp[kTopP * N + n] = o.top_p;
      rp[kMinP * N + n] = o.min_p;
      ip[kGather * N + n] = indptr[b] + i;
      ip[kSequence * N + n] = static_cast<std::int64_t>(b);
      ip[kTopK * N + n] = use_k ? o.top_k : 0;
      ip[kGreedy * N + n] = greedy ? 1 : 0;
      if (use_k) {
        params.topk_rows.push_back(n);
        params.max_k = std::max<std::int64_t>(params.max_k, o.top_k);
      }
      if (!greedy && o.top_p < 1.0f) params.topp_rows.push_back(n);
      std::int64_t k = 0;  // the node and its ancestors below the root
      for (std::int32_t j = i; j > 0 && k < D; j = tree.parent[static_cast<std::size_t>(j)], ++k) {
        ip[(kNumInt + k) * N + n] = tree.tokens[static_cast<std::size_t>(j)];
        ip[(kNumInt + D + k) * N + n] = 1;
      }
    }
  }
  params.real = real_host.to(device);
  params.ints = int_host.to(device);
  return params;
}

// A parameter as a column over the nodes: [N, 1] in `compute`.
inline at::Tensor column(const Params& params, std::int64_t which, at::ScalarType compute) {
  return params.real[which].unsqueeze(1).to(compute);
}

// 1-2. Repetition, presence and frequency penalties over the counts plus the node's path.
inline at::Tensor penalise(at::Tensor z, std::span<const SamplingRow> rows, const Params& params, std::int64_t D, std::int64_t V,
                           at::ScalarType compute) {
  const auto dopts = at::TensorOptions(z.device());
  std::vector<at::Tensor> prompt_list, count_list;  // B x [V]
  for (const SamplingRow& row : rows) {
    const bool has = row.options.has_penalties();
    prompt_list.push_back(has ? row.counts.in_prompt : at::zeros({V}, dopts.dtype(at::kBool)));
    count_list.push_back(has ? row.counts.output_count : at::zeros({V}, dopts.dtype(at::kInt)));
  }
  const auto seq = params.ints[kSequence];
  auto out_count = at::stack(count_list).index_select(0, seq);  // [N, V] int32
  if (D > 0) {
    const auto path_tokens = params.ints.slice(0, kNumInt, kNumInt + D).t();                     // [N, D] int64
    const auto path_used = params.ints.slice(0, kNumInt + D, kNumInt + 2 * D).t().to(at::kInt);  // [N, D] int32
    out_count = out_count.scatter_add(1, path_tokens, path_used);                                // unused slots add 0 to token 0
  }
  const auto output_seen = out_count > 0;                                                 // [N, V] bool
  const auto seen = at::stack(prompt_list).index_select(0, seq).logical_or(output_seen);  // [N, V] bool
  const auto rep = column(params, kRepetition, compute);
  z = at::where(seen, at::where(z > 0, z / rep, z * rep), z);
  return at::where(output_seen, z - (column(params, kFrequency, compute) * out_count.to(compute) + column(params, kPresence, compute)), z);
}

// 4-9. The sampled draw of every row of the penalised logits `z` ([N, V] compute).
inline at::Tensor sample(at::Tensor z, const Params& params, std::int64_t V, at::ScalarType compute) {
  const at::Device device = z.device();
  const auto dopts = at::TensorOptions(device);
  const auto vocab_ids = at::arange(V, dopts.dtype(at::kLong)).unsqueeze(0);  // [1, V] int64
  // 4. Temperature (1 on greedy rows).
  z = z / column(params, kTemperature, compute);
  // 5. Top-k on the rows that use it: values below the k-th largest become -inf.
  if (!params.topk_rows.empty()) {
    const auto idx = at::tensor(at::ArrayRef<std::int64_t>(params.topk_rows), at::kLong).to(device);  // [K]
    const auto sub = z.index_select(0, idx);                                                          // [K, V]
    const auto kth = std::get<0>(at::topk(sub, params.max_k, 1)).gather(1, (params.ints[kTopK].index_select(0, idx) - 1).unsqueeze(1));
    z.index_copy_(0, idx, sub.masked_fill(sub < kth, -std::numeric_limits<double>::infinity()));
  }
  // 6. Softmax weights: the most probable token has weight exactly 1.
  auto w = at::exp(z - z.amax(1, /*keepdim=*/true));  // [N, V] compute
  // 7. Top-p on the rows that use it: keep the most probable tokens (stable sort: ties to the
  // lower id) while the mass before them is below top_p of the total, summed in id order.
  if (!params.topp_rows.empty()) {
    const auto idx = at::tensor(at::ArrayRef<std::int64_t>(params.topp_rows), at::kLong).to(device);            // [P]
    const auto sub = w.index_select(0, idx);                                                                    // [P, V]
    const auto mass = column(params, kTopP, compute).index_select(0, idx) * sub.cumsum(1).narrow(1, V - 1, 1);  // [P, 1]
    const auto sorted = at::sort(sub, /*stable=*/true, 1, /*descending=*/true);
    const auto cum = std::get<0>(sorted).cumsum(1);  // [P, V] mass up to and including each rank
    const auto keep_sorted = at::cat({at::ones({idx.size(0), 1}, dopts.dtype(at::kBool)), cum.narrow(1, 0, V - 1) < mass}, 1);
    const auto keep = at::zeros_like(keep_sorted).scatter(1, std::get<1>(sorted), keep_sorted);  // [P, V] bool
    w.index_copy_(0, idx, sub.masked_fill(keep.logical_not(), 0));
  }
  // 8. Min-p relative to the most probable token (weight 1); min_p = 0 drops nothing.
  w = w.masked_fill(w < column(params, kMinP, compute), 0);
  // 9. Probabilities rounded to float as LogitsProcessor stores them, then the inverse CDF of
  // sample_from_probs(): the first token whose cumulative weight (double, id order) exceeds u
  // times the total; the last positive token if rounding leaves none.
  const auto probs = (w / w.cumsum(1).narrow(1, V - 1, 1)).to(at::kFloat).to(at::kDouble);  // [N, V]
  const auto cdf = probs.cumsum(1);                                                         // [N, V] float64
  const auto target = params.real[kU].unsqueeze(1) * cdf.narrow(1, V - 1, 1);               // [N, 1]
  const auto first = (cdf <= target).sum(1);                                                // [N] int64
  const auto last = at::where(probs > 0, vocab_ids, at::full({}, -1, dopts.dtype(at::kLong))).amax(1);
  return at::where(first >= V, last, first);
}

}  // namespace node_draws_detail

/// The draw of every node of `trees` (one per sequence; a tree may be empty) from its processed
/// distribution with uniform(seed, generated + depth), over packed logits: node i of tree b is row
/// indptr[b] + i of `logits` (a step plan's rows). Returns `[R] int32` on the CPU, -1 in rows that
/// are no tree node (auxiliary rows, gaps). `compute` is the floating type of the processing:
/// at::kDouble (default) matches LogitsProcessor bit for bit on the CPU; at::kFloat halves the
/// memory traffic and may move a draw near a boundary of the inverse CDF or a top-p / top-k /
/// argmax tie. Throws on a NaN or infinite logit at a real node, on invalid settings, and on a
/// malformed tree.
inline at::Tensor node_draws(const at::Tensor& logits,              // [R, vocab] floating, any device
                             std::span<const std::int32_t> indptr,  // [B + 1] first row of each tree
                             std::span<const LinearTree> trees, std::span<const SamplingRow> rows, at::ScalarType compute = at::kDouble) {
  using namespace node_draws_detail;
  REFDEC_CHECK(logits.dim() == 2 && at::isFloatingType(logits.scalar_type()),
               "node_draws: logits must be a [rows, vocab] floating tensor, got " << logits.sizes() << " " << logits.scalar_type());
  REFDEC_CHECK(compute == at::kDouble || compute == at::kFloat, "node_draws: compute type must be float or double, got " << compute);
  const auto B = static_cast<std::int64_t>(trees.size());
  const std::int64_t R = logits.size(0), V = logits.size(1);
  REFDEC_CHECK(
      static_cast<std::int64_t>(rows.size()) == B && static_cast<std::int64_t>(indptr.size()) == B + 1,
      "node_draws: " << trees.size() << " trees, " << rows.size() << " sampling rows and " << indptr.size() << " row offsets do not match");
  REFDEC_CHECK(V > 0 && V <= std::numeric_limits<std::int32_t>::max(), "node_draws: vocabulary size " << V);
  const at::Device device = logits.device();
  const Nodes nodes = flatten(indptr, trees, rows, R, V, device);
  if (nodes.count == 0) return at::full({R}, -1, at::kInt);
  const Params params = pack(nodes, indptr, trees, rows, V, device);
  const auto dopts = at::TensorOptions(device);

  const auto raw = logits.index_select(0, params.ints[kGather]);  // [N, V] logits' type
  const auto finite = at::isfinite(raw).all(1);                   // [N] bool
  auto z = raw.to(compute);                                       // [N, V] compute
  if (nodes.any_penalty) z = penalise(z, rows, params, nodes.path, V, compute);
  at::Tensor draws;  // [N] int64
  // 3. Greedy rows: the first maximum of the penalised logits.
  if (nodes.any_greedy) {
    const auto vocab_ids = at::arange(V, dopts.dtype(at::kLong)).unsqueeze(0);  // [1, V] int64
    draws = at::where(z == z.amax(1, /*keepdim=*/true), vocab_ids, at::full({}, V, dopts.dtype(at::kLong))).amin(1);
  }
  if (nodes.any_sampled) {
    const auto sampled = sample(z, params, V, compute);
    draws = nodes.any_greedy ? at::where(params.ints[kGreedy] != 0, draws, sampled) : sampled;
  }
  // -2 marks a real node with a non-finite logit (checked on the host after the one copy back).
  draws = at::where(finite, draws, at::full({}, -2, dopts.dtype(at::kLong)));
  const auto out = at::full({R}, -1, dopts.dtype(at::kInt)).index_copy_(0, params.ints[kGather], draws.to(at::kInt)).to(at::kCPU);  // [R]
  const auto* op = out.data_ptr<std::int32_t>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < trees[static_cast<std::size_t>(b)].size(); ++i)
      REFDEC_CHECK(op[indptr[static_cast<std::size_t>(b)] + i] != -2,
                   "node_draws: a logit of node " << i << " of sequence " << b << " is not finite");
  return out;
}

/// node_draws() over padded logits: node i of tree b is row [b, i]. Returns `[B, T] int32` on the
/// CPU, -1 in padding rows.
inline at::Tensor node_draws(const at::Tensor& logits,  // [B, T, vocab] floating, any device
                             std::span<const LinearTree> trees, std::span<const SamplingRow> rows, at::ScalarType compute = at::kDouble) {
  REFDEC_CHECK(logits.dim() == 3, "node_draws: logits must be a [B, T, vocab] floating tensor, got " << logits.sizes());
  const std::int64_t B = logits.size(0), T = logits.size(1);
  REFDEC_CHECK(static_cast<std::int64_t>(trees.size()) == B, "node_draws: " << trees.size() << " trees for a batch of " << B);
  std::vector<std::int32_t> indptr;  // [B + 1]
  for (std::int64_t b = 0; b <= B; ++b) indptr.push_back(static_cast<std::int32_t>(b * T));
  return node_draws(logits.reshape({B * T, logits.size(2)}), indptr, trees, rows, compute).view({B, T});
}

REFDEC_TORCH_NAMESPACE_END
