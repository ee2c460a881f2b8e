// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's step plan, the walk and the keep plan (core/step_plan.hpp, core/walk.hpp,
// core/sampled_accept.hpp), and the branch layout of engines without tree masks
// (core/branches.hpp). Their arrays go out as numpy views over the plan's own memory.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "common.hpp"
#include "refdec/core/branches.hpp"
#include "refdec/core/sampled_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"

using namespace refdec;

namespace refdec_python {
namespace {

// `b` when it names a sequence of `plan`; ValueError naming the accessor otherwise.
std::int32_t checked_sequence(const StepPlan& plan, std::int32_t b, const char* who) {
  REFDEC_CHECK(b >= 0 && b < plan.batch(), "StepPlan." << who << ": sequence " << b << " outside [0, " << plan.batch() << ")");
  return b;
}

// A [n] numpy array of Out over `v`'s memory, no copy: numpy holds `owner` as the array's base, so
// the view keeps it alive; the view is valid until the owner's arrays are next written.
template <class Out, class T>
py::array_t<Out> view_of(py::handle owner, std::vector<T>& v) {
  static_assert(sizeof(Out) == sizeof(T));
  if (v.empty()) return py::array_t<Out>(0);
  return py::array_t<Out>({static_cast<py::ssize_t>(v.size())}, {static_cast<py::ssize_t>(sizeof(T))}, reinterpret_cast<Out*>(v.data()),
                          owner);
}

// The getter of an array property: a view (view_of) of the object's `member`, its elements read as Out.
template <class Out, class C, class T>
py::cpp_function array_view(std::vector<T> C::*member) {
  return py::cpp_function([member](py::object self) { return view_of<Out>(self, self.cast<C&>().*member); });
}

void bind_plan(py::module_& m) {
  py::class_<StepPlan>(m, "StepPlan",
                       "One verification step of a batch, ragged and packed (docs/engine.md). The array properties are "
                       "numpy arrays over the plan's own memory (no copy; torch.from_numpy(a) shares it too), valid until "
                       "the plan is next written (plan_step(..., out=plan)); copy() one to keep it.")
      .def(py::init<>(), "An empty plan (reuse it through plan_step(..., out=plan)).")
      .def_property_readonly("batch", &StepPlan::batch, "Number of sequences.")
      .def_property_readonly("num_rows", py::overload_cast<>(&StepPlan::rows, py::const_), "Rows of all sequences.")
      .def("rows", [](const StepPlan& p, std::int32_t b) { return p.rows(checked_sequence(p, b, "rows")); }, py::arg("b"),
           "Rows of sequence b (tree and auxiliary).")
      .def("aux_rows", [](const StepPlan& p, std::int32_t b) { return p.aux_rows(checked_sequence(p, b, "aux_rows")); }, py::arg("b"),
           "Auxiliary rows of sequence b (after its tree rows).")
      .def("mask_words", [](const StepPlan& p, std::int32_t b) { return p.mask_words(checked_sequence(p, b, "mask_words")); }, py::arg("b"),
           "64-bit mask words per row of sequence b.")
      .def("sees", [](const StepPlan& p, std::int32_t b, std::int32_t i, std::int32_t j) {
             const std::int32_t n = p.rows(checked_sequence(p, b, "sees"));
             REFDEC_CHECK(i >= 0 && i < n && j >= 0 && j < n, "StepPlan.sees: rows " << i << ", " << j << " outside sequence " << b << "'s [0, " << n << ")");
             return p.sees(b, i, j);
           }, py::arg("b"), py::arg("i"), py::arg("j"), "True when local row i of sequence b attends to its local row j.")
      .def_property_readonly("indptr", array_view<std::int32_t>(&StepPlan::indptr),
                             "[B + 1] int32: sequence b owns rows indptr[b] .. indptr[b + 1] - 1.")
      .def_property_readonly("num_nodes", array_view<std::int32_t>(&StepPlan::num_nodes),
                             "[B] int32: tree rows of each sequence (root included); the rest are auxiliary.")
      .def_property_readonly("lengths", array_view<std::int64_t>(&StepPlan::lengths),
                             "[B] int64: cached entries of each sequence before the step.")
      .def_property_readonly("tokens", array_view<std::int32_t>(&StepPlan::tokens),
                             "[R] int32: token of each row (the model's input).")
      .def_property_readonly("positions", array_view<std::int64_t>(&StepPlan::positions),
                             "[R] int64: rotary position of each row.")
      .def_property_readonly("first_child", array_view<std::int32_t>(&StepPlan::first_child),
                             "[R] int32: local index of a tree row's first child, -1 for none.")
      .def_property_readonly("next_sibling", array_view<std::int32_t>(&StepPlan::next_sibling),
                             "[R] int32: local index of a tree row's next sibling, -1 for none.")
      .def_property_readonly("mask_indptr", array_view<std::int64_t>(&StepPlan::mask_indptr),
                             "[B + 1] int64: first mask word of each sequence.")
      .def_property_readonly("mask", array_view<std::int64_t>(&StepPlan::mask),
                             "Packed mask, int64 words holding the uint64 bits (torch.from_numpy takes int64): per sequence "
                             "[rows(b), mask_words(b)]; bit j (j % 64 of word j // 64) of local row i is set when row i attends "
                             "to local row j.")
      .def("__repr__", [](const StepPlan& p) {
        return "<refdec.StepPlan of " + std::to_string(p.batch()) + " sequences, " + std::to_string(p.rows()) + " rows>";
      });

  m.def(
      "plan_step",
      [](const std::vector<const LinearTree*>& trees, const std::vector<std::int64_t>& lengths, std::int64_t vocab_size,
         std::optional<std::vector<const AuxBlock*>> aux, std::optional<StepPlan*> out) {
        // plan_step reads contiguous arrays of trees and blocks: copied into reused thread-local
        // storage, whose capacity makes a copy a few memcpys once warm.
        thread_local std::vector<LinearTree> tree_copies;
        thread_local std::vector<AuxBlock> aux_copies;
        tree_copies.resize(trees.size());
        for (std::size_t b = 0; b < trees.size(); ++b) {
          REFDEC_CHECK(trees[b] != nullptr, "plan_step: tree " << b << " is None");
          tree_copies[b] = *trees[b];
        }
        aux_copies.resize(aux ? aux->size() : 0);
        for (std::size_t b = 0; b < aux_copies.size(); ++b) {
          REFDEC_CHECK((*aux)[b] != nullptr, "plan_step: auxiliary block " << b << " is None");
          aux_copies[b] = *(*aux)[b];
        }
        StepPlan fresh;
        StepPlan& dst = out ? **out : fresh;
        plan_step(tree_copies, aux_copies, lengths, vocab_size, dst);
        return out ? py::cast(**out, py::return_value_policy::reference) : py::cast(std::move(fresh));
      },
      py::arg("trees"), py::arg("lengths"), py::arg("vocab_size") = 0, py::arg("aux") = std::nullopt, py::arg("out") = std::nullopt,
      "Plans a step that verifies trees[b] after lengths[b] cached entries, followed by the auxiliary tokens aux[b] "
      "(None: none). With vocab_size > 0 every token id must lie in [0, vocab_size). Writes into `out` when given "
      "(reusing its memory) and returns the plan.");
}

void bind_walk(py::module_& m) {
  py::class_<Acceptance>(m, "Acceptance", "The outcome of one verification step for one sequence.")
      .def(py::init<>())
      .def_readonly("nodes", &Acceptance::nodes, "Accepted draft nodes (local rows), root to leaf.")
      .def_readonly("tokens", &Acceptance::tokens, "Their tokens, then the bonus token (empty for a prefill).")
      .def_property_readonly("num_accepted", &Acceptance::num_accepted, "Accepted draft tokens (bonus excluded).")
      .def("__repr__", [](const Acceptance& a) { return "<refdec.Acceptance nodes=[" + join(a.nodes) + "] tokens=[" + join(a.tokens) + "]>"; });

  auto check_b = [](const StepPlan& p, std::int32_t b) {
    REFDEC_CHECK(b >= 0 && b < p.batch(), "sequence " << b << " out of range [0, " << p.batch() << ")");
  };
  m.def(
      "accept_greedy",
      [](const StepPlan& plan, const Tokens& targets) {
        check_targets(targets, plan.rows(), "accept_greedy");
        const Token* tp = targets.data();
        py::gil_scoped_release release;
        std::vector<Acceptance> out(static_cast<std::size_t>(plan.batch()));
        for (std::int32_t b = 0; b < plan.batch(); ++b)
          accept(plan.tree(b), ChoiceArray{tp + plan.indptr[static_cast<std::size_t>(b)]}, out[static_cast<std::size_t>(b)]);
        return out;
      },
      py::arg("plan"), py::arg("targets"),
      "Greedy acceptance of every sequence: `targets` ([plan.num_rows] integer array or CPU tensor) is the target's token "
      "at each row (the argmax of its logits). Returns one Acceptance per sequence.");
  m.def(
      "accept_with",
      [check_b](const StepPlan& plan, std::int32_t b, const py::function& choose) {
        check_b(plan, b);
        Acceptance out;
        accept(plan.tree(b), [&](std::int32_t node, std::int32_t depth) {
          const py::object token = choose(node, depth);
          if (!py::isinstance<py::int_>(token) || py::isinstance<py::bool_>(token))
            throw py::type_error("accept_with: choose(node, depth) must return a token id (int), got " +
                                 py::str(py::type::of(token).attr("__name__")).cast<std::string>() + " at node " +
                                 std::to_string(node) + ", depth " + std::to_string(depth));
          return token.cast<Token>();
        }, out);
        return out;
      },
      py::arg("plan"), py::arg("b"), py::arg("choose"),
      "The walk over sequence b's tree with the engine's own chooser: choose(node, depth) -> the target's token at local "
      "row `node` after `depth` accepted drafts. Asked at most once per node, root to leaf (draw fresh randomness per depth).");
  m.def(
      "accept_sampled",
      [check_b](const StepPlan& plan, std::int32_t b, const py::object& logits, LogitsProcessor& processor, const TokenCounts& counts,
                std::uint64_t generated) {
        check_b(plan, b);
        const std::int32_t nodes = plan.num_nodes[static_cast<std::size_t>(b)];
        const py::array a = float32_array(logits, 2, true, "accept_sampled: logits [rows, vocab]");
        REFDEC_CHECK(a.shape(0) >= nodes, "accept_sampled: " << a.shape(0) << " logit rows for " << nodes << " tree nodes");
        const auto vocab = static_cast<std::int32_t>(a.shape(1));
        const std::span<float> rows = float32_span(a).first(static_cast<std::size_t>(nodes) * static_cast<std::size_t>(vocab));
        py::gil_scoped_release release;
        Acceptance out;
        sampled_accept_lazy(plan.tree(b), rows, vocab, processor, counts, generated, out);
        return out;
      },
      py::arg("plan"), py::arg("b"), py::arg("logits"), py::arg("processor"), py::arg("counts"), py::arg("generated"),
      "Sample-then-match over sequence b's tree, exactly as the C++ Session samples: `logits` (a contiguous float32 "
      "numpy array or CPU tensor, [at least num_nodes[b], vocab], the sequence's rows) is processed in place for the rows the walk visits, each with "
      "its node's own prefix, and drawn with uniform(seed, generated + depth). Same tokens as plain sampling for the seed.");
  m.def(
      "accept_all",
      [check_b](const StepPlan& plan, std::int32_t b) {
        check_b(plan, b);
        Acceptance out;
        accept_all(plan.tree(b), out);
        return out;
      },
      py::arg("plan"), py::arg("b"), "The acceptance of a chain of forced tokens (a prompt being prefilled): every row kept, nothing emitted.");
  m.def(
      "greedy_accept",
      [](const LinearTree& tree, const Tokens& targets) {
        Acceptance out;
        REFDEC_CHECK(static_cast<std::int32_t>(targets.size()) == tree.size(),
                     "greedy_accept: " << targets.size() << " target tokens for a tree of " << tree.size() << " nodes");
        accept(view(tree), ChoiceArray{targets.data()}, out);
        return out;
      },
      py::arg("tree"), py::arg("targets"), "Greedy acceptance over a LinearTree given the target's token at each node.");
}

void bind_keep_plan(py::module_& m) {
  py::class_<KeepPlan>(m, "KeepPlan",
                       "What each sequence's cache keeps after a step: kept local rows move to entries lengths_before[b], "
                       "lengths_before[b] + 1, ... in order. Array properties are views (see StepPlan).")
      .def(py::init<>())
      .def_property_readonly("batch", &KeepPlan::batch, "Number of sequences.")
      .def_property_readonly("indptr", array_view<std::int32_t>(&KeepPlan::indptr),
                             "[B + 1] int32: first entry of each sequence in `rows`.")
      .def_property_readonly("rows", array_view<std::int32_t>(&KeepPlan::rows),
                             "[K] int32: local step rows kept, increasing per sequence.")
      .def_property_readonly("lengths", array_view<std::int64_t>(&KeepPlan::lengths),
                             "[B] int64: cached entries after the step.")
      .def("kept", [](const KeepPlan& k, std::int32_t b) {
             REFDEC_CHECK(b >= 0 && b < k.batch(), "KeepPlan.kept: sequence " << b << " out of range [0, " << k.batch() << ")");
             const auto s = k.kept(b);
             return std::vector<std::int32_t>(s.begin(), s.end());
           }, py::arg("b"), "The kept local rows of sequence b.");
  m.def(
      "keep_accepted",
      [](const StepPlan& plan, const std::vector<Acceptance>& accepted, std::optional<KeepPlan*> out) {
        KeepPlan fresh;
        KeepPlan& dst = out ? **out : fresh;
        keep_accepted(plan, accepted, dst);
        return out ? py::cast(**out, py::return_value_policy::reference) : py::cast(std::move(fresh));
      },
      py::arg("plan"), py::arg("accepted"), py::arg("out") = std::nullopt,
      "The keep plan of a step: per sequence its root, then its accepted nodes. Writes into `out` when given.");

  py::class_<Branches>(m, "Branches",
                       "A draft tree as branches, for an engine without custom attention masks (llama.cpp's sequence ids): "
                       "each root-to-leaf path is a branch, numbered depth-first, so that the branches through node i are "
                       "begin[i] .. end[i] - 1. Node i goes at positions[i] in those sequences; it then attends to the cached "
                       "cells and to the step's cells of any one of its branches at positions up to its own: its ancestors.")
      .def(py::init([](const LinearTree& tree, std::int64_t first_position) {
             Branches b;
             b.build(view(tree), first_position);
             return b;
           }),
           py::arg("tree"), py::arg("first_position"), "Lays out `tree` (finished) with its root at `first_position`.")
      .def_readonly("count", &Branches::count, "Branches: the tree's leaves.")
      .def_property_readonly("positions", array_view<std::int64_t>(&Branches::positions), "[nodes] int64: first_position + depth.")
      .def_property_readonly("begin", array_view<std::int32_t>(&Branches::begin), "[nodes] int32: each node's first branch.")
      .def_property_readonly("end", array_view<std::int32_t>(&Branches::end), "[nodes] int32: one past its last branch.")
      .def("winner", [](const Branches& b, const std::vector<std::int32_t>& path) { return b.winner(path); }, py::arg("path"),
           "The branch whose cells stay after a walk that accepted the nodes `path`: keep its cells before first_position + 1 "
           "+ len(path), drop every other cell the step wrote.");
}

}  // namespace

void bind_step_plan(py::module_& m) {
  bind_plan(m);
  bind_walk(m);
  bind_keep_plan(m);
}

}  // namespace refdec_python
