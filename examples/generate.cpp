// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-generate: greedy decoding of a Llama model, plain and speculative, compared in one run, as
// a two-row table: the request alone (no references), and the same request with references (the
// files given, else an earlier answer to it: the plain run's output). By default the drafter is
// what docs/engine.md recommends to an engine, the mixture of LLMA, the n-gram trie and the shared
// reference index with the request's own text, and the budget is chosen per step under the step
// cost measured in this run, so that speculation falls back to plain decoding where it does not pay.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "eval/cli.hpp"
#include "eval/data_dir.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/drafters/suffix_decoding.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "refdec/torch/calibrate.hpp"
#include "refdec/torch/dtype.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/hf_loader.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"

namespace fs = std::filesystem;
using namespace refdec;

namespace {

// Whitespace-separated token ids of `what` (the prompt, a reference file), each in [0, vocab).
std::vector<Token> parse_ids(const std::string& text, std::int64_t vocab, const std::string& what) {
  std::vector<Token> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    // Too large for int64_t is out of range too: nothing is truncated (it used to be, modulo 2^32).
    const std::size_t sign = word[0] == '-' || word[0] == '+' ? 1 : 0;
    const bool digits = word.size() > sign && word.find_first_not_of("0123456789", sign) == std::string::npos;
    REFDEC_CHECK(digits, what << ": not a token id: '" << word << "'");
    std::int64_t value = -1;
    const bool fits = cli::parse_integer(word, value);
    REFDEC_CHECK(fits && value >= 0 && value < vocab, what << ": token id " << word << " at index " << ids.size()
                                                           << " is out of range [0, " << vocab << ")");
    ids.push_back(static_cast<Token>(value));
  }
  return ids;
}

const std::vector<std::string> kDrafters = {"mixture", "none",      "llma",  "prompt-lookup", "ngram-trie",
                                            "rest",    "lookahead", "index", "suffix-decoding"};

// One row of the table: a request decoded speculatively, against plain decoding of it.
struct Row {
  std::string request;
  GenerateResult spec;
  double spec_seconds = 0;  // median of the repeats
  bool identical = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"refdec-generate: greedy decoding, plain and speculative, of a request alone and with references"};
  std::string model_path, tokenizer_path, prompt, prompt_ids, drafter = "mixture", dtype = "fp32", device = "cpu", linear = "auto";
  std::string data_dir, datastore_path;
  std::vector<std::string> reference_files;
  bool from_first_run = false, json = false, self_reference = true, fixed_budget = false;
  std::size_t n = 1, k = 16, m = 1;
  std::int64_t budget = 32, max_new_tokens = 256, max_context = 0, repeats = 3;
  std::uint64_t seed = 1;
  app.add_option("--model", model_path, "llama2.c checkpoint file or Hugging Face model directory "
                                        "(default: stories260K from the data directory, else a random model)");
  app.add_option("--tokenizer", tokenizer_path, "llama2.c tokenizer file (default: tok512.bin beside a llama2.c model)");
  app.add_option("--data-dir", data_dir, "data directory holding models/stories260K (default: $REFDEC_DATA_DIR or ../shared)");
  app.add_option("--prompt", prompt, "prompt text (needs a tokenizer); BOS is prepended");
  app.add_option("--prompt-ids", prompt_ids, "prompt as space-separated token ids (default: BOS)");
  app.add_option("--reference", reference_files,
                 "reference file of the second row: text (with a tokenizer) or token ids; repeatable (default: the plain run's "
                 "output, an earlier answer to the same request)");
  app.add_flag("--reference-from-first-run", from_first_run, "the second row's references also hold the plain run's output");
  app.add_option("--drafter", drafter, "mixture (LLMA, the n-gram trie, the shared reference index, and REST with --datastore), none, "
                                       "llma, prompt-lookup, ngram-trie, rest, lookahead, index or suffix-decoding")
      ->check(CLI::IsMember(kDrafters))
      ->capture_default_str();
  app.add_option("--datastore", datastore_path, "REST datastore (refdec-datastore build): the rest drafter's, and a source of the mixture")
      ->check(CLI::ExistingFile);
  app.add_option("-n", n, "LLMA: shortest suffix match that triggers a copy")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("-k", k, "LLMA: tokens copied per span")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("-m", m, "LLMA: spans proposed as a tree")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_flag("--self-reference,!--no-self-reference", self_reference,
               "LLMA: also copy from the prompt and output so far (default on)");
  auto* budget_opt = app.add_option("--budget", budget,
                                    "draft tokens verified per step at most (default 32; --drafter llma: k * m); 0 = plain decoding")
                         ->transform(cli::integer_in(0, cli::kMaxBudget));
  app.add_flag("--fixed-budget", fixed_budget,
               "verify up to --budget draft tokens every step (default: the budget is chosen per step under the step cost "
               "measured at the start of the run, and may be 0)");
  app.add_option("--max-new-tokens", max_new_tokens, "tokens to generate at most")
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--max-context", max_context, "prompt + output at most (default, 0: the model's context)")
      ->transform(cli::integer_in(0, cli::kMaxTokens));
  app.add_option("--repeats", repeats, "timed runs of each decoding (the median is reported)")->transform(cli::integer_in(1, 100));
  app.add_option("--dtype", dtype, "fp32, fp64, fp16 or bf16");
  app.add_option("--linear", linear, std::string("linear layers: ") + linear_kernels_help())
      ->capture_default_str();
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--seed", seed, "seed of the random model used when no checkpoint is found")
      ->transform(cli::integer_in(0, std::numeric_limits<std::int64_t>::max()));
  app.add_flag("--json", json, "print one JSON object with every figure instead of the table");
  CLI11_PARSE(app, argc, argv);

  try {
    const at::Device dev(device);
    REFDEC_CHECK(!dev.is_cuda() || at::hasCUDA(), "--device cuda, but this libtorch sees no CUDA device");
    const auto dt = parse_dtype(dtype);
    const LinearKernel kernel = parse_linear_kernel(linear);
    if (data_dir.empty()) data_dir = data_dir_or(REFDEC_DEFAULT_DATA_DIR);
    const fs::path stories = fs::path(data_dir) / "models/stories260K/stories260K.bin";
    if (model_path.empty() && fs::exists(stories)) model_path = stories.string();
    REFDEC_CHECK(drafter != "rest" || !datastore_path.empty(), "--drafter rest needs --datastore");
    // k, m <= kMaxSpan: their product cannot overflow, but may exceed the budget bound.
    if (drafter == "llma" && budget_opt->count() == 0) {
      const auto default_budget = static_cast<std::int64_t>(k * m);
      REFDEC_CHECK(default_budget <= cli::kMaxBudget, "the default budget k * m = " << k << " * " << m << " = " << default_budget
                                                                                   << " exceeds " << cli::kMaxBudget << ": give --budget");
      budget = default_budget;
    }

    // The model.
    std::optional<LlamaModel> model;
    std::string model_name;
    bool llama2c = false;
    if (model_path.empty()) {
      LlamaConfig c;
      // The shape of stories260K.
      c.dim = 64;
      c.hidden_dim = 172;
      c.n_layers = 5;
      c.n_heads = 8;
      c.n_kv_heads = 4;
      c.vocab_size = 512;
      c.max_seq_len = 512;
      model.emplace(LlamaModel::random(c, seed, dt, dev, kernel));
      model_name = "random (seed " + std::to_string(seed) + ")";
    } else if (fs::is_directory(model_path)) {
      model.emplace(load_hf_llama(model_path, dt, dev, kernel));
      model_name = model_path;
    } else {
      model.emplace(load_llama2c(model_path, dt, dev, kernel));
      model_name = model_path;
      llama2c = true;
    }
    std::optional<Llama2cTokenizer> tokenizer;
    if (tokenizer_path.empty() && llama2c) {
      const auto beside = fs::path(model_path).parent_path() / "tok512.bin";
      if (fs::exists(beside)) tokenizer_path = beside.string();
    }
    if (!tokenizer_path.empty()) tokenizer.emplace(Llama2cTokenizer::load(tokenizer_path, static_cast<std::int32_t>(model->vocab_size())));

    // Prompt and references.
    Request request;
    REFDEC_CHECK(prompt.empty() || prompt_ids.empty(), "give --prompt or --prompt-ids, not both");
    if (!prompt.empty()) {
      REFDEC_CHECK(tokenizer.has_value(), "--prompt needs a tokenizer (--tokenizer); use --prompt-ids otherwise");
      request.prompt = tokenizer->encode(prompt, true, false);
    } else if (!prompt_ids.empty()) {
      request.prompt = parse_ids(prompt_ids, model->vocab_size(), "--prompt-ids");
    } else {
      request.prompt = {static_cast<Token>(model->config().bos_id)};
    }
    std::vector<std::vector<Token>> references;
    for (const auto& file : reference_files) {
      const std::string text = refdec::read_file_bytes(file, "reference file");  // regular files only, never blocks
      references.push_back(tokenizer ? tokenizer->encode(text, false, false) : parse_ids(text, model->vocab_size(), "reference " + file));
    }
    const auto datastore = datastore_path.empty() ? nullptr : Datastore::open_shared(datastore_path);

    GenerateOptions options;
    options.max_new_tokens = max_new_tokens;
    options.max_context = max_context;
    options.budget = budget;
    options.stop_tokens = {static_cast<Token>(model->config().eos_id)};
    if (llama2c) options.stop_tokens.push_back(static_cast<Token>(model->config().bos_id));  // as llama2.c's run
    // The step cost of this model on this machine, now: a step of n tokens against one of one.
    std::vector<std::pair<std::size_t, double>> cost_samples;
    if (!fixed_budget && budget > 0 && drafter != "none") {
      std::vector<std::size_t> sizes;
      for (std::size_t s = 1; s <= static_cast<std::size_t>(budget) + 1; s *= 2) sizes.push_back(s);
      if (sizes.back() != static_cast<std::size_t>(budget) + 1) sizes.push_back(static_cast<std::size_t>(budget) + 1);
      cost_samples = measure_step_cost(*model, {.tokens = sizes, .context = static_cast<std::int64_t>(request.prompt.size()) + max_new_tokens / 2,
                                                .repeats = 5});
      options.step_cost = StepCost::calibrated(cost_samples);
    }
    // Each row's drafter is new: nothing one row learned (the shared index's documents included)
    // helps the other.
    const auto make_drafter = [&]() -> AnyDrafter {
      if (drafter == "none") return AnyDrafter{};
      if (drafter == "llma") return AnyDrafter(LlmaDrafter({.n = n, .k = k, .m = m, .self_reference = self_reference}));
      if (drafter == "prompt-lookup") return AnyDrafter(PromptLookupDrafter{});
      if (drafter == "ngram-trie") return AnyDrafter(NgramTrieDrafter());
      if (drafter == "rest") return AnyDrafter(RestDrafter(datastore));
      if (drafter == "lookahead") return AnyDrafter(LookaheadDrafter());
      if (drafter == "suffix-decoding") return AnyDrafter(SuffixDecodingDrafter(std::make_shared<SuffixDecodingCache>()));
      if (drafter == "index") return AnyDrafter(IndexDrafter(std::make_shared<ReferenceIndex>()));
      std::vector<AnyDrafter> sources;
      sources.emplace_back(LlmaDrafter({.n = n, .k = k, .m = m, .self_reference = self_reference}));
      sources.emplace_back(NgramTrieDrafter());
      for (auto& d : index_sources(std::make_shared<ReferenceIndex>())) sources.emplace_back(std::move(d));
      if (datastore != nullptr) sources.emplace_back(RestDrafter(datastore));
      return AnyDrafter(MixtureDrafter(std::move(sources)));
    };

    // Warm up allocators and caches so that the timed runs compare fairly.
    GenerateOptions warm = options;
    warm.max_new_tokens = std::min<std::int64_t>(8, max_new_tokens);
    warm.step_cost.reset();
    generate(*model, Request{request.prompt, {}}, AnyDrafter{}, warm);

    // Plain decoding, timed in turn with the speculative runs (a drift of the machine's speed then
    // falls on both alike); each figure is the median of the repeats.
    GenerateOptions plain_options = options;
    plain_options.budget = 0;
    plain_options.step_cost.reset();
    const Request alone{request.prompt, {}};
    GenerateResult plain;
    std::vector<double> plain_times;
    std::vector<Row> rows(2);
    rows[0].request = "no references";
    rows[1].request = !references.empty() ? std::to_string(references.size()) + " reference file" + (references.size() > 1 ? "s" : "")
                                          : "an earlier answer as reference";
    std::vector<std::vector<double>> spec_times(rows.size());
    for (std::int64_t r = 0; r < repeats; ++r) {
      plain = generate(*model, alone, AnyDrafter{}, plain_options);
      plain_times.push_back(plain.stats.total_seconds);
      Request with = request;
      with.references = references;
      if (references.empty() || from_first_run) with.references.push_back(plain.tokens[0]);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        rows[i].spec = generate(*model, i == 0 ? alone : with, make_drafter(), options);
        spec_times[i].push_back(rows[i].spec.stats.total_seconds);
      }
    }
    const double plain_seconds = median(plain_times);
    bool identical = true;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i].spec_seconds = median(spec_times[i]);
      rows[i].identical = rows[i].spec.tokens[0] == plain.tokens[0];
      identical = identical && rows[i].identical;
    }
    const auto speedup = [&](const Row& row) { return row.spec_seconds > 0 ? plain_seconds / row.spec_seconds : 0.0; };
    const std::string text = tokenizer ? tokenizer->decode(plain.tokens[0]) : std::string{};
    const char* bench_hint =
        "the real-size picture, a 1.1B-parameter model in bf16: ./build/bench/refdec-speed-bench --shape 1b "
        "(about 15 minutes on 2 cores; docs/speed.md)";

    if (json) {
      nlohmann::json j;
      j["model"] = model_name;
      j["drafter"] = drafter;
      j["budget"] = budget;
      j["adaptive_budget"] = !cost_samples.empty();
      j["step_cost"] = cost_samples;
      j["linear_kernel"] = linear_kernel_name(model->linear_kernel());
      j["linear_path"] = model->linear_path();
      j["prompt_tokens"] = request.prompt.size();
      j["repeats"] = repeats;
      j["plain_seconds"] = plain_seconds;
      j["plain_seconds_each"] = plain_times;
      j["identical_to_plain"] = identical;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const GenerateStats& st = rows[i].spec.stats;
        nlohmann::json row;
        row["request"] = rows[i].request;
        row["tokens"] = st.tokens;
        row["steps"] = st.steps;
        row["tokens_per_step"] = st.tokens_per_step();
        row["identical_to_plain"] = rows[i].identical;
        row["speedup"] = speedup(rows[i]);
        row["speculative_seconds"] = rows[i].spec_seconds;
        row["speculative_seconds_each"] = spec_times[i];
        row["seconds"] = {{"draft", st.draft_seconds}, {"plan", st.verify.plan}, {"model", st.verify.model},
                          {"accept", st.verify.accept}, {"kv_commit", st.verify.commit}};
        std::vector<double> by_position;
        for (std::size_t d = 0; d < st.drafting.proposed_at_depth.size(); ++d) by_position.push_back(st.drafting.acceptance_at(d));
        row["acceptance_by_position"] = by_position;
        row["proposed_tokens"] = st.drafting.proposed_tokens;
        row["accepted_tokens"] = st.drafting.accepted_tokens;
        j["rows"].push_back(row);
      }
      j["output_ids"] = plain.tokens[0];
      if (tokenizer) j["text"] = text;
      j["see_also"] = bench_hint;
      std::cout << j.dump(2) << "\n";
    } else {
      if (tokenizer) {
        std::cout << text << "\n\n";
      } else {
        for (const Token t : plain.tokens[0]) std::cout << t << ' ';
        std::cout << "\n\n";
      }
      std::cout << "model " << model_name << " (" << model->linear_path() << "), " << plain.tokens[0].size() << " tokens per run, drafter "
                << drafter << ", ";
      if (cost_samples.empty()) {
        std::cout << "up to " << budget << " draft tokens per step\n";
      } else {
        std::cout << std::fixed << std::setprecision(2) << "budget chosen per step (up to " << budget << ") under the step cost measured now: "
                  << 1e3 * cost_samples.front().second << " ms for 1 token, " << 1e3 * cost_samples.back().second << " ms for "
                  << cost_samples.back().first << "\n";
      }
      std::cout << std::fixed << std::setprecision(2) << "\n| request | tokens/step | speculative ms | plain ms | speedup | identical to plain |\n"
                << "|---|---|---|---|---|---|\n";
      for (const Row& row : rows)
        std::cout << "| " << row.request << " | " << row.spec.stats.tokens_per_step() << " | " << 1e3 * row.spec_seconds << " | "
                  << 1e3 * plain_seconds << " | " << speedup(row) << "x | " << (row.identical ? "yes" : "NO") << " |\n";
      std::cout << "\n(median of " << repeats << " runs each, plain and speculative in turn)\n";
      if (speedup(rows[0]) < 1.0)
        std::cout << "Without references a model this small gains nothing: its steps cost about a millisecond, mostly fixed "
                     "overhead per operation, so drafting and larger steps cost as much as the steps they save.\n";
      std::cout << bench_hint << "\n";
    }
    return identical ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "refdec-generate: " << describe(e) << "\n";  // no libtorch stack trace
    return 1;
  }
}
