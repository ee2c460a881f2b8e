// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// LlmaDrafter against a brute-force model of its specification that rescans the whole text at
// every step, in simulated greedy decoding of a hidden output, plus hand-checked cases.

#include "refdec/drafters/llma.hpp"

#include <gtest/gtest.h>

#include "drafters/scenario.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/references.hpp"
#include "refdec/core/drafter.hpp"

namespace {

using namespace refdec;

static_assert(Drafter<LlmaDrafter>);

using Tokens = std::vector<Token>;

// What the specification says one proposal contains.
struct BruteProposal {
  Tokens primary;                    // score 1.0; empty when nothing is proposed
  std::map<Token, Tokens> branches;  // every admissible extra span, by its first token
  std::size_t num_extra = 0;         // how many of them a proposal with m spans carries
};

// The specification, written for clarity instead of speed: the indexed text is rebuilt and every
// end position is compared against the sequence's tail at every step.
class BruteLlma {
 public:
  explicit BruteLlma(LlmaOptions options) : opt_(options) {}

  void begin(const Tokens& prompt, const std::vector<Tokens>& references) {
    refs_text_.clear();
    Token separator = -1;
    for (const Tokens& r : references) {
      refs_text_.insert(refs_text_.end(), r.begin(), r.end());
      refs_text_.push_back(separator--);
    }
    seq_ = prompt;
    cont_pos_ = -1;
    span_pos_ = -1;
    span_len_ = 0;
  }

  BruteProposal propose(std::size_t budget) {
    span_pos_ = -1;
    span_len_ = 0;
    BruteProposal out;
    if (budget == 0) return out;
    const Tokens text = indexed_text();
    // common[e]: how many trailing tokens of the sequence equal the text ending at position e.
    std::vector<std::size_t> common(text.size(), 0);
    for (std::size_t e = 0; e < text.size(); ++e) {
      std::size_t l = 0;
      while (l <= e && l < seq_.size() && text[e - l] == seq_[seq_.size() - 1 - l]) ++l;
      common[e] = l;
    }
    // Under self reference the text ends with the sequence, whose trailing end always matches.
    const std::size_t ends = opt_.self_reference ? text.size() - std::min<std::size_t>(text.size(), 1) : text.size();
    std::size_t len = 0;
    std::int64_t earliest = -1;
    for (std::size_t e = 0; e < ends; ++e)
      if (common[e] > len) {  // strictly longer: ties keep the earliest end
        len = common[e];
        earliest = static_cast<std::int64_t>(e);
      }
    const std::int64_t lookup = len >= opt_.min_match ? earliest + 1 : -1;
    if (cont_pos_ >= 0) {
      // Continuing a fully accepted span must land where a fresh lookup would: the matched
      // suffix grew by exactly the accepted tokens, so its earliest occurrence moved with them.
      // Continuation is thus invisible in the proposals (it only saves the lookup), and what the
      // comparison checks is that LlmaDrafter continues from the right place.
      ++continuations_;
      if (cont_pos_ != lookup) ++continuation_disagreements_;
    }
    const std::int64_t pos = cont_pos_ >= 0 ? cont_pos_ : lookup;
    if (pos < 0) return out;
    out.primary = copy(text, static_cast<std::size_t>(pos), {}, std::min(opt_.continuation, budget));
    if (out.primary.empty()) return out;  // extra spans only come beside a primary one
    span_pos_ = pos;
    span_len_ = static_cast<std::int64_t>(out.primary.size());
    if (opt_.spans > 1 && len >= opt_.min_match) {
      for (std::size_t e = 0; e + 1 < text.size(); ++e) {  // ascending: the first hit is the earliest
        const Token c = text[e + 1];
        if (common[e] < len || c < 0 || c == out.primary.front() || out.branches.contains(c)) continue;
        out.branches[c] = copy(text, e + 2, {c}, opt_.continuation);
      }
      out.num_extra = std::min(opt_.spans - 1, out.branches.size());
    }
    return out;
  }

  void accept(std::span<const Token> tokens) {
    const Tokens text = indexed_text();  // as the proposal saw it
    bool fully = span_pos_ >= 0 && static_cast<std::int64_t>(tokens.size()) == span_len_ + 1;
    for (std::size_t i = 0; fully && i < tokens.size(); ++i) {
      const auto p = static_cast<std::size_t>(span_pos_) + i;
      fully = p < text.size() && text[p] == tokens[i];
    }
    seq_.insert(seq_.end(), tokens.begin(), tokens.end());
    cont_pos_ = fully ? span_pos_ + span_len_ + 1 : -1;
    span_pos_ = -1;
  }

  const Tokens& sequence() const { return seq_; }
  int continuations() const { return continuations_; }
  int continuation_disagreements() const { return continuation_disagreements_; }

 private:
  Tokens indexed_text() const {
    Tokens text = refs_text_;
    if (opt_.self_reference) text.insert(text.end(), seq_.begin(), seq_.end());
    return text;
  }
  // `head` followed by the text from `from`, stopping at a separator, the text's end or `limit`.
  static Tokens copy(const Tokens& text, std::size_t from, Tokens head, std::size_t limit) {
    for (std::size_t i = from; i < text.size() && text[i] >= 0 && head.size() < limit; ++i) head.push_back(text[i]);
    return head;
  }

  LlmaOptions opt_;
  Tokens refs_text_;
  Tokens seq_;
  std::int64_t cont_pos_ = -1;
  std::int64_t span_pos_ = -1;
  std::int64_t span_len_ = 0;
  int continuations_ = 0;
  int continuation_disagreements_ = 0;
};

// The root-to-leaf paths of a proposal as (score, tokens). LlmaDrafter's spans never share a first
// token, so every child of the root must head a chain whose nodes all carry the span's score.
std::vector<std::pair<float, Tokens>> chains(const LinearTree& lin) {
  std::vector<std::pair<float, Tokens>> out;
  for (std::int32_t c = lin.first_child[0]; c >= 0; c = lin.next_sibling[static_cast<std::size_t>(c)]) {
    const float score = lin.score[static_cast<std::size_t>(c)];
    Tokens path;
    for (std::int32_t i = c; i >= 0; i = lin.first_child[static_cast<std::size_t>(i)]) {
      const auto u = static_cast<std::size_t>(i);
      if (i != c) {
        EXPECT_LT(lin.next_sibling[u], 0) << "span node " << i << " has a sibling";
      }
      EXPECT_EQ(lin.score[u], score) << "span node " << i << " scored apart from its span";
      path.push_back(lin.tokens[u]);
    }
    out.emplace_back(score, std::move(path));
  }
  return out;
}

std::string show(const Tokens& t) {
  std::string s = "[";
  for (std::size_t i = 0; i < t.size(); ++i) s += (i ? " " : "") + std::to_string(t[i]);
  return s + "]";
}

// Checks LlmaDrafter's tree against the brute force's proposal. With m == 1 the trees must be
// identical. With m > 1 the primary span must be identical, and the extra spans must be exactly
// num_extra of the admissible ones, each equal to the brute force's span for its first token,
// scored 0.5, 0.25, ... in some order: which extras are kept when more are admissible, and which
// gets which score, follows the automaton's edge order and is left unspecified.
void expect_same_proposal(const LinearTree& lin, const BruteProposal& want, const LlmaOptions& opt, Token root) {
  if (opt.spans == 1) {
    DraftTree expected;
    if (!want.primary.empty()) expected.insert(want.primary, 1.0f);
    EXPECT_EQ(to_string(lin), to_string(expected.linearize(root, std::size_t{1} << 20)));
    return;
  }
  const auto got = chains(lin);
  if (want.primary.empty()) {
    EXPECT_TRUE(got.empty()) << to_string(lin);
    return;
  }
  std::vector<float> extra_scores;
  int primaries = 0;
  for (const auto& [score, path] : got) {
    if (score == 1.0f) {
      ++primaries;
      EXPECT_EQ(show(path), show(want.primary));
      continue;
    }
    extra_scores.push_back(score);
    const auto it = want.branches.find(path.front());
    if (it == want.branches.end()) {
      ADD_FAILURE() << "inadmissible extra span " << show(path);
    } else {
      EXPECT_EQ(show(path), show(it->second));
    }
  }
  EXPECT_EQ(primaries, 1) << to_string(lin);
  std::sort(extra_scores.begin(), extra_scores.end(), std::greater<>());
  std::vector<float> want_scores;
  for (float s = 0.5f; want_scores.size() < want.num_extra; s *= 0.5f) want_scores.push_back(s);
  EXPECT_EQ(extra_scores, want_scores) << to_string(lin);
}

using refdec_test::DecodeCounts;
using refdec_test::Scenario;

// LLMA's scenarios: up to 4 references of up to 80 tokens, short prompts, longer passages; the
// output quotes the references only.
Scenario make_scenario(unsigned vocab, std::size_t output_len, std::mt19937& rng) {
  return refdec_test::make_scenario(
      vocab, {.max_references = 4, .max_reference_len = 80, .max_prompt_len = 12, .max_passage = 24, .output_quotes_prompt = false},
      output_len, rng);
}

// How a decode hands LlmaDrafter its references: each must draft the same.
enum class Given {
  kVectors,     // begin() with the scenario's vectors
  kSpans,       // begin() with spans over one buffer holding them all
  kSharedIndex  // an LlmaIndex built beforehand, begin() given no references
};

// Greedy decoding of `s.truth` with LlmaDrafter proposing, the brute force shadowing it, and the
// two proposals compared at every step.
DecodeCounts decode(const LlmaOptions& opt, const Scenario& s, std::mt19937& rng, std::size_t steps_until,
                    Given given = Given::kVectors) {
  LlmaDrafter drafter = given == Given::kSharedIndex ? LlmaDrafter(std::make_shared<const LlmaIndex>(s.references), opt)
                                                     : LlmaDrafter(opt);
  BruteLlma brute(opt);
  Tokens buffer;
  for (const Tokens& r : s.references) buffer.insert(buffer.end(), r.begin(), r.end());
  std::vector<std::span<const Token>> spans;
  for (std::size_t at = 0; const Tokens& r : s.references) {
    spans.push_back(std::span<const Token>(buffer).subspan(at, r.size()));
    at += r.size();
  }
  switch (given) {
    case Given::kVectors: drafter.begin(s.prompt, s.references); break;
    case Given::kSpans: drafter.begin(s.prompt, spans); break;
    case Given::kSharedIndex: drafter.begin(s.prompt, {}); break;
  }
  brute.begin(s.prompt, s.references);
  const std::size_t budgets[] = {0, 1, 2, opt.continuation > 1 ? opt.continuation - 1 : 1, opt.continuation, opt.continuation + 3, 64};
  DecodeCounts counts;
  std::size_t pos = 0;  // tokens of the truth decoded so far
  DraftTree tree;
  Acceptance acc;
  while (pos < steps_until) {
    const std::size_t budget = budgets[rng() % std::size(budgets)];
    const Token root = s.prompt.empty() && pos == 0 ? 0 : brute.sequence().back();
    tree.clear();
    drafter.propose(budget, tree);
    const BruteProposal want = brute.propose(budget);
    const LinearTree lin = tree.linearize(root, std::size_t{1} << 20);
    SCOPED_TRACE("step " + std::to_string(counts.steps) + ", budget " + std::to_string(budget) +
                 ", sequence " + show(brute.sequence()));
    expect_same_proposal(lin, want, opt, root);
    if (::testing::Test::HasFailure()) return counts;  // one diagnosis is enough
    refdec_test::accept_truth(lin, s.truth, pos, acc);
    drafter.accept(acc.tokens);
    brute.accept(acc.tokens);
    pos += acc.tokens.size();
    counts.count_step(lin, acc);
    counts.branched += lin.size() > 1 && lin.next_sibling[static_cast<std::size_t>(lin.first_child[0])] >= 0;
  }
  EXPECT_EQ(brute.continuation_disagreements(), 0);
  counts.continuations = brute.continuations();
  return counts;
}

// vocab, n, k, m, self_reference
using Config = std::tuple<unsigned, std::size_t, std::size_t, std::size_t, bool>;

class LlmaVersusBruteForce : public ::testing::TestWithParam<Config> {};

TEST_P(LlmaVersusBruteForce, SameProposalsWhileDecoding) {
  const auto [vocab, n, k, m, self_reference] = GetParam();
  const LlmaOptions opt{.min_match = n, .continuation = k, .spans = m, .self_reference = self_reference};
  std::mt19937 rng(1000 * vocab + 100 * static_cast<unsigned>(n) + 10 * static_cast<unsigned>(k) +
                   static_cast<unsigned>(m) + (self_reference ? 7 : 0));
  DecodeCounts total;
  for (const Given given : {Given::kVectors, Given::kSpans, Given::kSharedIndex}) {
    SCOPED_TRACE("references given as " + std::to_string(static_cast<int>(given)));
    const Scenario s = make_scenario(vocab, 260, rng);
    total += decode(opt, s, rng, 200, given);
    if (HasFailure()) return;
  }
  // The scenarios must exercise what is compared: proposals, acceptance and continuation.
  EXPECT_GT(total.proposals, 0);
  EXPECT_GT(total.accepted, 0);
  EXPECT_GT(total.continuations, 0);
  EXPECT_EQ(total.branched > 0, m > 1);
}

INSTANTIATE_TEST_SUITE_P(Sweep, LlmaVersusBruteForce,
                         ::testing::Combine(::testing::Values(2u, 3u, 5u, 50u),
                                            ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{3}),
                                            ::testing::Values(std::size_t{1}, std::size_t{4}, std::size_t{16}),
                                            ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4}),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Config>& p) {  // `info` would shadow the macro's
                           return "v" + std::to_string(std::get<0>(p.param)) + "_n" +
                                  std::to_string(std::get<1>(p.param)) + "_k" +
                                  std::to_string(std::get<2>(p.param)) + "_m" +
                                  std::to_string(std::get<3>(p.param)) +
                                  (std::get<4>(p.param) ? "_self" : "_refs");
                         });

// Proposes with `budget` and returns the tree in readable form.
std::vector<std::pair<float, Tokens>> propose(LlmaDrafter& d, std::size_t budget = 64) {
  DraftTree tree;
  d.propose(budget, tree);
  return chains(tree.linearize(0, std::size_t{1} << 20));
}

Tokens primary(LlmaDrafter& d, std::size_t budget = 64) {
  const auto c = propose(d, budget);
  EXPECT_LE(c.size(), 1u);
  return c.empty() ? Tokens{} : c.front().second;
}

TEST(LlmaDrafter, RejectsInvalidOptionsAndNegativeTokens) {
  EXPECT_THROW(LlmaDrafter(LlmaOptions{.min_match = 0}), Error);
  EXPECT_THROW(LlmaDrafter(LlmaOptions{.continuation = 0}), Error);
  EXPECT_THROW(LlmaDrafter(LlmaOptions{.spans = 0}), Error);
  EXPECT_NO_THROW(LlmaDrafter(LlmaOptions{.min_match = 1, .continuation = 1, .spans = 1}));
  for (const bool self : {false, true}) {
    LlmaDrafter d(LlmaOptions{.self_reference = self});
    EXPECT_THROW(d.begin(Tokens{1, -2}, std::vector<Tokens>{{1, 2}}), Error);
    EXPECT_THROW(d.begin(Tokens{1, 2}, std::vector<Tokens>{{1, 2}, {3, -1}}), Error);
    // A failed begin() leaves a drafter that a valid begin() fully resets.
    d.begin(Tokens{1}, std::vector<Tokens>{{1, 2, 3}});
    EXPECT_EQ(primary(d), (Tokens{2, 3}));
  }
}

TEST(LlmaDrafter, CopiesAfterEarliestLongestMatch) {
  // [7 1] occurs in both references; the longest suffix [8 7 1] only in the second.
  LlmaDrafter d(LlmaOptions{.min_match = 1, .continuation = 3});
  const std::vector<Tokens> refs = {{7, 1, 4, 4, 4}, {0, 8, 7, 1, 5, 6}, {8, 7, 1, 9}};
  d.begin(Tokens{3, 8, 7, 1}, refs);
  EXPECT_EQ(primary(d), (Tokens{5, 6}));  // stops at the separator, not in the next reference
  EXPECT_EQ(d.last_match(), 3u);          // what the copy rests on: [8 7 1]
  d.begin(Tokens{3, 7, 1}, refs);
  EXPECT_EQ(primary(d), (Tokens{4, 4, 4}));  // k == 3
  EXPECT_EQ(d.last_match(), 2u);
  EXPECT_EQ(primary(d, 2), (Tokens{4, 4}));  // budget < k
  // n: a two-token match does not trigger a copy that needs three.
  LlmaDrafter strict(LlmaOptions{.min_match = 3, .continuation = 3});
  strict.begin(Tokens{3, 7, 1}, refs);
  EXPECT_TRUE(primary(strict).empty());
  strict.begin(Tokens{3, 8, 7, 1}, refs);
  EXPECT_EQ(primary(strict), (Tokens{5, 6}));
}

TEST(LlmaDrafter, NoMatchOrNoBudgetProposesNothing) {
  LlmaDrafter d;
  d.begin(Tokens{1, 2, 3}, std::vector<Tokens>{{4, 5, 6}, {}, {7}});
  EXPECT_TRUE(propose(d).empty());
  EXPECT_EQ(d.last_match(), 0u);  // nothing proposed
  d.begin(Tokens{1, 2, 3}, {});
  EXPECT_TRUE(propose(d).empty());
  d.begin({}, std::vector<Tokens>{{1, 2}});  // an empty sequence has no suffix to match
  EXPECT_TRUE(propose(d).empty());
  d.begin(Tokens{1}, std::vector<Tokens>{{1, 2, 3}});
  DraftTree tree;
  d.propose(0, tree);
  EXPECT_TRUE(tree.empty());
  d.accept(Tokens{2});  // matching the reference, but nothing was proposed
  EXPECT_EQ(primary(d), (Tokens{3}));
  // A match at the very end of a reference has nothing after it.
  d.begin(Tokens{2, 3}, std::vector<Tokens>{{1, 2, 3}});
  EXPECT_TRUE(propose(d).empty());
}

TEST(LlmaDrafter, ContinuesFullyAcceptedSpans) {
  LlmaDrafter d(LlmaOptions{.min_match = 1, .continuation = 3});
  const std::vector<Tokens> refs = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}};
  d.begin(Tokens{1}, refs);
  EXPECT_EQ(primary(d), (Tokens{2, 3, 4}));
  d.accept(Tokens{2, 3, 4, 5});  // all drafts and the reference's next token as the bonus
  EXPECT_EQ(primary(d), (Tokens{6, 7, 8}));
  d.accept(Tokens{6, 7, 8, 9});
  EXPECT_EQ(primary(d), (Tokens{10}));
  d.accept(Tokens{10, 11});  // the reference has ended: the sequence now matches nothing
  EXPECT_TRUE(primary(d).empty());

  // Bonus differs from the reference: a fresh lookup of the new suffix [.. 4 7].
  d.begin(Tokens{1}, refs);
  EXPECT_EQ(primary(d), (Tokens{2, 3, 4}));
  d.accept(Tokens{2, 3, 4, 7});
  EXPECT_EQ(primary(d), (Tokens{8, 9, 10}));
  // Partly accepted.
  d.begin(Tokens{1}, refs);
  EXPECT_EQ(primary(d), (Tokens{2, 3, 4}));
  d.accept(Tokens{2, 99});
  EXPECT_TRUE(primary(d).empty());
  // A span cut by the budget continues from where it was cut.
  d.begin(Tokens{1}, refs);
  EXPECT_EQ(primary(d, 1), (Tokens{2}));
  d.accept(Tokens{2, 3});
  EXPECT_EQ(primary(d, 2), (Tokens{4, 5}));
}

TEST(LlmaDrafter, PromptLookup) {
  // The prompt as the only reference.
  const Tokens prompt = {10, 11, 12, 13, 20, 10, 11};
  LlmaDrafter d(LlmaOptions{.min_match = 2, .continuation = 4});
  d.begin(prompt, std::vector<Tokens>{prompt});
  // The whole prompt matches itself at the reference's end, where nothing follows.
  EXPECT_TRUE(primary(d).empty());
  d.accept(Tokens{12});  // now [10 11 12] occurs earlier
  EXPECT_EQ(primary(d), (Tokens{13, 20, 10, 11}));
  d.accept(Tokens{13, 20, 10, 11, 11});  // all accepted, but the reference ends there: lookup
  EXPECT_TRUE(primary(d).empty());       // [11 11] is found nowhere, [11] is shorter than n

  // Self reference and no references: the sequence searches its own past.
  LlmaDrafter self(LlmaOptions{.min_match = 2, .continuation = 4, .self_reference = true});
  self.begin(prompt, {});
  EXPECT_EQ(primary(self), (Tokens{12, 13, 20, 10}));
  self.accept(Tokens{12, 13, 20, 10, 11});  // fully accepted; continues into its own output
  EXPECT_EQ(primary(self), (Tokens{12, 13, 20, 10}));
  // The copy may run up to the sequence's end, never past it.
  self.begin(Tokens{5, 6, 7, 5, 6}, {});
  EXPECT_EQ(primary(self), (Tokens{7, 5, 6}));
  // With references, a span copied from one stops at its separator.
  self.begin(Tokens{0, 1}, std::vector<Tokens>{{0, 1, 2}});
  EXPECT_EQ(primary(self), (Tokens{2}));
}

TEST(LlmaDrafter, TreeOfSpans) {
  const std::vector<Tokens> refs = {{1, 2, 3}, {1, 4, 5, 6}, {1, 6, 7}, {1, 2, 8}, {1}};
  LlmaDrafter d(LlmaOptions{.min_match = 1, .continuation = 3, .spans = 3});
  d.begin(Tokens{9, 1}, refs);
  auto got = propose(d, 2);  // the budget cuts the primary span only
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (std::pair<float, Tokens>{1.0f, {2, 3}}));
  EXPECT_EQ(got[1].first, 0.5f);
  EXPECT_EQ(got[2].first, 0.25f);
  std::map<Token, Tokens> extras = {{got[1].second.front(), got[1].second}, {got[2].second.front(), got[2].second}};
  EXPECT_EQ(extras, (std::map<Token, Tokens>{{4, {4, 5, 6}}, {6, {6, 7}}}));
  // Room for more spans than there are: the primary's first token is never repeated in an extra
  // span (that would merge into the primary and inflate its score).
  LlmaDrafter wide(LlmaOptions{.min_match = 1, .continuation = 3, .spans = 8});
  wide.begin(Tokens{9, 1}, refs);
  const auto all = propose(wide);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], (std::pair<float, Tokens>{1.0f, {2, 3}}));
  EXPECT_EQ(all[1].first + all[2].first, 0.75f);
  // m == 2 keeps one of the two admissible extras.
  LlmaDrafter two(LlmaOptions{.min_match = 1, .continuation = 3, .spans = 2});
  two.begin(Tokens{9, 1}, refs);
  got = propose(two);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].first, 0.5f);
  EXPECT_TRUE(got[1].second == (Tokens{4, 5, 6}) || got[1].second == (Tokens{6, 7})) << show(got[1].second);
  // Below n nothing is proposed, extras included.
  LlmaDrafter strict(LlmaOptions{.min_match = 2, .continuation = 3, .spans = 3});
  strict.begin(Tokens{9, 1}, refs);
  EXPECT_TRUE(propose(strict).empty());
}

TEST(LlmaDrafter, BeginResetsEverything) {
  std::mt19937 rng(5);
  const LlmaOptions opt{.min_match = 1, .continuation = 4, .spans = 2, .self_reference = true};
  const Scenario a = make_scenario(3, 120, rng);
  const Scenario b = make_scenario(3, 120, rng);
  // A drafter reused after another sequence behaves exactly like a fresh one.
  LlmaDrafter reused(opt);
  reused.begin(a.prompt, a.references);
  reused.accept(a.truth);
  DraftTree t1;
  reused.propose(8, t1);  // leaves a pending span behind
  reused.begin(b.prompt, b.references);
  LlmaDrafter fresh(opt);
  fresh.begin(b.prompt, b.references);
  for (std::size_t i = 0; i < b.truth.size(); ++i) {
    DraftTree x;
    DraftTree y;
    reused.propose(8, x);
    fresh.propose(8, y);
    ASSERT_EQ(to_string(x.linearize(0, 100)), to_string(y.linearize(0, 100))) << "step " << i;
    const Tokens one = {b.truth[i]};
    reused.accept(one);
    fresh.accept(one);
  }
}

TEST(LlmaDrafter, SharedIndexServesManyDraftersAndIgnoresBeginsReferences) {
  const std::vector<Tokens> docs = {{7, 1, 4, 4, 4}, {0, 8, 7, 1, 5, 6}};
  const auto index = std::make_shared<const LlmaIndex>(docs);
  EXPECT_EQ(index->tokens(), 11u);
  EXPECT_EQ(index->documents(), 2u);
  LlmaDrafter a(index, LlmaOptions{.min_match = 1, .continuation = 3});
  LlmaDrafter b(index, LlmaOptions{.min_match = 1, .continuation = 3});
  EXPECT_EQ(a.shared_index(), index);
  EXPECT_EQ(LlmaDrafter().shared_index(), nullptr);
  a.begin(Tokens{3, 8, 7, 1}, {});
  b.begin(Tokens{3, 7, 1}, std::vector<Tokens>{{7, 1, 9, 9}});  // not read: the index is b's reference set
  EXPECT_EQ(primary(a), (Tokens{5, 6}));
  EXPECT_EQ(primary(b), (Tokens{4, 4, 4}));
  // A shared index with self reference: the sequence's own past joins the index's documents.
  LlmaDrafter self(index, LlmaOptions{.min_match = 2, .continuation = 3, .self_reference = true});
  self.begin(Tokens{20, 21, 22, 20, 21}, {});
  EXPECT_EQ(primary(self), (Tokens{22, 20, 21}));
  self.accept(Tokens{8});  // [.. 21 8] nowhere; [8] is shorter than n
  EXPECT_TRUE(primary(self).empty());
  self.accept(Tokens{7});  // [8 7] is in the index
  EXPECT_EQ(primary(self), (Tokens{1, 5, 6}));
  EXPECT_THROW(LlmaDrafter(nullptr), Error);
  EXPECT_THROW(LlmaIndex(std::vector<Tokens>{{1, -2}}), Error);
}

TEST(References, ViewVectorsAndSpansAlike) {
  const std::vector<Tokens> vectors = {{1, 2, 3}, {}, {4}};
  const Tokens buffer = {1, 2, 3, 4};
  const std::vector<std::span<const Token>> spans = {std::span<const Token>(buffer).first(3), {}, std::span<const Token>(buffer).last(1)};
  for (const References refs : {References(vectors), References(spans)}) {
    ASSERT_EQ(refs.size(), 3u);
    EXPECT_FALSE(refs.empty());
    EXPECT_EQ(refs.total_tokens(), 4u);
    std::vector<Tokens> seen;
    for (const std::span<const Token> r : refs) seen.emplace_back(r.begin(), r.end());
    EXPECT_EQ(seen, vectors);
  }
  // A view: no copy of the tokens.
  EXPECT_EQ(References(spans)[0].data(), buffer.data());
  EXPECT_EQ(References(vectors)[0].data(), vectors[0].data());
  const References none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.begin() == none.end());
}

}  // namespace
