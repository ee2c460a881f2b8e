// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// SentencePiece models (the Llama / Vicuna tokenizer) through Debian's libsentencepiece.
// Link against refdec::text.

#include <sentencepiece_processor.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"

REFDEC_NAMESPACE_BEGIN

/// A loaded SentencePiece model. Encoding is SentencePiece's plain `Encode` (no BOS or EOS), which
/// is how the replay traces of the Spec-Bench and LLMA data are defined. Safe to share read-only
/// across threads.
class SentencePieceTokenizer {
 public:
  /// Loads a `.model` file; throws refdec::IoError naming the path when it is missing or invalid.
  static SentencePieceTokenizer load(const std::filesystem::path& path) {
    REFDEC_CHECK_IO(std::filesystem::exists(path), "SentencePiece model not found: " << path);
    // Read here (regular files only, never blocking on a FIFO), parsed from memory.
    const std::string bytes = read_file_bytes(path, "SentencePiece model");
    SentencePieceTokenizer t;
    t.sp_ = std::make_shared<sentencepiece::SentencePieceProcessor>();
    const auto status = t.sp_->LoadFromSerializedProto(bytes);
    REFDEC_CHECK_IO(status.ok(), "cannot load SentencePiece model " << path << ": " << status.ToString());
    return t;
  }

  /// Number of pieces: every token id is in [0, vocab_size()).
  std::int32_t vocab_size() const { return sp_->GetPieceSize(); }
  Token bos_id() const { return sp_->bos_id(); }
  Token eos_id() const { return sp_->eos_id(); }

  /// Token ids of UTF-8 `text`, without BOS or EOS.
  std::vector<Token> encode(std::string_view text) const {
    std::vector<int> ids;
    const auto status = sp_->Encode(std::string(text), &ids);
    REFDEC_CHECK(status.ok(), "SentencePiece encode failed: " << status.ToString());
    return {ids.begin(), ids.end()};
  }

  /// Text of token ids; throws for ids outside [0, vocab_size()).
  std::string decode(const std::vector<Token>& tokens) const {
    for (const Token t : tokens)
      REFDEC_CHECK(t >= 0 && t < vocab_size(), "token id " << t << " is outside the vocabulary of " << vocab_size());
    std::string out;
    const auto status = sp_->Decode(std::vector<int>(tokens.begin(), tokens.end()), &out);
    REFDEC_CHECK(status.ok(), "SentencePiece decode failed: " << status.ToString());
    return out;
  }

 private:
  SentencePieceTokenizer() = default;
  std::shared_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

REFDEC_NAMESPACE_END
