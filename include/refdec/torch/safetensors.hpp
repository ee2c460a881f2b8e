// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Reads and writes safetensors files (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header size N, N bytes of JSON describing each tensor, then the raw data buffer.
// The reader memory-maps the file (POSIX) and copies tensors out on request.

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/io/mapped_file.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

// Safetensors stores little-endian data; the reader and writer copy bytes without swapping.
static_assert(std::endian::native == std::endian::little, "refdec safetensors support needs a little-endian host");

/// One tensor described by a safetensors header.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype;                ///< as spelled in the header: "F32", "BF16", "I64", ...
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::uint64_t data_begin = 0;     ///< byte offset of the first byte in the data buffer
  std::uint64_t data_end = 0;       ///< byte offset one past the last byte in the data buffer

  /// Number of elements (1 for a scalar).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }
  /// Size of the tensor's data in bytes.
  std::uint64_t nbytes() const { return data_end - data_begin; }
};

namespace torch_detail {

// Every dtype of the safetensors format, with its element size. Some have no libtorch 1.13
// equivalent (unsigned 16/32/64-bit, float8): files holding them still open, and only reading
// such a tensor fails.
inline std::optional<std::uint64_t> safetensors_itemsize(std::string_view dtype) {
  static const std::map<std::string_view, std::uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
  };
  const auto it = sizes.find(dtype);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

// The ATen type a safetensors dtype is read into; BOOL is read as bytes and then compared with
// zero, so that a file with bytes other than 0 and 1 cannot make an invalid bool tensor.
inline std::optional<at::ScalarType> safetensors_storage_type(std::string_view dtype) {
  static const std::map<std::string_view, at::ScalarType> types = {
      {"BOOL", at::kByte},     {"U8", at::kByte}, {"I8", at::kChar},   {"I16", at::kShort},  {"F16", at::kHalf},
      {"BF16", at::kBFloat16}, {"I32", at::kInt}, {"F32", at::kFloat}, {"F64", at::kDouble}, {"I64", at::kLong},
  };
  const auto it = types.find(dtype);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

// The safetensors dtype that stores `type`, or nullopt when the format has none.
inline std::optional<std::string> safetensors_dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kBool: return "BOOL";
    case at::kByte: return "U8";
    case at::kChar: return "I8";
    case at::kShort: return "I16";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kInt: return "I32";
    case at::kFloat: return "F32";
    case at::kDouble: return "F64";
    case at::kLong: return "I64";
    default: return std::nullopt;
  }
}

}  // namespace torch_detail

/// An open safetensors file: its validated header, and its tensors copied out on request.
/// Movable, not copyable; the file stays mapped until the object is destroyed. Const use (get())
/// may be shared across threads.
class SafetensorsFile {
 public:
  /// Opens and validates `path`. Throws refdec::IoError, naming the file and the problem, for a
  /// file that cannot be read, a truncated file, a header that is not a JSON object, an entry
  /// without a valid dtype, shape or data_offsets, a dtype the format does not define, offsets
  /// out of the data buffer or disagreeing with the shape, overlapping tensors, or bytes of the
  /// data buffer that no tensor covers (the format forbids them).
  explicit SafetensorsFile(std::filesystem::path path) : path_(std::move(path)), map_(path_, false, "safetensors file") {
    const std::uint64_t file_size = map_.size();
    REFDEC_CHECK_IO(file_size >= 8,
                    "safetensors file " << path_ << " is " << file_size << " bytes long, shorter than its 8-byte header size");
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, map_.data(), 8);
    REFDEC_CHECK_IO(header_size <= file_size - 8, "safetensors file " << path_ << ": header size " << header_size << " is larger than the "
                                                                      << file_size - 8 << " bytes after the size field (truncated?)");
    data_offset_ = 8 + header_size;
    const std::uint64_t buffer_size = file_size - data_offset_;
    const auto* header_begin = reinterpret_cast<const char*>(map_.data() + 8);

    // Duplicate top-level keys would silently keep only one entry; the callback catches them.
    std::set<std::string> keys;
    std::string duplicate;
    const nlohmann::json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
          !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(header_begin, header_begin + header_size, on_event);
    } catch (const nlohmann::json::exception& e) {
      REFDEC_CHECK_IO(false, "safetensors file " << path_ << ": the " << header_size << "-byte header is not valid JSON: " << e.what());
    }
    REFDEC_CHECK_IO(header.is_object(), "safetensors file " << path_ << ": the header is JSON but not an object");
    REFDEC_CHECK_IO(duplicate.empty(),
                    "safetensors file " << path_ << ": tensor \"" << duplicate << "\" appears more than once in the header");

    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        read_metadata(entry);
        continue;
      }
      tensors_.push_back(parse_entry(name, entry, buffer_size));
    }
    // The format requires the tensors to tile the data buffer exactly: sorted by offset, each
    // starts where the previous one ended and the last ends with the file.
    std::sort(tensors_.begin(), tensors_.end(),
              [](const auto& a, const auto& b) { return std::pair(a.data_begin, a.data_end) < std::pair(b.data_begin, b.data_end); });
    std::uint64_t expected_begin = 0;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      REFDEC_CHECK_IO(
          t.data_begin == expected_begin,
          "safetensors file " << path_ << ": tensor \"" << t.name << "\" starts at byte " << t.data_begin << " of the data buffer, but "
                              << (i == 0 ? std::string("the buffer starts at 0")
                                         : "the previous tensor \"" + tensors_[i - 1].name + "\" ends at " + std::to_string(expected_begin))
                              << (t.data_begin < expected_begin ? " (overlapping tensors)" : " (a gap)"));
      expected_begin = t.data_end;
    }
    REFDEC_CHECK_IO(expected_begin == buffer_size, "safetensors file " << path_ << ": the tensors cover " << expected_begin
                                                                       << " bytes of the " << buffer_size << "-byte data buffer");
    for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  }

  /// The file this object reads.
  const std::filesystem::path& path() const { return path_; }
  /// Every tensor of the file, in the order of their data in the file.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  /// The optional "__metadata__" string map of the header (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Whether the file holds a tensor called `name`.
  bool contains(const std::string& name) const { return index_.count(name) != 0; }

  /// The header entry of tensor `name`; throws refdec::ArgumentError when the file has no such
  /// tensor.
  const SafetensorsTensorInfo& info(const std::string& name) const {
    const auto it = index_.find(name);
    REFDEC_CHECK(it != index_.end(), "safetensors file " << path_ << " has no tensor \"" << name << "\"");
    return tensors_[it->second];
  }

  /// A copy of tensor `name` on `device`, converted to `dtype` (default: its stored type).
  /// Throws refdec::ArgumentError when the file has no such tensor, refdec::IoError when its dtype
  /// has no ATen equivalent.
  at::Tensor get(const std::string& name, std::optional<at::ScalarType> dtype = std::nullopt, at::Device device = at::kCPU) const {
    const auto& t = info(name);
    const auto storage = torch_detail::safetensors_storage_type(t.dtype);
    REFDEC_CHECK_IO(storage.has_value(),
                    "safetensors file " << path_ << ": tensor \"" << name << "\" has dtype " << t.dtype << ", which refdec cannot read");
    // Copy rather than wrap the mapping: the data may be unaligned, and the tensor must outlive
    // this object.
    auto out = at::empty(t.shape, at::TensorOptions().dtype(*storage));
    if (t.nbytes() > 0) std::memcpy(out.data_ptr(), map_.data() + data_offset_ + t.data_begin, t.nbytes());
    if (t.dtype == "BOOL") out = out.ne(0);
    return out.to(device, dtype.value_or(out.scalar_type()));
  }

 private:
  void read_metadata(const nlohmann::json& entry) {
    REFDEC_CHECK_IO(entry.is_object(), "safetensors file " << path_ << ": \"__metadata__\" must be an object, got " << entry.type_name());
    for (const auto& [key, value] : entry.items()) {
      REFDEC_CHECK_IO(value.is_string(),
                      "safetensors file " << path_ << ": metadata \"" << key << "\" must be a string, got " << value.type_name());
      metadata_.emplace(key, value.get<std::string>());
    }
  }

  SafetensorsTensorInfo parse_entry(const std::string& name, const nlohmann::json& entry, std::uint64_t buffer_size) const {
    const auto where = [&] {
      std::ostringstream os;
      os << "safetensors file " << path_ << ": tensor \"" << name << "\"";
      return os.str();
    };
    REFDEC_CHECK_IO(entry.is_object(), where() << " must be a JSON object, got " << entry.type_name());
    for (const char* field : {"dtype", "shape", "data_offsets"})
      REFDEC_CHECK_IO(entry.contains(field), where() << " has no \"" << field << "\"");
    SafetensorsTensorInfo t;
    t.name = name;
    const auto& dtype = entry["dtype"];
    REFDEC_CHECK_IO(dtype.is_string(), where() << ": \"dtype\" must be a string, got " << dtype.dump());
    t.dtype = dtype.get<std::string>();
    const auto itemsize = torch_detail::safetensors_itemsize(t.dtype);
    REFDEC_CHECK_IO(itemsize.has_value(), where() << " has unknown dtype \"" << t.dtype << "\"");

    const auto& shape = entry["shape"];
    REFDEC_CHECK_IO(shape.is_array(), where() << ": \"shape\" must be an array, got " << shape.dump());
    // Element count, checked for overflow; it must fit the buffer, so anything larger is an error.
    std::uint64_t numel = 1;
    bool too_large = false;
    for (const auto& d : shape) {
      // nlohmann parses non-negative integer literals as unsigned: this rejects negative and
      // fractional sizes, which get<std::uint64_t>() would silently convert.
      REFDEC_CHECK_IO(d.is_number_unsigned(), where() << ": shape " << shape.dump() << " must hold non-negative integers");
      const auto v = d.get<std::uint64_t>();
      REFDEC_CHECK_IO(v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                      where() << ": shape " << shape.dump() << " is too large");
      t.shape.push_back(static_cast<std::int64_t>(v));
      if (v != 0 && numel > std::numeric_limits<std::uint64_t>::max() / v) too_large = true;
      numel *= v;
    }

    const auto& offsets = entry["data_offsets"];
    REFDEC_CHECK_IO(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
                    where() << ": \"data_offsets\" must be [begin, end] with non-negative integers, got " << offsets.dump());
    t.data_begin = offsets[0].get<std::uint64_t>();
    t.data_end = offsets[1].get<std::uint64_t>();
    REFDEC_CHECK_IO(t.data_begin <= t.data_end && t.data_end <= buffer_size, where() << ": data_offsets [" << t.data_begin << ", "
                                                                                     << t.data_end << "] are out of bounds of the "
                                                                                     << buffer_size << "-byte data buffer");
    REFDEC_CHECK_IO(!too_large && numel <= std::numeric_limits<std::uint64_t>::max() / *itemsize && numel * *itemsize == t.nbytes(),
                    where() << ": data_offsets [" << t.data_begin << ", " << t.data_end << "] span " << t.nbytes() << " bytes, but shape "
                            << shape.dump() << " of " << t.dtype << " needs "
                            << (too_large ? std::string("more than 2^64") : std::to_string(numel * *itemsize)));
    return t;
  }

  std::filesystem::path path_;
  MappedFile map_;
  std::uint64_t data_offset_ = 0;  // file offset of the data buffer: 8 + header size
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` (in that order) to a safetensors file at `path`, with `metadata` as its
/// "__metadata__" when not empty. Each tensor is stored as a contiguous CPU copy in its own dtype;
/// supported: bool, uint8, int8/16/32/64, float16, bfloat16, float32, float64. The file is written
/// beside `path` and then renamed over it, so a failed write leaves no partial file. Throws
/// refdec::ArgumentError for an empty, duplicate or reserved name, an undefined tensor or an
/// unsupported dtype, and refdec::IoError for an I/O failure.
inline void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  // The header needs only sizes, so each tensor is copied to the CPU just before it is written:
  // a GPU model is never held twice in host memory.
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    REFDEC_CHECK(!name.empty() && name != "__metadata__", "write_safetensors " << path << ": invalid tensor name \"" << name << "\"");
    REFDEC_CHECK(!header.contains(name), "write_safetensors " << path << ": tensor \"" << name << "\" is given twice");
    REFDEC_CHECK(tensor.defined(), "write_safetensors " << path << ": tensor \"" << name << "\" is undefined");
    const auto dtype = torch_detail::safetensors_dtype_of(tensor.scalar_type());
    REFDEC_CHECK(dtype.has_value(), "write_safetensors " << path << ": tensor \"" << name << "\" has type " << tensor.scalar_type()
                                                         << ", which safetensors cannot store");
    const auto nbytes = static_cast<std::uint64_t>(tensor.numel()) * static_cast<std::uint64_t>(tensor.element_size());
    header[name] = {{"dtype", *dtype}, {"shape", tensor.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // names or metadata that are not UTF-8
    REFDEC_CHECK(false, "write_safetensors " << path << ": cannot encode the header: " << e.what());
  }
  // Pad with spaces (allowed by the format) so that the data buffer starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  const auto header_size = static_cast<std::uint64_t>(text.size());

  // A unique temporary beside `path`, renamed over it: concurrent writers never mix, a failed
  // write leaves `path` as it was, and `path` is refused when it is a device or a FIFO.
  OutputFile out(path, "safetensors file");
  out.write(&header_size, 8);
  out.write(text);
  for (const auto& [name, tensor] : tensors) {
    const auto cpu = tensor.detach().to(at::kCPU).contiguous();
    out.write(cpu.data_ptr(), cpu.nbytes());
  }
  out.commit();
}

REFDEC_TORCH_NAMESPACE_END
