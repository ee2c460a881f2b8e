// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's suffix-array datastores: opening one, and building one from token documents
// (datastore/reader.hpp, datastore/builder.hpp).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/datastore/reader.hpp"

using namespace refdec;

namespace refdec_python {

void bind_datastore(py::module_& m) {
  py::class_<Datastore, std::shared_ptr<Datastore>>(m, "Datastore",
                                                    "A read-only, memory-mapped suffix-array datastore; one instance serves any "
                                                    "number of threads and drafters.")
      .def_static("open", [](const std::filesystem::path& path, bool verify, bool populate, bool verify_order, std::uint32_t order_samples) {
             py::gil_scoped_release release;
             return std::const_pointer_cast<Datastore>(
                 Datastore::open_shared(path, DatastoreOpenOptions{verify, populate, verify_order, order_samples}));
           }, py::arg("path"), py::arg("verify") = DatastoreOpenOptions{}.verify, py::arg("populate") = DatastoreOpenOptions{}.populate,
           py::arg("verify_order") = DatastoreOpenOptions{}.verify_order, py::arg("order_samples") = DatastoreOpenOptions{}.order_samples,
           "Maps and validates the datastore file `path`; raises OSError (refdec.IoError) for a missing or bad file.")
      .def_property_readonly("path", &Datastore::path, "The file.")
      .def_property_readonly("size", &Datastore::size, "Tokens in the array (separators included).")
      .def_property_readonly("num_documents", &Datastore::num_documents, "Documents.")
      .def_property_readonly("num_corpus_tokens", &Datastore::num_corpus_tokens, "Corpus tokens (separators excluded).")
      .def_property_readonly("vocab_size", &Datastore::vocab_size, "Vocabulary size it was built for.")
      .def("count", [](const Datastore& d, const Tokens& p) { return d.count(p); }, py::arg("pattern"), "Occurrences of `pattern`.")
      .def("find", [](const Datastore& d, const Tokens& p) {
             const SuffixRange r = d.find(p);
             return std::make_pair(r.begin, r.end);
           }, py::arg("pattern"), "Suffix array ranks [begin, end) of the suffixes starting with `pattern`.")
      .def("token", &Datastore::token, py::arg("pos"), "Token at array position `pos` (-1 for a separator).")
      .def("suffix", &Datastore::suffix, py::arg("rank"), "Array position of the suffix of rank `rank`.");
  py::class_<DatastoreBuildStats>(m, "DatastoreBuildStats", "What build_datastore did.")
      .def_readonly("num_tokens", &DatastoreBuildStats::num_tokens, "Corpus tokens (separators excluded).")
      .def_readonly("num_documents", &DatastoreBuildStats::num_documents, "Documents.")
      .def_readonly("file_bytes", &DatastoreBuildStats::file_bytes, "Size of the file written.")
      .def_readonly("seconds", &DatastoreBuildStats::seconds, "Wall time of the build.")
      .def_readonly("sort_seconds", &DatastoreBuildStats::sort_seconds, "Of which suffix sorting.")
      .def_property_readonly("tokens_per_second", &DatastoreBuildStats::tokens_per_second, "Build throughput.");
  m.def(
      "build_datastore",
      [](const std::vector<Tokens>& documents, std::int32_t vocab_size, const std::filesystem::path& path,
         std::optional<py::function> progress, const std::vector<std::filesystem::path>& inputs) {
        DatastoreBuildOptions options;
        options.inputs = inputs;
        if (progress)
          options.progress = [&progress](std::string_view stage, std::uint64_t done, std::uint64_t total) {
            py::gil_scoped_acquire acquire;
            (*progress)(std::string(stage), done, total);
          };
        py::gil_scoped_release release;
        return build_datastore(documents, vocab_size, path, options);
      },
      py::arg("documents"), py::arg("vocab_size"), py::arg("path"), py::arg("progress") = std::nullopt,
      py::arg("inputs") = DatastoreBuildOptions{}.inputs,
      "Builds the datastore file `path` from token documents (ids in [0, vocab_size)), written to a temporary and "
      "renamed. progress(stage, done, total) is called now and then. Raises ValueError for bad input, OSError for a "
      "write failure.");
}

}  // namespace refdec_python
