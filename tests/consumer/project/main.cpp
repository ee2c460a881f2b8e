// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Drafts with LLMA from an installed refdec and checks the proposal.
#include <refdec/drafters/llma.hpp>

#include <vector>

int main() {
  refdec::LlmaDrafter drafter({.min_match = 1, .continuation = 3});
  const std::vector<std::vector<refdec::Token>> references = {{1, 2, 3, 4, 5}};
  drafter.begin(std::vector<refdec::Token>{9, 2}, references);
  refdec::DraftTree tree;
  drafter.propose(8, tree);
  const auto lin = tree.linearize(2, 8);
  return lin.tokens == std::vector<refdec::Token>{2, 3, 4, 5} ? 0 : 1;
}
