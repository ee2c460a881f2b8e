// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The references a sequence drafts from, viewed where the engine keeps them: its token vectors or
// any token buffers (spans), never copied to be passed.

#include <cstddef>
#include <iterator>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// A read-only view of a list of token sequences: a span of `std::vector<Token>` or a span of
/// `std::span<const Token>` (the engine's own buffers: a KV-cache page table's token rows, a
/// memory-mapped corpus, a tensor's data). Converts implicitly from either, and from a vector of
/// either, so `begin(prompt, refs)` takes what the engine holds. A view: the list and the tokens
/// must stay alive and unchanged while it is used; a drafter reads them during `begin()` only and
/// copies (or indexes) what it keeps.
class References {
 public:
  /// No references.
  References() = default;
  References(std::span<const std::vector<Token>> vectors)  // NOLINT: implicit on purpose
      : vectors_(vectors.data()), size_(vectors.size()) {}
  References(const std::vector<std::vector<Token>>& vectors)  // NOLINT: implicit on purpose
      : References(std::span<const std::vector<Token>>(vectors)) {}
  References(std::span<const std::span<const Token>> spans)  // NOLINT: implicit on purpose
      : spans_(spans.data()), size_(spans.size()) {}
  References(const std::vector<std::span<const Token>>& spans)  // NOLINT: implicit on purpose
      : References(std::span<const std::span<const Token>>(spans)) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Reference `i` (< size()).
  std::span<const Token> operator[](std::size_t i) const { return vectors_ != nullptr ? std::span<const Token>(vectors_[i]) : spans_[i]; }
  /// Tokens over all references.
  std::size_t total_tokens() const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < size_; ++i) n += (*this)[i].size();
    return n;
  }

  /// Iterates the references as token spans (by value).
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::span<const Token>;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::span<const Token>;

    iterator() = default;
    std::span<const Token> operator*() const { return (*refs_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    friend class References;
    iterator(const References* refs, std::size_t i) : refs_(refs), i_(i) {}
    const References* refs_ = nullptr;
    std::size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }

 private:
  const std::vector<Token>* vectors_ = nullptr;  // one of the two is set when size_ > 0
  const std::span<const Token>* spans_ = nullptr;
  std::size_t size_ = 0;
};

static_assert(std::forward_iterator<References::iterator>);

REFDEC_NAMESPACE_END
