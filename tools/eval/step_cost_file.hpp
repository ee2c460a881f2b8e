// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A measured step cost from a file: the "step_cost" array of (tokens, seconds) pairs that
// refdec-speed-bench writes to its --json file (refdec-replay --step-cost-file, refdec-speed-bench
// --live-prior).

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "eval/json_brief.hpp"
#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/core/step_cost.hpp"

REFDEC_NAMESPACE_BEGIN

/// The calibrated StepCost of a refdec-speed-bench --json file; `option` names the option that
/// gave the path, for the errors.
inline StepCost read_step_cost(const std::string& path, const std::string& option) {
  const auto j = nlohmann::json::parse(read_file_bytes(path, option), nullptr, false);
  REFDEC_CHECK_IO(!j.is_discarded() && j.is_object() && j.contains("step_cost") && j["step_cost"].is_array(),
                  path << ": not a refdec-speed-bench --json file with a \"step_cost\" array");
  std::vector<std::pair<std::size_t, double>> samples;
  for (const auto& pair : j["step_cost"]) {
    REFDEC_CHECK_IO(pair.is_array() && pair.size() == 2 && pair[0].is_number_unsigned() && pair[1].is_number(),
                    path << ": a step_cost entry is not [tokens, seconds]: " << refdec_eval::json_brief(pair));
    samples.emplace_back(pair[0].get<std::size_t>(), pair[1].get<double>());
  }
  return StepCost::calibrated(samples);  // checks the values themselves
}

REFDEC_NAMESPACE_END
