// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One segment of a ReferenceIndex (refdec/index/reference_index.hpp): an immutable run of
// documents with its suffix array, searched for the longest match and its continuations.

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
#include "refdec/core/references.hpp"
#include "refdec/datastore/suffix_view.hpp"

REFDEC_NAMESPACE_BEGIN

/// An immutable run of documents with the suffix array of their tokens: every suffix ends at its
/// document's end, and suffixes are ordered by their first `depth` tokens (ties: older first). The
/// arrays are the segment's own, or someone else's read in place (a datastore file mapped in
/// memory, refdec/index/index_files.hpp), in the datastore format's layout, searched through
/// SuffixArrayView.
class IndexSegment {
 public:
  /// A document's end, as token() gives it.
  static constexpr Token kEnd = -1;
  /// The deepest order a segment keeps (lcp() is a byte a suffix).
  static constexpr std::size_t kMaxDepth = 255;

  /// Calls f(codes, suffixes) with the arrays as typed pointers: SuffixArrayView::visit.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return view_.visit(std::forward<F>(f));
  }

  /// A segment of one document (token ids >= 0, not empty).
  IndexSegment(std::span<const Token> document, std::size_t depth)
      : IndexSegment(References(std::vector<std::span<const Token>>{document}), depth) {}

  /// A segment of `documents` (token ids >= 0; empty ones skipped, at least one token in all).
  IndexSegment(References documents, std::size_t depth) : depth_(checked_depth(depth)) {
    std::size_t n = 0;
    for (const auto& d : documents) n += d.size();
    REFDEC_CHECK(n > 0, "reference index: a document must not be empty");
    Owned owned;
    owned.codes.reserve(n + documents.size());
    owned.suffixes.reserve(n);
    for (const auto& d : documents) {
      if (d.empty()) continue;
      for (const Token t : d) {
        REFDEC_CHECK(t >= 0, "reference index: token ids must be non-negative, got " << t);
        owned.suffixes.push_back(static_cast<std::uint32_t>(owned.codes.size()));
        owned.codes.push_back(static_cast<std::uint32_t>(t) + 1);
      }
      owned.codes.push_back(0);
    }
    // Sorted by their first two tokens as one integer key (a radix sort, stable: ties in text
    // order), the text read only to order those that share both.
    const std::uint32_t* codes = owned.codes.data();
    const auto width = static_cast<int>(std::bit_width(*std::max_element(owned.codes.begin(), owned.codes.end())));
    std::vector<std::uint64_t> keys(n), other_keys(n);
    std::vector<std::uint32_t> other(n);
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint32_t p = owned.suffixes[r];
      keys[r] = std::uint64_t{codes[p]} << width | codes[p + 1];
    }
    for (int shift = 0; shift < 2 * width; shift += 8) {
      std::size_t start[257] = {};
      for (const std::uint64_t k : keys) ++start[((k >> shift) & 0xFF) + 1];
      for (std::size_t d = 1; d < 257; ++d) start[d] += start[d - 1];
      for (std::size_t r = 0; r < n; ++r) {
        const std::size_t to = start[(keys[r] >> shift) & 0xFF]++;
        other[to] = owned.suffixes[r], other_keys[to] = keys[r];
      }
      owned.suffixes.swap(other), keys.swap(other_keys);
    }
    for (std::size_t r = 0, e; r < n; r = e) {
      for (e = r + 1; e < n && keys[e] == keys[r];) ++e;
      if (e - r > 1 && codes[owned.suffixes[r] + 1] != 0)  // not all ending after one token: equal
        std::sort(owned.suffixes.begin() + static_cast<std::ptrdiff_t>(r), owned.suffixes.begin() + static_cast<std::ptrdiff_t>(e),
                  [&](std::uint32_t a, std::uint32_t b) {
                    const std::size_t l = common(codes, a, codes, b, 2, depth_);
                    return l != depth_ ? codes[a + l] < codes[b + l] : a < b;
                  });
    }
    own(std::move(owned));
  }

  /// A segment over the arrays of `view` held by `owner`, read in place. The suffixes must be
  /// ordered by at least their first `depth` tokens; a datastore's are (in full). lcp() is
  /// computed here, a pass over neighbouring suffixes (the one cost of reading a file in place
  /// that grows with it). Throws refdec::ArgumentError for a depth outside [2, kMaxDepth].
  IndexSegment(SuffixArrayView view, std::shared_ptr<const void> owner, std::size_t depth)
      : depth_(checked_depth(depth)), view_(std::move(view)), owner_(std::move(owner)) {
    finish();
  }

  /// The segment of `older`'s documents followed by `newer`'s (same depth), its own arrays.
  static std::shared_ptr<const IndexSegment> merge(const IndexSegment& older, const IndexSegment& newer) {
    REFDEC_CHECK(older.text_size() + newer.text_size() <= std::size_t{0xFFFFFFFF},
                 "reference index: a merged segment must stay below 2^32 positions");
    const std::size_t depth = older.depth_;
    Owned m;
    older.visit([&](const auto* oc, const auto* os) {
      newer.visit([&](const auto* nc, const auto* ns) {
        m.codes.reserve(older.text_size() + newer.text_size());
        m.codes.assign(oc, oc + older.text_size());
        m.codes.insert(m.codes.end(), nc, nc + newer.text_size());
        m.suffixes.resize(older.tokens() + newer.tokens());
        m.lcp.resize(m.suffixes.size());
        merge_runs(oc, os, older.lcp_.data(), older.tokens(), nc, ns, newer.lcp_.data(), newer.tokens(), older.text_size(),
                   m.suffixes.data(), m.lcp.data(), depth);
      });
    });
    auto merged = std::shared_ptr<IndexSegment>(new IndexSegment(depth));
    merged->own(std::move(m));
    return merged;
  }

  /// This segment without its oldest documents that hold at least `count` tokens (whole
  /// documents: the cut is at the start of the next one), its own arrays; null when none would be
  /// left. One pass over the suffixes: they keep their order, and each common prefix becomes the
  /// least of those it spans.
  std::shared_ptr<const IndexSegment> without_oldest(std::size_t count) const {
    Owned m;
    visit([&](const auto* codes, const auto* sa) {
      std::size_t cut = 0, removed = 0;
      const std::size_t n = text_size();
      for (; cut < n && (removed < count || codes[cut] != 0); ++cut) removed += codes[cut] != 0;
      if (++cut >= n) return;  // past the end of the last document removed
      m.codes.assign(codes + cut, codes + n);
      m.suffixes.resize(tokens() - removed);
      m.lcp.resize(m.suffixes.size());
      std::uint8_t least = 0;  // the least common prefix since the last suffix kept
      for (std::size_t r = 0, k = 0; r < tokens(); ++r) {
        least = std::min(least, lcp_[r]);
        if (sa[r] < cut) continue;
        m.lcp[k] = k == 0 ? 0 : least;
        m.suffixes[k++] = static_cast<std::uint32_t>(sa[r] - cut);
        least = 0xFF;
      }
    });
    if (m.suffixes.empty()) return nullptr;
    auto rest = std::shared_ptr<IndexSegment>(new IndexSegment(depth_));
    rest->own(std::move(m));
    return rest;
  }

  /// Tokens indexed (document ends excluded): the suffixes.
  std::size_t tokens() const { return view_.size(); }
  /// Bytes of its arrays (in memory, or mapped).
  std::size_t bytes() const {
    const SuffixArrayView::Arrays& a = view_.arrays();
    return a.num_codes * a.code_width + (a.skip + a.num_suffixes) * a.suffix_width + samples_.size() * sizeof(std::uint64_t) + lcp_.size();
  }
  /// Whether its arrays are someone else's, read in place (a mapped file).
  bool in_place() const { return !owned_; }
  /// Positions in the text: the documents' tokens and their ends.
  std::size_t text_size() const { return view_.text_size(); }
  /// The token at text position `pos` (< text_size()), kEnd at a document's end.
  Token token(std::size_t pos) const { return view_.token(pos); }
  /// The text position where the suffix of rank `rank` (< tokens()) starts.
  std::size_t suffix(std::size_t rank) const { return view_.suffix(rank); }
  /// The arrays, searched.
  const SuffixArrayView& view() const { return view_; }
  std::size_t depth() const { return depth_; }
  /// Per rank, the tokens its suffix shares with the one before it (0 for the first), or depth()
  /// when the two are equal over the depth (or end together): the children of a run of suffixes
  /// that share k tokens start where this is k.
  std::span<const std::uint8_t> lcp() const { return lcp_; }

  /// Whether some suffix starts with `pattern` (fewer than depth() tokens) followed by a token
  /// (not by its document's end): one binary search, since those that end right after it sort
  /// first among the suffixes that start with it.
  bool continues(std::span<const Token> pattern) const {
    const auto [first, last] = window(pattern);
    return view_.continues(pattern, first, last);
  }

  /// The ranks [first, second) of the suffixes that start with `pattern` (at most depth() tokens).
  SuffixRange find(std::span<const Token> pattern) const {
    const auto [first, last] = window(pattern);
    return view_.find(pattern, first, last, lcp_);
  }

 private:
  struct Owned {
    std::vector<std::uint32_t> codes;
    std::vector<std::uint32_t> suffixes;
    std::vector<std::uint8_t> lcp;  // lcp(), when known
  };
  explicit IndexSegment(std::size_t depth) : depth_(depth) {}
  static std::size_t checked_depth(std::size_t depth) {
    REFDEC_CHECK(depth >= 2 && depth <= kMaxDepth, "reference index: a segment's depth must be in [2, " << kMaxDepth << "], got " << depth);
    return depth;
  }

  void own(Owned owned) {
    lcp_ = std::move(owned.lcp);
    auto held = std::make_shared<Owned>(std::move(owned));
    view_ = SuffixArrayView({.codes = held->codes.data(),
                             .code_width = 4,
                             .num_codes = held->codes.size(),
                             .suffixes = held->suffixes.data(),
                             .suffix_width = 4,
                             .num_suffixes = held->suffixes.size()},
                            "reference index segment");
    owner_ = std::move(held);
    owned_ = true;
    finish();
  }

  // The common prefixes (unless a merge or a cut gave them) and the samples.
  void finish() {
    visit([&](const auto* codes, const auto* sa) {
      if (lcp_.size() != tokens()) {
        lcp_.resize(tokens());
        for (std::size_t r = 0; r < tokens(); ++r)
          lcp_[r] = static_cast<std::uint8_t>(r == 0 ? 0 : common(codes, sa[r - 1], codes, sa[r], 0, depth_));
      }
    });
    sample();
  }

  // Every kSampleEvery-th suffix's first two codes as one key, in order: a search narrows to the
  // suffixes between two samples in this small array before it reads the text.
  static constexpr std::size_t kSampleEvery = 16;
  static std::uint64_t key(std::uint32_t first, std::uint32_t second) { return std::uint64_t{first} << 32 | second; }
  void sample() {
    samples_.resize((tokens() + kSampleEvery - 1) / kSampleEvery);
    visit([&](const auto* codes, const auto* sa) {
      for (std::size_t k = 0; k < samples_.size(); ++k) {
        const std::size_t r = k * kSampleEvery;
        // The previous sample's key when every suffix since shares its first two tokens: the text
        // is read only where the key changes.
        bool changed = k == 0;
        for (std::size_t i = r + 1 - kSampleEvery; !changed && i <= r; ++i) changed = lcp_[i] < 2;
        if (!changed) {
          samples_[k] = samples_[k - 1];
          continue;
        }
        const std::size_t s = sa[r];
        samples_[k] = key(codes[s], codes[s] == 0 ? 0 : codes[s + 1]);
      }
    });
  }
  // The ranks [first, last) outside which no suffix starts with `pattern` (not empty), every one
  // before them below it.
  std::pair<std::size_t, std::size_t> window(std::span<const Token> pattern) const {
    const auto p0 = static_cast<std::uint32_t>(pattern[0]) + 1;
    const std::uint64_t low = pattern.size() >= 2 ? key(p0, static_cast<std::uint32_t>(pattern[1]) + 1) : key(p0, 0);
    const std::uint64_t high = pattern.size() >= 2 ? low : key(p0, 0xFFFFFFFFu);
    const auto a = static_cast<std::size_t>(std::lower_bound(samples_.begin(), samples_.end(), low) - samples_.begin());
    const auto b = static_cast<std::size_t>(std::upper_bound(samples_.begin() + static_cast<std::ptrdiff_t>(a), samples_.end(), high) -
                                            samples_.begin());
    // Sample a - 1 is below every match, sample b above.
    return {a == 0 ? 0 : (a - 1) * kSampleEvery + 1, std::min(b * kSampleEvery, tokens())};
  }

  // Merges the sorted suffixes xs (positions in x's codes, with their common prefixes xl: xl[r]
  // that of xs[r] with xs[r - 1]) and ys (positions in y's codes, written shifted by y_shift)
  // into `out` and `out_lcp`, ties to x. h is the common prefix of the last suffix written with
  // the other list's current one, and each list's own prefixes mostly decide the next one without
  // reading the text: a suffix that shares more with the one before it than that one shared with
  // the other list's goes on the same side, one that shares less goes after the other list's;
  // only when they are equal are tokens compared, from h on.
  template <class XC, class XS, class YC, class YS>
  static void merge_runs(const XC* xc, const XS* xs, const std::uint8_t* xl, std::size_t nx, const YC* yc, const YS* ys,
                         const std::uint8_t* yl, std::size_t ny, std::size_t y_shift, std::uint32_t* out, std::uint8_t* out_lcp,
                         std::size_t depth) {
    std::size_t i = 0, j = 0, h = 0;
    std::size_t first_lcp = 0;  // the common prefix of the next suffix written with the one before it
    // Whether the current x suffix goes before the current y one, given h: ties to x.
    const auto x_before = [&] {
      h = common(xc, xs[i], yc, ys[j], h, depth);
      return h == depth || xc[xs[i] + h] < yc[ys[j] + h];
    };
    if (nx > 0 && ny > 0) {
      if (!x_before()) goto y_run;
      // A run of x suffixes: each one that shares more with the one before it than h goes on it;
      // one that shares less goes after the current y suffix (which shares h with the last x).
    x_run:
      for (*out++ = static_cast<std::uint32_t>(xs[i]), *out_lcp++ = static_cast<std::uint8_t>(first_lcp);;) {
        if (++i == nx) goto rest;
        const std::size_t l = xl[i], before = h;
        if (l < h || (l == h && !x_before())) {
          first_lcp = before, h = l < before ? l : h;
          goto y_run;
        }
        *out++ = static_cast<std::uint32_t>(xs[i]), *out_lcp++ = static_cast<std::uint8_t>(l);
      }
    y_run:
      for (*out++ = static_cast<std::uint32_t>(ys[j] + y_shift), *out_lcp++ = static_cast<std::uint8_t>(first_lcp);;) {
        if (++j == ny) goto rest;
        const std::size_t l = yl[j], before = h;
        if (l < h || (l == h && x_before())) {
          first_lcp = before, h = l < before ? l : h;
          goto x_run;
        }
        *out++ = static_cast<std::uint32_t>(ys[j] + y_shift), *out_lcp++ = static_cast<std::uint8_t>(l);
      }
    }
  rest:
    // One list is done; the first of the other shares h with the last suffix written.
    if (i < nx) {
      *out++ = static_cast<std::uint32_t>(xs[i]), *out_lcp++ = static_cast<std::uint8_t>(ny > 0 ? h : 0);
      for (++i; i < nx; ++i) *out++ = static_cast<std::uint32_t>(xs[i]), *out_lcp++ = xl[i];
    }
    if (j < ny) {
      *out++ = static_cast<std::uint32_t>(ys[j] + y_shift), *out_lcp++ = static_cast<std::uint8_t>(nx > 0 ? h : 0);
      for (++j; j < ny; ++j) *out++ = static_cast<std::uint32_t>(ys[j] + y_shift), *out_lcp++ = yl[j];
    }
  }

  // The tokens the suffix at a of `x` shares with the one at b of `y`, known to share `from`, or
  // `depth` when they are equal over it (two suffixes that end together are equal; a document's
  // end, code 0, sorts below every token).
  template <class X, class Y>
  static std::size_t common(const X* x, std::size_t a, const Y* y, std::size_t b, std::size_t from, std::size_t depth) {
    for (std::size_t i = from; i < depth; ++i) {
      const std::uint32_t p = x[a + i], q = y[b + i];
      if (p != q) return i;
      if (p == 0) return depth;
    }
    return depth;
  }
  std::size_t depth_;
  SuffixArrayView view_;
  std::shared_ptr<const void> owner_;   // keeps the arrays alive
  bool owned_ = false;                  // owner_ holds an Owned: the arrays are this segment's own
  std::vector<std::uint64_t> samples_;  // key of the suffix of rank k * kSampleEvery
  std::vector<std::uint8_t> lcp_;       // lcp()
};

REFDEC_NAMESPACE_END
