// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Sampled acceptance over a draft tree of deterministic drafts (sample-then-match): the output
// has exactly the law of plain sampling from the same processed distributions.

#include <cstdint>
#include <span>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/sampling.hpp"

REFDEC_NAMESPACE_BEGIN

/// Sample-then-match from the root: at the node reached after `count` accepted drafts, draws y
/// from that node's row of `probs` with uniform(seed, generated + count) (the uniform plain
/// sampling uses for that output position); descends to the child carrying y, or stops with y
/// as the bonus token (at a leaf y is always the bonus). Writes the accepted draft nodes into
/// `path` (room for num_nodes - 1 entries), the bonus into `*bonus` (-1 if a visited row has no
/// positive weight) and returns the accepted count. Every sibling scan is bounded by the node
/// count, so a malformed tree cannot loop.
REFDEC_HOST_DEVICE std::int32_t sampled_walk(const Token* tokens,              // [num_nodes]
                                             const std::int32_t* first_child,  // [num_nodes]
                                             const std::int32_t* next_sibling, // [num_nodes]
                                             const float* probs,               // [num_nodes, vocab]
                                             std::int32_t vocab, std::int32_t num_nodes, std::uint64_t seed,
                                             std::uint64_t generated, std::int32_t* path, Token* bonus) {
  std::int32_t count = 0;
  std::int32_t cur = 0;
  std::int32_t budget = num_nodes;  // total sibling visits; each node is visited at most once
  while (true) {
    const Token y = sample_from_probs(probs + static_cast<std::int64_t>(cur) * vocab, vocab,
                                      uniform(seed, generated + static_cast<std::uint64_t>(count)));
    std::int32_t c = first_child[cur];
    while (c >= 0 && c < num_nodes && budget-- > 0 && tokens[c] != y) c = next_sibling[c];
    if (c < 0 || c >= num_nodes || budget < 0 || tokens[c] != y || count + 1 >= num_nodes) {
      *bonus = y;
      return count;
    }
    path[count++] = c;
    cur = c;
  }
}

/// Sampled acceptance over `tree` for a request with random stream `seed` that has generated
/// `generated` tokens, given each node's processed distribution (`probs`, e.g. from
/// LogitsProcessor::process_tree). With one-hot rows this is greedy_accept on their argmax.
inline void sampled_accept(const LinearTree& tree,
                           std::span<const float> probs,  // [num_nodes, vocab] float
                           std::int32_t vocab, std::uint64_t seed, std::uint64_t generated, Acceptance& out) {
  REFDEC_CHECK(tree.size() > 0 && vocab > 0 &&
                   probs.size() == static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(vocab),
               "sampled_accept: " << probs.size() << " probabilities for " << tree.size() << " nodes of vocabulary " << vocab);
  out.nodes.resize(static_cast<std::size_t>(tree.size()));
  Token bonus = -1;
  const std::int32_t n = sampled_walk(tree.tokens.data(), tree.first_child.data(), tree.next_sibling.data(), probs.data(),
                                      vocab, tree.size(), seed, generated, out.nodes.data(), &bonus);
  REFDEC_CHECK(bonus >= 0, "sampled_accept: the distribution of node " << (n > 0 ? out.nodes[static_cast<std::size_t>(n - 1)] : 0)
                                                                        << " has no positive probability");
  out.nodes.resize(static_cast<std::size_t>(n));
  out.tokens.clear();
  for (const std::int32_t i : out.nodes) out.tokens.push_back(tree.tokens[static_cast<std::size_t>(i)]);
  out.tokens.push_back(bonus);
}

REFDEC_NAMESPACE_END
