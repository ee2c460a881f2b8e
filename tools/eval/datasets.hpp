// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Replay traces from real LLM outputs: Spec-Bench (Vicuna-7B greedy answers, multi-turn Vicuna
// v1.1 prompts), LLMA's RAG set, and a generic JSONL form. Needs nlohmann-json and refdec::text.

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "eval/json_brief.hpp"
#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"
#include "eval/replay.hpp"
#include "refdec/text/sentencepiece_tokenizer.hpp"

REFDEC_NAMESPACE_BEGIN

/// One row of a JSONL file and its line number (from 1).
struct JsonlRow {
  std::size_t line = 0;
  nlohmann::json value;
};

/// Every row of a JSONL file with its line number (blank lines skipped); a bad row is a
/// refdec::IoError naming the file and line. Only regular files are read (a FIFO is rejected at
/// once, see open_input_file).
inline std::vector<JsonlRow> read_jsonl_rows(const std::filesystem::path& path) {
  std::istringstream in(read_file_bytes(path, "JSONL file"));
  std::vector<JsonlRow> rows;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      rows.push_back({number, nlohmann::json::parse(line)});
    } catch (const nlohmann::json::exception& e) {
      REFDEC_CHECK_IO(false, path << ":" << number << ": invalid JSON: " << e.what());
    }
  }
  return rows;
}

/// Every row of a JSONL file (blank lines skipped); see read_jsonl_rows.
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> rows;
  for (auto& row : read_jsonl_rows(path)) rows.push_back(std::move(row.value));
  return rows;
}

/// The tokenizer of load_generic_traces<NoTokenizer>(): none, for files of token ids read where
/// SentencePiece cannot be loaded (next to libtorch, whose protobuf clashes with it at load time).
struct NoTokenizer {
  std::vector<Token> encode(const std::string&) const { throw Error("no tokenizer to encode text"); }
  std::int64_t vocab_size() const { return std::int64_t{1} << 31; }
};

namespace detail {
// A field that holds text or token ids: text is encoded, ids are checked against the vocabulary.
template <class Tokenizer>
std::vector<Token> tokens_of(const nlohmann::json& v, const Tokenizer* tokenizer, const std::string& where) {
  if (v.is_string()) {
    REFDEC_CHECK(tokenizer != nullptr, where << ": text given but no tokenizer");
    return tokenizer->encode(v.get<std::string>());
  }
  REFDEC_CHECK_IO(v.is_array(), where << ": expected text or an array of token ids");
  std::vector<Token> ids;
  ids.reserve(v.size());
  for (const auto& x : v) {
    REFDEC_CHECK_IO(x.is_number_integer(), where << ": token ids must be integers, got " << refdec_eval::json_brief(x));
    const auto id = x.get<std::int64_t>();
    const std::int64_t vocab = tokenizer != nullptr ? tokenizer->vocab_size() : std::int64_t{1} << 31;
    REFDEC_CHECK_IO(id >= 0 && id < vocab, where << ": token id " << id << " is outside the vocabulary of " << vocab);
    ids.push_back(static_cast<Token>(id));
  }
  return ids;
}
}  // namespace detail

/// The Vicuna v1.1 system prompt that Spec-Bench uses for Vicuna-7B-v1.3.
inline constexpr const char* kVicunaSystem =
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions.";

/// Spec-Bench: one trace per question turn. `questions` is question.jsonl, `answers` a model's
/// answers (`choices[0].turns`). The context of turn i is the Vicuna v1.1 conversation up to its
/// question (earlier answers included), the output is answer i; each encoded on its own.
inline std::vector<Trace> load_specbench(const std::filesystem::path& questions, const std::filesystem::path& answers,
                                         const SentencePieceTokenizer& tokenizer) {
  std::map<std::int64_t, nlohmann::json> answer_of;
  for (auto& row : read_jsonl(answers)) {
    REFDEC_CHECK_IO(row.contains("question_id") && row.contains("choices"), answers << ": a row lacks question_id or choices");
    const auto id = row["question_id"].get<std::int64_t>();  // read before the move below
    answer_of[id] = std::move(row);
  }
  std::vector<Trace> traces;
  for (const auto& q : read_jsonl(questions)) {
    const auto id = q.at("question_id").get<std::int64_t>();
    const auto it = answer_of.find(id);
    REFDEC_CHECK_IO(it != answer_of.end(), answers << " has no answer to question " << id);
    const auto& turns = q.at("turns");
    const auto& answer_turns = it->second.at("choices").at(0).at("turns");
    REFDEC_CHECK_IO(answer_turns.size() >= turns.size(), "question " << id << ": " << answer_turns.size()
                                                                    << " answer turns for " << turns.size() << " questions");
    std::string conv = kVicunaSystem;
    for (std::size_t i = 0; i < turns.size(); ++i) {
      const std::string prompt = conv + " USER: " + turns[i].get<std::string>() + " ASSISTANT:";
      const std::string answer = answer_turns[i].get<std::string>();
      Trace t;
      t.id = std::to_string(id) + "/" + std::to_string(i);
      t.category = q.value("category", "");
      t.context = tokenizer.encode(prompt);
      t.output = tokenizer.encode(answer);
      traces.push_back(std::move(t));
      conv = prompt + " " + answer + "</s>";
    }
  }
  return traces;
}

/// LLMA's RAG set (rag.jsonl): context = the paper's template over the query and its 10
/// documents, references = the documents, output = text-davinci-003's answer. Category "rag".
inline std::vector<Trace> load_llma_rag(const std::filesystem::path& path, const SentencePieceTokenizer& tokenizer) {
  std::vector<Trace> traces;
  std::size_t row_number = 0;
  for (const auto& row : read_jsonl(path)) {
    std::string prompt = "docs:\n";
    Trace t;
    const auto& docs = row.at("docs");
    for (std::size_t i = 0; i < docs.size(); ++i) {
      const std::string doc = docs[i].get<std::string>();
      prompt += (i > 0 ? "\n" : "") + doc;
      t.references.push_back(tokenizer.encode(doc));
    }
    prompt += "\nquery: " + row.at("query").get<std::string>() + "\nanswer:";
    t.id = std::to_string(row_number++);
    t.category = "rag";
    t.context = tokenizer.encode(prompt);
    t.output = tokenizer.encode(row.at("result").at("text").get<std::string>());
    traces.push_back(std::move(t));
  }
  return traces;
}

/// The generic form: JSONL rows `{"context", "output", "references"?, "category"?, "id"?}` whose
/// texts are strings (encoded with `tokenizer`) or arrays of token ids (checked against its
/// vocabulary when there is one). `tokenizer` may be null when every field holds ids; with
/// Tokenizer = NoTokenizer the program need not link SentencePiece.
template <class Tokenizer = SentencePieceTokenizer>
std::vector<Trace> load_generic_traces(const std::filesystem::path& path, const std::type_identity_t<Tokenizer>* tokenizer) {
  std::vector<Trace> traces;
  std::size_t row_number = 0;
  for (const auto& [line, row] : read_jsonl_rows(path)) {
    ++row_number;
    const std::string where = path.string() + ":" + std::to_string(line);  // file:line, as compilers do
    REFDEC_CHECK_IO(row.is_object() && row.contains("context") && row.contains("output"),
                    where << ": needs \"context\" and \"output\"");
    Trace t;
    if (row.contains("id"))
      REFDEC_CHECK_IO(row["id"].is_string() || row["id"].is_number(), where << ": \"id\" must be a string or a number, got "
                                                                             << refdec_eval::json_brief(row["id"]));
    t.id = row.contains("id") ? row["id"].dump() : std::to_string(row_number);
    if (const auto c = row.find("category"); c != row.end() && !c->is_null()) {
      REFDEC_CHECK_IO(c->is_string(), where << ": \"category\" must be a string, got " << refdec_eval::json_brief(*c));
      t.category = c->template get<std::string>();
    }
    t.context = detail::tokens_of(row["context"], tokenizer, where + " context");
    t.output = detail::tokens_of(row["output"], tokenizer, where + " output");
    REFDEC_CHECK_IO(!t.context.empty(), where << ": empty context");
    if (row.contains("references")) {
      REFDEC_CHECK_IO(row["references"].is_array(), where << ": \"references\" must be an array, got "
                                                          << refdec_eval::json_brief(row["references"]));
    }
    if (row.contains("references"))
      for (const auto& r : row["references"]) t.references.push_back(detail::tokens_of(r, tokenizer, where + " reference"));
    traces.push_back(std::move(t));
  }
  return traces;
}

REFDEC_NAMESPACE_END
