// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode loop for a fixed set of requests: a thin loop over a Session until each stops.

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/model.hpp"
#include "refdec/torch/session.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Tokens and statistics of a generate() call.
struct GenerateResult {
  std::vector<std::vector<Token>> tokens;  ///< [batch] generated tokens (prompt and stop token excluded)
  std::vector<FinishReason> finish;        ///< [batch]
  GenerateStats stats;
};

/// Decodes every request to the end in one Session over a contiguous KV store: all requests join
/// at once and leave as they finish. `drafters` holds one drafter per request (borrowed: their
/// statistics and learned state stay with the caller), or is empty for plain decoding. Whatever
/// the drafters propose, the output equals plain greedy decoding, and under sampling it is
/// distributed as plain sampling (the same tokens for the same seed, up to rounding differences
/// between batched and single-token forward passes).
template <CausalLM<ContiguousKvStore> M>
GenerateResult generate(const M& model, std::span<const Request> requests, std::span<AnyDrafter> drafters, const GenerateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const auto B = requests.size();
  REFDEC_CHECK(B > 0, "generate: no requests");
  REFDEC_CHECK(drafters.empty() || drafters.size() == B, "generate: " << drafters.size() << " drafters for " << B << " requests");
  const std::int64_t max_context = model_driver_options(model, options.driver, "generate").max_context;
  std::vector<AnyDrafter> plain(drafters.empty() ? B : 0);
  if (drafters.empty()) drafters = plain;
  std::size_t max_aux = 0;
  for (const auto& d : drafters) max_aux = std::max(max_aux, d.max_auxiliary());
  // Room for the context and one step's auxiliary tokens past it (the tree itself never passes
  // the context: the session cuts drafts to the room left).
  Session session(model, ContiguousKvStore(model.kv_layout(), max_context + static_cast<std::int64_t>(max_aux)), options);
  std::vector<RequestId> ids;
  for (std::size_t b = 0; b < B; ++b) {
    try {
      ids.push_back(session.add(requests[b], &drafters[b]));
    } catch (const Error& e) {
      detail::rethrow_in_context(e, "generate: request " + std::to_string(b));
    }
  }
  GenerateResult result;
  result.tokens.resize(B);
  result.finish.assign(B, FinishReason::kMaxNewTokens);
  while (!session.idle())
    for (const RequestUpdate& u : session.step()) {
      const auto b = static_cast<std::size_t>(std::find(ids.begin(), ids.end(), u.id) - ids.begin());
      result.tokens[b].insert(result.tokens[b].end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) result.finish[b] = *u.finished;
    }
  result.stats = session.stats();
  result.stats.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

/// Single-sequence convenience form of generate().
template <CausalLM<ContiguousKvStore> M>
GenerateResult generate(const M& model, const Request& request, AnyDrafter drafter, const GenerateOptions& options) {
  return generate(model, std::span<const Request>(&request, 1), std::span<AnyDrafter>(&drafter, 1), options);
}

REFDEC_TORCH_NAMESPACE_END
