// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// N-gram trie drafter ("N-Gram Trie Speculative Decoding", Chen et al. 2025): a frequency trie of
// the context's n-gram windows, matched against the sequence's last tokens; the most frequent
// continuations below the match become the draft tree. Unlike the paper, the trie keeps growing
// with every accepted token.

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/edge_map.hpp"
#include "refdec/core/references.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of NgramTrieDrafter.
struct NgramTrieOptions {
  std::size_t ngram = 13;      ///< the paper's N: window length in tokens, the trie's depth
  std::size_t max_match = 3;   ///< the paper's L_p: window prefix length, the longest suffix matched
  std::size_t max_nodes = 32;  ///< the paper's num_draft: draft nodes per proposal at most (further cut to the budget)
  bool grow = true;            ///< also index every accepted token (false: the paper's trie,
                               ///< frozen after the prompt; matching still uses the whole sequence)
};

/// The N-gram trie drafter.
///
/// Context and trie. The context is made of texts: each reference on its own, then the sequence
/// (the prompt plus, with `grow`, every accepted token). An n-token window starts at every
/// position of every text; a window near the end of its text is cut at that end (and, for the
/// sequence, grows back to n tokens as tokens are accepted), and no window crosses from one text
/// into the next. Each window W splits into a prefix W[0:L_p] and a suffix; for every j in
/// [0, L_p) with j < |W|, the path W[j:] (a sub-prefix followed by the suffix) is inserted from the
/// trie root, adding 1 to the frequency of every node on it. The trie is therefore always the one
/// obtained by inserting every window of the current texts from scratch; equivalently, a node of
/// depth d gains min(L_p - 1, p, n - d) + 1 for each occurrence of its tokens at position p of a
/// text.
///
/// Drafting. For j = L_p down to 1 (and j at most the sequence length), the sequence's last j
/// tokens are looked up from the root; the first j whose node has a child is the match. Of the
/// match's subtree, the best min(num_draft, budget) nodes are kept by best-first expansion from
/// the match (so a kept node's ancestors are kept), and `out` receives them as paths below the
/// match, each DraftTree node scoring its trie frequency. Nodes are ranked by
/// 1. higher frequency, then
/// 2. the more recent last occurrence: the later the end of its latest occurrence in the
///    context, read as references in order followed by the sequence, then
/// 3. the shallower node
/// (which together order any two distinct candidates). Kept nodes enter `out` in this order, so
/// equal-scored siblings of `out` keep it; a later cut of `out` to a smaller budget follows
/// DraftTree's own rule. Scores are exact while frequencies stay below 2^24.
///
/// Cost. The trie has suffix links, so appending a token costs one hash probe per new node plus a
/// walk over at most n existing nodes, and begin() is linear in the context (times n). A
/// proposal follows at most n suffix links (L_p(L_p + 1) / 2 hash probes when frozen), then scans
/// the children of the match and of each kept node, of which at most the budget enter a heap. One
/// per sequence: not for sharing across threads.
class NgramTrieDrafter {
 public:
  explicit NgramTrieDrafter(NgramTrieOptions options = {}) : opt_(options) {
    REFDEC_CHECK(opt_.ngram >= 2, "n-gram trie: ngram (window length) must be at least 2, got " << opt_.ngram);
    REFDEC_CHECK(opt_.max_match >= 1 && opt_.max_match < opt_.ngram,
                 "n-gram trie: max_match must be in [1, ngram - 1] = [1, " << opt_.ngram - 1 << "], got " << opt_.max_match);
    REFDEC_CHECK(opt_.max_nodes >= 1, "n-gram trie: max_nodes must be at least 1, got " << opt_.max_nodes);
    REFDEC_CHECK(opt_.ngram < (std::size_t{1} << 20), "n-gram trie: ngram is too large, got " << opt_.ngram);
    reset(0);
  }

  const NgramTrieOptions& options() const { return opt_; }
  std::string name() const { return "ngram-trie"; }

  /// Number of trie nodes, the root included.
  std::size_t num_nodes() const { return nodes_.size(); }

  /// Starts a sequence: builds the trie from `references` and `prompt`. Invalid input (a negative
  /// token) is rejected before anything changes.
  void begin(std::span<const Token> prompt, References references) {
    std::size_t bound = 1;  // nodes the texts can create: at most n per token
    for (const auto& ref : references) {
      for (const Token t : ref) REFDEC_CHECK(t >= 0, "n-gram trie: reference token ids must be non-negative, got " << t);
      bound += ref.size() * opt_.ngram;
    }
    for (const Token t : prompt) REFDEC_CHECK(t >= 0, "n-gram trie: prompt token ids must be non-negative, got " << t);
    bound += prompt.size() * opt_.ngram;
    REFDEC_CHECK(bound < (std::size_t{1} << 30), "n-gram trie: context too large (" << bound << " possible nodes)");
    reset(bound);
    for (const auto& ref : references) {
      start_text();
      for (const Token t : ref) append(t);
    }
    start_text();
    seq_.assign(prompt.begin(), prompt.end());
    for (const Token t : prompt) append(t);
  }

  /// Length of the sequence suffix (at most prefix_len) matched in the trie by the last proposal
  /// (0: none).
  std::size_t last_match() const { return last_match_; }

  /// Adds at most min(num_draft, budget) draft nodes (see the class comment).
  void propose(std::size_t budget, DraftTree& out) {
    const std::size_t limit = std::min(opt_.max_nodes, budget);
    last_match_ = 0;
    if (limit == 0) return;
    const std::int32_t start = match();
    if (start < 0) return;
    last_match_ = static_cast<std::size_t>(node(start).depth);
    // Best-first expansion; candidates_ is a heap whose top is the best node.
    candidates_.clear();
    kept_.clear();
    push_children(start, -1, limit);
    while (kept_.size() < limit && !candidates_.empty()) {
      std::pop_heap(candidates_.begin(), candidates_.end(), worse);
      const Candidate k = candidates_.back();
      candidates_.pop_back();
      kept_.push_back(k);
      push_children(k.node, static_cast<std::int32_t>(kept_.size()) - 1, limit - kept_.size());
    }
    // Each kept node's path carries its frequency minus its kept children's, so that the sums
    // DraftTree accumulates along the paths are exactly the frequencies.
    residual_.resize(kept_.size());
    for (std::size_t i = 0; i < kept_.size(); ++i) residual_[i] = kept_[i].freq;
    for (std::size_t i = 0; i < kept_.size(); ++i) {
      if (kept_[i].parent < 0) continue;
      std::uint32_t& r = residual_[static_cast<std::size_t>(kept_[i].parent)];
      assert(r >= kept_[i].freq);  // a path's windows include its extensions'
      r -= kept_[i].freq;
    }
    for (std::size_t i = 0; i < kept_.size(); ++i) {
      path_.clear();
      for (auto k = static_cast<std::int32_t>(i); k >= 0; k = kept_[static_cast<std::size_t>(k)].parent)
        path_.push_back(node(kept_[static_cast<std::size_t>(k)].node).token);
      std::reverse(path_.begin(), path_.end());
      out.insert(path_, static_cast<float>(residual_[i]));
    }
  }

  /// Appends the tokens the step accepted (draft tokens, then the bonus token).
  void accept(std::span<const Token> tokens) {
    for (const Token t : tokens) REFDEC_CHECK(t >= 0, "n-gram trie: accepted token ids must be non-negative, got " << t);
    seq_.insert(seq_.end(), tokens.begin(), tokens.end());
    if (opt_.grow)
      for (const Token t : tokens) append(t);
  }

  /// Rewinds the sequence to its first `n` tokens (RewindableDrafter). The trie keeps the n-grams
  /// of the tokens dropped, as it keeps the references'.
  void truncate(std::size_t n) {
    check_truncation(n, seq_.size(), "n-gram trie");
    seq_.resize(n);
    if (!opt_.grow) return;
    // The sequence's text goes on from its first n tokens: cur_ becomes the node of their last
    // min(n, N - 1), a path the trie holds since they were appended in a row.
    start_text();
    const std::size_t depth = std::min(n, opt_.ngram - 1);
    std::int32_t v = 0;
    for (std::size_t i = n - depth; i < n && v >= 0; ++i) v = find(v, seq_[i]);
    if (v < 0) return;  // not reached: the text starts afresh
    cur_ = v;
    text_len_ = n;
  }

 private:
  struct Node {
    Token token;                // last token of the node's path (-1 for the root)
    std::int32_t depth;         // path length
    std::uint32_t freq;         // frequency (see the class comment)
    std::int32_t last;          // context position where its latest occurrence ends
    std::int32_t link;          // suffix link: the node of the path without its first token
    std::int32_t first_child;   // most recently created child, -1 if none
    std::int32_t next_sibling;  // next older sibling, -1 if none
  };
  // A node that may be kept, with its ranking key copied so that the heap stays in cache.
  struct Candidate {
    std::uint32_t freq;
    std::int32_t last;
    std::int32_t depth;
    std::int32_t node;
    std::int32_t parent;  // index in kept_ of the kept parent, -1 below the match
  };

  Node& node(std::int32_t i) { return nodes_[static_cast<std::size_t>(i)]; }
  const Node& node(std::int32_t i) const { return nodes_[static_cast<std::size_t>(i)]; }

  // The ranking of the class comment.
  static bool better(const Candidate& x, const Candidate& y) {
    if (x.freq != y.freq) return x.freq > y.freq;
    if (x.last != y.last) return x.last > y.last;
    if (x.depth != y.depth) return x.depth < y.depth;
    return x.node < y.node;  // unreachable for distinct candidates; keeps the order strict
  }

  // Orders the candidate heap: its top is the best node.
  static bool worse(const Candidate& a, const Candidate& b) { return better(b, a); }

  // Adds to the candidate heap the children of `v` (kept at index `parent`, -1 for the match)
  // that can still be kept: the best `room` of them, as a child is only taken after every better
  // sibling, and with `room` nodes left to keep it would never be reached otherwise. This bounds
  // the heap work at a node with many children (a frequent token) by the budget.
  void push_children(std::int32_t v, std::int32_t parent, std::size_t room) {
    if (room == 0) return;
    const std::size_t first = candidates_.size();
    for (std::int32_t c = node(v).first_child; c >= 0; c = node(c).next_sibling) {
      const Node& x = node(c);
      candidates_.push_back({x.freq, x.last, x.depth, c, parent});
    }
    if (candidates_.size() - first > room) {
      const auto begin = candidates_.begin() + static_cast<std::ptrdiff_t>(first);
      std::nth_element(begin, begin + static_cast<std::ptrdiff_t>(room) - 1, candidates_.end(), better);
      candidates_.resize(first + room);
    }
    for (std::size_t i = first; i < candidates_.size(); ++i)
      std::push_heap(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(i) + 1, worse);
  }

  // Empties the trie and sizes the hash map for `expected_nodes` nodes.
  void reset(std::size_t expected_nodes) {
    nodes_.clear();
    nodes_.reserve(expected_nodes + 1);
    nodes_.push_back(Node{-1, 0, 0, -1, -1, -1, -1});
    children_.reset(expected_nodes);
    seq_.clear();
    position_ = 0;
    start_text();
  }
  void start_text() {
    cur_ = 0;
    text_len_ = 0;
  }

  std::int32_t find(std::int32_t parent, Token t) const { return children_.find(parent, t); }
  std::int32_t create(std::int32_t parent, Token t) {
    const auto id = static_cast<std::int32_t>(nodes_.size());
    Node& p = node(parent);
    nodes_.push_back(Node{t, p.depth + 1, 0, -1, -1, -1, p.first_child});
    node(parent).first_child = id;  // `p` may dangle after the push_back
    children_.insert(parent, t, id);
    return id;
  }

  // Appends `t` to the current text. Before: cur_ is the node of the text's last
  // min(text_len_, n - 1) tokens, the longest path a window still extends; every shorter suffix
  // is on its suffix-link chain. Each of these paths gains `t`: the longest ones may need new
  // nodes, and as soon as one exists, all shorter ones do too (a path's suffix occurred wherever
  // the path did), so they are reached over suffix links without hashing.
  void append(Token t) {
    const auto len = static_cast<std::int64_t>(text_len_) + 1;  // text length after the append
    const auto n = static_cast<std::int64_t>(opt_.ngram);
    const auto lp = static_cast<std::int64_t>(opt_.max_match);
    // What an occurrence ending here adds to a node of depth d: one per window W (starting at
    // len - d - j) whose W[j:] covers it, j in [0, L_p), the window starting inside the text and
    // long enough.
    const auto weight = [&](std::int64_t d) { return static_cast<std::uint32_t>(std::min({lp - 1, len - d, n - d}) + 1); };
    const auto pos = static_cast<std::int32_t>(position_);
    std::int32_t v = cur_;
    std::int32_t pending = -1;  // new node whose suffix link is the next node reached
    std::int32_t first = -1;    // the node of the longest extended path
    while (true) {
      std::int32_t c = node(v).first_child < 0 ? -1 : find(v, t);
      if (c < 0) {
        c = create(v, t);
        if (pending >= 0) node(pending).link = c;
        pending = c;
        if (first < 0) first = c;
        Node& x = node(c);
        x.freq = weight(x.depth);
        x.last = pos;
        if (v == 0) {
          x.link = 0;
          break;
        }
        v = node(v).link;
        continue;
      }
      if (pending >= 0) node(pending).link = c;
      if (first < 0) first = c;
      for (std::int32_t x = c; x > 0; x = node(x).link) {  // at most n nodes: depth drops by one
        Node& y = node(x);
        y.freq += weight(y.depth);
        y.last = pos;
      }
      break;
    }
    cur_ = node(first).depth < n ? first : node(first).link;
    ++text_len_;
    ++position_;
  }

  // The node of the longest matched suffix (at most L_p tokens) that has a child, -1 if none.
  std::int32_t match() const {
    const std::size_t longest = std::min(opt_.max_match, seq_.size());
    if (opt_.grow) {
      // cur_ holds the sequence's last min(len, n - 1) tokens and its suffix links the shorter ones.
      std::int32_t v = cur_;
      while (static_cast<std::size_t>(node(v).depth) > longest) v = node(v).link;
      for (; v > 0; v = node(v).link)
        if (node(v).first_child >= 0) return v;
      return -1;
    }
    for (std::size_t j = longest; j >= 1; --j) {
      std::int32_t v = 0;
      for (std::size_t i = seq_.size() - j; i < seq_.size() && v >= 0; ++i) v = find(v, seq_[i]);
      if (v >= 0 && node(v).first_child >= 0) return v;
    }
    return -1;
  }

  NgramTrieOptions opt_;
  std::size_t last_match_ = 0;  // prefix length matched by the last proposal, 0 if none
  std::vector<Node> nodes_;     // [num nodes] node 0 is the root
  EdgeMap children_;            // (parent, token) -> child
  std::vector<Token> seq_;      // [sequence length] prompt and accepted tokens
  std::int32_t cur_ = 0;        // node of the current text's last min(length, n - 1) tokens
  std::size_t text_len_ = 0;    // tokens of the current text indexed so far
  std::size_t position_ = 0;    // context tokens indexed so far (the current one's position)
  // Proposal scratch.
  std::vector<Candidate> candidates_;    // [frontier] heap
  std::vector<Candidate> kept_;          // [kept] in selection order
  std::vector<std::uint32_t> residual_;  // [kept]
  std::vector<Token> path_;
};

REFDEC_NAMESPACE_END
