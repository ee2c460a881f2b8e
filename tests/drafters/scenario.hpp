// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Random decoding scenarios for the drafter tests: references, a prompt and the hidden output the
// target model will produce, written so that passages recur and drafts match, are accepted in
// part or in full, and branch.

#include <algorithm>
#include <cstddef>
#include <random>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/walk.hpp"

namespace refdec_test {

/// A decoding scenario: references, a prompt and the hidden output the target model will produce.
struct Scenario {
  std::vector<std::vector<refdec::Token>> references;
  std::vector<refdec::Token> prompt;
  std::vector<refdec::Token> truth;
};

/// The sizes of a scenario; lengths and counts are drawn uniformly up to these.
struct ScenarioShape {
  std::size_t max_references = 3;       ///< 1..max references (0: none), a fifth of them empty
  std::size_t max_reference_len = 60;
  std::size_t max_prompt_len = 40;      ///< 0..max
  std::size_t max_passage = 20;         ///< longest passage copied at once
  bool output_quotes_prompt = true;     ///< the output copies from the prompt too, not only the references
};

/// Random text over `vocab` tokens in which passages recur, within the references, across them
/// and in the output, mixed with short runs of random tokens.
inline Scenario make_scenario(unsigned vocab, const ScenarioShape& shape, std::size_t output_len, std::mt19937& rng) {
  using Tokens = std::vector<refdec::Token>;
  auto uniform = [&rng](std::size_t lo, std::size_t hi) { return lo + rng() % (hi - lo + 1); };
  // Appends to `dst` until it holds `len` tokens: passages copied from `dst` itself or from one
  // of `sources`, and short runs of random tokens.
  auto write = [&](Tokens& dst, std::size_t len, const std::vector<Tokens>& sources) {
    while (dst.size() < len) {
      const std::size_t pick = rng() % (sources.size() + 2);
      const Tokens& src = pick < sources.size() ? sources[pick] : dst;
      if (pick <= sources.size() && !src.empty()) {
        const std::size_t from = rng() % src.size();
        const std::size_t n = std::min({uniform(1, shape.max_passage), src.size() - from, len - dst.size()});
        const Tokens passage(src.begin() + static_cast<std::ptrdiff_t>(from),
                             src.begin() + static_cast<std::ptrdiff_t>(from + n));
        dst.insert(dst.end(), passage.begin(), passage.end());
      } else {
        for (std::size_t i = uniform(1, 4); i > 0 && dst.size() < len; --i)
          dst.push_back(static_cast<refdec::Token>(rng() % vocab));
      }
    }
  };
  Scenario s;
  if (shape.max_references > 0) {
    s.references.resize(uniform(1, shape.max_references));
    std::vector<Tokens> earlier;
    for (Tokens& r : s.references) {
      if (rng() % 5 != 0) write(r, uniform(1, shape.max_reference_len), earlier);  // else an empty reference
      earlier.push_back(r);
    }
  }
  write(s.prompt, uniform(0, shape.max_prompt_len), s.references);
  std::vector<Tokens> sources = s.references;
  if (shape.output_quotes_prompt) sources.push_back(s.prompt);
  write(s.truth, output_len, sources);
  return s;
}

/// Greedy acceptance of `lin` by a target model whose output is `truth` from position `pos` on:
/// the model's token after every node is the output's token at that node's depth.
inline void accept_truth(const refdec::LinearTree& lin, const std::vector<refdec::Token>& truth, std::size_t pos,
                         refdec::Acceptance& acc) {
  std::vector<refdec::Token> target(static_cast<std::size_t>(lin.size()));
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = truth.at(pos + static_cast<std::size_t>(lin.depth[i]));
  refdec::greedy_accept(lin, target, acc);
}

/// What a decode against a brute-force reference exercised, so that a test can require its
/// scenarios to reach what is compared.
struct DecodeCounts {
  int steps = 0;
  int proposals = 0;      ///< steps whose proposal was not empty
  int accepted = 0;       ///< draft tokens accepted
  int continuations = 0;  ///< steps that continued a fully accepted span (drafters that continue)
  int branched = 0;       ///< steps (or nodes, as the test counts) where the proposal branched

  /// Counts one step that proposed `lin` and accepted `acc` (not `branched`: what counts as a
  /// branch is the test's).
  void count_step(const refdec::LinearTree& lin, const refdec::Acceptance& acc) {
    ++steps;
    proposals += lin.num_drafts() > 0;
    accepted += acc.num_accepted();
  }

  DecodeCounts& operator+=(const DecodeCounts& o) {
    steps += o.steps;
    proposals += o.proposals;
    accepted += o.accepted;
    continuations += o.continuations;
    branched += o.branched;
    return *this;
  }
};

}  // namespace refdec_test
