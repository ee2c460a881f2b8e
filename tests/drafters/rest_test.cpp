// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// RestDrafter against a brute-force model of REST retrieval that scans every corpus position, in
// simulated greedy decoding of hidden outputs over random corpora and over MT-Bench answers.

#include "refdec/drafters/rest.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "refdec/datastore/builder.hpp"
#include "common/expect_error.hpp"
#include "refdec/core/drafter.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;
using Tokens = std::vector<Token>;
using refdec_test::TempDir;

static_assert(Drafter<RestDrafter>);

// REST retrieval written for clarity: the corpus is scanned for the longest matching suffix,
// occurrences are ranked by sorting their suffixes, continuations are counted in a std::map and
// inserted in lexicographic order into a DraftTree, which is cut with prune().
class BruteRest {
 public:
  BruteRest(const std::vector<Tokens>& docs, RestOptions options) : opt_(options) {
    for (const auto& d : docs) {
      for (const Token t : d) codes_.push_back(t + 1);
      codes_.push_back(0);
    }
  }

  struct Result {
    std::size_t match_length = 0;
    std::size_t occurrences = 0;
    LinearTree tree;
  };

  Result propose(const Tokens& seq, std::size_t budget) const {
    Result res;
    std::vector<std::size_t> occ;
    for (std::size_t len = std::min(opt_.max_match, seq.size()); len >= 1 && occ.empty(); --len) {
      for (std::size_t p = 0; p + len <= codes_.size(); ++p) {
        bool ok = true;
        for (std::size_t i = 0; i < len && ok; ++i) ok = codes_[p + i] == seq[seq.size() - len + i] + 1;
        if (ok) occ.push_back(p);
      }
      if (!occ.empty()) res.match_length = len;
    }
    DraftTree tree;
    if (!occ.empty() && budget > 0) {  // with no budget nothing is read
      // Rank order: sort the occurrences by the text that follows them.
      std::sort(occ.begin(), occ.end(), [&](std::size_t a, std::size_t b) {
        return std::lexicographical_compare(codes_.begin() + static_cast<std::ptrdiff_t>(a), codes_.end(),
                                            codes_.begin() + static_cast<std::ptrdiff_t>(b), codes_.end());
      });
      const std::size_t n = occ.size();
      const std::size_t k = std::min(n, opt_.max_occurrences);
      std::map<Tokens, int> counts;
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t p = occ[i * n / k] + res.match_length;
        Tokens cont;
        for (std::size_t j = p; j < codes_.size() && codes_[j] != 0 && cont.size() < opt_.continuation; ++j) cont.push_back(codes_[j] - 1);
        if (cont.empty()) continue;
        ++res.occurrences;
        ++counts[cont];
      }
      for (const auto& [cont, count] : counts) tree.insert(cont, static_cast<float>(count));
      tree.prune(std::min(opt_.max_nodes, budget));
    }
    res.tree = tree.linearize(-1, 1 << 20);
    return res;
  }

 private:
  RestOptions opt_;
  std::vector<Token> codes_;
};

void expect_same_tree(const LinearTree& got, const LinearTree& want, const std::string& where) {
  ASSERT_EQ(got.tokens, want.tokens) << where << "\ngot:\n" << to_string(got) << "want:\n" << to_string(want);
  ASSERT_EQ(got.parent, want.parent) << where;
  ASSERT_EQ(got.score, want.score) << where;
}

// Simulated greedy decoding of `output` after `prompt`: at each step the drafter and the brute
// force must propose the same tree; the longest path equal to the output is accepted plus one
// bonus token. Returns the mean tokens per step.
double simulate(RestDrafter& drafter, const BruteRest& brute, const Tokens& prompt, const Tokens& output,
                std::size_t budget) {
  drafter.begin(prompt, {});
  Tokens seq = prompt;
  std::size_t pos = 0, steps = 0;
  DraftTree out;
  while (pos < output.size()) {
    out.clear();
    drafter.propose(budget, out);
    const LinearTree got = out.linearize(-1, 1 << 20);
    const auto want = brute.propose(seq, budget);
    const std::string where = "step " + std::to_string(steps) + " at output position " + std::to_string(pos);
    expect_same_tree(got, want.tree, where);
    if (::testing::Test::HasFatalFailure()) return 0;
    EXPECT_EQ(drafter.last_retrieval().match_length, want.match_length) << where;
    EXPECT_EQ(drafter.last_retrieval().occurrences, want.occurrences) << where;
    EXPECT_LE(static_cast<std::size_t>(got.num_drafts()), budget);
    // Greedy walk along the output.
    Tokens accepted;
    std::int32_t node = 0;
    while (pos + accepted.size() < output.size()) {
      const Token next = output[pos + accepted.size()];
      std::int32_t c = got.first_child[static_cast<std::size_t>(node)];
      while (c >= 0 && got.tokens[static_cast<std::size_t>(c)] != next) c = got.next_sibling[static_cast<std::size_t>(c)];
      accepted.push_back(next);  // accepted draft token, or the bonus token when c < 0
      if (c < 0) break;
      node = c;
    }
    drafter.accept(accepted);
    seq.insert(seq.end(), accepted.begin(), accepted.end());
    pos += accepted.size();
    ++steps;
  }
  return static_cast<double>(output.size()) / static_cast<double>(steps);
}

struct RandomCase {
  std::int32_t vocab;
  std::size_t max_occurrences;
  std::size_t c;
  std::size_t budget;
};

class RestRandom : public ::testing::TestWithParam<RandomCase> {};

TEST_P(RestRandom, MatchesBruteForceInSimulatedDecoding) {
  const auto param = GetParam();
  std::mt19937 rng(static_cast<std::uint32_t>(param.vocab * 31 + param.max_occurrences));
  // Documents built from a few recurring phrases, so matches are long and continuations vary.
  std::vector<Tokens> phrases(12);
  for (auto& p : phrases) {
    p.resize(2 + rng() % 6);
    for (auto& t : p) t = static_cast<Token>(rng() % static_cast<std::uint32_t>(param.vocab));
  }
  auto make = [&](std::size_t len) {
    Tokens d;
    while (d.size() < len) {
      if (rng() % 4 == 0) {
        d.push_back(static_cast<Token>(rng() % static_cast<std::uint32_t>(param.vocab)));
      } else {
        const auto& p = phrases[rng() % phrases.size()];
        d.insert(d.end(), p.begin(), p.end());
      }
    }
    return d;
  };
  std::vector<Tokens> docs;
  for (int i = 0; i < 12; ++i) docs.push_back(i % 5 == 4 ? Tokens{} : make(rng() % 400));
  TempDir dir;
  build_datastore(docs, param.vocab, dir / "ds");
  RestOptions opt;
  opt.max_occurrences = param.max_occurrences;
  opt.max_nodes = param.c;
  opt.max_match = 6;
  opt.continuation = 5;
  RestDrafter drafter(Datastore::open_shared(dir / "ds"), opt);
  const BruteRest brute(docs, opt);
  for (int run = 0; run < 3; ++run) {
    const double tau = simulate(drafter, brute, make(10), make(150), param.budget);
    if (HasFatalFailure()) return;
    EXPECT_GE(tau, 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RestRandom,
                         ::testing::Values(RandomCase{3, 1024, 64, 64}, RandomCase{111, 1024, 64, 64},
                                           RandomCase{111, 7, 64, 64}, RandomCase{111, 1, 8, 64},
                                           RandomCase{40000, 13, 64, 10}, RandomCase{70000, 1024, 16, 64},
                                           RandomCase{111, 1024, 64, 0}));

// MT-Bench answers as byte strings (bytes as tokens, one document per JSONL line): a datastore
// from some models' answers, replayed on another model's answers.
TEST(RestRealCorpus, MatchesBruteForceOnMtBenchAnswers) {
  const auto dir = refdec_test::data_file("data/mt_bench/model_answer");
  if (dir.empty()) GTEST_SKIP() << "data/mt_bench/model_answer not found under " << refdec_test::data_dir();
  auto lines_of = [&](const char* name, std::size_t max_lines) {
    std::vector<Tokens> docs;
    std::ifstream f(dir / name);
    std::string line;
    while (docs.size() < max_lines && std::getline(f, line)) {
      Tokens d;
      for (const unsigned char ch : line) d.push_back(ch);
      docs.push_back(std::move(d));
    }
    return docs;
  };
  std::vector<Tokens> docs = lines_of("gpt-4.jsonl", 12);
  for (auto& d : lines_of("claude-v1.jsonl", 12)) docs.push_back(std::move(d));
  const auto hidden = lines_of("vicuna-13b-v1.3.jsonl", 3);
  if (docs.size() < 24 || hidden.size() < 3) GTEST_SKIP() << "MT-Bench answer files are incomplete in " << dir;
  TempDir tmp;
  build_datastore(docs, 256, tmp / "ds");
  RestOptions opt;
  opt.max_occurrences = 64;  // small K, so that sampling happens
  RestDrafter drafter(Datastore::open_shared(tmp / "ds"), opt);
  const BruteRest brute(docs, opt);
  for (const auto& h : hidden) {
    const Tokens prompt(h.begin(), h.begin() + 40);
    const Tokens output(h.begin() + 40, h.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(h.size(), 600)));
    const double tau = simulate(drafter, brute, prompt, output, 64);
    if (HasFatalFailure()) return;
    RecordProperty("tau", std::to_string(tau));
    std::printf("tau %.3f over %zu bytes\n", tau, output.size());
    EXPECT_GT(tau, 1.5);  // JSON keys and English text repeat across answers
  }
}

TEST(Rest, HandCheckedCounts) {
  TempDir dir;
  // "1 2" is followed by 3 4 twice, 3 5 once and 6 once; its last occurrence ends a document.
  const std::vector<Tokens> docs = {{1, 2, 3, 4}, {1, 2, 3, 4}, {0, 1, 2, 3, 5}, {1, 2, 6}, {1, 2}};
  build_datastore(docs, 7, dir / "ds");
  RestDrafter drafter(Datastore::open_shared(dir / "ds"), RestOptions{.max_match = 4, .continuation = 3, .max_nodes = 64, .max_occurrences = 100});
  EXPECT_EQ(drafter.name(), "rest");
  drafter.begin(Tokens{0, 1, 2}, std::vector<Tokens>{{9, 9, 9}});  // references are ignored
  DraftTree out;
  drafter.propose(64, out);
  EXPECT_EQ(drafter.last_retrieval().match_length, 3u);  // "0 1 2" occurs once
  EXPECT_EQ(drafter.last_match(), 3u);
  EXPECT_EQ(AnyDrafter(drafter).last_match(), 3u);  // forwarded (a copy keeps the last retrieval)
  LinearTree t = out.linearize(-1, 64);
  EXPECT_EQ(t.tokens, (Tokens{-1, 3, 5}));
  drafter.begin(Tokens{5, 1, 2}, {});
  out.clear();
  drafter.propose(64, out);
  EXPECT_EQ(drafter.last_retrieval().match_length, 2u);
  EXPECT_EQ(drafter.last_retrieval().range.size(), 5u);
  EXPECT_EQ(drafter.last_retrieval().occurrences, 4u);  // the last "1 2" ends its document
  EXPECT_EQ(drafter.last_match(), 2u);
  t = out.linearize(-1, 64);
  EXPECT_EQ(to_string(t), "[0] -1\n  [1] 3 (3)\n    [3] 4 (2)\n    [4] 5 (1)\n  [2] 6 (1)\n");
  out.clear();
  drafter.propose(2, out);  // budget 2: the two most frequent nodes
  EXPECT_EQ(to_string(out.linearize(-1, 64)), "[0] -1\n  [1] 3 (3)\n    [2] 4 (2)\n");
}

TEST(Rest, RejectsBadInput) {
  TempDir dir;
  build_datastore(std::vector<Tokens>{{1, 2, 3}}, 5, dir / "ds");
  const auto ds = Datastore::open_shared(dir / "ds");
  RestDrafter drafter(ds);
  EXPECT_THROW(drafter.begin(Tokens{1, 5}, {}), Error);
  drafter.begin(Tokens{1}, {});
  EXPECT_THROW(drafter.accept(Tokens{-1}), Error);
  EXPECT_THROW(RestDrafter(nullptr), Error);
  EXPECT_THROW(RestDrafter(ds, RestOptions{.max_match = 0}), Error);
  EXPECT_THROW(RestDrafter(ds, RestOptions{.continuation = 0}), Error);
  EXPECT_THROW(RestDrafter(ds, RestOptions{.max_nodes = 0}), Error);
  EXPECT_THROW(RestDrafter(ds, RestOptions{.max_occurrences = 0}), Error);
  try {
    drafter.begin(Tokens{7}, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt token 7 at index 0"), std::string::npos) << e.what();
  }
}

TEST(Rest, RejectsOptionsAboveTheirBounds) {
  TempDir dir;
  build_datastore(std::vector<Tokens>{{1, 2, 3}}, 5, dir / "ds");
  const auto ds = Datastore::open_shared(dir / "ds");
  const auto max = std::numeric_limits<std::size_t>::max();
  // m = SIZE_MAX (what "--rest-m -1" became) used to wrap the path buffer and crash.
  refdec_test::expect_error([&] { RestDrafter(ds, RestOptions{.continuation = max}); }, "continuation must be in [1, 1024]");
  refdec_test::expect_error([&] { RestDrafter(ds, RestOptions{.continuation = 1000000000}); }, "got 1000000000");
  refdec_test::expect_error([&] { RestDrafter(ds, RestOptions{.max_match = max}); }, "max_match (longest suffix) must be in [1, 1024]");
  refdec_test::expect_error([&] { RestDrafter(ds, RestOptions{.max_nodes = 65537}); }, "max_nodes must be in [1, 65536]");
  refdec_test::expect_error([&] { RestDrafter(ds, RestOptions{.max_occurrences = max}); }, "max_occurrences must be in [1, 2^31]");
  RestDrafter edge(ds, RestOptions{.max_match = 1024, .continuation = 1024, .max_nodes = 65536, .max_occurrences = std::size_t{1} << 31});
  edge.begin(Tokens{1, 2}, {});
  DraftTree out;
  edge.propose(64, out);
  EXPECT_EQ(out.size(), 1u);  // 3, then the document ends
}

TEST(Rest, WorksThroughAnyDrafter) {
  TempDir dir;
  build_datastore(std::vector<Tokens>{{1, 2, 3, 4, 5}}, 6, dir / "ds");
  AnyDrafter any(RestDrafter(Datastore::open_shared(dir / "ds")));
  EXPECT_EQ(any.name(), "rest");
  any.begin(Tokens{1, 2}, {});
  DraftTree out;
  any.propose(64, out);
  EXPECT_EQ(to_string(out.linearize(2, 64)), "[0] 2\n  [1] 3 (1)\n    [2] 4 (1)\n      [3] 5 (1)\n");
}

}  // namespace
