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
/// The version as "MAJOR.MINOR.PATCH", spelled from the three numbers above.
#define REFDEC_VERSION_STRING                      \
  REFDEC_DETAIL_VERSION_TEXT(REFDEC_VERSION_MAJOR) \
  "." REFDEC_DETAIL_VERSION_TEXT(REFDEC_VERSION_MINOR) "." REFDEC_DETAIL_VERSION_TEXT(REFDEC_VERSION_PATCH)
#define REFDEC_DETAIL_VERSION_TEXT(x) REFDEC_DETAIL_VERSION_QUOTE(x)
#define REFDEC_DETAIL_VERSION_QUOTE(x) #x
