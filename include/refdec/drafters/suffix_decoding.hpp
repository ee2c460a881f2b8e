// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// SuffixDecoding (Oliaro et al., "SuffixDecoding: Extreme Speculative Decoding for Emerging AI
// Applications", NeurIPS 2025; deployed in vLLM and in Snowflake's ArcticInference), written here
// from the paper's description and the public ArcticInference code, as the baseline refdec's own
// reference index is measured against (refdec-replay --drafter suffix).
//
// Two suffix trees of bounded depth, each node counting how often its path occurred: a global one
// over the responses of earlier requests (and of the ones in flight, token by token), bounded by a
// number of cached requests evicted oldest first, and one per request over its prompt and its
// response so far. To draft, every suffix of the context (up to the depth) that occurs in a tree
// is tried: from its node the path of most frequent children is followed, each token's probability
// the product of count(child) / count(parent) along the path, while it stays at or above
// min_token_prob and for at most max_spec_factor * match length + max_spec_offset tokens (and the
// budget). A path's score is the sum of its probabilities; the best over match lengths (ties to the
// longer match) and over the two trees (ties to the request's own) is the draft.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"

REFDEC_NAMESPACE_BEGIN

/// SuffixDecoding's parameters; the defaults are ArcticInference's.
struct SuffixDecodingOptions {
  std::size_t max_depth = 64;                ///< depth of the suffix trees: match length + speculated tokens at most
  double max_spec_factor = 1.0;              ///< tokens speculated per matched token
  double max_spec_offset = 0.0;              ///< tokens speculated beyond max_spec_factor * match length
  float min_token_prob = 0.1f;               ///< a path stops before a token whose estimated probability is lower
  std::size_t max_cached_requests = 100000;  ///< responses the global tree keeps (0: none), oldest evicted first
  /// Speculate a tree instead of a path: from the match, the most probable node not yet taken,
  /// again and again (each node's probability the product of count(child) / count(parent) along
  /// its path, at least min_token_prob), ArcticInference's use_tree_spec. Off by default, as there.
  bool tree = false;

  /// Throws ArgumentError naming the first setting out of range: max_depth >= 1, max_spec_factor
  /// finite and >= 0, max_spec_offset finite, min_token_prob in [0, 1].
  void validate() const {
    REFDEC_CHECK(max_depth >= 1, "suffix decoding: max_depth must be at least 1, got " << max_depth);
    REFDEC_CHECK(std::isfinite(max_spec_factor) && max_spec_factor >= 0,
                 "suffix decoding: max_spec_factor must be finite and >= 0, got " << max_spec_factor);
    REFDEC_CHECK(std::isfinite(max_spec_offset), "suffix decoding: max_spec_offset must be finite, got " << max_spec_offset);
    REFDEC_CHECK(min_token_prob >= 0.0f && min_token_prob <= 1.0f,
                 "suffix decoding: min_token_prob must be in [0, 1], got " << min_token_prob);
  }
};

/// A speculation: tokens, each one's parent (an index into tokens; -1: the match) and estimated
/// probability, their sum, and the match it continues. A path's parents are -1, 0, 1, ...
struct SuffixDraft {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<float> probs;
  float score = 0.0f;
  std::size_t match_len = 0;
};

/// A suffix trie of bounded depth over token sequences, grown online: every suffix of every
/// sequence, cut to max_depth tokens, is a path from the root, and each node counts the suffixes
/// through it (the occurrences of its path). Sequences are appended to token by token and can be
/// removed whole (counts go down; nodes at count 0 stay allocated, as absent, and are reused).
/// Not thread-safe.
class SuffixTrie {
 public:
  /// An empty trie of paths of at most `max_depth` tokens (>= 1).
  explicit SuffixTrie(std::size_t max_depth) : max_depth_(max_depth) {
    REFDEC_CHECK(max_depth >= 1, "suffix trie: max_depth must be at least 1, got " << max_depth);
    nodes_.push_back(Node{});
  }

  /// Tokens appended, less those of removed sequences (the root's count).
  std::int64_t tokens() const { return nodes_[0].count; }

  /// Appends `token` (>= 0) to sequence `seq` (a new id starts a sequence).
  void append(std::int64_t seq, Token token) {
    REFDEC_CHECK(token >= 0, "suffix trie: token ids must be non-negative, got " << token);
    Sequence& s = sequences_[seq];
    s.tokens.push_back(token);
    // The suffixes that can still grow: one starts here, the one already max_depth long stops.
    s.active.push_back(0);
    if (s.active.size() > max_depth_) s.active.pop_front();
    ++nodes_[0].count;
    for (std::int32_t& node : s.active) node = increment_child(node, token);
  }

  /// Removes sequence `seq` (nothing if absent): every count it added is taken back.
  void remove(std::int64_t seq) {
    const auto it = sequences_.find(seq);
    if (it == sequences_.end()) return;
    const std::vector<Token>& tokens = it->second.tokens;
    for (std::size_t start = 0; start < tokens.size(); ++start) {
      --nodes_[0].count;
      std::int32_t node = 0;
      for (std::size_t i = start; i < std::min(tokens.size(), start + max_depth_); ++i) node = decrement_child(node, tokens[i]);
    }
    sequences_.erase(it);
  }

  /// The number of occurrences of `path` (0 if it never occurred or is longer than max_depth).
  std::int64_t count(std::span<const Token> path) const {
    const std::int32_t node = find(path);
    return node < 0 ? 0 : nodes_[static_cast<std::size_t>(node)].count;
  }

  /// SuffixDecoding's speculation over `context` (its last max_depth tokens are used): for every
  /// match length m from 1 while the context's last m tokens occur (m < the tokens used), the
  /// most frequent continuation from their node (with opt.tree, the most probable nodes below it),
  /// at most min(max_tokens, max_spec_factor * m + max_spec_offset) tokens, each kept while its
  /// probability is at least min_token_prob; the highest-scored (ties: longer match). Empty if
  /// nothing matches.
  SuffixDraft speculate(std::span<const Token> context, std::size_t max_tokens, const SuffixDecodingOptions& opt) const {
    SuffixDraft best, draft;
    if (context.size() > max_depth_) context = context.last(max_depth_);
    for (std::size_t m = 1; m < context.size(); ++m) {
      const std::int32_t node = find(context.last(m));
      if (node < 0) break;
      const double cap = static_cast<double>(m) * opt.max_spec_factor + opt.max_spec_offset + 1e-6;
      const std::size_t limit = std::min(max_tokens, cap <= 0 ? std::size_t{0} : static_cast<std::size_t>(cap));
      if (opt.tree)
        grow_tree(node, limit, opt.min_token_prob, draft);
      else
        follow(node, limit, opt.min_token_prob, draft);
      if (draft.score >= best.score) {
        draft.match_len = m;
        std::swap(best, draft);
      }
    }
    return best;
  }

 private:
  struct Node {
    Token token = -1;
    std::int64_t count = 0;         // occurrences of the path; 0: absent
    std::int32_t first_child = -1;  // a child of the highest count among its siblings (when present)
    std::int32_t next_sibling = -1;
  };
  struct Sequence {
    std::vector<Token> tokens;
    std::deque<std::int32_t> active;  // nodes of the suffixes ending at the last token, shortest last
  };

  // The child of `parent` carrying `token` (present or not), or -1; `before` its previous sibling.
  // The root's children (a vocabulary of them) are found by token and kept in no list: no path is
  // ever followed from the root (a match is at least one token long). The others are listed.
  std::int32_t child_of(std::int32_t parent, Token token, std::int32_t& before) const {
    before = -1;
    if (parent == 0) {
      const auto t = static_cast<std::size_t>(token);
      return t < root_children_.size() ? root_children_[t] : -1;
    }
    for (std::int32_t c = nodes_[static_cast<std::size_t>(parent)].first_child; c >= 0;
         before = c, c = nodes_[static_cast<std::size_t>(c)].next_sibling)
      if (nodes_[static_cast<std::size_t>(c)].token == token) return c;
    return -1;
  }

  void move_to_front(std::int32_t parent, std::int32_t child, std::int32_t before) {
    if (before < 0) return;
    Node& p = nodes_[static_cast<std::size_t>(parent)];
    nodes_[static_cast<std::size_t>(before)].next_sibling = nodes_[static_cast<std::size_t>(child)].next_sibling;
    nodes_[static_cast<std::size_t>(child)].next_sibling = p.first_child;
    p.first_child = child;
  }

  std::int32_t increment_child(std::int32_t parent, Token token) {
    std::int32_t before = -1;
    std::int32_t c = child_of(parent, token, before);
    if (c < 0) {
      c = static_cast<std::int32_t>(nodes_.size());
      nodes_.push_back(Node{token, 0, -1, -1});
      before = -1;
      std::int32_t last = nodes_[static_cast<std::size_t>(parent)].first_child;
      if (parent == 0) {
        const auto t = static_cast<std::size_t>(token);
        if (t >= root_children_.size()) root_children_.resize(t + 1, -1);
        root_children_[t] = c;
      } else if (last < 0) {  // linked last, as an absent node would be; moved up below when it ties the first
        nodes_[static_cast<std::size_t>(parent)].first_child = c;
      } else {
        while (nodes_[static_cast<std::size_t>(last)].next_sibling >= 0) last = nodes_[static_cast<std::size_t>(last)].next_sibling;
        nodes_[static_cast<std::size_t>(last)].next_sibling = c;
        before = last;
      }
    }
    const std::int64_t count = ++nodes_[static_cast<std::size_t>(c)].count;
    // Keep a most frequent child first, the latest to reach the top count winning ties (as
    // ArcticInference's sibling order does).
    if (parent != 0 && count >= nodes_[static_cast<std::size_t>(nodes_[static_cast<std::size_t>(parent)].first_child)].count)
      move_to_front(parent, c, before);
    return c;
  }

  std::int32_t decrement_child(std::int32_t parent, Token token) {
    std::int32_t before = -1;
    const std::int32_t c = child_of(parent, token, before);
    REFDEC_CHECK(c >= 0 && nodes_[static_cast<std::size_t>(c)].count > 0, "suffix trie: removing a path that was never added");
    --nodes_[static_cast<std::size_t>(c)].count;
    if (parent != 0 && before < 0) {  // the first child went down: the most frequent sibling moves up
      std::int32_t top = c, top_before = -1;
      for (std::int32_t prev = c, s = nodes_[static_cast<std::size_t>(c)].next_sibling; s >= 0;
           prev = s, s = nodes_[static_cast<std::size_t>(s)].next_sibling)
        if (nodes_[static_cast<std::size_t>(s)].count > nodes_[static_cast<std::size_t>(top)].count) top = s, top_before = prev;
      move_to_front(parent, top, top_before);
    }
    return c;
  }

  // The node of `path` if it is present, else -1.
  std::int32_t find(std::span<const Token> path) const {
    if (path.size() > max_depth_) return -1;
    std::int32_t node = 0, before = -1;
    for (const Token t : path) {
      node = child_of(node, t, before);
      if (node < 0 || nodes_[static_cast<std::size_t>(node)].count == 0) return -1;
    }
    return node;
  }

  // The most frequent path below `node`: at most `limit` tokens of probability >= min_prob.
  void follow(std::int32_t node, std::size_t limit, float min_prob, SuffixDraft& out) const {
    out.tokens.clear(), out.parents.clear(), out.probs.clear(), out.score = 0.0f, out.match_len = 0;
    double prob = 1.0;
    while (out.tokens.size() < limit) {
      const Node& parent = nodes_[static_cast<std::size_t>(node)];
      const std::int32_t child = parent.first_child;
      if (child < 0 || nodes_[static_cast<std::size_t>(child)].count == 0) break;
      prob *= static_cast<double>(nodes_[static_cast<std::size_t>(child)].count) / static_cast<double>(parent.count);
      if (prob < min_prob) break;
      out.parents.push_back(static_cast<std::int32_t>(out.tokens.size()) - 1);
      out.tokens.push_back(nodes_[static_cast<std::size_t>(child)].token);
      out.probs.push_back(static_cast<float>(prob));
      out.score += static_cast<float>(prob);
      node = child;
    }
  }

  // The tree below `node`: the most probable node not yet taken, while fewer than `limit`; a
  // node's children enter the choice when it is taken, those at least `min_prob` likely.
  void grow_tree(std::int32_t node, std::size_t limit, float min_prob, SuffixDraft& out) const {
    out.tokens.clear(), out.parents.clear(), out.probs.clear(), out.score = 0.0f, out.match_len = 0;
    struct Item {
      double prob;
      std::int32_t node, parent;  // parent: its index in out.tokens, -1 for the match
      bool operator<(const Item& o) const { return prob < o.prob; }
    };
    std::vector<Item> heap;
    auto push_children = [&](std::int32_t n, double prob, std::int32_t parent) {
      const Node& p = nodes_[static_cast<std::size_t>(n)];
      for (std::int32_t c = p.first_child; c >= 0; c = nodes_[static_cast<std::size_t>(c)].next_sibling) {
        const double q = prob * static_cast<double>(nodes_[static_cast<std::size_t>(c)].count) / static_cast<double>(p.count);
        if (nodes_[static_cast<std::size_t>(c)].count == 0 || q < min_prob) continue;
        heap.push_back({q, c, parent});
        std::push_heap(heap.begin(), heap.end());
      }
    };
    push_children(node, 1.0, -1);
    while (out.tokens.size() < limit && !heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      const Item it = heap.back();
      heap.pop_back();
      out.parents.push_back(it.parent);
      out.tokens.push_back(nodes_[static_cast<std::size_t>(it.node)].token);
      out.probs.push_back(static_cast<float>(it.prob));
      out.score += static_cast<float>(it.prob);
      push_children(it.node, it.prob, static_cast<std::int32_t>(out.tokens.size()) - 1);
    }
  }

  std::size_t max_depth_;
  std::vector<Node> nodes_;                  // [0] the root
  std::vector<std::int32_t> root_children_;  // [token] the root's child carrying it, or -1
  std::unordered_map<std::int64_t, Sequence> sequences_;
};

/// SuffixDecoding's global tree: the responses of the last max_cached_requests requests (those in
/// flight included, as they grow), shared by the drafters of every request. Thread-safe (one lock).
class SuffixDecodingCache {
 public:
  /// Throws ArgumentError for options out of range (SuffixDecodingOptions::validate()).
  explicit SuffixDecodingCache(SuffixDecodingOptions options = {}) : opt_((options.validate(), options)), tree_(options.max_depth) {}

  const SuffixDecodingOptions& options() const { return opt_; }

  /// A new request's id; the oldest requests' responses leave the tree while more than
  /// max_cached_requests are kept (never the new one's).
  std::int64_t start_request() {
    const std::lock_guard lock(mutex_);
    const std::int64_t id = next_id_++;
    if (opt_.max_cached_requests == 0) return id;
    order_.push_back(id);
    while (order_.size() > opt_.max_cached_requests) {
      tree_.remove(order_.front());
      order_.pop_front();
    }
    return id;
  }
  /// Appends a request's new response tokens.
  void append(std::int64_t id, std::span<const Token> tokens) {
    const std::lock_guard lock(mutex_);
    if (opt_.max_cached_requests == 0) return;
    for (const Token t : tokens) tree_.append(id, t);
  }
  /// SuffixTrie::speculate over the global tree.
  SuffixDraft speculate(std::span<const Token> context, std::size_t max_tokens) const {
    const std::lock_guard lock(mutex_);
    return tree_.speculate(context, max_tokens, opt_);
  }
  /// Tokens held (responses of the cached requests).
  std::int64_t tokens() const {
    const std::lock_guard lock(mutex_);
    return tree_.tokens();
  }

 private:
  SuffixDecodingOptions opt_;
  mutable std::mutex mutex_;
  SuffixTrie tree_;
  std::deque<std::int64_t> order_;  // cached requests, oldest first
  std::int64_t next_id_ = 0;
};

/// SuffixDecoding as a refdec drafter: a chain (or, with SuffixDecodingOptions::tree, a tree) per step, the better of the request's own
/// tree (its prompt, its references as further sequences, its response so far) and the shared global tree, each node scored by its
/// estimated probability. One per sequence at a time; the cache may be shared.
class SuffixDecodingDrafter {
 public:
  /// Drafts over `cache` (not null) with its options.
  explicit SuffixDecodingDrafter(std::shared_ptr<SuffixDecodingCache> cache) : cache_(std::move(cache)), local_(1) {
    REFDEC_CHECK(cache_ != nullptr, "suffix decoding: needs a SuffixDecodingCache, got null");
    local_ = SuffixTrie(cache_->options().max_depth);
  }

  std::string name() const { return "suffix-decoding"; }
  const std::shared_ptr<SuffixDecodingCache>& cache() const { return cache_; }
  /// The match length of the last proposal (0: none).
  std::size_t last_match() const { return last_match_; }

  /// Starts a request: its own tree over the prompt (sequence 0) and each reference, and a place
  /// in the global tree for its response.
  void begin(std::span<const Token> prompt, References references) {
    local_ = SuffixTrie(cache_->options().max_depth);
    context_.assign(prompt.begin(), prompt.end());
    for (const Token t : prompt) local_.append(0, t);
    for (std::size_t r = 0; r < references.size(); ++r)
      for (const Token t : references[r]) local_.append(static_cast<std::int64_t>(r) + 1, t);
    id_ = cache_->start_request();
    last_match_ = 0;
  }

  /// The better-scored path of the two trees, at most `budget` tokens.
  void propose(std::size_t budget, DraftTree& out) {
    last_match_ = 0;
    if (budget == 0 || id_ < 0) return;
    SuffixDraft mine = local_.speculate(context_, budget, cache_->options());
    SuffixDraft global = cache_->speculate(context_, budget);
    const SuffixDraft& draft = mine.score >= global.score ? mine : global;
    ids_.clear();
    for (std::size_t i = 0; i < draft.tokens.size(); ++i) {
      const std::int32_t parent = draft.parents[i] < 0 ? 0 : ids_[static_cast<std::size_t>(draft.parents[i])];
      ids_.push_back(out.add_child(parent, draft.tokens[i]));
      out.set_score(ids_.back(), draft.probs[i]);
    }
    if (!draft.tokens.empty()) last_match_ = draft.match_len;
  }

  /// The response grows in both trees.
  void accept(std::span<const Token> tokens) {
    REFDEC_CHECK(id_ >= 0, "suffix decoding: accept() before begin()");
    context_.insert(context_.end(), tokens.begin(), tokens.end());
    for (const Token t : tokens) local_.append(0, t);
    cache_->append(id_, tokens);
  }

  /// The request's own tree is dropped; its response stays in the global tree.
  void finish() {
    local_ = SuffixTrie(cache_->options().max_depth);
    context_.clear();
    id_ = -1;
  }

 private:
  std::shared_ptr<SuffixDecodingCache> cache_;
  SuffixTrie local_;
  std::vector<Token> context_;  // prompt and response so far
  std::int64_t id_ = -1;        // the request's id in the global tree; -1 outside a request
  std::size_t last_match_ = 0;
  std::vector<std::int32_t> ids_;  // scratch of propose(): the DraftTree node of each drafted token
};

static_assert(Drafter<SuffixDecodingDrafter>);
static_assert(MatchReportingDrafter<SuffixDecodingDrafter>);
static_assert(SequenceEndingDrafter<SuffixDecodingDrafter>);

REFDEC_NAMESPACE_END
