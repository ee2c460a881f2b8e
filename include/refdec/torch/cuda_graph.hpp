// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One step of libtorch work captured in a CUDA graph and replayed: the launches of a whole
// decoding step leave the host's critical path (static_llama.hpp). Needs a CUDA build of libtorch:
// REFDEC_TORCH_CUDA is 1 where refdec's CMake found one (it then links libtorch's CUDA part);
// elsewhere StepGraph::available() is false and capture() throws.

#include <ATen/ATen.h>

#include <functional>

#include "refdec/core/config.hpp"
#include "refdec/torch/abi.hpp"

#ifndef REFDEC_TORCH_CUDA
#define REFDEC_TORCH_CUDA 0
#endif

#if REFDEC_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>
#endif

REFDEC_TORCH_NAMESPACE_BEGIN

/// A memory pool that several StepGraphs share: their steps run one at a time, and each step's
/// output is read before the next runs, so their scratch memory can be the same.
struct GraphPool {
  std::pair<unsigned long long, unsigned long long> id{0, 0};  ///< libtorch's MempoolId_t; {0, 0}: none yet
};

/// A function of static input tensors captured once in a CUDA graph and replayed after that.
class StepGraph {
 public:
  /// Whether this build can capture CUDA graphs (a CUDA build of libtorch, REFDEC_TORCH_CUDA).
  static constexpr bool available() { return REFDEC_TORCH_CUDA != 0; }

  /// Runs `step` twice on a side stream (cuBLAS handles, workspaces and the allocator's blocks are
  /// made outside the capture), then captures a third run on that stream and returns what that
  /// run returned: tensors of the graph's pool, which every replay() rewrites in place. The
  /// current stream waits for the side stream afterwards. `step` must read its inputs only from
  /// tensors that keep their addresses, never synchronise with the host and never allocate
  /// outside libtorch's allocator. Throws refdec::ArgumentError in a build without CUDA graphs.
  at::Tensor capture(const std::function<at::Tensor()>& step, at::Device device, GraphPool& pool) {
#if REFDEC_TORCH_CUDA
    REFDEC_CHECK(device.is_cuda(), "StepGraph: CUDA graphs capture work on a CUDA device, not " << device.str());
    const c10::cuda::CUDAGuard device_guard(device);
    const auto current = at::cuda::getCurrentCUDAStream();
    const auto side = at::cuda::getStreamFromPool(false, device.index());
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side);
    at::Tensor out;
    {
      const c10::cuda::CUDAStreamGuard stream_guard(side);
      for (int i = 0; i < 2; ++i) (void)step();
      if (pool.id.first == 0 && pool.id.second == 0) {
        const auto handle = at::cuda::graph_pool_handle();
        pool.id = {handle.first, handle.second};
      }
#if TORCH_VERSION_MAJOR >= 2
      // Thread-local: a drafting thread's own CUDA calls during the capture are not part of it.
      graph_.capture_begin({pool.id.first, pool.id.second}, cudaStreamCaptureModeThreadLocal);
#else
      graph_.capture_begin({pool.id.first, pool.id.second});
#endif
      out = step();
      graph_.capture_end();
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
    captured_ = true;
    return out;
#else
    (void)step, (void)pool;
    REFDEC_CHECK(false,
                 "StepGraph: this build of refdec has no CUDA graphs (libtorch without CUDA); cannot capture a step on " << device.str());
    return {};
#endif
  }

  /// Whether capture() has succeeded.
  bool captured() const { return captured_; }

  /// Launches the captured work on the current stream (asynchronously).
  void replay() {
    REFDEC_CHECK(captured_, "StepGraph: replay() before capture()");
#if REFDEC_TORCH_CUDA
    graph_.replay();
#endif
  }

 private:
#if REFDEC_TORCH_CUDA
  at::cuda::CUDAGraph graph_;
#endif
  bool captured_ = false;
};

REFDEC_TORCH_NAMESPACE_END
