// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The one reader of the suffix-array format: every search against a scan of the text, in each of
// the four layouts (2- or 4-byte codes, 4- or 8-byte entries), with and without skipped entries,
// and a corrupt entry as an error, not a read outside the codes.

#include "refdec/datastore/suffix_view.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "common/expect_error.hpp"

namespace {

using namespace refdec;
using Tokens = std::vector<Token>;

// Documents of tokens in [0, 5) so that matches and long shared prefixes are common, in the
// format's layout: codes token + 1 and 0 after each document, suffixes sorted in full (shorter
// first), the separators' own suffixes first.
struct Text {
  std::vector<std::uint32_t> codes;
  std::vector<std::uint64_t> suffixes;
  std::size_t documents = 0;
};

Text random_text(std::mt19937& rng, std::size_t documents) {
  Text t;
  t.documents = documents;
  for (std::size_t d = 0; d < documents; ++d) {
    const std::size_t n = rng() % 40;
    for (std::size_t i = 0; i < n; ++i) t.codes.push_back(1 + rng() % 5);
    t.codes.push_back(0);
  }
  for (std::size_t p = 0; p < t.codes.size(); ++p) t.suffixes.push_back(p);
  const auto less = [&](std::uint64_t a, std::uint64_t b) {
    // Comparing up to and including the first end: two suffixes that reach their ends together
    // are equal there, and ties keep text order.
    for (std::size_t i = 0;; ++i) {
      const std::uint32_t x = t.codes[a + i], y = t.codes[b + i];
      if (x != y) return x < y;
      if (x == 0) return a < b;
    }
  };
  std::sort(t.suffixes.begin(), t.suffixes.end(), less);
  return t;
}

// The text's arrays stored with the given widths, and a view over them.
struct Stored {
  std::vector<std::uint16_t> c16;
  std::vector<std::uint32_t> c32, s32;
  std::vector<std::uint64_t> s64;
  SuffixArrayView view;

  Stored(const Text& t, std::uint32_t code_width, std::uint32_t suffix_width, bool skip_separators) {
    c16.assign(t.codes.begin(), t.codes.end());
    c32.assign(t.codes.begin(), t.codes.end());
    for (const std::uint64_t s : t.suffixes) s32.push_back(static_cast<std::uint32_t>(s));
    s64 = t.suffixes;
    const std::size_t skip = skip_separators ? t.documents : 0;
    view = SuffixArrayView({.codes = code_width == 2 ? static_cast<const void*>(c16.data()) : c32.data(),
                            .code_width = code_width,
                            .num_codes = t.codes.size(),
                            .suffixes = suffix_width == 4 ? static_cast<const void*>(s32.data()) : s64.data(),
                            .suffix_width = suffix_width,
                            .skip = skip,
                            .num_suffixes = t.codes.size() - skip},
                           "test text");
  }
};

bool starts_with(const Text& t, std::size_t pos, const Tokens& pattern) {
  for (std::size_t i = 0; i < pattern.size(); ++i)
    if (t.codes[pos + i] != static_cast<std::uint32_t>(pattern[i]) + 1) return false;
  return true;
}

class SuffixArrayViewLayouts : public ::testing::TestWithParam<std::tuple<std::uint32_t, std::uint32_t, bool>> {};

TEST_P(SuffixArrayViewLayouts, SearchesAgreeWithAScan) {
  const auto [code_width, suffix_width, skip] = GetParam();
  std::mt19937 rng(code_width * 100 + suffix_width * 10 + skip);
  const Text t = random_text(rng, 30);
  const Stored s(t, code_width, suffix_width, skip);
  const std::size_t offset = skip ? t.documents : 0;
  ASSERT_EQ(s.view.size(), t.codes.size() - offset);
  for (std::size_t r = 0; r < s.view.size(); ++r) ASSERT_EQ(s.view.suffix(r), t.suffixes[r + offset]);
  for (std::size_t p = 0; p < t.codes.size(); ++p) ASSERT_EQ(s.view.token(p), static_cast<Token>(t.codes[p]) - 1);
  // The LCP array a segment keeps: per rank, the tokens shared with the suffix before it.
  std::vector<std::uint8_t> lcp(s.view.size(), 0);
  for (std::size_t r = 1; r < lcp.size(); ++r) {
    const std::size_t x = t.suffixes[r - 1 + offset], y = t.suffixes[r + offset];
    std::size_t l = 0;
    while (l < 255 && t.codes[x + l] == t.codes[y + l] && t.codes[x + l] != 0) ++l;
    lcp[r] = static_cast<std::uint8_t>(l);
  }
  for (int trial = 0; trial < 400; ++trial) {
    Tokens pattern(rng() % 6);
    for (Token& x : pattern) x = static_cast<Token>(rng() % 6);  // 5 never occurs
    // The scan: the ranks whose suffixes start with the pattern form one run.
    std::size_t first = s.view.size(), count = 0;
    bool continued = false;
    for (std::size_t r = 0; r < s.view.size(); ++r) {
      const std::size_t pos = t.suffixes[r + offset];
      if (!starts_with(t, pos, pattern)) continue;
      first = std::min(first, r), ++count;
      continued = continued || t.codes[pos + pattern.size()] != 0;
    }
    const SuffixRange found = s.view.find(pattern);
    SCOPED_TRACE(::testing::Message() << "pattern of " << pattern.size() << ", trial " << trial);
    ASSERT_EQ(found.size(), count);
    if (count > 0) {
      ASSERT_EQ(found.begin, first);
    }
    for (std::uint64_t r = found.begin; r < found.end; ++r) ASSERT_TRUE(starts_with(t, s.view.suffix(r), pattern));
    ASSERT_EQ(s.view.continues(pattern, 0, s.view.size()), continued);
    ASSERT_EQ(s.view.find(pattern, 0, s.view.size(), lcp), found) << "with the LCP array";
    // Within a window: the part of the run inside it.
    const std::size_t a = rng() % (s.view.size() + 1), b = a + rng() % (s.view.size() - a + 1);
    const SuffixRange within = s.view.find(pattern, a, b);
    const std::uint64_t lo = std::clamp<std::uint64_t>(found.begin, a, b), hi = std::clamp<std::uint64_t>(found.end, a, b);
    if (lo < hi) {
      ASSERT_EQ(within, (SuffixRange{lo, hi}));
    } else {
      ASSERT_TRUE(within.empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FourLayouts, SuffixArrayViewLayouts,
                         ::testing::Combine(::testing::Values(2u, 4u), ::testing::Values(4u, 8u), ::testing::Bool()));

TEST(SuffixArrayView, LongestOccurringAgreesWithAScanFromEveryHint) {
  for (std::size_t answer = 0; answer <= 9; ++answer) {
    for (std::size_t hint = 0; hint <= 11; ++hint) {
      std::size_t probes = 0, last_held = 0;
      const std::size_t found = longest_occurring(9, hint, [&](std::size_t n) {
        ++probes;
        EXPECT_GE(n, 1u);
        EXPECT_LE(n, 9u);
        if (n <= answer) last_held = n;
        return n <= answer;
      });
      EXPECT_EQ(found, answer) << "hint " << hint;
      EXPECT_EQ(last_held, answer) << "the last probe that held is at the answer";
      EXPECT_LE(probes, 5u) << "by halves, one probe for the hint";
    }
  }
  EXPECT_EQ(longest_occurring(0, 3, [](std::size_t) { return true; }), 0u);
}

TEST(SuffixArrayView, RefusesBadLayoutsAndReportsACorruptEntry) {
  std::mt19937 rng(3);
  const Text t = random_text(rng, 4);
  Stored s(t, 4, 4, false);
  SuffixArrayView::Arrays a = s.view.arrays();
  a.code_width = 3;
  refdec_test::expect_error([&] { SuffixArrayView(a, "odd"); }, "odd: codes must be 2 or 4 bytes, got 3");
  a = s.view.arrays();
  a.suffix_width = 2;
  refdec_test::expect_error([&] { SuffixArrayView(a, "odd"); }, "odd: suffix entries must be 4 or 8 bytes, got 2");
  a = s.view.arrays();
  a.skip = 1;
  refdec_test::expect_error([&] { SuffixArrayView(a, "odd"); }, "1 + " + std::to_string(t.codes.size()) + " suffixes");
  std::vector<std::uint32_t> unended = s.c32;
  unended.back() = 1;
  a = s.view.arrays();
  a.codes = unended.data();
  refdec_test::expect_error([&] { SuffixArrayView(a, "odd"); }, "corrupt odd: the codes do not end with a document separator");
  // An entry past the codes, as an unverified file may hold: every search that reads it fails.
  s.s32[5] = 0xFFFFFFF0u;
  refdec_test::expect_error([&] { (void)s.view.suffix(5); }, "corrupt test text: suffix array entry 5 is 4294967280");
  refdec_test::expect_error(
      [&] {
        for (Token x = 0; x < 6; ++x) (void)s.view.find(Tokens{x, x});  // some search probes rank 5
        for (std::size_t r = 0; r < s.view.size(); ++r) (void)s.view.suffix(r);
      },
      "suffix array entry 5");
}

}  // namespace
