// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Sampled acceptance over a draft tree of deterministic drafts (sample-then-match): the output
// has exactly the law of plain sampling from the same processed distributions.

#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/walk.hpp"

REFDEC_NAMESPACE_BEGIN

/// Sample-then-match's choice at a node: a draw from the node's row of `probs` with
/// uniform(seed, generated + depth), the uniform plain sampling uses for that output position.
/// Fresh randomness per level, and the same tokens as plain sampling for the same seed.
struct SampledChoice {
  const float* probs;  // [num_nodes, vocab]
  std::int32_t vocab;
  std::uint64_t seed;
  std::uint64_t generated;
  REFDEC_HOST_DEVICE Token operator()(std::int32_t node, std::int32_t depth) const {
    return sample_from_probs(probs + static_cast<std::int64_t>(node) * vocab, vocab,
                             uniform(seed, generated + static_cast<std::uint64_t>(depth)));
  }
};

/// Sample-then-match over raw arrays (walk() with SampledChoice): descends to the child carrying
/// the draw, or stops with it as the bonus token (at a leaf the draw is always the bonus). Writes
/// the accepted draft nodes into `path` (room for num_nodes - 1 entries), the bonus into `*bonus`
/// (-1 if a visited row has no positive weight) and returns the accepted count.
REFDEC_HOST_DEVICE std::int32_t sampled_walk(const Token* tokens,               // [num_nodes]
                                             const std::int32_t* first_child,   // [num_nodes]
                                             const std::int32_t* next_sibling,  // [num_nodes]
                                             const float* probs,                // [num_nodes, vocab]
                                             std::int32_t vocab, std::int32_t num_nodes, std::uint64_t seed, std::uint64_t generated,
                                             std::int32_t* path, Token* bonus) {
  SampledChoice choose{probs, vocab, seed, generated};
  return walk(TreeView{tokens, first_child, next_sibling, num_nodes}, choose, path, *bonus);
}

/// Sampled acceptance over `tree` for a request with random stream `seed` that has generated
/// `generated` tokens, given each node's processed distribution (`probs`, e.g. from
/// LogitsProcessor::process_tree). With one-hot rows this is greedy_accept on their argmax.
inline void sampled_accept(const LinearTree& tree,
                           std::span<const float> probs,  // [num_nodes, vocab] float
                           std::int32_t vocab, std::uint64_t seed, std::uint64_t generated, Acceptance& out) {
  REFDEC_CHECK(tree.size() > 0 && vocab > 0 && probs.size() == static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(vocab),
               "sampled_accept: " << probs.size() << " probabilities for " << tree.size() << " nodes of vocabulary " << vocab);
  SampledChoice choose{probs.data(), vocab, seed, generated};
  accept(view(tree), choose, out);
  REFDEC_CHECK(out.tokens.back() >= 0,
               "sampled_accept: the distribution of node " << (out.nodes.empty() ? 0 : out.nodes.back()) << " has no positive probability");
}

/// The same acceptance as process_tree() followed by sampled_accept(), processing only the rows
/// the walk visits (at most accepted + 1 of them, instead of every node): `logits` holds the
/// tree's raw logits and visited rows are overwritten by their probabilities. Each visited row is
/// processed with its node's own prefix (the sequence counted in `counts`, ending with the root,
/// then the accepted drafts so far) and drawn with uniform(seed, generated + depth), so the result
/// is identical, token for token.
inline void sampled_accept_lazy(const TreeView& tree,
                                std::span<float> logits,  // [num_nodes, vocab] float
                                std::int32_t vocab, LogitsProcessor& processor, const TokenCounts& counts, std::uint64_t generated,
                                Acceptance& out) {
  REFDEC_CHECK(
      tree.num_nodes > 0 && vocab > 0 && logits.size() == static_cast<std::size_t>(tree.num_nodes) * static_cast<std::size_t>(vocab),
      "sampled_accept_lazy: " << logits.size() << " logits for " << tree.num_nodes << " nodes of vocabulary " << vocab);
  // The walk asks nodes in root-to-leaf order, so the accepted drafts so far are the prefix of
  // the path it has written: rebuilt here as the penalties' view of the node's own prefix.
  std::vector<Token> prefix;
  auto choose = [&](std::int32_t node, std::int32_t depth) {
    prefix.resize(static_cast<std::size_t>(depth));
    for (std::int32_t d = 0; d < depth; ++d) prefix[static_cast<std::size_t>(d)] = tree.tokens[out.nodes[static_cast<std::size_t>(d)]];
    const auto row = logits.subspan(static_cast<std::size_t>(node) * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab));
    processor.process(row, counts, prefix);
    const Token y = sample_from_probs(row.data(), vocab, uniform(processor.options().seed, generated + static_cast<std::uint64_t>(depth)));
    REFDEC_CHECK(y >= 0, "sampled_accept_lazy: the distribution of node " << node << " has no positive probability");
    return y;
  };
  accept(tree, choose, out);
}

REFDEC_NAMESPACE_END
