// Vector sin/cos in float64 (VectorSinCos.h).
//
//   k = round(x * 2/pi),  r = x - k*pi/2   (two FMAs with pi/2 split in two
//                                           doubles: exact enough for |k|
//                                           < 2^30; |r| <= pi/4)
//   s = r - r^3/3! + ... - r^11/11!,  c = 1 - r^2/2! + ... - r^10/10!  (Taylor;
//       truncation < 2e-11 on |r| <= pi/4)
//   quadrant q = k - 4 floor(k/4), in float64 (k reaches past 2^31 for
//                          angles past 2^31 pi/2 ~ 3.4e9 rad: only k mod 4
//                          is converted to an integer)
//                          sin x = (q & 1 ? c : s) * (q & 2 ? -1 : 1)
//                          cos x = (q & 1 ? s : c) * ((q + 1) & 2 ? -1 : 1)
// Exact range reduction matters: RoPE angles reach 1e6 rad (docs/semantics.md).
// emitSinCosF32 reduces the same way in float64 and evaluates the
// polynomials (to r^9 and r^8: truncation < 3e-8 on |r| <= pi/4) in f32.
#include "pejit/dialects/pe/VectorSinCos.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace {

/// sin x and cos x from sin r and cos r of the reduced angle r = x - q pi/2
/// (q an integer vector): the quadrant q mod 4 swaps them and sets signs.
std::pair<Value, Value> byQuadrant(OpBuilder &b, Location loc, Value q, Value s, Value c) {
  auto intType = cast<VectorType>(q.getType());
  auto splatInt = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, intType,
        DenseElementsAttr::get(intType, APInt(intType.getElementTypeBitWidth(), v)));
  };
  Value zero = splatInt(0);
  auto bitSet = [&](Value bits, int64_t mask) {
    Value masked = arith::AndIOp::create(b, loc, bits, splatInt(mask));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, masked, zero);
  };
  Value swap = bitSet(q, 1);
  Value sinBase = arith::SelectOp::create(b, loc, swap, c, s);
  Value cosBase = arith::SelectOp::create(b, loc, swap, s, c);
  Value sinNeg = bitSet(q, 2);
  Value cosNeg = bitSet(arith::AddIOp::create(b, loc, q, splatInt(1)), 2);
  Value sinOut =
      arith::SelectOp::create(b, loc, sinNeg, arith::NegFOp::create(b, loc, sinBase), sinBase);
  Value cosOut =
      arith::SelectOp::create(b, loc, cosNeg, arith::NegFOp::create(b, loc, cosBase), cosBase);
  return {sinOut, cosOut};
}

/// k mod 4 of an integral float64 vector k, as integers of `intType`:
/// exact for |k| < 2^53 (an integer conversion of k itself overflows i32
/// past 2^31).
Value quadrantOf(OpBuilder &b, Location loc, Value k, VectorType intType) {
  auto type = cast<VectorType>(k.getType());
  auto splat = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, v));
  };
  Value quarters = math::FloorOp::create(b, loc, arith::MulFOp::create(b, loc, k, splat(0.25)));
  Value q = math::FmaOp::create(b, loc, quarters, splat(-4.0), k);
  return arith::FPToSIOp::create(b, loc, intType, q);
}

} // namespace

std::pair<Value, Value> pejit::pe::emitSinCos(OpBuilder &b, Location loc, Value angles) {
  auto type = cast<VectorType>(angles.getType());
  auto intType = VectorType::get(type.getShape(), b.getI64Type());
  auto splat = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, v));
  };
  auto fma = [&](Value a, Value x, Value c) -> Value {
    return math::FmaOp::create(b, loc, a, x, c);
  };
  Value k = math::RoundEvenOp::create(
      b, loc, arith::MulFOp::create(b, loc, angles, splat(0.63661977236758134308)));
  Value negK = arith::NegFOp::create(b, loc, k);
  Value r = fma(negK, splat(1.5707963267948966), angles);
  r = fma(negK, splat(6.123233995736766e-17), r);
  Value r2 = arith::MulFOp::create(b, loc, r, r);
  // sin(r) = r * (1 + r2 * (-1/3! + r2 * (1/5! + r2 * (-1/7! + r2 * (1/9! - r2/11!)))))
  Value sp = fma(r2, splat(-1.0 / 39916800.0), splat(1.0 / 362880.0));
  sp = fma(r2, sp, splat(-1.0 / 5040.0));
  sp = fma(r2, sp, splat(1.0 / 120.0));
  sp = fma(r2, sp, splat(-1.0 / 6.0));
  sp = fma(r2, sp, splat(1.0));
  Value s = arith::MulFOp::create(b, loc, r, sp);
  // cos(r) = 1 + r2 * (-1/2! + r2 * (1/4! + r2 * (-1/6! + r2 * (1/8! - r2/10!))))
  Value cp = fma(r2, splat(-1.0 / 3628800.0), splat(1.0 / 40320.0));
  cp = fma(r2, cp, splat(-1.0 / 720.0));
  cp = fma(r2, cp, splat(1.0 / 24.0));
  cp = fma(r2, cp, splat(-0.5));
  Value c = fma(r2, cp, splat(1.0));

  return byQuadrant(b, loc, quadrantOf(b, loc, k, intType), s, c);
}

std::pair<Value, Value> pejit::pe::emitSinCosF32(OpBuilder &b, Location loc, Value low,
                                                 Value high) {
  auto wideType = cast<VectorType>(low.getType());
  int64_t half = wideType.getNumElements(), lanes = 2 * half;
  auto halfF32 = VectorType::get({half}, b.getF32Type());
  auto halfI32 = VectorType::get({half}, b.getI32Type());
  auto f32Type = VectorType::get({lanes}, b.getF32Type());
  auto splat64 = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, wideType, DenseElementsAttr::get(wideType, v));
  };
  auto splat = [&](float v) -> Value {
    return arith::ConstantOp::create(b, loc, f32Type, DenseElementsAttr::get(f32Type, v));
  };
  auto fma = [&](Value a, Value x, Value c) -> Value {
    return math::FmaOp::create(b, loc, a, x, c);
  };
  // Per half: k = round(x 2/pi), r = x - k pi/2 in float64, then r as f32
  // and k mod 4 as i32.
  auto reduce = [&](Value angles) {
    Value k = math::RoundEvenOp::create(
        b, loc, arith::MulFOp::create(b, loc, angles, splat64(0.63661977236758134308)));
    Value negK = arith::NegFOp::create(b, loc, k);
    Value r = fma(negK, splat64(1.5707963267948966), angles);
    r = fma(negK, splat64(6.123233995736766e-17), r);
    return std::pair{arith::TruncFOp::create(b, loc, halfF32, r).getResult(),
                     quadrantOf(b, loc, k, halfI32)};
  };
  auto [rLow, kLow] = reduce(low);
  auto [rHigh, kHigh] = reduce(high);
  SmallVector<int64_t> concat;
  for (int64_t i = 0; i < lanes; ++i)
    concat.push_back(i);
  Value r = vector::ShuffleOp::create(b, loc, rLow, rHigh, concat);
  Value q = vector::ShuffleOp::create(b, loc, kLow, kHigh, concat);
  Value r2 = arith::MulFOp::create(b, loc, r, r);
  // sin(r) = r (1 + r2 (-1/3! + r2 (1/5! + r2 (-1/7! + r2/9!))))
  Value sp = fma(r2, splat(1.0f / 362880.0f), splat(-1.0f / 5040.0f));
  sp = fma(r2, sp, splat(1.0f / 120.0f));
  sp = fma(r2, sp, splat(-1.0f / 6.0f));
  sp = fma(r2, sp, splat(1.0f));
  Value s = arith::MulFOp::create(b, loc, r, sp);
  // cos(r) = 1 + r2 (-1/2! + r2 (1/4! + r2 (-1/6! + r2/8!)))
  Value cp = fma(r2, splat(1.0f / 40320.0f), splat(-1.0f / 720.0f));
  cp = fma(r2, cp, splat(1.0f / 24.0f));
  cp = fma(r2, cp, splat(-0.5f));
  Value c = fma(r2, cp, splat(1.0f));

  return byQuadrant(b, loc, q, s, c);
}
