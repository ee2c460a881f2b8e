// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._torch's reference model: its configuration and LlamaModel (torch/llama.hpp,
// torch/llama2c_loader.hpp), with torch.dtype arguments and results.

#include <ATen/core/ivalue.h>  // first: clang + libtorch 1.13 in C++20 needs it before the rest
#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"

using namespace refdec;

namespace refdec_python {
namespace {

// A torch.dtype argument; None is torch.float32.
at::ScalarType scalar_type_of(const py::handle& dtype) {
  if (dtype.is_none()) return at::kFloat;
  REFDEC_CHECK(THPDtype_Check(dtype.ptr()), "expected a torch.dtype, got " << py::str(py::type::of(dtype)).cast<std::string>());
  return reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
}

py::object dtype_object(at::ScalarType t) {
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(t)));
}

}  // namespace

void bind_model(py::module_& m) {
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
      "bad file. `linear`: the linear layers' kernel, one of " + std::string(linear_kernels_help()) + "; linear_path says which ran and why. "
      "`linear_choice`: an earlier model's linear_choice string, taken instead of measuring the kernels (where `linear` measures them: "
      "auto, packed, stream, stream-fp16); ValueError where it cannot be read or cannot run here.";
  // The choice a Python caller gives as text (LlamaModel::linear_choice), parsed before the GIL is released.
  const auto choice_of = [](const std::optional<std::string>& text) -> std::optional<LinearChoice> {
    if (!text) return std::nullopt;
    return LinearChoice::parse(*text);
  };
  py::class_<LlamaModel, std::shared_ptr<LlamaModel>>(m, "LlamaModel", "refdec's reference Llama-family model (libtorch).")
      .def_static("load_llama2c", [choice_of](const std::filesystem::path& path, const py::object& dtype, const std::string& linear,
                                              const std::optional<std::string>& linear_choice) {
             const at::ScalarType t = scalar_type_of(dtype);
             const LinearKernel kernel = parse_linear_kernel(linear);
             std::optional<LinearChoice> choice = choice_of(linear_choice);
             py::gil_scoped_release release;
             return std::make_shared<LlamaModel>(load_llama2c(path, t, at::kCPU, kernel, std::move(choice)));
           }, py::arg("path"), py::arg("dtype") = py::none(), py::arg("linear") = linear_kernel_name(LinearKernel::kAuto),
           py::arg("linear_choice") = py::none(), load_doc.c_str())
      .def_static("random", [choice_of](const LlamaConfig& config, std::uint64_t seed, const py::object& dtype, const std::string& linear,
                                        const std::optional<std::string>& linear_choice) {
             return std::make_shared<LlamaModel>(
                 LlamaModel::random(config, seed, scalar_type_of(dtype), at::kCPU, parse_linear_kernel(linear), choice_of(linear_choice)));
           }, py::arg("config"), py::arg("seed"), py::arg("dtype") = py::none(), py::arg("linear") = linear_kernel_name(LinearKernel::kAuto),
           py::arg("linear_choice") = py::none(), "A model with seeded random weights; `linear` and `linear_choice` as load_llama2c takes them.")
      .def_property_readonly("linear_kernel", [](const LlamaModel& md) { return std::string(linear_kernel_name(md.linear_kernel())); },
                             "The kernel the linear layers run on: 'aten', 'onednn' or 'stream'.")
      .def_property_readonly("linear_path", &LlamaModel::linear_path,
                             "Which kernel the linear layers run on and why it was chosen (what this CPU runs).")
      .def_property_readonly("linear_choice", [](const LlamaModel& md) -> std::optional<std::string> {
             if (md.linear_kernel() == LinearKernel::kAten) return std::nullopt;
             return md.linear_choice().describe();
           },
           "The packed kernels' choice as text ('onednn', 'stream (avx512-bf16 for 1-2 rows, ...)'), to give a later load as "
           "`linear_choice` so that it measures nothing and runs the same kernels; None where at::linear runs.")
      .def_property_readonly("config", &LlamaModel::config, "LlamaConfig (a copy).")
      .def_property_readonly("vocab_size", &LlamaModel::vocab_size, "Vocabulary size.")
      .def_property_readonly("max_seq_len", &LlamaModel::max_seq_len, "Trained context length.")
      .def_property_readonly("dtype", [](const LlamaModel& md) { return dtype_object(md.dtype()); }, "torch.dtype of the weights.");
}

}  // namespace refdec_python
