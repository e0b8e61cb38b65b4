// Vector sin/cos in float64 (VectorSinCos.h).
//
//   k = round(x * 2/pi),  r = x - k*pi/2   (two FMAs with pi/2 split in two
//                                           doubles: exact enough for |k|
//                                           < 2^30; |r| <= pi/4)
//   s = r - r^3/3! + ... - r^11/11!,  c = 1 - r^2/2! + ... - r^10/10!  (Taylor;
//       truncation < 2e-11 on |r| <= pi/4)
//   quadrant q = k mod 4:  sin x = (q & 1 ? c : s) * (q & 2 ? -1 : 1)
//                          cos x = (q & 1 ? s : c) * ((q + 1) & 2 ? -1 : 1)
// Exact range reduction matters: RoPE angles reach 1e6 rad (docs/semantics.md).
#include "dialects/pe/VectorSinCos.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

std::pair<Value, Value> pejit::pe::emitSinCos(OpBuilder &b, Location loc, Value angles) {
  auto type = cast<VectorType>(angles.getType());
  auto intType = VectorType::get(type.getShape(), b.getI64Type());
  auto splat = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, v));
  };
  auto splatInt = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, intType,
                                     DenseElementsAttr::get(intType, APInt(64, v)));
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

  Value q = arith::FPToSIOp::create(b, loc, intType, k);
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
