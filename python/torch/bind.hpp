// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._torch by area, one translation unit each (python/torch/<area>.cpp); module.cpp calls
// them in the order written here, after refdec._core has registered the types they share. The
// model comes first: the Session's signatures name it (pybind11 writes the Python names of the
// types registered by then, a C++ name otherwise).

#pragma once

#include <pybind11/pybind11.h>

namespace refdec_python {

void bind_model(pybind11::module_& m);    // torch/llama.hpp, torch/llama2c_loader.hpp
void bind_session(pybind11::module_& m);  // torch/session.hpp: model

}  // namespace refdec_python
