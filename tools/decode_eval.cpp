// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-decode-eval: end-to-end decoding of a real model (stories260K by default) over a set of
// prompts, plainly and with each drafter, in one run: τ, forward passes, auxiliary tokens, wall
// time relative to plain decoding, and a check that every output equals the plain one.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "eval/cli.hpp"
#include "eval/data_dir.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "refdec/torch/calibrate.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"

namespace fs = std::filesystem;
using namespace refdec;

namespace {

// Story openings in the style of TinyStories (stories260K's training data).
const std::vector<std::string> kPrompts = {
    "",
    "Once upon a time",
    "Tom and",
    "Lily wanted",
    "One day, a big",
    "The cat sat on the mat. The dog",
    "Sara had a red ball.",
    "Ben was sad because",
    "There was a little bird",
    "Mom said,",
    "The sun was shining and",
    "Max found a box"};

// "name" or "name:key=value,key=value".
struct Spec {
  std::string name;
  std::map<std::string, std::string> args;
};

Spec parse_spec(const std::string& text) {
  Spec s;
  const auto colon = text.find(':');
  s.name = text.substr(0, colon);
  if (colon == std::string::npos) return s;
  if (s.name == "mixture") {  // mixture:a+b+c names sources, not options
    s.args["sources"] = text.substr(colon + 1);
    return s;
  }
  std::istringstream in(text.substr(colon + 1));
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    REFDEC_CHECK(eq != std::string::npos, "drafter option '" << item << "' in '" << text << "' is not key=value");
    s.args[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return s;
}

// The integer option `key` of `s` (in [lo, hi]), or `fallback`; `s` may only carry the options in
// `known`.
int arg(const Spec& s, const std::string& key, int fallback, std::initializer_list<const char*> known, int lo = 1,
        int hi = static_cast<int>(cli::kMaxSpan)) {
  for (const auto& [k, v] : s.args)
    REFDEC_CHECK(std::any_of(known.begin(), known.end(), [&](const char* name) { return k == name; }),
                 "drafter '" << s.name << "' has no option '" << k << "'");
  const auto it = s.args.find(key);
  if (it == s.args.end()) return fallback;
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  REFDEC_CHECK(used > 0 && used == it->second.size(),
               "drafter '" << s.name << "': option " << key << "=" << it->second << " is not an integer");
  REFDEC_CHECK(value >= lo && value <= hi, "drafter '" << s.name << "': option " << key << "=" << value
                                                       << " is out of range [" << lo << ", " << hi << "]");
  return value;
}

// One drafter for prompt `i`; `stores[i]` holds the other prompts' outputs, `history` and `index`
// the outputs of the prompts this drafter served before. A mixture names its sources with '+'
// ("mixture:llma+rest+lookahead"), each with its defaults, and weighs its budget with `mixture`'s
// options (its step cost included).
AnyDrafter make_drafter(const Spec& s, const std::vector<std::shared_ptr<const Datastore>>& stores, std::size_t i,
                        const std::shared_ptr<OutputHistory>& history, const std::shared_ptr<ReferenceIndex>& index,
                        const MixtureOptions& mixture) {
  if (s.name == "none") return AnyDrafter{};
  REFDEC_CHECK(s.args.empty() || s.name == "llma" || s.name == "lookahead" || s.name == "mixture",
               "drafter '" << s.name << "' takes no options");
  if (s.name == "prompt-lookup") return AnyDrafter(PromptLookupDrafter{});
  if (s.name == "llma")
    return AnyDrafter(LlmaDrafter(LlmaOptions{.min_match = 1, .continuation = static_cast<std::size_t>(arg(s, "continuation", 16, {"continuation", "spans"})),
                                              .spans = static_cast<std::size_t>(arg(s, "spans", 4, {"continuation", "spans"})),
                                              .self_reference = true}));
  if (s.name == "ngram-trie") return AnyDrafter(NgramTrieDrafter{});
  if (s.name == "rest") {
    REFDEC_CHECK(i < stores.size(), "rest needs at least two prompts (its datastore holds the other prompts' outputs)");
    return AnyDrafter(RestDrafter(stores[i]));
  }
  if (s.name == "history") return AnyDrafter(HistoryDrafter(AnyDrafter(NgramTrieDrafter{}), history));
  if (s.name == "index") return AnyDrafter(IndexDrafter(index));
  if (s.name == "lookahead")
    return AnyDrafter(LookaheadDrafter({.window = static_cast<std::size_t>(arg(s, "window", 15, {"window", "ngram", "guesses"}, 0)),
                                        .ngram = static_cast<std::size_t>(arg(s, "ngram", 5, {"window", "ngram", "guesses"}, 2)),
                                        .guesses = static_cast<std::size_t>(arg(s, "guesses", 15, {"window", "ngram", "guesses"}))}));
  if (s.name == "mixture") {
    std::vector<AnyDrafter> sources;
    std::istringstream in(s.args.count("sources") ? s.args.at("sources") : "");
    for (std::string name; std::getline(in, name, '+');) {
      if (name == "index") {  // the index and the request's own text, a source each
        for (auto& d : index_sources(index)) sources.emplace_back(std::move(d));
        continue;
      }
      sources.push_back(make_drafter(Spec{name, {}}, stores, i, history, index, mixture));
    }
    REFDEC_CHECK(!sources.empty(), "mixture without sources: write mixture:a+b+c");
    return AnyDrafter(MixtureDrafter(std::move(sources), mixture));
  }
  throw Error("unknown drafter '" + s.name + "' (none, prompt-lookup, llma, ngram-trie, rest, history, index, lookahead, mixture:a+b)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"refdec-decode-eval: plain vs speculative decoding of a real model over many prompts"};
  std::string model_path, tokenizer_path, data_dir;
  std::vector<std::string> drafters = {"lookahead", "lookahead:W=7,N=4,G=7", "lookahead:W=0,N=4,G=15"};
  std::int64_t max_new_tokens = 256, budget = 64;
  std::vector<float> temperatures = {0.0f};
  bool calibrate = false;
  bool small_budget_scoring = true;
  double scorer_rate = MixtureOptions{}.scorer_rate;
  std::size_t num_prompts = kPrompts.size();
  app.add_option("--model", model_path, "llama2.c checkpoint (default: stories260K under the data directory)");
  app.add_option("--tokenizer", tokenizer_path, "llama2.c tokenizer (default: tok512.bin beside stories260K)");
  app.add_option("--data-dir", data_dir, "data directory (default: $REFDEC_DATA_DIR or ../shared)");
  app.add_option("--drafter", drafters,
                 "drafters to compare, each 'name[:key=value,...]': prompt-lookup, llma[:continuation,spans], ngram-trie, rest "
                 "(datastore of the other prompts' outputs), history (n-gram trie over the outputs of the prompts this drafter "
                 "decoded before), index (the shared reference index over the same outputs; in a mixture it and the request's own text are two sources), lookahead[:window,ngram,guesses], mixture:a+b+c; repeatable")
      ->capture_default_str();
  app.add_option("--prompts", num_prompts, "how many of the built-in prompts to decode")
      ->transform(cli::integer_in(1, static_cast<std::int64_t>(kPrompts.size())));
  app.add_option("--max-new-tokens", max_new_tokens, "tokens per prompt")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--budget", budget, "draft nodes verified per step")->capture_default_str()
      ->transform(cli::integer_in(0, cli::kMaxBudget));
  app.add_option("--temperature", temperatures,
                 "sampling temperatures to run (0 = greedy); prompt i samples with seed i; repeatable")
      ->capture_default_str()
      ->transform(cli::finite_in(0.0, 100.0));
  app.add_flag("--calibrate", calibrate,
               "time the model's steps at start-up and let mixtures size their trees by that cost (default: flat cost)");
  app.add_flag("--small-budget-scoring,!--no-small-budget-scoring", small_budget_scoring,
               "mixtures: sources propose at least 64 nodes, estimates conditioned on match length and recent reach "
               "(MixtureOptions source_budget 64, match_context, recent_rate 0.3: the defaults; off: 0, false, 0)")
      ->capture_default_str();
  app.add_option("--scorer-rate", scorer_rate,
                 "mixtures: learning rate of the learned scorer (MixtureOptions scorer_rate; 0: off)")
      ->capture_default_str()
      ->transform(cli::finite_in(0.0, 1.0));
  CLI11_PARSE(app, argc, argv);
  try {
    const fs::path dir = data_dir.empty() ? data_dir_or(REFDEC_DEFAULT_DATA_DIR) : fs::path(data_dir);
    if (model_path.empty()) model_path = dir / "models/stories260K/stories260K.bin";
    if (tokenizer_path.empty()) tokenizer_path = fs::path(model_path).parent_path() / "tok512.bin";
    REFDEC_CHECK_IO(fs::exists(model_path), "model not found: " << model_path);
    REFDEC_CHECK_IO(fs::exists(tokenizer_path), "tokenizer not found: " << tokenizer_path);
    const LlamaModel model = load_llama2c(model_path);
    const auto tokenizer = Llama2cTokenizer::load(tokenizer_path, static_cast<std::int32_t>(model.vocab_size()));
    GenerateOptions opt;
    opt.limits.max_new_tokens = max_new_tokens;
    opt.limits.budget = budget;

    using Clock = std::chrono::steady_clock;
    std::vector<Request> requests;
    for (std::size_t i = 0; i < num_prompts; ++i) requests.push_back(Request{tokenizer.encode(kPrompts[i], true, false), {}});
    // Greedy outputs of every prompt: REST's datastore for prompt i holds the others' ("earlier
    // sessions"), whatever temperature is evaluated.
    std::vector<std::vector<Token>> greedy;
    for (const auto& r : requests) greedy.push_back(generate(model, r, AnyDrafter{}, opt).tokens[0]);
    std::vector<std::shared_ptr<const Datastore>> stores;
    const fs::path tmp = fs::temp_directory_path() / ("refdec_decode_eval_" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    // Removes the datastores however the run ends.
    const std::unique_ptr<const fs::path, void (*)(const fs::path*)> cleanup(&tmp, [](const fs::path* p) { refdec::remove_tree(*p); });
    for (std::size_t i = 0; i < num_prompts && num_prompts > 1; ++i) {
      std::vector<std::vector<Token>> docs;
      for (std::size_t j = 0; j < num_prompts; ++j)
        if (j != i) docs.push_back(greedy[j]);
      const auto path = tmp / ("store" + std::to_string(i) + ".ds");
      build_datastore(docs, static_cast<std::int32_t>(model.vocab_size()), path);
      stores.push_back(Datastore::open_shared(path));
    }

    MixtureOptions mixture;  // its step cost flat unless calibrated
    if (!small_budget_scoring) {
      mixture.source_budget = 0;
      mixture.match_context = false;
      mixture.recent_rate = 0.0;
    }
    mixture.scorer_rate = scorer_rate;
    if (calibrate) {
      const auto samples = measure_step_cost(model, {.context = 128});
      mixture.cost = StepCost::calibrated(samples);
      std::cout << "step cost (tokens: ms):";
      for (const auto& [n, sec] : samples) std::cout << ' ' << n << ": " << std::setprecision(3) << sec * 1e3;
      std::cout << "\n";
    }
    std::cout << "model " << model_path << ", " << num_prompts << " prompts, " << max_new_tokens
              << " new tokens at most each, budget " << budget << "\n\n";
    std::cout << "| temperature | drafter | τ (tokens/step) | draft tokens/step | auxiliary tokens/step | wall time vs plain | same output as plain |\n";
    std::cout << "|---|---|---|---|---|---|---|\n";
    bool all_lossless = true;
    for (const float temperature : temperatures) {
      for (std::size_t i = 0; i < num_prompts; ++i)
        requests[i].sampling = temperature > 0 ? std::optional<SamplingOptions>(SamplingOptions{.temperature = temperature, .seed = i})
                                               : std::nullopt;
      std::vector<std::vector<Token>> plain;
      const auto t_plain = Clock::now();
      for (const auto& r : requests) plain.push_back(generate(model, r, AnyDrafter{}, opt).tokens[0]);
      const double plain_seconds = std::chrono::duration<double>(Clock::now() - t_plain).count();
      for (const std::string& text : drafters) {
        const Spec spec = parse_spec(text);
        GenerateStats total;
        std::size_t equal = 0;
        const auto history = std::make_shared<OutputHistory>();  // this drafter's earlier outputs in this run
        const auto index = std::make_shared<ReferenceIndex>();   // the same, as a shared index
        const auto t0 = Clock::now();
        for (std::size_t i = 0; i < num_prompts; ++i) {
          const auto r = generate(model, requests[i], make_drafter(spec, stores, i, history, index, mixture), opt);
          equal += r.tokens[0] == plain[i] ? 1 : 0;
          total.tokens += r.stats.tokens;
          total.steps += r.stats.steps;
          total.auxiliary_tokens += r.stats.auxiliary_tokens;
          total.drafting.merge(r.stats.drafting);
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        const double steps = static_cast<double>(total.steps);
        // Greedy runs must match exactly; sampled ones match unless a rounding difference between
        // batched and single-token passes moves a draw (reported, not an error).
        all_lossless = all_lossless && (temperature > 0 || equal == num_prompts);
        std::cout << std::fixed << std::setprecision(3) << "| " << std::setprecision(1) << temperature << " | " << text
                  << " | " << std::setprecision(3) << total.tokens_per_step() << " | "
                  << static_cast<double>(total.drafting.proposed_tokens) / steps << " | "
                  << static_cast<double>(total.auxiliary_tokens) / steps << " | " << seconds / plain_seconds << " | "
                  << equal << "/" << num_prompts << " |\n";
      }
    }
    return all_lossless ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "refdec-decode-eval: " << describe(e) << '\n';  // no libtorch stack trace
    return 1;
  }
}
