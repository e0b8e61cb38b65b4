// Verifiers of the pe ops: the shape rules that tie an encoding's parameters
// to its operands. Messages name the operand or attribute and the rule.
#include "pejit/dialects/pe/PEOps.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include <cmath>

using namespace mlir;
using namespace pejit;
using namespace pejit::pe;

namespace {

LogicalResult requireSameElementType(Operation *op, StringRef name, Value a, StringRef otherName,
                                     Value b) {
  Type ea = cast<RankedTensorType>(a.getType()).getElementType();
  Type eb = cast<RankedTensorType>(b.getType()).getElementType();
  if (ea != eb)
    return op->emitOpError() << name << " element type " << ea << " does not match " << otherName
                             << " element type " << eb;
  return success();
}

using limits::kMaxHeadDim, limits::kMaxHeads, limits::kMaxLength, limits::kMaxTableRows;

/// Score-bias results are [b or 1, h, sq, skv].
LogicalResult verifyBiasResult(Operation *op, Value result) {
  const DimLimit biasLimits[] = {
      {"b", kMaxLength}, {"h", kMaxHeads}, {"sq", kMaxLength}, {"skv", kMaxLength}};
  if (failed(requireRank(op, "result", result.getType(), 4, "[b, h, sq, skv]")))
    return failure();
  return requireSizesWithinLimits(op, "result", result.getType(), biasLimits);
}

/// Embedding inputs are [b, s, d].
LogicalResult verifyEmbeddingInput(Operation *op, Value input, StringRef name = "input") {
  const DimLimit inputLimits[] = {{"b", kMaxLength}, {"s", kMaxLength}, {"d", kMaxTableRows}};
  if (failed(requireRank(op, name, input.getType(), 3, "[b, s, d]")))
    return failure();
  return requireSizesWithinLimits(op, name, input.getType(), inputLimits);
}

/// Tables of an encoding ([rows, d] or [rows, h]).
LogicalResult verifyTableSizes(Operation *op, Value table) {
  const DimLimit tableLimits[] = {{"rows", kMaxTableRows}, {"columns", kMaxTableRows}};
  return requireSizesWithinLimits(op, "table", table.getType(), tableLimits);
}
} // namespace

namespace {

/// pe.rope's rules, shared by pe.rope_scale_grad: the input [b, h, s, d],
/// the encoding's standalone form, the ids, and the scale operand present
/// exactly when runtime_scale is.
LogicalResult verifyStandaloneRope(Operation *op, Value input, Value positions, Value scale,
                                   RopeAttr encoding) {
  const DimLimit inputLimits[] = {
      {"b", kMaxLength}, {"h", kMaxHeads}, {"s", kMaxLength}, {"d", kMaxHeadDim}};
  if (failed(requireRank(op, "input", input.getType(), 4, "[b, h, s, d]")) ||
      failed(requireSizesWithinLimits(op, "input", input.getType(), inputLimits)))
    return failure();
  if (encoding.getApplyTo() != RopeSides::Both)
    return op->emitOpError() << "apply_to = " << stringifyRopeSides(encoding.getApplyTo())
                             << " is for a RoPE fused into attn.attention; pe.rope rotates its "
                                "input, so leave apply_to out";
  if (encoding.getLearnedInvFreq())
    return op->emitOpError() << "learned_inv_freq is for a RoPE fused into attn.attention (its "
                                "frequencies are an encoding operand there); pe.rope computes them "
                                "from theta";
  auto emitError = [&]() { return op->emitOpError(); };
  if (failed(encoding.verifyForAttention(dim(input, 1), dim(input, 3), emitError)))
    return failure();
  if (failed(verifyPositionIds(op, "positions", positions.getType(), dim(input, 0), dim(input, 2),
                               encoding.getPositionAxes())))
    return failure();
  if (static_cast<bool>(scale) != encoding.getRuntimeScale())
    return op->emitOpError() << (encoding.getRuntimeScale()
                                     ? "has runtime_scale = true but no scale(%s : tensor<1xf32>) "
                                       "operand"
                                     : "has a scale(...) operand but its encoding lacks "
                                       "runtime_scale = true");
  if (!scale)
    return success();
  // The scale is checked as the fused attention checks it: [1], or [b]
  // with per-batch ids.
  AttentionShape shape;
  shape.batch = dim(input, 0);
  auto ids = cast<RankedTensorType>(positions.getType());
  int64_t batchRank = encoding.getPositionAxes() > 0 ? 3 : 2;
  shape.queryPositionRows = shape.keyPositionRows =
      ids.getRank() == batchRank ? ids.getDimSize(batchRank - 2) : 1;
  return encoding.verifyEncodingOperand(0, cast<RankedTensorType>(scale.getType()), shape,
                                        [&]() { return op->emitOpError() << "scale: "; });
}

} // namespace

LogicalResult RopeOp::verify() {
  return verifyStandaloneRope(getOperation(), getInput(), getPositions(), getPositionScale(),
                              getEncoding());
}

LogicalResult RopeScaleGradOp::verify() {
  return verifyStandaloneRope(getOperation(), getInput(), getPositions(), getPositionScale(),
                              getEncoding());
}

SmallVector<Value> RopeOp::getEncodingOperands() {
  if (Value scale = getPositionScale())
    return {scale};
  return {};
}

Value RopeOp::getTransformedInput() { return getInput(); }
Value RopeOp::getPositionIds() { return getPositions(); }

namespace {
/// relative_to = position is for a bias fused into attn.attention, which
/// reads the attention's position ids; the standalone ops have none.
LogicalResult rejectPositionDistances(Operation *op, PositionalEncodingAttrInterface encoding) {
  if (!encoding.readsPositions())
    return success();
  return op->emitOpError() << "relative_to = position is for an encoding fused into "
                              "attn.attention (it reads the attention's position ids); this op "
                              "has no position operands, so leave relative_to out";
}
} // namespace

LogicalResult AlibiOp::verify() {
  Operation *op = getOperation();
  if (failed(rejectPositionDistances(op, getEncoding())))
    return failure();
  if (getEncoding().getLearnedSlopes())
    return emitOpError() << "learned_slopes is for ALiBi fused into attn.attention (its slopes "
                            "are an encoding operand there); pe.alibi takes constant slopes";
  if (failed(verifyBiasResult(op, getResult())))
    return failure();
  auto emitError = [&]() { return emitOpError(); };
  return getEncoding().verifyForAttention(dim(getResult(), 1), ShapedType::kDynamic, emitError);
}

LogicalResult T5BiasOp::verify() {
  Operation *op = getOperation();
  if (failed(rejectPositionDistances(op, getEncoding())))
    return failure();
  if (failed(verifyBiasResult(op, getResult())) ||
      failed(requireRank(op, "table", getTable().getType(), 2, "[num_buckets, h]")) ||
      failed(verifyTableSizes(op, getTable())) ||
      failed(requireSameElementType(op, "table", getTable(), "result", getResult())))
    return failure();
  if (failed(requireDim(op, "table", getTable().getType(), 0, "num_buckets",
                        getEncoding().getNumBuckets(), "num_buckets")) ||
      failed(requireDim(op, "table", getTable().getType(), 1, "h", dim(getResult(), 1),
                        "the heads of the result")))
    return failure();
  return success();
}

namespace {
/// A Shaw table: [2k+1, width] shared by the heads, or [heads, 2k+1, width]
/// per head.
LogicalResult verifyShawTable(Operation *op, Value table, int64_t clip, int64_t heads,
                              int64_t width, StringRef widthName, StringRef widthWhat) {
  auto type = cast<RankedTensorType>(table.getType());
  if (type.getRank() != 2 && type.getRank() != 3)
    return op->emitOpError() << "table must be [2 * clip + 1, " << widthName
                             << "] (shared by the heads) or [h, 2 * clip + 1, " << widthName
                             << "] (per head), got " << type;
  const DimLimit perHeadLimits[] = {
      {"h", kMaxHeads}, {"rows", kMaxTableRows}, {"columns", kMaxTableRows}};
  const DimLimit sharedLimits[] = {{"rows", kMaxTableRows}, {"columns", kMaxTableRows}};
  unsigned lead = type.getRank() == 3 ? 1 : 0;
  if (failed(requireSizesWithinLimits(op, "table", type,
                                      lead ? ArrayRef<DimLimit>(perHeadLimits)
                                           : ArrayRef<DimLimit>(sharedLimits))) ||
      (lead && failed(requireDim(op, "table", type, 0, "h", heads, "the query's heads"))) ||
      failed(requireDim(op, "table", type, lead, "rows", 2 * clip + 1, "2 * clip + 1")) ||
      failed(requireDim(op, "table", type, lead + 1, widthName, width, widthWhat)))
    return failure();
  return success();
}
} // namespace

LogicalResult RelativeKeyOp::verify() {
  Operation *op = getOperation();
  if (failed(rejectPositionDistances(op, getEncoding())))
    return failure();
  const DimLimit queryLimits[] = {
      {"b", kMaxLength}, {"h", kMaxHeads}, {"sq", kMaxLength}, {"d", kMaxHeadDim}};
  if (failed(requireRank(op, "query", getQuery().getType(), 4, "[b, h, sq, d]")) ||
      failed(requireSizesWithinLimits(op, "query", getQuery().getType(), queryLimits)) ||
      failed(verifyShawTable(op, getTable(), getEncoding().getClip(), dim(getQuery(), 1),
                             dim(getQuery(), 3), "d", "the query's head_dim")) ||
      failed(verifyBiasResult(op, getResult())) ||
      failed(requireSameElementType(op, "table", getTable(), "query", getQuery())))
    return failure();
  for (unsigned i = 0; i < 3; ++i)
    if (failed(requireDim(op, "result", getResult().getType(), i,
                          i == 0   ? "b"
                          : i == 1 ? "h"
                                   : "sq",
                          dim(getQuery(), i), "the query's")))
      return failure();
  return success();
}

LogicalResult RelativeValueOp::verify() {
  Operation *op = getOperation();
  if (failed(rejectPositionDistances(op, getEncoding())))
    return failure();
  auto tableType = cast<RankedTensorType>(getTable().getType());
  bool perHead = tableType.getRank() == 3;
  // [sq, skv, dv], or [h, sq, skv, dv] from a per-head table.
  const DimLimit resultLimits[] = {{"sq", kMaxLength}, {"skv", kMaxLength}, {"dv", kMaxHeadDim}};
  const DimLimit perHeadLimits[] = {
      {"h", kMaxHeads}, {"sq", kMaxLength}, {"skv", kMaxLength}, {"dv", kMaxHeadDim}};
  if (failed(requireRank(op, "result", getResult().getType(), perHead ? 4 : 3,
                         perHead ? "[h, sq, skv, dv] (a per-head table)" : "[sq, skv, dv]")) ||
      failed(requireSizesWithinLimits(op, "result", getResult().getType(),
                                      perHead ? ArrayRef<DimLimit>(perHeadLimits)
                                              : ArrayRef<DimLimit>(resultLimits))) ||
      failed(verifyShawTable(op, getTable(), getEncoding().getClip(),
                             perHead ? dim(getResult(), 0) : ShapedType::kDynamic,
                             dim(getResult(), perHead ? 3 : 2), "dv", "the result's dv")) ||
      failed(requireSameElementType(op, "table", getTable(), "result", getResult())))
    return failure();
  return success();
}

LogicalResult SinusoidalOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyEmbeddingInput(op, getInput())))
    return failure();
  int64_t modelDim = dim(getInput(), 2);
  if (!ShapedType::isDynamic(modelDim) && modelDim % 2 != 0)
    return emitOpError() << "input d (" << modelDim
                         << ") must be even: channels pair as (sin, cos)";
  return verifyPositionIds(op, "positions", getPositions().getType(), dim(getInput(), 0),
                           dim(getInput(), 1));
}

LogicalResult LearnedOp::verify() {
  Operation *op = getOperation();
  Type tableType = getTable().getType();
  if (failed(verifyEmbeddingInput(op, getInput())) ||
      failed(requireRank(op, "table", tableType, 2, "[max_positions, d]")) ||
      failed(verifyTableSizes(op, getTable())) ||
      failed(requireSameElementType(op, "table", getTable(), "input", getInput())))
    return failure();
  if (failed(requireDim(op, "table", tableType, 0, "rows", getEncoding().getMaxPositions(),
                        "max_positions")) ||
      failed(requireDim(op, "table", tableType, 1, "d", dim(getInput(), 2), "the input's d")))
    return failure();
  return verifyPositionIds(op, "positions", getPositions().getType(), dim(getInput(), 0),
                           dim(getInput(), 1));
}

LogicalResult EmbedOp::verify() {
  Operation *op = getOperation();
  Type tokensType = getTokens().getType(), tableType = getTable().getType();
  auto tokenElement = dyn_cast<IntegerType>(cast<RankedTensorType>(tokensType).getElementType());
  if (!tokenElement || (tokenElement.getWidth() != 32 && tokenElement.getWidth() != 64))
    return emitOpError() << "tokens must be i32 or i64, got " << tokensType;
  if (failed(requireRank(op, "tokens", tokensType, 2, "[b, s]")) ||
      failed(requireRank(op, "table", tableType, 2, "[vocab, d]")) ||
      failed(verifyTableSizes(op, getTable())) ||
      failed(verifyEmbeddingInput(op, getResult(), "result")) ||
      failed(requireSameElementType(op, "result", getResult(), "table", getTable())))
    return failure();
  if (!std::isfinite(getScale().convertToDouble()))
    return emitOpError() << "scale must be finite, got " << getScale().convertToDouble();
  if (failed(requireDim(op, "result", getResult().getType(), 0, "b", dim(getTokens(), 0),
                        "the tokens' b")) ||
      failed(requireDim(op, "result", getResult().getType(), 1, "s", dim(getTokens(), 1),
                        "the tokens' s")) ||
      failed(requireDim(op, "result", getResult().getType(), 2, "d", dim(getTable(), 1),
                        "the table's d")))
    return failure();
  return success();
}

LogicalResult EmbedGradOp::verify() {
  Operation *op = getOperation();
  Type idsType = getIds().getType();
  auto idElement = dyn_cast<IntegerType>(cast<RankedTensorType>(idsType).getElementType());
  if (!idElement || (idElement.getWidth() != 32 && idElement.getWidth() != 64))
    return emitOpError() << "ids must be i32 or i64, got " << idsType;
  if (failed(verifyEmbeddingInput(op, getGrad(), "grad")) ||
      failed(requireRank(op, "result", getResult().getType(), 2, "[rows, d]")) ||
      failed(verifyTableSizes(op, getResult())))
    return failure();
  int64_t idsRank = cast<RankedTensorType>(idsType).getRank();
  if (idsRank != 1 && idsRank != 2)
    return emitOpError() << "ids must be [s] (shared by the batch) or [b, s], got " << idsType;
  if (failed(requireDim(op, "ids", idsType, idsRank - 1, "s", dim(getGrad(), 1), "grad's s")) ||
      (idsRank == 2 &&
       failed(requireDim(op, "ids", idsType, 0, "b", dim(getGrad(), 0), "grad's b"))) ||
      failed(
          requireDim(op, "result", getResult().getType(), 1, "d", dim(getGrad(), 2), "grad's d")))
    return failure();
  Type resultElement = cast<RankedTensorType>(getResult().getType()).getElementType();
  if (!resultElement.isF32() &&
      resultElement != cast<RankedTensorType>(getGrad().getType()).getElementType())
    return emitOpError() << "the result's element type must be f32 or grad's, got "
                         << resultElement;
  if (cast<RankedTensorType>(getResult().getType()).isDynamicDim(0))
    return emitOpError() << "the result's rows (the table's) must be static, got "
                         << getResult().getType();
  if (!std::isfinite(getScale().convertToDouble()))
    return emitOpError() << "scale must be finite, got " << getScale().convertToDouble();
  return success();
}

#define GET_OP_CLASSES
#include "pejit/dialects/pe/PEOps.cpp.inc"

LogicalResult ScoreBiasGradOp::verify() {
  auto encoding = dyn_cast<PositionalEncodingAttrInterface>(getEncoding());
  if (!encoding || encoding.getEncodingKind() != EncodingKind::ScoreBias || encoding.isKeyTerm())
    return emitOpError() << "encoding " << getEncoding()
                         << " is not a score bias (pe.t5_bias's #pe.t5_bias<...>)";
  if (!encoding.isDistanceOnly() || encoding.readsPositions())
    return emitOpError() << "encoding " << getEncoding()
                         << ": the kernel sums dBias along diagonals, so the bias must depend "
                            "on the distance j - i alone";
  if (getEncodingOperands().size() != encoding.getNumEncodingOperands())
    return emitOpError() << "has " << getEncodingOperands().size() << " operands but "
                         << getEncoding() << " reads " << encoding.getNumEncodingOperands();
  if (getEncodingOperands().size() != 1 || !encoding.isDifferentiableOperand(0) ||
      !encoding.hasOperandAdjoint(0))
    return emitOpError() << "encoding " << getEncoding()
                         << " has no tensor with a gradient (one operand with an adjoint)";
  const DimLimit biasLimits[] = {
      {"b", kMaxLength}, {"h", kMaxHeads}, {"sq", kMaxLength}, {"skv", kMaxLength}};
  if (failed(requireRank(getOperation(), "bias_grad", getBiasGrad().getType(), 4,
                         "[b, h, sq, skv]")) ||
      failed(requireSizesWithinLimits(getOperation(), "bias_grad", getBiasGrad().getType(),
                                      biasLimits)))
    return failure();
  auto operand = cast<RankedTensorType>(getEncodingOperands()[0].getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (result.getShape() != operand.getShape() || !result.getElementType().isF32())
    return emitOpError() << "result must be f32 of the operand's shape "
                         << RankedTensorType::get(operand.getShape(),
                                                  Float32Type::get(getContext()))
                         << ", got " << result;
  auto emitError = [&]() { return emitOpError(); };
  pe::AttentionShape sizes;
  sizes.batch = dim(getBiasGrad(), 0);
  sizes.queryHeads = dim(getBiasGrad(), 1);
  if (failed(encoding.verifyEncodingOperand(0, operand, sizes, [&]() {
        return emitOpError() << "operands #0 (" << encoding.getEncodingOperandName(0) << "): ";
      })))
    return failure();
  return encoding.verifyForAttention(dim(getBiasGrad(), 1), ShapedType::kDynamic, emitError);
}
