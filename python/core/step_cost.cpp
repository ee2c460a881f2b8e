// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's step costs: the cost model, the tracker that learns it from timed steps, and the
// budget a sequence's room allows (core/step_cost.hpp).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/core/step_cost.hpp"

using namespace refdec;

namespace refdec_python {

void bind_step_cost(py::module_& m) {
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
           py::arg("tokens"), py::arg("seconds"), py::arg("batch") = StepCostTracker::kDefaultBatch,
           "One timed step of `batch` sequences that ran `tokens` tokens in all in `seconds`.")
      .def("current", [](const StepCostTracker& t, std::size_t batch) { return t.current(batch); }, py::arg("batch") = StepCostTracker::kDefaultBatch,
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
}

}  // namespace refdec_python
