// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Logistic regression learned online, one example at a time: the probability of a binary outcome
// from a few dense features and any number of hashed indicator features (token ids, pairs of
// them), for drafters that learn which of their candidates the target accepts.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of OnlineLogistic.
struct OnlineLogisticOptions {
  /// AdaGrad's base step: each weight moves by rate * gradient / sqrt(sum of its squared
  /// gradients). Finite, positive.
  double learning_rate = 0.05;
  /// The hashed features share 2^hash_bits weights, in [1, 24].
  std::size_t hash_bits = 18;
  /// Bound on |w . x|, so that no estimate is ever exactly 0 or 1 (and logs stay finite).
  double max_logit = 12.0;
};

/// p(y = 1 | x) = sigmoid(w . x) over x = (dense features, hashed indicators), learned by
/// AdaGrad on the log loss, one example per update(). The dense weights start where the caller
/// puts them (e.g. 1 on the logit of an existing estimate and 0 elsewhere, so that the model
/// starts as that estimate and learns a correction); the hashed weights start at 0. Not for
/// sharing across threads while it learns.
class OnlineLogistic {
 public:
  /// A model over `initial_dense.size()` dense features, starting from those weights.
  explicit OnlineLogistic(std::vector<double> initial_dense, OnlineLogisticOptions options = {})
      : opt_(options), dense_(std::move(initial_dense)) {
    REFDEC_CHECK(!dense_.empty(), "online logistic: needs at least one dense feature");
    for (const double w : dense_) REFDEC_CHECK(std::isfinite(w), "online logistic: an initial weight is not finite: " << w);
    REFDEC_CHECK(std::isfinite(opt_.learning_rate) && opt_.learning_rate > 0.0,
                 "online logistic: learning_rate must be finite and positive, got " << opt_.learning_rate);
    REFDEC_CHECK(opt_.hash_bits >= 1 && opt_.hash_bits <= 24, "online logistic: hash_bits must be in [1, 24], got " << opt_.hash_bits);
    REFDEC_CHECK(std::isfinite(opt_.max_logit) && opt_.max_logit > 0.0,
                 "online logistic: max_logit must be finite and positive, got " << opt_.max_logit);
    dense_g2_.assign(dense_.size(), 0.0);
    hashed_.assign(std::size_t{1} << opt_.hash_bits, 0.0f);
    hashed_g2_.assign(hashed_.size(), 0.0f);
    mask_ = hashed_.size() - 1;
  }

  /// The number of dense features.
  std::size_t dense_size() const { return dense_.size(); }
  /// The dense weights as learned so far.
  std::span<const double> dense_weights() const { return dense_; }
  /// Examples learned from.
  std::int64_t updates() const { return updates_; }

  /// w . x, clamped to +-max_logit (0 if it is NaN, from a non-finite feature). `dense`:
  /// [dense_size()]; `hashed`: feature hashes (any 64-bit values: each is reduced to a weight
  /// slot; see hash()).
  double logit(std::span<const float> dense, std::span<const std::uint64_t> hashed) const {
    REFDEC_CHECK(dense.size() == dense_.size(), "online logistic: got " << dense.size() << " dense features for " << dense_.size());
    double z = 0.0;
    for (std::size_t i = 0; i < dense.size(); ++i) z += dense_[i] * static_cast<double>(dense[i]);
    for (const std::uint64_t h : hashed) z += hashed_[h & mask_];
    if (std::isnan(z)) return 0.0;
    return std::clamp(z, -opt_.max_logit, opt_.max_logit);
  }

  /// sigmoid(logit(dense, hashed)).
  double predict(std::span<const float> dense, std::span<const std::uint64_t> hashed) const { return sigmoid(logit(dense, hashed)); }

  /// One AdaGrad step on the log loss of `label` for this example. A weight whose gradient is not
  /// finite (its feature is not) is left alone, so one bad example cannot poison the model.
  void update(std::span<const float> dense, std::span<const std::uint64_t> hashed, bool label) {
    const double g = predict(dense, hashed) - (label ? 1.0 : 0.0);  // d loss / d logit
    for (std::size_t i = 0; i < dense.size(); ++i) {
      const double gi = g * static_cast<double>(dense[i]);
      if (gi == 0.0 || !std::isfinite(gi)) continue;
      dense_g2_[i] += gi * gi;
      dense_[i] -= opt_.learning_rate * gi / std::sqrt(dense_g2_[i]);
    }
    for (const std::uint64_t h : hashed) {
      const std::size_t k = h & mask_;
      hashed_g2_[k] += static_cast<float>(g * g);
      hashed_[k] -= static_cast<float>(opt_.learning_rate * g / std::sqrt(static_cast<double>(hashed_g2_[k])));
    }
    ++updates_;
  }

  /// A well-mixed 64-bit hash of a feature kind and up to two values (SplitMix64's finaliser).
  static std::uint64_t hash(std::uint64_t kind, std::uint64_t a, std::uint64_t b = 0) {
    std::uint64_t x = kind * 0x9E3779B97F4A7C15ull ^ (a + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^
                      (b + 0x85157AF5ull) * 0x94D049BB133111EBull;
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  /// 1 / (1 + e^-z).
  static double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
  /// log(p / (1 - p)), p clamped into [1e-6, 1 - 1e-6].
  static double logit_of(double p) {
    const double q = std::clamp(p, 1e-6, 1.0 - 1e-6);
    return std::log(q / (1.0 - q));
  }

 private:
  OnlineLogisticOptions opt_;
  std::vector<double> dense_;     // [dense features] weights
  std::vector<double> dense_g2_;  // [dense features] AdaGrad's sums of squared gradients
  std::vector<float> hashed_;     // [2^hash_bits] weights of the hashed features
  std::vector<float> hashed_g2_;  // [2^hash_bits]
  std::size_t mask_ = 0;
  std::int64_t updates_ = 0;
};

REFDEC_NAMESPACE_END
