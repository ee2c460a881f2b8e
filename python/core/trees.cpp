// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's draft trees: LinearTree, DraftTree and the auxiliary block (core/draft_tree.hpp,
// core/aux_block.hpp).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/core/aux_block.hpp"
#include "refdec/core/draft_tree.hpp"

using namespace refdec;

namespace refdec_python {

void bind_trees(py::module_& m) {
  py::class_<LinearTree>(m, "LinearTree",
                         "A draft tree in breadth-first order, ready for one verification step: node 0 is the root (the "
                         "sequence's last token, not yet cached), a parent precedes its children, siblings are ordered by "
                         "descending score. The arrays are returned as lists (copies).")
      .def(py::init<>(), "An empty tree (no root yet).")
      .def_static("chain", [](const Tokens& t) { return LinearTree::chain(t); }, py::arg("tokens"),
                  "A chain: tokens[0] is the root and each token the child of the previous one (a prompt to prefill).")
      .def("add_node", &LinearTree::add_node, py::arg("token"), py::arg("parent"), py::arg("score") = 0.0f,
           "Appends a node (parent -1 for the first node, an existing node after); call finish() after the last.")
      .def("finish", &LinearTree::finish, "Derives the child/sibling links and the ancestor mask from the parents.")
      .def_property_readonly("finished", &LinearTree::finished,
                             "Whether finish() has run since the nodes last changed (plan_step and the walk need it).")
      .def("reset", &LinearTree::reset, py::arg("root"), "Resets to a single root node carrying `root`.")
      .def("__len__", &LinearTree::size)
      .def_property_readonly("size", &LinearTree::size, "Number of nodes, the root included.")
      .def_property_readonly("num_drafts", &LinearTree::num_drafts, "Number of draft nodes (the root excluded).")
      .def_property_readonly("max_depth", &LinearTree::max_depth, "Depth of the deepest node.")
      .def_readonly("tokens", &LinearTree::tokens, "[num_nodes] token of each node.")
      .def_readonly("parent", &LinearTree::parent, "[num_nodes] parent index, -1 for the root.")
      .def_readonly("depth", &LinearTree::depth, "[num_nodes] depth, 0 for the root.")
      .def_readonly("first_child", &LinearTree::first_child, "[num_nodes] first child, -1 for a leaf.")
      .def_readonly("next_sibling", &LinearTree::next_sibling, "[num_nodes] next sibling, -1 for the last.")
      .def_readonly("score", &LinearTree::score, "[num_nodes] accumulated path score (root: 0).")
      .def("attends", &LinearTree::attends, py::arg("i"), py::arg("j"), "True when node i may attend to node j (j is i or an ancestor).")
      .def("__str__", [](const LinearTree& t) { return to_string(t); })
      .def("__repr__", [](const LinearTree& t) { return "<refdec.LinearTree of " + std::to_string(t.size()) + " nodes>"; });

  py::class_<DraftTree::Node>(m, "DraftTreeNode", "A node of a DraftTree as stored (a copy).")
      .def_readonly("token", &DraftTree::Node::token, "Token id (-1 for the implicit root).")
      .def_readonly("score", &DraftTree::Node::score, "Accumulated score of the paths through it.")
      .def_readonly("first_child", &DraftTree::Node::first_child, "Oldest child, -1 for a leaf.")
      .def_readonly("next_sibling", &DraftTree::Node::next_sibling, "Next younger sibling, -1 for the last.")
      .def_readonly("depth", &DraftTree::Node::depth, "0 for the root.");

  py::class_<DraftTree>(m, "DraftTree",
                        "A trie of candidate continuations with scores: what a drafter proposes. Node 0 is the implicit root.")
      .def(py::init<>(), "An empty tree.")
      .def("clear", &DraftTree::clear, "Removes all draft nodes.")
      .def("__len__", &DraftTree::size)
      .def_property_readonly("size", &DraftTree::size, "Number of draft nodes (the root excluded).")
      .def_property_readonly("empty", &DraftTree::empty, "True without draft nodes.")
      .def("insert", [](DraftTree& t, const Tokens& path, float score) { t.insert(path, score); }, py::arg("path"),
           py::arg("score") = DraftTree::kDefaultPathScore, "Inserts `path` (tokens after the root), adding `score` (finite, >= 0) to every node on it.")
      .def("node", &DraftTree::node, py::arg("index"), "Node `index` (0 is the root).")
      .def("find_child", py::overload_cast<std::int32_t, Token>(&DraftTree::find_child, py::const_), py::arg("parent"),
           py::arg("token"), "The child of `parent` carrying `token`, or -1.")
      .def("add_child", &DraftTree::add_child, py::arg("parent"), py::arg("token"),
           "The child of `parent` carrying `token`, created with score 0 when missing; returns its index.")
      .def("set_score", &DraftTree::set_score, py::arg("index"), py::arg("score"), "Sets the score of draft node `index` (>= 1).")
      .def("prune", &DraftTree::prune, py::arg("budget"), "Cuts the tree in place to the `budget` best nodes.")
      .def(
          "linearize",
          [](const DraftTree& t, Token root, std::size_t budget, std::optional<LinearTree*> out) {
            LinearTree tree;
            LinearTree& dst = out ? **out : tree;
            t.linearize(root, budget, dst);
            return out ? py::cast(**out, py::return_value_policy::reference) : py::cast(std::move(tree));
          },
          py::arg("root"), py::arg("budget"), py::arg("out") = std::nullopt,
          "Cuts to at most `budget` best-scored draft nodes and returns the breadth-first LinearTree with root `root` "
          "(written into `out` when given).");

  py::class_<AuxBlock>(m, "AuxBlock",
                       "Auxiliary tokens a drafter runs through the verifier's forward pass besides its tree (the lookahead "
                       "window). Local index 0 is the root, 1 + j auxiliary token j.")
      .def(py::init<>(), "An empty block.")
      .def("add", [](AuxBlock& a, Token t, std::int32_t offset, const std::vector<std::int32_t>& visible) { return a.add(t, offset, visible); },
           py::arg("token"), py::arg("offset"), py::arg("visible") = std::vector<std::int32_t>{},
           "Appends a token `offset` (>= 1) positions after the root that sees the local indices `visible`; returns its index.")
      .def("__len__", &AuxBlock::size)
      .def_property_readonly("size", &AuxBlock::size, "Number of auxiliary tokens.")
      .def_readonly("tokens", &AuxBlock::tokens, "[A] token ids.")
      .def_readonly("offset", &AuxBlock::offset, "[A] positions relative to the root (>= 1).")
      .def("row", [](const AuxBlock& a, std::int32_t j) {
             REFDEC_CHECK(j >= 0 && j < a.size(), "AuxBlock.row: token " << j << " out of range [0, " << a.size() << ")");
             const auto r = a.row(j);
             return std::vector<std::int32_t>(r.begin(), r.end());
           }, py::arg("j"), "Local indices token j sees besides the prefix and itself.")
      .def("attends", [](const AuxBlock& a, std::int32_t j, std::int32_t k) {
             REFDEC_CHECK(j >= 0 && j < a.size(), "AuxBlock.attends: token " << j << " out of range [0, " << a.size() << ")");
             return a.attends(j, k);
           }, py::arg("j"), py::arg("k"), "True when token j sees local index k.")
      .def("clear", &AuxBlock::clear, "Removes every token.")
      .def("validate", &AuxBlock::validate, py::arg("vocab_size"), "Raises ValueError unless the block is well formed.")
      .def("append", &AuxBlock::append, py::arg("other"), "Appends another block's tokens after these.");
}

}  // namespace refdec_python
