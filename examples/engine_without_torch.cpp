// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// An engine without libtorch: speculative greedy decoding of a batch with refdec's core layer and a
// plain C++ Llama forward pass (plain_engine.hpp). One step, for every sequence at once:
//
//   drafters propose -> DraftTree::linearize -> refdec::plan_step -> plain_engine forward
//   -> argmax per row -> refdec::accept (the walk) -> refdec::keep_accepted -> caches apply the
//   keep plan -> drafters accept
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
#include "refdec/core/aux_block.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/drafters/draft_step.hpp"
#include "refdec/drafters/drafter.hpp"
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

// One sequence of the batch: its tokens, its drafter and what decoding did for it.
struct Sequence {
  std::vector<Token> prompt;  // [prompt length] starts with BOS
  std::vector<Token> output;  // [generated] stop token excluded
  refdec::AnyDrafter drafter;
  bool prefilled = false;     // the prompt's KV (all but its last token) is in the cache
  std::int64_t steps = 0;     // verification steps (prefill excluded)

  Token last() const { return output.empty() ? prompt.back() : output.back(); }
  std::int64_t total() const { return static_cast<std::int64_t>(prompt.size() + output.size()); }
};

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
  const std::int64_t max_context = model.max_seq_len();

  // BOS alone, "Tom had a big dog" and "The sun was hot" (tok512 ids).
  std::vector<Sequence> sequences(3);
  sequences[0].prompt = {kBos};
  sequences[1].prompt = {kBos, 274, 287, 381, 261, 370, 400, 428};
  sequences[2].prompt = {kBos, 291, 262, 379, 286, 270, 309};

  // Sequences still decoding, and their caches in the same order: forward() takes the caches of
  // the plan's sequences as one span, so a finished sequence's cache leaves with it.
  std::vector<std::size_t> active;
  std::vector<plain_engine::Cache> caches;
  for (std::size_t s = 0; s < sequences.size(); ++s) {
    Sequence& seq = sequences[s];
    if (static_cast<std::int64_t>(seq.prompt.size()) >= max_context) {
      std::cerr << "error: prompt " << s << " leaves no room in a context of " << max_context << "\n";
      return 1;
    }
    seq.drafter = refdec::LlmaDrafter({.n = 1, .k = 16, .self_reference = true});
    seq.drafter.begin(seq.prompt, {});
    // A lone token is the first step's root: there is nothing to prefill.
    seq.prefilled = seq.prompt.size() == 1;
    if (options.max_new_tokens == 0) continue;
    active.push_back(s);
    // Room for the whole context plus the auxiliary rows a step may add after it.
    caches.push_back(model.make_cache(max_context + static_cast<std::int64_t>(seq.drafter.max_auxiliary())));
  }

  refdec::DraftScratch draft;                // reused by draft_step()
  std::vector<refdec::LinearTree> trees;     // [B] this step's trees
  std::vector<refdec::AuxBlock> aux;         // [B] this step's auxiliary tokens (none for LLMA)
  std::vector<std::int64_t> lengths;         // [B] cached entries before the step
  std::vector<std::uint8_t> prefill;         // [B] 1: the sequence prefills its prompt this step
  std::vector<refdec::Acceptance> accepted;  // [B]
  std::vector<Token> choices;                // [rows of one sequence] the target's greedy token per row
  refdec::StepPlan plan;
  refdec::KeepPlan keep;
  std::int64_t forward_passes = 0;

  while (!active.empty()) {
    const std::size_t B = active.size();
    trees.resize(B);
    aux.resize(B);
    lengths.resize(B);
    prefill.assign(B, 0);
    for (std::size_t b = 0; b < B; ++b) {
      Sequence& seq = sequences[active[b]];
      lengths[b] = caches[b].length();
      aux[b].clear();
      if (!seq.prefilled) {
        // The prompt but its last token, as a chain whose rows are all kept; the last token is
        // the root of the sequence's first verification step. It rides in the same forward pass
        // as the other sequences' verification.
        trees[b] = refdec::LinearTree::chain(std::span<const Token>(seq.prompt).first(seq.prompt.size() - 1));
        prefill[b] = 1;
        continue;
      }
      // Propose, cut to the budget (drafts beyond what the sequence may still append are wasted
      // rows), record, add auxiliary rows, check every id against the vocabulary.
      const std::int64_t room =
          std::min(options.max_new_tokens - static_cast<std::int64_t>(seq.output.size()), max_context - seq.total());
      refdec::draft_step(seq.drafter, seq.last(), refdec::step_budget(room, options.budget), vocab, seq.total() - 1,
                         max_context, draft, trees[b], aux[b]);
    }
    refdec::plan_step(trees, aux, lengths, vocab, plan);
    const std::vector<float> logits = model.forward(plan, caches);  // [plan.rows(), vocab]
    ++forward_passes;

    accepted.resize(B);
    for (std::size_t b = 0; b < B; ++b) {
      const auto bi = static_cast<std::int32_t>(b);
      refdec::Acceptance& acc = accepted[b];
      if (prefill[b]) {  // every chain node is "accepted", so keep_accepted() keeps every row
        refdec::accept_all(plan.tree(bi), acc);
        continue;
      }
      choices.resize(static_cast<std::size_t>(plan.rows(bi)));
      for (std::int32_t i = 0; i < plan.rows(bi); ++i) {
        const auto row = static_cast<std::size_t>(plan.indptr[b] + i);
        choices[static_cast<std::size_t>(i)] = argmax(&logits[row * static_cast<std::size_t>(vocab)], vocab);
      }
      refdec::accept(plan.tree(bi), refdec::ChoiceArray{choices.data()}, acc);
      // Auxiliary rows follow the tree rows; their greedy choices feed the drafter, never the output.
      Sequence& seq = sequences[active[b]];
      if (seq.drafter.max_auxiliary() > 0)
        seq.drafter.observe(std::span<const Token>(choices).subspan(static_cast<std::size_t>(plan.num_nodes[b])));
    }
    refdec::keep_accepted(plan, accepted, keep);
    for (std::size_t b = 0; b < B; ++b) caches[b].apply(keep, static_cast<std::int32_t>(b));

    std::vector<std::size_t> leaving;  // [finished] batch slots, increasing
    for (std::size_t b = 0; b < B; ++b) {
      Sequence& seq = sequences[active[b]];
      if (prefill[b]) {
        seq.prefilled = true;
        continue;
      }
      ++seq.steps;
      const auto before = seq.output.size();
      bool finished = false;
      for (const Token t : accepted[b].tokens) {
        if (t == kBos || t == kEos) {  // a stop token ends the sequence and is not emitted
          finished = true;
          break;
        }
        seq.output.push_back(t);
        if (static_cast<std::int64_t>(seq.output.size()) >= options.max_new_tokens || seq.total() >= max_context) {
          finished = true;
          break;
        }
      }
      if (finished)
        leaving.push_back(b);
      else
        seq.drafter.accept(std::span<const Token>(seq.output).subspan(before));
    }
    for (auto it = leaving.rbegin(); it != leaving.rend(); ++it) {
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(*it));
      caches.erase(caches.begin() + static_cast<std::ptrdiff_t>(*it));
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
