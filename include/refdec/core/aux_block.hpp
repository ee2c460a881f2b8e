// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Auxiliary blocks: tokens a drafter adds to a verification step besides its draft tree (the
// lookahead drafter's Jacobi window). They ride in the same forward pass with positions and
// attention rows of their own; the target's greedy choice at each goes back to the drafter. They
// are never accepted and never committed to the KV cache.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// The auxiliary tokens of one sequence for one step. Visibility is expressed over local
/// indices: 0 is the step's root (the sequence's last token, node 0 of the draft tree) and 1 + j
/// is auxiliary token j. Every auxiliary token sees the committed prefix and itself; it sees the
/// root and other auxiliary tokens only where listed, and never a draft node other than the root.
/// Draft nodes never see auxiliary tokens.
struct AuxBlock {
  std::vector<Token> tokens;               // [A] token ids
  std::vector<std::int32_t> offset;        // [A] position relative to the root (root + offset), >= 1
  std::vector<std::int32_t> row_begin{0};  // [A + 1] CSR row starts into `sees`
  std::vector<std::int32_t> sees;          // [nnz] local indices each token sees besides itself, ascending

  /// Number of auxiliary tokens.
  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  /// Local indices (0 = root, 1 + j = token j) token `j` sees besides the prefix and itself.
  std::span<const std::int32_t> row(std::int32_t j) const {
    const auto b = static_cast<std::size_t>(row_begin[static_cast<std::size_t>(j)]);
    const auto e = static_cast<std::size_t>(row_begin[static_cast<std::size_t>(j) + 1]);
    return std::span<const std::int32_t>(sees).subspan(b, e - b);
  }
  /// True when token `j` sees local index `k` (0 = root, 1 + i = token i); a token sees itself.
  bool attends(std::int32_t j, std::int32_t k) const {
    if (k == j + 1) return true;
    const auto r = row(j);
    return std::binary_search(r.begin(), r.end(), k);
  }

  /// Removes every token.
  void clear() {
    tokens.clear();
    offset.clear();
    row_begin.assign(1, 0);
    sees.clear();
  }

  /// Appends a token at `position_offset` (>= 1) past the root that sees the local indices in
  /// `visible` (0 = root, 1 + i = an earlier token i) besides the prefix and itself. Returns its
  /// index.
  std::int32_t add(Token token, std::int32_t position_offset, std::span<const std::int32_t> visible) {
    REFDEC_CHECK(token >= 0, "auxiliary token ids must be non-negative, got " << token);
    REFDEC_CHECK(position_offset >= 1, "auxiliary tokens sit after the root: offset must be >= 1, got " << position_offset);
    const std::int32_t j = size();
    const auto start = sees.size();
    for (const std::int32_t k : visible) {
      REFDEC_CHECK(k >= 0 && k <= j, "auxiliary token " << j << " may see the root (0) or earlier tokens (1.." << j << "), got " << k);
      sees.push_back(k);
    }
    std::sort(sees.begin() + static_cast<std::ptrdiff_t>(start), sees.end());
    sees.erase(std::unique(sees.begin() + static_cast<std::ptrdiff_t>(start), sees.end()), sees.end());
    tokens.push_back(token);
    offset.push_back(position_offset);
    row_begin.push_back(static_cast<std::int32_t>(sees.size()));
    return j;
  }

  /// Throws refdec::Error unless the block is well formed for a vocabulary of `vocab_size` tokens:
  /// consistent sizes, token ids in range, offsets >= 1, and each token seeing only the root or
  /// earlier tokens, in ascending order (what add() guarantees; a drafter may fill the fields
  /// directly).
  void validate(std::int64_t vocab_size) const {
    const auto A = tokens.size();
    REFDEC_CHECK(offset.size() == A && row_begin.size() == A + 1 && row_begin.front() == 0 &&
                     static_cast<std::size_t>(row_begin.back()) == sees.size(),
                 "AuxBlock: " << A << " tokens, " << offset.size() << " offsets, " << row_begin.size() << " row starts and " << sees.size()
                              << " visibility entries do not fit together");
    for (std::size_t j = 0; j < A; ++j) {
      REFDEC_CHECK(tokens[j] >= 0 && tokens[j] < vocab_size,
                   "AuxBlock: token " << j << " has id " << tokens[j] << " outside the vocabulary [0, " << vocab_size << ")");
      REFDEC_CHECK(offset[j] >= 1, "AuxBlock: token " << j << " has offset " << offset[j] << " (must be >= 1)");
      REFDEC_CHECK(row_begin[j] <= row_begin[j + 1], "AuxBlock: row starts decrease at token " << j);
      std::int32_t previous = -1;
      for (const std::int32_t k : row(static_cast<std::int32_t>(j))) {
        REFDEC_CHECK(k > previous && k <= static_cast<std::int32_t>(j),
                     "AuxBlock: token " << j << " lists " << k << " (must see the root (0) or earlier tokens, in ascending order)");
        previous = k;
      }
    }
  }

  /// Appends `other`'s tokens after these, keeping its visibility (its local indices shift by
  /// size(); the root stays 0). Used to combine the blocks of several drafters.
  void append(const AuxBlock& other) {
    if (&other == this) {  // appending to itself would read what it writes
      const AuxBlock copy = other;
      return append(copy);
    }
    const std::int32_t shift = size();
    for (std::int32_t j = 0; j < other.size(); ++j) {
      tokens.push_back(other.tokens[static_cast<std::size_t>(j)]);
      offset.push_back(other.offset[static_cast<std::size_t>(j)]);
      for (const std::int32_t k : other.row(j)) sees.push_back(k == 0 ? 0 : k + shift);
      row_begin.push_back(static_cast<std::int32_t>(sees.size()));
    }
  }
};

REFDEC_NAMESPACE_END
