// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A reference Llama-family model: RMSNorm, rotary embeddings, grouped-query attention over a step
// plan (each row sees its sequence's cached prefix and the step rows its mask lists), SwiGLU,
// tied or untied output. It runs over any KvStore.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/cpu/bf16_kernels.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/attention_products.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/linear_choice.hpp"
#include "refdec/torch/packed_linear.hpp"
#include "refdec/torch/thread_scratch.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// How rotary embeddings pair the dimensions of a head.
enum class RopeStyle {
  kInterleaved,  ///< pairs (2i, 2i+1): llama2.c checkpoints
  kHalf,         ///< pairs (i, i + d/2): Hugging Face checkpoints (q/k weights permuted to match)
};

/// Shape and constants of a Llama-family model.
struct LlamaConfig {
  std::int64_t dim = 0;         ///< model width
  std::int64_t hidden_dim = 0;  ///< SwiGLU width
  std::int64_t n_layers = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;  ///< grouped-query attention: n_heads must be a multiple
  std::int64_t vocab_size = 0;
  std::int64_t max_seq_len = 0;  ///< trained context length: the default max context
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tied_embeddings = true;  ///< output projection shares the token embedding
  RopeStyle rope_style = RopeStyle::kInterleaved;
  std::int64_t bos_id = 1;
  std::int64_t eos_id = 2;

  std::int64_t head_dim() const { return n_heads > 0 ? dim / n_heads : 0; }

  /// Throws refdec::Error naming the first inconsistent field.
  void validate() const {
    REFDEC_CHECK(dim > 0 && hidden_dim > 0 && n_layers > 0 && n_heads > 0 && n_kv_heads > 0 && vocab_size > 0 && max_seq_len > 0,
                 "LlamaConfig: sizes must be positive (dim=" << dim << " hidden_dim=" << hidden_dim << " n_layers=" << n_layers
                                                             << " n_heads=" << n_heads << " n_kv_heads=" << n_kv_heads
                                                             << " vocab_size=" << vocab_size << " max_seq_len=" << max_seq_len << ")");
    REFDEC_CHECK(dim % n_heads == 0, "LlamaConfig: dim " << dim << " is not a multiple of n_heads " << n_heads);
    REFDEC_CHECK(head_dim() % 2 == 0, "LlamaConfig: head dimension " << head_dim() << " must be even");
    REFDEC_CHECK(n_heads % n_kv_heads == 0, "LlamaConfig: n_heads " << n_heads << " is not a multiple of n_kv_heads " << n_kv_heads);
    REFDEC_CHECK(rope_theta > 0 && norm_eps > 0, "LlamaConfig: rope_theta and norm_eps must be positive");
  }
};

/// Weights of one transformer block; projections are [out, in] as in torch.nn.Linear.
struct LlamaLayerWeights {
  at::Tensor attn_norm;  // [dim]
  at::Tensor wq;         // [n_heads * head_dim, dim]
  at::Tensor wk;         // [n_kv_heads * head_dim, dim]
  at::Tensor wv;         // [n_kv_heads * head_dim, dim]
  at::Tensor wo;         // [dim, n_heads * head_dim]
  at::Tensor ffn_norm;   // [dim]
  at::Tensor w1;         // [hidden_dim, dim] gate
  at::Tensor w2;         // [dim, hidden_dim] down
  at::Tensor w3;         // [hidden_dim, dim] up
};

/// Which kernel runs a model's linear layers. The packed kernels (PackedLinear: weights packed
/// once, q/k/v fused, SwiGLU and residuals in the products' epilogues) take bf16 or fp16 CPU
/// weights; asking for one this CPU cannot run throws refdec::ArgumentError naming what it lacks.
enum class LinearKernel {
  kAuto,        ///< the packed kernels where one runs here (kPacked), else kAten
  kAten,        ///< at::linear over the weights as given
  kPacked,      ///< oneDNN or the streaming kernel, whichever measures faster here (linear_choice.hpp)
  kOneDnn,      ///< PackedLinear on oneDNN's bf16 matmul (AVX-512 CPUs; bf16 weights)
  kStream,      ///< PackedLinear on refdec's streaming kernel, its tile set per row count measured
  kAvx2,        ///< the streaming kernel with its AVX2 tiles only (AVX2, FMA and F16C; bf16 or fp16)
  kAvx512,      ///< the streaming kernel with its AVX-512 tiles only (AVX-512 F/BW/VL; bf16 or fp16)
  kAvx512Bf16,  ///< the streaming kernel with its AVX512_BF16 tiles only (bf16)
  kStreamFp16,  ///< kStream with the AVX512_FP16 tiles among those measured (bf16; their sums round to fp16)
  kAvx512Fp16,  ///< the streaming kernel with its AVX512_FP16 tiles only (bf16; their sums round to fp16)
};

/// Every LinearKernel, in declaration order.
inline constexpr std::array<LinearKernel, 10> kAllLinearKernels = {
    LinearKernel::kAuto, LinearKernel::kAten,   LinearKernel::kPacked,     LinearKernel::kOneDnn,     LinearKernel::kStream,
    LinearKernel::kAvx2, LinearKernel::kAvx512, LinearKernel::kAvx512Bf16, LinearKernel::kStreamFp16, LinearKernel::kAvx512Fp16};

/// The kernel's name as options and reports spell it: "auto", "aten", "packed", "onednn",
/// "stream", "avx2", "avx512", "avx512-bf16", "stream-fp16", "avx512-fp16".
inline const char* linear_kernel_name(LinearKernel kernel) {
  switch (kernel) {
    case LinearKernel::kAuto: return "auto";
    case LinearKernel::kAten: return "aten";
    case LinearKernel::kPacked: return "packed";
    case LinearKernel::kOneDnn: return "onednn";
    case LinearKernel::kStream: return "stream";
    case LinearKernel::kAvx2: return stream_tiles_name(StreamTiles::kAvx2);
    case LinearKernel::kAvx512: return stream_tiles_name(StreamTiles::kAvx512);
    case LinearKernel::kAvx512Bf16: return stream_tiles_name(StreamTiles::kAvx512Bf16);
    case LinearKernel::kStreamFp16: return "stream-fp16";
    case LinearKernel::kAvx512Fp16: return stream_tiles_name(StreamTiles::kAvx512Fp16);
  }
  return "?";
}

/// The names linear_kernel_name() gives, each with what it runs, for a command line's help.
inline const char* linear_kernels_help() {
  return "auto (the packed kernels where one runs, else at::linear), aten (at::linear), packed (oneDNN or refdec's streaming kernel, "
         "whichever measures faster here; an error where none runs), onednn (oneDNN's bf16 matmul, AVX-512), stream (the streaming "
         "kernel, its tile set per row count measured), avx2, avx512 or avx512-bf16 (the streaming kernel with those tiles only), "
         "stream-fp16 or avx512-fp16 (the same with AVX512_FP16's tiles, whose sums round to fp16: faster steps of several tokens "
         "where vdpbf16ps is slow, a little less precise)";
}

/// The LinearKernel a name from linear_kernel_name() stands for; throws ArgumentError otherwise.
inline LinearKernel parse_linear_kernel(const std::string& name) {
  for (const LinearKernel k : kAllLinearKernels)
    if (name == linear_kernel_name(k)) return k;
  REFDEC_CHECK(false, "unknown linear kernel '" << name
                                                << "': use auto, aten, packed, onednn, stream, avx2, avx512, avx512-bf16, stream-fp16 or "
                                                   "avx512-fp16");
  return LinearKernel::kAuto;
}

/// All weights of a Llama-family model.
struct LlamaWeights {
  at::Tensor embedding;  // [vocab_size, dim]
  std::vector<LlamaLayerWeights> layers;
  at::Tensor final_norm;  // [dim]
  at::Tensor output;      // [vocab_size, dim]; the embedding itself when tied
};

/// The reference Llama-family model; forward() is const and keeps no state, so one model may serve
/// several threads, each with its own store. forward() runs a step plan (a draft tree and auxiliary tokens
/// per sequence) against any KV store, so one call verifies every sequence's tree.
class LlamaModel {
 public:
  /// Takes ownership of `weights` after checking every shape against `config`. With packed linear
  /// layers (`kernel`), the projections are reordered once into PackedLinear's layout and the
  /// tensors given for them are released (weights() then holds the embedding and the norms only).
  /// Where the kernel is measured (kAuto, kPacked, kStream), `choice` (from another model's
  /// linear_choice(), say, or LinearChoice::parse() of its describe() kept from an earlier load)
  /// is taken instead of measuring: it must run here, with a backend the request allows. A kernel
  /// named outright (kOneDnn, kAvx2, ...) ignores it.
  LlamaModel(LlamaConfig config, LlamaWeights weights, LinearKernel kernel = LinearKernel::kAuto,
             std::optional<LinearChoice> choice = std::nullopt)
      : config_(std::move(config)), w_(std::move(weights)) {
    config_.validate();
    const std::int64_t d = config_.dim, hd = config_.head_dim(), h = config_.hidden_dim;
    check_shape(w_.embedding, {config_.vocab_size, d}, "embedding");
    check_shape(w_.final_norm, {d}, "final_norm");
    if (!w_.output.defined()) w_.output = w_.embedding;
    check_shape(w_.output, {config_.vocab_size, d}, "output");
    REFDEC_CHECK(static_cast<std::int64_t>(w_.layers.size()) == config_.n_layers,
                 "LlamaModel: " << w_.layers.size() << " layers of weights for n_layers = " << config_.n_layers);
    for (const auto& l : w_.layers) {
      check_shape(l.attn_norm, {d}, "attn_norm");
      check_shape(l.wq, {config_.n_heads * hd, d}, "wq");
      check_shape(l.wk, {config_.n_kv_heads * hd, d}, "wk");
      check_shape(l.wv, {config_.n_kv_heads * hd, d}, "wv");
      check_shape(l.wo, {d, config_.n_heads * hd}, "wo");
      check_shape(l.ffn_norm, {d}, "ffn_norm");
      check_shape(l.w1, {h, d}, "w1");
      check_shape(l.w2, {d, h}, "w2");
      check_shape(l.w3, {h, d}, "w3");
    }
    inv_freq_ = at::pow(config_.rope_theta, -at::arange(0, hd, 2, at::TensorOptions().dtype(at::kDouble)) / static_cast<double>(hd));
    choose_linear_path(kernel, std::move(choice));
    if (linear_path_ != LinearKernel::kAten) pack();
  }

  /// A model with seeded random weights (for tests and for running without a checkpoint).
  static LlamaModel random(const LlamaConfig& config, std::uint64_t seed, at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU,
                           LinearKernel kernel = LinearKernel::kAuto, std::optional<LinearChoice> choice = std::nullopt) {
    config.validate();
    auto gen = at::detail::createCPUGenerator(seed);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    // Gaussian init scaled by 1/sqrt(fan_in) keeps activations O(1), so logits are peaked
    // enough that greedy decoding rarely meets near-ties.
    auto linear = [&](std::int64_t out, std::int64_t in) {
      return (at::randn({out, in}, gen, f32) / std::sqrt(static_cast<double>(in))).to(device, dtype);
    };
    auto norm = [&](std::int64_t n) { return (1.0 + 0.1 * at::randn({n}, gen, f32)).to(device, dtype); };
    const std::int64_t d = config.dim, hd = config.head_dim();
    LlamaWeights w;
    w.embedding = at::randn({config.vocab_size, d}, gen, f32).to(device, dtype);
    for (std::int64_t i = 0; i < config.n_layers; ++i) {
      LlamaLayerWeights l;
      l.attn_norm = norm(d);
      l.wq = linear(config.n_heads * hd, d);
      l.wk = linear(config.n_kv_heads * hd, d);
      l.wv = linear(config.n_kv_heads * hd, d);
      l.wo = linear(d, config.n_heads * hd);
      l.ffn_norm = norm(d);
      l.w1 = linear(config.hidden_dim, d);
      l.w2 = linear(d, config.hidden_dim);
      l.w3 = linear(config.hidden_dim, d);
      w.layers.push_back(l);
    }
    w.final_norm = norm(d);
    w.output = config.tied_embeddings ? w.embedding : linear(config.vocab_size, d);
    return LlamaModel(config, std::move(w), kernel, std::move(choice));
  }

  const LlamaConfig& config() const { return config_; }
  /// The weights as given; a model with packed linear layers keeps only the embedding and norms here.
  const LlamaWeights& weights() const { return w_; }
  /// Whether the linear layers run PackedLinear (LinearKernel). Attention's products then read
  /// the cache in place (attention_products.hpp): through oneDNN where it runs bf16, else through
  /// refdec's AVX2 kernel, else in float32.
  bool packed() const { return !packed_.empty(); }
  /// The kernel the linear layers run on: kAten, kOneDnn or kStream (the others are requests).
  LinearKernel linear_kernel() const { return linear_path_; }
  /// The packed layers' backend and tile sets and why (packed() only): what another model of
  /// this machine can be given instead of measuring.
  const LinearChoice& linear_choice() const { return choice_; }
  /// Which kernel the linear layers run on and why it was chosen, in words (for reports):
  /// "stream (avx512-bf16 from 1 row) (measured: one layer's products at 1/2/4... rows: ...)".
  const std::string& linear_path() const { return linear_reason_; }
  /// Bytes of every weight a decoding step reads: projections, norms and the output layer (the
  /// embedding only where it is the tied output layer: a step gathers just its rows otherwise).
  std::int64_t step_weight_bytes() const {
    const auto bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0; };
    std::int64_t n = bytes(w_.final_norm);
    if (packed()) {
      n += packed_output_->bytes();
      for (const auto& l : packed_) n += l.qkv->bytes() + l.o->bytes() + l.gate->bytes() + l.up->bytes() + l.down->bytes();
    } else {
      n += bytes(w_.output);
    }
    for (const auto& l : w_.layers)
      for (const at::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w1, &l.w2, &l.w3}) n += bytes(*t);
    return n;
  }
  std::int64_t vocab_size() const { return config_.vocab_size; }
  std::int64_t max_seq_len() const { return config_.max_seq_len; }
  at::ScalarType dtype() const { return w_.embedding.scalar_type(); }
  at::Device device() const { return w_.embedding.device(); }

  /// A copy of this model with its weights in `dtype` on `device` (ties are kept), its linear
  /// layers on `kernel`.
  LlamaModel to(at::ScalarType dtype, at::Device device, LinearKernel kernel = LinearKernel::kAuto) const {
    REFDEC_CHECK(!packed(),
                 "LlamaModel::to: this model's linear layers are packed and their weights released; "
                 "convert the model before packing (LinearKernel::kAten keeps the weights)");
    auto cv = [&](const at::Tensor& t) { return t.to(device, dtype); };
    LlamaWeights w;
    w.embedding = cv(w_.embedding);
    for (const auto& l : w_.layers)
      w.layers.push_back({cv(l.attn_norm), cv(l.wq), cv(l.wk), cv(l.wv), cv(l.wo), cv(l.ffn_norm), cv(l.w1), cv(l.w2), cv(l.w3)});
    w.final_norm = cv(w_.final_norm);
    w.output = w_.output.is_same(w_.embedding) ? w.embedding : cv(w_.output);
    return LlamaModel(config_, std::move(w), kernel);
  }

  /// What the model stores per token, for building a KV store.
  KvLayout kv_layout() const {
    return {config_.n_layers, config_.n_kv_heads, config_.head_dim(), at::TensorOptions().dtype(dtype()).device(device())};
  }

  /// Runs the step `plan` over `store` (whose sequences are the plan's, in order): writes every
  /// row's keys and values with store.write(), and lets row i of sequence b attend to the
  /// sequence's cached entries and to the step rows plan.sees(b, i, .). Returns logits
  /// [plan.rows(), vocab_size] in float32 (float64 for a float64 model). Never builds a mask over
  /// the cache: per sequence, scores over cached entries and step rows come from one product, and
  /// only the step columns get the plan's [rows(b), rows(b)] mask.
  template <KvStore Store>
  at::Tensor forward(const StepPlan& plan, Store& store) const {
    torch_detail::check_plan_rows(plan, config_.vocab_size, "LlamaModel::forward");
    const std::int64_t R = plan.rows();
    const std::int64_t H = config_.n_heads, KV = config_.n_kv_heads, D = config_.head_dim(), G = H / KV;
    const auto dt = dtype();
    const auto compute = at::promote_types(dt, at::kFloat);  // norms and softmax in at least fp32
    const auto opts = at::TensorOptions().dtype(dt).device(device());

    store.begin_step(plan);
    const auto ids = at::tensor(at::ArrayRef<Token>(plan.tokens), at::kInt).to(device(), at::kLong);  // [R]
    // cos and sin of every row's angles: [R, D/2] float for the packed path's in-place rotation,
    // [R, 1, D/2] in the model's dtype for the reference path's.
    auto [cos, sin] = rotary(at::tensor(at::ArrayRef<std::int64_t>(plan.positions), at::kLong).to(device()));
    for (at::Tensor* t : {&cos, &sin}) *t = packed() ? t->to(at::kFloat) : t->to(dt).unsqueeze(1);
    // Additive step-local masks: [rows(b), rows(b)] per sequence, 0 where the plan's bit is set;
    // none (undefined) for a lone row that sees itself, which has nothing to mask.
    std::vector<at::Tensor> bias;
    for (std::int32_t b = 0; b < plan.batch(); ++b) {
      const std::int32_t n = plan.rows(b);
      if (n == 1 && plan.sees(b, 0, 0)) {
        bias.emplace_back();
        continue;
      }
      auto host = at::full({n, n}, -std::numeric_limits<double>::infinity(), at::TensorOptions().dtype(at::kFloat));
      float* hp = host.data_ptr<float>();
      for (std::int32_t i = 0; i < n; ++i)
        for (std::int32_t j = 0; j < n; ++j)
          if (plan.sees(b, i, j)) hp[static_cast<std::int64_t>(i) * n + j] = 0.0f;
      bias.push_back(packed() ? host : host.to(opts));  // the packed path adds it to float32 scores
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));

    auto x = at::embedding(w_.embedding, ids);  // [R, dim]
    std::vector<at::Tensor> heads(static_cast<std::size_t>(plan.batch()));
    for (std::int64_t li = 0; li < config_.n_layers; ++li) {
      const auto& l = w_.layers[static_cast<std::size_t>(li)];
      at::Tensor q, k, v;
      if (packed()) {  // one fused product, its q and k heads rotated in place, then views of its columns
        const auto qkv = (*packed_[static_cast<std::size_t>(li)].qkv)(fused_rms_norm(x, l.attn_norm));
        rotate_rows(qkv, H + KV, cos, sin);
        q = qkv.narrow(1, 0, H * D).view({R, H, D});
        k = qkv.narrow(1, H * D, KV * D).view({R, KV, D});
        v = qkv.narrow(1, (H + KV) * D, KV * D).view({R, KV, D});
      } else {
        const auto h = rms_norm(x, l.attn_norm, compute);
        q = rope(at::linear(h, l.wq).view({R, H, D}), cos, sin);
        k = rope(at::linear(h, l.wk).view({R, KV, D}), cos, sin);
        v = at::linear(h, l.wv).view({R, KV, D});
      }
      store.write(li, k, v);
      for (std::int32_t b = 0; b < plan.batch(); ++b) {
        const std::int64_t n = plan.rows(b), first = plan.indptr[static_cast<std::size_t>(b)];
        // Query head h reads kv head h / G: group the G query heads of a kv head together.
        const auto qg = q.narrow(0, first, n).permute({1, 0, 2}).reshape({KV, G * n, D});  // [KV, G*n, D]
        const auto& mask = bias[static_cast<std::size_t>(b)];
        at::Tensor attended_heads;  // [KV, G*n, D] in the model's dtype
        // A paged store's blocks are read where they lie by refdec's kernels (AVX512_BF16 where
        // avx2_attention_takes_bf16(), else AVX2, on any CPU that runs them: the alternative is
        // a copy of the whole prefix per layer).
        if constexpr (PagedKvRead<Store>) {
          if (packed()) {
            const PagedEntries entries = store.read_paged(li, b);
            if (avx2_attention_supported(entries)) attended_heads = avx2_attention(qg, entries, mask, scale);
          }
        }
        if (!attended_heads.defined()) {
          const auto [keys, values] = store.read(li, b);  // [S, KV, D] each: cached entries, then the step rows
          const std::int64_t S = keys.size(0);
          // The packed path reads the cache in place (attention_products.hpp): through refdec's
          // AVX512_BF16 kernel where it runs (a step of the 1.1B shape took 0.93 of its time with
          // oneDNN's products: docs/speed.md), else through oneDNN where it runs bf16, else through
          // refdec's AVX2 kernel; float32 products where none runs.
          const bool refdec = packed() && avx2_attention_supported(keys) && avx2_attention_supported(values);
          const bool bf16 = refdec && avx2_attention_takes_bf16(qg.scalar_type(), torch_detail::half_format(keys), D);
          const bool onednn = packed() && !bf16 && attention_products_supported(keys) && attention_products_supported(values);
          const bool avx2 = refdec && !onednn;
          // (No lambdas over keys and values: clang 14 cannot capture structured bindings.)
          if (avx2) {
            attended_heads = avx2_attention(qg, keys, values, mask, scale);
          } else if (onednn) {  // its temporaries in this thread's scratch (thread_scratch.hpp)
            using torch_detail::ScratchSlot, torch_detail::thread_scratch;
            const auto scores = thread_scratch(ScratchSlot::kAttentionScores, {KV, G * n, S}, at::kFloat);
            attention_scores_into(qg, keys, scale, scores);
            mask_softmax_in_place(scores, mask);
            const auto probs = thread_scratch(ScratchSlot::kAttentionProbs, {KV, G * n, S}, dt);
            probs.copy_(scores);
            attended_heads = attention_values(probs, values);
          } else {
            const auto pt = packed() ? at::kFloat : dt;  // the dtype of ATen's products
            auto scores = (at::matmul(qg.to(pt), keys.permute({1, 2, 0}).to(pt)) * scale).view({KV, G, n, S});
            if (mask.defined()) scores.narrow(-1, S - n, n).add_(mask);
            const auto probs = at::softmax(scores, -1, compute).to(pt).view({KV, G * n, S});
            attended_heads = at::matmul(probs, values.permute({1, 0, 2}).to(pt)).to(dt);
          }
        }
        heads[static_cast<std::size_t>(b)] = attended_heads
                                                 .view({H, n, D})  // [KV, G*n, D] viewed per query head
                                                 .permute({1, 0, 2})
                                                 .reshape({n, H * D});
      }
      const auto attended = plan.batch() == 1 ? heads[0] : at::cat(heads, 0);
      if (packed()) {  // residual additions fused into the products: x is this pass's own tensor
        const auto& p = packed_[static_cast<std::size_t>(li)];
        p.o->run(attended.contiguous(), x, Epilogue::kAccumulate);
        const auto h = fused_rms_norm(x, l.ffn_norm);
        const auto gate = (*p.gate)(h, std::nullopt, Epilogue::kSilu);
        p.down->run((*p.up)(h, std::nullopt, Epilogue::kMultiply, gate), x, Epilogue::kAccumulate);
      } else {
        x = x + at::linear(attended, l.wo);
        const auto h = rms_norm(x, l.ffn_norm, compute);
        x = x + at::linear(at::silu(at::linear(h, l.w1)) * at::linear(h, l.w3), l.w2);
      }
    }
    if (packed()) return (*packed_output_)(fused_rms_norm(x, w_.final_norm), at::kFloat);
    return at::linear(rms_norm(x, w_.final_norm, compute), w_.output).to(compute);
  }

 private:
  static void check_shape(const at::Tensor& t, std::vector<std::int64_t> want, const char* name) {
    REFDEC_CHECK(t.defined(), "LlamaModel: weight " << name << " is missing");
    REFDEC_CHECK(t.sizes() == at::IntArrayRef(want),
                 "LlamaModel: weight " << name << " has shape " << t.sizes() << ", expected " << at::IntArrayRef(want));
  }

  // Decides linear_path_, choice_ and linear_reason_ from what was asked for, what this CPU runs
  // and, where asked, a measurement.
  void choose_linear_path(LinearKernel kernel, std::optional<LinearChoice> given) {
    const at::ScalarType dt = w_.embedding.scalar_type();
    const bool half = w_.embedding.device().is_cpu() && (dt == at::kBFloat16 || dt == at::kHalf);
    const HalfFormat format = dt == at::kHalf ? HalfFormat::kFp16 : HalfFormat::kBf16;
    const std::string isa = "CPU: " + cpu_isa().describe();
    const std::string asked = "LinearKernel \"" + std::string(linear_kernel_name(kernel)) + "\"";
    if (kernel == LinearKernel::kAten) {
      linear_path_ = LinearKernel::kAten, linear_reason_ = "aten (asked for)";
      return;
    }
    const bool fp16_sums = kernel == LinearKernel::kStreamFp16 || kernel == LinearKernel::kAvx512Fp16;
    const auto candidates = half ? linear_candidates_here(dt, fp16_sums) : std::vector<LinearCandidate>{};
    if (candidates.empty()) {
      const std::string why = !half ? "packed kernels take bf16 or fp16 CPU weights, these are " + w_.embedding.toString()
                                    : packed_backend_unavailable(PackedBackend::kOneDnn, dt) + "; " +
                                          packed_backend_unavailable(PackedBackend::kStream, dt);
      REFDEC_CHECK(kernel == LinearKernel::kAuto, "LlamaModel: " << asked << " cannot run " << w_.embedding.toString() << " weights here: "
                                                                 << why << "; use LinearKernel::kAuto (the fastest that runs) or kAten");
      linear_path_ = LinearKernel::kAten, linear_reason_ = "aten (" + why + ")";
      return;
    }
    // The candidates the request allows.
    std::vector<LinearCandidate> allowed;
    for (const auto& c : candidates) {
      const bool ok = kernel == LinearKernel::kAuto || kernel == LinearKernel::kPacked ||
                      (kernel == LinearKernel::kOneDnn && c.backend == PackedBackend::kOneDnn) ||
                      ((kernel == LinearKernel::kStream || kernel == LinearKernel::kStreamFp16) && c.backend == PackedBackend::kStream) ||
                      (c.backend == PackedBackend::kStream && linear_kernel_name(kernel) == c.name());
      if (ok) allowed.push_back(c);
    }
    if (allowed.empty()) {
      const bool onednn = kernel == LinearKernel::kOneDnn;
      const std::string why = onednn ? packed_backend_unavailable(PackedBackend::kOneDnn, dt)
                              : !packed_backend_unavailable(PackedBackend::kStream, dt).empty()
                                  ? packed_backend_unavailable(PackedBackend::kStream, dt)
                                  : StreamLinear::unavailable(kernel == LinearKernel::kAvx512Bf16   ? StreamTiles::kAvx512Bf16
                                                              : kernel == LinearKernel::kAvx512Fp16 ? StreamTiles::kAvx512Fp16
                                                              : kernel == LinearKernel::kAvx512     ? StreamTiles::kAvx512
                                                                                                    : StreamTiles::kAvx2,
                                                              format);
      REFDEC_CHECK(false, "LlamaModel: " << asked << " cannot run " << w_.embedding.toString() << " weights here: " << why
                                         << "; use LinearKernel::kAuto (the fastest that runs) or kAten");
    }
    const bool measured = kernel == LinearKernel::kAuto || kernel == LinearKernel::kPacked || kernel == LinearKernel::kStream ||
                          kernel == LinearKernel::kStreamFp16;
    if (given && measured) {
      const bool runs = std::any_of(allowed.begin(), allowed.end(),
                                    [&](const LinearCandidate& c) { return c.backend == given->backend; }) &&
                        packed_backend_unavailable(given->backend, dt).empty() &&
                        std::all_of(given->tiles.ranges().begin(), given->tiles.ranges().end(),
                                    [&](const auto& r) { return StreamLinear::unavailable(r.second.tiles, format).empty(); });
      REFDEC_CHECK(runs, "LlamaModel: the LinearChoice given (" << given->describe() << ") does not run " << w_.embedding.toString()
                                                                << " weights here under " << asked << " (" << isa << ")");
      choice_ = std::move(*given);
      if (choice_.reason.empty()) choice_.reason = "given";
    } else if (allowed.size() == 1) {
      choice_.backend = allowed.front().backend;
      if (choice_.backend == PackedBackend::kStream) choice_.tiles = TilesByRows(allowed.front().tiles);
      choice_.reason = (kernel == LinearKernel::kAuto || kernel == LinearKernel::kPacked ? "the only packed kernel here; "
                                                                                         : "asked for; ") +
                       isa;
    } else {
      const auto& l = w_.layers.front();  // one layer's products, as a step runs them
      const std::vector<at::Tensor> layer = {at::cat({l.wq, l.wk, l.wv}, 0), l.wo, l.w1, l.w3, l.w2};
      // Between two passes over a layer a step reads the others and the output layer.
      std::int64_t layer_bytes = 0;
      for (const auto& w : layer) layer_bytes += w.numel() * static_cast<std::int64_t>(w.element_size());
      const std::int64_t others = (config_.n_layers - 1) * layer_bytes +
                                  w_.output.numel() * static_cast<std::int64_t>(w_.output.element_size());
      choice_ = torch_detail::cached_calibration(layer, allowed, std::min(others, kEvictBytes)).choose();
    }
    linear_path_ = choice_.backend == PackedBackend::kOneDnn ? LinearKernel::kOneDnn : LinearKernel::kStream;
    linear_reason_ = choice_.describe() + " (" + choice_.reason + ")";
#ifndef _OPENMP
    if (linear_path_ == LinearKernel::kStream)  // at::parallel_for's OpenMP region is compiled here
      linear_reason_ += "; on one thread: this code was compiled without OpenMP (-fopenmp)";
#endif
  }

  // Packs every projection as choice_ says and releases the tensors given for them; the
  // embedding stays for the token lookup.
  void pack() {
    const auto packed = [this](const at::Tensor& w) { return std::make_shared<const PackedLinear>(w, choice_.backend, choice_.tiles); };
    // The fused RMSNorm reads the norms' weights as arrays of the model's dtype.
    const auto as_array = [dt = dtype()](const at::Tensor& w) { return w.to(at::kCPU, dt).contiguous(); };
    w_.final_norm = as_array(w_.final_norm);
    for (auto& l : w_.layers) {
      l.attn_norm = as_array(l.attn_norm);
      l.ffn_norm = as_array(l.ffn_norm);
      packed_.push_back({packed(at::cat({l.wq, l.wk, l.wv}, 0)), packed(l.wo), packed(l.w1), packed(l.w3), packed(l.w2)});
      l.wq = l.wk = l.wv = l.wo = l.w1 = l.w2 = l.w3 = at::Tensor();
    }
    packed_output_ = packed(w_.output);
    if (!w_.output.is_same(w_.embedding)) w_.output = at::Tensor();
  }

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, at::ScalarType compute) const {
    const auto xf = x.to(compute);
    return (xf * at::rsqrt(xf.pow(2).mean(-1, true) + config_.norm_eps)).to(x.scalar_type()) * w;
  }

  // The packed path's RMSNorm and rotary embedding, one pass per row each (bf16_kernels.hpp)
  // instead of a chain of ATen ops: x and w are contiguous bf16 or fp16 CPU tensors (the model's
  // dtype), the tables float.
  static std::uint16_t* bits(const at::Tensor& t) { return static_cast<std::uint16_t*>(t.data_ptr()); }
  at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& w) const {
    auto out = at::empty_like(x);
    const std::int64_t n = x.size(1);
    const auto norm = dtype() == at::kHalf ? half::rms_norm<HalfFormat::kFp16> : half::rms_norm<HalfFormat::kBf16>;
    for (std::int64_t r = 0; r < x.size(0); ++r)
      norm(bits(x) + r * n, bits(w), bits(out) + r * n, static_cast<std::size_t>(n), static_cast<float>(config_.norm_eps));
    return out;
  }
  // Rotates the first `heads` heads of each row of `rows` ([R, >= heads * D]) in place.
  void rotate_rows(const at::Tensor& rows, std::int64_t heads, const at::Tensor& cos, const at::Tensor& sin) const {
    const std::int64_t D = config_.head_dim(), pairs = D / 2;
    const auto turn = dtype() == at::kHalf ? half::rotate<HalfFormat::kFp16> : half::rotate<HalfFormat::kBf16>;
    for (std::int64_t r = 0; r < rows.size(0); ++r)
      turn(bits(rows) + r * rows.size(1), static_cast<std::size_t>(heads), static_cast<std::size_t>(D), cos.data_ptr<float>() + r * pairs,
           sin.data_ptr<float>() + r * pairs, config_.rope_style == RopeStyle::kHalf);
  }

  // cos and sin of position * inverse frequency, computed in float64: [R, D/2] each.
  std::pair<at::Tensor, at::Tensor> rotary(const at::Tensor& positions) const {
    const auto angles = positions.to(at::kDouble).unsqueeze(-1) * inv_freq_.to(positions.device());
    return {at::cos(angles), at::sin(angles)};
  }

  // x: [R, heads, D].
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const {
    const std::int64_t half = x.size(-1) / 2;
    if (config_.rope_style == RopeStyle::kHalf) {
      const auto x0 = x.narrow(-1, 0, half), x1 = x.narrow(-1, half, half);
      return at::cat({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1);
    }
    const auto pairs = x.reshape({x.size(0), x.size(1), half, 2});  // [R, heads, D/2, 2]
    const auto x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
    return at::stack({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1).flatten(-2);
  }

  // One layer's projections for PackedLinear: q, k, v fused into one [(H + 2 KV) D, dim] product;
  // SwiGLU's silu and product in the gate's and the up projection's epilogues.
  struct PackedLayer {
    std::shared_ptr<const PackedLinear> qkv, o, gate, up, down;
  };

  LlamaConfig config_;
  LlamaWeights w_;
  LinearKernel linear_path_ = LinearKernel::kAten;
  LinearChoice choice_;  // packed() only
  std::string linear_reason_;
  std::vector<PackedLayer> packed_;  // empty when the model runs at::linear
  std::shared_ptr<const PackedLinear> packed_output_;
  at::Tensor inv_freq_;  // [head_dim / 2] float64
};

REFDEC_TORCH_NAMESPACE_END
