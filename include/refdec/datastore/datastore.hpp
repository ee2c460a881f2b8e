// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A REST-style retrieval datastore ("REST: Retrieval-Based Speculative Decoding", He et al. 2023):
// a token corpus and its suffix array in one file, memory-mapped read-only (POSIX), with exact
// suffix search and the REST retrieval step (longest context-suffix match, counted continuations).
// No dependencies beyond the C++ library and POSIX; refdec/datastore/builder.hpp writes the files.
//
// File format, version 1, all integers little-endian:
//
//   offset  size  field
//        0     8  magic "REFDECSA"
//        8     4  format version (1)
//       12     4  header size in bytes (128)
//       16     8  num_tokens: length of the token array, one separator per document included
//       24     8  num_documents
//       32     4  vocab_size: every token id is in [0, vocab_size)
//       36     4  token_width: bytes per token array entry, 2 (vocab_size < 65536) or 4
//       40     4  index_width: bytes per suffix array entry, 4 (num_tokens < 2^32) or 8
//       44     4  flags (0)
//       48     8  tokens_offset (64-byte aligned)     56  8  tokens_bytes = num_tokens * token_width
//       64     8  suffix_offset (64-byte aligned)     72  8  suffix_bytes = num_tokens * index_width
//       80     8  file_bytes: the file's exact size
//       88     8  data_checksum: datastore_hash() of bytes [tokens_offset, file_bytes)
//       96     8  header_checksum: datastore_hash() of bytes [0, 96)
//      104    24  zero
//
// The token array holds token t as the code t + 1 and ends every document with the code 0 (so the
// array ends with 0). With codes compared as unsigned integers, a separator sorts before every
// token, and the suffix array lists every position 0..num_tokens-1 in lexicographic order of the
// code strings that start there; a string that is a prefix of another sorts first. Matches and
// continuations therefore never cross a document boundary.


#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/mapped_file.hpp"

REFDEC_NAMESPACE_BEGIN

// The file stores little-endian integers that the reader uses in place.
static_assert(std::endian::native == std::endian::little, "refdec datastores need a little-endian host");

/// The datastore file's magic bytes.
inline constexpr std::array<char, 8> kDatastoreMagic = {'R', 'E', 'F', 'D', 'E', 'C', 'S', 'A'};
/// The datastore format version this reader and the builder speak.
inline constexpr std::uint32_t kDatastoreVersion = 1;
/// Size of the datastore file header in bytes.
inline constexpr std::uint32_t kDatastoreHeaderBytes = 128;
/// Alignment of the token and suffix array sections.
inline constexpr std::uint64_t kDatastoreAlignment = 64;

/// The fixed-size header at the start of a datastore file (see the format at the top of this file).
struct DatastoreHeader {
  std::array<char, 8> magic = kDatastoreMagic;
  std::uint32_t version = kDatastoreVersion;
  std::uint32_t header_bytes = kDatastoreHeaderBytes;
  std::uint64_t num_tokens = 0;     ///< token array length, separators included
  std::uint64_t num_documents = 0;  ///< documents (= separators)
  std::uint32_t vocab_size = 0;     ///< token ids are in [0, vocab_size)
  std::uint32_t token_width = 0;    ///< bytes per token array entry: 2 or 4
  std::uint32_t index_width = 0;    ///< bytes per suffix array entry: 4 or 8
  std::uint32_t flags = 0;          ///< reserved, 0
  std::uint64_t tokens_offset = 0;
  std::uint64_t tokens_bytes = 0;
  std::uint64_t suffix_offset = 0;
  std::uint64_t suffix_bytes = 0;
  std::uint64_t file_bytes = 0;
  std::uint64_t data_checksum = 0;    ///< datastore_hash of [tokens_offset, file_bytes)
  std::uint64_t header_checksum = 0;  ///< datastore_hash of the header's first 96 bytes
  std::array<std::uint8_t, 24> reserved{};
};
static_assert(sizeof(DatastoreHeader) == kDatastoreHeaderBytes && std::is_trivially_copyable_v<DatastoreHeader>);
static_assert(offsetof(DatastoreHeader, header_checksum) == 96);

/// Token array width for a vocabulary: codes go up to vocab_size, so 2 bytes while that fits.
constexpr std::uint32_t datastore_token_width(std::uint64_t vocab_size) { return vocab_size < 65536 ? 2 : 4; }
/// Suffix array width for a token array length.
constexpr std::uint32_t datastore_index_width(std::uint64_t num_tokens) {
  return num_tokens <= std::numeric_limits<std::uint32_t>::max() ? 4 : 8;
}
/// `x` rounded up to the section alignment.
constexpr std::uint64_t datastore_align(std::uint64_t x) {
  return (x + kDatastoreAlignment - 1) / kDatastoreAlignment * kDatastoreAlignment;
}

/// A 64-bit checksum of `bytes` that reads 8 bytes at a time in four independent lanes (several
/// GB/s). Not cryptographic; any change of a single 8-byte word changes the result.
inline std::uint64_t datastore_hash(std::span<const std::uint8_t> bytes, std::uint64_t seed = 0) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ULL;  // odd, so each lane step is a bijection
  constexpr std::uint64_t kMul2 = 0xC2B2AE3D27D4EB4FULL;
  std::uint64_t lane[4] = {seed ^ 0x243F6A8885A308D3ULL, seed ^ 0x13198A2E03707344ULL, seed ^ 0xA4093822299F31D0ULL,
                           seed ^ 0x082EFA98EC4E6C89ULL};
  const std::uint8_t* p = bytes.data();
  std::size_t n = bytes.size();
  auto load = [](const std::uint8_t* q) {
    std::uint64_t w;
    std::memcpy(&w, q, 8);
    return w;
  };
  auto mix = [](std::uint64_t h, std::uint64_t w) { return std::rotl((h ^ w) * kMul, 31); };
  for (; n >= 32; p += 32, n -= 32) {
    lane[0] = mix(lane[0], load(p));
    lane[1] = mix(lane[1], load(p + 8));
    lane[2] = mix(lane[2], load(p + 16));
    lane[3] = mix(lane[3], load(p + 24));
  }
  for (; n >= 8; p += 8, n -= 8) lane[0] = mix(lane[0], load(p));
  if (n > 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, n);
    lane[1] = mix(lane[1], w ^ (std::uint64_t{n} << 56));
  }
  // Each lane enters the sum through a bijection, so it stays injective in every lane.
  std::uint64_t h = ((lane[0] * kMul2 + lane[1]) * kMul2 + lane[2]) * kMul2 + lane[3];
  h ^= static_cast<std::uint64_t>(bytes.size()) * kMul;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return h;
}

/// Options of Datastore::open.
struct DatastoreOpenOptions {
  /// Recompute the data checksum and range-check every token and suffix array entry (one pass over
  /// the file, several GB/s once it is in the page cache). Turn off for huge files: searches stay
  /// memory-safe without it, but a corrupted file can then give wrong drafts.
  bool verify = true;
  /// Load the whole file and map all of it at open (MAP_POPULATE), so that no query pays for a
  /// page fault; `verify` touches every page anyway. Off: pages are faulted in on first use.
  bool populate = false;
};

/// The suffix array ranks [begin, end) of the suffixes that start with a searched string.
struct SuffixRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const SuffixRange&, const SuffixRange&) = default;
};

/// Settings of Datastore::retrieve (the REST retrieval step).
struct RetrievalOptions {
  std::size_t max_match = 16;          ///< longest context suffix searched (REST's n_max)
  std::size_t continuation = 10;       ///< tokens read after each occurrence (REST's m)
  std::size_t max_nodes = 64;          ///< draft nodes kept (REST's c; also capped by the budget)
  std::size_t max_occurrences = 256;   ///< occurrences read (K); more are sampled evenly by rank
};

/// What Datastore::retrieve found.
struct RetrievalResult {
  std::size_t match_length = 0;  ///< length of the longest context suffix found (0: none)
  SuffixRange range;             ///< its suffix array range
  std::size_t occurrences = 0;   ///< occurrences whose continuations were counted (<= K)
  std::size_t nodes = 0;         ///< draft nodes written
};

/// Scratch memory for Datastore::retrieve, reusable across calls of one thread.
struct RetrievalScratch {
  struct Node {
    Token token;
    std::int32_t count;
    std::int32_t depth;
    std::int32_t parent;
    std::int32_t first_child;
    std::int32_t next_sibling;
  };
  std::vector<Node> nodes;          // [trie nodes] counting trie, node 0 the root, preorder ids
  std::vector<std::int32_t> path;   // [m] trie nodes of the previous continuation
  std::vector<Token> prev;          // [m] the previous continuation
  std::vector<Token> cur;           // [m] the current continuation
  std::vector<std::uint8_t> keep;   // [trie nodes] selected for the draft
  std::vector<std::int32_t> out_id; // [trie nodes] the selected node's index in the output DraftTree
  std::vector<std::uint64_t> positions;  // [K] sampled occurrence positions
};

/// A read-only, memory-mapped suffix-array datastore. All methods are const and it holds no
/// mutable state, so one instance can serve any number of threads and sequences.
class Datastore {
 public:
  /// Maps and validates the datastore file `path`. Throws refdec::Error naming the file and the
  /// bad field for a missing or unreadable file, wrong magic or version, a corrupt or truncated
  /// header, sizes or offsets that do not add up, a checksum mismatch, and (with `verify`) a token
  /// or suffix array entry out of range.
  static Datastore open(const std::filesystem::path& path, DatastoreOpenOptions options = {}) {
    Datastore ds;
    ds.path_ = path;
    ds.map_ = MappedFile(path, options.populate, "datastore");
    ds.validate(options);
    return ds;
  }
  /// open() into a shared pointer, the form drafters hold.
  static std::shared_ptr<const Datastore> open_shared(const std::filesystem::path& path,
                                                      DatastoreOpenOptions options = {}) {
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
  std::pair<std::size_t, SuffixRange> longest_suffix_match(std::span<const Token> context,
                                                           std::size_t max_length) const {
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
  /// stopping at the end of its document. Returns how many were appended.
  std::size_t continuation(std::uint64_t pos, std::size_t max_length, std::vector<Token>& out) const {
    const std::size_t before = out.size();
    for (std::uint64_t p = pos + 1; p < size() && out.size() - before < max_length; ++p) {
      const std::uint32_t c = code(p);
      if (c == 0) break;
      REFDEC_CHECK(c <= header_.vocab_size, "corrupt datastore " << path_ << ": token code " << c << " at position "
                                                                   << p << " exceeds vocab_size " << header_.vocab_size);
      out.push_back(static_cast<Token>(c) - 1);
    }
    return out.size() - before;
  }

  /// The REST retrieval step: finds the longest suffix of `context` (at most `max_match` tokens)
  /// in the datastore, reads the `continuation` tokens after each of up to `max_occurrences` of
  /// its occurrences (evenly sampled by rank when there are more: rank begin + floor(i * n / K)),
  /// counts them in a trie and writes the min(max_nodes, budget) best nodes into `out` (cleared
  /// first) with their counts as scores. Ties between equal counts go to shallower, then
  /// lexicographically smaller paths: the nodes DraftTree::prune keeps after inserting the
  /// continuations in lexicographic order.
  RetrievalResult retrieve(std::span<const Token> context, const RetrievalOptions& options, std::size_t budget,
                           DraftTree& out, RetrievalScratch& scratch) const {
    out.clear();
    RetrievalResult result;
    const auto [len, range] = longest_suffix_match(context, options.max_match);
    result.match_length = len;
    result.range = range;
    REFDEC_CHECK(options.max_occurrences <= (std::size_t{1} << 31),
                 "retrieval: max_occurrences must be at most 2^31, got " << options.max_occurrences);
    const std::size_t keep_nodes = std::min(options.max_nodes, budget);
    if (len == 0 || keep_nodes == 0 || options.continuation == 0 || options.max_occurrences == 0) return result;
    const std::uint64_t n = range.size();
    const std::uint64_t k = std::min<std::uint64_t>(n, options.max_occurrences);
    const std::size_t m = options.continuation;

    // Counting trie. Ranks in a range are sorted by the text after the match, so the sampled
    // continuations arrive in lexicographic order: each shares a prefix with the previous one and
    // adds the rest as new nodes, which gives preorder node ids.
    auto& nodes = scratch.nodes;
    nodes.clear();
    nodes.push_back({-1, 0, 0, -1, -1, -1});
    scratch.path.assign(m + 1, 0);  // path[d]: trie node at depth d of the previous continuation
    scratch.prev.clear();
    // Sampled ranks: floor(i * n / k) without overflow (n = q k + r, and i r < k^2 <= 2^62).
    auto rank_of = [&](std::uint64_t i) { return range.begin + i * (n / k) + i * (n % k) / k; };
    // Occurrences of a frequent match lie all over a large file: each read is a cache (and TLB)
    // miss, so the suffix array entries and then the continuations are prefetched a few ahead.
    constexpr std::uint64_t kAhead = 16;
    auto& positions = scratch.positions;
    positions.resize(k);
    for (std::uint64_t i = 0; i < std::min(k, kAhead); ++i) prefetch(suffix_ + rank_of(i) * header_.index_width);
    for (std::uint64_t i = 0; i < k; ++i) {
      if (i + kAhead < k) prefetch(suffix_ + rank_of(i + kAhead) * header_.index_width);
      positions[i] = checked_suffix(rank_of(i));
    }
    for (std::uint64_t i = 0; i < std::min(k, kAhead); ++i) prefetch(tokens_ + (positions[i] + len) * header_.token_width);
    for (std::uint64_t i = 0; i < k; ++i) {
      if (i + kAhead < k) prefetch(tokens_ + (positions[i + kAhead] + len) * header_.token_width);
      scratch.cur.clear();
      continuation(positions[i] + len - 1, m, scratch.cur);
      if (scratch.cur.empty()) {
        scratch.prev.clear();
        continue;
      }
      ++result.occurrences;
      std::size_t common = 0;
      while (common < scratch.cur.size() && common < scratch.prev.size() && scratch.cur[common] == scratch.prev[common])
        ++common;
      for (std::size_t d = 1; d <= common; ++d) ++nodes[static_cast<std::size_t>(scratch.path[d])].count;
      for (std::size_t d = common + 1; d <= scratch.cur.size(); ++d) {
        const auto id = static_cast<std::int32_t>(nodes.size());
        const std::int32_t parent = scratch.path[d - 1];
        nodes.push_back({scratch.cur[d - 1], 1, static_cast<std::int32_t>(d), parent, -1, -1});
        // Sorted input: a new child is the parent's last; link it through the previous last.
        auto& pn = nodes[static_cast<std::size_t>(parent)];
        if (pn.first_child < 0) {
          pn.first_child = id;
        } else {
          // The previous child of `parent` is the node that was at depth d of the previous path.
          nodes[static_cast<std::size_t>(scratch.path[d])].next_sibling = id;
        }
        scratch.path[d] = id;
      }
      std::swap(scratch.prev, scratch.cur);
    }
    if (nodes.size() == 1) return result;

    // DraftTree's cut rule: count, then shallower, then lower (preorder, so lexicographic) id.
    const std::size_t kept = select_best_first(
        nodes, [&nodes](std::int32_t i) { return nodes[static_cast<std::size_t>(i)].count; }, keep_nodes, scratch.keep);
    // Kept nodes in preorder: a parent is written before its children, siblings in order.
    scratch.out_id.assign(nodes.size(), 0);
    for (std::size_t i = 1; i < nodes.size(); ++i) {
      if (!scratch.keep[i]) continue;
      const std::int32_t id = out.add_child(scratch.out_id[static_cast<std::size_t>(nodes[i].parent)], nodes[i].token);
      out.set_score(id, static_cast<float>(nodes[i].count));
      scratch.out_id[i] = id;
    }
    result.nodes = kept;
    return result;
  }
  /// retrieve() with scratch memory of its own.
  RetrievalResult retrieve(std::span<const Token> context, const RetrievalOptions& options, std::size_t budget,
                           DraftTree& out) const {
    RetrievalScratch scratch;
    return retrieve(context, options, budget, out, scratch);
  }

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
  std::uint64_t raw_suffix(std::uint64_t rank) const {
    return load(suffix_ + rank * header_.index_width, header_.index_width);
  }
  // A suffix array entry, range-checked so that an unverified corrupt file cannot make a search
  // read outside the mapping.
  std::uint64_t checked_suffix(std::uint64_t rank) const {
    const std::uint64_t pos = raw_suffix(rank);
    REFDEC_CHECK(pos < size(), "corrupt datastore " << path_ << ": suffix array entry " << rank << " is " << pos
                                                    << ", out of range [0, " << size() << ")");
    return pos;
  }

  void check_tokens(std::span<const Token> tokens, const char* what) const {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      REFDEC_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size(),
                   what << " token " << tokens[i] << " at index " << i << " is outside the datastore's vocabulary [0, "
                        << vocab_size() << ") of " << path_);
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
          if (compare(checked_suffix(x), pattern) < 0) a = x + 1; else b = x;
        }
        std::uint64_t e = mid + 1, f = hi;  // first non-match in [mid + 1, hi]
        while (e < f) {
          const std::uint64_t x = e + (f - e) / 2;
          if (compare(checked_suffix(x), pattern) == 0) e = x + 1; else f = x;
        }
        return {a, e};
      }
    }
    return {lo, lo};
  }

  void validate(const DatastoreOpenOptions& options) {
    const std::uint64_t file_size = map_.size();
    REFDEC_CHECK(file_size >= kDatastoreHeaderBytes, "datastore " << path_ << " is truncated: " << file_size
                                                                  << " bytes, less than the " << kDatastoreHeaderBytes
                                                                  << "-byte header");
    std::memcpy(&header_, map_.data(), sizeof(header_));
    const DatastoreHeader& h = header_;
    REFDEC_CHECK(h.magic == kDatastoreMagic, "datastore " << path_ << " has the wrong magic (not a refdec datastore)");
    REFDEC_CHECK(h.version == kDatastoreVersion, "datastore " << path_ << " has format version " << h.version
                                                              << "; this reader supports version " << kDatastoreVersion);
    const std::uint64_t hc = datastore_hash(std::span<const std::uint8_t>(map_.data(), offsetof(DatastoreHeader, header_checksum)));
    REFDEC_CHECK(hc == h.header_checksum, "datastore " << path_ << " has a corrupt header: header_checksum is "
                                                       << h.header_checksum << ", the header hashes to " << hc);
    REFDEC_CHECK(h.header_bytes == kDatastoreHeaderBytes, "datastore " << path_ << ": header_bytes is " << h.header_bytes
                                                                       << ", expected " << kDatastoreHeaderBytes);
    REFDEC_CHECK(h.file_bytes == file_size, "datastore " << path_ << " is truncated or padded: file_bytes is "
                                                         << h.file_bytes << " but the file has " << file_size << " bytes");
    REFDEC_CHECK(h.vocab_size >= 1 && h.vocab_size <= static_cast<std::uint32_t>(std::numeric_limits<Token>::max()),
                 "datastore " << path_ << ": vocab_size " << h.vocab_size << " is out of range");
    REFDEC_CHECK(h.token_width == datastore_token_width(h.vocab_size),
                 "datastore " << path_ << ": token_width " << h.token_width << " does not fit vocab_size "
                              << h.vocab_size << " (expected " << datastore_token_width(h.vocab_size) << ")");
    REFDEC_CHECK(h.num_tokens >= 1 && h.num_tokens <= (std::uint64_t{1} << 48),
                 "datastore " << path_ << ": num_tokens " << h.num_tokens << " is out of range [1, 2^48]");
    REFDEC_CHECK(h.index_width == datastore_index_width(h.num_tokens),
                 "datastore " << path_ << ": index_width " << h.index_width << " does not fit num_tokens "
                              << h.num_tokens << " (expected " << datastore_index_width(h.num_tokens) << ")");
    REFDEC_CHECK(h.num_documents >= 1 && h.num_documents <= h.num_tokens,
                 "datastore " << path_ << ": num_documents " << h.num_documents << " is out of range [1, num_tokens "
                              << h.num_tokens << "]");
    REFDEC_CHECK(h.flags == 0, "datastore " << path_ << ": unknown flags " << h.flags);
    const std::uint64_t tokens_bytes = h.num_tokens * h.token_width;
    const std::uint64_t suffix_bytes = h.num_tokens * h.index_width;
    REFDEC_CHECK(h.tokens_bytes == tokens_bytes, "datastore " << path_ << ": tokens_bytes " << h.tokens_bytes
                                                              << " != num_tokens * token_width = " << tokens_bytes);
    REFDEC_CHECK(h.suffix_bytes == suffix_bytes, "datastore " << path_ << ": suffix_bytes " << h.suffix_bytes
                                                              << " != num_tokens * index_width = " << suffix_bytes);
    REFDEC_CHECK(h.tokens_offset == datastore_align(kDatastoreHeaderBytes),
                 "datastore " << path_ << ": tokens_offset " << h.tokens_offset << ", expected "
                              << datastore_align(kDatastoreHeaderBytes));
    REFDEC_CHECK(h.suffix_offset == datastore_align(h.tokens_offset + tokens_bytes),
                 "datastore " << path_ << ": suffix_offset " << h.suffix_offset << ", expected "
                              << datastore_align(h.tokens_offset + tokens_bytes));
    REFDEC_CHECK(h.file_bytes == h.suffix_offset + suffix_bytes,
                 "datastore " << path_ << ": file_bytes " << h.file_bytes << " != suffix_offset + suffix_bytes = "
                              << h.suffix_offset + suffix_bytes);
    tokens_ = map_.data() + h.tokens_offset;
    suffix_ = map_.data() + h.suffix_offset;
    // Searches rely on the final separator to stop comparisons inside the array.
    REFDEC_CHECK(code(h.num_tokens - 1) == 0, "corrupt datastore " << path_ << ": the token array does not end with "
                                                                    << "a document separator");
    if (!options.verify) return;
    const std::uint64_t data_hash = datastore_hash(std::span<const std::uint8_t>(tokens_, file_size - h.tokens_offset));
    REFDEC_CHECK(data_hash == h.data_checksum, "datastore " << path_ << " is corrupt: data_checksum is "
                                                            << h.data_checksum << ", the data hashes to " << data_hash);
    std::uint64_t separators = 0;
    std::uint32_t max_code = 0;
    for (std::uint64_t p = 0; p < h.num_tokens; ++p) {
      const std::uint32_t c = code(p);
      separators += c == 0;
      max_code = std::max(max_code, c);
    }
    REFDEC_CHECK(max_code <= h.vocab_size, "corrupt datastore " << path_ << ": token code " << max_code
                                                                << " exceeds vocab_size " << h.vocab_size);
    REFDEC_CHECK(separators == h.num_documents, "corrupt datastore " << path_ << ": " << separators
                                                                     << " document separators, num_documents is "
                                                                     << h.num_documents);
    for (std::uint64_t r = 0; r < h.num_tokens; ++r) {
      const std::uint64_t pos = raw_suffix(r);
      REFDEC_CHECK(pos < h.num_tokens, "corrupt datastore " << path_ << ": suffix array entry " << r << " is " << pos
                                                            << ", out of range [0, " << h.num_tokens << ")");
    }
  }

  std::filesystem::path path_;
  MappedFile map_;
  DatastoreHeader header_{};
  const std::uint8_t* tokens_ = nullptr;  // [num_tokens] codes, token_width bytes each
  const std::uint8_t* suffix_ = nullptr;  // [num_tokens] positions, index_width bytes each
};

REFDEC_NAMESPACE_END
