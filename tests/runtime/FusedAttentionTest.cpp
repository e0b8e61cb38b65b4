// Numerics of the fused x86 kernels against the float64 reference, fresh
// random inputs per run, output poisoned with NaN before each run.
// Tolerance (f32 kernel): max |out - ref| <= 1e-4 * max |ref|.
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

ref::RopeConfig rope(ref::RopeLayout layout = ref::RopeLayout::Half, double theta = 10000.0,
                     int64_t rotaryDim = 0) {
  ref::RopeConfig config;
  config.layout = layout;
  config.theta = theta;
  config.rotaryDim = rotaryDim;
  return config;
}

Case shaped(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d) {
  Case c;
  c.shape = {b, hq, hkv, sq, skv, d, d};
  return c;
}

//===----------------------------------------------------------------------===//
// Lengths, tails, heads, head dims, masks (plain attention and RoPE)
//===----------------------------------------------------------------------===//

struct LengthCase {
  int64_t sq, skv;
  bool causal;
};

class Lengths : public ::testing::TestWithParam<LengthCase> {};

TEST_P(Lengths, RopeAttentionMatchesReference) {
  LengthCase p = GetParam();
  Case c = shaped(1, 4, 2, p.sq, p.skv, 64);
  c.spec.rope = rope();
  c.spec.causal = p.causal;
  expectMatches(c);
}

// 1, 7, 63, 64, 65, 257, 1000, and 97, 144, 145 at the default tiles (144 x 96):
// sq < skv (bottom-right causal), sq > skv (rows that see no key: zeros).
INSTANTIATE_TEST_SUITE_P(FusedAttention, Lengths,
                         ::testing::Values(LengthCase{1, 1, false}, LengthCase{7, 7, true},
                                           LengthCase{63, 63, true}, LengthCase{64, 64, false},
                                           LengthCase{65, 65, true}, LengthCase{257, 257, true},
                                           LengthCase{1000, 1000, true},
                                           LengthCase{1000, 1000, false}, LengthCase{7, 257, true},
                                           LengthCase{65, 1000, true}, LengthCase{257, 63, true},
                                           LengthCase{257, 63, false}, LengthCase{1, 1000, false},
                                           LengthCase{63, 7, true}, LengthCase{145, 145, true},
                                           LengthCase{144, 97, false}));

TEST(FusedAttention, HeadDims) {
  for (int64_t d : {64, 96, 128}) {
    Case c = shaped(1, 2, 2, 65, 130, d);
    c.spec.rope = rope();
    c.spec.causal = true;
    expectMatches(c);
  }
}

TEST(FusedAttention, HeadGroupings) {
  // MHA, MQA (hkv = 1) and GQA, with hq, hkv in {1, 4, 8}.
  for (auto [hq, hkv] : {std::pair<int64_t, int64_t>{1, 1}, {4, 4}, {8, 1}, {8, 4}, {4, 1}}) {
    Case c = shaped(2, hq, hkv, 63, 65, 64);
    c.spec.rope = rope();
    c.spec.causal = true;
    expectMatches(c);
  }
}

TEST(FusedAttention, SlidingWindowAndSoftcap) {
  Case c = shaped(1, 2, 2, 200, 257, 64);
  c.spec.causal = true;
  c.spec.window = 50;
  expectMatches(c);
  c.spec.window.reset();
  c.spec.softcap = 5.0;
  c.spec.scale = 0.5;
  expectMatches(c);
}

// Two-sided (bidirectional local) windows: key j is visible to row i iff
// i + off - left <= j <= i + off + right. Right alone, both, asymmetric,
// with sq < skv and sq > skv, a right window wider than the sequence
// (hides nothing), zero (the diagonal only), and with RoPE.
TEST(FusedAttention, TwoSidedWindows) {
  struct W {
    int64_t sq, skv;
    std::optional<int64_t> left, right;
  };
  for (W w :
       {W{200, 200, std::nullopt, 17}, W{300, 300, 40, 40}, W{150, 400, 5, 90}, W{400, 150, 120, 3},
        W{65, 65, 0, 0}, W{7, 7, std::nullopt, 1000}, W{1, 300, 30, 30}}) {
    for (X86TileConfig tiles : {X86TileConfig{}, X86TileConfig{48, 6}}) {
      Case c = shaped(1, 4, 2, w.sq, w.skv, 64);
      c.spec.window = w.left;
      c.spec.windowRight = w.right;
      c.tiles = tiles;
      SCOPED_TRACE("left " + std::to_string(w.left.value_or(-1)) + " right " +
                   std::to_string(w.right.value_or(-1)));
      expectMatches(c);
    }
  }
  Case c = shaped(2, 4, 4, 129, 129, 64);
  c.spec.rope = rope();
  c.spec.window = 16;
  c.spec.windowRight = 16;
  expectMatches(c);
}

//===----------------------------------------------------------------------===//
// RoPE layouts, partial rotary, positions
//===----------------------------------------------------------------------===//

TEST(FusedAttention, RopeLayouts) {
  for (ref::RopeLayout layout : {ref::RopeLayout::Half, ref::RopeLayout::Interleaved}) {
    for (int64_t rotaryDim : {0, 48}) { // whole head, partial (d/2 of 96)
      Case c = shaped(1, 4, 2, 70, 70, 96);
      c.spec.rope = rope(layout, 10000.0, rotaryDim);
      c.spec.causal = true;
      expectMatches(c);
    }
  }
}

// RoPE on one side only: Q alone (a KV cache written with RoPE, decode and
// prefill) or K alone; explicit positions on the rotated side; dynamic NTK
// takes its length from that side's positions alone.
TEST(FusedAttention, RopeOnOneSide) {
  for (bool onQuery : {true, false}) {
    for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 300}, {70, 70}, {200, 65}}) {
      Case c = shaped(1, 4, 2, sq, skv, 64);
      c.spec.rope = rope(ref::RopeLayout::Interleaved, 500000.0);
      c.spec.ropeOnQuery = onQuery;
      c.spec.ropeOnKey = !onQuery;
      c.spec.causal = true;
      SCOPED_TRACE(onQuery ? "query only" : "key only");
      expectMatches(c);
    }
  }
  // Dynamic NTK on one side: the other side was rotated in another call, at
  // other frequencies once the length passes original_max_position
  // (vLLM#5093). Refused, with the reason.
  for (bool onQuery : {true, false}) {
    Case c = shaped(1, 4, 4, 40, 40, 64);
    c.spec.rope = rope();
    c.spec.rope->scaling.kind = ref::RopeScaling::Kind::DynamicNtk;
    c.spec.rope->scaling.factor = 4.0;
    c.spec.rope->scaling.originalMaxPosition = 32;
    c.spec.ropeOnQuery = onQuery;
    c.spec.ropeOnKey = !onQuery;
    Outcome outcome = runCase(suiteRuntime(), c);
    EXPECT_NE(outcome.error.find("its frequencies follow each call's length"), std::string::npos)
        << outcome.error;
  }
}

// M-RoPE (Qwen2-VL): position ids [3, s] (temporal, height, width), the
// frequency index split into sections that each read one axis; Qwen3-VL's
// interleaved sections; SAM 2's 2-D axial RoPE. Random per-axis positions,
// shared and per batch, half and interleaved, decode, sq < skv, GQA,
// partial rotary dims, and sections of odd sizes (scalar table loop).
TEST(FusedAttention, MRopeSectionsMatchReference) {
  // Axes: M-RoPE sections (consecutive, or Qwen3-VL's interleaved), or
  // SAM 2's 2-D axial RoPE ([2, s] ids, rotary_dim/4 frequencies per axis).
  enum class Axes { Sections, Interleaved, Axial };
  struct M {
    Axes axes;
    std::vector<int64_t> sections;
    ref::RopeLayout layout;
    int64_t rotaryDim, d, sq, skv;
    bool perBatch;
  };
  std::mt19937 &engine = rng(nullptr);
  std::uniform_int_distribution<int64_t> position(0, 5000);
  using L = ref::RopeLayout;
  for (M m : {M{Axes::Sections, {16, 24, 24}, L::Half, 0, 128, 90, 90, false},
              M{Axes::Sections, {8, 12, 12}, L::Interleaved, 0, 64, 70, 70, true},
              M{Axes::Sections, {4, 4}, L::Half, 16, 64, 1, 200, false},
              M{Axes::Sections, {5, 7, 4}, L::Half, 32, 64, 40, 40, false},
              M{Axes::Interleaved, {24, 20, 20}, L::Half, 0, 128, 90, 90, false},
              M{Axes::Interleaved, {4, 6, 6}, L::Interleaved, 0, 32, 33, 65, true},
              M{Axes::Axial, {}, L::Interleaved, 0, 64, 100, 100, false},
              M{Axes::Axial, {}, L::Half, 0, 128, 1, 300, true},
              M{Axes::Axial, {}, L::Interleaved, 32, 64, 65, 65, false}}) {
    Case c = shaped(2, 4, 2, m.sq, m.skv, m.d);
    bool axial = m.axes == Axes::Axial;
    c.spec.rope = rope(m.layout, axial ? 100.0 : 1000000.0, m.rotaryDim);
    c.spec.rope->sections = m.sections;
    c.spec.rope->interleavedSections = m.axes == Axes::Interleaved;
    c.spec.rope->axial = axial;
    c.spec.positionsPerBatch = m.perBatch;
    c.spec.causal = !axial; // ViTs attend both ways
    int64_t rows = m.perBatch ? 2 : 1, axes = ref::ropePositionAxes(*c.spec.rope);
    for (int64_t n = 0; n < axes * rows * m.sq; ++n)
      c.queryPositions.push_back(position(engine));
    for (int64_t n = 0; n < axes * rows * m.skv; ++n)
      c.keyPositions.push_back(position(engine));
    SCOPED_TRACE(std::to_string(axes) + " axes");
    expectMatches(c);
  }
}

TEST(FusedAttention, RopeRotaryDimsNarrowerThanAVector) {
  // rotary_dim 12: 6 frequencies (half) or 12 table entries (interleaved),
  // not multiples of 8 lanes, so the hooks take their scalar path.
  for (ref::RopeLayout layout : {ref::RopeLayout::Half, ref::RopeLayout::Interleaved}) {
    Case c = shaped(1, 2, 2, 33, 33, 64);
    c.spec.rope = rope(layout, 10000.0, 12);
    c.spec.causal = true;
    expectMatches(c);
  }
}

TEST(FusedAttention, ExplicitNonContiguousPositionsPerBatch) {
  Case c = shaped(2, 4, 4, 40, 40, 64);
  c.spec.rope = rope(ref::RopeLayout::Interleaved);
  c.spec.positionsPerBatch = true;
  c.spec.causal = true;
  // Packed sequences / gaps: positions restart and jump; masks still use
  // sequence indices (docs/semantics.md).
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 40; ++s) {
      int64_t position = b == 0 ? (s < 20 ? s : s - 20) : 3 * s + 7;
      c.queryPositions.push_back(position);
      c.keyPositions.push_back(position);
    }
  expectMatches(c);
}

TEST(FusedAttention, KeyCacheWithManyQueryTiles) {
  // Three Q tiles: K is rotated once per call into the key cache
  // (@pejit_prepare) and the items read it. Batch 2 with a position row per
  // batch, GQA 4/2, partial interleaved rotary dims, a 62-row last K tile
  // (350 = 3 * 96 + 62), causal and not. Each case runs twice: the second
  // run reuses the first one's scratch, uncleared.
  for (bool causal : {true, false}) {
    Case c = shaped(2, 4, 2, 300, 350, 64);
    c.spec.rope = rope(ref::RopeLayout::Interleaved, 10000.0, 32);
    c.spec.positionsPerBatch = true;
    c.spec.causal = causal;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t s = 0; s < 300; ++s)
        c.queryPositions.push_back(50 + s + 100 * b);
      for (int64_t s = 0; s < 350; ++s)
        c.keyPositions.push_back(s + 100 * b);
    }
    expectMatches(c);
    expectMatches(c);
    // b * hkv * ceil(350 / 96) = 16 jobs: the cache was used.
    Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(c.spec, c.shape), c.tiles);
    ASSERT_TRUE(kernel) << kernel.error();
    EXPECT_NE(kernel->ir("tiled")->find("prepare_jobs = 16 : i64"), std::string::npos);
  }
}

TEST(FusedAttention, DecodeWithPositionOffset) {
  // One query at position 999 over 1000 cached keys (the default), then the
  // same with explicit shifted positions (a KV cache starting at 5000).
  Case c = shaped(1, 8, 2, 1, 1000, 128);
  c.spec.rope = rope(ref::RopeLayout::Half, 500000.0);
  expectMatches(c);
  c.queryPositions = {5999};
  for (int64_t j = 0; j < 1000; ++j)
    c.keyPositions.push_back(5000 + j);
  expectMatches(c);
}

TEST(FusedAttention, LargePositionsNearOneMillion) {
  // angle = position * inv_freq must be formed without f32 loss (docs/semantics.md).
  Case c = shaped(1, 2, 2, 64, 64, 64);
  c.spec.rope = rope();
  for (int64_t s = 0; s < 64; ++s) {
    c.queryPositions.push_back(1000000 + 17 * s);
    c.keyPositions.push_back(1000000 + 17 * s);
  }
  expectMatches(c);
}

//===----------------------------------------------------------------------===//
// RoPE scalings: each changes only frequencies (and yarn/longrope magnitude)
//===----------------------------------------------------------------------===//

Case scaled(ref::RopeScaling scaling, int64_t seq = 90, int64_t firstPosition = 0) {
  Case c = shaped(1, 2, 2, seq, seq, 64);
  c.spec.rope = rope();
  c.spec.rope->scaling = scaling;
  c.spec.causal = true;
  if (firstPosition)
    for (int64_t s = 0; s < seq; ++s) {
      c.queryPositions.push_back(firstPosition + s);
      c.keyPositions.push_back(firstPosition + s);
    }
  return c;
}

TEST(FusedAttention, RopeScalings) {
  using Kind = ref::RopeScaling::Kind;
  ref::RopeScaling linear{Kind::Linear, 4.0};
  expectMatches(scaled(linear));
  ref::RopeScaling ntk{Kind::Ntk, 4.0};
  expectMatches(scaled(ntk));
  ref::RopeScaling dynamic{Kind::DynamicNtk, 2.0, 64};
  expectMatches(scaled(dynamic, 40));       // max position + 1 <= 64: unscaled
  expectMatches(scaled(dynamic, 90));       // 90 > 64: base grows with seq_len
  expectMatches(scaled(dynamic, 30, 1000)); // offsets count: seq_len = 1030
  ref::RopeScaling yarn{Kind::Yarn, 8.0, 128};
  expectMatches(scaled(yarn));
  yarn.mscale = 1.0;
  yarn.mscaleAllDim = 0.5;
  yarn.truncate = false;
  expectMatches(scaled(yarn));
  ref::RopeScaling llama3{Kind::Llama3, 8.0, 64};
  llama3.lowFreqFactor = 1.0;
  llama3.highFreqFactor = 4.0;
  expectMatches(scaled(llama3, 90, 5000));
}

TEST(FusedAttention, LongRopeSwitchesFactorsWithLength) {
  ref::RopeScaling longrope;
  longrope.kind = ref::RopeScaling::Kind::LongRope;
  longrope.originalMaxPosition = 64;
  longrope.factor = 16.0;
  for (int i = 0; i < 32; ++i) {
    longrope.shortFactor.push_back(1.0 + 0.05 * i);
    longrope.longFactor.push_back(1.0 + 0.5 * i);
  }
  expectMatches(scaled(longrope, 50));  // short factors
  expectMatches(scaled(longrope, 100)); // long factors
}

//===----------------------------------------------------------------------===//
// ALiBi, and RoPE with ALiBi
//===----------------------------------------------------------------------===//

TEST(FusedAttention, AlibiEightAndTwelveHeads) {
  for (int64_t heads : {8, 12}) {
    Case c = shaped(1, heads, heads, 100, 130, 64);
    c.spec.alibi = AlibiSpec{heads, 0, false};
    c.spec.causal = true;
    expectMatches(c);
  }
}

TEST(FusedAttention, AlibiShardSymmetricNonCausal) {
  // Heads [8, 12) of a 12-head model (tensor-parallel shard), |i - j| form.
  Case c = shaped(1, 4, 4, 70, 90, 64);
  c.spec.alibi = AlibiSpec{12, 8, true};
  expectMatches(c);
}

TEST(FusedAttention, RopeAndAlibiTogether) {
  Case c = shaped(2, 12, 4, 65, 130, 64);
  c.spec.rope = rope();
  c.spec.alibi = AlibiSpec{12, 0, false};
  c.spec.causal = true;
  expectMatches(c);
}

TEST(FusedAttention, TileConfigsAgree) {
  for (X86TileConfig tiles :
       {X86TileConfig{48, 6}, X86TileConfig{96, 72}, X86TileConfig{144, 48}}) {
    Case c = shaped(1, 2, 2, 150, 150, 64);
    c.spec.rope = rope();
    c.spec.causal = true;
    c.tiles = tiles;
    expectMatches(c);
  }
}

} // namespace
