// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The two products of attention over a sequence's cached keys and values, on the CPU in bf16,
// through oneDNN's matmul with the sequence length as a run-time dimension and the cache read in
// place through its strides. libtorch 1.13's bf16 batched products copy the keys to a contiguous
// layout first and then run far below the memory speed: with TinyLlama's heads at a 512-token
// context, one layer's attention (softmax included) took 111 µs for one token and 418 µs for 8,
// against 52 and 170 µs this way (bench/attention_bench.cpp on a 2-core AMD EPYC with AVX-512).
//
// A primitive is made once per shape that does not change from step to step (heads, query rows,
// head size, the cache's strides) and kept; the length of the sequence is given per call.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "refdec/core/config.hpp"
#include "refdec/cpu/avx2_attention.hpp"
#include "refdec/cpu/bf16_attention.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/onednn.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// Whether attention_scores() and attention_values() run these keys or values ([S, KV, D]): bf16
/// on the CPU with a contiguous last dimension, refdec built with oneDNN, and a CPU on which
/// oneDNN runs bf16 products (AVX-512; onednn.hpp probes it).
inline bool attention_products_supported(const at::Tensor& cache) {
  return torch_detail::onednn_bf16_matmul_runs() && cache.defined() && cache.dim() == 3 && cache.device().is_cpu() &&
         cache.scalar_type() == at::kBFloat16 && cache.stride(2) == 1;
}

#if REFDEC_HAVE_ONEDNN
namespace torch_detail {

// Made once per (product, kv heads, query rows, head size, cache strides, scale) and shared by
// every thread: dnnl::matmul is safe to execute concurrently.
inline dnnl::matmul attention_primitive(bool scores, std::int64_t kv, std::int64_t rows, std::int64_t d, std::int64_t row_stride,
                                        std::int64_t head_stride, float scale) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  using Key = std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::uint32_t>;
  static std::mutex mutex;
  static std::map<Key, dnnl::matmul> made;
  std::uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale);
  const Key key{scores, kv, rows, d, row_stride, head_stride, scale_bits};
  const std::lock_guard lock(mutex);
  if (const auto it = made.find(key); it != made.end()) return it->second;
  constexpr auto S = DNNL_RUNTIME_DIM_VAL;
  dnnl::primitive_attr attr;
  dnnl::matmul::desc desc = [&] {
    if (scores) {  // [kv, rows, d] x keys seen as [kv, d, S] -> [kv, rows, S] float32
      attr.set_output_scales(0, {scale});
      return dnnl::matmul::desc({{kv, rows, d}, dt::bf16, tag::abc}, {{kv, d, S}, dt::bf16, {head_stride, 1, row_stride}},
                                {{kv, rows, S}, dt::f32, {DNNL_RUNTIME_DIM_VAL, DNNL_RUNTIME_DIM_VAL, 1}});
    }
    // probabilities [kv, rows, S] x values seen as [kv, S, d] -> [kv, rows, d] bf16
    return dnnl::matmul::desc({{kv, rows, S}, dt::bf16, {DNNL_RUNTIME_DIM_VAL, DNNL_RUNTIME_DIM_VAL, 1}},
                              {{kv, S, d}, dt::bf16, {head_stride, row_stride, 1}}, {{kv, rows, d}, dt::bf16, tag::abc});
  }();
  return made.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, onednn_engine()))).first->second;
}

inline void run_attention_primitive(const dnnl::matmul& product, const dnnl::memory::desc& a, void* a_data, const dnnl::memory::desc& b,
                                    void* b_data, const dnnl::memory::desc& c, void* c_data) {
  const dnnl::engine& engine = onednn_engine();
  thread_local dnnl::stream stream(engine);
  product.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(a, engine, a_data)},
                           {DNNL_ARG_WEIGHTS, dnnl::memory(b, engine, b_data)},
                           {DNNL_ARG_DST, dnnl::memory(c, engine, c_data)}});
  stream.wait();
}

}  // namespace torch_detail
#endif

/// attention_scores() into `out`: [KV, rows, S] float32, contiguous (for example a scratch tensor
/// kept across calls).
inline void attention_scores_into(const at::Tensor& q, const at::Tensor& keys, [[maybe_unused]] double scale, const at::Tensor& out) {
  REFDEC_CHECK(attention_products_supported(keys) && q.dim() == 3 && q.scalar_type() == at::kBFloat16 && q.device().is_cpu() &&
                   q.size(0) == keys.size(1) && q.size(2) == keys.size(2),
               "attention_scores: needs bf16 CPU queries [KV, rows, D] and keys [S, KV, D] with oneDNN running bf16 on this CPU, got "
                   << q.toString() << " " << q.sizes() << " and " << keys.toString() << " " << keys.sizes());
  const auto qc = q.contiguous();
  [[maybe_unused]] const std::int64_t kv = q.size(0), rows = q.size(1), d = q.size(2), s = keys.size(0);  // d: oneDNN's
  REFDEC_CHECK(
      out.scalar_type() == at::kFloat && out.is_contiguous() && out.device().is_cpu() && out.sizes() == at::IntArrayRef({kv, rows, s}),
      "attention_scores: the output must be a contiguous float32 CPU tensor [" << kv << ", " << rows << ", " << s << "], got "
                                                                               << out.toString() << " " << out.sizes());
#if REFDEC_HAVE_ONEDNN
  using dt = dnnl::memory::data_type;
  const auto product = torch_detail::attention_primitive(true, kv, rows, d, keys.stride(0), keys.stride(1), static_cast<float>(scale));
  torch_detail::run_attention_primitive(product, {{kv, rows, d}, dt::bf16, dnnl::memory::format_tag::abc}, qc.data_ptr(),
                                        {{kv, d, s}, dt::bf16, {keys.stride(1), 1, keys.stride(0)}}, keys.data_ptr(),
                                        {{kv, rows, s}, dt::f32, {rows * s, s, 1}}, out.data_ptr());
#endif
}

/// scale * q k^T per kv head: q [KV, rows, D] bf16 (query rows grouped by the kv head they read),
/// keys [S, KV, D] (a sequence's cache, read in place). Returns [KV, rows, S] float32.
inline at::Tensor attention_scores(const at::Tensor& q, const at::Tensor& keys, double scale) {
  at::Tensor out;  // (malformed inputs are refused by attention_scores_into(), naming them)
  if (q.defined() && keys.defined() && q.dim() == 3 && keys.dim() == 3)
    out = at::empty({q.size(0), q.size(1), keys.size(0)}, q.options().dtype(at::kFloat));
  attention_scores_into(q, keys, scale, out);
  return out;
}

/// Adds `mask` ([n, n] float32, or undefined for none) to the last n columns of each group of n
/// rows of `scores` ([..., rows, S] float32, contiguous, rows a multiple of n) and replaces each row
/// by its softmax, in place, the rows split over libtorch's threads: through refdec's AVX2 softmax
/// (avx2::softmax) where the CPU runs it, at::softmax otherwise. ATen's softmax, with the mask
/// added and its float32 result copied apart, took 3% of a 16-token step of the 1.1B shape on a
/// 2-core Zen 5 EPYC, mostly in its exp and on one thread.
inline void mask_softmax_in_place(const at::Tensor& scores, const at::Tensor& mask) {
  REFDEC_CHECK(
      scores.defined() && scores.scalar_type() == at::kFloat && scores.device().is_cpu() && scores.is_contiguous() && scores.dim() >= 1,
      "mask_softmax_in_place: needs contiguous float32 CPU scores, got "
          << (scores.defined() ? scores.toString() + " " + c10::str(scores.sizes()) : std::string("none")));
  const std::int64_t S = scores.size(-1), rows = S > 0 ? scores.numel() / S : 0;
  const std::int64_t n = mask.defined() ? mask.size(0) : 0;
  REFDEC_CHECK(!mask.defined() || (mask.scalar_type() == at::kFloat && mask.device().is_cpu() && mask.dim() == 2 && mask.size(1) == n &&
                                   n <= S && rows % n == 0 && mask.is_contiguous()),
               "mask_softmax_in_place: needs a contiguous float32 CPU mask [n, n] with n dividing the rows and at most " << S << ", got "
                                                                                                                         << mask.sizes());
  if (!StreamLinear::cpu_runs()) {
    if (n > 0) scores.view({-1, n, S}).narrow(-1, S - n, n).add_(mask);
    scores.copy_(at::softmax(scores, -1));
    return;
  }
  float* const x = scores.data_ptr<float>();
  const float* const bias = n > 0 ? mask.data_ptr<float>() : nullptr;
  // Whole groups of n rows per range, so that a range's row r takes mask row r % n.
  const std::int64_t group = std::max<std::int64_t>(n, 1), groups = rows / group;
  at::parallel_for(
      0, groups, std::max<std::int64_t>(1, 32768 / (group * std::max<std::int64_t>(S, 1))),
      [&](std::int64_t first, std::int64_t last) { avx2::softmax(x + first * group * S, (last - first) * group, S, bias, n); });
}

/// probabilities v per kv head: probabilities [KV, rows, S] bf16, values [S, KV, D] (read in
/// place). Returns [KV, rows, D] bf16.
inline at::Tensor attention_values(const at::Tensor& probabilities, const at::Tensor& values) {
  REFDEC_CHECK(
      attention_products_supported(values) && probabilities.dim() == 3 && probabilities.scalar_type() == at::kBFloat16 &&
          probabilities.device().is_cpu() && probabilities.size(0) == values.size(1) && probabilities.size(2) == values.size(0),
      "attention_values: needs bf16 CPU probabilities [KV, rows, S] and values [S, KV, D] with oneDNN running bf16 on this CPU, got "
          << probabilities.toString() << " " << probabilities.sizes() << " and " << values.toString() << " " << values.sizes());
  const auto pc = probabilities.contiguous();
  [[maybe_unused]] const std::int64_t kv = pc.size(0), rows = pc.size(1), s = pc.size(2), d = values.size(2);  // s: oneDNN's
  auto out = at::empty({kv, rows, d}, pc.options());
#if REFDEC_HAVE_ONEDNN
  using dt = dnnl::memory::data_type;
  const auto product = torch_detail::attention_primitive(false, kv, rows, d, values.stride(0), values.stride(1), 1.0f);
  torch_detail::run_attention_primitive(product, {{kv, rows, s}, dt::bf16, {rows * s, s, 1}}, pc.data_ptr(),
                                        {{kv, s, d}, dt::bf16, {values.stride(1), values.stride(0), 1}}, values.data_ptr(),
                                        {{kv, rows, d}, dt::bf16, dnnl::memory::format_tag::abc}, out.data_ptr());
#endif
  return out;
}

/// Whether avx2_attention_scores() and avx2_attention_values() run these keys or values ([S, KV,
/// D]): bf16 or fp16 on the CPU with a contiguous last dimension, D a multiple of 8 up to 256, and
/// a CPU with AVX2, FMA and F16C (cpu/avx2_attention.hpp).
inline bool avx2_attention_supported(const at::Tensor& cache) {
  return StreamLinear::cpu_runs() && cache.defined() && cache.dim() == 3 && cache.device().is_cpu() &&
         (cache.scalar_type() == at::kBFloat16 || cache.scalar_type() == at::kHalf) && cache.stride(2) == 1 && cache.size(2) % 8 == 0 &&
         cache.size(2) <= 256;
}

/// Whether avx2_attention() runs its products on the AVX512_BF16 kernel (cpu/bf16_attention.hpp)
/// for queries of `q_dtype` over a cache of `format` with heads of `head_dim`: bf16 queries and
/// cache, on a CPU where avx512bf16::runs(head_dim). Elsewhere the AVX2 kernel runs them.
inline bool avx2_attention_takes_bf16(at::ScalarType q_dtype, HalfFormat format, std::int64_t head_dim) {
  return q_dtype == at::kBFloat16 && format == HalfFormat::kBf16 && avx512bf16::runs(head_dim);
}

namespace torch_detail {
inline CacheView cache_view(const at::Tensor& cache) {
  return {static_cast<const std::uint16_t*>(cache.data_ptr()), cache.size(0), cache.stride(0), cache.stride(1), cache.size(2)};
}
inline HalfFormat half_format(const at::Tensor& t) { return t.scalar_type() == at::kHalf ? HalfFormat::kFp16 : HalfFormat::kBf16; }
// The view whose kv head 0 is `view`'s head `first`.
inline CacheView shifted(CacheView view, std::int64_t first) {
  view.data += first * view.head_stride;
  return view;
}
}  // namespace torch_detail

/// scale * q k^T per kv head through refdec's AVX2 kernel, the kv heads split over libtorch's
/// threads: q [KV, rows, D] (any floating dtype), keys [S, KV, D] (read in place). Returns [KV,
/// rows, S] float32.
inline at::Tensor avx2_attention_scores(const at::Tensor& q, const at::Tensor& keys, double scale) {
  REFDEC_CHECK(avx2_attention_supported(keys) && q.dim() == 3 && q.size(0) == keys.size(1) && q.size(2) == keys.size(2),
               "avx2_attention_scores: needs queries [KV, rows, D] and bf16 or fp16 CPU keys [S, KV, D] on an AVX2 CPU, got "
                   << q.sizes() << " and " << keys.toString() << " " << keys.sizes());
  const auto qf = q.to(at::kFloat).contiguous();  // [KV, rows, D] float32
  const std::int64_t kv = q.size(0), rows = q.size(1);
  auto out = at::empty({kv, rows, keys.size(0)}, qf.options());
  const CacheView view = torch_detail::cache_view(keys);
  at::parallel_for(0, kv, 1, [&](std::int64_t first, std::int64_t last) {
    avx2::attention_scores(qf.data_ptr<float>(), rows, view, torch_detail::half_format(keys), static_cast<float>(scale),
                           out.data_ptr<float>(), first, last);
  });
  return out;
}

/// probabilities v per kv head through refdec's AVX2 kernel: probabilities [KV, rows, S] (any
/// floating dtype), values [S, KV, D] (read in place). Returns [KV, rows, D] in the values' dtype.
inline at::Tensor avx2_attention_values(const at::Tensor& probabilities, const at::Tensor& values) {
  REFDEC_CHECK(avx2_attention_supported(values) && probabilities.dim() == 3 && probabilities.size(0) == values.size(1) &&
                   probabilities.size(2) == values.size(0),
               "avx2_attention_values: needs probabilities [KV, rows, S] and bf16 or fp16 CPU values [S, KV, D] on an AVX2 CPU, got "
                   << probabilities.sizes() << " and " << values.toString() << " " << values.sizes());
  const auto pf = probabilities.to(at::kFloat).contiguous();  // [KV, rows, S] float32
  const std::int64_t kv = pf.size(0), rows = pf.size(1);
  auto out = at::empty({kv, rows, values.size(2)}, values.options());
  const CacheView view = torch_detail::cache_view(values);
  at::parallel_for(0, kv, 1, [&](std::int64_t first, std::int64_t last) {
    avx2::attention_values(pf.data_ptr<float>(), rows, view, torch_detail::half_format(values), static_cast<std::uint16_t*>(out.data_ptr()),
                           first, last);
  });
  return out;
}

namespace torch_detail {
inline void check_avx2_attention_mask(const at::Tensor& mask, std::int64_t rows, std::int64_t S) {
  REFDEC_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == mask.size(1) && mask.size(0) > 0 && mask.size(0) <= S &&
                                   rows % mask.size(0) == 0 && at::isFloatingType(mask.scalar_type()) && mask.device().is_cpu()),
               "avx2_attention: the mask must be a floating CPU [n, n] with n dividing the "
                   << rows << " rows and at most the " << S << " entries, got " << mask.toString() << " " << mask.sizes());
}

// avx2_attention() over entries wherever `key_view` and `value_view` find them (S entries each);
// the output in `values_options`.
inline at::Tensor avx2_attention_over(const at::Tensor& q, const CacheView& key_view, const CacheView& value_view, HalfFormat format,
                                      const at::TensorOptions& values_options, const at::Tensor& mask, double scale) {
  const std::int64_t kv = q.size(0), rows = q.size(1), S = key_view.length, D = key_view.head_dim;
  check_avx2_attention_mask(mask, rows, S);
  const bool bf16 = avx2_attention_takes_bf16(q.scalar_type(), format, D);
  const auto qc = q.to(bf16 ? at::kBFloat16 : at::kFloat).contiguous();  // [KV, rows, D]
  const auto bias = mask.defined() ? mask.to(at::kFloat).contiguous() : mask;
  auto out = at::empty({kv, rows, D}, values_options);
  at::parallel_for(0, kv, 1, [&](std::int64_t first, std::int64_t last) {
    auto scores = at::empty({last - first, rows, S}, qc.options().dtype(at::kFloat));
    auto* const o = static_cast<std::uint16_t*>(out.data_ptr()) + first * rows * D;
    if (bf16)
      avx512bf16::attention_scores(static_cast<const std::uint16_t*>(qc.data_ptr()) + first * rows * D, rows, shifted(key_view, first),
                                   static_cast<float>(scale), scores.data_ptr<float>(), 0, last - first);
    else
      avx2::attention_scores(qc.data_ptr<float>() + first * rows * D, rows, shifted(key_view, first), format, static_cast<float>(scale),
                             scores.data_ptr<float>(), 0, last - first);
    avx2::softmax(scores.data_ptr<float>(), (last - first) * rows, S, bias.defined() ? bias.data_ptr<float>() : nullptr,
                  bias.defined() ? bias.size(0) : 0);
    if (bf16)
      avx512bf16::attention_values(scores.data_ptr<float>(), rows, shifted(value_view, first), o, 0, last - first);
    else
      avx2::attention_values(scores.data_ptr<float>(), rows, shifted(value_view, first), format, o, 0, last - first);
  });
  return out;
}
}  // namespace torch_detail

/// The whole of attention for the AVX2 path: softmax(scale q k^T + mask) v per kv head, each
/// thread taking a range of kv heads through all three stages in one parallel region, so that the
/// scores and probabilities it writes are read back by the same thread, and no ATen softmax (with
/// threads of its own) runs between the products. q [KV, G * n, D] (any floating dtype: G query
/// heads of n rows each per kv head), keys and values [S, KV, D] (read in place), `mask` [n, n]
/// (any floating dtype) added to the scores of the last n entries (the step's own rows) of every
/// query head, or undefined for none. Returns [KV, G * n, D] in the values' dtype. Where
/// avx2_attention_takes_bf16() (bf16 queries and cache on an AVX512_BF16 CPU), the two products
/// run on cpu/bf16_attention.hpp's kernel, the probabilities rounded to bf16 as oneDNN's take them.
inline at::Tensor avx2_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values, const at::Tensor& mask,
                                 double scale) {
  REFDEC_CHECK(avx2_attention_supported(keys) && avx2_attention_supported(values) && keys.sizes() == values.sizes() &&
                   keys.scalar_type() == values.scalar_type() && q.dim() == 3 && q.size(0) == keys.size(1) && q.size(2) == keys.size(2),
               "avx2_attention: needs queries [KV, rows, D] and bf16 or fp16 CPU keys and values [S, KV, D] alike on an AVX2 CPU, got "
                   << q.sizes() << ", " << keys.toString() << " " << keys.sizes() << " and " << values.toString() << " " << values.sizes());
  return torch_detail::avx2_attention_over(q, torch_detail::cache_view(keys), torch_detail::cache_view(values),
                                           torch_detail::half_format(values), values.options(), mask, scale);
}

/// Whether avx2_attention() runs over these paged entries: the pool's keys and values as
/// avx2_attention_supported() asks, and a block table that covers the entries.
inline bool avx2_attention_supported(const PagedEntries& entries) {
  return avx2_attention_supported(entries.keys) && avx2_attention_supported(entries.values) &&
         entries.keys.sizes() == entries.values.sizes() && entries.keys.scalar_type() == entries.values.scalar_type() &&
         entries.block_size > 0 && entries.length >= 0 &&
         static_cast<std::int64_t>(entries.blocks.size()) * entries.block_size >= entries.length;
}

/// avx2_attention() over a paged store's entries read in place through their block table
/// (PagedKvStore::read_paged): no gathered copy of the prefix. Every block must lie within the
/// pool's rows.
inline at::Tensor avx2_attention(const at::Tensor& q, const PagedEntries& entries, const at::Tensor& mask, double scale) {
  REFDEC_CHECK(
      avx2_attention_supported(entries) && q.dim() == 3 && q.size(0) == entries.keys.size(1) && q.size(2) == entries.keys.size(2),
      "avx2_attention: needs queries [KV, rows, D] and bf16 or fp16 CPU pool keys and values [rows, KV, D] alike with a block table "
      "covering the entries on an AVX2 CPU, got "
          << q.sizes() << ", " << entries.keys.toString() << " " << entries.keys.sizes() << ", " << entries.blocks.size() << " blocks of "
          << entries.block_size << " for " << entries.length << " entries");
  const std::int64_t pool_blocks = entries.keys.size(0) / entries.block_size;
  for (const std::int32_t block : entries.blocks)
    REFDEC_CHECK(block >= 0 && block < pool_blocks,
                 "avx2_attention: block " << block << " outside the pool's " << pool_blocks << " blocks");
  auto view = [&](const at::Tensor& pool) {
    CacheView v = torch_detail::cache_view(pool);
    v.length = entries.length, v.blocks = entries.blocks.data(), v.block_size = entries.block_size;
    return v;
  };
  return torch_detail::avx2_attention_over(q, view(entries.keys), view(entries.values), torch_detail::half_format(entries.values),
                                           entries.values.options(), mask, scale);
}

REFDEC_TORCH_NAMESPACE_END
