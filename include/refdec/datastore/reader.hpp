// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading a datastore (format in refdec/datastore/format.hpp): the file memory-mapped read-only
// (POSIX), validated at open, with exact suffix search over its suffix array. No dependencies
// beyond the C++ library and POSIX; refdec/datastore/retrieval.hpp builds REST drafts on it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/datastore/format.hpp"
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

/// The suffix array ranks [begin, end) of the suffixes that start with a searched string.
struct SuffixRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const SuffixRange&, const SuffixRange&) = default;
};

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
    return static_cast<Token>(code(pos)) - 1;
  }
  /// The array position of the suffix of rank `rank` (suffix array entry).
  std::uint64_t suffix(std::uint64_t rank) const {
    REFDEC_CHECK(rank < size(), "suffix array rank " << rank << " is out of range [0, " << size() << ")");
    return checked_suffix(rank);
  }

  /// The ranks of the suffixes that start with `pattern` (every token must be in the vocabulary;
  /// an empty pattern matches every suffix).
  SuffixRange find(std::span<const Token> pattern) const {
    check_tokens(pattern, "search pattern");
    return find_unchecked(pattern);
  }
  /// Number of occurrences of `pattern`.
  std::uint64_t count(std::span<const Token> pattern) const { return find(pattern).size(); }

  /// The longest suffix of `context` of at most `max_length` tokens that occurs in the datastore:
  /// its length (0 when not even the last token occurs) and its range.
  std::pair<std::size_t, SuffixRange> longest_suffix_match(std::span<const Token> context, std::size_t max_length) const {
    const std::size_t hi_limit = std::min(max_length, context.size());
    check_tokens(context.subspan(context.size() - hi_limit), "context");
    // Occurrence is monotone in the length (a suffix of an occurring string occurs), so the
    // longest length is found by binary search over lengths.
    std::size_t lo = 0, hi = hi_limit;  // length lo occurs (0 trivially); lengths > hi do not
    SuffixRange best{0, size()};
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo + 1) / 2;
      const SuffixRange r = find_unchecked(context.subspan(context.size() - mid));
      if (r.empty()) {
        hi = mid - 1;
      } else {
        lo = mid;
        best = r;
      }
    }
    if (lo == 0) return {0, SuffixRange{}};
    return {lo, best};
  }

  /// Appends to `out` the up to `max_length` tokens that follow array position `pos` (exclusive),
  /// stopping at the end of its document. Returns how many were appended: none for a `pos` at or
  /// past the last position (any uint64_t is safe, UINT64_MAX included).
  std::size_t continuation(std::uint64_t pos, std::size_t max_length, std::vector<Token>& out) const {
    const std::size_t before = out.size();
    if (pos >= size()) return 0;  // pos + 1 would wrap for UINT64_MAX
    for (std::uint64_t p = pos + 1; p < size() && out.size() - before < max_length; ++p) {
      const std::uint32_t c = code(p);
      if (c == 0) break;
      REFDEC_CHECK_IO(c <= header_.vocab_size, "corrupt datastore " << path_ << ": token code " << c << " at position " << p
                                                                    << " exceeds vocab_size " << header_.vocab_size);
      out.push_back(static_cast<Token>(c) - 1);
    }
    return out.size() - before;
  }
  /// The token array in place: codes token + 1 (0 for a separator), header().token_width bytes
  /// each, little-endian; size() of them.
  const void* codes() const { return tokens_; }
  /// The suffix array in place: header().index_width bytes per entry, little-endian; size() of them.
  const void* suffix_array() const { return suffix_; }
  /// A hint to fetch the suffix array entry of rank `rank` into the cache; no effect on results,
  /// and harmless for any rank.
  void prefetch_suffix(std::uint64_t rank) const { prefetch(suffix_ + rank * header_.index_width); }
  /// A hint to fetch the token at array position `pos` into the cache; harmless for any position.
  void prefetch_token(std::uint64_t pos) const { prefetch(tokens_ + pos * header_.token_width); }

 private:
  Datastore() = default;

  // A hint to load the cache line at `p` (which may lie past the arrays: prefetches never fault).
  static void prefetch(const std::uint8_t* p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
  }

  // A little-endian unsigned integer of `width` bytes (2, 4 or 8) at `p`.
  static std::uint64_t load(const std::uint8_t* p, std::uint32_t width) {
    if (width == 2) {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    if (width == 4) {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  std::uint32_t code(std::uint64_t pos) const {
    return static_cast<std::uint32_t>(load(tokens_ + pos * header_.token_width, header_.token_width));
  }
  std::uint64_t raw_suffix(std::uint64_t rank) const { return load(suffix_ + rank * header_.index_width, header_.index_width); }
  // A suffix array entry, range-checked so that an unverified corrupt file cannot make a search
  // read outside the mapping.
  std::uint64_t checked_suffix(std::uint64_t rank) const {
    const std::uint64_t pos = raw_suffix(rank);
    REFDEC_CHECK_IO(pos < size(), "corrupt datastore " << path_ << ": suffix array entry " << rank << " is " << pos << ", out of range [0, "
                                                       << size() << ")");
    return pos;
  }

  void check_tokens(std::span<const Token> tokens, const char* what) const {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      REFDEC_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size(), what << " token " << tokens[i] << " at index " << i
                                                                    << " is outside the datastore's vocabulary [0, " << vocab_size()
                                                                    << ") of " << path_);
  }

  // Compares the suffix at `pos` with `pattern` over the pattern's length: <0, 0 (the suffix
  // starts with the pattern) or >0. The array ends with a separator, which is smaller than every
  // pattern code, so the comparison stops before the end.
  int compare(std::uint64_t pos, std::span<const Token> pattern) const {
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      if (pos + i >= size()) return -1;
      const std::uint32_t c = code(pos + i);
      const auto want = static_cast<std::uint32_t>(pattern[i]) + 1;
      if (c != want) return c < want ? -1 : 1;
    }
    return 0;
  }

  SuffixRange find_unchecked(std::span<const Token> pattern) const {
    std::uint64_t lo = 0, hi = size();
    // Narrow to some rank that matches, then find both ends below and above it.
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      const int c = compare(checked_suffix(mid), pattern);
      if (c < 0) {
        lo = mid + 1;
      } else if (c > 0) {
        hi = mid;
      } else {
        std::uint64_t a = lo, b = mid;  // first match in [lo, mid]
        while (a < b) {
          const std::uint64_t x = a + (b - a) / 2;
          if (compare(checked_suffix(x), pattern) < 0)
            a = x + 1;
          else
            b = x;
        }
        std::uint64_t e = mid + 1, f = hi;  // first non-match in [mid + 1, hi]
        while (e < f) {
          const std::uint64_t x = e + (f - e) / 2;
          if (compare(checked_suffix(x), pattern) == 0)
            e = x + 1;
          else
            f = x;
        }
        return {a, e};
      }
    }
    return {lo, lo};
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
    tokens_ = map_.data() + h.tokens_offset;
    suffix_ = map_.data() + h.suffix_offset;
    // Searches rely on the final separator to stop comparisons inside the array.
    REFDEC_CHECK_IO(code(h.num_tokens - 1) == 0, "corrupt datastore " << path_ << ": the token array does not end with "
                                                                      << "a document separator");
    if (!options.verify) {
      check_order(options);
      return;
    }
    const std::uint64_t data_hash = datastore_hash(std::span<const std::uint8_t>(tokens_, file_size - h.tokens_offset));
    REFDEC_CHECK_IO(data_hash == h.data_checksum,
                    "datastore " << path_ << " is corrupt: data_checksum is " << h.data_checksum << ", the data hashes to " << data_hash);
    std::uint64_t separators = 0;
    std::uint32_t max_code = 0;
    for (std::uint64_t p = 0; p < h.num_tokens; ++p) {
      const std::uint32_t c = code(p);
      separators += c == 0;
      max_code = std::max(max_code, c);
    }
    REFDEC_CHECK_IO(max_code <= h.vocab_size,
                    "corrupt datastore " << path_ << ": token code " << max_code << " exceeds vocab_size " << h.vocab_size);
    REFDEC_CHECK_IO(separators == h.num_documents,
                    "corrupt datastore " << path_ << ": " << separators << " document separators, num_documents is " << h.num_documents);
    for (std::uint64_t r = 0; r < h.num_tokens; ++r) {
      const std::uint64_t pos = raw_suffix(r);
      REFDEC_CHECK_IO(pos < h.num_tokens, "corrupt datastore " << path_ << ": suffix array entry " << r << " is " << pos
                                                               << ", out of range [0, " << h.num_tokens << ")");
    }
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
      const std::uint32_t ca = code(a + i), cb = code(b + i);
      if (ca != cb) return ca < cb ? -1 : 1;
    }
    return 0;
  }

  // Rejects a suffix array whose adjacent entries at `rank` - 1 and `rank` are out of order.
  void check_pair(std::uint64_t rank, std::uint64_t limit) const {
    const std::uint64_t a = checked_suffix(rank - 1), b = checked_suffix(rank);
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
        const std::uint64_t pos = checked_suffix(r);
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
  const std::uint8_t* tokens_ = nullptr;  // [num_tokens] codes, token_width bytes each
  const std::uint8_t* suffix_ = nullptr;  // [num_tokens] positions, index_width bytes each
};

REFDEC_NAMESPACE_END
