// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Every kernel of refdec/cuda/step_kernels.cuh against the host core functions: argmax() for the
// argmax, accept() + keep_accepted() for the greedy verification, a KeepPlan applied directly for
// the KV compaction; plans from random trees of many shapes (plan_step()), batch 1, 7 and 64.
// Each device test skips without a CUDA device; the launchers' argument checks run without one.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "../core/random_step.hpp"
#include "device_buffer.cuh"
#include "refdec/core/aux_block.hpp"
#include "refdec/core/step_device.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/cuda/check.cuh"
#include "refdec/cuda/step_kernels.cuh"

namespace {

using namespace refdec;
using refdec_test::random_plan;
using refdec_test::random_target;
using Index = std::size_t;

using refdec_test::DeviceBuffer;

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

// The plan's arrays on the device, copied as they are.
struct DevicePlan {
  explicit DevicePlan(const StepPlan& plan)
      : indptr(plan.indptr), num_nodes(plan.num_nodes), lengths(plan.lengths), tokens(plan.tokens),
        first_child(plan.first_child), next_sibling(plan.next_sibling) {}
  DeviceBuffer<std::int32_t> indptr, num_nodes;
  DeviceBuffer<std::int64_t> lengths;
  DeviceBuffer<Token> tokens;
  DeviceBuffer<std::int32_t> first_child, next_sibling;
};

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

// Logits [R, V] whose argmax at row r is target[r]: small random values with ties, the target's
// well above them; as bf16, the engine's usual output.
std::vector<__nv_bfloat16> logits_for(std::mt19937& rng, const std::vector<Token>& target, std::int32_t vocab) {
  std::vector<__nv_bfloat16> logits(target.size() * static_cast<Index>(vocab));
  for (auto& x : logits) x = __nv_bfloat16(static_cast<float>(rng() % 32) / 4.0f);
  for (Index r = 0; r < target.size(); ++r) logits[r * static_cast<Index>(vocab) + static_cast<Index>(target[r])] = __nv_bfloat16(20.0f);
  return logits;
}

// A random keep plan of `plan`: an increasing subset of each sequence's rows, auxiliary rows too.
KeepPlan random_keep(std::mt19937& rng, const StepPlan& plan) {
  KeepPlan keep;
  for (std::int32_t b = 0; b < plan.batch(); ++b) {
    for (std::int32_t i = 0; i < plan.rows(b); ++i)
      if (rng() % 3 == 0) keep.rows.push_back(i);
    keep.indptr.push_back(static_cast<std::int32_t>(keep.rows.size()));
    keep.lengths.push_back(plan.lengths[static_cast<Index>(b)] + keep.indptr.back() - keep.indptr[keep.indptr.size() - 2]);
  }
  return keep;
}

// Per-sequence KV buffers as ContiguousKvStore holds them: [2 * layers, capacity, entry_bytes]
// random bytes each, every one its own allocation starting `offsets[b]` bytes in (so that the
// copy's word width follows the addresses too).
struct DeviceSequences {
  DeviceSequences(std::mt19937& rng, std::int32_t batch, std::int64_t bytes, const std::vector<std::int64_t>& offsets) {
    for (std::int32_t b = 0; b < batch; ++b) {
      std::vector<std::uint8_t> data(static_cast<Index>(bytes + offsets[static_cast<Index>(b)]));
      for (auto& x : data) x = static_cast<std::uint8_t>(rng());
      host.push_back(data);
      buffers.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(data));
      pointers.push_back(buffers.back()->get() + offsets[static_cast<Index>(b)]);
    }
    device_pointers = std::make_unique<DeviceBuffer<void*>>(pointers);
  }
  std::vector<std::vector<std::uint8_t>> host;  // [B] the allocations' bytes, offsets included
  std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> buffers;
  std::vector<void*> pointers;  // [B] host copy of the sequences' addresses
  std::unique_ptr<DeviceBuffer<void*>> device_pointers;
};

// `keep` applied directly to each sequence's bytes (the host reference of the compaction): every
// part's kept entries gathered, then written after the sequence's cached entries.
void apply_keep(std::vector<std::vector<std::uint8_t>>& host, const std::vector<std::int64_t>& offsets,
                std::int64_t parts, std::int64_t capacity, std::int64_t entry_bytes, const StepPlan& plan,
                const KeepPlan& keep) {
  for (std::int32_t b = 0; b < keep.batch(); ++b) {
    const auto u = static_cast<Index>(b);
    for (std::int64_t p = 0; p < parts; ++p) {
      std::uint8_t* part = host[u].data() + offsets[u] + p * capacity * entry_bytes;
      std::vector<std::uint8_t> gathered;
      for (const std::int32_t row : keep.kept(b)) {
        const std::uint8_t* entry = part + (plan.lengths[u] + row) * entry_bytes;
        gathered.insert(gathered.end(), entry, entry + entry_bytes);
      }
      std::copy(gathered.begin(), gathered.end(), part + plan.lengths[u] * entry_bytes);
    }
  }
}

// The whole device step, plan -> argmax -> greedy verification -> compaction, against the host
// core functions, for KV entries of several byte sizes and sequence alignments so that every word
// width of the copy runs; then a host keep plan laid out for the device.
TEST_P(StepKernels, PlanArgmaxVerifyCompactMatchHost) {
  std::mt19937 rng(static_cast<unsigned>(300 + batch()));
  const auto B = static_cast<Index>(batch());
  std::int32_t accepted_total = 0;
  struct Shape {
    std::int64_t entry_bytes;
    std::int64_t offset;  // bytes into each allocation of every other sequence (the rest: 0)
    bool host_copy;       // pass the host copy of the pointers (else: aligned by contract)
    std::int64_t word;    // the copy's word width that follows
  };
  for (const Shape shape : {Shape{64, 0, true, 16}, Shape{64, 0, false, 16}, Shape{64, 8, true, 8}, Shape{24, 0, true, 8},
                            Shape{12, 4, true, 4}, Shape{96, 2, true, 2}, Shape{6, 0, false, 2}, Shape{5, 1, true, 1},
                            Shape{48, 1, true, 1}}) {
    const StepPlan plan = random_plan(rng, batch(), shape.entry_bytes % 2 == 0);
    const std::int32_t R = plan.rows();
    const DevicePlan d_plan(plan);

    // argmax over [R, V] logits.
    const std::int32_t vocab = 1000;
    const std::vector<Token> target = random_target(rng, plan);
    const DeviceBuffer<__nv_bfloat16> d_logits(logits_for(rng, target, vocab));
    const DeviceBuffer<Token> d_target(static_cast<Index>(R));
    launch_argmax(d_logits.get(), R, vocab, d_target.get(), stream_);
    sync();
    ASSERT_EQ(d_target.download(), target);

    // Greedy verification against accept() + keep_accepted().
    std::vector<Acceptance> accepted(B);
    for (std::int32_t b = 0; b < batch(); ++b) {
      ChoiceArray choose{target.data() + plan.indptr[static_cast<Index>(b)]};
      accept(plan.tree(b), choose, accepted[static_cast<Index>(b)]);
    }
    KeepPlan keep;
    keep_accepted(plan, accepted, keep);
    const DeviceBuffer<std::int32_t> d_kept(std::vector<std::int32_t>(static_cast<Index>(R), -1)), d_num_kept(B);
    const DeviceBuffer<Token> d_bonus(B);
    launch_greedy_verify(d_plan.indptr.get(), d_plan.num_nodes.get(), d_plan.tokens.get(), d_plan.first_child.get(),
                         d_plan.next_sibling.get(), d_target.get(), batch(), R, d_kept.get(), d_num_kept.get(),
                         d_bonus.get(), stream_);
    sync();
    std::vector<std::int32_t> want_kept, want_num_kept;
    lay_out_keep(plan, keep, want_kept, want_num_kept);  // -1 where the verifier writes nothing
    ASSERT_EQ(d_num_kept.download(), want_num_kept);
    ASSERT_EQ(d_kept.download(), want_kept);
    std::vector<Token> want_bonus;
    for (const Acceptance& a : accepted) want_bonus.push_back(a.tokens.back());
    ASSERT_EQ(d_bonus.download(), want_bonus);
    for (const std::int32_t n : want_num_kept) accepted_total += n - 1;

    // Compaction of the verifier's keep rows, then of a random host keep plan laid out for the
    // device, each against the keep plan applied directly.
    const std::int32_t layers = 3;
    std::int64_t capacity = 1;
    for (std::int32_t b = 0; b < batch(); ++b)
      capacity = std::max(capacity, plan.lengths[static_cast<Index>(b)] + plan.rows(b));
    capacity += static_cast<std::int64_t>(rng() % 3);
    std::vector<std::int64_t> offsets(B);
    for (Index b = 0; b < B; ++b) offsets[b] = b % 2 == 1 || B == 1 ? shape.offset : 0;
    ASSERT_GE(detail::compact_word_bytes(nullptr, 0, shape.entry_bytes), shape.word);
    for (int round = 0; round < 2; ++round) {
      DeviceSequences sequences(rng, batch(), 2 * layers * capacity * shape.entry_bytes, offsets);
      const std::vector<const void*> host_pointers(sequences.pointers.begin(), sequences.pointers.end());
      ASSERT_EQ(detail::compact_word_bytes(host_pointers.data(), batch(), shape.entry_bytes),
                shape.host_copy ? shape.word : detail::compact_word_bytes(nullptr, 0, shape.entry_bytes));
      const KeepPlan applied = round == 0 ? keep : random_keep(rng, plan);
      std::vector<std::int32_t> kept, num_kept;
      lay_out_keep(plan, applied, kept, num_kept);
      const DeviceBuffer<std::int32_t> d_round_kept(kept), d_round_num_kept(num_kept);
      launch_compact_kv(sequences.device_pointers->get(), shape.host_copy ? host_pointers.data() : nullptr, layers,
                        batch(), capacity, shape.entry_bytes, d_plan.lengths.get(), d_plan.indptr.get(), R,
                        round == 0 ? d_kept.get() : d_round_kept.get(),
                        round == 0 ? d_num_kept.get() : d_round_num_kept.get(), stream_);
      sync();
      apply_keep(sequences.host, offsets, 2 * layers, capacity, shape.entry_bytes, plan, applied);
      for (Index b = 0; b < B; ++b)
        ASSERT_EQ(sequences.buffers[b]->download(), sequences.host[b])
            << shape.entry_bytes << "-byte entries, offset " << offsets[b] << ", sequence " << b << ", round " << round;
    }
  }
  EXPECT_GT(accepted_total, 0);
}

// Plans no plan_step() would build (random indptr, node counts and links): the device writes
// what the host functions write, one sequence per thread.
TEST_P(StepKernels, MalformedPlansMatchHostFunctions) {
  std::mt19937 rng(static_cast<unsigned>(400 + batch()));
  const auto any = [&](std::int32_t lo, std::int32_t hi) {
    return lo + static_cast<std::int32_t>(rng() % static_cast<unsigned>(hi - lo + 1));
  };
  for (int trial = 0; trial < 20; ++trial) {
    const std::int32_t B = batch(), R = any(B, 3 * B + 100);
    std::vector<std::int32_t> indptr(static_cast<Index>(B) + 1), num_nodes(static_cast<Index>(B));
    for (auto& x : indptr) x = rng() % 6 == 0 ? any(-20, R + 20) : any(0, R);
    if (trial % 2 == 0) std::sort(indptr.begin(), indptr.end());
    for (auto& n : num_nodes) n = rng() % 5 == 0 ? any(-5, 1000) : any(1, R);
    std::vector<Token> tokens(static_cast<Index>(R)), target(static_cast<Index>(R));
    std::vector<std::int32_t> first_child(static_cast<Index>(R)), next_sibling(static_cast<Index>(R));
    for (Index i = 0; i < static_cast<Index>(R); ++i) {
      tokens[i] = any(0, 2);
      target[i] = any(0, 2);
      first_child[i] = rng() % 8 == 0 ? any(-300, 300) : any(-1, 40);
      next_sibling[i] = rng() % 8 == 0 ? any(-300, 300) : any(-1, 40);
    }
    // Overlapping sequences would race on the device: the host runs each sequence on its own copy
    // and the comparison covers rows only one sequence owns.
    std::vector<std::int32_t> want_num_kept(static_cast<Index>(B));
    std::vector<Token> want_bonus(static_cast<Index>(B));
    std::vector<std::vector<std::int32_t>> want_kept(static_cast<Index>(B));
    for (std::int32_t b = 0; b < B; ++b) {
      want_kept[static_cast<Index>(b)].assign(static_cast<Index>(R), -7);
      greedy_verify_sequence(indptr.data(), num_nodes.data(), tokens.data(), first_child.data(), next_sibling.data(),
                             target.data(), R, b, want_kept[static_cast<Index>(b)].data(), want_num_kept.data(),
                             want_bonus.data());
    }
    const DeviceBuffer<std::int32_t> d_indptr(indptr), d_num_nodes(num_nodes), d_first(first_child),
        d_next(next_sibling), d_kept(std::vector<std::int32_t>(static_cast<Index>(R), -7)), d_num_kept(static_cast<Index>(B));
    const DeviceBuffer<Token> d_tokens(tokens), d_target(target), d_bonus(static_cast<Index>(B));
    launch_greedy_verify(d_indptr.get(), d_num_nodes.get(), d_tokens.get(), d_first.get(), d_next.get(),
                         d_target.get(), B, R, d_kept.get(), d_num_kept.get(), d_bonus.get(), stream_);
    sync();
    ASSERT_EQ(d_num_kept.download(), want_num_kept);
    ASSERT_EQ(d_bonus.download(), want_bonus);
    const std::vector<std::int32_t> got = d_kept.download();
    for (Index r = 0; r < static_cast<Index>(R); ++r) {
      std::int32_t writers = 0, value = -7;
      for (Index b = 0; b < static_cast<Index>(B); ++b)
        if (want_kept[b][r] != -7) {
          ++writers;
          value = want_kept[b][r];
        }
      if (writers <= 1) ASSERT_EQ(got[r], value) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, StepKernels, ::testing::Values(1, 7, 64));

// Host-side checks, before any CUDA call: run without a device too.
TEST(StepKernelLaunches, RejectBadArguments) {
  EXPECT_THROW(launch_argmax<float>(nullptr, 1, 0, nullptr, nullptr), Error);
  EXPECT_THROW(launch_argmax<__half>(nullptr, 0, 10, nullptr, nullptr), Error);
  EXPECT_THROW(launch_argmax<__nv_bfloat16>(nullptr, std::int64_t{1} << 31, 10, nullptr, nullptr), Error);
  EXPECT_THROW(launch_greedy_verify(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 4, nullptr, nullptr,
                                    nullptr, nullptr),
               Error);
  EXPECT_THROW(launch_greedy_verify(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 7, 6, nullptr, nullptr,
                                    nullptr, nullptr),
               Error);  // fewer rows than sequences: a sequence without its root
  EXPECT_THROW(launch_greedy_verify(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 2, 6, nullptr, nullptr,
                                    nullptr, nullptr),
               Error);  // null arrays
  // Arrays that are never dereferenced: every check below fails before a launch.
  std::int32_t fake32[2] = {};
  std::int64_t fake64[1] = {};
  void* fake_sequences[1] = {fake64};
  const auto compact = [&](void* const* sequences, const void* const* host, std::int32_t layers, std::int32_t batch,
                           std::int64_t capacity, std::int64_t entry_bytes, std::int32_t rows) {
    launch_compact_kv(sequences, host, layers, batch, capacity, entry_bytes, fake64, fake32, rows, fake32, fake32,
                      nullptr);
  };
  EXPECT_THROW(compact(fake_sequences, nullptr, 1, 70000, 8, 16, 70000), Error);  // batch past the grid
  EXPECT_THROW(compact(fake_sequences, nullptr, 1, 1, 8, 0, 4), Error);           // empty entries
  EXPECT_THROW(compact(fake_sequences, nullptr, 0, 1, 8, 16, 4), Error);          // no layers
  EXPECT_THROW(compact(fake_sequences, nullptr, 1, 1, 0, 16, 4), Error);          // no capacity
  EXPECT_THROW(compact(fake_sequences, nullptr, 1, 2, 8, 16, 1), Error);          // a sequence without rows
  EXPECT_THROW(compact(fake_sequences, nullptr, 1 << 30, 1, 8, 1024, 4), Error);  // too many words for the grid
  EXPECT_THROW(compact(nullptr, nullptr, 1, 1, 8, 16, 4), Error);                 // no pointer array
  const void* const null_host[1] = {nullptr};
  EXPECT_THROW(compact(fake_sequences, null_host, 1, 1, 8, 16, 4), Error);  // a sequence without a buffer
}

// The copy's word: the widest that divides the entry and, with the host copy, every address.
TEST(StepKernelLaunches, CompactWordFollowsEntryAndAddresses) {
  const auto at = [](std::uintptr_t address) { return reinterpret_cast<const void*>(address); };
  const void* const aligned[2] = {at(0x1000), at(0x2000)};
  const void* const eight[2] = {at(0x1000), at(0x2008)};
  const void* const odd[2] = {at(0x1001), at(0x2000)};
  EXPECT_EQ(detail::compact_word_bytes(aligned, 2, 256), 16);
  EXPECT_EQ(detail::compact_word_bytes(nullptr, 2, 256), 16);
  EXPECT_EQ(detail::compact_word_bytes(eight, 2, 256), 8);
  EXPECT_EQ(detail::compact_word_bytes(eight, 1, 256), 16);  // only the first `batch` addresses count
  EXPECT_EQ(detail::compact_word_bytes(odd, 2, 256), 1);
  EXPECT_EQ(detail::compact_word_bytes(aligned, 2, 24), 8);
  EXPECT_EQ(detail::compact_word_bytes(aligned, 2, 12), 4);
  EXPECT_EQ(detail::compact_word_bytes(aligned, 2, 6), 2);
  EXPECT_EQ(detail::compact_word_bytes(aligned, 2, 5), 1);
}

}  // namespace
