// Verifier of attn.attention_backward (AttentionBackward.td): the forward's
// shape rules, attributes and fused encodings, plus o, dO and lse, and one
// result per gradient with the type of what it differentiates.
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/attn/AttnOps.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace pejit;
using namespace pejit::attn;

double AttentionBackwardOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(static_cast<double>(dim(getQuery(), 3)));
}

pe::PositionalEncodingAttrInterface AttentionBackwardOp::getFusedQKTransform() {
  return fusedQKTransform(getEncodingsAttr());
}

std::pair<pe::PositionalEncodingAttrInterface, unsigned>
pejit::attn::encodingOfOperand(ArrayAttr encodings, unsigned index) {
  unsigned first = 0;
  if (encodings)
    for (Attribute attr : encodings) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      unsigned count = encoding.getNumEncodingOperands();
      if (index < first + count)
        return {encoding, index - first};
      first += count;
    }
  return {nullptr, 0};
}

std::pair<pe::PositionalEncodingAttrInterface, unsigned>
AttentionBackwardOp::encodingOfOperand(unsigned index) {
  return attn::encodingOfOperand(getEncodingsAttr(), index);
}

LogicalResult AttentionBackwardOp::verify() {
  Operation *op = getOperation();
  Value q = getQuery(), k = getKey(), v = getValue(), o = getOutput();
  // o is the forward's result: [b, hq, sq, dv] in q's element type.
  if (failed(verifyQueryKeyValue(op, q, k, v, o, "output")))
    return failure();
  if (getOutputGrad().getType() != o.getType())
    return emitOpError() << "output_grad (dO) must have the output's type " << o.getType()
                         << ", got " << getOutputGrad().getType();
  int64_t b = dim(q, 0), hq = dim(q, 1), sq = dim(q, 2), d = dim(q, 3), skv = dim(k, 2);
  if (Value lse = getLse()) {
    const char *names[] = {"b", "hq", "sq"};
    int64_t expected[] = {b, hq, sq};
    for (unsigned i = 0; i < 3; ++i)
      if (failed(requireDim(op, "lse", lse.getType(), i, names[i], expected[i],
                            "the query's " + std::string(names[i]))))
        return failure();
  }
  pe::PositionalEncodingAttrInterface transform = getFusedQKTransform();
  int64_t axes = transform ? transform.getPositionAxes() : 0;
  if (failed(verifyQueryKeyPositions(op, getQueryPositions(), getKeyPositions(), b, sq, skv, axes)))
    return failure();
  if (failed(verifySegmentsAndLengths(op, q, k, getQuerySegments(), getKeySegments(),
                                      getKeyLengths(), /*paged=*/false, getQueryPositions(),
                                      getKeyPositions(), getEncodingsAttr())))
    return failure();
  if (failed(verifyScaleWindowSoftcap(op, getScaleAttr(), d, getWindow(), getWindowRight(),
                                      getSoftcapAttr())) ||
      failed(verifyFusedEncodings(op, getEncodingsAttr(), getEncodingOperands(), q, k, v,
                                  getQueryPositions(), getKeyPositions())))
    return failure();

  // dq, dk, dv: the types of q, k, v.
  for (auto [name, grad, of] :
       {std::tuple<StringRef, Value, Value>{"query_grad", getQueryGrad(), q},
        {"key_grad", getKeyGrad(), k},
        {"value_grad", getValueGrad(), v}})
    if (grad.getType() != of.getType())
      return emitOpError() << name << " must have the type of what it differentiates, "
                           << of.getType() << ", got " << grad.getType();

  // grad_operands: increasing indices of encoding operands, one result each.
  ArrayRef<int64_t> asked = getGradOperands() ? *getGradOperands() : ArrayRef<int64_t>();
  if (asked.size() != getOperandGrads().size())
    return emitOpError() << "grad_operands asks for " << asked.size()
                         << " encoding operand gradient(s), but the op has "
                         << getOperandGrads().size() << " result(s) after dq, dk, dv";
  for (auto [n, index] : llvm::enumerate(asked)) {
    if (index < 0 || index >= static_cast<int64_t>(getEncodingOperands().size()))
      return emitOpError() << "grad_operands[" << n << "] = " << index
                           << " is not an encoding operand (it has " << getEncodingOperands().size()
                           << ")";
    if (n > 0 && index <= asked[n - 1])
      return emitOpError() << "grad_operands must be increasing, got " << index << " after "
                           << asked[n - 1];
    auto [encoding, local] = encodingOfOperand(index);
    if (!encoding || !encoding.isDifferentiableOperand(local))
      return emitOpError() << "grad_operands[" << n << "]: encoding operand #" << index << " ("
                           << (encoding ? encoding.getEncodingOperandName(local) : "?")
                           << ") has no gradient";
    auto operandType = cast<RankedTensorType>(getEncodingOperands()[index].getType());
    auto gradType = cast<RankedTensorType>(getOperandGrads()[n].getType());
    if (gradType.getShape() != operandType.getShape() || !gradType.getElementType().isF32())
      return emitOpError() << "the gradient of encoding operand #" << index << " must be "
                           << RankedTensorType::get(operandType.getShape(),
                                                    Float32Type::get(getContext()))
                           << " (its shape, f32), got " << gradType;
  }
  return success();
}
