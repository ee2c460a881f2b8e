// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Which CPU kernel runs a model's linear layers, chosen by measurement. The fastest kernel
// depends on the CPU and on the row count: on one AVX-512 machine oneDNN's matmul streams a lone
// row at 61% of the read roofline where refdec's streaming kernel reaches 80%; on another the
// streaming kernel's AVX512_BF16 tiles keep 16 rows at half the cost of its AVX2 tiles. So at
// model load every candidate that runs here (oneDNN; each of the streaming kernel's tile sets)
// times one layer's products at the row counts a step uses, and the model takes:
//  - one backend for all row counts (one packed copy of the weights): the one whose time, summed
//    over the row counts as a multiple of the fastest candidate's, is least;
//  - for the streaming kernel, the fastest tile set at each row count (they share the packing).
// A calibration is kept per process (a model of the same shapes, dtype and threads measures
// nothing again) and can be given instead (LinearChoice; kept as text by describe() and read back
// by parse()), so that tests and a cached choice are deterministic.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/cpu/cpu_isa.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/packed_linear.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// One kernel a linear layer can run on: oneDNN, or the streaming kernel with one tile set,
/// prefetching one way.
struct LinearCandidate {
  PackedBackend backend = PackedBackend::kStream;
  StreamTiles tiles = StreamTiles::kAvx2;            ///< kStream only
  StreamPrefetch prefetch = StreamPrefetch::kAhead;  ///< kStream only

  /// "onednn", or the tile set's name and its prefetch as StreamKernel::name() spells them
  /// ("avx2", "avx512-bf16", "avx512-bf16/l2").
  std::string name() const { return backend == PackedBackend::kOneDnn ? "onednn" : StreamKernel{tiles, prefetch}.name(); }
  bool operator==(const LinearCandidate& o) const {
    return backend == o.backend && (backend == PackedBackend::kOneDnn || (tiles == o.tiles && prefetch == o.prefetch));
  }
};

/// Every candidate that runs `dtype` weights on this CPU: oneDNN first, then the tile sets,
/// narrowest first, each with every StreamPrefetch (kAhead first). The avx512-fp16 tiles only
/// with `fp16_sums`: their sums round to fp16 over a few dozen products (stream_linear.hpp),
/// about one bf16 rounding more than the other sets', so a step of several tokens that runs them
/// sums further from the one-token step, and greedy speculative decoding in bf16, which can
/// already part from plain decoding where two logits nearly tie (README), parts more often. A
/// user trades that for their speed by asking.
inline std::vector<LinearCandidate> linear_candidates_here(at::ScalarType dtype, bool fp16_sums = false) {
  std::vector<LinearCandidate> v;
  if (packed_backend_unavailable(PackedBackend::kOneDnn, dtype).empty()) v.push_back({PackedBackend::kOneDnn});
  if (packed_backend_unavailable(PackedBackend::kStream, dtype).empty())
    for (const StreamTiles t : kAllStreamTiles)
      if ((fp16_sums || t != StreamTiles::kAvx512Fp16) &&
          StreamLinear::unavailable(t, dtype == at::kHalf ? HalfFormat::kFp16 : HalfFormat::kBf16).empty())
        for (const StreamPrefetch p : kAllStreamPrefetch) v.push_back({PackedBackend::kStream, t, p});
  return v;
}

/// What a model's linear layers run: one backend and, for the streaming kernel, its tile set per
/// row count; and why, in words.
struct LinearChoice {
  PackedBackend backend = PackedBackend::kStream;
  TilesByRows tiles;   ///< kStream only
  std::string reason;  ///< how it was chosen ("asked for", or the measurement)

  /// "stream (avx512-bf16 for 1-4 rows, avx2 from 5 rows)" or "onednn".
  std::string describe() const { return backend == PackedBackend::kOneDnn ? "onednn" : std::string("stream (") + tiles.describe() + ")"; }

  /// The choice describe() spells, its reason empty: a model's choice kept as text (a file, an
  /// option) and given to a later load, which then measures nothing and runs the same kernels.
  /// Throws refdec::ArgumentError naming what it cannot read (TilesByRows::parse()).
  static LinearChoice parse(std::string_view text) {
    LinearChoice choice;
    if (text == backend_name(PackedBackend::kOneDnn)) {
      choice.backend = PackedBackend::kOneDnn;
      return choice;
    }
    const std::string_view open = "stream (";
    REFDEC_CHECK(text.starts_with(open) && text.ends_with(")"),
                 "LinearChoice: '" << text << "' is neither \"onednn\" nor \"stream (...)\" (what LinearChoice::describe() writes)");
    choice.tiles = TilesByRows::parse(text.substr(open.size(), text.size() - open.size() - 1));
    return choice;
  }
};

/// The row counts a calibration times by default: plain decoding's one row up to a large draft.
inline std::vector<std::int64_t> default_calibration_rows() { return {1, 2, 4, 8, 16, 32}; }

/// Each candidate's time for one pass over a layer's products at each row count, and the choice
/// it makes (choose(): deterministic for given times).
struct LinearCalibration {
  std::vector<std::int64_t> rows;            ///< the row counts timed, ascending
  std::vector<LinearCandidate> candidates;   ///< the kernels timed
  std::vector<std::vector<double>> seconds;  ///< [candidate][row count]: the best of the repeats

  /// How much slower than the fastest tile set a wider one may measure and still be chosen. Where
  /// every set streams at the memory's speed (a row or two) their times differ by noise, and a
  /// 2-core Zen 5 EPYC's calibration picked the AVX-512 float tiles for one row by 12% in one
  /// load; the wider set spends fewer instructions per byte, which no single timing shows.
  static constexpr double kTilesWithinNoise = 0.05;

  /// The backend whose seconds, each divided by the fastest candidate's at that row count and
  /// summed over the row counts, are least (the streaming kernel counted at its chosen tile set
  /// per row count; a tie goes to it); for the streaming kernel, per row count the widest tile
  /// set with a prefetch within kTilesWithinNoise of its fastest, and that set's fastest
  /// prefetch (the prefetch changes no value: the fastest is the one to run), each measured
  /// count covering the counts above the one before it.
  LinearChoice choose() const {
    REFDEC_CHECK(!rows.empty() && !candidates.empty() && seconds.size() == candidates.size(),
                 "LinearCalibration: needs times of at least one candidate at one row count");
    for (const auto& s : seconds) REFDEC_CHECK(s.size() == rows.size(), "LinearCalibration: a time per row count for every candidate");
    std::vector<double> best(rows.size(), std::numeric_limits<double>::infinity());
    for (const auto& s : seconds)
      for (std::size_t r = 0; r < rows.size(); ++r) best[r] = std::min(best[r], s[r]);
    LinearChoice choice;
    double onednn_score = std::numeric_limits<double>::infinity(), stream_score = 0.0;
    bool any_stream = false;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      double fastest = std::numeric_limits<double>::infinity();
      for (std::size_t c = 0; c < candidates.size(); ++c)
        if (candidates[c].backend == PackedBackend::kStream) any_stream = true, fastest = std::min(fastest, seconds[c][r]);
      std::optional<StreamTiles> tiles;
      for (std::size_t c = 0; c < candidates.size(); ++c)
        if (candidates[c].backend == PackedBackend::kStream && seconds[c][r] <= fastest * (1.0 + kTilesWithinNoise) &&
            (!tiles || candidates[c].tiles > *tiles))
          tiles = candidates[c].tiles;
      if (tiles) {
        StreamKernel kernel{*tiles};
        double chosen = std::numeric_limits<double>::infinity();
        for (std::size_t c = 0; c < candidates.size(); ++c)
          if (candidates[c].backend == PackedBackend::kStream && candidates[c].tiles == *tiles && seconds[c][r] < chosen)
            kernel.prefetch = candidates[c].prefetch, chosen = seconds[c][r];
        stream_score += chosen / best[r];
        if (r == 0 || choice.tiles.kernel(rows[r], HalfFormat::kBf16) != kernel)
          choice.tiles.set(r == 0 ? 1 : rows[r - 1] + 1, kernel.tiles, kernel.prefetch);
      }
    }
    for (std::size_t c = 0; c < candidates.size(); ++c)
      if (candidates[c].backend == PackedBackend::kOneDnn) {
        onednn_score = 0.0;
        for (std::size_t r = 0; r < rows.size(); ++r) onednn_score += seconds[c][r] / best[r];
      }
    if (!any_stream) stream_score = std::numeric_limits<double>::infinity();
    choice.backend = onednn_score < stream_score ? PackedBackend::kOneDnn : PackedBackend::kStream;
    if (choice.backend == PackedBackend::kOneDnn) choice.tiles = {};
    std::ostringstream why;
    why.precision(3);
    why << "measured: one layer's products at " << table() << "; summed over the row counts as multiples of the fastest, onednn ";
    if (onednn_score < std::numeric_limits<double>::infinity())
      why << onednn_score;
    else
      why << "does not run";
    why << ", stream " << stream_score;
    choice.reason = why.str();
    return choice;
  }

  /// "1/2/4 rows: onednn 0.91/0.95/1.1 ms, avx2 1.2/1.3/1.6 ms".
  std::string table() const {
    std::ostringstream s;
    s.precision(3);
    for (std::size_t r = 0; r < rows.size(); ++r) s << (r ? "/" : "") << rows[r];
    s << " rows:";
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      s << (c ? ", " : " ") << candidates[c].name() << " ";
      for (std::size_t r = 0; r < rows.size(); ++r) s << (r ? "/" : "") << 1e3 * seconds[c][r];
      s << " ms";
    }
    return s.str();
  }
};

/// The most bytes calibrate_linear() reads between two timed passes, so that a layer's weights,
/// which a CPU's last-level cache may partly hold after a pass (tens of MB), come from memory as
/// in a step that reads every other layer in between.
inline constexpr std::int64_t kEvictBytes = std::int64_t{256} << 20;

/// Times `candidates` (by default every one that runs here) over `weights` (one layer's
/// projections, [out, in] bf16 or fp16 CPU tensors of one dtype) at each of `rows`: one pass over
/// every weight with random inputs, on libtorch's threads, each after a read of `evict_bytes`
/// (0 to kEvictBytes: what a step reads between two passes over this layer, the other layers;
/// a small model's stay in the cache, as its steps find them), the best of `repeats` after a
/// warm-up.
inline LinearCalibration calibrate_linear(const std::vector<at::Tensor>& weights,
                                          std::vector<std::int64_t> rows = default_calibration_rows(),
                                          std::vector<LinearCandidate> candidates = {}, int repeats = 3,
                                          std::int64_t evict_bytes = kEvictBytes) {
  REFDEC_CHECK(!weights.empty() && repeats >= 1, "calibrate_linear: needs weights and at least one repeat");
  REFDEC_CHECK(evict_bytes >= 0 && evict_bytes <= kEvictBytes,
               "calibrate_linear: evict_bytes must be 0 to " << kEvictBytes << ", got " << evict_bytes);
  const at::ScalarType dtype = weights.front().scalar_type();
  for (const auto& w : weights)
    REFDEC_CHECK(w.defined() && w.dim() == 2 && w.scalar_type() == dtype && w.device().is_cpu(),
                 "calibrate_linear: every weight must be a 2-D CPU tensor of one dtype");
  std::sort(rows.begin(), rows.end());
  REFDEC_CHECK(!rows.empty() && rows.front() >= 1, "calibrate_linear: row counts must be positive");
  if (candidates.empty()) candidates = linear_candidates_here(dtype);
  REFDEC_CHECK(!candidates.empty(), "calibrate_linear: no packed kernel runs " << dtype << " weights here");
  LinearCalibration cal{rows, candidates, {}};
  const auto evict = at::ones({evict_bytes / 4}, at::TensorOptions().dtype(at::kFloat));
  auto gen = at::detail::createCPUGenerator(1);
  std::map<PackedBackend, std::vector<std::unique_ptr<PackedLinear>>> packed;
  for (const auto& c : candidates)
    if (packed[c.backend].empty())
      for (const auto& w : weights) packed[c.backend].push_back(std::make_unique<PackedLinear>(w, c.backend));
  // Inputs per row count and weight; repeats, row counts and candidates interleaved, so that a
  // machine whose bandwidth drifts over seconds moves every candidate's times alike.
  std::vector<std::vector<at::Tensor>> xs(rows.size()), outs(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (const auto& w : weights) {
      xs[r].push_back(at::randn({rows[r], w.size(1)}, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype));
      outs[r].push_back(at::empty({rows[r], w.size(0)}, at::TensorOptions().dtype(dtype)));
    }
  cal.seconds.assign(candidates.size(), std::vector<double>(rows.size(), std::numeric_limits<double>::infinity()));
  for (int i = 0; i <= repeats; ++i)  // i == 0 warms up
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        if (evict.numel() > 0) (void)evict.sum().item<float>();
        const auto t0 = std::chrono::steady_clock::now();
        const auto& layers = packed[candidates[c].backend];
        for (std::size_t l = 0; l < weights.size(); ++l)
          layers[l]->run_tiles(candidates[c].tiles, xs[r][l], outs[r][l], Epilogue::kStore, {}, candidates[c].prefetch);
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i > 0) cal.seconds[c][r] = std::min(cal.seconds[c][r], t);
      }
  return cal;
}

namespace torch_detail {
// One calibration per process for each set of shapes, dtype, thread count, CPU and bytes read
// between passes: models of the same shapes measure once.
inline LinearCalibration cached_calibration(const std::vector<at::Tensor>& weights, const std::vector<LinearCandidate>& candidates,
                                            std::int64_t evict_bytes) {
  std::ostringstream key;
  key << weights.front().scalar_type() << " threads " << at::get_num_threads() << " " << cpu_isa().describe() << " evict " << evict_bytes;
  for (const auto& w : weights) key << " " << w.size(0) << "x" << w.size(1);
  for (const auto& c : candidates) key << " " << c.name();
  static std::mutex mutex;
  static std::map<std::string, LinearCalibration> cache;
  const std::lock_guard lock(mutex);
  const auto it = cache.find(key.str());
  if (it != cache.end()) return it->second;
  return cache[key.str()] = calibrate_linear(weights, default_calibration_rows(), candidates, 3, evict_bytes);
}
}  // namespace torch_detail

REFDEC_TORCH_NAMESPACE_END
