// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The core headers compile with nvcc, and the one walk (walk() with ChoiceArray, through
// greedy_verify_sequence() over a step plan) gives the same result on host and device.
// Exits 77 (reported as skipped by CTest) when no CUDA device is present.

#include <cstdio>
#include <vector>

#include "refdec/core/draft_tree.hpp"
#include "refdec/core/step_device.hpp"
#include "refdec/core/step_plan.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/cuda/check.cuh"

using refdec::Token;

__global__ void verify_kernel(const std::int32_t* indptr, const std::int32_t* num_nodes, const Token* tokens,
                              const std::int32_t* first_child, const std::int32_t* next_sibling, const Token* target,
                              std::int32_t rows, std::int32_t* kept, std::int32_t* num_kept, Token* bonus) {
  refdec::greedy_verify_sequence(indptr, num_nodes, tokens, first_child, next_sibling, target, rows, 0, kept, num_kept,
                                 bonus);
}

template <typename T>
T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  REFDEC_CUDA_CHECK(cudaMalloc(&device, host.size() * sizeof(T)));
  REFDEC_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

template <typename T>
std::vector<T> to_host(const T* device, std::size_t size) {
  std::vector<T> host(size);
  REFDEC_CUDA_CHECK(cudaMemcpy(host.data(), device, size * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

int main() {
  refdec::DraftTree tree;
  tree.insert(std::vector<Token>{5, 6, 7}, 2.0f);
  tree.insert(std::vector<Token>{5, 8, 9}, 1.0f);
  const std::vector<refdec::LinearTree> trees = {tree.linearize(1, 16)};
  const std::vector<std::int64_t> lengths = {4};
  refdec::StepPlan plan;
  refdec::plan_step(trees, {}, lengths, 0, plan);
  const std::int32_t rows = plan.rows();
  std::vector<Token> target(static_cast<std::size_t>(rows), 0);
  for (std::size_t i = 0; i < target.size(); ++i) {  // the target model continues 1 -> 5 -> 8 -> 9 -> 3
    const Token t = plan.tokens[i];
    target[i] = t == 1 ? 5 : t == 5 ? 8 : t == 8 ? 9 : t == 9 ? 3 : 0;
  }
  std::vector<std::int32_t> kept(static_cast<std::size_t>(rows), -1), num_kept(1, 0);
  std::vector<Token> bonus(1, -1);
  refdec::greedy_verify_sequence(plan.indptr.data(), plan.num_nodes.data(), plan.tokens.data(),
                                 plan.first_child.data(), plan.next_sibling.data(), target.data(), rows, 0, kept.data(),
                                 num_kept.data(), bonus.data());
  if (num_kept[0] != 4 || bonus[0] != 3) {
    std::printf("FAILED: the host keeps %d rows with bonus %d, expected 4 rows and bonus 3\n", num_kept[0], bonus[0]);
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device; the host walk passed\n");
    return 77;
  }
  std::int32_t* d_indptr = to_device(plan.indptr);
  std::int32_t* d_num_nodes = to_device(plan.num_nodes);
  Token* d_tokens = to_device(plan.tokens);
  std::int32_t* d_first = to_device(plan.first_child);
  std::int32_t* d_next = to_device(plan.next_sibling);
  Token* d_target = to_device(target);
  std::int32_t* d_kept = to_device(std::vector<std::int32_t>(static_cast<std::size_t>(rows), -1));
  std::int32_t* d_num_kept = to_device(std::vector<std::int32_t>(1, 0));
  Token* d_bonus = to_device(std::vector<Token>(1, -1));
  verify_kernel<<<1, 1>>>(d_indptr, d_num_nodes, d_tokens, d_first, d_next, d_target, rows, d_kept, d_num_kept, d_bonus);
  REFDEC_CUDA_CHECK(cudaGetLastError());
  const bool same = to_host(d_kept, kept.size()) == kept && to_host(d_num_kept, 1) == num_kept &&
                    to_host(d_bonus, 1) == bonus;
  for (void* p : {static_cast<void*>(d_indptr), static_cast<void*>(d_num_nodes), static_cast<void*>(d_tokens),
                  static_cast<void*>(d_first), static_cast<void*>(d_next), static_cast<void*>(d_target),
                  static_cast<void*>(d_kept), static_cast<void*>(d_num_kept), static_cast<void*>(d_bonus)})
    cudaFree(p);
  if (!same) {
    std::printf("FAILED: device walk disagrees with the host walk\n");
    return 1;
  }
  std::printf("PASSED: host and device walks agree\n");
  return 0;
}
