// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// LLMA span-copy drafter ("Inference with Reference", Yang et al. 2023): find the longest suffix
// of the sequence inside the references and copy the tokens that follow it there.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/edge_map.hpp"
#include "refdec/core/references.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of LlmaDrafter.
struct LlmaOptions {
  std::size_t min_match = 1;      ///< LLMA's n: the shortest suffix match that may trigger a copy
  std::size_t continuation = 16;  ///< LLMA's k: tokens copied per span
  std::size_t spans = 1;          ///< spans proposed as a tree: the best one, plus up to spans - 1 that branch off
                                  ///< after the matched suffix with other next tokens
  bool self_reference = true;     ///< also search the sequence itself (prompt and output so far): on, so that
                                  ///< a drafter without references still drafts (prompt-lookup decoding)
};

namespace detail {

/// A suffix automaton (Blumer et al.) over a text that grows at its end, amortised O(1) per token:
/// every substring of the text is a path from state 0, each state keeps the end of its strings'
/// first occurrence, and its suffix link leads to the state of its longest suffix that occurs
/// elsewhere. Negative tokens in the text act as separators: unique per boundary, no path crosses
/// them twice.
class SuffixAutomaton {
 public:
  struct State {
    std::int32_t len;       // length of the longest string of this state
    std::int32_t link;      // suffix link, -1 for the initial state
    std::int32_t firstpos;  // end index in text() of the first occurrence
    std::int32_t edges;     // head of this state's edge list, -1 if none
  };
  struct Edge {
    Token token;
    std::int32_t next;  // next edge of the same state
  };

  SuffixAutomaton() { states_.push_back(State{0, -1, -1, -1}); }

  /// Room for a text of `tokens` tokens.
  void reserve(std::size_t tokens) {
    text_.reserve(tokens);
    states_.reserve(2 * tokens + 2);
    next_.reset(tokens);  // grown as needed: a text has fewer than 3 per token
  }

  std::span<const Token> text() const { return text_; }
  /// Bytes held (capacities of the text, states, edge lists and transition table).
  std::size_t bytes() const {
    return text_.capacity() * sizeof(Token) + states_.capacity() * sizeof(State) + edges_.capacity() * sizeof(Edge) + next_.bytes();
  }
  const State& state(std::int32_t s) const { return states_[static_cast<std::size_t>(s)]; }
  const Edge& edge(std::int32_t e) const { return edges_[static_cast<std::size_t>(e)]; }
  /// The state of the whole text.
  std::int32_t last() const { return last_; }
  /// The state reached from `state` by `t`, or -1.
  std::int32_t step(std::int32_t state, Token t) const { return next_.find(state, t); }

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
          add_edge(clone, t, next_.find(q, t));
        }
        while (p >= 0 && next_.replace(p, c, q, clone)) p = states_[static_cast<std::size_t>(p)].link;
        states_[static_cast<std::size_t>(q)].link = clone;
        states_[static_cast<std::size_t>(cur)].link = clone;
      }
    }
    last_ = cur;
  }

 private:
  void add_edge(std::int32_t from, Token t, std::int32_t to) {
    next_.insert(from, t, to);
    edges_.push_back(Edge{t, states_[static_cast<std::size_t>(from)].edges});
    states_[static_cast<std::size_t>(from)].edges = static_cast<std::int32_t>(edges_.size()) - 1;
  }

  std::vector<Token> text_;
  std::vector<State> states_;  // [<= 2 * text length]
  std::vector<Edge> edges_;    // edge lists, for enumerating a state's continuations
  EdgeMap next_;               // (state, token) -> state
  std::int32_t last_ = 0;
};

}  // namespace detail

/// LLMA's index of a document set: a suffix automaton over the documents, built once. Share one
/// (`std::shared_ptr<const LlmaIndex>`) among the LlmaDrafters of every sequence that draws from
/// the same documents: ten sequences over one 2M-token set then hold one index, built once,
/// instead of building ten in their begin(). Immutable once built: any number of threads may
/// draft from it at once.
class LlmaIndex {
 public:
  /// Indexes `documents` (token ids >= 0; copied into the index, so the view may go once this
  /// returns). No match or copy crosses from one document into the next.
  explicit LlmaIndex(References documents) : documents_(documents.size()) {
    tokens_ = documents.total_tokens();
    automaton_.reserve(tokens_ + documents.size());
    Token separator = -1;  // unique per boundary, so no match crosses one
    for (const std::span<const Token> doc : documents) {
      for (const Token t : doc) {
        REFDEC_CHECK(t >= 0, "LLMA: reference token ids must be non-negative, got " << t);
        automaton_.extend(t);
      }
      automaton_.extend(separator--);
    }
  }

  /// Tokens indexed, over all documents.
  std::size_t tokens() const { return tokens_; }
  /// Documents indexed.
  std::size_t documents() const { return documents_; }
  /// Bytes the index holds.
  std::size_t bytes() const { return automaton_.bytes(); }

 private:
  friend class LlmaDrafter;
  detail::SuffixAutomaton automaton_;
  std::size_t tokens_ = 0;
  std::size_t documents_ = 0;
};

/// LLMA span copy. The references are indexed in a suffix automaton (an LlmaIndex: built by
/// begin() from its references, or one shared by many drafters and given at construction), and
/// the sequence's longest suffix match is tracked by a cursor that moves in amortised constant
/// time per appended token, so nothing is rescanned. With `self_reference` the sequence itself
/// (prompt and output so far) is indexed too, in an automaton of its own that grows with it. The
/// copy comes from the earliest occurrence of the longest match of at least `n` tokens (the
/// references before the sequence); a span that was fully accepted (and whose next token there
/// was the bonus token) simply continues. With the prompt as its only reference, or with
/// `self_reference` and no references, this is prompt-lookup decoding. One per sequence: not for
/// sharing across threads (its LlmaIndex may be shared).
class LlmaDrafter {
 public:
  /// A drafter that indexes the references each begin() gives it.
  explicit LlmaDrafter(LlmaOptions options = {}) : opt_(options) {
    REFDEC_CHECK(opt_.min_match >= 1, "LLMA: min_match must be at least 1, got " << opt_.min_match);
    REFDEC_CHECK(opt_.continuation >= 1, "LLMA: continuation (span length) must be at least 1, got " << opt_.continuation);
    REFDEC_CHECK(opt_.spans >= 1, "LLMA: spans must be at least 1, got " << opt_.spans);
    refs_ = std::make_shared<const LlmaIndex>(References{});
  }
  /// A drafter over a shared index of its references: begin() indexes nothing (the references it
  /// is given are not read: the index holds this drafter's references).
  LlmaDrafter(std::shared_ptr<const LlmaIndex> index, LlmaOptions options = {}) : LlmaDrafter(options) {
    REFDEC_CHECK(index != nullptr, "LLMA: the shared index is null");
    refs_ = shared_ = std::move(index);
  }

  const LlmaOptions& options() const { return opt_; }
  /// The shared index given at construction (null for a drafter that indexes begin()'s references).
  const std::shared_ptr<const LlmaIndex>& shared_index() const { return shared_; }
  std::string name() const { return "llma"; }
  /// Length of the sequence suffix matched in the references for the last proposal (a continued
  /// span counts its current match, at least 1); 0 when it proposed nothing.
  std::size_t last_match() const { return last_match_; }

  /// Starts a sequence: indexes `references` (unless the index is shared) and consumes `prompt`.
  void begin(std::span<const Token> prompt, References references) {
    for (const Token t : prompt) REFDEC_CHECK(t >= 0, "LLMA: prompt token ids must be non-negative, got " << t);
    refs_ = shared_ ? shared_ : std::make_shared<const LlmaIndex>(references);
    start(prompt);
  }

  /// Rewinds the sequence to its first `n` tokens; the references stay indexed (RewindableDrafter).
  void truncate(std::size_t n) {
    check_truncation(n, seq_.size(), "LLMA");
    const std::vector<Token> kept(seq_.begin(), seq_.begin() + static_cast<std::ptrdiff_t>(n));
    start(kept);
  }

  /// Adds up to `budget` draft nodes (more only with m > 1; the verifier cuts to its budget).
  void propose(std::size_t budget, DraftTree& out) {
    span_pos_ = -1;
    span_len_ = 0;
    last_match_ = 0;
    if (budget == 0) return;
    const Match found = match();
    const auto n = static_cast<std::int64_t>(opt_.min_match);
    bool in_self = cont_in_self_;
    std::int64_t pos = cont_pos_;
    if (pos < 0 && found.len >= n) {
      in_self = found.in_self;
      pos = static_cast<std::int64_t>(automaton(in_self).state(found.state).firstpos) + 1;
    }
    if (pos < 0) return;
    const auto text = automaton(in_self).text();
    copy(text, static_cast<std::size_t>(pos), std::min(opt_.continuation, budget));
    if (span_.empty()) return;
    span_pos_ = pos;
    span_in_self_ = in_self;
    span_len_ = static_cast<std::int64_t>(span_.size());
    last_match_ = static_cast<std::size_t>(std::max<std::int64_t>(found.len, 1));
    out.insert(span_, 1.0f);
    if (opt_.spans == 1 || found.len < n) return;
    // Other spans: the continuations after the matched suffix that start with another token, in
    // the references (when the match is theirs) and then in the sequence (when it is its own, or
    // as long there). span_ is reused for them, so remember the primary's first token.
    seen_.assign(1, span_.front());
    float score = 0.5f;
    std::size_t extra = 0;
    const std::int32_t self_state = self_match_state();
    for (const bool self : {false, true}) {
      const std::int32_t state = self ? self_state : cursor_;
      const bool matched_here = self ? state > 0 && self_.state(state).len == found.len : !found.in_self;
      if (!matched_here) continue;
      const detail::SuffixAutomaton& a = automaton(self);
      for (std::int32_t e = a.state(state).edges; e >= 0 && extra + 1 < opt_.spans; e = a.edge(e).next) {
        const Token c = a.edge(e).token;
        if (c < 0 || std::find(seen_.begin(), seen_.end(), c) != seen_.end()) continue;
        seen_.push_back(c);
        const std::int32_t w = a.step(state, c);
        copy(a.text(), static_cast<std::size_t>(a.state(w).firstpos) + 1, opt_.continuation, c);
        out.insert(span_, score);
        score *= 0.5f;
        ++extra;
      }
    }
  }

  /// Consumes the tokens the step appended.
  void accept(std::span<const Token> tokens) {
    // The span continues when all of it was accepted and the bonus token is the reference's next.
    bool fully = span_pos_ >= 0 && static_cast<std::int64_t>(tokens.size()) == span_len_ + 1;
    const auto text = automaton(span_in_self_).text();
    for (std::int64_t i = 0; fully && i <= span_len_; ++i) {
      const auto p = static_cast<std::size_t>(span_pos_ + i);
      fully = p < text.size() && text[p] == tokens[static_cast<std::size_t>(i)];
    }
    consume(tokens);
    cont_pos_ = fully ? span_pos_ + span_len_ + 1 : -1;
    cont_in_self_ = span_in_self_;
    span_pos_ = -1;
  }

 private:
  // The sequence's longest suffix found in the references or (self reference) earlier in itself:
  // ties go to the references, whose occurrences come first.
  struct Match {
    bool in_self;
    std::int32_t state;
    std::int64_t len;
  };

  const detail::SuffixAutomaton& automaton(bool self) const { return self ? self_ : refs_->automaton_; }

  // The state of the sequence's longest suffix that occurs earlier in it (0: none; -1 without
  // self reference).
  std::int32_t self_match_state() const { return opt_.self_reference ? self_.state(self_.last()).link : -1; }

  Match match() const {
    Match m{false, cursor_, cursor_len_};
    const std::int32_t v = self_match_state();
    if (v > 0 && self_.state(v).len > m.len) m = {true, v, self_.state(v).len};
    return m;
  }

  // span_ = `head` (if >= 0) followed by text from `from`, stopping at a separator, the text's end
  // or `limit` tokens.
  void copy(std::span<const Token> text, std::size_t from, std::size_t limit, Token head = -1) {
    span_.clear();
    if (head >= 0) span_.push_back(head);
    for (std::size_t i = from; i < text.size() && text[i] >= 0 && span_.size() < limit; ++i) span_.push_back(text[i]);
  }

  // The sequence `tokens` over the references indexed now.
  void start(std::span<const Token> tokens) {
    self_ = detail::SuffixAutomaton();
    if (opt_.self_reference) self_.reserve(tokens.size());
    seq_.clear();
    cursor_ = 0;
    cursor_len_ = 0;
    cont_pos_ = -1;
    span_pos_ = -1;
    span_len_ = 0;
    consume(tokens);
  }

  // Appends sequence tokens: through the references' cursor, and into the sequence's own
  // automaton under self reference.
  void consume(std::span<const Token> tokens) {
    const detail::SuffixAutomaton& refs = refs_->automaton_;
    seq_.insert(seq_.end(), tokens.begin(), tokens.end());
    for (const Token t : tokens) {
      if (opt_.self_reference) self_.extend(t);
      while (cursor_ > 0 && refs.step(cursor_, t) < 0) {
        cursor_ = refs.state(cursor_).link;
        cursor_len_ = refs.state(cursor_).len;
      }
      const std::int32_t s = refs.step(cursor_, t);
      if (s >= 0) {
        cursor_ = s;
        ++cursor_len_;
      } else {
        cursor_ = 0;
        cursor_len_ = 0;
      }
    }
  }

  LlmaOptions opt_;
  std::shared_ptr<const LlmaIndex> shared_;  // given at construction, or null
  std::shared_ptr<const LlmaIndex> refs_;    // the references' index: shared_, or begin()'s own
  detail::SuffixAutomaton self_;             // the sequence (self reference only)
  std::vector<Token> seq_;                   // the sequence (what truncate() starts again from)
  std::int32_t cursor_ = 0;                  // state of the sequence's longest suffix found in the references
  std::int64_t cursor_len_ = 0;              // its length
  std::int64_t cont_pos_ = -1;               // text position to continue copying from, -1 if none
  bool cont_in_self_ = false;                // ... in the sequence's text (else the references')
  std::int64_t span_pos_ = -1;               // text position of the last proposed span, -1 if none
  bool span_in_self_ = false;                // ... in the sequence's text
  std::int64_t span_len_ = 0;                // its length
  std::size_t last_match_ = 0;               // match length of the last proposal, 0 if none
  std::vector<Token> span_;                  // scratch
  std::vector<Token> seen_;                  // scratch: first tokens of the spans proposed
};

REFDEC_NAMESPACE_END
