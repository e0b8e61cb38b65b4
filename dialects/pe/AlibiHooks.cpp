// ALiBi's kernel hook (PositionalEncodingAttrInterface on #pe.alibi).
//
// Math (docs/semantics.md "ALiBi"), with off = skv - sq:
//   bias(h, i, j) = -slope[head_offset + h] * d,  d = (i + off) - j  (causal)
//                                                  or |i + off - j| (symmetric)
// Slopes are the ALiBi paper's get_slopes(num_heads) (float64 reference),
// baked in as constants. Pointwise: one FMA per lane once d is known.
#include "dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "reference/ScoreBias.h"

using namespace mlir;
using namespace pejit::pe;

Value AlibiAttr::emitScoreMod(OpBuilder &b, Location loc, const AttentionShape &shape,
                              const ScorePoint &point) const {
  std::vector<double> slopes = getSlopes().empty()
                                   ? pejit::ref::alibiSlopes(getNumHeads())
                                   : std::vector<double>(getSlopes().begin(), getSlopes().end());
  std::vector<float> negSlopes;
  for (int64_t h = 0; h < shape.queryHeads; ++h)
    negSlopes.push_back(static_cast<float>(-slopes[getHeadOffset() + h]));

  // The head's slope by a chain of selects on the head index: a constant
  // table indexed dynamically would go through memory (a stack slot on GPUs).
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  Value negSlope = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(negSlopes.back()));
  for (int64_t h = shape.queryHeads - 2; h >= 0; --h) {
    Value isHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, point.head, idx(h));
    Value slope = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(negSlopes[h]));
    negSlope = arith::SelectOp::create(b, loc, isHead, slope, negSlope);
  }

  // d = (i + off) - j: i32 lanes (sequence lengths < 2^31), then f32.
  Value off = constantLike(b, loc, point.queryIndex, shape.keySeq - shape.querySeq);
  Value aligned = arith::AddIOp::create(b, loc, point.queryIndex, off);
  Value distanceI = arith::SubIOp::create(b, loc, aligned, point.keyIndex);
  Value distance = arith::SIToFPOp::create(b, loc, point.score.getType(), distanceI);
  if (getForm() == AlibiForm::Symmetric)
    distance = math::AbsFOp::create(b, loc, distance);
  return math::FmaOp::create(b, loc, distance, broadcastLike(b, loc, point.score, negSlope),
                             point.score);
}

pejit::ref::Tensor AlibiAttr::referenceScoreBias(const ReferenceAttention &attention) const {
  std::vector<double> slopes(getSlopes().begin(), getSlopes().end());
  return pejit::ref::alibiBias(getNumHeads(), getHeadOffset(), attention.queryHeads,
                               getForm() == AlibiForm::Causal ? pejit::ref::AlibiForm::Causal
                                                              : pejit::ref::AlibiForm::Symmetric,
                               attention.querySeq, attention.keySeq, slopes);
}
