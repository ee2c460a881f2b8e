// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Loads llama2.c checkpoints (legacy "v0" format, e.g. stories260K.bin).

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/io/llama2c_checkpoint.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/llama.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Reads a llama2.c v0 checkpoint (io/llama2c_checkpoint.hpp: its header, then fp32 weights),
/// converted to `dtype` on `device`; `kernel` picks the linear layers' kernel and `choice` (LinearChoice::parse() of an earlier
/// load's linear_choice().describe()) skips its measurement (LlamaModel's constructor). The model uses interleaved rotary pairs, theta
/// 10000, RMSNorm eps 1e-5, BOS 1, EOS 2. Throws refdec::IoError for a missing, truncated or oversized file or an impossible header.
inline LlamaModel load_llama2c(const std::filesystem::path& path, at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU,
                               LinearKernel kernel = LinearKernel::kAuto, std::optional<LinearChoice> choice = std::nullopt) {
  InputFile file = open_input_file(path, "llama2.c checkpoint");  // regular files only, never blocks
  const Llama2cCheckpoint ck = read_llama2c_header(file.fd.get(), static_cast<std::int64_t>(file.size), path);
  LlamaConfig c;
  c.dim = ck.dim;
  c.hidden_dim = ck.hidden_dim;
  c.n_layers = ck.n_layers;
  c.n_heads = ck.n_heads;
  c.n_kv_heads = ck.n_kv_heads;
  c.vocab_size = ck.vocab_size;
  c.max_seq_len = ck.max_seq_len;
  c.tied_embeddings = ck.tied_embeddings;
  c.rope_style = RopeStyle::kInterleaved;
  const std::int64_t floats = ck.total_floats();
  auto all = at::empty({floats}, at::kFloat);
  REFDEC_CHECK_IO(read_fully(file.fd.get(), all.data_ptr<float>(), static_cast<std::size_t>(floats) * 4, path, "llama2.c checkpoint") ==
                      static_cast<std::size_t>(floats) * 4,
                  "failed to read the weights of " << path << " (the file shrank while loading?)");
  using P = Llama2cCheckpoint;
  auto part = [&](P::Part p, std::vector<std::int64_t> shape) { return all.narrow(0, ck.offset(p), ck.floats[p]).view(shape); };
  const std::int64_t d = c.dim, L = c.n_layers, kvd = ck.kv_dim();
  const auto emb = part(P::kEmbedding, {c.vocab_size, d});
  const auto attn_norm = part(P::kAttentionNorms, {L, d});
  const auto wq = part(P::kWq, {L, d, d});
  const auto wk = part(P::kWk, {L, kvd, d});
  const auto wv = part(P::kWv, {L, kvd, d});
  const auto wo = part(P::kWo, {L, d, d});
  const auto ffn_norm = part(P::kFfnNorms, {L, d});
  const auto w1 = part(P::kW1, {L, c.hidden_dim, d});
  const auto w2 = part(P::kW2, {L, d, c.hidden_dim});
  const auto w3 = part(P::kW3, {L, c.hidden_dim, d});
  const auto final_norm = part(P::kFinalNorm, {d});
  LlamaWeights w;
  auto cv = [&](const at::Tensor& t) { return t.to(device, dtype).contiguous(); };
  w.embedding = cv(emb);
  for (std::int64_t i = 0; i < L; ++i)
    w.layers.push_back({cv(attn_norm[i]), cv(wq[i]), cv(wk[i]), cv(wv[i]), cv(wo[i]), cv(ffn_norm[i]), cv(w1[i]), cv(w2[i]), cv(w3[i])});
  w.final_norm = cv(final_norm);
  w.output = c.tied_embeddings ? w.embedding : cv(part(P::kClassifier, {c.vocab_size, d}));
  return LlamaModel(c, std::move(w), kernel, std::move(choice));
}

REFDEC_TORCH_NAMESPACE_END
