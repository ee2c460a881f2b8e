// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The torch layer's namespace. Its classes differ with the build's oneDNN support (PackedLinear
// holds oneDNN primitives when REFDEC_HAVE_ONEDNN is 1, and every model holds PackedLinears), so
// translation units built with and without oneDNN must not name the same entities: each
// configuration gets an inline namespace of its own inside refdec's. Code written against
// refdec::LlamaModel is unaffected; a program that mixes both configurations gets two distinct
// types (a link error where it passes one to the other) instead of one type with two layouts.

#include "refdec/core/config.hpp"

#ifndef REFDEC_HAVE_ONEDNN
#define REFDEC_HAVE_ONEDNN 0
#endif

#if REFDEC_HAVE_ONEDNN
#define REFDEC_TORCH_ABI with_onednn
#else
#define REFDEC_TORCH_ABI without_onednn
#endif

/// Opens refdec's namespace for torch-layer code (the inline ABI namespace of this configuration).
#define REFDEC_TORCH_NAMESPACE_BEGIN \
  REFDEC_NAMESPACE_BEGIN             \
  inline namespace REFDEC_TORCH_ABI {
/// Closes REFDEC_TORCH_NAMESPACE_BEGIN.
#define REFDEC_TORCH_NAMESPACE_END \
  }                                \
  REFDEC_NAMESPACE_END
