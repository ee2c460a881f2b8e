// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The datastore file format: a token corpus and its suffix array in one file, written by
// refdec/datastore/builder.hpp and read by refdec/datastore/reader.hpp. This header holds the
// header struct, the layout rules and the checksum that both sides share.
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

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

#include "refdec/core/config.hpp"

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

REFDEC_NAMESPACE_END
