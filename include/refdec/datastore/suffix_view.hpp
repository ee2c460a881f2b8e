// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A suffix array in the datastore format's layout (refdec/datastore/format.hpp), read in place,
// and the searches over it. The REST datastore (reader.hpp) and the reference index's segments
// (refdec/index/segment.hpp) both search through it: one reader of the format.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// The suffix array ranks [begin, end) of the suffixes that start with a searched string.
struct SuffixRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const SuffixRange&, const SuffixRange&) = default;
};

namespace suffix_view_detail {
// Functions outside the class: clang 14 leaves a member template that generic lambdas in the
// class's body call, declared after them, uninstantiated (undefined references at link time).

// The suffix at position `s` against `pattern`: <0, 0 (it starts with the pattern) or >0.
template <class C>
int compare_prefix(const C* codes, std::size_t s, std::span<const Token> pattern) {
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const std::uint32_t c = codes[s + i], p = static_cast<std::uint32_t>(pattern[i]) + 1;
    if (c != p) return c < p ? -1 : 1;
  }
  return 0;
}

// The first rank in [first, last) where below(rank) turns false (true, then false, along the
// ranks).
template <class Below>
std::size_t partition(std::size_t first, std::size_t last, Below below) {
  std::size_t lo = first, hi = last;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (below(mid))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}
}  // namespace suffix_view_detail

/// Token codes and the suffix array over them, held elsewhere (the view owns nothing), in the
/// datastore format's layout, little-endian: each token stored as the code token + 1, the code 0
/// ending each document (the last code is 0), 2 or 4 bytes a code; suffix array entries (code
/// positions) 4 or 8 bytes, ordered by the codes from there on. Searches range-check every entry
/// they read, so that a corrupt array is an error, not a read outside the codes.
class SuffixArrayView {
 public:
  /// The arrays and their layout.
  struct Arrays {
    const void* codes = nullptr;     ///< [num_codes] token + 1, 0 at each document's end (the last code is 0)
    std::uint32_t code_width = 4;    ///< bytes per code: 2 or 4
    std::size_t num_codes = 0;       ///< codes, document ends included
    const void* suffixes = nullptr;  ///< [skip + num_suffixes] code positions, sorted
    std::uint32_t suffix_width = 4;  ///< bytes per entry: 4 or 8
    std::size_t skip = 0;            ///< entries left out at the front (a datastore's suffixes that start at a document's end)
    std::size_t num_suffixes = 0;    ///< the entries after those, ranks 0 to num_suffixes - 1
  };

  SuffixArrayView() = default;
  /// A view of `arrays`, named `label` in errors ("datastore \"docs.ds\""). Throws
  /// refdec::ArgumentError for widths other than 2 or 4 (codes) and 4 or 8 (entries) or more
  /// entries than codes, refdec::IoError when the codes do not end with a document end.
  SuffixArrayView(Arrays arrays, std::string label) : a_(arrays), label_(std::move(label)) {
    REFDEC_CHECK(a_.code_width == 2 || a_.code_width == 4, label_ << ": codes must be 2 or 4 bytes, got " << a_.code_width);
    REFDEC_CHECK(a_.suffix_width == 4 || a_.suffix_width == 8, label_ << ": suffix entries must be 4 or 8 bytes, got " << a_.suffix_width);
    REFDEC_CHECK(a_.skip + a_.num_suffixes <= a_.num_codes,
                 label_ << ": " << a_.skip << " + " << a_.num_suffixes << " suffixes for " << a_.num_codes << " positions");
    // Comparisons stop at a code that differs from the pattern's: the final 0 stops them inside
    // the codes.
    REFDEC_CHECK_IO(a_.num_codes == 0 || code(a_.num_codes - 1) == 0,
                    "corrupt " << label_ << ": the codes do not end with a document separator (code 0)");
  }

  const Arrays& arrays() const { return a_; }
  const std::string& label() const { return label_; }
  /// Ranks: the suffixes searched.
  std::size_t size() const { return a_.num_suffixes; }
  /// Code positions, document ends included.
  std::size_t text_size() const { return a_.num_codes; }

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

  /// The code at position `pos` (< text_size()).
  std::uint32_t code(std::size_t pos) const {
    return visit([&](const auto* codes, const auto*) { return static_cast<std::uint32_t>(codes[pos]); });
  }
  /// The token at position `pos` (< text_size()), -1 at a document's end.
  Token token(std::size_t pos) const {
    // In 64 bits: the code of token 2^31 - 1 is 2^31, which as a Token minus one would overflow.
    return static_cast<Token>(static_cast<std::int64_t>(code(pos)) - 1);
  }
  /// The position where the suffix of rank `rank` (< size()) starts; refdec::IoError when the
  /// entry is out of range.
  std::size_t suffix(std::size_t rank) const {
    return visit([&](const auto*, const auto* sa) { return entry(sa, rank); });
  }

  /// A hint to fetch the entry of rank `rank` into the cache; harmless for any rank (prefetches
  /// never fault).
  void prefetch_suffix(std::size_t rank) const { prefetch(static_cast<const char*>(a_.suffixes) + (a_.skip + rank) * a_.suffix_width); }
  /// A hint to fetch the code at position `pos` into the cache; harmless for any position.
  void prefetch_code(std::size_t pos) const { prefetch(static_cast<const char*>(a_.codes) + pos * a_.code_width); }

  /// The ranks in [first, last) of the suffixes that start with `pattern` (token ids >= 0; an
  /// empty pattern: all of them). `lcp`, when given, holds per rank the tokens its suffix shares
  /// with the one before it (at least the pattern's length where they share all of it): the end of
  /// a short range is then read from it instead of searched.
  SuffixRange find(std::span<const Token> pattern, std::size_t first, std::size_t last, std::span<const std::uint8_t> lcp = {}) const {
    return visit([&](const auto* codes, const auto* sa) -> SuffixRange {
      const auto compare = [&](std::size_t rank) { return suffix_view_detail::compare_prefix(codes, entry(sa, rank), pattern); };
      // Narrow to some rank that matches, then find both ends below and above it.
      std::size_t lo = first, hi = last, mid = 0;
      for (int c = 1; lo < hi && c != 0;) {
        mid = lo + (hi - lo) / 2;
        c = compare(mid);
        if (c < 0) lo = mid + 1;
        if (c > 0) hi = mid;
      }
      if (lo >= hi) return {lo, lo};
      const std::size_t a = suffix_view_detail::partition(lo, mid, [&](std::size_t r) { return compare(r) < 0; });
      std::size_t b = mid + 1;
      if (!lcp.empty()) {
        // A few bytes of lcp read in place of a second search, unless the range is long.
        b = a + 1;
        for (const std::size_t stop = std::min(hi, a + 64); b < stop && lcp[b] >= pattern.size();) ++b;
        if (b < a + 64 || b == hi) return {a, b};
        b = std::max(b, mid + 1);
      }
      return {a, suffix_view_detail::partition(b, hi, [&](std::size_t r) { return compare(r) == 0; })};
    });
  }
  SuffixRange find(std::span<const Token> pattern) const { return find(pattern, 0, size()); }

  /// Whether a suffix in [first, last) starts with `pattern` followed by a token (not by its
  /// document's end): one binary search, since those that end right after it sort first among
  /// the suffixes that start with it.
  bool continues(std::span<const Token> pattern, std::size_t first, std::size_t last) const {
    return visit([&](const auto* codes, const auto* sa) {
      const std::size_t r = suffix_view_detail::partition(first, last, [&](std::size_t rank) {
        const std::size_t s = entry(sa, rank);
        const int c = suffix_view_detail::compare_prefix(codes, s, pattern);
        return c < 0 || (c == 0 && codes[s + pattern.size()] == 0);
      });
      return r != last && suffix_view_detail::compare_prefix(codes, entry(sa, r), pattern) == 0;
    });
  }

 private:
  static void prefetch(const char* p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
  }
  // A suffix array entry, range-checked: a file opened without verification may hold any value.
  template <class S>
  std::size_t entry(const S* sa, std::size_t rank) const {
    const auto pos = static_cast<std::uint64_t>(sa[rank]);
    REFDEC_CHECK_IO(pos < a_.num_codes, "corrupt " << label_ << ": suffix array entry " << rank + a_.skip << " is " << pos
                                                   << ", out of range [0, " << a_.num_codes << ")");
    return static_cast<std::size_t>(pos);
  }
  Arrays a_;
  std::string label_ = "suffix array";
};

/// The longest length in [0, most] for which `occurs(length)` holds, where a length occurs
/// whenever a longer one does (the suffixes of an occurring string occur), by halves. `hint` is
/// probed first (when in (0, most]): where the answer usually is, one probe may settle half of
/// the range. The last probe that held was at the answer, so `occurs` may keep what it found.
template <class Occurs>
std::size_t longest_occurring(std::size_t most, std::size_t hint, Occurs&& occurs) {
  std::size_t lo = 0, hi = most;  // lo occurs (0 trivially); the answer is in [lo, hi]
  if (hint > 0 && hint <= most) {
    if (occurs(hint))
      lo = hint;
    else
      hi = hint - 1;
  }
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (occurs(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

REFDEC_NAMESPACE_END
