// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/drafters/mixture.hpp"

#include <gtest/gtest.h>

#include "common/expect_error.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace refdec;

// Proposes fixed paths with fixed scores (cut to the budget) whatever the sequence.
struct PathsDrafter {
  std::vector<std::pair<std::vector<Token>, float>> paths;
  std::string label = "paths";
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t budget, DraftTree& out) {
    for (const auto& [path, score] : paths) out.insert(path, score);
    out.prune(budget);
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return label; }
};

// Runs `count` auxiliary tokens (a chain after the root) and records what it observed.
struct AuxDrafter {
  std::int32_t count;
  Token first;
  std::shared_ptr<std::vector<std::vector<Token>>> observed = std::make_shared<std::vector<std::vector<Token>>>();
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t, DraftTree&) {}
  void accept(std::span<const Token>) {}
  std::string name() const { return "aux"; }
  void auxiliary(AuxBlock& out) {
    for (std::int32_t j = 0; j < count; ++j) {
      const std::vector<std::int32_t> sees{j};  // the previous one (the root for the first)
      out.add(first + j, j + 1, sees);
    }
  }
  void observe(std::span<const Token> choices) { observed->emplace_back(choices.begin(), choices.end()); }
  std::size_t max_auxiliary() const { return static_cast<std::size_t>(count); }
};

static_assert(AuxiliaryDrafter<AuxDrafter>);

std::vector<AnyDrafter> sources_of(std::vector<PathsDrafter> drafters) {
  std::vector<AnyDrafter> sources;
  for (auto& d : drafters) sources.emplace_back(std::move(d));
  return sources;
}

// Every root-to-node path of a linearised tree, in node order (the root's is empty).
std::vector<std::vector<Token>> paths_of(const LinearTree& t) {
  std::vector<std::vector<Token>> paths(static_cast<std::size_t>(t.size()));
  for (std::int32_t i = 1; i < t.size(); ++i) {
    paths[static_cast<std::size_t>(i)] = paths[static_cast<std::size_t>(t.parent[static_cast<std::size_t>(i)])];
    paths[static_cast<std::size_t>(i)].push_back(t.tokens[static_cast<std::size_t>(i)]);
  }
  return paths;
}

// make_mixture() takes drafters of any kind by value, with or without options, and builds the
// same mixture as the vector constructor.
TEST(MixtureDrafter, MakeMixtureTakesDraftersByValue) {
  const PathsDrafter a{{{{5, 6}, 2.0f}}, "a"};
  const PathsDrafter b{{{{5, 7}, 1.0f}}, "b"};
  MixtureDrafter made = make_mixture(a, AnyDrafter(b));
  EXPECT_EQ(made.name(), "mixture(a+b)");
  MixtureDrafter with_options = make_mixture(MixtureOptions{.prior_mean = 0.5}, a, b);
  EXPECT_EQ(with_options.options().prior_mean, 0.5);
  MixtureDrafter built(sources_of({a, b}));
  for (MixtureDrafter* m : {&made, &built}) m->begin(std::vector<Token>{1}, {});
  DraftTree x, y;
  made.propose(8, x);
  built.propose(8, y);
  EXPECT_EQ(paths_of(x.linearize(1, 8)), paths_of(y.linearize(1, 8)));
  EXPECT_EQ(paths_of(x.linearize(1, 8)).size(), 4u);  // root, 5, 5-6, 5-7
}

TEST(MixtureDrafter, MergesOverlappingProposalsIntoOneNodePerPrefix) {
  MixtureDrafter mix(sources_of({PathsDrafter{{{{1, 2, 3}, 1.0f}, {{1, 2, 4}, 1.0f}}, "a"},
                                 PathsDrafter{{{{1, 2, 3, 5}, 2.0f}, {{6}, 1.0f}}, "b"}}));
  EXPECT_EQ(mix.name(), "mixture(a+b)");
  mix.begin(std::vector<Token>{9}, {});
  DraftTree out;
  mix.propose(64, out);
  const auto lin = out.linearize(9, 64);
  const auto paths = paths_of(lin);
  const std::set<std::vector<Token>> got(paths.begin() + 1, paths.end());
  const std::set<std::vector<Token>> want{{1}, {1, 2}, {1, 2, 3}, {1, 2, 4}, {1, 2, 3, 5}, {6}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(lin.num_drafts(), 6);  // no duplicates
  // Scores are probabilities, never above the parent's.
  for (std::int32_t i = 1; i < lin.size(); ++i) {
    const auto u = static_cast<std::size_t>(i);
    EXPECT_GT(lin.score[u], 0.0f);
    EXPECT_LE(lin.score[u], 1.0f);
    if (lin.parent[u] > 0) {
      EXPECT_LE(lin.score[u], lin.score[static_cast<std::size_t>(lin.parent[u])]);
    }
  }
}

// Node 1 is proposed by both sources, node 6 by one; every estimate is still the prior (0.3).
TEST(MixtureDrafter, CombinesTheEstimatesOfSourcesThatAgree) {
  for (const MixtureCombine combine : {MixtureCombine::max, MixtureCombine::noisy_or}) {
    MixtureOptions o;
    o.combine = combine;
    MixtureDrafter mix(sources_of({PathsDrafter{{{{1}, 1.0f}}, "a"}, PathsDrafter{{{{1}, 1.0f}, {{6}, 1.0f}}, "b"}}), o);
    mix.begin(std::vector<Token>{9}, {});
    DraftTree out;
    mix.propose(64, out);
    const float agreed = out.node(out.find_child(0, 1)).score;
    EXPECT_FLOAT_EQ(out.node(out.find_child(0, 6)).score, 0.3f);
    EXPECT_FLOAT_EQ(agreed, combine == MixtureCombine::max ? 0.3f : 1.0f - 0.7f * 0.7f);
  }
}

// Siblings are exclusive: however many sources vouch for different next tokens, their
// probabilities sum to at most 1 (five sources at a prior of 0.5 would sum to 2.5).
TEST(MixtureDrafter, SiblingProbabilitiesSumToAtMostOne) {
  std::vector<PathsDrafter> drafters;
  for (Token t = 1; t <= 5; ++t) drafters.push_back(PathsDrafter{{{{t, 7}, 1.0f}}, "s"});
  MixtureOptions o;
  o.prior_mean = 0.5;
  MixtureDrafter mix(sources_of(drafters), o);
  mix.begin(std::vector<Token>{0}, {});
  DraftTree out;
  mix.propose(64, out);
  const auto lin = out.linearize(0, 64);
  ASSERT_EQ(lin.num_drafts(), 10);
  float sum = 0.0f;
  for (std::int32_t c = lin.first_child[0]; c >= 0; c = lin.next_sibling[static_cast<std::size_t>(c)]) {
    EXPECT_NEAR(lin.score[static_cast<std::size_t>(c)], 0.2f, 1e-6f);
    sum += lin.score[static_cast<std::size_t>(c)];
  }
  EXPECT_NEAR(sum, 1.0f, 1e-5f);
}

// Random sources over a small vocabulary (many overlaps): the proposal is deduplicated, within
// the budget, closed under ancestors, a subset of the union of the sources' prefixes (all of it
// when the budget allows), and probabilities never rise along a path.
TEST(MixtureDrafter, RandomProposalsAreDeduplicatedBudgetBoundedAndAncestorClosed) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const std::size_t num_sources = 1 + rng() % 4;
    std::vector<PathsDrafter> drafters(num_sources);
    std::set<std::vector<Token>> union_prefixes;
    const std::size_t budget = rng() % 40;
    for (auto& d : drafters) {
      for (std::size_t p = rng() % 6; p > 0; --p) {
        std::vector<Token> path(1 + rng() % 7);
        for (Token& t : path) t = static_cast<Token>(rng() % 3);
        d.paths.emplace_back(path, static_cast<float>(1 + rng() % 5));
      }
      // What the source will return: it is asked for at least the source budget (default 0).
      const std::size_t asked = budget == 0 ? 0 : std::max(budget, MixtureOptions{}.source_budget);
      DraftTree own;
      d.propose(asked, own);
      for (const auto& path : paths_of(own.linearize(0, asked)))
        if (!path.empty()) union_prefixes.insert(path);
    }
    MixtureDrafter mix(sources_of(drafters));
    mix.begin(std::vector<Token>{0}, {});
    DraftTree out;
    mix.propose(budget, out);
    ASSERT_LE(out.size(), budget);
    EXPECT_EQ(mix.last_budget(), out.size());
    EXPECT_EQ(out.size(), std::min(budget, union_prefixes.size()));  // a flat cost keeps all it may
    const auto lin = out.linearize(0, budget);
    const auto paths = paths_of(lin);
    std::set<std::vector<Token>> seen;
    for (std::int32_t i = 1; i < lin.size(); ++i) {
      const auto& path = paths[static_cast<std::size_t>(i)];
      EXPECT_TRUE(seen.insert(path).second) << "duplicate prefix";
      EXPECT_TRUE(union_prefixes.count(path)) << "not proposed by any source";
      // linearize() only ever keeps ancestor-closed sets; check the mixture's cut is one too:
      // the parent path is in the tree out holds.
      const std::vector<Token> parent(path.begin(), path.end() - 1);
      EXPECT_TRUE(parent.empty() || seen.count(parent));
      const std::int32_t p = lin.parent[static_cast<std::size_t>(i)];
      if (p > 0) {
        EXPECT_LE(lin.score[static_cast<std::size_t>(i)], lin.score[static_cast<std::size_t>(p)]);
      }
    }
  }
}

TEST(MixtureDrafter, CreditsAndCountsEachSourcesNodesOnTheTruePath) {
  MixtureDrafter mix(sources_of({PathsDrafter{{{{1, 2, 3}, 1.0f}}, "a"}, PathsDrafter{{{{1, 5}, 1.0f}}, "b"}}));
  const auto stats = mix.statistics();
  mix.begin(std::vector<Token>{0}, {});
  DraftTree out;
  mix.propose(64, out);
  mix.accept(std::vector<Token>{1, 2, 9});  // 1 and 2 accepted, 9 the bonus
  const auto& a = stats->sources()[0];
  const auto& b = stats->sources()[1];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.accepted_tokens, 2);
  EXPECT_EQ(b.accepted_tokens, 1);
  EXPECT_EQ(std::vector<std::int64_t>(a.evaluated.begin(), a.evaluated.begin() + 4), (std::vector<std::int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(std::vector<std::int64_t>(a.correct.begin(), a.correct.begin() + 4), (std::vector<std::int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(std::vector<std::int64_t>(b.evaluated.begin(), b.evaluated.begin() + 3), (std::vector<std::int64_t>{1, 1, 0}));
  EXPECT_EQ(std::vector<std::int64_t>(b.correct.begin(), b.correct.begin() + 3), (std::vector<std::int64_t>{1, 0, 0}));
  EXPECT_DOUBLE_EQ(a.right_at(1), 1.0);
  EXPECT_DOUBLE_EQ(a.right_at(2), 0.0);
  EXPECT_DOUBLE_EQ(b.right_at(1), 0.0);
  EXPECT_DOUBLE_EQ(b.right_at(100), 0.0);
  // The estimates moved from the prior the right way.
  EXPECT_GT(stats->acceptance(0, 1), 0.3);
  EXPECT_LT(stats->acceptance(0, 2), 0.3);
  EXPECT_LT(stats->acceptance(1, 1), 0.3);
  // Nothing is learned twice from one proposal, nor from a step without one.
  mix.accept(std::vector<Token>{4});
  EXPECT_EQ(a.evaluated[0], 1);
  EXPECT_EQ(stats->steps(), 1);
}

// A synthetic stream with known rates: source A proposes the chain 10, 11, ..., source B the
// chain 20, 21, ...; the truth follows A's chain with probability qA, B's with qB (else neither),
// then keeps following it at each further depth with probability a (A) or b (B).
struct Stream {
  double qA = 0.5, a = 0.9, qB = 0.3, b = 0.6;
  std::size_t length = 8;
  std::mt19937 rng{5};
  std::vector<Token> next_truth() {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const double x = u(rng);
    std::vector<Token> truth;
    if (x < qA + qB) {
      const bool on_a = x < qA;
      const Token base = on_a ? 10 : 20;
      truth.push_back(base);
      for (std::size_t d = 1; d < length && u(rng) < (on_a ? a : b); ++d) truth.push_back(base + static_cast<Token>(d));
    }
    truth.push_back(99);  // off every chain: ends the walk and is the bonus
    return truth;
  }
  // The true probability of acceptance of every node, best first.
  std::vector<float> true_probabilities() const {
    std::vector<float> p;
    for (std::size_t d = 0; d < length; ++d) {
      p.push_back(static_cast<float>(qA * std::pow(a, static_cast<double>(d))));
      p.push_back(static_cast<float>(qB * std::pow(b, static_cast<double>(d))));
    }
    std::sort(p.begin(), p.end(), std::greater<>());
    return p;
  }
};

// One replay step: propose, accept the longest path of `out` along the truth plus one token.
std::vector<Token> step(MixtureDrafter& mix, Stream& stream) {
  DraftTree out;
  mix.propose(64, out);
  const std::vector<Token> truth = stream.next_truth();
  std::size_t k = 0;
  for (std::int32_t u = 0; k + 1 < truth.size() && (u = out.find_child(u, truth[k])) >= 0;) ++k;
  const std::vector<Token> emitted(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(k + 1));
  mix.accept(emitted);
  return emitted;
}

// The per-source estimates alone: no source budget, context features or learned scorer (the
// defaults turn them on), for the tests of what those estimates and the calibration do by
// themselves.
MixtureOptions table_only() {
  MixtureOptions o;
  o.source_budget = 0;
  o.match_context = false;
  o.recent_rate = 0.0;
  o.scorer_rate = 0.0;
  return o;
}

MixtureDrafter chains_mixture(MixtureOptions options, const Stream& s) {
  PathsDrafter a{{}, "a"};
  PathsDrafter b{{}, "b"};
  std::vector<Token> ca;
  std::vector<Token> cb;
  for (std::size_t d = 0; d < s.length; ++d) {
    ca.push_back(10 + static_cast<Token>(d));
    cb.push_back(20 + static_cast<Token>(d));
  }
  a.paths.emplace_back(ca, 1.0f);
  b.paths.emplace_back(cb, 1.0f);
  MixtureDrafter mix(sources_of({a, b}), std::move(options));
  mix.begin(std::vector<Token>{0}, {});
  return mix;
}

TEST(MixtureDrafter, AcceptanceEstimatesConvergeToTheTrueRates) {
  for (const double half_life : {0.0, 3000.0}) {
    Stream stream;
    MixtureOptions o;
    o.half_life = half_life;
    MixtureDrafter mix = chains_mixture(o, stream);
    for (int i = 0; i < 8000; ++i) step(mix, stream);
    const auto stats = mix.statistics();
    EXPECT_NEAR(stats->acceptance(0, 0), stream.qA, 0.03) << half_life;
    EXPECT_NEAR(stats->acceptance(1, 0), stream.qB, 0.03) << half_life;
    for (std::size_t d = 1; d < 5; ++d)
      EXPECT_NEAR(stats->acceptance(0, d), stream.a, 0.03) << "depth " << d + 1 << " half-life " << half_life;
    for (std::size_t d = 1; d < 3; ++d)  // B's deeper nodes are rarely reached
      EXPECT_NEAR(stats->acceptance(1, d), stream.b, 0.05) << "depth " << d + 1 << " half-life " << half_life;
  }
}

TEST(MixtureDrafter, AdaptiveBudgetConvergesToTheOptimumOfTheTrueRates) {
  Stream stream;
  MixtureOptions o;
  o.cost = StepCost::affine(1.0, 0.05);  // a token costs 5% of a step's fixed cost
  o.half_life = 0.0;
  MixtureDrafter mix = chains_mixture(o, stream);
  const std::vector<float> truth = stream.true_probabilities();
  auto true_rate = [&](std::size_t n) {
    double expected = 1.0;
    for (std::size_t i = 0; i < n; ++i) expected += truth[i];
    return expected / o.cost.seconds(1 + n);
  };
  std::size_t optimum = 0;
  for (std::size_t n = 1; n <= truth.size(); ++n)
    if (true_rate(n) > true_rate(optimum)) optimum = n;
  ASSERT_EQ(optimum, 10u);  // the stream's parameters make it 10 (all of A's 8 nodes and 2 of B's)
  step(mix, stream);
  EXPECT_LT(mix.last_budget(), optimum - 1);  // the prior alone (0.3 per depth) asks for fewer
  std::size_t last = 0;
  for (int i = 0; i < 6000; ++i) {
    step(mix, stream);
    if (i < 5000) continue;
    last = mix.last_budget();
    EXPECT_LE(last, optimum + 1);
    EXPECT_GE(last + 1, optimum);
    EXPECT_GE(true_rate(last), 0.99 * true_rate(optimum));
  }
  EXPECT_NEAR(mix.statistics()->mean_budget(), static_cast<double>(optimum), 1.0);
  // Under a flat cost every node would be kept.
  Stream flat_stream;
  MixtureDrafter flat = chains_mixture(MixtureOptions{}, flat_stream);
  step(flat, flat_stream);
  EXPECT_EQ(flat.last_budget(), 2 * flat_stream.length);
}

// A decoder that times its steps replaces the cost (CostAwareDrafter): the next budget is the
// optimum under the new cost, from the same learned estimates.
TEST(MixtureDrafter, SetStepCostChangesTheBudgetChoiceFromTheNextStep) {
  Stream stream;
  MixtureOptions o;
  o.cost = StepCost::affine(1.0, 0.05);
  o.half_life = 0.0;
  o.calibration_half_life = 0.0;
  MixtureDrafter mix = chains_mixture(o, stream);
  for (int i = 0; i < 5000; ++i) step(mix, stream);
  const std::vector<float> truth = stream.true_probabilities();
  const auto optimum = [&](const StepCost& cost) { return choose_budget(truth, cost, 0, truth.size()); };
  EXPECT_NEAR(static_cast<double>(mix.last_budget()), static_cast<double>(optimum(o.cost)), 1.0);
  const StepCost dear = StepCost::affine(1.0, 0.5);  // a token costs half a step: only A's first nodes pay
  ASSERT_LT(optimum(dear) + 3, optimum(o.cost));
  mix.set_step_cost(dear);
  step(mix, stream);
  EXPECT_NEAR(static_cast<double>(mix.last_budget()), static_cast<double>(optimum(dear)), 1.0);
  mix.set_step_cost(StepCost::flat());
  step(mix, stream);
  EXPECT_EQ(mix.last_budget(), 2 * stream.length);  // flat: every node with a positive estimate
  EXPECT_TRUE(AnyDrafter(std::move(mix)).cost_aware());
}

// A stream whose truth always follows A's whole chain (`right`) or neither chain.
Stream fixed_stream(bool right) {
  Stream s;
  s.qA = right ? 1.0 : 0.0;
  s.a = 1.0;
  s.qB = 0.0;
  return s;
}

// The calibration (per sequence) undoes estimates learned on a sequence where a source was always
// right once a new sequence shows it always wrong: the adaptive budget falls to 0 within a few
// steps and stays there while the sources' first tokens stay wrong, and comes back once they are
// right again (the depth-1 outcomes are seen at budget 0 too). Without calibration the shared
// estimates keep verifying the whole chain.
TEST(MixtureDrafter, CalibrationDropsTheBudgetWhereTheEstimatesAreOverConfident) {
  for (const double half_life : {0.0, 12.0}) {
    MixtureOptions o = table_only();
    o.cost = StepCost::affine(1.0, 0.25);  // a token costs a quarter of a step's fixed cost
    o.calibration_half_life = half_life;
    Stream right = fixed_stream(true);
    MixtureDrafter mix = chains_mixture(o, right);
    for (int i = 0; i < 200; ++i) step(mix, right);
    EXPECT_EQ(mix.last_budget(), right.length) << half_life;  // A's chain, all of it
    mix.begin(std::vector<Token>{0}, {});
    EXPECT_EQ(mix.last_calibration(), 1.0);  // a new sequence starts uncalibrated
    Stream wrong = fixed_stream(false);
    std::vector<std::size_t> budgets;
    for (int i = 0; i < 40; ++i) {
      step(mix, wrong);
      budgets.push_back(mix.last_budget());
    }
    if (half_life == 0.0) {
      EXPECT_EQ(mix.last_calibration(), 1.0);
      EXPECT_EQ(budgets.back(), right.length);  // still the whole chain
      continue;
    }
    EXPECT_EQ(budgets[0], right.length);  // nothing seen of this sequence yet
    const auto zero = std::find(budgets.begin(), budgets.end(), 0u);
    ASSERT_NE(zero, budgets.end());
    EXPECT_LE(zero - budgets.begin(), 3) << "steps before the budget fell to 0";
    EXPECT_TRUE(std::all_of(zero, budgets.end(), [](std::size_t b) { return b == 0; }));
    EXPECT_LT(mix.last_calibration(), 0.1);
    // The sequence turns copyable again: noticed at budget 0, from the depth-1 outcomes.
    std::size_t steps = 0;
    while (steps < 10 && mix.last_budget() == 0) {
      step(mix, right);
      ++steps;
    }
    EXPECT_GT(mix.last_budget(), 0u);
    EXPECT_LE(steps, 5u) << "steps before speculating again";
  }
}

// The reverse: estimates learned where the source was mostly wrong, then a sequence where it is
// always right. The calibration raises the probabilities behind the budget choice (up to
// kMaxCalibration times), so more of the chain is verified sooner than on the shared estimates.
TEST(MixtureDrafter, CalibrationGrowsTheBudgetWhereTheEstimatesAreUnderConfident) {
  std::vector<double> mean_budget;
  for (const double half_life : {0.0, 12.0}) {
    MixtureOptions o = table_only();
    o.cost = StepCost::affine(1.0, 0.25);
    o.calibration_half_life = half_life;
    Stream mostly_wrong;
    mostly_wrong.qA = 0.3;
    mostly_wrong.a = 0.5;
    mostly_wrong.qB = 0.0;
    MixtureDrafter mix = chains_mixture(o, mostly_wrong);
    for (int i = 0; i < 500; ++i) step(mix, mostly_wrong);
    mix.begin(std::vector<Token>{0}, {});
    Stream right = fixed_stream(true);
    double sum = 0.0;
    for (int i = 0; i < 20; ++i) {
      step(mix, right);
      if (i >= 5) sum += static_cast<double>(mix.last_budget());
    }
    mean_budget.push_back(sum / 15.0);
    if (half_life > 0.0) {
      EXPECT_GT(mix.last_calibration(), 1.5);
      EXPECT_LE(mix.last_calibration(), MixtureDrafter::kMaxCalibration);
    }
  }
  EXPECT_GT(mean_budget[1], mean_budget[0] + 1.0) << mean_budget[0] << " without calibration";
}

// Proposes from two mixtures with `budget`, checks that they proposed the same tree (the same
// paths, scores within `tolerance`), and returns the first's.
DraftTree expect_same_proposal(MixtureDrafter& a, MixtureDrafter& b, std::size_t budget, Token root, float tolerance,
                               const std::string& where) {
  DraftTree ta;
  DraftTree tb;
  a.propose(budget, ta);
  b.propose(budget, tb);
  const LinearTree la = ta.linearize(root, budget);
  const LinearTree lb = tb.linearize(root, budget);
  EXPECT_EQ(paths_of(la), paths_of(lb)) << where;
  EXPECT_EQ(la.score.size(), lb.score.size()) << where;
  for (std::size_t i = 0; i < std::min(la.score.size(), lb.score.size()); ++i)
    EXPECT_NEAR(la.score[i], lb.score[i], tolerance) << where << " node " << i;
  return ta;
}

// Under a flat cost the calibration changes nothing: every node with a positive estimate is kept
// up to the budget, so fixed-budget replays are the same with it and without it.
TEST(MixtureDrafter, CalibrationLeavesAFlatCostsProposalsAlone) {
  MixtureOptions on;
  on.calibration_half_life = 4.0;
  MixtureOptions off;
  off.calibration_half_life = 0.0;
  Stream s_on;
  Stream s_off;
  MixtureDrafter with = chains_mixture(on, s_on);
  MixtureDrafter without = chains_mixture(off, s_off);
  for (int i = 0; i < 600; ++i) {
    if (i % 150 == 149) {  // new sequences, and a stream that changes under them
      with.begin(std::vector<Token>{0}, {});
      without.begin(std::vector<Token>{0}, {});
      s_on.qA = s_off.qA = i < 300 ? 0.05 : 0.9;
    }
    for (const std::size_t budget : {std::size_t{64}, std::size_t{3}}) {
      const DraftTree a = expect_same_proposal(with, without, budget, 0, 0.0f, "step " + std::to_string(i));
      const std::vector<Token> truth = s_on.next_truth();
      EXPECT_EQ(truth, s_off.next_truth());
      std::size_t k = 0;
      for (std::int32_t u = 0; k + 1 < truth.size() && (u = a.find_child(u, truth[k])) >= 0;) ++k;
      const std::vector<Token> emitted(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(k + 1));
      with.accept(emitted);
      without.accept(emitted);
    }
  }
  EXPECT_NE(with.last_calibration(), 1.0);  // it was tracked, just not used
}

TEST(MixtureDrafter, ConcatenatesAuxiliaryBlocksAndSplitsTheChoices) {
  AuxDrafter first{2, 100};
  AuxDrafter third{3, 200};
  const auto seen_first = first.observed;
  const auto seen_third = third.observed;
  std::vector<AnyDrafter> sources;
  sources.emplace_back(first);
  sources.emplace_back(PathsDrafter{{{{1}, 1.0f}}, "plain"});
  sources.emplace_back(third);
  MixtureDrafter mix(std::move(sources));
  EXPECT_EQ(mix.max_auxiliary(), 5u);
  mix.begin(std::vector<Token>{0}, {});
  DraftTree out;
  mix.propose(8, out);
  AuxBlock block;
  mix.auxiliary(block);
  ASSERT_EQ(block.size(), 5);
  EXPECT_EQ(block.tokens, (std::vector<Token>{100, 101, 200, 201, 202}));
  EXPECT_EQ(block.offset, (std::vector<std::int32_t>{1, 2, 1, 2, 3}));
  EXPECT_TRUE(block.attends(0, 0));   // the first source's first token sees the root
  EXPECT_TRUE(block.attends(1, 1));   // and its second the first
  EXPECT_TRUE(block.attends(2, 0));   // the third source's first token sees the root...
  EXPECT_FALSE(block.attends(2, 2));  // ...not the first source's tokens
  EXPECT_TRUE(block.attends(3, 3));   // its own indices shifted by 2
  EXPECT_TRUE(block.attends(4, 4));
  mix.observe(std::vector<Token>{7, 8, 9, 10, 11});
  ASSERT_EQ(seen_first->size(), 1u);
  EXPECT_EQ(seen_first->back(), (std::vector<Token>{7, 8}));
  EXPECT_EQ(seen_third->back(), (std::vector<Token>{9, 10, 11}));
  mix.observe({});  // the verifier ran no auxiliary tokens: everyone is told
  ASSERT_EQ(seen_first->size(), 2u);
  EXPECT_TRUE(seen_first->back().empty());
  EXPECT_TRUE(seen_third->back().empty());
  refdec_test::expect_error([&] { mix.observe(std::vector<Token>{1, 2}); }, "got 2 auxiliary choices for 5");
  // Through AnyDrafter too.
  AnyDrafter any(std::move(mix));
  EXPECT_EQ(any.max_auxiliary(), 5u);
}

TEST(MixtureDrafter, StatisticsFollowTheDrafterIntoAnyDrafter) {
  MixtureDrafter mix(sources_of({PathsDrafter{{{{1, 2}, 1.0f}}, "a"}}));
  const auto stats = mix.statistics();
  AnyDrafter any(std::move(mix));
  any.begin(std::vector<Token>{0}, {});
  DraftTree out;
  any.propose(64, out);
  any.accept(std::vector<Token>{1, 2, 3});
  EXPECT_EQ(stats->steps(), 1);
  EXPECT_EQ(stats->sources()[0].accepted_tokens, 2);
}

TEST(MixtureDrafter, RejectsBadOptionsNamingThem) {
  auto make = [](MixtureOptions o) { MixtureDrafter(sources_of({PathsDrafter{}}), o); };
  refdec_test::expect_error([] { MixtureDrafter(std::vector<AnyDrafter>{}); }, "at least one source");
  refdec_test::expect_error([&] { make(MixtureOptions{.prior_mean = 0.0}); }, "prior_mean must be in (0, 1), got 0");
  refdec_test::expect_error([&] { make(MixtureOptions{.prior_mean = 1.5}); }, "got 1.5");
  refdec_test::expect_error([&] { make(MixtureOptions{.prior_strength = -2.0}); }, "prior_strength must be finite and positive, got -2");
  refdec_test::expect_error([&] { make(MixtureOptions{.half_life = -1.0}); }, "half_life must be finite and non-negative (0: never forget), got -1");
  refdec_test::expect_error([&] { make(MixtureOptions{.half_life = std::numeric_limits<double>::quiet_NaN()}); }, "got nan");
  refdec_test::expect_error([&] { make(MixtureOptions{.max_depth = 0}); }, "max_depth must be in [1, 1024], got 0");
  refdec_test::expect_error([&] { make(MixtureOptions{.source_budget = 65537}); },
                            "source_budget must be in [0, 65536], got 65537");
  refdec_test::expect_error([&] { make(MixtureOptions{.recent_rate = 1.5}); }, "recent_rate must be in [0, 1] (0: off), got 1.5");
  refdec_test::expect_error([&] { make(MixtureOptions{.recent_rate = std::numeric_limits<double>::quiet_NaN()}); },
                            "recent_rate must be in [0, 1] (0: off), got nan");
  refdec_test::expect_error([&] { make(MixtureOptions{.calibration_half_life = -1.0}); },
                            "calibration_half_life must be finite and non-negative (0: off), got -1");
  refdec_test::expect_error(
      [&] { make(MixtureOptions{.calibration_half_life = std::numeric_limits<double>::infinity()}); },
      "calibration_half_life must be finite and non-negative (0: off), got inf");
  refdec_test::expect_error([&] { make(MixtureOptions{.scorer_rate = -0.1}); }, "scorer_rate must be in [0, 1] (0: off), got -0.1");
  refdec_test::expect_error([&] { make(MixtureOptions{.scorer_rate = std::numeric_limits<double>::quiet_NaN()}); },
                            "scorer_rate must be in [0, 1] (0: off), got nan");
  refdec_test::expect_error([&] { make(MixtureOptions{.calibration_prior = 0.0}); },
                            "calibration_prior must be finite and positive, got 0");
  refdec_test::expect_error([&] { make(MixtureOptions{.calibration_prior = std::numeric_limits<double>::quiet_NaN()}); },
                            "calibration_prior must be finite and positive, got nan");
}

// Proposes one fixed path (cut to the budget it is asked for), records each budget, and reports
// a match length that the test sets.
struct ScriptedDrafter {
  std::vector<Token> path;
  std::shared_ptr<std::vector<std::size_t>> budgets = std::make_shared<std::vector<std::size_t>>();
  std::shared_ptr<std::size_t> match = std::make_shared<std::size_t>(0);
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t budget, DraftTree& out) {
    budgets->push_back(budget);
    out.insert(path, 1.0f);
    out.prune(budget);
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return "scripted"; }
  std::size_t last_match() const { return *match; }
};

static_assert(MatchReportingDrafter<ScriptedDrafter>);
static_assert(!MatchReportingDrafter<PathsDrafter>);

std::vector<AnyDrafter> one_source(const ScriptedDrafter& d) {
  std::vector<AnyDrafter> sources;
  sources.emplace_back(d);
  return sources;
}

// The score the mixture gives node `token` below the root in a fresh proposal.
float root_child_score(MixtureDrafter& mix, Token token, std::size_t budget = 64) {
  DraftTree out;
  mix.propose(budget, out);
  const std::int32_t c = out.find_child(0, token);
  return c < 0 ? -1.0f : out.node(c).score;
}

TEST(MixtureDrafter, AsksEachSourceForAtLeastTheSourceBudget) {
  ScriptedDrafter src;
  for (Token t = 1; t <= 40; ++t) src.path.push_back(t);
  const auto budgets = src.budgets;
  MixtureDrafter mix(one_source(src), MixtureOptions{.source_budget = 64});
  mix.begin(std::vector<Token>{0}, {});
  DraftTree out;
  mix.propose(8, out);
  EXPECT_EQ(budgets->back(), 64u);
  EXPECT_EQ(out.size(), 8u);  // the cut still keeps the step's budget
  mix.accept(std::vector<Token>{7});
  mix.propose(100, out);
  EXPECT_EQ(budgets->back(), 100u);  // a larger budget is passed on
  EXPECT_EQ(out.size(), 40u);
  mix.accept(std::vector<Token>{7});
  const std::size_t calls = budgets->size();
  out.clear();
  mix.propose(0, out);  // no budget: no source is asked
  EXPECT_EQ(budgets->size(), calls);
  EXPECT_TRUE(out.empty());
  mix.accept(std::vector<Token>{7});

  MixtureDrafter own(one_source(src), MixtureOptions{.source_budget = 0});  // 0: the budget
  own.begin(std::vector<Token>{0}, {});
  own.propose(8, out);
  EXPECT_EQ(budgets->back(), 8u);
  EXPECT_EQ(out.size(), 8u);
}

// A source whose proposal is right after a long match and wrong after a short one: with
// match_context the mixture learns to tell them apart, without it it cannot.
TEST(MixtureDrafter, EstimatesAreConditionedOnEachSourcesMatchLength) {
  for (const bool context : {true, false}) {
    ScriptedDrafter src{{1}};
    const auto match = src.match;
    MixtureDrafter mix(one_source(src), MixtureOptions{.match_context = context, .recent_rate = 0.0, .scorer_rate = 0.0});
    mix.begin(std::vector<Token>{0}, {});
    DraftTree out;
    for (int i = 0; i < 400; ++i) {
      *match = i % 2 == 0 ? 12 : 1;
      out.clear();
      mix.propose(64, out);
      mix.accept(i % 2 == 0 ? std::vector<Token>{1, 5} : std::vector<Token>{7});
    }
    *match = 12;
    const float long_match = root_child_score(mix, 1);
    mix.accept(std::vector<Token>{1, 5});
    *match = 1;
    const float short_match = root_child_score(mix, 1);
    mix.accept(std::vector<Token>{7});
    if (context) {
      EXPECT_GT(long_match, 0.95f);
      EXPECT_LT(short_match, 0.05f);
    } else {
      EXPECT_NEAR(long_match, 0.5f, 0.1f);
      EXPECT_NEAR(short_match, long_match, 0.02f);
    }
  }
}

// Sequences in which the source is always right and sequences in which it is always wrong: with
// recent_rate the mixture trusts it more once it has been right in this sequence, and forgets
// that when a new sequence begins.
TEST(MixtureDrafter, EstimatesFollowEachSourcesRecentReachInTheSequence) {
  for (const double rate : {0.3, 0.0}) {
    ScriptedDrafter src{{1, 2, 3}};
    MixtureDrafter mix(one_source(src), MixtureOptions{.match_context = false, .recent_rate = rate, .scorer_rate = 0.0});
    DraftTree out;
    for (int seq = 0; seq < 60; ++seq) {
      mix.begin(std::vector<Token>{0}, {});
      for (int i = 0; i < 10; ++i) {
        out.clear();
        mix.propose(64, out);
        mix.accept(seq % 2 == 0 ? std::vector<Token>{1, 2, 3, 4} : std::vector<Token>{9});
      }
    }
    mix.begin(std::vector<Token>{0}, {});
    const float fresh = root_child_score(mix, 1);
    mix.accept(std::vector<Token>{1, 2, 3, 4});
    out.clear();
    mix.propose(64, out);
    mix.accept(std::vector<Token>{1, 2, 3, 4});
    const float hot = root_child_score(mix, 1);
    mix.accept(std::vector<Token>{9});
    mix.begin(std::vector<Token>{0}, {});
    const float again = root_child_score(mix, 1);
    if (rate > 0.0) {
      EXPECT_LT(fresh, 0.5f);
      EXPECT_GT(hot, 0.9f);
      EXPECT_NEAR(again, fresh, 0.05f);  // a new sequence starts without a recent record
    } else {
      EXPECT_NEAR(hot, fresh, 0.05f);
    }
  }
}

// The learned scorer starts as the per-source estimates: before it has learned anything, a
// mixture with it proposes the same tree with the same scores as one without it.
TEST(MixtureDrafter, ScorerStartsAsThePerSourceEstimates) {
  const auto sources = [] {
    return sources_of({PathsDrafter{{{{1, 2, 3}, 3.0f}, {{1, 4}, 1.0f}, {{5, 6}, 1.0f}}, "a"},
                       PathsDrafter{{{{1, 2, 7}, 2.0f}, {{8}, 1.0f}}, "b"}});
  };
  MixtureDrafter with(sources(), MixtureOptions{.scorer_rate = 0.1});
  MixtureDrafter without(sources(), MixtureOptions{.scorer_rate = 0.0});
  with.begin(std::vector<Token>{9}, {});
  without.begin(std::vector<Token>{9}, {});
  // No acceptance in between: each proposal is the first one again for both.
  for (const std::size_t budget : {std::size_t{64}, std::size_t{4}})
    expect_same_proposal(with, without, budget, 9, 1e-6f, "budget " + std::to_string(budget));
}

// One source proposes two tokens with the same score every step, and the truth is always the
// second: the per-source estimates give both the same cell (same source, depth, share and score)
// and cannot tell them apart; the learned scorer sees the tokens and learns which one is right.
TEST(MixtureDrafter, ScorerLearnsWhatThePerSourceEstimatesCannotTell) {
  for (const double rate : {0.1, 0.0}) {
    MixtureDrafter mix(sources_of({PathsDrafter{{{{3}, 1.0f}, {{4}, 1.0f}}, "a"}}), MixtureOptions{.scorer_rate = rate});
    mix.begin(std::vector<Token>{0}, {});
    DraftTree out;
    for (int i = 0; i < 200; ++i) {
      out.clear();
      mix.propose(64, out);
      mix.accept(std::vector<Token>{4, 9});
    }
    out.clear();
    mix.propose(1, out);  // the cut keeps the one it believes in
    ASSERT_EQ(out.size(), 1u);
    const Token kept = out.node(out.node(0).first_child).token;
    const float right = root_child_score(mix, 4);
    const float wrong = root_child_score(mix, 3);
    if (rate > 0.0) {
      EXPECT_EQ(kept, 4) << "the scorer must keep the token that is right";
      EXPECT_GT(right, 0.8f);
      EXPECT_LT(wrong, 0.1f);
    } else {
      EXPECT_NEAR(right, wrong, 1e-6f);  // one cell, one estimate
      EXPECT_NEAR(right, 0.5f, 0.05f);   // the sibling pair shares the one right answer
    }
  }
}

// A source that throws in the middle of a proposal (after another source's nodes were merged):
// the error reaches the caller, nothing of the half-built proposal is learned from by the accept()
// that may follow, and the next proposal is whole.
struct ThrowingDrafter {
  std::shared_ptr<bool> fail = std::make_shared<bool>(false);
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t, DraftTree& out) {
    if (*fail) throw Error("source failed");
    out.insert(std::vector<Token>{5, 6}, 1.0f);
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return "throwing"; }
};

TEST(MixtureDrafter, ASourcesExceptionLeavesNothingHalfBuilt) {
  ThrowingDrafter thrower;
  const auto fail = thrower.fail;
  std::vector<AnyDrafter> sources;
  PathsDrafter paths;
  for (Token t = 10; t < 40; ++t) paths.paths.push_back({{t, static_cast<Token>(t + 100)}, 1.0f});
  sources.emplace_back(paths);
  sources.emplace_back(thrower);
  MixtureDrafter mix(std::move(sources));  // the learned scorer on (the default)
  mix.begin(std::vector<Token>{0}, {});
  DraftTree out;
  mix.propose(8, out);  // a small proposal sizes the scorer's features
  mix.accept(std::vector<Token>{5, 6, 1});
  *fail = true;
  out.clear();
  refdec_test::expect_error([&] { mix.propose(64, out); }, "source failed");
  const std::int64_t steps = mix.statistics()->steps();
  mix.accept(std::vector<Token>{10, 110, 1});  // nothing to learn from
  EXPECT_EQ(mix.statistics()->sources()[0].accepted_tokens, 0);
  *fail = false;
  out.clear();
  mix.propose(64, out);
  EXPECT_EQ(mix.statistics()->steps(), steps + 1);
  EXPECT_GE(out.find_child(0, 5), 0);
  EXPECT_GE(out.find_child(0, 39), 0);
}

}  // namespace
