// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// LLMA span-copy drafter ("Inference with Reference", Yang et al. 2023): find the longest suffix
// of the sequence inside the references and copy the tokens that follow it there.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of LlmaDrafter.
struct LlmaOptions {
  std::size_t n = 1;            ///< shortest suffix match that may trigger a copy (LLMA's n)
  std::size_t k = 16;           ///< tokens copied per span (LLMA's k)
  std::size_t m = 1;            ///< spans proposed as a tree: the best one, plus up to m-1 that branch off
                                ///< after the matched suffix with other next tokens
  bool self_reference = false;  ///< also search the sequence itself (prompt and output so far)
};

/// LLMA span copy. The references (and, with `self_reference`, the sequence itself) are indexed in
/// a suffix automaton that grows online, and the sequence's longest suffix match is tracked by
/// a cursor that moves in amortised constant time per appended token, so nothing is rescanned.
/// The copy comes from the earliest occurrence of the longest match of at least `n` tokens; a span
/// that was fully accepted (and whose next reference token was the bonus token) simply continues.
/// With the prompt as its only reference, or with `self_reference` and no references, this is
/// prompt-lookup decoding. One per sequence: not for sharing across threads.
class LlmaDrafter {
 public:
  explicit LlmaDrafter(LlmaOptions options = {}) : opt_(options) {
    REFDEC_CHECK(opt_.n >= 1, "LLMA: n (match length) must be at least 1, got " << opt_.n);
    REFDEC_CHECK(opt_.k >= 1, "LLMA: k (span length) must be at least 1, got " << opt_.k);
    REFDEC_CHECK(opt_.m >= 1, "LLMA: m (number of spans) must be at least 1, got " << opt_.m);
  }

  const LlmaOptions& options() const { return opt_; }
  std::string name() const { return "llma"; }
  /// Length of the sequence suffix matched in the references for the last proposal (a continued
  /// span counts its current match, at least 1); 0 when it proposed nothing.
  std::size_t last_match() const { return last_match_; }

  /// Starts a sequence: indexes `references` and consumes `prompt`.
  void begin(std::span<const Token> prompt, std::span<const std::vector<Token>> references) {
    std::size_t total = prompt.size() + references.size() + 1;
    for (const auto& r : references) total += r.size();
    text_.clear();
    text_.reserve(total);
    states_.clear();
    states_.reserve(2 * total + 2);
    edges_.clear();
    next_.clear();
    next_.reserve(3 * total + 8);
    states_.push_back(State{0, -1, -1, -1});
    last_ = 0;
    cursor_ = 0;
    cursor_len_ = 0;
    cont_pos_ = -1;
    span_pos_ = -1;
    span_len_ = 0;
    Token separator = -1;  // unique per boundary, so no match crosses one
    for (const auto& ref : references) {
      for (const Token t : ref) {
        REFDEC_CHECK(t >= 0, "LLMA: reference token ids must be non-negative, got " << t);
        extend(t);
      }
      extend(separator--);
    }
    for (const Token t : prompt) REFDEC_CHECK(t >= 0, "LLMA: prompt token ids must be non-negative, got " << t);
    consume(prompt);
  }

  /// Adds up to `budget` draft nodes (more only with m > 1; the verifier cuts to its budget).
  void propose(std::size_t budget, DraftTree& out) {
    span_pos_ = -1;
    span_len_ = 0;
    last_match_ = 0;
    if (budget == 0) return;
    const auto [state, len] = match();
    std::int64_t pos = cont_pos_;
    if (pos < 0 && len >= static_cast<std::int64_t>(opt_.n))
      pos = static_cast<std::int64_t>(states_[static_cast<std::size_t>(state)].firstpos) + 1;
    if (pos < 0) return;
    span_.clear();
    for (std::int64_t i = pos; i < static_cast<std::int64_t>(text_.size()) && span_.size() < std::min(opt_.k, budget); ++i) {
      if (text_[static_cast<std::size_t>(i)] < 0) break;
      span_.push_back(text_[static_cast<std::size_t>(i)]);
    }
    if (span_.empty()) return;
    span_pos_ = pos;
    span_len_ = static_cast<std::int64_t>(span_.size());
    last_match_ = static_cast<std::size_t>(std::max<std::int64_t>(len, 1));
    out.insert(span_, 1.0f);
    if (opt_.m == 1 || len < static_cast<std::int64_t>(opt_.n)) return;
    // Other spans: the continuations after the matched suffix that start with another token.
    // span_ is reused for them, so remember the primary's first token.
    const Token primary_first = span_.front();
    float score = 0.5f;
    std::size_t extra = 0;
    for (std::int32_t e = states_[static_cast<std::size_t>(state)].edges; e >= 0 && extra + 1 < opt_.m;
         e = edges_[static_cast<std::size_t>(e)].next) {
      const Token c = edges_[static_cast<std::size_t>(e)].token;
      if (c < 0 || c == primary_first) continue;
      const std::int32_t w = next_.at(key(state, c));
      span_.assign(1, c);
      for (std::size_t i = static_cast<std::size_t>(states_[static_cast<std::size_t>(w)].firstpos) + 1;
           i < text_.size() && span_.size() < opt_.k; ++i) {
        if (text_[i] < 0) break;
        span_.push_back(text_[i]);
      }
      out.insert(span_, score);
      score *= 0.5f;
      ++extra;
    }
  }

  /// Consumes the tokens the step appended.
  void accept(std::span<const Token> tokens) {
    // The span continues when all of it was accepted and the bonus token is the reference's next.
    bool fully = span_pos_ >= 0 && static_cast<std::int64_t>(tokens.size()) == span_len_ + 1;
    for (std::int64_t i = 0; fully && i <= span_len_; ++i) {
      const auto p = static_cast<std::size_t>(span_pos_ + i);
      fully = p < text_.size() && text_[p] == tokens[static_cast<std::size_t>(i)];
    }
    consume(tokens);
    cont_pos_ = fully ? span_pos_ + span_len_ + 1 : -1;
    span_pos_ = -1;
  }

 private:
  struct State {
    std::int32_t len;       // length of the longest string of this state
    std::int32_t link;      // suffix link, -1 for the initial state
    std::int32_t firstpos;  // end index in text_ of the first occurrence
    std::int32_t edges;     // head of this state's edge list, -1 if none
  };
  struct Edge {
    Token token;
    std::int32_t next;  // next edge of the same state
  };

  static std::uint64_t key(std::int32_t state, Token t) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(state)) << 32) | static_cast<std::uint32_t>(t);
  }
  std::int32_t step(std::int32_t state, Token t) const {
    const auto it = next_.find(key(state, t));
    return it == next_.end() ? -1 : it->second;
  }
  void add_edge(std::int32_t from, Token t, std::int32_t to) {
    next_.emplace(key(from, t), to);
    edges_.push_back(Edge{t, states_[static_cast<std::size_t>(from)].edges});
    states_[static_cast<std::size_t>(from)].edges = static_cast<std::int32_t>(edges_.size()) - 1;
  }

  // Online suffix-automaton construction (Blumer et al.), amortised O(1) per token.
  void extend(Token c) {
    const auto pos = static_cast<std::int32_t>(text_.size());
    text_.push_back(c);
    const auto cur = static_cast<std::int32_t>(states_.size());
    states_.push_back(State{states_[static_cast<std::size_t>(last_)].len + 1, 0, pos, -1});
    std::int32_t p = last_;
    while (p >= 0 && step(p, c) < 0) {
      add_edge(p, c, cur);
      p = states_[static_cast<std::size_t>(p)].link;
    }
    if (p >= 0) {
      const std::int32_t q = step(p, c);
      if (states_[static_cast<std::size_t>(p)].len + 1 == states_[static_cast<std::size_t>(q)].len) {
        states_[static_cast<std::size_t>(cur)].link = q;
      } else {
        const auto clone = static_cast<std::int32_t>(states_.size());
        const State sq = states_[static_cast<std::size_t>(q)];
        states_.push_back(State{states_[static_cast<std::size_t>(p)].len + 1, sq.link, sq.firstpos, -1});
        for (std::int32_t e = sq.edges; e >= 0; e = edges_[static_cast<std::size_t>(e)].next) {
          const Token t = edges_[static_cast<std::size_t>(e)].token;
          add_edge(clone, t, next_.at(key(q, t)));
        }
        for (; p >= 0; p = states_[static_cast<std::size_t>(p)].link) {
          auto it = next_.find(key(p, c));
          if (it == next_.end() || it->second != q) break;
          it->second = clone;
        }
        states_[static_cast<std::size_t>(q)].link = clone;
        states_[static_cast<std::size_t>(cur)].link = clone;
      }
    }
    last_ = cur;
  }

  // Appends sequence tokens: into the automaton (self reference) or through the match cursor.
  void consume(std::span<const Token> tokens) {
    if (opt_.self_reference) {  // each reference ended with a separator: no match crosses into it
      for (const Token t : tokens) extend(t);
      return;
    }
    for (const Token t : tokens) {
      while (cursor_ > 0 && step(cursor_, t) < 0) {
        cursor_ = states_[static_cast<std::size_t>(cursor_)].link;
        cursor_len_ = states_[static_cast<std::size_t>(cursor_)].len;
      }
      const std::int32_t s = step(cursor_, t);
      if (s >= 0) {
        cursor_ = s;
        ++cursor_len_;
      } else {
        cursor_ = 0;
        cursor_len_ = 0;
      }
    }
  }
  // The longest suffix of the sequence found in the indexed text (excluding, under self
  // reference, its own trailing occurrence): {state, length}.
  std::pair<std::int32_t, std::int64_t> match() const {
    if (opt_.self_reference) {
      const std::int32_t v = states_[static_cast<std::size_t>(last_)].link;
      if (v <= 0) return {0, 0};
      return {v, states_[static_cast<std::size_t>(v)].len};
    }
    return {cursor_, cursor_len_};
  }

  LlmaOptions opt_;
  std::vector<Token> text_;                               // [text length] references, separators (< 0), maybe the sequence
  std::vector<State> states_;                             // [<= 2 * text length] suffix automaton
  std::vector<Edge> edges_;                               // edge lists for enumerating a state's continuations
  std::unordered_map<std::uint64_t, std::int32_t> next_;  // (state, token) -> state
  std::int32_t last_ = 0;                                 // state of the whole text
  std::int32_t cursor_ = 0;                               // state of the sequence's longest matched suffix (no self reference)
  std::int64_t cursor_len_ = 0;                           // its length
  std::int64_t cont_pos_ = -1;                            // text position to continue copying from, -1 if none
  std::int64_t span_pos_ = -1;                            // text position of the last proposed span, -1 if none
  std::int64_t span_len_ = 0;                             // its length
  std::size_t last_match_ = 0;                            // match length of the last proposal, 0 if none
  std::vector<Token> span_;                               // scratch
};

REFDEC_NAMESPACE_END
