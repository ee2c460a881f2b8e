// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The model shapes the speed benchmarks run (random weights, real shapes).

#include <string>

#include "refdec/torch/llama.hpp"

namespace refdec_bench {

/// `tiny` (stories260K's shape), `1b` (TinyLlama-1.1B) or `7b` (Llama-2-7B); throws refdec::Error
/// for any other name.
inline refdec::LlamaConfig shape(const std::string& name) {
  using refdec::RopeStyle;
  refdec::LlamaConfig c;
  if (name == "7b") {  // Llama-2-7B
    c.dim = 4096, c.hidden_dim = 11008, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 32, c.vocab_size = 32000;
    c.max_seq_len = 4096, c.tied_embeddings = false, c.rope_style = RopeStyle::kHalf;
  } else if (name == "1b") {  // TinyLlama-1.1B
    c.dim = 2048, c.hidden_dim = 5632, c.n_layers = 22, c.n_heads = 32, c.n_kv_heads = 4, c.vocab_size = 32000;
    c.max_seq_len = 4096, c.tied_embeddings = false, c.rope_style = RopeStyle::kHalf;
  } else if (name == "tiny") {  // stories260K's shape
    c.dim = 64, c.hidden_dim = 172, c.n_layers = 5, c.n_heads = 8, c.n_kv_heads = 4, c.vocab_size = 512;
    c.max_seq_len = 4096;
  } else {
    throw refdec::Error("unknown --shape '" + name + "' (tiny, 1b, 7b)");
  }
  return c;
}

}  // namespace refdec_bench
