// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's StepDriver, the step protocol for an engine of one's own, and what it reports
// (core/step_driver.hpp).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "common.hpp"
#include "refdec/core/step_driver.hpp"

using namespace refdec;

namespace refdec_python {
namespace {

// A StepDriver plus the Python drafters its sequences borrow.
struct PyStepDriver {
  explicit PyStepDriver(StepDriverOptions options) : driver(options) {}
  StepDriver driver;
  BorrowedDrafters drafters;
};

void bind_updates(py::module_& m) {
  py::enum_<FinishReason>(m, "FinishReason", "Why a request left a Session.")
      .value("stop_token", FinishReason::kStopToken, "It produced a stop token (not emitted).")
      .value("max_new_tokens", FinishReason::kMaxNewTokens, "It reached its token limit.")
      .value("max_context", FinishReason::kMaxContext, "Prompt and output filled the context.")
      .value("cancelled", FinishReason::kCancelled, "Session.cancel().")
      .value("drafter_error", FinishReason::kDrafterError, "Its drafter failed after the step (RequestUpdate.error says how).");
  py::class_<StepDriverStats>(m, "StepDriverStats", "What a StepDriver's steps did, summed over sequences.")
      .def_readonly("tokens", &StepDriverStats::tokens, "Generated tokens.")
      .def_readonly("steps", &StepDriverStats::steps, "Verification steps, counted per request.")
      .def_readonly("auxiliary_tokens", &StepDriverStats::auxiliary_tokens, "Auxiliary tokens run.")
      .def_readonly("prefill_tokens", &StepDriverStats::prefill_tokens, "Prompt tokens run as prefill rows.")
      .def_readonly("draft_seconds", &StepDriverStats::draft_seconds,
                    "The drafters' time: propose and the budget cut, then their accept, observe and finish.")
      .def_readonly("drafting", &StepDriverStats::drafting, "DrafterStats of the requests that have left, each over its own request.")
      .def_property_readonly("tokens_per_step", &StepDriverStats::tokens_per_step, "τ: mean tokens per step, bonus included.");

  py::class_<RequestUpdate>(m, "RequestUpdate", "What one step did for one request.")
      .def_readonly("id", &RequestUpdate::id, "The request.")
      .def_readonly("tokens", &RequestUpdate::tokens, "Tokens appended by this step (stop token excluded).")
      .def_readonly("error", &RequestUpdate::error,
                    "What its drafter raised after the step ('' when nothing did); the request left, the others are unaffected.")
      .def_readonly("finished", &RequestUpdate::finished, "FinishReason when the request left, else None.")
      .def("__repr__", [](const RequestUpdate& u) { return "<refdec.RequestUpdate id=" + std::to_string(u.id) + " tokens=[" + join(u.tokens) + "]>"; });

}

void bind_step_driver(py::module_& m) {
  py::class_<PyStepDriver>(m, "StepDriver",
                           "The step protocol for an engine of your own (docs/engine.md): per sequence its drafter, prompt, "
                           "output and limits. Per step: prepare() (prefill chunks or drafts, then `plan`), your forward pass "
                           "over the plan, complete_greedy(targets) or complete(accepted, aux_choices), then apply `keep` to "
                           "your caches and drop the slots in `left`; `updates` says what each sequence did. Keep one cache "
                           "per active sequence in slot order (a sequence added takes the next slot). One thread drives a "
                           "driver; drafting and completing run without the GIL.")
      .def(py::init([](std::int64_t vocab_size, std::int64_t max_context, std::int64_t prefill_chunk, std::int64_t drafting_threads) {
             return std::make_unique<PyStepDriver>(StepDriverOptions{vocab_size, max_context, prefill_chunk, drafting_threads});
           }),
           py::arg("vocab_size"), py::arg("max_context"), py::arg("prefill_chunk") = StepDriverOptions{}.prefill_chunk,
           py::arg("drafting_threads") = StepDriverOptions{}.drafting_threads,
           "A driver for token ids in [0, vocab_size), prompt + output at most `max_context` per sequence, prompts "
           "prefilled `prefill_chunk` tokens per step at most (0: at once), sequences drafted on `drafting_threads` "
           "threads at once (the caller's among them; the GIL is released once per step).")
      .def("add", [](PyStepDriver& s, const Tokens& prompt, const py::iterable& references, py::object drafter,
                     std::int64_t max_new_tokens, const Tokens& stop_tokens, std::int64_t budget) {
             const SequenceLimits limits{max_new_tokens, stop_tokens, budget};
             const PyReferences refs(references);
             if (drafter.is_none()) return s.driver.add(prompt, refs.view(), limits);
             auto& d = drafter.cast<PyDrafter&>();
             const std::size_t before = s.driver.active();
             const RequestId id = with_drafter(d, [&] { return s.driver.add(prompt, refs.view(), limits, &d.drafter); });
             if (s.driver.active() > before) s.drafters.lend(id, std::move(drafter));
             return id;
           }, py::arg("prompt"), py::arg("references") = py::list(), py::arg("drafter") = py::none(),
           py::arg("max_new_tokens") = SequenceLimits{}.max_new_tokens, py::arg("stop_tokens") = SequenceLimits{}.stop_tokens,
           py::arg("budget") = SequenceLimits{}.budget,
           "Adds a sequence; returns its id. `drafter` (None: plain decoding) is borrowed until the sequence leaves. Raises "
           "ValueError without changing the driver when something is wrong. A sequence with max_new_tokens=0 takes no "
           "slot: it is reported as finished by the next prepare().")
      .def("prepare", [](PyStepDriver& s) { return s.drafters.locked([&] { return s.driver.prepare(); }); },
           "Prepares a step for every active sequence (its prompt's next chunk, or its draft) and its plan; False when no "
           "sequence is active (`updates` may still report sequences that left between steps).")
      .def_property_readonly("plan", [](PyStepDriver& s) { return s.driver.plan(); },
                             "A copy of the prepared step's StepPlan (changing it leaves the driver's step as it is).")
      .def_property_readonly("step_prepared", [](const PyStepDriver& s) { return s.driver.step_prepared(); },
                             "True between a prepare() that returned True and the complete of its step (add and cancel raise then).")
      .def_property_readonly("prefill", [](PyStepDriver& s) {
             const auto p = s.driver.prefill();
             return std::vector<std::uint8_t>(p.begin(), p.end());
           }, "[active] 1 where the prepared step prefills the sequence's prompt (its acceptance is ignored).")
      .def("complete", [](PyStepDriver& s, std::vector<Acceptance> accepted, const std::vector<Tokens>& aux_choices) {
             s.drafters.locked([&] { s.driver.complete(accepted, aux_choices); });
             s.drafters.release_finished(s.driver.updates());
           }, py::arg("accepted"), py::arg("aux_choices") = std::vector<Tokens>{},
           "Completes the prepared step with your walk: one Acceptance per sequence of the plan, and each sequence's "
           "greedy choices at its auxiliary rows ([] when none ran). Tells the drafters, applies stops and limits.")
      .def("complete_greedy", [](PyStepDriver& s, const Tokens& targets) {
             check_targets(targets, s.driver.plan().rows(), "complete_greedy");
             s.drafters.locked([&] { s.driver.complete_greedy(targets); });
             s.drafters.release_finished(s.driver.updates());
           }, py::arg("targets"),
           "Completes the prepared step by greedy acceptance: `targets` ([plan.num_rows] integer array or CPU tensor) is "
           "the target's token at each row.")
      .def_property_readonly("updates", [](PyStepDriver& s) { return s.driver.updates(); },
                             "What the last prepare() and complete() did: a RequestUpdate per sequence that emitted or left.")
      .def_property_readonly("keep", [](PyStepDriver& s) { return s.driver.keep(); },
                             "A copy of the completed step's KeepPlan (every sequence of the plan): apply it before dropping `left`.")
      .def_property_readonly("left", [](PyStepDriver& s) {
             const auto l = s.driver.left();
             return std::vector<std::size_t>(l.begin(), l.end());
           }, "Slots the completed step removed, decreasing: drop your caches at these indices, in this order.")
      .def("cancel", [](PyStepDriver& s, RequestId id) {
             const auto slot = s.drafters.locked([&] { return s.driver.cancel(id); });
             s.drafters.release(id);
             return slot;
           }, py::arg("id"), "Ends sequence `id` now; returns the slot to drop, or None for an unknown id.")
      .def_property_readonly("active", [](const PyStepDriver& s) { return s.driver.active(); }, "Active sequences (your caches).")
      .def_property_readonly("idle", [](const PyStepDriver& s) { return s.driver.idle(); }, "True when prepare() has nothing to run or report.")
      .def_property_readonly("ids", [](const PyStepDriver& s) {
             std::vector<RequestId> ids(s.driver.active());
             for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = s.driver.id(i);
             return ids;
           }, "The active sequences' ids in slot order.")
      .def("output", [](const PyStepDriver& s, RequestId id) { return s.driver.output(id); }, py::arg("id"),
           "Tokens sequence `id` has generated so far (while active).")
      .def_property_readonly("stats", [](const PyStepDriver& s) { return s.driver.stats(); }, "StepDriverStats (a copy).");
}

}  // namespace

void bind_driver(py::module_& m) {
  bind_updates(m);
  bind_step_driver(m);
}

}  // namespace refdec_python
