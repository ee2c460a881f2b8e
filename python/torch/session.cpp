// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._torch's continuous-batching Session over the reference model and one of the two KV
// stores, with its options and statistics (torch/session.hpp).

#include <ATen/core/ivalue.h>  // first: clang + libtorch 1.13 in C++20 needs it before the rest
#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "refdec/torch/session.hpp"

using namespace refdec;

namespace refdec_python {
namespace {

using ContiguousSession = Session<LlamaModel, ContiguousKvStore>;
using PagedSession = Session<LlamaModel, PagedKvStore>;

// A Session over one of the two KV stores, plus the Python drafters its requests borrow.
struct PySession {
  std::shared_ptr<const LlamaModel> model;
  std::variant<std::unique_ptr<ContiguousSession>, std::unique_ptr<PagedSession>> session;
  BorrowedDrafters drafters;

  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit([&](auto& s) -> decltype(auto) { return f(*s); }, session);
  }
};

// A field of one of Outer's members as a property of Outer's Python class: Python keeps one
// flat set of keywords where C++ composes options of their parts.
template <class Outer, class Inner, class T>
void def_nested(py::class_<Outer>& c, const char* name, Inner Outer::*part, T Inner::*field, const char* doc) {
  c.def_property(
      name, [part, field](const Outer& o) { return o.*part.*field; }, [part, field](Outer& o, T v) { (o.*part).*field = std::move(v); },
      doc);
}

void bind_options(py::module_& m) {
  py::enum_<SamplingPath>(m, "SamplingPath", "Where sampled steps process the logits (same output).")
      .value("auto", SamplingPath::kAuto, "Tensor ops on a GPU, the host elsewhere.")
      .value("host", SamplingPath::kHost, "The host, rows the walk visits only.")
      .value("tensor", SamplingPath::kTensor, "Every node's draw by tensor ops on the logits' device.");

  py::class_<GenerateOptions> options(m, "GenerateOptions",
                                      "Defaults and limits of a Session: C++'s GenerateOptions, whose limits (SequenceLimits) and "
                                      "driver settings (StepDriverOptions) appear here as fields of their own.");
  const GenerateOptions defaults;
  options.def(py::init([](std::int64_t max_new_tokens, std::int64_t budget, Tokens stop_tokens, std::int64_t max_context,
                          std::optional<SamplingOptions> sampling, SamplingPath sampling_path, std::int64_t prefill_chunk,
                          std::optional<StepCost> step_cost, double step_cost_half_life, std::int64_t drafting_threads,
                          bool batch_budget) {
                return GenerateOptions{
                    .limits = {.max_new_tokens = max_new_tokens, .stop_tokens = std::move(stop_tokens), .budget = budget},
                    .driver = {.max_context = max_context, .prefill_chunk = prefill_chunk, .drafting_threads = drafting_threads},
                    .sampling = std::move(sampling),
                    .sampling_path = sampling_path,
                    .step_cost = std::move(step_cost),
                    .step_cost_tracking = {.half_life = step_cost_half_life},
                    .batch_budget = batch_budget};
              }),
              py::arg("max_new_tokens") = defaults.limits.max_new_tokens, py::arg("budget") = defaults.limits.budget,
              py::arg("stop_tokens") = defaults.limits.stop_tokens, py::arg("max_context") = defaults.driver.max_context,
              py::arg("sampling") = defaults.sampling, py::arg("sampling_path") = defaults.sampling_path,
              py::arg("prefill_chunk") = defaults.driver.prefill_chunk, py::arg("step_cost") = defaults.step_cost,
              py::arg("step_cost_half_life") = defaults.step_cost_tracking.half_life,
              py::arg("drafting_threads") = defaults.driver.drafting_threads, py::arg("batch_budget") = defaults.batch_budget);
  def_nested(options, "max_new_tokens", &GenerateOptions::limits, &SequenceLimits::max_new_tokens, "Tokens to generate at most per request.");
  def_nested(options, "budget", &GenerateOptions::limits, &SequenceLimits::budget, "Draft nodes verified per step; 0 is plain decoding.");
  def_nested(options, "stop_tokens", &GenerateOptions::limits, &SequenceLimits::stop_tokens, "Generation stops before any of these.");
  def_nested(options, "max_context", &GenerateOptions::driver, &StepDriverOptions::max_context,
             "Prompt + output at most; 0: the model's max_seq_len.");
  def_nested(options, "prefill_chunk", &GenerateOptions::driver, &StepDriverOptions::prefill_chunk,
             "Prompt tokens a step prefills per request at most (0: all).");
  def_nested(options, "drafting_threads", &GenerateOptions::driver, &StepDriverOptions::drafting_threads,
             "Threads that draft a step's requests at once, the stepping thread's among them (>= 1; the GIL is released once per step).");
  options
      .def_readwrite("sampling", &GenerateOptions::sampling, "SamplingOptions for requests without their own; None: greedy.")
      .def_readwrite("sampling_path", &GenerateOptions::sampling_path, "SamplingPath.")
      .def_readwrite("step_cost", &GenerateOptions::step_cost,
                     "A calibration (StepCost) the session learns around from its own steps: with batch_budget, each "
                     "step's draft nodes are chosen across the batch under it; without, it is given to a lone "
                     "request's cost-aware drafter (the mixture). None: drafters keep their own.")
      .def_readwrite("batch_budget", &GenerateOptions::batch_budget,
                     "With step_cost: one budget for the whole step, spent where it pays across the batch (each "
                     "request's budget is its cap); False: each request's drafter chooses its own.");

  py::class_<StepTimes>(m, "StepTimes", "Wall time of the parts of the steps, in seconds.")
      .def_readonly("plan", &StepTimes::plan, "Building the step plan.")
      .def_readonly("model", &StepTimes::model, "Forward pass, argmax and its copy to the host.")
      .def_readonly("accept", &StepTimes::accept, "Tree walks and the keep plan.")
      .def_readonly("commit", &StepTimes::commit, "Applying the keep plan to the KV store.");
  py::class_<GenerateStats, StepDriverStats>(m, "GenerateStats", "What a Session did, summed over requests (StepDriverStats and the model's part).")
      .def_readonly("forward_passes", &GenerateStats::forward_passes, "Model calls for the whole batch.")
      .def_readonly("verify", &GenerateStats::verify, "StepTimes (no drafter's time).")
      .def_readonly("total_seconds", &GenerateStats::total_seconds, "Wall time of the steps.");
}

void bind_session_class(py::module_& m) {
  py::class_<PySession>(m, "Session",
                        "Continuous batching over refdec's reference model: requests join (add) and leave between steps; "
                        "each step drafts, verifies every active request in one forward pass and commits the KV store. "
                        "Output equals plain greedy decoding (and plain sampling for the same seed). One thread drives a "
                        "session; step() runs without the GIL.")
      .def(py::init([](std::shared_ptr<LlamaModel> model, const GenerateOptions& options, const std::string& kv_store,
                       std::int64_t capacity, std::int64_t num_blocks, std::int64_t block_size) {
             REFDEC_CHECK(model != nullptr, "Session: model is None");
             REFDEC_CHECK(capacity >= 0 && num_blocks >= 0 && block_size >= 1,
                          "Session: capacity and num_blocks must be >= 0 (0: the default) and block_size >= 1, got "
                              << capacity << ", " << num_blocks << ", " << block_size);
             auto s = std::make_unique<PySession>();
             s->model = model;
             const std::int64_t context = model_driver_options(*model, options.driver, "Session").max_context;
             if (kv_store == "contiguous") {
               // Room for the context plus a lookahead window's auxiliary rows.
               const std::int64_t cap = capacity > 0 ? capacity : context + 256;
               s->session = std::make_unique<ContiguousSession>(*model, ContiguousKvStore(model->kv_layout(), cap), options);
             } else if (kv_store == "paged") {
               const std::int64_t blocks = num_blocks > 0 ? num_blocks : 64 * ((context + 256 + block_size - 1) / std::max<std::int64_t>(block_size, 1));
               s->session = std::make_unique<PagedSession>(*model, PagedKvStore(model->kv_layout(), blocks, block_size), options);
             } else {
               REFDEC_CHECK(false, "Session: kv_store must be 'contiguous' or 'paged', got '" << kv_store << "'");
             }
             return s;
           }),
           py::arg("model"), py::arg("options") = GenerateOptions{}, py::arg("kv_store") = "contiguous", py::arg("capacity") = 0,
           py::arg("num_blocks") = 0, py::arg("block_size") = 16,
           "A session over `model`. kv_store 'contiguous' (one buffer of `capacity` entries per request; 0: the context + "
           "256) or 'paged' (a pool of `num_blocks` blocks of `block_size` entries; 0: room for 64 full-context requests).")
      .def("add", [](PySession& s, const Tokens& prompt, const std::vector<Tokens>& references, py::object drafter,
                     std::optional<SamplingOptions> sampling, std::optional<std::int64_t> max_new_tokens,
                     std::optional<Tokens> stop_tokens, std::optional<std::int64_t> budget) {
             Request r{prompt, references, sampling, max_new_tokens, stop_tokens, budget};
             if (drafter.is_none()) return s.visit([&](auto& session) { return session.add(std::move(r)); });
             auto& d = drafter.cast<PyDrafter&>();
             const RequestId id = with_drafter(d, [&] { return s.visit([&](auto& session) { return session.add(std::move(r), &d.drafter); }); });
             s.drafters.lend(id, std::move(drafter));
             return id;
           }, py::arg("prompt"), py::arg("references") = std::vector<Tokens>{}, py::arg("drafter") = py::none(),
           py::arg("sampling") = std::nullopt, py::arg("max_new_tokens") = std::nullopt, py::arg("stop_tokens") = std::nullopt,
           py::arg("budget") = std::nullopt,
           "Adds a request; returns its id. `drafter` (None: plain decoding) is borrowed until the request leaves: its "
           "statistics grow with the request's (never reset) and stay readable; it cannot serve anything else meanwhile. Unset limits take "
           "the session's defaults. Raises ValueError without changing the session when something is wrong.")
      .def("step", [](PySession& s) {
             std::vector<RequestUpdate> updates = s.drafters.locked([&] { return s.visit([](auto& session) { return session.step(); }); });
             s.drafters.release_finished(updates);
             return updates;
           }, "Runs one step for every active request; returns a RequestUpdate per request that emitted or left.")
      .def("cancel", [](PySession& s, RequestId id) {
             const bool found = s.visit([&](auto& session) { return session.cancel(id); });
             s.drafters.release(id);
             return found;
           }, py::arg("id"), "Ends request `id` now (reported as cancelled by the next step); False for unknown ids.")
      .def_property_readonly("active", [](PySession& s) { return s.visit([](auto& session) { return session.active(); }); },
                             "Requests in the session.")
      .def_property_readonly("idle", [](PySession& s) { return s.visit([](auto& session) { return session.idle(); }); },
                             "True when step() has nothing left to do or report.")
      .def("output", [](PySession& s, RequestId id) { return s.visit([&](auto& session) { return session.output(id); }); },
           py::arg("id"), "Tokens request `id` has generated so far (while active).")
      .def_property_readonly("stats", [](PySession& s) { return s.visit([](auto& session) { return session.stats(); }); },
                             "GenerateStats (a copy).")
      .def_property_readonly("model", [](const PySession& s) { return std::const_pointer_cast<LlamaModel>(s.model); }, "The model.")
      .def_property_readonly("step_cost_tracker", [](PySession& s) {
             return s.visit([](auto& session) -> std::optional<StepCostTracker> {
               const StepCostTracker* t = session.step_cost_tracker();
               return t != nullptr ? std::optional<StepCostTracker>(*t) : std::nullopt;
             });
           }, "A copy of the step cost learned so far (GenerateOptions.step_cost); None when the session learns none.")
      .def_property_readonly("last_plan", [](PySession& s) { return s.visit([](auto& session) { return session.last_plan(); }); },
                             "A copy of the last step's StepPlan.");
}

}  // namespace

void bind_session(py::module_& m) {
  bind_options(m);
  bind_session_class(m);
}

}  // namespace refdec_python
