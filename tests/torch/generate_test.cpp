// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The decode loop: speculative greedy decoding must reproduce plain greedy decoding exactly.

#include <gtest/gtest.h>

#include <array>
#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "refdec/datastore/builder.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "common/statistics.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

// Options for decoding `max_new_tokens` tokens with a draft budget of `budget`.
GenerateOptions limited(std::int64_t max_new_tokens, std::int64_t budget = SequenceLimits{}.budget) {
  GenerateOptions opt;
  opt.limits.max_new_tokens = max_new_tokens;
  opt.limits.budget = budget;
  return opt;
}

GenerateResult run(const LlamaModel& model, const Request& request, std::optional<LlmaOptions> llma,
                   GenerateOptions opt) {
  if (!llma) return generate(model, request, AnyDrafter{}, opt);
  return generate(model, request, AnyDrafter(LlmaDrafter(*llma)), opt);
}

class StoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto path = refdec_test::data_file("models/stories260K/stories260K.bin");
    const auto tok = refdec_test::data_file("models/stories260K/tok512.bin");
    if (path.empty() || tok.empty()) GTEST_SKIP() << "stories260K not found under " << refdec_test::data_dir();
    model_ = std::make_unique<LlamaModel>(load_llama2c(path));
    tokenizer_ = std::make_unique<Llama2cTokenizer>(Llama2cTokenizer::load(tok, 512));
  }
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Llama2cTokenizer> tokenizer_;
};

// LLMA with many kinds of references gives exactly the plain output (fp32, CPU).
TEST_F(StoriesTest, LlmaIsLosslessForManyPromptsAndReferences) {
  const GenerateOptions opt = limited(200, 16);
  std::mt19937 rng(5);
  std::uniform_int_distribution<Token> tok(3, 511);
  for (const std::string text : {"", "Once upon a time", "The cat sat on the mat. The dog", "Tom and"}) {
    Request plain_req{tokenizer_->encode(text, true, false), {}};
    const auto plain = run(*model_, plain_req, std::nullopt, opt);
    ASSERT_FALSE(plain.tokens[0].empty());
    // References: the prompt, a perturbed copy of the plain output, unrelated text, nothing.
    std::vector<Token> perturbed = plain.tokens[0];
    for (std::size_t i = 7; i < perturbed.size(); i += 11) perturbed[i] = tok(rng);
    std::vector<Token> unrelated(300);
    for (auto& t : unrelated) t = tok(rng);
    const std::vector<std::vector<std::vector<Token>>> reference_sets = {
        {plain_req.prompt}, {perturbed}, {unrelated}, {{}}, {}, {perturbed, unrelated, plain.tokens[0]}};
    for (std::size_t r = 0; r < reference_sets.size(); ++r)
      for (const bool self : {false, true})
        for (const std::size_t m : {std::size_t{1}, std::size_t{3}}) {
          Request req{plain_req.prompt, reference_sets[r]};
          const auto spec = run(*model_, req, LlmaOptions{.min_match = 1, .continuation = 16, .spans = m, .self_reference = self}, opt);
          EXPECT_EQ(spec.tokens[0], plain.tokens[0]) << "prompt '" << text << "' references " << r << " self " << self << " m " << m;
          EXPECT_EQ(spec.stats.tokens, static_cast<std::int64_t>(plain.tokens[0].size()));
        }
  }
}

TEST_F(StoriesTest, ReferenceFromFirstRunIsFast) {
  const GenerateOptions opt = limited(256);
  Request req{{1}, {}};
  const auto plain = run(*model_, req, std::nullopt, opt);
  req.references = {plain.tokens[0]};
  const auto spec = run(*model_, req, LlmaOptions{}, opt);
  EXPECT_EQ(spec.tokens[0], plain.tokens[0]);
  EXPECT_GE(spec.stats.tokens_per_step(), 4.0);
  EXPECT_LT(spec.stats.forward_passes, plain.stats.forward_passes / 4);
  // Acceptance statistics by position: depth 1 is reached and accepted most of the time.
  const auto& d = spec.stats.drafting;
  ASSERT_FALSE(d.proposed_at_depth.empty());
  EXPECT_GT(d.acceptance_at(0), 0.9);
  EXPECT_EQ(d.accepted_tokens + spec.stats.steps, spec.stats.tokens);
}

// The retrieval drafters are lossless too: an n-gram trie over the prompt and references, and a
// REST datastore of other generations (the "cache of earlier sessions" scenario).
TEST_F(StoriesTest, NgramTrieAndRestAreLossless) {
  const GenerateOptions opt = limited(160);
  const std::vector<std::string> prompts = {"", "Once upon a time", "Tom and", "The cat sat on the mat. The dog",
                                            "Lily wanted", "One day, a big"};
  std::vector<std::vector<Token>> prompt_ids, plain;
  for (const auto& text : prompts) {
    prompt_ids.push_back(tokenizer_->encode(text, true, false));
    plain.push_back(run(*model_, Request{prompt_ids.back(), {}}, std::nullopt, opt).tokens[0]);
  }
  // The datastore holds the other prompts' outputs, so it never contains the answer itself.
  refdec_test::TempDir dir;
  std::vector<std::shared_ptr<const Datastore>> stores;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<std::vector<Token>> docs;
    for (std::size_t j = 0; j < prompts.size(); ++j)
      if (j != i) docs.push_back(plain[j]);
    const auto path = dir / ("ds" + std::to_string(i) + ".bin");
    build_datastore(docs, 512, path);
    stores.push_back(Datastore::open_shared(path));
  }
  double trie_tau = 0, rest_tau = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Request req{prompt_ids[i], {plain[(i + 1) % prompts.size()]}};
    for (const NgramTrieOptions& o : {NgramTrieOptions{}, NgramTrieOptions{.ngram = 5, .max_match = 1, .max_nodes = 8}}) {
      const auto spec = generate(*model_, req, AnyDrafter(NgramTrieDrafter(o)), opt);
      EXPECT_EQ(spec.tokens[0], plain[i]) << "n-gram trie, prompt '" << prompts[i] << "' n " << o.ngram;
      trie_tau += spec.stats.tokens_per_step();
    }
    for (const RestOptions& o : {RestOptions{}, RestOptions{.max_match = 4, .continuation = 6, .max_nodes = 12, .max_occurrences = 3}}) {
      const auto spec = generate(*model_, req, AnyDrafter(RestDrafter(stores[i], o)), opt);
      EXPECT_EQ(spec.tokens[0], plain[i]) << "REST, prompt '" << prompts[i] << "' c " << o.max_nodes;
      rest_tau += spec.stats.tokens_per_step();
    }
  }
  // The story repeats itself and the generations share phrases: both drafters must help.
  EXPECT_GT(trie_tau / (2.0 * static_cast<double>(prompts.size())), 1.5);
  EXPECT_GT(rest_tau / (2.0 * static_cast<double>(prompts.size())), 1.5);
}

// The lookahead drafter, with its Jacobi window in the forward pass or as a pure pool, is
// lossless alone and batched; its window makes it draft without any reference.
TEST_F(StoriesTest, LookaheadIsLossless) {
  const GenerateOptions opt = limited(160, 32);
  const std::vector<LookaheadOptions> settings = {
      {}, {.window = 5, .ngram = 3, .guesses = 5}, {.window = 7, .ngram = 2, .guesses = 7}, {.window = 0, .ngram = 4, .guesses = 8}};
  std::vector<Request> reqs;
  std::vector<std::vector<Token>> plain;
  for (const std::string text : {"", "Once upon a time", "Tom and", "Lily wanted"}) {
    reqs.push_back(Request{tokenizer_->encode(text, true, false), {}});
    plain.push_back(run(*model_, reqs.back(), std::nullopt, opt).tokens[0]);
  }
  std::vector<double> tau(settings.size(), 0.0);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    for (std::size_t s = 0; s < settings.size(); ++s) {
      const auto spec = generate(*model_, reqs[i], AnyDrafter(LookaheadDrafter(settings[s])), opt);
      EXPECT_EQ(spec.tokens[0], plain[i]) << "prompt " << i << " setting " << s;
      tau[s] += spec.stats.tokens_per_step() / static_cast<double>(reqs.size());
    }
  EXPECT_GT(tau[0], 1.3) << "the default window must find the story's repetitions";
  std::vector<AnyDrafter> drafters;
  for (std::size_t i = 0; i < reqs.size(); ++i) drafters.emplace_back(LookaheadDrafter(settings[i % settings.size()]));
  const auto batch = generate(*model_, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
  for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batch.tokens[i], plain[i]) << "batch sequence " << i;
}

// A mixture of LLMA, the n-gram trie, REST and the lookahead drafter (whose window rides in the
// forward pass through the mixture) is lossless, with a flat and with an affine step cost (which
// makes the budget adapt), alone and batched.
TEST_F(StoriesTest, MixtureWithLookaheadIsLossless) {
  const GenerateOptions opt = limited(120, 32);
  const std::vector<std::string> prompts = {"", "Once upon a time", "Tom and", "Lily wanted"};
  std::vector<Request> reqs;
  std::vector<std::vector<Token>> plain;
  for (const auto& text : prompts) {
    reqs.push_back(Request{tokenizer_->encode(text, true, false), {}});
    plain.push_back(run(*model_, reqs.back(), std::nullopt, opt).tokens[0]);
  }
  refdec_test::TempDir dir;
  const auto path = dir / "others.ds";
  build_datastore(std::vector<std::vector<Token>>(plain.begin() + 1, plain.end()), 512, path);
  const auto store = Datastore::open_shared(path);
  const auto mixture = [&](const StepCost& cost) {
    std::vector<AnyDrafter> sources;
    sources.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 8, .spans = 2, .self_reference = true}));
    sources.emplace_back(NgramTrieDrafter{});
    sources.emplace_back(RestDrafter(store));
    sources.emplace_back(LookaheadDrafter({.window = 5, .ngram = 4, .guesses = 5}));
    return AnyDrafter(MixtureDrafter(std::move(sources), {.cost = cost}));
  };
  for (const StepCost& cost : {StepCost::flat(), StepCost::affine(1.0, 0.05)}) {
    double tau = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const auto spec = generate(*model_, reqs[i], mixture(cost), opt);
      EXPECT_EQ(spec.tokens[0], plain[i]) << "prompt " << i;
      EXPECT_GT(spec.stats.auxiliary_tokens, 0) << "the lookahead window must run inside the mixture";
      tau += spec.stats.tokens_per_step() / static_cast<double>(reqs.size());
    }
    EXPECT_GT(tau, 1.5);
    std::vector<AnyDrafter> drafters;
    for (std::size_t i = 0; i < reqs.size(); ++i) drafters.push_back(mixture(cost));
    const auto batch = generate(*model_, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
    for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batch.tokens[i], plain[i]) << "batch sequence " << i;
  }
}

// The history drafter (an n-gram trie over the stories it decoded before) is lossless, and from
// the second story on it drafts from the earlier ones: the stories share their phrasing.
TEST_F(StoriesTest, HistoryDrafterIsLosslessAndDraftsFromEarlierOutputs) {
  const GenerateOptions opt = limited(120, 16);
  const auto history = std::make_shared<OutputHistory>();
  const std::vector<std::string> prompts = {"Once upon a time", "Tom and", "Lily wanted", "One day"};
  std::int64_t with_history = 0;  // accepted draft tokens after the first story
  std::int64_t without = 0;       // the same n-gram trie over each story alone
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Request req{tokenizer_->encode(prompts[i], true, false), {}};
    const auto plain = run(*model_, req, std::nullopt, opt).tokens[0];
    const auto spec = generate(*model_, req, AnyDrafter(HistoryDrafter(AnyDrafter(NgramTrieDrafter{}), history)), opt);
    EXPECT_EQ(spec.tokens[0], plain) << "prompt " << i;
    EXPECT_EQ(history->size(), i + 1) << "the drafter, dropped with its request, added its output";
    const auto alone = generate(*model_, req, AnyDrafter(NgramTrieDrafter{}), opt);
    EXPECT_EQ(alone.tokens[0], plain) << "prompt " << i;
    if (i > 0) {
      with_history += spec.stats.drafting.accepted_tokens;
      without += alone.stats.drafting.accepted_tokens;
    }
  }
  EXPECT_GT(with_history, without);
}

// Under sampling, speculative decoding is distributed as plain sampling. For each drafter and
// setting, the first three tokens of N runs of plain sampling (seeds 0..N-1) and of speculative
// sampling with other seeds (N..2N-1) must pass a two-sample chi-square test at level 1e-3 (fixed
// seeds: the outcome is deterministic); with the same seeds, the outputs are the same but for
// rare rounding differences between batched and single-token passes.
TEST_F(StoriesTest, SampledOutputIsDistributedAsPlainSampling) {
  constexpr std::size_t kRuns = 2000;
  const auto prompt = tokenizer_->encode("Lily wanted", true, false);
  GenerateOptions greedy = limited(64);
  // The reference is the greedy story, prompt included, so that drafts are often right.
  auto reference = prompt;
  const auto story = run(*model_, Request{prompt, {}}, std::nullopt, greedy).tokens[0];
  reference.insert(reference.end(), story.begin(), story.end());
  GenerateOptions opt = limited(3, 16);
  const std::vector<SamplingOptions> settings = {
      {.temperature = 0.8f}, {.temperature = 1.0f, .top_k = 30, .top_p = 0.95f, .min_p = 0.02f, .repetition_penalty = 1.2f,
                               .presence_penalty = 0.2f, .frequency_penalty = 0.1f}};
  const auto make = [&](int kind) -> AnyDrafter {
    if (kind == 0) return AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8}));
    if (kind == 1) return AnyDrafter(NgramTrieDrafter({.ngram = 6, .max_match = 2, .max_nodes = 16}));
    return AnyDrafter(LookaheadDrafter({.window = 5, .ngram = 4, .guesses = 5}));
  };
  // Joint counts of the first three tokens of the runs seeded first_seed.. first_seed + kRuns - 1.
  const auto sample = [&](const SamplingOptions& setting, std::uint64_t first_seed, int kind,
                          std::vector<std::vector<Token>>& outputs) {
    std::vector<Request> reqs(kRuns, Request{prompt, {reference}});
    std::vector<AnyDrafter> drafters;
    for (std::size_t i = 0; i < kRuns; ++i) {
      reqs[i].sampling = setting;
      reqs[i].sampling->seed = first_seed + i;
      if (kind >= 0) drafters.push_back(make(kind));
    }
    const auto r = generate(*model_, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
    outputs = r.tokens;
    return r.stats;
  };
  for (std::size_t s = 0; s < settings.size(); ++s) {
    std::vector<std::vector<Token>> plain, same_seed, other_seed;
    sample(settings[s], 0, -1, plain);
    for (int kind = 0; kind < 3; ++kind) {
      const auto stats = sample(settings[s], 0, kind, same_seed);
      EXPECT_GT(stats.drafting.accepted_tokens, static_cast<std::int64_t>(kRuns / 10)) << "drafts must be exercised";
      std::size_t identical = 0;
      for (std::size_t i = 0; i < kRuns; ++i) identical += same_seed[i] == plain[i] ? 1 : 0;
      EXPECT_GE(identical, kRuns - kRuns / 200) << "setting " << s << " drafter " << kind;
      sample(settings[s], kRuns, kind, other_seed);
      std::map<std::vector<Token>, std::array<std::int64_t, 2>> cells;
      for (std::size_t i = 0; i < kRuns; ++i) {
        ++cells[plain[i]][0];
        ++cells[other_seed[i]][1];
      }
      std::vector<std::int64_t> a, b;
      for (const auto& [outcome, count] : cells) {
        a.push_back(count[0]);
        b.push_back(count[1]);
      }
      const auto test = refdec_test::chi_square_two_sample(a, b);
      EXPECT_GT(test.p_value, 1e-3) << "setting " << s << " drafter " << kind << " chi2 " << test.statistic << " dof " << test.dof;
      EXPECT_GT(test.dof, 3) << cells.size() << " distinct outcomes";
      std::cout << "setting " << s << " drafter " << kind << ": " << identical << "/" << kRuns << " identical with the same seed, "
                << stats.drafting.accepted_tokens << " draft tokens accepted, chi2 " << test.statistic << " dof " << test.dof
                << " p " << test.p_value << '\n';
    }
  }
}

// The tensor sampling path (every node's draw by tensor ops: the CUDA path) gives exactly the host
// path's output on the CPU, for a batch mixing greedy and sampled requests with every processing
// option, with drafters whose trees are wide and deep.
TEST_F(StoriesTest, TensorSamplingPathEqualsHostPath) {
  GenerateOptions opt = limited(80, 32);
  std::vector<Request> reqs;
  for (const std::string text : {"Once upon a time", "Tom and", "Lily wanted", "One day, a big"})
    reqs.push_back(Request{tokenizer_->encode(text, true, false), {}});
  reqs[0].sampling = SamplingOptions{.temperature = 0.9f, .top_p = 0.95f, .seed = 3};
  reqs[1].sampling = SamplingOptions{.temperature = 1.0f, .top_k = 20, .min_p = 0.05f, .repetition_penalty = 1.2f,
                                     .presence_penalty = 0.3f, .frequency_penalty = 0.2f, .seed = 4};
  reqs[3].sampling = SamplingOptions{.temperature = 0.0f, .repetition_penalty = 1.3f};  // greedy, penalised
  std::vector<std::vector<std::vector<Token>>> outputs;
  for (const SamplingPath path : {SamplingPath::kHost, SamplingPath::kTensor}) {
    opt.sampling_path = path;
    std::vector<AnyDrafter> drafters;
    for (std::size_t i = 0; i < reqs.size(); ++i)
      drafters.push_back(i % 2 == 0 ? AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .spans = 3, .self_reference = true}))
                                    : AnyDrafter(LookaheadDrafter({.window = 5, .ngram = 4, .guesses = 5})));
    const auto r = generate(*model_, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
    EXPECT_GT(r.stats.drafting.accepted_tokens, 0);
    outputs.push_back(r.tokens);
  }
  for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(outputs[1][i], outputs[0][i]) << "request " << i;
}

// Greedy settings of the sampler are greedy decoding; a seeded run is reproducible; bad settings
// are rejected before any work.
TEST_F(StoriesTest, SamplingSettingsGreedyReproducibleAndChecked) {
  GenerateOptions opt = limited(60);
  const Request req{tokenizer_->encode("Tom and", true, false), {}};
  const auto greedy = run(*model_, req, std::nullopt, opt).tokens[0];
  for (const SamplingOptions s : {SamplingOptions{.temperature = 0.0f}, SamplingOptions{.temperature = 1.5f, .top_k = 1}}) {
    opt.sampling = s;
    EXPECT_EQ(run(*model_, req, std::nullopt, opt).tokens[0], greedy);
    EXPECT_EQ(generate(*model_, req, AnyDrafter(LookaheadDrafter{}), opt).tokens[0], greedy);
  }
  opt.sampling = SamplingOptions{.temperature = 1.0f, .seed = 42};
  const auto a = generate(*model_, req, AnyDrafter(NgramTrieDrafter{}), opt).tokens[0];
  EXPECT_EQ(generate(*model_, req, AnyDrafter(NgramTrieDrafter{}), opt).tokens[0], a);
  EXPECT_NE(a, greedy);
  for (const SamplingOptions bad : {SamplingOptions{.temperature = -1.0f}, SamplingOptions{.top_p = 0.0f},
                                    SamplingOptions{.top_p = 1.5f}, SamplingOptions{.min_p = 2.0f}}) {
    opt.sampling = bad;
    EXPECT_THROW(run(*model_, req, std::nullopt, opt), Error);
  }
}

// A batch of three prompts of different lengths decodes exactly as each alone.
TEST_F(StoriesTest, BatchEqualsEachAlone) {
  const GenerateOptions opt = limited(120);
  std::vector<Request> reqs = {{tokenizer_->encode("Once upon a time", true, false), {}},
                               {{1}, {}},
                               {tokenizer_->encode("Lily and Ben went to the park. They saw", true, false), {}}};
  std::vector<std::vector<Token>> alone;
  for (auto& r : reqs) {
    alone.push_back(run(*model_, r, std::nullopt, opt).tokens[0]);
    r.references = {alone.back()};
    r.references[0].erase(r.references[0].begin() + 40, r.references[0].begin() + 45);  // not a perfect copy
  }
  for (const bool speculative : {false, true}) {
    std::vector<AnyDrafter> drafters;
    if (speculative)
      for (std::size_t b = 0; b < reqs.size(); ++b) drafters.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 8}));
    const auto batch = generate(*model_, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
    for (std::size_t b = 0; b < reqs.size(); ++b) EXPECT_EQ(batch.tokens[b], alone[b]) << "sequence " << b << " speculative " << speculative;
    if (speculative) {
      EXPECT_GT(batch.stats.tokens_per_step(), 1.5);
    }
  }
}

LlamaConfig random_config(std::int64_t kv_heads) {
  LlamaConfig c;
  c.dim = 48;
  c.hidden_dim = 64;
  c.n_layers = 3;
  c.n_heads = 6;
  c.n_kv_heads = kv_heads;
  c.vocab_size = 111;
  c.max_seq_len = 256;
  c.tied_embeddings = kv_heads == 6;
  return c;
}

// Three requests with random prompts of 1 + `base` + `growth` * b tokens (b = 0, 1, 2) and their
// plain outputs; when `perturb_every` > 0, each request's reference is its plain output with every
// `perturb_every`-th token (from index `perturb_every` - 2) replaced by a random one.
struct RandomRequests {
  std::vector<Request> requests;
  std::vector<std::vector<Token>> alone;  // [3] plain outputs
};
RandomRequests random_requests(const LlamaModel& model, std::mt19937& rng, const GenerateOptions& opt, int base, int growth,
                               std::size_t perturb_every) {
  RandomRequests out;
  for (int b = 0; b < 3; ++b) {
    Request r;
    r.prompt.push_back(1);
    for (int i = 0; i < base + growth * b; ++i) r.prompt.push_back(static_cast<Token>(rng() % 111));
    out.alone.push_back(run(model, r, std::nullopt, opt).tokens[0]);
    if (perturb_every > 0) {
      r.references = {out.alone.back()};
      for (std::size_t i = perturb_every - 2; i < r.references[0].size(); i += perturb_every)
        r.references[0][i] = static_cast<Token>(rng() % 111);
    }
    out.requests.push_back(r);
  }
  return out;
}

// Each request decoded alone with the drafter `make(b)` gives, and then all of them decoded
// together with one such drafter each give, the plain outputs `alone`. Returns the batch's τ.
template <class Make>
double expect_lossless_alone_and_batched(const LlamaModel& model, const std::vector<Request>& reqs,
                                         const std::vector<std::vector<Token>>& alone, const GenerateOptions& opt,
                                         Make make, const std::string& what) {
  std::vector<AnyDrafter> drafters;
  for (std::size_t b = 0; b < reqs.size(); ++b) {
    EXPECT_EQ(generate(model, reqs[b], make(b), opt).tokens[0], alone[b]) << what << " sequence " << b;
    drafters.push_back(make(b));
  }
  const auto batch = generate(model, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
  for (std::size_t b = 0; b < reqs.size(); ++b) EXPECT_EQ(batch.tokens[b], alone[b]) << what << " batch sequence " << b;
  return batch.stats.tokens_per_step();
}

TEST(Generate, LlmaIsLosslessOnRandomModels) {
  std::mt19937 rng(9);
  for (const std::int64_t kv : {6, 2, 1})
    for (const std::uint64_t seed : {1u, 2u}) {
      const auto model = LlamaModel::random(random_config(kv), seed, at::kFloat);
      GenerateOptions opt = limited(96);
      auto [reqs, alone] = random_requests(model, rng, opt, 3, 5, 9);
      for (auto& r : reqs) r.references.push_back(r.prompt);
      for (auto& r : reqs) {
        const auto spec = run(model, r, LlmaOptions{.min_match = 1, .continuation = 12, .spans = 2, .self_reference = true}, opt);
        EXPECT_EQ(spec.tokens[0], alone[static_cast<std::size_t>(&r - reqs.data())]) << "kv " << kv << " seed " << seed;
      }
      std::vector<AnyDrafter> drafters;
      for (std::size_t b = 0; b < reqs.size(); ++b) drafters.emplace_back(LlmaDrafter({.min_match = 2, .continuation = 6}));
      const auto batch = generate(model, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
      for (std::size_t b = 0; b < reqs.size(); ++b) EXPECT_EQ(batch.tokens[b], alone[b]) << "batch kv " << kv << " seed " << seed;
    }
}

// The n-gram trie and REST drafters on random models (MHA, GQA, MQA), alone and batched with
// different drafters per sequence.
TEST(Generate, NgramTrieAndRestAreLosslessOnRandomModels) {
  std::mt19937 rng(21);
  refdec_test::TempDir dir;
  for (const std::int64_t kv : {6, 2, 1}) {
    const auto model = LlamaModel::random(random_config(kv), 7 + static_cast<std::uint64_t>(kv), at::kFloat);
    GenerateOptions opt = limited(80);
    auto [reqs, alone] = random_requests(model, rng, opt, 2, 4, 7);
    // A datastore of perturbed copies of the outputs and random text.
    std::vector<std::vector<Token>> docs;
    for (const auto& r : reqs) docs.push_back(r.references[0]);
    docs.emplace_back(500);
    for (auto& t : docs.back()) t = static_cast<Token>(rng() % 111);
    const auto path = dir / ("ds" + std::to_string(kv) + ".bin");
    build_datastore(docs, 111, path);
    const auto store = Datastore::open_shared(path);
    for (std::size_t b = 0; b < reqs.size(); ++b) {
      EXPECT_EQ(generate(model, reqs[b], AnyDrafter(NgramTrieDrafter({.ngram = 6, .max_match = 2, .max_nodes = 12})), opt).tokens[0],
                alone[b]) << "n-gram trie kv " << kv << " sequence " << b;
      EXPECT_EQ(generate(model, reqs[b], AnyDrafter(RestDrafter(store, {.max_nodes = 16})), opt).tokens[0], alone[b])
          << "REST kv " << kv << " sequence " << b;
    }
    std::vector<AnyDrafter> drafters;
    drafters.emplace_back(NgramTrieDrafter{});
    drafters.emplace_back(RestDrafter(store));
    drafters.emplace_back(NgramTrieDrafter({.ngram = 4, .max_match = 1, .max_nodes = 5}));
    const auto batch = generate(model, std::span<const Request>(reqs), std::span<AnyDrafter>(drafters), opt);
    for (std::size_t b = 0; b < reqs.size(); ++b) EXPECT_EQ(batch.tokens[b], alone[b]) << "batch kv " << kv << " sequence " << b;
    EXPECT_GT(batch.stats.tokens_per_step(), 1.2);
  }
}

// The lookahead drafter on random models (MHA, GQA, MQA), alone and in a batch of three with
// different windows (and different auxiliary block sizes) per sequence.
TEST(Generate, LookaheadIsLosslessOnRandomModels) {
  std::mt19937 rng(33);
  for (const std::int64_t kv : {6, 2, 1}) {
    const auto model = LlamaModel::random(random_config(kv), 40 + static_cast<std::uint64_t>(kv), at::kFloat);
    GenerateOptions opt = limited(60);
    const auto [reqs, alone] = random_requests(model, rng, opt, 3, 5, 0);
    const std::vector<LookaheadOptions> settings = {{}, {.window = 4, .ngram = 3, .guesses = 4}, {.window = 0, .ngram = 3}};
    expect_lossless_alone_and_batched(
        model, reqs, alone, opt, [&](std::size_t b) { return AnyDrafter(LookaheadDrafter(settings[b])); },
        "kv " + std::to_string(kv));
  }
}

// The mixture (LLMA, n-gram trie and a lookahead window) on random models, alone and batched.
TEST(Generate, MixtureIsLosslessOnRandomModels) {
  std::mt19937 rng(51);
  for (const std::int64_t kv : {6, 2, 1}) {
    const auto model = LlamaModel::random(random_config(kv), 60 + static_cast<std::uint64_t>(kv), at::kFloat);
    GenerateOptions opt = limited(60);
    const auto [reqs, alone] = random_requests(model, rng, opt, 2, 3, 6);
    const auto mixture = [](std::size_t) {
      std::vector<AnyDrafter> sources;
      sources.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 6, .spans = 2}));
      sources.emplace_back(NgramTrieDrafter({.ngram = 6, .max_match = 2, .max_nodes = 12}));
      sources.emplace_back(LookaheadDrafter({.window = 4, .ngram = 3, .guesses = 4}));
      return AnyDrafter(MixtureDrafter(std::move(sources)));
    };
    EXPECT_GT(expect_lossless_alone_and_batched(model, reqs, alone, opt, mixture, "kv " + std::to_string(kv)), 1.2);
  }
}

// A drafter whose auxiliary block is malformed, or larger than it announced, is rejected with a
// clear error; a lookahead window that would reach past the context sits those steps out.
struct BadAuxDrafter {
  int mode = 0;
  void begin(std::span<const Token>, References) {}
  void propose(std::size_t, DraftTree&) {}
  void accept(std::span<const Token>) {}
  void auxiliary(AuxBlock& out) const {
    out.add(5, 1, std::vector<std::int32_t>{0});
    if (mode == 0) out.tokens[0] = 1000;  // outside the vocabulary
    if (mode == 1) out.add(6, 2, std::vector<std::int32_t>{1});  // more than max_auxiliary()
  }
  void observe(std::span<const Token>) {}
  std::size_t max_auxiliary() const { return 1; }
  std::string name() const { return "bad-aux"; }
};

TEST(Generate, AuxiliaryBlocksAreCheckedAndKeptInsideTheContext) {
  const auto model = LlamaModel::random(random_config(2), 8);
  GenerateOptions opt = limited(10);
  const Request req{{1, 5, 6}, {}};
  EXPECT_THROW(generate(model, req, AnyDrafter(BadAuxDrafter{0}), opt), Error);
  EXPECT_THROW(generate(model, req, AnyDrafter(BadAuxDrafter{1}), opt), Error);
  // A context of 24 tokens: the default window (offsets up to 18) fits only in the first steps.
  opt.limits.max_new_tokens = 100;
  opt.driver.max_context = 24;
  const auto plain = run(model, req, std::nullopt, opt);
  const auto spec = generate(model, req, AnyDrafter(LookaheadDrafter{}), opt);
  EXPECT_EQ(spec.tokens[0], plain.tokens[0]);
  EXPECT_EQ(spec.finish[0], FinishReason::kMaxContext);
  EXPECT_LT(spec.stats.auxiliary_tokens, spec.stats.steps * 60);
}

TEST(Generate, BudgetZeroIsPlainDecoding) {
  const auto model = LlamaModel::random(random_config(2), 3);
  Request req{{1, 5, 6}, {{5, 6, 7, 8, 9, 10}}};
  GenerateOptions opt = limited(40);
  const auto plain = run(model, req, std::nullopt, opt);
  opt.limits.budget = 0;
  const auto zero = run(model, req, LlmaOptions{}, opt);
  EXPECT_EQ(zero.tokens[0], plain.tokens[0]);
  EXPECT_EQ(zero.stats.steps, 40);
  EXPECT_EQ(zero.stats.drafting.proposed_tokens, 0);
}

TEST(Generate, StopsOnStopTokenMaxTokensAndContext) {
  const auto model = LlamaModel::random(random_config(2), 4);
  Request req{{1, 7, 8}, {}};
  GenerateOptions opt = limited(30);
  const auto full = run(model, req, std::nullopt, opt);
  ASSERT_EQ(full.tokens[0].size(), 30u);
  EXPECT_EQ(full.finish[0], FinishReason::kMaxNewTokens);
  // Stop at the 10th token's value: output ends just before its first occurrence.
  const Token stop = full.tokens[0][9];
  opt.limits.stop_tokens = {stop};
  const auto stopped = run(model, req, LlmaOptions{.self_reference = true}, opt);
  const auto first = std::find(full.tokens[0].begin(), full.tokens[0].end(), stop) - full.tokens[0].begin();
  EXPECT_EQ(stopped.tokens[0], std::vector<Token>(full.tokens[0].begin(), full.tokens[0].begin() + first));
  EXPECT_EQ(stopped.finish[0], FinishReason::kStopToken);
  opt.limits.stop_tokens.clear();
  opt.driver.max_context = 20;
  const auto ctx = run(model, req, LlmaOptions{.self_reference = true}, opt);
  EXPECT_EQ(ctx.tokens[0], std::vector<Token>(full.tokens[0].begin(), full.tokens[0].begin() + 17));
  EXPECT_EQ(ctx.finish[0], FinishReason::kMaxContext);
  opt.limits.max_new_tokens = 0;
  EXPECT_TRUE(run(model, req, std::nullopt, opt).tokens[0].empty());
}

TEST(Generate, RejectsBadInput) {
  const auto model = LlamaModel::random(random_config(2), 4);
  GenerateOptions opt;
  EXPECT_THROW(run(model, Request{{1, 111}, {}}, std::nullopt, opt), Error);  // outside the vocabulary
  EXPECT_THROW(run(model, Request{{1, -3}, {}}, std::nullopt, opt), Error);
  EXPECT_THROW(run(model, Request{{}, {}}, std::nullopt, opt), Error);        // empty prompt
  EXPECT_THROW(run(model, Request{std::vector<Token>(256, 5), {}}, std::nullopt, opt), Error);  // fills the context
  GenerateOptions neg;
  neg.limits.budget = -1;
  EXPECT_THROW(run(model, Request{{1}, {}}, std::nullopt, neg), Error);
  EXPECT_THROW(LlmaDrafter({.min_match = 0}), Error);
  EXPECT_THROW(LlmaDrafter({.continuation = 0}), Error);
  std::vector<Request> two(2, Request{{1}, {}});
  std::vector<AnyDrafter> one(1);
  EXPECT_THROW(generate(model, std::span<const Request>(two), std::span<AnyDrafter>(one), opt), Error);
}

}  // namespace
