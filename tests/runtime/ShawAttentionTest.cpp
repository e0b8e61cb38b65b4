// Shaw's relative key (a^K) and value (a^V) terms fused into the x86
// kernel, alone and together, against the
// float64 reference: fresh random inputs and tables per run, the output
// poisoned with NaN. Tolerance (f32 kernel): max |out - ref| <= 1e-4 *
// max |ref|.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

/// Which Shaw terms a case fuses.
struct Terms {
  bool key = true, value = false;
};

Case shawCase(int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d, int64_t dv, int64_t clip,
              Terms terms) {
  Case c;
  c.shape = {1, hq, hkv, sq, skv, d, dv};
  if (terms.key)
    c.spec.encodings.push_back(encodings::shawKey(clip, d));
  if (terms.value)
    c.spec.encodings.push_back(encodings::shawValue(clip, dv));
  c.operandScale = 2.0;
  return c;
}

// Lengths 1, 7, 65, 300 and 1000, sq < skv and sq > skv, causal and not,
// GQA: a^K alone, and a^V (with a^K when not causal); clip 0, 1, 4 and 16;
// dv != d.
TEST(Shaw, LengthsAndClipsMatchReference) {
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 1},
                         {7, 7},
                         {65, 65},
                         {300, 300},
                         {1000, 1000},
                         {1, 300},
                         {65, 1000},
                         {300, 65}})
    for (bool causal : {false, true})
      for (Terms terms : {Terms{true, false}, Terms{!causal, true}}) {
        if (!sampledCase())
          continue;
        Case c = shawCase(4, 2, sq, skv, 64, 64, 16, terms);
        c.spec.causal = causal;
        expectMatches(c);
      }
  for (int64_t clip : {0, 1, 4}) {
    expectMatches(shawCase(4, 4, 150, 150, 128, 128, clip, Terms{true, false}));
    expectMatches(shawCase(4, 4, 150, 150, 128, 32, clip, Terms{false, true}));
  }
}

// The key term sits inside the scale and before the softcap
// (docs/semantics.md); with two-sided windows, tile configs, RoPE (a^V;
// a^K reads unrotated Q), and a T5 bias and ALiBi after them.
TEST(Shaw, WithSoftcapWindowsTilesRopeAndBiases) {
  for (Terms terms : {Terms{true, false}, Terms{true, true}}) {
    Case c = shawCase(4, 2, 200, 200, 64, 64, 8, terms);
    c.spec.softcap = 3.0;
    c.spec.scale = 0.3;
    expectMatches(c);
    c = shawCase(4, 4, 300, 300, 64, 64, 16, terms);
    c.spec.window = 40;
    c.spec.windowRight = 20;
    for (X86TileConfig tiles : {X86TileConfig{48, 6}, X86TileConfig{96, 48}}) {
      c.tiles = tiles;
      expectMatches(c);
    }
  }
  Case c = shawCase(4, 2, 200, 200, 64, 64, 8, Terms{false, true});
  c.spec.rope = ref::RopeConfig{};
  c.spec.causal = true;
  expectMatches(c);
  c = shawCase(4, 4, 129, 129, 64, 64, 4, Terms{true, true});
  c.spec.encodings.push_back(encodings::t5Bias(32, 128, true, 4));
  c.spec.alibi = AlibiSpec{4, 0, true};
  expectMatches(c);
}

// As a user writes it: pe.relative_key on Q feeding key_term. The kernel
// (fused by pe-fuse-into-attention) against the interpreter on the same
// source, which evaluates the unfused op (ref::relativeKeyTerm) instead.
TEST(Shaw, KeySourceFormFusesAndMatchesTheUnfusedReference) {
  const char *source = R"(
    func.func @shaw(%q: tensor<1x4x90x64xf32>, %k: tensor<1x4x90x64xf32>, %v: tensor<1x4x90x64xf32>, %aK: tensor<9x64xf32>) -> tensor<1x4x90x64xf32> {
      %t = pe.relative_key %q, %aK <clip = 4> : tensor<1x4x90x64xf32>, tensor<9x64xf32> -> tensor<1x4x90x90xf32>
      %o = attn.attention %q, %k, %v key_term(%t : tensor<1x4x90x90xf32>) causal : tensor<1x4x90x64xf32>, tensor<1x4x90x64xf32>, tensor<1x4x90x64xf32> -> tensor<1x4x90x64xf32>
      return %o : tensor<1x4x90x64xf32>
    })";
  expectSourceMatchesInterpreter(source, {"query", "key", "value", "shaw_key_table"});
}

// Per-head tables ([hq, 2k+1, d] and [hq, 2k+1, dv]), each term alone and
// together, with GQA, causal and not.
TEST(Shaw, PerHeadTablesMatchReference) {
  for (auto [key, value] : {std::pair{true, false}, {false, true}, {true, true}})
    for (bool causal : {false, true}) {
      Case c;
      c.shape = {1, 4, 2, 120, 150, 64, 32};
      if (key)
        c.spec.encodings.push_back(encodings::shawKey(8, 64, DType::F32, /*queryHeads=*/4));
      if (value)
        c.spec.encodings.push_back(encodings::shawValue(8, 32, DType::F32, /*queryHeads=*/4));
      c.spec.causal = causal;
      c.operandScale = 2.0;
      expectMatches(c);
    }
}

// As a user writes it: pe.relative_value feeding value_term, fused by
// pe-fuse-into-attention, against the interpreter on the same source, which
// evaluates the unfused op (a materialised [sq, skv, dv] term).
TEST(Shaw, ValueSourceFormFusesAndMatchesTheUnfusedReference) {
  const char *source = R"(
    func.func @shaw(%q: tensor<1x4x90x64xf32>, %k: tensor<1x2x120x64xf32>, %v: tensor<1x2x120x32xf32>, %aV: tensor<9x32xf32>) -> tensor<1x4x90x32xf32> {
      %t = pe.relative_value %aV <clip = 4> : tensor<9x32xf32> -> tensor<90x120x32xf32>
      %o = attn.attention %q, %k, %v value_term(%t : tensor<90x120x32xf32>) causal : tensor<1x4x90x64xf32>, tensor<1x2x120x64xf32>, tensor<1x2x120x32xf32> -> tensor<1x4x90x32xf32>
      return %o : tensor<1x4x90x32xf32>
    })";
  expectSourceMatchesInterpreter(source, {"query", "key", "value", "shaw_value_table"});
}

// The source form with per-head tables: pe.relative_key on [hq, 2k+1, d],
// pe.relative_value on [hq, 2k+1, dv] making a [hq, sq, skv, dv] term.
TEST(Shaw, PerHeadSourceFormFusesAndMatchesTheUnfusedReference) {
  const char *source = R"(
    func.func @shaw(%q: tensor<1x4x40x64xf32>, %k: tensor<1x4x40x64xf32>, %v: tensor<1x4x40x64xf32>, %aK: tensor<4x9x64xf32>, %aV: tensor<4x9x64xf32>) -> tensor<1x4x40x64xf32> {
      %t = pe.relative_key %q, %aK <clip = 4> : tensor<1x4x40x64xf32>, tensor<4x9x64xf32> -> tensor<1x4x40x40xf32>
      %u = pe.relative_value %aV <clip = 4> : tensor<4x9x64xf32> -> tensor<4x40x40x64xf32>
      %o = attn.attention %q, %k, %v key_term(%t : tensor<1x4x40x40xf32>) value_term(%u : tensor<4x40x40x64xf32>) : tensor<1x4x40x64xf32>, tensor<1x4x40x64xf32>, tensor<1x4x40x64xf32> -> tensor<1x4x40x64xf32>
      return %o : tensor<1x4x40x64xf32>
    })";
  expectSourceMatchesInterpreter(source,
                                 {"query", "key", "value", "shaw_key_table", "shaw_value_table"});
}

} // namespace
