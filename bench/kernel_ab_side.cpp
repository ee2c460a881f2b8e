// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// One side of refdec-kernel-ab (bench/kernel_ab.sh): a CPU kernel over a benchmark shape's data,
// compiled twice into one program, once against another revision's headers with the namespace
// renamed (-Drefdec=refdec_base), so that both versions run in one process. KERNEL_AB_SIDE names
// the side: its two functions are <side>_init and <side>_run. Torch-free; OpenMP threads.

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "linear_shapes.hpp"
#include "refdec/cpu/avx2_attention.hpp"
#include "refdec/cpu/stream_linear.hpp"
#if __has_include("refdec/cpu/bf16_attention.hpp")
#include "refdec/cpu/bf16_attention.hpp"
#define KERNEL_AB_BF16_ATTENTION 1
#else
#define KERNEL_AB_BF16_ATTENTION 0
#endif
#if __has_include("refdec/cpu/stream_share.hpp")
#define KERNEL_AB_STREAM_SHARE 1
#else
#define KERNEL_AB_STREAM_SHARE 0
#endif

#define KERNEL_AB_CAT2(a, b) a##_##b
#define KERNEL_AB_CAT(a, b) KERNEL_AB_CAT2(a, b)
#define KERNEL_AB_FN(name) KERNEL_AB_CAT(KERNEL_AB_SIDE, name)
#define KERNEL_AB_STR2(a) #a
#define KERNEL_AB_STR(a) KERNEL_AB_STR2(a)
#define KERNEL_AB_NAME KERNEL_AB_STR(KERNEL_AB_SIDE)

namespace {

// Every linear layer of a shape, streamed in turn as PackedLinear does: the input prepared per
// layer, then the layer's column blocks shared by the threads (as the revision shares them).
struct Linears {
  std::vector<std::unique_ptr<refdec::StreamLinear>> layers;
  refdec::StreamTiles tiles;
  refdec::StreamPrefetch prefetch;
  std::vector<std::uint16_t> x;
  std::vector<float> prepared, y;

  void run(std::int64_t rows) {
    for (const auto& layer : layers) {
      layer->prepare(tiles, x.data(), rows, prepared.data());
#if KERNEL_AB_STREAM_SHARE
      refdec::StreamShare share(layer->blocks(), omp_get_max_threads());
#pragma omp parallel
      layer->run_shared(tiles, prepared.data(), rows, y.data(), true, refdec::Epilogue::kStore, nullptr, share, omp_get_thread_num(),
                        prefetch);
#else  // revisions before StreamShare: runs taken from one counter
      std::atomic<std::int64_t> next{0};
#pragma omp parallel
      layer->run_taking(tiles, prepared.data(), rows, y.data(), true, refdec::Epilogue::kStore, nullptr, next, omp_get_num_threads(),
                        prefetch);
#endif
    }
  }
};

// One layer's attention as the model's packed path runs it (avx2_attention_over): each thread a
// range of kv heads through the scores, the masked softmax and the values, by the AVX512_BF16
// kernel where the revision has one and this CPU runs it, else by the AVX2 kernel. With `evict` bytes, a
// pass runs every layer's attention over its own cache, each after an untimed read of that many
// bytes: as in a decoding step, where a layer's cache is read after the weights streamed since
// have evicted it.
struct Attention {
  refdec_bench::LinearShape shape;
  std::int64_t context;
  std::vector<std::vector<std::uint16_t>> keys, values;  // per cache: [S, KV, D] bf16
  std::vector<std::uint16_t> out;                        // [KV, G * rows, D]
  std::vector<float> q, mask;                            // q [KV, G * rows, D]; mask [rows, rows]
  std::vector<std::uint16_t> q_bf16;                     // q in bf16, for the AVX512_BF16 kernel
  std::vector<std::uint64_t> evict;
  std::uint64_t evict_sum = 0;

  refdec::CacheView view(const std::vector<std::uint16_t>& cache, std::int64_t length) const {
    refdec::CacheView v;
    v.data = cache.data(), v.length = length, v.row_stride = shape.kv_dim(), v.head_stride = shape.head_dim(),
    v.head_dim = shape.head_dim();
    return v;
  }

  bool bf16_kernel() const {
#if KERNEL_AB_BF16_ATTENTION
    return refdec::avx512bf16::runs(shape.head_dim());
#else
    return false;
#endif
  }

  // Seconds of one pass: each cache's attention, after the untimed read where there is one.
  double run(std::int64_t rows) {
    double seconds = 0;
    for (std::size_t c = 0; c < keys.size(); ++c) {
      for (const std::uint64_t v : evict) evict_sum += v;
      const auto t0 = std::chrono::steady_clock::now();
      run(rows, keys[c], values[c]);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return seconds;
  }

  void run(std::int64_t rows, const std::vector<std::uint16_t>& keys, const std::vector<std::uint16_t>& values) {
    const std::int64_t kv = shape.kv_heads, n = shape.group() * rows, D = shape.head_dim(), S = context + rows;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (std::int64_t r = 0; r < rows; ++r)  // the step's own rows: causal
      for (std::int64_t c = 0; c < rows; ++c) mask[static_cast<std::size_t>(r * rows + c)] = c <= r ? 0.0f : -INFINITY;
#pragma omp parallel
    {
      const std::int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
      const std::int64_t first = kv * t / threads, last = kv * (t + 1) / threads;
      std::vector<float> scores(static_cast<std::size_t>(std::max<std::int64_t>(1, (last - first) * n * S)));
      refdec::CacheView k = view(keys, S), v = view(values, S);
      k.data += first * D, v.data += first * D;
      if (last > first && bf16_kernel()) {
#if KERNEL_AB_BF16_ATTENTION
        refdec::avx512bf16::attention_scores(q_bf16.data() + first * n * D, n, k, scale, scores.data(), 0, last - first);
        refdec::avx2::softmax(scores.data(), (last - first) * n, S, mask.data(), rows);
        refdec::avx512bf16::attention_values(scores.data(), n, v, out.data() + first * n * D, 0, last - first);
#endif
      } else if (last > first) {
        refdec::avx2::attention_scores(q.data() + first * n * D, n, k, refdec::HalfFormat::kBf16, scale, scores.data(), 0, last - first);
        refdec::avx2::softmax(scores.data(), (last - first) * n, S, mask.data(), rows);
        refdec::avx2::attention_values(scores.data(), n, v, refdec::HalfFormat::kBf16, out.data() + first * n * D, 0, last - first);
      }
    }
  }
};

std::unique_ptr<Linears> linears;
std::unique_ptr<Attention> attention;

}  // namespace

// Makes `kernel`'s data for steps of up to `largest` rows: "linear", every linear layer of `shape`
// in bf16 by the tiles and prefetch named (stream_tiles_name(), stream_prefetch_name(); "widest":
// the widest tiles this CPU runs); "attention", one layer's AVX2 attention over `context` cached
// entries and the step's own. Prints what it runs. Returns 0; 77 where this CPU runs no such
// kernel; 2 for a name it does not know.
extern "C" int KERNEL_AB_FN(init)(const char* kernel, const char* shape_name, int largest, const char* tiles_name,
                                  const char* prefetch_name, int context) {
  const auto shape = refdec_bench::linear_shape(shape_name);
  if (!shape) return std::fprintf(stderr, "kernel_ab: unknown shape '%s' (tiny, 1b, 7b)\n", shape_name), 2;
  if (!refdec::StreamLinear::cpu_runs())
    return std::printf("skipped: this CPU runs no AVX2 kernels (%s)\n", refdec::cpu_isa().describe().c_str()), 77;
  std::uint16_t bits = 0x3c00;
  if (std::strcmp(kernel, "linear") == 0) {
    auto l = std::make_unique<Linears>();
    l->tiles = refdec::StreamLinear::widest(refdec::HalfFormat::kBf16);
    if (std::strcmp(tiles_name, "widest") != 0) {
      const auto* it = std::find_if(refdec::kAllStreamTiles.begin(), refdec::kAllStreamTiles.end(),
                                    [&](refdec::StreamTiles t) { return std::strcmp(refdec::stream_tiles_name(t), tiles_name) == 0; });
      if (it == refdec::kAllStreamTiles.end()) return std::fprintf(stderr, "kernel_ab: unknown tiles '%s'\n", tiles_name), 2;
      l->tiles = *it;
    }
    if (const std::string why = refdec::StreamLinear::unavailable(l->tiles, refdec::HalfFormat::kBf16); !why.empty())
      return std::printf("skipped: %s\n", why.c_str()), 77;
    const auto* p = std::find_if(refdec::kAllStreamPrefetch.begin(), refdec::kAllStreamPrefetch.end(), [&](refdec::StreamPrefetch f) {
      return std::strcmp(refdec::stream_prefetch_name(f), prefetch_name) == 0;
    });
    if (p == refdec::kAllStreamPrefetch.end()) return std::fprintf(stderr, "kernel_ab: unknown prefetch '%s'\n", prefetch_name), 2;
    l->prefetch = *p;
    std::int64_t bytes = 0, prepared = 0;
    for (const auto& [out, in] : shape->products()) {
      l->layers.push_back(
          std::make_unique<refdec::StreamLinear>(refdec_bench::varied_weights(out * in, bits).data(), out, in, refdec::HalfFormat::kBf16));
      bytes += l->layers.back()->bytes();
      prepared = std::max(prepared, l->layers.back()->prepared_bytes(l->tiles, largest));
    }
    const std::int64_t widest = std::max(shape->dim, shape->hidden) + 2;
    l->x.assign(static_cast<std::size_t>(largest * widest), 0x3c23);  // 0.01 in bf16
    l->prepared.resize(static_cast<std::size_t>(prepared / 4 + 1));
    l->y.resize(static_cast<std::size_t>(largest * widest));
    std::printf("%s: %zu linear layers of %s, %.3f GB bf16, tiles %s, prefetch %s\n", KERNEL_AB_NAME, l->layers.size(), shape_name,
                static_cast<double>(bytes) / 1e9, refdec::stream_tiles_name(l->tiles), refdec::stream_prefetch_name(l->prefetch));
    linears = std::move(l);
    return 0;
  }
  if (std::strcmp(kernel, "attention") == 0) {
    auto a = std::make_unique<Attention>();
    a->shape = *shape, a->context = context;
    const std::int64_t S = context + largest, n = shape->group() * largest;
    const char* evict = std::getenv("KERNEL_AB_EVICT_MIB");
    const std::int64_t evict_mib = evict != nullptr ? std::atoll(evict) : 0;
    a->evict.assign(static_cast<std::size_t>(evict_mib << 17), 1);
    for (std::int64_t c = 0; c < (evict_mib > 0 ? shape->layers : 1); ++c) {
      a->keys.push_back(refdec_bench::varied_weights(S * shape->kv_dim(), bits));
      a->values.push_back(refdec_bench::varied_weights(S * shape->kv_dim(), bits));
    }
    a->out.resize(static_cast<std::size_t>(shape->kv_heads * n * shape->head_dim()));
    a->q.assign(a->out.size(), 0.01f);
    a->q_bf16.assign(a->out.size(), 0x3c24);  // 0.01 in bf16
    a->mask.resize(static_cast<std::size_t>(largest * largest));
    std::printf("%s: %s %s attention of %s, %lld kv heads of %lld query heads, head size %lld, %d cached entries%s\n", KERNEL_AB_NAME,
                evict_mib > 0 ? "every layer's" : "one layer's", a->bf16_kernel() ? "AVX512_BF16" : "AVX2", shape_name,
                static_cast<long long>(shape->kv_heads), static_cast<long long>(shape->group()), static_cast<long long>(shape->head_dim()),
                context, evict_mib > 0 ? (", each after a read of " + std::to_string(evict_mib) + " MiB").c_str() : "");
    attention = std::move(a);
    return 0;
  }
  return std::fprintf(stderr, "kernel_ab: unknown kernel '%s' (linear, attention)\n", kernel), 2;
}

// Seconds of one pass of the kernel init() made at `rows` step rows (at most its `largest`).
extern "C" double KERNEL_AB_FN(run)(int rows) {
  if (attention) return attention->run(rows);
  const auto t0 = std::chrono::steady_clock::now();
  if (linears) linears->run(rows);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
