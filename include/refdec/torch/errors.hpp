// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Error messages for users of programs built on the torch layer.

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "refdec/core/config.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// The message of `e` as a program should print it: a c10::Error (libtorch's own) without the C++
/// stack trace libtorch appends, anything else as what() says.
inline std::string describe(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

REFDEC_TORCH_NAMESPACE_END
