// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A JSON value as an error message shows it, without recursion: nlohmann's dump() recurses once
// per level, so a value nested 100,000 deep in a dataset or a --step-cost-file overflowed the
// stack while its error message was being written.

#include <nlohmann/json.hpp>

#include <string>

namespace refdec_eval {

/// A scalar as JSON writes it (a string cut at 80 characters); a container as "an array of N
/// elements" or "an object of N members".
inline std::string json_brief(const nlohmann::json& v) {
  const auto count = [&](const char* noun) { return std::to_string(v.size()) + " " + noun + (v.size() == 1 ? "" : "s"); };
  if (v.is_array()) return "an array of " + count("element");
  if (v.is_object()) return "an object of " + count("member");
  if (v.is_string() && v.get_ref<const std::string&>().size() > 80) return nlohmann::json(v.get_ref<const std::string&>().substr(0, 80)).dump() + "...";
  return v.dump();
}

}  // namespace refdec_eval
