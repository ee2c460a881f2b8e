// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// NgramTrieDrafter against a reference model of its specification that rebuilds a std::map trie
// from every window of the context at every step, in simulated greedy decoding of random and real
// token streams, plus hand-checked cases.

#include "refdec/drafters/ngram_trie.hpp"

#include <gtest/gtest.h>

#include "drafters/scenario.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

static_assert(Drafter<NgramTrieDrafter>);

using Tokens = std::vector<Token>;

// ---- The reference model --------------------------------------------------------------------

// The specification, written for clarity instead of speed: at every proposal the trie is rebuilt
// by inserting every window of every text as the header comment says, and the best-first search
// scans the whole frontier for its best node.
class ReferenceNgramTrie {
 public:
  explicit ReferenceNgramTrie(NgramTrieOptions options) : opt_(options) {}

  void begin(const Tokens& prompt, const std::vector<Tokens>& references) {
    references_ = references;
    seq_ = prompt;
    prompt_len_ = prompt.size();
  }
  void accept(std::span<const Token> tokens) { seq_.insert(seq_.end(), tokens.begin(), tokens.end()); }

  // Rebuilds the trie and returns its node count, the root included.
  std::size_t rebuild() {
    nodes_.assign(1, Node{});
    std::int64_t offset = 0;  // context position of the text's first token
    std::vector<Tokens> texts = references_;
    texts.emplace_back(seq_.begin(), seq_.begin() + static_cast<std::ptrdiff_t>(opt_.grow ? seq_.size() : prompt_len_));
    for (const Tokens& text : texts) {
      for (std::size_t i = 0; i < text.size(); ++i) {
        const std::size_t end = std::min(i + opt_.ngram, text.size());  // the window is text[i, end)
        for (std::size_t j = 0; j < opt_.max_match && i + j < end; ++j) {
          std::size_t v = 0;
          for (std::size_t k = i + j; k < end; ++k) {  // the path window[j:]
            auto [it, fresh] = nodes_[v].children.emplace(text[k], nodes_.size());
            if (fresh) nodes_.push_back(Node{});
            v = it->second;
            nodes_[v].freq += 1;
            nodes_[v].last = std::max(nodes_[v].last, offset + static_cast<std::int64_t>(k));
            nodes_[v].depth = static_cast<int>(k - (i + j) + 1);
          }
        }
      }
      offset += static_cast<std::int64_t>(text.size());
    }
    return nodes_.size();
  }

  // Rebuilds the trie and proposes. Also checks that the tree's scores are the trie frequencies.
  void propose(std::size_t budget, DraftTree& out) {
    rebuild();
    const std::size_t limit = std::min(opt_.max_nodes, budget);
    if (limit == 0) return;
    std::optional<std::size_t> start;
    for (std::size_t j = std::min(opt_.max_match, seq_.size()); j >= 1 && !start; --j) {
      std::optional<std::size_t> v = 0;
      for (std::size_t k = seq_.size() - j; k < seq_.size() && v; ++k) {
        const auto it = nodes_[*v].children.find(seq_[k]);
        v = it == nodes_[*v].children.end() ? std::nullopt : std::optional<std::size_t>(it->second);
      }
      if (v && !nodes_[*v].children.empty()) start = v;
    }
    if (!start) return;
    struct Pick {
      std::size_t node;
      Tokens path;  // below the match
    };
    std::vector<Pick> frontier;
    std::vector<Pick> kept;
    for (const auto& [t, c] : nodes_[*start].children) frontier.push_back({c, {t}});
    while (kept.size() < limit && !frontier.empty()) {
      std::size_t best = 0;
      for (std::size_t i = 1; i < frontier.size(); ++i) {
        const Node& a = nodes_[frontier[i].node];
        const Node& b = nodes_[frontier[best].node];
        const auto ka = std::make_tuple(a.freq, a.last, -a.depth);
        const auto kb = std::make_tuple(b.freq, b.last, -b.depth);
        EXPECT_NE(ka, kb) << "the ranking leaves two nodes tied";
        if (ka > kb) best = i;
      }
      Pick p = frontier[best];
      frontier.erase(frontier.begin() + static_cast<std::ptrdiff_t>(best));
      for (const auto& [t, c] : nodes_[p.node].children) {
        Tokens path = p.path;
        path.push_back(t);
        frontier.push_back({c, std::move(path)});
      }
      kept.push_back(std::move(p));
    }
    // Scores: a kept node's frequency minus its kept children's, so that paths sum to frequencies.
    for (const Pick& p : kept) {
      std::int64_t score = nodes_[p.node].freq;
      for (const Pick& q : kept)
        if (q.path.size() == p.path.size() + 1 && std::equal(p.path.begin(), p.path.end(), q.path.begin()))
          score -= nodes_[q.node].freq;
      out.insert(p.path, static_cast<float>(score));
    }
    const LinearTree lin = out.linearize(0, out.size());
    for (std::int32_t i = 1; i < lin.size(); ++i) {
      Tokens path;
      for (std::int32_t k = i; k > 0; k = lin.parent[static_cast<std::size_t>(k)]) path.push_back(lin.tokens[static_cast<std::size_t>(k)]);
      std::size_t v = *start;
      for (auto it = path.rbegin(); it != path.rend(); ++it) v = nodes_[v].children.at(*it);
      EXPECT_EQ(lin.score[static_cast<std::size_t>(i)], static_cast<float>(nodes_[v].freq)) << "draft node " << i;
    }
  }

  const Tokens& sequence() const { return seq_; }

 private:
  struct Node {
    std::map<Token, std::size_t> children;
    std::int64_t freq = 0;
    std::int64_t last = -1;  // context position where the latest occurrence ends
    int depth = 0;
  };
  NgramTrieOptions opt_;
  std::vector<Tokens> references_;
  Tokens seq_;
  std::size_t prompt_len_ = 0;
  std::vector<Node> nodes_;
};

// ---- Simulated decoding ---------------------------------------------------------------------

using refdec_test::DecodeCounts;
using refdec_test::Scenario;

// Greedy decoding of `s.truth` (the first `steps_until` tokens) with NgramTrieDrafter proposing,
// the reference shadowing it, and both proposals compared at every step.
DecodeCounts decode(const NgramTrieOptions& opt, const Scenario& s, std::mt19937& rng, std::size_t steps_until) {
  NgramTrieDrafter drafter(opt);
  ReferenceNgramTrie reference(opt);
  drafter.begin(s.prompt, s.references);
  reference.begin(s.prompt, s.references);
  const std::size_t budgets[] = {0, 1, 2, 5, opt.max_nodes, 64};
  DecodeCounts counts;
  std::size_t pos = 0;  // tokens of the truth decoded so far
  DraftTree mine;
  DraftTree want;
  Acceptance acc;
  while (pos < steps_until) {
    const std::size_t budget = budgets[rng() % std::size(budgets)];
    const Token root = reference.sequence().empty() ? 0 : reference.sequence().back();
    mine.clear();
    want.clear();
    drafter.propose(budget, mine);
    reference.propose(budget, want);
    SCOPED_TRACE("step " + std::to_string(counts.steps) + ", budget " + std::to_string(budget));
    const LinearTree lin = mine.linearize(root, budget);
    EXPECT_EQ(to_string(lin), to_string(want.linearize(root, budget)));
    EXPECT_LE(mine.size(), std::min(opt.max_nodes, budget));
    EXPECT_EQ(drafter.num_nodes(), reference.rebuild());
    if (::testing::Test::HasFailure()) return counts;  // one diagnosis is enough
    refdec_test::accept_truth(lin, s.truth, pos, acc);
    drafter.accept(acc.tokens);
    reference.accept(acc.tokens);
    pos += acc.tokens.size();
    counts.count_step(lin, acc);
    for (std::int32_t i = 1; i < lin.size(); ++i) counts.branched += lin.next_sibling[static_cast<std::size_t>(i)] >= 0;
  }
  return counts;
}

// vocab, {n, prefix_len}, num_draft, with references, grow
using Config = std::tuple<unsigned, std::pair<std::size_t, std::size_t>, std::size_t, bool, bool>;

class NgramTrieVersusReference : public ::testing::TestWithParam<Config> {};

TEST_P(NgramTrieVersusReference, SameDraftsWhileDecoding) {
  const auto [vocab, window, num_draft, with_references, grow] = GetParam();
  const auto [n, prefix_len] = window;
  const NgramTrieOptions opt{.ngram = n, .max_match = prefix_len, .max_nodes = num_draft, .grow = grow};
  std::mt19937 rng(static_cast<unsigned>(1000 * vocab + 100 * n + 10 * prefix_len + num_draft) +
                   (with_references ? 7u : 0u) + (grow ? 0u : 13u));
  DecodeCounts total;
  for (int trial = 0; trial < 3; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const Scenario s = refdec_test::make_scenario(vocab, with_references ? refdec_test::ScenarioShape{} : refdec_test::ScenarioShape{.max_references = 0}, 200, rng);
    total += decode(opt, s, rng, 160);
    if (HasFailure()) return;
  }
  // The scenarios must exercise what is compared: proposals, acceptance and, given room, branching.
  EXPECT_GT(total.proposals, 0);
  EXPECT_GT(total.accepted, 0);
  if (num_draft > 1 && grow) {
    EXPECT_GT(total.branched, 0);
  }
}

using Window = std::pair<std::size_t, std::size_t>;

std::string config_name(const ::testing::TestParamInfo<Config>& p) {  // `info` would shadow the macro's
  return "v" + std::to_string(std::get<0>(p.param)) + "_n" + std::to_string(std::get<1>(p.param).first) + "_lp" +
         std::to_string(std::get<1>(p.param).second) + "_d" + std::to_string(std::get<2>(p.param)) +
         (std::get<3>(p.param) ? "_refs" : "_norefs") + (std::get<4>(p.param) ? "" : "_frozen");
}

INSTANTIATE_TEST_SUITE_P(Sweep, NgramTrieVersusReference,
                         ::testing::Combine(::testing::Values(3u, 7u, 111u),
                                            ::testing::Values(Window{2, 1}, Window{4, 1}, Window{4, 3}, Window{13, 3}),
                                            ::testing::Values(std::size_t{1}, std::size_t{5}, std::size_t{32}),
                                            ::testing::Bool(), ::testing::Values(true)),
                         config_name);

// The paper's frozen trie, on fewer configurations.
INSTANTIATE_TEST_SUITE_P(Frozen, NgramTrieVersusReference,
                         ::testing::Combine(::testing::Values(3u, 111u), ::testing::Values(Window{4, 1}, Window{4, 3}),
                                            ::testing::Values(std::size_t{1}, std::size_t{32}),
                                            ::testing::Bool(), ::testing::Values(false)),
                         config_name);

// ---- Real token streams ---------------------------------------------------------------------

// Appends the UTF-8 form of code point `cp` to `out`.
void put_utf8(std::uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The answer turns of one Spec-Bench answer line (`"choices": [{... "turns": ["...", ...]`),
// JSON string escapes decoded. Just enough JSON for these files.
std::vector<std::string> answer_turns(const std::string& line) {
  std::vector<std::string> turns;
  const std::size_t choices = line.find("\"choices\"");
  if (choices == std::string::npos) return turns;
  std::size_t i = line.find("\"turns\"", choices);
  if (i == std::string::npos) return turns;
  i = line.find('[', i);
  auto hex4 = [&line](std::size_t at) { return static_cast<std::uint32_t>(std::stoul(line.substr(at, 4), nullptr, 16)); };
  while (i != std::string::npos && i < line.size()) {
    i = line.find_first_of("\"]", i + 1);
    if (i == std::string::npos || line[i] == ']') break;
    std::string s;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] != '\\') {
        s += line[i];
        continue;
      }
      const char e = line[++i];
      switch (e) {
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'u': {
          std::uint32_t cp = hex4(i + 1);
          i += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && line.compare(i + 1, 2, "\\u") == 0) {  // surrogate pair
            cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(i + 3) - 0xDC00);
            i += 6;
          }
          put_utf8(cp, s);
          break;
        }
        default: s += e;  // \" \\ \/
      }
    }
    turns.push_back(std::move(s));
  }
  return turns;
}

class NgramTrieRealText : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto tok = refdec_test::data_file("models/stories260K/tok512.bin");
    const auto answers = refdec_test::data_file("data/spec_bench/vicuna-7b-v1.3-greedy.jsonl");
    if (tok.empty() || answers.empty())
      GTEST_SKIP() << "models/stories260K/tok512.bin or data/spec_bench/vicuna-7b-v1.3-greedy.jsonl not found under "
                   << refdec_test::data_dir();
    const Llama2cTokenizer tokenizer = Llama2cTokenizer::load(tok, 512);
    std::ifstream in(answers);
    std::string line;
    while (streams_.size() < 3 && std::getline(in, line)) {
      Tokens tokens;
      for (const std::string& turn : answer_turns(line)) {
        const Tokens t = tokenizer.encode(turn, true, false);
        tokens.insert(tokens.end(), t.begin(), t.end());
      }
      streams_.push_back(std::move(tokens));
    }
    ASSERT_EQ(streams_.size(), 3u);
    for (const Tokens& s : streams_) ASSERT_GT(s.size(), 500u);
  }
  std::vector<Tokens> streams_;  // [3][answer length] tokenised answers of the first three questions
};

// Decodes the first 300 tokens after a 40-token prompt of each answer; with references, the
// previous answer is one (same model, another question: shared phrasing, not shared content).
TEST_F(NgramTrieRealText, SameDraftsAsReferenceOnVicunaAnswers) {
  std::mt19937 rng(7);
  DecodeCounts total;
  const NgramTrieOptions configs[] = {{}, {.ngram = 5, .max_match = 2, .max_nodes = 8}, {.ngram = 13, .max_match = 3, .max_nodes = 32, .grow = false}};
  for (std::size_t k = 0; k < streams_.size(); ++k) {
    for (const NgramTrieOptions& opt : configs) {
      SCOPED_TRACE("answer " + std::to_string(k) + ", n " + std::to_string(opt.ngram) + ", grow " + std::to_string(opt.grow));
      Scenario s;
      s.prompt.assign(streams_[k].begin(), streams_[k].begin() + 40);
      s.truth.assign(streams_[k].begin() + 40, streams_[k].end());
      if (k > 0) s.references.push_back(streams_[k - 1]);
      total += decode(opt, s, rng, 300);
      if (HasFailure()) return;
    }
  }
  EXPECT_GT(total.proposals, 0);
  EXPECT_GT(total.accepted, 0);
  EXPECT_GT(total.branched, 0);
}

// ---- Hand-checked cases ---------------------------------------------------------------------

std::string draft(NgramTrieDrafter& d, std::size_t budget = 64) {
  DraftTree tree;
  d.propose(budget, tree);
  return to_string(tree.linearize(7, 1 << 20));
}

TEST(NgramTrieDrafter, GoldenTreeWithOneTokenPrefix) {
  // n 3, L_p 1: each window is inserted whole. Below [2]: [2 3 1] once, [2 4 1] once; [2 4] is
  // the more recent of the tied pair.
  NgramTrieDrafter d(NgramTrieOptions{.ngram = 3, .max_match = 1, .max_nodes = 8});
  d.begin(Tokens{1, 2, 3, 1, 2, 4, 1, 2}, {});
  EXPECT_EQ(draft(d),
            "[0] 7\n"
            "  [1] 4 (1)\n"
            "    [3] 1 (1)\n"
            "  [2] 3 (1)\n"
            "    [4] 1 (1)\n");
  EXPECT_EQ(draft(d, 2),
            "[0] 7\n"
            "  [1] 4 (1)\n"
            "    [2] 1 (1)\n");
  EXPECT_EQ(d.num_nodes(), 1u + 4 + 5 + 6);  // the root, 4 unigrams, 5 bigrams, 6 trigrams
}

TEST(NgramTrieDrafter, GoldenTreeWithSubPrefixesAndFallback) {
  // n 3, L_p 2: windows W[0:] and W[1:], so an occurrence at p >= 1 weighs 2 at depths 1-2 and 1
  // at depth 3. [9 2] has no continuation, so the match falls back to [2].
  NgramTrieDrafter d(NgramTrieOptions{.ngram = 3, .max_match = 2, .max_nodes = 8});
  d.begin(Tokens{1, 2, 3, 4, 2, 5, 9, 2}, {});
  EXPECT_EQ(draft(d),
            "[0] 7\n"
            "  [1] 5 (2)\n"
            "    [3] 9 (1)\n"
            "  [2] 3 (2)\n"
            "    [4] 4 (1)\n");
  EXPECT_EQ(d.last_match(), 1u);  // the fallback [2]
  // Now [2 3] matches with two tokens: only its continuation.
  d.accept(Tokens{3});
  EXPECT_EQ(draft(d),
            "[0] 7\n"
            "  [1] 4 (1)\n");
  EXPECT_EQ(d.last_match(), 2u);
}

TEST(NgramTrieDrafter, TieRuleFrequencyThenRecencyThenDepth) {
  NgramTrieDrafter d(NgramTrieOptions{.ngram = 2, .max_match = 1, .max_nodes = 1});
  d.begin(Tokens{1, 2, 1, 3, 1}, {});
  EXPECT_EQ(draft(d), "[0] 7\n  [1] 3 (1)\n");  // equal frequency: the more recent one
  d.begin(Tokens{1, 2, 1, 2, 1, 3, 1}, {});
  EXPECT_EQ(draft(d), "[0] 7\n  [1] 2 (2)\n");  // frequency first
  // Below [1] in 1 1 2 1 1 3 1: [1 1] (2) first; then [1 3] and [1 1 3] tie in frequency and
  // both last end at position 5: the shallower [1 3] wins. [1 3 1] (ends at 6) then beats [1 1 3].
  NgramTrieDrafter e(NgramTrieOptions{.ngram = 3, .max_match = 1, .max_nodes = 64});
  e.begin(Tokens{1, 1, 2, 1, 1, 3, 1}, {});
  EXPECT_EQ(draft(e),
            "[0] 7\n"
            "  [1] 1 (2)\n"
            "    [4] 3 (1)\n"
            "    [5] 2 (1)\n"
            "  [2] 3 (1)\n"
            "    [6] 1 (1)\n"
            "  [3] 2 (1)\n"
            "    [7] 1 (1)\n");
  EXPECT_EQ(draft(e, 2), "[0] 7\n  [1] 1 (2)\n  [2] 3 (1)\n");
  EXPECT_EQ(draft(e, 3), "[0] 7\n  [1] 1 (2)\n  [2] 3 (1)\n    [3] 1 (1)\n");
}

TEST(NgramTrieDrafter, ReferencesAreSeparateTexts) {
  // Windows stop at each text's end: 5 never follows 4 across the references.
  NgramTrieDrafter d(NgramTrieOptions{.ngram = 4, .max_match = 1, .max_nodes = 8});
  d.begin(Tokens{4}, std::vector<Tokens>{{3, 4}, {5, 6}});
  EXPECT_EQ(draft(d), "[0] 7\n");
  d.begin(Tokens{3}, std::vector<Tokens>{{3, 4}, {5, 6}});
  EXPECT_EQ(draft(d), "[0] 7\n  [1] 4 (1)\n");
  d.accept(Tokens{4, 5});  // the sequence is a text too
  d.accept(Tokens{3});
  EXPECT_EQ(draft(d), "[0] 7\n  [1] 4 (2)\n    [2] 5 (1)\n      [3] 3 (1)\n");
}

TEST(NgramTrieDrafter, GrowsWithAcceptedTokensUnlessFrozen) {
  for (const bool grow : {true, false}) {
    NgramTrieDrafter d(NgramTrieOptions{.ngram = 3, .max_match = 1, .max_nodes = 8, .grow = grow});
    d.begin(Tokens{1, 2, 3}, {});
    EXPECT_EQ(draft(d), "[0] 7\n");
    d.accept(Tokens{7, 8, 3});
    EXPECT_EQ(draft(d), grow ? "[0] 7\n  [1] 7 (1)\n    [2] 8 (1)\n" : "[0] 7\n") << "grow " << grow;
    EXPECT_EQ(d.num_nodes(), grow ? 1u + 5 + 5 + 4 : 1u + 3 + 2 + 1) << "grow " << grow;
  }
}

TEST(NgramTrieDrafter, NoBudgetNoMatchOrNoSequenceProposesNothing) {
  NgramTrieDrafter d;
  d.begin(Tokens{1, 2, 1, 2}, {});
  DraftTree tree;
  d.propose(0, tree);
  EXPECT_TRUE(tree.empty());
  d.propose(1, tree);
  EXPECT_EQ(tree.size(), 1u);
  d.begin({}, std::vector<Tokens>{{1, 2}});  // an empty sequence has no suffix to match
  EXPECT_EQ(draft(d), "[0] 7\n");
  EXPECT_EQ(d.last_match(), 0u);
  d.accept(Tokens{1});
  EXPECT_EQ(draft(d), "[0] 7\n  [1] 2 (1)\n");  // [1 2] starts its text: one window covers it
}

TEST(NgramTrieDrafter, BeginResetsEverything) {
  const NgramTrieOptions opt{.ngram = 5, .max_match = 2, .max_nodes = 16};
  NgramTrieDrafter used(opt);
  used.begin(Tokens{1, 2, 3, 1, 2, 4}, std::vector<Tokens>{{9, 9, 9, 1, 2, 5}});
  used.accept(Tokens{1, 2, 6});
  (void)draft(used);
  NgramTrieDrafter fresh(opt);
  const Tokens prompt = {2, 4, 2};
  const std::vector<Tokens> refs = {{2, 4, 1}};
  used.begin(prompt, refs);
  fresh.begin(prompt, refs);
  EXPECT_EQ(used.num_nodes(), fresh.num_nodes());
  EXPECT_EQ(draft(used), draft(fresh));
  // [4 2] never continues, so [2] matches: [2 4] starts both texts (weight 1 each), and of
  // [2 4 1] and [2 4 2] the latter is more recent.
  EXPECT_EQ(draft(fresh), "[0] 7\n  [1] 4 (2)\n    [2] 2 (1)\n    [3] 1 (1)\n");
  used.accept(Tokens{4});
  fresh.accept(Tokens{4});
  EXPECT_EQ(draft(used), draft(fresh));
}

TEST(NgramTrieDrafter, RejectsInvalidOptionsAndNegativeTokens) {
  EXPECT_THROW(NgramTrieDrafter(NgramTrieOptions{.ngram = 1, .max_match = 1}), Error);
  EXPECT_THROW(NgramTrieDrafter(NgramTrieOptions{.ngram = 4, .max_match = 0}), Error);
  EXPECT_THROW(NgramTrieDrafter(NgramTrieOptions{.ngram = 4, .max_match = 4}), Error);
  EXPECT_THROW(NgramTrieDrafter(NgramTrieOptions{.max_nodes = 0}), Error);
  EXPECT_NO_THROW(NgramTrieDrafter(NgramTrieOptions{.ngram = 2, .max_match = 1, .max_nodes = 1}));
  EXPECT_EQ(NgramTrieDrafter().name(), "ngram-trie");
  NgramTrieDrafter d(NgramTrieOptions{.ngram = 3, .max_match = 1});
  d.begin(Tokens{1, 2, 1}, {});
  const std::size_t nodes = d.num_nodes();
  EXPECT_THROW(d.begin(Tokens{1, -2}, {}), Error);
  EXPECT_THROW(d.begin(Tokens{1, 2}, std::vector<Tokens>{{1}, {3, -1}}), Error);
  EXPECT_THROW(d.accept(Tokens{3, -4}), Error);
  // Rejected input changes nothing.
  EXPECT_EQ(d.num_nodes(), nodes);
  EXPECT_EQ(draft(d), "[0] 7\n  [1] 2 (1)\n    [2] 1 (1)\n");
}

}  // namespace
