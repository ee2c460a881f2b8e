// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._torch: the part of the `refdec` package that needs libtorch: refdec's reference model and
// the continuous-batching Session over it. The types it shares with refdec._core (drafters, the
// step plan, sampling settings, statistics) are registered there (bindings_common.hpp). One
// translation unit: libtorch's headers cost most of its build time.

#include <ATen/core/ivalue.h>  // first: clang + libtorch 1.13 in C++20 needs it before the rest
#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bindings_common.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/errors.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/paged_kv_store.hpp"
#include "refdec/torch/session.hpp"

using namespace refdec;
using namespace refdec_python;

namespace {

// --- sessions ------------------------------------------------------------------------------------

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

// A torch.dtype argument; None is torch.float32.
at::ScalarType scalar_type_of(const py::handle& dtype) {
  if (dtype.is_none()) return at::kFloat;
  REFDEC_CHECK(THPDtype_Check(dtype.ptr()), "expected a torch.dtype, got " << py::str(py::type::of(dtype)).cast<std::string>());
  return reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
}

py::object dtype_object(at::ScalarType t) {
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(t)));
}

// Imports torch, which must be the one the module was built against (its Python state must exist
// before tensors cross the boundary). Anything else is an ImportError that says which interpreter
// and which torch the module needs: a std::exception thrown here becomes an ImportError carrying
// its message (an error_already_set would become pybind11's bare "initialization failed").
void import_the_torch_built_against() {
  const std::string here = py::str(py::module_::import("sys").attr("executable")).cast<std::string>() + " (Python " +
                           py::str(py::module_::import("platform").attr("python_version")()).cast<std::string>() + ")";
  const std::string needed = std::string("refdec._torch was built for ") + REFDEC_PYTHON_BUILT_FOR + " (Python " +
                             REFDEC_PYTHON_VERSION_BUILT_FOR + ") with torch " + REFDEC_TORCH_BUILT_WITH +
                             " (Debian 12: /usr/bin/python3 and python3-torch); run it with that interpreter.";
  py::object torch;
  try {
    torch = py::module_::import("torch");
  } catch (py::error_already_set& e) {
    throw std::runtime_error("refdec: this interpreter, " + here + ", cannot import torch (" + e.what() + "). " + needed);
  }
  const std::string version = py::str(torch.attr("__version__")).cast<std::string>();
  if (version != REFDEC_TORCH_BUILT_WITH)
    throw std::runtime_error("refdec: this interpreter, " + here + ", has torch " + version + ". " + needed);
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  import_the_torch_built_against();
  m.doc() = "refdec's reference model and continuous-batching Session on libtorch (part of the refdec package).";

  // refdec._core registers the shared types and makes the error family; errors raised here are
  // the same Python exceptions, and libtorch's own become RuntimeErrors without the C++ backtrace.
  const py::module_ core = py::module_::import("refdec._core");
  static const ErrorTypes errors{py::object(core.attr("Error")).release().ptr(), py::object(core.attr("ArgumentError")).release().ptr(),
                                 py::object(core.attr("IoError")).release().ptr()};
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      translate_errors(p, errors);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, describe(e).c_str());
    }
  });

  // --- the reference model and the Session ------------------------------------------------------------
  py::enum_<RopeStyle>(m, "RopeStyle", "How rotary embeddings pair a head's dimensions.")
      .value("interleaved", RopeStyle::kInterleaved, "Pairs (2i, 2i+1): llama2.c.")
      .value("half", RopeStyle::kHalf, "Pairs (i, i + d/2): Hugging Face.");
  py::class_<LlamaConfig>(m, "LlamaConfig", "Shape and constants of a Llama-family model.")
      .def(py::init<>())
      .def_readwrite("dim", &LlamaConfig::dim, "Model width.")
      .def_readwrite("hidden_dim", &LlamaConfig::hidden_dim, "SwiGLU width.")
      .def_readwrite("n_layers", &LlamaConfig::n_layers, "Layers.")
      .def_readwrite("n_heads", &LlamaConfig::n_heads, "Query heads.")
      .def_readwrite("n_kv_heads", &LlamaConfig::n_kv_heads, "Key/value heads.")
      .def_readwrite("vocab_size", &LlamaConfig::vocab_size, "Vocabulary size.")
      .def_readwrite("max_seq_len", &LlamaConfig::max_seq_len, "Trained context length.")
      .def_readwrite("rope_theta", &LlamaConfig::rope_theta, "Rotary base.")
      .def_readwrite("norm_eps", &LlamaConfig::norm_eps, "RMSNorm epsilon.")
      .def_readwrite("tied_embeddings", &LlamaConfig::tied_embeddings, "Output projection shares the embedding.")
      .def_readwrite("rope_style", &LlamaConfig::rope_style, "RopeStyle.")
      .def_readwrite("bos_id", &LlamaConfig::bos_id, "Beginning-of-sequence id.")
      .def_readwrite("eos_id", &LlamaConfig::eos_id, "End-of-sequence id.")
      .def_property_readonly("head_dim", &LlamaConfig::head_dim, "dim / n_heads.")
      .def("validate", &LlamaConfig::validate, "Raises ValueError naming the first inconsistent field.");

  static const std::string load_doc =
      "Loads a llama2.c v0 checkpoint (e.g. stories260K.bin) on the CPU in `dtype` (torch.float32 when None); OSError for a missing or "
      "bad file. `linear`: the linear layers' kernel, one of " + std::string(linear_kernels_help()) + "; linear_path says which ran and why.";
  py::class_<LlamaModel, std::shared_ptr<LlamaModel>>(m, "LlamaModel", "refdec's reference Llama-family model (libtorch).")
      .def_static("load_llama2c", [](const std::filesystem::path& path, const py::object& dtype, const std::string& linear) {
             const at::ScalarType t = scalar_type_of(dtype);
             const LinearKernel kernel = parse_linear_kernel(linear);
             py::gil_scoped_release release;
             return std::make_shared<LlamaModel>(load_llama2c(path, t, at::kCPU, kernel));
           }, py::arg("path"), py::arg("dtype") = py::none(), py::arg("linear") = "auto", load_doc.c_str())
      .def_static("random", [](const LlamaConfig& config, std::uint64_t seed, const py::object& dtype, const std::string& linear) {
             return std::make_shared<LlamaModel>(LlamaModel::random(config, seed, scalar_type_of(dtype), at::kCPU, parse_linear_kernel(linear)));
           }, py::arg("config"), py::arg("seed"), py::arg("dtype") = py::none(), py::arg("linear") = "auto",
           "A model with seeded random weights; `linear` as load_llama2c takes it.")
      .def_property_readonly("linear_kernel", [](const LlamaModel& md) { return std::string(linear_kernel_name(md.linear_kernel())); },
                             "The kernel the linear layers run on: 'aten', 'onednn' or 'stream'.")
      .def_property_readonly("linear_path", &LlamaModel::linear_path,
                             "Which kernel the linear layers run on and why it was chosen (what this CPU runs).")
      .def_property_readonly("config", &LlamaModel::config, "LlamaConfig (a copy).")
      .def_property_readonly("vocab_size", &LlamaModel::vocab_size, "Vocabulary size.")
      .def_property_readonly("max_seq_len", &LlamaModel::max_seq_len, "Trained context length.")
      .def_property_readonly("dtype", [](const LlamaModel& md) { return dtype_object(md.dtype()); }, "torch.dtype of the weights.");

  py::enum_<SamplingPath>(m, "SamplingPath", "Where sampled steps process the logits (same output).")
      .value("auto", SamplingPath::kAuto, "Tensor ops on a GPU, the host elsewhere.")
      .value("host", SamplingPath::kHost, "The host, rows the walk visits only.")
      .value("tensor", SamplingPath::kTensor, "Every node's draw by tensor ops on the logits' device.");

  py::class_<GenerateOptions>(m, "GenerateOptions", "Defaults and limits of a Session.")
      .def(py::init([](std::int64_t max_new_tokens, std::int64_t budget, Tokens stop_tokens, std::int64_t max_context,
                       std::optional<SamplingOptions> sampling, SamplingPath sampling_path, std::int64_t prefill_chunk,
                       std::optional<StepCost> step_cost, double step_cost_half_life, std::int64_t drafting_threads,
                       bool batch_budget) {
             return GenerateOptions{max_new_tokens, budget,           std::move(stop_tokens), max_context, sampling,
                                    sampling_path,  prefill_chunk,    drafting_threads,       std::move(step_cost),
                                    {.half_life = step_cost_half_life}, batch_budget};
           }),
           py::arg("max_new_tokens") = GenerateOptions{}.max_new_tokens, py::arg("budget") = GenerateOptions{}.budget,
           py::arg("stop_tokens") = Tokens{}, py::arg("max_context") = GenerateOptions{}.max_context, py::arg("sampling") = std::nullopt,
           py::arg("sampling_path") = GenerateOptions{}.sampling_path, py::arg("prefill_chunk") = GenerateOptions{}.prefill_chunk,
           py::arg("step_cost") = std::nullopt, py::arg("step_cost_half_life") = StepCostTrackerOptions{}.half_life,
           py::arg("drafting_threads") = GenerateOptions{}.drafting_threads, py::arg("batch_budget") = GenerateOptions{}.batch_budget)
      .def_readwrite("max_new_tokens", &GenerateOptions::max_new_tokens, "Tokens to generate at most per request.")
      .def_readwrite("budget", &GenerateOptions::budget, "Draft nodes verified per step; 0 is plain decoding.")
      .def_readwrite("stop_tokens", &GenerateOptions::stop_tokens, "Generation stops before any of these.")
      .def_readwrite("max_context", &GenerateOptions::max_context, "Prompt + output at most; 0: the model's max_seq_len.")
      .def_readwrite("sampling", &GenerateOptions::sampling, "SamplingOptions for requests without their own; None: greedy.")
      .def_readwrite("sampling_path", &GenerateOptions::sampling_path, "SamplingPath.")
      .def_readwrite("prefill_chunk", &GenerateOptions::prefill_chunk, "Prompt tokens a step prefills per request at most (0: all).")
      .def_readwrite("drafting_threads", &GenerateOptions::drafting_threads,
                     "Threads that draft a step's requests at once, the stepping thread's among them (>= 1; the GIL is "
                     "released once per step).")
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
             const std::int64_t context = options.max_context > 0 ? options.max_context : model->max_seq_len();
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
