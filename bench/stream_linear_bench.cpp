// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-stream-linear: how close refdec's streaming linear kernels (cpu/stream_linear.hpp)
// stream their weights to the machine's read bandwidth. It packs the linear layers of a model
// shape in bf16, then alternates, round by round, a plain read of as many bytes (memory_read.hpp,
// split over the threads) with one pass of each set of tiles over every layer, each layer
// split over the threads in runs of column blocks as PackedLinear does. The ratio of the times is
// taken per round, so that a shared machine's bandwidth, which moves from minute to minute, moves
// both sides alike.
//
//   refdec-stream-linear [--shape 1b] [--rows 1] [--rounds 10] [--tiles all|avx2|avx512|avx512-fp16|avx512-bf16]
//                        [--prefetch ahead|l2|none|all]   (how every set's tiles prefetch: StreamPrefetch; all:
//                                                          each set once per prefetch, every one in each round)
//   refdec-stream-linear --peak    (the tiles' multiply instructions' rate in registers, then exit)
//   refdec-stream-linear --reads   (each path of the read the roofline is measured by, then exit)
//   refdec-stream-linear --resident  (each set of tiles on weights held in the L2 cache: the
//                                    arithmetic's cost per 64 bytes against the memory's, then exit)
//
// Torch-free; OpenMP threads (OMP_NUM_THREADS). Exits 77 where the CPU runs no tiles.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "refdec/cpu/stream_linear.hpp"
#include "refdec/cpu/cpu_isa.hpp"
#include "refdec/cpu/huge_pages.hpp"
#include "linear_shapes.hpp"
#include "memory_read.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

#if REFDEC_X86
using refdec_bench::Read;

// Sums `n` floats (a multiple of kReadFloats) split over the OpenMP threads, each slice by `read`.
float read_all(const float* p, std::int64_t n, Read read) {
  float total = 0.0f;
#pragma omp parallel reduction(+ : total)
  total += refdec_bench::read_slice(p, n, omp_get_thread_num(), omp_get_num_threads(), read);
  return total;
}

// `floats` floats of 1.0 in huge pages, as the packed weights are: what the reads read.
struct ReadBuffer {
  std::int64_t floats;
  refdec::HugePageBuffer memory{static_cast<std::size_t>(floats) * 4};
  explicit ReadBuffer(std::int64_t n) : floats(n) { std::fill(data(), data() + floats, 1.0f); }
  float* data() const { return static_cast<float*>(memory.data()); }
  // One read of the whole buffer by `read` on every thread: seconds.
  double seconds(Read read) const {
    static volatile float sink = 0.0f;  // the reads are not dead
    const auto t = Clock::now();
    sink = sink + read_all(data(), floats, read);
    return seconds_since(t);
  }
  // One read by each of memory_read.hpp's paths in turn: the fastest's seconds (the roofline's read).
  double fastest_seconds() const {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& path : refdec_bench::read_paths()) best = std::min(best, seconds(path.read));
    return best;
  }
};

// The 1 GiB that --reads and --resident read.
constexpr std::int64_t kGiBFloats = std::int64_t{1} << 28;

#endif

#if REFDEC_X86
// --peak: the rate of each multiply instruction the tiles are built on, in registers (12
// independent chains a thread, none waiting on memory), on every OpenMP thread at once: the
// ceiling a tile of many rows meets when the arithmetic, not the stream, sets its pace.
//
// Twelve chains of `v = OP(v, B, C)` of type VEC from START, `n` steps each, in named variables
// (an array of them stayed in memory under GCC 12) and in a macro, not a template over a
// callable, so that the intrinsics inline into their function's target.
#define REFDEC_BENCH_CHAINS(VEC, START, OP, B, C)                                                               \
  VEC v0 = (START), v1 = v0, v2 = v0, v3 = v0, v4 = v0, v5 = v0, v6 = v0, v7 = v0, v8 = v0, v9 = v0, v10 = v0, \
      v11 = v0;                                                                                                 \
  for (std::int64_t k = 0; k < n; ++k) {                                                                        \
    v0 = OP(v0, B, C), v1 = OP(v1, B, C), v2 = OP(v2, B, C), v3 = OP(v3, B, C);                                 \
    v4 = OP(v4, B, C), v5 = OP(v5, B, C), v6 = OP(v6, B, C), v7 = OP(v7, B, C);                                 \
    v8 = OP(v8, B, C), v9 = OP(v9, B, C), v10 = OP(v10, B, C), v11 = OP(v11, B, C);                             \
    /* keeps the chains apart and alive: the compiler may not fold or drop them */                              \
    __asm__ volatile("" : "+v"(v0), "+v"(v1), "+v"(v2), "+v"(v3), "+v"(v4), "+v"(v5));                          \
    __asm__ volatile("" : "+v"(v6), "+v"(v7), "+v"(v8), "+v"(v9), "+v"(v10), "+v"(v11));                         \
  }

REFDEC_AVX2_TARGET void fma_ymm(std::int64_t n) {
  const __m256 b = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(0.0f);
  REFDEC_BENCH_CHAINS(__m256, b, _mm256_fmadd_ps, b, c)
}
REFDEC_AVX512_TARGET void fma_zmm(std::int64_t n) {
  const __m512 b = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(0.0f);
  REFDEC_BENCH_CHAINS(__m512, b, _mm512_fmadd_ps, b, c)
}
REFDEC_AVX512_BF16_TARGET void dot_zmm(std::int64_t n) {
  const auto w = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3F803F80));  // bf16 pairs of 1.0
  REFDEC_BENCH_CHAINS(__m512, _mm512_set1_ps(1.0f), _mm512_dpbf16_ps, w, w)
}
#if REFDEC_HAVE_AVX512_FP16
REFDEC_AVX512_FP16_TARGET void fma_ph_zmm(std::int64_t n) {
  const __m512h b = _mm512_castsi512_ph(_mm512_set1_epi16(0x3C00)), c = _mm512_castsi512_ph(_mm512_setzero_si512());
  REFDEC_BENCH_CHAINS(__m512h, b, _mm512_fmadd_ph, b, c)
}
#endif
#undef REFDEC_BENCH_CHAINS

int print_peaks() {
  const refdec::CpuIsa& isa = refdec::cpu_isa();
  struct Kind {
    const char* name;
    int products;  // multiply-adds per instruction
    bool runs;
    void (*run)(std::int64_t);
  };
  std::vector<Kind> kinds = {{"vfmadd231ps ymm (avx2 tiles)", 8, isa.runs_avx2(), fma_ymm},
                             {"vfmadd231ps zmm (avx512 tiles)", 16, isa.runs_avx512(), fma_zmm},
                             {"vdpbf16ps zmm (avx512-bf16 tiles)", 32, isa.runs_avx512() && isa.avx512_bf16, dot_zmm}};
#if REFDEC_HAVE_AVX512_FP16
  kinds.push_back({"vfmadd231ph zmm (avx512-fp16 tiles)", 32, isa.runs_avx512() && isa.avx512_fp16, fma_ph_zmm});
#endif
  constexpr std::int64_t kIterations = 4'000'000;
  std::printf("arithmetic peak, %d threads, in registers (best of 5); CPU %s\n", omp_get_max_threads(), isa.describe().c_str());
  std::printf("| instruction | G instructions/s | G multiply-adds/s |\n|---|---|---|\n");
  for (const Kind& k : kinds) {
    if (!k.runs) continue;
    double best = 0;
    for (int r = 0; r < 5; ++r) {
      const auto t = Clock::now();
#pragma omp parallel
      k.run(kIterations);
      best = std::max(best, 12.0 * kIterations * omp_get_max_threads() / seconds_since(t) / 1e9);
    }
    std::printf("| %s | %.2f | %.1f |\n", k.name, best, best * k.products);
  }
  return 0;
}
#endif

#if REFDEC_X86
// --reads: each of memory_read.hpp's paths that the CPU runs, reading 1 GiB in huge pages on every
// OpenMP thread, the paths in turn, best of 10: which read sets the roofline (the fastest).
int print_reads() {
  const auto paths = refdec_bench::read_paths();
  const ReadBuffer buffer(kGiBFloats);
  std::vector<double> best(paths.size());
  for (int r = 0; r <= 10; ++r)  // round 0 warms up
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const double seconds = buffer.seconds(paths[i].read);
      if (r > 0) best[i] = std::max(best[i], static_cast<double>(kGiBFloats) * 4 / seconds / 1e9);
    }
  std::printf("read bandwidth, 1 GiB in huge pages, %d threads (best of 10); CPU %s\n", omp_get_max_threads(),
              refdec::detect_cpu_isa().describe().c_str());
  std::printf("| read | GB/s |\n|---|---|\n");
  for (std::size_t i = 0; i < paths.size(); ++i) std::printf("| %s | %.1f |\n", paths[i].name, best[i]);
  return 0;
}
#endif

#if REFDEC_X86
// --resident: each set of tiles at 1-16 rows on one layer of 64 x 2048 (256 KiB packed, within
// the L2 cache of every CPU measured), every thread its own pass over all of it, best of 10: the
// time the tiles' instructions take per 64 bytes of weights with no wait for memory, beside the
// time the memory takes to deliver 64 bytes to each thread when all read (the fastest read, 1 GiB,
// best of 3). Where the first is near or above the second, the tiles cannot stream at the
// memory's pace however well their loads are prefetched.
int print_resident() {
  constexpr std::int64_t kOut = 64, kIn = 2048;
  std::uint16_t bits = 0x3c00;
  const refdec::StreamLinear layer(refdec_bench::varied_weights(kOut * kIn, bits).data(), kOut, kIn, refdec::HalfFormat::kBf16);
  const double units = static_cast<double>(layer.bytes()) / 64;
  const int threads = omp_get_max_threads();

  const ReadBuffer buffer(kGiBFloats);
  double read_gbs = 0;
  for (int r = 0; r <= 3; ++r) {  // round 0 warms up
    const double seconds = buffer.fastest_seconds();
    if (r > 0) read_gbs = std::max(read_gbs, static_cast<double>(kGiBFloats) * 4 / seconds / 1e9);
  }
  const double memory_ns = 64.0 * threads / read_gbs;  // per 64 bytes and thread

  std::vector<refdec::StreamTiles> sets;
  for (const refdec::StreamTiles t : refdec::kAllStreamTiles)
    if (refdec::StreamLinear::unavailable(t, refdec::HalfFormat::kBf16).empty()) sets.push_back(t);
  std::printf("tiles on %lld x %lld bf16 weights held in the cache, %d threads each over all of it (best of 10); CPU %s\n",
              static_cast<long long>(kOut), static_cast<long long>(kIn), threads, refdec::cpu_isa().describe().c_str());
  std::printf("memory: %.1f GB/s read, 64 bytes to each thread every %.2f ns\n", read_gbs, memory_ns);
  std::printf("| rows |");
  for (const auto t : sets) std::printf(" %s ns / 64 B | / memory's |", refdec::stream_tiles_name(t));
  std::printf("\n|---|");
  for (std::size_t i = 0; i < sets.size(); ++i) std::printf("---|---|");
  std::printf("\n");
  constexpr int kReps = 1000;
  for (const std::int64_t rows : {1, 2, 4, 8, 12, 16}) {
    std::printf("| %lld |", static_cast<long long>(rows));
    for (const auto tiles : sets) {
      double best = 1e30;
      for (int r = 0; r <= 10; ++r) {  // round 0 warms the cache
        double slowest = 0;
#pragma omp parallel reduction(max : slowest)
        {
          const std::vector<std::uint16_t> x(static_cast<std::size_t>(rows * kIn), 0x3c23);
          std::vector<float> prepared(static_cast<std::size_t>(layer.prepared_bytes(tiles, rows) / 4 + 1)), y(static_cast<std::size_t>(rows * kOut));
          layer.prepare(tiles, x.data(), rows, prepared.data());
#pragma omp barrier
          const auto t = Clock::now();
          for (int i = 0; i < kReps; ++i)
            layer.run_blocks(tiles, prepared.data(), rows, y.data(), true, refdec::Epilogue::kStore, nullptr, 0, layer.blocks());
          slowest = seconds_since(t);
        }
        if (r > 0) best = std::min(best, slowest);
      }
      const double ns = best / kReps / units * 1e9;
      std::printf(" %.2f | %.2f |", ns, ns / memory_ns);
    }
    std::printf("\n");
  }
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "1b";
  std::int64_t rows = 1;
  int rounds = 10;
  std::string tiles_name = "all";
  // The prefetches each set runs with: one, or every one (--prefetch all), each a column of its own.
  std::vector<refdec::StreamPrefetch> prefetches = {refdec::StreamPrefetch::kAhead};
  bool peak = false, reads = false, resident = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--shape") {
      shape_name = argv[++i];
    } else if (i + 1 < argc && arg == "--rows") {
      rows = std::atoll(argv[++i]);
    } else if (i + 1 < argc && arg == "--rounds") {
      rounds = std::atoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--tiles") {
      tiles_name = argv[++i];
    } else if (i + 1 < argc && arg == "--prefetch") {
      const std::string name = argv[++i];
      prefetches.clear();
      for (const refdec::StreamPrefetch p : refdec::kAllStreamPrefetch)
        if (name == "all" || name == refdec::stream_prefetch_name(p)) prefetches.push_back(p);
      if (prefetches.empty()) {
        std::fprintf(stderr, "refdec-stream-linear: unknown --prefetch '%s' (ahead, l2, none, all)\n", name.c_str());
        return 2;
      }
    } else if (arg == "--peak") {
      peak = true;
    } else if (arg == "--reads") {
      reads = true;
    } else if (arg == "--resident") {
      resident = true;
    } else {
      std::fprintf(stderr, "usage: refdec-stream-linear [--shape tiny|1b|7b] [--rows N (1-64)] [--rounds N] [--tiles all|avx2|avx512|avx512-fp16|avx512-bf16] [--prefetch ahead|l2|none|all] [--peak] [--reads] [--resident]\n");
      return 2;
    }
  }
  if (rows < 1 || rows > 64 || rounds < 1) {
    std::fprintf(stderr, "refdec-stream-linear: --rows takes 1 to 64, --rounds at least 1\n");
    return 2;
  }
#if REFDEC_X86
  if (peak) return refdec::cpu_isa().runs_avx2() ? print_peaks() : (std::printf("skipped: this CPU runs no tiles (%s)\n", refdec::cpu_isa().describe().c_str()), 77);
  if (reads) return print_reads();
  if (resident) return refdec::cpu_isa().runs_avx2() ? print_resident() : (std::printf("skipped: this CPU runs no tiles (%s)\n", refdec::cpu_isa().describe().c_str()), 77);
#else
  (void)peak, (void)reads, (void)resident;  // no tiles here: the tile sets below are empty and the program skips
#endif
  // The tile sets to time: every one this CPU runs, or the one named; each with every prefetch asked for.
  std::vector<std::pair<refdec::StreamTiles, refdec::StreamPrefetch>> sets;
  for (const refdec::StreamTiles t : refdec::kAllStreamTiles)
    if ((tiles_name == "all" || tiles_name == refdec::stream_tiles_name(t)) && refdec::StreamLinear::unavailable(t, refdec::HalfFormat::kBf16).empty())
      for (const refdec::StreamPrefetch p : prefetches) sets.emplace_back(t, p);
  const auto set_name = [&](std::size_t i) {
    std::string name = refdec::stream_tiles_name(sets[i].first);
    return prefetches.size() > 1 ? name + "/" + refdec::stream_prefetch_name(sets[i].second) : name;
  };
  if (sets.empty()) {
    std::printf("skipped: this CPU runs no tiles named '%s' (%s)\n", tiles_name.c_str(), refdec::cpu_isa().describe().c_str());
    return 77;
  }
#if REFDEC_X86
  const auto s = refdec_bench::linear_shape(shape_name);
  if (!s) {
    std::fprintf(stderr, "refdec-stream-linear: unknown --shape '%s' (tiny, 1b, 7b)\n", shape_name.c_str());
    return 2;
  }
  std::vector<std::unique_ptr<refdec::StreamLinear>> layers;
  std::int64_t bytes = 0;
  std::uint16_t bits = 0x3c00;
  for (const auto& [out, in] : s->products()) {
    layers.push_back(
        std::make_unique<refdec::StreamLinear>(refdec_bench::varied_weights(out * in, bits).data(), out, in, refdec::HalfFormat::kBf16));
    bytes += layers.back()->bytes();
  }
  const std::int64_t floats = (bytes / 4 + refdec_bench::kReadFloats - 1) / refdec_bench::kReadFloats * refdec_bench::kReadFloats;
  const ReadBuffer buffer(floats);  // in huge pages: the best read the machine does
  const std::int64_t widest = std::max(s->dim, s->hidden) + 2;
  const std::vector<std::uint16_t> x(static_cast<std::size_t>(rows * widest), 0x3c23);  // 0.01 in bf16
  std::int64_t prepared_bytes = 0;
  for (const auto& layer : layers)
    for (const auto tiles : refdec::kAllStreamTiles) prepared_bytes = std::max(prepared_bytes, layer->prepared_bytes(tiles, rows));
  std::vector<float> prepared(static_cast<std::size_t>(prepared_bytes / 4 + 1)), y(static_cast<std::size_t>(rows * widest));
  std::printf("%s: %zu bf16 layers, %.3f GB; %lld row(s); prefetch %s; %d threads; CPU %s\n", shape_name.c_str(), layers.size(),
              static_cast<double>(bytes) / 1e9, static_cast<long long>(rows),
              prefetches.size() > 1 ? "each (set/prefetch)" : refdec::stream_prefetch_name(prefetches.front()), omp_get_max_threads(),
              refdec::cpu_isa().describe().c_str());
  std::printf("| round | read GB/s |");
  for (std::size_t i = 0; i < sets.size(); ++i) std::printf(" %s GB/s | / read |", set_name(i).c_str());
  std::printf("\n|---|---|");
  for (std::size_t i = 0; i < sets.size(); ++i) std::printf("---|---|");
  std::printf("\n");
  std::vector<std::vector<double>> ratios(sets.size());
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    const double read_s = buffer.fastest_seconds();
    if (r > 0) std::printf("| %d | %.1f |", r, static_cast<double>(bytes) / read_s / 1e9);
    for (std::size_t i = 0; i < sets.size(); ++i) {
      const auto t = Clock::now();
      const auto [tiles, prefetch] = sets[i];
      for (const auto& layer : layers) {  // the input prepared per layer, as PackedLinear does
        layer->prepare(tiles, x.data(), rows, prepared.data());
        refdec::StreamShare share(layer->blocks(), omp_get_max_threads());  // PackedLinear's split over the threads
#pragma omp parallel
        layer->run_shared(tiles, prepared.data(), rows, y.data(), true, refdec::Epilogue::kStore, nullptr, share, omp_get_thread_num(),
                          prefetch);
      }
      const double kernel_s = seconds_since(t);
      if (r == 0) continue;
      ratios[i].push_back(read_s / kernel_s);
      std::printf(" %.1f | %.3f |", static_cast<double>(bytes) / kernel_s / 1e9, ratios[i].back());
    }
    if (r > 0) std::printf("\n");
  }
  for (std::size_t i = 0; i < sets.size(); ++i) {
    std::sort(ratios[i].begin(), ratios[i].end());
    std::printf("%s: median kernel / read over %d rounds: %.3f\n", set_name(i).c_str(), rounds, ratios[i][ratios[i].size() / 2]);
  }
#endif
  return 0;
}
