// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Sampling settings, logits processing (penalties, temperature, top-k, top-p, min-p) for one row
// or for every node of a draft tree with that node's own prefix, counter-based randomness, and the
// plain (non-speculative) sampler that speculative sampling must reproduce exactly.
//
// Randomness is a pure function of (seed, output position): output position k of a request (k =
// tokens it has generated so far) is always drawn with uniform(seed, k). Plain sampling and
// sample-then-match over a tree (sampled_accept.hpp) therefore use the same uniform for the same
// position, so for equal processed distributions they emit the same tokens for the same seed.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"

REFDEC_NAMESPACE_BEGIN

/// Sampling settings of one request. Processing order (as in Hugging Face and vLLM): repetition
/// penalty, presence and frequency penalties, temperature, top-k, top-p, min-p.
struct SamplingOptions {
  /// Divides the logits; 0 means greedy decoding.
  float temperature = 1.0f;
  /// Keeps the k largest logits (and any tied with the k-th); 0, or k >= vocabulary, is off. k = 1
  /// is greedy decoding: the first maximum, ties to the lowest id.
  std::int32_t top_k = 0;
  /// Keeps the smallest set of most probable tokens whose mass reaches top_p; in (0, 1], 1 is off.
  float top_p = 1.0f;
  /// Drops tokens whose probability is below min_p times the largest one; in [0, 1], 0 is off.
  float min_p = 0.0f;
  /// CTRL / Hugging Face rule on prompt and output tokens: a positive logit is divided by it, a
  /// negative one multiplied; > 0, 1 is off.
  float repetition_penalty = 1.0f;
  /// OpenAI rule on output tokens: subtracted once from the logit of every token already output.
  float presence_penalty = 0.0f;
  /// OpenAI rule on output tokens: subtracted once per earlier occurrence of the token.
  float frequency_penalty = 0.0f;
  /// Seed of the request's random stream (see uniform()).
  std::uint64_t seed = 0;

  /// Throws refdec::Error naming the first invalid setting.
  void validate() const {
    REFDEC_CHECK(std::isfinite(temperature) && temperature >= 0.0f,
                 "SamplingOptions: temperature must be finite and >= 0 (0 = greedy), got " << temperature);
    REFDEC_CHECK(top_k >= 0, "SamplingOptions: top_k must be >= 0 (0 = off), got " << top_k);
    REFDEC_CHECK(top_p > 0.0f && top_p <= 1.0f, "SamplingOptions: top_p must be in (0, 1], got " << top_p);
    REFDEC_CHECK(min_p >= 0.0f && min_p <= 1.0f, "SamplingOptions: min_p must be in [0, 1], got " << min_p);
    REFDEC_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
                 "SamplingOptions: repetition_penalty must be finite and > 0, got " << repetition_penalty);
    REFDEC_CHECK(std::isfinite(presence_penalty), "SamplingOptions: presence_penalty must be finite, got " << presence_penalty);
    REFDEC_CHECK(std::isfinite(frequency_penalty), "SamplingOptions: frequency_penalty must be finite, got " << frequency_penalty);
  }
  /// True when decoding is greedy: temperature 0 or top_k 1 (the penalties still apply).
  bool is_greedy() const { return temperature == 0.0f || top_k == 1; }
  /// True when some penalty changes logits, so processing needs the token counts.
  bool has_penalties() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
};

/// One Philox4x32-10 block (Salmon et al., SC'11; the generator of cuRAND and PyTorch): a
/// keyed bijection of a 128-bit counter, with the Random123 known-answer results.
struct Philox4x32 {
  std::uint32_t v[4];
};

/// Philox4x32-10 of `counter` ([4] words) under `key` ([2] words).
REFDEC_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 counter, std::uint32_t key0, std::uint32_t key1) {
  std::uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
    c0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ key0;
    c1 = static_cast<std::uint32_t>(p1);
    c2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ key1;
    c3 = static_cast<std::uint32_t>(p0);
    key0 += 0x9E3779B9u;  // the Weyl key schedule
    key1 += 0xBB67AE85u;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

/// The uniform number in [0, 1) (53 random bits) at position `counter` of the stream `seed`.
/// A pure function: the same arguments always give the same number, on host and device.
REFDEC_HOST_DEVICE double uniform(std::uint64_t seed, std::uint64_t counter) {
  const Philox4x32 r = philox4x32_10(Philox4x32{{static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), 0u, 0u}},
                                     static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  const std::uint64_t bits = (std::uint64_t{r.v[0]} << 32 | r.v[1]) >> 11;
  return static_cast<double>(bits) * 0x1p-53;
}

/// Inverse-CDF draw from a row of non-negative weights ([vocab] float, e.g. processed
/// probabilities) with the uniform `u` in [0, 1): walks token ids in ascending order and returns
/// the first whose cumulative weight exceeds u times the total (summed in double in the same
/// order), so token i has probability probs[i] / total. Returns -1 when no weight is positive.
REFDEC_HOST_DEVICE Token sample_from_probs(const float* probs, std::int32_t vocab, double u) {
  double total = 0.0;
  for (std::int32_t i = 0; i < vocab; ++i) total += probs[i];
  const double target = u * total;
  double cum = 0.0;
  Token last = -1;
  for (std::int32_t i = 0; i < vocab; ++i) {
    if (!(probs[i] > 0.0f)) continue;
    cum += probs[i];
    last = i;
    if (target < cum) return i;
  }
  return last;  // u * total rounded up to total: the last positive bucket
}

/// The tokens of a sequence as the penalties see them: which occur in the prompt and how often
/// each occurs in the output, plus the list of distinct tokens seen, so that applying penalties
/// costs O(distinct tokens), not O(vocab). One per request, updated as tokens are accepted; const
/// reads may be shared across threads.
class TokenCounts {
 public:
  /// Empty counts over a vocabulary of `vocab_size` tokens.
  explicit TokenCounts(std::int32_t vocab_size = 0) { reset(vocab_size); }

  /// Forgets every token and sets the vocabulary size.
  void reset(std::int32_t vocab_size) {
    REFDEC_CHECK(vocab_size >= 0, "TokenCounts: vocabulary size must be >= 0, got " << vocab_size);
    in_prompt_.assign(static_cast<std::size_t>(vocab_size), 0);
    output_count_.assign(static_cast<std::size_t>(vocab_size), 0);
    present_.clear();
  }
  /// Vocabulary size.
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(in_prompt_.size()); }

  /// Counts prompt tokens (seen by the repetition penalty only).
  void add_prompt(std::span<const Token> tokens) {
    for (const Token t : tokens) {
      check(t);
      note(t);
      in_prompt_[static_cast<std::size_t>(t)] = 1;
    }
  }
  /// Counts output (generated) tokens.
  void add_output(std::span<const Token> tokens) {
    for (const Token t : tokens) {
      check(t);
      note(t);
      ++output_count_[static_cast<std::size_t>(t)];
    }
  }
  /// Counts one output token.
  void add_output(Token t) { add_output(std::span<const Token>(&t, 1)); }

  /// True when `t` (in [0, vocab_size())) occurs in the prompt.
  bool in_prompt(Token t) const { return in_prompt_[static_cast<std::size_t>(t)] != 0; }
  /// Occurrences of `t` in the output.
  std::int32_t output_count(Token t) const { return output_count_[static_cast<std::size_t>(t)]; }
  /// True when `t` occurs in the prompt or the output.
  bool seen(Token t) const { return in_prompt(t) || output_count(t) > 0; }
  /// The distinct tokens seen, in order of first occurrence.
  std::span<const Token> present() const { return present_; }

 private:
  void check(Token t) const {
    REFDEC_CHECK(t >= 0 && t < vocab_size(), "TokenCounts: token " << t << " outside the vocabulary [0, " << vocab_size() << ")");
  }
  void note(Token t) {
    if (!seen(t)) present_.push_back(t);
  }
  std::vector<std::uint8_t> in_prompt_;     // [vocab] 1 if the token occurs in the prompt
  std::vector<std::int32_t> output_count_;  // [vocab] occurrences in the output
  std::vector<Token> present_;              // [distinct tokens seen]
};

/// Turns logits into the probabilities a request samples from, with validated settings and
/// scratch space reused across calls (one per thread). Greedy settings give a one-hot row at the
/// argmax of the penalised logits, ties to the lowest token id (the rule of at::argmax), so
/// temperature 0 and top_k 1 decode exactly greedily.
class LogitsProcessor {
 public:
  /// Validates `options` (throws refdec::Error on a bad setting).
  explicit LogitsProcessor(const SamplingOptions& options) : options_(options) { options_.validate(); }

  /// The settings.
  const SamplingOptions& options() const { return options_; }

  /// Replaces one row of logits by probabilities, in place. The row follows the sequence counted
  /// in `counts` and then the output tokens `path` (draft tokens not yet in `counts`). Throws on
  /// a NaN or infinite logit.
  void process(std::span<float> row,  // [vocab] float
               const TokenCounts& counts, std::span<const Token> path = {}) {
    process_row(row, counts, path, 0);
  }

  /// Processes every row of a draft tree's logits in place, each with its node's own prefix:
  /// the sequence counted in `counts` (which ends with the root token) and the draft tokens from
  /// the root's child down to the node.
  void process_tree(std::span<float> rows,  // [num_nodes, vocab] float
                    std::int32_t vocab, const LinearTree& tree, const TokenCounts& counts) {
    REFDEC_CHECK(vocab > 0 && rows.size() == static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(vocab),
                 "process_tree: " << rows.size() << " logits for " << tree.size() << " nodes of vocabulary " << vocab);
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      path_.clear();
      // Ancestors up to the root (parents precede children, so this ends); order does not matter.
      for (std::int32_t j = i; j > 0; j = tree.parent[static_cast<std::size_t>(j)]) {
        const std::int32_t p = tree.parent[static_cast<std::size_t>(j)];
        REFDEC_CHECK(p < j, "process_tree: node " << j << " has parent " << p << ", which does not precede it");
        path_.push_back(tree.tokens[static_cast<std::size_t>(j)]);
      }
      const auto v = static_cast<std::size_t>(vocab);
      process_row(rows.subspan(static_cast<std::size_t>(i) * v, v), counts, path_, i);
    }
  }

  /// Plain sampling: processes `logits` in place (prefix as for process()) and draws output
  /// position `generated` of the request with uniform(seed, generated).
  Token sample(std::span<float> logits,  // [vocab] float
               const TokenCounts& counts, std::uint64_t generated) {
    process(logits, counts);
    return sample_from_probs(logits.data(), static_cast<std::int32_t>(logits.size()), uniform(options_.seed, generated));
  }

 private:
  void process_row(std::span<float> row, const TokenCounts& counts, std::span<const Token> path, std::int32_t row_index) {
    const auto vocab = static_cast<std::int32_t>(row.size());
    REFDEC_CHECK(vocab > 0 && counts.vocab_size() == vocab,
                 "LogitsProcessor: a row of " << vocab << " logits with token counts over " << counts.vocab_size() << " tokens");
    z_.resize(row.size());
    for (std::size_t i = 0; i < row.size(); ++i) {
      REFDEC_CHECK(std::isfinite(row[i]),
                   "LogitsProcessor: logit " << row[i] << " of token " << i << " in row " << row_index << " is not finite");
      z_[i] = row[i];
    }
    if (options_.has_penalties()) apply_penalties(counts, path);
    std::fill(row.begin(), row.end(), 0.0f);
    if (options_.is_greedy()) {
      row[static_cast<std::size_t>(std::max_element(z_.begin(), z_.end()) - z_.begin())] = 1.0f;  // first maximum
      return;
    }
    // Temperature, then top-k on the scaled logits; dropped tokens get -inf.
    const double temperature = options_.temperature;
    if (temperature != 1.0)
      for (double& z : z_) z /= temperature;
    if (options_.top_k > 0 && options_.top_k < vocab) {
      order_.assign(z_.begin(), z_.end());
      std::nth_element(order_.begin(), order_.begin() + (options_.top_k - 1), order_.end(), std::greater<>());
      const double kth = order_[static_cast<std::size_t>(options_.top_k - 1)];
      for (double& z : z_)
        if (z < kth) z = -std::numeric_limits<double>::infinity();
    }
    // Unnormalised softmax weights: the most probable token has weight exactly 1.
    const double zmax = *std::max_element(z_.begin(), z_.end());
    for (double& z : z_) z = std::exp(z - zmax);
    if (options_.top_p < 1.0f) apply_top_p();
    // min-p compares with the largest probability, which is weight 1 after any cut.
    const double min_p = options_.min_p;
    if (min_p > 0.0)
      for (double& w : z_)
        if (w < min_p) w = 0.0;
    double total = 0.0;
    for (const double w : z_) total += w;
    for (std::int32_t i = 0; i < vocab; ++i) row[static_cast<std::size_t>(i)] = static_cast<float>(z_[static_cast<std::size_t>(i)] / total);
  }

  // Penalises the tokens of the counted sequence followed by `path`: each distinct token once,
  // with its count in the sequence plus its occurrences on the path. Only tokens present are
  // touched, so a tree node costs O(distinct tokens * depth), with no per-node vocab-sized copy.
  void apply_penalties(const TokenCounts& counts, std::span<const Token> path) {
    const auto vocab = static_cast<Token>(z_.size());
    auto occurrences = [&](Token t) { return static_cast<std::int32_t>(std::count(path.begin(), path.end(), t)); };
    for (const Token t : counts.present()) penalise(t, counts.in_prompt(t), counts.output_count(t) + occurrences(t));
    for (auto it = path.begin(); it != path.end(); ++it) {
      const Token t = *it;
      REFDEC_CHECK(t >= 0 && t < vocab, "LogitsProcessor: path token " << t << " outside the vocabulary [0, " << vocab << ")");
      // Tokens of the counted sequence were done above; the others once, at their first occurrence.
      if (!counts.seen(t) && std::find(path.begin(), it, t) == it) penalise(t, false, occurrences(t));
    }
  }

  void penalise(Token t, bool in_prompt, std::int32_t output_count) {
    double& z = z_[static_cast<std::size_t>(t)];
    const double repetition = options_.repetition_penalty;
    if (in_prompt || output_count > 0) z = z > 0.0 ? z / repetition : z * repetition;
    if (output_count > 0)
      z -= static_cast<double>(options_.frequency_penalty) * output_count + static_cast<double>(options_.presence_penalty);
  }

  // Keeps the most probable tokens (ties to the lower id) until their weight reaches top_p of
  // the total; zeroes the rest. At least the most probable token survives. The nucleus is
  // usually small, so tokens are ordered in doubling chunks rather than all sorted.
  // Puts the best of [first, ids_.end()) in [first, end), in order: linear selection, then a sort.
  // Kept out of apply_top_p() so that its common path (one small heap selection) compiles as tight
  // as before this path existed (measured: 230 vs 380 µs per peaked row at V = 32000 inline).
  template <class Less>
  void sort_front(std::vector<std::int32_t>::iterator first, std::vector<std::int32_t>::iterator end, Less before) {
    if (end != ids_.end()) std::nth_element(first, end, ids_.end(), before);
    std::sort(first, end, before);
  }

  void apply_top_p() {
    double total = 0.0;
    ids_.clear();
    for (std::size_t i = 0; i < z_.size(); ++i)
      if (z_[i] > 0.0) {
        total += z_[i];
        ids_.push_back(static_cast<std::int32_t>(i));
      }
    auto before = [this](std::int32_t a, std::int32_t b) {
      const double wa = z_[static_cast<std::size_t>(a)], wb = z_[static_cast<std::size_t>(b)];
      return wa != wb ? wa > wb : a < b;
    };
    const double mass = static_cast<double>(options_.top_p) * total;
    double cum = 0.0;
    std::size_t kept = 0;
    // Chunks of doubling size. A chunk small next to the rest of the row is taken by heap selection
    // (most tokens only meet the heap's top); a large one (a flat row, whose nucleus is most of
    // the vocabulary) is split off by linear selection and then sorted, about one full sort in
    // all instead of repeated heap selections over the whole row.
    for (std::size_t chunk = 64; kept < ids_.size() && cum < mass; chunk *= 2) {
      const auto first = ids_.begin() + static_cast<std::ptrdiff_t>(kept);
      const auto end = ids_.begin() + static_cast<std::ptrdiff_t>(std::min(ids_.size(), kept + chunk));
      if (chunk * 16 <= ids_.size() - kept) {
        std::partial_sort(first, end, ids_.end(), before);
      } else {
        sort_front(first, end, before);
      }
      while (ids_.begin() + static_cast<std::ptrdiff_t>(kept) != end && cum < mass) cum += z_[static_cast<std::size_t>(ids_[kept++])];
    }
    for (std::size_t j = kept; j < ids_.size(); ++j) z_[static_cast<std::size_t>(ids_[j])] = 0.0;
  }

  SamplingOptions options_;
  std::vector<double> z_;          // [vocab] working logits, then softmax weights
  std::vector<double> order_;      // [vocab] scratch for the k-th largest logit
  std::vector<std::int32_t> ids_;  // [survivors] token ids sorted by weight for top-p
  std::vector<Token> path_;        // [depth] draft tokens on a node's path
};

REFDEC_NAMESPACE_END
