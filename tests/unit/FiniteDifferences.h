//===- FiniteDifferences.h - gradients against finite differences ---------===//
//
// The float64 reference gradients' oracle: five-point central differences
// of a float64 loss L = Σ dO ∘ O in every entry of a parameter, compared
// with the analytic gradient by max-norm relative error (≤ 1e-6; step 1e-4
// leaves ~1e-12 absolute). Shared by AttentionGradTest and
// LinearAttentionGradTest.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_TESTS_UNIT_FINITEDIFFERENCES_H
#define PEJIT_TESTS_UNIT_FINITEDIFFERENCES_H

#include "pejit/reference/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace pejit::test {

inline constexpr double kTolerance = 1e-6;
inline constexpr double kStep = 1e-4;

inline double lossOf(const ref::Tensor &out, const ref::Tensor &dOut) {
  double sum = 0.0;
  for (size_t n = 0; n < out.data.size(); ++n)
    sum += out.data[n] * dOut.data[n];
  return sum;
}

/// Central differences of `loss` in every finite entry of `param` against
/// `analytic` (same length): max |fd − analytic| ≤ kTolerance · max |analytic|.
inline ::testing::AssertionResult matchesFiniteDifferences(std::vector<double> &param,
                                                           const std::function<double()> &loss,
                                                           const std::vector<double> &analytic) {
  if (param.size() != analytic.size())
    return ::testing::AssertionFailure() << "gradient has " << analytic.size() << " entries, "
                                         << "the parameter " << param.size();
  double worst = 0.0, largest = 0.0;
  size_t worstAt = 0;
  double worstFd = 0.0;
  for (size_t n = 0; n < param.size(); ++n) {
    if (!std::isfinite(analytic[n]))
      return ::testing::AssertionFailure() << "entry " << n << " is " << analytic[n];
    largest = std::max(largest, std::fabs(analytic[n]));
    if (!std::isfinite(param[n]))
      continue; // a −inf bias entry has no derivative
    // The five-point central difference: its error is O(step^4) (the
    // three-point one's O(step^2) exceeded 1e-6 of a gradient that
    // cancelled down to 3e-4, a RoPE position scale's).
    const double saved = param[n];
    auto at = [&](double offset) {
      param[n] = saved + offset;
      return loss();
    };
    const double fd =
        (8 * (at(kStep) - at(-kStep)) - (at(2 * kStep) - at(-2 * kStep))) / (12 * kStep);
    param[n] = saved;
    if (std::fabs(fd - analytic[n]) > worst)
      worst = std::fabs(fd - analytic[n]), worstAt = n, worstFd = fd;
  }
  if (largest == 0.0)
    return ::testing::AssertionFailure() << "the gradient is all zeros: nothing was checked";
  if (worst > kTolerance * largest)
    return ::testing::AssertionFailure()
           << "entry " << worstAt << ": analytic " << analytic[worstAt] << ", finite difference "
           << worstFd << " (relative error " << worst / largest << " > " << kTolerance << ")";
  return ::testing::AssertionSuccess();
}

} // namespace pejit::test

#endif // PEJIT_TESTS_UNIT_FINITEDIFFERENCES_H
