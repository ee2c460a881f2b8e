// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One drafter's part of a verification step, as every engine runs it: propose, cut to the budget,
// record the proposal, add the auxiliary tokens, and check what the drafter produced before
// anything reaches a model.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"

REFDEC_NAMESPACE_BEGIN

/// Draft nodes worth verifying for a sequence that may still append `room` tokens (its token
/// limit or the context, whichever is nearer): at most room - 1, since the bonus token comes on top;
/// never more than `budget`, never negative.
inline std::size_t step_budget(std::int64_t room, std::int64_t budget) {
  return static_cast<std::size_t>(std::clamp<std::int64_t>(room - 1, 0, std::max<std::int64_t>(budget, 0)));
}

/// Memory draft_step() reuses across steps: the proposal and the budget cut's scratch. One per
/// thread.
struct DraftScratch {
  DraftTree proposal;
  LinearizeScratch cut;
};

/// Runs `drafter`'s part of a step for a sequence whose last token `root` sits at position
/// `root_position`: a proposal of at most `budget` draft nodes cut into `tree` (root first), recorded
/// in the drafter's statistics, and its auxiliary tokens in `aux` (cleared first). Throws
/// refdec::Error when a draft or auxiliary token lies outside [0, vocab_size) or the drafter adds
/// more auxiliary tokens than its max_auxiliary(). An auxiliary block that would reach position
/// `position_limit` (the context the model is run for) sits the step out: `aux` comes back empty.
/// `scratch` is reused across calls. `record` false leaves the proposal unrecorded, for a caller
/// that cuts the tree further (BatchBudget) and records what it verifies.
inline void draft_step(AnyDrafter& drafter, Token root, std::size_t budget, std::int64_t vocab_size, std::int64_t root_position,
                       std::int64_t position_limit, DraftScratch& scratch, LinearTree& tree, AuxBlock& aux, bool record = true) {
  scratch.proposal.clear();
  drafter.propose(budget, scratch.proposal);
  scratch.proposal.linearize(root, budget, tree, scratch.cut);
  if (record) drafter.record_proposal(tree);
  for (std::int32_t i = 1; i < tree.size(); ++i)
    REFDEC_CHECK(tree.tokens[static_cast<std::size_t>(i)] < vocab_size, "drafter '" << drafter.name() << "' proposed token id "
                                                                                    << tree.tokens[static_cast<std::size_t>(i)]
                                                                                    << " outside the vocabulary [0, " << vocab_size << ")");
  aux.clear();
  if (drafter.max_auxiliary() == 0) return;
  drafter.auxiliary(aux);
  REFDEC_CHECK(static_cast<std::size_t>(aux.size()) <= drafter.max_auxiliary(),
               "drafter '" << drafter.name() << "' added " << aux.size() << " auxiliary tokens, more than its max_auxiliary() "
                           << drafter.max_auxiliary());
  aux.validate(vocab_size);
  if (!aux.empty() && root_position + *std::max_element(aux.offset.begin(), aux.offset.end()) >= position_limit) aux.clear();
}

REFDEC_NAMESPACE_END
