// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec-kernel-ab (built and run by bench/kernel_ab.sh): a CPU kernel under two revisions of the
// headers in one process, alternated pass by pass (ab_pairs.hpp), as refdec-step-ab does for the
// whole step.
// Usage: kernel_ab KERNEL SHAPE ROUNDS TILES PREFETCH CONTEXT ROWS...

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ab_pairs.hpp"

extern "C" int base_init(const char* kernel, const char* shape, int largest, const char* tiles, const char* prefetch, int context);
extern "C" double base_run(int rows);
extern "C" int head_init(const char* kernel, const char* shape, int largest, const char* tiles, const char* prefetch, int context);
extern "C" double head_run(int rows);

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s KERNEL SHAPE ROUNDS TILES PREFETCH CONTEXT ROWS...\n", argv[0]);
    return 2;
  }
  const int rounds = std::atoi(argv[3]), context = std::atoi(argv[6]);
  std::vector<int> sizes;
  for (int i = 7; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (rounds < 1 || context < 0 || std::any_of(sizes.begin(), sizes.end(), [](int n) { return n < 1 || n > 64; })) {
    std::fprintf(stderr, "%s: ROUNDS must be positive, CONTEXT at least 0 and ROWS 1-64\n", argv[0]);
    return 2;
  }
  const int largest = *std::max_element(sizes.begin(), sizes.end());
  if (const int rc = base_init(argv[1], argv[2], largest, argv[4], argv[5], context); rc != 0) return rc;
  if (const int rc = head_init(argv[1], argv[2], largest, argv[4], argv[5], context); rc != 0) return rc;
  std::printf("%d rounds per row count, %d threads\n\n| rows | base ms | head ms | head / base (median of rounds) |\n|---|---|---|---|\n",
              rounds, omp_get_max_threads());
  for (const int n : sizes) {
    const auto m = refdec_bench::alternate(
        rounds, [&] { return base_run(n); }, [&] { return head_run(n); });
    std::printf("| %d | %.3f | %.3f | %.3f |\n", n, 1e3 * m.base, 1e3 * m.head, m.ratio);
  }
}
