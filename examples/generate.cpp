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
  std::vector<double> seconds;  // each repeat's
  double spec_seconds = 0;      // their median
  bool identical = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The command line.
struct Options {
  std::string model_path, tokenizer_path, prompt, prompt_ids, drafter = "mixture", dtype = "fp32", device = "cpu", linear = "auto";
  std::string data_dir, datastore_path;
  std::vector<std::string> reference_files;
  bool from_first_run = false, json = false, fixed_budget = false;
  LlmaOptions llma;
  std::int64_t budget = 32, max_new_tokens = 256, max_context = 0, repeats = 3;
  std::uint64_t seed = 1;
  CLI::Option* budget_option = nullptr;  // whether --budget was given
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--model", o.model_path, "llama2.c checkpoint file or Hugging Face model directory "
                                          "(default: stories260K from the data directory, else a random model)");
  app.add_option("--tokenizer", o.tokenizer_path, "llama2.c tokenizer file (default: tok512.bin beside a llama2.c model)");
  app.add_option("--data-dir", o.data_dir, "data directory holding models/stories260K (default: $REFDEC_DATA_DIR or ../shared)");
  app.add_option("--prompt", o.prompt, "prompt text (needs a tokenizer); BOS is prepended");
  app.add_option("--prompt-ids", o.prompt_ids, "prompt as space-separated token ids (default: BOS)");
  app.add_option("--reference", o.reference_files,
                 "reference file of the second row: text (with a tokenizer) or token ids; repeatable (default: the plain run's "
                 "output, an earlier answer to the same request)");
  app.add_flag("--reference-from-first-run", o.from_first_run, "the second row's references also hold the plain run's output");
  app.add_option("--drafter", o.drafter, "mixture (LLMA, the n-gram trie, the shared reference index, and REST with --datastore), none, "
                                         "llma, prompt-lookup, ngram-trie, rest, lookahead, index or suffix-decoding")
      ->check(CLI::IsMember(kDrafters))
      ->capture_default_str();
  app.add_option("--datastore", o.datastore_path, "REST datastore (refdec-datastore build): the rest drafter's, and a source of the mixture")
      ->check(CLI::ExistingFile);
  app.add_option("--llma-min-match", o.llma.min_match, "LLMA: shortest suffix match that triggers a copy (LLMA's n)")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--llma-continuation", o.llma.continuation, "LLMA: tokens copied per span (LLMA's k)")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--llma-spans", o.llma.spans, "LLMA: spans proposed as a tree")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_flag("--self-reference,!--no-self-reference", o.llma.self_reference,
               "LLMA: also copy from the prompt and output so far (default on)");
  o.budget_option = app.add_option("--budget", o.budget,
                                   "draft tokens verified per step at most (default 32; --drafter llma: k * m); 0 = plain decoding")
                        ->transform(cli::integer_in(0, cli::kMaxBudget));
  app.add_flag("--fixed-budget", o.fixed_budget,
               "verify up to --budget draft tokens every step (default: the budget is chosen per step under the step cost "
               "measured at the start of the run, and may be 0)");
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate at most")
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--max-context", o.max_context, "prompt + output at most (default, 0: the model's context)")
      ->transform(cli::integer_in(0, cli::kMaxTokens));
  app.add_option("--repeats", o.repeats, "timed runs of each decoding (the median is reported)")->transform(cli::integer_in(1, 100));
  app.add_option("--dtype", o.dtype, "fp32, fp64, fp16 or bf16");
  app.add_option("--linear", o.linear, std::string("linear layers: ") + linear_kernels_help())
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu or cuda");
  app.add_option("--seed", o.seed, "seed of the random model used when no checkpoint is found")
      ->transform(cli::integer_in(0, std::numeric_limits<std::int64_t>::max()));
  app.add_flag("--json", o.json, "print one JSON object with every figure instead of the table");
}

// The options' checks and the defaults that depend on others (the data directory, LLMA's budget).
void settle(Options& o) {
  if (o.data_dir.empty()) o.data_dir = data_dir_or(REFDEC_DEFAULT_DATA_DIR);
  const fs::path stories = fs::path(o.data_dir) / "models/stories260K/stories260K.bin";
  if (o.model_path.empty() && fs::exists(stories)) o.model_path = stories.string();
  REFDEC_CHECK(o.drafter != "rest" || !o.datastore_path.empty(), "--drafter rest needs --datastore");
  // k, m <= kMaxSpan: their product cannot overflow, but may exceed the budget bound.
  if (o.drafter == "llma" && o.budget_option->count() == 0) {
    const auto default_budget = static_cast<std::int64_t>(o.llma.continuation * o.llma.spans);
    REFDEC_CHECK(default_budget <= cli::kMaxBudget, "the default budget continuation * spans = " << o.llma.continuation << " * " << o.llma.spans << " = " << default_budget
                                                                                 << " exceeds " << cli::kMaxBudget << ": give --budget");
    o.budget = default_budget;
  }
  REFDEC_CHECK(o.prompt.empty() || o.prompt_ids.empty(), "give --prompt or --prompt-ids, not both");
}

// The model (a checkpoint, a Hugging Face directory, or stories260K's shape at random) and its
// tokenizer where one is found.
struct Loaded {
  std::optional<LlamaModel> model;
  std::string name;
  bool llama2c = false;
  std::optional<Llama2cTokenizer> tokenizer;
};

Loaded load(Options& o) {
  const at::Device dev(o.device);
  REFDEC_CHECK(!dev.is_cuda() || at::hasCUDA(), "--device cuda, but this libtorch sees no CUDA device");
  const auto dt = parse_dtype(o.dtype);
  const LinearKernel kernel = parse_linear_kernel(o.linear);
  Loaded l;
  if (o.model_path.empty()) {
    const LlamaConfig c{.dim = 64, .hidden_dim = 172, .n_layers = 5, .n_heads = 8, .n_kv_heads = 4, .vocab_size = 512, .max_seq_len = 512};
    l.model.emplace(LlamaModel::random(c, o.seed, dt, dev, kernel));
    l.name = "random (seed " + std::to_string(o.seed) + ")";
  } else if (fs::is_directory(o.model_path)) {
    l.model.emplace(load_hf_llama(o.model_path, dt, dev, kernel));
    l.name = o.model_path;
  } else {
    l.model.emplace(load_llama2c(o.model_path, dt, dev, kernel));
    l.name = o.model_path;
    l.llama2c = true;
  }
  if (o.tokenizer_path.empty() && l.llama2c) {
    const auto beside = fs::path(o.model_path).parent_path() / "tok512.bin";
    if (fs::exists(beside)) o.tokenizer_path = beside.string();
  }
  if (!o.tokenizer_path.empty())
    l.tokenizer.emplace(Llama2cTokenizer::load(o.tokenizer_path, static_cast<std::int32_t>(l.model->vocab_size())));
  return l;
}

// The prompt and the reference files, as token ids.
Request make_request(const Options& o, const Loaded& l) {
  Request request;
  if (!o.prompt.empty()) {
    REFDEC_CHECK(l.tokenizer.has_value(), "--prompt needs a tokenizer (--tokenizer); use --prompt-ids otherwise");
    request.prompt = l.tokenizer->encode(o.prompt, true, false);
  } else if (!o.prompt_ids.empty()) {
    request.prompt = parse_ids(o.prompt_ids, l.model->vocab_size(), "--prompt-ids");
  } else {
    request.prompt = {static_cast<Token>(l.model->config().bos_id)};
  }
  for (const auto& file : o.reference_files) {
    const std::string text = refdec::read_file_bytes(file, "reference file");  // regular files only, never blocks
    request.references.push_back(l.tokenizer ? l.tokenizer->encode(text, false, false)
                                             : parse_ids(text, l.model->vocab_size(), "reference " + file));
  }
  return request;
}

// The step cost of this model on this machine, now (a step of n tokens against one of one), where
// the budget is chosen per step; none otherwise.
std::vector<std::pair<std::size_t, double>> measure_cost(const Options& o, const LlamaModel& model, const Request& request) {
  if (o.fixed_budget || o.budget <= 0 || o.drafter == "none") return {};
  std::vector<std::size_t> sizes;
  for (std::size_t s = 1; s <= static_cast<std::size_t>(o.budget) + 1; s *= 2) sizes.push_back(s);
  if (sizes.back() != static_cast<std::size_t>(o.budget) + 1) sizes.push_back(static_cast<std::size_t>(o.budget) + 1);
  return measure_step_cost(model, {.tokens = sizes, .context = static_cast<std::int64_t>(request.prompt.size()) + o.max_new_tokens / 2,
                                   .repeats = 5});
}

// A new drafter of --drafter: nothing one row learned (the shared index's documents included)
// helps the other.
AnyDrafter make_drafter(const Options& o, const std::shared_ptr<const Datastore>& datastore) {
  const LlmaOptions& llma = o.llma;
  if (o.drafter == "none") return AnyDrafter{};
  if (o.drafter == "llma") return AnyDrafter(LlmaDrafter(llma));
  if (o.drafter == "prompt-lookup") return AnyDrafter(PromptLookupDrafter{});
  if (o.drafter == "ngram-trie") return AnyDrafter(NgramTrieDrafter());
  if (o.drafter == "rest") return AnyDrafter(RestDrafter(datastore));
  if (o.drafter == "lookahead") return AnyDrafter(LookaheadDrafter());
  if (o.drafter == "suffix-decoding") return AnyDrafter(SuffixDecodingDrafter(std::make_shared<SuffixDecodingCache>()));
  if (o.drafter == "index") return AnyDrafter(IndexDrafter(std::make_shared<ReferenceIndex>()));
  std::vector<AnyDrafter> sources;
  sources.emplace_back(LlmaDrafter(llma));
  sources.emplace_back(NgramTrieDrafter());
  for (auto& d : index_sources(std::make_shared<ReferenceIndex>())) sources.emplace_back(std::move(d));
  if (datastore != nullptr) sources.emplace_back(RestDrafter(datastore));
  return AnyDrafter(MixtureDrafter(std::move(sources)));
}

// Plain decoding and both rows, timed in turn (a drift of the machine's speed then falls on all
// alike), after a warm-up of allocators and caches; each figure the median of the repeats.
struct Comparison {
  GenerateResult plain;
  std::vector<double> plain_times;
  double plain_seconds = 0;
  std::vector<Row> rows;
  bool identical = true;

  double speedup(const Row& row) const { return row.spec_seconds > 0 ? plain_seconds / row.spec_seconds : 0.0; }
};

Comparison compare(const Options& o, const LlamaModel& model, const Request& request, const GenerateOptions& options,
                   const std::shared_ptr<const Datastore>& datastore) {
  GenerateOptions warm = options;
  warm.limits.max_new_tokens = std::min<std::int64_t>(8, o.max_new_tokens);
  warm.step_cost.reset();
  const Request alone{request.prompt, {}};
  generate(model, alone, AnyDrafter{}, warm);

  GenerateOptions plain_options = options;
  plain_options.limits.budget = 0;
  plain_options.step_cost.reset();
  Comparison c;
  c.rows.resize(2);
  const std::size_t files = request.references.size();
  c.rows[0].request = "no references";
  c.rows[1].request = files ? std::to_string(files) + " reference file" + (files > 1 ? "s" : "") : "an earlier answer as reference";
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    c.plain = generate(model, alone, AnyDrafter{}, plain_options);
    c.plain_times.push_back(c.plain.stats.total_seconds);
    Request with = request;
    if (files == 0 || o.from_first_run) with.references.push_back(c.plain.tokens[0]);
    for (std::size_t i = 0; i < c.rows.size(); ++i) {
      c.rows[i].spec = generate(model, i == 0 ? alone : with, make_drafter(o, datastore), options);
      c.rows[i].seconds.push_back(c.rows[i].spec.stats.total_seconds);
    }
  }
  c.plain_seconds = median(c.plain_times);
  for (Row& row : c.rows) {
    row.spec_seconds = median(row.seconds);
    row.identical = row.spec.tokens[0] == c.plain.tokens[0];
    c.identical = c.identical && row.identical;
  }
  return c;
}

const char* const kBenchHint =
    "the real-size picture, a 1.1B-parameter model in bf16: ./build/bench/refdec-speed-bench --shape 1b "
    "(about 15 minutes on 2 cores; docs/speed.md)";

void print_json(const Options& o, const Loaded& l, const Request& request, const std::vector<std::pair<std::size_t, double>>& cost,
                const Comparison& c) {
  nlohmann::json j;
  j["model"] = l.name;
  j["drafter"] = o.drafter;
  j["budget"] = o.budget;
  j["adaptive_budget"] = !cost.empty();
  j["step_cost"] = cost;
  j["linear_kernel"] = linear_kernel_name(l.model->linear_kernel());
  j["linear_path"] = l.model->linear_path();
  j["prompt_tokens"] = request.prompt.size();
  j["repeats"] = o.repeats;
  j["plain_seconds"] = c.plain_seconds;
  j["plain_seconds_each"] = c.plain_times;
  j["identical_to_plain"] = c.identical;
  for (const Row& r : c.rows) {
    const GenerateStats& st = r.spec.stats;
    nlohmann::json row;
    row["request"] = r.request;
    row["tokens"] = st.tokens;
    row["steps"] = st.steps;
    row["tokens_per_step"] = st.tokens_per_step();
    row["identical_to_plain"] = r.identical;
    row["speedup"] = c.speedup(r);
    row["speculative_seconds"] = r.spec_seconds;
    row["speculative_seconds_each"] = r.seconds;
    row["seconds"] = {{"draft", st.draft_seconds}, {"plan", st.verify.plan}, {"model", st.verify.model},
                      {"accept", st.verify.accept}, {"kv_commit", st.verify.commit}};
    std::vector<double> by_position;
    for (std::size_t d = 0; d < st.drafting.proposed_at_depth.size(); ++d) by_position.push_back(st.drafting.acceptance_at(d));
    row["acceptance_by_position"] = by_position;
    row["proposed_tokens"] = st.drafting.proposed_tokens;
    row["accepted_tokens"] = st.drafting.accepted_tokens;
    j["rows"].push_back(row);
  }
  j["output_ids"] = c.plain.tokens[0];
  if (l.tokenizer) j["text"] = l.tokenizer->decode(c.plain.tokens[0]);
  j["see_also"] = kBenchHint;
  std::cout << j.dump(2) << "\n";
}

void print_table(const Options& o, const Loaded& l, const std::vector<std::pair<std::size_t, double>>& cost, const Comparison& c) {
  if (l.tokenizer) {
    std::cout << l.tokenizer->decode(c.plain.tokens[0]) << "\n\n";
  } else {
    for (const Token t : c.plain.tokens[0]) std::cout << t << ' ';
    std::cout << "\n\n";
  }
  std::cout << "model " << l.name << " (" << l.model->linear_path() << "), " << c.plain.tokens[0].size() << " tokens per run, drafter "
            << o.drafter << ", ";
  if (cost.empty()) {
    std::cout << "up to " << o.budget << " draft tokens per step\n";
  } else {
    std::cout << std::fixed << std::setprecision(2) << "budget chosen per step (up to " << o.budget << ") under the step cost measured now: "
              << 1e3 * cost.front().second << " ms for 1 token, " << 1e3 * cost.back().second << " ms for " << cost.back().first << "\n";
  }
  std::cout << std::fixed << std::setprecision(2) << "\n| request | tokens/step | speculative ms | plain ms | speedup | identical to plain |\n"
            << "|---|---|---|---|---|---|\n";
  for (const Row& row : c.rows)
    std::cout << "| " << row.request << " | " << row.spec.stats.tokens_per_step() << " | " << 1e3 * row.spec_seconds << " | "
              << 1e3 * c.plain_seconds << " | " << c.speedup(row) << "x | " << (row.identical ? "yes" : "NO") << " |\n";
  std::cout << "\n(median of " << o.repeats << " runs each, plain and speculative in turn)\n";
  if (c.speedup(c.rows[0]) < 1.0)
    std::cout << "Without references a model this small gains nothing: its steps cost about a millisecond, mostly fixed "
                 "overhead per operation, so drafting and larger steps cost as much as the steps they save.\n";
  std::cout << kBenchHint << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"refdec-generate: greedy decoding, plain and speculative, of a request alone and with references"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  try {
    settle(o);
    const Loaded l = load(o);
    const Request request = make_request(o, l);
    const auto datastore = o.datastore_path.empty() ? nullptr : Datastore::open_shared(o.datastore_path);
    GenerateOptions options;
    options.limits.max_new_tokens = o.max_new_tokens;
    options.driver.max_context = o.max_context;
    options.limits.budget = o.budget;
    options.limits.stop_tokens = {static_cast<Token>(l.model->config().eos_id)};
    if (l.llama2c) options.limits.stop_tokens.push_back(static_cast<Token>(l.model->config().bos_id));  // as llama2.c's run
    const auto cost = measure_cost(o, *l.model, request);
    if (!cost.empty()) options.step_cost = StepCost::calibrated(cost);
    const Comparison c = compare(o, *l.model, request, options, datastore);
    if (o.json)
      print_json(o, l, request, cost, c);
    else
      print_table(o, l, cost, c);
    return c.identical ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "refdec-generate: " << describe(e) << "\n";  // no libtorch stack trace
    return 1;
  }
}
