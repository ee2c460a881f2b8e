// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The llama2.c loader: the published stories260K text, bad files.

#include "torch/model_helpers.hpp"

namespace {

using namespace refdec;
using namespace refdec_test::model;

std::filesystem::path stories_model() { return refdec_test::data_file("models/stories260K/stories260K.bin"); }

TEST(Llama2cLoader, StoriesGreedyOutputMatchesPublishedText) {
  const auto path = stories_model();
  const auto tok_path = refdec_test::data_file("models/stories260K/tok512.bin");
  if (path.empty() || tok_path.empty()) GTEST_SKIP() << "stories260K not found under " << refdec_test::data_dir();
  const auto model = load_llama2c(path);
  EXPECT_EQ(model.config().dim, 64);
  EXPECT_EQ(model.config().n_layers, 5);
  EXPECT_EQ(model.config().n_kv_heads, 4);
  EXPECT_EQ(model.vocab_size(), 512);
  const auto tokenizer = Llama2cTokenizer::load(tok_path, 512);
  GenerateOptions opt;
  opt.limits.max_new_tokens = 255;  // llama2.c's run: 256 positions, BOS first
  opt.limits.stop_tokens = {1};     // llama2.c stops when it samples BOS again
  const auto result = generate(model, Request{{1}, {}}, AnyDrafter{}, opt);
  const std::string text = tokenizer.decode(result.tokens[0]);
  const std::string published =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
      "saw a big, red ball. She wanted to play with it, but it was too high.";
  EXPECT_EQ(text.substr(0, published.size()), published) << text;
  EXPECT_DOUBLE_EQ(result.stats.tokens_per_step(), 1.0);
}

// A choice of kernels kept from an earlier load is taken as given: nothing is measured.
TEST(Llama2cLoader, TakesTheLinearChoiceGiven) {
  const auto path = stories_model();
  if (path.empty()) GTEST_SKIP() << "stories260K not found under " << refdec_test::data_dir();
  if (const std::string why = packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16); !why.empty()) GTEST_SKIP() << why;
  const auto model = load_llama2c(path, at::kBFloat16, at::kCPU, LinearKernel::kStream,
                                  LinearChoice::parse("stream (avx2/none from 1 rows)"));
  EXPECT_EQ(model.linear_path(), "stream (avx2/none for every row count) (given)");
}

TEST(Llama2cLoader, RejectsMissingTruncatedAndInvalidFiles) {
  const refdec_test::TempDir tmp;
  const auto& dir = tmp.path();
  EXPECT_THROW(
      {
        try {
          load_llama2c(dir / "missing.bin");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  // A header with dim 0.
  {
    std::ofstream f(dir / "zero.bin", std::ios::binary);
    const std::int32_t header[7] = {0, 8, 1, 1, 1, 10, 8};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  EXPECT_THROW(load_llama2c(dir / "zero.bin"), Error);
  // A file shorter than its header.
  {
    std::ofstream f(dir / "short.bin", std::ios::binary);
    f.write("abc", 3);
  }
  EXPECT_THROW(load_llama2c(dir / "short.bin"), Error);
  const auto path = stories_model();
  if (path.empty()) GTEST_SKIP() << "stories260K not found: truncation case skipped";
  std::filesystem::copy_file(path, dir / "truncated.bin", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(dir / "truncated.bin", std::filesystem::file_size(path) - 100);
  try {
    load_llama2c(dir / "truncated.bin");
    ADD_FAILURE() << "a truncated checkpoint loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// A header whose sizes multiply past 2^63 is an impossible header, not a wrapped (small) size,
// and a FIFO or directory given as the checkpoint is rejected at once instead of blocking.
TEST(Llama2cLoader, OverflowingHeaderAndNonRegularFilesAreRejected) {
  const refdec_test::TempDir tmp;
  const auto& dir = tmp.path();
  {
    std::ofstream f(dir / "huge.bin", std::ios::binary);
    const std::int32_t header[7] = {1 << 30, 1 << 30, 1 << 30, 1, 1, -(1 << 30), 1 << 30};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  try {
    load_llama2c(dir / "huge.bin");
    ADD_FAILURE() << "an overflowing header loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("impossible header"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::mkfifo((dir / "pipe.bin").c_str(), 0600), 0);
  try {
    load_llama2c(dir / "pipe.bin");
    ADD_FAILURE() << "a FIFO loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_llama2c(dir), IoError);
}

}  // namespace
