// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The lookahead drafter (Lookahead Decoding, Fu et al. 2024): a W x (N-1) Jacobi window runs in
// the verifier's forward pass as an auxiliary block; the n-grams its trajectory forms are
// harvested into a pool keyed by first token, and the pooled n-grams that start with the
// sequence's last token are the next step's candidates.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "refdec/core/aux_block.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/references.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of LookaheadDrafter (the paper's 7B defaults).
struct LookaheadOptions {
  std::size_t window = 15;       ///< W: Jacobi window width (future positions); 0 = a pure pool drafter
  std::size_t ngram = 5;         ///< N: n-gram size; the window keeps N-1 levels, candidates are N-1 tokens
  std::size_t guesses = 15;      ///< G: n-grams kept per first token, and candidates verified per step
  bool pool_from_output = true;  ///< also pool the n-grams of accepted output (the window's only when false)
  std::uint64_t seed = 0;        ///< initialisation of the window's first level from the prompt
};

/// Lookahead decoding's drafter. Per step, the auxiliary block is the window: level l (0..N-2)
/// column c (1..W) sits c + l positions after the root and sees the root, level 0's columns 1..c
/// and its own column's levels 1..l-1, so that it lies on a causal chain of one token per
/// position (the paper's Figure 5 mask). The target's greedy choices for the last level close W
/// n-grams (one per column) that go to the pool; the window then shifts one level. Until N-1
/// levels exist (the first N-2 steps), the choices become the next level instead. One per sequence:
/// not for sharing across threads.
class LookaheadDrafter {
 public:
  /// Bounds of the options: a window runs W x (N-1) auxiliary tokens per step, whose masks grow
  /// with their square (a window of 2^31-1 asked for about 16 GB).
  static constexpr std::size_t kMaxWindow = 256, kMaxNgram = 32, kMaxGuesses = 1024;
  explicit LookaheadDrafter(LookaheadOptions options = {}) : options_(options) {
    REFDEC_CHECK(options_.window <= kMaxWindow, "lookahead: window (W) must be 0 to " << kMaxWindow << ", got " << options_.window);
    REFDEC_CHECK(options_.ngram >= 2 && options_.ngram <= kMaxNgram,
                 "lookahead: n-gram size (N) must be 2 to " << kMaxNgram << ", got " << options_.ngram);
    REFDEC_CHECK(options_.guesses >= 1 && options_.guesses <= kMaxGuesses,
                 "lookahead: guesses (G) must be 1 to " << kMaxGuesses << ", got " << options_.guesses);
  }

  /// Starts a sequence: pools the n-grams of the prompt and the references (later ones count as
  /// newer) and fills the window's first level with tokens drawn from the prompt.
  void begin(std::span<const Token> prompt, References references) {
    pool_.clear();
    for (const auto& r : references) pool_text(r, 0);
    pool_text(prompt, 0);
    history_.assign(prompt.begin(), prompt.end());
    start_window();
  }

  /// Rewinds the sequence to its first `n` tokens and starts the window afresh from them
  /// (RewindableDrafter); the pool keeps its n-grams.
  void truncate(std::size_t n) {
    check_truncation(n, history_.size(), "lookahead");
    history_.resize(n);
    start_window();
  }

  /// Adds the pooled (N-1)-grams that follow the last token, newest first (scored G, G-1, ...), so
  /// that candidates sharing a prefix are merged by the trie and verified once; at most `budget`
  /// nodes.
  void propose(std::size_t budget, DraftTree& out) const {
    if (budget == 0 || history_.empty()) return;
    const auto it = pool_.find(history_.back());
    if (it == pool_.end()) return;
    const auto n = options_.ngram - 1;
    const auto& grams = it->second;
    const std::size_t count = grams.size() / n;
    for (std::size_t g = 0; g < count; ++g) out.insert(std::span<const Token>(grams).subspan(g * n, n), static_cast<float>(count - g));
    out.prune(budget);  // newest n-grams first, as the verifier's cut would
  }

  /// This step's window: levels in order, columns 1..W within each.
  void auxiliary(AuxBlock& out) const {
    const auto W = static_cast<std::int32_t>(options_.window);
    std::vector<std::int32_t> visible;
    for (std::size_t l = 0; l < levels_.size(); ++l)
      for (std::int32_t c = 1; c <= W; ++c) {
        visible.assign(1, 0);  // the root
        for (std::int32_t c0 = 1; c0 <= c; ++c0) visible.push_back(local(0, c0));
        for (std::size_t l1 = 1; l1 < l; ++l1) visible.push_back(local(l1, c));
        if (l == 0) visible.pop_back();  // itself, implicit
        out.add(levels_[l][static_cast<std::size_t>(c - 1)], static_cast<std::int32_t>(l) + c, visible);
      }
  }

  /// Takes the target's greedy choices for the window (empty: the window did not run this step).
  void observe(std::span<const Token> choices) {
    if (choices.empty() || levels_.empty()) return;
    const auto W = options_.window;
    REFDEC_CHECK(choices.size() == W * levels_.size(),
                 "lookahead: " << choices.size() << " choices for a window of " << W * levels_.size() << " tokens");
    std::vector<Token> next(choices.end() - static_cast<std::ptrdiff_t>(W), choices.end());  // the last level's
    if (levels_.size() + 1 == options_.ngram) {
      std::vector<Token> gram(options_.ngram);
      for (std::size_t c = 0; c < W; ++c) {
        for (std::size_t l = 0; l < levels_.size(); ++l) gram[l] = levels_[l][c];
        gram.back() = next[c];
        add_to_pool(gram);
      }
      levels_.erase(levels_.begin());
    }
    levels_.push_back(std::move(next));
  }

  /// Appends the step's tokens and pools the n-grams they complete.
  void accept(std::span<const Token> tokens) {
    const std::size_t before = history_.size();
    history_.insert(history_.end(), tokens.begin(), tokens.end());
    if (options_.pool_from_output) pool_text(history_, before);
  }

  /// W x (N-1): the window at full depth.
  std::size_t max_auxiliary() const { return options_.window * (options_.ngram - 1); }

  std::string name() const { return options_.window > 0 ? "lookahead" : "ngram-pool"; }

  /// The pooled continuations of `first`: (N-1)-grams back to back, newest first.
  std::span<const Token> pool(Token first) const {
    const auto it = pool_.find(first);
    return it == pool_.end() ? std::span<const Token>{} : std::span<const Token>(it->second);
  }
  /// The window: [levels][W] tokens, level 0 (oldest) first.
  const std::vector<std::vector<Token>>& window() const { return levels_; }
  const LookaheadOptions& options() const { return options_; }

 private:
  // Local AuxBlock index of level l, column c (1-based): 0 is the root.
  std::int32_t local(std::size_t l, std::int32_t c) const { return static_cast<std::int32_t>(l * options_.window) + c; }

  static std::uint64_t next_random(std::uint64_t& state) {  // SplitMix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // The window's first level: tokens drawn from the sequence.
  void start_window() {
    levels_.clear();
    if (options_.window == 0 || history_.empty()) return;
    std::uint64_t state = options_.seed;
    std::vector<Token> first(options_.window);
    for (auto& t : first) t = history_[static_cast<std::size_t>(next_random(state) % history_.size())];
    levels_.push_back(std::move(first));
  }

  // Pools every n-gram of `text` that ends at or after index `from`.
  void pool_text(std::span<const Token> text, std::size_t from) {
    const auto n = options_.ngram;
    for (std::size_t end = std::max(from + 1, n); end <= text.size(); ++end) add_to_pool(text.subspan(end - n, n));
  }

  // Puts `gram` (first token + N-1 continuation) at the front of its first token's list, removing
  // an equal older entry and the oldest beyond G.
  void add_to_pool(std::span<const Token> gram) {
    const auto n = options_.ngram - 1;
    const auto cont = gram.subspan(1);
    auto& grams = pool_[gram[0]];
    for (std::size_t g = 0; g < grams.size(); g += n)
      if (std::equal(cont.begin(), cont.end(), grams.begin() + static_cast<std::ptrdiff_t>(g))) {
        grams.erase(grams.begin() + static_cast<std::ptrdiff_t>(g), grams.begin() + static_cast<std::ptrdiff_t>(g + n));
        break;
      }
    grams.insert(grams.begin(), cont.begin(), cont.end());
    if (grams.size() > n * options_.guesses) grams.resize(n * options_.guesses);
  }

  LookaheadOptions options_;
  std::unordered_map<Token, std::vector<Token>> pool_;  // first token -> [<= G, N-1] continuations, newest first
  std::vector<Token> history_;                          // [prompt + output] the sequence so far
  std::vector<std::vector<Token>> levels_;              // [<= N-1][W] the Jacobi window, oldest level first
};

REFDEC_NAMESPACE_END
