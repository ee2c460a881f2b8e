// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Every kernel of refdec/cuda/step_kernels.cuh against the host functions of
// refdec/core/step_layout.hpp (which tests/core/step_layout_test.cpp checks against LinearTree,
// greedy_accept and KvCache::commit): random trees of many shapes, batch 1, 7 and 64. Skipped
// without a CUDA device.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "refdec/core/step_layout.hpp"
#include "refdec/cuda/check.cuh"
#include "refdec/cuda/step_kernels.cuh"

namespace {

using namespace refdec;
using Index = std::size_t;

// Device memory holding a copy of a host vector; copied back with download().
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host) : size_(host.size()) {
    REFDEC_CUDA_CHECK(cudaMalloc(&data_, std::max<Index>(size_, 1) * sizeof(T)));
    REFDEC_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit DeviceBuffer(Index size) : DeviceBuffer(std::vector<T>(size)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }
  T* get() const { return data_; }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    REFDEC_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  Index size_;
  T* data_ = nullptr;
};

class StepKernels : public ::testing::TestWithParam<std::int32_t> {
 protected:
  void SetUp() override {
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0)
      GTEST_SKIP() << "no CUDA device (" << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") << ")";
    REFDEC_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void sync() { REFDEC_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  std::int32_t batch() const { return GetParam(); }
  cudaStream_t stream_ = nullptr;
};

// A padded batch of random trees of several shapes (chain, star, random, deep random), sizes that
// cross 64-node mask words, random cached lengths and node tokens.
struct Batch {
  std::int32_t padded = 0;
  std::vector<std::int32_t> parents;  // [B, T]
  std::vector<Token> tokens;          // [B, T]
  std::vector<std::int64_t> lengths;  // [B]
};

Batch random_batch(std::mt19937& rng, std::int32_t batch, std::int32_t padded) {
  Batch out;
  out.padded = padded;
  const auto T = static_cast<Index>(padded);
  out.parents.assign(static_cast<Index>(batch) * T, -1);
  out.tokens.assign(static_cast<Index>(batch) * T, 0);
  for (Index b = 0; b < static_cast<Index>(batch); ++b) {
    out.lengths.push_back(static_cast<std::int64_t>(rng() % 40));
    const Index n = 1 + rng() % T;
    const unsigned shape = rng() % 4;
    for (Index i = 1; i < n; ++i) {
      const auto u = static_cast<unsigned>(i);
      out.parents[b * T + i] = static_cast<std::int32_t>(shape == 0 ? i - 1 : shape == 1 ? 0 : shape == 2 ? rng() % u
                                                                                          : i - 1 - rng() % std::min(u, 3u));
    }
    for (Index i = 0; i < n; ++i) out.tokens[b * T + i] = static_cast<Token>(rng() % 4);  // few values: deep walks
  }
  return out;
}

// The device layout of `batch`, copied back.
struct DeviceLayout {
  std::vector<std::int32_t> num_nodes, depth, first_child, next_sibling;
  std::vector<std::int64_t> positions;
  std::vector<std::uint64_t> mask;
};

DeviceLayout device_layout(const Batch& batch, std::int32_t b_count, cudaStream_t stream) {
  const Index BT = batch.parents.size();
  const DeviceBuffer<std::int32_t> parents(batch.parents);
  const DeviceBuffer<std::int64_t> lengths(batch.lengths);
  const DeviceBuffer<std::int32_t> num_nodes(static_cast<Index>(b_count)), depth(BT), first(BT), next(BT);
  const DeviceBuffer<std::int64_t> positions(BT);
  const DeviceBuffer<std::uint64_t> mask(BT * static_cast<Index>(mask_words_for(batch.padded)));
  launch_step_layout(parents.get(), lengths.get(), b_count, batch.padded, num_nodes.get(), depth.get(),
                     positions.get(), mask.get(), first.get(), next.get(), stream);
  REFDEC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {num_nodes.download(), depth.download(), first.download(), next.download(), positions.download(),
          mask.download()};
}

TEST_P(StepKernels, LayoutMatchesHostBitForBit) {
  std::mt19937 rng(static_cast<unsigned>(batch()));
  for (const std::int32_t padded : {1, 5, 64, 65, 130}) {
    const Batch batch_in = random_batch(rng, batch(), padded);
    StepLayout want;
    build_step_layout(batch_in.parents, batch_in.lengths, padded, want);
    const DeviceLayout got = device_layout(batch_in, batch(), stream_);
    EXPECT_EQ(got.num_nodes, want.num_nodes) << "T=" << padded;
    EXPECT_EQ(got.depth, want.depth) << "T=" << padded;
    EXPECT_EQ(got.positions, want.positions) << "T=" << padded;
    EXPECT_EQ(got.mask, want.mask) << "T=" << padded;
    EXPECT_EQ(got.first_child, want.first_child) << "T=" << padded;
    EXPECT_EQ(got.next_sibling, want.next_sibling) << "T=" << padded;
  }
}

TEST_P(StepKernels, LayoutOfMalformedParentsMatchesHostFunctions) {
  std::mt19937 rng(static_cast<unsigned>(100 + batch()));
  const std::int32_t padded = 70;
  const auto T = static_cast<Index>(padded);
  Batch batch_in = random_batch(rng, batch(), padded);
  for (auto& p : batch_in.parents)
    if (rng() % 10 == 0) p = static_cast<std::int32_t>(rng() % 200) - 100;  // anything, even cycles
  const DeviceLayout got = device_layout(batch_in, batch(), stream_);
  const auto W = static_cast<Index>(mask_words_for(padded));
  for (Index b = 0; b < static_cast<Index>(batch()); ++b) {
    const std::int32_t* row = &batch_in.parents[b * T];
    const std::int32_t n = tree_size(row, padded);
    ASSERT_EQ(got.num_nodes[b], n);
    for (Index i = 0; i < T; ++i) {
      std::vector<std::uint64_t> mask_row(W);
      std::int32_t depth = 0, first_child = 0, next_sibling = 0;
      layout_node(row, padded, n, static_cast<std::int32_t>(i), depth, mask_row.data(), first_child, next_sibling);
      EXPECT_EQ(got.depth[b * T + i], depth);
      EXPECT_EQ(got.first_child[b * T + i], first_child);
      EXPECT_EQ(got.next_sibling[b * T + i], next_sibling);
      EXPECT_TRUE(std::equal(mask_row.begin(), mask_row.end(), got.mask.begin() + static_cast<std::ptrdiff_t>((b * T + i) * W)));
    }
  }
}

float host_float(float x) { return x; }
float host_float(__half x) { return __half2float(x); }
float host_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// Random logits with many ties and a few NaNs, as `Logit`; the host reference reads them back
// as float, so rounding to the narrow type cannot make the two disagree.
template <typename Logit>
void check_argmax(std::mt19937& rng, std::int64_t rows, std::int32_t vocab, cudaStream_t stream) {
  std::vector<Logit> logits(static_cast<Index>(rows * vocab));
  std::vector<float> as_float(logits.size());
  for (Index i = 0; i < logits.size(); ++i) {
    const float x = rng() % 1000 == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(rng() % 64) / 4.0f;
    logits[i] = Logit(x);
    as_float[i] = host_float(logits[i]);
  }
  const DeviceBuffer<Logit> d_logits(logits);
  const DeviceBuffer<std::int32_t> d_out(static_cast<Index>(rows));
  launch_argmax(d_logits.get(), rows, vocab, d_out.get(), stream);
  REFDEC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<std::int32_t> got = d_out.download();
  for (std::int64_t r = 0; r < rows; ++r)
    ASSERT_EQ(got[static_cast<Index>(r)], argmax(&as_float[static_cast<Index>(r * vocab)], vocab))
        << "row " << r << " of " << vocab << " logits";
}

TEST_P(StepKernels, ArgmaxMatchesHost) {
  std::mt19937 rng(static_cast<unsigned>(200 + batch()));
  for (const std::int32_t vocab : {1, 111, 1000, 32000}) {
    const std::int64_t rows = static_cast<std::int64_t>(batch()) * 9;
    check_argmax<float>(rng, rows, vocab, stream_);
    check_argmax<__half>(rng, rows, vocab, stream_);
    check_argmax<__nv_bfloat16>(rng, rows, vocab, stream_);
  }
}

// Targets that follow a random child most of the time, so that walks go deep.
std::vector<Token> random_target(std::mt19937& rng, const Batch& batch, const StepLayout& layout) {
  std::vector<Token> target(batch.parents.size());
  for (Index k = 0; k < target.size(); ++k) {
    target[k] = static_cast<Token>(rng() % 5);
    std::int32_t c = layout.first_child[k];
    if (c >= 0 && rng() % 5 != 0) {
      const Index row = k - k % static_cast<Index>(batch.padded);
      for (unsigned skip = rng() % 3; skip > 0 && layout.next_sibling[row + static_cast<Index>(c)] >= 0; --skip)
        c = layout.next_sibling[row + static_cast<Index>(c)];
      target[k] = batch.tokens[row + static_cast<Index>(c)];
    }
  }
  return target;
}

// The whole device step (layout, verification, compaction) against the host functions, for KV
// entries of several byte sizes and alignments (so that every word width of the copy runs).
TEST_P(StepKernels, VerifyAndCompactionMatchHost) {
  std::mt19937 rng(static_cast<unsigned>(300 + batch()));
  const auto B = static_cast<Index>(batch());
  std::int32_t accepted_total = 0;
  struct Shape {
    std::int64_t entry_bytes;
    std::int64_t offset;  // bytes from the allocation's start to the cache's
  };
  for (const Shape shape : {Shape{64, 0}, Shape{24, 8}, Shape{12, 4}, Shape{6, 2}, Shape{5, 1}}) {
    for (const std::int32_t padded : {1, 7, 65}) {
      const Batch batch_in = random_batch(rng, batch(), padded);
      const auto T = static_cast<Index>(padded);
      StepLayout layout;
      build_step_layout(batch_in.parents, batch_in.lengths, padded, layout);
      const std::vector<Token> target = random_target(rng, batch_in, layout);
      std::vector<std::int32_t> kept(B * T), num_accepted(B);
      std::vector<Token> bonus(B);
      for (Index b = 0; b < B; ++b)
        greedy_verify_sequence(&batch_in.tokens[b * T], &layout.first_child[b * T], &layout.next_sibling[b * T],
                               &target[b * T], layout.num_nodes[b], padded, &kept[b * T], num_accepted[b], bonus[b]);

      const DeviceBuffer<std::int32_t> d_parents(batch_in.parents), d_num_nodes(B), d_depth(B * T), d_first(B * T),
          d_next(B * T), d_kept(B * T), d_accepted(B);
      const DeviceBuffer<Token> d_tokens(batch_in.tokens), d_target(target), d_bonus(B);
      const DeviceBuffer<std::int64_t> d_lengths(batch_in.lengths), d_positions(B * T);
      const DeviceBuffer<std::uint64_t> d_mask(B * T * static_cast<Index>(mask_words_for(padded)));
      launch_step_layout(d_parents.get(), d_lengths.get(), batch(), padded, d_num_nodes.get(), d_depth.get(),
                         d_positions.get(), d_mask.get(), d_first.get(), d_next.get(), stream_);
      launch_greedy_verify(d_tokens.get(), d_first.get(), d_next.get(), d_num_nodes.get(), d_target.get(), batch(),
                           padded, d_kept.get(), d_accepted.get(), d_bonus.get(), stream_);
      sync();
      ASSERT_EQ(d_accepted.download(), num_accepted);
      ASSERT_EQ(d_kept.download(), kept);
      ASSERT_EQ(d_bonus.download(), bonus);
      for (const std::int32_t a : num_accepted) accepted_total += a;

      // KV caches of random bytes, [layers, B, capacity, entry_bytes]; the host moves each
      // sequence's kept entries with compact_element() over bytes.
      const std::int32_t layers = 3;
      const std::int64_t capacity = 40 + padded;
      const Index cache_bytes = static_cast<Index>(layers) * B * static_cast<Index>(capacity * shape.entry_bytes);
      std::vector<std::uint8_t> keys(cache_bytes + static_cast<Index>(shape.offset)), values(keys.size());
      for (auto& x : keys) x = static_cast<std::uint8_t>(rng());
      for (auto& x : values) x = static_cast<std::uint8_t>(rng());
      const DeviceBuffer<std::uint8_t> d_keys(keys), d_values(values);
      launch_compact_kv(d_keys.get() + shape.offset, d_values.get() + shape.offset, layers, batch(), capacity,
                        shape.entry_bytes, d_lengths.get(), d_kept.get(), d_accepted.get(), padded, stream_);
      sync();
      for (std::vector<std::uint8_t>* cache : {&keys, &values})
        for (Index l = 0; l < static_cast<Index>(layers); ++l)
          for (Index b = 0; b < B; ++b) {
            std::uint8_t* seq = cache->data() + shape.offset + (l * B + b) * static_cast<Index>(capacity * shape.entry_bytes);
            const std::int32_t n = valid_kept(&kept[b * T], num_accepted[b] + 1, batch_in.lengths[b], capacity);
            ASSERT_EQ(n, num_accepted[b] + 1);
            for (std::int64_t e = 0; e < shape.entry_bytes; ++e)
              compact_element(seq, shape.entry_bytes, batch_in.lengths[b], &kept[b * T], n, e);
          }
      EXPECT_EQ(d_keys.download(), keys) << shape.entry_bytes << "-byte entries, T=" << padded;
      EXPECT_EQ(d_values.download(), values) << shape.entry_bytes << "-byte entries, T=" << padded;
    }
  }
  EXPECT_GT(accepted_total, 0);
}

// Host-side checks, before any CUDA call: runs without a device too.
TEST(StepKernelLaunches, RejectBadSizes) {
  EXPECT_THROW(launch_step_layout(nullptr, nullptr, 0, 4, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
               Error);
  EXPECT_THROW(launch_argmax<float>(nullptr, 1, 0, nullptr, nullptr), Error);
  EXPECT_THROW(launch_argmax<__half>(nullptr, 0, 10, nullptr, nullptr), Error);
  EXPECT_THROW(launch_greedy_verify(nullptr, nullptr, nullptr, nullptr, nullptr, 7, 0, nullptr, nullptr, nullptr, nullptr),
               Error);
  EXPECT_THROW(launch_compact_kv(nullptr, nullptr, 1, 70000, 8, 16, nullptr, nullptr, nullptr, 4, nullptr), Error);
  EXPECT_THROW(launch_compact_kv(nullptr, nullptr, 1, 7, 8, 0, nullptr, nullptr, nullptr, 4, nullptr), Error);
}

INSTANTIATE_TEST_SUITE_P(Batches, StepKernels, ::testing::Values(1, 7, 64));

}  // namespace
