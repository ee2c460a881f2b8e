// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The Session: continuous batching (requests join and leave between steps) stays lossless for
// every drafter and both KV stores; bad requests are rejected without disturbing the others.

#include "refdec/torch/session.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <cstdio>
#include <array>
#include <map>
#include <sstream>
#include <string>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <chrono>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/drafters/suffix_decoding.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "refdec/torch/static_llama.hpp"
#include "refdec/torch/static_paged_kv_store.hpp"
#include "common/tiny_llama.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

constexpr std::int64_t kVocab = 111;
constexpr std::int64_t kContext = 96;

LlamaConfig session_config(std::int64_t kv_heads) { return refdec_test::tiny_llama_config(kv_heads, kVocab, kContext); }

// The drafters of the schedules: every kind, the mixture and the lookahead window included. The
// SuffixDecoding baseline's global tree and the shared reference index grow over every request of
// every schedule, as a server's would.
constexpr int kDrafterKinds = 9;
AnyDrafter make_drafter(int kind, const std::shared_ptr<const Datastore>& datastore) {
  static const auto suffix_cache = std::make_shared<SuffixDecodingCache>();
  static const auto index = std::make_shared<ReferenceIndex>();
  switch (kind) {
    case 7: return AnyDrafter(SuffixDecodingDrafter(suffix_cache));
    case 8: {
      std::vector<AnyDrafter> sources;
      sources.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 6, .spans = 2}));
      for (auto& d : index_sources(index)) sources.emplace_back(std::move(d));
      return AnyDrafter(MixtureDrafter(std::move(sources)));
    }
    case 0: return AnyDrafter{};
    case 1: return AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .spans = 2, .self_reference = true}));
    case 2: return AnyDrafter(PromptLookupDrafter{});
    case 3: return AnyDrafter(NgramTrieDrafter({.ngram = 6, .max_match = 2, .max_nodes = 12}));
    case 4: return AnyDrafter(RestDrafter(datastore, {.max_nodes = 16}));
    case 5: return AnyDrafter(LookaheadDrafter({.window = 4, .ngram = 3, .guesses = 4}));
    default: {
      std::vector<AnyDrafter> sources;
      sources.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 6, .spans = 2}));
      sources.emplace_back(NgramTrieDrafter({.ngram = 6, .max_match = 2, .max_nodes = 12}));
      sources.emplace_back(LookaheadDrafter({.window = 3, .ngram = 3, .guesses = 3}));
      return AnyDrafter(MixtureDrafter(std::move(sources)));
    }
  }
}

enum class StoreKind { kContiguous, kPaged };

class SessionSchedules : public ::testing::TestWithParam<StoreKind> {
 protected:
  static void SetUpTestSuite() {
    for (const std::int64_t kv : {4, 2, 1})
      models_.push_back(std::make_unique<LlamaModel>(LlamaModel::random(session_config(kv), 70 + static_cast<std::uint64_t>(kv), at::kDouble)));
    // A datastore of random text with recurring passages, for REST.
    std::mt19937 rng(3);
    std::vector<std::vector<Token>> docs(4);
    for (auto& d : docs)
      while (d.size() < 400) {
        const std::size_t len = 3 + rng() % 10;
        if (!d.empty() && rng() % 2 == 0) {
          const std::size_t from = rng() % d.size();
          for (std::size_t i = 0; i < len && from + i < d.size(); ++i) d.push_back(d[from + i]);
        } else {
          for (std::size_t i = 0; i < len; ++i) d.push_back(static_cast<Token>(rng() % kVocab));
        }
      }
    dir_ = std::make_unique<refdec_test::TempDir>();
    build_datastore(docs, kVocab, dir_->path() / "session.ds");
    datastore_ = Datastore::open_shared(dir_->path() / "session.ds");
  }
  static void TearDownTestSuite() {
    models_.clear();
    datastore_.reset();
    dir_.reset();
  }

  // `make_session(model, defaults)` returns a Session over models_[model] (or its static step).
  template <class MakeSession>
  void run_schedules(MakeSession make_session, int first, int count);

  static std::vector<std::unique_ptr<LlamaModel>> models_;
  static std::shared_ptr<const Datastore> datastore_;
  static std::unique_ptr<refdec_test::TempDir> dir_;
};
std::vector<std::unique_ptr<LlamaModel>> SessionSchedules::models_;
std::shared_ptr<const Datastore> SessionSchedules::datastore_;
std::unique_ptr<refdec_test::TempDir> SessionSchedules::dir_;

// A request of a schedule and what plain decoding makes of it.
struct Planned {
  Request request;
  int drafter = 0;
  std::vector<Token> want;   // plain decoding's output
  FinishReason want_finish = FinishReason::kMaxNewTokens;
};

ContiguousKvStore contiguous_store(const LlamaModel& model) { return ContiguousKvStore(model.kv_layout(), kContext + 64); }
PagedKvStore paged_store(const LlamaModel& model) { return PagedKvStore(model.kv_layout(), 7 * (kContext + 64) / 4, 4); }

template <class MakeSession>
void SessionSchedules::run_schedules(MakeSession make_session, int first, int count) {
  std::int64_t tokens = 0, steps = 0, cancelled = 0, sampled = 0, requests = 0, most_active = 0;
  for (int schedule = first; schedule < first + count; ++schedule) {
    std::mt19937 rng(1000 + static_cast<unsigned>(schedule));
    const LlamaModel& model = *models_[static_cast<std::size_t>(schedule % 3)];
    GenerateOptions defaults;
    defaults.limits.budget = 12;
    // Chunked prefill in a third of the schedules: prompts take several steps, beside decoding.
    if (schedule % 3 == 0) defaults.driver.prefill_chunk = 1 + static_cast<std::int64_t>(rng() % 4);
    // One budget across the batch (BatchBudget) in half the schedules, rows priced from cheap to
    // dear. The tracker's fallback weight makes its learning a uniform rescaling of the prior,
    // which leaves every choice as the prior's shape makes it: the cuts do not depend on timing.
    if (schedule % 2 == 1) {
      defaults.step_cost = StepCost::affine(1.0, std::array{0.01, 0.05, 0.3}[static_cast<std::size_t>(schedule / 2 % 3)]);
      defaults.step_cost_tracking.fallback_weight = 1e12;
    }
    // The requests, each with its own limits, sampling and drafter, and its plain output.
    std::vector<Planned> planned(2 + rng() % 8);
    for (Planned& p : planned) {
      Request& r = p.request;
      r.prompt.push_back(1);
      for (std::size_t i = 0, n = rng() % 12; i < n; ++i) r.prompt.push_back(static_cast<Token>(rng() % kVocab));
      r.max_new_tokens = 4 + static_cast<std::int64_t>(rng() % 40);
      if (rng() % 4 == 0) r.sampling = SamplingOptions{.temperature = 0.9f, .top_k = 20, .seed = rng()};
      if (rng() % 5 == 0) r.budget = static_cast<std::int64_t>(rng() % 4);
      p.drafter = static_cast<int>(rng() % kDrafterKinds);
      GenerateOptions plain = defaults;
      plain.limits.budget = 0;
      plain.driver.prefill_chunk = 0;  // the whole prompt in one pass
      const auto alone = generate(model, r, AnyDrafter{}, plain);
      p.want = alone.tokens[0];
      p.want_finish = alone.finish[0];
      if (rng() % 6 == 0 && !p.want.empty()) {  // stop at a token of the plain output
        r.stop_tokens = std::vector<Token>{p.want[rng() % p.want.size()]};
        const auto stopped = generate(model, r, AnyDrafter{}, plain);
        p.want = stopped.tokens[0];
        p.want_finish = stopped.finish[0];
      }
      if (rng() % 2 == 0) {  // a reference close to the output, so that long drafts get accepted
        r.references = {p.want};
        for (auto& t : r.references[0])
          if (rng() % 8 == 0) t = static_cast<Token>(rng() % kVocab);
      }
    }
    auto session = make_session(static_cast<std::size_t>(schedule % 3), defaults);
    std::map<RequestId, std::size_t> which;  // id -> index in `planned`
    std::vector<std::vector<Token>> got(planned.size());
    std::vector<std::optional<FinishReason>> finish(planned.size());
    std::size_t next = 0;
    int loop_steps = 0;
    while (next < planned.size() || !session.idle()) {
      // Joins: between steps, up to 7 active requests.
      while (next < planned.size() && session.active() < 7 && (session.active() == 0 || rng() % 3 == 0)) {
        Planned& p = planned[next];
        which[session.add(p.request, make_drafter(p.drafter, datastore_))] = next;
        ++next;
      }
      most_active = std::max(most_active, session.active());
      for (const RequestUpdate& u : session.step()) {
        const std::size_t i = which.at(u.id);
        got[i].insert(got[i].end(), u.tokens.begin(), u.tokens.end());
        if (u.finished) finish[i] = u.finished;
      }
      // Leaves besides finishing: now and then a request is cancelled.
      if (session.active() > 0 && rng() % 25 == 0) {
        const auto victim = std::next(which.begin(), static_cast<std::ptrdiff_t>(rng() % which.size()))->first;
        session.cancel(victim);
      }
      ASSERT_LT(++loop_steps, 2000) << "schedule " << schedule << " does not end";
    }
    ASSERT_EQ(session.store().batch(), 0);
    tokens += session.stats().tokens;
    steps += session.stats().steps;
    for (std::size_t i = 0; i < planned.size(); ++i) {
      ++requests;
      sampled += planned[i].request.sampling ? 1 : 0;
      cancelled += finish[i] == FinishReason::kCancelled ? 1 : 0;
      ASSERT_TRUE(finish[i].has_value()) << "schedule " << schedule << " request " << i << " never finished";
      const auto& want = planned[i].want;
      if (*finish[i] == FinishReason::kCancelled) {
        ASSERT_LE(got[i].size(), want.size());
        EXPECT_TRUE(std::equal(got[i].begin(), got[i].end(), want.begin()))
            << "schedule " << schedule << " request " << i << " (cancelled) drafter " << planned[i].drafter;
        continue;
      }
      EXPECT_EQ(got[i], want) << "schedule " << schedule << " request " << i << " drafter " << planned[i].drafter
                              << (planned[i].request.sampling ? " sampled" : " greedy");
      EXPECT_EQ(*finish[i], planned[i].want_finish) << "schedule " << schedule << " request " << i;
    }
  }
  // The schedules exercise what they claim: drafts accepted, batches of up to 7, cancellations,
  // sampled requests.
  std::cout << "[schedules] " << requests << " requests (" << sampled << " sampled, " << cancelled << " cancelled), "
            << tokens << " tokens in " << steps << " steps: tau " << static_cast<double>(tokens) / static_cast<double>(steps)
            << ", at most " << most_active << " active\n";
  EXPECT_GT(static_cast<double>(tokens), 1.3 * static_cast<double>(steps));
  EXPECT_EQ(most_active, 7);
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(sampled, 0);
}

// 100 random schedules per store (200 in all): random models (MHA, GQA, MQA) in float64, 2 to 9
// requests of which up to 7 are active, joining at random steps, leaving when they finish or are
// cancelled; each request's output equals its own plain decoding, greedy or sampled with its seed.
TEST_P(SessionSchedules, EveryRequestEqualsItsOwnPlainDecoding) {
  const auto with = [](auto make_store) {
    return [make_store](std::size_t m, const GenerateOptions& defaults) { return Session(*models_[m], make_store(*models_[m]), defaults); };
  };
  if (GetParam() == StoreKind::kContiguous)
    run_schedules(with(contiguous_store), 0, 100);
  else
    run_schedules(with(paged_store), 100, 100);
}

// The static-shape step (StaticLlama over a StaticKvStore, run eagerly here; on a GPU its steps
// are captured in CUDA graphs) in 40 random schedules: each request's output, greedy or sampled
// with its seed, equals its own plain decoding by LlamaModel, whatever bucket its steps fall in
// and whoever joins or leaves.
using StaticStepSessions = SessionSchedules;
TEST_F(StaticStepSessions, EqualPlainDecodingOfTheEagerModel) {
  std::vector<StaticLlama> fixed;
  for (const auto& m : models_) fixed.emplace_back(*m);
  run_schedules(
      [&](std::size_t m, const GenerateOptions& defaults) {
        return Session(fixed[m], StaticKvStore(fixed[m].kv_layout(), kContext + 64, {.max_batch = 7, .max_rows = 64, .graphs = false}),
                       defaults);
      },
      200, 40);
}

// The same over a paged cache (StaticPagedKvStore: blocks of 4 entries, fewer than 7 full-length
// sequences would need), in 20 more schedules.
TEST_F(StaticStepSessions, EqualPlainDecodingOfTheEagerModelOverAPagedCache) {
  std::vector<StaticLlama> fixed;
  for (const auto& m : models_) fixed.emplace_back(*m);
  run_schedules(
      [&](std::size_t m, const GenerateOptions& defaults) {
        return Session(fixed[m],
                       StaticPagedKvStore(fixed[m].kv_layout(), 7 * (kContext + 64) / 4, 4, kContext + 64,
                                          {.max_batch = 7, .max_rows = 64, .graphs = false}),
                       defaults);
      },
      240, 20);
}

INSTANTIATE_TEST_SUITE_P(Stores, SessionSchedules, ::testing::Values(StoreKind::kContiguous, StoreKind::kPaged),
                         [](const auto& param_info) { return param_info.param == StoreKind::kContiguous ? "Contiguous" : "Paged"; });

LlamaModel small_model() { return LlamaModel::random(session_config(2), 5, at::kFloat); }

// A bad request is rejected when it joins, with an error naming what is wrong, and the requests
// already running go on untouched.
TEST(Session, RejectsBadRequestsAndTheOthersGoOn) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 20;
  const Request good{{1, 5, 9}, {}};
  GenerateOptions plain = opt;
  plain.limits.budget = 0;
  const auto want = generate(model, good, AnyDrafter{}, plain).tokens[0];
  Session session(model, PagedKvStore(model.kv_layout(), 64, 8), opt);
  const RequestId id = session.add(good, AnyDrafter(LlmaDrafter({.self_reference = true})));
  std::vector<Token> got;
  const auto take = [&](const std::vector<RequestUpdate>& updates) {
    for (const auto& u : updates) {
      EXPECT_EQ(u.id, id);
      got.insert(got.end(), u.tokens.begin(), u.tokens.end());
    }
  };
  take(session.step());
  refdec_test::expect_error([&] { session.add(Request{{1, 111}, {}}); }, "prompt token 1 has id 111 outside the vocabulary [0, 111)");
  refdec_test::expect_error([&] { session.add(Request{{1, -2}, {}}); }, "has id -2 outside the vocabulary");
  refdec_test::expect_error([&] { session.add(Request{{}, {}}); }, "the prompt is empty");
  refdec_test::expect_error([&] { session.add(Request{{1}, {{5, 6}, {7, 400}}}); }, "reference 1 token 1 has id 400 outside the vocabulary");
  refdec_test::expect_error([&] { session.add(Request{std::vector<Token>(kContext, 3), {}}); }, "leaves no room in a context of 96");
  Request bad_sampling{{1}, {}};
  bad_sampling.sampling = SamplingOptions{.temperature = -1.0f};
  EXPECT_THROW(session.add(bad_sampling), Error);
  Request bad_budget{{1}, {}};
  bad_budget.budget = -3;
  refdec_test::expect_error([&] { session.add(bad_budget); }, "budget must be 0 to 4096, got -3");
  Request bad_limit{{1}, {}};
  bad_limit.max_new_tokens = -1;
  refdec_test::expect_error([&] { session.add(bad_limit); }, "max_new_tokens must be >= 0, got -1");
  EXPECT_EQ(session.active(), 1);
  while (!session.idle()) take(session.step());
  EXPECT_EQ(got, want);
}

// A drafter that proposes a token outside the vocabulary stops the step with an error naming the
// request, before anything reaches the model.
struct OutOfVocabularyDrafter {
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t budget, DraftTree& out) {
    if (budget > 0) out.insert(std::vector<Token>{500});
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return "oov"; }
};

TEST(Session, RejectsDraftsOutsideTheVocabulary) {
  const auto model = small_model();
  Session session(model, ContiguousKvStore(model.kv_layout(), 128));
  const RequestId id = session.add(Request{{1}, {}}, AnyDrafter(OutOfVocabularyDrafter{}));
  refdec_test::expect_error([&] { session.step(); }, "refdec: request " + std::to_string(id) + ": drafter 'oov' proposed token id 500");
  EXPECT_THROW(session.step(), ArgumentError);
}

// A drafter's error passes through the session as the kind it was, with the request named once.
struct UnreadableDrafter : OutOfVocabularyDrafter {
  void propose(std::size_t, DraftTree&) { REFDEC_CHECK_IO(false, "datastore segment truncated"); }
};

TEST(Session, PassesDraftersErrorsOnAsTheirOwnKind) {
  const auto model = small_model();
  Session session(model, ContiguousKvStore(model.kv_layout(), 128));
  const RequestId id = session.add(Request{{1}, {}}, AnyDrafter(UnreadableDrafter{}));
  try {
    session.step();
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("refdec: request " + std::to_string(id) + ": datastore segment truncated (", 0), 0u) << msg;
    EXPECT_EQ(msg.find("refdec: ", 1), std::string::npos) << msg;
    EXPECT_EQ(msg.find("session.hpp"), std::string::npos) << "the site is the drafter's check: " << msg;
  }
}

// A drafter that counts its calls and takes time in them: propose() 1 ms, accept() 4 ms.
struct SlowCountingDrafter {
  std::shared_ptr<std::vector<std::string>> calls = std::make_shared<std::vector<std::string>>();
  void begin(std::span<const Token>, References) { calls->push_back("begin"); }
  void propose(std::size_t, DraftTree&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }
  void accept(std::span<const Token>) {
    calls->push_back("accept");
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
  void finish() { calls->push_back("finish"); }
  std::string name() const { return "slow"; }
};

// The session adds to a caller-owned drafter's statistics and never resets them; its own drafting
// statistics hold each request's part once. The drafter is told when its request ends (finish()),
// whether it stopped at its limit or was cancelled.
TEST(Session, TellsDraftersWhenRequestsEndAndKeepsCallerStatistics) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 3;
  Session session(model, ContiguousKvStore(model.kv_layout(), 64), opt);
  SlowCountingDrafter counting;
  AnyDrafter drafter(counting);
  session.add(Request{{1, 4}, {}}, &drafter);
  while (!session.idle()) session.step();
  EXPECT_EQ(*counting.calls, (std::vector<std::string>{"begin", "accept", "accept", "accept", "finish"}));
  const DrafterStats first = drafter.stats();
  EXPECT_EQ(first.steps, 3);
  EXPECT_EQ(session.stats().drafting.steps, 3);
  const RequestId second = session.add(Request{{7}, {}}, &drafter);  // no prefill: its first step drafts
  session.step();
  EXPECT_TRUE(session.cancel(second));
  EXPECT_EQ(counting.calls->back(), "finish");
  EXPECT_EQ(drafter.stats().steps, 4);  // 3 + 1: kept, not reset
  EXPECT_EQ(session.stats().drafting.steps, 4);
  EXPECT_EQ(session.stats().drafting.accept_seconds, drafter.stats().accept_seconds);
  // A HistoryDrafter's output joins the history when its request leaves, not at its next begin().
  const auto history = std::make_shared<OutputHistory>();
  AnyDrafter with_history(HistoryDrafter(AnyDrafter(NgramTrieDrafter{}), history));
  session.add(Request{{1, 9}, {}}, &with_history);
  while (!session.idle()) session.step();
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ(history->tokens(), 3u);
}

// The drafters' time after the forward pass (accept(), observe(), finish()) is drafting time, not
// verification time: the parts of the steps add up to at most their wall time. (Structure, not
// speed: with accept() taking longer than propose(), counting it in both would exceed the total.)
TEST(Session, CountsDraftersTimeOnceInTheStepParts) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 4;
  Session session(model, ContiguousKvStore(model.kv_layout(), 64), opt);
  AnyDrafter drafter(SlowCountingDrafter{});
  session.add(Request{{1}, {}}, &drafter);
  const double begin_seconds = drafter.stats().accept_seconds;  // before the steps
  while (!session.idle()) session.step();
  const GenerateStats& st = session.stats();
  const double after_forward = st.drafting.accept_seconds - begin_seconds;  // accept() and finish()
  EXPECT_GE(after_forward, 4 * 4e-3);
  EXPECT_LE(st.verify.plan + st.verify.model + st.verify.accept + st.verify.commit + after_forward, st.total_seconds);
  EXPECT_GE(st.draft_seconds, after_forward);
}

// Joining, prefilling, reporting, cancelling, finishing at once: what step() reports and when.
TEST(Session, ReportsUpdatesAsRequestsJoinAndLeave) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 5;
  Session session(model, ContiguousKvStore(model.kv_layout(), 128), opt);
  EXPECT_TRUE(session.idle());
  EXPECT_TRUE(session.step().empty());
  const RequestId a = session.add(Request{{1, 4, 5, 6}, {}});  // prefilled by the first step
  const RequestId b = session.add(Request{{1}, {}});           // nothing to prefill
  Request none{{1}, {}};
  none.max_new_tokens = 0;
  const RequestId c = session.add(none);  // leaves at once
  EXPECT_EQ(session.active(), 2);
  auto updates = session.step();
  ASSERT_EQ(updates.size(), 2u);  // c's finish and b's first token; a only prefilled
  EXPECT_EQ(updates[0].id, c);
  EXPECT_EQ(updates[0].finished, FinishReason::kMaxNewTokens);
  EXPECT_TRUE(updates[0].tokens.empty());
  EXPECT_EQ(updates[1].id, b);
  EXPECT_EQ(updates[1].tokens.size(), 1u);
  EXPECT_EQ(session.stats().prefill_tokens, 3);
  updates = session.step();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(session.output(a).size(), 1u);
  EXPECT_TRUE(session.cancel(a));
  EXPECT_FALSE(session.cancel(a));
  EXPECT_FALSE(session.cancel(12345));
  EXPECT_EQ(session.active(), 1);
  updates = session.step();
  ASSERT_GE(updates.size(), 1u);
  EXPECT_EQ(updates[0].id, a);
  EXPECT_EQ(updates[0].finished, FinishReason::kCancelled);
  while (!session.idle()) session.step();
  EXPECT_EQ(session.store().batch(), 0);
  EXPECT_EQ(session.stats().tokens, 1 + 5);
  refdec_test::expect_error([&] { session.output(b); }, "no active request");
}

// A long prompt is prefilled in chunks of prefill_chunk tokens, one chunk per step, while another
// request decodes; outputs are unchanged.
TEST(Session, PrefillsLongPromptsInChunks) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 6;
  opt.driver.prefill_chunk = 4;
  Request long_prompt{{1}, {}};
  for (Token t = 0; t < 10; ++t) long_prompt.prompt.push_back(static_cast<Token>(3 + t));  // 11 tokens: 10 to prefill
  const Request short_prompt{{1}, {}};
  GenerateOptions whole = opt;
  whole.driver.prefill_chunk = 0;
  const auto want_long = generate(model, long_prompt, AnyDrafter{}, whole).tokens[0];
  const auto want_short = generate(model, short_prompt, AnyDrafter{}, whole).tokens[0];
  Session session(model, ContiguousKvStore(model.kv_layout(), 128), opt);
  const RequestId a = session.add(long_prompt), b = session.add(short_prompt);
  std::map<RequestId, std::vector<Token>> got;
  std::vector<std::int32_t> rows;  // [steps] plan rows of the long request
  while (!session.idle()) {
    for (const auto& u : session.step()) got[u.id].insert(got[u.id].end(), u.tokens.begin(), u.tokens.end());
    rows.push_back(session.last_plan().rows(0));
  }
  EXPECT_EQ(got[a], want_long);
  EXPECT_EQ(got[b], want_short);
  ASSERT_GE(rows.size(), 4u);
  EXPECT_EQ(std::vector<std::int32_t>(rows.begin(), rows.begin() + 3), (std::vector<std::int32_t>{4, 4, 2}));
  EXPECT_EQ(session.stats().prefill_tokens, 10);
  GenerateOptions negative;
  negative.driver.prefill_chunk = -1;
  refdec_test::expect_error([&] { Session s(model, ContiguousKvStore(model.kv_layout(), 8), negative); }, "prefill_chunk must be >= 0, got -1");
  // The driver's vocabulary and context are the model's unless set: another vocabulary is refused.
  GenerateOptions other_vocab;
  other_vocab.driver.vocab_size = model.vocab_size() + 1;
  refdec_test::expect_error([&] { Session s(model, ContiguousKvStore(model.kv_layout(), 8), other_vocab); },
                            "Session: vocab_size " + std::to_string(model.vocab_size() + 1) + " is not the model's");
  other_vocab.driver.vocab_size = model.vocab_size();
  other_vocab.driver.max_context = 6;
  EXPECT_EQ(model_driver_options(model, other_vocab.driver, "test").max_context, 6);
  EXPECT_EQ(model_driver_options(model, StepDriverOptions{}, "test").max_context, model.max_seq_len());
  EXPECT_EQ(model_driver_options(model, StepDriverOptions{}, "test").vocab_size, model.vocab_size());
}

// Records the step cost it is given and drafts a fixed chain.
struct CostRecorder {
  std::shared_ptr<std::vector<double>> given = std::make_shared<std::vector<double>>();  // seconds(4) of each cost
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t budget, DraftTree& out) {
    const std::vector<Token> chain{5, 6, 7};
    out.insert(std::span<const Token>(chain).first(std::min<std::size_t>(budget, 3)), 1.0f);
  }
  void accept(std::span<const Token>) {}
  std::string name() const { return "cost-recorder"; }
  void set_step_cost(const StepCost& cost) { given->push_back(cost.seconds(4)); }
};

// With GenerateOptions::step_cost the session times its one-sequence steps (prefill excluded),
// each after the drafter was given the cost learned from the steps before it; the output is
// unchanged. Several sequences: neither. Unset: the drafters are never given a cost.
TEST(Session, LearnsTheStepCostFromItsOwnStepsAndGivesItToTheDrafter) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 8;
  opt.limits.budget = 3;
  const Request request{{1, 4, 5, 6}, {}};  // one prefill step first
  const auto want = generate(model, request, AnyDrafter{}, opt).tokens[0];
  opt.step_cost = StepCost::affine(1e-3, 1e-4);
  opt.batch_budget = false;
  Session session(model, ContiguousKvStore(model.kv_layout(), 64), opt);
  CostRecorder recorder;
  const auto given = recorder.given;
  session.add(request, AnyDrafter(recorder));
  ASSERT_NE(session.step_cost_tracker(), nullptr);
  std::vector<double> expected;  // what the tracker said before each step
  std::vector<Token> got;
  while (!session.idle()) {
    expected.push_back(session.step_cost_tracker()->current().seconds(4));
    for (const auto& u : session.step()) got.insert(got.end(), u.tokens.begin(), u.tokens.end());
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(*given, expected);  // every step, the prefill step's too (before it knew it would prefill)
  EXPECT_DOUBLE_EQ(given->front(), opt.step_cost->seconds(4));  // nothing timed yet: the prior
  EXPECT_EQ(session.step_cost_tracker()->observations(), session.stats().steps);
  EXPECT_EQ(session.stats().steps + 1, static_cast<std::int64_t>(given->size()));
  // Two sequences in one step: no cost given, no step timed.
  Session pair(model, ContiguousKvStore(model.kv_layout(), 64), opt);
  CostRecorder a, b;
  pair.add(Request{{1}, {}}, AnyDrafter(a));
  pair.add(Request{{1}, {}}, AnyDrafter(b));
  pair.step();
  EXPECT_TRUE(a.given->empty());
  EXPECT_EQ(pair.step_cost_tracker()->observations(), 0);
  // No step_cost: no tracker, no cost given.
  GenerateOptions plain = opt;
  plain.step_cost.reset();
  Session untracked(model, ContiguousKvStore(model.kv_layout(), 64), plain);
  CostRecorder c;
  untracked.add(Request{{1}, {}}, AnyDrafter(c));
  untracked.step();
  EXPECT_EQ(untracked.step_cost_tracker(), nullptr);
  EXPECT_TRUE(c.given->empty());
}

// With a step cost and batch_budget (the default), every step's nodes are chosen across the batch:
// the drafters are given the flat cost (the batch chooses), every step that prefills nothing is
// timed at its total rows, several sequences included, and the outputs stay plain decoding's.
TEST(Session, BatchBudgetLearnsFromEveryStepAndStaysLossless) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.limits.max_new_tokens = 10;
  opt.limits.budget = 3;
  const std::vector<Request> requests = {{{1, 4, 5}, {}}, {{1}, {}}, {{1, 7}, {}}};
  std::vector<std::vector<Token>> want;
  for (const Request& r : requests) want.push_back(generate(model, r, AnyDrafter{}, opt).tokens[0]);
  opt.step_cost = StepCost::affine(1e-3, 1e-4);
  ASSERT_TRUE(opt.batch_budget);
  Session session(model, ContiguousKvStore(model.kv_layout(), 64), opt);
  std::vector<CostRecorder> recorders(requests.size());
  std::map<RequestId, std::size_t> which;
  for (std::size_t i = 0; i < requests.size(); ++i) which[session.add(requests[i], AnyDrafter(recorders[i]))] = i;
  std::vector<std::vector<Token>> got(requests.size());
  std::int64_t unprefilled = 0, several = 0;
  while (!session.idle()) {
    const std::int64_t passes = session.stats().forward_passes, prefill = session.stats().prefill_tokens;
    const std::size_t active = session.active();
    for (const auto& u : session.step()) got[which.at(u.id)].insert(got[which.at(u.id)].end(), u.tokens.begin(), u.tokens.end());
    if (session.stats().forward_passes > passes && session.stats().prefill_tokens == prefill) {
      ++unprefilled;
      several += active > 1 ? 1 : 0;
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(session.step_cost_tracker()->observations(), unprefilled);
  EXPECT_GT(several, 0);
  for (const CostRecorder& r : recorders) {
    ASSERT_FALSE(r.given->empty());
    for (const double c : *r.given) EXPECT_EQ(c, 1.0);  // StepCost::flat()
  }
}

static_assert(CausalLM<LlamaModel, ContiguousKvStore>);
static_assert(CausalLM<LlamaModel, PagedKvStore>);

// An engine's own KV store, written here and nowhere in refdec: per sequence and layer a list of
// [1, kv_heads, head_dim] entries, the step's rows held apart until commit().
class ListKvStore {
 public:
  explicit ListKvStore(KvLayout layout) : layout_(std::move(layout)) {}
  void begin_step(const StepPlan& plan) {
    ASSERT_EQ(plan.lengths, lengths_);
    indptr_ = plan.indptr;
    step_k_.assign(static_cast<std::size_t>(layout_.layers), {});
    step_v_.assign(static_cast<std::size_t>(layout_.layers), {});
  }
  void write(std::int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    step_k_[static_cast<std::size_t>(layer)] = k;
    step_v_[static_cast<std::size_t>(layer)] = v;
  }
  std::pair<at::Tensor, at::Tensor> read(std::int64_t layer, std::int64_t b) const {
    const auto u = static_cast<std::size_t>(b);
    const auto l = static_cast<std::size_t>(layer);
    std::vector<at::Tensor> k(keys_[u][l].begin(), keys_[u][l].end()), v(values_[u][l].begin(), values_[u][l].end());
    k.push_back(step_k_[l].slice(0, indptr_[u], indptr_[u + 1]));
    v.push_back(step_v_[l].slice(0, indptr_[u], indptr_[u + 1]));
    return {at::cat(k), at::cat(v)};
  }
  void commit(const KeepPlan& keep) {
    for (std::size_t b = 0; b < lengths_.size(); ++b) {
      for (const std::int32_t row : keep.kept(static_cast<std::int32_t>(b)))
        for (std::size_t l = 0; l < keys_[b].size(); ++l) {
          keys_[b][l].push_back(step_k_[l].slice(0, indptr_[b] + row, indptr_[b] + row + 1).clone());
          values_[b][l].push_back(step_v_[l].slice(0, indptr_[b] + row, indptr_[b] + row + 1).clone());
        }
      lengths_[b] = keep.lengths[b];
    }
  }
  std::int64_t add() {
    keys_.emplace_back(static_cast<std::size_t>(layout_.layers));
    values_.emplace_back(static_cast<std::size_t>(layout_.layers));
    lengths_.push_back(0);
    return batch() - 1;
  }
  void remove(std::int64_t b) {
    keys_.erase(keys_.begin() + b);
    values_.erase(values_.begin() + b);
    lengths_.erase(lengths_.begin() + b);
  }
  std::int64_t batch() const { return static_cast<std::int64_t>(lengths_.size()); }
  std::span<const std::int64_t> lengths() const { return lengths_; }
  KvLayout layout() const { return layout_; }

 private:
  KvLayout layout_;
  std::vector<std::vector<std::vector<at::Tensor>>> keys_, values_;  // [B][layer][entry]
  std::vector<std::int64_t> lengths_;
  std::vector<std::int32_t> indptr_;
  std::vector<at::Tensor> step_k_, step_v_;  // [layer] the step's rows
};
static_assert(KvStore<ListKvStore>);

// An engine's own model, written here: two layers of single-head attention over token and
// position embeddings, in float64, over whatever KvStore it is given; nothing of refdec's model.
class TwoLayerAttention {
 public:
  static constexpr std::int64_t kDim = 8;
  TwoLayerAttention() {
    at::manual_seed(11);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    embed_ = at::randn({kVocab, kDim}, f64);
    position_ = at::randn({kContext + 16, kDim}, f64);
    for (int l = 0; l < 2; ++l) {
      wq_.push_back(at::randn({kDim, kDim}, f64));
      wk_.push_back(at::randn({kDim, kDim}, f64));
      wv_.push_back(at::randn({kDim, kDim}, f64));
    }
    out_ = at::randn({kDim, kVocab}, f64);
  }
  template <KvStore S>
  at::Tensor forward(const StepPlan& plan, S& store) const {
    store.begin_step(plan);
    const auto tokens = at::tensor(std::vector<std::int64_t>(plan.tokens.begin(), plan.tokens.end()), at::kLong);
    const auto positions = at::tensor(plan.positions, at::kLong);
    at::Tensor h = embed_.index_select(0, tokens) + position_.index_select(0, positions);  // [R, dim]
    for (std::size_t l = 0; l < wq_.size(); ++l) {
      const at::Tensor q = h.matmul(wq_[l]);
      store.write(static_cast<std::int64_t>(l), h.matmul(wk_[l]).view({-1, 1, kDim}), h.matmul(wv_[l]).view({-1, 1, kDim}));
      std::vector<at::Tensor> rows;
      for (std::int32_t b = 0; b < plan.batch(); ++b) {
        const auto [k, v] = store.read(static_cast<std::int64_t>(l), b);  // [cached + rows(b), 1, dim]
        const std::int64_t cached = plan.lengths[static_cast<std::size_t>(b)];
        at::Tensor mask = at::zeros({plan.rows(b), cached + plan.rows(b)}, at::kBool);
        mask.slice(1, 0, cached).fill_(true);
        for (std::int32_t i = 0; i < plan.rows(b); ++i)
          for (std::int32_t j = 0; j < plan.rows(b); ++j)
            if (plan.sees(b, i, j)) mask[i][cached + j] = true;
        const at::Tensor qb = q.slice(0, plan.indptr[static_cast<std::size_t>(b)], plan.indptr[static_cast<std::size_t>(b) + 1]);
        const at::Tensor scores = qb.matmul(k.squeeze(1).t()).div(std::sqrt(static_cast<double>(kDim))).masked_fill(mask.logical_not(), -INFINITY);
        rows.push_back(scores.softmax(-1).matmul(v.squeeze(1)));
      }
      h = h + at::cat(rows);
    }
    return h.matmul(out_);
  }
  KvLayout kv_layout() const { return {2, 1, kDim, at::TensorOptions().dtype(at::kDouble)}; }
  std::int64_t vocab_size() const { return kVocab; }
  std::int64_t max_seq_len() const { return kContext; }
  at::Device device() const { return at::kCPU; }

  // Plain greedy decoding with no cache at all: the whole sequence run afresh for every token.
  std::vector<Token> greedy_without_cache(std::vector<Token> sequence, std::size_t new_tokens) const {
    const std::size_t prompt = sequence.size();
    while (sequence.size() < prompt + new_tokens) {
      ListKvStore fresh(kv_layout());
      fresh.add();
      StepPlan plan;
      const std::int64_t length = 0;
      const std::vector<LinearTree> chain{LinearTree::chain(sequence)};
      plan_step(chain, {}, std::span<const std::int64_t>(&length, 1), kVocab, plan);
      sequence.push_back(static_cast<Token>(forward(plan, fresh)[static_cast<std::int64_t>(sequence.size()) - 1].argmax().item<std::int64_t>()));
    }
    return {sequence.begin() + static_cast<std::ptrdiff_t>(prompt), sequence.end()};
  }

 private:
  at::Tensor embed_, position_, out_;
  std::vector<at::Tensor> wq_, wk_, wv_;
};
static_assert(CausalLM<TwoLayerAttention, ListKvStore>);

// The Session over a model and a store that are both the engine's (defined above, neither
// refdec's): requests with drafters join and leave, and every output equals the model's own
// decoding without a cache.
TEST(Session, RunsAnEnginesOwnModelOverItsOwnStoreLosslessly) {
  const TwoLayerAttention model;
  GenerateOptions opt;
  opt.limits.max_new_tokens = 24;
  opt.limits.budget = 8;
  opt.driver.prefill_chunk = 3;
  Session session(model, ListKvStore(model.kv_layout()), opt);
  const std::vector<std::vector<Token>> prompts = {{1, 5, 9, 5, 9, 5}, {1, 7}, {1, 2, 3, 4, 2, 3, 4, 2, 3}};
  std::map<RequestId, std::size_t> index;
  std::vector<std::vector<Token>> got(prompts.size());
  std::int64_t accepted = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    AnyDrafter drafter = i == 1 ? AnyDrafter(LookaheadDrafter({.window = 3, .ngram = 3, .guesses = 3}))
                                : AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 6, .spans = 2, .self_reference = true}));
    index[session.add(Request{prompts[i], {prompts[i]}}, std::move(drafter))] = i;
    for (const auto& u : session.step()) got[index.at(u.id)].insert(got[index.at(u.id)].end(), u.tokens.begin(), u.tokens.end());
  }
  while (!session.idle())
    for (const auto& u : session.step()) got[index.at(u.id)].insert(got[index.at(u.id)].end(), u.tokens.begin(), u.tokens.end());
  accepted = session.stats().drafting.accepted_tokens;
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], model.greedy_without_cache(prompts[i], 24)) << "request " << i;
  EXPECT_GT(accepted, 0) << "no draft was accepted: the test would not exercise tree steps";
}

// The torch-free example (examples/engine_without_torch.cpp: its own forward pass in float loops,
// refdec's core for drafting, plan, walk and keep plan) gives the torch model's plain greedy output
// token for token.
TEST(EngineWithoutTorch, OutputEqualsTorchGreedyDecoding) {
#ifndef REFDEC_ENGINE_EXAMPLE
  GTEST_SKIP() << "the examples are not built (REFDEC_BUILD_EXAMPLES=OFF)";
#else
  const auto path = refdec_test::data_file("models/stories260K/stories260K.bin");
  if (path.empty()) GTEST_SKIP() << "stories260K not found under " << refdec_test::data_dir();
  const std::string command = std::string(REFDEC_ENGINE_EXAMPLE) + " --ids-only --max-new-tokens 200 --model '" + path.string() + "'";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string out;
  for (char buf[4096]; std::fgets(buf, sizeof buf, pipe) != nullptr;) out += buf;
  ASSERT_EQ(pclose(pipe), 0) << command << "\n" << out;
  const auto parse = [](const std::string& line) {
    std::vector<Token> ids;
    std::istringstream is(line);
    for (Token t; is >> t;) ids.push_back(t);
    return ids;
  };
  const auto model = load_llama2c(path);
  GenerateOptions opt;
  opt.limits.max_new_tokens = 200;
  opt.limits.stop_tokens = {1, 2};
  std::istringstream lines(out);
  int sequences = 0;
  for (std::string prompt_line, ids_line; std::getline(lines, prompt_line) && std::getline(lines, ids_line); ++sequences) {
    ASSERT_EQ(prompt_line.rfind("prompt: ", 0), 0u) << out;
    ASSERT_EQ(ids_line.rfind("ids: ", 0), 0u) << out;
    const Request request{parse(prompt_line.substr(8)), {}};
    const auto engine = parse(ids_line.substr(5));
    EXPECT_EQ(engine, generate(model, request, AnyDrafter{}, opt).tokens[0]) << "sequence " << sequences;
    EXPECT_GT(engine.size(), 100u);
  }
  EXPECT_EQ(sequences, 3);
#endif
}

}  // namespace
