// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-speed-bench: decoding speed of a real-shaped model (random weights) on the CPU or a GPU.
// 1. the read bandwidth (a multi-threaded read-only stream) and the roofline: the bytes a decoding
//    step must read (weights and KV cache) over that bandwidth;
// 2. plain decoding at batch 1 in a Session, against the roofline (and step by step against the
//    bandwidth measured right before each step), and the share of the step spent outside the
//    model's forward pass;
// 3. the step cost curve (1 .. 128 tokens per step), the calibration the adaptive budget uses
//    (written to --json for refdec-replay --step-cost-file);
// 4. forced trajectories (the LLMA paper's method): the steps a replay produced (draft nodes
//    verified, tokens accepted) run through the model, each step timed between two plain steps;
// 5. a batch sweep, the budget chosen per batch size by a measured trial (plain decoding included,
//    so speculation is used only where it pays).
// With `--shape tiny` it is the smoke test that keeps it working.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ab_pairs.hpp"
#include "eval/cli.hpp"
#include "eval/datasets.hpp"
#include "eval/step_cost_file.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/core/batch_budget.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/cpu/huge_pages.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/rest.hpp"
#include "eval/replay.hpp"
#include "refdec/torch/dtype.hpp"
#include "refdec/torch/calibrate.hpp"
#include "refdec/torch/generate.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/static_llama.hpp"

#if REFDEC_EVAL_STATIC_KERNELS
#include "eval/static_kernels.hpp"
#endif
#include "refdec/torch/verifier.hpp"
#include "memory_read.hpp"
#include "shapes.hpp"

using namespace refdec;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Waits for the device: a one-element copy to the host.
void sync(const at::Tensor& t) { (void)t.reshape({-1})[0].item<double>(); }

// Read bandwidth in bytes/s: the best of `repeats` reads of a `bytes`-sized float buffer, a
// multi-threaded read-only stream (a copy also writes, and understates what a decoding step, which
// only reads its weights, can get): on the CPU each of memory_read.hpp's paths in turn per repeat,
// each thread a slice, the buffer in huge pages as the packed weights are (cpu/huge_pages.hpp),
// the fastest path's best; on a GPU ATen's sum. The buffer is mapped and filled once for all of a
// run's measurements: a fresh one each time had the kernel zero a GiB of huge pages before every
// read (a sixth of the samples of a profile of plain decoding's phase, bracket included), work
// that is neither the read nor the step it brackets.
class BandwidthProbe {
 public:
  BandwidthProbe(at::Device device, std::int64_t bytes)
      : device_(device),
        floats_(bytes / 4 / refdec_bench::kReadFloats * refdec_bench::kReadFloats),
        memory_(device.is_cpu() ? static_cast<std::size_t>(floats_) * 4 : 0),
        buffer_(device.is_cpu() ? at::from_blob(memory_.data(), {floats_}, at::kFloat).fill_(1.0f)
                                : at::ones({floats_}, at::TensorOptions().dtype(at::kFloat).device(device))) {}

  double best_of(int repeats) const {
    std::vector<refdec_bench::Read> paths;
    if (device_.is_cpu())
      for (const auto& path : refdec_bench::read_paths()) paths.push_back(path.read);
    else
      paths.push_back(nullptr);  // ATen's sum
    double best = 0;
    for (int r = 0; r <= repeats; ++r)
      for (const refdec_bench::Read path : paths) {
        const auto t0 = Clock::now();
        read(path);
        if (r > 0) best = std::max(best, static_cast<double>(floats_ * 4) / seconds_since(t0));  // r == 0 warms up
      }
    return best;
  }

 private:
  void read(refdec_bench::Read path) const {
    if (!device_.is_cpu()) return sync(buffer_.sum());
    const std::int64_t threads = at::get_num_threads();
    const auto* p = static_cast<const float*>(memory_.data());
    std::vector<float> sums(static_cast<std::size_t>(threads));
    at::parallel_for(0, threads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) sums[static_cast<std::size_t>(t)] = refdec_bench::read_slice(p, floats_, t, threads, path);
    });
    volatile float sink = std::accumulate(sums.begin(), sums.end(), 0.0f);  // the reads are not dead
    (void)sink;
  }

  at::Device device_;
  std::int64_t floats_;
  HugePageBuffer memory_;
  at::Tensor buffer_;
};

// One replayed trace: per step, draft nodes verified and draft tokens accepted.
struct Trajectory {
  std::string id;           // the trace's id: the same trace in sets of one dataset
  std::string category;
  std::size_t context = 0;  // prompt tokens of the trace (0: unknown, --context is used)
  std::int64_t output = 0;  // output tokens of the trace (0: unknown)
  std::vector<std::pair<std::int32_t, std::int32_t>> steps;  // [steps] (nodes, accepted)

  // Output tokens step s emits: accepted + 1, but a last step may end the output without a bonus.
  std::int64_t emitted(std::size_t s, std::int64_t done) const {
    const std::int64_t a = steps[s].second + 1;
    return output > 0 ? std::min(a, output - done) : a;
  }

  // The output's length: as recorded, or what the steps emit.
  std::int64_t length() const {
    if (output > 0) return output;
    std::int64_t done = 0;
    for (std::size_t s = 0; s < steps.size(); ++s) done += emitted(s, done);
    return done;
  }
};

// The steps [begin, end) of a trace that emit its output from token `offset` on (from the first
// step that starts there) until `tokens` are emitted, and what they emit.
struct Window {
  std::size_t begin = 0, end = 0;
  std::int64_t before = 0;  // output tokens emitted before step `begin`
  std::int64_t tokens = 0;  // output tokens the window's steps emit
};

Window window(const Trajectory& t, std::int64_t offset, std::int64_t tokens) {
  Window w;
  std::size_t s = 0;
  for (; s < t.steps.size() && w.before < offset; ++s) w.before += t.emitted(s, w.before);
  w.begin = s;
  for (; s < t.steps.size() && w.tokens < tokens; ++s) w.tokens += t.emitted(s, w.before + w.tokens);
  w.end = s;
  return w;
}

// A replay's trajectories (refdec-replay --trajectories), or a synthetic one; only traces with
// at least one step.
struct TrajectorySet {
  std::string name;     // drafter @budget, "adaptive" when the replay chose budgets by a step cost
  std::string dataset;  // sets of one dataset hold the same traces
  std::vector<Trajectory> traces;
};

TrajectorySet load_trajectories(const std::string& path) {
  const auto j = nlohmann::json::parse(read_file_bytes(path, "trajectories file"));  // regular files only
  TrajectorySet set;
  set.name = j.at("drafter").get<std::string>() + " @" + std::to_string(j.at("budget").get<std::int64_t>());
  const auto settings = j.value("settings", nlohmann::json::object());
  if (settings.contains("step_cost") || settings.contains("step_cost_file")) {
    set.name += " adaptive";
    // Replays before the mixture's per-sequence calibration existed do not name it: they ran without.
    if (settings.value("calibration_half_life", 0.0) == 0.0) set.name += " (uncalibrated)";
  }
  set.dataset = j.value("dataset", std::string("unknown"));
  for (const auto& t : j.at("traces")) {
    Trajectory tr;
    tr.id = t.value("id", std::string());
    tr.category = t.value("category", std::string("all"));
    tr.context = t.value("context_tokens", std::size_t{0});
    tr.output = t.value("output_tokens", std::int64_t{0});
    for (const auto& st : t.at("steps")) {
      const auto n = st.at(0).get<std::int32_t>(), a = st.at(1).get<std::int32_t>();
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
  TrajectorySet set{"synthetic @16", "synthetic", {}};
  for (int t = 0; t < 4; ++t) {
    Trajectory tr{std::to_string(t), t % 2 == 0 ? "even" : "odd", 0, 0, {}};
    for (int st = 0; st < 40; ++st) tr.steps.emplace_back(16, (st + t) % 5);
    set.traces.push_back(std::move(tr));
  }
  return set;
}

// The model the benchmark decodes with: the eager LlamaModel, or with --static its static-shape
// step (StaticLlama). A graph is captured for one store's cache, so the static step keeps one
// store per batch size, every row bucket captured once when it is made ("warmed"), and every
// decoder of that batch size runs on an empty copy of it (copies share the cache and the graphs):
// no capture ever falls inside a timed step.
class BenchModel {
 public:
  BenchModel(const LlamaModel& eager, bool static_step, std::int64_t max_rows) : eager_(eager), max_rows_(max_rows) {
    if (static_step) fixed_.emplace(eager);
  }
  const LlamaModel& eager() const { return eager_; }
  const StaticLlama* fixed() const { return fixed_ ? &*fixed_ : nullptr; }
  std::int64_t vocab_size() const { return eager_.vocab_size(); }
  // Step rows per sequence the static step takes at most (its largest row bucket); prefills are
  // cut into chunks of it.
  std::int64_t max_rows() const { return max_rows_; }

  // An empty store of `batch` sequences with room for `capacity` entries each, sharing the
  // store of that batch size (made, or made again larger, here), its row buckets up to `rows`
  // captured.
  StaticKvStore empty_store(std::int64_t batch, std::int64_t capacity, std::int64_t rows) {
    REFDEC_CHECK(fixed_.has_value(), "empty_store() without --static");
    REFDEC_CHECK(rows <= max_rows_, "steps of " << rows << " rows per sequence, more than --static-rows " << max_rows_);
    auto it = stores_.find(batch);
    if (it == stores_.end() || it->second.store.capacity() < capacity) {
      if (it != stores_.end()) stores_.erase(it);  // its cache is freed before the larger one is made
      // Room to grow: a larger request later makes (and captures) a store again.
      it = stores_.emplace(batch, Warmed{StaticKvStore(fixed_->kv_layout(), capacity + capacity / 4,
                                                       {.max_batch = batch, .max_rows = max_rows_, .max_step_rows = batch * max_rows_}),
                                         0})
               .first;
    }
    warm(it->second, batch, rows);
    return it->second.store;
  }
  // Runs the static step's fused kernels; the stores made so far go (their graphs ran without).
  void set_kernels(const StaticKernels& kernels) {
    REFDEC_CHECK(fixed_.has_value(), "--static-kernels needs --static");
    fixed_->set_kernels(kernels);
    stores_.clear();
  }
  // Frees the stores of every batch size but `batch` (their caches are large).
  void release_all_but(std::int64_t batch) {
    std::erase_if(stores_, [batch](const auto& entry) { return entry.first != batch; });
  }

 private:
  struct Warmed {
    StaticKvStore store;
    std::int64_t rows = 0;  // row buckets captured up to this one
  };

  // Captures the row buckets of `batch` sequences up to that of `rows`: one step of each, never
  // committed.
  void warm(Warmed& warmed, std::int64_t batch, std::int64_t rows) {
    const std::int64_t last = static_bucket(std::max<std::int64_t>(rows, 1), max_rows_, "rows");
    if (warmed.rows >= last) return;
    StaticKvStore& store = warmed.store;
    for (std::int64_t b = 0; b < batch; ++b) store.add();
    StepPlan plan;
    for (const std::int64_t n : static_buckets(max_rows_)) {
      if (n > last) break;
      if (n <= warmed.rows) continue;
      // A bucket past the capacity is reached by a step of fewer rows than it (their padding).
      std::vector<Token> chain(static_cast<std::size_t>(std::min(n, store.capacity())), 1);
      plan_step(std::vector<LinearTree>(static_cast<std::size_t>(batch), LinearTree::chain(chain)), {}, store.lengths(), vocab_size(), plan);
      sync(fixed_->forward(plan, store));
    }
    warmed.rows = last;
    for (std::int64_t b = batch - 1; b >= 0; --b) store.remove(b);
  }

  const LlamaModel& eager_;
  std::optional<StaticLlama> fixed_;
  std::int64_t max_rows_;
  std::map<std::int64_t, Warmed> stores_;
};

// Runs steps through the model exactly as a session does (plan, forward pass, argmax copied to
// the host, walk, KV commit of the keep plan), with the accepted counts forced: per sequence b a
// chain of nodes[b] + 1 tokens, of which accepted[b] + 1 are kept. On the eager model over a
// contiguous store, or on the static step over a copy of its warmed store.
class ForcedDecoder {
 public:
  // `batch` sequences, each with `context` cached tokens, then steps of up to `rows` rows per
  // sequence. The static step prefills in chunks of at most 4096 rows in all, without capturing.
  ForcedDecoder(BenchModel& model, std::int64_t batch, std::size_t context, std::int64_t capacity, std::int64_t rows)
      : model_(model), store_(model.eager().kv_layout(), capacity), batch_(batch) {
    REFDEC_CHECK(context > 0 && batch > 0, "forced decoding needs a context and a batch of at least one");
    if (model.fixed() != nullptr) {
      static_store_.emplace(model.empty_store(batch, capacity, rows));
      static_store_->set_graphs(false);
    }
    with_store([&](auto& store) {
      for (std::int64_t b = 0; b < batch; ++b) store.add();
    });
    std::vector<Token> prefix(context);
    for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = token(i);
    const std::size_t chunk = model.fixed() != nullptr ? static_cast<std::size_t>(std::clamp<std::int64_t>(4096 / batch, 1, model.max_rows()))
                                                       : context;
    const std::vector<std::uint8_t> prefill(static_cast<std::size_t>(batch), 1);
    for (std::size_t first = 0; first < context; first += chunk) {
      const auto piece = std::span<const Token>(prefix).subspan(first, std::min(chunk, context - first));
      const std::vector<LinearTree> chains(static_cast<std::size_t>(batch), LinearTree::chain(piece));
      with_store([&](auto& store) {
        plan_step(chains, {}, store.lengths(), model_.vocab_size(), plan_);
        run(store, StepExtras{.prefill = prefill});
        store.commit(verification_.keep);
      });
    }
    if (static_store_) static_store_->set_graphs(true);
  }

  // A decoder that goes on from `prefilled`'s cache as it is now. The cache buffers are shared,
  // which is safe for decoders run one after another: a step writes only past a sequence's cached
  // length, so the shared prefix is never written; it saves each run its own prefill.
  ForcedDecoder(const ForcedDecoder& prefilled)
      : model_(prefilled.model_), store_(prefilled.store_), static_store_(prefilled.static_store_), batch_(prefilled.batch_) {}

  // One step; returns its wall time.
  double step(std::span<const std::int32_t> nodes, std::span<const std::int32_t> accepted) {
    const auto t0 = Clock::now();
    std::vector<LinearTree> trees(static_cast<std::size_t>(batch_));
    for (std::size_t b = 0; b < trees.size(); ++b) {
      std::vector<Token> chain(static_cast<std::size_t>(nodes[b] + 1));
      for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = token(i + 7);
      trees[b] = LinearTree::chain(chain);
    }
    with_store([&](auto& store) {
      plan_step(trees, {}, store.lengths(), model_.vocab_size(), plan_);
      run(store, {});
      for (std::size_t b = 0; b < trees.size(); ++b) {  // the forced outcome replaces the walk's
        auto& path = verification_.accepted[b].nodes;
        path.resize(static_cast<std::size_t>(std::min(accepted[b], nodes[b])));
        std::iota(path.begin(), path.end(), 1);
      }
      keep_accepted(plan_, verification_.accepted, verification_.keep);
      store.commit(verification_.keep);
    });
    return seconds_since(t0);
  }

 private:
  template <class F>
  void with_store(F&& f) {
    if (static_store_)
      f(*static_store_);
    else
      f(store_);
  }
  void run(ContiguousKvStore& store, const StepExtras& extras) { verify(model_.eager(), store, plan_, verification_, times_, extras); }
  void run(StaticKvStore& store, const StepExtras& extras) { verify(*model_.fixed(), store, plan_, verification_, times_, extras); }
  Token token(std::size_t i) const { return static_cast<Token>((i * 7919 + 3) % static_cast<std::size_t>(model_.vocab_size())); }
  BenchModel& model_;
  ContiguousKvStore store_;  // the eager model's (sequences only without --static)
  std::optional<StaticKvStore> static_store_;
  std::int64_t batch_;
  StepPlan plan_;
  Verification verification_;
  StepTimes times_;
};

// Plain decoding timed beside a speculative run, from the same prefill: a plain step before the
// first speculative step and one after each, so that every speculative step sits between two
// plain ones. The window's plain time is its tokens times the mean over its speculative steps of
// the two plain steps around each. This machine's memory switches between about 50 and 80 GB/s
// (and, for moments, slower) within seconds, so a plain window timed before or after the
// speculative steps, as this benchmark did, could run at another speed and move a ratio by 40%;
// steps side by side see the same speed. Weighing each step's pair alike, rather than by the
// tokens the step emitted, keeps one plain step caught in a slow moment from being counted a
// dozen times. The plain decoder shares the prefill's cache buffers with the speculative one
// (ForcedDecoder's copy), so overwrites its entries past the prefix, and runs behind it in
// context by what the drafts gained: neither changes what a step costs.
class PlainBeside {
 public:
  explicit PlainBeside(const ForcedDecoder& prefilled) : decoder_(prefilled) {}
  // Runs one speculative step of the window after a plain one (the step after the previous
  // speculative step, or one of its own for the first) and before another.
  void between(const std::function<void()>& speculative_step) {
    if (steps_ == 0) last_ = step();
    speculative_step();
    const double t = step();
    sum_ += (last_ + t) / 2.0;
    last_ = t;
    ++steps_;
  }
  // Plain decoding's time for `tokens` at this window's rate (0 before any step).
  double window_seconds(std::int64_t tokens) const { return steps_ == 0 ? 0.0 : sum_ / static_cast<double>(steps_) * static_cast<double>(tokens); }
  // The slowest plain step over the fastest, less one.
  double spread() const { return steps_ == 0 ? 0.0 : slowest_ / fastest_ - 1.0; }

 private:
  double step() {
    const std::int32_t zero = 0;
    const double t = decoder_.step(std::span(&zero, 1), std::span(&zero, 1));
    fastest_ = std::min(fastest_, t), slowest_ = std::max(slowest_, t);
    return t;
  }
  ForcedDecoder decoder_;
  double last_ = 0.0, sum_ = 0.0, fastest_ = std::numeric_limits<double>::infinity(), slowest_ = 0.0;
  std::int64_t steps_ = 0;
};

// Speculative and plain time over the same output tokens.
struct Timed {
  double spec = 0, plain = 0;
  std::int64_t steps = 0, tokens = 0;
};

// The mixture of docs/speed.md's adaptive rows: LLMA (k 16, m 4), the n-gram trie, REST (with a
// datastore) and the shared index of the outputs decoded before (index_sources(): the index and
// the request's own text, a source each); `variant` (--live-compare) also as it was before the
// small-budget defaults ("table"), without the index ("no-index"), or with the earlier outputs
// through HistoryDrafter instead ("history").
AnyDrafter live_mixture(const std::shared_ptr<const Datastore>& datastore, const StepCost& prior, const std::string& variant = "") {
  std::vector<AnyDrafter> sources;
  sources.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 16, .spans = 4, .self_reference = true}));
  sources.emplace_back(NgramTrieDrafter());
  if (datastore != nullptr) sources.emplace_back(RestDrafter(datastore));
  if (variant == "history")
    sources.emplace_back(HistoryDrafter(AnyDrafter(NgramTrieDrafter()), std::make_shared<OutputHistory>()));
  else if (variant != "no-index")
    for (auto& d : index_sources(std::make_shared<ReferenceIndex>())) sources.emplace_back(std::move(d));
  MixtureOptions options;
  options.cost = prior;
  if (variant == "table") {
    options.source_budget = 0;
    options.match_context = false;
    options.recent_rate = 0.0;
    options.scorer_rate = 0.0;
  }
  return AnyDrafter(MixtureDrafter(std::move(sources), options));
}

// A mixture drafting live over a dataset's traces (--live), in dataset order, as refdec-replay
// does: the trace's output decides what is accepted, and the budget is chosen per step under the
// step cost. In a timed window the steps also run through the model, drafting included. With a
// tracker the cost is learned from those steps' own model time (StepCostTracker), as an engine
// that times its steps would, instead of staying at the calibration of part 3.
struct LiveRow {
  std::string name;
  AnyDrafter drafter;
  std::optional<StepCostTracker> tracker;
};

// The replay observer of a LiveRow: gives the drafter the tracker's cost before each step, and
// runs the steps that start at output token `offset` or later, until `tokens` are emitted,
// through `decoder` (none: a trace outside the timed windows).
struct LiveSteps {
  LiveRow& row;
  ForcedDecoder* decoder = nullptr;
  PlainBeside* plain = nullptr;  // with `decoder`
  std::size_t offset = 0;
  std::int64_t tokens = 0;
  Timed window{};
  Clock::time_point start{};

  void before_step(std::size_t /*pos*/) {
    start = Clock::now();
    if (row.tracker) row.drafter.set_step_cost(row.tracker->current());
  }
  void after_step(std::size_t pos, const LinearTree& tree, std::size_t accepted, std::size_t emitted) {
    if (decoder == nullptr || pos < offset || window.tokens >= tokens) return;
    const double drafting = seconds_since(start);
    const std::int32_t n = tree.num_drafts(), a = static_cast<std::int32_t>(accepted);
    double model = 0.0;
    plain->between([&] { model = decoder->step(std::span(&n, 1), std::span(&a, 1)); });
    if (row.tracker) row.tracker->observe(static_cast<std::size_t>(n) + 1, model);
    window.spec += drafting + model;
    ++window.steps;
    window.tokens += static_cast<std::int64_t>(emitted);
  }
};

// A row of the live batch sweep (--live-batches): B slots each drafting live with their own
// mixture over a dataset's traces (slot b: the traces after the warm-up, b, b + B, ... back to
// back), the walk decided by the traces' outputs, every step run through the model at batch B,
// drafting and the budget choice timed with it. Policies: plain decoding; a fixed budget (every
// node the mixture rates above zero, up to it); the per-request adaptive budget (each mixture
// under the calibration, pricing a step by its own tokens: what a Session without a batch budget
// does at batch > 1); one budget for the whole step (BatchBudget over the step's total rows, the
// cost learned online from the calibration at every step, as a Session with a step cost does).
// The drafting is refdec-replay --batch's (BatchDrafting), with the model's step in between.
struct LiveBatchRow {
  std::string name;
  BatchPolicy policy;
  std::size_t budget;
  std::vector<AnyDrafter> drafters;
  std::vector<std::size_t> trace, pos;
  std::optional<StepCostTracker> tracker;
  // A copy of the prefilled decoder: rows that share the buffers write over each other's steps,
  // which changes the values cached, not the work a step does (these timings' only output).
  ForcedDecoder decoder;
  double seconds = 0;
  std::int64_t tokens = 0, drafted = 0;

  LiveBatchRow(std::string row_name, BatchPolicy row_policy, std::size_t row_budget, std::size_t B, const std::vector<Trace>& traces,
               std::size_t warmup, const std::shared_ptr<const Datastore>& datastore, const StepCost& calibrated,
               const ForcedDecoder& prefilled)
      : name(std::move(row_name)), policy(row_policy), budget(row_budget), trace(B), pos(B, 0), decoder(prefilled) {
    const StepCost own = policy == BatchPolicy::kPerRequest ? calibrated : StepCost::flat();
    for (std::size_t b = 0; b < B; ++b) {
      drafters.push_back(live_mixture(datastore, own));
      if (policy != BatchPolicy::kPlain)
        for (std::size_t w = 0; w < warmup && w < traces.size(); ++w) (void)replay_trace(drafters[b], traces[w], {.budget = budget});
      trace[b] = (std::min(warmup, traces.size() - 1) + b) % traces.size();
      drafters[b].begin(traces[trace[b]].context, traces[trace[b]].references);
    }
    if (policy == BatchPolicy::kAllocator) tracker.emplace(calibrated);
    roots.resize(B), nodes.resize(B), accepted.resize(B), emitted.resize(B);
  }

  void step(const std::vector<Trace>& traces) {
    const std::size_t B = drafters.size();
    const auto t0 = Clock::now();
    for (std::size_t b = 0; b < B; ++b) {
      const auto& out = traces[trace[b]].output;
      roots[b] = pos[b] == 0 ? traces[trace[b]].context.back() : out[pos[b] - 1];
    }
    (void)drafting.draft(drafters, roots, budget, policy, tracker ? tracker->current(B) : StepCost::flat());
    for (std::size_t b = 0; b < B; ++b) {
      const auto& out = traces[trace[b]].output;
      const LinearTree& tree = drafting.trees()[b];
      accepted[b] = static_cast<std::int32_t>(accepted_on_trace(tree, out, pos[b], path));
      nodes[b] = tree.num_drafts();
      emitted[b] = std::min<std::size_t>(static_cast<std::size_t>(accepted[b]) + 1, out.size() - pos[b]);
      drafted += nodes[b];
    }
    const double model_seconds = decoder.step(nodes, accepted);
    if (tracker) tracker->observe(B + static_cast<std::size_t>(std::accumulate(nodes.begin(), nodes.end(), 0)), model_seconds, B);
    for (std::size_t b = 0; b < B; ++b) {
      const auto& out = traces[trace[b]].output;
      drafters[b].accept(std::span<const Token>(out).subspan(pos[b], emitted[b]));
      pos[b] += emitted[b];
      tokens += static_cast<std::int64_t>(emitted[b]);
      if (pos[b] == out.size()) {  // the slot's next trace
        trace[b] = (trace[b] + B) % traces.size();
        pos[b] = 0;
        drafters[b].begin(traces[trace[b]].context, traces[trace[b]].references);
      }
    }
    seconds += seconds_since(t0);
  }

  double tokens_per_second() const { return static_cast<double>(tokens) / seconds; }

 private:
  BatchDrafting drafting;
  std::vector<Token> roots;
  std::vector<std::size_t> emitted;
  std::vector<std::int32_t> nodes, accepted, path;
};

// The command line.
struct Options {
  std::string shape_name = "1b", device_name = "cpu", dtype_name = "bf16", linear_name = "auto", linear_choice, json_path;
  std::vector<std::string> trajectory_files;
  std::int64_t plain_tokens = 64, paired_steps = 16, bandwidth_mib = 1024, threads = std::thread::hardware_concurrency();
  std::size_t context = 512;
  std::size_t max_traces = 4, max_tokens = 64, sweep_steps = 128;
  std::vector<std::int64_t> batches = {1, 4, 16};
  std::vector<std::size_t> cost_tokens = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
  std::vector<std::string> live_datasets, live_priors;
  std::string live_datastore;
  std::size_t live_budget = 64;
  bool static_step = false, static_kernels = false, only_plain = false, live_compare = false;
  std::int64_t static_rows = 128;
  std::vector<std::int64_t> outside_batches = {1};
  std::vector<std::int64_t> live_batches;
  std::vector<std::size_t> live_fixed = {4, 16};
  std::size_t live_batch_steps = 16, live_warmup = 32;

  // The widest step a live mixture drafts (0: no --live).
  std::size_t live_widest() const { return live_datasets.empty() ? 0 : live_budget; }
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--shape", o.shape_name, "tiny (stories260K's shape), 1b (TinyLlama-1.1B) or 7b (Llama-2-7B)")->capture_default_str();
  app.add_option("--device", o.device_name, "cpu or cuda")->capture_default_str();
  app.add_option("--dtype", o.dtype_name, "bf16, fp16, fp32 or fp64")->capture_default_str();
  app.add_option("--linear", o.linear_name, std::string("linear layers: ") + linear_kernels_help())->capture_default_str();
  app.add_option("--linear-choice", o.linear_choice,
                 "the packed kernels to run, as an earlier run's report spells them (\"stream (avx512-bf16/none for 1-2 rows, "
                 "avx512-bf16 from 3 rows)\", \"onednn\"): taken instead of measuring them at load, where --linear measures them");
  app.add_option("--threads", o.threads, "intra-op threads (0: libtorch's default, which is 1 on some machines)")
      ->capture_default_str()
      ->transform(cli::integer_in(0, 1024));
  app.add_option("--trajectories", o.trajectory_files,
                 "refdec-replay --trajectories files (one per drafter and budget; default: a synthetic pattern)");
  app.add_option("--plain-tokens", o.plain_tokens, "tokens of plain decoding timed at batch 1")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--context", o.context, "cached tokens before the timed steps (at most; a trace's own prompt length when known)")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 3000));
  app.add_option("--paired-steps", o.paired_steps, "plain decoding steps each timed between two bandwidth measurements (0: none)")
      ->capture_default_str()
      ->transform(cli::integer_in(0, 1024));
  app.add_option("--bandwidth-mib", o.bandwidth_mib, "buffer read to measure memory bandwidth")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 65536));
  app.add_option("--cost-tokens", o.cost_tokens, "tokens per step of the step cost curve")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 1024));
  app.add_option("--max-traces", o.max_traces, "traces per category replayed through the model")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxCount));
  app.add_option("--max-tokens", o.max_tokens, "output tokens timed per trace")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--batches", o.batches, "batch sizes of the sweep (none: no sweep)")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--sweep-steps", o.sweep_steps, "steps timed per batch size in the sweep")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--live", o.live_datasets,
                 "traces (refdec-replay --dump-traces FILE) on which a mixture drafts live, its budget chosen per step "
                 "by the step cost: this run's calibration, and the same learned online from the timed steps; the "
                 "file's stem names the dataset (specbench.jsonl shares its table with --trajectories of specbench)")
      ->check(CLI::ExistingFile);
  app.add_option("--live-prior", o.live_priors,
                 "refdec-speed-bench --json files from other runs: each one's step cost is also a prior of the live "
                 "rows (a calibration from another minute, as it is and learned online from)")
      ->check(CLI::ExistingFile);
  app.add_option("--datastore", o.live_datastore, "REST datastore of the live mixture (refdec-datastore build; none: no REST)");
  app.add_flag("--static", o.static_step,
               "decode with the static-shape step (StaticLlama: CUDA graphs on a GPU) throughout; plain decoding at "
               "batch 1 is also timed on the eager model, for comparison");
  app.add_option("--static-rows", o.static_rows,
                 "the static step's largest row bucket (step rows per sequence; prefills go in chunks of it)")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 4096));
  app.add_option("--outside-batches", o.outside_batches,
                 "batch sizes at which speculative decoding's share outside the forward pass is timed")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 256));
  app.add_flag("--static-kernels", o.static_kernels,
               "with --static: the step's fused CUDA kernels (the rotary scatter, SwiGLU; built where nvcc and a CUDA build of "
               "libtorch exist); plain decoding at batch 1 is also timed on the static step without them");
  app.add_flag("--only-plain", o.only_plain, "stop after plain decoding at batch 1 (and, with --static, the matrix products' own time)");
  app.add_flag("--live-compare", o.live_compare,
               "three more live rows learned online from this run's calibration: the mixture with its per-source "
               "tables only (no source budget, contexts or learned scorer), without the shared index, and with the "
               "model's earlier outputs through HistoryDrafter instead of the index");
  app.add_option("--live-budget", o.live_budget, "the live mixture's largest budget")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 1024));
  app.add_option("--live-batches", o.live_batches,
                 "batch sizes of the live batch sweep (none: no sweep): slots drafting live with a mixture over each --live "
                 "dataset, under plain decoding, fixed budgets, the per-request adaptive budget and one budget for the "
                 "whole step (BatchBudget)")
      ->transform(cli::integer_in(1, 4096));
  app.add_option("--live-fixed", o.live_fixed, "the live batch sweep's fixed budgets")
      ->capture_default_str()
      ->transform(cli::integer_in(1, 1024));
  app.add_option("--live-batch-steps", o.live_batch_steps, "steps timed per batch size and row in the live batch sweep")
      ->capture_default_str()
      ->transform(cli::integer_in(1, cli::kMaxTokens));
  app.add_option("--live-warmup", o.live_warmup,
                 "traces each slot's mixture replays (untimed, no model) before the live batch sweep times it")
      ->capture_default_str()
      ->transform(cli::integer_in(0, cli::kMaxCount));
  app.add_option("--json", o.json_path, "also write the results as JSON to this file");
}

// The results, and the phases as they start.
class Report {
 public:
  explicit Report(std::string path) : path_(std::move(path)) {}

  nlohmann::json json;

  // To stderr, so that a run of minutes is never silent.
  void phase(const std::string& what) const {
    std::cerr << "[refdec-speed-bench +" << std::fixed << std::setprecision(1) << seconds_since(start_) << " s] " << what << std::endl;
  }

  // Rewritten after each part, so that a later failure (e.g. out of memory) keeps what was measured.
  void write() const {
    if (path_.empty()) return;
    OutputFile out(path_, "--json file");  // replaced whole, never a device or FIFO
    out.write(json.dump(2));
    out.write("\n");
    out.commit();
  }

 private:
  std::string path_;
  Clock::time_point start_ = Clock::now();
};

// What the parts after the model's initialisation share.
struct Bench {
  const Options& opt;
  at::Device device;
  at::ScalarType dtype;
  const LlamaModel& model;
  BenchModel& bench_model;
  Report& report;
  GenerateOptions plain_opt;                    // plain decoding at batch 1, the base of the speculative runs too
  Request req;                                  // --context tokens
  std::int64_t weight_bytes = 0, kv_bytes = 0;  // what a step at batch 1 reads

  // One bandwidth method for every figure: the best of 10 reads of --bandwidth-mib (a shorter
  // read gave 30-32 GB/s where this one gave 49-52 on a Zen 5 EPYC, flattering any step
  // timed against it).
  const BandwidthProbe& probe;
  double read_bandwidth() const { return probe.best_of(10); }
};

// The KV cache a step at batch 1 reads at `context`.
std::int64_t kv_cache_bytes(const LlamaModel& model, std::size_t context, at::ScalarType dtype) {
  const auto kv = model.kv_layout();
  return 2 * kv.layers * kv.kv_heads * kv.head_dim * static_cast<std::int64_t>(context) * static_cast<std::int64_t>(at::elementSize(dtype));
}

void describe_model(const Options& opt, const LlamaModel& model, double init_seconds, std::int64_t kv_bytes, Report& report) {
  const std::int64_t weight_bytes = model.step_weight_bytes();
  std::cout << std::fixed << std::setprecision(2) << "device " << opt.device_name << " (" << at::get_num_threads() << " threads), "
            << opt.shape_name << " " << opt.dtype_name << (model.packed() ? ", packed linear layers" : ", at::linear") << ": weights "
            << static_cast<double>(weight_bytes) / 1e9 << " GB (random init " << init_seconds << " s), KV at context " << opt.context << " "
            << static_cast<double>(kv_bytes) / 1e6 << " MB\n"
            << "linear layers: " << model.linear_path() << "\n";
  report.phase("weights initialised; linear layers: " + model.linear_path());
  report.json["packed"] = model.packed();
  report.json["linear_kernel"] = linear_kernel_name(model.linear_kernel());
  report.json["linear_path"] = model.linear_path();
  if (model.packed()) report.json["linear_choice"] = model.linear_choice().describe();  // what --linear-choice takes
  report.json["cpu_isa"] = cpu_isa().describe();
  report.json["weight_bytes"] = weight_bytes;
  report.json["kv_bytes"] = kv_bytes;
  report.json["init_seconds"] = init_seconds;
}

// Calls `f` with a Session of `options` for `batch` sequences of `capacity` entries, on the static
// step (--static) or the eager model.
template <class F>
auto in_session(Bench& b, bool static_step, std::int64_t batch, std::int64_t capacity, const GenerateOptions& options, F&& f) {
  if (static_step) {
    Session session(*b.bench_model.fixed(), b.bench_model.empty_store(batch, capacity, b.opt.static_rows), options);
    return f(session);
  }
  Session session(b.model, ContiguousKvStore(b.model.kv_layout(), capacity), options);
  return f(session);
}

struct PlainRate {
  double tokens_per_s = 0.0;
  double outside = 0.0;  // the share of the time outside the forward pass
};

// Plain decoding at batch 1 after the session's first decoding step: the prefill and that step
// untimed.
template <class S>
PlainRate time_plain_session(S&& session, const Request& req) {
  session.add(req);
  while (session.stats().tokens == 0) session.step();
  const GenerateStats before = session.stats();
  const auto t0 = Clock::now();
  while (!session.idle()) session.step();
  const double wall = seconds_since(t0);
  const GenerateStats& after = session.stats();
  return {static_cast<double>(after.tokens - before.tokens) / wall, 1.0 - (after.verify.model - before.verify.model) / wall};
}

void print_plain(const std::string& on, std::size_t context, const PlainRate& rate, double roofline, const char* note) {
  std::cout << "plain decoding" << on << ", batch 1, context " << context << ": " << rate.tokens_per_s
            << " tokens/s = " << 100.0 * rate.tokens_per_s / roofline << "% of the roofline; " << 100.0 * rate.outside
            << "% of the step outside the forward pass" << note << "\n";
}

// What the later parts take from plain decoding at batch 1.
struct Plain {
  double bandwidth = 0.0, roofline = 0.0, tokens_per_s = 0.0;
};

// 2. Plain decoding at batch 1 in a Session, timed after the prefill step, between two
// measurements of the read bandwidth: a shared machine's bandwidth drifts over minutes, so the
// roofline takes the better of the two (the fraction of it is then the conservative one).
Plain measure_plain(Bench& b) {
  const Options& opt = b.opt;
  const std::int64_t capacity = static_cast<std::int64_t>(opt.context) + opt.plain_tokens + 1;
  const auto time_plain = [&](auto& session) { return time_plain_session(session, b.req); };
  PlainRate eager, ops, basic;
  if (opt.static_step) eager = in_session(b, false, 1, capacity, b.plain_opt, time_plain);
  if (opt.static_kernels) {
#if REFDEC_EVAL_STATIC_KERNELS
    // Torch operations only, then the rotary and SwiGLU kernels alone, each on a store of its own.
    StaticLlama other(b.model);
    const auto time_other = [&] {
      return time_plain_session(Session(other, StaticKvStore(other.kv_layout(), capacity, {.max_rows = opt.static_rows}), b.plain_opt), b.req);
    };
    ops = time_other();
    StaticKernels rotary_swiglu = refdec_eval::static_kernels();
    rotary_swiglu.linear = nullptr, rotary_swiglu.attention = nullptr;
    other.set_kernels(rotary_swiglu);
    basic = time_other();
    b.bench_model.set_kernels(refdec_eval::static_kernels());
#else
    REFDEC_CHECK(false, "--static-kernels: this build has no fused kernels (they need nvcc and a CUDA build of libtorch)");
#endif
  }
  const double bandwidth_before = b.read_bandwidth();
  const PlainRate plain = in_session(b, opt.static_step, 1, capacity, b.plain_opt, time_plain);
  const double bandwidth_after = b.read_bandwidth();
  const double bandwidth = std::max(bandwidth_before, bandwidth_after);
  const double roofline = bandwidth / static_cast<double>(b.weight_bytes + b.kv_bytes);
  std::cout << "read bandwidth " << bandwidth_before / 1e9 << " GB/s before plain decoding, " << bandwidth_after / 1e9
            << " after; roofline " << roofline << " tokens/s\n";
  if (opt.static_step) print_plain(" on the eager model", opt.context, eager, roofline, "");
  if (opt.static_kernels) {
    print_plain(" on the static step, torch operations only", opt.context, ops, roofline, "");
    print_plain(" on the static step, the rotary and SwiGLU kernels only", opt.context, basic, roofline, "");
  }
  print_plain(opt.static_step ? opt.static_kernels ? " on the static step, fused kernels" : " on the static step" : "", opt.context, plain,
              roofline, " (and its argmax)");
  nlohmann::json& report = b.report.json;
  report["static"] = opt.static_step;
  report["static_kernels"] = opt.static_kernels;
  if (opt.static_kernels) {
    report["plain_static_ops_tokens_per_s"] = ops.tokens_per_s;
    report["plain_static_rotary_swiglu_tokens_per_s"] = basic.tokens_per_s;
  }
  if (opt.static_step) {
    report["plain_eager_tokens_per_s"] = eager.tokens_per_s;
    report["plain_eager_roofline_fraction"] = eager.tokens_per_s / roofline;
    report["plain_eager_outside_forward_fraction"] = eager.outside;
  }
  report["bandwidth_bytes_per_s"] = bandwidth;
  report["bandwidth_before_after"] = {bandwidth_before, bandwidth_after};
  report["roofline_tokens_per_s"] = roofline;
  report["plain_tokens_per_s"] = plain.tokens_per_s;
  report["plain_roofline_fraction"] = plain.tokens_per_s / roofline;
  report["plain_outside_forward_fraction"] = plain.outside;
  return {bandwidth, roofline, plain.tokens_per_s};
}

// Seconds of one replay of `products` captured in a graph of its own (the mean of 20 replays).
template <class Products>
double captured_seconds(Bench& b, Products&& products, const at::Tensor& any) {
  GraphPool pool;
  StepGraph graph;
  sync(graph.capture(products, b.device, pool));
  graph.replay();
  sync(any);
  constexpr int kReplays = 20;
  const auto t0 = Clock::now();
  for (int i = 0; i < kReplays; ++i) graph.replay();
  sync(any);
  return seconds_since(t0) / kReplays;
}

// Where the static step's time goes: its matrix products alone at one row (the weights as the
// eager model holds them: seven per layer and the output layer), captured in a graph of their
// own, against the read of the weights at the measured bandwidth; with --static-kernels, the same
// products through the linear kernel too.
void time_matmuls(Bench& b, const Plain& plain) {
  const auto& w = b.model.weights();
  const auto opts = at::TensorOptions().dtype(b.dtype).device(b.device);
  const auto x = at::randn({1, b.model.config().dim}, opts), h = at::randn({1, b.model.config().hidden_dim}, opts);
  const auto products = [&] {
    for (const auto& l : w.layers) {
      for (const at::Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3}) (void)at::linear(x, *t);
      (void)at::linear(h, l.w2);
    }
    return at::linear(x, w.output);
  };
  const double weights_seconds = static_cast<double>(b.weight_bytes) / plain.bandwidth;
  const auto report = [&](const char* what, const char* key, double seconds) {
    std::cout << "the step's matrix products alone at one row, captured" << what << ": " << 1e3 * seconds << " ms = "
              << 100.0 * weights_seconds / seconds << "% of the weights' read at the measured bandwidth (" << 1e3 * weights_seconds
              << " ms); the static step: " << 1e3 / plain.tokens_per_s << " ms\n";
    b.report.json[key] = seconds;
  };
  report("", "matmuls_alone_seconds", captured_seconds(b, products, x));
  b.report.json["weights_read_seconds"] = weights_seconds;
#if REFDEC_EVAL_STATIC_KERNELS
  const auto linear = refdec_eval::static_kernels().linear;
  if (!b.opt.static_kernels || linear == nullptr) return;
  const ElementType element = kernel_element_type(b.dtype);
  const auto out = at::empty({1, w.output.size(0)}, opts);  // large enough for every product
  const auto kernel_products = [&] {
    void* stream = at::cuda::getCurrentCUDAStream().stream();
    const auto run = [&](const at::Tensor& in, const at::Tensor& weight) {
      linear({in.data_ptr(), weight.data_ptr(), out.data_ptr(), 1, in.size(1), weight.size(0), false, element}, stream);
    };
    for (const auto& l : w.layers) {
      for (const at::Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3}) run(x, *t);
      run(h, l.w2);
    }
    run(x, w.output);
    return out;
  };
  report(" through the linear kernel", "matmuls_linear_kernel_seconds", captured_seconds(b, kernel_products, x));
#endif
}

using refdec_bench::median;

// The same steps each between two bandwidth measurements (the bracket's method: --bandwidth-mib,
// best of 10): on a machine whose bandwidth moves by tens of percent within a minute, the roofline
// of the moment a step runs, rather than the better of two measurements a minute apart. A step
// whose two reads differ by more than 5% saw the memory change speed and is left out (counted);
// the others' roofline is at the mean of their reads. The median over the steps kept of
// (bytes / bandwidth) / step time. Each timed step follows an untimed one after the read, as
// every step of plain decoding follows a step: the first step after a read ran slower than the
// one after it in 10 of 12 pairs on a Zen 5 EPYC (medians 54 and 50 ms, plain decoding in the same
// run 48 ms a step; a probe timing both, not kept), so the paired figure read below the bracket's.
void time_paired_steps(Bench& b) {
  const Options& opt = b.opt;
  if (opt.paired_steps > 0 && opt.static_step) std::cout << "(--paired-steps: not with --static)\n";
  if (opt.paired_steps <= 0 || opt.static_step) return;
  b.report.phase("plain decoding, " + std::to_string(opt.paired_steps) + " steps each between two bandwidth measurements");
  GenerateOptions paired_opt = b.plain_opt;
  paired_opt.limits.max_new_tokens = 2 * opt.paired_steps;  // each timed step after an untimed one
  Session paired(b.model, ContiguousKvStore(b.model.kv_layout(), static_cast<std::int64_t>(opt.context) + 2 * opt.paired_steps + 1),
                 paired_opt);
  paired.add(b.req);
  paired.step();
  std::vector<double> fractions, bandwidths;
  std::int64_t moved = 0;
  for (double before = b.read_bandwidth(); !paired.idle();) {
    paired.step();
    if (paired.idle()) break;
    const auto t_step = Clock::now();
    paired.step();
    const double seconds = seconds_since(t_step), after = b.read_bandwidth();
    if (std::max(before, after) / std::min(before, after) > 1.05) {
      ++moved;
    } else {
      const double bw = (before + after) / 2.0;
      fractions.push_back(static_cast<double>(b.weight_bytes + b.kv_bytes) / bw / seconds);
      bandwidths.push_back(bw);
    }
    before = after;
  }
  b.report.json["paired_steps_moved"] = moved;
  if (fractions.empty()) {
    std::cout << "plain decoding between bandwidth measurements: the bandwidth moved by more than 5% around every one of "
              << moved << " steps; no figure\n";
    return;
  }
  const auto [low, high] = std::minmax_element(bandwidths.begin(), bandwidths.end());
  std::cout << "plain decoding, each of " << fractions.size() << " steps between two bandwidth measurements within 5% ("
            << *low / 1e9 << "-" << *high / 1e9 << " GB/s; " << moved << " steps left out, the bandwidth moving): median "
            << 100.0 * median(fractions) << "% of that moment's roofline\n";
  b.report.json["paired_roofline_fraction"] = median(fractions);
  b.report.json["paired_bandwidth_range"] = {*low, *high};
}

AnyDrafter llma_trie_mixture() {
  std::vector<AnyDrafter> sources;
  sources.emplace_back(LlmaDrafter({.min_match = 1, .continuation = 16, .spans = 4, .self_reference = true}));
  sources.emplace_back(NgramTrieDrafter());
  return AnyDrafter(MixtureDrafter(std::move(sources)));
}

// B requests at once (their prompts shifted apart), each with its own mixture, timed after each
// has its first token: the shares of the time outside the forward pass and drafting.
template <class S>
std::pair<double, double> time_spec_session(S& spec, const Request& spec_req, std::int64_t B) {
  for (std::int64_t b = 0; b < B; ++b) {
    Request r = spec_req;
    for (Token& t : r.prompt) t = static_cast<Token>((t + b) % 97 + 3);
    spec.add(r, llma_trie_mixture());
  }
  while (spec.stats().tokens < B) spec.step();
  const GenerateStats before = spec.stats();
  const auto t_spec = Clock::now();
  while (!spec.idle()) spec.step();
  const double spec_wall = seconds_since(t_spec);
  return std::pair{1.0 - (spec.stats().verify.model - before.verify.model) / spec_wall,
                   (spec.stats().draft_seconds - before.draft_seconds) / spec_wall};
}

// The same with drafting: a mixture of LLMA and the n-gram trie over a prompt that repeats
// itself, budget 16. Random weights accept almost nothing, but every step drafts, plans,
// verifies 17 tokens, walks and commits as a real one does.
void time_speculative_outside(Bench& b) {
  const Options& opt = b.opt;
  b.report.phase("speculative decoding's share of the step outside the forward pass");
  GenerateOptions spec_opt = b.plain_opt;
  spec_opt.limits.budget = 16;
  Request spec_req;
  for (std::size_t i = 0; i < opt.context; ++i) spec_req.prompt.push_back(static_cast<Token>(3 + (i * 31) % 97));
  const std::int64_t spec_capacity = static_cast<std::int64_t>(opt.context) + opt.plain_tokens + 20;
  for (const std::int64_t B : opt.outside_batches) {
    const auto [spec_outside, drafting] = in_session(b, opt.static_step, B, spec_capacity, spec_opt,
                                                     [&](auto& spec) { return time_spec_session(spec, spec_req, B); });
    std::cout << "speculative decoding (mixture of LLMA and the n-gram trie, budget 16), batch " << B << ": " << 100.0 * spec_outside
              << "% of the step outside the forward pass (drafting " << 100.0 * drafting << "%)\n";
    const std::string suffix = B == 1 ? "" : "_batch" + std::to_string(B);
    b.report.json["speculative_outside_forward_fraction" + suffix] = spec_outside;
    b.report.json["speculative_drafting_fraction" + suffix] = drafting;
  }
  if (opt.static_step) b.bench_model.release_all_but(1);
  std::cout << "\n";
}

using CostSamples = std::vector<std::pair<std::size_t, double>>;  // (tokens per step, seconds)

// 3. The step cost curve: one verification step of n tokens after the context, against the
// roofline's one-token step. refdec-replay --step-cost-file reads "step_cost" back.
CostSamples measure_step_cost_curve(Bench& b, double roofline) {
  const Options& opt = b.opt;
  CalibrationOptions calibration;
  calibration.tokens = opt.cost_tokens;
  calibration.context = static_cast<std::int64_t>(opt.context);
  calibration.repeats = 5;  // rounds over every size (calibrate.hpp): a drift moves the whole curve alike
  if (opt.static_step) calibration.prefill_chunk = opt.static_rows;
  b.report.phase("step cost curve (" + std::to_string(opt.cost_tokens.size()) + " step sizes, 5 rounds)");
  const auto samples = opt.static_step ? measure_step_cost(*b.bench_model.fixed(), calibration,
                                                           [&](std::int64_t capacity, std::int64_t rows) {
                                                             return b.bench_model.empty_store(1, capacity, rows);
                                                           })
                                       : measure_step_cost(b.model, calibration);
  std::cout << "| tokens per step | ms per step | x one token | roofline one-token step ms |\n|---|---|---|---|\n";
  nlohmann::json cost = nlohmann::json::array();
  for (const auto& [n, seconds] : samples) {
    std::cout << std::setprecision(2) << "| " << n << " | " << 1e3 * seconds << " | " << seconds / samples.front().second << " | "
              << 1e3 / roofline << " |\n";
    cost.push_back({n, seconds});
  }
  std::cout << "\n";
  b.report.json["step_cost"] = cost;
  b.report.write();
  return samples;
}

std::string dataset_name(const std::string& file) { return std::filesystem::path(file).stem().string(); }

std::vector<TrajectorySet> load_sets(const Options& opt) {
  std::vector<TrajectorySet> sets;
  for (const auto& f : opt.trajectory_files) sets.push_back(load_trajectories(f));
  if (sets.empty() && opt.live_datasets.empty()) sets.push_back(synthetic_trajectories());
  return sets;
}

std::vector<Trace> load_live_traces(const std::string& file) {
  auto traces = load_generic_traces<NoTokenizer>(file, nullptr);
  REFDEC_CHECK(!traces.empty(), "--live: no traces in " << file);
  for (Trace& t : traces)  // the generic form keeps an id as JSON text: "\"81/1\"" is replay's 81/1
    if (const auto id = nlohmann::json::parse(t.id, nullptr, false); id.is_string()) t.id = id.get<std::string>();
  return traces;
}

// The live rows of a --live dataset. Per prior (this run's calibration, then each --live-prior
// file's): the budget chosen under it as it is, and under the cost learned online from it.
std::vector<LiveRow> live_rows_of(const Options& opt, const std::shared_ptr<const Datastore>& datastore, const StepCost& calibrated) {
  const auto mixture = [&](const StepCost& prior, const std::string& variant = "") { return live_mixture(datastore, prior, variant); };
  const std::string label = datastore != nullptr ? "mixture" : "mixture (no REST)";
  std::vector<LiveRow> rows;
  const auto add_rows = [&](const StepCost& prior, const std::string& source) {
    rows.push_back({label + " live adaptive, " + source, mixture(prior), std::nullopt});
    rows.push_back({label + " live adaptive, learned online from " + source, mixture(prior), StepCostTracker(prior)});
  };
  add_rows(calibrated, "this run's calibration");
  if (opt.live_compare) {
    rows.push_back({label + " (table only) live adaptive, learned online from this run's calibration", mixture(calibrated, "table"),
                    StepCostTracker(calibrated)});
    rows.push_back({label + " without the index live adaptive, learned online from this run's calibration", mixture(calibrated, "no-index"),
                    StepCostTracker(calibrated)});
    rows.push_back({label + " with history for the index live adaptive, learned online from this run's calibration",
                    mixture(calibrated, "history"), StepCostTracker(calibrated)});
  }
  for (const std::string& f : opt.live_priors)
    add_rows(read_step_cost(f, "--live-prior"), "the calibration of " + std::filesystem::path(f).filename().string());
  return rows;
}

// The rows of part 4's table: the sets, then per --live dataset a mixture at this run's
// calibration and one that learns the cost online. A row's index in `names` is its key in
// ForcedTimes::timed.
struct ForcedRows {
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::size_t>> by_dataset;  // row indices
  std::map<std::string, std::vector<Trace>> live_traces;
  std::map<std::string, std::vector<LiveRow>> live_rows;
  std::map<std::string, std::vector<std::size_t>> live_indices;  // per dataset, the rows' indices in `names`
};

ForcedRows forced_rows(const Options& opt, const std::vector<TrajectorySet>& sets, const std::shared_ptr<const Datastore>& datastore,
                       const CostSamples& samples) {
  ForcedRows rows;
  for (const auto& set : sets) rows.names.push_back(set.name);
  for (std::size_t i = 0; i < sets.size(); ++i) rows.by_dataset[sets[i].dataset].push_back(i);
  if (opt.live_datasets.empty()) return rows;
  const StepCost calibrated = StepCost::calibrated(samples);
  for (const std::string& file : opt.live_datasets) {
    const std::string dataset = dataset_name(file);
    REFDEC_CHECK(rows.live_traces.count(dataset) == 0, "--live: two files named " << dataset);
    rows.live_traces[dataset] = load_live_traces(file);
    auto& live = rows.live_rows[dataset] = live_rows_of(opt, datastore, calibrated);
    for (const auto& row : live) {
      rows.live_indices[dataset].push_back(rows.names.size());
      rows.by_dataset[dataset].push_back(rows.names.size());
      rows.names.push_back(row.name);
    }
  }
  return rows;
}

// Every step width the sets contain runs once untimed first: oneDNN makes a primitive the
// first time it sees a row count, and the trace that happened to meet it first would pay.
void warm_step_widths(BenchModel& bench_model, const std::vector<TrajectorySet>& sets, std::size_t live_widest) {
  std::vector<std::int32_t> widths{0};
  for (const auto& set : sets)
    for (const auto& t : set.traces)
      for (const auto& step : t.steps) widths.push_back(step.first);
  for (std::size_t n = 1; n <= live_widest; ++n) widths.push_back(static_cast<std::int32_t>(n));
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
  const ForcedDecoder warm(bench_model, 1, 8, 8 + widths.back() + 2, widths.back() + 1);
  for (const std::int32_t n : widths) {
    ForcedDecoder d(warm);
    const std::int32_t none = 0;
    d.step(std::span(&n, 1), std::span(&none, 1));
  }
}

// A dataset's trace: id, category, output and prompt length.
struct TraceRef {
  std::string id, category;
  std::int64_t length = 0;
  std::size_t context = 0;
  const Trace* live = nullptr;
};

// A dataset's traces in order: the live dataset's, or the first set's.
std::vector<TraceRef> trace_order(const ForcedRows& rows, const std::vector<TrajectorySet>& sets, const std::string& dataset,
                                  const std::vector<std::size_t>& members, std::size_t context) {
  std::vector<TraceRef> order;
  if (const auto it = rows.live_traces.find(dataset); it != rows.live_traces.end()) {
    for (const Trace& t : it->second)
      order.push_back({t.id, t.category.empty() ? "all" : t.category, static_cast<std::int64_t>(t.output.size()), t.context.size(), &t});
  } else {
    for (const Trajectory& t : sets[members.front()].traces)
      order.push_back({t.id, t.category, t.length(), t.context > 0 ? t.context : context, nullptr});
  }
  return order;
}

// What part 4 measured.
struct ForcedTimes {
  std::map<std::pair<std::size_t, std::string>, Timed> timed;  // (row, category or "overall")
  // (row, category): each window's own speedup, so that a category's figure can be told from
  // one window's luck (a category of two windows, one at 0.8x, one at 1.1x)
  std::map<std::pair<std::size_t, std::string>, std::vector<double>> windows;
  std::map<std::string, std::vector<std::string>> categories;  // per dataset, in order
  double plain_spread = 0.0;  // the largest relative difference between two plain steps beside one row's window
};

Timed time_window(const ForcedDecoder& prefilled, const Trajectory& t, const Window& w, PlainBeside& plain) {
  ForcedDecoder spec(prefilled);
  Timed run;
  for (std::size_t k = w.begin; k < w.end; ++k) {
    const auto [n, a] = t.steps[k];
    plain.between([&] { run.spec += spec.step(std::span(&n, 1), std::span(&a, 1)); });
    ++run.steps;
  }
  run.tokens = w.tokens;
  run.plain = plain.window_seconds(run.tokens);
  return run;
}

Timed time_live(const ForcedDecoder& prefilled, LiveRow& row, const Trace& trace, std::int64_t offset, const Options& opt,
                PlainBeside& plain) {
  ForcedDecoder spec(prefilled);
  LiveSteps steps{row, &spec, &plain, static_cast<std::size_t>(offset), static_cast<std::int64_t>(opt.max_tokens)};
  (void)replay_trace(steps.row.drafter, trace, {.budget = opt.live_budget}, steps);
  steps.window.plain = plain.window_seconds(steps.window.tokens);
  return steps.window;
}

// A timed trace: every row's steps over its window, each beside plain steps (PlainBeside), all
// from one prefill of the trace's prompt and the output before the window.
void time_trace(const Options& opt, BenchModel& bench_model, const std::vector<TrajectorySet>& sets, ForcedRows& rows,
                const std::string& dataset, const std::vector<std::size_t>& members, const TraceRef& first, ForcedTimes& times) {
  // This trace in every set of the dataset, and the steps that emit its first tokens.
  std::vector<std::pair<std::size_t, const Trajectory*>> runs;
  for (const std::size_t i : members)
    if (i < sets.size())
      for (const auto& t : sets[i].traces)
        if (t.id == first.id) runs.emplace_back(i, &t);
  const std::int64_t offset = std::max<std::int64_t>(0, (first.length - static_cast<std::int64_t>(opt.max_tokens)) / 2);
  std::int64_t window_tokens = 0, widest = static_cast<std::int64_t>(opt.live_widest());
  if (first.live != nullptr)  // a live window ends with a step of at most live_budget + 1 tokens
    window_tokens = std::min<std::int64_t>(first.length - offset, static_cast<std::int64_t>(opt.max_tokens + opt.live_budget + 1));
  std::vector<Window> windows;
  for (const auto& [i, t] : runs) {
    const Window& w = windows.emplace_back(window(*t, offset, static_cast<std::int64_t>(opt.max_tokens)));
    for (std::size_t k = w.begin; k < w.end; ++k) widest = std::max<std::int64_t>(widest, t->steps[k].first);
    window_tokens = std::max(window_tokens, w.tokens);
  }
  const std::size_t ctx = std::min(std::min(first.context, opt.context) + static_cast<std::size_t>(offset), opt.context);
  const ForcedDecoder prefilled(bench_model, 1, ctx, static_cast<std::int64_t>(ctx) + window_tokens + widest + 2, widest + 1);
  std::vector<std::pair<std::size_t, Timed>> spec_runs;  // (row, its window)
  const auto beside = [&](auto&& time) {  // each row's plain steps from a decoder of its own
    PlainBeside plain(prefilled);
    Timed run = time(plain);
    times.plain_spread = std::max(times.plain_spread, plain.spread());
    return run;
  };
  for (std::size_t r = 0; r < runs.size(); ++r)
    spec_runs.emplace_back(runs[r].first, beside([&](PlainBeside& plain) { return time_window(prefilled, *runs[r].second, windows[r], plain); }));
  if (first.live != nullptr)
    for (std::size_t r = 0; r < rows.live_rows[dataset].size(); ++r)
      spec_runs.emplace_back(rows.live_indices[dataset][r], beside([&](PlainBeside& plain) {
                               return time_live(prefilled, rows.live_rows[dataset][r], *first.live, offset, opt, plain);
                             }));
  for (auto& [row, run] : spec_runs) {
    times.windows[{row, first.category}].push_back(run.plain / run.spec);
    for (const std::string& key : {first.category, std::string("overall")}) {
      Timed& sum = times.timed[{row, key}];
      sum.spec += run.spec, sum.plain += run.plain, sum.steps += run.steps, sum.tokens += run.tokens;
    }
  }
}

// Per trace (the first --max-traces of each category); the others only teach the live mixtures,
// as in a replay of the dataset.
ForcedTimes time_forced(const Options& opt, BenchModel& bench_model, const std::vector<TrajectorySet>& sets, ForcedRows& rows) {
  ForcedTimes times;
  warm_step_widths(bench_model, sets, opt.live_widest());
  for (const auto& [dataset, members] : rows.by_dataset) {
    std::map<std::string, std::size_t> taken;  // traces per category so far
    for (const TraceRef& first : trace_order(rows, sets, dataset, members, opt.context)) {
      const bool timed_trace = first.length > 0 && taken[first.category]++ < opt.max_traces;
      if (!timed_trace) {
        if (first.live != nullptr)
          for (LiveRow& row : rows.live_rows[dataset])
            (void)replay_trace(row.drafter, *first.live, {.budget = opt.live_budget}, LiveSteps{row});
        continue;
      }
      if (taken[first.category] == 1) times.categories[dataset].push_back(first.category);
      time_trace(opt, bench_model, sets, rows, dataset, members, first, times);
    }
  }
  return times;
}

nlohmann::json print_forced(const Options& opt, const ForcedRows& rows, ForcedTimes& times) {
  nlohmann::json forced = nlohmann::json::array();
  for (const auto& [dataset, members] : rows.by_dataset) {
    auto columns = times.categories[dataset];
    if (columns.size() > 1) columns.push_back("overall");
    std::cout << "speedup over plain decoding (tokens per step), " << dataset << ", " << opt.max_tokens
              << " tokens in the middle of the output of up to " << opt.max_traces << " traces per category:\n\n| trajectories |";
    for (const auto& c : columns) std::cout << " " << c << " |";
    std::cout << "\n|---|";
    for (std::size_t c = 0; c < columns.size(); ++c) std::cout << "---|";
    std::cout << "\n";
    for (const std::size_t i : members) {
      std::cout << "| " << rows.names[i] << " |";
      for (const auto& c : columns) {
        const Timed& t = times.timed[{i, c}];
        const double speedup = t.plain / t.spec, tau = static_cast<double>(t.tokens) / static_cast<double>(t.steps);
        std::cout << std::setprecision(2) << " " << speedup << " (" << tau << ") |";
        forced.push_back({{"trajectories", rows.names[i]},
                          {"dataset", dataset},
                          {"category", c},
                          {"steps", t.steps},
                          {"tokens", t.tokens},
                          {"speculative_seconds", t.spec},
                          {"plain_seconds", t.plain},
                          {"speedup", speedup}});
        if (const auto w = times.windows.find({i, c}); w != times.windows.end()) forced.back()["window_speedups"] = w->second;
      }
      std::cout << "\n";
    }
    std::cout << "\n";
  }
  return forced;
}

// What the online rows learned: the cost at the end against their prior.
void print_learned(const Options& opt, const ForcedRows& rows, Report& report) {
  for (const auto& [dataset, live] : rows.live_rows)
    for (const LiveRow& row : live) {
      if (!row.tracker) continue;
      std::cout << dataset << ", " << row.name << ", at the end of the timed windows (" << row.tracker->observations()
                << " steps):\n\n| tokens per step | prior ms | x one token | learned ms | x one token |\n|---|---|---|---|---|\n";
      const StepCost& learned = row.tracker->current();
      const StepCost& prior = row.tracker->prior();
      nlohmann::json curve = nlohmann::json::array();
      for (const std::size_t n : opt.cost_tokens) {
        std::cout << std::setprecision(3) << "| " << n << " | " << 1e3 * prior.seconds(n) << " | " << prior.seconds(n) / prior.seconds(1)
                  << " | " << 1e3 * learned.seconds(n) << " | " << learned.seconds(n) / learned.seconds(1) << " |\n";
        curve.push_back({n, learned.seconds(n)});
      }
      std::cout << "\n";
      report.json["live_learned_step_cost"][dataset][row.name] = curve;
    }
}

// 4. Forced trajectories at batch 1. Per trace (the first --max-traces of each category), a
// window of --max-tokens output tokens in the middle of its output (the start of an output
// copies less than the rest: a window there would understate every drafter): every set's steps
// over it, each step beside a plain one (PlainBeside), all from one prefill of the trace's prompt
// and the output before the window (capped at --context). Speedup = plain seconds / speculative
// seconds over the same tokens, the window's tokens charged at its plain steps' mean.
void forced_trajectories(Bench& b, const std::vector<TrajectorySet>& sets, ForcedRows& rows) {
  ForcedTimes times = time_forced(b.opt, b.bench_model, sets, rows);
  const nlohmann::json forced = print_forced(b.opt, rows, times);
  if (!forced.empty())
    std::cout << "plain steps beside one row's window: the slowest up to " << std::setprecision(3) << 100.0 * times.plain_spread
              << "% slower than the fastest (the machine's speed moving; each speculative step is weighed against the two plain "
                 "steps around it)\n\n";
  b.report.json["forced"] = forced;
  b.report.json["forced_plain_spread"] = times.plain_spread;
  print_learned(b.opt, rows, b.report);
  b.report.write();
}

// The steps of B slots, [steps][B] (nodes, accepted).
using SlotPlan = std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>>;

// Slot b replays traces first + b, first + b + B, ... of `set` back to back (plain decoding,
// (0, 0), when `set` is null).
SlotPlan plan_slots(const TrajectorySet* set, std::size_t B, std::size_t steps, std::size_t first) {
  SlotPlan plan(steps, std::vector<std::pair<std::int32_t, std::int32_t>>(B, {0, 0}));
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
}

// Tokens/s of a plan, in a cache sized to what the plan keeps.
double run_plan(BenchModel& bench_model, std::size_t context, const SlotPlan& plan) {
  const std::size_t B = plan.front().size();
  std::vector<std::int64_t> kept(B, 0);
  std::int64_t widest = 0;
  for (const auto& row : plan)
    for (std::size_t b = 0; b < B; ++b) kept[b] += row[b].second + 1, widest = std::max<std::int64_t>(widest, row[b].first);
  ForcedDecoder dec(bench_model, static_cast<std::int64_t>(B), context,
                    static_cast<std::int64_t>(context) + *std::max_element(kept.begin(), kept.end()) + widest + 2, widest + 1);
  std::vector<std::int32_t> nodes(B), accepted(B);
  double seconds = 0;
  for (const auto& row : plan) {
    for (std::size_t b = 0; b < B; ++b) std::tie(nodes[b], accepted[b]) = row[b];
    seconds += dec.step(nodes, accepted);
  }
  return static_cast<double>(std::accumulate(kept.begin(), kept.end(), std::int64_t{0})) / seconds;
}

// 5. Batch sweep: B slots run different traces. The budget adapts to the batch size by
// measurement: a short trial of plain decoding and of every trajectory set (one per budget),
// then the best of them is timed, so speculation is used only where it pays at that B.
void batch_sweep(Bench& b, const std::vector<TrajectorySet>& sets) {
  const Options& opt = b.opt;
  if (!opt.batches.empty()) b.report.phase("batch sweep");
  std::cout << "\n| batch | chosen | plain tokens/s | speculative tokens/s | ratio |\n|---|---|---|---|---|\n";
  nlohmann::json sweep = nlohmann::json::array();
  const auto rate = [&](const TrajectorySet* set, std::size_t slots, std::size_t steps, std::size_t first) {
    return run_plan(b.bench_model, opt.context, plan_slots(set, slots, steps, first));
  };
  for (const std::int64_t B : opt.batches) {
    const auto slots = static_cast<std::size_t>(B);
    const std::size_t trial = std::max<std::size_t>(4, opt.sweep_steps / 4);
    const TrajectorySet* chosen = nullptr;
    double best = rate(nullptr, slots, trial, 0);
    for (const auto& set : sets)
      if (const double r = rate(&set, slots, trial, set.traces.size() / 2); r > best) best = r, chosen = &set;
    const double plain_tps = rate(nullptr, slots, opt.sweep_steps, 0);
    const double spec_tps = chosen != nullptr ? rate(chosen, slots, opt.sweep_steps, 0) : plain_tps;
    const std::string name = chosen != nullptr ? chosen->name : "plain (budget 0)";
    std::cout << std::setprecision(1) << "| " << B << " | " << name << " | " << plain_tps << " | " << spec_tps << " | "
              << std::setprecision(3) << spec_tps / plain_tps << " |\n";
    sweep.push_back({{"batch", B}, {"chosen", name}, {"plain_tokens_per_s", plain_tps}, {"speculative_tokens_per_s", spec_tps}});
  }
  b.report.json["batch_sweep"] = sweep;
  b.report.write();
}

// A row of the live batch sweep: name, policy, budget.
using LiveBatchKind = std::tuple<std::string, BatchPolicy, std::size_t>;

std::vector<LiveBatchKind> live_batch_kinds(const Options& opt) {
  std::vector<LiveBatchKind> kinds = {{"plain", BatchPolicy::kPlain, 0}};
  for (const std::size_t b : opt.live_fixed) kinds.emplace_back("fixed @" + std::to_string(b), BatchPolicy::kFixed, b);
  kinds.emplace_back("per-request adaptive @" + std::to_string(opt.live_budget), BatchPolicy::kPerRequest, opt.live_budget);
  kinds.emplace_back("batch budget @" + std::to_string(opt.live_budget), BatchPolicy::kAllocator, opt.live_budget);
  return kinds;
}

// One batch size of a dataset's live batch sweep: every row timed and printed, each against the
// first (plain decoding).
void live_batch_rows(Bench& b, const std::vector<Trace>& traces, std::int64_t batch, const std::vector<LiveBatchKind>& kinds,
                     const std::shared_ptr<const Datastore>& datastore, const StepCost& calibrated, nlohmann::json& results) {
  const Options& opt = b.opt;
  std::size_t widest = opt.live_budget;
  for (const std::size_t f : opt.live_fixed) widest = std::max(widest, f);
  // One prefill per batch size: each row decodes on from a copy sharing its cache.
  const ForcedDecoder prefilled(b.bench_model, batch, opt.context,
                                static_cast<std::int64_t>(opt.context + opt.live_batch_steps * (widest + 1) + widest + 2),
                                static_cast<std::int64_t>(widest) + 1);
  std::vector<std::unique_ptr<LiveBatchRow>> rows;
  for (const auto& [name, policy, budget] : kinds)
    rows.push_back(std::make_unique<LiveBatchRow>(name, policy, budget, static_cast<std::size_t>(batch), traces, opt.live_warmup, datastore,
                                                  calibrated, prefilled));
  for (std::size_t step = 0; step < opt.live_batch_steps; ++step)
    for (auto& row : rows) row->step(traces);
  const double plain_rate = rows.front()->tokens_per_second();
  for (const auto& row : rows) {
    const double rate = row->tokens_per_second();
    const double per_step = static_cast<double>(row->tokens) / static_cast<double>(opt.live_batch_steps * static_cast<std::size_t>(batch));
    const double nodes_per_step = static_cast<double>(row->drafted) / static_cast<double>(opt.live_batch_steps);
    std::cout << std::setprecision(2) << "| " << batch << " | " << row->name << " | " << rate << " | " << std::setprecision(3)
              << rate / plain_rate << " | " << per_step << " | " << std::setprecision(1) << nodes_per_step << " |\n"
              << std::flush;
    results.push_back({{"batch", batch},
                       {"row", row->name},
                       {"tokens_per_s", rate},
                       {"x_plain", rate / plain_rate},
                       {"tokens_per_step_per_sequence", per_step},
                       {"draft_nodes_per_step", nodes_per_step}});
  }
}

// 6. Live batch sweep (LiveBatchRow): per batch size, every row's B slots draft live over a
// --live dataset; the rows take their steps in turn, so that the machine's drift (its
// bandwidth moves by the minute) falls on all of them alike.
void live_batch_sweep(Bench& b, const std::map<std::string, std::vector<Trace>>& live_traces,
                      const std::shared_ptr<const Datastore>& datastore, const CostSamples& samples) {
  const Options& opt = b.opt;
  b.report.phase("live batch sweep");
  const StepCost calibrated = StepCost::calibrated(samples);
  const std::vector<LiveBatchKind> kinds = live_batch_kinds(opt);
  nlohmann::json live_sweep = nlohmann::json::object();
  for (const std::string& file : opt.live_datasets) {
    const std::string dataset = dataset_name(file);
    std::cout << "\nlive batch sweep, " << dataset << ", " << opt.live_batch_steps << " steps per row, the rows' steps in turn, after "
              << opt.live_warmup << " warm-up traces per slot:\n\n| batch | row | tokens/s | x plain | tokens per step and sequence | "
              << "draft nodes per step |\n|---|---|---|---|---|---|\n";
    for (const std::int64_t batch : opt.live_batches)
      live_batch_rows(b, live_traces.at(dataset), batch, kinds, datastore, calibrated, live_sweep[dataset]);
  }
  b.report.json["live_batch_sweep"] = live_sweep;
  b.report.write();
}

void run(const Options& opt) {
  REFDEC_CHECK(opt.live_batches.empty() || !opt.live_datasets.empty(), "--live-batches needs --live traces");
  const at::Device device(opt.device_name);
  REFDEC_CHECK(!device.is_cuda() || at::hasCUDA(), "--device cuda, but this libtorch sees no CUDA device");
  const auto dtype = parse_dtype(opt.dtype_name);
  const LlamaConfig config = refdec_bench::shape(opt.shape_name);
  const LinearKernel linear = parse_linear_kernel(opt.linear_name);
  Report report(opt.json_path);
  if (opt.threads > 0) at::set_num_threads(static_cast<int>(opt.threads));
  report.json = nlohmann::json{{"shape", opt.shape_name},
                               {"device", opt.device_name},
                               {"dtype", opt.dtype_name},
                               {"context", opt.context},
                               {"threads", at::get_num_threads()}};

  // 1. The model and what a step at batch 1 reads: every weight, the KV cache of the context.
  report.phase("initialising " + opt.shape_name + " " + opt.dtype_name + " weights (CPU: " + cpu_isa().describe() + ")");
  const auto t_init = Clock::now();
  std::optional<LinearChoice> choice;
  if (!opt.linear_choice.empty()) choice = LinearChoice::parse(opt.linear_choice);
  const LlamaModel model = LlamaModel::random(config, 1, dtype, device, linear, std::move(choice));
  const double init_seconds = seconds_since(t_init);
  const std::int64_t kv_bytes = kv_cache_bytes(model, opt.context, dtype);
  describe_model(opt, model, init_seconds, kv_bytes, report);

  GenerateOptions plain_opt;
  plain_opt.limits.max_new_tokens = opt.plain_tokens;
  plain_opt.limits.budget = 0;
  Request req;
  req.prompt.assign(opt.context, 1);
  report.phase("plain decoding: warm-up, prefill, " + std::to_string(opt.plain_tokens) + " tokens between two bandwidth measurements");
  GenerateOptions warm_up = plain_opt;
  warm_up.limits.max_new_tokens = 4;
  (void)generate(model, req, AnyDrafter{}, warm_up);
  BenchModel bench_model(model, opt.static_step, opt.static_rows);
  if (opt.static_step) {
    plain_opt.driver.prefill_chunk = opt.static_rows;  // the prompt in chunks the static step takes
    report.json["static_rows"] = opt.static_rows;
  }
  const BandwidthProbe probe(device, std::int64_t{opt.bandwidth_mib} << 20);
  Bench b{opt, device, dtype, model, bench_model, report, std::move(plain_opt), std::move(req), model.step_weight_bytes(), kv_bytes, probe};
  const Plain plain = measure_plain(b);
  if (opt.static_step && device.is_cuda() && StepGraph::available()) time_matmuls(b, plain);
  if (opt.only_plain) {
    report.write();
    return;
  }
  time_paired_steps(b);
  time_speculative_outside(b);
  report.write();
  const CostSamples samples = measure_step_cost_curve(b, plain.roofline);

  report.phase("forced trajectories at batch 1");
  const std::vector<TrajectorySet> sets = load_sets(opt);
  const auto datastore = opt.live_datastore.empty() ? nullptr : Datastore::open_shared(opt.live_datastore);
  ForcedRows rows = forced_rows(opt, sets, datastore, samples);
  forced_trajectories(b, sets, rows);
  batch_sweep(b, sets);
  if (!opt.live_batches.empty()) live_batch_sweep(b, rows.live_traces, datastore, samples);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "refdec-speed-bench: plain vs speculative decoding speed of a real-shaped model: roofline, step cost, "
      "forced trajectories, batch sweep"};
  Options opt;
  add_options(app, opt);
  CLI11_PARSE(app, argc, argv);
  try {
    run(opt);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "refdec-speed-bench: " << describe(e) << '\n';  // no libtorch stack trace
    return 1;
  }
}
