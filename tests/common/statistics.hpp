// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Goodness-of-fit statistics for distribution tests: the chi-square test of observed counts
// against an exact law, and total variation distance. Header-only and torch-free.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

namespace refdec_test {

/// The regularised upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a), for a > 0,
/// x >= 0: by its power series below x = a + 1 and by its continued fraction (modified Lentz)
/// above, where each converges fast (Numerical Recipes, section 6.2).
inline double regularized_gamma_q(double a, double x) {
  if (!(a > 0.0) || !(x >= 0.0)) throw std::invalid_argument("regularized_gamma_q: needs a > 0 and x >= 0");
  if (x == 0.0) return 1.0;
  const double log_prefactor = a * std::log(x) - x - std::lgamma(a);
  constexpr int kMaxIterations = 10000;
  constexpr double kEpsilon = 1e-15;
  if (x < a + 1.0) {  // P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < kMaxIterations && std::abs(term) > std::abs(sum) * kEpsilon; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefactor);
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / kTiny, d = 1.0 / b, h = d;
  for (int n = 1; n < kMaxIterations; ++n) {
    const double an = -n * (n - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1.0) < kEpsilon) break;
  }
  return std::exp(log_prefactor) * h;
}

/// P(X >= statistic) for X chi-square distributed with `dof` degrees of freedom.
inline double chi_square_p_value(double statistic, double dof) {
  return regularized_gamma_q(dof / 2.0, statistic / 2.0);
}

/// The outcome of a chi-square goodness-of-fit test.
struct ChiSquare {
  double statistic = 0.0;
  int dof = 0;           // bins after pooling, minus one
  double p_value = 1.0;  // 0 when an outcome of probability 0 was observed
};

/// Pearson's chi-square test of `observed` counts against the exact law `expected`
/// (probabilities summing to 1, one per outcome). Outcomes whose expected count is below
/// `min_expected` are pooled into one bin so that the chi-square approximation holds; an observed
/// outcome of probability 0 makes the p-value 0.
inline ChiSquare chi_square_test(std::span<const double> expected, std::span<const std::int64_t> observed,
                                 double min_expected = 5.0) {
  if (expected.size() != observed.size()) throw std::invalid_argument("chi_square_test: size mismatch");
  std::int64_t n = 0;
  for (const std::int64_t o : observed) n += o;
  ChiSquare r;
  double pooled_expected = 0.0, pooled_observed = 0.0;
  int bins = 0;
  bool impossible = false;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i] * static_cast<double>(n);
    const auto o = static_cast<double>(observed[i]);
    if (expected[i] <= 0.0) {
      impossible = impossible || o > 0.0;
    } else if (e < min_expected) {
      pooled_expected += e;
      pooled_observed += o;
    } else {
      r.statistic += (o - e) * (o - e) / e;
      ++bins;
    }
  }
  if (pooled_expected > 0.0) {
    r.statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++bins;
  }
  r.dof = bins - 1;
  if (impossible) {
    r.p_value = 0.0;
  } else if (r.dof > 0) {
    r.p_value = chi_square_p_value(r.statistic, r.dof);
  }
  return r;
}

/// Total variation distance between the law `p` and the empirical law of `observed` counts:
/// half the L1 distance, in [0, 1].
inline double total_variation(std::span<const double> p, std::span<const std::int64_t> observed) {
  if (p.size() != observed.size()) throw std::invalid_argument("total_variation: size mismatch");
  std::int64_t n = 0;
  for (const std::int64_t o : observed) n += o;
  double sum = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) sum += std::abs(p[i] - static_cast<double>(observed[i]) / static_cast<double>(n));
  return sum / 2.0;
}

/// Pearson's chi-square test of homogeneity: are the counts `a` and `b` (one per outcome, same
/// outcomes) samples of one law? Outcomes whose expected count in either sample is below
/// `min_expected` are pooled into one bin.
inline ChiSquare chi_square_two_sample(std::span<const std::int64_t> a, std::span<const std::int64_t> b,
                                       double min_expected = 5.0) {
  if (a.size() != b.size()) throw std::invalid_argument("chi_square_two_sample: size mismatch");
  double na = 0.0, nb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    na += static_cast<double>(a[i]);
    nb += static_cast<double>(b[i]);
  }
  ChiSquare r;
  if (na == 0.0 || nb == 0.0) return r;
  const double n = na + nb;
  // Adds one bin's contribution: observed (oa, ob) against expectations from the pooled law.
  const auto add = [&](double oa, double ob) {
    const double ea = (oa + ob) * na / n, eb = (oa + ob) * nb / n;
    r.statistic += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
    ++r.dof;
  };
  double pooled_a = 0.0, pooled_b = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto oa = static_cast<double>(a[i]), ob = static_cast<double>(b[i]);
    if (std::min(oa + ob, n - oa - ob) == 0.0) continue;
    if ((oa + ob) * std::min(na, nb) / n < min_expected) {
      pooled_a += oa;
      pooled_b += ob;
    } else {
      add(oa, ob);
    }
  }
  if (pooled_a + pooled_b > 0.0) add(pooled_a, pooled_b);
  r.dof -= 1;  // bins minus one (the two sample sizes are fixed)
  if (r.dof > 0) r.p_value = chi_square_p_value(r.statistic, r.dof);
  return r;
}

}  // namespace refdec_test
