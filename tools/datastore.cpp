// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-datastore: builds REST datastores from text, JSONL or token files, prints their header
// and queries them (longest suffix match, occurrences, draft tree).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "eval/cli.hpp"
#include "eval/data_dir.hpp"
#include "eval/datasets.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/datastore/retrieval.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/text/sentencepiece_tokenizer.hpp"

namespace {

using namespace refdec;
namespace fs = std::filesystem;
using Tokens = std::vector<Token>;
using json = nlohmann::json;

fs::path default_tokenizer() { return data_dir_or(REFDEC_DEFAULT_DATA_DIR) / "tokenizers" / "llama2.model"; }

std::string read_file(const fs::path& path) {
  return read_file_bytes(path, "input");  // regular files only, never blocks
}

// One step of a JSON field path: a key, every element ("[*]") or one element ("[N]").
struct PathStep {
  std::string key;  // empty for an array step
  bool all = false;
  std::size_t index = 0;
};

// Parses "choices[*].turns[*]" into steps.
std::vector<PathStep> parse_field_path(const std::string& path) {
  std::vector<PathStep> steps;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      continue;
    }
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      REFDEC_CHECK(close != std::string::npos, "field path \"" << path << "\": unclosed '['");
      const std::string inner = path.substr(i + 1, close - i - 1);
      PathStep s;
      if (inner == "*") {
        s.all = true;
      } else {
        const auto [stop, ec] = std::from_chars(inner.data(), inner.data() + inner.size(), s.index);
        REFDEC_CHECK(!inner.empty() && ec == std::errc{} && stop == inner.data() + inner.size(),
                     "field path \"" << path << "\": bad index [" << inner << "] (expected * or an index below 2^64)");
      }
      steps.push_back(s);
      i = close + 1;
      continue;
    }
    const std::size_t end = path.find_first_of(".[", i);
    steps.push_back(PathStep{path.substr(i, end == std::string::npos ? std::string::npos : end - i), false, 0});
    i = end == std::string::npos ? path.size() : end;
  }
  REFDEC_CHECK(!steps.empty(), "empty field path");
  return steps;
}

// Every string under the node that `steps` lead to from `root`, in document order. Iterative
// (an explicit stack): a JSONL row nested a million levels deep must not overflow the call stack.
void collect_strings(const json& root, const std::vector<PathStep>& steps, std::vector<std::string>& out) {
  std::vector<std::pair<const json*, std::size_t>> stack{{&root, 0}};  // [pending] node, path step
  while (!stack.empty()) {
    const auto [j, at] = stack.back();
    stack.pop_back();
    if (at == steps.size()) {
      if (j->is_string()) {
        out.push_back(j->get<std::string>());
      } else if (j->is_array() || j->is_object()) {
        for (auto it = j->rbegin(); it != j->rend(); ++it) stack.emplace_back(&*it, at);  // reversed: popped in order
      }
      continue;
    }
    const PathStep& s = steps[at];
    if (!s.key.empty()) {
      if (j->is_object()) {
        const auto it = j->find(s.key);
        if (it != j->end()) stack.emplace_back(&*it, at + 1);
      }
    } else if (j->is_array()) {
      if (s.all) {
        for (auto it = j->rbegin(); it != j->rend(); ++it) stack.emplace_back(&*it, at + 1);
      } else if (s.index < j->size()) {
        stack.emplace_back(&(*j)[s.index], at + 1);
      }
    }
  }
}

struct BuildArgs {
  fs::path output;
  std::vector<fs::path> inputs;
  std::string tokens;  // "", "ids" or "int32"
  std::int32_t vocab_size = 0;
  fs::path tokenizer;
  std::vector<std::string> fields = {"text", "choices[*].turns[*]"};
  bool quiet = false;
};

// Token files: "ids" has one document per line of whitespace-separated ids; "int32" is raw
// little-endian int32 with -1 ending a document (a file's tail is a document too).
void read_token_file(const fs::path& path, const std::string& format, std::vector<Tokens>& docs) {
  const std::string data = read_file(path);
  if (format == "ids") {
    std::istringstream lines(data);
    std::string line;
    std::size_t line_no = 0;
    while (std::getline(lines, line)) {
      ++line_no;
      std::istringstream ids(line);
      Tokens d;
      long long v;
      while (ids >> v) {
        REFDEC_CHECK(v >= 0 && v <= 0x7fffffffLL, "token id " << v << " in " << path << " line " << line_no
                                                               << " is out of range");
        d.push_back(static_cast<Token>(v));
      }
      REFDEC_CHECK(ids.eof(), "bad token id in " << path << " line " << line_no << " (expected integers)");
      if (!d.empty()) docs.push_back(std::move(d));
    }
    return;
  }
  REFDEC_CHECK(format == "int32", "--tokens must be ids or int32, got " << format);
  REFDEC_CHECK_IO(data.size() % 4 == 0, "int32 token file " << path << " has " << data.size()
                                                             << " bytes, not a multiple of 4");
  Tokens d;
  for (std::size_t i = 0; i < data.size(); i += 4) {
    std::int32_t v;
    std::memcpy(&v, data.data() + i, 4);
    if (v == -1) {
      docs.push_back(std::move(d));
      d = Tokens{};
      continue;
    }
    d.push_back(v);
  }
  if (!d.empty()) docs.push_back(std::move(d));
}

int run_build(const BuildArgs& a) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<Tokens> docs;
  std::int32_t vocab = a.vocab_size;
  // The output is never one of the inputs nor a device: checked now, before a long tokenisation,
  // and again by the builder when it writes.
  std::vector<fs::path> inputs(a.inputs.begin(), a.inputs.end());
  if (a.tokens.empty()) inputs.push_back(a.tokenizer.empty() ? default_tokenizer() : a.tokenizer);
  check_output_path(a.output, "datastore", inputs);
  if (!a.tokens.empty()) {
    REFDEC_CHECK(vocab > 0, "--tokens needs --vocab-size");
    for (const auto& in : a.inputs) read_token_file(in, a.tokens, docs);
  } else {
    const fs::path tok_path = a.tokenizer.empty() ? default_tokenizer() : a.tokenizer;
    const auto tokenizer = SentencePieceTokenizer::load(tok_path);
    if (vocab == 0) vocab = tokenizer.vocab_size();
    REFDEC_CHECK(vocab == tokenizer.vocab_size(), "--vocab-size " << vocab << " differs from the tokenizer's "
                                                                  << tokenizer.vocab_size());
    std::vector<std::vector<PathStep>> fields;
    for (const auto& f : a.fields) fields.push_back(parse_field_path(f));
    std::size_t done = 0;
    for (const auto& in : a.inputs) {
      if (in.extension() == ".jsonl") {
        for (const json& j : read_jsonl(in)) {
          std::vector<std::string> texts;
          for (const auto& f : fields) collect_strings(j, f, texts);
          for (const auto& t : texts) docs.push_back(tokenizer.encode(t));
        }
      } else {
        docs.push_back(tokenizer.encode(read_file(in)));
      }
      ++done;
      if (!a.quiet) std::fprintf(stderr, "\rtokenised %zu/%zu files", done, a.inputs.size());
    }
    if (!a.quiet) std::fprintf(stderr, "\n");
  }
  const double read_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  DatastoreBuildOptions opt;
  opt.inputs = inputs;
  if (!a.quiet)
    opt.progress = [](std::string_view stage, std::uint64_t done, std::uint64_t total) {
      std::fprintf(stderr, "\r%-8.*s %12llu / %llu tokens", static_cast<int>(stage.size()), stage.data(),
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
      if (done == total) std::fprintf(stderr, "\n");
    };
  const auto st = build_datastore(docs, vocab, a.output, opt);
  std::printf("built %s: %llu tokens, %llu documents, vocab %d, %llu bytes\n", a.output.c_str(),
              static_cast<unsigned long long>(st.num_tokens), static_cast<unsigned long long>(st.num_documents), vocab,
              static_cast<unsigned long long>(st.file_bytes));
  std::printf("read+tokenise %.2f s; build %.2f s (sort %.2f s), %.0f tokens/s; total %.2f s\n", read_seconds,
              st.seconds, st.sort_seconds, st.tokens_per_second(), read_seconds + st.seconds);
  return 0;
}

int run_stats(const fs::path& file, bool verify, bool verify_order, bool as_json) {
  DatastoreOpenOptions options;
  options.verify = verify;
  options.verify_order = verify_order;
  const auto ds = Datastore::open(file, options);
  const auto& h = ds.header();
  json j = {{"file", file.string()},
            {"version", h.version},
            {"num_tokens", ds.num_corpus_tokens()},
            {"array_length", h.num_tokens},
            {"num_documents", h.num_documents},
            {"vocab_size", h.vocab_size},
            {"token_width", h.token_width},
            {"index_width", h.index_width},
            {"tokens_offset", h.tokens_offset},
            {"suffix_offset", h.suffix_offset},
            {"file_bytes", h.file_bytes},
            {"data_checksum", h.data_checksum},
            {"verified", verify},
            {"order_verified", verify_order ? "all" : "sampled"}};
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& [k, v] : j.items()) std::printf("%-14s %s\n", k.c_str(), v.dump().c_str());
  }
  return 0;
}

struct QueryArgs {
  fs::path file;
  std::string ids;
  std::optional<std::string> text;
  fs::path tokenizer;
  RestOptions rest;
  std::size_t budget = 64;
  bool json_out = false;
  bool verify = true;
};

int run_query(const QueryArgs& a) {
  const auto ds = Datastore::open(a.file, DatastoreOpenOptions{a.verify});
  Tokens context;
  std::optional<SentencePieceTokenizer> tokenizer;
  if (a.text) {
    tokenizer = SentencePieceTokenizer::load(a.tokenizer.empty() ? default_tokenizer() : a.tokenizer);
    context = tokenizer->encode(*a.text);
  } else {
    std::istringstream in(a.ids);
    long long v;
    while (in >> v) {
      REFDEC_CHECK(v >= -0x80000000LL && v <= 0x7fffffffLL, "token id " << v << " is out of range");
      context.push_back(static_cast<Token>(v));
    }
    REFDEC_CHECK(in.eof(), "--ids must be whitespace-separated integers, got \"" << a.ids << "\"");
  }
  REFDEC_CHECK(!context.empty(), "the query is empty: give --ids or --text");
  DraftTree tree;
  const RetrievalOptions r{a.rest.max_match, a.rest.continuation, a.rest.max_nodes, a.rest.max_occurrences};
  const auto t0 = std::chrono::steady_clock::now();
  const auto res = retrieve(ds, context, r, a.budget, tree);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  const LinearTree lt = tree.linearize(context.back(), a.budget);
  if (a.json_out) {
    json nodes = json::array();
    for (std::int32_t i = 1; i < lt.size(); ++i) {
      const auto u = static_cast<std::size_t>(i);
      json n = {{"token", lt.tokens[u]}, {"parent", lt.parent[u]}, {"depth", lt.depth[u]}, {"count", lt.score[u]}};
      if (tokenizer) n["piece"] = tokenizer->decode(Tokens{lt.tokens[u]});
      nodes.push_back(n);
    }
    json j = {{"context", context},       {"match_length", res.match_length}, {"occurrences", res.range.size()},
              {"sampled", res.occurrences}, {"nodes", nodes},                 {"micros", us}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("context %zu tokens; longest suffix match %zu tokens, %llu occurrences, %zu continuations counted; "
              "%d draft nodes; %.1f us\n",
              context.size(), res.match_length, static_cast<unsigned long long>(res.range.size()), res.occurrences,
              lt.num_drafts(), us);
  std::printf("%s", to_string(lt).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Builds, inspects and queries REST suffix-array datastores"};
  app.require_subcommand(1);

  BuildArgs b;
  auto* build = app.add_subcommand("build", "build a datastore from text, JSONL or token files");
  build->add_option("-o,--output", b.output, "datastore file to write")->required();
  build->add_option("inputs", b.inputs,
                    "input files: plain text (one document per file), .jsonl (one document per string found "
                    "under --field), or token files with --tokens")
      ->required()
      ->check(CLI::ExistingFile);
  build->add_option("--tokens", b.tokens,
                    "inputs are token files: 'ids' (whitespace-separated ids, one document per line) or 'int32' "
                    "(little-endian int32, -1 ends a document)")
      ->check(CLI::IsMember({"ids", "int32"}));
  build->add_option("--vocab-size", b.vocab_size, "vocabulary size (required with --tokens; default: the tokenizer's)")
      ->transform(cli::integer_in(1, std::numeric_limits<std::int32_t>::max()));
  build->add_option("--tokenizer", b.tokenizer,
                    "SentencePiece model (default $REFDEC_DATA_DIR/tokenizers/llama2.model, else the build's data dir)");
  build->add_option("--field", b.fields, "JSONL field path, repeatable, e.g. text or choices[*].turns[*]")
      ->capture_default_str();
  build->add_flag("-q,--quiet", b.quiet, "no progress on stderr");

  fs::path stats_file;
  bool no_verify = false, stats_verify_order = false, stats_json = false;
  auto* stats = app.add_subcommand("stats", "print a datastore's header");
  stats->add_option("file", stats_file, "datastore file")->required();
  stats->add_flag("--no-verify", no_verify, "skip the checksum and range checks");
  stats->add_flag("--verify-order", stats_verify_order,
                  "check the order of the whole suffix array, not only a sample (slower on repetitive corpora)");
  stats->add_flag("--json", stats_json, "print JSON");

  QueryArgs q;
  std::string text;
  auto* query = app.add_subcommand("query", "retrieve the REST draft tree for a context");
  query->add_option("file", q.file, "datastore file")->required();
  auto* ids_opt = query->add_option("--ids", q.ids, "context token ids, e.g. \"1 2 3\"");
  auto* text_opt = query->add_option("--text", text, "context text (tokenised with --tokenizer)");
  ids_opt->excludes(text_opt);
  query->add_option("--tokenizer", q.tokenizer, "SentencePiece model for --text");
  query->add_option("--rest-max-match", q.rest.max_match, "longest context suffix searched (REST's n_max)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalMatch));
  query->add_option("--rest-continuation", q.rest.continuation, "tokens read after each occurrence (REST's m)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalContinuation));
  query->add_option("--rest-max-nodes", q.rest.max_nodes, "draft nodes kept (REST's c)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalNodes));
  query->add_option("--rest-max-occurrences", q.rest.max_occurrences, "occurrences read (K)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalOccurrences));
  query->add_option("--budget", q.budget, "draft node budget")->capture_default_str()
      ->transform(cli::integer_in(0, cli::kMaxBudget));
  query->add_flag("--json", q.json_out, "print JSON");
  bool query_no_verify = false;
  query->add_flag("--no-verify", query_no_verify, "skip the checksum and range checks at open (huge files)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*build) return run_build(b);
    if (*stats) return run_stats(stats_file, !no_verify, stats_verify_order, stats_json);
    if (*text_opt) q.text = text;
    q.verify = !query_no_verify;
    REFDEC_CHECK(*ids_opt || *text_opt, "query needs --ids or --text");
    return run_query(q);
  } catch (const std::exception& e) {
    std::cerr << "refdec-datastore: " << e.what() << "\n";
    return 1;
  }
}
