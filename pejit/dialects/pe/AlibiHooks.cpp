// ALiBi's kernel hook (PositionalEncodingAttrInterface on #pe.alibi).
//
// Math (docs/semantics.md "ALiBi"), with off = skv - sq:
//   bias(h, i, j) = -slope[head_offset + h] * d,  d = (i + off) - j  (causal)
//                                                  or |i + off - j| (symmetric)
//   bias(h, i, j) = slope[head_offset + h] * j                       (bloom)
// and, with relative_to = position, d = query_pos[i] - key_pos[j].
// Slopes are the ALiBi paper's get_slopes(num_heads) (float64 reference),
// baked in as constants, or (learned_slopes) read from the operand
// alibi_slopes [hq]. Pointwise: one FMA per lane once d is known. The
// adjoint: d slope_h += dS * distance (causal: key - query; symmetric:
// -|key - query|; bloom: the key).
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "pejit/reference/ScoreBias.h"

using namespace mlir;
using namespace pejit::pe;

namespace {

pejit::ref::AlibiForm referenceForm(AlibiForm form) {
  switch (form) {
  case AlibiForm::Causal:
    return pejit::ref::AlibiForm::Causal;
  case AlibiForm::Symmetric:
    return pejit::ref::AlibiForm::Symmetric;
  case AlibiForm::Bloom:
    return pejit::ref::AlibiForm::Bloom;
  }
  return pejit::ref::AlibiForm::Causal;
}

} // namespace

unsigned AlibiAttr::getNumEncodingOperands() const { return getLearnedSlopes() ? 1 : 0; }
std::string AlibiAttr::getEncodingOperandName(unsigned) const { return "alibi_slopes"; }
// docs/backward.md: d slope_h = sum of dS * the form's distance.
bool AlibiAttr::isDifferentiableOperand(unsigned) const { return true; }
bool AlibiAttr::hasOperandAdjoint(unsigned) const { return getLearnedSlopes(); }

LogicalResult AlibiAttr::verifyEncodingOperand(unsigned, RankedTensorType type,
                                               const AttentionShape &shape,
                                               function_ref<InFlightDiagnostic()> emitError) const {
  if (type.getRank() != 1 || type.getDimSize(0) != shape.queryHeads ||
      !type.getElementType().isF32())
    return emitError() << "alibi_slopes must be f32 [hq = " << shape.queryHeads << "], got "
                       << type;
  return success();
}

namespace {

/// The distance the slope multiplies at `point` (f32, the point's shape):
/// key - query (causal), -|key - query| (symmetric), the key index or id
/// (bloom); bias = slope * it.
Value slopeDistance(OpBuilder &b, Location loc, AlibiAttr attr, const AttentionShape &shape,
                    const ScorePoint &point) {
  if (attr.getForm() == AlibiForm::Bloom) {
    Value key = attr.readsPositions() ? point.keyPosition : point.keyIndex;
    return arith::SIToFPOp::create(b, loc, typeLike(key, b.getF32Type()), key);
  }
  Value distance = relativeDistance(b, loc, shape, point, attr.readsPositions(), /*asFloat=*/true);
  if (attr.getForm() == AlibiForm::Symmetric)
    distance = arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, distance));
  return distance;
}

} // namespace

// The adjoint (docs/backward.md): bias = slope_h * distance, so
// d slope_h += dS * distance.
SmallVector<GradContribution> AlibiAttr::emitScoreModAdjoint(OpBuilder &b, Location loc,
                                                             const AttentionShape &shape,
                                                             const ScorePoint &point,
                                                             Value dScore) const {
  if (!getLearnedSlopes())
    return {};
  Value distance = slopeDistance(b, loc, *this, shape, point);
  return {{0, point.head, arith::MulFOp::create(b, loc, dScore, distance)}};
}

Value AlibiAttr::emitScoreMod(OpBuilder &b, Location loc, const AttentionShape &shape,
                              const ScorePoint &point) const {
  if (getLearnedSlopes()) { // slope_h from the operand, times the distance: one FMA
    Value slope = memref::LoadOp::create(b, loc, point.operands[0], ValueRange{point.head});
    return math::FmaOp::create(b, loc, slopeDistance(b, loc, *this, shape, point),
                               broadcastLike(b, loc, point.score, slope), point.score);
  }
  std::vector<double> slopes = getSlopes().empty()
                                   ? pejit::ref::alibiSlopes(getNumHeads())
                                   : std::vector<double>(getSlopes().begin(), getSlopes().end());
  // With d = key - query: causal -slope ((i + off) - j) = slope d;
  // symmetric -slope |d|; bloom slope j (or slope key_pos[j]). One FMA.
  bool causal = getForm() != AlibiForm::Symmetric;
  std::vector<float> factors;
  for (int64_t h = 0; h < shape.queryHeads; ++h)
    factors.push_back(
        static_cast<float>(causal ? slopes[getHeadOffset() + h] : -slopes[getHeadOffset() + h]));

  // The head's slope by a chain of selects on the head index: a constant
  // table indexed dynamically would go through memory (a stack slot on GPUs).
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  Value factor = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(factors.back()));
  for (int64_t h = shape.queryHeads - 2; h >= 0; --h) {
    Value isHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, point.head, idx(h));
    Value slope = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(factors[h]));
    factor = arith::SelectOp::create(b, loc, isHead, slope, factor);
  }

  Value distance;
  if (getForm() == AlibiForm::Bloom) {
    Value key = readsPositions() ? point.keyPosition : point.keyIndex;
    distance = arith::SIToFPOp::create(b, loc, typeLike(key, b.getF32Type()), key);
  } else {
    distance = relativeDistance(b, loc, shape, point, readsPositions(), /*asFloat=*/true);
  }
  if (getForm() == AlibiForm::Symmetric)
    distance = math::AbsFOp::create(b, loc, distance);
  return math::FmaOp::create(b, loc, distance, broadcastLike(b, loc, point.score, factor),
                             point.score);
}

bool AlibiAttr::readsPositions() const { return getRelativeTo() == RelativeTo::Position; }

// BLOOM's slope * j depends on j itself.
bool AlibiAttr::isDistanceOnly() const {
  return getForm() != AlibiForm::Bloom && !readsPositions();
}

pejit::ref::Tensor AlibiAttr::referenceScoreBias(const ReferenceAttention &attention) const {
  if (getLearnedSlopes()) // this attention's hq slopes, head h's at h
    return pejit::ref::alibiBias(attention.queryHeads, 0, attention.queryHeads,
                                 referenceForm(getForm()), attention.distance(readsPositions()),
                                 attention.operands[0]->data);
  std::vector<double> slopes(getSlopes().begin(), getSlopes().end());
  return pejit::ref::alibiBias(getNumHeads(), getHeadOffset(), attention.queryHeads,
                               referenceForm(getForm()), attention.distance(readsPositions()),
                               slopes);
}

// pe.alibi: the materialized [1|b, h, sq, skv] bias (index distances).
bool AlibiOp::evaluateReference(const ReferenceOpArgs &args, pejit::ref::Tensor &result,
                                std::string &) {
  AlibiAttr a = getEncoding();
  const std::vector<int64_t> &shape = args.resultShape;
  std::vector<double> slopes(a.getSlopes().begin(), a.getSlopes().end());
  result = pejit::ref::repeatBatchRows(pejit::ref::alibiBias(a.getNumHeads(), a.getHeadOffset(),
                                                             shape[1], referenceForm(a.getForm()),
                                                             shape[2], shape[3], slopes),
                                       shape[0]);
  return true;
}
