// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One reference index shared by every sequence an engine serves, grown online: finished outputs
// (and documents added at run time) go in as they come, and every sequence's IndexDrafter drafts
// from all of it without a copy of its own. begin() takes a snapshot (a pointer), nothing that
// grows with the index.
//
// The index is a short list of immutable segments, each a run of documents with a suffix array
// over them and the common prefix of each suffix with the one before it, oldest first. A document
// added becomes a segment of its own; the newest segments are merged while the older of the two
// is at most twice the newer (a merge of two suffix arrays by their common prefixes, since no
// suffix crosses a document's end), so the list stays logarithmic in the index's size; no merge
// makes a segment of more than half the bound. Past the bound the oldest documents go: the oldest
// segment loses them in one pass over its suffixes (down to an eighth below the bound, so such
// passes are rare), and once the index holds half its bound that segment is no longer merged, so
// a cut never follows a rewrite of it. The merges run in add(), or on a thread of the index's own
// (background_merge; add() then waits while that thread is far behind). Readers take the current
// list (a shared pointer copied under a lock held for nothing else); a writer builds the next list
// aside and swaps it in. Continuation counts come from the suffix array
// ranges: how often each next token followed the matched context. A segment may also be a
// datastore file read in place (a saved index reopened, or a static corpus such as REST's:
// refdec/datastore/index_files.hpp); static segments stay first, never merged or dropped.

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
#include "refdec/drafters/drafter.hpp"

REFDEC_NAMESPACE_BEGIN

/// An immutable run of documents with the suffix array of their tokens: every suffix ends at its
/// document's end, and suffixes are ordered by their first `depth` tokens (ties: older first). The
/// arrays are the segment's own, or someone else's read in place (a datastore file mapped in
/// memory, refdec/datastore/index_files.hpp), in the datastore format's layout: each token stored
/// as the code token + 1, with the code 0 ending each document, 2 or 4 bytes a code; suffix array
/// entries 4 or 8 bytes.
class IndexSegment {
 public:
  /// A document's end, as token() gives it.
  static constexpr Token kEnd = -1;
  /// The deepest order a segment keeps (lcp() is a byte a suffix).
  static constexpr std::size_t kMaxDepth = 255;

  /// Arrays held elsewhere (kept alive by the owner given with them), little-endian.
  struct Arrays {
    const void* codes = nullptr;     ///< [num_codes] token + 1, 0 at each document's end (the last code is 0)
    std::uint32_t code_width = 4;    ///< bytes per code: 2 or 4
    std::size_t num_codes = 0;       ///< codes, document ends included
    const void* suffixes = nullptr;  ///< [skip + num_suffixes] code positions, ordered by the codes from there on
    std::uint32_t suffix_width = 4;  ///< bytes per entry: 4 or 8
    std::size_t skip = 0;            ///< the first `skip` entries, the suffixes that start at a document's end, are left out
    std::size_t num_suffixes = 0;    ///< the entries after those: one per token
  };

  /// Calls f(codes, suffixes) with the arrays as typed pointers (std::uint16_t or std::uint32_t
  /// codes, std::uint32_t or std::uint64_t entries, the skipped ones already passed), so that a
  /// hot loop is compiled once per layout instead of asking for the widths at every access.
  template <class F>
  decltype(auto) visit(F&& f) const {
    const auto* c16 = static_cast<const std::uint16_t*>(a_.codes);
    const auto* c32 = static_cast<const std::uint32_t*>(a_.codes);
    const auto* s32 = static_cast<const std::uint32_t*>(a_.suffixes) + a_.skip;
    const auto* s64 = static_cast<const std::uint64_t*>(a_.suffixes) + a_.skip;
    if (a_.code_width == 4) return a_.suffix_width == 4 ? f(c32, s32) : f(c32, s64);
    return a_.suffix_width == 4 ? f(c16, s32) : f(c16, s64);
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
    const int width = std::bit_width(*std::max_element(owned.codes.begin(), owned.codes.end()));
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

  /// A segment over `arrays` held by `owner`, read in place. The suffixes (after the first
  /// arrays.skip) must be ordered by at least their first `depth` tokens; a datastore's are (in
  /// full). lcp() is computed here, a pass over neighbouring suffixes (the one cost of reading a
  /// file in place that grows with it). Throws refdec::ArgumentError for widths other than 2 or 4
  /// (codes), 4 or 8 (entries), or a depth outside [2, kMaxDepth].
  IndexSegment(Arrays arrays, std::shared_ptr<const void> owner, std::size_t depth)
      : depth_(checked_depth(depth)), a_(arrays), owner_(std::move(owner)) {
    REFDEC_CHECK(a_.code_width == 2 || a_.code_width == 4, "reference index: codes must be 2 or 4 bytes, got " << a_.code_width);
    REFDEC_CHECK(a_.suffix_width == 4 || a_.suffix_width == 8,
                 "reference index: suffix entries must be 4 or 8 bytes, got " << a_.suffix_width);
    REFDEC_CHECK(a_.skip + a_.num_suffixes <= a_.num_codes,
                 "reference index: " << a_.skip << " + " << a_.num_suffixes << " suffixes for " << a_.num_codes << " positions");
    finish();
  }

  /// The segment of `older`'s documents followed by `newer`'s (same depth), its own arrays.
  static std::shared_ptr<const IndexSegment> merge(const IndexSegment& older, const IndexSegment& newer) {
    REFDEC_CHECK(older.a_.num_codes + newer.a_.num_codes <= std::size_t{0xFFFFFFFF},
                 "reference index: a merged segment must stay below 2^32 positions");
    const std::size_t depth = older.depth_;
    Owned m;
    older.visit([&](const auto* oc, const auto* os) {
      newer.visit([&](const auto* nc, const auto* ns) {
        m.codes.reserve(older.a_.num_codes + newer.a_.num_codes);
        m.codes.assign(oc, oc + older.a_.num_codes);
        m.codes.insert(m.codes.end(), nc, nc + newer.a_.num_codes);
        m.suffixes.resize(older.tokens() + newer.tokens());
        m.lcp.resize(m.suffixes.size());
        merge_runs(oc, os, older.lcp_.data(), older.tokens(), nc, ns, newer.lcp_.data(), newer.tokens(), older.a_.num_codes,
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
      for (; cut < a_.num_codes && (removed < count || codes[cut] != 0); ++cut) removed += codes[cut] != 0;
      if (++cut >= a_.num_codes) return;  // past the end of the last document removed
      m.codes.assign(codes + cut, codes + a_.num_codes);
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
  std::size_t tokens() const { return a_.num_suffixes; }
  /// Bytes of its arrays (in memory, or mapped).
  std::size_t bytes() const {
    return a_.num_codes * a_.code_width + (a_.skip + a_.num_suffixes) * a_.suffix_width + samples_.size() * sizeof(std::uint64_t) +
           lcp_.size();
  }
  /// Whether its arrays are someone else's, read in place (a mapped file).
  bool in_place() const { return !owned_; }
  /// Positions in the text: the documents' tokens and their ends.
  std::size_t text_size() const { return a_.num_codes; }
  /// The token at text position `pos` (< text_size()), kEnd at a document's end.
  Token token(std::size_t pos) const {
    // In 64 bits: the code of token 2^31 - 1 is 2^31, which as a Token minus one would overflow.
    return visit([&](const auto* codes, const auto*) { return static_cast<Token>(static_cast<std::int64_t>(codes[pos]) - 1); });
  }
  /// The text position where the suffix of rank `rank` (< tokens()) starts.
  std::size_t suffix(std::size_t rank) const {
    return visit([&](const auto*, const auto* sa) { return static_cast<std::size_t>(sa[rank]); });
  }
  std::size_t depth() const { return depth_; }
  /// Per rank, the tokens its suffix shares with the one before it (0 for the first), or depth()
  /// when the two are equal over the depth (or end together): the children of a run of suffixes
  /// that share k tokens start where this is k.
  std::span<const std::uint8_t> lcp() const { return lcp_; }

  /// Whether some suffix starts with `pattern` (fewer than depth() tokens) followed by a token
  /// (not by its document's end): one binary search, since those that end right after it sort
  /// first among the suffixes that start with it.
  bool continues(std::span<const Token> pattern) const {
    // Named variables, not a structured binding: clang before 16 cannot capture a binding.
    const auto range = window(pattern);
    const std::size_t first = range.first, last = range.second;
    return visit([&](const auto* codes, const auto* sa) {
      const auto* end = sa + last;
      const auto* lo = std::partition_point(sa + first, end, [&](auto s) {
        const int c = compare_prefix(codes, s, pattern);
        return c < 0 || (c == 0 && codes[s + pattern.size()] == 0);
      });
      return lo != end && compare_prefix(codes, *lo, pattern) == 0;
    });
  }

  /// The ranks [first, second) of the suffixes that start with `pattern` (at most depth() tokens).
  std::pair<std::size_t, std::size_t> find(std::span<const Token> pattern) const {
    const auto range = window(pattern);
    const std::size_t first = range.first, last = range.second;
    return visit([&](const auto* codes, const auto* sa) {
      const auto* end = sa + last;
      const auto* lo = std::partition_point(sa + first, end, [&](auto s) { return compare_prefix(codes, s, pattern) < 0; });
      const auto a = static_cast<std::size_t>(lo - sa);
      if (lo == end || compare_prefix(codes, *lo, pattern) != 0) return std::pair<std::size_t, std::size_t>(a, a);
      // The range goes on while a suffix shares the pattern with the one before it: a few bytes of
      // lcp() read in place of a second search, unless the range is long.
      std::size_t b = a + 1;
      for (const std::size_t stop = std::min(last, a + 64); b < stop && lcp_[b] >= pattern.size();) ++b;
      if (b == a + 64 && b < last)
        b = static_cast<std::size_t>(std::partition_point(sa + b, end, [&](auto s) { return compare_prefix(codes, s, pattern) == 0; }) -
                                     sa);
      return std::pair<std::size_t, std::size_t>(a, b);
    });
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
    a_ = Arrays{.codes = held->codes.data(),
                .code_width = 4,
                .num_codes = held->codes.size(),
                .suffixes = held->suffixes.data(),
                .suffix_width = 4,
                .skip = 0,
                .num_suffixes = held->suffixes.size()};
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
  // The suffix at s against `pattern`: 0 when the suffix starts with it.
  template <class C>
  static int compare_prefix(const C* codes, std::size_t s, std::span<const Token> pattern) {
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      const std::uint32_t c = codes[s + i], p = static_cast<std::uint32_t>(pattern[i]) + 1;
      if (c != p) return c < p ? -1 : 1;
    }
    return 0;
  }

  std::size_t depth_;
  Arrays a_;
  std::shared_ptr<const void> owner_;   // keeps the arrays alive
  bool owned_ = false;                  // owner_ holds an Owned: the arrays are this segment's own
  std::vector<std::uint64_t> samples_;  // key of the suffix of rank k * kSampleEvery
  std::vector<std::uint8_t> lcp_;       // lcp()
};

/// Settings of a ReferenceIndex.
struct ReferenceIndexOptions {
  /// Tokens kept at most in the grown segments (static ones not counted): past it the oldest
  /// documents are dropped, down to an eighth below it. No merge makes a segment of more than half
  /// of it.
  std::size_t max_tokens = std::size_t{1} << 26;
  /// Suffixes are ordered by this many tokens (2 to 255): a match and its continuations are at most this long.
  std::size_t depth = 64;
  /// Merge segments on a thread of the index's own instead of in add(): add() then only sorts its
  /// document's suffixes (and waits while that thread is ReferenceIndex::kMaxSegments segments
  /// behind), and readers meanwhile search a few more (small) segments.
  bool background_merge = false;
  /// Bytes kept at most in the grown segments (their bytes(); 0: no bound but max_tokens): past it
  /// the oldest documents are dropped, down to an eighth below it (a single document larger than
  /// it stays until the next one comes).
  std::size_t max_bytes = 0;
};

/// The shared, growing index (see the top of this file). Thread-safe: any number of readers
/// (snapshot()) and writers (add(); one at a time, the others wait for it, readers never do).
class ReferenceIndex {
 public:
  /// The segments at one moment: the static ones (add_static()) first, then the grown ones,
  /// oldest first.
  struct Snapshot {
    std::vector<std::shared_ptr<const IndexSegment>> segments;
    std::size_t statics = 0;  ///< how many of the first segments are static
    std::size_t tokens = 0;   ///< in every segment
    std::size_t bytes = 0;    ///< of every segment (mapped ones included)
  };

  /// With background_merge, add() waits while the grown segments would be more than this many
  /// (the merging thread is behind): readers never face more.
  static constexpr std::size_t kMaxSegments = 64;

  explicit ReferenceIndex(ReferenceIndexOptions options = {}) : opt_(options), current_(std::make_shared<const Snapshot>()) {
    REFDEC_CHECK(opt_.max_tokens >= 1 && opt_.max_tokens <= (std::size_t{1} << 31),
                 "reference index: max_tokens must be in [1, 2^31], got " << opt_.max_tokens);
    REFDEC_CHECK(opt_.depth >= 2 && opt_.depth <= IndexSegment::kMaxDepth,
                 "reference index: depth must be in [2, " << IndexSegment::kMaxDepth << "], got " << opt_.depth);
    if (opt_.background_merge) merger_ = std::thread([this] { merge_loop(); });
  }
  ReferenceIndex(const ReferenceIndex&) = delete;
  ReferenceIndex& operator=(const ReferenceIndex&) = delete;
  ~ReferenceIndex() {
    if (!merger_.joinable()) return;
    {
      const std::lock_guard writer(writer_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    merger_.join();
  }

  const ReferenceIndexOptions& options() const { return opt_; }

  /// Adds one document (a finished output, or text an engine wants drafted from; token ids >= 0).
  /// An empty one is ignored; one longer than max_tokens keeps its last max_tokens tokens. It is
  /// drafted from as soon as this returns.
  void add(std::span<const Token> document) {
    if (document.empty()) return;
    if (document.size() > opt_.max_tokens) document = document.last(opt_.max_tokens);
    insert({std::make_shared<const IndexSegment>(document, opt_.depth)}, false);  // validates, outside every lock
  }

  /// Adds a sealed segment (a datastore file read in place, refdec/datastore/index_files.hpp) as
  /// the newest: merged and dropped like the others. Throws refdec::ArgumentError for a null
  /// segment, another depth than the index's, or more tokens than max_tokens.
  void add_segment(std::shared_ptr<const IndexSegment> segment) { add_segments({std::move(segment)}); }

  /// Adds sealed segments, oldest first, as add_segment() adds each, but merged only once all are
  /// in: a saved index reopened keeps the layout it was saved with (its segments were settled by
  /// the same rules) and is read in place. Throws as add_segment() does, adding none.
  void add_segments(std::vector<std::shared_ptr<const IndexSegment>> segments) {
    for (const auto& segment : segments) check_joinable(segment.get());
    insert(std::move(segments), false);
  }

  /// Throws refdec::ArgumentError when `segment` cannot be added by add_segment(): null, ordered
  /// by another depth than the index's, or more tokens than max_tokens.
  void check_joinable(const IndexSegment* segment) const {
    check_segment(segment);
    REFDEC_CHECK(segment->tokens() <= opt_.max_tokens,
                 "reference index: a segment of " << segment->tokens() << " tokens exceeds max_tokens " << opt_.max_tokens);
  }

  /// Adds a segment that stays (a static corpus, such as a REST datastore, drafted from together
  /// with the grown outputs): never merged, never dropped, not counted against max_tokens; after
  /// the static segments added before it. Throws refdec::ArgumentError as add_segment() does.
  void add_static(std::shared_ptr<const IndexSegment> segment) {
    check_segment(segment.get());
    insert({std::move(segment)}, true);
  }

  /// Returns once no merge is due (at once without background_merge): for tests and benchmarks
  /// that want the settled shape.
  void wait_for_merges() {
    std::unique_lock writer(writer_mutex_);
    merged_.wait(writer, [&] { return !opt_.background_merge || settled(*snapshot()); });
  }

  /// The index as it is now; stays valid (and unchanged) while held.
  std::shared_ptr<const Snapshot> snapshot() const {
    const std::lock_guard lock(snapshot_mutex_);
    return current_;
  }

  std::size_t tokens() const { return snapshot()->tokens; }
  std::size_t bytes() const { return snapshot()->bytes; }

 private:
  void check_segment(const IndexSegment* segment) const {
    REFDEC_CHECK(segment != nullptr, "reference index: a segment must not be null");
    REFDEC_CHECK(segment->depth() == opt_.depth,
                 "reference index: a segment ordered by " << segment->depth() << " tokens cannot join an index of depth " << opt_.depth);
  }

  // Puts `segments` (oldest first) into the next list, each making room for itself, then merges
  // the newest pair while the rule holds (with background_merge the merging thread does, and this
  // waits first while it is kMaxSegments behind), and publishes it.
  void insert(std::vector<std::shared_ptr<const IndexSegment>> segments, bool is_static) {
    {
      std::unique_lock writer(writer_mutex_);
      if (opt_.background_merge && !is_static) {
        // Merging here as well would race the merging thread for the same pairs (its merges of a
        // pair merged here meanwhile are thrown away): wait for it instead.
        merged_.wait(writer, [&] {
          const auto snap = snapshot();
          return snap->segments.size() - snap->statics + segments.size() <= kMaxSegments || settled(*snap);
        });
      }
      const auto now = snapshot();
      auto next = std::make_shared<Snapshot>();
      next->segments = now->segments;
      next->statics = now->statics;
      auto& segs = next->segments;
      if (is_static) {
        for (auto& segment : segments) segs.insert(segs.begin() + static_cast<std::ptrdiff_t>(next->statics++), std::move(segment));
      } else {
        for (auto& segment : segments) {
          make_room(*next, *segment);
          segs.push_back(std::move(segment));
        }
        if (!opt_.background_merge) {
          // The newest pair while the rule holds: the candidates a merge leaves are at the end.
          for (std::size_t i; (i = candidate(*next)) == segs.size() - 1 && i > 0;) {
            auto merged = IndexSegment::merge(*segs[i - 1], *segs[i]);
            segs.pop_back();
            segs.back() = std::move(merged);
          }
        }
      }
      publish(std::move(next));
    }
    if (opt_.background_merge) wake_.notify_all();
  }

  // Whether `tokens` and `bytes` of grown segments are past the bound scaled by `share`.
  bool past(std::size_t tokens, std::size_t bytes, double share) const {
    return static_cast<double>(tokens) > share * static_cast<double>(opt_.max_tokens) ||
           (opt_.max_bytes > 0 && static_cast<double>(bytes) > share * static_cast<double>(opt_.max_bytes));
  }

  // Drops the oldest documents of `next`'s grown segments when `newest` would take them past the
  // bound: whole segments, then the oldest documents of the oldest one (without_oldest()), down to
  // an eighth below the bound so that the next such pass is far off. The newest is kept whole.
  void make_room(Snapshot& next, const IndexSegment& newest) const {
    auto& segs = next.segments;
    std::size_t grown = newest.tokens(), grown_bytes = newest.bytes();
    for (std::size_t i = next.statics; i < segs.size(); ++i) grown += segs[i]->tokens(), grown_bytes += segs[i]->bytes();
    if (!past(grown, grown_bytes, 1.0)) return;
    constexpr double kLow = 7.0 / 8;
    while (segs.size() > next.statics && past(grown, grown_bytes, kLow)) {
      auto& oldest = segs[next.statics];
      // Tokens to remove: past the bound on tokens, or on bytes at the oldest's bytes a token.
      const double over = std::max(static_cast<double>(grown) - kLow * static_cast<double>(opt_.max_tokens),
                                   opt_.max_bytes == 0 ? 0.0
                                                       : (static_cast<double>(grown_bytes) - kLow * static_cast<double>(opt_.max_bytes)) *
                                                             static_cast<double>(oldest->tokens()) / static_cast<double>(oldest->bytes()));
      grown -= oldest->tokens(), grown_bytes -= oldest->bytes();
      auto rest = oldest->without_oldest(static_cast<std::size_t>(std::ceil(over)));
      if (rest == nullptr) {
        segs.erase(segs.begin() + static_cast<std::ptrdiff_t>(next.statics));
        continue;
      }
      grown += rest->tokens(), grown_bytes += rest->bytes();
      oldest = std::move(rest);
    }
  }

  // The newest i such that grown segments i - 1 and i are due for a merge (the older at most twice
  // the newer, together at most half the bound: no merge rewrites more), or 0 for none. Once the
  // grown segments hold half the bound the oldest is left out: it is the one make_room() cuts.
  std::size_t candidate(const Snapshot& snap) const {
    const auto& segs = snap.segments;
    std::size_t grown = 0, grown_bytes = 0;
    for (std::size_t i = snap.statics; i < segs.size(); ++i) grown += segs[i]->tokens(), grown_bytes += segs[i]->bytes();
    const std::size_t first = snap.statics + (past(grown, grown_bytes, 0.5) ? 2 : 1);
    for (std::size_t i = segs.size(); i-- > first;)
      if (segs[i - 1]->tokens() <= 2 * segs[i]->tokens() && segs[i - 1]->tokens() + segs[i]->tokens() <= opt_.max_tokens / 2) return i;
    return 0;
  }

  // Swaps in `next` (its byte total computed here). Called with writer_mutex_ held.
  void publish(std::shared_ptr<Snapshot> next) {
    next->tokens = next->bytes = 0;
    for (const auto& s : next->segments) next->tokens += s->tokens(), next->bytes += s->bytes();
    std::shared_ptr<const Snapshot> published = std::move(next);
    const std::lock_guard swap(snapshot_mutex_);
    current_.swap(published);
  }

  // The merging thread: merges the newest pair due, outside every lock, then puts the result in
  // place of the pair if both are still there (an eviction may have dropped them meanwhile).
  void merge_loop() {
    std::unique_lock writer(writer_mutex_);
    while (!stop_) {
      const auto snap = snapshot();
      const std::size_t i = candidate(*snap);
      if (i == 0) {
        merging_ = false;
        merged_.notify_all();
        wake_.wait(writer);
        continue;
      }
      merging_ = true;
      const auto older = snap->segments[i - 1], newer = snap->segments[i];
      writer.unlock();
      auto merged = IndexSegment::merge(*older, *newer);
      writer.lock();
      const auto now = snapshot();
      for (std::size_t j = 1; j < now->segments.size(); ++j) {
        if (now->segments[j - 1] != older || now->segments[j] != newer) continue;
        auto next = std::make_shared<Snapshot>(*now);
        next->segments[j - 1] = std::move(merged);
        next->segments.erase(next->segments.begin() + static_cast<std::ptrdiff_t>(j));
        publish(std::move(next));
        break;
      }
      merged_.notify_all();
    }
  }

  // With background_merge: whether the merging thread has nothing to do. Called with
  // writer_mutex_ held.
  bool settled(const Snapshot& snap) const { return !merging_ && candidate(snap) == 0; }

  ReferenceIndexOptions opt_;
  std::mutex writer_mutex_;            // one change of the segment list at a time
  mutable std::mutex snapshot_mutex_;  // held only to copy or swap current_
  std::shared_ptr<const Snapshot> current_;
  // background_merge only.
  std::thread merger_;
  std::condition_variable wake_;    // the list changed, or stop_
  std::condition_variable merged_;  // a merge was put in place, or none is due
  bool merging_ = false;
  bool stop_ = false;
};

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
    // The longest match: a suffix occurs whenever a longer one does, so the length is searched by
    // halves, each probe a binary search per segment.
    const std::size_t most = std::min({opt_.max_match, context_.size(), segments_.front()->depth() - 1});
    std::size_t lo = 0, hi = most;  // lo occurs (0 trivially); the answer is in [lo, hi]
    // First probe: the last match grown by the tokens accepted since, where the next match
    // usually is (it cannot be longer unless the index grew).
    const std::size_t hint = std::min(most, last_match_seen_ + (context_.size() - last_context_size_));
    if (hint > 0) {
      if (occurs(hint))
        lo = hint;
      else
        hi = hint - 1;
    }
    while (lo < hi) {
      const std::size_t mid = (lo + hi + 1) / 2;
      if (occurs(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
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
