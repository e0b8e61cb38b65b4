//===- RandomInputs.h - seeded random inputs and comparisons for tests ----===//
//
// Every property test draws fresh inputs from a std::random_device seed; the
// seed is attached to failures with SCOPED_TRACE so a failure can be replayed
// by setting PEJIT_TEST_SEED=<seed>.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_TESTS_UNIT_RANDOMINPUTS_H
#define PEJIT_TESTS_UNIT_RANDOMINPUTS_H

#include "pejit/reference/Tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace pejit::test {

using ref::PositionIds;
using ref::Tensor;

class SeededRng {
public:
  SeededRng() : seed_(pickSeed()), engine_(seed_) {}

  uint32_t seed() const { return seed_; }
  std::string trace() const {
    return "random seed " + std::to_string(seed_) +
           " (replay with PEJIT_TEST_SEED=" + std::to_string(seed_) + ")";
  }

  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  /// Uniform integer in [lo, hi] (inclusive).
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  Tensor tensor(std::vector<int64_t> shape, double lo = -1.0, double hi = 1.0) {
    Tensor t(std::move(shape));
    for (double &value : t.data)
      value = uniform(lo, hi);
    return t;
  }
  /// Position ids of the given shape with values in [lo, hi].
  PositionIds positions(std::vector<int64_t> shape, int64_t lo, int64_t hi) {
    int64_t count = 1;
    for (int64_t extent : shape)
      count *= extent;
    std::vector<int64_t> data(static_cast<size_t>(count));
    for (int64_t &p : data)
      p = integer(lo, hi);
    return PositionIds(std::move(shape), std::move(data));
  }

private:
  static uint32_t pickSeed() {
    if (const char *fixed = std::getenv("PEJIT_TEST_SEED"))
      return static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10));
    return std::random_device{}();
  }

  uint32_t seed_;
  std::mt19937 engine_;
};

/// Declares `name` and attaches its seed to every failure in this scope.
#define PEJIT_SEEDED_RNG(name)                                                                     \
  ::pejit::test::SeededRng name;                                                                   \
  SCOPED_TRACE(name.trace())

/// Same shape and |a − b| <= absTol + relTol·|b| elementwise; names the first
/// mismatch.
inline ::testing::AssertionResult tensorsNear(const Tensor &a, const Tensor &b, double absTol,
                                              double relTol = 0.0) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << "shapes differ: " << ref::shapeToString(a.shape)
                                         << " vs " << ref::shapeToString(b.shape);
  for (size_t n = 0; n < a.data.size(); ++n) {
    double tol = absTol + relTol * std::fabs(b.data[n]);
    if (!(std::fabs(a.data[n] - b.data[n]) <= tol))
      return ::testing::AssertionFailure() << "flat element " << n << ": " << a.data[n] << " vs "
                                           << b.data[n] << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Euclidean norm of x[b, h, t, from:to].
inline double rowNorm(const Tensor &x, int64_t b, int64_t h, int64_t t, int64_t from, int64_t to) {
  double sum = 0.0;
  for (int64_t c = from; c < to; ++c)
    sum += x.at(b, h, t, c) * x.at(b, h, t, c);
  return std::sqrt(sum);
}

} // namespace pejit::test

#endif // PEJIT_TESTS_UNIT_RANDOMINPUTS_H
