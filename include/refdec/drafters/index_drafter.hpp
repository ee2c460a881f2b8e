// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// IndexDrafter: one sequence's drafter over the shared ReferenceIndex (refdec/index/), and
// index_sources(), its two sources for a mixture.

#include <algorithm>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/datastore/suffix_view.hpp"
#include "refdec/index/reference_index.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of an IndexDrafter.
struct IndexDrafterOptions {
  std::size_t max_match = 16;     ///< longest context suffix searched
  std::size_t continuation = 64;  ///< deepest draft node, in tokens after the match: a whole repeated answer drafts in few steps
  /// Also draft from the request's own text, as if it were in the index: its references (indexed
  /// at begin()) and its prompt and output (indexed again whenever they have doubled since),
  /// SuffixDecoding's per-request tree. Costs begin() a sort of the references and prompt.
  bool request = true;
  /// Add the sequence's accepted tokens to the index when it ends; off for a sequence whose
  /// output must not be drafted from by others.
  bool add_output = true;
  /// Draft from the shared index. Off: from the request's own text only (with `request`), and
  /// nothing is added to the index (add_output unused): the second of index_sources().
  bool shared = true;
};

/// A drafter over a shared ReferenceIndex: per step, the longest suffix of the sequence (prompt
/// and accepted tokens; at most max_match, at most the index's depth) that occurs in the index
/// (with options().request, also in the request's own references, prompt and output), then its
/// continuations best first by how many of its occurrences they continue, counted exactly from
/// the suffix arrays (each node's score is that count: its share of its parent's score estimates
/// the probability of its token, and the count itself how much evidence there is), at most
/// `continuation` tokens deep (and the index's depth less the match). The sequence's accepted
/// tokens become a document of the index at finish() (or the next begin()); a drafter destroyed
/// or reset() before adds nothing. One per sequence at a time; the index is shared.
class IndexDrafter {
 public:
  IndexDrafter(std::shared_ptr<ReferenceIndex> index, IndexDrafterOptions options = {}) : index_(std::move(index)), opt_(options) {
    REFDEC_CHECK(index_ != nullptr, "index drafter: needs a ReferenceIndex, got null");
    REFDEC_CHECK(opt_.max_match >= 1 && opt_.continuation >= 1, "index drafter: max_match and continuation must be at least 1");
    REFDEC_CHECK(opt_.shared || opt_.request, "index drafter: shared and request both off leave it nothing to draft from");
  }

  /// "index", or "index-request" for one of the request's own text only (options().shared off).
  std::string name() const { return opt_.shared ? "index" : "index-request"; }
  const std::shared_ptr<ReferenceIndex>& index() const { return index_; }
  const IndexDrafterOptions& options() const { return opt_; }
  /// The match length of the last proposal (0: none).
  std::size_t last_match() const { return last_match_; }

  /// Ends the previous sequence (finish()) and starts one on `prompt` (and `references`, read
  /// here only, with options().request).
  void begin(std::span<const Token> prompt, References references) {
    REFDEC_CHECK(index_ != nullptr, "index drafter: used after it was moved from");
    check_ids(prompt, "begin: prompt");
    for (std::size_t r = 0; r < references.size(); ++r) check_ids(references[r], "begin: reference");
    finish();
    context_.assign(prompt.begin(), prompt.end());
    references_.reset();
    if (opt_.request) {
      std::size_t n = 0;
      for (const auto& r : references) n += r.size();
      if (n > 0) references_ = std::make_shared<const IndexSegment>(references, index_->options().depth);
    }
    restart();
  }

  /// Rewinds the sequence to its first `n` tokens (RewindableDrafter): the output finish() adds
  /// is what was accepted after the prompt and kept.
  void truncate(std::size_t n) {
    check_truncation(n, context_.size(), "index drafter");
    const std::size_t dropped = context_.size() - n;  // the output's last tokens, then the prompt's
    output_.resize(output_.size() - std::min(output_.size(), dropped));
    context_.resize(n);
    restart();
  }

  /// Ends the sequence without adding its output to the index (ResettableDrafter).
  void reset() {
    output_.clear();
    context_.clear();
    references_.reset();
    restart();
  }

  void propose(std::size_t budget, DraftTree& out) {
    last_match_ = 0;
    if (budget == 0 || context_.empty()) return;
    std::shared_ptr<const ReferenceIndex::Snapshot> snap;
    if (opt_.request && context_.size() >= 2 * context_indexed_) index_context();
    segments_.clear();
    if (opt_.shared) {
      snap = index_->snapshot();
      for (const auto& s : snap->segments) segments_.push_back(s.get());
    }
    if (references_) segments_.push_back(references_.get());
    if (context_segment_) segments_.push_back(context_segment_.get());
    if (segments_.empty()) return;
    // The longest match, each probe a binary search per segment. The first probe is the last
    // match grown by the tokens accepted since, where the next match usually is (it cannot be
    // longer unless the index grew).
    const std::size_t most = std::min({opt_.max_match, context_.size(), segments_.front()->depth() - 1});
    const std::size_t hint = std::min(most, last_match_seen_ + (context_.size() - last_context_size_));
    const std::size_t lo = longest_occurring(most, hint, [&](std::size_t n) { return occurs(n); });
    last_match_seen_ = lo, last_context_size_ = context_.size();
    if (lo == 0) return;
    const std::size_t len = lo;
    const auto pattern = std::span<const Token>(context_).last(len);
    // Best-first over the occurrences' continuations, counted exactly: within a segment the
    // occurrences' suffix array range is sorted by what follows the match (up to the index's
    // depth), so each next token's occurrences are one run of it, found by galloping.
    nodes_.clear();
    runs_.clear();
    heap_.clear();
    Node root;
    root.first_run = 0;
    for (std::size_t si = 0; si < segments_.size(); ++si) {
      const auto [a, b] = segments_[si]->find(pattern);
      if (a < b) runs_.push_back(Run{static_cast<std::uint32_t>(si), a, b});
    }
    root.runs = static_cast<std::uint32_t>(runs_.size());
    nodes_.push_back(root);
    const std::size_t max_depth = std::min(opt_.continuation, segments_.front()->depth() - len);
    std::size_t total = 0;  // occurrences with a continuation
    expand(0, len, total);
    if (total == 0) return;
    last_match_ = len;
    std::size_t kept = 0;
    while (kept < budget && !heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), heap_order);
      const std::int32_t v = heap_.back().node;
      heap_.pop_back();
      Node& n = nodes_[static_cast<std::size_t>(v)];
      n.out = out.add_child(nodes_[static_cast<std::size_t>(n.parent)].out, n.token);
      out.set_score(n.out, static_cast<float>(n.count));
      ++kept;
      if (kept < budget && static_cast<std::size_t>(n.depth) < max_depth) {
        std::size_t unused = 0;
        expand(v, len, unused);
      }
    }
  }

  void accept(std::span<const Token> tokens) {
    check_ids(tokens, "accept");
    context_.insert(context_.end(), tokens.begin(), tokens.end());
    if (adds_output()) output_.insert(output_.end(), tokens.begin(), tokens.end());
  }

  /// Adds the tokens accepted since begin() to the index as one document (nothing if none, or
  /// without options().add_output or options().shared).
  void finish() {
    if (!index_ || output_.empty()) return;
    // Taken before publishing: an add() that throws loses this output once, rather than throwing
    // again at every later begin().
    const std::vector<Token> output = std::exchange(output_, {});
    index_->add(output);
  }

 private:
  // Token ids are never negative: the index's documents end with a negative code, and an id that
  // took its place would let a match run past a document's end.
  static void check_ids(std::span<const Token> tokens, const char* what) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      REFDEC_CHECK(tokens[i] >= 0, "index drafter: " << what << " token " << i << " has the negative id " << tokens[i]);
  }

  // Whether the sequence's output joins the index: the output is kept only then.
  bool adds_output() const { return opt_.add_output && opt_.shared; }

  // A node of the continuation trie: its occurrences are the runs [first_run, first_run + runs).
  struct Node {
    Token token = -1;
    std::int32_t parent = -1;
    std::int32_t depth = 0;  // tokens after the match
    std::int32_t out = 0;    // its index in the DraftTree once kept
    std::size_t count = 0;   // occurrences
    std::size_t first_run = 0;
    std::uint32_t runs = 0;
  };
  struct Run {
    std::uint32_t segment;
    std::size_t lo, hi;  // suffix array ranks
  };
  struct Candidate {
    std::size_t count;
    std::int32_t depth;
    std::int32_t node;
  };
  // Most occurrences first, then shallower, then found first.
  static bool heap_order(const Candidate& a, const Candidate& b) {
    if (a.count != b.count) return a.count < b.count;
    if (a.depth != b.depth) return a.depth > b.depth;
    return a.node > b.node;
  }

  bool occurs(std::size_t len) const {
    const auto pattern = std::span<const Token>(context_).last(len);
    for (const IndexSegment* s : segments_)
      if (s->continues(pattern)) return true;
    return false;
  }

  // Adds node v's children (one per next token, its runs in every segment) as candidates; `with_next`
  // gets the occurrences that have a next token.
  void expand(std::int32_t v, std::size_t match, std::size_t& with_next) {
    const Node parent = nodes_[static_cast<std::size_t>(v)];
    const std::size_t offset = match + static_cast<std::size_t>(parent.depth);
    found_.clear();
    for (std::size_t r = parent.first_run; r < parent.first_run + parent.runs; ++r) {
      const Run run = runs_[r];
      const IndexSegment& seg = *segments_[run.segment];
      const std::uint8_t* lcp = seg.lcp().data();
      seg.visit([&](const auto* codes, const auto* sa) {
        // Every suffix in the run shares `offset` tokens with the one before it; a child's run
        // ends where one shares no more: a byte search instead of reading the text.
        for (std::size_t i = run.lo; i < run.hi;) {
          const void* end = std::memchr(lcp + i + 1, static_cast<int>(offset), run.hi - i - 1);
          const std::size_t next = end != nullptr ? static_cast<std::size_t>(static_cast<const std::uint8_t*>(end) - lcp) : run.hi;
          const std::uint32_t code = codes[sa[i] + offset];  // token + 1, 0 at a document's end
          if (code != 0) found_.push_back({static_cast<Token>(code) - 1, Run{run.segment, i, next}});
          i = next;
        }
      });
    }
    std::sort(found_.begin(), found_.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (std::size_t i = 0; i < found_.size();) {
      Node child;
      child.token = found_[i].first;
      child.parent = v;
      child.depth = parent.depth + 1;
      child.first_run = runs_.size();
      for (; i < found_.size() && found_[i].first == child.token; ++i) {
        runs_.push_back(found_[i].second);
        child.count += found_[i].second.hi - found_[i].second.lo;
        ++child.runs;
      }
      with_next += child.count;
      nodes_.push_back(child);
      heap_.push_back({child.count, child.depth, static_cast<std::int32_t>(nodes_.size() - 1)});
      std::push_heap(heap_.begin(), heap_.end(), heap_order);
    }
  }

  // Drafting starts over on context_: nothing carried from an earlier proposal.
  void restart() {
    last_match_ = last_match_seen_ = 0;
    last_context_size_ = 0;  // the first probe is the longest match allowed
    context_segment_.reset();
    context_indexed_ = 0;
    if (opt_.request) index_context();
  }

  // The request's prompt and output so far as a segment of its own.
  void index_context() {
    context_indexed_ = context_.size();
    if (!context_.empty())
      context_segment_ = std::make_shared<const IndexSegment>(std::span<const Token>(context_), index_->options().depth);
  }

  std::shared_ptr<ReferenceIndex> index_;
  IndexDrafterOptions opt_;
  std::vector<Token> context_;  // prompt and accepted tokens
  std::vector<Token> output_;   // accepted since begin(), kept only when adds_output()
  std::size_t last_match_ = 0;
  std::size_t last_match_seen_ = 0;    // the longest match found by the last proposal (0: none)
  std::size_t last_context_size_ = 0;  // the context's length then
  // options().request: the request's references, and its context up to context_indexed_ tokens.
  std::shared_ptr<const IndexSegment> references_, context_segment_;
  std::size_t context_indexed_ = 0;
  // Scratch of propose().
  std::vector<const IndexSegment*> segments_;  // the snapshot's, then the request's
  std::vector<Node> nodes_;
  std::vector<Run> runs_;
  std::vector<Candidate> heap_;
  std::vector<std::pair<Token, Run>> found_;
};

/// The shared index as sources of a MixtureDrafter: a drafter of the index alone (which adds each
/// sequence's output to it) and, with options.request, one of the request's own text alone. Apart,
/// each source gets estimates of its own: a match in the request's references and one in other
/// requests' outputs are not equally good evidence, and their counts pooled in one drafter mix the
/// two (docs/drafters.md measures both ways).
inline std::vector<IndexDrafter> index_sources(const std::shared_ptr<ReferenceIndex>& index, IndexDrafterOptions options = {}) {
  std::vector<IndexDrafter> out;
  IndexDrafterOptions alone = options;
  alone.request = false, alone.shared = true;
  out.emplace_back(index, alone);
  if (options.request) {
    alone = options, alone.shared = false;
    out.emplace_back(index, alone);
  }
  return out;
}

static_assert(Drafter<IndexDrafter>);
static_assert(MatchReportingDrafter<IndexDrafter>);
static_assert(SequenceEndingDrafter<IndexDrafter>);
static_assert(RewindableDrafter<IndexDrafter>);
static_assert(ResettableDrafter<IndexDrafter>);

REFDEC_NAMESPACE_END
