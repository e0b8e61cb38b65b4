// The backward tests' comparison: max |got - want| / max |want| over the
// elements (a NaN in `got` counts as infinite error; an all-zero `want`
// compares the absolute error).
#ifndef PEJIT_TESTS_RUNTIME_GRADIENTERROR_H
#define PEJIT_TESTS_RUNTIME_GRADIENTERROR_H

#include "pejit/reference/Tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pejit::testing {

inline double gradientError(const std::vector<float> &got, const std::vector<double> &want) {
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < want.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(want[n]));
    maxErr = std::max(maxErr, std::isnan(got[n]) ? std::numeric_limits<double>::infinity()
                                                 : std::fabs(got[n] - want[n]));
  }
  return maxRef == 0 ? maxErr : maxErr / maxRef;
}

inline double gradientError(const std::vector<float> &got, const ref::Tensor &want) {
  return gradientError(got, want.data);
}

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_GRADIENTERROR_H
