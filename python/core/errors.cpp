// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's error family: refdec.Error and its subclasses, each also a standard Python
// exception, raised for refdec's C++ errors with their messages.

#include <pybind11/pybind11.h>

#include <exception>
#include <string>

#include "../bindings_common.hpp"
#include "bind.hpp"

namespace refdec_python {
namespace {

ErrorTypes g_errors;  // made by bind_errors, raised by the translator it registers

PyObject* new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string("refdec.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

}  // namespace

void bind_errors(py::module_& m) {
  g_errors.error = new_exception(m, "Error", py::make_tuple(py::handle(PyExc_RuntimeError)), "Base of every refdec error (a RuntimeError).");
  g_errors.argument = new_exception(m, "ArgumentError", py::make_tuple(py::handle(g_errors.error), py::handle(PyExc_ValueError)),
                                    "A bad argument or input value (also a ValueError).");
  g_errors.io = new_exception(m, "IoError", py::make_tuple(py::handle(g_errors.error), py::handle(PyExc_OSError)),
                              "A file refdec cannot use: missing, unreadable, truncated, bad format (also an OSError).");
  py::register_local_exception_translator([](std::exception_ptr p) { translate_errors(p, g_errors); });
}

}  // namespace refdec_python
