// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Names of the floating-point types a model can run in, for command lines and configuration.

#include <c10/core/ScalarType.h>

#include <string>

#include "refdec/core/config.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// The scalar type named "fp32", "fp64", "fp16" or "bf16"; refdec::Error for any other name.
inline c10::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32") return c10::kFloat;
  if (name == "fp64") return c10::kDouble;
  if (name == "fp16") return c10::kHalf;
  if (name == "bf16") return c10::kBFloat16;
  throw Error("unknown dtype '" + name + "' (fp32, fp64, fp16, bf16)");
}

REFDEC_TORCH_NAMESPACE_END
