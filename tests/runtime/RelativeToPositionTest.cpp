// Score biases measured by position ids (relative_to = position): ALiBi, T5
// and Shaw's terms fused into the x86 kernel, against the float64
// reference, with the packed and left-padded ids HF's position_ids carry.
// Fresh random inputs per run, the output poisoned with NaN. Tolerance (f32
// kernel): max |out - ref| <= 1e-4 * max |ref|.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

/// Two sequences packed into one row of `length` tokens (positions restart
/// at `split`), and, for batch row 1, a left-padded sequence (`pad` pads at
/// position 0, then 0, 1, ...): [2, length] ids.
std::vector<int64_t> packedAndPadded(int64_t length, int64_t split, int64_t pad) {
  std::vector<int64_t> ids;
  for (int64_t t = 0; t < length; ++t)
    ids.push_back(t < split ? t : t - split);
  for (int64_t t = 0; t < length; ++t)
    ids.push_back(std::max<int64_t>(0, t - pad));
  return ids;
}

Case positionCase(std::vector<EncodingSpec> specs, int64_t sq, int64_t skv, bool causal) {
  Case c;
  c.shape = {2, 4, 2, sq, skv, 64, 64};
  for (EncodingSpec &spec : specs)
    c.spec.encodings.push_back(encodings::relativeToPosition(std::move(spec)));
  c.spec.causal = causal;
  c.spec.positionsPerBatch = true;
  c.queryPositions = packedAndPadded(sq, sq / 3, sq / 4);
  c.keyPositions = packedAndPadded(skv, skv / 3, skv / 4);
  c.operandScale = 2.0;
  return c;
}

TEST(RelativeToPosition, AlibiT5AndShawMatchReference) {
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{65, 65}, {300, 300}, {7, 120}})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("sq " + std::to_string(sq) + " skv " + std::to_string(skv));
      expectMatches(positionCase({encodings::alibi(4, 0, /*symmetric=*/!causal)}, sq, skv, causal));
      expectMatches(positionCase({encodings::t5Bias(32, 128, /*bidirectional=*/!causal, 4)}, sq,
                                 skv, causal));
      expectMatches(
          positionCase({encodings::shawKey(8, 64), encodings::shawValue(8, 64)}, sq, skv, causal));
    }
}

// With RoPE on the same ids (fused once: the attention already holds them),
// two biases by position together, and tile configs.
TEST(RelativeToPosition, WithRopeTilesAndTwoBiases) {
  Case c = positionCase({encodings::t5Bias(32, 128, true, 4), encodings::shawValue(4, 64)}, 150,
                        150, false);
  c.spec.rope = ref::RopeConfig{};
  expectMatches(c);
  c = positionCase({encodings::alibi(4, 0, false)}, 200, 200, true);
  for (X86TileConfig tiles : {X86TileConfig{48, 6}, X86TileConfig{96, 48}}) {
    c.tiles = tiles;
    expectMatches(c);
  }
}

// Default ids (none given) make position distances the index distances.
TEST(RelativeToPosition, DefaultPositionsEqualIndexDistances) {
  Case c = positionCase({encodings::t5Bias(32, 128, false, 4)}, 90, 130, true);
  c.queryPositions.clear();
  c.keyPositions.clear();
  expectMatches(c);
}

} // namespace
