// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The llama2.c checkpoint header every reader shares: the parts' sizes and places in file order,
// and the refusals of a header that describes no model or a file of another size.

#include "refdec/io/llama2c_checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/expect_error.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;
using refdec_test::expect_error;
namespace fs = std::filesystem;
using P = Llama2cCheckpoint;

// A checkpoint file of `floats` fp32 values after `header`.
fs::path write_checkpoint(const fs::path& path, const std::vector<std::int32_t>& header, std::int64_t floats) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
  const std::vector<float> zeros(static_cast<std::size_t>(floats), 0.0f);
  out.write(reinterpret_cast<const char*>(zeros.data()), static_cast<std::streamsize>(zeros.size() * 4));
  return path;
}

Llama2cCheckpoint read(const fs::path& path) {
  InputFile file = open_input_file(path, "llama2.c checkpoint");
  return read_llama2c_header(file.fd.get(), static_cast<std::int64_t>(file.size), path);
}

TEST(Llama2cCheckpoint, PartsInFileOrder) {
  const refdec_test::TempDir dir;
  // dim 8, hidden 12, 2 layers, 4 heads (head size 2), 2 kv heads (kv_dim 4), vocab 10, seq_len 6.
  const std::int64_t tied = 10 * 8 + 2 * 8 + 2 * 64 + 2 * (2 * 4 * 8) + 2 * 64 + 2 * 8 + 3 * (2 * 12 * 8) + 8 + 2 * (6 * 1);
  const auto c = read(write_checkpoint(dir.path() / "tied.bin", {8, 12, 2, 4, 2, 10, 6}, tied));
  EXPECT_EQ(c.dim, 8);
  EXPECT_EQ(c.kv_dim(), 4);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.floats[P::kWk], 2 * 4 * 8);
  EXPECT_EQ(c.floats[P::kW2], 2 * 12 * 8);
  EXPECT_EQ(c.floats[P::kRopeCos], 6);
  EXPECT_EQ(c.floats[P::kClassifier], 0);
  EXPECT_EQ(c.total_floats(), tied);
  EXPECT_EQ(c.offset(P::kEmbedding), 0);
  EXPECT_EQ(c.offset(P::kAttentionNorms), 80);
  EXPECT_EQ(c.offset(P::kWq), 96);
  EXPECT_EQ(c.offset(P::kClassifier), tied);
  // A negative vocab_size: an untied classifier of [vocab, dim] at the end.
  const auto u = read(write_checkpoint(dir.path() / "untied.bin", {8, 12, 2, 4, 2, -10, 6}, tied + 80));
  EXPECT_FALSE(u.tied_embeddings);
  EXPECT_EQ(u.vocab_size, 10);
  EXPECT_EQ(u.floats[P::kClassifier], 80);
  EXPECT_EQ(u.offset(P::kClassifier), tied);
}

TEST(Llama2cCheckpoint, RefusesWhatDescribesNoModel) {
  const refdec_test::TempDir dir;
  const auto refused = [&](const std::vector<std::int32_t>& header, std::int64_t floats, const char* why) {
    expect_error([&] { (void)read(write_checkpoint(dir.path() / "bad.bin", header, floats)); }, why);
  };
  refused({8, 12, 2, 4, 2, 0, 6}, 0, "every size must be positive");
  refused({8, 12, 2, 3, 1, 10, 6}, 0, "n_heads does not divide dim");
  refused({8, 12, 2, 4, 3, 10, 6}, 0, "n_kv_heads does not divide n_heads");
  refused({8, 12, 2, 8, 2, 10, 6}, 0, "the head size is odd");
  refused({1 << 30, 1 << 30, 1 << 30, 1, 1, 1 << 30, 6}, 0, "impossible header");
  refused({8, 12, 2, 4, 2, 10, 6}, 5, "(truncated?)");
  refused({8, 12, 2, 4, 2, 10, 6}, 5000, "(not a v0 checkpoint?)");
  std::ofstream(dir.path() / "short.bin", std::ios::binary) << "abc";
  expect_error([&] { (void)read(dir.path() / "short.bin"); }, "is too short for its header (3 bytes)");
}

}  // namespace
