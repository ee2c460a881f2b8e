// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode loop: prefill, then per step draft -> verify -> accept -> KV commit -> drafters,
// for a batch of sequences until each stops.

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/drafters/drafter.hpp"
#include "refdec/torch/kv_cache.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/verifier.hpp"

REFDEC_NAMESPACE_BEGIN

/// One sequence to decode.
struct Request {
  std::vector<Token> prompt;                    ///< at least one token (e.g. BOS)
  std::vector<std::vector<Token>> references;   ///< given to the drafter's begin()
  std::optional<SamplingOptions> sampling = std::nullopt;  ///< this request's sampling (seed included); overrides GenerateOptions::sampling
};

/// Settings of generate().
struct GenerateOptions {
  std::int64_t max_new_tokens = 256;  ///< tokens to generate at most per sequence
  std::int64_t budget = 16;           ///< draft nodes verified per step; 0 is plain decoding (auxiliary tokens still run)
  std::vector<Token> stop_tokens;     ///< generation stops before any of these (not emitted)
  std::int64_t max_context = 0;       ///< prompt + output at most; 0 means the model's max_seq_len()
  std::optional<SamplingOptions> sampling;  ///< for requests without their own; unset: greedy decoding
  SamplingPath sampling_path = SamplingPath::kAuto;  ///< where sampled steps process the logits (same output)
};

/// Why a sequence stopped.
enum class FinishReason { kStopToken, kMaxNewTokens, kMaxContext };

/// What a generate() call did, summed over its sequences.
struct GenerateStats {
  std::int64_t tokens = 0;         ///< generated tokens
  std::int64_t steps = 0;          ///< verification steps, counted per sequence
  std::int64_t forward_passes = 0; ///< model calls for the whole batch, prefill included
  std::int64_t auxiliary_tokens = 0; ///< auxiliary tokens (e.g. lookahead windows) run, summed over steps
  double prefill_seconds = 0;
  double draft_seconds = 0;        ///< propose() and the budget cut
  StepTimes verify;                ///< model, acceptance and KV commit time
  double total_seconds = 0;
  DrafterStats drafting;           ///< all drafters' statistics merged: acceptance by position

  /// Mean tokens per step (τ), the bonus token included; 0 before any step.
  double tokens_per_step() const { return steps > 0 ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0; }
};

/// Tokens and statistics of a generate() call.
struct GenerateResult {
  std::vector<std::vector<Token>> tokens;  ///< [batch] generated tokens (prompt and stop token excluded)
  std::vector<FinishReason> finish;        ///< [batch]
  GenerateStats stats;
};

/// Decodes every request, greedily or by sampling (Request::sampling, else options.sampling), with
/// speculative verification: each step, each sequence's
/// drafter proposes a tree of at most `options.budget` nodes (plus its auxiliary tokens, if it is
/// an AuxiliaryDrafter), one forward pass verifies all trees, and the accepted tokens are appended. `drafters` holds one drafter per request, or is empty
/// for plain decoding. Whatever the drafters propose, the output equals plain greedy decoding, and
/// under sampling it is distributed as plain sampling (sample-then-match; with the same seed it is
/// the same output, up to rounding differences between batched and single-token forward passes).
template <CausalLM M>
GenerateResult generate(const M& model, std::span<const Request> requests, std::span<AnyDrafter> drafters,
                        const GenerateOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto start = Clock::now();
  const auto B = requests.size();
  REFDEC_CHECK(B > 0, "generate: no requests");
  REFDEC_CHECK(drafters.empty() || drafters.size() == B,
               "generate: " << drafters.size() << " drafters for " << B << " requests");
  REFDEC_CHECK(options.budget >= 0, "generate: budget must be >= 0, got " << options.budget);
  REFDEC_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got " << options.max_new_tokens);
  REFDEC_CHECK(options.max_context >= 0, "generate: max_context must be >= 0, got " << options.max_context);
  const std::int64_t max_context = options.max_context > 0 ? options.max_context : model.max_seq_len();
  for (std::size_t b = 0; b < B; ++b) {
    const auto& prompt = requests[b].prompt;
    REFDEC_CHECK(!prompt.empty(), "generate: request " << b << " has an empty prompt (start it with BOS)");
    REFDEC_CHECK(static_cast<std::int64_t>(prompt.size()) < max_context,
                 "generate: request " << b << " has a prompt of " << prompt.size()
                                      << " tokens, which leaves no room in a context of " << max_context);
    for (const Token t : prompt)
      REFDEC_CHECK(t >= 0 && t < model.vocab_size(),
                   "generate: request " << b << " has token id " << t << " outside the vocabulary [0, "
                                        << model.vocab_size() << ")");
  }

  GenerateResult result;
  result.tokens.resize(B);
  result.finish.assign(B, FinishReason::kMaxNewTokens);
  GenerateStats& stats = result.stats;
  std::vector<AnyDrafter> plain;
  if (drafters.empty()) {
    plain.resize(B);
    drafters = plain;
  }
  for (auto& d : drafters) d.reset_stats();

  // Slots: the context, plus room for one step's tree and auxiliary tokens beyond it.
  std::size_t max_aux = 0;
  for (const auto& d : drafters) max_aux = std::max(max_aux, d.max_auxiliary());
  KvCache cache = model.make_cache(static_cast<std::int64_t>(B),
                                   max_context + options.budget + 1 + static_cast<std::int64_t>(max_aux));
  std::vector<LinearTree> trees(B);
  std::vector<AuxBlock> aux(max_aux > 0 ? B : 0);
  std::vector<std::vector<Token>> aux_choices(aux.size());
  std::vector<Acceptance> accepted(B);
  std::vector<std::uint8_t> active(B, options.max_new_tokens > 0 ? 1 : 0);
  std::vector<std::optional<SequenceSampling>> sampling(B);
  for (std::size_t b = 0; b < B; ++b) {
    const auto& settings = requests[b].sampling ? requests[b].sampling : options.sampling;
    if (!settings) continue;
    sampling[b].emplace(SequenceSampling{LogitsProcessor(*settings), TokenCounts(static_cast<std::int32_t>(model.vocab_size())), 0, {}});
    sampling[b]->counts.add_prompt(requests[b].prompt);
    const bool tensor_path = options.sampling_path == SamplingPath::kTensor ||
                             (options.sampling_path == SamplingPath::kAuto && model.device().is_cuda());
    if (tensor_path && settings->has_penalties())
      sampling[b]->device_counts = DeviceTokenCounts::from(sampling[b]->counts, model.device());
  }

  // Prefill all prompt tokens but the last, which becomes the root of the first step.
  const auto t_prefill = Clock::now();
  std::int64_t longest = 0;
  std::vector<std::vector<std::int32_t>> kept(B);
  for (std::size_t b = 0; b < B; ++b) {
    const auto& prompt = requests[b].prompt;
    trees[b] = LinearTree::chain(std::span<const Token>(prompt).first(prompt.size() - 1));
    for (std::int32_t i = 0; i < trees[b].size(); ++i) kept[b].push_back(i);
    longest = std::max<std::int64_t>(longest, trees[b].size());
  }
  if (longest > 0) {
    const StepInputs in = build_step_inputs(trees, cache.lengths());
    model.forward(in.ids, in.positions, in.mask, cache);
    cache.commit(kept);
    ++stats.forward_passes;
  }
  for (std::size_t b = 0; b < B; ++b) drafters[b].begin(requests[b].prompt, requests[b].references);
  stats.prefill_seconds = seconds(t_prefill, Clock::now());

  DraftTree draft;
  auto is_stop = [&](Token t) {
    return std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t) != options.stop_tokens.end();
  };
  while (std::any_of(active.begin(), active.end(), [](std::uint8_t a) { return a != 0; })) {
    const auto t_draft = Clock::now();
    for (std::size_t b = 0; b < B; ++b) {
      if (!active[b]) {  // a finished row rides along as padding; its cache no longer matters
        trees[b].reset(0);
        if (max_aux > 0) aux[b].clear();
        cache.reset(static_cast<std::int64_t>(b));
        continue;
      }
      const auto& out = result.tokens[b];
      const Token root = out.empty() ? requests[b].prompt.back() : out.back();
      // Tokens this sequence may still append; drafts beyond that are wasted work.
      const std::int64_t room = std::min(options.max_new_tokens - static_cast<std::int64_t>(out.size()),
                                         max_context - static_cast<std::int64_t>(requests[b].prompt.size() + out.size()));
      const auto budget = static_cast<std::size_t>(std::clamp<std::int64_t>(room - 1, 0, options.budget));
      draft.clear();
      drafters[b].propose(budget, draft);
      draft.linearize(root, budget, trees[b]);
      drafters[b].record_proposal(trees[b]);
      if (max_aux > 0) {
        aux[b].clear();
        drafters[b].auxiliary(aux[b]);
        REFDEC_CHECK(static_cast<std::size_t>(aux[b].size()) <= drafters[b].max_auxiliary(),
                     "generate: drafter '" << drafters[b].name() << "' added " << aux[b].size()
                                           << " auxiliary tokens, more than its max_auxiliary() "
                                           << drafters[b].max_auxiliary());
        aux[b].validate(model.vocab_size());
        // Auxiliary positions past the context are beyond what the model is run for: a block that
        // reaches there sits this step out (its drafter observes no choices).
        const auto root_position = static_cast<std::int64_t>(requests[b].prompt.size() + out.size()) - 1;
        if (!aux[b].empty() && root_position + *std::max_element(aux[b].offset.begin(), aux[b].offset.end()) >= max_context)
          aux[b].clear();
        stats.auxiliary_tokens += aux[b].size();
      }
    }
    stats.draft_seconds += seconds(t_draft, Clock::now());

    verify(model, cache, std::span<const LinearTree>(trees), std::span<Acceptance>(accepted), stats.verify,
           StepExtras{.active = active, .aux = aux, .aux_choices = aux_choices, .sampling = sampling,
                      .sampling_path = options.sampling_path});
    ++stats.forward_passes;

    const auto t_accept = Clock::now();
    for (std::size_t b = 0; b < B; ++b) {
      if (!active[b]) continue;
      if (max_aux > 0) drafters[b].observe(aux_choices[b]);
      ++stats.steps;
      auto& out = result.tokens[b];
      std::size_t n = 0;
      for (const Token t : accepted[b].tokens) {
        if (is_stop(t)) {
          result.finish[b] = FinishReason::kStopToken;
          active[b] = 0;
          break;
        }
        out.push_back(t);
        ++n;
        if (static_cast<std::int64_t>(out.size()) >= options.max_new_tokens) {
          result.finish[b] = FinishReason::kMaxNewTokens;
          active[b] = 0;
          break;
        }
        if (static_cast<std::int64_t>(requests[b].prompt.size() + out.size()) >= max_context) {
          result.finish[b] = FinishReason::kMaxContext;
          active[b] = 0;
          break;
        }
      }
      stats.tokens += static_cast<std::int64_t>(n);
      if (n == 0) continue;
      const auto appended = std::span<const Token>(out).last(n);
      if (sampling[b]) sampling[b]->add_output(appended);
      drafters[b].accept(appended);
    }
    stats.verify.accept += seconds(t_accept, Clock::now());
  }
  for (const auto& d : drafters) stats.drafting.merge(d.stats());
  stats.total_seconds = seconds(start, Clock::now());
  return result;
}

/// Single-sequence convenience form of generate().
template <CausalLM M>
GenerateResult generate(const M& model, const Request& request, AnyDrafter drafter, const GenerateOptions& options) {
  return generate(model, std::span<const Request>(&request, 1), std::span<AnyDrafter>(&drafter, 1), options);
}

REFDEC_NAMESPACE_END
