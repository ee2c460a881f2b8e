// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The fast CPU path (packed_linear.hpp, attention_products.hpp): PackedLinear against at::linear on
// every backend, attention over the cache in place, and the model with packed layers against the
// reference.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "common/expect_error.hpp"
#include "common/skip_backend.hpp"
#include "common/tiny_llama.hpp"
#include "refdec/torch/attention_products.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/linear_choice.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/packed_linear.hpp"
#include "refdec/torch/thread_scratch.hpp"

namespace {

using namespace refdec;

// ---- PackedLinear (oneDNN's bf16 matmul, refdec's streaming kernel) against at::linear ----

// x W^T in float64 from the same half values: the reference both kernels approximate.
at::Tensor linear_reference(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x.to(at::kDouble), w.to(at::kDouble).t()); }

// Every epilogue of one backend (and tile sets) and dtype against the float64 product, over row
// counts a step has.
void expect_products(PackedBackend backend, at::ScalarType dtype, const TilesByRows& tiles = {}) {
  auto gen = at::detail::createCPUGenerator(3);
  // Rounding to the half dtype: its relative half-step.
  const double step = dtype == at::kHalf ? 1e-3 : 1e-2;
  // The sums' own error relative to the largest output: float32's summation order, or the fp16
  // tiles' fp16 sums over a chunk of pairs.
  const double sums = tiles == TilesByRows(StreamTiles::kAvx512Fp16) ? 1.0 / 128 : 1e-4;
  for (const auto& [out, in] : {std::pair<std::int64_t, std::int64_t>{48, 32}, {130, 70}, {256, 512}}) {
    const auto w = at::randn({out, in}, gen, at::kFloat).to(dtype);
    const PackedLinear packed(w, backend, tiles);
    EXPECT_EQ(packed.backend(), backend);
    EXPECT_EQ(packed.tiles(), tiles);
    EXPECT_EQ(packed.dtype(), dtype);
    EXPECT_EQ(packed.in_features(), in);
    EXPECT_EQ(packed.out_features(), out);
    EXPECT_GE(packed.bytes(), out * in * 2);  // padded to its blocks where the sizes are not multiples
    for (const std::int64_t rows : {1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 130}) {
      const auto x = at::randn({rows, in}, gen, at::kFloat).to(dtype);
      const auto want = linear_reference(x, w);
      const double scale = want.abs().max().item<double>();
      const std::string where = std::string(backend_name(backend)) + " (" + tiles.describe() + ") " + at::toString(dtype) + " " +
                                std::to_string(out) + "x" + std::to_string(in) + ", " + std::to_string(rows) + " rows";
      // float32 output: only the summation order differs from the reference.
      const auto f32 = packed(x, at::kFloat);
      EXPECT_EQ(f32.scalar_type(), at::kFloat);
      EXPECT_LT((f32.to(at::kDouble) - want).abs().max().item<double>(), sums * scale) << where;
      // Output in the weights' dtype: rounded, as at::linear's is.
      const auto rounded = packed(x);
      EXPECT_EQ(rounded.scalar_type(), dtype);
      EXPECT_LT((rounded.to(at::kDouble) - want).abs().max().item<double>(), step * scale) << where;
      // Accumulating adds to what the output holds (the residual connection).
      const auto residual = at::randn({rows, out}, gen, at::kFloat);
      auto sum = residual.clone();
      packed.run(x, sum, Epilogue::kAccumulate);
      EXPECT_LT((sum.to(at::kDouble) - residual.to(at::kDouble) - want).abs().max().item<double>(), sums * scale) << where;
      // SwiGLU's epilogues: silu of the product, the product times another tensor.
      const auto silu = packed(x, at::kFloat, Epilogue::kSilu).to(at::kDouble);
      EXPECT_LT((silu - want * at::sigmoid(want)).abs().max().item<double>(), sums * scale) << where;
      const auto other = at::randn({rows, out}, gen, at::kFloat).to(dtype);
      const auto product = packed(x, dtype, Epilogue::kMultiply, other).to(at::kDouble);
      const auto want_product = want * other.to(at::kDouble);
      EXPECT_LT((product - want_product).abs().max().item<double>(), step * want_product.abs().max().item<double>()) << where;
    }
  }
}

TEST(PackedLinear, OneDnnEqualsTheProductForEveryRowCount) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_products(PackedBackend::kOneDnn, at::kBFloat16);
}

// Each tile set of the streaming kernel that runs here, in both formats; the sets above this
// CPU (or REFDEC_CPU_ISA's cap) are named in the skip.
TEST(PackedLinear, StreamEqualsTheProductForEveryRowCountAndTileSet) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
  std::string not_run;
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf})
    for (const StreamTiles t : kAllStreamTiles) {
      const HalfFormat format = dtype == at::kHalf ? HalfFormat::kFp16 : HalfFormat::kBf16;
      if (t >= StreamTiles::kAvx512Fp16 && format == HalfFormat::kFp16) continue;  // bf16 weights only
      if (const std::string why = StreamLinear::unavailable(t, format); !why.empty()) {
        not_run += std::string(not_run.empty() ? "" : "; ") + at::toString(dtype) + ": " + why;
        continue;
      }
      expect_products(PackedBackend::kStream, dtype, TilesByRows(t));
    }
  if (!not_run.empty()) GTEST_SKIP() << "tile sets not run on this CPU: " << not_run;
}

// A table of tile sets runs, at each row count, exactly what its set for that count gives, and
// names them; a set that cannot run here is refused when packing.
TEST(PackedLinear, RunsEachRowCountOnTheTilesItsTableNames) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
  TilesByRows table;
  EXPECT_EQ(table.describe(), "the widest tiles here");
  EXPECT_EQ(table.at(7, HalfFormat::kBf16), StreamLinear::widest(HalfFormat::kBf16));
  const StreamTiles wide = StreamLinear::widest(HalfFormat::kBf16);
  table.set(1, StreamTiles::kAvx2);
  table.set(4, wide);
  table.set(9, StreamTiles::kAvx2);
  EXPECT_EQ(table.describe(), std::string("avx2 for 1-3 rows, ") + stream_tiles_name(wide) + " for 4-8 rows, avx2 from 9 rows");
  EXPECT_EQ(TilesByRows(StreamTiles::kAvx2).describe(), "avx2 for every row count");
  refdec_test::expect_error([&] { table.set(0, StreamTiles::kAvx2); }, "TilesByRows: a range starts at 1 row or more, got 0");
  auto gen = at::detail::createCPUGenerator(12);
  const auto w = at::randn({70, 50}, gen, at::kFloat).to(at::kBFloat16);
  const PackedLinear packed(w, PackedBackend::kStream, table);
  for (const std::int64_t rows : {1, 3, 4, 8, 9, 20}) {
    const auto x = at::randn({rows, 50}, gen, at::kFloat).to(at::kBFloat16);
    auto want = at::empty({rows, 70});
    packed.run_tiles(rows >= 4 && rows <= 8 ? wide : StreamTiles::kAvx2, x, want);
    EXPECT_TRUE(at::equal(packed(x, at::kFloat), want)) << rows << " rows";
  }
  for (const StreamTiles t : kAllStreamTiles)
    if (const std::string why = StreamLinear::unavailable(t, HalfFormat::kFp16); !why.empty())
      refdec_test::expect_error([&] { PackedLinear p(w.to(at::kHalf), PackedBackend::kStream, TilesByRows(t)); }, why);
}

// A table kept as text reads back as the same table, whatever this CPU runs (reading checks no
// instruction set: packing does); text describe() cannot have written is refused, naming the part.
TEST(PackedLinear, TilesByRowsReadsBackWhatItDescribes) {
  std::vector<TilesByRows> tables(4);
  tables[1] = TilesByRows(StreamTiles::kAvx512Fp16);
  tables[2].set(1, StreamTiles::kAvx512Bf16, StreamPrefetch::kNone);
  tables[2].set(3, StreamTiles::kAvx512Bf16);
  tables[2].set(5, StreamTiles::kAvx512Bf16, StreamPrefetch::kNone);
  tables[2].set(9, StreamTiles::kAvx2, StreamPrefetch::kL2);
  tables[2].set(17, StreamTiles::kAvx512);
  tables[3].set(4, StreamTiles::kAvx2);  // nothing below 4 rows: the widest tiles there
  tables[3].set(5, StreamTiles::kAvx512, StreamPrefetch::kL2);
  for (const TilesByRows& t : tables) EXPECT_EQ(TilesByRows::parse(t.describe()), t) << t.describe();
  EXPECT_EQ(
      tables[2].describe(),
      "avx512-bf16/none for 1-2 rows, avx512-bf16 for 3-4 rows, avx512-bf16/none for 5-8 rows, avx2/l2 for 9-16 rows, avx512 from 17 rows");
  EXPECT_EQ(tables[3].describe(), "avx2 for 4-4 rows, avx512/l2 from 5 rows");
  EXPECT_EQ(TilesByRows::parse("avx2/ahead from 1 rows"), TilesByRows(StreamTiles::kAvx2));  // kAhead written out
  for (const StreamTiles t : kAllStreamTiles)
    for (const StreamPrefetch p : kAllStreamPrefetch) EXPECT_EQ(StreamKernel::parse(StreamKernel{t, p}.name()), (StreamKernel{t, p}));
  using refdec_test::expect_error;
  expect_error([] { (void)TilesByRows::parse("avx3 for every row count"); }, "unknown tile set 'avx3'");
  expect_error([] { (void)TilesByRows::parse("avx2/l1 from 2 rows"); }, "unknown prefetch 'l1' in 'avx2/l1'");
  expect_error([] { (void)TilesByRows::parse("avx2 for 1-3 rows, avx512 from 5 rows"); },
               "'avx512 from 5 rows' starts at 5 rows where the range before it ends at 3");
  expect_error([] { (void)TilesByRows::parse("avx2 for 1-3 rows, avx512 from 3 rows"); },
               "starts at 3 rows where the range before it ends at 3");
  expect_error([] { (void)TilesByRows::parse("avx2 for 1-3 rows"); },
               "the last range, 'avx2 for 1-3 rows', must reach every larger row count");
  expect_error([] { (void)TilesByRows::parse("avx2 from 3 rows, avx512 from 9 rows"); },
               "a range after one that reaches every larger row count");
  expect_error([] { (void)TilesByRows::parse("avx2 for 4-2 rows, avx512 from 3 rows"); }, "'avx2 for 4-2 rows' ends before it starts");
  expect_error([] { (void)TilesByRows::parse("avx2 from 0 rows"); }, "'0' in 'avx2 from 0 rows' is not a row count");
  expect_error([] { (void)TilesByRows::parse("avx2 from x2 rows"); }, "'x2' in 'avx2 from x2 rows' is not a row count");
  expect_error([] { (void)TilesByRows::parse("avx2 for 1-2 rows, avx512 for every row count"); },
               "'for every row count' beside other ranges");
  expect_error([] { (void)TilesByRows::parse("avx2 for some rows"); }, "cannot read the row counts of 'avx2 for some rows'");
  expect_error([] { (void)TilesByRows::parse("avx2"); }, "'avx2' names no row counts");
  expect_error([] { (void)TilesByRows::parse(""); }, "no ranges in ''");
}

// Without a backend named, the streaming kernel where it runs; one that cannot run says why and
// what the CPU has.
TEST(PackedLinear, DefaultsToTheStreamingKernelAndNamesWhatTheCpuLacks) {
  const auto w = at::randn({8, 4}).to(at::kBFloat16);
  const auto here = packed_backends_here(at::kBFloat16);
  EXPECT_EQ(PackedLinear::supported(w), !here.empty());
  EXPECT_FALSE(packed_backend_unavailable(PackedBackend::kOneDnn, at::kHalf).empty()) << "oneDNN runs bf16 only";
  EXPECT_FALSE(packed_backend_unavailable(PackedBackend::kStream, at::kFloat).empty());
  for (const PackedBackend b : {PackedBackend::kOneDnn, PackedBackend::kStream}) {
    const std::string why = packed_backend_unavailable(b, at::kBFloat16);
    EXPECT_EQ(why.empty(), std::find(here.begin(), here.end(), b) != here.end());
    if (why.empty()) {
      EXPECT_EQ(PackedLinear(w, b).backend(), b);
    } else {
      EXPECT_NE(why.find("this"), std::string::npos) << why;  // this CPU / this build
      refdec_test::expect_error([&] { PackedLinear p(w, b); }, "PackedLinear: cannot pack");
    }
  }
  if (here.empty()) GTEST_SKIP() << "no packed backend runs here: " << packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16);
  EXPECT_EQ(PackedLinear(w).backend(), here.back());
}

// ---- The kernel chosen by measurement (linear_choice.hpp), from injected times ----

LinearCalibration injected(std::vector<std::vector<double>> ms) {
  LinearCalibration c;
  c.rows = {1, 4, 16};
  c.candidates = {
      {PackedBackend::kOneDnn}, {PackedBackend::kStream, StreamTiles::kAvx2}, {PackedBackend::kStream, StreamTiles::kAvx512Bf16}};
  for (auto& row : ms)
    for (double& v : row) v *= 1e-3;
  c.seconds = std::move(ms);
  return c;
}

TEST(LinearCalibration, ChoosesOneBackendAndTheFastestTilesPerRowCount) {
  // oneDNN fastest at every row count: oneDNN, no tiles.
  auto onednn = injected({{1.0, 1.1, 1.5}, {1.2, 2.0, 4.0}, {1.1, 1.3, 2.0}}).choose();
  EXPECT_EQ(onednn.backend, PackedBackend::kOneDnn);
  EXPECT_EQ(onednn.describe(), "onednn");
  EXPECT_NE(onednn.reason.find("1/4/16 rows: onednn 1/1.1/1.5 ms, avx2 1.2/2/4 ms, avx512-bf16 1.1/1.3/2 ms"), std::string::npos)
      << onednn.reason;
  // The streaming kernel faster over the row counts (3 multiples of the fastest against oneDNN's
  // 1.2 + 1.1 + 1.5 / 1.4): its fastest tiles per count, each measured count covering those above
  // the count before it.
  const auto stream = injected({{1.2, 1.1, 1.5}, {1.0, 2.0, 4.0}, {1.1, 1.0, 1.4}}).choose();
  EXPECT_EQ(stream.backend, PackedBackend::kStream);
  EXPECT_EQ(stream.describe(), "stream (avx2 for 1-1 rows, avx512-bf16 from 2 rows)");
  EXPECT_EQ(stream.tiles.at(1, HalfFormat::kBf16), StreamTiles::kAvx2);
  EXPECT_EQ(stream.tiles.at(3, HalfFormat::kBf16), StreamTiles::kAvx512Bf16);
  EXPECT_EQ(stream.tiles.at(100, HalfFormat::kBf16), StreamTiles::kAvx512Bf16);
  // Within 5% of the fastest tile set the widest goes (noise where every set streams at the
  // memory's speed); beyond it, the fastest.
  const auto near = injected({{2.0, 2.0, 2.0}, {1.0, 1.0, 4.0}, {1.04, 1.06, 1.4}}).choose();
  EXPECT_EQ(near.tiles.at(1, HalfFormat::kBf16), StreamTiles::kAvx512Bf16);
  EXPECT_EQ(near.tiles.at(4, HalfFormat::kBf16), StreamTiles::kAvx2);
  EXPECT_EQ(near.tiles.at(16, HalfFormat::kBf16), StreamTiles::kAvx512Bf16);
  // A tie goes to the streaming kernel (no second copy of anything, nothing to create per count).
  EXPECT_EQ(injected({{1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}, {2.0, 2.0, 2.0}}).choose().backend, PackedBackend::kStream);
  // Determinism: the same times, the same choice.
  EXPECT_EQ(injected({{1.2, 1.1, 1.5}, {1.0, 2.0, 4.0}, {1.1, 1.0, 1.4}}).choose().tiles, stream.tiles);
  auto bad = injected({{1.0}, {1.0}, {1.0}});
  refdec_test::expect_error([&] { (void)bad.choose(); }, "a time per row count for every candidate");
}

// The prefetch: per row count the chosen tile set's fastest prefetch (it changes no value), the
// set itself still the widest within 5% of the fastest of any prefetch; named after the set.
TEST(LinearCalibration, ChoosesTheFastestPrefetchOfTheChosenTiles) {
  LinearCalibration c;
  c.rows = {1, 4, 16};
  c.candidates = {{PackedBackend::kStream, StreamTiles::kAvx2},
                  {PackedBackend::kStream, StreamTiles::kAvx512Bf16, StreamPrefetch::kAhead},
                  {PackedBackend::kStream, StreamTiles::kAvx512Bf16, StreamPrefetch::kL2},
                  {PackedBackend::kStream, StreamTiles::kAvx512Bf16, StreamPrefetch::kNone}};
  c.seconds = {{3.0, 1.0, 9.0}, {1.0, 2.0, 2.0}, {0.95, 2.1, 1.8}, {0.9, 2.2, 2.4}};
  for (auto& row : c.seconds)
    for (double& v : row) v *= 1e-3;
  const auto choice = c.choose();
  EXPECT_EQ(choice.describe(), "stream (avx512-bf16/none for 1-1 rows, avx2 for 2-4 rows, avx512-bf16/l2 from 5 rows)");
  EXPECT_EQ(choice.tiles.kernel(1, HalfFormat::kBf16), (StreamKernel{StreamTiles::kAvx512Bf16, StreamPrefetch::kNone}));
  EXPECT_EQ(choice.tiles.kernel(3, HalfFormat::kBf16), (StreamKernel{StreamTiles::kAvx2, StreamPrefetch::kAhead}));
  EXPECT_EQ(choice.tiles.kernel(32, HalfFormat::kBf16), (StreamKernel{StreamTiles::kAvx512Bf16, StreamPrefetch::kL2}));
  EXPECT_EQ(choice.tiles.at(32, HalfFormat::kBf16), StreamTiles::kAvx512Bf16);
  EXPECT_NE(choice.reason.find("avx512-bf16/l2 0.95/2.1/1.8 ms"), std::string::npos) << choice.reason;
  // The summed score counts each row count at the chosen kernel: 1 + 1 + 1.
  EXPECT_NE(choice.reason.find("onednn does not run, stream 3"), std::string::npos) << choice.reason;
  // A set within 5% of a faster prefetch of a narrower set is still the one chosen, at its fastest.
  c.seconds = {{1.0, 1.0, 1.0}, {1.04, 1.1, 1.1}, {1.2, 1.2, 1.2}, {1.3, 1.3, 1.3}};
  EXPECT_EQ(c.choose().describe(), "stream (avx512-bf16 for 1-1 rows, avx2 from 2 rows)");
  // Without ranges a TilesByRows runs the widest set, prefetching kAhead.
  EXPECT_EQ(TilesByRows().kernel(4, HalfFormat::kBf16), StreamKernel{StreamLinear::widest(HalfFormat::kBf16)});
  EXPECT_EQ((StreamKernel{StreamTiles::kAvx2, StreamPrefetch::kL2}).name(), "avx2/l2");
}

// A calibration times every candidate that runs here at each row count (positive times, nothing
// asserted about which is faster) and refuses what it cannot time.
TEST(LinearCalibration, TimesEveryCandidateHereAtEachRowCount) {
  const auto candidates = linear_candidates_here(at::kBFloat16);
  if (candidates.empty())
    GTEST_SKIP() << "no packed kernel runs here: " << packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16);
  for (const auto& c : candidates) EXPECT_TRUE(packed_backend_unavailable(c.backend, at::kBFloat16).empty()) << c.name();
  // The fp16 tiles, whose sums round to fp16, only when asked for, and then wherever they run.
  const auto with_fp16 = linear_candidates_here(at::kBFloat16, true);
  const LinearCandidate fp16{PackedBackend::kStream, StreamTiles::kAvx512Fp16};
  EXPECT_EQ(std::count(candidates.begin(), candidates.end(), fp16), 0);
  EXPECT_EQ(std::count(with_fp16.begin(), with_fp16.end(), fp16),
            StreamLinear::unavailable(StreamTiles::kAvx512Fp16, HalfFormat::kBf16).empty() &&
                    packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16).empty()
                ? 1
                : 0);
  // Every tile set with every prefetch, kAhead first.
  const auto fp16_sets = std::count_if(with_fp16.begin(), with_fp16.end(), [](const LinearCandidate& c) {
    return c.backend == PackedBackend::kStream && c.tiles == StreamTiles::kAvx512Fp16;
  });
  EXPECT_EQ(fp16_sets, static_cast<std::ptrdiff_t>(std::count(with_fp16.begin(), with_fp16.end(), fp16) * kAllStreamPrefetch.size()));
  EXPECT_EQ(with_fp16.size(), candidates.size() + static_cast<std::size_t>(fp16_sets));
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].backend == PackedBackend::kStream && candidates[i].prefetch == StreamPrefetch::kAhead) {
      ASSERT_LE(i + kAllStreamPrefetch.size(), candidates.size());
      for (std::size_t p = 0; p < kAllStreamPrefetch.size(); ++p) {
        EXPECT_EQ(candidates[i + p].tiles, candidates[i].tiles);
        EXPECT_EQ(candidates[i + p].prefetch, kAllStreamPrefetch[p]);
      }
    }
  auto gen = at::detail::createCPUGenerator(13);
  const std::vector<at::Tensor> weights = {at::randn({48, 32}, gen, at::kFloat).to(at::kBFloat16),
                                           at::randn({32, 48}, gen, at::kFloat).to(at::kBFloat16)};
  const auto cal = calibrate_linear(weights, {4, 1}, {}, 1, 1 << 20);
  EXPECT_EQ(cal.rows, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(cal.candidates, candidates);
  ASSERT_EQ(cal.seconds.size(), candidates.size());
  for (const auto& s : cal.seconds) {
    ASSERT_EQ(s.size(), 2u);
    for (const double t : s) EXPECT_GT(t, 0.0);
  }
  const LinearChoice choice = cal.choose();
  EXPECT_TRUE(packed_backend_unavailable(choice.backend, at::kBFloat16).empty());
  refdec_test::expect_error([&] { (void)calibrate_linear({}); }, "calibrate_linear: needs weights");
  refdec_test::expect_error([&] { (void)calibrate_linear({weights[0], weights[1].to(at::kHalf)}); }, "of one dtype");
  refdec_test::expect_error([&] { (void)calibrate_linear(weights, {0, 1}); }, "row counts must be positive");
  refdec_test::expect_error([&] { (void)calibrate_linear(weights, {1}, {}, 1, -1); }, "evict_bytes must be 0 to 268435456, got -1");
}

TEST(PackedLinear, RejectsWhatItCannotRun) {
  const auto f32 = at::randn({8, 4});
  EXPECT_FALSE(PackedLinear::supported(f32));
  EXPECT_FALSE(PackedLinear::supported(at::Tensor()));
  refdec_test::expect_error([&] { PackedLinear p(f32); }, "needs a 2-D bf16 or fp16 CPU weight");
  if (packed_backends_here(at::kBFloat16).empty())
    GTEST_SKIP() << "no packed backend runs here: " << packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16);
  const PackedLinear packed(f32.to(at::kBFloat16));
  const auto bf = [](at::IntArrayRef sizes) { return at::zeros(sizes, at::TensorOptions().dtype(at::kBFloat16)); };
  refdec_test::expect_error([&] { (void)packed(bf({3, 5})); }, "input must be a contiguous BFloat16 CPU [rows, 4]");
  refdec_test::expect_error([&] { (void)packed(at::zeros({3, 4})); }, "input must be a contiguous BFloat16 CPU");
  refdec_test::expect_error([&] { (void)packed(bf({4, 3}).t()); }, "input must be a contiguous BFloat16 CPU");
  refdec_test::expect_error([&] { packed.run(bf({3, 4}), bf({2, 8})); }, "output must be a contiguous BFloat16 or float32 CPU [3, 8]");
  refdec_test::expect_error([&] { packed.run(bf({3, 4}), at::zeros({3, 8}, at::kDouble)); }, "output must be");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kMultiply); }, "Epilogue::kMultiply needs the tensor");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kSilu, bf({3, 8})); }, "and only it takes one");
  refdec_test::expect_error(
      [&] {
        (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kMultiply, bf({3, 7}));
      },
      "the tensor to multiply by must be a contiguous BFloat16 CPU [3, 8] apart from the output");
  refdec_test::expect_error(
      [&] {
        (void)packed(bf({3, 4}), at::kBFloat16, Epilogue::kMultiply, at::zeros({3, 8}));
      },
      "the tensor to multiply by must be");
  refdec_test::expect_error([&] { (void)packed(bf({3, 4}), at::kFloat, Epilogue::kAccumulate); }, "adds to an output: call run()");
  const auto same = bf({3, 8});
  refdec_test::expect_error([&] { packed.run(bf({3, 4}), same, Epilogue::kMultiply, same); }, "apart from the output");
  EXPECT_EQ(packed(bf({0, 4})).size(0), 0);  // no rows: nothing to run
}

// Attention's two products over a cache read in place (a slice of a longer buffer, as the stores
// hand it out) equal the float64 products of the same bf16 values, for every head grouping, row
// count, length and head size, the length changing from call to call under one primitive.
void expect_attention_products(at::Tensor (*scores_of)(const at::Tensor&, const at::Tensor&, double),
                               at::Tensor (*values_of)(const at::Tensor&, const at::Tensor&)) {
  auto gen = at::detail::createCPUGenerator(9);
  const auto bf = [&](at::IntArrayRef sizes) { return at::randn(sizes, gen, at::kFloat).to(at::kBFloat16); };
  for (const std::int64_t kv : {1, 2, 4})
    for (const std::int64_t rows : {1, 3, 16})
      for (const std::int64_t d : {8, 64})
        for (const std::int64_t s : {1, 5, 17, 130}) {
          const auto keys = bf({s + 7, kv, d}).narrow(0, 0, s), values = bf({s + 7, kv, d}).narrow(0, 0, s);
          const auto q = bf({kv, rows, d});
          const auto scores = scores_of(q, keys, 0.25);
          const auto want = at::matmul(q.to(at::kDouble), keys.to(at::kDouble).permute({1, 2, 0})) * 0.25;
          ASSERT_EQ(scores.scalar_type(), at::kFloat);
          ASSERT_EQ(scores.sizes(), want.sizes());
          EXPECT_LT((scores.to(at::kDouble) - want).abs().max().item<double>(), 1e-4 * (1.0 + want.abs().max().item<double>()))
              << kv << " kv heads, " << rows << " rows, d " << d << ", length " << s;
          const auto probs = at::softmax(scores, -1).to(at::kBFloat16);
          const auto out = values_of(probs, values);
          const auto out_want = at::matmul(probs.to(at::kDouble), values.to(at::kDouble).permute({1, 0, 2}));
          ASSERT_EQ(out.scalar_type(), at::kBFloat16);
          ASSERT_EQ(out.sizes(), out_want.sizes());
          // bf16 output: within its rounding of values of magnitude up to max |v|.
          EXPECT_LT((out.to(at::kDouble) - out_want).abs().max().item<double>(), 1e-2 * values.to(at::kDouble).abs().max().item<double>())
              << kv << " kv heads, " << rows << " rows, d " << d << ", length " << s;
        }
}

TEST(AttentionProducts, EqualTheProductsOverTheCacheInPlace) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_attention_products(attention_scores, attention_values);
}

// attention_scores_into() writes what attention_scores() returns into the tensor given, and
// refuses one of another shape or type.
TEST(AttentionProducts, ScoresIntoAGivenTensorEqualTheReturnedOnes) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  const auto bf = [](at::IntArrayRef sizes) { return at::randn(sizes).to(at::kBFloat16); };
  const auto keys = bf({20, 2, 8}).narrow(0, 0, 13);
  const auto q = bf({2, 3, 8});
  const auto out = at::full({2, 3, 13}, 7.0f);
  attention_scores_into(q, keys, 0.5, out);
  EXPECT_TRUE(at::equal(out, attention_scores(q, keys, 0.5)));
  refdec_test::expect_error([&] { attention_scores_into(q, keys, 0.5, at::empty({2, 3, 12})); }, "the output must be a contiguous float32");
  refdec_test::expect_error([&] { attention_scores_into(q, keys, 0.5, out.to(at::kBFloat16)); }, "the output must be");
  refdec_test::expect_error([&] { (void)attention_scores(q.select(0, 0), keys, 0.5); }, "needs bf16 CPU queries [KV, rows, D]");
}

// A thread's scratch: the shape and type asked, the same memory for the same slot while it fits,
// other memory for another slot or thread, and a tensor of its own past kMaxScratchBytes.
TEST(ThreadScratch, ReusesASlotsMemoryPerThreadUpToItsLimit) {
  using torch_detail::ScratchSlot, torch_detail::thread_scratch;
  const auto a = thread_scratch(ScratchSlot::kAttentionScores, {4, 5}, at::kFloat);
  EXPECT_EQ(a.sizes(), at::IntArrayRef({4, 5}));
  EXPECT_EQ(a.scalar_type(), at::kFloat);
  EXPECT_TRUE(a.is_contiguous());
  const auto b = thread_scratch(ScratchSlot::kAttentionScores, {3, 2}, at::kBFloat16);
  EXPECT_EQ(b.data_ptr(), a.data_ptr()) << "a smaller request reuses the slot";
  EXPECT_EQ(b.scalar_type(), at::kBFloat16);
  const auto other = thread_scratch(ScratchSlot::kAttentionProbs, {4, 5}, at::kFloat);
  EXPECT_NE(other.data_ptr(), a.data_ptr());
  void* elsewhere = nullptr;
  std::thread([&] { elsewhere = thread_scratch(ScratchSlot::kAttentionScores, {4, 5}, at::kFloat).data_ptr(); }).join();
  EXPECT_NE(elsewhere, a.data_ptr());
  const std::int64_t over = torch_detail::kMaxScratchBytes / 4 + 1;
  const auto big = thread_scratch(ScratchSlot::kAttentionScores, {over}, at::kFloat);
  EXPECT_EQ(big.numel(), over);
  EXPECT_NE(big.data_ptr(), thread_scratch(ScratchSlot::kAttentionScores, {over}, at::kFloat).data_ptr()) << "not kept";
  EXPECT_EQ(thread_scratch(ScratchSlot::kAttentionScores, {4, 5}, at::kFloat).data_ptr(), a.data_ptr());
}

// Raw scratch: the slot's memory (shared with its tensors), 64-byte aligned, reused while it fits,
// and a request past kMaxScratchBytes kept until the next.
TEST(ThreadScratch, BytesAreTheSlotsMemory) {
  using torch_detail::ScratchSlot, torch_detail::thread_scratch, torch_detail::thread_scratch_bytes;
  void* const p = thread_scratch_bytes(ScratchSlot::kPreparedInput, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 100);
  EXPECT_EQ(thread_scratch_bytes(ScratchSlot::kPreparedInput, 64), p) << "a smaller request reuses the slot";
  EXPECT_EQ(thread_scratch(ScratchSlot::kPreparedInput, {5, 5}, at::kFloat).data_ptr(), p) << "the tensors' memory too";
  EXPECT_NE(thread_scratch_bytes(ScratchSlot::kAttentionProbs, 100), p);
  const std::int64_t over = torch_detail::kMaxScratchBytes + 1;
  void* const big = thread_scratch_bytes(ScratchSlot::kPreparedInput, over);
  static_cast<char*>(big)[over - 1] = 1;
  EXPECT_EQ(thread_scratch_bytes(ScratchSlot::kPreparedInput, over), big) << "kept until the next request";
  static_cast<char*>(thread_scratch_bytes(ScratchSlot::kPreparedInput, 100))[99] = 1;
}

// The same through refdec's AVX2 kernel (the path of CPUs where oneDNN runs no bf16).
TEST(AttentionProducts, Avx2EqualTheProductsOverTheCacheInPlace) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
  expect_attention_products(avx2_attention_scores, avx2_attention_values);
}

// The AVX2 path's whole attention (scores, the step's mask, softmax and values, each thread over
// its own kv heads) equals softmax(scale q k^T + mask) v in float64, with one and several threads,
// and refuses a mask that does not fit. Heads of 64 take the AVX512_BF16 kernel's products where
// the CPU runs it (avx2_attention_takes_bf16), heads of 16 the AVX2 kernel's.
TEST(AttentionProducts, Avx2AttentionEqualsTheMaskedSoftmaxProduct) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
  auto gen = at::detail::createCPUGenerator(10);
  const auto bf = [&](at::IntArrayRef sizes) { return at::randn(sizes, gen, at::kFloat).to(at::kBFloat16); };
  const int threads_before = at::get_num_threads();
  for (const int threads : {1, 2, 3})
    for (const std::int64_t kv : {1, 4})
      for (const std::int64_t n : {1, 3})
        for (const std::int64_t s : {3, 40})
          for (const std::int64_t d : {16, 64}) {
            at::set_num_threads(threads);
            const std::int64_t groups = 2;
            const auto keys = bf({s + 5, kv, d}).narrow(0, 0, s), values = bf({s + 5, kv, d}).narrow(0, 0, s);
            const auto q = bf({kv, groups * n, d});
            // The step's rows see themselves and the rows before them (a chain), as a plan's mask does.
            const auto mask = n == 1 ? at::Tensor()
                                     : at::triu(at::full({n, n}, -std::numeric_limits<double>::infinity()), 1).to(at::kBFloat16);
            auto scores = at::matmul(q.to(at::kDouble), keys.to(at::kDouble).permute({1, 2, 0})) * 0.25;  // [kv, groups * n, s]
            if (mask.defined()) scores.view({kv, groups, n, s}).narrow(-1, s - n, n).add_(mask.to(at::kDouble));
            const auto want = at::matmul(at::softmax(scores, -1), values.to(at::kDouble).permute({1, 0, 2}));
            const auto got = avx2_attention(q, keys, values, mask, 0.25);
            ASSERT_EQ(got.scalar_type(), at::kBFloat16);
            ASSERT_EQ(got.sizes(), want.sizes());
            EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>(), 1e-2 * values.to(at::kDouble).abs().max().item<double>())
                << threads << " threads, " << kv << " kv heads, " << n << " step rows, length " << s << ", head size " << d;
          }
  EXPECT_EQ(avx2_attention_takes_bf16(at::kBFloat16, HalfFormat::kBf16, 64), avx512bf16::runs(64));
  EXPECT_FALSE(avx2_attention_takes_bf16(at::kFloat, HalfFormat::kBf16, 64)) << "float32 queries keep their precision";
  EXPECT_FALSE(avx2_attention_takes_bf16(at::kBFloat16, HalfFormat::kFp16, 64)) << "an fp16 cache";
  EXPECT_FALSE(avx2_attention_takes_bf16(at::kBFloat16, HalfFormat::kBf16, 16)) << "heads of 16";
  at::set_num_threads(threads_before);
  const auto keys = bf({8, 2, 16}), q = bf({2, 4, 16});
  refdec_test::expect_error([&] { (void)avx2_attention(q, keys, keys, at::zeros({3, 3}), 1.0); }, "the mask must be a floating CPU [n, n]");
  refdec_test::expect_error([&] { (void)avx2_attention(q, keys, bf({8, 2, 8}), {}, 1.0); }, "avx2_attention: needs queries");
}

// The masked softmax the oneDNN path runs between its products equals at::softmax of the scores
// with the mask added to each group's last columns, with and without a mask, on one and several
// threads (the AVX2 softmax where the CPU runs it, ATen's otherwise), and refuses what does not fit.
TEST(AttentionProducts, MaskSoftmaxInPlaceEqualsTheSoftmaxOfTheMaskedScores) {
  auto gen = at::detail::createCPUGenerator(12);
  const int threads_before = at::get_num_threads();
  for (const int threads : {1, 2, 3})
    for (const std::int64_t n : {1, 4})
      for (const std::int64_t s : {4, 37, 600}) {
        at::set_num_threads(threads);
        const std::int64_t kv = 2, groups = 3;
        const auto scores = at::randn({kv, groups * n, s}, gen, at::kFloat) * 4;
        const auto mask = n == 1 ? at::Tensor() : at::triu(at::full({n, n}, -std::numeric_limits<double>::infinity()), 1).to(at::kFloat);
        auto want = scores.to(at::kDouble);
        if (mask.defined()) want.view({kv, groups, n, s}).narrow(-1, s - n, n).add_(mask.to(at::kDouble));
        want = at::softmax(want, -1);
        auto got = scores.clone();
        mask_softmax_in_place(got, mask);
        EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>(), 1e-6)
            << threads << " threads, " << n << " step rows, length " << s;
        if (mask.defined()) {
          EXPECT_EQ(got.view({kv, groups, n, s})[0][0][0][s - 1].item<float>(), 0.0f) << "a masked entry is 0";
        }
      }
  at::set_num_threads(threads_before);
  refdec_test::expect_error([] { mask_softmax_in_place(at::zeros({2, 4}, at::kDouble), {}); }, "needs contiguous float32 CPU scores");
  refdec_test::expect_error([] { mask_softmax_in_place(at::zeros({3, 4}), at::zeros({2, 2})); }, "with n dividing the rows");
  refdec_test::expect_error(
      [] {
        mask_softmax_in_place(at::zeros({4, 4}), at::zeros({2, 2}, at::kBFloat16));
      },
      "needs a contiguous float32 CPU mask");
}

TEST(AttentionProducts, RejectWhatTheyCannotRun) {
  const auto bf = [](at::IntArrayRef sizes) { return at::zeros(sizes, at::TensorOptions().dtype(at::kBFloat16)); };
  EXPECT_FALSE(attention_products_supported(at::zeros({4, 2, 8})));
  EXPECT_FALSE(attention_products_supported(bf({4, 8, 2}).transpose(1, 2)));  // last dimension strided
  EXPECT_FALSE(attention_products_supported(at::Tensor()));
  EXPECT_EQ(attention_products_supported(bf({4, 2, 8})), packed_backend_unavailable(PackedBackend::kOneDnn, at::kBFloat16).empty())
      << "the products run where oneDNN runs bf16";
  refdec_test::expect_error([&] { (void)attention_scores(bf({2, 1, 8}), at::zeros({4, 2, 8}), 1.0); }, "attention_scores: needs bf16 CPU");
  refdec_test::expect_error([&] { (void)attention_scores(bf({3, 1, 8}), bf({4, 2, 8}), 1.0); }, "attention_scores: needs bf16 CPU");
  refdec_test::expect_error([&] { (void)attention_values(bf({2, 1, 5}), bf({4, 2, 8})); }, "attention_values: needs bf16 CPU");
}

// One packed layer serves several threads at once (each row count's kernel is made once, under a
// lock); every thread gets what a lone call gives.
void expect_threads_share_one_layer(PackedBackend backend) {
  auto gen = at::detail::createCPUGenerator(4);
  const PackedLinear packed(at::randn({64, 96}, gen, at::kFloat).to(at::kBFloat16), backend);
  std::vector<at::Tensor> inputs, alone;
  for (std::int64_t rows = 1; rows <= 24; ++rows) inputs.push_back(at::randn({rows, 96}, gen, at::kFloat).to(at::kBFloat16));
  const PackedLinear fresh(at::randn({64, 96}, gen, at::kFloat).to(at::kBFloat16), backend);  // kernels not made yet
  for (const auto& x : inputs) alone.push_back(fresh(x, at::kFloat));
  std::vector<std::vector<at::Tensor>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < inputs.size(); ++i) got[t].push_back(packed(inputs[(i + 5 * t) % inputs.size()], at::kFloat));
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < got.size(); ++t)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& x = inputs[(i + 5 * t) % inputs.size()];
      EXPECT_TRUE(at::equal(got[t][i], packed(x, at::kFloat))) << backend_name(backend) << " thread " << t << ", " << x.size(0) << " rows";
    }
  EXPECT_EQ(alone.size(), inputs.size());
}

TEST(PackedLinear, ThreadsShareOneOneDnnLayer) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kOneDnn, at::kBFloat16);
  expect_threads_share_one_layer(PackedBackend::kOneDnn);
}

TEST(PackedLinear, ThreadsShareOneStreamLayer) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
  expect_threads_share_one_layer(PackedBackend::kStream);
}

// The streaming layer's column blocks are taken in runs by libtorch's threads as each finishes its
// previous run: with any number of threads (more than the runs, too) every column is written once,
// exactly as one thread writes it (the output starts as NaN, so a column left out shows).
TEST(PackedLinear, StreamSplitsItsColumnsOverTheThreads) {
  REFDEC_SKIP_UNLESS_BACKEND_RUNS(PackedBackend::kStream, at::kBFloat16);
  auto gen = at::detail::createCPUGenerator(6);
  const int threads_before = at::get_num_threads();
  for (const std::int64_t out : {16, 100, 1000}) {  // 1, 7 and 63 blocks of 16 columns
    const PackedLinear packed(at::randn({out, 40}, gen, at::kFloat).to(at::kBFloat16), PackedBackend::kStream);
    for (const std::int64_t rows : {1, 5}) {
      const auto x = at::randn({rows, 40}, gen, at::kFloat).to(at::kBFloat16);
      at::set_num_threads(1);
      const auto one = packed(x, at::kFloat);
      for (const int threads : {2, 3, 8}) {
        at::set_num_threads(threads);
        auto got = at::full({rows, out}, std::numeric_limits<float>::quiet_NaN());
        packed.run(x, got);
        EXPECT_TRUE(at::equal(got, one)) << threads << " threads, " << out << " columns, " << rows << " rows";
      }
    }
  }
  at::set_num_threads(threads_before);
}

}  // namespace
