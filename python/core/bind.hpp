// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core by area, one translation unit each (python/core/<area>.cpp); module.cpp calls them
// in the order written here. pybind11 writes a signature with the Python names of the types
// registered by then (a C++ name otherwise, in the docstrings and the stubs), so an area comes
// after every area whose types its signatures and defaults name.

#pragma once

#include <pybind11/pybind11.h>

namespace refdec_python {

void bind_errors(pybind11::module_& m);     // refdec.Error, ArgumentError, IoError
void bind_trees(pybind11::module_& m);      // core/draft_tree.hpp, core/aux_block.hpp
void bind_sampling(pybind11::module_& m);   // core/sampling.hpp
void bind_step_cost(pybind11::module_& m);  // core/step_cost.hpp
void bind_step_plan(pybind11::module_& m);  // core/step_plan.hpp, core/walk.hpp, core/branches.hpp: trees, sampling
void bind_drafter(pybind11::module_& m);    // core/drafter.hpp: trees
void bind_datastore(pybind11::module_& m);  // datastore/
void bind_index(pybind11::module_& m);      // index/
void bind_drafters(pybind11::module_& m);   // drafters/: drafter, datastore, index, step cost
void bind_driver(pybind11::module_& m);     // core/step_driver.hpp: step plan, drafter

}  // namespace refdec_python
