// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The alternation refdec-step-ab and refdec-kernel-ab time two revisions by: on a machine whose
// memory bandwidth moves by tens of percent within a minute, two runs of a benchmark cannot
// resolve a change of a few percent; runs of the two versions taken in turn see the same machine,
// so the median of their ratios can.

#include <algorithm>
#include <vector>

namespace refdec_bench {

/// The median of `v` (the upper one of an even count); `v` not empty.
inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// Medians of `pairs` runs of each side and of their ratios (head / base).
struct PairedMedians {
  double base, head, ratio;
};

/// Runs `base` and `head` (each returning its seconds) once untimed, then `pairs` times each, which
/// of them goes first alternating so that neither always runs right after the other.
template <typename Base, typename Head>
PairedMedians alternate(int pairs, Base base, Head head) {
  base(), head();  // untimed: primitives made, caches warm
  std::vector<double> b, h, ratio;
  for (int p = 0; p < pairs; ++p) {
    double tb = 0, th = 0;
    if (p % 2 == 0) {
      tb = base(), th = head();
    } else {
      th = head(), tb = base();
    }
    b.push_back(tb), h.push_back(th), ratio.push_back(th / tb);
  }
  return {median(b), median(h), median(ratio)};
}

}  // namespace refdec_bench
