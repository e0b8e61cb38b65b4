// Shaw's relative key and value terms (#pe.relative_key, #pe.relative_value):
// their fused-kernel hooks, their operands (the a^K and a^V tables, shared
// [2k+1, w] or per query head [hq, 2k+1, w]) and their float64 references,
// all through PositionalEncodingAttrInterface.
//
// Math of the key term (docs/semantics.md "Shaw"), with off = skv - sq:
//   rel = clamp(j - (i + off), -k, k)
//   s_ij = scale * (q_i . k_j + q_i . aK[(h,) rel + k])
// Once per query tile (the query-tile prologue) the kernel forms
//   QaK[m, r] = q_(i0 + r) . aK[m]        r < rows, m < 2k + 1
// from the tile's Q rows (bucket-major: rows of one bucket are adjacent);
// the score hook then reads QaK[rel + k, i - i0] and adds scale times it to
// the scaled score, before the softcap. Lanes of consecutive query rows
// that share a bucket (every key farther than k from them) read 8 adjacent
// entries with one load; others gather.
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "pejit/reference/ScoreBias.h"

using namespace mlir;
using namespace pejit::pe;

/// clamp(d, -k, k) + k with d the key - query distance (by index, or by
/// position), pointwise on i32 lanes.
static Value shawBucket(OpBuilder &b, Location loc, const AttentionShape &shape, int64_t clip,
                        const ScorePoint &point, bool byPosition) {
  auto i32 = [&](int64_t v) {
    return constantLike(b, loc, point.queryIndex, static_cast<double>(v));
  };
  Value rel = relativeDistance(b, loc, shape, point, byPosition);
  rel = arith::MaxSIOp::create(b, loc, rel, i32(-clip));
  rel = arith::MinSIOp::create(b, loc, rel, i32(clip));
  return arith::AddIOp::create(b, loc, rel, i32(clip));
}

bool RelativeKeyAttr::isFusable() const { return true; }
bool RelativeKeyAttr::readsPositions() const { return getRelativeTo() == RelativeTo::Position; }
unsigned RelativeKeyAttr::getNumEncodingOperands() const { return 1; }
std::string RelativeKeyAttr::getEncodingOperandName(unsigned) const { return "shaw_key_table"; }
// docs/backward.md: d a^K[r] += dE q_i.
bool RelativeKeyAttr::isDifferentiableOperand(unsigned) const { return true; }
bool RelativeKeyAttr::isKeyTerm() const { return true; }
bool RelativeKeyAttr::requiresQueryTileScratch() const { return true; }

/// A Shaw table: [2 clip + 1, width] shared by the heads, or [hq, 2 clip +
/// 1, width] per query head (docs/semantics.md "Shaw").
static LogicalResult verifyShawTable(RankedTensorType type, int64_t clip, const char *what,
                                     const char *widthName, int64_t width,
                                     const AttentionShape &shape,
                                     function_ref<InFlightDiagnostic()> emitError) {
  bool shared = type.getRank() == 2, perHead = type.getRank() == 3;
  int64_t lead = perHead ? 1 : 0;
  if ((!shared && !perHead) || (perHead && type.getDimSize(0) != shape.queryHeads) ||
      type.getDimSize(lead) != 2 * clip + 1 || type.getDimSize(lead + 1) != width)
    return emitError() << "the Shaw " << what << " table must be [2 clip + 1 = " << 2 * clip + 1
                       << ", " << widthName << " = " << width
                       << "] (shared) or [hq = " << shape.queryHeads << ", " << 2 * clip + 1 << ", "
                       << width << "] (per head), got " << type;
  return success();
}

/// Row `row` of a Shaw table at `channel`: table[row, channel] or, per
/// head, table[head, row, channel].
static SmallVector<Value> shawTableIndices(Value table, Value head, Value row, Value channel) {
  if (cast<MemRefType>(table.getType()).getRank() == 3)
    return {head, row, channel};
  return {row, channel};
}

/// attn.value_term_row (key or value): channels [channel, channel + lanes)
/// of a Shaw table's row `bucket`, widened to f32.
static Value shawTableRow(OpBuilder &b, Location loc, const ValueTermRowArgs &args) {
  Value table = args.operands[0];
  Type element = cast<MemRefType>(table.getType()).getElementType();
  SmallVector<Value> at = shawTableIndices(table, args.head, args.bucket, args.channel);
  if (args.lanes == 1) {
    Value x = memref::LoadOp::create(b, loc, table, at);
    return element.isF32() ? x : arith::ExtFOp::create(b, loc, b.getF32Type(), x).getResult();
  }
  Value x = vector::LoadOp::create(b, loc, VectorType::get({args.lanes}, element), table, at);
  if (!element.isF32())
    x = arith::ExtFOp::create(b, loc, VectorType::get({args.lanes}, b.getF32Type()), x);
  return x;
}

/// The adjoint of shawTableRow (docs/backward.md): rowGrad goes to the
/// table's elements [(head,) bucket, channel + l], consecutive in memory:
/// flat index ((head (2k + 1)) + bucket) w + channel.
static GradContribution shawRowGradient(OpBuilder &b, Location loc, const ValueTermRowArgs &args,
                                        Value rowGrad) {
  auto type = cast<MemRefType>(args.operands[0].getType());
  int64_t rank = type.getRank();
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  Value row = args.bucket;
  if (rank == 3)
    row = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, args.head, idx(type.getDimSize(1))), row);
  Value flat = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, row, idx(type.getDimSize(rank - 1))), args.channel);
  return {0, flat, rowGrad};
}

LogicalResult
RelativeKeyAttr::verifyEncodingOperand(unsigned, RankedTensorType type, const AttentionShape &shape,
                                       function_ref<InFlightDiagnostic()> emitError) const {
  return verifyShawTable(type, getClip(), "key", "d", shape.headDim, shape, emitError);
}

SmallVector<Value> RelativeKeyOp::getEncodingOperands() { return {getTable()}; }

int64_t RelativeKeyAttr::getQueryTileScratchFloats(const AttentionShape &shape) const {
  if (!shape.hasQueryTileScratch)
    return 0;
  int64_t floats = shape.queryTileRows * (2 * getClip() + 1);
  return floats <= kMaxQueryTileScratchFloats ? floats : 0;
}

void RelativeKeyAttr::emitQueryTilePrologue(OpBuilder &b, Location loc, const AttentionShape &shape,
                                            const QueryTileArgs &args) const {
  // 8 channels per FMA on every target (d is a multiple of 8 on both).
  int64_t rows = 2 * getClip() + 1, lanes = 8, d = shape.headDim;
  Value table = args.operands[0];
  Type element = cast<MemRefType>(table.getType()).getElementType();
  Type queryElement = cast<MemRefType>(args.queryTile.getType()).getElementType();
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  auto vecType = VectorType::get({lanes}, b.getF32Type());
  // QaK[m, r] = sum_c Q[r, c] aK[m, c]: 8 channels per FMA, then a sum;
  // rows of this thread's share only.
  auto rowLoop = scf::ForOp::create(b, loc, args.rowFirst ? args.rowFirst : idx(0), args.rows,
                                    args.rowStep ? args.rowStep : idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  Value r = rowLoop.getInductionVar();
  auto bucketLoop = scf::ForOp::create(b, loc, idx(0), idx(rows), idx(1));
  b.setInsertionPointToStart(bucketLoop.getBody());
  Value m = bucketLoop.getInductionVar();
  Value zero = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vecType, 0.0f));
  auto channels = scf::ForOp::create(b, loc, idx(0), idx(d), idx(lanes), ValueRange{zero});
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(channels.getBody());
    Value c = channels.getInductionVar();
    Value q = vector::LoadOp::create(b, loc, VectorType::get({lanes}, queryElement), args.queryTile,
                                     ValueRange{r, c});
    if (!queryElement.isF32())
      q = arith::ExtFOp::create(b, loc, vecType, q);
    Value a = vector::LoadOp::create(b, loc, VectorType::get({lanes}, element), table,
                                     shawTableIndices(table, args.head, m, c));
    if (!element.isF32())
      a = arith::ExtFOp::create(b, loc, vecType, a);
    Value sum = vector::FMAOp::create(b, loc, q, a, channels.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, sum);
  }
  Value dot =
      vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, channels.getResult(0));
  Value at =
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, m, idx(shape.queryTileRows)), r);
  memref::StoreOp::create(b, loc, dot, args.tileScratch, ValueRange{at});
}

Value RelativeKeyAttr::emitScoreMod(OpBuilder &b, Location loc, const AttentionShape &shape,
                                    const ScorePoint &point) const {
  // Only fused where the template gives it its query-tile scratch: the
  // instantiations refuse it elsewhere (requiresQueryTileScratch).
  if (!point.tileScratch)
    return point.score;
  int64_t clip = getClip(), tileRows = shape.queryTileRows;
  Value like = point.queryIndex;
  auto i32 = [&](int64_t v) { return constantLike(b, loc, like, static_cast<double>(v)); };
  Value bucket = shawBucket(b, loc, shape, clip, point, readsPositions());
  // Row i - i0 of the tile's QaK, clamped into the tile (padding lanes).
  Value start = broadcastLike(b, loc, like,
                              arith::IndexCastOp::create(b, loc, b.getI32Type(), point.tileStart));
  Value r = arith::SubIOp::create(b, loc, point.queryIndex, start);
  r = arith::MaxSIOp::create(b, loc, r, i32(0));
  r = arith::MinSIOp::create(b, loc, r, i32(tileRows - 1));
  Value flat =
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, bucket, i32(tileRows)), r);
  Value term;
  auto lanes = dyn_cast<VectorType>(like.getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  if (!lanes) {
    Value at = arith::IndexCastOp::create(b, loc, b.getIndexType(), flat);
    term = memref::LoadOp::create(b, loc, point.tileScratch, ValueRange{at});
  } else if (!point.queryLanesConsecutive) {
    term = gatherLanesAsF32(b, loc, point.tileScratch, ValueRange{zero}, flat);
  } else {
    // Consecutive rows (the template's statement): when every lane has
    // lane 0's bucket, their entries are adjacent: one load.
    Value flat0 = vector::ExtractOp::create(b, loc, flat, ArrayRef<int64_t>{0});
    Value bucket0 = vector::ExtractOp::create(b, loc, bucket, ArrayRef<int64_t>{0});
    Value r0 = vector::ExtractOp::create(b, loc, r, ArrayRef<int64_t>{0});
    Value same = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bucket,
                                       broadcastLike(b, loc, like, bucket0));
    Value allSame = vector::ReductionOp::create(b, loc, vector::CombiningKind::AND, same);
    Value fits = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sle, r0,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(tileRows - lanes.getNumElements())));
    Value adjacent = arith::AndIOp::create(b, loc, allSame, fits);
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{point.score.getType()}, adjacent,
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value at = arith::IndexCastOp::create(b, loc, b.getIndexType(), flat0);
      scf::YieldOp::create(b, loc,
                           vector::LoadOp::create(b, loc, cast<VectorType>(point.score.getType()),
                                                  point.tileScratch, ValueRange{at})
                               .getResult());
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc,
                           gatherLanesAsF32(b, loc, point.tileScratch, ValueRange{zero}, flat));
    }
    term = ifOp.getResult(0);
  }
  // s = scale (q.k + q.aK): the score arrives scaled.
  return math::FmaOp::create(b, loc, term, constantLike(b, loc, point.score, shape.scale),
                             point.score);
}

// The key term as the backward reads it (docs/backward.md): its bucket
// and rows, pointwise, and its rows' adjoint d a^K[r] += S_i[r] q_i.
int64_t RelativeKeyAttr::getKeyTermBuckets() const { return 2 * getClip() + 1; }

Value RelativeKeyAttr::emitKeyTermBucket(OpBuilder &b, Location loc, const AttentionShape &shape,
                                         const ScorePoint &point) const {
  return shawBucket(b, loc, shape, getClip(), point, readsPositions());
}

Value RelativeKeyAttr::emitKeyTermRow(OpBuilder &b, Location loc, const AttentionShape &,
                                      const ValueTermRowArgs &args) const {
  return shawTableRow(b, loc, args);
}

SmallVector<GradContribution> RelativeKeyAttr::emitTermRowAdjoint(OpBuilder &b, Location loc,
                                                                  const AttentionShape &,
                                                                  const ValueTermRowArgs &args,
                                                                  Value rowGrad) const {
  return {shawRowGradient(b, loc, args, rowGrad)};
}

bool RelativeKeyAttr::hasOperandAdjoint(unsigned) const { return true; }

pejit::ref::Tensor RelativeKeyAttr::referenceKeyTerm(const ReferenceAttention &attention) const {
  return pejit::ref::relativeKeyTerm(*attention.query, *attention.operands[0], getClip(),
                                     attention.distance(readsPositions()));
}

// Shaw's relative value term (#pe.relative_value): a value term with 2k + 1
// buckets. Math (docs/semantics.md "Shaw"):
//   z_i = sum_j p_ij (v_j + aV[rel_ij + k]) = P V + sum_m acc_im aV[m]
//   acc_im = sum_{j : rel_ij + k = m} p_ij
// The template keeps acc (rescaled by the online softmax as O is); the
// hooks give the bucket rel + k and the rows of aV.
bool RelativeValueAttr::isFusable() const { return true; }
bool RelativeValueAttr::readsPositions() const { return getRelativeTo() == RelativeTo::Position; }
unsigned RelativeValueAttr::getNumEncodingOperands() const { return 1; }
std::string RelativeValueAttr::getEncodingOperandName(unsigned) const { return "shaw_value_table"; }
// docs/backward.md: d a^V[r] += P dO_i.
bool RelativeValueAttr::isDifferentiableOperand(unsigned) const { return true; }
int64_t RelativeValueAttr::getValueTermBuckets() const { return 2 * getClip() + 1; }

LogicalResult
RelativeValueAttr::verifyEncodingOperand(unsigned, RankedTensorType type,
                                         const AttentionShape &shape,
                                         function_ref<InFlightDiagnostic()> emitError) const {
  return verifyShawTable(type, getClip(), "value", "dv", shape.valueDim, shape, emitError);
}

SmallVector<Value> RelativeValueOp::getEncodingOperands() { return {getTable()}; }

Value RelativeValueAttr::emitValueTermBucket(OpBuilder &b, Location loc,
                                             const AttentionShape &shape,
                                             const ScorePoint &point) const {
  return shawBucket(b, loc, shape, getClip(), point, readsPositions());
}

Value RelativeValueAttr::emitValueTermRow(OpBuilder &b, Location loc, const AttentionShape &,
                                          const ValueTermRowArgs &args) const {
  return shawTableRow(b, loc, args);
}

SmallVector<GradContribution> RelativeValueAttr::emitTermRowAdjoint(OpBuilder &b, Location loc,
                                                                    const AttentionShape &,
                                                                    const ValueTermRowArgs &args,
                                                                    Value rowGrad) const {
  return {shawRowGradient(b, loc, args, rowGrad)};
}

bool RelativeValueAttr::hasOperandAdjoint(unsigned) const { return true; }

pejit::ref::BucketedValueTerm
RelativeValueAttr::referenceValueTerm(const ReferenceAttention &attention) const {
  int64_t clip = getClip();
  pejit::ref::RelativeDistance distance = attention.distance(readsPositions());
  return {attention.operands[0], [=](int64_t b, int64_t i, int64_t j) {
            return std::clamp<int64_t>(distance(b, i, j), -clip, clip) + clip;
          }};
}

// The standalone ops: pe.relative_key's [b, h, sq, skv] term,
// pe.relative_value's [(h,) sq, skv, dv] term.
std::string RelativeKeyOp::getOperandRoleName(unsigned index) {
  return index == 0 ? "query" : "table";
}

bool RelativeKeyOp::evaluateReference(const ReferenceOpArgs &args, pejit::ref::Tensor &result,
                                      std::string &) {
  const std::vector<int64_t> &shape = args.resultShape;
  result = pejit::ref::relativeKeyTerm(*args.tensors[0], *args.tensors[1], getEncoding().getClip(),
                                       shape[3]);
  return true;
}

std::string RelativeValueOp::getOperandRoleName(unsigned) { return "table"; }

bool RelativeValueOp::evaluateReference(const ReferenceOpArgs &args, pejit::ref::Tensor &result,
                                        std::string &) {
  const std::vector<int64_t> &shape = args.resultShape;
  size_t sqDim = shape.size() - 3;
  result = pejit::ref::relativeValueTerm(*args.tensors[0], getEncoding().getClip(), shape[sqDim],
                                         shape[sqDim + 1]);
  return true;
}
