// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The llama2.c BPE tokenizer (`tokenizer.bin`, `tok512.bin`): loading, encoding and decoding with
// the same results as karpathy/llama2.c's run.c, so prompts and outputs match that reference.

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <limits>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"

REFDEC_NAMESPACE_BEGIN

/// A SentencePiece-style BPE vocabulary in llama2.c's binary format: every token has a piece (raw
/// bytes) and a merge score. Ids 0, 1 and 2 are `<unk>`, BOS and EOS; byte fallback uses ids
/// 3..258 for the bytes 0x00..0xFF. Immutable after loading, so concurrent use is safe.
class Llama2cTokenizer {
 public:
  /// Reads a llama2.c tokenizer file holding exactly `vocab_size` tokens (the model's vocabulary
  /// size, which the file does not store). Layout, little-endian: int32 max_token_length, then per
  /// token a float32 score, an int32 byte length and that many bytes. Throws refdec::IoError naming
  /// `path` when the file is missing or unreadable, truncated, longer than `vocab_size` tokens,
  /// or holds a negative length or a NaN score, and refdec::ArgumentError when `vocab_size` < 3
  /// (no room for BOS/EOS).
  /// When two tokens share a piece, encoding uses the lower id.
  static Llama2cTokenizer load(const std::filesystem::path& path, std::int32_t vocab_size) {
    REFDEC_CHECK(vocab_size >= 3,
                 "Llama2cTokenizer: vocab_size " << vocab_size << " for " << path << " must be at least 3 (<unk>, BOS, EOS)");
    const std::string file = read_file_bytes(path, "llama2.c tokenizer file");  // regular files only
    const std::vector<char> bytes(file.begin(), file.end());

    Reader r{bytes, 0};
    std::int32_t max_token_length = 0;
    REFDEC_CHECK_IO(r.i32(max_token_length), "Llama2cTokenizer: " << path << " is truncated (no header)");
    REFDEC_CHECK_IO(max_token_length >= 0, "Llama2cTokenizer: " << path << " has negative max_token_length " << max_token_length);
    // Every token takes at least 8 bytes; checking up front keeps a bogus vocab_size from
    // reserving huge vectors.
    REFDEC_CHECK_IO(static_cast<std::size_t>(vocab_size) <= r.remaining() / 8,
                    "Llama2cTokenizer: " << path << " is truncated: " << bytes.size() << " bytes cannot hold " << vocab_size << " tokens");

    Llama2cTokenizer t;
    t.pieces_.reserve(static_cast<std::size_t>(vocab_size));
    t.scores_.reserve(static_cast<std::size_t>(vocab_size));
    t.ids_.reserve(static_cast<std::size_t>(vocab_size));
    for (std::int32_t id = 0; id < vocab_size; ++id) {
      float score = 0.0f;
      std::int32_t length = 0;
      REFDEC_CHECK_IO(r.f32(score) && r.i32(length),
                      "Llama2cTokenizer: " << path << " is truncated at token " << id << " of " << vocab_size);
      REFDEC_CHECK_IO(!std::isnan(score), "Llama2cTokenizer: " << path << ": token " << id << " has a NaN score");
      REFDEC_CHECK_IO(length >= 0, "Llama2cTokenizer: " << path << ": token " << id << " has negative length " << length);
      REFDEC_CHECK_IO(static_cast<std::size_t>(length) <= r.remaining(),
                      "Llama2cTokenizer: " << path << " is truncated in the piece of token " << id << " (" << length << " bytes, "
                                           << r.remaining() << " left)");
      t.pieces_.emplace_back(bytes.data() + r.pos, static_cast<std::size_t>(length));
      r.pos += static_cast<std::size_t>(length);
      t.scores_.push_back(score);
      t.ids_.emplace(t.pieces_.back(), id);  // keeps the first id of a duplicated piece
    }
    // A longer file usually means the caller passed the wrong vocab_size.
    REFDEC_CHECK_IO(r.remaining() == 0, "Llama2cTokenizer: " << path << " has " << r.remaining() << " bytes after " << vocab_size
                                                             << " tokens; is vocab_size right?");
    return t;
  }

  /// Number of tokens.
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(pieces_.size()); }
  /// The beginning-of-sequence token id (1).
  static constexpr Token bos_id() { return 1; }
  /// The end-of-sequence token id (2).
  static constexpr Token eos_id() { return 2; }

  /// The raw piece of token `id`, e.g. " the" or "<0x0A>". Throws refdec::Error when `id` is out of
  /// range. The view lives as long as the tokenizer.
  std::string_view piece(Token id) const {
    check_id(id);
    return pieces_[static_cast<std::size_t>(id)];
  }

  /// The merge score of token `id` (higher merges first). Throws refdec::Error when out of range.
  float score(Token id) const {
    check_id(id);
    return scores_[static_cast<std::size_t>(id)];
  }

  /// Encodes `text` (UTF-8) exactly as llama2.c's `encode()`: BOS if `bos`; for non-empty text the
  /// token of " " (SentencePiece's dummy prefix); each UTF-8 code point as its own token, or as
  /// byte tokens (byte + 3) when the vocabulary lacks it; then repeated merges of the adjacent pair
  /// whose concatenated piece is a token with the highest score (the leftmost pair on ties; only
  /// scores above -1e10 count), until no pair merges; EOS if `eos`. Malformed UTF-8 is split as
  /// llama2.c splits it (a lead byte plus at most 3 continuation bytes). Unlike llama2.c, a NUL
  /// byte does not end the text, and a missing " " token falls back to its byte token. Throws
  /// refdec::Error when a needed byte token is beyond the vocabulary. O(n log n) in the length
  /// of `text` (llama2.c's merge loop is quadratic).
  std::vector<Token> encode(std::string_view text, bool bos, bool eos) const {
    std::vector<Token> tokens;
    tokens.reserve(text.size() + 3);
    if (bos) tokens.push_back(bos_id());
    std::string buf;
    if (!text.empty()) push_piece_or_bytes(" ", tokens);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (!is_continuation(text[i])) buf.clear();
      buf.push_back(text[i]);
      // Mirrors llama2.c: at most 4 bytes per code point, so stray continuation bytes start anew.
      if (i + 1 < text.size() && is_continuation(text[i + 1]) && buf.size() < 4) continue;
      push_piece_or_bytes(buf, tokens);
      buf.clear();
    }
    merge(tokens, buf);
    if (eos) tokens.push_back(eos_id());
    return tokens;
  }

  /// The text of `token` following `prev`, as llama2.c's `decode()`: its piece, without the
  /// leading space when `prev` is BOS; a piece "<0xNN>" (two hex digits) is the single raw byte
  /// 0xNN (also 0x00, which llama2.c would print as nothing). BOS and EOS yield their pieces.
  /// Throws refdec::Error when `token` is out of range; `prev` is only compared with BOS.
  std::string decode(Token prev, Token token) const {
    std::string_view p = piece(token);
    if (prev == bos_id() && !p.empty() && p.front() == ' ') p.remove_prefix(1);
    if (const int byte = parse_byte_piece(p); byte >= 0) return std::string(1, static_cast<char>(byte));
    return std::string(p);
  }

  /// The text of a token sequence, as llama2.c prints a generation: each token is decoded with
  /// `decode(prev, token)` where `prev` is the token before it in `tokens`, and BOS for the first
  /// (so the dummy-prefix space is dropped whether or not the sequence starts with BOS); BOS and
  /// EOS tokens themselves add no text but still act as `prev`. With a " " token in the vocabulary,
  /// `decode(encode(s, bos, eos)) == s` for any `s` that does not spell out byte pieces such as
  /// "<0x41>". Throws refdec::Error on any id out of range.
  std::string decode(std::span<const Token> tokens) const {
    std::string out;
    Token prev = bos_id();
    for (const Token t : tokens) {
      check_id(t);
      if (t != bos_id() && t != eos_id()) out += decode(prev, t);
      prev = t;
    }
    return out;
  }

 private:
  struct Reader {
    const std::vector<char>& bytes;
    std::size_t pos;
    std::size_t remaining() const { return bytes.size() - pos; }
    bool u32(std::uint32_t& v) {
      if (remaining() < 4) return false;
      // Assembled byte by byte because the files are little-endian whatever the host is.
      v = 0;
      for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bytes[pos + static_cast<std::size_t>(k)]);
      pos += 4;
      return true;
    }
    bool i32(std::int32_t& v) {
      std::uint32_t u = 0;
      if (!u32(u)) return false;
      v = std::bit_cast<std::int32_t>(u);
      return true;
    }
    bool f32(float& v) {
      std::uint32_t u = 0;
      if (!u32(u)) return false;
      v = std::bit_cast<float>(u);
      return true;
    }
  };

  Llama2cTokenizer() = default;

  static bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0u) == 0x80u; }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }

  /// The byte of a piece "<0xNN>", or -1 for any other piece.
  static int parse_byte_piece(std::string_view p) {
    if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
    const int hi = hex_digit(p[3]);
    const int lo = hex_digit(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }

  void check_id(Token id) const {
    REFDEC_CHECK(id >= 0 && id < vocab_size(), "Llama2cTokenizer: token id " << id << " is outside the vocabulary of " << vocab_size());
  }

  Token lookup(const std::string& s) const {
    const auto it = ids_.find(s);
    return it == ids_.end() ? Token{-1} : it->second;
  }

  void push_piece_or_bytes(const std::string& s, std::vector<Token>& tokens) const {
    if (const Token id = lookup(s); id >= 0) {
      tokens.push_back(id);
      return;
    }
    for (const char c : s) {
      const Token id = static_cast<Token>(static_cast<unsigned char>(c)) + 3;
      REFDEC_CHECK(id < vocab_size(), "Llama2cTokenizer: byte fallback token " << id << " for byte "
                                                                               << static_cast<int>(static_cast<unsigned char>(c))
                                                                               << " is outside the vocabulary of " << vocab_size());
      tokens.push_back(id);
    }
  }

  /// The token whose piece is the concatenation of `a`'s and `b`'s, or -1.
  Token pair_token(Token a, Token b, std::string& buf) const {
    buf.assign(pieces_[static_cast<std::size_t>(a)]);
    buf.append(pieces_[static_cast<std::size_t>(b)]);
    return lookup(buf);
  }

  // llama2.c's merge loop (repeatedly merge the best-scoring adjacent pair, the leftmost on ties)
  // in O(n log n) instead of its O(n^2): the symbols form a linked list in which a merged symbol
  // keeps the index of its left part, so index order is sequence order, and the candidate merges
  // sit in a heap ordered by score, then index. A candidate is stale once either symbol changed
  // or was merged away (per-symbol versions) and is dropped when it surfaces. The merges, and so
  // the tokens, are exactly those of the quadratic loop.
  void merge(std::vector<Token>& tokens, std::string& buf) const {
    const std::size_t n = tokens.size();
    if (n < 2) return;
    constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
    std::vector<std::size_t> next(n), prev(n);  // [n] neighbours in the current sequence, kNone at the ends
    std::vector<std::uint32_t> version(n, 0);   // [n] bumped when a symbol changes or disappears
    for (std::size_t i = 0; i < n; ++i) {
      next[i] = i + 1 < n ? i + 1 : kNone;
      prev[i] = i > 0 ? i - 1 : kNone;
    }
    struct Candidate {
      float score;
      std::size_t left, right;
      std::uint32_t left_version, right_version;
      Token merged;
    };
    const auto worse = [](const Candidate& a, const Candidate& b) { return a.score != b.score ? a.score < b.score : a.left > b.left; };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
    const auto consider = [&](std::size_t left) {  // the pair starting at symbol `left`, if it merges
      const std::size_t right = next[left];
      if (right == kNone) return;
      const Token merged = pair_token(tokens[left], tokens[right], buf);
      if (merged < 0) return;
      const float score = scores_[static_cast<std::size_t>(merged)];
      if (!(score > -1e10f)) return;  // llama2.c's floor: a merge must score strictly above it
      heap.push(Candidate{score, left, right, version[left], version[right], merged});
    };
    for (std::size_t i = 0; i + 1 < n; ++i) consider(i);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      if (next[c.left] != c.right || version[c.left] != c.left_version || version[c.right] != c.right_version) continue;  // stale
      tokens[c.left] = c.merged;
      ++version[c.left];
      ++version[c.right];
      next[c.left] = next[c.right];
      if (next[c.right] != kNone) prev[next[c.right]] = c.left;
      next[c.right] = prev[c.right] = kNone;
      if (prev[c.left] != kNone) consider(prev[c.left]);
      consider(c.left);
    }
    std::size_t out = 0;  // symbol 0 is never merged away (only right parts are)
    for (std::size_t i = 0; i != kNone; i = next[i]) tokens[out++] = tokens[i];
    tokens.resize(out);
  }

  std::vector<std::string> pieces_;             // [vocab_size]
  std::vector<float> scores_;                   // [vocab_size]
  std::unordered_map<std::string, Token> ids_;  // piece -> lowest id with that piece
};

REFDEC_NAMESPACE_END
