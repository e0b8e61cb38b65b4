// The float64 linear attention's two forms agree: the direct one (each
// row's sums over its keys) and the prefix sums that make long sequences
// checkable (pejit/reference/LinearAttention.h), for every normalized and the
// identity map, causal with sq < skv and sq = skv and not, with and without
// a carried state and a RoPE on the numerator. Fresh random inputs; the
// forms differ only by float64 rounding: |a - b| <= 1e-12 + 1e-10 |b|.
#include "pejit/reference/LinearAttention.h"
#include "tests/unit/RandomInputs.h"

#include <cmath>

namespace pejit::test {
namespace {

using Algorithm = ref::LinearAttentionOptions::Algorithm;

TEST(LinearAttentionReference, PrefixSumsEqualTheDirectSums) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  // A rotation of channel pairs by 0.1 * row: enough to make the numerator
  // differ from the denominator.
  auto rotate = [](Tensor &x, bool) {
    for (int64_t b = 0; b < x.dim(0); ++b)
      for (int64_t h = 0; h < x.dim(1); ++h)
        for (int64_t s = 0; s < x.dim(2); ++s)
          for (int64_t c = 0; c + 1 < x.dim(3); c += 2) {
            double a = x.at(b, h, s, c), e = x.at(b, h, s, c + 1), t = 0.1 * s;
            x.at(b, h, s, c) = a * std::cos(t) - e * std::sin(t);
            x.at(b, h, s, c + 1) = e * std::cos(t) + a * std::sin(t);
          }
  };
  for (ref::FeatureMap map :
       {ref::FeatureMap::EluPlusOne, ref::FeatureMap::Relu, ref::FeatureMap::Identity})
    for (bool causal : {false, true})
      for (int64_t sq : {1, 29, 53})
        for (bool withState : {false, true})
          for (bool onNumerator : {false, true}) {
            Tensor q = rng.tensor({2, 4, sq, 8}), k = rng.tensor({2, 2, 53, 8}),
                   v = rng.tensor({2, 2, 53, 6}), state = rng.tensor({2, 4, 8, 8}, 0.0, 1.0);
            ref::LinearAttentionOptions options;
            options.map = map;
            options.causal = causal;
            options.ropeOnNumerator = onNumerator;
            options.state = withState ? &state : nullptr;
            options.algorithm = Algorithm::Direct;
            Tensor direct = ref::linearAttention(q, k, v, options, rotate);
            options.algorithm = Algorithm::PrefixSums;
            Tensor prefix = ref::linearAttention(q, k, v, options, rotate);
            EXPECT_TRUE(tensorsNear(direct, prefix, 1e-12, 1e-10))
                << "map " << int(map) << (causal ? " causal" : "") << " sq " << sq
                << (withState ? " state" : "") << (onNumerator ? " on numerator" : "");
          }
}

} // namespace
} // namespace pejit::test
