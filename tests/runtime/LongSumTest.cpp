// P . V over very many keys (docs/limits.md, "Summation"): the x86 kernels
// sum each key tile's P V from 0 and add it to the running output once per
// tile (blocked summation), so the output's rounding error grows with
// BN + skv / BN, not with skv. 262,144 identical keys (every P equal) and
// V drawn from [0, 1): the output is V's mean, computed here in float64.
// Through the one-row item (MHA decode), the grouped decode item (GQA)
// and the 6-row blocks (a few query rows); V rows random, or all one row
// (the output is then that row: the worst case for a running sum).
// Tolerance: the bound of
// docs/limits.md, 2 (BN + ceil(skv / BN)) 2^-24 relative, at skv = 262144
// and the default BN = 96: 3.4e-4 (the kernels before blocking: 3.9e-3).
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr int64_t kKeys = int64_t(1) << 18, kDim = 64, kKeyTile = 96;
const double kBound = 2.0 * (kKeyTile + (kKeys + kKeyTile - 1) / kKeyTile) * std::ldexp(1.0, -24);

double meanError(int64_t hq, int64_t sq, bool identicalValues) {
  std::mt19937 &engine = rng(nullptr);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> q(hq * sq * kDim), k(kKeys * kDim), v(kKeys * kDim);
  for (float &x : q)
    x = unit(engine) - 0.5f;
  std::vector<float> key(kDim);
  for (float &x : key)
    x = unit(engine) - 0.5f;
  for (int64_t j = 0; j < kKeys; ++j)
    std::copy(key.begin(), key.end(), k.begin() + j * kDim);
  for (float &x : v)
    x = unit(engine);
  if (identicalValues) // every V row the first one: the output is that row
    for (int64_t j = 1; j < kKeys; ++j)
      std::copy(v.begin(), v.begin() + kDim, v.begin() + j * kDim);
  std::vector<double> mean(kDim, 0.0);
  for (int64_t j = 0; j < kKeys; ++j)
    for (int64_t e = 0; e < kDim; ++e)
      mean[e] += v[j * kDim + e];
  for (double &m : mean)
    m /= kKeys;
  AttentionSpec spec; // no mask: every row sees every key, all with one P
  Shape shape{1, hq, 1, sq, kKeys, kDim, kDim};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(spec, shape));
  if (!kernel) {
    ADD_FAILURE() << kernel.error();
    return INFINITY;
  }
  std::vector<float> out(hq * sq * kDim, std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run({{q.data(), DType::F32, {1, hq, sq, kDim}, {}},
                               {k.data(), DType::F32, {1, 1, kKeys, kDim}, {}},
                               {v.data(), DType::F32, {1, 1, kKeys, kDim}, {}}},
                              {out.data(), DType::F32, {1, hq, sq, kDim}, {}});
  if (!status) {
    ADD_FAILURE() << status.message();
    return INFINITY;
  }
  double worst = 0;
  for (int64_t r = 0; r < hq * sq; ++r)
    for (int64_t e = 0; e < kDim; ++e)
      worst = std::max(worst, std::fabs(out[r * kDim + e] - mean[e]) / mean[e]);
  return worst;
}

TEST(LongSum, OutputOverAQuarterMillionKeysStaysWithinTheBlockedBound) {
  for (auto [hq, sq, path] : {std::tuple<int64_t, int64_t, const char *>{1, 1, "one row"},
                              {4, 1, "grouped decode"},
                              {1, 7, "6-row blocks"}}) {
    for (bool identical : {false, true}) {
      SCOPED_TRACE(std::string(path) + (identical ? ", identical V rows" : ", random V rows"));
      double error = meanError(hq, sq, identical);
      if (std::getenv("PEJIT_TEST_VERBOSE"))
        std::printf("  %s%s: max relative error %.3g\n", path, identical ? " (identical V)" : "",
                    error);
      EXPECT_LE(error, kBound);
    }
  }
}

} // namespace
