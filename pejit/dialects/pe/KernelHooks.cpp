// Helpers for pointwise hooks (KernelHooks.h): one hook body serves scalar
// lanes (NVIDIA, one score per thread) and vectors (AVX2, 8 lanes).
#include "pejit/dialects/pe/KernelHooks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace pejit::pe {

Type typeLike(Value like, Type elementType) {
  if (auto vector = dyn_cast<VectorType>(like.getType()))
    return vector.clone(elementType);
  return elementType;
}

Value constantLike(OpBuilder &b, Location loc, Value like, double value, Type elementType) {
  Type element = elementType ? elementType : getElementTypeOrSelf(like.getType());
  TypedAttr scalar = isa<FloatType>(element)
                         ? TypedAttr(b.getFloatAttr(element, value))
                         : TypedAttr(b.getIntegerAttr(element, static_cast<int64_t>(value)));
  Type type = typeLike(like, element);
  if (auto vector = dyn_cast<VectorType>(type))
    return arith::ConstantOp::create(b, loc, vector, DenseElementsAttr::get(vector, scalar));
  return arith::ConstantOp::create(b, loc, scalar);
}

Value broadcastLike(OpBuilder &b, Location loc, Value like, Value value) {
  if (auto vector = dyn_cast<VectorType>(like.getType()))
    return vector::BroadcastOp::create(b, loc, vector.clone(value.getType()), value);
  return value;
}

Value gatherLanes(OpBuilder &b, Location loc, Value base, ValueRange indices, Value offsets) {
  auto lanes = cast<VectorType>(offsets.getType());
  Type element = cast<MemRefType>(base.getType()).getElementType();
  Value mask =
      arith::ConstantOp::create(b, loc, DenseElementsAttr::get(lanes.clone(b.getI1Type()), true));
  Value passThru = constantLike(b, loc, offsets, 0.0, element);
  return vector::GatherOp::create(b, loc, lanes.clone(element), base, indices, offsets, mask,
                                  passThru);
}

Value gatherLanesAsF32(OpBuilder &b, Location loc, Value base, ValueRange indices, Value offsets) {
  auto lanes = cast<VectorType>(offsets.getType());
  Type element = cast<MemRefType>(base.getType()).getElementType();
  Value value = gatherLanes(b, loc, base, indices, offsets);
  if (!element.isF32())
    value = arith::ExtFOp::create(b, loc, lanes.clone(b.getF32Type()), value);
  return value;
}

Value relativeDistance(OpBuilder &b, Location loc, const AttentionShape &shape,
                       const ScorePoint &point, bool byPosition, bool asFloat) {
  Type f32 = typeLike(point.queryIndex, b.getF32Type());
  if (!byPosition) {
    // Lengths < 2^31 (docs/limits.md): the i32 difference is exact.
    Value offIndex = arith::SubIOp::create(b, loc, point.keySeq, point.querySeq);
    Value off =
        broadcastLike(b, loc, point.queryIndex,
                      arith::IndexCastOp::create(b, loc, b.getI32Type(), offIndex).getResult());
    Value aligned = arith::AddIOp::create(b, loc, point.queryIndex, off);
    Value d = arith::SubIOp::create(b, loc, point.keyIndex, aligned);
    return asFloat ? arith::SIToFPOp::create(b, loc, f32, d).getResult() : d;
  }
  // Positions lie in [-2^31, 2^31): their i64 difference cannot overflow.
  Value d = arith::SubIOp::create(b, loc, point.keyPosition, point.queryPosition);
  Type i32 = typeLike(point.queryIndex, b.getI32Type());
  if (asFloat) {
    // f32(d) as 65536 f32(d >> 16) + f32(d & 0xffff): both parts are exact
    // in f32 (|d| < 2^33), so the one rounding of the sum is f32(d)'s. The
    // parts convert from i32, which AVX2 does 8 lanes at a time; an i64
    // conversion it does one lane at a time.
    Value high = arith::ShRSIOp::create(b, loc, d, constantLike(b, loc, d, 16.0));
    Value low = arith::AndIOp::create(b, loc, d, constantLike(b, loc, d, 65535.0));
    Value highF = arith::SIToFPOp::create(b, loc, f32, arith::TruncIOp::create(b, loc, i32, high));
    Value lowF = arith::SIToFPOp::create(b, loc, f32, arith::TruncIOp::create(b, loc, i32, low));
    Value scaled = arith::MulFOp::create(b, loc, highF, constantLike(b, loc, highF, 65536.0));
    return arith::AddFOp::create(b, loc, scaled, lowF);
  }
  d = arith::MaxSIOp::create(b, loc, d, constantLike(b, loc, d, -2147483647.0));
  d = arith::MinSIOp::create(b, loc, d, constantLike(b, loc, d, 2147483647.0));
  return arith::TruncIOp::create(b, loc, i32, d);
}

} // namespace pejit::pe
