// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Loads llama2.c checkpoints (legacy "v0" format, e.g. stories260K.bin).

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/torch/llama.hpp"

REFDEC_NAMESPACE_BEGIN

/// Reads a llama2.c v0 checkpoint: seven int32 header fields (dim, hidden_dim, n_layers, n_heads,
/// n_kv_heads, vocab_size, seq_len; a negative vocab_size means an untied classifier), then fp32
/// weights. The model uses interleaved rotary pairs, theta 10000, RMSNorm eps 1e-5, BOS 1, EOS 2.
/// Throws refdec::IoError for a missing, truncated or oversized file or an impossible header.
inline LlamaModel load_llama2c(const std::filesystem::path& path, at::ScalarType dtype = at::kFloat,
                               at::Device device = at::kCPU) {
  std::ifstream in(path, std::ios::binary);
  REFDEC_CHECK_IO(in.good(), "cannot open llama2.c checkpoint " << path);
  const auto file_size = static_cast<std::int64_t>(std::filesystem::file_size(path));
  std::int32_t header[7] = {};
  REFDEC_CHECK_IO(file_size >= static_cast<std::int64_t>(sizeof(header)) &&
                      in.read(reinterpret_cast<char*>(header), sizeof(header)),
                  "llama2.c checkpoint " << path << " is too short for its header (" << file_size << " bytes)");
  LlamaConfig c;
  c.dim = header[0];
  c.hidden_dim = header[1];
  c.n_layers = header[2];
  c.n_heads = header[3];
  c.n_kv_heads = header[4];
  c.tied_embeddings = header[5] > 0;
  c.vocab_size = header[5] < 0 ? -static_cast<std::int64_t>(header[5]) : header[5];
  c.max_seq_len = header[6];
  c.rope_style = RopeStyle::kInterleaved;
  try {
    c.validate();
  } catch (const Error& e) {
    REFDEC_CHECK_IO(false, "llama2.c checkpoint " << path << " has an invalid header: " << e.what());
  }
  const std::int64_t d = c.dim, hd = c.head_dim(), L = c.n_layers, kvd = c.n_kv_heads * hd;
  // Sizes in floats, in file order.
  const std::vector<std::int64_t> sizes = {
      c.vocab_size * d,  // token embedding
      L * d,             // attention rms
      L * d * d,         // wq
      L * d * kvd,       // wk
      L * d * kvd,       // wv
      L * d * d,         // wo
      L * d,             // ffn rms
      L * d * c.hidden_dim,  // w1
      L * c.hidden_dim * d,  // w2
      L * d * c.hidden_dim,  // w3
      d,                     // final rms
      c.max_seq_len * hd / 2,  // freq_cis_real (unused: rotary is recomputed)
      c.max_seq_len * hd / 2,  // freq_cis_imag
      c.tied_embeddings ? 0 : c.vocab_size * d,  // classifier
  };
  std::int64_t floats = 0;
  for (const auto s : sizes) floats += s;
  const std::int64_t expected = static_cast<std::int64_t>(sizeof(header)) + floats * 4;
  REFDEC_CHECK_IO(file_size == expected, "llama2.c checkpoint " << path << " has " << file_size
                                             << " bytes; its header (dim " << d << ", " << L << " layers, vocab "
                                             << c.vocab_size << ") implies " << expected
                                             << (file_size < expected ? " (truncated?)" : " (not a v0 checkpoint?)"));
  auto all = at::empty({floats}, at::kFloat);
  REFDEC_CHECK_IO(in.read(reinterpret_cast<char*>(all.data_ptr<float>()), floats * 4),
                  "failed to read the weights of " << path);
  std::int64_t off = 0;
  std::size_t part = 0;
  auto next = [&](std::vector<std::int64_t> shape) {  // the next block of the file, as `shape`
    auto t = all.narrow(0, off, sizes[part]).view(shape);
    off += sizes[part++];
    return t;
  };
  const auto emb = next({c.vocab_size, d});
  const auto attn_norm = next({L, d});
  const auto wq = next({L, d, d});
  const auto wk = next({L, kvd, d});
  const auto wv = next({L, kvd, d});
  const auto wo = next({L, d, d});
  const auto ffn_norm = next({L, d});
  const auto w1 = next({L, c.hidden_dim, d});
  const auto w2 = next({L, d, c.hidden_dim});
  const auto w3 = next({L, c.hidden_dim, d});
  const auto final_norm = next({d});
  next({c.max_seq_len, hd / 2});
  next({c.max_seq_len, hd / 2});
  LlamaWeights w;
  auto cv = [&](const at::Tensor& t) { return t.to(device, dtype).contiguous(); };
  w.embedding = cv(emb);
  for (std::int64_t i = 0; i < L; ++i)
    w.layers.push_back({cv(attn_norm[i]), cv(wq[i]), cv(wk[i]), cv(wv[i]), cv(wo[i]), cv(ffn_norm[i]), cv(w1[i]),
                        cv(w2[i]), cv(w3[i])});
  w.final_norm = cv(final_norm);
  w.output = c.tied_embeddings ? w.embedding : cv(next({c.vocab_size, d}));
  return LlamaModel(c, std::move(w));
}

REFDEC_NAMESPACE_END
