// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// refdec's version, for programs that check what they were built against (CMake reads it from
// here too: find_package(refdec 0.1) compares against it).

/// Incremented for changes that break source compatibility.
#define REFDEC_VERSION_MAJOR 0
/// Incremented for new features.
#define REFDEC_VERSION_MINOR 1
/// Incremented for fixes.
#define REFDEC_VERSION_PATCH 0
/// The version as one number, MAJOR * 10000 + MINOR * 100 + PATCH, for #if comparisons.
#define REFDEC_VERSION (REFDEC_VERSION_MAJOR * 10000 + REFDEC_VERSION_MINOR * 100 + REFDEC_VERSION_PATCH)
/// The version as "MAJOR.MINOR.PATCH".
#define REFDEC_VERSION_STRING "0.1.0"
