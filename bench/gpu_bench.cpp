// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-gpu-bench: decoding speed of a real-shaped model (Llama-2-7B by default, random weights)
// against the memory-bandwidth limit, and forced trajectories (the LLMA paper's method): the steps
// a replay produced (draft nodes verified, tokens accepted) run through the model, timed against
// plain decoding of the same tokens; then a batch sweep with the budget chosen per batch size by a
// measured trial. On a CPU with `--shape tiny` it is the smoke test that keeps it working.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "eval/cli.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/file_io.hpp"
#include "refdec/torch/dtype.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/verifier.hpp"

using namespace refdec;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Waits for the device: a one-element copy to the host.
void sync(const at::Tensor& t) { (void)t.reshape({-1})[0].item<double>(); }

LlamaConfig shape(const std::string& name) {
  LlamaConfig c;
  if (name == "7b") {  // Llama-2-7B
    c.dim = 4096, c.hidden_dim = 11008, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 32, c.vocab_size = 32000;
    c.max_seq_len = 4096, c.tied_embeddings = false, c.rope_style = RopeStyle::kHalf;
  } else if (name == "tiny") {  // stories260K's shape
    c.dim = 64, c.hidden_dim = 172, c.n_layers = 5, c.n_heads = 8, c.n_kv_heads = 4, c.vocab_size = 512;
    c.max_seq_len = 4096;
  } else {
    throw Error("unknown --shape '" + name + "' (7b, tiny)");
  }
  return c;
}


std::int64_t weight_bytes(const LlamaModel& m) {
  const auto bytes = [](const at::Tensor& t) { return t.numel() * static_cast<std::int64_t>(t.element_size()); };
  const auto& w = m.weights();
  std::int64_t n = bytes(w.embedding) + bytes(w.final_norm);
  if (!w.output.is_same(w.embedding)) n += bytes(w.output);
  for (const auto& l : w.layers)
    for (const at::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w1, &l.w2, &l.w3}) n += bytes(*t);
  return n;
}

// Device memory bandwidth in bytes/s: copies of a `bytes`-sized buffer (each reads and writes it).
double measure_bandwidth(at::Device device, std::int64_t bytes, int repeats) {
  const auto opt = at::TensorOptions().dtype(at::kByte).device(device);
  auto src = at::ones({bytes}, opt), dst = at::empty({bytes}, opt);
  dst.copy_(src);
  sync(dst);
  const auto t0 = Clock::now();
  for (int r = 0; r < repeats; ++r) dst.copy_(src);
  sync(dst);
  return 2.0 * static_cast<double>(bytes) * repeats / seconds_since(t0);
}

// One replayed trace: per step, draft nodes verified and draft tokens accepted.
struct Trajectory {
  std::string category;
  std::size_t context = 0;  // prompt tokens of the trace (0: unknown, --context is used)
  std::int64_t output = 0;  // output tokens of the trace (0: unknown)
  std::vector<std::pair<std::int32_t, std::int32_t>> steps;  // [steps] (nodes, accepted)
};

// A replay's trajectories (refdec-replay --trajectories), or a synthetic one; only traces with
// at least one step.
struct TrajectorySet {
  std::string name;
  std::vector<Trajectory> traces;
};

TrajectorySet load_trajectories(const std::string& path) {
  const auto j = nlohmann::json::parse(read_file_bytes(path, "trajectories file"));  // regular files only
  TrajectorySet set;
  set.name = j.at("drafter").get<std::string>() + " @" + std::to_string(j.at("budget").get<std::int64_t>());
  for (const auto& t : j.at("traces")) {
    Trajectory tr;
    tr.category = t.value("category", std::string("all"));
    tr.context = t.value("context_tokens", std::size_t{0});
    tr.output = t.value("output_tokens", std::int64_t{0});
    for (const auto& s : t.at("steps")) {
      const auto n = s.at(0).get<std::int32_t>(), a = s.at(1).get<std::int32_t>();
      REFDEC_CHECK(n >= 0 && a >= 0 && a <= n, path << ": a step of " << n << " nodes accepting " << a);
      tr.steps.emplace_back(n, a);
    }
    if (!tr.steps.empty()) set.traces.push_back(std::move(tr));
  }
  REFDEC_CHECK(!set.traces.empty(), path << " holds no trace with a step");
  return set;
}

// A fixed pattern standing in for a replay when none is given (the smoke test): 16 nodes per step,
// 0..4 accepted in turn.
TrajectorySet synthetic_trajectories() {
  TrajectorySet set{"synthetic", {}};
  for (int t = 0; t < 4; ++t) {
    Trajectory tr{t % 2 == 0 ? "even" : "odd", 0, 0, {}};
    for (int s = 0; s < 40; ++s) tr.steps.emplace_back(16, (s + t) % 5);
    set.traces.push_back(std::move(tr));
  }
  return set;
}

// Runs steps through the model exactly as a session does (plan, forward pass, argmax copied to
// the host, walk, KV commit of the keep plan), with the accepted counts forced: per sequence b a
// chain of nodes[b] + 1 tokens, of which accepted[b] + 1 are kept. Returns the wall time.
class ForcedDecoder {
 public:
  ForcedDecoder(const LlamaModel& model, std::int64_t batch, std::size_t context, std::int64_t capacity)
      : model_(model), store_(model.kv_layout(), capacity), batch_(batch) {
    REFDEC_CHECK(context > 0 && batch > 0, "forced decoding needs a context and a batch of at least one");
    for (std::int64_t b = 0; b < batch; ++b) store_.add();
    std::vector<Token> prefix(context);
    for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = token(i);
    const std::vector<LinearTree> chains(static_cast<std::size_t>(batch), LinearTree::chain(prefix));
    const std::vector<std::uint8_t> prefill(static_cast<std::size_t>(batch), 1);
    plan_step(chains, {}, store_.lengths(), model_.vocab_size(), plan_);
    verify(model_, store_, plan_, verification_, times_, StepExtras{.prefill = prefill});
    store_.commit(verification_.keep);
  }

  double step(std::span<const std::int32_t> nodes, std::span<const std::int32_t> accepted) {
    const auto t0 = Clock::now();
    std::vector<LinearTree> trees(static_cast<std::size_t>(batch_));
    for (std::size_t b = 0; b < trees.size(); ++b) {
      std::vector<Token> chain(static_cast<std::size_t>(nodes[b] + 1));
      for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = token(i + 7);
      trees[b] = LinearTree::chain(chain);
    }
    plan_step(trees, {}, store_.lengths(), model_.vocab_size(), plan_);
    verify(model_, store_, plan_, verification_, times_);
    for (std::size_t b = 0; b < trees.size(); ++b) {  // the forced outcome replaces the walk's
      auto& path = verification_.accepted[b].nodes;
      path.resize(static_cast<std::size_t>(std::min(accepted[b], nodes[b])));
      std::iota(path.begin(), path.end(), 1);
    }
    keep_accepted(plan_, verification_.accepted, verification_.keep);
    store_.commit(verification_.keep);
    return seconds_since(t0);
  }

 private:
  Token token(std::size_t i) const { return static_cast<Token>((i * 7919 + 3) % static_cast<std::size_t>(model_.vocab_size())); }
  const LlamaModel& model_;
  ContiguousKvStore store_;
  std::int64_t batch_;
  StepPlan plan_;
  Verification verification_;
  StepTimes times_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"refdec-gpu-bench: plain vs speculative decoding speed of a real-shaped model, forced trajectories"};
  std::string shape_name = "7b", device_name = "cuda", dtype_name = "bf16", json_path;
  std::vector<std::string> trajectory_files;
  std::int64_t plain_tokens = 128, bandwidth_mib = 1024;
  std::size_t context = 512;
  std::size_t max_traces = 4, max_steps = 64, sweep_steps = 128;
  std::vector<std::int64_t> batches = {1, 4, 16, 64};
  app.add_option("--shape", shape_name, "7b (Llama-2-7B) or tiny (stories260K's shape)")->capture_default_str();
  app.add_option("--device", device_name, "cuda or cpu")->capture_default_str();
  app.add_option("--dtype", dtype_name, "bf16, fp16, fp32 or fp64")->capture_default_str();
  app.add_option("--trajectories", trajectory_files,
                 "refdec-replay --trajectories files (one per drafter and budget; default: a synthetic pattern)");
  app.add_option("--plain-tokens", plain_tokens, "tokens of plain decoding timed at batch 1")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--context", context, "cached tokens before the timed steps (at most; a trace's own prompt length when known)")->capture_default_str()->transform(cli::integer_in(1, 3000));
  app.add_option("--bandwidth-mib", bandwidth_mib, "buffer copied to measure memory bandwidth")->capture_default_str()
      ->transform(cli::integer_in(1, 65536));
  app.add_option("--max-traces", max_traces, "traces per category replayed through the model")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxCount));
  app.add_option("--max-steps", max_steps, "steps per trace")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--batches", batches, "batch sizes of the sweep")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--sweep-steps", sweep_steps, "steps timed per batch size in the sweep")->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    const at::Device device(device_name);
    REFDEC_CHECK(!device.is_cuda() || at::hasCUDA(), "--device cuda, but this libtorch sees no CUDA device");
    const auto dtype = parse_dtype(dtype_name);
    const LlamaConfig config = shape(shape_name);
    nlohmann::json report{{"shape", shape_name}, {"device", device_name}, {"dtype", dtype_name}, {"context", context}};
    // Rewritten after each part, so that a later failure (e.g. out of memory) keeps what was measured.
    const auto write_json = [&] {
      if (json_path.empty()) return;
      OutputFile out(json_path, "--json file");  // replaced whole, never a device or FIFO
      out.write(report.dump(2));
      out.write("\n");
      out.commit();
    };

    // 1. Memory bandwidth, weights, plain decoding at batch 1 against the roofline.
    const double bandwidth = measure_bandwidth(device, bandwidth_mib << 20, 10);
    const auto t_init = Clock::now();
    const LlamaModel model = LlamaModel::random(config, 1, dtype, device);
    const double init_seconds = seconds_since(t_init);
    const auto bytes = weight_bytes(model);
    const double roofline = bandwidth / static_cast<double>(bytes);
    GenerateOptions plain_opt;
    plain_opt.max_new_tokens = plain_tokens;
    plain_opt.budget = 0;
    Request req;
    req.prompt.assign(context, 1);
    GenerateOptions warm_up = plain_opt;
    warm_up.max_new_tokens = 4;
    (void)generate(model, req, AnyDrafter{}, warm_up);
    // Plain decoding in a session, timed after the prefill step.
    Session plain(model, ContiguousKvStore(model.kv_layout(), static_cast<std::int64_t>(context) + plain_tokens + 1), plain_opt);
    plain.add(req);
    plain.step();
    const auto t_plain = Clock::now();
    while (!plain.idle()) plain.step();
    const double batch1_tps = static_cast<double>(plain.stats().tokens) / seconds_since(t_plain);
    std::cout << std::fixed << std::setprecision(2) << "device " << device_name << ", " << shape_name << " " << dtype_name
              << ": weights " << static_cast<double>(bytes) / 1e9 << " GB (random init " << init_seconds << " s), bandwidth "
              << bandwidth / 1e9 << " GB/s, roofline " << roofline << " tokens/s\n"
              << "plain decoding, batch 1, context " << context << ": " << batch1_tps << " tokens/s = "
              << 100.0 * batch1_tps / roofline << "% of the roofline\n\n";
    report["weight_bytes"] = bytes;
    report["bandwidth_bytes_per_s"] = bandwidth;
    report["roofline_tokens_per_s"] = roofline;
    report["plain_tokens_per_s"] = batch1_tps;
    write_json();

    // 2. Forced trajectories at batch 1: per category, speculative steps vs plain steps for the
    // same tokens, both timed here.
    std::vector<TrajectorySet> sets;
    for (const auto& f : trajectory_files) sets.push_back(load_trajectories(f));
    if (sets.empty()) sets.push_back(synthetic_trajectories());
    // Each trace runs after its own prompt (capped at --context; --context when unknown).
    const auto trace_context = [&](const Trajectory& t) { return t.context > 0 ? std::min(t.context, context) : context; };
    const auto trace_capacity = [&](const Trajectory& t) {
      std::int64_t n = 0, widest = 0;
      for (std::size_t s = 0; s < std::min(max_steps, t.steps.size()); ++s)
        n += t.steps[s].second + 1, widest = std::max<std::int64_t>(widest, t.steps[s].first);
      return static_cast<std::int64_t>(trace_context(t)) + n + widest + 2;
    };
    std::cout << "| trajectories | category | traces | steps | τ | speculative ms/step | plain ms/token | speedup |\n"
              << "|---|---|---|---|---|---|---|---|\n";
    nlohmann::json forced = nlohmann::json::array();
    for (const auto& set : sets) {
      std::map<std::string, std::vector<const Trajectory*>> by_category;
      for (const auto& t : set.traces)
        if (by_category[t.category].size() < max_traces) by_category[t.category].push_back(&t);
      for (const auto& [category, traces] : by_category) {
        double spec_seconds = 0, plain_seconds = 0;
        std::int64_t steps = 0, tokens = 0;
        for (const Trajectory* t : traces) {
          ForcedDecoder spec(model, 1, trace_context(*t), trace_capacity(*t));
          ForcedDecoder base(model, 1, trace_context(*t), trace_capacity(*t));
          const std::int32_t zero = 0;
          std::int64_t done = 0;  // output tokens of this trace so far
          for (std::size_t s = 0; s < std::min(max_steps, t->steps.size()); ++s) {
            const auto [n, a] = t->steps[s];
            // The last step of an output may end with accepted drafts and no bonus token.
            const std::int64_t emitted = t->output > 0 ? std::min<std::int64_t>(a + 1, t->output - done) : a + 1;
            spec_seconds += spec.step(std::span<const std::int32_t>(&n, 1), std::span<const std::int32_t>(&a, 1));
            for (std::int64_t k = 0; k < emitted; ++k)
              plain_seconds += base.step(std::span<const std::int32_t>(&zero, 1), std::span<const std::int32_t>(&zero, 1));
            ++steps;
            tokens += emitted;
            done += emitted;
          }
        }
        const double speedup = plain_seconds / spec_seconds;
        std::cout << std::setprecision(3) << "| " << set.name << " | " << category << " | " << traces.size() << " | "
                  << steps << " | " << static_cast<double>(tokens) / static_cast<double>(steps) << " | "
                  << 1e3 * spec_seconds / static_cast<double>(steps) << " | "
                  << 1e3 * plain_seconds / static_cast<double>(tokens) << " | " << speedup << " |\n";
        forced.push_back({{"trajectories", set.name}, {"category", category}, {"steps", steps}, {"tokens", tokens},
                          {"speculative_seconds", spec_seconds}, {"plain_seconds", plain_seconds}, {"speedup", speedup}});
      }
    }
    report["forced"] = forced;
    write_json();

    // 3. Batch sweep: B slots run different traces. The budget adapts to the batch size by
    // measurement: a short trial of plain decoding and of every trajectory set (one per budget),
    // then the best of them is timed, so speculation is used only where it pays at that B.
    std::cout << "\n| batch | chosen | plain tokens/s | speculative tokens/s | ratio |\n|---|---|---|---|---|\n";
    nlohmann::json sweep = nlohmann::json::array();
    // The steps of B slots, [steps][B] (nodes, accepted): slot b replays traces first + b,
    // first + b + B, ... of `set` back to back (plain decoding, (0, 0), when `set` is null).
    using Plan = std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>>;
    const auto plan_slots = [](const TrajectorySet* set, std::size_t B, std::size_t steps, std::size_t first) {
      Plan plan(steps, std::vector<std::pair<std::int32_t, std::int32_t>>(B, {0, 0}));
      if (set == nullptr) return plan;
      const std::size_t n_traces = set->traces.size();
      std::vector<std::size_t> trace(B), step(B, 0);
      for (std::size_t b = 0; b < B; ++b) trace[b] = (first + b) % n_traces;
      for (std::size_t s = 0; s < steps; ++s)
        for (std::size_t b = 0; b < B; ++b) {
          if (step[b] == set->traces[trace[b]].steps.size()) trace[b] = (trace[b] + B) % n_traces, step[b] = 0;
          plan[s][b] = set->traces[trace[b]].steps[step[b]++];  // every trace has a step
        }
      return plan;
    };
    // Tokens/s of a plan, in a cache sized to what the plan keeps.
    const auto run_plan = [&](const Plan& plan) {
      const std::size_t B = plan.front().size();
      std::vector<std::int64_t> kept(B, 0);
      std::int64_t widest = 0;
      for (const auto& row : plan)
        for (std::size_t b = 0; b < B; ++b) kept[b] += row[b].second + 1, widest = std::max<std::int64_t>(widest, row[b].first);
      ForcedDecoder dec(model, static_cast<std::int64_t>(B), context,
                        static_cast<std::int64_t>(context) + *std::max_element(kept.begin(), kept.end()) + widest + 2);
      std::vector<std::int32_t> nodes(B), accepted(B);
      double seconds = 0;
      for (const auto& row : plan) {
        for (std::size_t b = 0; b < B; ++b) std::tie(nodes[b], accepted[b]) = row[b];
        seconds += dec.step(nodes, accepted);
      }
      return static_cast<double>(std::accumulate(kept.begin(), kept.end(), std::int64_t{0})) / seconds;
    };
    for (const std::int64_t B : batches) {
      REFDEC_CHECK(B > 0 && B <= 4096, "--batches: batch sizes must be in [1, 4096], got " << B);
      const auto slots = static_cast<std::size_t>(B);
      const std::size_t trial = std::max<std::size_t>(4, sweep_steps / 4);
      const TrajectorySet* chosen = nullptr;
      double best = run_plan(plan_slots(nullptr, slots, trial, 0));
      for (const auto& set : sets)
        if (const double rate = run_plan(plan_slots(&set, slots, trial, set.traces.size() / 2)); rate > best)
          best = rate, chosen = &set;
      const double plain_tps = run_plan(plan_slots(nullptr, slots, sweep_steps, 0));
      const double spec_tps = chosen != nullptr ? run_plan(plan_slots(chosen, slots, sweep_steps, 0)) : plain_tps;
      const std::string name = chosen != nullptr ? chosen->name : "plain (budget 0)";
      std::cout << std::setprecision(1) << "| " << B << " | " << name << " | " << plain_tps << " | " << spec_tps << " | "
                << std::setprecision(3) << spec_tps / plain_tps << " |\n";
      sweep.push_back({{"batch", B}, {"chosen", name}, {"plain_tokens_per_s", plain_tps}, {"speculative_tokens_per_s", spec_tps}});
    }
    report["batch_sweep"] = sweep;
    write_json();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "refdec-gpu-bench: " << describe(e) << '\n';  // no libtorch stack trace
    return 1;
  }
}
