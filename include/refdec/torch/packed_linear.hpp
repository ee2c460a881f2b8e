// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A CPU linear layer whose weight is packed once into the layout its kernel streams fastest. At
// batch 1 a decoding step is a stream over every weight, so the layout the kernel reads decides
// the speed. Two kernels (backends):
//  - oneDNN's bf16 matmul, the weight reordered into its blocked layout: on AVX-512 machines it
//    reads that layout at the memory bandwidth, at::linear in bf16 at less than half of it;
//    oneDNN 2.6 (Debian's) creates no bf16 matmul below AVX-512.
//  - refdec's streaming kernel (cpu/stream_linear.hpp), bf16 or fp16 weights kept 2 bytes each:
//    any x86-64 CPU with AVX2, FMA and F16C, with AVX-512 and AVX512_BF16 tiles where the CPU has
//    them. Its tile set is chosen per row count (TilesByRows), over one packed copy.
// Which backend and which tiles run is measured at model load (linear_choice.hpp); docs/speed.md
// has the step costs against the memory roofline.
//
// oneDNN is optional (onednn.hpp).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/cpu/cpu_isa.hpp"
#include "refdec/cpu/huge_pages.hpp"
#include "refdec/cpu/stream_linear.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/onednn.hpp"
#include "refdec/torch/thread_scratch.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// The kernels a PackedLinear runs on.
enum class PackedBackend {
  kOneDnn,  ///< oneDNN's bf16 matmul over its blocked layout (CPUs with AVX-512; bf16 only)
  kStream,  ///< refdec's streaming kernel (cpu/stream_linear.hpp; CPUs with AVX2, FMA and F16C; bf16 and fp16)
};

/// The backend's name as options and reports spell it: "onednn", "stream".
inline const char* backend_name(PackedBackend backend) { return backend == PackedBackend::kOneDnn ? "onednn" : "stream"; }

/// A tile set and how its tiles prefetch: what the streaming kernel runs a product with.
struct StreamKernel {
  StreamTiles tiles = StreamTiles::kAvx2;
  StreamPrefetch prefetch = StreamPrefetch::kAhead;

  /// The tile set's name, with "/l2" or "/none" after it where the prefetch is not kAhead:
  /// "avx512-bf16", "avx512-bf16/none".
  std::string name() const {
    return std::string(stream_tiles_name(tiles)) +
           (prefetch == StreamPrefetch::kAhead ? "" : std::string("/") + stream_prefetch_name(prefetch));
  }
  bool operator==(const StreamKernel&) const = default;

  /// The kernel name() spells (a "/ahead" suffix is accepted too); throws refdec::ArgumentError
  /// naming the tile sets and prefetches there are otherwise.
  static StreamKernel parse(std::string_view name) {
    const std::size_t slash = name.find('/');
    const std::string_view tiles = name.substr(0, slash);
    StreamKernel k;
    bool known = false;
    for (const StreamTiles t : kAllStreamTiles)
      if (tiles == stream_tiles_name(t)) k.tiles = t, known = true;
    REFDEC_CHECK(known, "StreamKernel: unknown tile set '" << tiles << "' (avx2, avx512, avx512-fp16, avx512-bf16)");
    if (slash == std::string_view::npos) return k;
    const std::string_view prefetch = name.substr(slash + 1);
    known = false;
    for (const StreamPrefetch p : kAllStreamPrefetch)
      if (prefetch == stream_prefetch_name(p)) k.prefetch = p, known = true;
    REFDEC_CHECK(known, "StreamKernel: unknown prefetch '" << prefetch << "' in '" << name << "' (ahead, l2, none)");
    return k;
  }
};

/// Which of the streaming kernel's tile sets, prefetching how, runs a product of each row count:
/// ranges of row counts, each from its first count up to the next range's. Without ranges, or
/// below the first, the widest set the CPU runs for the format (StreamLinear::widest()),
/// prefetching kAhead.
class TilesByRows {
 public:
  TilesByRows() = default;
  /// `tiles` for every row count.
  explicit TilesByRows(StreamTiles tiles) { set(1, tiles); }

  /// `tiles`, prefetching as `prefetch`, from `first_rows` (at least 1) up to the next range.
  void set(std::int64_t first_rows, StreamTiles tiles, StreamPrefetch prefetch = StreamPrefetch::kAhead) {
    REFDEC_CHECK(first_rows >= 1, "TilesByRows: a range starts at 1 row or more, got " << first_rows);
    ranges_[first_rows] = {tiles, prefetch};
  }

  /// The tiles that run `rows` rows of `format` weights, and their prefetch.
  StreamKernel kernel(std::int64_t rows, HalfFormat format) const {
    const auto it = ranges_.upper_bound(rows);
    return it == ranges_.begin() ? StreamKernel{StreamLinear::widest(format)} : std::prev(it)->second;
  }
  /// The tiles alone: kernel(rows, format).tiles.
  StreamTiles at(std::int64_t rows, HalfFormat format) const { return kernel(rows, format).tiles; }

  /// "avx512-bf16/none for 1-2 rows, avx512-bf16 from 3 rows", "avx2 for every row count", or
  /// "the widest tiles here" without ranges.
  std::string describe() const {
    if (ranges_.empty()) return "the widest tiles here";
    std::string s;
    for (auto it = ranges_.begin(); it != ranges_.end(); ++it) {
      const auto next = std::next(it);
      if (!s.empty()) s += ", ";
      s += it->second.name();
      if (it->first == 1 && next == ranges_.end())
        s += " for every row count";
      else if (next == ranges_.end())
        s += " from " + std::to_string(it->first) + " rows";
      else
        s += " for " + std::to_string(it->first) + "-" + std::to_string(next->first - 1) + " rows";
    }
    return s;
  }

  /// The table describe() spells, so that a choice measured once can be kept as text and given
  /// again (LinearChoice::parse()). Throws refdec::ArgumentError naming the part it cannot read:
  /// an unknown kernel, a count that is not a positive integer, ranges that leave a gap or
  /// overlap, "for every row count" beside other ranges, a range after "from N rows".
  static TilesByRows parse(std::string_view text) {
    TilesByRows table;
    if (text == "the widest tiles here") return table;
    const std::string whole(text);
    const auto count = [&](std::string_view digits, std::string_view item) {
      std::int64_t n = 0;
      const auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      REFDEC_CHECK(error == std::errc{} && stop == digits.data() + digits.size() && n >= 1,
                   "TilesByRows: '" << digits << "' in '" << item << "' is not a row count (a positive integer); in '" << whole << "'");
      return n;
    };
    std::int64_t expected = 0;  // where the next range must start (any for the first)
    bool last = false;          // a range that reaches every larger count was read
    while (!text.empty()) {
      REFDEC_CHECK(!last, "TilesByRows: a range after one that reaches every larger row count, in '" << whole << "'");
      const std::size_t comma = text.find(", ");
      const std::string_view item = text.substr(0, comma);
      text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 2);
      const std::size_t space = item.find(' ');
      REFDEC_CHECK(space != std::string_view::npos,
                   "TilesByRows: '" << item << "' names no row counts (KERNEL for A-B rows, KERNEL from A rows, KERNEL for every row "
                                    << "count); in '" << whole << "'");
      const StreamKernel kernel = StreamKernel::parse(item.substr(0, space));
      const std::string_view rows = item.substr(space + 1);
      std::int64_t first = 0, end = 0;  // end: the range's last count, 0 where it reaches every larger one
      if (rows == "for every row count") {
        REFDEC_CHECK(table.ranges_.empty() && text.empty(), "TilesByRows: 'for every row count' beside other ranges, in '" << whole << "'");
        first = 1, last = true;
      } else if (rows.starts_with("from ") && rows.ends_with(" rows")) {
        first = count(rows.substr(5, rows.size() - 10), item), last = true;
      } else if (const std::size_t dash = rows.find('-');
                 rows.starts_with("for ") && rows.ends_with(" rows") && dash != std::string_view::npos) {
        first = count(rows.substr(4, dash - 4), item);
        end = count(rows.substr(dash + 1, rows.size() - dash - 6), item);
        REFDEC_CHECK(end >= first, "TilesByRows: '" << item << "' ends before it starts; in '" << whole << "'");
        REFDEC_CHECK(!text.empty(), "TilesByRows: the last range, '" << item << "', must reach every larger row count ('from " << first
                                                                     << " rows'); in '" << whole << "'");
      } else {
        REFDEC_CHECK(false, "TilesByRows: cannot read the row counts of '" << item << "' (for A-B rows, from A rows, for every row "
                                                                           << "count); in '" << whole << "'");
      }
      REFDEC_CHECK(table.ranges_.empty() || first == expected, "TilesByRows: '" << item << "' starts at " << first
                                                                                << " rows where the range before it ends at "
                                                                                << expected - 1 << "; in '" << whole << "'");
      table.set(first, kernel.tiles, kernel.prefetch);
      expected = end + 1;
    }
    REFDEC_CHECK(last, "TilesByRows: no ranges in '" << whole << "'");
    return table;
  }

  const std::map<std::int64_t, StreamKernel>& ranges() const { return ranges_; }
  bool operator==(const TilesByRows&) const = default;

 private:
  std::map<std::int64_t, StreamKernel> ranges_;  // first row count -> tiles and prefetch
};

/// Why `backend` cannot run a `dtype` weight on this machine, or "" when it can: names what the
/// CPU lacks and what to use instead.
inline std::string packed_backend_unavailable(PackedBackend backend, at::ScalarType dtype) {
  std::ostringstream why;
  if (backend == PackedBackend::kOneDnn) {
    if (!REFDEC_HAVE_ONEDNN)
      why << "this build of refdec has no oneDNN (install libdnnl-dev and reconfigure)";
    else if (dtype != at::kBFloat16)
      why << "oneDNN runs bf16 weights only, got " << dtype;
    else if (!torch_detail::onednn_bf16_matmul_runs())
      why << "oneDNN creates no bf16 matmul on this CPU (it needs AVX-512; this CPU runs " << cpu_isa().describe() << ")";
  } else {
    if (dtype != at::kBFloat16 && dtype != at::kHalf)
      why << "the streaming kernel runs bf16 and fp16 weights, got " << dtype;
    else if (!StreamLinear::cpu_runs())
      why << "the streaming kernel needs AVX2, FMA and F16C (this CPU runs " << cpu_isa().describe() << ")";
  }
  return why.str();
}

/// The backends that run `dtype` weights on this CPU.
inline std::vector<PackedBackend> packed_backends_here(at::ScalarType dtype) {
  std::vector<PackedBackend> v;
  for (const PackedBackend b : {PackedBackend::kOneDnn, PackedBackend::kStream})
    if (packed_backend_unavailable(b, dtype).empty()) v.push_back(b);
  return v;
}

/// y = x W^T with W packed for a CPU kernel (bf16 or fp16 weights). Thread-safe: run() may be
/// called from several threads at once.
class PackedLinear {
 public:
  /// Whether `weight` ([out, in], as torch.nn.Linear holds it) can be packed here: a 2-D bf16 or
  /// fp16 CPU tensor, and a backend that runs it on this CPU.
  static bool supported(const at::Tensor& weight) { return why_unsupported(weight, std::nullopt).empty(); }

  /// Packs `weight` ([out, in]) for `backend` (by default the streaming kernel where it runs,
  /// else oneDNN; linear_choice.hpp measures which is faster), the streaming kernel running
  /// `tiles`; the tensor itself is not kept. Throws ArgumentError naming the reason when it
  /// cannot, or when `tiles` name a set that cannot run these weights here.
  explicit PackedLinear(const at::Tensor& weight, std::optional<PackedBackend> backend = std::nullopt, TilesByRows tiles = {})
      : tiles_(std::move(tiles)) {
    const std::string why = why_unsupported(weight, backend);
    REFDEC_CHECK(why.empty(), "PackedLinear: cannot pack " << (weight.defined() ? weight.toString() : std::string("an undefined tensor"))
                                                           << ": " << why);
    dtype_ = weight.scalar_type();
    backend_ = backend ? *backend : packed_backends_here(dtype_).back();
    out_ = weight.size(0), in_ = weight.size(1);
    for (const auto& [rows, k] : tiles_.ranges()) {
      const std::string no = StreamLinear::unavailable(k.tiles, format());
      REFDEC_CHECK(no.empty(), "PackedLinear: cannot run " << dtype_ << " weights from " << rows << " rows: " << no);
    }
    const auto source = weight.contiguous();
    if (backend_ == PackedBackend::kStream) {
      stream_ = std::make_unique<const StreamLinear>(static_cast<const std::uint16_t*>(source.data_ptr()), out_, in_, format());
      return;
    }
#if REFDEC_HAVE_ONEDNN
    using tag = dnnl::memory::format_tag;
    // The layout oneDNN picks for one row of input; rows up to a few hundred reuse it at full speed.
    const auto pd = primitive_desc(1, dnnl::memory::desc({in_, out_}, dnnl::memory::data_type::bf16, tag::any), false, Epilogue::kStore);
    packed_desc_ = pd.weights_desc();
    packed_ = HugePageBuffer(packed_desc_.get_size());
    // torch's [out, in] row-major is oneDNN's [in, out] with tag ba: no transpose copy.
    dnnl::memory from({{in_, out_}, dnnl::memory::data_type::bf16, tag::ba}, torch_detail::onednn_engine(), source.data_ptr());
    dnnl::memory to(packed_desc_, torch_detail::onednn_engine(), packed_.data());
    dnnl::stream s(torch_detail::onednn_engine());
    dnnl::reorder(from, to).execute(s, from, to);
    s.wait();
#endif
  }

  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  /// The kernel this layer runs on.
  PackedBackend backend() const { return backend_; }
  /// The weights' (and the inputs') dtype: bf16 or fp16.
  at::ScalarType dtype() const { return dtype_; }
  /// Bytes of the packed weight (what one step streams).
  std::int64_t bytes() const { return stream_ ? stream_->bytes() : static_cast<std::int64_t>(packed_.size()); }
  /// The streaming kernel's tile sets by row count (kStream only).
  const TilesByRows& tiles() const { return tiles_; }

  /// out = x W^T, with `epilogue` applied: x [rows, in] of dtype(), contiguous; out [rows,
  /// out_features()], contiguous, dtype() or float32; `other` (Epilogue::kMultiply only) like out,
  /// of dtype(), not overlapping it. Rounds once, after the epilogue.
  void run(const at::Tensor& x, const at::Tensor& out, Epilogue epilogue = Epilogue::kStore, const at::Tensor& other = {}) const {
    const StreamKernel k = tiles_.kernel(x.dim() == 2 ? x.size(0) : 1, format());
    run_tiles(k.tiles, x, out, epilogue, other, k.prefetch);
  }

  /// run() with the streaming kernel's `tiles`, prefetching as `prefetch`, whatever tiles() names
  /// for the row count (what a calibration times); oneDNN's run() otherwise.
  void run_tiles(StreamTiles tiles, const at::Tensor& x, const at::Tensor& out, Epilogue epilogue = Epilogue::kStore,
                 const at::Tensor& other = {}, StreamPrefetch prefetch = StreamPrefetch::kAhead) const {
    REFDEC_CHECK(
        x.dim() == 2 && x.size(1) == in_ && x.scalar_type() == dtype_ && x.is_contiguous() && x.device().is_cpu(),
        "PackedLinear: input must be a contiguous " << dtype_ << " CPU [rows, " << in_ << "], got " << x.toString() << " " << x.sizes());
    REFDEC_CHECK(out.dim() == 2 && out.size(0) == x.size(0) && out.size(1) == out_ && out.is_contiguous() &&
                     (out.scalar_type() == dtype_ || out.scalar_type() == at::kFloat) && out.device().is_cpu(),
                 "PackedLinear: output must be a contiguous " << dtype_ << " or float32 CPU [" << x.size(0) << ", " << out_ << "], got "
                                                              << out.toString() << " " << out.sizes());
    const bool multiply = epilogue == Epilogue::kMultiply;
    REFDEC_CHECK(multiply == other.defined(), "PackedLinear: Epilogue::kMultiply needs the tensor to multiply by, and only it takes one");
    REFDEC_CHECK(!multiply || (other.sizes() == out.sizes() && other.scalar_type() == dtype_ && other.is_contiguous() &&
                               other.device().is_cpu() && other.data_ptr() != out.data_ptr()),
                 "PackedLinear: the tensor to multiply by must be a contiguous "
                     << dtype_ << " CPU " << out.sizes() << " apart from the output, got " << other.toString() << " " << other.sizes());
    if (x.size(0) == 0) return;
    const bool f32 = out.scalar_type() == at::kFloat;
    if (stream_)
      return run_stream(x, out, f32, epilogue, multiply ? static_cast<const std::uint16_t*>(other.data_ptr()) : nullptr, {tiles, prefetch});
#if REFDEC_HAVE_ONEDNN
    const dnnl::matmul kernel = kernel_for(x.size(0), f32, epilogue);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::engine& engine = torch_detail::onednn_engine();
    const dnnl::memory::desc dst_desc({x.size(0), out_}, f32 ? dt::f32 : dt::bf16, tag::ab);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory({{x.size(0), in_}, dt::bf16, tag::ab}, engine, x.data_ptr())},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(packed_desc_, engine, packed_.data())},
                                               {DNNL_ARG_DST, dnnl::memory(dst_desc, engine, out.data_ptr())}};
    if (multiply)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   dnnl::memory({{x.size(0), out_}, dt::bf16, tag::ab}, engine, other.data_ptr()));
    thread_local dnnl::stream stream(engine);
    kernel.execute(stream, args);
    stream.wait();
#endif
  }

  /// x W^T as a new [rows, out_features()] tensor of `dtype` (the weights' dtype when not given,
  /// or float32), with `epilogue` (not Epilogue::kAccumulate: there is nothing to add to) and
  /// `other` as run() takes them.
  at::Tensor operator()(const at::Tensor& x, std::optional<at::ScalarType> dtype = std::nullopt, Epilogue epilogue = Epilogue::kStore,
                        const at::Tensor& other = {}) const {
    REFDEC_CHECK(epilogue != Epilogue::kAccumulate, "PackedLinear: Epilogue::kAccumulate adds to an output: call run()");
    auto out = at::empty({x.size(0), out_}, x.options().dtype(dtype.value_or(dtype_)));
    run(x, out, epilogue, other);
    return out;
  }

 private:
  HalfFormat format() const { return dtype_ == at::kHalf ? HalfFormat::kFp16 : HalfFormat::kBf16; }

  static std::string why_unsupported(const at::Tensor& weight, std::optional<PackedBackend> backend) {
    if (!weight.defined() || weight.dim() != 2 || !weight.device().is_cpu() ||
        (weight.scalar_type() != at::kBFloat16 && weight.scalar_type() != at::kHalf))
      return "needs a 2-D bf16 or fp16 CPU weight";
    if (backend) return packed_backend_unavailable(*backend, weight.scalar_type());
    if (!packed_backends_here(weight.scalar_type()).empty()) return "";
    return packed_backend_unavailable(PackedBackend::kOneDnn, weight.scalar_type()) + "; " +
           packed_backend_unavailable(PackedBackend::kStream, weight.scalar_type());
  }

  // The streaming kernel: x prepared for the row count's tiles once, the column blocks shared by
  // libtorch's threads (StreamShare: each its own contiguous range, then what others have left).
  void run_stream(const at::Tensor& x, const at::Tensor& out, bool f32, Epilogue epilogue, const std::uint16_t* other,
                  StreamKernel kernel) const {
    const StreamTiles tiles = kernel.tiles;
    const std::string no = StreamLinear::unavailable(tiles, format());
    REFDEC_CHECK(no.empty(), "PackedLinear: " << no);
    const std::int64_t rows = x.size(0), blocks = stream_->blocks();
    void* const xp = torch_detail::thread_scratch_bytes(torch_detail::ScratchSlot::kPreparedInput, stream_->prepared_bytes(tiles, rows));
    stream_->prepare(tiles, static_cast<const std::uint16_t*>(x.data_ptr()), rows, xp);
    void* op = out.data_ptr();
    const std::int64_t sharers = std::clamp<std::int64_t>(blocks / StreamShare::kRunBlocks, 1, at::get_num_threads());
    StreamShare share(blocks, sharers);
    at::parallel_for(0, sharers, 1, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t s = first; s < last; ++s) stream_->run_shared(tiles, xp, rows, op, f32, epilogue, other, share, s, kernel.prefetch);
    });
  }

#if REFDEC_HAVE_ONEDNN
  dnnl::matmul::primitive_desc primitive_desc(std::int64_t rows, const dnnl::memory::desc& weights, bool f32, Epilogue epilogue) const {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src({rows, in_}, dt::bf16, tag::ab), dst({rows, out_}, f32 ? dt::f32 : dt::bf16, tag::ab);
    dnnl::post_ops ops;
    if (epilogue == Epilogue::kAccumulate) ops.append_sum(1.0f);
    if (epilogue == Epilogue::kSilu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);  // x sigmoid(1 x)
    if (epilogue == Epilogue::kMultiply) ops.append_binary(dnnl::algorithm::binary_mul, {{rows, out_}, dt::bf16, tag::ab});
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, torch_detail::onednn_engine());
  }

  // A primitive is specialised to its row count (runtime row counts fall back to oneDNN's
  // reference kernel), and creating one costs about 80 µs: each is made once and kept.
  dnnl::matmul kernel_for(std::int64_t rows, bool f32, Epilogue epilogue) const {
    const std::lock_guard lock(kernels_->mutex);
    auto& by_rows = kernels_->by_rows;
    if (static_cast<std::int64_t>(by_rows.size()) <= rows) by_rows.resize(static_cast<std::size_t>(rows) + 1);
    auto& slot = by_rows[static_cast<std::size_t>(rows)][(f32 ? kEpilogues : 0) + static_cast<std::size_t>(epilogue)];
    if (!slot) slot.emplace(primitive_desc(rows, packed_desc_, f32, epilogue));
    return *slot;  // a copy of the handle: the slot may move when another thread grows by_rows
  }

  static constexpr std::size_t kEpilogues = 4;
  struct Kernels {
    std::mutex mutex;
    std::vector<std::array<std::optional<dnnl::matmul>, 2 * kEpilogues>> by_rows;  // [rows][f32 * kEpilogues + epilogue]
  };
  dnnl::memory::desc packed_desc_;
  std::unique_ptr<Kernels> kernels_ = std::make_unique<Kernels>();
#endif
  std::int64_t in_ = 0, out_ = 0;
  PackedBackend backend_ = PackedBackend::kStream;
  at::ScalarType dtype_ = at::kBFloat16;
  TilesByRows tiles_;
  std::unique_ptr<const StreamLinear> stream_;  // the streaming backend's packed weight and kernel
  HugePageBuffer packed_;                       // the weight in oneDNN's layout
};

REFDEC_TORCH_NAMESPACE_END
