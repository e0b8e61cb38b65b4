//===- NpyConvert.cpp - f16/bf16 bit conversions and dtype casts -----------===//
//
// Pure bit manipulation, so results do not depend on the compiler's _Float16
// support or the FPU's rounding mode. float -> f16/bf16 rounds to nearest,
// ties to even, like NumPy's astype and PyTorch's .to().
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/npy/Npy.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace pejit::npy {

namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// q = m / 2^shift rounded to nearest, ties to even (shift in 1..31).
uint32_t shiftRightRoundEven(uint32_t m, unsigned shift) {
  uint32_t q = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  return q + (rest > half || (rest == half && (q & 1)));
}

/// Float to integer type I: truncation toward zero, NaN -> 0, saturation.
template <class I> I saturatingCast(float f) {
  if (std::isnan(f))
    return 0;
  // Both limits' magnitudes are powers of two, so these floats are exact.
  constexpr float upper = -static_cast<float>(std::numeric_limits<I>::min());
  if (f >= upper)
    return std::numeric_limits<I>::max();
  if (f < -upper)
    return std::numeric_limits<I>::min();
  return static_cast<I>(f);
}

template <class T> void appendElement(std::vector<uint8_t> &bytes, T v) {
  size_t at = bytes.size();
  bytes.resize(at + sizeof v);
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

template <class T> T loadElement(const Array &a, size_t i) {
  T v;
  std::memcpy(&v, a.bytes.data() + i * sizeof v, sizeof v);
  return v;
}

/// Elements actually present (bytes may be short if the array was built by
/// hand; never read past the end).
size_t storedElements(const Array &a) { return a.bytes.size() / elementSize(a.dtype); }

} // namespace

float f16BitsToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  if (exponent == 0) // zero or subnormal: mantissa · 2^-24, exact in float
    return sign ? -std::ldexp(float(mantissa), -24) : std::ldexp(float(mantissa), -24);
  if (exponent == 31) // inf or NaN (payload kept)
    return bitsFloat(sign | 0x7f800000 | (mantissa << 13));
  return bitsFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t floatToF16Bits(float value) {
  uint32_t x = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t exponentField = (x >> 23) & 0xff, mantissa = x & 0x7fffff;
  if (exponentField == 0xff) // inf stays inf; NaN becomes a quiet NaN
    return sign | (mantissa ? 0x7e00 | (mantissa >> 13) : 0x7c00);
  int exponent = int(exponentField) - 127;
  if (exponent > 15)
    return sign | 0x7c00;
  if (exponent >= -14) {
    // Normal f16; a carry out of the mantissa correctly bumps the exponent,
    // up to inf for values >= 65520.
    uint32_t h = (uint32_t(exponent + 15) << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fff;
    h += rest > 0x1000 || (rest == 0x1000 && (h & 1));
    return static_cast<uint16_t>(sign | h);
  }
  if (exponent < -25) // below half the smallest subnormal (2^-24): zero
    return sign;
  // Subnormal f16: value = (mantissa | 2^23) · 2^(exponent-23) = q · 2^-24.
  // A result of 0x400 is the smallest normal, which is also correct.
  uint32_t full = mantissa | 0x800000;
  return static_cast<uint16_t>(sign | shiftRightRoundEven(full, unsigned(-exponent - 1)));
}

float bf16BitsToFloat(uint16_t bits) { return bitsFloat(uint32_t(bits) << 16); }

uint16_t floatToBf16Bits(float value) {
  uint32_t x = floatBits(value);
  if ((x & 0x7fffffff) > 0x7f800000) // NaN: keep the top payload, make quiet
    return static_cast<uint16_t>((x >> 16) | 0x0040);
  // Adding 0x7fff (+1 when the kept lsb is odd) rounds to nearest even; a
  // carry into the exponent is correct, up to inf.
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

std::vector<float> toFloat32(const Array &a) {
  size_t n = storedElements(a);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (a.dtype) {
    case DType::F32:
      out[i] = loadElement<float>(a, i);
      break;
    case DType::F16:
      out[i] = f16BitsToFloat(loadElement<uint16_t>(a, i));
      break;
    case DType::BF16:
      out[i] = bf16BitsToFloat(loadElement<uint16_t>(a, i));
      break;
    case DType::I32:
      out[i] = static_cast<float>(loadElement<int32_t>(a, i));
      break;
    case DType::I64:
      out[i] = static_cast<float>(loadElement<int64_t>(a, i));
      break;
    }
  }
  return out;
}

std::vector<int64_t> toInt64(const Array &a) {
  std::vector<int64_t> out;
  if (a.dtype == DType::I32 || a.dtype == DType::I64) {
    size_t n = storedElements(a);
    out.resize(n);
    for (size_t i = 0; i < n; ++i)
      out[i] = a.dtype == DType::I32 ? loadElement<int32_t>(a, i) : loadElement<int64_t>(a, i);
    return out;
  }
  for (float f : toFloat32(a))
    out.push_back(saturatingCast<int64_t>(f));
  return out;
}

Array fromFloat32(const std::vector<float> &values, std::vector<int64_t> shape, DType target) {
  Array a{target, std::move(shape), {}};
  a.bytes.reserve(values.size() * elementSize(target));
  for (float v : values) {
    switch (target) {
    case DType::F32:
      appendElement(a.bytes, v);
      break;
    case DType::F16:
      appendElement(a.bytes, floatToF16Bits(v));
      break;
    case DType::BF16:
      appendElement(a.bytes, floatToBf16Bits(v));
      break;
    case DType::I32:
      appendElement(a.bytes, saturatingCast<int32_t>(v));
      break;
    case DType::I64:
      appendElement(a.bytes, saturatingCast<int64_t>(v));
      break;
    }
  }
  return a;
}

Array fromInt64(const std::vector<int64_t> &values, std::vector<int64_t> shape, DType target) {
  if (target != DType::I32 && target != DType::I64) {
    std::vector<float> floats(values.begin(), values.end());
    return fromFloat32(floats, std::move(shape), target);
  }
  Array a{target, std::move(shape), {}};
  a.bytes.reserve(values.size() * elementSize(target));
  for (int64_t v : values) {
    if (target == DType::I64) {
      appendElement(a.bytes, v);
      continue;
    }
    constexpr int64_t lo = std::numeric_limits<int32_t>::min(),
                      hi = std::numeric_limits<int32_t>::max();
    appendElement(a.bytes, static_cast<int32_t>(v < lo ? lo : v > hi ? hi : v));
  }
  return a;
}

} // namespace pejit::npy
