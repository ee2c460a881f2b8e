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
#include <unordered_map>
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

/// What PackedLinear::run() does with x W^T as it writes its output, inside oneDNN's product (a
/// post-op: no pass of its own over the result).
enum class Epilogue {
  kStore,       ///< out = x W^T
  kAccumulate,  ///< out += x W^T: a residual connection
  kSilu,        ///< out = silu(x W^T): SwiGLU's gate
  kMultiply,    ///< out = (x W^T) * other: SwiGLU's up projection times the gate
};

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
    const auto pd = primitive_desc(1, dnnl::memory::desc({in_, out_}, dnnl::memory::data_type::bf16, tag::any), false, Epilogue::kStore);
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

  /// out = x W^T, with `epilogue` applied: x [rows, in] bf16, contiguous; out [rows,
  /// out_features()], contiguous, bf16 or float32; `other` (Epilogue::kMultiply only) like out,
  /// bf16, not overlapping it. Rounds once, after the epilogue.
  void run(const at::Tensor& x, const at::Tensor& out, Epilogue epilogue = Epilogue::kStore, const at::Tensor& other = {}) const {
    REFDEC_CHECK(x.dim() == 2 && x.size(1) == in_ && x.scalar_type() == at::kBFloat16 && x.is_contiguous() && x.device().is_cpu(),
                 "PackedLinear: input must be a contiguous bf16 CPU [rows, " << in_ << "], got " << x.toString() << " " << x.sizes());
    REFDEC_CHECK(out.dim() == 2 && out.size(0) == x.size(0) && out.size(1) == out_ && out.is_contiguous() &&
                     (out.scalar_type() == at::kBFloat16 || out.scalar_type() == at::kFloat) && out.device().is_cpu(),
                 "PackedLinear: output must be a contiguous bf16 or float32 CPU [" << x.size(0) << ", " << out_ << "], got "
                                                                                  << out.toString() << " " << out.sizes());
    const bool multiply = epilogue == Epilogue::kMultiply;
    REFDEC_CHECK(multiply == other.defined(), "PackedLinear: Epilogue::kMultiply needs the tensor to multiply by, and only it takes one");
    REFDEC_CHECK(!multiply || (other.sizes() == out.sizes() && other.scalar_type() == at::kBFloat16 && other.is_contiguous() &&
                               other.device().is_cpu() && other.data_ptr() != out.data_ptr()),
                 "PackedLinear: the tensor to multiply by must be a contiguous bf16 CPU " << out.sizes() << " apart from the output, got "
                                                                                        << other.toString() << " " << other.sizes());
    if (x.size(0) == 0) return;
#if REFDEC_HAVE_ONEDNN
    const bool f32 = out.scalar_type() == at::kFloat;
    const dnnl::matmul kernel = kernel_for(x.size(0), f32, epilogue);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::engine& engine = detail::onednn_engine();
    const dnnl::memory::desc dst_desc({x.size(0), out_}, f32 ? dt::f32 : dt::bf16, tag::ab);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory({{x.size(0), in_}, dt::bf16, tag::ab}, engine, x.data_ptr())},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(packed_desc_, engine, packed_.data_ptr())},
                                               {DNNL_ARG_DST, dnnl::memory(dst_desc, engine, out.data_ptr())}};
    if (multiply)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   dnnl::memory({{x.size(0), out_}, dt::bf16, tag::ab}, engine, other.data_ptr()));
    thread_local dnnl::stream stream(engine);
    kernel.execute(stream, args);
    stream.wait();
#endif
  }

  /// x W^T as a new [rows, out_features()] tensor of `dtype` (bf16 or float32), with `epilogue`
  /// (not Epilogue::kAccumulate: there is nothing to add to) and `other` as run() takes them.
  at::Tensor operator()(const at::Tensor& x, at::ScalarType dtype = at::kBFloat16, Epilogue epilogue = Epilogue::kStore,
                        const at::Tensor& other = {}) const {
    REFDEC_CHECK(epilogue != Epilogue::kAccumulate, "PackedLinear: Epilogue::kAccumulate adds to an output: call run()");
    auto out = at::empty({x.size(0), out_}, x.options().dtype(dtype));
    run(x, out, epilogue, other);
    return out;
  }

 private:
#if REFDEC_HAVE_ONEDNN
  dnnl::matmul::primitive_desc primitive_desc(std::int64_t rows, const dnnl::memory::desc& weights, bool f32,
                                              Epilogue epilogue) const {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src({rows, in_}, dt::bf16, tag::ab), dst({rows, out_}, f32 ? dt::f32 : dt::bf16, tag::ab);
    dnnl::post_ops ops;
    if (epilogue == Epilogue::kAccumulate) ops.append_sum(1.0f);
    if (epilogue == Epilogue::kSilu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);  // x sigmoid(1 x)
    if (epilogue == Epilogue::kMultiply) ops.append_binary(dnnl::algorithm::binary_mul, {{rows, out_}, dt::bf16, tag::ab});
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, detail::onednn_engine());
  }

  // A primitive is specialised to its row count (runtime row counts fall back to oneDNN's
  // reference kernel), and creating one costs about 80 µs: each is made once and kept.
  dnnl::matmul kernel_for(std::int64_t rows, bool f32, Epilogue epilogue) const {
    const std::lock_guard lock(kernels_->mutex);
    auto& by_rows = kernels_->by_rows;
    if (static_cast<std::int64_t>(by_rows.size()) <= rows) by_rows.resize(static_cast<std::size_t>(rows) + 1);
    auto& slot = by_rows[static_cast<std::size_t>(rows)][(f32 ? kEpilogues : 0) + static_cast<std::size_t>(epilogue)];
    if (!slot) slot.emplace(primitive_desc(rows, packed_desc_, f32, epilogue));
    return *slot;  // a copy of the handle: the slot may move when another thread grows by_rows
  }

  static constexpr std::size_t kEpilogues = 4;
  struct Kernels {
    std::mutex mutex;
    std::vector<std::array<std::optional<dnnl::matmul>, 2 * kEpilogues>> by_rows;  // [rows][f32 * kEpilogues + epilogue]
  };
  dnnl::memory::desc packed_desc_;
  std::unique_ptr<Kernels> kernels_ = std::make_unique<Kernels>();
#endif
  std::int64_t in_ = 0, out_ = 0;
  at::Tensor packed_;  // [bytes] uint8: the weight in oneDNN's layout
};

REFDEC_NAMESPACE_END
