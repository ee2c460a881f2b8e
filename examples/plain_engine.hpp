// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A Llama forward pass in plain C++ (float32 loops, no libtorch, no BLAS): what an engine author
// brings to refdec. It reads llama2.c "v0" checkpoints (e.g. stories260K.bin), keeps its own
// contiguous KV cache per sequence and runs one refdec::StepPlan per call. The arithmetic follows
// llama2.c's run.c (float accumulation, the same loop orders), so greedy decoding from BOS
// reproduces llama2.c's published stories260K text.
//
// The only refdec types used here are StepPlan (the input of a step) and KeepPlan (what the cache
// keeps afterwards): an engine needs nothing else of refdec to run a speculative step. (The
// checkpoint's header is read by refdec/io/llama2c_checkpoint.hpp, which the library's own loader
// shares.)

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "refdec/core/step_plan.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/io/llama2c_checkpoint.hpp"

namespace plain_engine {

// Checkpoints are little-endian fp32/int32 and are read straight into memory.
static_assert(std::endian::native == std::endian::little, "plain_engine reads little-endian checkpoints as they are");

/// Thrown for a checkpoint that cannot be used and for a step the model or a cache cannot run.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

// A size product that must not wrap around (a wrapped size would allocate too little).
inline std::uint64_t mul(std::uint64_t a, std::uint64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    fail("plain_engine: the size of ", what, " overflows 64 bits");
  return a * b;
}

// out = weight * x / rms(x), as llama2.c: the mean square accumulates in float.
inline void rmsnorm(float* out, const float* x, const float* weight, std::size_t n) {
  float ss = 0.0f;
  for (std::size_t j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (std::size_t j = 0; j < n; ++j) out[j] = weight[j] * (ss * x[j]);
}

// out = W x with W [d, n] row-major.
inline void matmul(float* out, const float* x, const float* w, std::size_t n, std::size_t d) {
  for (std::size_t i = 0; i < d; ++i) {
    float val = 0.0f;
    const float* row = w + i * n;
    for (std::size_t j = 0; j < n; ++j) val += row[j] * x[j];
    out[i] = val;
  }
}

inline void softmax(float* x, std::size_t n) {
  float max_val = x[0];
  for (std::size_t i = 1; i < n; ++i) max_val = std::max(max_val, x[i]);
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (std::size_t i = 0; i < n; ++i) x[i] /= sum;
}

// Rotary embedding of one vector of `n` floats made of heads of `head_dim`: llama2.c rotates the
// consecutive pairs (2i, 2i + 1) of each head, with theta 10000.
inline void rope(float* vec, std::size_t n, std::size_t head_dim, std::int64_t position) {
  for (std::size_t i = 0; i < n; i += 2) {
    const auto pair = static_cast<float>(i % head_dim);
    const float freq = 1.0f / std::pow(10000.0f, pair / static_cast<float>(head_dim));
    const float angle = static_cast<float>(position) * freq;
    const float c = std::cos(angle), s = std::sin(angle);
    const float v0 = vec[i], v1 = vec[i + 1];
    vec[i] = v0 * c - v1 * s;
    vec[i + 1] = v0 * s + v1 * c;
  }
}
}  // namespace detail

/// The shape of a Llama model, as a llama2.c checkpoint's header gives it.
struct Config {
  std::int32_t dim = 0;
  std::int32_t hidden_dim = 0;
  std::int32_t n_layers = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t vocab_size = 0;
  std::int32_t max_seq_len = 0;
  bool tied_embeddings = true;  ///< the classifier is the token embedding

  std::int32_t head_dim() const { return dim / n_heads; }
  std::int32_t kv_dim() const { return n_kv_heads * head_dim(); }
};

/// The KV cache of one sequence: `length()` committed entries, then room for one step's rows, in
/// one fixed allocation. A step writes its rows' keys and values at entries length() + local row;
/// apply() then keeps the accepted ones.
class Cache {
 public:
  Cache(std::int32_t n_layers, std::int32_t kv_dim, std::int64_t capacity)
      : n_layers_(n_layers), kv_dim_(kv_dim), capacity_(capacity) {
    if (n_layers <= 0 || kv_dim <= 0 || capacity <= 0)
      detail::fail("plain_engine::Cache: layers (", n_layers, "), kv_dim (", kv_dim, ") and capacity (", capacity,
                   ") must be positive");
    const std::uint64_t entries = detail::mul(static_cast<std::uint64_t>(n_layers), static_cast<std::uint64_t>(capacity), "a cache");
    const std::uint64_t floats = detail::mul(entries, static_cast<std::uint64_t>(kv_dim), "a cache");
    keys_.assign(static_cast<std::size_t>(floats), 0.0f);
    values_.assign(static_cast<std::size_t>(floats), 0.0f);
  }

  /// Committed entries (the sequence's tokens whose keys and values are cached).
  std::int64_t length() const { return length_; }
  std::int64_t capacity() const { return capacity_; }
  std::int32_t n_layers() const { return n_layers_; }
  std::int32_t kv_dim() const { return kv_dim_; }

  /// Entry `entry` of layer `layer`: [kv_dim] floats.
  float* key(std::int32_t layer, std::int64_t entry) { return keys_.data() + offset(layer, entry); }
  float* value(std::int32_t layer, std::int64_t entry) { return values_.data() + offset(layer, entry); }
  const float* key(std::int32_t layer, std::int64_t entry) const { return keys_.data() + offset(layer, entry); }
  const float* value(std::int32_t layer, std::int64_t entry) const { return values_.data() + offset(layer, entry); }

  /// Claims the entries length() .. length() + rows - 1 for a step's rows (the forward pass calls
  /// it). Throws when they do not fit.
  void begin_step(std::int64_t rows) {
    if (rows < 1 || rows > capacity_ - length_)
      detail::fail("plain_engine::Cache: a step of ", rows, " rows does not fit after ", length_, " entries (capacity ",
                   capacity_, ")");
    step_rows_ = rows;
  }

  /// Applies sequence `b` of `keep` to this cache: its kept step rows move down, in order, to the
  /// entries right after the committed ones, and length() becomes keep.lengths[b]. Throws when the
  /// keep plan does not describe the last step this cache ran.
  void apply(const refdec::KeepPlan& keep, std::int32_t b) {
    if (b < 0 || b >= keep.batch())
      detail::fail("plain_engine::Cache::apply: sequence ", b, " is not in a keep plan of ", keep.batch());
    if (step_rows_ == 0) detail::fail("plain_engine::Cache::apply: no step has run since the last keep plan was applied");
    const auto rows = keep.kept(b);
    const std::int64_t new_length = keep.lengths[static_cast<std::size_t>(b)];
    if (new_length != length_ + static_cast<std::int64_t>(rows.size()))
      detail::fail("plain_engine::Cache::apply: sequence ", b, " keeps ", rows.size(), " rows after ", length_,
                   " entries but its new length is ", new_length);
    for (std::size_t k = 0; k < rows.size(); ++k)
      if (rows[k] < 0 || rows[k] >= step_rows_ || (k > 0 && rows[k] <= rows[k - 1]))
        detail::fail("plain_engine::Cache::apply: sequence ", b, " keeps row ", rows[k],
                     " (the rows must increase and lie in [0, ", step_rows_, "), the last step's rows)");
    const auto width = static_cast<std::size_t>(kv_dim_);
    for (std::int32_t layer = 0; layer < n_layers_; ++layer)
      refdec::for_each_keep_move(keep, b, length_, [&](std::int64_t from, std::int64_t to) {  // in place, in order
        std::copy_n(key(layer, from), width, key(layer, to));
        std::copy_n(value(layer, from), width, value(layer, to));
      });
    length_ = new_length;
    step_rows_ = 0;
  }

 private:
  std::size_t offset(std::int32_t layer, std::int64_t entry) const {
    return (static_cast<std::size_t>(layer) * static_cast<std::size_t>(capacity_) + static_cast<std::size_t>(entry)) *
           static_cast<std::size_t>(kv_dim_);
  }

  std::int32_t n_layers_;
  std::int32_t kv_dim_;
  std::int64_t capacity_;
  std::int64_t length_ = 0;
  std::int64_t step_rows_ = 0;  // rows the last forward wrote after length_ (0: none since apply())
  std::vector<float> keys_;     // [n_layers, capacity, kv_dim]
  std::vector<float> values_;   // [n_layers, capacity, kv_dim]
};

/// A Llama model (RMSNorm, rotary attention with grouped KV heads, SwiGLU) with fp32 weights.
class Model {
 public:
  /// Reads a llama2.c v0 checkpoint (refdec/io/llama2c_checkpoint.hpp: its header, then the fp32
  /// weights). Throws refdec::IoError for a missing, unreadable, truncated or oversized file and
  /// for a header that describes no valid model.
  static Model load(const std::filesystem::path& path) {
    refdec::InputFile file = refdec::open_input_file(path, "llama2.c checkpoint");  // regular files only, never blocks
    const refdec::Llama2cCheckpoint ck = refdec::read_llama2c_header(file.fd.get(), static_cast<std::int64_t>(file.size), path);
    Model m;
    Config& c = m.config_;
    // The header's fields are int32 in the file, and checked positive.
    c.dim = static_cast<std::int32_t>(ck.dim);
    c.hidden_dim = static_cast<std::int32_t>(ck.hidden_dim);
    c.n_layers = static_cast<std::int32_t>(ck.n_layers);
    c.n_heads = static_cast<std::int32_t>(ck.n_heads);
    c.n_kv_heads = static_cast<std::int32_t>(ck.n_kv_heads);
    c.vocab_size = static_cast<std::int32_t>(ck.vocab_size);
    c.max_seq_len = static_cast<std::int32_t>(ck.max_seq_len);
    c.tied_embeddings = ck.tied_embeddings;
    using P = refdec::Llama2cCheckpoint;
    // The parts in file order, each read where it lies (the size was checked against the header).
    auto read = [&](std::vector<float>& out, P::Part part) {
      out.resize(static_cast<std::size_t>(ck.floats[part]));
      const std::size_t bytes = out.size() * sizeof(float);
      if (refdec::read_fully(file.fd.get(), out.data(), bytes, path, "llama2.c checkpoint") != bytes)
        detail::fail("plain_engine: checkpoint ", path, " ended early (did it shrink while loading?)");
    };
    std::vector<float> rope_tables;  // recomputed in forward(): read past
    for (auto [out, part] : {std::pair{&m.embedding_, P::kEmbedding}, {&m.attn_norm_, P::kAttentionNorms}, {&m.wq_, P::kWq},
                             {&m.wk_, P::kWk}, {&m.wv_, P::kWv}, {&m.wo_, P::kWo}, {&m.ffn_norm_, P::kFfnNorms}, {&m.w1_, P::kW1},
                             {&m.w2_, P::kW2}, {&m.w3_, P::kW3}, {&m.final_norm_, P::kFinalNorm}, {&rope_tables, P::kRopeCos},
                             {&rope_tables, P::kRopeSin}, {&m.classifier_, P::kClassifier}})
      read(*out, part);
    return m;
  }

  const Config& config() const { return config_; }
  std::int32_t vocab_size() const { return config_.vocab_size; }
  std::int32_t max_seq_len() const { return config_.max_seq_len; }

  /// An empty cache for one sequence with room for `capacity` entries.
  Cache make_cache(std::int64_t capacity) const { return Cache(config_.n_layers, config_.kv_dim(), capacity); }

  /// Runs one step: returns the logits of every plan row, [plan.rows(), vocab]. Row i of sequence b
  /// attends to all caches[b].length() cached entries and to the step's rows j with
  /// plan.sees(b, i, j), at rotary position plan.positions[row]. Writes the keys and values of
  /// sequence b's rows at entries caches[b].length() + i; nothing is committed until
  /// caches[b].apply(keep plan, b). Throws Error when the plan and the caches do not fit together.
  std::vector<float> forward(const refdec::StepPlan& plan, std::span<Cache> caches) const {
    const Config& c = config_;
    const std::int32_t B = plan.batch();
    if (static_cast<std::int64_t>(caches.size()) != B)
      detail::fail("plain_engine::Model::forward: ", caches.size(), " caches for a plan of ", B, " sequences");
    for (std::int32_t b = 0; b < B; ++b) {
      Cache& cache = caches[static_cast<std::size_t>(b)];
      if (cache.n_layers() != c.n_layers || cache.kv_dim() != c.kv_dim())
        detail::fail("plain_engine::Model::forward: cache ", b, " was made for another model");
      // The plan was made from lengths the engine gave plan_step(); a mismatch means a stale plan.
      if (plan.lengths[static_cast<std::size_t>(b)] != cache.length())
        detail::fail("plain_engine::Model::forward: the plan expects ", plan.lengths[static_cast<std::size_t>(b)],
                     " cached entries for sequence ", b, ", its cache holds ", cache.length());
      cache.begin_step(plan.rows(b));
    }
    const auto R = static_cast<std::size_t>(plan.rows());
    for (std::size_t r = 0; r < R; ++r)
      if (plan.tokens[r] < 0 || plan.tokens[r] >= c.vocab_size)
        detail::fail("plain_engine::Model::forward: row ", r, " has token ", plan.tokens[r], " outside the vocabulary [0, ",
                     c.vocab_size, ")");

    const auto dim = static_cast<std::size_t>(c.dim), hidden = static_cast<std::size_t>(c.hidden_dim),
               kv_dim = static_cast<std::size_t>(c.kv_dim()), head_dim = static_cast<std::size_t>(c.head_dim()),
               n_heads = static_cast<std::size_t>(c.n_heads), vocab = static_cast<std::size_t>(c.vocab_size);
    const std::size_t group = n_heads / static_cast<std::size_t>(c.n_kv_heads);  // query heads per KV head
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

    std::vector<float> x(R * dim);        // [rows, dim] residual stream
    std::vector<float> xb(R * dim);       // [rows, dim] normed input / attention output
    std::vector<float> q(R * dim);        // [rows, dim] queries
    std::vector<float> out(dim);          // [dim] one row's projection back to the residual
    std::vector<float> hb(hidden);        // [hidden]
    std::vector<float> hb2(hidden);       // [hidden]
    std::vector<std::int64_t> visible;    // [cached + step rows] cache entries one row attends to
    std::vector<float> att;               // [visible] attention weights of one head
    for (std::size_t r = 0; r < R; ++r)
      std::copy_n(&embedding_[static_cast<std::size_t>(plan.tokens[r]) * dim], dim, &x[r * dim]);

    for (std::int32_t layer = 0; layer < c.n_layers; ++layer) {
      const auto l = static_cast<std::size_t>(layer);
      // All rows' keys and values of this layer must be in the cache before any row attends: a
      // row sees other step rows (its ancestors), not only the cached prefix.
      for (std::int32_t b = 0; b < B; ++b) {
        Cache& cache = caches[static_cast<std::size_t>(b)];
        for (std::int32_t i = 0; i < plan.rows(b); ++i) {
          const auto r = static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + i);
          const std::int64_t entry = cache.length() + i;
          detail::rmsnorm(&xb[r * dim], &x[r * dim], &attn_norm_[l * dim], dim);
          detail::matmul(&q[r * dim], &xb[r * dim], &wq_[l * dim * dim], dim, dim);
          detail::matmul(cache.key(layer, entry), &xb[r * dim], &wk_[l * kv_dim * dim], dim, kv_dim);
          detail::matmul(cache.value(layer, entry), &xb[r * dim], &wv_[l * kv_dim * dim], dim, kv_dim);
          detail::rope(&q[r * dim], dim, head_dim, plan.positions[r]);
          detail::rope(cache.key(layer, entry), kv_dim, head_dim, plan.positions[r]);
        }
      }
      for (std::int32_t b = 0; b < B; ++b) {
        const Cache& cache = caches[static_cast<std::size_t>(b)];
        for (std::int32_t i = 0; i < plan.rows(b); ++i) {
          const auto r = static_cast<std::size_t>(plan.indptr[static_cast<std::size_t>(b)] + i);
          // The whole cached prefix, then the step's own rows the mask allows, in entry order: a
          // token then sees its context in the same order whether it arrived in a tree or alone,
          // so speculative and plain decoding compute bit-identical logits.
          visible.clear();
          for (std::int64_t e = 0; e < cache.length(); ++e) visible.push_back(e);
          for (std::int32_t j = 0; j < plan.rows(b); ++j)
            if (plan.sees(b, i, j)) visible.push_back(cache.length() + j);
          att.resize(visible.size());
          for (std::size_t head = 0; head < n_heads; ++head) {
            const float* qh = &q[r * dim + head * head_dim];
            const std::size_t kv_offset = (head / group) * head_dim;
            for (std::size_t t = 0; t < visible.size(); ++t) {
              const float* k = cache.key(layer, visible[t]) + kv_offset;
              float score = 0.0f;
              for (std::size_t e = 0; e < head_dim; ++e) score += qh[e] * k[e];
              att[t] = score * scale;
            }
            detail::softmax(att.data(), att.size());
            float* o = &xb[r * dim + head * head_dim];
            std::fill_n(o, head_dim, 0.0f);
            for (std::size_t t = 0; t < visible.size(); ++t) {
              const float* v = cache.value(layer, visible[t]) + kv_offset;
              for (std::size_t e = 0; e < head_dim; ++e) o[e] += att[t] * v[e];
            }
          }
        }
      }
      for (std::size_t r = 0; r < R; ++r) {
        float* xr = &x[r * dim];
        detail::matmul(out.data(), &xb[r * dim], &wo_[l * dim * dim], dim, dim);
        for (std::size_t e = 0; e < dim; ++e) xr[e] += out[e];
        detail::rmsnorm(&xb[r * dim], xr, &ffn_norm_[l * dim], dim);
        detail::matmul(hb.data(), &xb[r * dim], &w1_[l * hidden * dim], dim, hidden);
        detail::matmul(hb2.data(), &xb[r * dim], &w3_[l * hidden * dim], dim, hidden);
        for (std::size_t e = 0; e < hidden; ++e) hb[e] = hb[e] * (1.0f / (1.0f + std::exp(-hb[e]))) * hb2[e];  // SwiGLU
        detail::matmul(out.data(), hb.data(), &w2_[l * dim * hidden], hidden, dim);
        for (std::size_t e = 0; e < dim; ++e) xr[e] += out[e];
      }
    }

    std::vector<float> logits(R * vocab);  // [rows, vocab]
    const std::vector<float>& classifier = c.tied_embeddings ? embedding_ : classifier_;
    for (std::size_t r = 0; r < R; ++r) {
      detail::rmsnorm(&xb[r * dim], &x[r * dim], final_norm_.data(), dim);
      detail::matmul(&logits[r * vocab], &xb[r * dim], classifier.data(), dim, vocab);
    }
    return logits;
  }

 private:
  Model() = default;

  Config config_;
  std::vector<float> embedding_;   // [vocab, dim]
  std::vector<float> attn_norm_;   // [layers, dim]
  std::vector<float> wq_;          // [layers, dim, dim] (out, in)
  std::vector<float> wk_;          // [layers, kv_dim, dim]
  std::vector<float> wv_;          // [layers, kv_dim, dim]
  std::vector<float> wo_;          // [layers, dim, dim]
  std::vector<float> ffn_norm_;    // [layers, dim]
  std::vector<float> w1_;          // [layers, hidden, dim]
  std::vector<float> w2_;          // [layers, dim, hidden]
  std::vector<float> w3_;          // [layers, hidden, dim]
  std::vector<float> final_norm_;  // [dim]
  std::vector<float> classifier_;  // [vocab, dim]; empty when tied to the embedding
};

}  // namespace plain_engine
