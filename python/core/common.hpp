// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// What several of refdec._core's translation units share beyond bindings_common.hpp: float32
// arrays read in place, the check of greedy targets, and the lists in __repr__s.

#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../bindings_common.hpp"

namespace refdec_python {

// Logits or probabilities as refdec reads them (and, with `writes`, overwrites them in place): a
// C-contiguous float32 array of `ndim` dimensions over `src`'s own memory (a numpy array, a torch
// CPU tensor).
inline py::array float32_array(py::handle src, py::ssize_t ndim, bool writes, const char* who) {
  const py::array a = as_array(src);
  const py::dtype dt = a.dtype();
  REFDEC_CHECK(a.ndim() == ndim && dt.kind() == 'f' && dt.itemsize() == 4 && dt.byteorder() == '=' &&
                   (a.flags() & py::array::c_style) != 0 && (a.writeable() || !writes),
               who << ": expected a" << (writes ? " writable" : "") << " contiguous " << ndim << "-D float32 CPU tensor or array, got "
                   << describe_array(a));
  return a;
}

// The elements of an array float32_array() accepted.
inline std::span<float> float32_span(const py::array& a) {
  return {static_cast<float*>(const_cast<void*>(a.data())), static_cast<std::size_t>(a.size())};
}

// Greedy targets: the target's token at each of the plan's `rows` rows.
inline void check_targets(const Tokens& targets, std::int32_t rows, const char* who) {
  REFDEC_CHECK(targets.size() == static_cast<std::size_t>(rows), who << ": targets: expected " << rows << " token ids, got " << targets.size());
}

// "1, 2, 3", for the lists in __repr__s.
template <class T>
std::string join(const std::vector<T>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace refdec_python
