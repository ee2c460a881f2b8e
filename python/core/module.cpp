// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core: the part of the `refdec` package that needs no torch: drafters, draft trees, the
// step plan, the walk, the keep plan, sampling, step costs, suffix-array datastores and the
// StepDriver, each area bound in its own translation unit (bind.hpp). Arrays come in as anything
// numpy views (numpy arrays, torch CPU tensors, buffers) and go out as numpy arrays over refdec's
// own memory. No torch header: it links neither libtorch nor libc10 (python/tests/test_no_torch.py
// checks), and numpy is needed at run time only.

#include <pybind11/pybind11.h>

#include "bind.hpp"
#include "refdec/version.hpp"

PYBIND11_MODULE(_core, m) {
  using namespace refdec_python;
  m.doc() = "refdec's torch-free part (part of the refdec package): drafters, draft trees, the step plan, the walk, "
            "sampling, suffix-array datastores and the StepDriver.";
  m.attr("__version__") = REFDEC_VERSION_STRING;  // the one place the version lives (refdec/version.hpp)

  bind_errors(m);
  bind_trees(m);
  bind_sampling(m);
  bind_step_cost(m);
  bind_step_plan(m);
  bind_drafter(m);
  bind_datastore(m);
  bind_index(m);
  bind_drafters(m);
  bind_driver(m);
}
