// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Start-up calibration of the step cost model: time the model's forward pass for steps of
// several token counts, so that the adaptive budget (core/step_cost.hpp) weighs longer drafts
// against their real cost on this model and device.

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/verifier.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Settings of measure_step_cost().
struct CalibrationOptions {
  std::vector<std::size_t> tokens = {1, 2, 4, 8, 16, 32, 64, 96, 128};  ///< step sizes to time
  std::int64_t batch = 1;                                               ///< sequences per step
  std::int64_t context = 256;                                           ///< cached tokens per sequence before the step
  std::int64_t prefill_chunk = 0;  ///< context tokens prefilled per step at most; 0: the whole context in one step
  int repeats = 5;  ///< rounds over every size after one untimed round; each size's median ratio to the one-token step is kept
  /// Seconds since any fixed origin, read before and after each timed run; empty: the steady
  /// clock. Tests inject one, so that no assertion depends on how fast the machine is.
  std::function<double()> clock = {};
};

/// Wall time of one forward pass per step size, as (tokens, seconds) samples for
/// StepCost::calibrated(). Each step is a chain of `tokens` tokens after `context` cached ones,
/// verified as a session verifies (plan_step, verify) but never committed, so every run sees the
/// same state. On CUDA the time includes a synchronisation, as a real step ends with a copy of its
/// result to the host.
///
/// Each size is timed right after a one-token step, and its sample is the median of its ratios to
/// those steps times the median one-token step: on a machine whose speed moves within seconds (a
/// shared VM's memory switching between two bandwidths), the curve's shape, which is what the
/// adaptive budget weighs drafts by, comes from steps run moments apart.
///
/// `make_store(capacity, rows)` makes the empty store the steps run in (a KvStore `model` runs
/// over) with room for `capacity` entries per sequence and steps of up to `rows` rows per sequence
/// (the prefill of the context included); by default a ContiguousKvStore.
template <class M, class MakeStore>
requires CausalLM<M, std::invoke_result_t<MakeStore, std::int64_t, std::int64_t>> std::vector<std::pair<std::size_t, double>>
measure_step_cost(const M& model, const CalibrationOptions& options, MakeStore make_store) {
  REFDEC_CHECK(!options.tokens.empty(), "calibration: no step sizes to time");
  REFDEC_CHECK(options.batch > 0 && options.context >= 0 && options.repeats > 0,
               "calibration: batch and repeats must be positive and context >= 0, got batch "
                   << options.batch << ", context " << options.context << ", repeats " << options.repeats);
  const std::size_t largest = *std::max_element(options.tokens.begin(), options.tokens.end());
  REFDEC_CHECK(std::all_of(options.tokens.begin(), options.tokens.end(), [](std::size_t n) { return n > 0; }),
               "calibration: step sizes must be positive");
  REFDEC_CHECK(options.prefill_chunk >= 0, "calibration: prefill_chunk must be >= 0, got " << options.prefill_chunk);
  const std::int64_t chunk = options.prefill_chunk > 0 ? std::min(options.prefill_chunk, options.context) : options.context;
  auto store = make_store(options.context + static_cast<std::int64_t>(largest) + 1,
                          std::max<std::int64_t>(chunk, static_cast<std::int64_t>(largest)));
  const auto B = static_cast<std::size_t>(options.batch);
  for (std::size_t b = 0; b < B; ++b) store.add();
  // Token ids are arbitrary: the cost of a step does not depend on them.
  const auto token = [&](std::size_t i) { return static_cast<Token>((i * 7919) % static_cast<std::size_t>(model.vocab_size())); };
  StepPlan plan;
  Verification verification;
  StepTimes times;
  for (std::int64_t first = 0; first < options.context; first += chunk) {  // the cached prefix: prefill steps, committed
    std::vector<Token> prefix(static_cast<std::size_t>(std::min(chunk, options.context - first)));
    for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = token(static_cast<std::size_t>(first) + i);
    const std::vector<LinearTree> chains(B, LinearTree::chain(prefix));
    const std::vector<std::uint8_t> prefill(B, 1);
    plan_step(chains, {}, store.lengths(), model.vocab_size(), plan);
    verify(model, store, plan, verification, times, StepExtras{.prefill = prefill});
    store.commit(verification.keep);
  }
  const auto now = [&options] {
    if (options.clock) return options.clock();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  std::vector<std::vector<LinearTree>> chains;  // [sizes] the step of each size, per sequence
  for (const std::size_t n : options.tokens) {
    std::vector<Token> step(n);
    for (std::size_t i = 0; i < n; ++i) step[i] = token(i + 1);
    chains.emplace_back(B, LinearTree::chain(step));
  }
  // The verification step a session runs (plan, forward, argmax copied to the host, walk), never
  // committed, so every run sees the same cache.
  const auto run = [&](std::size_t size) {
    plan_step(chains[size], {}, store.lengths(), model.vocab_size(), plan);
    verify(model, store, plan, verification, times);
  };
  // The one-token step every size is paired with (also where 1 is not asked for).
  const auto asked_one = std::find(options.tokens.begin(), options.tokens.end(), std::size_t{1});
  const std::size_t one = asked_one != options.tokens.end() ? static_cast<std::size_t>(asked_one - options.tokens.begin()) : chains.size();
  if (one == chains.size()) chains.emplace_back(B, LinearTree::chain(std::vector<Token>{token(1)}));
  for (std::size_t size = 0; size < chains.size(); ++size) run(size);  // warm-up, untimed
  // Each timed step follows an untimed one of its size, as in a decoding loop whose budget holds
  // steady: a one-token step timed right after a large one measured 4-16% dearer than one after
  // its own kind on two models.
  const auto timed = [&](std::size_t size) {
    run(size);
    const double t0 = now();
    run(size);
    return now() - t0;
  };
  // Rounds over every size from the largest to the smallest, each size right after a one-token
  // step. Sizes timed in turn far apart, as this did before, put a change of speed between them
  // into the curve: on a 2-core EPYC VM whose memory switched mode mid-calibration, four tokens
  // came out 1.19x one token where steps alternated in one process measured 1.07x.
  std::vector<std::size_t> order;
  for (std::size_t size = 0; size < options.tokens.size(); ++size)
    if (size != one) order.push_back(size);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return options.tokens[a] > options.tokens[b]; });
  std::vector<std::vector<double>> ratios(options.tokens.size());
  std::vector<double> ones;
  for (int r = 0; r < options.repeats; ++r) {
    for (const std::size_t size : order) {
      const double t_one = timed(one);
      ones.push_back(t_one);
      ratios[size].push_back(timed(size) / t_one);
    }
    if (order.empty()) ones.push_back(timed(one));
  }
  const auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double one_step = median(ones);
  std::vector<std::pair<std::size_t, double>> samples;
  for (std::size_t size = 0; size < options.tokens.size(); ++size)
    samples.emplace_back(options.tokens[size], size == one ? one_step : median(ratios[size]) * one_step);
  return samples;
}

/// measure_step_cost() in a ContiguousKvStore.
template <CausalLM<ContiguousKvStore> M>
std::vector<std::pair<std::size_t, double>> measure_step_cost(const M& model, const CalibrationOptions& options = {}) {
  return measure_step_cost(model, options,
                           [&](std::int64_t capacity, std::int64_t) { return ContiguousKvStore(model.kv_layout(), capacity); });
}

REFDEC_TORCH_NAMESPACE_END
