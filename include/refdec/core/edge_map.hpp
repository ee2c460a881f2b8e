// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The transitions of a trie or an automaton whose nodes are numbered: (node, token) -> node in one
// flat open-addressing table, so that a lookup is one multiplication and, mostly, one cache line.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// A hash map from (node >= 0, token) to a node >= 0 with linear probing, at most half full (it
/// doubles before passing that), entries never erased. Tokens may be any value (negative
/// separators included).
class EdgeMap {
 public:
  EdgeMap() { reset(0); }

  /// Empties the map and sizes it for `expected` entries.
  void reset(std::size_t expected) {
    std::size_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
  }

  /// The node reached from `from` by `t`, or -1.
  std::int32_t find(std::int32_t from, Token t) const {
    for (std::size_t s = slot_of(from, t);; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.to < 0) return -1;
      if (slot.from == from && slot.token == t) return slot.to;
    }
  }
  /// Adds the edge (from, t) -> to; (from, t) must not be in the map.
  void insert(std::int32_t from, Token t, std::int32_t to) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    put(from, t, to);
    ++size_;
  }
  /// Redirects the edge (from, t) to `to` if it leads to `expected`; returns whether it did.
  bool replace(std::int32_t from, Token t, std::int32_t expected, std::int32_t to) {
    for (std::size_t s = slot_of(from, t);; s = (s + 1) & mask_) {
      Slot& slot = slots_[s];
      if (slot.to < 0) return false;
      if (slot.from == from && slot.token == t) {
        if (slot.to != expected) return false;
        slot.to = to;
        return true;
      }
    }
  }

  std::size_t size() const { return size_; }
  /// Bytes held by the table.
  std::size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    std::int32_t from = -1;
    Token token = -1;
    std::int32_t to = -1;  // -1: empty
  };

  std::size_t slot_of(std::int32_t from, Token t) const {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(from)) << 32) | static_cast<std::uint32_t>(t);
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void put(std::int32_t from, Token t, std::int32_t to) {
    std::size_t s = slot_of(from, t);
    while (slots_[s].to >= 0) s = (s + 1) & mask_;
    slots_[s] = Slot{from, t, to};
  }
  void grow() {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    --shift_;
    for (const Slot& s : old)
      if (s.to >= 0) put(s.from, s.token, s.to);
  }

  std::vector<Slot> slots_;  // [capacity], a power of two
  std::size_t mask_ = 0;     // capacity - 1
  int shift_ = 0;            // 64 - log2(capacity)
  std::size_t size_ = 0;     // entries
};

REFDEC_NAMESPACE_END
