// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Loads llama2.c checkpoints (legacy "v0" format, e.g. stories260K.bin).

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/llama.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Reads a llama2.c v0 checkpoint: seven int32 header fields (dim, hidden_dim, n_layers, n_heads,
/// n_kv_heads, vocab_size, seq_len; a negative vocab_size means an untied classifier), then fp32
/// weights, converted to `dtype` on `device`; `kernel` picks the linear layers' kernel. The model uses interleaved rotary pairs, theta
/// 10000, RMSNorm eps 1e-5, BOS 1, EOS 2. Throws refdec::IoError for a missing, truncated or oversized file or an impossible header.
inline LlamaModel load_llama2c(const std::filesystem::path& path, at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU,
                               LinearKernel kernel = LinearKernel::kAuto) {
  InputFile file = open_input_file(path, "llama2.c checkpoint");  // regular files only, never blocks
  const auto file_size = static_cast<std::int64_t>(file.size);
  std::int32_t header[7] = {};
  REFDEC_CHECK_IO(file_size >= static_cast<std::int64_t>(sizeof(header)) &&
                      read_fully(file.fd.get(), header, sizeof(header), path, "llama2.c checkpoint") == sizeof(header),
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
    REFDEC_CHECK_IO(false, "llama2.c checkpoint " << path << " has an invalid header: " << detail::message_of(e));
  }
  // Sizes in floats, in file order. The header holds arbitrary int32 values, so every product and
  // sum is checked: an impossible header is an error, never a wrapped size.
  bool overflow = false;
  auto mul = [&](std::initializer_list<std::int64_t> factors) {
    std::int64_t p = 1;
    for (const auto f : factors) overflow |= __builtin_mul_overflow(p, f, &p);
    return overflow ? std::int64_t{0} : p;
  };
  const std::int64_t d = c.dim, hd = c.head_dim(), L = c.n_layers, kvd = mul({c.n_kv_heads, hd});
  const std::vector<std::int64_t> sizes = {
      mul({c.vocab_size, d}),                          // token embedding
      mul({L, d}),                                     // attention rms
      mul({L, d, d}),                                  // wq
      mul({L, d, kvd}),                                // wk
      mul({L, d, kvd}),                                // wv
      mul({L, d, d}),                                  // wo
      mul({L, d}),                                     // ffn rms
      mul({L, d, c.hidden_dim}),                       // w1
      mul({L, c.hidden_dim, d}),                       // w2
      mul({L, d, c.hidden_dim}),                       // w3
      d,                                               // final rms
      mul({c.max_seq_len, hd / 2}),                    // freq_cis_real (unused: rotary is recomputed)
      mul({c.max_seq_len, hd / 2}),                    // freq_cis_imag
      c.tied_embeddings ? 0 : mul({c.vocab_size, d}),  // classifier
  };
  std::int64_t floats = 0;
  for (const auto s : sizes) overflow |= __builtin_add_overflow(floats, s, &floats);
  std::int64_t expected = 0;
  overflow |= __builtin_mul_overflow(floats, std::int64_t{4}, &expected) ||
              __builtin_add_overflow(expected, static_cast<std::int64_t>(sizeof(header)), &expected);
  REFDEC_CHECK_IO(!overflow, "llama2.c checkpoint " << path << " has an impossible header (dim " << d << ", hidden_dim " << c.hidden_dim
                                                    << ", " << L << " layers, vocab " << c.vocab_size << ", seq_len " << c.max_seq_len
                                                    << "): its weights would exceed 2^63 bytes");
  REFDEC_CHECK_IO(file_size == expected, "llama2.c checkpoint " << path << " has " << file_size << " bytes; its header (dim " << d << ", "
                                                                << L << " layers, vocab " << c.vocab_size << ") implies " << expected
                                                                << (file_size < expected ? " (truncated?)" : " (not a v0 checkpoint?)"));
  auto all = at::empty({floats}, at::kFloat);
  REFDEC_CHECK_IO(read_fully(file.fd.get(), all.data_ptr<float>(), static_cast<std::size_t>(floats) * 4, path, "llama2.c checkpoint") ==
                      static_cast<std::size_t>(floats) * 4,
                  "failed to read the weights of " << path << " (the file shrank while loading?)");
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
    w.layers.push_back({cv(attn_norm[i]), cv(wq[i]), cv(wk[i]), cv(wv[i]), cv(wo[i]), cv(ffn_norm[i]), cv(w1[i]), cv(w2[i]), cv(w3[i])});
  w.final_norm = cv(final_norm);
  w.output = c.tied_embeddings ? w.embedding : cv(next({c.vocab_size, d}));
  return LlamaModel(c, std::move(w), kernel);
}

REFDEC_TORCH_NAMESPACE_END
