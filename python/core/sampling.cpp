// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's sampling: the settings, the token counts the penalties read, the logits processor
// and the random stream (core/sampling.hpp).

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <span>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "common.hpp"
#include "refdec/core/sampling.hpp"

using namespace refdec;

namespace refdec_python {

void bind_sampling(py::module_& m) {
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
      .def(py::init<std::int32_t>(), py::arg("vocab_size") = TokenCounts{}.vocab_size())
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
}

}  // namespace refdec_python
