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
//
// Torch-free; OpenMP threads (OMP_NUM_THREADS). Exits 77 where the CPU runs no tiles.

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "refdec/cpu/stream_linear.hpp"
#include "refdec/cpu/cpu_isa.hpp"
#include "refdec/cpu/huge_pages.hpp"
#include "memory_read.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Shape {
  std::int64_t dim, hidden, layers, kv_dim;
};

Shape shape_named(const std::string& name) {
  if (name == "1b") return {2048, 5632, 22, 256};  // TinyLlama-1.1B (4 kv heads of 64)
  if (name == "7b") return {4096, 11008, 32, 4096};
  if (name == "tiny") return {64, 172, 5, 32};
  std::fprintf(stderr, "refdec-stream-linear: unknown --shape '%s' (tiny, 1b, 7b)\n", name.c_str());
  std::exit(2);
}

#if REFDEC_X86
// Sums `n` floats (a multiple of kReadFloats) split over the OpenMP threads.
float read_all(const float* p, std::int64_t n) {
  const std::int64_t units = n / refdec_bench::kReadFloats;
  float total = 0.0f;
#pragma omp parallel reduction(+ : total)
  {
    const std::int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t begin = units * t / threads, end = units * (t + 1) / threads;
    total += refdec_bench::read_floats(p + begin * refdec_bench::kReadFloats, (end - begin) * refdec_bench::kReadFloats);
  }
  return total;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "1b";
  std::int64_t rows = 1;
  int rounds = 10;
  std::string tiles_name = "all";
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
    } else {
      std::fprintf(stderr, "usage: refdec-stream-linear [--shape tiny|1b|7b] [--rows N (1-64)] [--rounds N] [--tiles all|avx2|avx512|avx512-fp16|avx512-bf16]\n");
      return 2;
    }
  }
  if (rows < 1 || rows > 64 || rounds < 1) {
    std::fprintf(stderr, "refdec-stream-linear: --rows takes 1 to 64, --rounds at least 1\n");
    return 2;
  }
  // The tile sets to time: every one this CPU runs, or the one named.
  std::vector<refdec::StreamTiles> sets;
  for (const refdec::StreamTiles t : refdec::kAllStreamTiles)
    if ((tiles_name == "all" || tiles_name == refdec::stream_tiles_name(t)) && refdec::StreamLinear::unavailable(t, refdec::HalfFormat::kBf16).empty())
      sets.push_back(t);
  if (sets.empty()) {
    std::printf("skipped: this CPU runs no tiles named '%s' (%s)\n", tiles_name.c_str(), refdec::cpu_isa().describe().c_str());
    return 77;
  }
#if REFDEC_X86
  const Shape s = shape_named(shape_name);
  // Per layer: q/k/v fused, o, gate, up, down, as the packed model holds them.
  const std::vector<std::pair<std::int64_t, std::int64_t>> per_layer = {
      {s.dim + 2 * s.kv_dim, s.dim}, {s.dim, s.dim}, {s.hidden, s.dim}, {s.hidden, s.dim}, {s.dim, s.hidden}};
  std::vector<std::unique_ptr<refdec::StreamLinear>> layers;
  std::int64_t bytes = 0;
  std::uint16_t bits = 0x3c00;
  for (std::int64_t l = 0; l < s.layers; ++l)
    for (const auto& [out, in] : per_layer) {
      std::vector<std::uint16_t> w(static_cast<std::size_t>(out * in));
      for (auto& v : w) v = bits = static_cast<std::uint16_t>(0x3c00 | ((bits * 75u + 74u) & 0xff));  // 1.0 .. 1.99, varied
      layers.push_back(std::make_unique<refdec::StreamLinear>(w.data(), out, in, refdec::HalfFormat::kBf16));
      bytes += layers.back()->bytes();
    }
  const std::int64_t floats = (bytes / 4 + refdec_bench::kReadFloats - 1) / refdec_bench::kReadFloats * refdec_bench::kReadFloats;
  // In huge pages, as the packed weights are: the best read the machine does.
  const refdec::HugePageBuffer memory(static_cast<std::size_t>(floats) * 4);
  auto* const buffer = static_cast<float*>(memory.data());
  std::fill(buffer, buffer + floats, 1.0f);
  const std::int64_t widest = std::max(s.dim, s.hidden) + 2;
  const std::vector<std::uint16_t> x(static_cast<std::size_t>(rows * widest), 0x3c23);  // 0.01 in bf16
  std::int64_t prepared_bytes = 0;
  for (const auto& layer : layers)
    for (const auto tiles : refdec::kAllStreamTiles) prepared_bytes = std::max(prepared_bytes, layer->prepared_bytes(tiles, rows));
  std::vector<float> prepared(static_cast<std::size_t>(prepared_bytes / 4 + 1)), y(static_cast<std::size_t>(rows * widest));
  std::printf("%s: %zu bf16 layers, %.3f GB; %lld row(s); %d threads; CPU %s\n", shape_name.c_str(), layers.size(), static_cast<double>(bytes) / 1e9,
              static_cast<long long>(rows), omp_get_max_threads(), refdec::cpu_isa().describe().c_str());
  std::printf("| round | read GB/s |");
  for (const auto t : sets) std::printf(" %s GB/s | / read |", refdec::stream_tiles_name(t));
  std::printf("\n|---|---|");
  for (std::size_t i = 0; i < sets.size(); ++i) std::printf("---|---|");
  std::printf("\n");
  std::vector<std::vector<double>> ratios(sets.size());
  volatile float sink = 0.0f;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    auto t = Clock::now();
    sink = sink + read_all(buffer, floats);
    const double read_s = seconds_since(t);
    if (r > 0) std::printf("| %d | %.1f |", r, static_cast<double>(bytes) / read_s / 1e9);
    for (std::size_t i = 0; i < sets.size(); ++i) {
      t = Clock::now();
      for (const auto& layer : layers) {  // the input prepared per layer, as PackedLinear does
        layer->prepare(sets[i], x.data(), rows, prepared.data());
        std::atomic<std::int64_t> next{0};  // PackedLinear's split over the threads
#pragma omp parallel
        layer->run_taking(sets[i], prepared.data(), rows, y.data(), true, refdec::Epilogue::kStore, nullptr, next, omp_get_num_threads());
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
    std::printf("%s: median kernel / read over %d rounds: %.3f\n", refdec::stream_tiles_name(sets[i]), rounds, ratios[i][ratios[i].size() / 2]);
  }
#endif
  return 0;
}
