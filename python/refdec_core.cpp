// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core: the part of the `refdec` package that needs no torch: drafters, draft trees, the
// step plan, the walk, the keep plan, sampling, step costs, suffix-array datastores and the
// StepDriver. Arrays come in as anything numpy views (numpy arrays, torch CPU tensors, buffers) and
// go out as numpy arrays over refdec's own memory. No torch header: it links neither libtorch nor
// libc10 (python/tests/test_no_torch.py checks), and numpy is needed at run time only.

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bindings_common.hpp"
#include "refdec/version.hpp"
#include "refdec/core/aux_block.hpp"
#include "refdec/core/branches.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/sampled_accept.hpp"
#include "refdec/core/sampling.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/index/index_files.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/drafters/suffix_decoding.hpp"

using namespace refdec;
using namespace refdec_python;

namespace {

// `b` when it names a sequence of `plan`; ValueError naming the accessor otherwise.
std::int32_t checked_sequence(const StepPlan& plan, std::int32_t b, const char* who) {
  REFDEC_CHECK(b >= 0 && b < plan.batch(), "StepPlan." << who << ": sequence " << b << " outside [0, " << plan.batch() << ")");
  return b;
}

// --- arrays --------------------------------------------------------------------------------------

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

// Logits or probabilities as refdec reads them (and, with `writes`, overwrites them in place): a
// C-contiguous float32 array of `ndim` dimensions over `src`'s own memory (a numpy array, a torch
// CPU tensor).
py::array float32_array(py::handle src, py::ssize_t ndim, bool writes, const char* who) {
  const py::array a = as_array(src);
  const py::dtype dt = a.dtype();
  REFDEC_CHECK(a.ndim() == ndim && dt.kind() == 'f' && dt.itemsize() == 4 && dt.byteorder() == '=' &&
                   (a.flags() & py::array::c_style) != 0 && (a.writeable() || !writes),
               who << ": expected a" << (writes ? " writable" : "") << " contiguous " << ndim << "-D float32 CPU tensor or array, got "
                   << describe_array(a));
  return a;
}

// The elements of an array float32_array() accepted.
std::span<float> float32_span(const py::array& a) {
  return {static_cast<float*>(const_cast<void*>(a.data())), static_cast<std::size_t>(a.size())};
}

// Greedy targets: the target's token at each of the plan's `rows` rows.
void check_targets(const Tokens& targets, std::int32_t rows, const char* who) {
  REFDEC_CHECK(targets.size() == static_cast<std::size_t>(rows), who << ": targets: expected " << rows << " token ids, got " << targets.size());
}

// --- drafters ------------------------------------------------------------------------------------

struct PyNoDrafter : PyDrafter {
  PyNoDrafter() : PyDrafter([] { return AnyDrafter(NoDrafter{}); }) {}
};
// Fresh copies share the index, when there is one.
struct PyLlmaDrafter : PyDrafter {
  PyLlmaDrafter(LlmaOptions o, std::shared_ptr<const LlmaIndex> i)
      : PyDrafter([o, i] { return i ? AnyDrafter(LlmaDrafter(i, o)) : AnyDrafter(LlmaDrafter(o)); }), options(o), index(std::move(i)) {}
  LlmaOptions options;
  std::shared_ptr<const LlmaIndex> index;
};
struct PyPromptLookupDrafter : PyDrafter {
  explicit PyPromptLookupDrafter(PromptLookupOptions o)
      : PyDrafter([o] { return AnyDrafter(PromptLookupDrafter(o)); }), options(o) {}
  PromptLookupOptions options;
};
struct PyNgramTrieDrafter : PyDrafter {
  explicit PyNgramTrieDrafter(NgramTrieOptions o) : PyDrafter([o] { return AnyDrafter(NgramTrieDrafter(o)); }), options(o) {}
  NgramTrieOptions options;
};
struct PyRestDrafter : PyDrafter {
  PyRestDrafter(std::shared_ptr<const Datastore> store, RestOptions o)
      : PyDrafter([store, o] { return AnyDrafter(RestDrafter(store, o)); }), datastore(std::move(store)), options(o) {}
  std::shared_ptr<const Datastore> datastore;
  RestOptions options;
};
struct PyLookaheadDrafter : PyDrafter {
  explicit PyLookaheadDrafter(LookaheadOptions o) : PyDrafter([o] { return AnyDrafter(LookaheadDrafter(o)); }), options(o) {}
  LookaheadOptions options;
};

// Fresh copies share the history: every sequence any of them serves adds its output to it.
struct PyHistoryDrafter : PyDrafter {
  PyHistoryDrafter(std::function<AnyDrafter()> inner, std::shared_ptr<OutputHistory> h)
      : PyDrafter([inner, h] { return AnyDrafter(HistoryDrafter(inner(), h)); }), history(std::move(h)) {}
  std::shared_ptr<OutputHistory> history;
};

// Fresh copies share the index: every sequence any of them serves adds its output to it.
struct PyIndexDrafter : PyDrafter {
  PyIndexDrafter(std::shared_ptr<ReferenceIndex> i, IndexDrafterOptions o)
      : PyDrafter([i, o] { return AnyDrafter(IndexDrafter(i, o)); }), index(std::move(i)), options(o) {}
  std::shared_ptr<ReferenceIndex> index;
  IndexDrafterOptions options;
};
// Fresh copies share the global tree.
struct PySuffixDecodingDrafter : PyDrafter {
  explicit PySuffixDecodingDrafter(std::shared_ptr<SuffixDecodingCache> c)
      : PyDrafter([c] { return AnyDrafter(SuffixDecodingDrafter(c)); }), cache(std::move(c)) {}
  std::shared_ptr<SuffixDecodingCache> cache;
};

// The mixture keeps a handle on the statistics of the instance it holds (the handle follows the
// drafter into AnyDrafter); copies made by `make` have their own.
struct PyMixtureDrafter : PyDrafter {
  PyMixtureDrafter(std::vector<std::function<AnyDrafter()>> sources, MixtureOptions o)
      : PyDrafter(factory(sources, o, nullptr)), options(std::move(o)) {
    drafter = factory(std::move(sources), options, &statistics)();
  }
  static std::function<AnyDrafter()> factory(std::vector<std::function<AnyDrafter()>> sources, MixtureOptions o,
                                             std::shared_ptr<const MixtureStatistics>* stats) {
    return [sources = std::move(sources), o = std::move(o), stats] {
      std::vector<AnyDrafter> made;
      for (const auto& s : sources) made.push_back(s());
      MixtureDrafter m(std::move(made), o);
      if (stats) *stats = m.statistics();
      return AnyDrafter(std::move(m));
    };
  }
  MixtureOptions options;
  std::shared_ptr<const MixtureStatistics> statistics;
};

// A StepDriver plus the Python drafters its sequences borrow.
struct PyStepDriver {
  explicit PyStepDriver(StepDriverOptions options) : driver(options) {}
  StepDriver driver;
  BorrowedDrafters drafters;
};

// --- errors --------------------------------------------------------------------------------------

ErrorTypes g_errors;

PyObject* new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string("refdec.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

template <class T>
std::string join(const std::vector<T>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "refdec's torch-free part (part of the refdec package): drafters, draft trees, the step plan, the walk, "
            "sampling, suffix-array datastores and the StepDriver.";
  m.attr("__version__") = REFDEC_VERSION_STRING;  // the one place the version lives (refdec/version.hpp)

  // Errors: one family, each also a standard Python exception, with refdec's messages.
  g_errors.error = new_exception(m, "Error", py::make_tuple(py::handle(PyExc_RuntimeError)), "Base of every refdec error (a RuntimeError).");
  g_errors.argument = new_exception(m, "ArgumentError", py::make_tuple(py::handle(g_errors.error), py::handle(PyExc_ValueError)),
                                    "A bad argument or input value (also a ValueError).");
  g_errors.io = new_exception(m, "IoError", py::make_tuple(py::handle(g_errors.error), py::handle(PyExc_OSError)),
                              "A file refdec cannot use: missing, unreadable, truncated, bad format (also an OSError).");
  py::register_local_exception_translator([](std::exception_ptr p) { translate_errors(p, g_errors); });

  // --- draft trees ---------------------------------------------------------------------------------
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
           py::arg("score") = 1.0f, "Inserts `path` (tokens after the root), adding `score` (finite, >= 0) to every node on it.")
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

  // --- sampling -----------------------------------------------------------------------------------
  py::class_<SamplingOptions>(m, "SamplingOptions",
                              "Sampling settings of one request (processing order: repetition penalty, presence and frequency "
                              "penalties, temperature, top-k, top-p, min-p).")
      .def(py::init([](float temperature, std::int32_t top_k, float top_p, float min_p, float repetition_penalty, float presence_penalty,
                       float frequency_penalty, std::uint64_t seed) {
             return SamplingOptions{temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed};
           }),
           py::arg("temperature") = SamplingOptions{}.temperature, py::arg("top_k") = SamplingOptions{}.top_k,
           py::arg("top_p") = SamplingOptions{}.top_p, py::arg("min_p") = SamplingOptions{}.min_p,
           py::arg("repetition_penalty") = SamplingOptions{}.repetition_penalty,
           py::arg("presence_penalty") = SamplingOptions{}.presence_penalty,
           py::arg("frequency_penalty") = SamplingOptions{}.frequency_penalty, py::arg("seed") = SamplingOptions{}.seed)
      .def_readwrite("temperature", &SamplingOptions::temperature, "Divides the logits; 0 is greedy.")
      .def_readwrite("top_k", &SamplingOptions::top_k, "Keeps the k largest logits; 0 is off.")
      .def_readwrite("top_p", &SamplingOptions::top_p, "Nucleus mass in (0, 1]; 1 is off.")
      .def_readwrite("min_p", &SamplingOptions::min_p, "Drops tokens below min_p times the largest probability; 0 is off.")
      .def_readwrite("repetition_penalty", &SamplingOptions::repetition_penalty, "CTRL rule on prompt and output tokens; 1 is off.")
      .def_readwrite("presence_penalty", &SamplingOptions::presence_penalty, "Subtracted once from tokens already output.")
      .def_readwrite("frequency_penalty", &SamplingOptions::frequency_penalty, "Subtracted per earlier occurrence.")
      .def_readwrite("seed", &SamplingOptions::seed, "Seed of the request's random stream.")
      .def("validate", &SamplingOptions::validate, "Raises ValueError naming the first invalid setting.")
      .def_property_readonly("is_greedy", &SamplingOptions::is_greedy, "True for temperature 0 or top_k 1.")
      .def_property_readonly("has_penalties", &SamplingOptions::has_penalties, "True when a penalty changes logits.");

  py::class_<TokenCounts>(m, "TokenCounts", "The tokens of a sequence as the penalties see them (prompt membership, output counts).")
      .def(py::init<std::int32_t>(), py::arg("vocab_size") = 0)
      .def_property_readonly("vocab_size", &TokenCounts::vocab_size, "Vocabulary size.")
      .def("add_prompt", [](TokenCounts& c, const Tokens& t) { c.add_prompt(t); }, py::arg("tokens"), "Counts prompt tokens.")
      .def("add_output", [](TokenCounts& c, const Tokens& t) { c.add_output(std::span<const Token>(t)); }, py::arg("tokens"),
           "Counts output tokens.")
      .def("in_prompt", [](const TokenCounts& c, Token t) {
             REFDEC_CHECK(t >= 0 && t < c.vocab_size(), "TokenCounts: token " << t << " outside the vocabulary [0, " << c.vocab_size() << ")");
             return c.in_prompt(t);
           }, py::arg("token"), "True when the token occurs in the prompt.")
      .def("output_count", [](const TokenCounts& c, Token t) {
             REFDEC_CHECK(t >= 0 && t < c.vocab_size(), "TokenCounts: token " << t << " outside the vocabulary [0, " << c.vocab_size() << ")");
             return c.output_count(t);
           }, py::arg("token"), "Occurrences of the token in the output.")
      .def_property_readonly("present", [](const TokenCounts& c) { return Tokens(c.present().begin(), c.present().end()); },
                             "Distinct tokens seen, in order of first occurrence.");

  py::class_<LogitsProcessor>(m, "LogitsProcessor", "Turns logits into the probabilities a request samples from (one per thread).")
      .def(py::init<const SamplingOptions&>(), py::arg("options"))
      .def_property_readonly("options", [](const LogitsProcessor& p) { return p.options(); },
                             "A copy of the settings (the processor keeps the ones it validated).")
      .def("process", [](LogitsProcessor& p, const py::object& row, const TokenCounts& counts, const Tokens& path) {
             const py::array a = float32_array(row, 1, true, "LogitsProcessor.process");
             p.process(float32_span(a), counts, path);
           }, py::arg("row"), py::arg("counts"), py::arg("path") = Tokens{},
           "Replaces a row of logits ([vocab] float32, a numpy array or CPU tensor) by probabilities, in place; the row "
           "follows the counted sequence then `path`.")
      .def("sample", [](LogitsProcessor& p, const py::object& logits, const TokenCounts& counts, std::uint64_t generated) {
             const py::array a = float32_array(logits, 1, true, "LogitsProcessor.sample");
             return p.sample(float32_span(a), counts, generated);
           }, py::arg("logits"), py::arg("counts"), py::arg("generated"),
           "Plain sampling: processes `logits` in place and draws output position `generated` with uniform(seed, generated).");
  m.def("uniform", &uniform, py::arg("seed"), py::arg("counter"),
        "The uniform number in [0, 1) at position `counter` of the random stream `seed` (Philox4x32-10).");
  m.def("sample_from_probs", [](const py::object& probs, double u) {
          const py::array a = float32_array(probs, 1, false, "sample_from_probs");
          const std::span<float> s = float32_span(a);
          return sample_from_probs(s.data(), static_cast<std::int32_t>(s.size()), u);
        }, py::arg("probs"), py::arg("u"),
        "Inverse-CDF draw from a row of non-negative weights ([n] float32); -1 when none is positive.");

  py::class_<StepCost>(m, "StepCost", "Seconds a verification step takes by tokens run: flat, affine or calibrated.")
      .def(py::init<>(), "The flat model (every step costs 1).")
      .def_static("flat", &StepCost::flat, "Every step costs the same.")
      .def_static("affine", &StepCost::affine, py::arg("a"), py::arg("b"), "a + b * tokens seconds.")
      .def_static("calibrated", [](const std::vector<std::pair<std::size_t, double>>& s) { return StepCost::calibrated(s); },
                  py::arg("samples"), "From measured (tokens, seconds) samples, piecewise linear.")
      .def("seconds", &StepCost::seconds, py::arg("tokens"), "Cost of a step that runs `tokens` tokens.")
      .def_property_readonly("is_flat", &StepCost::is_flat, "True for the flat model.");
  py::class_<StepCostTracker>(m, "StepCostTracker",
                              "The step cost learned from timed steps around a calibration (the prior), per size class.")
      .def(py::init([](const StepCost& prior, double half_life, double fallback_weight) {
             return StepCostTracker(prior, {.half_life = half_life, .fallback_weight = fallback_weight});
           }),
           py::arg("prior"), py::arg("half_life") = StepCostTrackerOptions{}.half_life,
           py::arg("fallback_weight") = StepCostTrackerOptions{}.fallback_weight,
           "Learns around `prior` (measured or affine, not flat); half_life in observations.")
      .def("observe", [](StepCostTracker& t, std::size_t tokens, double seconds, std::size_t batch) { t.observe(tokens, seconds, batch); },
           py::arg("tokens"), py::arg("seconds"), py::arg("batch") = 1,
           "One timed step of `batch` sequences that ran `tokens` tokens in all in `seconds`.")
      .def("current", [](const StepCostTracker& t, std::size_t batch) { return t.current(batch); }, py::arg("batch") = 1,
           "The learned cost of a step of `batch` sequences by its total tokens, a StepCost: one sequence's curve plus "
           "the overhead learned for that batch size.")
      .def("overhead", &StepCostTracker::overhead, py::arg("batch"),
           "Seconds a step of `batch` sequences costs beyond one sequence's step of the same tokens.")
      .def("correction", &StepCostTracker::correction, py::arg("tokens"),
           "The factor the prior is multiplied by at `tokens` tokens.")
      .def_property_readonly("prior", &StepCostTracker::prior, "The calibration it learns around.")
      .def_property_readonly("observations", &StepCostTracker::observations, "Steps observed so far.");
  m.def("step_budget", &step_budget, py::arg("room"), py::arg("budget"),
        "Draft nodes worth verifying for a sequence that may still append `room` tokens: min(room - 1, budget), >= 0.");

  // --- the step plan, the walk, the keep plan --------------------------------------------------------
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

  // --- drafters -----------------------------------------------------------------------------------
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

  py::class_<LlmaIndex, std::shared_ptr<LlmaIndex>>(m, "LlmaIndex",
                                                   "LLMA's index of a document set, built once and shared by the LlmaDrafters "
                                                   "of every sequence over those documents (LlmaDrafter(index=...)): "
                                                   "immutable, safe from any thread.")
      .def(py::init([](const py::iterable& documents) {
             const PyReferences docs(documents);
             py::gil_scoped_release release;
             return std::make_shared<LlmaIndex>(docs.view());
           }),
           py::arg("documents"), "Indexes `documents` (lists or 1-D integer arrays of token ids >= 0; the GIL is released).")
      .def_property_readonly("tokens", &LlmaIndex::tokens, "Tokens indexed, over all documents.")
      .def_property_readonly("documents", &LlmaIndex::documents, "Documents indexed.")
      .def_property_readonly("bytes", &LlmaIndex::bytes, "Bytes the index holds.");

  py::class_<PyLlmaDrafter, PyDrafter>(m, "LlmaDrafter",
                                       "LLMA span copy: the longest suffix match of the sequence in the references (and, with "
                                       "self_reference, the sequence itself), copying the k tokens that follow; m spans as a tree.")
      .def(py::init([](std::size_t n, std::size_t k, std::size_t mm, bool self_reference, std::optional<std::shared_ptr<LlmaIndex>> index) {
             return std::make_unique<PyLlmaDrafter>(LlmaOptions{n, k, mm, self_reference}, index.value_or(nullptr));
           }),
           py::arg("n") = LlmaOptions{}.n, py::arg("k") = LlmaOptions{}.k, py::arg("m") = LlmaOptions{}.m,
           py::arg("self_reference") = LlmaOptions{}.self_reference, py::arg("index") = py::none(),
           "With `index` (an LlmaIndex), drafts from that shared index of its references: begin() then indexes nothing "
           "(its references are not read).")
      .def_property_readonly("index", [](const PyLlmaDrafter& d) { return std::const_pointer_cast<LlmaIndex>(d.index); },
                             "The shared LlmaIndex, or None.")
      .def_property_readonly("n", [](const PyLlmaDrafter& d) { return d.options.n; }, "Shortest suffix match that triggers a copy.")
      .def_property_readonly("k", [](const PyLlmaDrafter& d) { return d.options.k; }, "Tokens copied per span.")
      .def_property_readonly("m", [](const PyLlmaDrafter& d) { return d.options.m; }, "Spans proposed as a tree.")
      .def_property_readonly("self_reference", [](const PyLlmaDrafter& d) { return d.options.self_reference; },
                             "Also search the sequence itself.");

  py::class_<PyPromptLookupDrafter, PyDrafter>(m, "PromptLookupDrafter",
                                               "Prompt-lookup decoding as Spec-Bench runs it: the earliest match of the sequence's "
                                               "last max_ngram..min_ngram tokens in the sequence, copying k tokens.")
      .def(py::init([](std::size_t max_ngram, std::size_t min_ngram, std::size_t k, bool full_span_only) {
             return std::make_unique<PyPromptLookupDrafter>(PromptLookupOptions{max_ngram, min_ngram, k, full_span_only});
           }),
           py::arg("max_ngram") = PromptLookupOptions{}.max_ngram, py::arg("min_ngram") = PromptLookupOptions{}.min_ngram,
           py::arg("k") = PromptLookupOptions{}.k, py::arg("full_span_only") = PromptLookupOptions{}.full_span_only)
      .def_property_readonly("max_ngram", [](const PyPromptLookupDrafter& d) { return d.options.max_ngram; }, "Longest suffix looked up.")
      .def_property_readonly("min_ngram", [](const PyPromptLookupDrafter& d) { return d.options.min_ngram; }, "Shortest suffix looked up.")
      .def_property_readonly("k", [](const PyPromptLookupDrafter& d) { return d.options.k; }, "Tokens copied after the match.")
      .def_property_readonly("full_span_only", [](const PyPromptLookupDrafter& d) { return d.options.full_span_only; },
                             "Skip matches whose k-token continuation runs past the sequence.");

  py::class_<PyNgramTrieDrafter, PyDrafter>(m, "NgramTrieDrafter",
                                            "The N-gram trie of Chen et al. 2025: a frequency trie of the context's n-token "
                                            "windows; the most frequent subtree below the matched suffix is the draft tree.")
      .def(py::init([](std::size_t n, std::size_t prefix_len, std::size_t num_draft, bool grow) {
             return std::make_unique<PyNgramTrieDrafter>(NgramTrieOptions{n, prefix_len, num_draft, grow});
           }),
           py::arg("n") = NgramTrieOptions{}.n, py::arg("prefix_len") = NgramTrieOptions{}.prefix_len,
           py::arg("num_draft") = NgramTrieOptions{}.num_draft, py::arg("grow") = NgramTrieOptions{}.grow)
      .def_property_readonly("n", [](const PyNgramTrieDrafter& d) { return d.options.n; }, "Window length (trie depth).")
      .def_property_readonly("prefix_len", [](const PyNgramTrieDrafter& d) { return d.options.prefix_len; }, "Longest suffix matched.")
      .def_property_readonly("num_draft", [](const PyNgramTrieDrafter& d) { return d.options.num_draft; }, "Most draft nodes per proposal.")
      .def_property_readonly("grow", [](const PyNgramTrieDrafter& d) { return d.options.grow; }, "Also index accepted tokens.");

  py::class_<OutputHistory, std::shared_ptr<OutputHistory>>(m, "OutputHistory",
                                                            "The outputs of finished sequences, newest last, at most max_tokens "
                                                            "tokens in all (the oldest go first); shared by HistoryDrafters.")
      .def(py::init<std::size_t>(), py::arg("max_tokens") = OutputHistory::kDefaultMaxTokens)
      .def("add", [](OutputHistory& h, const Tokens& output) { h.add(output); }, py::arg("output"),
           "Adds one finished output (an empty one is ignored).")
      .def_property_readonly("outputs", [](const OutputHistory& h) {
             std::vector<std::vector<Token>> out;
             h.append_to(out);
             return out;
           }, "The outputs held, oldest first.")
      .def_property_readonly("tokens", &OutputHistory::tokens, "Tokens held.")
      .def_property_readonly("max_tokens", &OutputHistory::max_tokens, "The bound on tokens.")
      .def("__len__", &OutputHistory::size, "Outputs held.");

  py::class_<PyHistoryDrafter, PyDrafter>(m, "HistoryDrafter",
                                          "Deprecated (IndexDrafter over a shared ReferenceIndex supersedes it). Drafts with "
                                          "`inner` (a fresh copy of it) from the model's earlier outputs: at each begin the inner "
                                          "drafter gets the references followed by the history's outputs, and the tokens accepted "
                                          "in a sequence join the history when it finishes (finish()).")
      .def(py::init([](PyDrafter* inner, std::shared_ptr<OutputHistory> history) {
             REFDEC_CHECK(inner != nullptr, "history drafter: inner is None");
             REFDEC_CHECK(history != nullptr, "history drafter: history is None");
             return std::make_unique<PyHistoryDrafter>(inner->make, std::move(history));
           }),
           py::arg("inner"), py::arg("history"))
      .def_property_readonly("history", [](const PyHistoryDrafter& d) { return d.history; }, "The shared OutputHistory.");

  py::class_<ReferenceIndex, std::shared_ptr<ReferenceIndex>>(m, "ReferenceIndex",
                                                              "One index over every finished output (and any document added), "
                                                              "shared by IndexDrafters and grown online: suffix-array segments "
                                                              "read through snapshots, suffixes ordered by their first depth tokens (2 to 255); at most "
                                                              "max_tokens tokens (and max_bytes bytes, when not 0), the oldest documents dropped.")
      .def(py::init([](std::size_t max_tokens, std::size_t depth, std::size_t max_bytes) {
             return std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = max_tokens, .depth = depth, .max_bytes = max_bytes});
           }),
           py::arg("max_tokens") = ReferenceIndexOptions{}.max_tokens, py::arg("depth") = ReferenceIndexOptions{}.depth,
           py::arg("max_bytes") = ReferenceIndexOptions{}.max_bytes)
      .def("add", [](ReferenceIndex& i, const Tokens& document) {
             py::gil_scoped_release release;
             i.add(document);
           }, py::arg("document"), "Adds one document (an empty one is ignored).")
      .def("add_datastore", [](ReferenceIndex& i, const std::filesystem::path& path, bool is_static) {
             py::gil_scoped_release release;
             auto segment = index_segment(Datastore::open_shared(path), i.options().depth);
             if (is_static)
               i.add_static(std::move(segment));
             else
               i.add_segment(std::move(segment));
           }, py::arg("path"), py::arg("static") = true,
           "Adds the datastore file at path as a segment read in place: static (never merged or dropped, outside "
           "max_tokens) or, with static=False, as the newest grown one.")
      .def("save", [](const ReferenceIndex& i, const std::filesystem::path& dir, std::int32_t vocab_size) {
             py::gil_scoped_release release;
             return save_reference_index(i, dir, vocab_size);
           }, py::arg("dir"), py::arg("vocab_size"),
           "Writes each segment as a datastore file in dir, then a MANIFEST naming them (atomic: a save that fails or is "
           "killed leaves the earlier one whole); returns the files.")
      .def_static("open", [](const std::filesystem::path& dir, std::size_t max_tokens, std::size_t depth) {
             ReferenceIndexFiles files;
             {
               py::gil_scoped_release release;
               files = open_reference_index(dir, ReferenceIndexOptions{max_tokens, depth});
             }
             return py::make_tuple(files.index, files.served, files.refused);
           }, py::arg("dir"), py::arg("max_tokens") = ReferenceIndexOptions{}.max_tokens, py::arg("depth") = ReferenceIndexOptions{}.depth,
           "An index whose segments are the files the last complete save() wrote in dir, read in place: (index, served "
           "paths, refused lines, one per file with its reason). Never rewrite a served file in place (docs/reliability.md).")
      .def_property_readonly("tokens", &ReferenceIndex::tokens, "Tokens indexed.")
      .def_property_readonly("bytes", &ReferenceIndex::bytes, "Bytes held (texts, suffix arrays, their common prefixes and samples; mapped files included).")
      .def_property_readonly("segments", [](const ReferenceIndex& i) { return i.snapshot()->segments.size(); }, "Segments now.")
      .def_property_readonly("max_tokens", [](const ReferenceIndex& i) { return i.options().max_tokens; }, "The bound on tokens.")
      .def_property_readonly("depth", [](const ReferenceIndex& i) { return i.options().depth; }, "Tokens by which suffixes are ordered.");

  py::class_<PyIndexDrafter, PyDrafter>(m, "IndexDrafter",
                                        "Drafts from a shared ReferenceIndex: the longest suffix of the sequence found in it (and, "
                                        "with request, in its own references and context), then its continuations best first by "
                                        "how many occurrences they continue; the tokens accepted in a sequence join the index when "
                                        "it ends.")
      .def(py::init([](std::shared_ptr<ReferenceIndex> index, std::size_t max_match, std::size_t continuation, bool request,
                       bool add_output, bool shared) {
             REFDEC_CHECK(index != nullptr, "index drafter: index is None");
             const IndexDrafterOptions o{max_match, continuation, request, add_output, shared};
             IndexDrafter(index, o);  // the options checked here, not at the first begin()
             return std::make_unique<PyIndexDrafter>(std::move(index), o);
           }),
           py::arg("index"), py::arg("max_match") = IndexDrafterOptions{}.max_match,
           py::arg("continuation") = IndexDrafterOptions{}.continuation, py::arg("request") = IndexDrafterOptions{}.request,
           py::arg("add_output") = IndexDrafterOptions{}.add_output, py::arg("shared") = IndexDrafterOptions{}.shared)
      .def_property_readonly("index", [](const PyIndexDrafter& d) { return d.index; }, "The shared ReferenceIndex.")
      .def_property_readonly("max_match", [](const PyIndexDrafter& d) { return d.options.max_match; }, "Longest suffix searched.")
      .def_property_readonly("continuation", [](const PyIndexDrafter& d) { return d.options.continuation; }, "Deepest draft.")
      .def_property_readonly("request", [](const PyIndexDrafter& d) { return d.options.request; },
                             "Whether the sequence's references and context are searched too.")
      .def_property_readonly("add_output", [](const PyIndexDrafter& d) { return d.options.add_output; },
                             "Whether a sequence's output joins the index when it ends.")
      .def_property_readonly("shared", [](const PyIndexDrafter& d) { return d.options.shared; },
                             "Whether the shared index is searched (off: the request's own text only, and nothing is added).");
  m.def(
      "index_sources",
      [](std::shared_ptr<ReferenceIndex> index, std::size_t max_match, std::size_t continuation, bool request, bool add_output) {
        REFDEC_CHECK(index != nullptr, "index drafter: index is None");
        std::vector<std::unique_ptr<PyIndexDrafter>> out;
        for (const IndexDrafter& d : index_sources(index, {max_match, continuation, request, add_output}))
          out.push_back(std::make_unique<PyIndexDrafter>(index, d.options()));
        return out;
      },
      py::arg("index"), py::arg("max_match") = IndexDrafterOptions{}.max_match, py::arg("continuation") = IndexDrafterOptions{}.continuation,
      py::arg("request") = IndexDrafterOptions{}.request, py::arg("add_output") = IndexDrafterOptions{}.add_output,
      "The shared index as a MixtureDrafter's sources: an IndexDrafter of the index alone (which adds the outputs) and, with "
      "request, one of the request's own text alone (shared=False), so that the mixture learns how far to trust each.");

  py::class_<SuffixDecodingCache, std::shared_ptr<SuffixDecodingCache>>(m, "SuffixDecodingCache",
                                                                        "SuffixDecoding's global tree over earlier responses (the "
                                                                        "baseline's; ArcticInference's defaults).")
      .def(py::init([](std::size_t max_depth, double max_spec_factor, double max_spec_offset, float min_token_prob,
                       std::size_t max_cached_requests, bool tree) {
             return std::make_shared<SuffixDecodingCache>(
                 SuffixDecodingOptions{max_depth, max_spec_factor, max_spec_offset, min_token_prob, max_cached_requests, tree});
           }),
           py::arg("max_depth") = SuffixDecodingOptions{}.max_depth, py::arg("max_spec_factor") = SuffixDecodingOptions{}.max_spec_factor,
           py::arg("max_spec_offset") = SuffixDecodingOptions{}.max_spec_offset,
           py::arg("min_token_prob") = SuffixDecodingOptions{}.min_token_prob,
           py::arg("max_cached_requests") = SuffixDecodingOptions{}.max_cached_requests, py::arg("tree") = SuffixDecodingOptions{}.tree)
      .def_property_readonly("tokens", &SuffixDecodingCache::tokens, "Tokens of the cached responses.");

  py::class_<PySuffixDecodingDrafter, PyDrafter>(m, "SuffixDecodingDrafter",
                                                 "The SuffixDecoding baseline: a path (or a tree, with the cache's tree option) per step from the request's own suffix tree "
                                                 "or the shared global one, whichever scores higher.")
      .def(py::init([](std::shared_ptr<SuffixDecodingCache> cache) {
             REFDEC_CHECK(cache != nullptr, "suffix decoding: cache is None");
             return std::make_unique<PySuffixDecodingDrafter>(std::move(cache));
           }),
           py::arg("cache"))
      .def_property_readonly("cache", [](const PySuffixDecodingDrafter& d) { return d.cache; }, "The shared global tree.");

  py::class_<Datastore, std::shared_ptr<Datastore>>(m, "Datastore",
                                                    "A read-only, memory-mapped suffix-array datastore; one instance serves any "
                                                    "number of threads and drafters.")
      .def_static("open", [](const std::filesystem::path& path, bool verify, bool populate, bool verify_order, std::uint32_t order_samples) {
             py::gil_scoped_release release;
             return std::const_pointer_cast<Datastore>(
                 Datastore::open_shared(path, DatastoreOpenOptions{verify, populate, verify_order, order_samples}));
           }, py::arg("path"), py::arg("verify") = true, py::arg("populate") = false, py::arg("verify_order") = false,
           py::arg("order_samples") = 1024,
           "Maps and validates the datastore file `path`; raises OSError (refdec.IoError) for a missing or bad file.")
      .def_property_readonly("path", &Datastore::path, "The file.")
      .def_property_readonly("size", &Datastore::size, "Tokens in the array (separators included).")
      .def_property_readonly("num_documents", &Datastore::num_documents, "Documents.")
      .def_property_readonly("num_corpus_tokens", &Datastore::num_corpus_tokens, "Corpus tokens (separators excluded).")
      .def_property_readonly("vocab_size", &Datastore::vocab_size, "Vocabulary size it was built for.")
      .def("count", [](const Datastore& d, const Tokens& p) { return d.count(p); }, py::arg("pattern"), "Occurrences of `pattern`.")
      .def("find", [](const Datastore& d, const Tokens& p) {
             const SuffixRange r = d.find(p);
             return std::make_pair(r.begin, r.end);
           }, py::arg("pattern"), "Suffix array ranks [begin, end) of the suffixes starting with `pattern`.")
      .def("token", &Datastore::token, py::arg("pos"), "Token at array position `pos` (-1 for a separator).")
      .def("suffix", &Datastore::suffix, py::arg("rank"), "Array position of the suffix of rank `rank`.");

  py::class_<PyRestDrafter, PyDrafter>(m, "RestDrafter",
                                       "REST retrieval from a shared Datastore: the longest suffix of the sequence (n_max down to "
                                       "1 tokens) found in the datastore, the c most frequent m-token continuation prefixes.")
      .def(py::init([](std::shared_ptr<Datastore> store, std::size_t n_max, std::size_t mm, std::size_t c, std::size_t max_occurrences) {
             return std::make_unique<PyRestDrafter>(std::move(store), RestOptions{n_max, mm, c, max_occurrences});
           }),
           py::arg("datastore"), py::arg("n_max") = RestOptions{}.n_max, py::arg("m") = RestOptions{}.m, py::arg("c") = RestOptions{}.c,
           py::arg("max_occurrences") = RestOptions{}.max_occurrences)
      .def_property_readonly("datastore", [](const PyRestDrafter& d) { return std::const_pointer_cast<Datastore>(d.datastore); },
                             "The datastore it reads.")
      .def_property_readonly("n_max", [](const PyRestDrafter& d) { return d.options.n_max; }, "Longest suffix searched.")
      .def_property_readonly("m", [](const PyRestDrafter& d) { return d.options.m; }, "Continuation length.")
      .def_property_readonly("c", [](const PyRestDrafter& d) { return d.options.c; }, "Draft nodes kept.")
      .def_property_readonly("max_occurrences", [](const PyRestDrafter& d) { return d.options.max_occurrences; }, "Occurrences read.");

  py::class_<PyLookaheadDrafter, PyDrafter>(m, "LookaheadDrafter",
                                            "Lookahead Decoding: a W x (N-1) Jacobi window run as auxiliary tokens, and a pool of "
                                            "the n-grams it harvests; window=0 is a pure n-gram pool drafter.")
      .def(py::init([](std::int32_t window, std::int32_t ngram, std::int32_t guesses, bool pool_from_output, std::uint64_t seed) {
             return std::make_unique<PyLookaheadDrafter>(LookaheadOptions{window, ngram, guesses, pool_from_output, seed});
           }),
           py::arg("window") = LookaheadOptions{}.window, py::arg("ngram") = LookaheadOptions{}.ngram,
           py::arg("guesses") = LookaheadOptions{}.guesses, py::arg("pool_from_output") = LookaheadOptions{}.pool_from_output,
           py::arg("seed") = LookaheadOptions{}.seed)
      .def_property_readonly("window", [](const PyLookaheadDrafter& d) { return d.options.window; }, "W: Jacobi window width.")
      .def_property_readonly("ngram", [](const PyLookaheadDrafter& d) { return d.options.ngram; }, "N: n-gram size.")
      .def_property_readonly("guesses", [](const PyLookaheadDrafter& d) { return d.options.guesses; }, "G: candidates per step.");

  py::class_<MixtureStatistics::Source>(m, "MixtureSourceStatistics", "Raw counts of one mixture source.")
      .def_readonly("name", &MixtureStatistics::Source::name, "The source's name.")
      .def_readonly("evaluated", &MixtureStatistics::Source::evaluated, "[max_depth] nodes at depth d+1 whose parent was right.")
      .def_readonly("correct", &MixtureStatistics::Source::correct, "[max_depth] of those, the right ones.")
      .def_readonly("accepted_tokens", &MixtureStatistics::Source::accepted_tokens, "Accepted draft tokens it had proposed.")
      .def("right_at", &MixtureStatistics::Source::right_at, py::arg("d"), "How often its nodes at depth d+1 were right.");
  py::class_<MixtureStatistics, std::shared_ptr<MixtureStatistics>>(m, "MixtureStatistics", "What a mixture learned, per source (live).")
      .def_property_readonly("sources", &MixtureStatistics::sources, "Per source, in the order given.")
      .def_property_readonly("steps", &MixtureStatistics::steps, "Steps proposed so far.")
      .def_property_readonly("mean_budget", &MixtureStatistics::mean_budget, "Mean draft nodes kept per step.")
      .def("acceptance", &MixtureStatistics::acceptance, py::arg("source"), py::arg("depth"),
           "Learned probability that a node of `source` at depth depth+1 is accepted given its parent was.");

  py::enum_<MixtureCombine>(m, "MixtureCombine", "How a mixture combines the estimates of sources that proposed the same node.")
      .value("max", MixtureCombine::max, "The best single estimate.")
      .value("noisy_or", MixtureCombine::noisy_or, "1 - prod(1 - p).");

  py::class_<PyMixtureDrafter, PyDrafter>(m, "MixtureDrafter",
                                          "One merged trie from several drafters, nodes scored by acceptance learned online, the "
                                          "budget chosen under a step cost. The mixture owns fresh copies of `sources` made from "
                                          "their settings: the given drafters stay independent and usable.")
      .def(py::init([](const std::vector<PyDrafter*>& sources, const StepCost& cost, double prior_mean, double prior_strength,
                       double half_life, std::size_t max_depth, MixtureCombine combine, double calibration_half_life,
                       double calibration_prior, std::size_t source_budget, bool match_context, double recent_rate,
                       double scorer_rate) {
             std::vector<std::function<AnyDrafter()>> makes;
             for (std::size_t s = 0; s < sources.size(); ++s) {
               REFDEC_CHECK(sources[s] != nullptr, "mixture: source " << s << " is None");
               makes.push_back(sources[s]->make);
             }
             MixtureOptions o{.cost = cost, .prior_mean = prior_mean, .prior_strength = prior_strength, .half_life = half_life,
                              .max_depth = max_depth, .combine = combine};
             o.calibration_half_life = calibration_half_life;
             o.calibration_prior = calibration_prior;
             o.source_budget = source_budget;
             o.match_context = match_context;
             o.recent_rate = recent_rate;
             o.scorer_rate = scorer_rate;
             return std::make_unique<PyMixtureDrafter>(std::move(makes), o);
           }),
           py::arg("sources"), py::arg("cost") = StepCost::flat(), py::arg("prior_mean") = MixtureOptions{}.prior_mean,
           py::arg("prior_strength") = MixtureOptions{}.prior_strength, py::arg("half_life") = MixtureOptions{}.half_life,
           py::arg("max_depth") = MixtureOptions{}.max_depth, py::arg("combine") = MixtureOptions{}.combine,
           py::arg("calibration_half_life") = MixtureOptions{}.calibration_half_life,
           py::arg("calibration_prior") = MixtureOptions{}.calibration_prior,
           py::arg("source_budget") = MixtureOptions{}.source_budget, py::arg("match_context") = MixtureOptions{}.match_context,
           py::arg("recent_rate") = MixtureOptions{}.recent_rate, py::arg("scorer_rate") = MixtureOptions{}.scorer_rate,
           "calibration_half_life: steps after which a step weighs half in the per-sequence calibration of "
           "the budget choice under a step cost (0: off); calibration_prior: its prior weight, in tokens. "
           "source_budget: draft nodes each source is asked for at least (0: the budget); match_context: "
           "condition the estimates on each source's match length; recent_rate: weight of the newest step in "
           "each source's recent reach (0: off); scorer_rate: learning rate of the learned scorer (0: off).")
      .def_property_readonly("statistics", [](const PyMixtureDrafter& d) { return std::const_pointer_cast<MixtureStatistics>(d.statistics); },
                             "What it learned (MixtureStatistics, follows the drafter).");

  // --- datastore building -------------------------------------------------------------------------
  py::class_<DatastoreBuildStats>(m, "DatastoreBuildStats", "What build_datastore did.")
      .def_readonly("num_tokens", &DatastoreBuildStats::num_tokens, "Corpus tokens (separators excluded).")
      .def_readonly("num_documents", &DatastoreBuildStats::num_documents, "Documents.")
      .def_readonly("file_bytes", &DatastoreBuildStats::file_bytes, "Size of the file written.")
      .def_readonly("seconds", &DatastoreBuildStats::seconds, "Wall time of the build.")
      .def_readonly("sort_seconds", &DatastoreBuildStats::sort_seconds, "Of which suffix sorting.")
      .def_property_readonly("tokens_per_second", &DatastoreBuildStats::tokens_per_second, "Build throughput.");
  m.def(
      "build_datastore",
      [](const std::vector<Tokens>& documents, std::int32_t vocab_size, const std::filesystem::path& path,
         std::optional<py::function> progress, const std::vector<std::filesystem::path>& inputs) {
        DatastoreBuildOptions options;
        options.inputs = inputs;
        if (progress)
          options.progress = [&progress](std::string_view stage, std::uint64_t done, std::uint64_t total) {
            py::gil_scoped_acquire acquire;
            (*progress)(std::string(stage), done, total);
          };
        py::gil_scoped_release release;
        return build_datastore(documents, vocab_size, path, options);
      },
      py::arg("documents"), py::arg("vocab_size"), py::arg("path"), py::arg("progress") = std::nullopt,
      py::arg("inputs") = std::vector<std::filesystem::path>{},
      "Builds the datastore file `path` from token documents (ids in [0, vocab_size)), written to a temporary and "
      "renamed. progress(stage, done, total) is called now and then. Raises ValueError for bad input, OSError for a "
      "write failure.");

  // --- the step driver ---------------------------------------------------------------------------------
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
           py::arg("max_new_tokens") = SequenceLimits{}.max_new_tokens, py::arg("stop_tokens") = Tokens{},
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
