// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// What the two extension modules of the `refdec` package share: refdec._core (no torch) registers
// these types, refdec._torch (the Session) uses them. pybind11 shares a registration between
// modules only for types outside an anonymous namespace, hence the named one.

#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/references.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/core/drafter.hpp"

namespace refdec_python {

namespace py = pybind11;
using Tokens = std::vector<refdec::Token>;

// --- arrays --------------------------------------------------------------------------------------

// An object numpy reads as an array without a Python-level loop: a buffer (numpy arrays,
// array.array, memoryview) or an object with __array__ (torch CPU tensors). bytes and str hold text;
// lists and tuples are answered first, without the attribute lookups (a failed one costs an
// exception: microseconds per drafter call).
inline bool is_array_like(py::handle src) {
  PyObject* p = src.ptr();
  if (PyList_Check(p) || PyTuple_Check(p) || PyBytes_Check(p) || PyByteArray_Check(p) || PyUnicode_Check(p)) return false;
  return PyObject_CheckBuffer(p) || py::hasattr(src, "__array__") || py::hasattr(src, "__array_interface__");
}

// `src` as a numpy array: itself, or numpy.asarray's view of it (a torch CPU tensor's own memory).
// numpy's errors (a CUDA tensor, one that requires grad) reach the caller as they are.
inline py::array as_array(py::handle src) {
  if (py::isinstance<py::array>(src)) return py::reinterpret_borrow<py::array>(src);
  return py::module_::import("numpy").attr("asarray")(src).cast<py::array>();
}

// "float64 array of shape (2, 3)", for messages.
inline std::string describe_array(const py::array& a) {
  return py::str(a.dtype()).cast<std::string>() + " array of shape " + py::str(a.attr("shape")).cast<std::string>();
}

// Reads a [n] array of integer type T (any stride, any alignment) as int32 token ids.
template <class T>
Tokens read_tokens(const py::array& a) {
  const auto* base = static_cast<const char*>(a.data());
  const py::ssize_t n = a.shape(0), stride = a.strides(0);
  Tokens out(static_cast<std::size_t>(n));
  for (py::ssize_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, base + i * stride, sizeof v);
    if constexpr (std::cmp_greater(std::numeric_limits<T>::max(), std::numeric_limits<refdec::Token>::max()) ||
                  std::cmp_less(std::numeric_limits<T>::min(), std::numeric_limits<refdec::Token>::min()))
      REFDEC_CHECK(std::in_range<refdec::Token>(v), "token ids: " << v << " does not fit a 32-bit token id");
    out[static_cast<std::size_t>(i)] = static_cast<refdec::Token>(v);
  }
  return out;
}

// The token ids of a 1-D integer array-like (see is_array_like), read in one pass over its memory.
inline Tokens array_tokens(py::handle src) {
  const py::array a = as_array(src);
  const py::dtype dt = a.dtype();
  const bool native = dt.byteorder() == '=' || dt.byteorder() == '|';
  REFDEC_CHECK(a.ndim() == 1 && (dt.kind() == 'i' || dt.kind() == 'u') && native,
               "token ids: expected a 1-D integer CPU tensor or array, got " << describe_array(a));
  const bool is_signed = dt.kind() == 'i';
  switch (dt.itemsize()) {
    case 1: return is_signed ? read_tokens<std::int8_t>(a) : read_tokens<std::uint8_t>(a);
    case 2: return is_signed ? read_tokens<std::int16_t>(a) : read_tokens<std::uint16_t>(a);
    case 4: return is_signed ? read_tokens<std::int32_t>(a) : read_tokens<std::uint32_t>(a);
    default: return is_signed ? read_tokens<std::int64_t>(a) : read_tokens<std::uint64_t>(a);
  }
}

}  // namespace refdec_python

namespace pybind11::detail {
// Token ids from Python: an array-like (numpy arrays, torch CPU tensors, buffers) read in one pass
// over its memory (a 2M-token list element by element takes about half a second); anything else
// through pybind11's list caster, element by element.
template <>
struct type_caster<std::vector<refdec::Token>> : list_caster<std::vector<refdec::Token>, refdec::Token> {
  bool load(handle src, bool convert) {
    if (PyByteArray_Check(src.ptr())) return false;  // bytes are text, not token ids (a bytearray is a buffer of uint8)
    if (!refdec_python::is_array_like(src)) return list_caster::load(src, convert);
    value = refdec_python::array_tokens(src);
    return true;
  }
};
}  // namespace pybind11::detail

namespace refdec_python {

// A list of references from Python as refdec::References, without copying the tokens of those
// that are already what a drafter reads (1-D, int32, contiguous, native order: numpy arrays, and
// what numpy views in place, such as torch CPU int32 tensors): views of their memory, held here.
// Others (lists, other integer types) are read into vectors held here. Valid while this lives.
class PyReferences {
 public:
  explicit PyReferences(const py::iterable& references) {
    std::vector<std::size_t> owned;  // index in converted_ of each reference, or -1 for a view
    for (const py::handle r : references) {
      if (is_array_like(r)) {
        py::array a = as_array(r);
        const py::dtype dt = a.dtype();
        const bool int32 = dt.kind() == 'i' && dt.itemsize() == 4 && (dt.byteorder() == '=' || dt.byteorder() == '|');
        if (a.ndim() == 1 && int32 && (a.shape(0) <= 1 || a.strides(0) == 4)) {
          views_.emplace_back(static_cast<const refdec::Token*>(a.data()), static_cast<std::size_t>(a.shape(0)));
          arrays_.push_back(std::move(a));
          owned.push_back(static_cast<std::size_t>(-1));
          continue;
        }
        converted_.push_back(array_tokens(r));
      } else {
        try {
          converted_.push_back(r.cast<Tokens>());
        } catch (const py::cast_error&) {
          REFDEC_CHECK(false, "references: reference " << views_.size() << " is not a sequence of token ids (got "
                                                       << py::str(py::type::of(r)).cast<std::string>() << ")");
        }
      }
      views_.emplace_back();
      owned.push_back(converted_.size() - 1);
    }
    for (std::size_t i = 0; i < views_.size(); ++i)  // converted_ no longer moves
      if (owned[i] != static_cast<std::size_t>(-1)) views_[i] = converted_[owned[i]];
  }

  refdec::References view() const { return views_; }

 private:
  std::vector<py::array> arrays_;  // the arrays viewed
  std::vector<Tokens> converted_;  // the references read into vectors
  std::vector<std::span<const refdec::Token>> views_;
};

// --- drafters ------------------------------------------------------------------------------------

// A Python drafter: any refdec drafter behind AnyDrafter, a factory for fresh copies with the same
// settings (a mixture owns its sources), the scratch of draft_step, and a lock: drafting runs
// without the GIL, so two Python threads could otherwise enter one drafter at once.
struct PyDrafter {
  explicit PyDrafter(std::function<refdec::AnyDrafter()> factory) : make(std::move(factory)), drafter(make()) {}
  virtual ~PyDrafter() = default;

  std::function<refdec::AnyDrafter()> make;
  refdec::AnyDrafter drafter;
  refdec::DraftScratch scratch;
  std::mutex mutex;
  bool in_session = false;  // a Session request drives it: direct calls would interleave with its steps

  void check_free() const {
    REFDEC_CHECK(!in_session, "drafter '" << drafter.name() << "' is in use by a Session or StepDriver request until it leaves");
  }
};

// Runs f() on d without the GIL and under d's lock. The lock is taken after the GIL is released:
// a thread that blocked on it while holding the GIL would deadlock with the thread inside, which
// needs the GIL back to return.
template <class F>
decltype(auto) with_drafter(PyDrafter& d, F&& f) {
  d.check_free();
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(d.mutex);
  return f();
}

// The Python drafters a Session's or StepDriver's requests borrow: kept alive and marked busy
// until their request leaves (or the owner is dropped).
struct BorrowedDrafters {
  std::unordered_map<refdec::RequestId, py::object> borrowed;

  BorrowedDrafters() = default;
  BorrowedDrafters(const BorrowedDrafters&) = delete;
  BorrowedDrafters& operator=(const BorrowedDrafters&) = delete;
  ~BorrowedDrafters() {
    for (auto& entry : borrowed) entry.second.cast<PyDrafter&>().in_session = false;
  }
  void lend(refdec::RequestId id, py::object drafter) {
    drafter.cast<PyDrafter&>().in_session = true;
    borrowed.emplace(id, std::move(drafter));
  }
  void release(refdec::RequestId id) {
    const auto it = borrowed.find(id);
    if (it == borrowed.end()) return;
    it->second.cast<PyDrafter&>().in_session = false;
    borrowed.erase(it);
  }
  void release_finished(const std::vector<refdec::RequestUpdate>& updates) {
    for (const refdec::RequestUpdate& u : updates)
      if (u.finished) release(u.id);
  }
  // Runs f() without the GIL and under the lock of every borrowed drafter: no Python thread may be
  // inside one meanwhile (the locks are taken after the GIL is released, as in with_drafter()).
  template <class F>
  decltype(auto) locked(F&& f) {
    std::vector<std::mutex*> locks;
    for (auto& entry : borrowed) locks.push_back(&entry.second.cast<PyDrafter&>().mutex);
    py::gil_scoped_release release;
    std::vector<std::unique_lock<std::mutex>> held;
    for (std::mutex* mu : locks) held.emplace_back(*mu);
    return f();
  }
};

// --- errors --------------------------------------------------------------------------------------

// refdec's error family as Python exceptions (refdec.Error, ArgumentError, IoError: made by
// refdec._core).
struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* argument = nullptr;
  PyObject* io = nullptr;
};

// Sets the Python error for a refdec error in `p`; rethrows anything else to the next translator.
inline void translate_errors(std::exception_ptr p, const ErrorTypes& types) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const refdec::ArgumentError& e) {
    PyErr_SetString(types.argument, e.what());
  } catch (const refdec::IoError& e) {
    PyErr_SetString(types.io, e.what());
  } catch (const refdec::Error& e) {
    PyErr_SetString(types.error, e.what());
  }
}

}  // namespace refdec_python
