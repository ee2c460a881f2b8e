// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Skipping a test, visibly and with the reason, where a packed kernel cannot run.

#include <gtest/gtest.h>

#include <string>

#include "refdec/torch/packed_linear.hpp"

/// Skips visibly, with the reason, when `backend` cannot run `dtype` weights on this machine.
#define REFDEC_SKIP_UNLESS_BACKEND_RUNS(backend, dtype)                                                                 \
  if (const std::string why = ::refdec::packed_backend_unavailable(backend, dtype); !why.empty())                       \
  GTEST_SKIP() << ::refdec::backend_name(backend) << " cannot run " << at::toString(dtype) << " weights here: " << why
