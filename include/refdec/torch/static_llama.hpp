// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The reference Llama model as a static-shape step, the shape every graph-capturing engine runs:
// a step is padded to its bucket (StaticKvStore), its inputs are copied into the bucket's fixed
// buffers in one go, and the step itself (embedding, every layer, the output layer) reads only
// those buffers, the weights and the store's cache, never synchronises with the host and keeps
// every shape fixed, so that on a GPU it is captured once per bucket in a CUDA graph and replayed
// (StepGraph), and elsewhere runs eagerly, the same operations one by one.
//
// Attention of padded row (b, i) covers all entries of sequence b's cache: the cached prefix
// (entry < length) and the step's rows the plan's mask lists (entry length + j), through an
// additive [Bb, T, entries] mask built on the device once per step. The keys and values of the
// step rows are scattered into the cache first. Against LlamaModel's forward (its reference, over
// the same plan), the weights are laid out for fewer launches: q, k and v in one product, gate and
// up in one, rotary embeddings as one complex product per layer (q's scale folded into its
// factors; v rides along unchanged, so that keys and values are written to the cache in one
// scatter), residuals added in the products (addmm_). On a GPU the rotary product with the cache
// scatter and SwiGLU can also run as fused kernels, products of up to kLinearKernelRows rows
// through a kernel that streams each weight once, and attention in one launch that reads only
// the entries a row sees, a paged pool's in place (set_kernels(), core/static_step_device.hpp).

#include <ATen/ATen.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/static_step_device.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/cuda_graph.hpp"
#include "refdec/torch/kv_store.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/static_kv_store.hpp"
#include "refdec/torch/static_paged_kv_store.hpp"

#if REFDEC_TORCH_CUDA
#include <torch/version.h>
#endif

REFDEC_TORCH_NAMESPACE_BEGIN

/// The fused kernels' element type of `type` (float32 for any type but bf16 and fp16, which the
/// kernels do not run: fused() excludes float64).
inline ElementType kernel_element_type(at::ScalarType type) {
  return type == at::kBFloat16 ? ElementType::kBFloat16 : type == at::kHalf ? ElementType::kFloat16 : ElementType::kFloat32;
}

/// A Llama-family model that runs steps over a StaticKvStore (or a StaticPagedKvStore) as
/// static-shape, capturable work (see the file comment); CausalLM<StaticLlama, StaticKvStore>, so
/// verify() and Session drive it as they drive LlamaModel. forward() is const; what a step needs besides the weights lives in
/// the store.
class StaticLlama {
 public:
  /// The weights of `model` laid out for the static step (q/k/v and gate/up concatenated; the
  /// norms, wo, w2 and the output layer shared with `model`). `model` must run at::linear
  /// (LinearKernel::kAten): packed CPU layers have released the weights read here.
  explicit StaticLlama(const LlamaModel& model) : config_(model.config()), id_(next_id()) {
    REFDEC_CHECK(!model.packed(),
                 "StaticLlama: the model's linear layers are packed (" << model.linear_path() << "); build it with LinearKernel::kAten");
    const LlamaWeights& w = model.weights();
    const std::int64_t D = config_.head_dim();
    for (const auto& l : w.layers) {
      Layer s;
      s.attn_norm = l.attn_norm;
      s.ffn_norm = l.ffn_norm;
      // Half-style rotary embeddings pair dimension i with i + D/2; the complex product pairs
      // (2i, 2i + 1). Reordering the rows of wq and wk alike to the interleaved order leaves
      // every q.k product unchanged (the cache then holds keys in that order).
      const auto qk_order = [&](const at::Tensor& t, std::int64_t heads) {
        if (config_.rope_style == RopeStyle::kInterleaved) return t;
        return t.view({heads, 2, D / 2, config_.dim}).transpose(1, 2).reshape({heads * D, config_.dim});
      };
      s.wqkv = at::cat({qk_order(l.wq, config_.n_heads), qk_order(l.wk, config_.n_kv_heads), l.wv}, 0);
      s.wo = l.wo;
      s.w13 = at::cat({l.w1, l.w3}, 0);
      s.w2 = l.w2;
      layers_.push_back(std::move(s));
    }
    embedding_ = w.embedding;
    final_norm_ = w.final_norm;
    output_ = w.output;
  }

  /// Runs the step's fused operations (the rotary scatter, SwiGLU and, where `kernels` has them,
  /// the few-row linear product and attention: core/static_step_device.hpp) through `kernels` on
  /// a CUDA device, for float32, bf16 and fp16 weights: cuda_static_kernels() of
  /// refdec/cuda/static_kernels.cuh, from a translation unit nvcc compiles. StaticKernels{} goes
  /// back to torch operations. Stores capture this model's graphs again after a change.
  void set_kernels(const StaticKernels& kernels) {
    kernels_ = kernels;
    id_ = next_id();
  }
  /// Whether steps on this model's device run the fused kernels (set_kernels()).
  bool fused() const {
    return kernels_.rotary_scatter != nullptr && kernels_.swiglu != nullptr && device().is_cuda() && dtype() != at::kDouble;
  }

  const LlamaConfig& config() const { return config_; }
  std::int64_t vocab_size() const { return config_.vocab_size; }
  std::int64_t max_seq_len() const { return config_.max_seq_len; }
  at::ScalarType dtype() const { return embedding_.scalar_type(); }
  at::Device device() const { return embedding_.device(); }
  /// What a store holds per token.
  KvLayout kv_layout() const {
    return {config_.n_layers, config_.n_kv_heads, config_.head_dim(), at::TensorOptions().dtype(dtype()).device(device())};
  }

  /// Runs the step `plan` over `store` as LlamaModel::forward does (same contract: writes every
  /// row's keys and values, returns logits [plan.rows(), vocab] in float32, float64 for a float64
  /// model), padded to the store's bucket for it; on a CUDA device with store.options().graphs
  /// the bucket's step is captured the first time and replayed after. The logits are a view of
  /// the bucket's output, valid until the store's next step.
  at::Tensor forward(const StepPlan& plan, StaticKvStore& store) const { return forward_static(plan, store); }
  /// The same over a paged cache (StaticPagedKvStore): attention gathers each sequence's entries
  /// by their pool slots.
  at::Tensor forward(const StepPlan& plan, StaticPagedKvStore& store) const { return forward_static(plan, store); }

 private:
  template <class Store>
  static constexpr bool kPaged = std::is_same_v<Store, StaticPagedKvStore>;

  template <class Store>
  at::Tensor forward_static(const StepPlan& plan, Store& store) const {
    torch_detail::check_plan_rows(plan, config_.vocab_size, "StaticLlama::forward");
    const std::int64_t R = plan.rows();
    const KvLayout& layout = store.layout();
    REFDEC_CHECK(layout.layers == config_.n_layers && layout.kv_heads == config_.n_kv_heads && layout.head_dim == config_.head_dim() &&
                     layout.options.dtype() == dtype() && layout.options.device() == device(),
                 "StaticLlama::forward: the store's layout does not match the model's kv_layout()");
    std::int32_t widest = 1;
    for (std::int32_t b = 0; b < plan.batch(); ++b) widest = std::max(widest, plan.rows(b));
    const StaticStoreOptions& options = store.options();
    const std::int64_t Bb = static_bucket(plan.batch(), options.max_batch, "sequences");
    const std::int64_t T = static_bucket(widest, options.max_rows, "step rows of a sequence");
    REFDEC_CHECK(Bb * T <= options.max_step_rows, "StaticLlama::forward: the step's bucket of " << Bb << " sequences x " << T
                                                                                                << " rows exceeds max_step_rows "
                                                                                                << options.max_step_rows);
    store.begin_step(plan);

    StaticStoreState& state = store.state();
    if (state.model != id_) {  // the buckets' graphs read another model's weights
      state.buckets.clear();
      state.model = id_;
      state.rotary = rotary_table(store.entries());
    }
    StaticBucket& bucket = bucket_for(state, Bb, T, kPaged<Store> ? Bb * store.entries() : 0);
    fill_inputs(plan, store, bucket);
    const bool graph = options.graphs && device().is_cuda() && StepGraph::available();
    if (graph) {
      if (!bucket.graph) {
        auto captured = std::make_unique<StepGraph>();
        bucket.logits = captured->capture([&] { return run(store, bucket); }, device(), state.pool);
        bucket.graph = std::move(captured);
      }
      bucket.graph->replay();
    } else {
      bucket.logits = run(store, bucket);
    }
    return bucket.logits.narrow(0, 0, R);
  }

  struct Layer {
    at::Tensor attn_norm, ffn_norm;  // [dim]
    at::Tensor wqkv;                 // [(n_heads + 2 n_kv_heads) head_dim, dim]
    at::Tensor wo;                   // [dim, n_heads head_dim]
    at::Tensor w13;                  // [2 hidden_dim, dim]: gate, then up
    at::Tensor w2;                   // [dim, hidden_dim]
  };

  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }

  // e^(i position theta_k) for every entry of a store, as LlamaModel computes its angles (float64),
  // in complex float (complex double for a float64 model): [entries, head_dim / 2].
  at::Tensor rotary_table(std::int64_t entries) const {
    const std::int64_t D = config_.head_dim();
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const auto inv_freq = at::pow(config_.rope_theta, -at::arange(0, D, 2, f64) / static_cast<double>(D));
    const auto angles = at::arange(entries, f64).unsqueeze(-1) * inv_freq;
    const auto real = dtype() == at::kDouble ? at::kDouble : at::kFloat;
    return at::view_as_complex(at::stack({at::cos(angles), at::sin(angles)}, -1).to(real).contiguous()).to(device());
  }

  // The bucket (Bb, T) of a store, made the first time; `slots` more int64 inputs for a paged store.
  StaticBucket& bucket_for(StaticStoreState& state, std::int64_t Bb, std::int64_t T, std::int64_t slots) const {
    StaticBucket& bucket = state.buckets[{Bb, T}];
    if (bucket.batch != 0) return bucket;
    const std::int64_t P = Bb * T;
    const auto on_device = at::TensorOptions().device(device());
    const auto on_host = at::TensorOptions().pinned_memory(device().is_cuda());
    bucket.batch = Bb;
    bucket.rows = T;
    bucket.host_ints = at::zeros({4 * P + Bb + slots}, on_host.dtype(at::kLong));
    bucket.host_mask = at::zeros({Bb, T, T + 1}, on_host.dtype(at::kByte));
    bucket.ints = device().is_cpu() ? bucket.host_ints : at::zeros_like(bucket.host_ints, on_device);
    bucket.mask = device().is_cpu() ? bucket.host_mask : at::zeros_like(bucket.host_mask, on_device);
    bucket.sequence_of_row = at::arange(Bb, on_device.dtype(at::kLong)).repeat_interleave(T);
    return bucket;
  }

  // The plan, padded to the bucket, into its host buffers and from there (one copy each) to the
  // device. Padded rows write entries past their sequence's real rows (the scratch entry where
  // those run out) and see the scratch entry alone: no softmax is empty, none reads them.
  // A paged store's rows write pool slots, and its sequences' entries are read through the slots
  // listed after the other inputs; a contiguous store's rows write entries of their sequence.
  template <class Store>
  static void fill_inputs(const StepPlan& plan, const Store& store, StaticBucket& bucket) {
    const std::int64_t Bb = bucket.batch, T = bucket.rows, P = Bb * T;
    std::int64_t* tokens = bucket.host_ints.data_ptr<std::int64_t>();
    std::int64_t* positions = tokens + P;
    std::int64_t* entries = positions + P;
    std::int64_t* gather = entries + P;
    std::int64_t* lengths = gather + P;
    std::uint8_t* mask = bucket.host_mask.data_ptr<std::uint8_t>();
    const std::int64_t E = store.entries(), scratch = E - 1;
    std::fill(gather, gather + P, 0);
    std::fill(mask, mask + Bb * T * (T + 1), 0);
    for (std::int64_t b = 0; b < Bb; ++b) {
      const bool real = b < plan.batch();
      const std::int64_t length = real ? store.lengths()[static_cast<std::size_t>(b)] : 0;
      const std::int32_t n = real ? plan.rows(static_cast<std::int32_t>(b)) : 0;
      const std::int32_t first = real ? plan.indptr[static_cast<std::size_t>(b)] : 0;
      lengths[b] = length;
      for (std::int64_t i = 0; i < T; ++i) {
        const std::int64_t p = b * T + i;
        std::uint8_t* row = mask + p * (T + 1);
        if (i < n) {
          const auto r = static_cast<std::size_t>(first + i);
          tokens[p] = plan.tokens[r];
          positions[p] = plan.positions[r];
          entries[p] = length + i;
          gather[first + i] = p;
          for (std::int32_t j = 0; j < n; ++j) row[j] = plan.sees(static_cast<std::int32_t>(b), static_cast<std::int32_t>(i), j) ? 1 : 0;
        } else {
          tokens[p] = 0;
          positions[p] = entries[p] = std::min(length + i, scratch);
          row[T] = 1;
        }
      }
      if constexpr (kPaged<Store>) {
        std::int64_t* slots = lengths + Bb + b * E;  // [E] the pool slot of each entry
        for (std::int64_t e = 0; e < scratch; ++e) slots[e] = real ? store.slot_or_scratch(b, e) : store.scratch_slot();
        slots[scratch] = store.scratch_slot();
        for (std::int64_t i = 0; i < T; ++i)
          entries[b * T + i] = real && i < n ? store.slot_or_scratch(b, length + i) : store.scratch_slot();
      }
    }
    if (!bucket.ints.is_same(bucket.host_ints)) {
      // Blocking copies: the host buffers are rewritten by the next step.
      bucket.ints.copy_(bucket.host_ints);
      bucket.mask.copy_(bucket.host_mask);
    }
  }

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const {
#if REFDEC_TORCH_CUDA && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))
    // One fused kernel on the GPU (its float32 product with the weight differs from the
    // reference's rounding only in the last bit of a 16-bit type).
    if (x.is_cuda()) return at::rms_norm(x, {x.size(-1)}, w, config_.norm_eps);
#endif
    const auto compute = at::promote_types(x.scalar_type(), at::kFloat);
    const auto xf = x.to(compute);
    return (xf * at::rsqrt(xf.pow(2).mean(-1, true) + config_.norm_eps)).to(x.scalar_type()) * w;
  }

  // The step of a bucket over its device buffers: logits [P, vocab], row k the plan's row k for
  // k < plan rows (padded rows after them).
  template <class Store>
  at::Tensor run(const Store& store, const StaticBucket& bucket) const {
    const std::int64_t Bb = bucket.batch, T = bucket.rows, P = Bb * T, E = store.entries();
    const std::int64_t H = config_.n_heads, KV = config_.n_kv_heads, D = config_.head_dim(), G = H / KV;
    const auto dt = dtype();
    const auto compute = at::promote_types(dt, at::kFloat);
    const auto tokens = bucket.ints.narrow(0, 0, P), positions = bucket.ints.narrow(0, P, P);
    const auto entries = bucket.ints.narrow(0, 2 * P, P), gather = bucket.ints.narrow(0, 3 * P, P);
    const auto lengths = bucket.ints.narrow(0, 4 * P, Bb);
    const auto& sequence = bucket.sequence_of_row;
    const auto longs = at::TensorOptions().dtype(at::kLong).device(device());

    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const bool fused_ops = fused();
    // Rotary factors of every row (the torch path's): q's scaled by 1 / sqrt(head_dim), k's as they
    // are, and 1 for v, which rides in the same product (exactly unchanged) so that k and v leave
    // it side by side. The fused kernels read the table by position themselves.
    at::Tensor factors;  // [P, H + 2 KV, D/2] complex
    if (!fused_ops) {
      const auto turn = store.state().rotary.index_select(0, positions).unsqueeze(1);  // [P, 1, D/2] complex
      factors = at::cat({(turn * scale).expand({P, H, D / 2}), turn.expand({P, KV, D / 2}), at::ones_like(turn).expand({P, KV, D / 2})}, 1);
    }
    // The additive mask [Bb, 1, 1, T, E]: each sequence's cached entries, its step rows as the
    // plan's mask lists them, and for padded rows the scratch entry (E - 1) alone. Step columns
    // past the scratch entry only ever carry a 0 there.
    const auto len3 = lengths.view({Bb, 1, 1});
    const auto seen = bucket.mask.to(at::kBool);  // [Bb, T, T + 1]
    auto allowed = (at::arange(E, longs).view({1, 1, E}) < len3).expand({Bb, T, E}).contiguous();
    allowed.scatter_(2, (len3 + at::arange(T, longs).view({1, 1, T})).clamp_max(E - 1).expand({Bb, T, T}), seen.narrow(2, 0, T));
    allowed.select(2, E - 1).copy_(seen.select(2, T));
    const auto bias = at::zeros({Bb, T, E}, at::TensorOptions().dtype(dt).device(device()))
                          .masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity())
                          .view({Bb, 1, 1, T, E});

    void* stream = nullptr;  // the current CUDA stream, for the fused kernels
#if REFDEC_TORCH_CUDA
    if (fused_ops) stream = at::cuda::getCurrentCUDAStream().stream();
#endif
    const ElementType element = kernel_element_type(dt);
    const at::Tensor turns = fused_ops ? at::view_as_real(store.state().rotary) : at::Tensor();  // [E, D/2, 2] float

    // The cache's layout for the fused kernels, in elements: a layer's keys (or values) are
    // [max_batch, KV, E, D] in a contiguous store, [slots, KV, D] in a paged pool, where entry e of
    // sequence b lies at slot slots[b E + e].
    const std::int64_t stride_sequence = kPaged<Store> ? 0 : KV * E * D, stride_head = kPaged<Store> ? D : E * D;
    const std::int64_t stride_element = kPaged<Store> ? KV * D : D;
    at::Tensor slots;  // [Bb, E]
    if constexpr (kPaged<Store>) slots = bucket.ints.narrow(0, 4 * P + Bb, Bb * E);

    auto x = at::embedding(embedding_, tokens);  // [P, dim]
    for (std::int64_t li = 0; li < config_.n_layers; ++li) {
      const Layer& l = layers_[static_cast<std::size_t>(li)];
      const auto qkv = product(rms_norm(x, l.attn_norm), l.wqkv, element, stream);  // [P, (H + 2 KV) D]
      using at::indexing::Slice;
      // The layer's keys and values in the cache, and where a row's go.
      const at::Tensor layer = [&] {  // [2, slots, KV, D] (paged) or [2, max_batch, KV, E, D]
        if constexpr (kPaged<Store>)
          return store.pool()[li];
        else
          return store.cache()[li];
      }();
      at::Tensor q;  // [P, H, D], rotated and scaled
      if (fused_ops) {
        q = at::empty({P, H, D}, qkv.options());
        RotaryScatterArgs a;
        a.qkv = qkv.data_ptr();
        a.turns = turns.data_ptr<float>();
        a.positions = positions.data_ptr<std::int64_t>();
        a.sequence = sequence.data_ptr<std::int64_t>();
        a.written = entries.data_ptr<std::int64_t>();
        a.q = q.data_ptr();
        a.keys = layer[0].data_ptr();
        a.values = layer[1].data_ptr();
        a.rows = P, a.heads = H, a.kv_heads = KV, a.head_dim = D;
        a.stride_sequence = stride_sequence, a.stride_head = stride_head, a.stride_element = stride_element;
        a.scale = static_cast<float>(scale);
        a.type = element;
        kernels_.rotary_scatter(a, stream);
      } else {
        const auto rotated = at::view_as_real(at::view_as_complex(qkv.view({P, H + 2 * KV, D / 2, 2}).to(compute)) * factors)
                                 .to(dt)
                                 .view({P, H + 2 * KV, D});
        const auto kv = rotated.narrow(1, H, 2 * KV).view({P, 2, KV, D});
        auto target = layer;
        if constexpr (kPaged<Store>)
          target.index_put_({Slice(), entries}, kv.transpose(0, 1));
        else
          target.index_put_({Slice(), sequence, Slice(), entries}, kv);
        q = rotated.narrow(1, 0, H);
      }
      at::Tensor attended;  // [P, H * D]
      if (fused_ops && kernels_.attention != nullptr && attention_kernel_takes(D, E, element) && q.is_contiguous() &&
          aligned_for_loads(q.data_ptr()) && aligned_for_loads(layer[0].data_ptr()) && aligned_for_loads(layer[1].data_ptr())) {
        attended = at::empty({P, H * D}, q.options());
        AttentionArgs a;
        a.q = q.data_ptr(), a.keys = layer[0].data_ptr(), a.values = layer[1].data_ptr(), a.bias = bias.data_ptr();
        a.slots = kPaged<Store> ? slots.data_ptr<std::int64_t>() : nullptr;
        a.out = attended.data_ptr();
        a.batch = Bb, a.step_rows = T, a.heads = H, a.kv_heads = KV, a.head_dim = D, a.entries = E;
        a.stride_sequence = stride_sequence, a.stride_head = stride_head, a.stride_element = stride_element;
        a.type = element;
        kernels_.attention(a, stream);
      } else {
        at::Tensor keys, values;  // [Bb, KV, E, D]
        if constexpr (kPaged<Store>) {
          const auto gathered = layer.index_select(1, slots).view({2, Bb, E, KV, D}).transpose(2, 3);
          keys = gathered[0], values = gathered[1];
        } else {
          keys = layer[0].narrow(0, 0, Bb), values = layer[1].narrow(0, 0, Bb);
        }
        const auto qg = q.reshape({Bb, T, KV, G, D}).permute({0, 2, 3, 1, 4}).reshape({Bb, KV, G * T, D});
        auto scores = at::matmul(qg, keys.transpose(-1, -2));  // [Bb, KV, G*T, E]
        scores.view({Bb, KV, G, T, E}).add_(bias);
        attended = at::matmul(at::softmax(scores, -1), values)  // [Bb, KV, G*T, D]
                       .view({Bb, KV, G, T, D})
                       .permute({0, 3, 1, 2, 4})
                       .reshape({P, H * D});
      }
      add_product(x, attended, l.wo, element, stream);
      const auto gate_up = product(rms_norm(x, l.ffn_norm), l.w13, element, stream);  // [P, 2 hidden]
      const std::int64_t hidden = config_.hidden_dim;
      at::Tensor act;  // [P, hidden]
      if (fused_ops) {
        act = at::empty({P, hidden}, gate_up.options());
        kernels_.swiglu({gate_up.data_ptr(), act.data_ptr(), P, hidden, element}, stream);
      } else {
        act = at::silu(gate_up.narrow(1, 0, hidden)).mul_(gate_up.narrow(1, hidden, hidden));
      }
      add_product(x, act, l.w2, element, stream);
    }
    return product(rms_norm(x.index_select(0, gather), final_norm_), output_, element, stream).to(compute);
  }

  // Whether the linear kernel (StaticKernels::linear) takes x [rows, in] times w^T.
  bool linear_kernel_runs(const at::Tensor& x, const at::Tensor& w, ElementType element) const {
    return fused() && kernels_.linear != nullptr && x.is_contiguous() && w.is_contiguous() &&
           linear_kernel_takes(x.size(0), x.size(1), element) && aligned_for_loads(x.data_ptr()) && aligned_for_loads(w.data_ptr());
  }
  // x W^T: through the linear kernel where it runs (a few rows stream each weight once), else
  // through torch's product.
  at::Tensor product(const at::Tensor& x, const at::Tensor& w, ElementType element, void* stream) const {
    if (!linear_kernel_runs(x, w, element)) return at::linear(x, w);
    auto out = at::empty({x.size(0), w.size(0)}, x.options());
    kernels_.linear({x.data_ptr(), w.data_ptr(), out.data_ptr(), x.size(0), x.size(1), w.size(0), false, element}, stream);
    return out;
  }
  // residual += x W^T, in place (the residual stream is contiguous: the step's own tensor).
  void add_product(at::Tensor& residual, const at::Tensor& x, const at::Tensor& w, ElementType element, void* stream) const {
    if (!linear_kernel_runs(x, w, element) || !residual.is_contiguous()) {
      residual.addmm_(x, w.t());
      return;
    }
    kernels_.linear({x.data_ptr(), w.data_ptr(), residual.data_ptr(), x.size(0), x.size(1), w.size(0), true, element}, stream);
  }

  LlamaConfig config_;
  std::uint64_t id_;  // the stores' buckets say which model (and kernels) they were built for
  StaticKernels kernels_;
  std::vector<Layer> layers_;
  at::Tensor embedding_;   // [vocab, dim]
  at::Tensor final_norm_;  // [dim]
  at::Tensor output_;      // [vocab, dim]
};

REFDEC_TORCH_NAMESPACE_END
