// The float64 reference gradients of linear attention
// (LinearAttentionGrad.h) against five-point central differences of the
// float64 forward (LinearAttention.h), for L = Σ dO ∘ O with fresh random
// inputs: max-norm relative error ≤ 1e-6 (FiniteDifferences.h). Every
// feature map (elu + 1, relu, identity, softmax_keys), causal or not with
// sq < skv, GQA, and RoPE in either placement (its rotation and adjoint
// from Rope.h at drawn position ids). Once checked here, these gradients
// are the oracle for the linear attention backward kernels.
#include "pejit/reference/LinearAttentionGrad.h"
#include "pejit/reference/Rope.h"

#include "FiniteDifferences.h"
#include "RandomInputs.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

namespace pejit::test {
namespace {

using ref::FeatureMap;
using ref::LinearAttentionOptions;

TEST(LinearAttentionGrad, EveryMapMaskAndRopePlacementMatchesFiniteDifferences) {
  PEJIT_SEEDED_RNG(rng);
  const std::pair<FeatureMap, const char *> maps[] = {{FeatureMap::EluPlusOne, "elu_plus_one"},
                                                      {FeatureMap::Relu, "relu"},
                                                      {FeatureMap::Identity, "identity"},
                                                      {FeatureMap::SoftmaxKeys, "softmax_keys"}};
  ref::RopeConfig rope;
  rope.theta = 100.0;
  for (const auto &entry : maps)
    for (bool causal : {false, true})
      for (int placement = 0; placement < 3; ++placement) { // none, before phi, on numerator
        const FeatureMap map = entry.first;
        const char *mapName = entry.second;
        const bool smooth = map == FeatureMap::Identity || map == FeatureMap::SoftmaxKeys;
        if (map == FeatureMap::SoftmaxKeys && placement == 2)
          continue; // softmax_keys has no denominator to keep unrotated
        SCOPED_TRACE(std::string(mapName) + (causal ? ", causal" : "") +
                     (placement == 0   ? ""
                      : placement == 1 ? ", rope before the feature map"
                                       : ", rope on the numerator"));
        const PositionIds queryPositions = rng.positions({5}, 0, 40);
        const PositionIds keyPositions = rng.positions({7}, 0, 40);
        // relu has a kink at 0 (and elu + 1 a jump in its second
        // derivative): a five-point difference of step 1e-4 across it is
        // not the derivative, so Q and K are drawn until every value the
        // map reads (rotated first when RoPE comes before it) is 1e-3 from 0.
        auto awayFromKink = [&](std::vector<int64_t> shape, const PositionIds &ids) {
          Tensor x = rng.tensor(shape);
          while (!smooth) {
            Tensor read = placement == 1 ? ref::applyRope(rope, x, ids, 40) : x;
            if (std::all_of(read.data.begin(), read.data.end(),
                            [](double value) { return std::fabs(value) >= 1e-3; }))
              break;
            x = rng.tensor(shape);
          }
          return x;
        };
        // A denominator near 0 (relu features that barely overlap) makes
        // the gradient huge and the difference's higher terms with it:
        // draws where some row's is under 0.05 are redrawn.
        auto smallestDenominator = [&](const Tensor &q, const Tensor &k) {
          Tensor fq = placement == 1 ? ref::applyRope(rope, q, queryPositions, 40) : q;
          Tensor fk = placement == 1 ? ref::applyRope(rope, k, keyPositions, 40) : k;
          double smallest = INFINITY;
          for (int64_t b = 0; b < 2; ++b)
            for (int64_t h = 0; h < 4; ++h)
              for (int64_t i = 0; i < 5; ++i) {
                int64_t visible = causal ? std::clamp<int64_t>(i + 3, 0, 7) : 7;
                double den = 0;
                for (int64_t j = 0; j < visible; ++j)
                  for (int64_t c = 0; c < 6; ++c)
                    den += ref::featureMap(map, fq.at(b, h, i, c)) *
                           ref::featureMap(map, fk.at(b, h / 2, j, c));
                smallest = std::min(smallest, den);
              }
          return smallest;
        };
        Tensor q, k;
        do {
          q = awayFromKink({2, 4, 5, 6}, queryPositions);
          k = awayFromKink({2, 2, 7, 6}, keyPositions);
        } while (!smooth && smallestDenominator(q, k) < 0.05);
        Tensor v = rng.tensor({2, 2, 7, 3}), dOut = rng.tensor({2, 4, 5, 3});
        LinearAttentionOptions options;
        options.map = map;
        options.causal = causal;
        options.ropeOnNumerator = placement == 2;
        options.algorithm = LinearAttentionOptions::Algorithm::Direct;
        std::function<void(Tensor &, bool)> rotate, rotateBack;
        if (placement > 0) {
          rotate = [&](Tensor &x, bool isKey) {
            x = ref::applyRope(rope, x, isKey ? keyPositions : queryPositions, 40);
          };
          rotateBack = [&](Tensor &g, bool isKey) {
            g = ref::applyRopeBackward(rope, g, g, isKey ? keyPositions : queryPositions, 40).dx;
          };
        }
        auto loss = [&] { return lossOf(ref::linearAttention(q, k, v, options, rotate), dOut); };
        ref::LinearAttentionGradients grads =
            ref::linearAttentionBackward(q, k, v, dOut, options, rotate, rotateBack);
        EXPECT_TRUE(matchesFiniteDifferences(q.data, loss, grads.dq.data)) << "dq";
        EXPECT_TRUE(matchesFiniteDifferences(k.data, loss, grads.dk.data)) << "dk";
        EXPECT_TRUE(matchesFiniteDifferences(v.data, loss, grads.dv.data)) << "dv";
      }
}

// A row that sees no key (causal, sq > skv) and a row whose denominator is
// 0 (relu of all-negative features) give zeros and no gradient: never NaN.
TEST(LinearAttentionGrad, EmptyRowsAndZeroDenominatorsGiveZeroGradients) {
  PEJIT_SEEDED_RNG(rng);
  Tensor q = rng.tensor({1, 1, 6, 4}), k = rng.tensor({1, 1, 4, 4}), v = rng.tensor({1, 1, 4, 3}),
         dOut = rng.tensor({1, 1, 6, 3});
  for (int64_t c = 0; c < 4; ++c)
    q.at(0, 0, 5, c) = -1.0 - c; // relu(q_5) = 0: a zero denominator
  // Rows 2 to 4 see keys through channel 0 (a denominator > 0).
  for (int64_t i = 2; i < 5; ++i)
    q.at(0, 0, i, 0) = 0.5;
  for (int64_t j = 0; j < 4; ++j)
    k.at(0, 0, j, 0) = 0.5;
  LinearAttentionOptions options;
  options.map = FeatureMap::Relu;
  options.causal = true; // rows 0 and 1 see no key (sq - skv = 2)
  ref::LinearAttentionGradients grads =
      ref::linearAttentionBackward(q, k, v, dOut, options, nullptr, nullptr);
  for (int64_t i : {0, 1, 5})
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(grads.dq.at(0, 0, i, c), 0.0) << "row " << i;
  for (double x : grads.dk.data)
    EXPECT_TRUE(std::isfinite(x));
  auto loss = [&] { return lossOf(ref::linearAttention(q, k, v, options, nullptr), dOut); };
  EXPECT_TRUE(matchesFiniteDifferences(v.data, loss, grads.dv.data)) << "dv";
}

} // namespace
} // namespace pejit::test
