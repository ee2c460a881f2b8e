// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What the verifier needs from a model.

#include <ATen/ATen.h>

#include <concepts>
#include <cstdint>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/kv_store.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// A causal language model that the verifier and the Session can drive over the KV store `S`
/// (refdec's ContiguousKvStore or PagedKvStore, or an engine's own KvStore):
/// - `forward(plan, store)` runs the step plan: writes the keys and values of every plan row into
///   the store and returns logits [plan.rows(), vocab] (row i of sequence b attends to the
///   sequence's cached entries and to the step rows plan.sees(b, i, .));
/// - `kv_layout()` says what a store must hold per token;
/// - `vocab_size()`, `max_seq_len()` (the default context), `device()`.
/// An engine's model need not know refdec's stores: `CausalLM<EngineModel, EngineStore>` is all
/// that verify() and Session<EngineModel, EngineStore> ask for.
template <class M, class S>
concept CausalLM = KvStore<S> && requires(const M& m, const StepPlan& plan, S& store) {
  { m.forward(plan, store) } -> std::same_as<at::Tensor>;
  { m.kv_layout() } -> std::convertible_to<KvLayout>;
  { m.vocab_size() } -> std::convertible_to<std::int64_t>;
  { m.max_seq_len() } -> std::convertible_to<std::int64_t>;
  { m.device() } -> std::convertible_to<at::Device>;
};

REFDEC_TORCH_NAMESPACE_END
