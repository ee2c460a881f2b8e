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
#include <numeric>
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
  int repeats = 5;  ///< timed runs per size (the median is kept), in rounds from the largest size to the smallest after one untimed round,
                    ///< each after an untimed run of its size
  /// Seconds since any fixed origin, read before and after each timed run; empty: the steady
  /// clock. Tests inject one, so that no assertion depends on how fast the machine is.
  std::function<double()> clock = {};
};

/// Median wall time of one forward pass per step size, as (tokens, seconds) samples for
/// StepCost::calibrated(). Each step is a chain of `tokens` tokens after `context` cached ones,
/// verified as a session verifies (plan_step, verify) but never committed, so every run sees the
/// same state. On CUDA the time includes a synchronisation, as a real step ends with a copy of its
/// result to the host.
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
  for (std::size_t size = 0; size < chains.size(); ++size) run(size);  // warm-up, untimed
  // Rounds over every size rather than each size's runs in a row: a machine whose speed drifts
  // during calibration (a shared VM's memory bandwidth moves by tens of percent within minutes)
  // then slows every size alike instead of bending the curve. Each round goes from the largest
  // step to the smallest: timed right after the previous round's largest step, one token measured
  // 4-16% dearer than two on two models, even after an untimed one-token step in between (and
  // the cheapest of all where only small steps ran), which told the adaptive budget that small
  // drafts were free.
  std::vector<std::size_t> order(chains.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return options.tokens[a] > options.tokens[b]; });
  std::vector<std::vector<double>> runs(chains.size());
  for (int r = 0; r < options.repeats; ++r)
    for (const std::size_t size : order) {
      // Each timed step follows an untimed one of its size, as in a decoding loop whose budget
      // holds steady.
      run(size);
      const double t0 = now();
      run(size);
      runs[size].push_back(now() - t0);
    }
  std::vector<std::pair<std::size_t, double>> samples;
  for (std::size_t size = 0; size < chains.size(); ++size) {
    auto& t = runs[size];
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    samples.emplace_back(options.tokens[size], t[t.size() / 2]);
  }
  return samples;
}

/// measure_step_cost() in a ContiguousKvStore.
template <CausalLM<ContiguousKvStore> M>
std::vector<std::pair<std::size_t, double>> measure_step_cost(const M& model, const CalibrationOptions& options = {}) {
  return measure_step_cost(model, options,
                           [&](std::int64_t capacity, std::int64_t) { return ContiguousKvStore(model.kv_layout(), capacity); });
}

REFDEC_TORCH_NAMESPACE_END
