// T5's relative bias (#pe.t5_bias): its fused-kernel hook, its operand (the
// learned table) and its float64 reference, all through
// PositionalEncodingAttrInterface.
//
// Math (docs/semantics.md "T5"), with off = skv - sq:
//   rel = j - (i + off)
//   bidirectional: n = |rel|, base = (rel > 0) * B/2, B' = B/2
//   causal:        n = max(-rel, 0), base = 0,          B' = B
//   bucket = base + (n < E ? n : E + #{t in thresholds : n >= t}),  E = B'/2
//   bias(h, i, j) = table[bucket, h]
// The thresholds are where T5's logarithmic bucket (ref::
// t5RelativePositionBucket) steps up, found at compile time from the float64
// reference itself: the kernel needs no log, and its buckets equal the
// reference's for every distance.
#include "dialects/pe/PEAttrs.h"
#include "dialects/pe/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "reference/ScoreBias.h"

using namespace mlir;
using namespace pejit::pe;

namespace {

/// Buckets per sign and exact buckets E of a T5 bias.
struct T5Buckets {
  int64_t perSign, maxExact;
};

T5Buckets bucketsOf(T5BiasAttr attr) {
  int64_t perSign = attr.getBidirectional() ? attr.getNumBuckets() / 2 : attr.getNumBuckets();
  return {perSign, perSign / 2};
}

/// The smallest distance n of each logarithmic bucket E + 1 .. perSign - 1
/// (bucket(n) is non-decreasing in n and reaches perSign - 1 by n =
/// max_distance, so a binary search per bucket finds them).
std::vector<int64_t> logThresholds(T5BiasAttr attr) {
  T5Buckets buckets = bucketsOf(attr);
  auto bucketOf = [&](int64_t n) {
    // Causal form: rel = -n; both forms give the same unsigned bucket.
    return pejit::ref::t5RelativePositionBucket(-n, attr.getBidirectional(), attr.getNumBuckets(),
                                                attr.getMaxDistance());
  };
  std::vector<int64_t> thresholds;
  for (int64_t bucket = buckets.maxExact + 1; bucket < buckets.perSign; ++bucket) {
    int64_t lo = buckets.maxExact, hi = attr.getMaxDistance();
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (bucketOf(mid) >= bucket)
        hi = mid;
      else
        lo = mid + 1;
    }
    thresholds.push_back(lo);
  }
  return thresholds;
}

} // namespace

bool T5BiasAttr::isFusable() const { return true; }
unsigned T5BiasAttr::getNumEncodingOperands() const { return 1; }
std::string T5BiasAttr::getEncodingOperandName(unsigned) const { return "t5_table"; }

LogicalResult
T5BiasAttr::verifyEncodingOperand(unsigned, RankedTensorType type, int64_t queryHeads, int64_t,
                                  int64_t, function_ref<InFlightDiagnostic()> emitError) const {
  if (type.getRank() != 2 || type.getDimSize(0) != getNumBuckets() ||
      type.getDimSize(1) != queryHeads)
    return emitError() << "the T5 table must be [num_buckets = " << getNumBuckets()
                       << ", hq = " << queryHeads << "], got " << type;
  return success();
}

SmallVector<Value> T5BiasOp::getEncodingOperands() { return {getTable()}; }

Value T5BiasAttr::emitScoreMod(OpBuilder &b, Location loc, const AttentionShape &shape,
                               const ScorePoint &point) const {
  T5Buckets buckets = bucketsOf(*this);
  Value like = point.queryIndex; // i32, or a vector of i32 lanes
  auto i32 = [&](int64_t v) { return constantLike(b, loc, like, static_cast<double>(v)); };
  Value aligned =
      arith::AddIOp::create(b, loc, point.queryIndex, i32(shape.keySeq - shape.querySeq));
  Value rel = arith::SubIOp::create(b, loc, point.keyIndex, aligned);
  Value distance, base;
  if (getBidirectional()) {
    distance = math::AbsIOp::create(b, loc, rel);
    Value after = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, rel, i32(0));
    base = arith::SelectOp::create(b, loc, after, i32(buckets.perSign), i32(0));
  } else {
    Value ahead = arith::SubIOp::create(b, loc, i32(0), rel);
    distance = arith::MaxSIOp::create(b, loc, ahead, i32(0));
  }
  Value large = i32(buckets.maxExact);
  for (int64_t threshold : logThresholds(*this)) {
    Value reached =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, distance, i32(threshold));
    large = arith::AddIOp::create(
        b, loc, large, arith::ExtUIOp::create(b, loc, typeLike(like, b.getI32Type()), reached));
  }
  Value small =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, distance, i32(buckets.maxExact));
  Value bucket = arith::SelectOp::create(b, loc, small, distance, large);
  if (base)
    bucket = arith::AddIOp::create(b, loc, bucket, base);

  // table[bucket, head]: a gather over the lanes, or one load.
  Value table = point.operands[0];
  auto tableType = cast<MemRefType>(table.getType());
  Type element = tableType.getElementType();
  Value value;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  if (auto lanes = dyn_cast<VectorType>(like.getType())) {
    Value head = arith::IndexCastOp::create(b, loc, b.getI32Type(), point.head);
    Value heads = i32(tableType.getDimSize(1));
    Value flat = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, bucket, heads),
                                       broadcastLike(b, loc, like, head));
    auto resultType = lanes.clone(element);
    Value mask =
        arith::ConstantOp::create(b, loc, DenseElementsAttr::get(lanes.clone(b.getI1Type()), true));
    Value passThru = constantLike(b, loc, like, 0.0, element);
    value = vector::GatherOp::create(b, loc, resultType, table, ValueRange{zero, zero}, flat, mask,
                                     passThru);
  } else {
    Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), bucket);
    value = memref::LoadOp::create(b, loc, table, ValueRange{row, point.head});
  }
  if (!element.isF32())
    value = arith::ExtFOp::create(b, loc, point.score.getType(), value);
  return arith::AddFOp::create(b, loc, point.score, value);
}

pejit::ref::Tensor T5BiasAttr::referenceScoreBias(const ReferenceAttention &attention) const {
  return pejit::ref::t5Bias(*attention.operands[0], getBidirectional(), getNumBuckets(),
                            getMaxDistance(), attention.querySeq, attention.keySeq);
}
