// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The block bookkeeping of a paged KV cache (PagedKvStore, StaticPagedKvStore): a pool of
// fixed-size blocks, a free list and a block table per sequence. Entry e of sequence b lives in
// slot table(b)[e / block_size] * block_size + e % block_size of the pool.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Block tables over a pool of `num_blocks` blocks of `block_size` entries (see the file comment).
/// Sequences are numbered as their store numbers them: add() appends, remove(b) renumbers the
/// later ones down.
class BlockTables {
 public:
  /// `who` names the store in messages.
  BlockTables(std::int64_t num_blocks, std::int64_t block_size, const char* who) : block_size_(block_size), who_(who) {
    REFDEC_CHECK(num_blocks > 0 && block_size > 0 && num_blocks <= (std::int64_t{1} << 31) - 1,
                 who << ": num_blocks and block_size must be positive (num_blocks < 2^31), got num_blocks=" << num_blocks
                     << " block_size=" << block_size);
    for (std::int64_t i = num_blocks - 1; i >= 0; --i) free_.push_back(static_cast<std::int32_t>(i));
    num_blocks_ = num_blocks;
  }

  std::int64_t block_size() const { return block_size_; }
  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t batch() const { return static_cast<std::int64_t>(tables_.size()); }
  /// The blocks of sequence `b`, in order.
  std::span<const std::int32_t> table(std::int64_t b) const { return tables_[static_cast<std::size_t>(b)]; }

  /// Appends a sequence with no blocks.
  void add() { tables_.emplace_back(); }
  /// Drops sequence `b`, its blocks back to the pool.
  void remove(std::int64_t b) {
    const auto& t = tables_[static_cast<std::size_t>(b)];
    free_.insert(free_.end(), t.rbegin(), t.rend());
    tables_.erase(tables_.begin() + b);
  }

  /// Gives every sequence b blocks for `entries[b]` entries, or nothing: throws
  /// refdec::ArgumentError, allocating nothing, when the pool has too few free blocks.
  void reserve(std::span<const std::int64_t> entries) {
    std::int64_t wanted = 0;
    for (std::size_t b = 0; b < tables_.size(); ++b)
      wanted += std::max<std::int64_t>(0, blocks_for(entries[b]) - static_cast<std::int64_t>(tables_[b].size()));
    REFDEC_CHECK(wanted <= free_blocks(), who_ << ": the step needs " << wanted << " more blocks of " << block_size_ << " entries but only "
                                               << free_blocks() << " of " << num_blocks_ << " are free");
    for (std::size_t b = 0; b < tables_.size(); ++b)
      while (static_cast<std::int64_t>(tables_[b].size()) < blocks_for(entries[b])) {
        tables_[b].push_back(free_.back());
        free_.pop_back();
      }
  }
  /// Returns sequence b's blocks past its first `entries` entries to the pool.
  void shrink(std::int64_t b, std::int64_t entries) {
    auto& t = tables_[static_cast<std::size_t>(b)];
    while (static_cast<std::int64_t>(t.size()) > blocks_for(entries)) {
      free_.push_back(t.back());
      t.pop_back();
    }
  }

  /// Whether sequence b's blocks hold entry `e`.
  bool holds(std::int64_t b, std::int64_t e) const {
    return e / block_size_ < static_cast<std::int64_t>(tables_[static_cast<std::size_t>(b)].size());
  }
  /// The pool slot of entry `e` of sequence `b` (which its blocks must hold).
  std::int64_t slot(std::int64_t b, std::int64_t e) const {
    return static_cast<std::int64_t>(tables_[static_cast<std::size_t>(b)][static_cast<std::size_t>(e / block_size_)]) * block_size_ +
           e % block_size_;
  }

 private:
  std::int64_t blocks_for(std::int64_t entries) const { return (entries + block_size_ - 1) / block_size_; }

  std::int64_t block_size_;
  std::int64_t num_blocks_ = 0;
  const char* who_;
  std::vector<std::int32_t> free_;                 // free blocks, the next one at the back
  std::vector<std::vector<std::int32_t>> tables_;  // [batch] block table of each sequence
};

REFDEC_TORCH_NAMESPACE_END
