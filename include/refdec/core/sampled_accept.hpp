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

/// The same acceptance as process_tree() followed by sampled_accept(), processing only the rows
/// the walk visits (at most accepted + 1 of them, instead of every node): `logits` holds the
/// tree's raw logits and visited rows are overwritten by their probabilities. Each visited row is
/// processed with its node's own prefix (the sequence counted in `counts`, ending with the root,
/// then the accepted drafts so far) and drawn with uniform(seed, generated + depth), so the result
/// is identical, token for token.
inline void sampled_accept_lazy(const LinearTree& tree,
                                std::span<float> logits,  // [num_nodes, vocab] float
                                std::int32_t vocab, LogitsProcessor& processor, const TokenCounts& counts,
                                std::uint64_t generated, Acceptance& out) {
  REFDEC_CHECK(tree.size() > 0 && vocab > 0 &&
                   logits.size() == static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(vocab),
               "sampled_accept_lazy: " << logits.size() << " logits for " << tree.size() << " nodes of vocabulary " << vocab);
  out.nodes.clear();
  out.tokens.clear();
  std::int32_t cur = 0;
  while (true) {
    const auto row = logits.subspan(static_cast<std::size_t>(cur) * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab));
    processor.process(row, counts, out.tokens);  // out.tokens: the accepted drafts so far
    const Token y = sample_from_probs(row.data(), vocab,
                                      uniform(processor.options().seed, generated + out.tokens.size()));
    REFDEC_CHECK(y >= 0, "sampled_accept_lazy: the distribution of node " << cur << " has no positive probability");
    std::int32_t c = tree.first_child[static_cast<std::size_t>(cur)];
    for (std::int32_t visits = 0; c >= 0 && c < tree.size() && visits < tree.size() && tree.tokens[static_cast<std::size_t>(c)] != y; ++visits)
      c = tree.next_sibling[static_cast<std::size_t>(c)];
    out.tokens.push_back(y);
    if (c < 0 || c >= tree.size() || tree.tokens[static_cast<std::size_t>(c)] != y ||
        out.nodes.size() + 1 >= static_cast<std::size_t>(tree.size()))
      return;  // y is the bonus token
    out.nodes.push_back(c);
    cur = c;
  }
}

REFDEC_NAMESPACE_END
