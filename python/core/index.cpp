// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's online ReferenceIndex and its files (index/reference_index.hpp,
// index/index_files.hpp).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/index/index_files.hpp"
#include "refdec/index/reference_index.hpp"

using namespace refdec;

namespace refdec_python {

void bind_index(py::module_& m) {
  py::class_<ReferenceIndex, std::shared_ptr<ReferenceIndex>>(m, "ReferenceIndex",
                                                              "One index over every finished output (and any document added), "
                                                              "shared by IndexDrafters and grown online: suffix-array segments "
                                                              "read through snapshots, suffixes ordered by their first depth tokens (2 to 255); at most "
                                                              "max_tokens tokens (and max_bytes bytes, when not 0), the oldest documents dropped.")
      .def(py::init([](std::size_t max_tokens, std::size_t depth, std::size_t max_bytes) {
             return std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = max_tokens, .depth = depth, .max_bytes = max_bytes});
           }),
           py::arg("max_tokens") = ReferenceIndexOptions{}.max_tokens, py::arg("depth") = ReferenceIndexOptions{}.depth,
           py::arg("max_bytes") = ReferenceIndexOptions{}.max_bytes)
      .def("add", [](ReferenceIndex& i, const Tokens& document) {
             py::gil_scoped_release release;
             i.add(document);
           }, py::arg("document"), "Adds one document (an empty one is ignored).")
      .def("add_datastore", [](ReferenceIndex& i, const std::filesystem::path& path, bool is_static) {
             py::gil_scoped_release release;
             auto segment = index_segment(Datastore::open_shared(path), i.options().depth);
             if (is_static)
               i.add_static(std::move(segment));
             else
               i.add_segment(std::move(segment));
           }, py::arg("path"), py::arg("static") = true,
           "Adds the datastore file at path as a segment read in place: static (never merged or dropped, outside "
           "max_tokens) or, with static=False, as the newest grown one.")
      .def("save", [](const ReferenceIndex& i, const std::filesystem::path& dir, std::int32_t vocab_size) {
             py::gil_scoped_release release;
             return save_reference_index(i, dir, vocab_size);
           }, py::arg("dir"), py::arg("vocab_size"),
           "Writes each segment as a datastore file in dir, then a MANIFEST naming them (atomic: a save that fails or is "
           "killed leaves the earlier one whole); returns the files.")
      .def_static("open", [](const std::filesystem::path& dir, std::size_t max_tokens, std::size_t depth) {
             ReferenceIndexFiles files;
             {
               py::gil_scoped_release release;
               files = open_reference_index(dir, ReferenceIndexOptions{max_tokens, depth});
             }
             return py::make_tuple(files.index, files.served, files.refused);
           }, py::arg("dir"), py::arg("max_tokens") = ReferenceIndexOptions{}.max_tokens, py::arg("depth") = ReferenceIndexOptions{}.depth,
           "An index whose segments are the files the last complete save() wrote in dir, read in place: (index, served "
           "paths, refused lines, one per file with its reason). Never rewrite a served file in place (docs/reliability.md).")
      .def_property_readonly("tokens", &ReferenceIndex::tokens, "Tokens indexed.")
      .def_property_readonly("bytes", &ReferenceIndex::bytes, "Bytes held (texts, suffix arrays, their common prefixes and samples; mapped files included).")
      .def_property_readonly("segments", [](const ReferenceIndex& i) { return i.snapshot()->segments.size(); }, "Segments now.")
      .def_property_readonly("max_tokens", [](const ReferenceIndex& i) { return i.options().max_tokens; }, "The bound on tokens.")
      .def_property_readonly("depth", [](const ReferenceIndex& i) { return i.options().depth; }, "Tokens by which suffixes are ordered.");
}

}  // namespace refdec_python
