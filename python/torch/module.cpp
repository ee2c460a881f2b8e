// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._torch: the part of the `refdec` package that needs libtorch: refdec's reference model and
// the continuous-batching Session over it, each bound in its own translation unit (bind.hpp). The
// types it shares with refdec._core (drafters, the step plan, sampling settings, statistics) are
// registered there (bindings_common.hpp). Here: the torch it needs, and its errors.

#include <pybind11/pybind11.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/torch/errors.hpp"

namespace refdec_python {
namespace {

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
}  // namespace refdec_python

PYBIND11_MODULE(_torch, m) {
  using namespace refdec_python;
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
      PyErr_SetString(PyExc_RuntimeError, refdec::describe(e).c_str());
    }
  });

  bind_model(m);
  bind_session(m);
}
