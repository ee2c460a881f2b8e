// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/sampled_accept.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/statistics.hpp"

namespace {

using namespace refdec;

// ---------------------------------------------------------------------------------------------
// The statistics helpers (tests/common/statistics.hpp) against known values.

TEST(Statistics, ChiSquarePValuesMatchTables) {
  EXPECT_NEAR(refdec_test::regularized_gamma_q(1.0, 2.5), std::exp(-2.5), 1e-12);  // Q(1, x) = e^-x
  EXPECT_NEAR(refdec_test::regularized_gamma_q(3.0, 0.5), std::exp(-0.5) * (1 + 0.5 + 0.125), 1e-12);
  EXPECT_NEAR(refdec_test::regularized_gamma_q(3.0, 9.0), std::exp(-9.0) * (1 + 9 + 40.5), 1e-12);
  // Upper quantiles of the chi-square law (standard tables).
  EXPECT_NEAR(refdec_test::chi_square_p_value(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(refdec_test::chi_square_p_value(23.209251, 10), 0.01, 1e-6);
  EXPECT_NEAR(refdec_test::chi_square_p_value(124.342113, 100), 0.05, 1e-5);
  EXPECT_NEAR(refdec_test::chi_square_p_value(0.0, 4), 1.0, 1e-12);
  EXPECT_LT(refdec_test::chi_square_p_value(500.0, 10), 1e-90);
  EXPECT_THROW(refdec_test::regularized_gamma_q(0.0, 1.0), std::invalid_argument);
}

TEST(Statistics, ChiSquareTestPoolsSmallBinsAndRejectsImpossibleOutcomes) {
  const std::vector<double> p = {0.5, 0.3, 0.19, 0.01, 0.0};
  // n = 100: the 0.01 bin (expected 1) is pooled with nothing else, so it forms one bin alone.
  const auto fit = refdec_test::chi_square_test(p, std::vector<std::int64_t>{50, 30, 19, 1, 0});
  EXPECT_EQ(fit.statistic, 0.0);
  EXPECT_EQ(fit.dof, 3);
  EXPECT_NEAR(fit.p_value, 1.0, 1e-12);
  const auto off = refdec_test::chi_square_test(p, std::vector<std::int64_t>{60, 20, 19, 1, 0});
  EXPECT_NEAR(off.statistic, 100.0 / 50 + 100.0 / 30, 1e-9);
  EXPECT_EQ(refdec_test::chi_square_test(p, std::vector<std::int64_t>{50, 30, 18, 1, 1}).p_value, 0.0);
  EXPECT_NEAR(refdec_test::total_variation(p, std::vector<std::int64_t>{60, 20, 19, 1, 0}), 0.1, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// The walk itself.

// Each node's distribution is one-hot at a given token.
std::vector<float> one_hot_rows(const std::vector<Token>& target, std::int32_t vocab) {
  std::vector<float> rows(target.size() * static_cast<std::size_t>(vocab), 0.0f);  // [num_nodes, vocab]
  for (std::size_t i = 0; i < target.size(); ++i) rows[i * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(target[i])] = 1.0f;
  return rows;
}

TEST(SampledAccept, OneHotDistributionsGiveGreedyAcceptance) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int32_t vocab = 2 + static_cast<std::int32_t>(rng() % 4);
    DraftTree dt;
    for (int p = 0; p < 1 + static_cast<int>(rng() % 10); ++p) {
      std::vector<Token> path(1 + rng() % 6);
      for (Token& t : path) t = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
      dt.insert(path);
    }
    const LinearTree tree = dt.linearize(0, 1 + rng() % 30);
    std::vector<Token> target(static_cast<std::size_t>(tree.size()));
    for (Token& t : target) t = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
    Acceptance greedy, sampled;
    greedy_accept(tree, target, greedy);
    sampled_accept(tree, one_hot_rows(target, vocab), vocab, rng(), rng() % 100, sampled);
    ASSERT_EQ(sampled.nodes, greedy.nodes) << "trial " << trial;
    ASSERT_EQ(sampled.tokens, greedy.tokens) << "trial " << trial;
  }
}

TEST(SampledAccept, DrawsDepthDWithTheUniformOfOutputPositionGeneratedPlusD) {
  // Root -> 1 -> 2 -> 3 and root -> 0; every node's law is uniform over 4 tokens.
  DraftTree dt;
  dt.insert(std::vector<Token>{1, 2, 3});
  dt.insert(std::vector<Token>{0});
  const LinearTree tree = dt.linearize(0, 8);
  const std::vector<float> rows(static_cast<std::size_t>(tree.size()) * 4, 0.25f);  // [num_nodes, 4]
  int deep = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const std::uint64_t generated = seed % 7;
    Acceptance a;
    sampled_accept(tree, rows, 4, seed, generated, a);
    // The expected output: draw position generated + d, follow the tree while it matches.
    std::vector<Token> want;
    std::int32_t cur = 0;
    while (true) {
      const Token y = sample_from_probs(rows.data(), 4, uniform(seed, generated + want.size()));
      want.push_back(y);
      std::int32_t next = -1;
      for (std::int32_t c = tree.first_child[static_cast<std::size_t>(cur)]; c >= 0; c = tree.next_sibling[static_cast<std::size_t>(c)])
        if (tree.tokens[static_cast<std::size_t>(c)] == y) next = c;
      if (next < 0) break;
      cur = next;
    }
    ASSERT_EQ(a.tokens, want) << "seed " << seed;
    deep += a.num_accepted() == 3;
  }
  EXPECT_GT(deep, 0);  // the whole chain was accepted at least once (probability 1/64 per seed)
}

TEST(SampledAccept, WalkIsBoundedOnMalformedTrees) {
  const std::vector<float> rows(3 * 2, 0.5f);  // [3, 2] uniform over tokens 0 and 1
  Token bonus = -1;
  std::vector<std::int32_t> path(3, -1);
  {  // A sibling cycle 1 -> 2 -> 1 that never matches: tokens 5 and 6 are never drawn.
    const std::vector<Token> tokens = {0, 5, 6};
    const std::vector<std::int32_t> first_child = {1, -1, -1}, next_sibling = {-1, 2, 1};
    EXPECT_EQ(sampled_walk(tokens.data(), first_child.data(), next_sibling.data(), rows.data(), 2, 3, 1, 0, path.data(), &bonus), 0);
    EXPECT_TRUE(bonus == 0 || bonus == 1);
  }
  {  // A child cycle whose tokens always match: the path stays within num_nodes - 1 entries.
    const std::vector<Token> tokens = {0, 0, 0};
    const std::vector<float> always0 = one_hot_rows({0, 0, 0}, 2);
    const std::vector<std::int32_t> first_child = {1, 2, 1}, next_sibling = {-1, -1, -1};
    EXPECT_EQ(sampled_walk(tokens.data(), first_child.data(), next_sibling.data(), always0.data(), 2, 3, 1, 0, path.data(), &bonus), 2);
    EXPECT_EQ(path[2], -1);
  }
}

TEST(SampledAccept, RejectsBadInput) {
  const LinearTree tree = LinearTree::chain(std::vector<Token>{0, 1});
  Acceptance a;
  EXPECT_THROW(sampled_accept(tree, std::vector<float>(3, 0.5f), 2, 0, 0, a), Error);  // [2, 2] expected
  EXPECT_THROW(sampled_accept(tree, std::vector<float>(4, 0.0f), 2, 0, 0, a), Error);  // no positive weight
  EXPECT_NO_THROW(sampled_accept(tree, std::vector<float>(4, 0.5f), 2, 0, 0, a));
}

// ---------------------------------------------------------------------------------------------
// A synthetic model: next-token logits from the last two tokens and from how often each token
// occurred, over a vocabulary of 5 tokens.

constexpr std::int32_t kVocab = 5;
constexpr float kByLast[kVocab][kVocab] = {
    {1.0f, 0.2f, -0.5f, 0.4f, -1.0f}, {-0.3f, 0.8f, 0.6f, -1.2f, 0.1f}, {0.5f, -0.7f, 0.3f, 0.9f, -0.2f},
    {-1.0f, 0.4f, 0.2f, 0.1f, 0.7f},  {0.3f, 0.3f, -0.4f, -0.6f, 1.1f}};
constexpr float kBySecondLast[kVocab][kVocab] = {
    {0.2f, -0.6f, 0.4f, 0.0f, 0.3f}, {0.5f, 0.1f, -0.3f, 0.6f, -0.8f}, {-0.4f, 0.7f, 0.1f, -0.2f, 0.2f},
    {0.0f, 0.3f, -0.9f, 0.5f, 0.4f}, {0.6f, -0.1f, 0.2f, -0.7f, 0.0f}};
const std::vector<Token> kPrompt = {3, 1};

void model_logits(const std::vector<Token>& seq, float* out /* [kVocab] */) {
  const auto last = static_cast<std::size_t>(seq[seq.size() - 1]);
  const auto second = static_cast<std::size_t>(seq[seq.size() - 2]);
  for (std::size_t t = 0; t < kVocab; ++t)
    out[t] = kByLast[last][t] + kBySecondLast[second][t] +
             0.3f * static_cast<float>(std::count(seq.begin(), seq.end(), static_cast<Token>(t)));
}

// A drafter: candidate paths after `seq`, merged into `tree`.
using Drafter = std::function<void(const std::vector<Token>& seq, DraftTree& tree)>;

// The raw model's tokens after `seq` ranked by logit (descending, ties to the lower id).
std::vector<Token> ranked(const std::vector<Token>& seq) {
  float logits[kVocab];
  model_logits(seq, logits);
  std::vector<Token> ids = {0, 1, 2, 3, 4};
  std::stable_sort(ids.begin(), ids.end(), [&](Token a, Token b) { return logits[a] > logits[b]; });
  return ids;
}
// A chain that follows the token of the given rank at every step.
std::vector<Token> chain_of_rank(std::vector<Token> seq, std::size_t rank, std::size_t length) {
  std::vector<Token> out;
  for (std::size_t i = 0; i < length; ++i) {
    out.push_back(ranked(seq)[rank]);
    seq.push_back(out.back());
  }
  return out;
}

struct Shape {
  const char* name;
  Drafter draft;
};

// Tree shapes for the law test; all are deterministic functions of the sequence so far.
std::vector<Shape> shapes() {
  return {
      {"chain right", [](const std::vector<Token>& s, DraftTree& t) { t.insert(chain_of_rank(s, 0, 4)); }},
      {"chain wrong", [](const std::vector<Token>& s, DraftTree& t) { t.insert(chain_of_rank(s, 4, 4)); }},
      {"wide", [](const std::vector<Token>&, DraftTree& t) {  // every token, then every token again
         for (Token a = 0; a < kVocab; ++a)
           for (Token b = 0; b < kVocab; ++b) t.insert(std::vector<Token>{a, b});
       }},
      {"deep", [](const std::vector<Token>& s, DraftTree& t) {  // a depth-6 chain, 2nd choices as leaves
         std::vector<Token> seq = s, path;
         for (int d = 0; d < 6; ++d) {
           const std::vector<Token> r = ranked(seq);
           std::vector<Token> side = path;
           side.push_back(r[1]);
           t.insert(side);
           path.push_back(r[0]);
           seq.push_back(r[0]);
         }
         t.insert(path);
       }},
      {"two drafters", [](const std::vector<Token>& s, DraftTree& t) {  // overlapping and equal paths
         const std::vector<Token> best = chain_of_rank(s, 0, 3);
         t.insert(best, 2.0f);                    // drafter A
         t.insert(chain_of_rank(s, 1, 2), 1.0f);  // drafter A
         t.insert(best, 0.5f);                    // drafter B: the same path
         std::vector<Token> branch = {best[0]};   // drafter B: shares the first token
         std::vector<Token> after = s;
         after.push_back(best[0]);
         branch.push_back(ranked(after)[2]);
         t.insert(branch, 0.5f);
       }},
  };
}

struct Setting {
  const char* name;
  SamplingOptions options;
};

std::vector<Setting> settings() {
  return {
      {"plain", {}},
      {"temperature 0.6", {.temperature = 0.6f}},
      {"top-k 2", {.top_k = 2}},
      {"top-p 0.7", {.top_p = 0.7f}},
      {"min-p 0.3", {.min_p = 0.3f}},
      {"repetition 1.5", {.repetition_penalty = 1.5f}},
      {"presence 0.8", {.presence_penalty = 0.8f}},
      {"frequency 0.6", {.frequency_penalty = 0.6f}},
      {"all",
       {.temperature = 0.8f, .top_k = 4, .top_p = 0.9f, .min_p = 0.05f, .repetition_penalty = 1.2f,
        .presence_penalty = 0.3f, .frequency_penalty = 0.2f, .seed = 0}},
  };
}

// Counts of the prompt followed by the output `out`.
TokenCounts counts_of(const std::vector<Token>& out) {
  TokenCounts c(kVocab);
  c.add_prompt(kPrompt);
  c.add_output(out);
  return c;
}

// One decoding step's inputs for a given output so far: the tree after it and each node's
// processed distribution, computed with the node's own prefix.
struct Step {
  LinearTree tree;
  std::vector<float> probs;  // [num_nodes, kVocab]
};

Step build_step(const std::vector<Token>& out, const Drafter& drafter, LogitsProcessor& proc) {
  std::vector<Token> seq = kPrompt;
  seq.insert(seq.end(), out.begin(), out.end());
  DraftTree dt;
  drafter(seq, dt);
  Step s;
  s.tree = dt.linearize(seq.back(), 64);
  s.probs.resize(static_cast<std::size_t>(s.tree.size()) * kVocab);
  for (std::int32_t i = 0; i < s.tree.size(); ++i) {
    std::vector<Token> prefix = seq, path;
    for (std::int32_t j = i; j > 0; j = s.tree.parent[static_cast<std::size_t>(j)]) path.push_back(s.tree.tokens[static_cast<std::size_t>(j)]);
    prefix.insert(prefix.end(), path.rbegin(), path.rend());
    model_logits(prefix, &s.probs[static_cast<std::size_t>(i) * kVocab]);
  }
  proc.process_tree(s.probs, kVocab, s.tree, counts_of(out));
  return s;
}

// Plain sampling and speculative sampling with random drafts emit the same tokens for the same
// seed, for every setting (the processed distributions agree bit for bit along the output).
TEST(SampledAccept, ReproducesPlainSamplingTokenForToken) {
  std::mt19937 rng(99);
  constexpr std::size_t kLength = 24;
  std::int64_t accepted = 0, steps = 0;
  std::vector<Setting> all = settings();
  Setting greedy{"greedy, penalised", {}};
  greedy.options.temperature = 0.0f;
  greedy.options.repetition_penalty = 1.3f;
  greedy.options.frequency_penalty = 0.2f;
  all.push_back(greedy);
  for (Setting setting : all) {
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
      setting.options.seed = seed;
      LogitsProcessor proc(setting.options);
      std::vector<Token> plain;
      while (plain.size() < kLength) {
        std::vector<Token> seq = kPrompt;
        seq.insert(seq.end(), plain.begin(), plain.end());
        std::vector<float> row(kVocab);
        model_logits(seq, row.data());
        plain.push_back(proc.sample(row, counts_of(plain), plain.size()));
      }
      std::vector<Token> spec;
      Acceptance a;
      while (spec.size() < kLength) {
        const Drafter random_paths = [&](const std::vector<Token>& s, DraftTree& t) {
          const unsigned num_paths = rng() % 8;
          for (unsigned p = 0; p < num_paths; ++p) {
            std::vector<Token> path = chain_of_rank(s, rng() % 3, 1 + rng() % 5);
            for (Token& x : path)
              if (rng() % 4 == 0) x = static_cast<Token>(rng() % kVocab);
            t.insert(path);
          }
        };
        const Step step = build_step(spec, random_paths, proc);
        sampled_accept(step.tree, step.probs, kVocab, seed, spec.size(), a);
        spec.insert(spec.end(), a.tokens.begin(), a.tokens.end());
        accepted += a.num_accepted();
        ++steps;
      }
      spec.resize(kLength);
      ASSERT_EQ(spec, plain) << setting.name << " seed " << seed;
    }
  }
  EXPECT_GT(accepted, steps);  // drafts were accepted often, so the comparison covers trees
}

// ---------------------------------------------------------------------------------------------
// The exact law test. The law of the first kLength output tokens of plain sampling is computed by
// enumeration; speculative decoding with each tree shape is sampled kSamples times (seeds of its
// own) and compared by Pearson's chi-square test (cells with expected count < 5 pooled).
//
// Significance level kAlpha = 1e-4 per comparison: over the 45 (setting x shape) comparisons a
// correct implementation fails with probability at most 0.45% (Bonferroni) for a fresh choice of
// seeds; the seeds are fixed, so the outcome is deterministic. The power is ample: moving 1% of
// the mass between two cells of probability 5% raises the statistic by about 800 (p < 1e-30 at
// 124 degrees of freedom), and the REST rule's bias (total variation about 0.2) gives p = 0.

constexpr std::size_t kLength = 3;
constexpr std::size_t kCells = kVocab * kVocab * kVocab;  // kVocab^kLength
constexpr int kSamples = 200000;
constexpr double kAlpha = 1e-4;

std::size_t cell_of(const Token* out) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < kLength; ++i) c = c * kVocab + static_cast<std::size_t>(out[i]);
  return c;
}

// The exact law of the first kLength tokens of plain sampling, by enumeration.
std::vector<double> exact_law(const SamplingOptions& options) {
  LogitsProcessor proc(options);
  std::vector<double> law(kCells, 0.0);
  std::function<void(std::vector<Token>&, double)> expand = [&](std::vector<Token>& out, double p) {
    if (out.size() == kLength) {
      law[cell_of(out.data())] += p;
      return;
    }
    std::vector<Token> seq = kPrompt;
    seq.insert(seq.end(), out.begin(), out.end());
    std::vector<float> row(kVocab);
    model_logits(seq, row.data());
    proc.process(row, counts_of(out));
    double total = 0.0;  // the sampler draws token t with probability row[t] / total
    for (const float x : row) total += x;
    for (Token t = 0; t < kVocab; ++t) {
      if (row[static_cast<std::size_t>(t)] == 0.0f) continue;
      out.push_back(t);
      expand(out, p * row[static_cast<std::size_t>(t)] / total);
      out.pop_back();
    }
  };
  std::vector<Token> out;
  expand(out, 1.0);
  return law;
}

// An acceptance rule: one step's output tokens given the step, the seed and the tokens generated.
using Rule = void (*)(const Step&, std::uint64_t seed, std::uint64_t generated, Acceptance&);

void sample_then_match(const Step& s, std::uint64_t seed, std::uint64_t generated, Acceptance& a) {
  sampled_accept(s.tree, s.probs, kVocab, seed, generated, a);
}

// The biased rule of REST and the N-gram trie: every root-to-leaf path is verified on its own
// with fresh randomness, and the longest accepted prefix wins (the first among equals).
void rest_rule(const Step& s, std::uint64_t seed, std::uint64_t generated, Acceptance& a) {
  const LinearTree& t = s.tree;
  a.nodes.clear();
  a.tokens.clear();
  Token bonus = -1;
  std::int32_t path[64];  // [depth] the leaf's path, leaf first
  for (std::int32_t leaf = 0; leaf < t.size(); ++leaf) {
    if (t.first_child[static_cast<std::size_t>(leaf)] >= 0) continue;
    std::int32_t depth = 0;
    for (std::int32_t j = leaf; j > 0; j = t.parent[static_cast<std::size_t>(j)]) path[depth++] = j;
    std::int32_t accepted = 0, cur = 0;
    Token y = -1;
    while (true) {  // counters (leaf << 32) + position: independent of other paths and steps
      const double u = uniform(seed, (static_cast<std::uint64_t>(leaf) << 32) + generated + static_cast<std::uint64_t>(accepted));
      y = sample_from_probs(&s.probs[static_cast<std::size_t>(cur) * kVocab], kVocab, u);
      if (accepted == depth || t.tokens[static_cast<std::size_t>(path[depth - 1 - accepted])] != y) break;
      cur = path[depth - 1 - accepted++];
    }
    if (bonus < 0 || accepted > a.num_accepted()) {
      a.nodes.assign(std::make_reverse_iterator(path + depth), std::make_reverse_iterator(path + depth - accepted));
      bonus = y;
    }
  }
  for (const std::int32_t i : a.nodes) a.tokens.push_back(t.tokens[static_cast<std::size_t>(i)]);
  a.tokens.push_back(bonus);
}

// The histogram of the first kLength tokens of kSamples requests decoded with `rule` (seeds
// first_seed, first_seed + 1, ...), and the mean number of tokens per step.
struct Histogram {
  std::vector<std::int64_t> counts;  // [kCells]
  double tokens_per_step = 0.0;
};

// A step's tree and distributions depend only on the output so far, so each of the 31 possible
// outputs shorter than kLength is built once; only the randomness differs between samples.
Histogram speculative_histogram(const SamplingOptions& options, const Drafter& drafter, Rule rule,
                                std::uint64_t first_seed) {
  LogitsProcessor proc(options);
  std::vector<Step> steps;  // [1 + kVocab + kVocab^2] indexed by the output so far
  std::vector<Token> out;
  std::function<void()> build = [&] {
    steps.push_back(build_step(out, drafter, proc));
    if (out.size() + 1 == kLength) return;
    for (Token t = 0; t < kVocab; ++t) {
      out.push_back(t);
      build();
      out.pop_back();
    }
  };
  build();
  // Index of the step after output `o` of length n < kLength, in the depth-first order of
  // build(): each token skips the subtrees of the smaller tokens before it.
  std::size_t subtree[kLength + 1] = {};  // [kLength + 1] steps under an output of each length
  for (std::size_t len = kLength; len-- > 0;) subtree[len] = 1 + kVocab * subtree[len + 1];
  auto index = [&subtree](const Token* o, std::size_t n) {
    std::size_t i = 0;
    for (std::size_t k = 0; k < n; ++k) i += 1 + static_cast<std::size_t>(o[k]) * subtree[k + 1];
    return i;
  };
  Histogram h;
  h.counts.assign(kCells, 0);
  Acceptance a;
  Token buf[kLength + 64];
  std::int64_t num_steps = 0, num_tokens = 0;
  for (int sample = 0; sample < kSamples; ++sample) {
    const std::uint64_t seed = first_seed + static_cast<std::uint64_t>(sample);
    std::size_t n = 0;
    while (n < kLength) {
      rule(steps[index(buf, n)], seed, n, a);
      for (const Token t : a.tokens) buf[n++] = t;
      ++num_steps;
    }
    num_tokens += static_cast<std::int64_t>(n);
    ++h.counts[cell_of(buf)];
  }
  h.tokens_per_step = static_cast<double>(num_tokens) / static_cast<double>(num_steps);
  return h;
}

struct Verdict {
  refdec_test::ChiSquare fit;
  double tv;
};

Verdict compare(const std::vector<double>& law, const Histogram& h) {
  return {refdec_test::chi_square_test(law, h.counts), refdec_test::total_variation(law, h.counts)};
}

// Every (setting, shape) pair gets seeds of its own, so the comparisons are independent.
std::uint64_t first_seed(std::size_t setting, std::size_t shape) {
  return 1 + (setting * 16 + shape) * static_cast<std::uint64_t>(kSamples);
}

// Processing only the visited rows gives exactly what processing every node and walking gives, for
// every setting, on random trees and logits.
TEST(SampledAccept, LazyEqualsProcessingEveryNode) {
  std::mt19937 rng(123);
  std::normal_distribution<float> gauss(0.0f, 2.0f);
  std::int64_t accepted = 0;
  for (Setting setting : settings())
    for (int trial = 0; trial < 60; ++trial) {
      const std::int32_t vocab = 3 + static_cast<std::int32_t>(rng() % 6);
      DraftTree dt;
      for (int p = 0; p < 1 + static_cast<int>(rng() % 8); ++p) {
        std::vector<Token> path(1 + rng() % 5);
        for (Token& t : path) t = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
        dt.insert(path);
      }
      const LinearTree tree = dt.linearize(static_cast<Token>(rng() % static_cast<unsigned>(vocab)), 1 + rng() % 25);
      std::vector<float> logits(static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(vocab));  // [nodes, vocab]
      for (float& z : logits) z = gauss(rng);
      // Make the first child likely so that walks go deep.
      for (std::int32_t i = 0; i < tree.size(); ++i)
        if (const std::int32_t c = tree.first_child[static_cast<std::size_t>(i)]; c >= 0)
          logits[static_cast<std::size_t>(i * vocab + tree.tokens[static_cast<std::size_t>(c)])] += 4.0f;
      TokenCounts counts(vocab);
      std::vector<Token> history(1 + rng() % 6);
      for (Token& t : history) t = static_cast<Token>(rng() % static_cast<unsigned>(vocab));
      counts.add_prompt(std::span<const Token>(history).first(1));
      counts.add_output(std::span<const Token>(history).subspan(1));
      counts.add_output(tree.tokens[0]);
      setting.options.seed = rng();
      const std::uint64_t generated = rng() % 50;
      LogitsProcessor eager_proc(setting.options), lazy_proc(setting.options);
      std::vector<float> eager = logits, lazy = logits;
      eager_proc.process_tree(eager, vocab, tree, counts);
      Acceptance want, got;
      sampled_accept(tree, eager, vocab, setting.options.seed, generated, want);
      sampled_accept_lazy(view(tree), lazy, vocab, lazy_proc, counts, generated, got);
      ASSERT_EQ(got.nodes, want.nodes) << setting.name << " trial " << trial;
      ASSERT_EQ(got.tokens, want.tokens) << setting.name << " trial " << trial;
      accepted += got.num_accepted();
    }
  EXPECT_GT(accepted, 200) << "walks must go past the root";
}

TEST(SampledAccept, OutputHasTheExactLawOfPlainSampling) {
  const std::vector<Setting> all_settings = settings();
  const std::vector<Shape> all_shapes = shapes();
  for (std::size_t i = 0; i < all_settings.size(); ++i) {
    const std::vector<double> law = exact_law(all_settings[i].options);
    for (std::size_t j = 0; j < all_shapes.size(); ++j) {
      const Histogram h = speculative_histogram(all_settings[i].options, all_shapes[j].draft, sample_then_match, first_seed(i, j));
      const Verdict v = compare(law, h);
      std::printf("[law] %-16s %-13s chi2 %7.2f dof %3d p %.4f tv %.4f tokens/step %.3f\n", all_settings[i].name,
                  all_shapes[j].name, v.fit.statistic, v.fit.dof, v.fit.p_value, v.tv, h.tokens_per_step);
      EXPECT_GT(v.fit.p_value, kAlpha) << all_settings[i].name << ", " << all_shapes[j].name;
      if (std::string(all_shapes[j].name) != "chain wrong") {
        // Drafts were accepted, so the trees took part (a wrong chain may be cut by top-k/p, min-p).
        EXPECT_GT(h.tokens_per_step, 1.0) << all_settings[i].name << ", " << all_shapes[j].name;
      }
    }
  }
}

// The same test has the power to reject the REST rule, which favours drafted tokens.
TEST(SampledAccept, LawTestRejectsTheRestRule) {
  const std::vector<Setting> all_settings = settings();
  const std::vector<Shape> all_shapes = shapes();
  for (std::size_t i = 0; i < all_settings.size(); ++i) {
    const std::vector<double> law = exact_law(all_settings[i].options);
    for (std::size_t j = 0; j < all_shapes.size(); ++j) {
      if (std::string(all_shapes[j].name) != "two drafters") continue;
      const Verdict v = compare(law, speculative_histogram(all_settings[i].options, all_shapes[j].draft, rest_rule, first_seed(i, j)));
      std::printf("[rest] %-16s %-13s chi2 %7.0f dof %3d p %.3g tv %.4f\n", all_settings[i].name, all_shapes[j].name,
                  v.fit.statistic, v.fit.dof, v.fit.p_value, v.tv);
      EXPECT_LT(v.fit.p_value, kAlpha) << all_settings[i].name;
    }
  }
}

}  // namespace
