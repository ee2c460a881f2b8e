// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-replay: measures a drafter on real LLM outputs without a model (target-guided
// simulation). Prints τ (tokens per step), acceptance by draft position and drafter latency,
// overall and per category.

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "eval/cli.hpp"
#include "eval/data_dir.hpp"
#include "eval/datasets.hpp"
#include "eval/step_cost_file.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/index/index_files.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/drafters/suffix_decoding.hpp"
#include "eval/replay.hpp"

namespace {

using namespace refdec;
namespace fs = std::filesystem;

struct Settings {
  std::string dataset = "specbench";
  std::string data_dir;
  std::string tokenizer;
  std::string drafter = "prompt-lookup";
  std::size_t budget = 64;
  std::size_t limit = 0;
  std::size_t passes = 1;  // replays of the whole dataset, the last one reported (earlier ones fill shared state)
  bool json = false;
  bool markdown = false;
  bool calibration = false;  // print the estimates' calibration per decile
  std::string trajectories;  // file for the per-step log; empty: none
  std::string dump_traces;   // file for the traces as token ids (the generic JSONL form); empty: none
  LlmaOptions llma{.min_match = 1, .continuation = 16, .spans = 1, .self_reference = true};
  PromptLookupOptions lookup;
  NgramTrieOptions trie;
  RestOptions rest;
  LookaheadOptions pool{.window = 0};  // replay has no model to run a Jacobi window: the pool only
  std::string datastore;
  std::size_t history_tokens = OutputHistory::kDefaultMaxTokens;  // the history drafter's bound
  SuffixDecodingOptions suffix;  // the SuffixDecoding baseline's
  ReferenceIndexOptions index;   // the shared index's (the index drafter, the mixture's index source)
  std::string index_static;      // a datastore the index holds as a static segment; empty: none
  bool index_pooled = false;  // in a mixture: one index source over the index and the request's own text
  IndexDrafterOptions index_drafter;
  std::string sources;  // the mixture's, comma-separated; empty: llma,ngram-trie and, with a datastore, rest
  MixtureOptions mixture;
  std::vector<double> step_cost;  // the mixture's affine step cost (a, b); empty: flat
  std::string step_cost_file;     // the mixture's measured step cost (refdec-speed-bench --json); empty: none
  std::string combine = "max";    // the mixture's MixtureCombine
  std::size_t batch = 0;          // > 0: the batch replay at this batch size
  double batch_overhead = 0.0;    // its cost per sequence beyond the first, seconds
  std::string price_file;         // --batch: the step cost the steps are priced at (refdec-speed-bench --json); empty: the chosen-by one
};

// The step cost of --step-cost / --step-cost-file; flat without either.
StepCost step_cost_of(const Settings& s) {
  if (!s.step_cost.empty()) return StepCost::affine(s.step_cost[0], s.step_cost[1]);
  if (!s.step_cost_file.empty()) return read_step_cost(s.step_cost_file, "--step-cost-file");
  return StepCost::flat();
}

std::vector<std::string> split_sources(const std::string& list) {
  std::vector<std::string> names;
  std::istringstream in(list);
  for (std::string name; std::getline(in, name, ',');) names.push_back(name);
  return names;
}

// The shared index over the outputs of the traces replayed before (and --index-static).
std::shared_ptr<ReferenceIndex> make_index(const Settings& s) {
  auto index = std::make_shared<ReferenceIndex>(s.index);
  if (!s.index_static.empty()) index->add_static(index_segment(Datastore::open_shared(s.index_static), s.index.depth));
  return index;
}

AnyDrafter make_single(const std::string& name, const Settings& s) {
  if (name == "history")  // the n-gram trie over the outputs of the traces replayed before
    return AnyDrafter(HistoryDrafter(AnyDrafter(NgramTrieDrafter(s.trie)), std::make_shared<OutputHistory>(s.history_tokens)));
  if (name == "suffix")  // the SuffixDecoding baseline, its global tree grown over the traces replayed before
    return AnyDrafter(SuffixDecodingDrafter(std::make_shared<SuffixDecodingCache>(s.suffix)));
  if (name == "index") return AnyDrafter(IndexDrafter(make_index(s), s.index_drafter));
  if (name == "none") return AnyDrafter{};
  if (name == "prompt-lookup") return AnyDrafter(PromptLookupDrafter(s.lookup));
  if (name == "llma") return AnyDrafter(LlmaDrafter(s.llma));
  if (name == "ngram-trie") return AnyDrafter(NgramTrieDrafter(s.trie));
  if (name == "ngram-pool") return AnyDrafter(LookaheadDrafter(s.pool));
  if (name == "rest") {
    REFDEC_CHECK(!s.datastore.empty(), "the rest drafter needs --datastore FILE (see refdec-datastore build)");
    return AnyDrafter(RestDrafter(Datastore::open_shared(s.datastore), s.rest));
  }
  throw Error("unknown drafter '" + name + "'");
}

// The drafter, and for a mixture the handle on what it learns per source.
AnyDrafter make_drafter(const Settings& s, std::shared_ptr<const MixtureStatistics>& mixture_stats) {
  if (s.drafter != "mixture") return make_single(s.drafter, s);
  std::vector<AnyDrafter> sources;
  for (const std::string& name : split_sources(s.sources)) {
    REFDEC_CHECK(name != "mixture", "--sources: a mixture cannot be its own source");
    if (name == "index" && !s.index_pooled) {  // the index and the request's own text, a source each
      for (auto& d : index_sources(make_index(s), s.index_drafter)) sources.emplace_back(std::move(d));
      continue;
    }
    sources.push_back(make_single(name, s));
  }
  MixtureOptions options = s.mixture;
  options.cost = step_cost_of(s);
  options.combine = s.combine == "noisy-or" ? MixtureCombine::noisy_or : MixtureCombine::max;
  MixtureDrafter mixture(std::move(sources), options);
  mixture_stats = mixture.statistics();
  return AnyDrafter(std::move(mixture));
}

// One drafter's settings.
nlohmann::json drafter_json(const std::string& name, const Settings& s) {
  if (name == "prompt-lookup")
    return {{"max_match", s.lookup.max_match}, {"min_match", s.lookup.min_match}, {"continuation", s.lookup.continuation},
            {"full_span_only", s.lookup.full_span_only}};
  if (name == "llma") return {{"min_match", s.llma.min_match}, {"continuation", s.llma.continuation}, {"spans", s.llma.spans}, {"self_reference", s.llma.self_reference}};
  if (name == "ngram-trie")
    return {{"ngram", s.trie.ngram}, {"max_match", s.trie.max_match}, {"max_nodes", s.trie.max_nodes}, {"grow", s.trie.grow}};
  if (name == "ngram-pool") return {{"ngram", s.pool.ngram}, {"guesses", s.pool.guesses}};
  if (name == "history")
    return {{"history_tokens", s.history_tokens}, {"ngram", s.trie.ngram}, {"max_match", s.trie.max_match},
            {"max_nodes", s.trie.max_nodes}, {"grow", s.trie.grow}};
  if (name == "index")
    return {{"index_max_tokens", s.index.max_tokens}, {"index_depth", s.index.depth}, {"max_match", s.index_drafter.max_match}, {"request", s.index_drafter.request}, {"pooled", s.index_pooled},
            {"static", fs::path(s.index_static).filename().string()},
            {"continuation", s.index_drafter.continuation}};
  if (name == "suffix")
    return {{"max_depth", s.suffix.max_depth}, {"max_spec_factor", s.suffix.max_spec_factor},
            {"max_spec_offset", s.suffix.max_spec_offset}, {"min_token_prob", s.suffix.min_token_prob},
            {"max_cached_requests", s.suffix.max_cached_requests}, {"tree", s.suffix.tree}};
  if (name == "rest")
    return {{"datastore", fs::path(s.datastore).filename().string()}, {"max_match", s.rest.max_match}, {"continuation", s.rest.continuation},
            {"max_nodes", s.rest.max_nodes}, {"max_occurrences", s.rest.max_occurrences}};
  return nlohmann::json::object();
}

nlohmann::json settings_json(const Settings& s) {
  nlohmann::json j{{"budget", s.budget}};
  if (s.passes > 1) j["passes"] = s.passes;
  if (s.drafter != "mixture") {
    j.update(drafter_json(s.drafter, s));
    return j;
  }
  // A mixture: its own options, then each source's settings under its name (they share keys).
  j.update({{"combine", s.combine}, {"prior_mean", s.mixture.prior_mean}, {"prior_strength", s.mixture.prior_strength},
            {"half_life", s.mixture.half_life}, {"max_depth", s.mixture.max_depth},
            {"source_budget", s.mixture.source_budget}, {"match_context", s.mixture.match_context},
            {"recent_rate", s.mixture.recent_rate}, {"scorer_rate", s.mixture.scorer_rate}, {"calibration_half_life", s.mixture.calibration_half_life},
            {"calibration_prior", s.mixture.calibration_prior}});
  if (!s.step_cost.empty()) j["step_cost"] = s.step_cost;
  if (!s.step_cost_file.empty()) j["step_cost_file"] = fs::path(s.step_cost_file).filename().string();
  if (!s.price_file.empty()) j["price_step_cost_file"] = fs::path(s.price_file).filename().string();
  for (const std::string& name : split_sources(s.sources)) j[name] = drafter_json(name, s);
  return j;
}

nlohmann::json stats_json(const ReplayStats& st) {
  nlohmann::json acc = nlohmann::json::array();
  for (std::size_t d = 0; d < st.drafting.proposed_at_depth.size(); ++d) acc.push_back(st.drafting.acceptance_at(d));
  return {{"traces", st.traces},
          {"tokens", st.tokens},
          {"steps", st.steps},
          {"tokens_per_step", st.tokens_per_step()},
          {"proposed_tokens", st.drafting.proposed_tokens},
          {"accepted_tokens", st.drafting.accepted_tokens},
          {"acceptance_by_position", acc},
          {"step_micros_median", st.step_micros_quantile(0.5)},
          {"step_micros_p99", st.step_micros_quantile(0.99)}};
}

// Per source: the rate at which its nodes were right given that their parent was, by depth (from
// all of its merged nodes, cut or not), and the accepted draft tokens it had proposed.
nlohmann::json mixture_json(const MixtureStatistics& st) {
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& src : st.sources()) {
    nlohmann::json rate = nlohmann::json::array();
    for (std::size_t d = 0; d < src.evaluated.size(); ++d)
      rate.push_back(src.right_at(d));
    sources.push_back({{"name", src.name}, {"accepted_tokens", src.accepted_tokens}, {"acceptance_by_depth", rate}});
  }
  return {{"mean_budget", st.mean_budget()}, {"sources", sources}};
}

// The forced trajectories: per trace, [draft nodes, accepted draft tokens] per step, for a model
// benchmark to re-run exactly these steps. Pairs rather than objects keep the file compact; a
// step emits accepted + 1 tokens except a last one that reaches output_tokens without a bonus.
nlohmann::json trajectories_json(const Settings& s, const std::string& drafter_name, const ReplayStats& st) {
  nlohmann::json traces = nlohmann::json::array();
  for (const TrajectoryLog& log : st.trajectories) {
    nlohmann::json steps = nlohmann::json::array();
    std::int64_t output_tokens = 0;
    for (const ReplayStep& step : log.steps) {
      steps.push_back({step.nodes, step.accepted});
      output_tokens += step.emitted;
    }
    traces.push_back({{"id", log.id},
                      {"category", log.category},
                      {"context_tokens", log.context_tokens},
                      {"output_tokens", output_tokens},
                      {"steps", std::move(steps)}});
  }
  return {{"dataset", s.dataset},
          {"drafter", drafter_name},
          {"settings", settings_json(s)},
          {"budget", s.budget},
          {"traces", std::move(traces)}};
}

void print_mixture(const MixtureStatistics& st) {
  std::printf("\nmixture: %.1f draft nodes per step; per source, accepted draft tokens it proposed and how often its\n"
              "nodes were right given their parent was, by depth:",
              st.mean_budget());
  for (const auto& src : st.sources()) {
    std::printf("\n  %-14s %8lld |", src.name.c_str(), static_cast<long long>(src.accepted_tokens));
    for (std::size_t d = 0; d < std::min<std::size_t>(src.evaluated.size(), 12); ++d)
      std::printf(" %.3f", src.right_at(d));
  }
}

void print_row(const std::string& name, const ReplayStats& st) {
  std::printf("%-16s %7lld %8lld %7lld %7.3f %9.2f %9.2f\n", name.c_str(), static_cast<long long>(st.traces),
              static_cast<long long>(st.tokens), static_cast<long long>(st.steps), st.tokens_per_step(),
              st.step_micros_quantile(0.5), st.step_micros_quantile(0.99));
}

// --batch: the traces decoded s.batch at a time under each policy, with no model (replay_batch()).
int run_batch(const Settings& s, const std::vector<Trace>& traces) {
  const StepCost cost = step_cost_of(s);
  REFDEC_CHECK(s.price_file.empty() || !cost.is_flat(), "--price-step-cost-file needs --step-cost or --step-cost-file (what the drafts are chosen by)");
  const std::optional<StepCost> price =
      s.price_file.empty() ? std::nullopt : std::optional<StepCost>(read_step_cost(s.price_file, "--price-step-cost-file"));
  std::map<std::string, double> plain_by_category;  // plain decoding's tokens per second in each category
  const std::pair<const char*, BatchPolicy> policies[] = {{"plain", BatchPolicy::kPlain},
                                                          {"fixed budget", BatchPolicy::kFixed},
                                                          {"per-request adaptive", BatchPolicy::kPerRequest},
                                                          {"one budget for the step", BatchPolicy::kAllocator}};
  nlohmann::json rows = nlohmann::json::array();
  double plain_rate = 0.0;
  if (!s.json)
    std::printf("dataset %s, drafter %s, batch %zu, budget %zu, overhead %g s per sequence beyond the first, settings %s\n\n"
                "| policy | tokens per %s | x plain | tokens per sequence step | rows per step | expected / produced tokens |\n"
                "|---|---|---|---|---|---|\n",
                s.dataset.c_str(), s.drafter.c_str(), s.batch, s.budget, s.batch_overhead, settings_json(s).dump().c_str(),
                cost.is_flat() ? "unit of cost" : "second");
  for (const auto& [name, policy] : policies) {
    std::vector<AnyDrafter> drafters;
    for (std::size_t b = 0; b < s.batch; ++b) {
      std::shared_ptr<const MixtureStatistics> unused;
      drafters.push_back(make_drafter(s, unused));
    }
    const BatchReplayStats st = replay_batch(drafters, traces, s.budget, policy, cost, s.batch_overhead, price);
    if (policy == BatchPolicy::kPlain) {
      plain_rate = st.tokens_per_second();
      for (const auto& [category, share] : st.by_category) plain_by_category[category] = share.tokens_per_second();
    }
    nlohmann::json categories = nlohmann::json::object();
    for (const auto& [category, share] : st.by_category) {
      const auto plain = plain_by_category.find(category);  // none where plain decoding's batch never reached it
      categories[category] = {{"tokens", share.tokens},
                              {"seconds", share.seconds},
                              {"x_plain", plain != plain_by_category.end() ? share.tokens_per_second() / plain->second : 0.0}};
    }
    const double per_step_rows = static_cast<double>(st.rows) / static_cast<double>(std::max<std::int64_t>(st.steps, 1));
    const double expected = policy == BatchPolicy::kAllocator ? st.expected_tokens / static_cast<double>(st.tokens) : 0.0;
    rows.push_back({{"policy", name},
                    {"tokens_per_second", st.tokens_per_second()},
                    {"x_plain", st.tokens_per_second() / plain_rate},
                    {"tokens_per_sequence_step", st.tokens_per_sequence_step()},
                    {"rows_per_step", per_step_rows},
                    {"steps", st.steps},
                    {"tokens", st.tokens},
                    {"expected_over_produced", expected},
                    {"by_category", std::move(categories)}});
    if (s.json) continue;
    char ratio[32] = "-";
    if (policy == BatchPolicy::kAllocator) std::snprintf(ratio, sizeof ratio, "%.3f", expected);
    std::printf("| %s | %.3f | %.3f | %.3f | %.1f | %s |\n", name, st.tokens_per_second(), st.tokens_per_second() / plain_rate,
                st.tokens_per_sequence_step(), per_step_rows, ratio);
  }
  if (!s.json && plain_by_category.size() > 1) {  // each category's x plain, its steps' seconds shared by their rows
    std::printf("\nx plain by category (a batch step's seconds shared by its sequences' rows):\n\n| policy |");
    for (const auto& [category, rate] : plain_by_category) std::printf(" %s |", category.c_str());
    std::printf("\n|---|");
    for (std::size_t c = 0; c < plain_by_category.size(); ++c) std::printf("---|");
    std::printf("\n");
    for (const auto& row : rows) {  // the JSON rows above: one place for each figure
      std::printf("| %s |", row["policy"].get<std::string>().c_str());
      for (const auto& [category, rate] : plain_by_category) {
        const auto& of = row["by_category"];
        if (of.contains(category))
          std::printf(" %.3f |", of[category]["x_plain"].get<double>());
        else
          std::printf(" - |");
      }
      std::printf("\n");
    }
  }
  if (s.json)
    std::cout << nlohmann::json{{"dataset", s.dataset}, {"drafter", s.drafter}, {"batch", s.batch}, {"budget", s.budget},
                                {"batch_overhead", s.batch_overhead}, {"settings", settings_json(s)}, {"policies", rows}}
                     .dump(2)
              << "\n";
  return 0;
}

int run(const Settings& s) {
  const fs::path data = s.data_dir.empty() ? data_dir_or(REFDEC_DEFAULT_DATA_DIR) : fs::path(s.data_dir);
  const fs::path tok_path = s.tokenizer.empty() ? data / "tokenizers" / "llama2.model" : fs::path(s.tokenizer);
  // Created first so that an unwritable path fails at once, not after loading and a long replay;
  // written to a temporary and renamed at the end, never over an input (the dataset, the
  // tokenizer, the datastore) nor over a device or FIFO.
  std::optional<OutputFile> trajectories_file, traces_file;
  std::vector<fs::path> inputs = {tok_path, data / "data/spec_bench/question.jsonl",
                                  data / "data/spec_bench/vicuna-7b-v1.3-greedy.jsonl", data / "data/llma/rag.jsonl"};
  if (s.dataset != "specbench" && s.dataset != "llma-rag") inputs.emplace_back(s.dataset);
  if (!s.datastore.empty()) inputs.emplace_back(s.datastore);
  if (!s.index_static.empty()) inputs.emplace_back(s.index_static);
  if (!s.trajectories.empty()) trajectories_file.emplace(s.trajectories, "--trajectories file", inputs);
  if (!s.dump_traces.empty()) traces_file.emplace(s.dump_traces, "--dump-traces file", inputs);
  const auto load_start = std::chrono::steady_clock::now();
  std::vector<Trace> traces;
  if (s.dataset == "specbench" || s.dataset == "llma-rag") {
    const auto tokenizer = SentencePieceTokenizer::load(tok_path);
    traces = s.dataset == "specbench"
                 ? load_specbench(data / "data/spec_bench/question.jsonl",
                                  data / "data/spec_bench/vicuna-7b-v1.3-greedy.jsonl", tokenizer)
                 : load_llma_rag(data / "data/llma/rag.jsonl", tokenizer);
  } else {
    REFDEC_CHECK(fs::is_regular_file(s.dataset), "--dataset: '" << s.dataset << "' is neither specbench, llma-rag nor a file");
    if (fs::is_regular_file(tok_path)) {
      const auto tokenizer = SentencePieceTokenizer::load(tok_path);
      traces = load_generic_traces(s.dataset, &tokenizer);
    } else {
      traces = load_generic_traces(s.dataset, nullptr);
    }
  }
  if (s.limit > 0 && traces.size() > s.limit) traces.resize(s.limit);
  REFDEC_CHECK(!traces.empty(), "no traces in " << s.dataset);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  if (traces_file) {  // the generic form with token ids: tools that cannot load SentencePiece read it
    for (const Trace& t : traces) {
      nlohmann::json row{{"id", t.id}, {"context", t.context}, {"output", t.output}};
      if (!t.category.empty()) row["category"] = t.category;
      if (!t.references.empty()) row["references"] = t.references;
      traces_file->write(row.dump() + "\n");
    }
    traces_file->commit();
  }

  std::shared_ptr<const MixtureStatistics> mixture_stats;
  if (s.batch > 0) return run_batch(s, traces);
  AnyDrafter drafter = make_drafter(s, mixture_stats);
  ReplayOptions options;
  options.budget = s.budget;
  options.record_steps = !s.trajectories.empty();
  // Earlier passes only fill what the drafter keeps across sequences (history, global trees): a
  // server that has answered every question once before.
  for (std::size_t pass = 1; pass < s.passes; ++pass) (void)replay(drafter, traces, ReplayOptions{.budget = s.budget});
  const auto start = std::chrono::steady_clock::now();
  AcceptanceCalibration calibration;
  const ReplayReport report = replay(drafter, traces, options, s.calibration ? &calibration : nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  if (options.record_steps) {
    trajectories_file->write(trajectories_json(s, drafter.name(), report.overall).dump() + "\n");
    trajectories_file->commit();
  }

  if (s.json) {
    nlohmann::json j{{"dataset", s.dataset},
                     {"drafter", drafter.name()},
                     {"settings", settings_json(s)},
                     {"overall", stats_json(report.overall)},
                     {"by_category", nlohmann::json::object()},
                     {"load_seconds", load_seconds},
                     {"replay_seconds", seconds},
                     {"peak_rss_mib", peak_mib}};
    for (const auto& [name, st] : report.by_category) j["by_category"][name] = stats_json(st);
    if (mixture_stats) j["mixture"] = mixture_json(*mixture_stats);
    if (s.calibration) {
      j["calibration"] = nlohmann::json::array();
      for (const auto& b : calibration.bins())
        j["calibration"].push_back({{"nodes", b.nodes}, {"estimated", b.estimated}, {"accepted", b.accepted}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (s.markdown) {  // one table row for docs/: τ overall, then per category, then latency
    std::printf("| category |");
    for (const auto& [name, st] : report.by_category) std::printf(" %s |", name.c_str());
    std::printf(" overall | median µs | p99 µs |\n| %s %s |", drafter.name().c_str(), settings_json(s).dump().c_str());
    for (const auto& [name, st] : report.by_category) std::printf(" %.3f |", st.tokens_per_step());
    std::printf(" **%.3f** | %.2f | %.2f |\n", report.overall.tokens_per_step(), report.overall.step_micros_quantile(0.5),
                report.overall.step_micros_quantile(0.99));
    return 0;
  }
  std::printf("dataset %s, drafter %s, settings %s\n", s.dataset.c_str(), drafter.name().c_str(),
              settings_json(s).dump().c_str());
  std::printf("%-16s %7s %8s %7s %7s %9s %9s\n", "category", "traces", "tokens", "steps", "tau", "med_us", "p99_us");
  for (const auto& [name, st] : report.by_category) print_row(name, st);
  print_row("overall", report.overall);
  std::printf("acceptance by draft position:");
  for (std::size_t d = 0; d < std::min<std::size_t>(report.overall.drafting.proposed_at_depth.size(), 16); ++d)
    std::printf(" %.3f", report.overall.drafting.acceptance_at(d));
  if (s.calibration) {
    std::printf("\nestimated acceptance per decile: nodes, mean estimate, share accepted\n");
    for (std::size_t k = 0; k < AcceptanceCalibration::kBins; ++k) {
      const auto& b = calibration.bins()[k];
      if (b.nodes == 0) continue;
      std::printf("  [%.1f, %.1f%s %10lld  %.3f  %.3f\n", static_cast<double>(k) / 10.0, static_cast<double>(k + 1) / 10.0,
                  k + 1 == AcceptanceCalibration::kBins ? "]" : ")", static_cast<long long>(b.nodes),
                  b.estimated / static_cast<double>(b.nodes), static_cast<double>(b.accepted) / static_cast<double>(b.nodes));
    }
  }
  if (mixture_stats) print_mixture(*mixture_stats);
  std::printf("\nloaded in %.2f s, replayed in %.2f s, peak RSS %.1f MiB\n", load_seconds, seconds, peak_mib);
  return 0;
}

// The command line into `s`.
void add_options(CLI::App& app, Settings& s) {
  app.add_option("--dataset", s.dataset, "specbench, llma-rag, or a JSONL file of {context, output, references?, category?}");
  app.add_option("--data-dir", s.data_dir, "the shared data directory (default $REFDEC_DATA_DIR, else ../shared)");
  app.add_option("--tokenizer", s.tokenizer, "SentencePiece model (default DATA_DIR/tokenizers/llama2.model)");
  app.add_option("--drafter", s.drafter, "none | prompt-lookup | llma | ngram-trie | ngram-pool (lookahead's pool; its window needs the model) | rest | history (the n-gram trie over the outputs of the traces replayed before) | index (the shared reference index over the outputs of the traces replayed before) | suffix (the SuffixDecoding baseline) | mixture")->capture_default_str();
  app.add_option("--budget", s.budget, "draft nodes per step after the cut")->capture_default_str()
      ->transform(cli::integer_in(0, cli::kMaxBudget));
  app.add_option("--passes", s.passes, "replay the dataset N times with the same drafter and report the last pass (2: every answer seen once before)")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 16));
  app.add_option("--limit", s.limit, "replay only the first N traces (0: all)")
      ->transform(cli::integer_in(0, cli::kMaxCount));
  app.add_flag("--json", s.json, "print one JSON object");
  app.add_flag("--markdown", s.markdown, "print a Markdown table row (τ per category, overall, latency)");
  app.add_flag("--calibration", s.calibration,
               "also print, per decile of the nodes' estimated acceptance (what a batch budget allocates by: a "
               "cost-aware drafter's scores, else its acceptance by depth), how many were accepted");
  app.add_option("--dump-traces", s.dump_traces,
                 "also write FILE: the traces replayed (after --limit) as JSONL of token ids, the generic --dataset form "
                 "(refdec-speed-bench --live reads it: it cannot load SentencePiece next to libtorch)");
  app.add_option("--trajectories", s.trajectories,
                 "also write FILE: JSON of each trace's steps as [draft nodes, accepted draft tokens] (forced trajectories)");
  app.add_option("--lookup-max-match", s.lookup.max_match, "prompt lookup: longest suffix looked up")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--lookup-min-match", s.lookup.min_match, "prompt lookup: shortest suffix looked up")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_flag("--full-span-only,!--partial-spans", s.lookup.full_span_only,
               "prompt lookup: skip matches whose continuation runs past the end")->capture_default_str();
  app.add_option("--lookup-continuation", s.lookup.continuation, "prompt lookup: tokens copied")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--llma-min-match", s.llma.min_match, "llma: shortest match (LLMA's n)")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--llma-continuation", s.llma.continuation, "llma: tokens copied per span (LLMA's k)")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--llma-spans", s.llma.spans, "llma: spans per step")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_flag("--self-reference,!--no-self-reference", s.llma.self_reference,
               "llma: also copy from the context and output so far")->capture_default_str();
  app.add_option("--trie-ngram", s.trie.ngram, "ngram-trie: window length N")->capture_default_str()
      ->transform(cli::integer_in(2, cli::kMaxSpan));
  app.add_option("--trie-max-match", s.trie.max_match, "ngram-trie: window prefix length L_p")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--trie-max-nodes", s.trie.max_nodes, "ngram-trie: draft nodes per step (num_draft)")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxBudget));
  app.add_flag("--grow,!--frozen", s.trie.grow, "ngram-trie: index accepted tokens too (--frozen: the paper's trie)")
      ->capture_default_str();
  app.add_option("--pool-ngram", s.pool.ngram, "ngram-pool: n-gram size N (candidates are N-1 tokens)")->capture_default_str()
      ->transform(cli::integer_in(2, cli::kMaxSpan));
  app.add_option("--pool-guesses", s.pool.guesses, "ngram-pool: n-grams kept per first token and verified per step")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--datastore", s.datastore, "rest: datastore file (refdec-datastore build)");
  app.add_option("--rest-max-match", s.rest.max_match, "rest: longest context suffix searched (REST's n_max)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalMatch));
  app.add_option("--rest-continuation", s.rest.continuation, "rest: tokens read after each occurrence (REST's m)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalContinuation));
  app.add_option("--rest-max-nodes", s.rest.max_nodes, "rest: draft nodes kept (REST's c)")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalNodes));
  app.add_option("--rest-max-occurrences", s.rest.max_occurrences, "rest: occurrences read per step")->capture_default_str()
      ->transform(cli::integer_in(1, kMaxRetrievalOccurrences));
  app.add_option("--history-tokens", s.history_tokens, "history: tokens of earlier outputs kept at most")
      ->capture_default_str()
      ->transform(cli::integer_in(1, OutputHistory::kMaxTokens));
  app.add_option("--index-static", s.index_static,
                 "index: a datastore file (refdec-datastore build) held as a static segment of the index, read in place");
  app.add_option("--index-max-tokens", s.index.max_tokens, "index: tokens of earlier outputs kept at most")
      ->capture_default_str()
      ->transform(cli::integer_in(1, std::int64_t{1} << 31));
  app.add_option("--index-max-match", s.index_drafter.max_match, "index: longest context suffix searched")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 64));
  app.add_flag("--index-request,!--no-index-request", s.index_drafter.request,
               "index: also search the trace's references and its own context (--no-index-request: the index only)")
      ->capture_default_str();
  app.add_flag("--index-pooled", s.index_pooled,
               "index in a mixture: one source over the index and the request's own text together, instead of a source each");
  app.add_option("--index-continuation", s.index_drafter.continuation, "index: tokens read after each occurrence")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 1024));
  app.add_option("--suffix-max-depth", s.suffix.max_depth, "suffix: depth of its suffix trees (match + speculation)")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 1024));
  app.add_option("--suffix-spec-factor", s.suffix.max_spec_factor, "suffix: tokens speculated per matched token")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1024.0));
  app.add_option("--suffix-spec-offset", s.suffix.max_spec_offset, "suffix: tokens speculated beyond factor * match length")
      ->capture_default_str()
      ->check(CLI::Range(-1024.0, 1024.0));
  app.add_option("--suffix-min-prob", s.suffix.min_token_prob, "suffix: least estimated probability of a speculated token")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--suffix-tree", s.suffix.tree, "suffix: speculate a tree, not a path (ArcticInference's use_tree_spec)");
  app.add_option("--suffix-max-requests", s.suffix.max_cached_requests, "suffix: responses its global tree keeps (0: none)")
      ->capture_default_str()
      ->transform(cli::integer_in(0, std::int64_t{1} << 40));
  app.add_option("--sources", s.sources,
                 "mixture: its source drafters, comma-separated, each set by its own flags (default: llma,ngram-trie,rest "
                 "with --datastore, else llma,ngram-trie)");
  app.add_option("--prior-mean", s.mixture.prior_mean, "mixture: prior acceptance of a node given its parent's")
      ->capture_default_str();
  app.add_option("--prior-strength", s.mixture.prior_strength, "mixture: weight of the prior in observations")
      ->capture_default_str();
  app.add_option("--half-life", s.mixture.half_life, "mixture: steps after which an observation weighs half (0: never)")
      ->capture_default_str();
  app.add_option("--max-depth", s.mixture.max_depth, "mixture: depths with statistics of their own")->capture_default_str()
      ->transform(cli::integer_in(1, 1024));
  app.add_option("--source-budget", s.mixture.source_budget,
                 "mixture: draft nodes each source is asked for at least, whatever --budget (0: the budget)")
      ->capture_default_str()
      ->transform(cli::integer_in(0, static_cast<std::int64_t>(MixtureDrafter::kMaxSourceBudget)));
  app.add_flag("--match-context,!--no-match-context", s.mixture.match_context,
               "mixture: condition the estimates on each source's match length")
      ->capture_default_str();
  app.add_option("--recent-rate", s.mixture.recent_rate,
                 "mixture: weight of the newest step in each source's average recent reach (0: off)")
      ->capture_default_str()
      ->transform(cli::finite_in(0.0, 1.0));
  app.add_option("--scorer-rate", s.mixture.scorer_rate,
                 "mixture: learning rate of the learned scorer that corrects the per-source estimates (0: off)")
      ->capture_default_str()
      ->transform(cli::finite_in(0.0, 1.0));
  app.add_option("--calibration-half-life", s.mixture.calibration_half_life,
                 "mixture: steps after which a step weighs half in the per-sequence calibration of the adaptive "
                 "budget (0: off)")
      ->capture_default_str()
      ->transform(cli::finite_in(0.0, 1e9));
  app.add_option("--calibration-prior", s.mixture.calibration_prior,
                 "mixture: weight of the calibration's prior ratio 1, in expected accepted tokens")
      ->capture_default_str()
      ->transform(cli::finite_in(1e-9, 1e9));
  app.add_option("--combine", s.combine, "mixture: estimates of agreeing sources, max | noisy-or")
      ->check(CLI::IsMember({"max", "noisy-or"}))
      ->capture_default_str();
  app.add_option("--step-cost", s.step_cost, "mixture: affine step cost A B (seconds = A + B * tokens; default flat)")
      ->expected(2);
  app.add_option("--step-cost-file", s.step_cost_file,
                 "mixture: the step cost measured on a model (the --json file of refdec-speed-bench)")
      ->excludes("--step-cost");
  app.add_option("--batch", s.batch,
                 "decode the traces this many at a time, with no model, under each policy (plain, fixed budget, per-request "
                 "adaptive, one budget for the step) and report tokens per second under --step-cost/--step-cost-file "
                 "(and --batch-overhead), and the allocator's expected tokens over those the walk produced")
      ->transform(cli::integer_in(0, cli::kMaxBatch));
  app.add_option("--batch-overhead", s.batch_overhead, "--batch: seconds a step costs per sequence beyond the first")
      ->transform(cli::finite_in(0.0, 1e3));
  app.add_option("--price-step-cost-file", s.price_file,
                 "--batch: price the steps at this measured step cost (a refdec-speed-bench --json file) while the drafts are "
                 "still chosen by --step-cost/--step-cost-file: a calibration taken at another speed of the machine against the "
                 "one it runs at");
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Replays a drafter over real LLM outputs and reports tokens per step (τ)"};
  add_options(app, s);
  CLI11_PARSE(app, argc, argv);
  if (s.sources.empty()) {  // REST is a default source only where it has a datastore to read
    s.sources = s.datastore.empty() ? "llma,ngram-trie" : "llma,ngram-trie,rest";
    if (s.drafter == "mixture" && s.datastore.empty())
      std::cerr << "refdec-replay: the mixture drafts with llma,ngram-trie (REST, a default source, needs --datastore FILE)\n";
  }
  try {
    return run(s);
  } catch (const std::exception& e) {
    std::cerr << "refdec-replay: " << e.what() << "\n";
    return 1;
  }
}
