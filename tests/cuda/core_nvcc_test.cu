// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The core headers compile with nvcc, and greedy_walk gives the same result on host and device.
// Exits 77 (reported as skipped by CTest) when no CUDA device is present.

#include <cstdio>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/core/greedy_accept.hpp"
#include "refdec/cuda/check.cuh"

using refdec::Token;

__global__ void walk_kernel(const Token* tokens, const int* first_child, const int* next_sibling, const Token* target,
                            int n, int* path, int* count) {
  *count = refdec::greedy_walk(tokens, first_child, next_sibling, target, n, path);
}

int main() {
  refdec::DraftTree tree;
  tree.insert(std::vector<Token>{5, 6, 7}, 2.0f);
  tree.insert(std::vector<Token>{5, 8, 9}, 1.0f);
  const auto lin = tree.linearize(1, 16);
  std::vector<Token> target(static_cast<std::size_t>(lin.size()), 0);
  for (int i = 0; i < lin.size(); ++i) {  // the target model continues 1 -> 5 -> 8 -> 9
    const Token t = lin.tokens[static_cast<std::size_t>(i)];
    target[static_cast<std::size_t>(i)] = t == 1 ? 5 : t == 5 ? 8 : t == 8 ? 9 : 0;
  }
  std::vector<int> path(static_cast<std::size_t>(lin.size()));
  const int host = refdec::greedy_walk(lin.tokens.data(), lin.first_child.data(), lin.next_sibling.data(),
                                       target.data(), lin.size(), path.data());
  if (host != 3) {
    std::printf("FAILED: host walk accepted %d tokens, expected 3\n", host);
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device; the host walk passed\n");
    return 77;
  }
  const int n = lin.size();
  Token *d_tokens, *d_target;
  int *d_first, *d_next, *d_path, *d_count;
  REFDEC_CUDA_CHECK(cudaMalloc(&d_tokens, n * sizeof(Token)));
  REFDEC_CUDA_CHECK(cudaMalloc(&d_target, n * sizeof(Token)));
  REFDEC_CUDA_CHECK(cudaMalloc(&d_first, n * sizeof(int)));
  REFDEC_CUDA_CHECK(cudaMalloc(&d_next, n * sizeof(int)));
  REFDEC_CUDA_CHECK(cudaMalloc(&d_path, n * sizeof(int)));
  REFDEC_CUDA_CHECK(cudaMalloc(&d_count, sizeof(int)));
  REFDEC_CUDA_CHECK(cudaMemcpy(d_tokens, lin.tokens.data(), n * sizeof(Token), cudaMemcpyHostToDevice));
  REFDEC_CUDA_CHECK(cudaMemcpy(d_target, target.data(), n * sizeof(Token), cudaMemcpyHostToDevice));
  REFDEC_CUDA_CHECK(cudaMemcpy(d_first, lin.first_child.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  REFDEC_CUDA_CHECK(cudaMemcpy(d_next, lin.next_sibling.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  walk_kernel<<<1, 1>>>(d_tokens, d_first, d_next, d_target, n, d_path, d_count);
  REFDEC_CUDA_CHECK(cudaGetLastError());
  int device_count = -1;
  std::vector<int> device_path(static_cast<std::size_t>(n));
  REFDEC_CUDA_CHECK(cudaMemcpy(&device_count, d_count, sizeof(int), cudaMemcpyDeviceToHost));
  REFDEC_CUDA_CHECK(cudaMemcpy(device_path.data(), d_path, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (void* p : {static_cast<void*>(d_tokens), static_cast<void*>(d_target), static_cast<void*>(d_first),
                  static_cast<void*>(d_next), static_cast<void*>(d_path), static_cast<void*>(d_count)})
    cudaFree(p);
  for (int i = 0; i < host; ++i)
    if (device_path[static_cast<std::size_t>(i)] != path[static_cast<std::size_t>(i)]) device_count = -1;
  if (device_count != host) {
    std::printf("FAILED: device walk disagrees with the host walk\n");
    return 1;
  }
  std::printf("PASSED: host and device walks agree\n");
  return 0;
}
