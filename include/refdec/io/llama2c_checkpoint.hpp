// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The header of a llama2.c checkpoint (the legacy "v0" format of stories260K.bin) and where each
// weight lies after it: what every reader of these files shares (torch/llama2c_loader.hpp, the
// example engine without libtorch). Plain C++20, no libtorch.

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"

REFDEC_NAMESPACE_BEGIN

/// A llama2.c v0 checkpoint: seven int32 header fields (dim, hidden_dim, n_layers, n_heads,
/// n_kv_heads, vocab_size, seq_len; a negative vocab_size means an untied classifier), then the
/// fp32 weights, each part below in turn.
struct Llama2cCheckpoint {
  /// The weights in file order. The projections are [layers, out, in] (wq [L, dim, dim], wk and
  /// wv [L, kv_dim, dim], wo [L, dim, dim], w1 and w3 [L, hidden, dim], w2 [L, dim, hidden]);
  /// the rotary tables ([seq_len, head_dim / 2] each) are recomputed by every reader; the
  /// classifier ([vocab, dim]) is present only when untied.
  enum Part : std::size_t {
    kEmbedding,
    kAttentionNorms,
    kWq,
    kWk,
    kWv,
    kWo,
    kFfnNorms,
    kW1,
    kW2,
    kW3,
    kFinalNorm,
    kRopeCos,
    kRopeSin,
    kClassifier,
    kParts,
  };
  static constexpr std::int64_t kHeaderBytes = 28;

  std::int64_t dim = 0;
  std::int64_t hidden_dim = 0;
  std::int64_t n_layers = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t vocab_size = 0;  ///< the header's absolute value
  std::int64_t max_seq_len = 0;
  bool tied_embeddings = true;                ///< the classifier is the token embedding (a positive vocab_size)
  std::array<std::int64_t, kParts> floats{};  ///< fp32 values of each part

  std::int64_t head_dim() const { return dim / n_heads; }
  std::int64_t kv_dim() const { return n_kv_heads * head_dim(); }
  /// The fp32 values after the header (checked not to overflow by read_llama2c_header()).
  std::int64_t total_floats() const {
    std::int64_t n = 0;
    for (const std::int64_t f : floats) n += f;
    return n;
  }
  /// Where `part` starts, in fp32 values after the header.
  std::int64_t offset(Part part) const {
    std::int64_t n = 0;
    for (std::size_t p = 0; p < part; ++p) n += floats[p];
    return n;
  }
};

/// Reads the header at the start of `fd` (an open regular file of `file_size` bytes, read from
/// offset 0; `path` names it in errors) and leaves `fd` at the first weight. Throws
/// refdec::IoError for a file too short for its header, a header that describes no model (a size
/// not positive, n_heads not dividing dim, n_kv_heads not dividing n_heads, an odd head size),
/// one whose weights would exceed 2^63 bytes ("an impossible header"), or a file whose size is
/// not the one the header implies. The header is untrusted: every product and sum is checked.
inline Llama2cCheckpoint read_llama2c_header(int fd, std::int64_t file_size, const std::filesystem::path& path) {
  std::int32_t header[7] = {};
  REFDEC_CHECK_IO(
      file_size >= Llama2cCheckpoint::kHeaderBytes && read_fully(fd, header, sizeof(header), path, "llama2.c checkpoint") == sizeof(header),
      "llama2.c checkpoint " << path << " is too short for its header (" << file_size << " bytes)");
  Llama2cCheckpoint c;
  c.dim = header[0];
  c.hidden_dim = header[1];
  c.n_layers = header[2];
  c.n_heads = header[3];
  c.n_kv_heads = header[4];
  c.tied_embeddings = header[5] > 0;
  c.vocab_size = header[5] < 0 ? -static_cast<std::int64_t>(header[5]) : header[5];
  c.max_seq_len = header[6];
  const char* problem = nullptr;
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.vocab_size <= 0 || c.max_seq_len <= 0)
    problem = "every size must be positive (vocab_size may be negative, not zero)";
  else if (c.dim % c.n_heads != 0)
    problem = "n_heads does not divide dim";
  else if (c.n_heads % c.n_kv_heads != 0)
    problem = "n_kv_heads does not divide n_heads";
  else if (c.head_dim() % 2 != 0)
    problem = "the head size is odd, so it has no rotary pairs";
  REFDEC_CHECK_IO(problem == nullptr, "llama2.c checkpoint " << path << " has an invalid header (dim " << header[0] << ", hidden_dim "
                                                             << header[1] << ", n_layers " << header[2] << ", n_heads " << header[3]
                                                             << ", n_kv_heads " << header[4] << ", vocab_size " << header[5] << ", seq_len "
                                                             << header[6] << "): " << problem);
  bool overflow = false;
  const auto mul = [&](std::int64_t a, std::int64_t b, std::int64_t e = 1) {
    std::int64_t p = 0;
    overflow |= __builtin_mul_overflow(a, b, &p) || __builtin_mul_overflow(p, e, &p);
    return overflow ? std::int64_t{0} : p;
  };
  const std::int64_t d = c.dim, h = c.hidden_dim, L = c.n_layers, kv = c.kv_dim();
  using P = Llama2cCheckpoint;
  c.floats[P::kEmbedding] = mul(c.vocab_size, d);
  c.floats[P::kAttentionNorms] = c.floats[P::kFfnNorms] = mul(L, d);
  c.floats[P::kWq] = c.floats[P::kWo] = mul(L, d, d);
  c.floats[P::kWk] = c.floats[P::kWv] = mul(L, kv, d);
  c.floats[P::kW1] = c.floats[P::kW2] = c.floats[P::kW3] = mul(L, h, d);
  c.floats[P::kFinalNorm] = d;
  c.floats[P::kRopeCos] = c.floats[P::kRopeSin] = mul(c.max_seq_len, c.head_dim() / 2);
  c.floats[P::kClassifier] = c.tied_embeddings ? 0 : mul(c.vocab_size, d);
  std::int64_t floats = 0, expected = 0;
  for (const std::int64_t f : c.floats) overflow |= __builtin_add_overflow(floats, f, &floats);
  overflow |= __builtin_mul_overflow(floats, std::int64_t{4}, &expected) ||
              __builtin_add_overflow(expected, Llama2cCheckpoint::kHeaderBytes, &expected);
  REFDEC_CHECK_IO(!overflow, "llama2.c checkpoint " << path << " has an impossible header (dim " << d << ", hidden_dim " << h << ", " << L
                                                    << " layers, vocab " << c.vocab_size << ", seq_len " << c.max_seq_len
                                                    << "): its weights would exceed 2^63 bytes");
  REFDEC_CHECK_IO(file_size == expected, "llama2.c checkpoint " << path << " has " << file_size << " bytes; its header (dim " << d << ", "
                                                                << L << " layers, vocab " << c.vocab_size << ") implies " << expected
                                                                << (file_size < expected ? " (truncated?)" : " (not a v0 checkpoint?)"));
  return c;
}

REFDEC_NAMESPACE_END
