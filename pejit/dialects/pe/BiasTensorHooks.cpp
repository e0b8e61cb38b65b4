// The general fallback score bias (#pe.bias_tensor): a user's bias or mask
// tensor [1|b, 1|hq, sq, skv], the fused attention's one encoding operand,
// read pointwise by the score hook; its reference is the tensor itself.
//
// Math (docs/semantics.md "Bias tensors"):
//   s_ij += bias[b or 0, h or 0, i, j]
// On x86 the 8 lanes are 8 query rows of one key: a gather with stride
// skv. Lanes past sq or skv (tile padding, masked later) are clamped into
// the tensor.
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace pejit::pe;

EncodingKind BiasTensorAttr::getEncodingKind() const { return EncodingKind::ScoreBias; }
bool BiasTensorAttr::isFusable() const { return true; }
unsigned BiasTensorAttr::getNumEncodingOperands() const { return 1; }
std::string BiasTensorAttr::getEncodingOperandName(unsigned) const { return "bias"; }
// docs/backward.md: a bias tensor's gradient is dS summed over its broadcast
// dims; the backward writes dS per score and the runtime sums it.
bool BiasTensorAttr::isDifferentiableOperand(unsigned) const { return true; }
bool BiasTensorAttr::hasOperandAdjoint(unsigned) const { return true; }
bool BiasTensorAttr::hasScoreShapedGradient(unsigned) const { return true; }

LogicalResult
BiasTensorAttr::verifyEncodingOperand(unsigned, RankedTensorType type, const AttentionShape &shape,
                                      function_ref<InFlightDiagnostic()> emitError) const {
  // A `?` length of the attention (a shape class) needs a `?` here too: a
  // bias of one fixed length would be read past its end at another.
  auto fits = [](int64_t dim, int64_t size, bool shared) {
    if (ShapedType::isDynamic(size))
      return shared || ShapedType::isDynamic(dim);
    return dim == size || (shared && dim == 1);
  };
  if (type.getRank() != 4 || !fits(type.getDimSize(0), shape.batch, true) ||
      !fits(type.getDimSize(1), shape.queryHeads, true) ||
      !fits(type.getDimSize(2), shape.querySeq, false) ||
      !fits(type.getDimSize(3), shape.keySeq, false))
    return emitError() << "the bias must be [1|b, 1|hq, sq, skv] = [1|" << dimToString(shape.batch)
                       << ", 1|" << dimToString(shape.queryHeads) << ", "
                       << dimToString(shape.querySeq) << ", " << dimToString(shape.keySeq)
                       << "], got " << type;
  return success();
}

Value BiasTensorAttr::emitScoreMod(OpBuilder &b, Location loc, const AttentionShape &shape,
                                   const ScorePoint &point) const {
  Value bias = point.operands[0];
  auto type = cast<MemRefType>(bias.getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value batch = type.getDimSize(0) == 1 ? zero : point.batch;
  Value head = type.getDimSize(1) == 1 ? zero : point.head;
  int64_t sq = type.getDimSize(2), skv = type.getDimSize(3);
  // Clamp the indices into [0, size): padding lanes read a real entry.
  auto clamp = [&](Value index, int64_t size) {
    Value low = arith::MaxSIOp::create(b, loc, index, constantLike(b, loc, index, 0.0));
    return arith::MinSIOp::create(b, loc, low, constantLike(b, loc, index, size - 1.0));
  };
  Value i = clamp(point.queryIndex, sq), j = clamp(point.keyIndex, skv);
  if (auto lanes = dyn_cast<VectorType>(i.getType())) {
    // Flat offsets within [batch, head]: i * skv + j, in i64 when sq * skv
    // passes i32.
    Value flat;
    if (sq * skv < (int64_t(1) << 31)) {
      flat = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, i, constantLike(b, loc, i, double(skv))), j);
    } else {
      auto wide = lanes.clone(b.getI64Type());
      Value i64 = arith::ExtSIOp::create(b, loc, wide, i);
      Value j64 = arith::ExtSIOp::create(b, loc, wide, j);
      flat = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, i64, constantLike(b, loc, i64, double(skv))), j64);
    }
    Value value = gatherLanesAsF32(b, loc, bias, ValueRange{batch, head, zero, zero}, flat);
    return arith::AddFOp::create(b, loc, point.score, value);
  }
  Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  Value col = arith::IndexCastOp::create(b, loc, b.getIndexType(), j);
  Value value = memref::LoadOp::create(b, loc, bias, ValueRange{batch, head, row, col});
  if (!type.getElementType().isF32())
    value = arith::ExtFOp::create(b, loc, point.score.getType(), value);
  return arith::AddFOp::create(b, loc, point.score, value);
}

pejit::ref::Tensor BiasTensorAttr::referenceScoreBias(const ReferenceAttention &attention) const {
  return *attention.operands[0];
}
