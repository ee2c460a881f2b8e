// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What the CUDA kernel tests share: device memory holding a copy of a host vector.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "refdec/cuda/check.cuh"

namespace refdec_test {

/// Device memory holding a copy of a host vector; copied back with download().
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host) : size_(host.size()) {
    REFDEC_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(size_, 1) * sizeof(T)));
    REFDEC_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit DeviceBuffer(std::size_t size) : DeviceBuffer(std::vector<T>(size)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }
  T* get() const { return data_; }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    REFDEC_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  std::size_t size_;
  T* data_ = nullptr;
};

}  // namespace refdec_test
