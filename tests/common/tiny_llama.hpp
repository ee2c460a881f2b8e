// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The shape of the small random Llama models the torch tests run.

#include <cstdint>

#include "refdec/torch/llama.hpp"

namespace refdec_test {

/// Width 32, SwiGLU 48, 2 layers, 4 query heads over `kv_heads` kv heads (4: MHA, 2: GQA, 1: MQA).
inline refdec::LlamaConfig tiny_llama_config(std::int64_t kv_heads = 2, std::int64_t vocab_size = 111,
                                             std::int64_t max_seq_len = 128) {
  refdec::LlamaConfig c;
  c.dim = 32;
  c.hidden_dim = 48;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = kv_heads;
  c.vocab_size = vocab_size;
  c.max_seq_len = max_seq_len;
  return c;
}

/// tiny_llama_config() with multi-head (kind 0), grouped-query (1) or multi-query (2) attention.
inline refdec::LlamaConfig attention_kind_config(int kind) { return tiny_llama_config(kind == 0 ? 4 : kind == 1 ? 2 : 1); }

}  // namespace refdec_test
