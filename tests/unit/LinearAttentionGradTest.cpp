// The float64 reference gradients of linear attention
// (LinearAttentionGrad.h) against five-point central differences of the
// float64 forward (LinearAttention.h), for L = Σ dO ∘ O with fresh random
// inputs: max-norm relative error ≤ 1e-6 (FiniteDifferences.h). Every
// differentiable feature map (elu + 1, relu, identity), causal or not with
// sq < skv, GQA, and RoPE in either placement (its rotation and adjoint
// from Rope.h at drawn position ids). Once checked here, these gradients
// are the oracle for the linear attention backward kernels.
#include "pejit/reference/LinearAttentionGrad.h"
#include "pejit/reference/Rope.h"

#include "FiniteDifferences.h"
#include "RandomInputs.h"

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
                                                      {FeatureMap::Identity, "identity"}};
  ref::RopeConfig rope;
  rope.theta = 100.0;
  for (auto [map, mapName] : maps)
    for (bool causal : {false, true})
      for (int placement = 0; placement < 3; ++placement) { // none, before phi, on numerator
        SCOPED_TRACE(std::string(mapName) + (causal ? ", causal" : "") +
                     (placement == 0   ? ""
                      : placement == 1 ? ", rope before the feature map"
                                       : ", rope on the numerator"));
        Tensor q = rng.tensor({2, 4, 5, 6}), k = rng.tensor({2, 2, 7, 6}),
               v = rng.tensor({2, 2, 7, 3}), dOut = rng.tensor({2, 4, 5, 3});
        const PositionIds queryPositions = rng.positions({5}, 0, 40);
        const PositionIds keyPositions = rng.positions({7}, 0, 40);
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
