// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A CPU linear layer whose weight is reordered once into the blocked layout oneDNN's bf16 matmul
// streams fastest. At batch 1 a decoding step is a stream over every weight, so the layout the
// kernel reads decides the speed: on AVX-512-BF16 machines oneDNN reads its blocked layout at the
// memory bandwidth and at::linear in bf16 at less than half of it (docs/speed.md).
//
// oneDNN is optional: REFDEC_HAVE_ONEDNN is 1 when CMake found Debian's libdnnl-dev (the same
// library Debian's libtorch links). Without it PackedLinear::supported() is false and models keep
// at::linear.

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "refdec/core/config.hpp"

#ifndef REFDEC_HAVE_ONEDNN
#define REFDEC_HAVE_ONEDNN 0
#endif
#if REFDEC_HAVE_ONEDNN
#include <dnnl.hpp>
#endif

REFDEC_NAMESPACE_BEGIN

#if REFDEC_HAVE_ONEDNN
namespace detail {
// The one CPU engine of refdec's oneDNN primitives and the memory they run on (oneDNN refuses a
// primitive and memory of different engines).
inline const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}
}  // namespace detail
#endif

/// y = x W^T with W prepacked for oneDNN (bf16 weights on the CPU). Thread-safe: run() may be
/// called from several threads at once.
class PackedLinear {
 public:
  /// Whether `weight` ([out, in], as torch.nn.Linear holds it) can be packed here: a 2-D bf16 CPU
  /// tensor, and refdec built with oneDNN.
  static bool supported(const at::Tensor& weight) {
    return REFDEC_HAVE_ONEDNN && weight.defined() && weight.dim() == 2 && weight.device().is_cpu() &&
           weight.scalar_type() == at::kBFloat16;
  }

  /// Packs `weight` ([out, in]); the tensor itself is not kept. Throws ArgumentError when
  /// !supported(weight).
  explicit PackedLinear(const at::Tensor& weight) {
    REFDEC_CHECK(supported(weight), "PackedLinear: needs a 2-D bf16 CPU weight and refdec built with oneDNN (libdnnl-dev), got "
                                        << (weight.defined() ? weight.toString() : std::string("an undefined tensor"))
                                        << (REFDEC_HAVE_ONEDNN ? "" : " (this build has no oneDNN)"));
    out_ = weight.size(0), in_ = weight.size(1);
#if REFDEC_HAVE_ONEDNN
    using tag = dnnl::memory::format_tag;
    // The layout oneDNN picks for one row of input; rows up to a few hundred reuse it at full speed.
    const auto pd = primitive_desc(1, dnnl::memory::desc({in_, out_}, dnnl::memory::data_type::bf16, tag::any), false, false);
    packed_desc_ = pd.weights_desc();
    packed_ = at::empty({static_cast<std::int64_t>(packed_desc_.get_size())}, at::TensorOptions().dtype(at::kByte));
    const auto source = weight.contiguous();
    // torch's [out, in] row-major is oneDNN's [in, out] with tag ba: no transpose copy.
    dnnl::memory from({{in_, out_}, dnnl::memory::data_type::bf16, tag::ba}, detail::onednn_engine(), source.data_ptr());
    dnnl::memory to(packed_desc_, detail::onednn_engine(), packed_.data_ptr());
    dnnl::stream s(detail::onednn_engine());
    dnnl::reorder(from, to).execute(s, from, to);
    s.wait();
#endif
  }

  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  /// Bytes of the packed weight (what one step streams).
  std::int64_t bytes() const { return packed_.numel(); }

  /// out = x W^T, or out += x W^T when `accumulate` (a residual connection for free). x: [rows, in]
  /// bf16, contiguous; out: [rows, out_features()], contiguous, bf16 or float32.
  void run(const at::Tensor& x, const at::Tensor& out, bool accumulate) const {
    REFDEC_CHECK(x.dim() == 2 && x.size(1) == in_ && x.scalar_type() == at::kBFloat16 && x.is_contiguous() && x.device().is_cpu(),
                 "PackedLinear: input must be a contiguous bf16 CPU [rows, " << in_ << "], got " << x.toString() << " " << x.sizes());
    REFDEC_CHECK(out.dim() == 2 && out.size(0) == x.size(0) && out.size(1) == out_ && out.is_contiguous() &&
                     (out.scalar_type() == at::kBFloat16 || out.scalar_type() == at::kFloat) && out.device().is_cpu(),
                 "PackedLinear: output must be a contiguous bf16 or float32 CPU [" << x.size(0) << ", " << out_ << "], got "
                                                                                  << out.toString() << " " << out.sizes());
    if (x.size(0) == 0) return;
#if REFDEC_HAVE_ONEDNN
    const bool f32 = out.scalar_type() == at::kFloat;
    const dnnl::matmul kernel = kernel_for(x.size(0), f32, accumulate);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory src({{x.size(0), in_}, dt::bf16, tag::ab}, detail::onednn_engine(), x.data_ptr());
    dnnl::memory weights(packed_desc_, detail::onednn_engine(), packed_.data_ptr());
    dnnl::memory dst({{x.size(0), out_}, f32 ? dt::f32 : dt::bf16, tag::ab}, detail::onednn_engine(), out.data_ptr());
    thread_local dnnl::stream stream(detail::onednn_engine());
    kernel.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
#else
    (void)accumulate;
#endif
  }

  /// x W^T as a new [rows, out_features()] tensor of `dtype` (bf16 or float32).
  at::Tensor operator()(const at::Tensor& x, at::ScalarType dtype = at::kBFloat16) const {
    auto out = at::empty({x.size(0), out_}, x.options().dtype(dtype));
    run(x, out, false);
    return out;
  }

 private:
#if REFDEC_HAVE_ONEDNN
  dnnl::matmul::primitive_desc primitive_desc(std::int64_t rows, const dnnl::memory::desc& weights, bool f32,
                                              bool accumulate) const {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::memory::desc src({rows, in_}, dt::bf16, tag::ab), dst({rows, out_}, f32 ? dt::f32 : dt::bf16, tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, detail::onednn_engine());
  }

  // A primitive is specialised to its row count (runtime row counts fall back to oneDNN's
  // reference kernel), and creating one costs about 80 µs: each is made once and kept.
  dnnl::matmul kernel_for(std::int64_t rows, bool f32, bool accumulate) const {
    const std::lock_guard lock(kernels_->mutex);
    auto& by_rows = kernels_->by_rows;
    if (static_cast<std::int64_t>(by_rows.size()) <= rows) by_rows.resize(static_cast<std::size_t>(rows) + 1);
    auto& slot = by_rows[static_cast<std::size_t>(rows)][(f32 ? 2 : 0) + (accumulate ? 1 : 0)];
    if (!slot) slot.emplace(primitive_desc(rows, packed_desc_, f32, accumulate));
    return *slot;  // a copy of the handle: the slot may move when another thread grows by_rows
  }

  struct Kernels {
    std::mutex mutex;
    std::vector<std::array<std::optional<dnnl::matmul>, 4>> by_rows;  // [rows][f32 * 2 + accumulate]
  };
  dnnl::memory::desc packed_desc_;
  std::unique_ptr<Kernels> kernels_ = std::make_unique<Kernels>();
#endif
  std::int64_t in_ = 0, out_ = 0;
  at::Tensor packed_;  // [bytes] uint8: the weight in oneDNN's layout
};

REFDEC_NAMESPACE_END
