// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// REST retrieval drafter ("REST: Retrieval-Based Speculative Decoding", He et al. 2023): match the
// longest suffix of the sequence in a large token datastore and propose the most frequent
// continuations of its occurrences as a draft tree.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/references.hpp"
#include "refdec/datastore/retrieval.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of RestDrafter: its retrieval's (REST's defaults; n_max is max_match, m
/// continuation, c max_nodes). RestDrafter rejects values outside the bounds of retrieval.hpp.
using RestOptions = RetrievalOptions;

/// REST retrieval over a shared, memory-mapped Datastore. Each proposal finds the longest suffix
/// (max_match tokens down to 1) of the sequence (prompt plus accepted tokens) in the datastore,
/// counts the continuations (`continuation` tokens) of up to K of its occurrences in a trie and
/// returns the min(max_nodes, budget)
/// most frequent prefixes, scored by their counts (see retrieve()). The references given
/// to begin() are ignored: the datastore is the only source. Cheap to copy; copies share the
/// datastore. One per sequence and thread; the datastore it reads may be shared.
class RestDrafter {
 public:
  explicit RestDrafter(std::shared_ptr<const Datastore> datastore, RestOptions options = {}) : store_(std::move(datastore)), opt_(options) {
    REFDEC_CHECK(store_ != nullptr, "REST: the datastore must not be null");
    REFDEC_CHECK(opt_.max_match >= 1 && opt_.max_match <= kMaxRetrievalMatch,
                 "REST: max_match (longest suffix) must be in [1, " << kMaxRetrievalMatch << "], got " << opt_.max_match);
    REFDEC_CHECK(opt_.continuation >= 1 && opt_.continuation <= kMaxRetrievalContinuation,
                 "REST: continuation must be in [1, " << kMaxRetrievalContinuation << "], got " << opt_.continuation);
    REFDEC_CHECK(opt_.max_nodes >= 1 && opt_.max_nodes <= kMaxRetrievalNodes,
                 "REST: max_nodes must be in [1, " << kMaxRetrievalNodes << "], got " << opt_.max_nodes);
    REFDEC_CHECK(opt_.max_occurrences >= 1 && opt_.max_occurrences <= kMaxRetrievalOccurrences,
                 "REST: max_occurrences must be in [1, 2^31], got " << opt_.max_occurrences);
  }

  const RestOptions& options() const { return opt_; }
  const Datastore& datastore() const { return *store_; }
  std::string name() const { return "rest"; }
  /// What the last propose() found (match length, occurrence range, nodes).
  const RetrievalResult& last_retrieval() const { return last_; }
  /// Length of the sequence suffix found in the datastore by the last proposal (0: none).
  std::size_t last_match() const { return last_.nodes > 0 ? last_.match_length : 0; }

  /// Starts a sequence with `prompt`; `references` are ignored. Throws refdec::Error for prompt
  /// tokens outside the datastore's vocabulary.
  void begin(std::span<const Token> prompt, References /*references*/) {
    check(prompt, "prompt");
    seq_.assign(prompt.begin(), prompt.end());
    last_ = RetrievalResult{};
  }

  /// Writes the retrieved draft tree (at most min(max_nodes, budget) nodes) into `out`.
  void propose(std::size_t budget, DraftTree& out) {
    const std::span<const Token> seq(seq_);
    last_ = retrieve(*store_, seq.last(std::min(seq.size(), opt_.max_match)), opt_, budget, out, scratch_);
  }

  /// Consumes the tokens the step appended. Throws refdec::Error for tokens outside the vocabulary.
  void accept(std::span<const Token> tokens) {
    check(tokens, "accepted");
    seq_.insert(seq_.end(), tokens.begin(), tokens.end());
  }

  /// Rewinds the sequence to its first `n` tokens (RewindableDrafter).
  void truncate(std::size_t n) {
    check_truncation(n, seq_.size(), "REST");
    seq_.resize(n);
  }

 private:
  void check(std::span<const Token> tokens, const char* what) const {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      REFDEC_CHECK(tokens[i] >= 0 && tokens[i] < store_->vocab_size(), "REST: " << what << " token " << tokens[i] << " at index " << i
                                                                                << " is outside the datastore's vocabulary [0, "
                                                                                << store_->vocab_size() << ")");
  }

  std::shared_ptr<const Datastore> store_;
  RestOptions opt_;
  std::vector<Token> seq_;    // the sequence (its last max_match tokens are searched)
  RetrievalScratch scratch_;  // reused by every proposal
  RetrievalResult last_;
};

REFDEC_NAMESPACE_END
