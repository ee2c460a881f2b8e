// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The Session: continuous batching (requests join and leave between steps) stays lossless for
// every drafter and both KV stores; bad requests are rejected without disturbing the others.

#include "refdec/torch/session.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "common/tiny_llama.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

constexpr std::int64_t kVocab = 111;
constexpr std::int64_t kContext = 96;

LlamaConfig session_config(std::int64_t kv_heads) { return refdec_test::tiny_llama_config(kv_heads, kVocab, kContext); }

// The drafters of the schedules: every kind, the mixture and the lookahead window included.
constexpr int kDrafterKinds = 7;
AnyDrafter make_drafter(int kind, const std::shared_ptr<const Datastore>& datastore) {
  switch (kind) {
    case 0: return AnyDrafter{};
    case 1: return AnyDrafter(LlmaDrafter({.n = 1, .k = 8, .m = 2, .self_reference = true}));
    case 2: return AnyDrafter(PromptLookupDrafter{});
    case 3: return AnyDrafter(NgramTrieDrafter({.n = 6, .prefix_len = 2, .num_draft = 12}));
    case 4: return AnyDrafter(RestDrafter(datastore, {.c = 16}));
    case 5: return AnyDrafter(LookaheadDrafter({.window = 4, .ngram = 3, .guesses = 4}));
    default: {
      std::vector<AnyDrafter> sources;
      sources.emplace_back(LlmaDrafter({.n = 1, .k = 6, .m = 2}));
      sources.emplace_back(NgramTrieDrafter({.n = 6, .prefix_len = 2, .num_draft = 12}));
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

  template <class S>
  void run_schedules(S make_store(const LlamaModel&), int first, int count);

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

template <class S>
void SessionSchedules::run_schedules(S make_store(const LlamaModel&), int first, int count) {
  std::int64_t tokens = 0, steps = 0, cancelled = 0, sampled = 0, requests = 0, most_active = 0;
  for (int schedule = first; schedule < first + count; ++schedule) {
    std::mt19937 rng(1000 + static_cast<unsigned>(schedule));
    const LlamaModel& model = *models_[static_cast<std::size_t>(schedule % 3)];
    GenerateOptions defaults;
    defaults.budget = 12;
    // Chunked prefill in a third of the schedules: prompts take several steps, beside decoding.
    if (schedule % 3 == 0) defaults.prefill_chunk = 1 + static_cast<std::int64_t>(rng() % 4);
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
      plain.budget = 0;
      plain.prefill_chunk = 0;  // the whole prompt in one pass
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
    Session session(model, make_store(model), defaults);
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
  if (GetParam() == StoreKind::kContiguous)
    run_schedules(contiguous_store, 0, 100);
  else
    run_schedules(paged_store, 100, 100);
}

INSTANTIATE_TEST_SUITE_P(Stores, SessionSchedules, ::testing::Values(StoreKind::kContiguous, StoreKind::kPaged),
                         [](const auto& param_info) { return param_info.param == StoreKind::kContiguous ? "Contiguous" : "Paged"; });

LlamaModel small_model() { return LlamaModel::random(session_config(2), 5, at::kFloat); }

// A bad request is rejected when it joins, with an error naming what is wrong, and the requests
// already running go on untouched.
TEST(Session, RejectsBadRequestsAndTheOthersGoOn) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.max_new_tokens = 20;
  const Request good{{1, 5, 9}, {}};
  GenerateOptions plain = opt;
  plain.budget = 0;
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
  refdec_test::expect_error([&] { session.add(bad_budget); }, "budget must be >= 0, got -3");
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
  void begin(std::span<const Token>, std::span<const std::vector<Token>>) {}
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
  refdec_test::expect_error([&] { session.step(); }, "request " + std::to_string(id) + ": refdec: drafter 'oov' proposed token id 500");
}

// Joining, prefilling, reporting, cancelling, finishing at once: what step() reports and when.
TEST(Session, ReportsUpdatesAsRequestsJoinAndLeave) {
  const auto model = small_model();
  GenerateOptions opt;
  opt.max_new_tokens = 5;
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
  opt.max_new_tokens = 6;
  opt.prefill_chunk = 4;
  Request long_prompt{{1}, {}};
  for (Token t = 0; t < 10; ++t) long_prompt.prompt.push_back(static_cast<Token>(3 + t));  // 11 tokens: 10 to prefill
  const Request short_prompt{{1}, {}};
  GenerateOptions whole = opt;
  whole.prefill_chunk = 0;
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
  negative.prefill_chunk = -1;
  refdec_test::expect_error([&] { Session s(model, ContiguousKvStore(model.kv_layout(), 8), negative); }, "prefill_chunk must be >= 0, got -1");
}

// Records the step cost it is given and drafts a fixed chain.
struct CostRecorder {
  std::shared_ptr<std::vector<double>> given = std::make_shared<std::vector<double>>();  // seconds(4) of each cost
  void begin(std::span<const Token>, std::span<const std::vector<Token>>) {}
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
  opt.max_new_tokens = 8;
  opt.budget = 3;
  const Request request{{1, 4, 5, 6}, {}};  // one prefill step first
  const auto want = generate(model, request, AnyDrafter{}, opt).tokens[0];
  opt.step_cost = StepCost::affine(1e-3, 1e-4);
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
  opt.max_new_tokens = 200;
  opt.stop_tokens = {1, 2};
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
