// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-generate: greedy decoding of a Llama model, plain and speculative, compared in one run.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "eval/cli.hpp"
#include "eval/data_dir.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/core/file_io.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"
#include "refdec/torch/dtype.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"refdec-generate: greedy speculative decoding with a reference-copy drafter"};
  std::string model_path, tokenizer_path, prompt, prompt_ids, drafter = "llma", dtype = "fp32", device = "cpu", linear = "auto";
  std::string data_dir;
  std::vector<std::string> reference_files;
  bool from_first_run = false, json = false, self_reference = true;
  std::size_t n = 1, k = 16, m = 1;
  std::int64_t budget = 0, max_new_tokens = 256, max_context = 0;
  std::uint64_t seed = 1;
  app.add_option("--model", model_path, "llama2.c checkpoint file or Hugging Face model directory "
                                        "(default: stories260K from the data directory, else a random model)");
  app.add_option("--tokenizer", tokenizer_path, "llama2.c tokenizer file (default: tok512.bin beside a llama2.c model)");
  app.add_option("--data-dir", data_dir, "data directory holding models/stories260K (default: $REFDEC_DATA_DIR or ../shared)");
  app.add_option("--prompt", prompt, "prompt text (needs a tokenizer); BOS is prepended");
  app.add_option("--prompt-ids", prompt_ids, "prompt as space-separated token ids (default: BOS)");
  app.add_option("--reference", reference_files, "reference file: text (with a tokenizer) or token ids; repeatable");
  app.add_flag("--reference-from-first-run", from_first_run, "decode plainly first, then use that output as a reference");
  app.add_option("--drafter", drafter, "none or llma")->check(CLI::IsMember({"none", "llma"}));
  app.add_option("-n", n, "LLMA: shortest suffix match that triggers a copy")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("-k", k, "LLMA: tokens copied per span")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("-m", m, "LLMA: spans proposed as a tree")->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_flag("--self-reference,!--no-self-reference", self_reference,
               "LLMA: also copy from the prompt and output so far (default on)");
  auto* budget_opt = app.add_option("--budget", budget, "draft tokens verified per step (default k * m; 0 = plain decoding)")
                         ->transform(cli::integer_in(0, cli::kMaxBudget));
  app.add_option("--max-new-tokens", max_new_tokens, "tokens to generate at most")
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--max-context", max_context, "prompt + output at most (default, 0: the model's context)")
      ->transform(cli::integer_in(0, cli::kMaxTokens));
  app.add_option("--dtype", dtype, "fp32, fp64, fp16 or bf16");
  app.add_option("--linear", linear, "linear layers: auto (the fastest kernel this CPU runs), aten, packed, onednn or avx2")
      ->capture_default_str();
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--seed", seed, "seed of the random model used when no checkpoint is found")
      ->transform(cli::integer_in(0, std::numeric_limits<std::int64_t>::max()));
  app.add_flag("--json", json, "print one JSON object instead of text");
  CLI11_PARSE(app, argc, argv);

  try {
    const at::Device dev(device);
    REFDEC_CHECK(!dev.is_cuda() || at::hasCUDA(), "--device cuda, but this libtorch sees no CUDA device");
    const auto dt = parse_dtype(dtype);
    const LinearKernel kernel = parse_linear_kernel(linear);
    if (data_dir.empty()) data_dir = data_dir_or(REFDEC_DEFAULT_DATA_DIR);
    const fs::path stories = fs::path(data_dir) / "models/stories260K/stories260K.bin";
    if (model_path.empty() && fs::exists(stories)) model_path = stories.string();

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
    for (const auto& file : reference_files) {
      const std::string text = refdec::read_file_bytes(file, "reference file");  // regular files only, never blocks
      request.references.push_back(tokenizer ? tokenizer->encode(text, false, false)
                                             : parse_ids(text, model->vocab_size(), "reference " + file));
    }

    GenerateOptions options;
    options.max_new_tokens = max_new_tokens;
    options.max_context = max_context;
    // k, m <= kMaxSpan: their product cannot overflow, but may exceed the budget bound.
    const auto default_budget = static_cast<std::int64_t>(k * m);
    REFDEC_CHECK(budget_opt->count() > 0 || default_budget <= cli::kMaxBudget,
                 "the default budget k * m = " << k << " * " << m << " = " << default_budget << " exceeds "
                                               << cli::kMaxBudget << ": give --budget");
    options.budget = budget_opt->count() > 0 ? budget : default_budget;
    options.stop_tokens = {static_cast<Token>(model->config().eos_id)};
    if (llama2c) options.stop_tokens.push_back(static_cast<Token>(model->config().bos_id));  // as llama2.c's run
    auto make_drafter = [&]() -> AnyDrafter {
      if (drafter == "none") return AnyDrafter{};
      return LlmaDrafter({.n = n, .k = k, .m = m, .self_reference = self_reference});
    };

    // Warm up allocators and caches so that the timed runs compare fairly.
    GenerateOptions warm = options;
    warm.max_new_tokens = std::min<std::int64_t>(8, max_new_tokens);
    generate(*model, Request{request.prompt, {}}, AnyDrafter{}, warm);

    const auto plain = generate(*model, Request{request.prompt, {}}, AnyDrafter{}, options);
    if (from_first_run) request.references.push_back(plain.tokens[0]);
    const auto spec = generate(*model, request, make_drafter(), options);
    const bool identical = spec.tokens[0] == plain.tokens[0];
    const double speedup = spec.stats.total_seconds > 0 ? plain.stats.total_seconds / spec.stats.total_seconds : 0.0;
    const auto& st = spec.stats;
    const std::string text = tokenizer ? tokenizer->decode(spec.tokens[0]) : std::string{};

    if (json) {
      nlohmann::json j;
      j["model"] = model_name;
      j["drafter"] = drafter;
      j["linear_kernel"] = linear_kernel_name(model->linear_kernel());
      j["linear_path"] = model->linear_path();
      j["prompt_tokens"] = request.prompt.size();
      j["tokens"] = st.tokens;
      j["steps"] = st.steps;
      j["tokens_per_step"] = st.tokens_per_step();
      j["identical_to_plain"] = identical;
      j["speedup"] = speedup;
      j["plain_seconds"] = plain.stats.total_seconds;
      j["speculative_seconds"] = st.total_seconds;
      j["seconds"] = {{"draft", st.draft_seconds}, {"plan", st.verify.plan}, {"model", st.verify.model},
                      {"accept", st.verify.accept}, {"kv_commit", st.verify.commit}};
      std::vector<double> by_position;
      for (std::size_t d = 0; d < st.drafting.proposed_at_depth.size(); ++d) by_position.push_back(st.drafting.acceptance_at(d));
      j["acceptance_by_position"] = by_position;
      j["proposed_tokens"] = st.drafting.proposed_tokens;
      j["accepted_tokens"] = st.drafting.accepted_tokens;
      j["output_ids"] = spec.tokens[0];
      if (tokenizer) j["text"] = text;
      std::cout << j.dump(2) << "\n";
    } else {
      if (tokenizer) std::cout << text << "\n\n";
      else {
        for (const Token t : spec.tokens[0]) std::cout << t << ' ';
        std::cout << "\n\n";
      }
      std::cout << "model " << model_name << ", drafter " << drafter << ", " << st.tokens << " tokens in " << st.steps
                << " steps: " << st.tokens_per_step() << " tokens/step\n"
                << "linear layers: " << model->linear_path() << "\n"
                << "identical to plain decoding: " << (identical ? "yes" : "NO") << "; speedup " << speedup
                << "x (plain " << plain.stats.total_seconds << " s, speculative " << st.total_seconds << " s)\n"
                << "time: draft " << st.draft_seconds << " s, model " << st.verify.model << " s, accept "
                << st.verify.accept << " s, KV commit " << st.verify.commit << " s\n";
    }
    return identical ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "refdec-generate: " << describe(e) << "\n";  // no libtorch stack trace
    return 1;
  }
}
