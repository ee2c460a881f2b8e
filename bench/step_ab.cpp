// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-step-ab (built and run by bench/step_ab.sh): the model's verification step under two
// revisions of the headers in one process, alternated step by step (ab_pairs.hpp).
// Usage: step_ab SHAPE CONTEXT PAIRS TOKENS...

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ab_pairs.hpp"

extern "C" void base_init(const char* shape, int context, int largest_step);
extern "C" double base_step(int tokens);
extern "C" void head_init(const char* shape, int context, int largest_step);
extern "C" double head_step(int tokens);

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s SHAPE CONTEXT PAIRS TOKENS...\n", argv[0]);
    return 2;
  }
  const std::string shape = argv[1];
  const int context = std::atoi(argv[2]), pairs = std::atoi(argv[3]);
  std::vector<int> sizes;
  for (int i = 4; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (context < 1 || pairs < 1 || std::any_of(sizes.begin(), sizes.end(), [](int n) { return n < 1; })) {
    std::fprintf(stderr, "%s: CONTEXT, PAIRS and TOKENS must be positive\n", argv[0]);
    return 2;
  }
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));  // as refdec-speed-bench
  const int largest = *std::max_element(sizes.begin(), sizes.end());
  base_init(shape.c_str(), context, largest);
  head_init(shape.c_str(), context, largest);
  std::printf(
      "%s, context %d, %d pairs per size, %d threads\n\n| tokens per step | base ms | head ms | head / base (median of pairs) "
      "|\n|---|---|---|---|\n",
      shape.c_str(), context, pairs, at::get_num_threads());
  for (const int n : sizes) {
    const auto m = refdec_bench::alternate(
        pairs, [&] { return base_step(n); }, [&] { return head_step(n); });
    std::printf("| %d | %.2f | %.2f | %.3f |\n", n, 1e3 * m.base, 1e3 * m.head, m.ratio);
  }
}
