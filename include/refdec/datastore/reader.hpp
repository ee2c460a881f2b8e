// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading a datastore (format in refdec/datastore/format.hpp): the file memory-mapped read-only
// (POSIX), validated at open, searched through refdec/datastore/suffix_view.hpp. No dependencies
// beyond the C++ library and POSIX; refdec/datastore/retrieval.hpp builds REST drafts on it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/datastore/format.hpp"
#include "refdec/datastore/suffix_view.hpp"
#include "refdec/io/mapped_file.hpp"

REFDEC_NAMESPACE_BEGIN

/// Options of Datastore::open.
struct DatastoreOpenOptions {
  /// Recompute the data checksum and range-check every token and suffix array entry (one pass over
  /// the file, several GB/s once it is in the page cache). Turn off for huge files: searches stay
  /// memory-safe without it, but a corrupted file can then give wrong drafts.
  bool verify = true;
  /// Load the whole file and map all of it at open (MAP_POPULATE), so that no query pays for a
  /// page fault; `verify` touches every page anyway. Off: pages are faulted in on first use.
  bool populate = false;
  /// Check that the whole suffix array is sorted: every adjacent pair of suffixes is compared in
  /// full and every position must occur once. One pass over the suffix array plus the comparisons,
  /// whose cost grows with the length of the repeats in the corpus (a corpus of one repeated token
  /// is quadratic): for an untrusted file of moderate size. Off (the default), the order is
  /// checked on `order_samples` adjacent pairs only (see below).
  bool verify_order = false;
  /// The sampled order check, always done (with or without `verify`, bounded cost): this many
  /// adjacent pairs of suffix array entries, drawn at fixed pseudo-random ranks (all pairs when
  /// the array has fewer), are range-checked and compared over their first kDatastoreSampleCompare
  /// tokens. A file with a valid checksum but a shuffled or otherwise unsorted suffix array, which
  /// would silently match nothing, is rejected with high probability; a single swapped pair in a
  /// large file needs `verify_order`. 0 turns it off.
  std::uint32_t order_samples = 1024;
};

/// Tokens compared per pair by the sampled suffix order check of Datastore::open.
inline constexpr std::uint64_t kDatastoreSampleCompare = 1024;

/// A read-only, memory-mapped suffix-array datastore. All methods are const and it holds no
/// mutable state, so one instance can serve any number of threads and sequences.
class Datastore {
 public:
  /// Maps and validates the datastore file `path`. Throws refdec::IoError naming the file and the
  /// bad field for a missing or unreadable file, wrong magic or version, a corrupt or truncated
  /// header, sizes or offsets that do not add up, a checksum mismatch, (with `verify`) a token
  /// or suffix array entry out of range, and a suffix array out of order (sampled, or in full with
  /// `verify_order`; see DatastoreOpenOptions).
  static Datastore open(const std::filesystem::path& path, DatastoreOpenOptions options = {}) {
    Datastore ds;
    ds.path_ = path;
    ds.map_ = MappedFile(path, options.populate, "datastore");
    ds.validate(options);
    return ds;
  }
  /// open() into a shared pointer, the form drafters hold.
  static std::shared_ptr<const Datastore> open_shared(const std::filesystem::path& path, DatastoreOpenOptions options = {}) {
    return std::make_shared<const Datastore>(open(path, options));
  }

  Datastore(Datastore&&) noexcept = default;
  Datastore& operator=(Datastore&&) noexcept = default;

  const std::filesystem::path& path() const { return path_; }
  const DatastoreHeader& header() const { return header_; }
  /// Length of the token array, one separator per document included.
  std::uint64_t size() const { return header_.num_tokens; }
  /// Number of corpus tokens (separators excluded).
  std::uint64_t num_corpus_tokens() const { return header_.num_tokens - header_.num_documents; }
  std::uint64_t num_documents() const { return header_.num_documents; }
  /// Token ids are in [0, vocab_size()).
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(header_.vocab_size); }

  /// The token at array position `pos`, or -1 for a document separator.
  Token token(std::uint64_t pos) const {
    REFDEC_CHECK(pos < size(), "datastore position " << pos << " is out of range [0, " << size() << ")");
    return view_.token(pos);
  }
  /// The array position of the suffix of rank `rank` (suffix array entry).
  std::uint64_t suffix(std::uint64_t rank) const {
    REFDEC_CHECK(rank < size(), "suffix array rank " << rank << " is out of range [0, " << size() << ")");
    return view_.suffix(rank);
  }

  /// The ranks of the suffixes that start with `pattern` (every token must be in the vocabulary;
  /// an empty pattern matches every suffix).
  SuffixRange find(std::span<const Token> pattern) const {
    check_tokens(pattern, "search pattern");
    return view_.find(pattern);
  }
  /// Number of occurrences of `pattern`.
  std::uint64_t count(std::span<const Token> pattern) const { return find(pattern).size(); }

  /// The longest suffix of `context` of at most `max_length` tokens that occurs in the datastore:
  /// its length (0 when not even the last token occurs) and its range.
  std::pair<std::size_t, SuffixRange> longest_suffix_match(std::span<const Token> context, std::size_t max_length) const {
    const std::size_t hi_limit = std::min(max_length, context.size());
    check_tokens(context.subspan(context.size() - hi_limit), "context");
    SuffixRange best;
    const std::size_t length = longest_occurring(hi_limit, 0, [&](std::size_t n) {
      const SuffixRange r = view_.find(context.last(n));
      if (!r.empty()) best = r;
      return !r.empty();
    });
    return {length, length == 0 ? SuffixRange{} : best};
  }

  /// Appends to `out` the up to `max_length` tokens that follow array position `pos` (exclusive),
  /// stopping at the end of its document. Returns how many were appended: none for a `pos` at or
  /// past the last position (any uint64_t is safe, UINT64_MAX included).
  std::size_t continuation(std::uint64_t pos, std::size_t max_length, std::vector<Token>& out) const {
    const std::size_t before = out.size();
    if (pos >= size()) return 0;  // pos + 1 would wrap for UINT64_MAX
    view_.visit([&](const auto* codes, const auto*) {
      for (std::uint64_t p = pos + 1; p < size() && out.size() - before < max_length; ++p) {
        const std::uint32_t c = codes[p];
        if (c == 0) break;
        REFDEC_CHECK_IO(c <= header_.vocab_size, "corrupt datastore " << path_ << ": token code " << c << " at position " << p
                                                                      << " exceeds vocab_size " << header_.vocab_size);
        out.push_back(static_cast<Token>(c) - 1);
      }
    });
    return out.size() - before;
  }
  /// The token codes and the suffix array in place (every rank, the separators' suffixes first).
  const SuffixArrayView& view() const { return view_; }
  /// A hint to fetch the suffix array entry of rank `rank` into the cache; no effect on results,
  /// and harmless for any rank.
  void prefetch_suffix(std::uint64_t rank) const { view_.prefetch_suffix(rank); }
  /// A hint to fetch the token at array position `pos` into the cache; harmless for any position.
  void prefetch_token(std::uint64_t pos) const { view_.prefetch_code(pos); }

 private:
  Datastore() = default;

  void check_tokens(std::span<const Token> tokens, const char* what) const {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      REFDEC_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size(), what << " token " << tokens[i] << " at index " << i
                                                                    << " is outside the datastore's vocabulary [0, " << vocab_size()
                                                                    << ") of " << path_);
  }

  void validate(const DatastoreOpenOptions& options) {
    const std::uint64_t file_size = map_.size();
    REFDEC_CHECK_IO(file_size >= kDatastoreHeaderBytes, "datastore " << path_ << " is truncated: " << file_size << " bytes, less than the "
                                                                     << kDatastoreHeaderBytes << "-byte header");
    std::memcpy(&header_, map_.data(), sizeof(header_));
    const DatastoreHeader& h = header_;
    REFDEC_CHECK_IO(h.magic == kDatastoreMagic, "datastore " << path_ << " has the wrong magic (not a refdec datastore)");
    REFDEC_CHECK_IO(h.version == kDatastoreVersion,
                    "datastore " << path_ << " has format version " << h.version << "; this reader supports version " << kDatastoreVersion);
    const std::uint64_t hc = datastore_hash(std::span<const std::uint8_t>(map_.data(), offsetof(DatastoreHeader, header_checksum)));
    REFDEC_CHECK_IO(hc == h.header_checksum, "datastore " << path_ << " has a corrupt header: header_checksum is " << h.header_checksum
                                                          << ", the header hashes to " << hc);
    REFDEC_CHECK_IO(h.header_bytes == kDatastoreHeaderBytes,
                    "datastore " << path_ << ": header_bytes is " << h.header_bytes << ", expected " << kDatastoreHeaderBytes);
    REFDEC_CHECK_IO(h.file_bytes == file_size, "datastore " << path_ << " is truncated or padded: file_bytes is " << h.file_bytes
                                                            << " but the file has " << file_size << " bytes");
    REFDEC_CHECK_IO(h.vocab_size >= 1 && h.vocab_size <= static_cast<std::uint32_t>(std::numeric_limits<Token>::max()),
                    "datastore " << path_ << ": vocab_size " << h.vocab_size << " is out of range");
    REFDEC_CHECK_IO(h.token_width == datastore_token_width(h.vocab_size),
                    "datastore " << path_ << ": token_width " << h.token_width << " does not fit vocab_size " << h.vocab_size
                                 << " (expected " << datastore_token_width(h.vocab_size) << ")");
    REFDEC_CHECK_IO(h.num_tokens >= 1 && h.num_tokens <= (std::uint64_t{1} << 48),
                    "datastore " << path_ << ": num_tokens " << h.num_tokens << " is out of range [1, 2^48]");
    REFDEC_CHECK_IO(h.index_width == datastore_index_width(h.num_tokens),
                    "datastore " << path_ << ": index_width " << h.index_width << " does not fit num_tokens " << h.num_tokens
                                 << " (expected " << datastore_index_width(h.num_tokens) << ")");
    REFDEC_CHECK_IO(h.num_documents >= 1 && h.num_documents <= h.num_tokens, "datastore " << path_ << ": num_documents " << h.num_documents
                                                                                          << " is out of range [1, num_tokens "
                                                                                          << h.num_tokens << "]");
    REFDEC_CHECK_IO(h.flags == 0, "datastore " << path_ << ": unknown flags " << h.flags);
    const std::uint64_t tokens_bytes = h.num_tokens * h.token_width;
    const std::uint64_t suffix_bytes = h.num_tokens * h.index_width;
    REFDEC_CHECK_IO(h.tokens_bytes == tokens_bytes,
                    "datastore " << path_ << ": tokens_bytes " << h.tokens_bytes << " != num_tokens * token_width = " << tokens_bytes);
    REFDEC_CHECK_IO(h.suffix_bytes == suffix_bytes,
                    "datastore " << path_ << ": suffix_bytes " << h.suffix_bytes << " != num_tokens * index_width = " << suffix_bytes);
    REFDEC_CHECK_IO(h.tokens_offset == datastore_align(kDatastoreHeaderBytes), "datastore " << path_ << ": tokens_offset "
                                                                                            << h.tokens_offset << ", expected "
                                                                                            << datastore_align(kDatastoreHeaderBytes));
    REFDEC_CHECK_IO(
        h.suffix_offset == datastore_align(h.tokens_offset + tokens_bytes),
        "datastore " << path_ << ": suffix_offset " << h.suffix_offset << ", expected " << datastore_align(h.tokens_offset + tokens_bytes));
    REFDEC_CHECK_IO(h.file_bytes == h.suffix_offset + suffix_bytes,
                    "datastore " << path_ << ": file_bytes " << h.file_bytes
                                 << " != suffix_offset + suffix_bytes = " << h.suffix_offset + suffix_bytes);
    std::ostringstream label;
    label << "datastore " << path_;
    const SuffixArrayView::Arrays arrays{.codes = map_.data() + h.tokens_offset,
                                         .code_width = h.token_width,
                                         .num_codes = h.num_tokens,
                                         .suffixes = map_.data() + h.suffix_offset,
                                         .suffix_width = h.index_width,
                                         .num_suffixes = h.num_tokens};
    view_ = SuffixArrayView(arrays, label.str());  // checks the final separator
    if (!options.verify) {
      check_order(options);
      return;
    }
    const std::uint64_t data_hash = datastore_hash(
        std::span<const std::uint8_t>(map_.data() + h.tokens_offset, file_size - h.tokens_offset));
    REFDEC_CHECK_IO(data_hash == h.data_checksum,
                    "datastore " << path_ << " is corrupt: data_checksum is " << h.data_checksum << ", the data hashes to " << data_hash);
    std::uint64_t separators = 0;
    std::uint32_t max_code = 0;
    for (std::uint64_t p = 0; p < h.num_tokens; ++p) {
      const std::uint32_t c = view_.code(p);
      separators += c == 0;
      max_code = std::max(max_code, c);
    }
    REFDEC_CHECK_IO(max_code <= h.vocab_size,
                    "corrupt datastore " << path_ << ": token code " << max_code << " exceeds vocab_size " << h.vocab_size);
    REFDEC_CHECK_IO(separators == h.num_documents,
                    "corrupt datastore " << path_ << ": " << separators << " document separators, num_documents is " << h.num_documents);
    for (std::uint64_t r = 0; r < h.num_tokens; ++r) (void)view_.suffix(r);
    check_order(options);
  }

  // -1, 0 or 1 as the suffix at `a` sorts before, equal to (only when a == b, or within `limit`
  // tokens) or after the suffix at `b`, comparing at most `limit` tokens: the order of the build's
  // sort, where a suffix that ends first (a proper prefix of the other) sorts first.
  int compare_suffixes(std::uint64_t a, std::uint64_t b, std::uint64_t limit) const {
    const std::uint64_t n = header_.num_tokens;
    for (std::uint64_t i = 0; i < limit; ++i) {
      const bool a_end = a + i >= n, b_end = b + i >= n;
      if (a_end || b_end) return a_end == b_end ? 0 : (a_end ? -1 : 1);
      const std::uint32_t ca = view_.code(a + i), cb = view_.code(b + i);
      if (ca != cb) return ca < cb ? -1 : 1;
    }
    return 0;
  }

  // Rejects a suffix array whose adjacent entries at `rank` - 1 and `rank` are out of order.
  void check_pair(std::uint64_t rank, std::uint64_t limit) const {
    const std::uint64_t a = view_.suffix(rank - 1), b = view_.suffix(rank);
    const int c = a == b ? 1 : compare_suffixes(a, b, limit);
    REFDEC_CHECK_IO(c <= 0, "corrupt datastore " << path_ << ": the suffix array is not sorted (entries " << rank - 1 << " and " << rank
                                                 << ", positions " << a << " and " << b << ", are out of order)");
  }

  void check_order(const DatastoreOpenOptions& options) const {
    const std::uint64_t n = header_.num_tokens;
    if (n < 2) return;
    if (options.verify_order) {
      std::vector<bool> seen(n, false);
      for (std::uint64_t r = 0; r < n; ++r) {
        const std::uint64_t pos = view_.suffix(r);
        REFDEC_CHECK_IO(!seen[pos], "corrupt datastore " << path_ << ": position " << pos << " occurs twice in the suffix array");
        seen[pos] = true;
        if (r > 0) check_pair(r, n);
      }
      return;
    }
    if (options.order_samples == 0) return;
    if (n - 1 <= options.order_samples) {
      for (std::uint64_t r = 1; r < n; ++r) check_pair(r, kDatastoreSampleCompare);
      return;
    }
    std::uint64_t state = 0x9e3779b97f4a7c15ULL ^ n;  // splitmix64: the same ranks on every open
    for (std::uint32_t i = 0; i < options.order_samples; ++i) {
      state += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      check_pair(1 + z % (n - 1), kDatastoreSampleCompare);
    }
  }

  std::filesystem::path path_;
  MappedFile map_;
  DatastoreHeader header_{};
  SuffixArrayView view_;
};

REFDEC_NAMESPACE_END
