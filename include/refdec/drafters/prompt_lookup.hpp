// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Prompt-lookup decoding (Saxena 2023), exactly as its reference code and Spec-Bench run it: the
// calibration point of the replay evaluator.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/references.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of PromptLookupDrafter (the defaults are Spec-Bench's).
struct PromptLookupOptions {
  std::size_t max_match = 3;      ///< longest suffix of the sequence looked up (Spec-Bench's max_ngram_size)
  std::size_t min_match = 1;      ///< shortest one
  std::size_t continuation = 10;  ///< tokens copied after the match (Spec-Bench's k)
  /// Skip a match whose k-token continuation would run past the end of the sequence (the rule of
  /// the original reference code). Off, as in Spec-Bench's runs: copy what there is; that setting
  /// reproduces Spec-Bench's published τ of 1.750.
  bool full_span_only = false;
};

/// Prompt lookup: for n = max_ngram down to min_ngram, find the earliest occurrence of the
/// sequence's last n tokens in the sequence (prompt and output so far) that ends at least n tokens
/// before the sequence does, and propose the k tokens after it as a chain. References are ignored.
/// A plain scan per step (O(length * n)): LlmaDrafter is the indexed drafter for long contexts. One
/// per sequence: not for sharing across threads.
class PromptLookupDrafter {
 public:
  explicit PromptLookupDrafter(PromptLookupOptions options = {}) : opt_(options) {
    REFDEC_CHECK(opt_.min_match >= 1, "prompt lookup: min_match must be at least 1, got " << opt_.min_match);
    REFDEC_CHECK(opt_.max_match >= opt_.min_match,
                 "prompt lookup: max_match (" << opt_.max_match << ") must be >= min_match (" << opt_.min_match << ")");
    REFDEC_CHECK(opt_.continuation >= 1, "prompt lookup: continuation must be at least 1, got " << opt_.continuation);
  }

  const PromptLookupOptions& options() const { return opt_; }
  std::string name() const { return "prompt-lookup"; }
  /// The n-gram length matched by the last proposal (0: none).
  std::size_t last_match() const { return last_match_; }

  void begin(std::span<const Token> prompt, References /*references*/) {
    seq_.assign(prompt.begin(), prompt.end());
    for (const Token t : seq_) REFDEC_CHECK(t >= 0, "prompt lookup: token ids must be non-negative, got " << t);
  }

  void propose(std::size_t budget, DraftTree& out) {
    const std::size_t len = seq_.size();
    const std::size_t copy = std::min(opt_.continuation, budget);
    last_match_ = 0;
    if (copy == 0) return;
    for (std::size_t n = std::min(opt_.max_match, len); n >= opt_.min_match && n >= 1; --n) {
      if (2 * n >= len) continue;  // the match must end n tokens before the sequence does
      const Token* tail = seq_.data() + (len - n);
      for (std::size_t i = 0; i + 2 * n < len; ++i) {
        const std::size_t start = i + n;
        if (opt_.full_span_only && start + opt_.continuation > len) break;  // later matches end later still
        if (!std::equal(tail, tail + n, seq_.data() + i)) continue;
        out.insert(std::span<const Token>(seq_).subspan(start, std::min(copy, len - start)), 1.0f);
        last_match_ = n;
        return;
      }
    }
  }

  void accept(std::span<const Token> tokens) { seq_.insert(seq_.end(), tokens.begin(), tokens.end()); }

  /// Rewinds the sequence to its first `n` tokens (RewindableDrafter).
  void truncate(std::size_t n) {
    check_truncation(n, seq_.size(), "prompt lookup");
    seq_.resize(n);
  }

 private:
  PromptLookupOptions opt_;
  std::size_t last_match_ = 0;  // n-gram length matched by the last proposal, 0 if none
  std::vector<Token> seq_;      // [length] prompt and accepted tokens
};

REFDEC_NAMESPACE_END
