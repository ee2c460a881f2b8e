// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Replay traces from real data, and the calibration of the replay evaluator: prompt lookup must
// reproduce the τ that Spec-Bench publishes.

#include "eval/datasets.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "refdec/drafters/prompt_lookup.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;

class WithTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto path = refdec_test::data_file("tokenizers/llama2.model");
    if (path.empty()) GTEST_SKIP() << "tokenizers/llama2.model not found under " << refdec_test::data_dir();
    tokenizer_ = std::make_unique<SentencePieceTokenizer>(SentencePieceTokenizer::load(path));
  }
  std::unique_ptr<SentencePieceTokenizer> tokenizer_;
};

TEST(SentencePieceTokenizer, MissingOrInvalidModelIsAClearError) {
  EXPECT_THROW(SentencePieceTokenizer::load("/nonexistent/llama2.model"), IoError);
  refdec_test::TempDir dir;
  std::ofstream(dir / "bad.model") << "not a model";
  EXPECT_THROW(SentencePieceTokenizer::load(dir / "bad.model"), Error);
}

TEST_F(WithTokenizer, LlamaTokenizerRoundTrips) {
  EXPECT_EQ(tokenizer_->vocab_size(), 32000);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  const std::string text = "Hello world! Speculative decoding, 2-3x faster.";
  const auto ids = tokenizer_->encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1);  // no BOS
  EXPECT_EQ(tokenizer_->decode(ids), text);
  EXPECT_THROW(tokenizer_->decode({32000}), Error);
}

// Spec-Bench publishes 1.73-1.75 for prompt lookup on Vicuna-7B; the replay must give 1.750.
TEST_F(WithTokenizer, PromptLookupReproducesSpecBench) {
  const auto q = refdec_test::data_file("data/spec_bench/question.jsonl");
  const auto a = refdec_test::data_file("data/spec_bench/vicuna-7b-v1.3-greedy.jsonl");
  if (q.empty() || a.empty()) GTEST_SKIP() << "Spec-Bench data not found under " << refdec_test::data_dir();
  const auto traces = load_specbench(q, a, *tokenizer_);
  ASSERT_EQ(traces.size(), 560u);  // 480 questions, 80 of them with two turns
  AnyDrafter d(PromptLookupDrafter{});
  const auto report = replay(d, traces, ReplayOptions{.budget = 64});
  EXPECT_EQ(report.overall.tokens, 91242);
  EXPECT_NEAR(report.overall.tokens_per_step(), 1.750, 0.005);
  EXPECT_EQ(report.by_category.size(), 13u);
  EXPECT_NEAR(report.by_category.at("summarization").tokens_per_step(), 2.712, 0.005);
  EXPECT_NEAR(report.by_category.at("translation").tokens_per_step(), 1.106, 0.005);
  // The second turn's context holds the first turn's answer.
  const auto& turn2 = traces[1];
  EXPECT_EQ(turn2.id, "81/1");
  EXPECT_GT(turn2.context.size(), traces[0].context.size() + traces[0].output.size());
}

TEST_F(WithTokenizer, PromptLookupOnLlmaRag) {
  const auto path = refdec_test::data_file("data/llma/rag.jsonl");
  if (path.empty()) GTEST_SKIP() << "llma/rag.jsonl not found under " << refdec_test::data_dir();
  const auto traces = load_llma_rag(path, *tokenizer_);
  ASSERT_EQ(traces.size(), 100u);
  EXPECT_EQ(traces[0].references.size(), 10u);
  AnyDrafter d(PromptLookupDrafter{});
  EXPECT_NEAR(replay(d, traces).overall.tokens_per_step(), 3.059, 0.005);  // the GUIDE's figure
}

TEST(GenericTraces, TokenIdsNeedNoTokenizer) {
  refdec_test::TempDir dir;
  std::ofstream(dir / "t.jsonl") << R"({"context": [1, 2, 3], "output": [4, 5], "category": "x", "references": [[7, 8]]})"
                                 << "\n\n"
                                 << R"({"id": "b", "context": [9], "output": []})" << "\n";
  const auto traces = load_generic_traces(dir / "t.jsonl", nullptr);
  ASSERT_EQ(traces.size(), 2u);
  EXPECT_EQ(traces[0].context, (std::vector<Token>{1, 2, 3}));
  EXPECT_EQ(traces[0].output, (std::vector<Token>{4, 5}));
  EXPECT_EQ(traces[0].category, "x");
  ASSERT_EQ(traces[0].references.size(), 1u);
  EXPECT_EQ(traces[0].references[0], (std::vector<Token>{7, 8}));
  EXPECT_EQ(traces[1].id, "\"b\"");
  EXPECT_TRUE(traces[1].output.empty());
}

TEST(GenericTraces, BadRowsAreClearErrors) {
  refdec_test::TempDir dir;
  auto load_one = [&](const std::string& row) {
    std::ofstream(dir / "bad.jsonl") << row << "\n";
    return load_generic_traces(dir / "bad.jsonl", nullptr);
  };
  EXPECT_THROW(load_one("{not json"), Error);
  EXPECT_THROW(load_one(R"({"output": [1]})"), Error);                       // no context
  EXPECT_THROW(load_one(R"({"context": [], "output": [1]})"), Error);        // empty context
  EXPECT_THROW(load_one(R"({"context": [1], "output": [-3]})"), Error);      // negative id
  EXPECT_THROW(load_one(R"({"context": [1.5], "output": [1]})"), Error);     // not an integer
  EXPECT_THROW(load_one(R"({"context": "text", "output": [1]})"), Error);    // text without tokenizer
  EXPECT_THROW(load_generic_traces(dir / "missing.jsonl", nullptr), IoError);
  try {
    load_one(R"({"context": [1], "output": [1, -3]})");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-3"), std::string::npos) << e.what();
  }
}

// A field of the wrong type is named with the file and its line (blank lines counted).
TEST(GenericTraces, WrongTypesNameFileAndLine) {
  refdec_test::TempDir dir;
  const auto path = dir / "typed.jsonl";
  auto expect = [&](const std::string& row, const std::string& needle) {
    std::ofstream(path) << R"({"context": [1], "output": [2]})" << "\n\n" << row << "\n";
    try {
      load_generic_traces(path, nullptr);
      ADD_FAILURE() << "no error for " << row;
    } catch (const IoError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path.string() + ":3"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  };
  expect(R"({"context": [1], "output": [2], "category": 7})", "\"category\" must be a string, got 7");
  expect(R"({"context": [1], "output": [2], "category": ["a"]})", "\"category\" must be a string");
  expect(R"({"context": [1], "output": [2], "references": 5})", "\"references\" must be an array");
  // null means absent
  std::ofstream(path) << R"({"context": [1], "output": [2], "category": null})" << "\n";
  EXPECT_EQ(load_generic_traces(path, nullptr).at(0).category, "");
}

// A FIFO or a directory given as a dataset is rejected at once (the open must not block).
TEST(GenericTraces, NonRegularFilesAreRejectedWithoutBlocking) {
  refdec_test::TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "pipe.jsonl").c_str(), 0600), 0);
  EXPECT_THROW(load_generic_traces(dir / "pipe.jsonl", nullptr), IoError);
  EXPECT_THROW(read_jsonl(dir.path()), IoError);
  // The SentencePiece model too: read by refdec (never blocking), parsed from memory.
  EXPECT_THROW(SentencePieceTokenizer::load(dir / "pipe.jsonl"), IoError);
  EXPECT_THROW(SentencePieceTokenizer::load(dir.path()), IoError);
}

TEST_F(WithTokenizer, GenericTracesEncodeTextAndCheckTheVocabulary) {
  refdec_test::TempDir dir;
  std::ofstream(dir / "t.jsonl") << R"({"context": "The cat sat", "output": " on the mat", "references": ["a mat"]})" << "\n";
  const auto traces = load_generic_traces(dir / "t.jsonl", tokenizer_.get());
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_EQ(traces[0].context, tokenizer_->encode("The cat sat"));
  std::ofstream(dir / "oov.jsonl") << R"({"context": [1], "output": [32000]})" << "\n";
  EXPECT_THROW(load_generic_traces(dir / "oov.jsonl", tokenizer_.get()), Error);
}

}  // namespace
