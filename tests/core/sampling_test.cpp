// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/core/sampling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/statistics.hpp"

namespace {

using namespace refdec;

// Softmax of `z` in double, for hand-computed references.
std::vector<double> softmax(const std::vector<double>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double s = 0.0;
  for (std::size_t i = 0; i < z.size(); ++i) s += p[i] = std::isinf(z[i]) ? 0.0 : std::exp(z[i] - m);
  for (double& x : p) x /= s;
  return p;
}

// Processes `logits` (no penalties unless `counts` says so) and returns the probabilities.
std::vector<float> processed(const SamplingOptions& o, std::vector<float> logits, const TokenCounts& counts) {
  LogitsProcessor proc(o);
  proc.process(logits, counts);
  return logits;
}
std::vector<float> processed(const SamplingOptions& o, const std::vector<float>& logits) {
  return processed(o, logits, TokenCounts(static_cast<std::int32_t>(logits.size())));
}

void expect_probs(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key, expected output.
  struct Kat {
    Philox4x32 counter;
    std::uint32_t key0, key1;
    Philox4x32 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = philox4x32_10(k.counter, k.key0, k.key1);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(got.v[w], k.want.v[w]) << "word " << w;
  }
}

TEST(Uniform, IsReproducibleInRangeAndUniform) {
  EXPECT_EQ(uniform(7, 3), uniform(7, 3));
  EXPECT_NE(uniform(7, 3), uniform(7, 4));
  EXPECT_NE(uniform(7, 3), uniform(8, 3));
  EXPECT_NE(uniform(7, 3), uniform(7, 3 + (std::uint64_t{1} << 32)));  // the counter's high word counts
  constexpr int kBins = 20, kDraws = 100000;
  std::vector<std::int64_t> hist(kBins, 0);
  for (int k = 0; k < kDraws; ++k) {
    const double u = uniform(12345, static_cast<std::uint64_t>(k));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++hist[static_cast<std::size_t>(u * kBins)];
  }
  const std::vector<double> flat(kBins, 1.0 / kBins);
  EXPECT_GT(refdec_test::chi_square_test(flat, hist).p_value, 1e-4);
}

TEST(SampleFromProbs, InvertsTheCdfInTokenOrder) {
  const std::vector<float> p = {0.25f, 0.0f, 0.5f, 0.25f};
  EXPECT_EQ(sample_from_probs(p.data(), 4, 0.0), 0);
  EXPECT_EQ(sample_from_probs(p.data(), 4, 0.2499), 0);
  EXPECT_EQ(sample_from_probs(p.data(), 4, 0.25), 2);
  EXPECT_EQ(sample_from_probs(p.data(), 4, 0.7499), 2);
  EXPECT_EQ(sample_from_probs(p.data(), 4, 0.75), 3);
  EXPECT_EQ(sample_from_probs(p.data(), 4, std::nextafter(1.0, 0.0)), 3);
  const std::vector<float> w = {1.0f, 0.0f, 2.0f, 1.0f, 0.0f};  // unnormalised weights
  EXPECT_EQ(sample_from_probs(w.data(), 5, 0.5), 2);
  EXPECT_EQ(sample_from_probs(w.data(), 5, std::nextafter(1.0, 0.0)), 3);  // never a zero-weight token
  const std::vector<float> zero = {0.0f, 0.0f};
  EXPECT_EQ(sample_from_probs(zero.data(), 2, 0.5), -1);
}

TEST(SamplingOptions, RejectsBadSettingsByName) {
  auto rejects = [](SamplingOptions o, const std::string& name) {
    try {
      o.validate();
      ADD_FAILURE() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    EXPECT_THROW(LogitsProcessor{o}, Error);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  SamplingOptions o;
  EXPECT_NO_THROW(o.validate());
  o.temperature = -0.5f;
  rejects(o, "temperature");
  o.temperature = nan;
  rejects(o, "temperature");
  o.temperature = inf;
  rejects(o, "temperature");
  o = {};
  o.top_k = -1;
  rejects(o, "top_k");
  for (const float p : {0.0f, -0.1f, 1.5f, nan}) {
    o = {};
    o.top_p = p;
    rejects(o, "top_p");
  }
  for (const float p : {-0.1f, 1.1f, nan}) {
    o = {};
    o.min_p = p;
    rejects(o, "min_p");
  }
  for (const float r : {0.0f, -1.0f, inf, nan}) {
    o = {};
    o.repetition_penalty = r;
    rejects(o, "repetition_penalty");
  }
  o = {};
  o.presence_penalty = nan;
  rejects(o, "presence_penalty");
  o = {};
  o.frequency_penalty = -inf;
  rejects(o, "frequency_penalty");
  o = {};
  o.top_p = 1.0f;  // the closed end of (0, 1]
  o.min_p = 1.0f;
  EXPECT_NO_THROW(o.validate());
}

TEST(LogitsProcessor, RejectsNonFiniteLogitsAndMismatchedCounts) {
  LogitsProcessor proc(SamplingOptions{});
  const TokenCounts counts(3);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    std::vector<float> row = {0.0f, bad, 1.0f};
    try {
      proc.process(row, counts);
      ADD_FAILURE() << "accepted logit " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token 1"), std::string::npos) << e.what();
    }
  }
  const LinearTree tree = LinearTree::chain(std::vector<Token>{0, 1});
  std::vector<float> rows = {0.0f, 1.0f, 2.0f, 0.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};  // [2, 3]
  try {
    proc.process_tree(rows, 3, tree, counts);
    ADD_FAILURE() << "accepted a NaN logit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
  std::vector<float> short_rows(5, 0.0f);
  EXPECT_THROW(proc.process_tree(short_rows, 3, tree, counts), Error);
  std::vector<float> row4(4, 0.0f);
  EXPECT_THROW(proc.process(row4, counts), Error);  // counts over 3 tokens
  TokenCounts c(3);
  EXPECT_THROW(c.add_prompt(std::vector<Token>{3}), Error);
  EXPECT_THROW(c.add_output(-1), Error);
  SamplingOptions pen;
  pen.presence_penalty = 1.0f;
  LogitsProcessor ppen(pen);
  std::vector<float> row = {0.0f, 1.0f, 2.0f};
  EXPECT_THROW(ppen.process(row, counts, std::vector<Token>{5}), Error);
}

TEST(LogitsProcessor, DefaultIsSoftmax) {
  expect_probs(processed({}, {1.0f, 2.0f, 3.0f, -1.0f}), softmax({1, 2, 3, -1}));
}

TEST(LogitsProcessor, Temperature) {
  SamplingOptions o;
  o.temperature = 2.0f;
  expect_probs(processed(o, {1.0f, 2.0f, 3.0f, -1.0f}), softmax({0.5, 1, 1.5, -0.5}));
  o.temperature = 0.25f;
  expect_probs(processed(o, {1.0f, 2.0f, 3.0f, -1.0f}), softmax({4, 8, 12, -4}));
}

TEST(LogitsProcessor, TopKKeepsTiesWithTheKthLogit) {
  SamplingOptions o;
  o.top_k = 2;
  expect_probs(processed(o, {1.0f, 3.0f, 2.0f, 0.0f}), softmax({-kInf, 3, 2, -kInf}));
  expect_probs(processed(o, {2.0f, 3.0f, 2.0f, 0.0f}), softmax({2, 3, 2, -kInf}));  // tie at the 2nd
  o.top_k = 4;  // >= vocab: off
  expect_probs(processed(o, {1.0f, 3.0f, 2.0f, 0.0f}), softmax({1, 3, 2, 0}));
  o.top_k = 2;
  o.temperature = 0.5f;  // top-k applies to the scaled logits
  expect_probs(processed(o, {1.0f, 3.0f, 2.0f, 0.0f}), softmax({-kInf, 6, 4, -kInf}));
}

TEST(LogitsProcessor, TopPKeepsTheSmallestSetReachingTheMass) {
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingOptions o;
  o.top_p = 0.75f;  // 0.5 + 0.3 reach it
  expect_probs(processed(o, logits), {0.0, 0.625, 0.0, 0.375});
  o.top_p = 0.85f;  // needs 0.15 too
  expect_probs(processed(o, logits), {0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95});
  o.top_p = 0.1f;  // the most probable token always survives
  expect_probs(processed(o, logits), {0.0, 1.0, 0.0, 0.0});
  // Ties at the boundary go to the lower token id.
  expect_probs(processed(o, {1.0f, 2.0f, 2.0f}), {0.0, 1.0, 0.0});
}

TEST(LogitsProcessor, MinPIsRelativeToTheMostProbableToken) {
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingOptions o;
  o.min_p = 0.2f;  // threshold 0.1
  expect_probs(processed(o, logits), {0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95});
  o.min_p = 0.5f;  // threshold 0.25
  expect_probs(processed(o, logits), {0.0, 0.625, 0.0, 0.375});
  // After top-p (0.5 + 0.3 + 0.15 kept) min-p compares with the same most probable token.
  o.top_p = 0.9f;
  o.min_p = 0.4f;  // threshold 0.2: drops 0.15
  expect_probs(processed(o, logits), {0.0, 0.625, 0.0, 0.375});
}

TEST(LogitsProcessor, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  TokenCounts counts(5);
  counts.add_prompt(std::vector<Token>{0, 0});
  counts.add_output(std::vector<Token>{1, 1, 1});
  SamplingOptions o;
  o.repetition_penalty = 2.0f;  // applies once per token, to prompt and output tokens alike
  expect_probs(processed(o, {2.0f, -1.0f, 0.5f, 1.0f, 0.0f}, counts), softmax({1.0, -2.0, 0.5, 1.0, 0.0}));
}

TEST(LogitsProcessor, PresenceAndFrequencyPenaltiesCountOutputTokensOnly) {
  TokenCounts counts(5);
  counts.add_prompt(std::vector<Token>{0, 4});
  counts.add_output(std::vector<Token>{2, 2, 2, 4});
  SamplingOptions o;
  o.presence_penalty = 0.5f;
  o.frequency_penalty = 0.25f;
  // token 2: -0.5 - 3 * 0.25; token 4: -0.5 - 0.25; token 0 (prompt only): unchanged.
  expect_probs(processed(o, {2.0f, -1.0f, 0.5f, 1.0f, 0.0f}, counts), softmax({2.0, -1.0, -0.75, 1.0, -0.75}));
  // With a draft path: token 3 twice on the path, token 2 once more.
  LogitsProcessor proc(o);
  std::vector<float> row = {2.0f, -1.0f, 0.5f, 1.0f, 0.0f};
  proc.process(row, counts, std::vector<Token>{3, 2, 3});
  expect_probs(row, softmax({2.0, -1.0, 0.5 - 0.5 - 1.0, 1.0 - 0.5 - 0.5, -0.75}));
}

TEST(LogitsProcessor, GreedySettingsGiveTheArgmaxOfThePenalisedLogits) {
  SamplingOptions t0;
  t0.temperature = 0.0f;
  SamplingOptions k1;
  k1.top_k = 1;
  k1.temperature = 3.0f;
  for (const SamplingOptions& o : {t0, k1}) {
    EXPECT_TRUE(o.is_greedy());
    expect_probs(processed(o, {1.0f, 3.0f, 2.0f, 3.0f}), {0.0, 1.0, 0.0, 0.0});  // tie: lowest id
    expect_probs(processed(o, {-5.0f, -7.0f}), {1.0, 0.0});
    // Two logits one float ulp apart: greedy compares the logits themselves.
    expect_probs(processed(o, {1.0f, std::nextafter(1.0f, 2.0f)}), {0.0, 1.0});
    // Sampling with any seed returns the argmax.
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      SamplingOptions s = o;
      s.seed = seed;
      LogitsProcessor proc(s);
      std::vector<float> row = {0.5f, -1.0f, 2.0f, 1.9f};
      EXPECT_EQ(proc.sample(row, TokenCounts(4), seed * 3), 2);
    }
  }
  SamplingOptions p = t0;
  p.repetition_penalty = 2.0f;  // penalties apply before the argmax
  TokenCounts counts(3);
  counts.add_output(1);
  expect_probs(processed(p, {1.0f, 1.5f, 0.0f}, counts), {1.0, 0.0, 0.0});
  EXPECT_FALSE(SamplingOptions{}.is_greedy());
}

// A simple reference: penalties from whole-sequence counts, then the steps on normalised
// probabilities with full sorts.
std::vector<double> reference_probs(const SamplingOptions& o, const std::vector<float>& logits,
                                    const std::vector<Token>& prompt, const std::vector<Token>& output) {
  const std::size_t v = logits.size();
  std::vector<double> z(logits.begin(), logits.end());
  for (std::size_t t = 0; t < v; ++t) {
    const auto token = static_cast<Token>(t);
    const bool in_prompt = std::count(prompt.begin(), prompt.end(), token) > 0;
    const auto n = std::count(output.begin(), output.end(), token);
    if (in_prompt || n > 0) z[t] = z[t] > 0 ? z[t] / o.repetition_penalty : z[t] * o.repetition_penalty;
    if (n > 0) z[t] -= static_cast<double>(o.frequency_penalty) * static_cast<double>(n) + o.presence_penalty;
  }
  std::vector<double> p(v, 0.0);
  if (o.is_greedy()) {
    p[static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin())] = 1.0;
    return p;
  }
  for (double& x : z) x /= o.temperature;
  if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < v) {
    std::vector<double> sorted = z;
    std::sort(sorted.rbegin(), sorted.rend());
    for (double& x : z)
      if (x < sorted[static_cast<std::size_t>(o.top_k - 1)]) x = -kInf;
  }
  p = softmax(z);
  std::vector<std::size_t> ids(v);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  double cum = 0.0;
  for (const std::size_t i : ids) {
    if (cum >= o.top_p) p[i] = 0.0;
    cum += p[i];
  }
  const double top = p[ids[0]];
  for (double& x : p)
    if (x < o.min_p * top) x = 0.0;
  const double s = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= s;
  return p;
}

SamplingOptions random_options(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  SamplingOptions o;
  o.temperature = rng() % 5 == 0 ? 0.0f : 0.3f + 1.5f * u(rng);
  o.top_k = rng() % 2 ? 0 : static_cast<std::int32_t>(rng() % 12);
  o.top_p = rng() % 2 ? 1.0f : 0.2f + 0.8f * u(rng);
  o.min_p = rng() % 2 ? 0.0f : 0.3f * u(rng);
  o.repetition_penalty = rng() % 2 ? 1.0f : 0.7f + u(rng);
  o.presence_penalty = rng() % 2 ? 0.0f : u(rng) - 0.3f;
  o.frequency_penalty = rng() % 2 ? 0.0f : u(rng) - 0.3f;
  return o;
}

TEST(LogitsProcessor, MatchesASimpleReferenceOnRandomInputs) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 600; ++trial) {
    const SamplingOptions o = random_options(rng);
    const std::size_t v = trial % 4 == 0 ? 111 : trial % 4 == 1 ? 300 : 1 + rng() % 9;  // 300: nuclei over 64 tokens
    std::vector<float> logits(v);
    for (float& x : logits) x = normal(rng);
    std::vector<Token> prompt(rng() % 6), output(rng() % 8);
    for (Token& t : prompt) t = static_cast<Token>(rng() % v);
    for (Token& t : output) t = static_cast<Token>(rng() % v);
    TokenCounts counts(static_cast<std::int32_t>(v));
    counts.add_prompt(prompt);
    counts.add_output(output);
    const std::vector<float> got = processed(o, logits, counts);
    const std::vector<double> want = reference_probs(o, logits, prompt, output);
    for (std::size_t i = 0; i < v; ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "trial " << trial << " token " << i;
  }
}

// Each tree node is processed with its own prefix: process_tree equals process() with the
// counts of the whole sequence up to that node, bit for bit.
TEST(LogitsProcessor, ProcessTreeUsesEachNodesOwnPrefix) {
  {  // Two branches after the root: presence penalty hits a different token in each.
    SamplingOptions o;
    o.presence_penalty = 1.0f;
    TokenCounts counts(3);
    counts.add_prompt(std::vector<Token>{0});
    DraftTree dt;
    dt.insert(std::vector<Token>{1});
    dt.insert(std::vector<Token>{2});
    const LinearTree tree = dt.linearize(0, 8);  // [0]0 [1]1 [2]2
    std::vector<float> rows(9, 0.0f);          // [3, 3] all-zero logits
    LogitsProcessor(o).process_tree(rows, 3, tree, counts);
    expect_probs({rows.begin(), rows.begin() + 3}, softmax({0, 0, 0}));
    expect_probs({rows.begin() + 3, rows.begin() + 6}, softmax({0, -1, 0}));
    expect_probs({rows.begin() + 6, rows.end()}, softmax({0, 0, -1}));
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 200; ++trial) {
    SamplingOptions o = random_options(rng);
    const std::int32_t v = 2 + static_cast<std::int32_t>(rng() % 6);
    DraftTree dt;
    for (int p = 0; p < 1 + static_cast<int>(rng() % 6); ++p) {
      std::vector<Token> path(1 + rng() % 5);
      for (Token& t : path) t = static_cast<Token>(rng() % static_cast<unsigned>(v));
      dt.insert(path);
    }
    std::vector<Token> prompt(1 + rng() % 4), output(rng() % 5);
    for (Token& t : prompt) t = static_cast<Token>(rng() % static_cast<unsigned>(v));
    for (Token& t : output) t = static_cast<Token>(rng() % static_cast<unsigned>(v));
    TokenCounts counts(v);
    counts.add_prompt(prompt);
    counts.add_output(output);
    const LinearTree tree = dt.linearize(output.empty() ? prompt.back() : output.back(), 64);
    std::vector<float> logits(static_cast<std::size_t>(tree.size() * v));  // [num_nodes, v]
    for (float& x : logits) x = normal(rng);
    std::vector<float> rows = logits;
    LogitsProcessor proc(o);
    proc.process_tree(rows, v, tree, counts);
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      std::vector<Token> path;
      for (std::int32_t j = i; j > 0; j = tree.parent[static_cast<std::size_t>(j)]) path.push_back(tree.tokens[static_cast<std::size_t>(j)]);
      TokenCounts full = counts;
      full.add_output(std::vector<Token>(path.rbegin(), path.rend()));
      const auto begin = static_cast<std::ptrdiff_t>(i * v);
      std::vector<float> want(logits.begin() + begin, logits.begin() + begin + v);
      proc.process(want, full);
      ASSERT_EQ(std::vector<float>(rows.begin() + begin, rows.begin() + begin + v), want) << "trial " << trial << " node " << i;
    }
  }
}

// The plain sampler's draws follow the processed distribution.
TEST(LogitsProcessor, SampleFollowsTheProcessedDistribution) {
  SamplingOptions o;
  o.temperature = 0.8f;
  o.top_p = 0.95f;
  const std::vector<float> logits = {0.3f, -1.0f, 1.2f, 0.0f, 0.7f, -2.5f};
  const std::vector<float> probs = processed(o, logits);
  constexpr int kDraws = 50000;
  std::vector<std::int64_t> hist(logits.size(), 0);
  TokenCounts counts(static_cast<std::int32_t>(logits.size()));
  for (int k = 0; k < kDraws; ++k) {
    o.seed = static_cast<std::uint64_t>(k) / 8;  // several seeds and positions
    LogitsProcessor proc(o);
    std::vector<float> row = logits;
    ++hist[static_cast<std::size_t>(proc.sample(row, counts, static_cast<std::uint64_t>(k % 8)))];
  }
  const std::vector<double> p(probs.begin(), probs.end());
  const auto test = refdec_test::chi_square_test(p, hist);
  EXPECT_GT(test.p_value, 1e-4) << "chi-square " << test.statistic << " dof " << test.dof;
}

}  // namespace
