// The x86 ISA families (docs/isa.md): names, the flags each needs, the
// host's best, PEJIT_X86_ISA and its errors, and one kernel compiled for
// every family the host has, each against the float64 reference.
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "tests/runtime/GuardPages.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

using namespace pejit;
using namespace pejit::testing;

namespace {

/// Sets PEJIT_X86_ISA for one scope, then restores what was there.
class ScopedIsaVariable {
public:
  explicit ScopedIsaVariable(const char *value) {
    if (const char *old = std::getenv("PEJIT_X86_ISA"))
      saved_ = old;
    if (value)
      setenv("PEJIT_X86_ISA", value, 1);
    else
      unsetenv("PEJIT_X86_ISA");
  }
  ~ScopedIsaVariable() {
    if (saved_)
      setenv("PEJIT_X86_ISA", saved_->c_str(), 1);
    else
      unsetenv("PEJIT_X86_ISA");
  }

private:
  std::optional<std::string> saved_;
};

std::function<bool(const std::string &)> hostWith(std::set<std::string> flags) {
  return [flags](const std::string &flag) { return flags.count(flag) > 0; };
}

TEST(X86Isa, NamesParseBackAndUnknownNamesAreNamed) {
  for (X86Isa isa : allX86Isas())
    EXPECT_EQ(parseX86Isa(x86IsaName(isa)), isa);
  std::string error;
  EXPECT_FALSE(parseX86Isa("avx1024", &error));
  EXPECT_NE(error.find("'avx1024'"), std::string::npos) << error;
  EXPECT_NE(error.find("avx512_bf16"), std::string::npos) << error;
}

TEST(X86Isa, TheBestBuiltFamilyIsPickedAndMissingFlagsAreNamed) {
  auto zen3 = hostWith({"avx2", "fma"});
  auto skylake = hostWith({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"});
  auto zen4 =
      hostWith({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512bf16"});
  EXPECT_EQ(bestX86Isa(zen3), X86Isa::Avx2);
  EXPECT_EQ(bestX86Isa(skylake), X86Isa::Avx512);
  EXPECT_EQ(bestX86Isa(zen4),
            x86IsaBuilt(X86Isa::Avx512Bf16) ? X86Isa::Avx512Bf16 : X86Isa::Avx512);
  EXPECT_EQ(bestX86Isa(zen4, /*bf16ProductsFaster=*/false), X86Isa::Avx512);
  EXPECT_EQ(x86IsaMissingFlag(X86Isa::Avx512, zen3), "avx512f");
  EXPECT_EQ(x86IsaMissingFlag(X86Isa::Avx512Bf16, skylake), "avx512bf16");
  EXPECT_EQ(x86IsaMissingFlag(X86Isa::Amx, zen4), "amx-tile");
  EXPECT_EQ(x86IsaMissingFlag(X86Isa::Avx512, skylake), "");
  EXPECT_EQ(x86IsaLanes(X86Isa::Avx2), 8);
  EXPECT_EQ(x86IsaLanes(X86Isa::Avx512), 16);
}

TEST(X86Isa, TheVariableForcesAFamilyAndEveryBadValueIsAClearError) {
  {
    ScopedIsaVariable forced("avx2");
    Expected<X86Isa> isa = resolveX86Isa();
    ASSERT_TRUE(isa) << isa.error();
    EXPECT_EQ(*isa, X86Isa::Avx2);
  }
  {
    ScopedIsaVariable forced("avx1024");
    Expected<X86Isa> isa = resolveX86Isa();
    ASSERT_FALSE(isa);
    EXPECT_NE(isa.error().find("PEJIT_X86_ISA"), std::string::npos) << isa.error();
  }
  for (X86Isa family : allX86Isas()) {
    ScopedIsaVariable forced(x86IsaName(family));
    Expected<X86Isa> isa = resolveX86Isa();
    std::string missing = x86IsaMissingFlag(family, hostHasCpuFeature);
    if (!x86IsaBuilt(family)) {
      ASSERT_FALSE(isa);
      EXPECT_NE(isa.error().find("no kernels yet"), std::string::npos) << isa.error();
    } else if (!missing.empty()) {
      ASSERT_FALSE(isa);
      EXPECT_NE(isa.error().find("needs the CPU flag " + missing), std::string::npos)
          << isa.error();
    } else {
      ASSERT_TRUE(isa) << isa.error();
      EXPECT_EQ(*isa, family);
    }
  }
}

// One fused kernel per family the host has (RoPE, causal, GQA, a partial
// last query tile), each checked against the float64 reference, and each
// with the family and lanes it says. The numerics matrix runs under each
// family through scripts/test.sh (PEJIT_X86_ISA per run).
TEST(X86Isa, EveryFamilyTheHostHasComputesTheSameAttention) {
  const Shape shape{2, 4, 2, 77, 131, 64, 64};
  for (X86Isa family : allX86Isas()) {
    if (!x86IsaBuilt(family))
      continue;
    if (std::string problem = x86IsaProblemOnHost(family); !problem.empty()) {
      std::printf("note: skipped: %s\n", problem.c_str());
      continue;
    }
    SCOPED_TRACE(x86IsaName(family));
    Case c;
    c.spec.rope = ref::RopeConfig{};
    c.spec.causal = true;
    c.shape = shape;
    c.tiles.isa = family;
    Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(c.spec, shape), c.tiles);
    ASSERT_TRUE(kernel) << kernel.error();
    EXPECT_EQ(kernel->isa(), family);
    EXPECT_EQ(kernel->lanes(), x86IsaLanes(family));
    Expected<std::string> tiled = kernel->ir("tiled");
    ASSERT_TRUE(tiled) << tiled.error();
    EXPECT_NE(tiled->find(std::string("isa = \"") + x86IsaName(family) + "\""), std::string::npos);
    expectMatches(c);
  }
}

} // namespace

namespace {

uint16_t bf16Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float bf16Value(uint16_t half) {
  uint32_t bits = static_cast<uint32_t>(half) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

/// Runs `kernel` (case c, bf16 inputs and output) on fresh random bf16
/// values, each input and the output placed against an inaccessible page,
/// the output poisoned with NaNs; returns max |out - ref| / max |ref|
/// against the float64 reference on the same bf16 values.
double bf16RelativeError(const Case &c, X86Kernel &kernel) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Shape &s = c.shape;
  ref::Tensor q = randomTensor({s.batch, s.queryHeads, s.querySeq, s.headDim}, engine);
  ref::Tensor k = randomTensor({s.batch, s.kvHeads, s.keySeq, s.headDim}, engine);
  ref::Tensor v = randomTensor({s.batch, s.kvHeads, s.keySeq, s.valueDim}, engine);
  std::vector<GuardedBuffer> buffers;
  for (ref::Tensor *t : {&q, &k, &v}) {
    buffers.emplace_back(t->data.size() * 2);
    uint16_t *half = buffers.back().as<uint16_t>();
    for (size_t i = 0; i < t->data.size(); ++i) {
      half[i] = bf16Bits(static_cast<float>(t->data[i]));
      t->data[i] = bf16Value(half[i]); // the reference sees the bf16 values
    }
  }
  std::vector<int64_t> outShape = {s.batch, s.queryHeads, s.querySeq, s.valueDim};
  size_t outCount = s.batch * s.queryHeads * s.querySeq * s.valueDim;
  GuardedBuffer out(outCount * 2);
  std::fill_n(out.as<uint16_t>(), outCount, uint16_t(0x7fc0));
  Status status = kernel.run({{buffers[0].data(), DType::BF16, q.shape, {}},
                              {buffers[1].data(), DType::BF16, k.shape, {}},
                              {buffers[2].data(), DType::BF16, v.shape, {}}},
                             {out.data(), DType::BF16, outShape, {}});
  EXPECT_TRUE(status) << status.message();
  std::string error;
  ref::Tensor expected = referenceOutput(c, q, k, v, {}, {}, {}, error);
  EXPECT_EQ(error, "");
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < outCount; ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    double got = bf16Value(out.as<uint16_t>()[i]);
    maxErr = std::max(maxErr, std::isnan(got) ? INFINITY : std::fabs(got - expected.data[i]));
  }
  return maxErr / std::max(maxRef, 1e-30);
}

/// Compiles case c (bf16, c.tiles.isa set), expects its tiled IR to hold
/// `marker` exactly in avx512_bf16 (the bf16 products' code), and returns
/// bf16RelativeError (infinity when it did not compile).
double bf16CaseError(const Case &c, const std::string &marker) {
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(c.spec, c.shape), c.tiles);
  EXPECT_TRUE(kernel) << kernel.error();
  if (!kernel)
    return INFINITY;
  Expected<std::string> tiled = kernel->ir("tiled");
  EXPECT_TRUE(tiled) << tiled.error();
  if (!tiled)
    return INFINITY;
  EXPECT_EQ(tiled->find(marker) != std::string::npos, c.tiles.isa == X86Isa::Avx512Bf16) << marker;
  return bf16RelativeError(c, *kernel);
}

// bf16 inputs in every family the host has: in avx512_bf16 with bf16
// products (Q' scale, K' and P rounded to bf16, vdpbf16ps), else f32
// products. RoPE, causal with and without a window, GQA, key counts that
// make odd first and last keys of P . V's pair loop, a partial query tile;
// each against the float64 reference on the same bf16 values, at 2e-2 of
// max |ref| (docs/semantics.md: the bf16 products' error, and the bf16
// output's). Windows 0 and 1 leave no key that all 6 rows of a P . V block
// see, so the pair loop is empty and its bounds clamp to an odd key (the
// fuzzer's find: a key counted twice there).
TEST(X86Isa, Bf16InputsInEveryFamilyMatchTheReference) {
  for (X86Isa family : allX86Isas()) {
    if (!x86IsaBuilt(family) || !x86IsaProblemOnHost(family).empty())
      continue;
    SCOPED_TRACE(x86IsaName(family));
    for (std::optional<int64_t> window : {std::optional<int64_t>(), std::optional<int64_t>(37),
                                          std::optional<int64_t>(0), std::optional<int64_t>(1)}) {
      Case c;
      c.spec.rope = ref::RopeConfig{};
      c.spec.causal = true;
      c.spec.window = window;
      c.spec.dtype = DType::BF16;
      c.shape = Shape{1, 4, 2, 101, 163, 64, 64};
      c.tiles.isa = family;
      EXPECT_LE(bf16CaseError(c, "products = \"bf16\""), 2e-2)
          << "window " << (window ? std::to_string(*window) : "none");
    }
  }
}

// Grouped decode steps (sq = 1) with bf16 inputs in every family the host
// has. In avx512_bf16, where no QK transform changes K (here RoPE on the
// query only: the cache holds K rotated), the step reads K and V as bf16
// with keys in lanes (@pejit_decode_tile_bf16); elsewhere it widens them.
// Groups of 2, 4, 6 and 8 heads (a second block of 4), head dims 32 to
// 128, value widths 32 to 128 (96: a pass of 64 columns and one of 32),
// 1 key to several key tiles (partial last tiles, odd key counts),
// windows (0, and one starting mid-tile), ALiBi and a softcap (the score
// hooks per head and key), a batch. 2e-2 of max |ref|, as above.
TEST(X86Isa, Bf16GroupedDecodeInEveryFamilyMatchesTheReference) {
  struct DecodeCase {
    Shape shape;
    std::optional<int64_t> window;
    bool alibi = false;
    std::optional<double> softcap;
  };
  const std::vector<DecodeCase> cases = {
      {{1, 32, 8, 1, 2048, 128, 128}}, {{1, 8, 4, 1, 37, 64, 32}},
      {{2, 12, 2, 1, 77, 32, 64}, 10}, {{1, 16, 2, 1, 301, 64, 64}, std::nullopt, true, 5.0},
      {{1, 8, 2, 1, 130, 64, 64}, 0},  {{1, 28, 4, 1, 333, 128, 128}, 150},
      {{1, 4, 2, 1, 1, 64, 64}},       {{1, 8, 2, 1, 150, 64, 96}, 33},
  };
  for (X86Isa family : allX86Isas()) {
    if (!x86IsaBuilt(family) || !x86IsaProblemOnHost(family).empty())
      continue;
    SCOPED_TRACE(x86IsaName(family));
    for (const DecodeCase &d : cases) {
      SCOPED_TRACE(d.shape.str());
      Case c;
      c.spec.rope = ref::RopeConfig{};
      c.spec.ropeOnKey = false;
      c.spec.causal = true;
      c.spec.window = d.window;
      c.spec.softcap = d.softcap;
      if (d.alibi)
        c.spec.alibi = AlibiSpec{d.shape.queryHeads};
      c.spec.dtype = DType::BF16;
      c.shape = d.shape;
      c.tiles.isa = family;
      EXPECT_LE(bf16CaseError(c, "call @pejit_decode_tile_bf16"), 2e-2);
    }
  }
}

} // namespace
