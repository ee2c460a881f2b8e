// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's drafter base: every drafter's methods and statistics (core/drafter.hpp,
// core/draft_step.hpp), and NoDrafter.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/core/drafter.hpp"

using namespace refdec;

namespace refdec_python {
namespace {

struct PyNoDrafter : PyDrafter {
  PyNoDrafter() : PyDrafter([] { return AnyDrafter(NoDrafter{}); }) {}
};

}  // namespace

void bind_drafter(py::module_& m) {
  py::class_<DrafterStats>(m, "DrafterStats", "What a drafter did: proposals, accepted tokens by depth, time.")
      .def_readonly("steps", &DrafterStats::steps, "Proposals recorded.")
      .def_readonly("proposals", &DrafterStats::proposals, "Proposals with at least one node.")
      .def_readonly("proposed_tokens", &DrafterStats::proposed_tokens, "Draft nodes proposed, summed over steps.")
      .def_readonly("accepted_tokens", &DrafterStats::accepted_tokens, "Draft tokens accepted (bonus excluded).")
      .def_readonly("proposed_at_depth", &DrafterStats::proposed_at_depth, "[max depth] steps whose draft reached depth d+1.")
      .def_readonly("accepted_at_depth", &DrafterStats::accepted_at_depth, "[max depth] steps that accepted depth d+1.")
      .def_readonly("propose_seconds", &DrafterStats::propose_seconds, "Wall time in propose().")
      .def_readonly("accept_seconds", &DrafterStats::accept_seconds, "Wall time in begin() and accept().")
      .def("acceptance_at", &DrafterStats::acceptance_at, py::arg("d"), "Acceptance rate at depth d + 1 given the draft reached it.");

  py::class_<PyDrafter>(m, "Drafter",
                        "Base of every drafter: one sequence's drafter (begin, then per step draft/propose and accept), with "
                        "statistics. Its C++ work runs without the GIL, so drafters of different sequences draft in parallel "
                        "from Python threads; one drafter serves one call at a time.")
      .def_property_readonly("name", [](const PyDrafter& d) { return d.drafter.name(); }, "Short name for reports.")
      .def("begin", [](PyDrafter& d, const Tokens& prompt, const py::iterable& references) {
             const PyReferences refs(references);
             with_drafter(d, [&] { d.drafter.begin(prompt, refs.view()); });
           }, py::arg("prompt"), py::arg("references") = py::list(),
           "Starts a sequence: `prompt` and the token sequences it may draw from (lists or 1-D integer arrays; int32 "
           "arrays and torch int32 CPU tensors are read in place, not copied).")
      .def("propose", [](PyDrafter& d, std::size_t budget, std::optional<DraftTree*> out) {
             DraftTree fresh;
             DraftTree& dst = out ? **out : fresh;
             with_drafter(d, [&] {
               dst.clear();
               d.drafter.propose(budget, dst);
             });
             return out ? py::cast(**out, py::return_value_policy::reference) : py::cast(std::move(fresh));
           }, py::arg("budget"), py::arg("out") = std::nullopt,
           "Candidate continuations of the sequence, at most `budget` nodes, as a DraftTree (written into `out` when given). "
           "Not recorded in the statistics: draft() is the verifier's step.")
      .def("draft", [](PyDrafter& d, Token root, std::size_t budget, std::int64_t vocab_size, std::optional<LinearTree*> tree,
                       std::optional<AuxBlock*> aux, std::int64_t root_position, std::int64_t position_limit) {
             LinearTree fresh;
             AuxBlock ignored;
             LinearTree& dst = tree ? **tree : fresh;
             with_drafter(d, [&] {
               draft_step(d.drafter, root, budget, vocab_size, root_position, position_limit, d.scratch, dst, aux ? **aux : ignored);
             });
             return tree ? py::cast(**tree, py::return_value_policy::reference) : py::cast(std::move(fresh));
           }, py::arg("root"), py::arg("budget"), py::arg("vocab_size"), py::arg("tree") = std::nullopt, py::arg("aux") = std::nullopt,
           py::arg("root_position") = 0, py::arg("position_limit") = std::numeric_limits<std::int64_t>::max(),
           "The drafter's part of a verification step, as every engine runs it: propose, cut to `budget` nodes into a "
           "LinearTree with root `root` (the sequence's last token), record the proposal, check token ids against "
           "vocab_size, and write auxiliary tokens into `aux` (dropped when None; then observe([]) after the step). A block "
           "that would reach position_limit (the context) sits the step out. Returns the tree (`tree` when given).")
      .def("accept", [](PyDrafter& d, const Tokens& tokens) {
             with_drafter(d, [&] { d.drafter.accept(tokens); });
           }, py::arg("tokens"), "The tokens the step appended (accepted drafts, then the bonus token).")
      .def("finish", [](PyDrafter& d) { with_drafter(d, [&] { d.drafter.finish(); }); },
           "Ends the sequence: an index or history drafter adds its output to the shared index or history now (errors "
           "raise). Only finish() (and a begin() over an unfinished sequence) publishes: a drafter dropped or reset() first "
           "adds nothing.")
      .def("truncate", [](PyDrafter& d, std::size_t length) { with_drafter(d, [&] { d.drafter.truncate(length); }); },
           py::arg("length"),
           "Rewinds the sequence to its first `length` tokens (a context shift, a prompt cache reused): the next draft's root "
           "is token length - 1. What the drafter learned from the tokens dropped may stay. ValueError beyond its length, or "
           "for a drafter that cannot rewind (can_truncate).")
      .def_property_readonly("can_truncate", [](const PyDrafter& d) { return d.drafter.can_truncate(); },
                             "Whether truncate() works for this drafter (every built-in one but SuffixDecoding's).")
      .def("reset", [](PyDrafter& d) { with_drafter(d, [&] { d.drafter.reset(); }); },
           "Ends the sequence without publishing anything (an aborted request); begin() again before drafting.")
      .def("auxiliary", [](PyDrafter& d, AuxBlock& out) {
             with_drafter(d, [&] {
               out.clear();
               d.drafter.auxiliary(out);
             });
           }, py::arg("out"), "This step's auxiliary tokens into `out` (none for most drafters).")
      .def("observe", [](PyDrafter& d, const Tokens& choices) {
             with_drafter(d, [&] { d.drafter.observe(choices); });
           }, py::arg("choices"), "The target's greedy choices at this step's auxiliary tokens (empty when they did not run).")
      .def("record_proposal", [](PyDrafter& d, const LinearTree& t) {
             with_drafter(d, [&] { d.drafter.record_proposal(t); });
           }, py::arg("tree"), "Records a proposal as verified (draft() does this itself).")
      .def_property_readonly("max_auxiliary", [](const PyDrafter& d) { return d.drafter.max_auxiliary(); },
                             "The most auxiliary tokens one step may carry (0 for most drafters).")
      .def_property_readonly("stats", [](PyDrafter& d) {
             // Read under the lock (another thread may be drafting); a Session's request may read it between steps.
             py::gil_scoped_release release;
             std::lock_guard<std::mutex> lock(d.mutex);
             return d.drafter.stats();
           }, "DrafterStats (a copy).")
      .def("reset_stats", [](PyDrafter& d) { with_drafter(d, [&] { d.drafter.reset_stats(); }); }, "Clears the statistics.")
      .def("__repr__", [](const PyDrafter& d) { return "<refdec drafter '" + d.drafter.name() + "'>"; });

  py::class_<PyNoDrafter, PyDrafter>(m, "NoDrafter", "Proposes nothing: plain decoding.").def(py::init<>());
}

}  // namespace refdec_python
