// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What the verifier needs from a model.

#include <ATen/ATen.h>

#include <concepts>
#include <cstdint>

#include "refdec/core/config.hpp"
#include "refdec/torch/kv_cache.hpp"

REFDEC_NAMESPACE_BEGIN

/// A causal language model that the verifier can drive:
/// - `forward(ids [B, T] int64, positions [B, T] int64, mask [B, T, S] bool, cache)` stores the T
///   new tokens of sequence b at cache slots lengths[b] + t, lets new token t attend to the slots
///   where mask[b, t] is true, and returns logits [B, T, vocab];
/// - `make_cache(batch, capacity)` allocates a matching KvCache;
/// - `vocab_size()`, `max_seq_len()` (the default context), `device()`.
template <class M>
concept CausalLM = requires(const M& m, const at::Tensor& t, KvCache& cache, std::int64_t n) {
  { m.forward(t, t, t, cache) } -> std::same_as<at::Tensor>;
  { m.make_cache(n, n) } -> std::same_as<KvCache>;
  { m.vocab_size() } -> std::convertible_to<std::int64_t>;
  { m.max_seq_len() } -> std::convertible_to<std::int64_t>;
  { m.device() } -> std::convertible_to<at::Device>;
};

REFDEC_NAMESPACE_END
