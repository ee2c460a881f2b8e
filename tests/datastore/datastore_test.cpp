// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The datastore file: its suffix array against a brute-force sort, search against a scan, and
// clear errors (never crashes) for every kind of bad input.

#include "refdec/datastore/reader.hpp"
#include "refdec/datastore/retrieval.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/expect_error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "refdec/datastore/builder.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;
using Tokens = std::vector<Token>;
using refdec_test::TempDir;

// Random documents: some empty, lengths 0..max_len, tokens drawn from a small alphabet so that
// repeats (and long shared prefixes) are common even for large vocabularies.
std::vector<Tokens> random_corpus(std::mt19937& rng, std::int32_t vocab, std::size_t num_docs, std::size_t max_len) {
  std::vector<Token> alphabet;
  for (int i = 0; i < 6; ++i) alphabet.push_back(static_cast<Token>(rng() % static_cast<std::uint32_t>(vocab)));
  alphabet.push_back(vocab - 1);
  alphabet.push_back(0);
  std::vector<Tokens> docs(num_docs);
  for (auto& d : docs) {
    if (rng() % 5 == 0) continue;  // empty document
    d.resize(rng() % (max_len + 1));
    for (auto& t : d) t = alphabet[rng() % alphabet.size()];
  }
  if (std::all_of(docs.begin(), docs.end(), [](const Tokens& d) { return d.empty(); })) docs[0].push_back(alphabet[0]);
  return docs;
}

// The array the file stores: token + 1, and 0 after every document.
std::vector<std::uint32_t> codes_of(const std::vector<Tokens>& docs) {
  std::vector<std::uint32_t> codes;
  for (const auto& d : docs) {
    for (const Token t : d) codes.push_back(static_cast<std::uint32_t>(t) + 1);
    codes.push_back(0);
  }
  return codes;
}

// Every position, sorted by the code string that starts there (a prefix sorts first).
std::vector<std::uint64_t> brute_suffix_array(const std::vector<std::uint32_t>& codes) {
  std::vector<std::uint64_t> sa(codes.size());
  std::iota(sa.begin(), sa.end(), 0);
  std::sort(sa.begin(), sa.end(), [&](std::uint64_t a, std::uint64_t b) {
    return std::lexicographical_compare(codes.begin() + static_cast<std::ptrdiff_t>(a), codes.end(),
                                        codes.begin() + static_cast<std::ptrdiff_t>(b), codes.end());
  });
  return sa;
}

// Positions where `pattern` occurs (inside one document).
std::vector<std::uint64_t> brute_find(const std::vector<std::uint32_t>& codes, const Tokens& pattern) {
  std::vector<std::uint64_t> out;
  for (std::size_t p = 0; p + pattern.size() <= codes.size(); ++p) {
    bool ok = true;
    for (std::size_t i = 0; i < pattern.size() && ok; ++i) ok = codes[p + i] == static_cast<std::uint32_t>(pattern[i]) + 1;
    if (ok) out.push_back(p);
  }
  return out;
}

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::filesystem::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
DatastoreHeader header_of(const std::vector<std::uint8_t>& bytes) {
  DatastoreHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}
// Writes `h` into `bytes` with fresh checksums, so that only the field under test is wrong.
void put_header(std::vector<std::uint8_t>& bytes, DatastoreHeader h, bool rehash_data) {
  if (rehash_data && bytes.size() >= h.tokens_offset)
    h.data_checksum = datastore_hash(std::span<const std::uint8_t>(bytes.data() + h.tokens_offset, bytes.size() - h.tokens_offset));
  h.header_checksum = datastore_hash(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(&h), offsetof(DatastoreHeader, header_checksum)));
  std::memcpy(bytes.data(), &h, sizeof(h));
}

class DatastoreVocab : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(DatastoreVocab, SuffixArrayEqualsBruteForceSort) {
  const std::int32_t vocab = GetParam();
  TempDir dir;
  std::mt19937 rng(static_cast<std::uint32_t>(vocab));
  for (int trial = 0; trial < 8; ++trial) {
    const auto docs = random_corpus(rng, vocab, 1 + rng() % 7, 1 + rng() % 60);
    const auto file = dir / ("ds" + std::to_string(trial));
    const auto stats = build_datastore(docs, vocab, file);
    const Datastore ds = Datastore::open(file);
    const auto codes = codes_of(docs);
    ASSERT_EQ(ds.size(), codes.size());
    EXPECT_EQ(ds.num_documents(), docs.size());
    EXPECT_EQ(stats.num_documents, docs.size());
    EXPECT_EQ(stats.num_tokens, codes.size() - docs.size());
    EXPECT_EQ(ds.header().token_width, vocab < 65536 ? 2u : 4u);
    EXPECT_EQ(ds.header().index_width, 4u);
    for (std::uint64_t p = 0; p < codes.size(); ++p) ASSERT_EQ(ds.token(p), static_cast<Token>(codes[p]) - 1);
    const auto sa = brute_suffix_array(codes);
    for (std::uint64_t r = 0; r < sa.size(); ++r) ASSERT_EQ(ds.suffix(r), sa[r]) << "rank " << r << " trial " << trial;
  }
}

TEST_P(DatastoreVocab, FindAgreesWithScan) {
  const std::int32_t vocab = GetParam();
  TempDir dir;
  std::mt19937 rng(static_cast<std::uint32_t>(vocab) + 7);
  const auto docs = random_corpus(rng, vocab, 5, 200);
  build_datastore(docs, vocab, dir / "ds");
  const Datastore ds = Datastore::open(dir / "ds");
  const auto codes = codes_of(docs);
  for (int q = 0; q < 300; ++q) {
    Tokens pattern;
    const std::size_t len = 1 + rng() % 6;
    if (q % 2 == 0) {  // taken from the corpus (it may cross a separator: then it must not match)
      const std::size_t start = rng() % codes.size();
      for (std::size_t i = start; i < std::min(codes.size(), start + len); ++i)
        pattern.push_back(codes[i] == 0 ? 0 : static_cast<Token>(codes[i]) - 1);
    } else {
      for (std::size_t i = 0; i < len; ++i) pattern.push_back(static_cast<Token>(rng() % static_cast<std::uint32_t>(vocab)));
    }
    auto want = brute_find(codes, pattern);
    const SuffixRange r = ds.find(pattern);
    ASSERT_EQ(r.size(), want.size());
    std::vector<std::uint64_t> got;
    for (std::uint64_t k = r.begin; k < r.end; ++k) got.push_back(ds.suffix(k));
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
  }
  EXPECT_EQ(ds.find(Tokens{}).size(), ds.size());  // the empty pattern matches every suffix
}

INSTANTIATE_TEST_SUITE_P(Vocab, DatastoreVocab, ::testing::Values(3, 111, 40000, 70000));

TEST(Datastore, ContinuationStopsAtDocumentEnd) {
  TempDir dir;
  const std::vector<Tokens> docs = {{5, 6, 7}, {5, 6, 8, 9}, {}};
  build_datastore(docs, 10, dir / "ds");
  const Datastore ds = Datastore::open(dir / "ds");
  EXPECT_EQ(ds.find(Tokens{5, 6}).size(), 2u);
  EXPECT_EQ(ds.find(Tokens{7, 5}).size(), 0u);  // would cross the boundary
  Tokens out;
  EXPECT_EQ(ds.continuation(1, 10, out), 1u);
  EXPECT_EQ(out, (Tokens{7}));
  out.clear();
  EXPECT_EQ(ds.continuation(5, 1, out), 1u);
  EXPECT_EQ(out, (Tokens{8}));
  EXPECT_EQ(ds.num_corpus_tokens(), 7u);
}

TEST(Datastore, ContinuationPastTheEndIsEmpty) {
  TempDir dir;
  build_datastore(std::vector<Tokens>{{5, 6, 7}}, 10, dir / "ds");
  const Datastore ds = Datastore::open(dir / "ds");
  Tokens out;
  // UINT64_MAX + 1 used to wrap to position 0 and read the first document.
  EXPECT_EQ(ds.continuation(std::numeric_limits<std::uint64_t>::max(), 10, out), 0u);
  EXPECT_EQ(ds.continuation(ds.size(), 10, out), 0u);
  EXPECT_EQ(ds.continuation(ds.size() - 1, 10, out), 0u);
  EXPECT_TRUE(out.empty());
}

TEST(Retrieval, RejectsOptionsAboveTheirBounds) {
  TempDir dir;
  build_datastore(std::vector<Tokens>{{1, 2, 3, 1, 2, 4}}, 5, dir / "ds");
  const Datastore ds = Datastore::open(dir / "ds");
  DraftTree tree;
  const Tokens context = {1, 2};
  const auto max = std::numeric_limits<std::size_t>::max();
  // continuation = SIZE_MAX used to wrap the trie path buffer (assign(m + 1)) and crash.
  refdec_test::expect_error([&] { retrieve(ds, context, RetrievalOptions{.continuation = max}, 64, tree); },
                            "continuation must be at most 1024");
  refdec_test::expect_error([&] { retrieve(ds, context, RetrievalOptions{.continuation = 1025}, 64, tree); },
                            "got 1025");
  refdec_test::expect_error([&] { retrieve(ds, context, RetrievalOptions{.max_match = max}, 64, tree); },
                            "max_match must be at most 1024");
  refdec_test::expect_error([&] { retrieve(ds, context, RetrievalOptions{.max_nodes = 65537}, 64, tree); },
                            "max_nodes must be at most 65536");
  const auto res = retrieve(ds, context, RetrievalOptions{.max_match = 1024, .continuation = 1024}, 64, tree);
  EXPECT_EQ(res.match_length, 2u);
  EXPECT_EQ(tree.size(), 5u);  // 3 1 2 4 and 4: whole continuations, to the document end
}

TEST(Datastore, QueriesLongerThanTheDatastore) {
  TempDir dir;
  build_datastore(std::vector<Tokens>{{1, 2}}, 4, dir / "ds");
  const Datastore ds = Datastore::open(dir / "ds");
  const Tokens long_query = {3, 3, 3, 3, 1, 2, 1, 2, 1, 2, 1, 2};
  EXPECT_TRUE(ds.find(long_query).empty());
  const auto [len, range] = ds.longest_suffix_match(long_query, 16);
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(range.size(), 1u);
  DraftTree tree;
  const auto res = retrieve(ds, long_query, RetrievalOptions{}, 64, tree);
  EXPECT_EQ(res.match_length, 2u);
  EXPECT_TRUE(tree.empty());  // the match ends its document: nothing follows
}

TEST(Datastore, ChecksumDetectsEveryWordChange) {
  std::vector<std::uint8_t> bytes(1000);
  std::mt19937 rng(3);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  const auto h0 = datastore_hash(bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] ^= 0x10;
    EXPECT_NE(datastore_hash(bytes), h0) << i;
    bytes[i] ^= 0x10;
  }
  EXPECT_NE(datastore_hash(std::span<const std::uint8_t>(bytes.data(), 999)), h0);
}

TEST(Datastore, ConcurrentRetrievalIsConsistent) {
  TempDir dir;
  std::mt19937 rng(11);
  const auto docs = random_corpus(rng, 50, 20, 500);
  build_datastore(docs, 50, dir / "ds");
  const auto ds = Datastore::open_shared(dir / "ds");
  std::vector<Tokens> queries;
  for (int q = 0; q < 200; ++q) {
    Tokens t;
    for (int i = 0; i < 8; ++i) t.push_back(static_cast<Token>(rng() % 50));
    queries.push_back(t);
  }
  auto run = [&](std::vector<std::string>& out) {
    RetrievalScratch scratch;
    DraftTree tree;
    for (const auto& q : queries) {
      retrieve(*ds, q, RetrievalOptions{}, 64, tree, scratch);
      out.push_back(to_string(tree.linearize(0, 64)));
    }
  };
  std::vector<std::string> a, b, c;
  std::thread t1([&] { run(a); });
  std::thread t2([&] { run(b); });
  t1.join();
  t2.join();
  run(c);
  EXPECT_EQ(a, c);
  EXPECT_EQ(b, c);
}

// --- bad input ---

class BadDatastore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    docs_ = random_corpus(rng, 111, 4, 100);
    build_datastore(docs_, 111, file_);
    bytes_ = read_bytes(file_);
    header_ = header_of(bytes_);
  }
  std::filesystem::path write(const std::vector<std::uint8_t>& bytes) {
    write_bytes(bad_, bytes);
    return bad_;
  }
  TempDir dir_;
  std::filesystem::path file_ = dir_ / "good.ds";
  std::filesystem::path bad_ = dir_ / "bad.ds";
  std::vector<Tokens> docs_;
  std::vector<std::uint8_t> bytes_;
  DatastoreHeader header_;
};

TEST_F(BadDatastore, GoodFileOpens) {
  const Datastore ds = Datastore::open(file_);
  EXPECT_EQ(ds.vocab_size(), 111);
  EXPECT_EQ(ds.header().file_bytes, bytes_.size());
  EXPECT_FALSE(std::filesystem::exists(file_.string() + ".tmp"));
  // Unverified and prefaulted: the same answers.
  const Datastore fast = Datastore::open(file_, DatastoreOpenOptions{.verify = false, .populate = true});
  for (Token t = 0; t < 111; ++t) EXPECT_EQ(fast.find(Tokens{t}), ds.find(Tokens{t}));
}

TEST_F(BadDatastore, MissingFile) {
  refdec_test::expect_error([&] { Datastore::open(dir_ / "nope.ds"); }, "cannot open datastore");
  EXPECT_THROW(Datastore::open(dir_ / "nope.ds"), IoError);
}

TEST_F(BadDatastore, NotARegularFile) { refdec_test::expect_error([&] { Datastore::open(dir_.path()); }, "not a regular file"); }

TEST_F(BadDatastore, WrongMagic) {
  auto b = bytes_;
  b[0] = 'X';
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "wrong magic");
  EXPECT_THROW(Datastore::open(write(b)), IoError);  // a bad file, not a bad argument
}

TEST_F(BadDatastore, WrongVersion) {
  auto b = bytes_;
  auto h = header_;
  h.version = 2;
  put_header(b, h, false);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "format version 2");
}

TEST_F(BadDatastore, CorruptHeader) {
  auto b = bytes_;
  b[offsetof(DatastoreHeader, num_tokens)] ^= 1;
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "corrupt header");
}

TEST_F(BadDatastore, SizesThatDoNotAddUp) {
  auto b = bytes_;
  auto h = header_;
  h.tokens_bytes += 2;
  put_header(b, h, false);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "tokens_bytes");
  h = header_;
  h.token_width = 4;
  put_header(b, h, false);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "token_width 4");
  h = header_;
  h.num_documents = h.num_tokens + 1;
  put_header(b, h, false);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "num_documents");
}

TEST_F(BadDatastore, TruncatedFile) {
  auto b = bytes_;
  b.resize(b.size() - 4);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "truncated");
  b.resize(40);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "truncated");
  b.clear();
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "truncated");
}

TEST_F(BadDatastore, FlippedDataByte) {
  auto b = bytes_;
  b[header_.tokens_offset + 3] ^= 0x04;
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "data_checksum");
  b = bytes_;
  b[b.size() - 1] ^= 0x80;  // last suffix array byte
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "data_checksum");
}

TEST_F(BadDatastore, SuffixArrayEntryOutOfRange) {
  auto b = bytes_;
  const std::uint32_t huge = 0xFFFFFFF0u;
  std::memcpy(b.data() + header_.suffix_offset + 4 * 5, &huge, 4);
  put_header(b, header_, true);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "suffix array entry 5");
  // Without verification (and without the sampled order check, which range-checks the entries it
  // samples) the file opens, and reading the entry is still an error, not a crash.
  refdec_test::expect_error([&] { Datastore::open(write(b), DatastoreOpenOptions{.verify = false}); },
                            "suffix array entry 5");
  const Datastore ds = Datastore::open(write(b), DatastoreOpenOptions{.verify = false, .order_samples = 0});
  refdec_test::expect_error([&] { (void)ds.suffix(5); }, "suffix array entry 5");
  refdec_test::expect_error(
      [&] {
        for (Token t = 0; t < 111; ++t) (void)ds.find(Tokens{t});  // some search probes rank 5
        for (std::uint64_t r = 0; r < ds.size(); ++r) (void)ds.suffix(r);
      },
      "suffix array entry 5");
}

// Swaps suffix array entries `i` and `j` (index width 4) and rewrites the checksums the way the
// builder does, so that only the order is wrong.
std::vector<std::uint8_t> swap_suffixes(std::vector<std::uint8_t> b, const DatastoreHeader& h, std::uint64_t i,
                                        std::uint64_t j) {
  EXPECT_EQ(h.index_width, 4u);
  std::uint32_t x, y;
  std::memcpy(&x, b.data() + h.suffix_offset + 4 * i, 4);
  std::memcpy(&y, b.data() + h.suffix_offset + 4 * j, 4);
  std::memcpy(b.data() + h.suffix_offset + 4 * i, &y, 4);
  std::memcpy(b.data() + h.suffix_offset + 4 * j, &x, 4);
  put_header(b, h, true);
  return b;
}

// A valid checksum over a suffix array that is out of order would silently match nothing: the
// order is checked at open, even without `verify`.
TEST_F(BadDatastore, ShuffledSuffixArrayWithValidChecksumIsRejected) {
  const auto n = header_.num_tokens;
  const auto swapped = swap_suffixes(bytes_, header_, 3, n - 4);
  refdec_test::expect_error([&] { Datastore::open(write(swapped)); }, "suffix array is not sorted");
  refdec_test::expect_error([&] { Datastore::open(write(swapped), DatastoreOpenOptions{.verify = false}); },
                            "suffix array is not sorted");
  refdec_test::expect_error([&] { Datastore::open(write(swapped), DatastoreOpenOptions{.verify_order = true}); },
                            "suffix array is not sorted");
  // A position given twice (the checksum again valid).
  auto twice = bytes_;
  std::memcpy(twice.data() + header_.suffix_offset + 4 * 10, twice.data() + header_.suffix_offset + 4 * 40, 4);
  put_header(twice, header_, true);
  refdec_test::expect_error([&] { Datastore::open(write(twice), DatastoreOpenOptions{.verify_order = true}); },
                            "corrupt datastore");
  // The good file passes every check.
  EXPECT_NO_THROW(Datastore::open(file_, DatastoreOpenOptions{.verify_order = true}));
}

// A datastore larger than the sample: a shuffled array is caught by the sampled check; one swapped
// pair that the sample can miss is caught by the full check.
TEST(DatastoreOrder, SampledCheckCatchesAShuffleAndTheFullCheckASingleSwap) {
  TempDir dir;
  std::mt19937 rng(5);
  const auto docs = random_corpus(rng, 300, 60, 400);
  const auto path = dir / "big.ds";
  build_datastore(docs, 300, path);
  const auto good = read_bytes(path);
  const DatastoreHeader h = header_of(good);
  ASSERT_GT(h.num_tokens, 4 * 1024u);
  ASSERT_EQ(h.index_width, 4u);
  // Shuffle the whole suffix array.
  auto shuffled = good;
  std::vector<std::uint32_t> sa(h.num_tokens);
  std::memcpy(sa.data(), shuffled.data() + h.suffix_offset, 4 * sa.size());
  std::shuffle(sa.begin(), sa.end(), rng);
  std::memcpy(shuffled.data() + h.suffix_offset, sa.data(), 4 * sa.size());
  put_header(shuffled, h, true);
  write_bytes(dir / "shuffled.ds", shuffled);
  refdec_test::expect_error([&] { Datastore::open(dir / "shuffled.ds"); }, "suffix array is not sorted");
  // One swap of two distant entries: the full check always finds it.
  write_bytes(dir / "swapped.ds", swap_suffixes(good, h, 100, h.num_tokens - 100));
  refdec_test::expect_error([&] { Datastore::open(dir / "swapped.ds", DatastoreOpenOptions{.verify_order = true}); },
                            "suffix array is not sorted");
  EXPECT_NO_THROW(Datastore::open(path, DatastoreOpenOptions{.verify_order = true}));
}

TEST_F(BadDatastore, TokenCodeOutOfRange) {
  auto b = bytes_;
  const std::uint16_t bad = 500;
  std::memcpy(b.data() + header_.tokens_offset, &bad, 2);
  put_header(b, header_, true);
  refdec_test::expect_error([&] { Datastore::open(write(b)); }, "exceeds vocab_size");
}

TEST_F(BadDatastore, MissingFinalSeparator) {
  auto b = bytes_;
  const std::uint16_t one = 1;
  std::memcpy(b.data() + header_.tokens_offset + 2 * (header_.num_tokens - 1), &one, 2);
  put_header(b, header_, true);
  refdec_test::expect_error([&] { Datastore::open(write(b), DatastoreOpenOptions{.verify = false}); }, "separator");
}

TEST_F(BadDatastore, OutOfVocabularyQuery) {
  const Datastore ds = Datastore::open(file_);
  refdec_test::expect_error([&] { ds.find(Tokens{1, 111}); }, "token 111 at index 1");
  refdec_test::expect_error([&] { ds.find(Tokens{-1}); }, "token -1");
  DraftTree tree;
  refdec_test::expect_error([&] { retrieve(ds, Tokens{3, 200}, RetrievalOptions{}, 64, tree); }, "token 200");
  EXPECT_THROW(ds.find(Tokens{-1}), ArgumentError);  // a bad argument, not a bad file
}

TEST(DatastoreBuild, EmptyCorpus) {
  TempDir dir;
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{}, 10, dir / "ds"); }, "empty corpus");
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{}, {}}, 10, dir / "ds"); }, "empty corpus (2 documents");
  EXPECT_FALSE(std::filesystem::exists(dir / "ds"));
}

TEST(DatastoreBuild, OutOfVocabularyToken) {
  TempDir dir;
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{1, 2}, {3, 4, 10}}, 10, dir / "ds"); },
               "token 10 of document 1 at position 2");
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{-3}}, 10, dir / "ds"); }, "token -3 of document 0 at position 0");
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{0}}, 0, dir / "ds"); }, "vocab_size must be at least 1");
}

TEST(DatastoreBuild, UnwritablePath) {
  TempDir dir;
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{1}}, 10, dir / "no" / "such" / "dir.ds"); }, "cannot create");
  EXPECT_THROW(build_datastore(std::vector<Tokens>{{1}}, 10, dir / "no" / "such" / "dir.ds"), IoError);
  EXPECT_THROW(build_datastore(std::vector<Tokens>{}, 10, dir / "ds"), ArgumentError);
}

// The files in `dir` other than `keep` (temporaries left behind).
std::vector<std::string> stray_files(const std::filesystem::path& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (std::find(keep.begin(), keep.end(), e.path().filename().string()) == keep.end())
      names.push_back(e.path().filename().string());
  return names;
}

TEST(DatastoreBuild, RefusesToOverwriteAnInput) {
  TempDir dir;
  const auto input = dir / "corpus.txt";
  write_bytes(input, {'1', ' ', '2', '\n'});
  const auto before = read_bytes(input);
  DatastoreBuildOptions opt;
  opt.inputs = {input};
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{1, 2}}, 10, input, opt); },
                            "same file as the input");
  std::filesystem::create_symlink(input, dir / "link.ds");
  EXPECT_THROW(build_datastore(std::vector<Tokens>{{1, 2}}, 10, dir / "link.ds", opt), IoError);
  EXPECT_EQ(read_bytes(input), before);
  EXPECT_TRUE(stray_files(dir.path(), {"corpus.txt", "link.ds"}).empty());
}

TEST(DatastoreBuild, RefusesToReplaceANonRegularFile) {
  TempDir dir;
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{1}}, 10, "/dev/null"); }, "not a regular file");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  ASSERT_EQ(::mkfifo((dir / "pipe.ds").c_str(), 0600), 0);
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{1}}, 10, dir / "pipe.ds"); }, "not a regular file");
  refdec_test::expect_error([&] { build_datastore(std::vector<Tokens>{{1}}, 10, dir.path()); }, "is a directory");
  // A FIFO given as a datastore to open is rejected at once instead of blocking.
  refdec_test::expect_error([&] { Datastore::open(dir / "pipe.ds"); }, "not a regular file");
}

// Builds of one path running at once never mix: each writes its own temporary, so the file is
// always one whole datastore; a killed build's leftover (old or new naming) does not get in the way.
TEST(DatastoreBuild, ConcurrentBuildsOfOnePathNeverMix) {
  TempDir dir;
  const auto path = dir / "shared.ds";
  std::filesystem::create_directory(dir / "shared.ds.tmp");  // a leftover the old fixed name would trip on
  std::mt19937 rng(21);
  const std::vector<std::vector<Tokens>> corpora = {random_corpus(rng, 50, 40, 300), random_corpus(rng, 70, 30, 200)};
  for (int round = 0; round < 4; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] { build_datastore(corpora[static_cast<std::size_t>(t % 2)], t % 2 ? 70 : 50, path); });
    for (auto& t : threads) t.join();
    const Datastore ds = Datastore::open(path, DatastoreOpenOptions{.verify = true, .verify_order = true});
    EXPECT_TRUE(ds.vocab_size() == 50 || ds.vocab_size() == 70);
  }
  EXPECT_TRUE(stray_files(dir.path(), {"shared.ds", "shared.ds.tmp"}).empty());
}

TEST(DatastoreBuild, ReportsProgress) {
  TempDir dir;
  std::vector<std::string> stages;
  std::uint64_t last_total = 0;
  DatastoreBuildOptions opt;
  opt.progress = [&](std::string_view stage, std::uint64_t, std::uint64_t total) {
    if (stages.empty() || stages.back() != stage) stages.emplace_back(stage);
    last_total = total;
  };
  const auto stats = build_datastore(std::vector<Tokens>{{1, 2, 3}, {4}}, 10, dir / "ds", opt);
  EXPECT_EQ(stages, (std::vector<std::string>{"encode", "sort", "write", "checksum"}));
  EXPECT_EQ(last_total, 6u);
  EXPECT_EQ(stats.num_tokens, 4u);
  EXPECT_GT(stats.tokens_per_second(), 0.0);
}

}  // namespace
