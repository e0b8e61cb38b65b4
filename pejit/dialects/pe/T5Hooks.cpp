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
// On x86, where the template gives each query tile a scratch, the bias is
// first tabulated per tile by d = i + off - j (rows + skv - 1 entries, in
// the query-tile prologue); the score hook then reads 8 consecutive
// entries per 8 query rows, one load instead of a gather and the bucket
// compares. NVIDIA computes the bucket per score.
// The thresholds are where T5's logarithmic bucket (ref::
// t5RelativePositionBucket) steps up, found at compile time from the float64
// reference itself: the kernel needs no log, and its buckets equal the
// reference's for every distance.
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/reference/ScoreBiasGrad.h"

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
// docs/backward.md: d table[bucket, h] += dS.
bool T5BiasAttr::isDifferentiableOperand(unsigned) const { return true; }

LogicalResult
T5BiasAttr::verifyEncodingOperand(unsigned, RankedTensorType type, const AttentionShape &shape,
                                  function_ref<InFlightDiagnostic()> emitError) const {
  if (type.getRank() != 2 || type.getDimSize(0) != getNumBuckets() ||
      type.getDimSize(1) != shape.queryHeads)
    return emitError() << "the T5 table must be [num_buckets = " << getNumBuckets()
                       << ", hq = " << shape.queryHeads << "], got " << type;
  return success();
}

SmallVector<Value> T5BiasOp::getEncodingOperands() { return {getTable()}; }

namespace {

/// T5's bucket of relative positions `rel` (i32 or a vector of i32 lanes).
Value emitBucket(OpBuilder &b, Location loc, T5BiasAttr attr, Value rel) {
  T5Buckets buckets = bucketsOf(attr);
  auto i32 = [&](int64_t v) { return constantLike(b, loc, rel, static_cast<double>(v)); };
  Value distance, base;
  if (attr.getBidirectional()) {
    distance = math::AbsIOp::create(b, loc, rel);
    Value after = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, rel, i32(0));
    base = arith::SelectOp::create(b, loc, after, i32(buckets.perSign), i32(0));
  } else {
    Value ahead = arith::SubIOp::create(b, loc, i32(0), rel);
    distance = arith::MaxSIOp::create(b, loc, ahead, i32(0));
  }
  Value large = i32(buckets.maxExact);
  for (int64_t threshold : logThresholds(attr)) {
    Value reached =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, distance, i32(threshold));
    large = arith::AddIOp::create(
        b, loc, large, arith::ExtUIOp::create(b, loc, typeLike(rel, b.getI32Type()), reached));
  }
  Value small =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, distance, i32(buckets.maxExact));
  Value bucket = arith::SelectOp::create(b, loc, small, distance, large);
  return base ? arith::AddIOp::create(b, loc, bucket, base) : bucket;
}

/// table[bucket, head] as f32: a gather over the lanes, or one load.
Value emitTableValue(OpBuilder &b, Location loc, Value table, Value bucket, Value head) {
  auto tableType = cast<MemRefType>(table.getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  if (isa<VectorType>(bucket.getType())) {
    Value headI = arith::IndexCastOp::create(b, loc, b.getI32Type(), head);
    Value heads = constantLike(b, loc, bucket, static_cast<double>(tableType.getDimSize(1)));
    Value flat = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, bucket, heads),
                                       broadcastLike(b, loc, bucket, headI));
    return gatherLanesAsF32(b, loc, table, ValueRange{zero, zero}, flat);
  }
  Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), bucket);
  Value value = memref::LoadOp::create(b, loc, table, ValueRange{row, head});
  if (!tableType.getElementType().isF32())
    value = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return value;
}

/// The query-tile table: entry e holds the bias at d = i + off - j =
/// tileStart + off - (skv - 1) + e, for e in [0, rows + skv - 1). Lanes of
/// consecutive query rows and one key read consecutive entries.

} // namespace

bool T5BiasAttr::readsPositions() const { return getRelativeTo() == RelativeTo::Position; }

bool T5BiasAttr::isDistanceOnly() const { return !readsPositions(); }

int64_t T5BiasAttr::getQueryTileScratchFloats(const AttentionShape &shape) const {
  // The table is by index distance: positions take the per-score bucket.
  // So does a kernel whose lengths are the call's (the table's size is
  // by skv).
  if (!shape.hasQueryTileScratch || shape.vectorWidth <= 1 || readsPositions() ||
      ShapedType::isDynamic(shape.keySeq) || ShapedType::isDynamic(shape.querySeq))
    return 0;
  int64_t lanes = shape.vectorWidth;
  int64_t entries = (shape.queryTileRows + shape.keySeq - 1 + lanes - 1) / lanes * lanes;
  return entries <= kMaxQueryTileScratchFloats ? entries : 0;
}

void T5BiasAttr::emitQueryTilePrologue(OpBuilder &b, Location loc, const AttentionShape &shape,
                                       const QueryTileArgs &args) const {
  int64_t lanes = shape.vectorWidth;
  auto lutType = cast<MemRefType>(args.tileScratch.getType());
  auto vecI32 = VectorType::get({lanes}, b.getI32Type());
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  SmallVector<int32_t> iotaValues;
  for (int64_t l = 0; l < lanes; ++l)
    iotaValues.push_back(static_cast<int32_t>(l));
  Value iota = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(vecI32, llvm::ArrayRef<int32_t>(iotaValues)));
  // d(e) = tileStart + off - (skv - 1) + e; rel = -d.
  Value start = arith::IndexCastOp::create(b, loc, b.getI32Type(), args.tileStart);
  Value first = arith::AddIOp::create(
      b, loc, start,
      arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr(shape.keySeq - shape.querySeq - (shape.keySeq - 1))));
  auto loop = scf::ForOp::create(b, loc, idx(0), idx(lutType.getDimSize(0)), idx(lanes));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value e = arith::IndexCastOp::create(b, loc, b.getI32Type(), loop.getInductionVar());
  Value d = arith::AddIOp::create(
      b, loc, vector::BroadcastOp::create(b, loc, vecI32, arith::AddIOp::create(b, loc, first, e)),
      iota);
  Value rel = arith::SubIOp::create(b, loc, constantLike(b, loc, d, 0.0), d);
  Value bias = emitTableValue(b, loc, args.operands[0], emitBucket(b, loc, *this, rel), args.head);
  vector::StoreOp::create(b, loc, bias, args.tileScratch, ValueRange{loop.getInductionVar()});
}

Value T5BiasAttr::emitScoreMod(OpBuilder &b, Location loc, const AttentionShape &shape,
                               const ScorePoint &point) const {
  Value like = point.queryIndex; // i32, or a vector of i32 lanes
  if (point.tileScratch && point.queryLanesConsecutive && isa<VectorType>(like.getType())) {
    // Entry e = (i - tileStart) + (skv - 1) - j of the tile's table; the
    // lanes are consecutive entries. Key rows past skv (tile padding, masked
    // later) would index below 0: clamp.
    Value start = arith::IndexCastOp::create(b, loc, b.getI32Type(), point.tileStart);
    Value i0 = vector::ExtractOp::create(b, loc, point.queryIndex, ArrayRef<int64_t>{0});
    Value j = vector::ExtractOp::create(b, loc, point.keyIndex, ArrayRef<int64_t>{0});
    Value e = arith::SubIOp::create(b, loc, i0, start);
    e = arith::AddIOp::create(
        b, loc, e, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(shape.keySeq - 1)));
    e = arith::SubIOp::create(b, loc, e, j);
    e = arith::MaxSIOp::create(b, loc, e,
                               arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0)));
    Value at = arith::IndexCastOp::create(b, loc, b.getIndexType(), e);
    Value bias =
        vector::LoadOp::create(b, loc, point.score.getType(), point.tileScratch, ValueRange{at});
    return arith::AddFOp::create(b, loc, point.score, bias);
  }
  Value rel = relativeDistance(b, loc, shape, point, readsPositions());
  Value value =
      emitTableValue(b, loc, point.operands[0], emitBucket(b, loc, *this, rel), point.head);
  return arith::AddFOp::create(b, loc, point.score, value);
}

bool T5BiasAttr::hasOperandAdjoint(unsigned) const { return true; }

// The adjoint (docs/backward.md): d table[bucket, h] += dS, at the same
// bucket the score hook read (the per-score path).
SmallVector<GradContribution> T5BiasAttr::emitScoreModAdjoint(OpBuilder &b, Location loc,
                                                              const AttentionShape &shape,
                                                              const ScorePoint &point,
                                                              Value dScore) const {
  Value rel = relativeDistance(b, loc, shape, point, readsPositions());
  Value bucket =
      arith::IndexCastOp::create(b, loc, b.getIndexType(), emitBucket(b, loc, *this, rel));
  Value heads = arith::ConstantIndexOp::create(b, loc, shape.queryHeads);
  Value row = arith::MulIOp::create(b, loc, bucket, heads);
  return {{0, arith::AddIOp::create(b, loc, row, point.head), dScore}};
}

pejit::ref::Tensor T5BiasAttr::referenceScoreBias(const ReferenceAttention &attention) const {
  return pejit::ref::t5Bias(*attention.operands[0], getBidirectional(), getNumBuckets(),
                            getMaxDistance(), attention.distance(readsPositions()));
}

pejit::ref::Tensor T5BiasAttr::referenceScoreBiasGradient(const ReferenceAttention &attention,
                                                          const pejit::ref::Tensor &biasGrad,
                                                          unsigned) const {
  return pejit::ref::t5TableGradient(biasGrad, getBidirectional(), getNumBuckets(),
                                     getMaxDistance(), attention.distance(readsPositions()));
}

// pe.t5_bias: the materialized [1|b, h, sq, skv] bias.
std::string T5BiasOp::getOperandRoleName(unsigned) { return "table"; }

bool T5BiasOp::evaluateReference(const ReferenceOpArgs &args, pejit::ref::Tensor &result,
                                 std::string &) {
  T5BiasAttr a = getEncoding();
  const std::vector<int64_t> &shape = args.resultShape;
  result = pejit::ref::repeatBatchRows(pejit::ref::t5Bias(*args.tensors[0], a.getBidirectional(),
                                                          a.getNumBuckets(), a.getMaxDistance(),
                                                          shape[2], shape[3]),
                                       shape[0]);
  return true;
}
