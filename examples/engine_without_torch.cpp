// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// An engine without libtorch: speculative greedy decoding of a batch with refdec's core layer and a
// plain C++ Llama forward pass (plain_engine.hpp). One step, for every sequence at once:
//
//   refdec::StepDriver::prepare (prefill or draft, the plan) -> plain_engine forward -> argmax
//   per row -> StepDriver::complete_greedy (the walk, drafters told, stops, limits) -> caches
//   apply the keep plan and drop the sequences that left
//
// Greedy acceptance makes the output equal plain greedy decoding whatever the drafters propose:
// compare the `ids:` lines of `--budget 0` and `--budget 16`. docs/engine.md walks through it.
//
//   refdec-engine-without-torch [--model PATH] [--max-new-tokens N] [--budget N] [--ids-only]

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "plain_engine.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"

#ifndef REFDEC_DEFAULT_DATA_DIR
#define REFDEC_DEFAULT_DATA_DIR "../shared"
#endif

namespace {

// The shared data directory: $REFDEC_DATA_DIR, else the build's ../shared.
std::filesystem::path data_dir() {
  if (const char* env = std::getenv("REFDEC_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return REFDEC_DEFAULT_DATA_DIR;
}

using refdec::Token;

constexpr Token kBos = 1;
constexpr Token kEos = 2;
constexpr int kExitSkipped = 77;  // CTest's SKIP_RETURN_CODE: no model on this machine
constexpr int kExitUsage = 2;

struct Options {
  std::int64_t max_new_tokens = 256;
  std::int64_t budget = 16;  // draft nodes verified per step; 0 is plain decoding
  std::optional<std::filesystem::path> model;
  bool ids_only = false;
};

void usage(std::ostream& os, const char* argv0) {
  os << "usage: " << argv0 << " [--model PATH] [--max-new-tokens N] [--budget N] [--ids-only]\n"
     << "  --model PATH        llama2.c v0 checkpoint (default: $REFDEC_DATA_DIR or " << REFDEC_DEFAULT_DATA_DIR
     << ", then models/stories260K/stories260K.bin)\n"
     << "  --max-new-tokens N  tokens to generate per sequence at most, in [0, 2^20] (default 256)\n"
     << "  --budget N          draft tokens verified per step, in [0, 4096]; 0 is plain greedy decoding (default 16)\n"
     << "  --ids-only          print only the generated token ids, one `ids:` line per sequence\n";
}

// The bounds of the options (as refdec's tools): budget at most 4096, token limit at most 2^20.
constexpr std::int64_t kMaxBudget = 4096;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 20;

bool parse_count(std::string_view text, std::int64_t max, std::int64_t& out) {
  const char* end = text.data() + text.size();
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || v < 0 || v > max) return false;
  out = v;
  return true;
}

// Plain argv parsing keeps the example free of dependencies. Returns nullopt after a usage error.
std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      usage(std::cout, argv[0]);
      std::exit(0);
    } else if (arg == "--ids-only") {
      o.ids_only = true;
    } else if (arg == "--model" && has_value) {
      o.model = argv[++i];
    } else if ((arg == "--max-new-tokens" || arg == "--budget") && has_value) {
      std::int64_t& target = arg == "--budget" ? o.budget : o.max_new_tokens;
      const std::int64_t max = arg == "--budget" ? kMaxBudget : kMaxTokens;
      if (!parse_count(argv[++i], max, target)) {
        std::cerr << "error: " << arg << " needs an integer in [0, " << max << "], got '" << argv[i] << "'\n";
        return std::nullopt;
      }
    } else if (arg == "--model" || arg == "--max-new-tokens" || arg == "--budget") {
      std::cerr << "error: " << arg << " needs a value\n";
      return std::nullopt;
    } else {
      std::cerr << "error: unknown argument '" << arg << "'\n";
      return std::nullopt;
    }
  }
  return o;
}

// The lowest id among the largest logits, so that ties break the same way in every run.
Token argmax(const float* logits, std::int32_t vocab) {
  Token best = 0;
  for (Token t = 1; t < vocab; ++t)
    if (logits[t] > logits[best]) best = t;
  return best;
}

std::string join(std::span<const Token> ids) {
  std::string s;
  for (const Token t : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(t);
  }
  return s;
}

// One sequence of the batch: its prompt and what decoding did for it.
struct Sequence {
  std::vector<Token> prompt;  // starts with BOS
  std::vector<Token> output;  // stop token excluded
  std::int64_t steps = 0;     // verification steps (prefill excluded)
};

int run(const Options& options) {
  const bool default_model = !options.model.has_value();
  const std::filesystem::path model_path =
      default_model ? data_dir() / "models/stories260K/stories260K.bin" : *options.model;
  if (default_model && !std::filesystem::exists(model_path)) {
    std::cout << "skipped: no model at " << model_path
              << " (set REFDEC_DATA_DIR to the directory holding models/stories260K/stories260K.bin, or pass --model)\n";
    return kExitSkipped;
  }
  const plain_engine::Model model = plain_engine::Model::load(model_path);
  const std::int32_t vocab = model.vocab_size();

  // BOS alone, "Tom had a big dog" and "The sun was hot" (tok512 ids).
  std::vector<Sequence> sequences(3);
  sequences[0].prompt = {kBos};
  sequences[1].prompt = {kBos, 274, 287, 381, 261, 370, 400, 428};
  sequences[2].prompt = {kBos, 291, 262, 379, 286, 270, 309};

  // The driver runs the protocol (prefill, drafting, the plan, acceptance, stops, limits); the
  // engine keeps one cache per active sequence in the driver's slot order.
  refdec::StepDriver driver({.vocab_size = vocab, .max_context = model.max_seq_len(), .prefill_chunk = 0});
  const refdec::SequenceLimits limits{.max_new_tokens = options.max_new_tokens, .stop_tokens = {kBos, kEos}, .budget = options.budget};
  std::vector<plain_engine::Cache> caches;
  for (const Sequence& seq : sequences) {
    refdec::AnyDrafter drafter(refdec::LlmaDrafter({.min_match = 1, .continuation = 16, .self_reference = true}));
    // Room for the whole context plus the auxiliary rows a step may add after it.
    const auto capacity = model.max_seq_len() + static_cast<std::int64_t>(drafter.max_auxiliary());
    driver.add(seq.prompt, {}, limits, std::move(drafter));  // ids 0, 1, 2
    if (driver.active() > caches.size()) caches.push_back(model.make_cache(capacity));
  }

  std::vector<Token> choices;  // [plan rows] the target's greedy token per row
  std::int64_t forward_passes = 0;
  while (!driver.idle()) {
    if (driver.prepare()) {
      const refdec::StepPlan& plan = driver.plan();
      const std::vector<float> logits = model.forward(plan, caches);  // [plan.rows(), vocab]
      ++forward_passes;
      choices.resize(static_cast<std::size_t>(plan.rows()));
      for (std::size_t row = 0; row < choices.size(); ++row) choices[row] = argmax(&logits[row * static_cast<std::size_t>(vocab)], vocab);
      driver.complete_greedy(choices);  // the walk, drafters told, stops and limits
      for (std::size_t b = 0; b < caches.size(); ++b) caches[b].apply(driver.keep(), static_cast<std::int32_t>(b));
      for (const std::size_t slot : driver.left()) caches.erase(caches.begin() + static_cast<std::ptrdiff_t>(slot));
    }
    for (const refdec::RequestUpdate& u : driver.updates()) {
      Sequence& seq = sequences[static_cast<std::size_t>(u.id)];
      seq.output.insert(seq.output.end(), u.tokens.begin(), u.tokens.end());
      // A verification step appends tokens or meets a stop token; other updates left between steps.
      seq.steps += u.tokens.empty() && u.finished != refdec::FinishReason::kStopToken ? 0 : 1;
    }
  }

  if (options.ids_only) {  // what tests compare with other decoders: each prompt, then its output
    for (const Sequence& seq : sequences) std::cout << "prompt: " << join(seq.prompt) << "\nids: " << join(seq.output) << "\n";
    return 0;
  }
  // The tokenizer is only for showing text; decoding itself needs none.
  const std::filesystem::path tokenizer_path = model_path.parent_path() / "tok512.bin";
  std::optional<refdec::Llama2cTokenizer> tokenizer;
  if (std::filesystem::exists(tokenizer_path)) tokenizer = refdec::Llama2cTokenizer::load(tokenizer_path, vocab);
  std::int64_t tokens = 0, steps = 0;
  std::cout << std::fixed << std::setprecision(2);
  for (std::size_t s = 0; s < sequences.size(); ++s) {
    const Sequence& seq = sequences[s];
    const auto n = static_cast<std::int64_t>(seq.output.size());
    tokens += n;
    steps += seq.steps;
    std::cout << "sequence " << s << ": prompt [" << join(seq.prompt) << "], " << n << " tokens in " << seq.steps
              << " steps ("
              << (seq.steps > 0 ? static_cast<double>(n) / static_cast<double>(seq.steps) : 0.0) << " tokens/step)\n";
    std::cout << "ids: " << join(seq.output) << "\n";
    if (tokenizer) {
      std::vector<Token> all = seq.prompt;
      all.insert(all.end(), seq.output.begin(), seq.output.end());
      std::cout << "text: " << tokenizer->decode(all) << "\n";
    }
  }
  if (!tokenizer) std::cout << "(no tokenizer at " << tokenizer_path << ": text not shown)\n";
  std::cout << "total: " << tokens << " tokens in " << steps << " steps, " << forward_passes << " forward passes, budget "
            << options.budget << ": " << (steps > 0 ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0)
            << " tokens/step\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse(argc, argv);
  if (!options) {
    usage(std::cerr, argv[0]);
    return kExitUsage;
  }
  try {
    return run(*options);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
