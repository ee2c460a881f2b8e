// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "refdec/text/llama2c_tokenizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include "test_data.hpp"

namespace {

using namespace refdec;
namespace fs = std::filesystem;

using refdec_test::TempDir;

void put_u32(std::string& out, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xFFu));
}

// Serialises (score, piece) pairs in llama2.c's tokenizer format.
std::string tokenizer_bytes(const std::vector<std::pair<float, std::string>>& vocab) {
  std::int32_t max_len = 0;
  for (const auto& [score, piece] : vocab) max_len = std::max(max_len, static_cast<std::int32_t>(piece.size()));
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(max_len));
  for (const auto& [score, piece] : vocab) {
    put_u32(out, std::bit_cast<std::uint32_t>(score));
    put_u32(out, static_cast<std::uint32_t>(piece.size()));
    out += piece;
  }
  return out;
}

fs::path write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
  return path;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The message of the refdec::Error that `f` throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The encoder before the O(n log n) merge, kept as the reference: llama2.c's algorithm with the
// quadratic merge loop (scan every pair for the best score, leftmost on ties, merge, repeat).
std::vector<Token> reference_encode(const Llama2cTokenizer& tok, std::string_view text, bool bos, bool eos) {
  std::unordered_map<std::string, Token> ids;
  for (Token id = 0; id < tok.vocab_size(); ++id) ids.emplace(std::string(tok.piece(id)), id);
  auto lookup = [&](const std::string& s) {
    const auto it = ids.find(s);
    return it == ids.end() ? Token{-1} : it->second;
  };
  std::vector<Token> tokens;
  auto push = [&](const std::string& s) {
    if (const Token id = lookup(s); id >= 0) {
      tokens.push_back(id);
      return;
    }
    for (const char c : s) tokens.push_back(static_cast<Token>(static_cast<unsigned char>(c)) + 3);
  };
  auto is_continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0u) == 0x80u; };
  if (bos) tokens.push_back(1);
  if (!text.empty()) push(" ");
  std::string buf;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!is_continuation(text[i])) buf.clear();
    buf.push_back(text[i]);
    if (i + 1 < text.size() && is_continuation(text[i + 1]) && buf.size() < 4) continue;
    push(buf);
    buf.clear();
  }
  while (tokens.size() >= 2) {
    float best_score = -1e10f;
    std::size_t best = tokens.size();
    Token best_id = -1;
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
      const Token id = lookup(std::string(tok.piece(tokens[i])) + std::string(tok.piece(tokens[i + 1])));
      if (id >= 0 && tok.score(id) > best_score) {
        best_score = tok.score(id);
        best = i;
        best_id = id;
      }
    }
    if (best == tokens.size()) break;
    tokens[best] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  if (eos) tokens.push_back(2);
  return tokens;
}

// A small vocabulary whose scores pin down every merge decision.
const std::vector<std::pair<float, std::string>> kTinyVocab = {
    {0.0f, "<unk>"},    // 0
    {0.0f, "\n<s>\n"},  // 1
    {0.0f, "\n</s>\n"}, // 2
    {0.0f, " "},        // 3
    {0.0f, "a"},        // 4
    {0.0f, "b"},        // 5
    {0.0f, "c"},        // 6
    {-3.0f, "ab"},      // 7
    {-1.0f, "bc"},      // 8
    {-5.0f, " ab"},     // 9
    {-4.0f, "aa"},      // 10
    {-2e10f, "cc"},     // 11: below llama2.c's -1e10 floor, so never merged
    {0.0f, "\xC3\xA9"}, // 12: "é"
    {0.0f, "<0x41>"},   // 13: byte piece for 'A'
    {0.0f, "<0x4>"},    // 14: not a byte piece
    {-6.0f, " é"},      // 15
};

class TinyTokenizer : public ::testing::Test {
 protected:
  TinyTokenizer() : tok_(Llama2cTokenizer::load(write_file(dir_.path() / "tiny.bin", tokenizer_bytes(kTinyVocab)),
                                                static_cast<std::int32_t>(kTinyVocab.size()))) {}
  TempDir dir_;
  Llama2cTokenizer tok_;
};

TEST_F(TinyTokenizer, LoadsPiecesAndScores) {
  ASSERT_EQ(tok_.vocab_size(), 16);
  for (std::size_t i = 0; i < kTinyVocab.size(); ++i) {
    EXPECT_EQ(tok_.piece(static_cast<Token>(i)), kTinyVocab[i].second) << i;
    EXPECT_EQ(tok_.score(static_cast<Token>(i)), kTinyVocab[i].first) << i;
  }
  EXPECT_EQ(tok_.bos_id(), 1);
  EXPECT_EQ(tok_.eos_id(), 2);
  EXPECT_THROW((void)tok_.piece(16), Error);
  EXPECT_THROW((void)tok_.piece(-1), Error);
  EXPECT_THROW((void)tok_.score(16), Error);
}

TEST_F(TinyTokenizer, EncodesEmptyTextWithoutDummyPrefix) {
  EXPECT_EQ(tok_.encode("", false, false), (std::vector<Token>{}));
  EXPECT_EQ(tok_.encode("", true, false), (std::vector<Token>{1}));
  EXPECT_EQ(tok_.encode("", true, true), (std::vector<Token>{1, 2}));
}

TEST_F(TinyTokenizer, MergesHighestScoreFirst) {
  // "bc" (-1) beats "ab" (-3) although "ab" is further left; no "abc" token exists.
  EXPECT_EQ(tok_.encode("abc", false, false), (std::vector<Token>{3, 4, 8}));
  // "ab" (-3), then the dummy prefix joins: " ab" (-5).
  EXPECT_EQ(tok_.encode("ab", false, false), (std::vector<Token>{9}));
  EXPECT_EQ(tok_.encode("ab", true, true), (std::vector<Token>{1, 9, 2}));
  EXPECT_EQ(tok_.encode("c", false, true), (std::vector<Token>{3, 6, 2}));
}

TEST_F(TinyTokenizer, BreaksTiesToTheLeft) {
  EXPECT_EQ(tok_.encode("aaa", false, false), (std::vector<Token>{3, 10, 4}));
  EXPECT_EQ(tok_.encode("aaaa", false, false), (std::vector<Token>{3, 10, 10}));
}

TEST_F(TinyTokenizer, IgnoresMergesAtOrBelowTheScoreFloor) {
  EXPECT_EQ(tok_.encode("cc", false, false), (std::vector<Token>{3, 6, 6}));
}

TEST_F(TinyTokenizer, LooksUpWholeCodePoints) {
  // "é" is one token, and then merges with the dummy prefix.
  EXPECT_EQ(tok_.encode("\xC3\xA9", false, false), (std::vector<Token>{15}));
  EXPECT_EQ(tok_.encode("a\xC3\xA9", false, false), (std::vector<Token>{3, 4, 12}));
}

TEST_F(TinyTokenizer, RejectsByteFallbackBeyondTheVocabulary) {
  const std::string msg = error_of([&] { (void)tok_.encode("d", false, false); });
  EXPECT_NE(msg.find("byte fallback token 103"), std::string::npos) << msg;
}

TEST_F(TinyTokenizer, Decodes) {
  EXPECT_EQ(tok_.decode(0, 3), " ");
  EXPECT_EQ(tok_.decode(1, 3), "");  // space stripped after BOS
  EXPECT_EQ(tok_.decode(1, 9), "ab");
  EXPECT_EQ(tok_.decode(4, 9), " ab");
  EXPECT_EQ(tok_.decode(4, 13), "A");
  EXPECT_EQ(tok_.decode(4, 14), "<0x4>");
  EXPECT_EQ(tok_.decode(4, 1), "\n<s>\n");
  EXPECT_THROW((void)tok_.decode(0, 16), Error);
  EXPECT_THROW((void)tok_.decode(0, -1), Error);

  EXPECT_EQ(tok_.decode(std::vector<Token>{}), "");
  EXPECT_EQ(tok_.decode(std::vector<Token>{1, 9, 3, 4, 2}), "ab a");
  EXPECT_EQ(tok_.decode(std::vector<Token>{9, 3, 4}), "ab a");  // leading space dropped without BOS too
  EXPECT_EQ(tok_.decode(std::vector<Token>{9, 2, 1, 9, 13}), "ababA");
  EXPECT_THROW((void)tok_.decode(std::vector<Token>{9, 16}), Error);
}

TEST_F(TinyTokenizer, RoundTrips) {
  for (const std::string text : {"abc", "ab", "aaa", "cc", "c a b", "\xC3\xA9 ab\xC3\xA9", " ab"}) {
    EXPECT_EQ(tok_.decode(tok_.encode(text, true, true)), text);
    EXPECT_EQ(tok_.decode(tok_.encode(text, false, false)), text);
  }
}

TEST(Llama2cTokenizerLoad, DuplicatePiecesEncodeToTheLowerId) {
  TempDir dir;
  const auto path = write_file(dir.path() / "dup.bin",
                               tokenizer_bytes({{0, "<unk>"}, {0, "<s>"}, {0, "</s>"}, {0, " "}, {0, "x"}, {0, "x"}}));
  const auto tok = Llama2cTokenizer::load(path, 6);
  EXPECT_EQ(tok.encode("x", false, false), (std::vector<Token>{3, 4}));
  EXPECT_EQ(tok.decode(0, 5), "x");
}

TEST(Llama2cTokenizerLoad, RejectsBadInput) {
  TempDir dir;
  const std::vector<std::pair<float, std::string>> vocab = {{0, "<unk>"}, {0, "<s>"}, {0, "</s>"}, {-1, "ab"}};
  const std::string good = tokenizer_bytes(vocab);
  const auto good_path = write_file(dir.path() / "good.bin", good);
  EXPECT_EQ(Llama2cTokenizer::load(good_path, 4).vocab_size(), 4);

  const auto missing = dir.path() / "missing.bin";
  std::string msg = error_of([&] { (void)Llama2cTokenizer::load(missing, 4); });
  EXPECT_NE(msg.find("missing.bin"), std::string::npos) << msg;
  EXPECT_THROW((void)Llama2cTokenizer::load(missing, 4), IoError);

  EXPECT_THROW((void)Llama2cTokenizer::load(good_path, 0), ArgumentError);
  EXPECT_THROW((void)Llama2cTokenizer::load(good_path, -5), ArgumentError);
  EXPECT_THROW((void)Llama2cTokenizer::load(good_path, 2), ArgumentError);
  EXPECT_THROW((void)Llama2cTokenizer::load(good_path, 5), IoError);  // the file is too short
  // More tokens than the file holds, and fewer (trailing bytes).
  msg = error_of([&] { (void)Llama2cTokenizer::load(good_path, 5); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  msg = error_of([&] { (void)Llama2cTokenizer::load(good_path, 3); });
  EXPECT_NE(msg.find("vocab_size"), std::string::npos) << msg;

  // Every proper prefix of the file is truncated.
  for (std::size_t n = 0; n < good.size(); ++n) {
    const auto p = write_file(dir.path() / "prefix.bin", good.substr(0, n));
    msg = error_of([&] { (void)Llama2cTokenizer::load(p, 4); });
    EXPECT_NE(msg.find("truncated"), std::string::npos) << n << ": " << msg;
    EXPECT_NE(msg.find("prefix.bin"), std::string::npos) << n << ": " << msg;
  }

  std::string negative = good;
  put_u32(negative, 0);
  put_u32(negative, 0xFFFFFFFFu);  // length -1
  msg = error_of([&] { (void)Llama2cTokenizer::load(write_file(dir.path() / "neg.bin", negative), 5); });
  EXPECT_NE(msg.find("negative length"), std::string::npos) << msg;

  std::string huge = good;
  put_u32(huge, 0);
  put_u32(huge, 0x7FFFFFFFu);
  msg = error_of([&] { (void)Llama2cTokenizer::load(write_file(dir.path() / "huge.bin", huge), 5); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto nan_path = write_file(dir.path() / "nan.bin", tokenizer_bytes({{0, "<unk>"}, {0, "<s>"}, {nan, "x"}}));
  EXPECT_THROW((void)Llama2cTokenizer::load(nan_path, 3), Error);

  std::string bad_header;
  put_u32(bad_header, 0x80000000u);
  bad_header += good.substr(4);
  EXPECT_THROW((void)Llama2cTokenizer::load(write_file(dir.path() / "hdr.bin", bad_header), 4), Error);
}

// ---- The stories260K tokenizer (tok512.bin) -------------------------------------------------

class Tok512 : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = refdec_test::data_file("models/stories260K/tok512.bin");
    if (path_.empty()) GTEST_SKIP() << "models/stories260K/tok512.bin not found under " << refdec_test::data_dir();
    tok_.emplace(Llama2cTokenizer::load(path_, 512));
  }
  fs::path path_;
  std::optional<Llama2cTokenizer> tok_;
};

TEST_F(Tok512, Loads) {
  EXPECT_EQ(tok_->vocab_size(), 512);
  EXPECT_EQ(tok_->piece(0), "<unk>");
  EXPECT_EQ(tok_->piece(1), "\n<s>\n");
  EXPECT_EQ(tok_->piece(2), "\n</s>\n");
  EXPECT_EQ(tok_->piece(3), "<0x00>");
  EXPECT_EQ(tok_->piece(258), "<0xFF>");
  EXPECT_EQ(tok_->piece(410), " ");
  EXPECT_THROW((void)tok_->piece(512), Error);
}

TEST_F(Tok512, RejectsTruncatedCopyAndWrongVocabSize) {
  const std::string bytes = read_file(path_);
  ASSERT_EQ(bytes.size(), 6227u);
  TempDir dir;
  const auto cut = write_file(dir.path() / "tok512_cut.bin", bytes.substr(0, bytes.size() - 3));
  const std::string msg = error_of([&] { (void)Llama2cTokenizer::load(cut, 512); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tok512_cut.bin"), std::string::npos) << msg;
  EXPECT_THROW((void)Llama2cTokenizer::load(path_, 511), Error);
  EXPECT_THROW((void)Llama2cTokenizer::load(path_, 513), Error);
  EXPECT_THROW((void)Llama2cTokenizer::load(path_, 0), Error);
}

TEST_F(Tok512, DecodesKnownTokens) {
  EXPECT_EQ(tok_->piece(265), " the");
  EXPECT_EQ(tok_->decode(0, 265), " the");
  EXPECT_EQ(tok_->decode(1, 265), "the");
  EXPECT_EQ(tok_->decode(1, 260), "he");
  EXPECT_EQ(tok_->decode(0, 13), "\n");      // <0x0A>
  EXPECT_EQ(tok_->decode(0, 3 + 0xE4), "\xE4");  // raw byte, not valid UTF-8 on its own
  EXPECT_EQ(tok_->decode(0, 3), std::string(1, '\0'));
  EXPECT_THROW((void)tok_->decode(1, 512), Error);
}

TEST_F(Tok512, EncodesLikeLlama2c) {
  // Golden ids from llama2.c's run.c encode() on the same file.
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  const std::vector<Token> want = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  const auto got = tok_->encode(text, true, false);
  EXPECT_EQ(got, want);
  EXPECT_LT(got.size(), text.size());  // merges happened
  EXPECT_EQ(tok_->decode(got), text);

  auto with_eos = want;
  with_eos.push_back(2);
  EXPECT_EQ(tok_->encode(text, true, true), with_eos);
  EXPECT_EQ(tok_->encode(text, false, false), std::vector<Token>(want.begin() + 1, want.end()));
  EXPECT_EQ(tok_->encode("Hello world", true, false), (std::vector<Token>{1, 346, 306, 414, 263, 304, 341}));
}

TEST_F(Tok512, FallsBackToBytes) {
  // U+4E2D is not in the vocabulary: its UTF-8 bytes E4 B8 AD become byte tokens.
  const std::string zhong = "\xE4\xB8\xAD";
  EXPECT_EQ(tok_->encode(zhong, true, false), (std::vector<Token>{1, 410, 0xE4 + 3, 0xB8 + 3, 0xAD + 3}));
  EXPECT_EQ(tok_->decode(tok_->encode(zhong, true, true)), zhong);
  // "é" is a whole token.
  EXPECT_EQ(tok_->encode("\xC3\xA9", true, false), (std::vector<Token>{1, 410, 485}));
  const std::string mixed = "Lily said \xE4\xB8\xAD\xE6\x96\x87 and caf\xC3\xA9 \xF0\x9F\x98\x80!";
  EXPECT_EQ(tok_->decode(tok_->encode(mixed, true, true)), mixed);
}

TEST_F(Tok512, RoundTripsArbitraryBytes) {
  std::mt19937 rng(7);
  for (int it = 0; it < 200; ++it) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) {
      // Mostly letters and spaces so merges happen, plus arbitrary bytes (malformed UTF-8 too).
      const auto r = rng() % 10;
      text.push_back(r < 6 ? static_cast<char>('a' + rng() % 26) : r < 8 ? ' ' : static_cast<char>(1 + rng() % 255));
    }
    EXPECT_EQ(tok_->decode(tok_->encode(text, true, true)), text) << it;
  }
}

// ---- The O(n log n) merge against the quadratic reference ------------------------------------

// Random vocabularies over a small alphabet, with many tied scores (ties go to the leftmost pair),
// scores at the -1e10 floor, duplicated pieces and byte fallback: the tokens equal the reference's.
TEST(Llama2cTokenizerMerge, MatchesTheQuadraticReferenceOnRandomVocabularies) {
  std::mt19937 rng(11);
  TempDir dir;
  const std::string alphabet = "abcd ";
  for (int v = 0; v < 30; ++v) {
    std::vector<std::pair<float, std::string>> vocab = {{0.0f, "<unk>"}, {0.0f, "<s>"}, {0.0f, "</s>"}};
    for (int b = 0; b < 256; ++b) {
      char piece[8];
      std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
      vocab.emplace_back(0.0f, piece);
    }
    for (const char c : alphabet) vocab.emplace_back(0.0f, std::string(1, c));
    const int extra = 10 + static_cast<int>(rng() % 60);
    for (int e = 0; e < extra; ++e) {
      std::string piece;
      const int len = 2 + static_cast<int>(rng() % 4);
      for (int k = 0; k < len; ++k) piece.push_back(alphabet[rng() % alphabet.size()]);
      const auto r = rng() % 10;
      const float score = r == 0 ? -1e10f : r == 1 ? -3e10f : -static_cast<float>(rng() % 4);  // ties common
      vocab.emplace_back(score, piece);
    }
    const auto path = write_file(dir.path() / ("v" + std::to_string(v) + ".bin"), tokenizer_bytes(vocab));
    const auto tok = Llama2cTokenizer::load(path, static_cast<std::int32_t>(vocab.size()));
    for (int t = 0; t < 40; ++t) {
      std::string text;
      const int len = static_cast<int>(rng() % 300);
      for (int k = 0; k < len; ++k)
        text.push_back(rng() % 50 == 0 ? static_cast<char>(1 + rng() % 255) : alphabet[rng() % alphabet.size()]);
      const bool bos = rng() % 2 == 0;
      ASSERT_EQ(tok.encode(text, bos, false), reference_encode(tok, text, bos, false)) << "vocab " << v << " text " << t;
    }
  }
}

// Real text (the stories tokenizer on the datasets' JSONL, which is English prose plus JSON
// punctuation) in pieces of many sizes, and random text.
TEST_F(Tok512, MergeMatchesTheQuadraticReferenceOnRealText) {
  std::string corpus;
  for (const char* name : {"data/llma/rag.jsonl", "data/spec_bench/question.jsonl"})
    if (const auto p = refdec_test::data_file(name); !p.empty()) corpus += read_file(p).substr(0, 40000);
  corpus += "Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog.";
  std::mt19937 rng(3);
  for (int it = 0; it < 40; ++it) {
    const std::size_t len = rng() % 800;
    const std::size_t start = rng() % corpus.size();
    const std::string text = corpus.substr(start, len);
    ASSERT_EQ(tok_->encode(text, true, false), reference_encode(*tok_, text, true, false)) << it;
  }
  for (int it = 0; it < 60; ++it) {
    std::string text;
    const int len = static_cast<int>(rng() % 500);
    for (int k = 0; k < len; ++k) {
      const auto r = rng() % 10;
      text.push_back(r < 6 ? static_cast<char>('a' + rng() % 26) : r < 8 ? ' ' : static_cast<char>(1 + rng() % 255));
    }
    ASSERT_EQ(tok_->encode(text, false, true), reference_encode(*tok_, text, false, true)) << it;
  }
}

// A 200 KB input encodes (the quadratic merge took tens of seconds on it; no timing is asserted)
// and round-trips.
TEST_F(Tok512, Encodes200KBInput) {
  std::string text;
  if (const auto p = refdec_test::data_file("data/llma/rag.jsonl"); !p.empty()) text = read_file(p);
  if (text.empty()) text = "Once upon a time, there was a little girl named Lily. She liked to play.\n";
  while (text.size() < 200000) text += text;
  text.resize(200000);
  const auto ids = tok_->encode(text, true, true);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tok_->decode(ids), text);
}

}  // namespace
