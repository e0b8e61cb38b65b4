//===- NpyConvertTest.cpp - f16/bf16 conversions and dtype casts -----------===//
//
// Expected bit patterns come from the IEEE 754 binary16 / bfloat16 layouts,
// written out by hand; decoding is checked exhaustively against the textbook
// formula, and rounding against the nearest representable neighbours.
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/npy/Npy.h"
#include "tests/npy/NpyTestSupport.h"

#include <cmath>
#include <limits>
#include <tuple>

using namespace pejit::npy;
using namespace pejit::npytest;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// binary16 value by definition: (-1)^s · 2^(e-15) · 1.m, or 2^-14 · 0.m.
double f16Formula(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double magnitude = e == 0    ? std::ldexp(m, -24)
                     : e == 31 ? (m ? std::nan("") : HUGE_VAL)
                               : std::ldexp(1024 + m, e - 25);
  return sign ? -magnitude : magnitude;
}

/// Checks that bits (produced for x by a converter with the given decoder)
/// is x rounded to nearest, ties to even: no neighbour is closer, and a tie
/// keeps the even pattern. Works for any finite x within range.
template <class Decode> void expectNearestEven(float x, uint16_t bits, Decode decode) {
  double chosen = decode(bits), error = std::fabs(double(x) - chosen);
  for (int step : {-1, 1}) {
    uint16_t neighbourBits = static_cast<uint16_t>(bits + step);
    // Stepping from ±0 wraps to the other sign; NaN patterns are no values.
    if (((neighbourBits ^ bits) & 0x8000) || std::isnan(decode(neighbourBits)))
      continue;
    double other = std::fabs(double(x) - decode(neighbourBits));
    EXPECT_LE(error, other) << "x=" << x << " bits=" << bits;
    if (error == other) {
      EXPECT_EQ(bits & 1, 0) << "tie not to even: x=" << x << " bits=" << bits;
    }
  }
}

} // namespace

TEST(NpyF16, KnownValuesRoundToNearestEven) {
  const std::pair<float, uint16_t> cases[] = {
      {1.0f, 0x3c00},
      {-2.5f, 0xc100},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7bff},
      {65519.0f, 0x7bff},
      {65520.0f, 0x7c00}, // tie between 65504 (odd) and inf: even wins
      {kInf, 0x7c00},
      {-kInf, 0xfc00},
      {1e6f, 0x7c00},
      {std::ldexp(1.0f, -14), 0x0400},
      {std::ldexp(1.0f, -24), 0x0001}, // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000}, // tie between 0 and 1: 0
      {std::ldexp(3.0f, -25), 0x0002}, // tie between 1 and 2: 2
      {std::ldexp(1.0f, -25) * 1.001f, 0x0001},
      {std::ldexp(1023.0f, -24), 0x03ff},     // largest subnormal
      {std::ldexp(2047.0f, -25), 0x0400},     // tie 0x3ff / 0x400: even
      {1.0f + std::ldexp(1.0f, -11), 0x3c00}, // tie: keep 1.0
      {1.0f + std::ldexp(3.0f, -11), 0x3c02}, // tie: up to even
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 0x3c01},
      {1.0f / 3.0f, 0x3555},
      {std::ldexp(1.0f, -40), 0x0000},
      {floatFromBits(1), 0x0000}, // float subnormal
  };
  for (auto [value, bits] : cases) {
    EXPECT_EQ(floatToF16Bits(value), bits) << "value " << value;
    EXPECT_EQ(floatToF16Bits(-value), bits ^ 0x8000) << "value " << -value;
  }
  uint16_t nan = floatToF16Bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A signalling NaN whose payload sits only in the low bits stays a NaN.
  EXPECT_NE(floatToF16Bits(floatFromBits(0x7f800001)) & 0x03ff, 0);
}

TEST(NpyF16, DecodeMatchesTheFormulaForAllPatterns) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    double expected = f16Formula(static_cast<uint16_t>(h));
    float got = f16BitsToFloat(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      EXPECT_TRUE(std::isnan(f16BitsToFloat(floatToF16Bits(got)))) << h;
      continue;
    }
    ASSERT_EQ(double(got), expected) << "pattern " << h;
    ASSERT_EQ(std::signbit(got), bool(h & 0x8000)) << h;
    ASSERT_EQ(floatToF16Bits(got), h) << "round trip of pattern " << h;
  }
}

TEST(NpyF16, RandomFloatsRoundToTheNearestEvenNeighbour) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  for (int i = 0; i < 200000; ++i) {
    // Exponents around the f16 range, including subnormals and overflow.
    float x = std::ldexp(rng.uniform(1.0f, 2.0f), int(rng.integer(-28, 16)));
    if (rng.bits() & 1)
      x = -x;
    uint16_t bits = floatToF16Bits(x);
    if (std::fabs(x) >= 65520.0f) {
      EXPECT_EQ(bits & 0x7fff, 0x7c00) << x;
      continue;
    }
    expectNearestEven(x, bits, f16Formula);
#ifdef __FLT16_MANT_DIG__
    // The compiler's own conversion is an independent oracle where it exists.
    _Float16 h = static_cast<_Float16>(x);
    uint16_t hb;
    std::memcpy(&hb, &h, sizeof hb);
    ASSERT_EQ(bits, hb) << "x=" << x;
#endif
  }
}

TEST(NpyBf16, KnownValuesRoundToNearestEven) {
  const std::pair<float, uint16_t> cases[] = {
      {1.0f, 0x3f80},
      {-2.5f, 0xc020},
      {0.0f, 0x0000},
      {kInf, 0x7f80},
      {1.0f + std::ldexp(1.0f, -8), 0x3f80}, // tie: keep 1.0
      {1.0f + std::ldexp(3.0f, -8), 0x3f82}, // tie: up to even
      {1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20), 0x3f81},
      {std::numeric_limits<float>::max(), 0x7f80}, // above the last midpoint
      {floatFromBits(0x7f7f0000), 0x7f7f},         // largest finite bf16
      {std::ldexp(1.0f, -133), 0x0001},            // smallest bf16 subnormal
      {std::ldexp(1.0f, -149), 0x0000},            // smallest float: to zero
      {1.0f / 3.0f, 0x3eab},
  };
  for (auto [value, bits] : cases) {
    EXPECT_EQ(floatToBf16Bits(value), bits) << "value " << value;
    EXPECT_EQ(floatToBf16Bits(-value), bits ^ 0x8000) << "value " << -value;
  }
  uint16_t nan = floatToBf16Bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_NE(floatToBf16Bits(floatFromBits(0xff800001)) & 0x007f, 0); // sNaN
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0xff800001)) & 0x8000, 0x8000);
}

TEST(NpyBf16, AllPatternsRoundTripAndRandomFloatsRoundToNearestEven) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = bf16BitsToFloat(static_cast<uint16_t>(b));
    uint32_t expectedBits = b << 16;
    ASSERT_EQ(std::memcmp(&f, &expectedBits, 4), 0) << b;
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToBf16Bits(f), b) << b;
    }
  }
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  auto decode = [](uint16_t b) { return double(bf16BitsToFloat(b)); };
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng.bits();
    float x = floatFromBits(u);
    if (std::isnan(x) || std::isinf(x) || std::fabs(x) > floatFromBits(0x7f7f7fff))
      continue; // NaN/inf, and the overflow band tested above
    expectNearestEven(x, floatToBf16Bits(x), decode);
  }
}

TEST(NpyConvert, ArraysConvertElementwise) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> values(37);
  for (float &v : values)
    v = rng.uniform(-100.0f, 100.0f);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Array a = fromFloat32(values, {37}, dtype);
    ASSERT_EQ(a.bytes.size(), 37 * elementSize(dtype));
    std::vector<float> back = toFloat32(a);
    ASSERT_EQ(back.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t stored;
      std::memcpy(&stored, a.bytes.data() + 2 * i, 2);
      float expected = dtype == DType::F32   ? values[i]
                       : dtype == DType::F16 ? f16BitsToFloat(floatToF16Bits(values[i]))
                                             : bf16BitsToFloat(floatToBf16Bits(values[i]));
      EXPECT_EQ(back[i], expected);
      if (dtype != DType::F32) {
        EXPECT_EQ(stored,
                  dtype == DType::F16 ? floatToF16Bits(values[i]) : floatToBf16Bits(values[i]));
      }
    }
  }
}

TEST(NpyConvert, IntegersRoundTripAndSaturate) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<int64_t> ints(20);
  for (int64_t &v : ints)
    v = rng.integer(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(toInt64(fromInt64(ints, {4, 5}, DType::I32)), ints);
  ints.push_back(std::numeric_limits<int64_t>::min());
  ints.push_back(rng.integer(0, std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(toInt64(fromInt64(ints, {22}, DType::I64)), ints);

  const int64_t i32max = std::numeric_limits<int32_t>::max(),
                i32min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(toInt64(fromInt64({int64_t(1) << 40, -(int64_t(1) << 40), 7}, {3}, DType::I32)),
            (std::vector<int64_t>{i32max, i32min, 7}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> floats = {-2.7f, 2.7f, nan, 1e20f, -1e20f, 16777216.0f};
  EXPECT_EQ(toInt64(fromFloat32(floats, {6}, DType::I32)),
            (std::vector<int64_t>{-2, 2, 0, i32max, i32min, 16777216}));
  EXPECT_EQ(toInt64(fromFloat32(floats, {6}, DType::I64)),
            (std::vector<int64_t>{-2, 2, 0, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min(), 16777216}));
  EXPECT_EQ(toInt64(fromFloat32(floats, {6}, DType::F32)),
            toInt64(fromFloat32(floats, {6}, DType::I64)));
  EXPECT_EQ(toFloat32(fromInt64({-5, 0, 16777216}, {3}, DType::I64)),
            (std::vector<float>{-5.0f, 0.0f, 16777216.0f}));
  EXPECT_EQ(toFloat32(fromInt64({-5, 3}, {2}, DType::BF16)), (std::vector<float>{-5.0f, 3.0f}));
}

TEST(NpyConvert, DTypeHelpers) {
  const std::tuple<DType, const char *, size_t, const char *> expected[] = {
      {DType::F32, "float32", 4, "<f4"},
      {DType::F16, "float16", 2, "<f2"},
      {DType::BF16, "bfloat16", 2, "<u2"},
      {DType::I32, "int32", 4, "<i4"},
      {DType::I64, "int64", 8, "<i8"}};
  for (auto [dtype, name, size, descr] : expected) {
    EXPECT_STREQ(dtypeName(dtype), name);
    EXPECT_EQ(elementSize(dtype), size);
    EXPECT_STREQ(dtypeDescr(dtype), descr);
  }
  EXPECT_EQ(shapeToString({}), "()");
  EXPECT_EQ(shapeToString({7}), "(7,)");
  EXPECT_EQ(shapeToString({2, 3}), "(2, 3)");
  EXPECT_EQ((Array{DType::F32, {}, {}}).numel(), 1);
  EXPECT_EQ((Array{DType::F32, {2, 0, 3}, {}}).numel(), 0);
}
