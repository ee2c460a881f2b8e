// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Checks that a call is rejected with a refdec::Error that names what was wrong.

#include <gtest/gtest.h>

#include <string>

#include "refdec/core/config.hpp"

namespace refdec_test {

/// Runs `f`, which must throw refdec::Error with `needle` in its message.
template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const refdec::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace refdec_test
