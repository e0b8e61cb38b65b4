// Verifiers of attn.linear_attention and attn.linear_attention_backward
// (LinearAttention.td): attn.attention's shape rules, a feature map, and an
// explicit RoPE placement when a RoPE is fused; the backward's o, dO and
// gradients have the forward's shapes.
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"

using namespace mlir;
using namespace pejit;
using namespace pejit::attn;

namespace {

pe::PositionalEncodingAttrInterface fusedQKTransform(ArrayAttr encodings) {
  if (encodings)
    for (Attribute attr : encodings)
      if (auto encoding = dyn_cast<pe::PositionalEncodingAttrInterface>(attr))
        if (encoding.getEncodingKind() == pe::EncodingKind::QKTransform)
          return encoding;
  return nullptr;
}

/// What the forward and the backward share: the fused RoPE, its placement,
/// the feature map, its tensors and the position ids.
template <typename LinearOp> LogicalResult verifyEncodings(LinearOp self) {
  Operation *op = self.getOperation();
  Value q = self.getQuery(), k = self.getKey();
  int64_t b = dim(q, 0), hq = dim(q, 1), sq = dim(q, 2), d = dim(q, 3), skv = dim(k, 2);
  // Only a RoPE fuses: linear attention has no score to bias.
  pe::PositionalEncodingAttrInterface rope;
  if (ArrayAttr encodings = self.getEncodingsAttr()) {
    for (Attribute attr : encodings) {
      auto encoding = dyn_cast<pe::PositionalEncodingAttrInterface>(attr);
      if (!encoding || encoding.getEncodingKind() != pe::EncodingKind::QKTransform ||
          !encoding.isFusable())
        return self.emitOpError()
               << "encodings: " << attr
               << " cannot fuse into linear attention: it has no scores, so only "
                  "a QK transform (#pe.rope) can";
      if (rope)
        return self.emitOpError() << "encodings: at most one QK transform, got " << encodings;
      if (!encoding.transformsQuery() || !encoding.transformsKey())
        return self.emitOpError() << "encodings: " << attr
                                  << " rotates one side only; linear attention rotates Q and K "
                                     "(apply_to = both)";
      if (failed(encoding.verifyForAttention(hq, d, [&] { return self.emitOpError(); })))
        return failure();
      rope = encoding;
    }
  }
  std::optional<RopePlacement> placement = self.getRopePlacement();
  if (rope && !placement)
    return self.emitOpError() << "a fused RoPE needs rope_placement(rope_before_feature_map) or "
                                 "rope_placement(rope_on_numerator): where it rotates changes the "
                                 "result, so it is never implied";
  if (!rope && placement)
    return self.emitOpError() << "rope_placement without a RoPE in encodings(...)";
  if (placement == RopePlacement::OnNumerator && self.getFeatureMap() == FeatureMap::SoftmaxKeys)
    return self.emitOpError() << "softmax_keys has no denominator, so rope_on_numerator does not "
                                 "apply: use rope_before_feature_map";
  // The RoPE's own tensors (a runtime position scale), checked as
  // attn.attention checks them.
  unsigned reads = rope ? rope.getNumEncodingOperands() : 0;
  if (self.getEncodingOperands().size() != reads)
    return self.emitOpError() << "has " << self.getEncodingOperands().size()
                              << " encoding_operands but its encodings read " << reads;
  if (reads > 0) {
    pe::AttentionShape sizes;
    sizes.batch = b;
    int64_t batchRank = rope.getPositionAxes() > 0 ? 3 : 2;
    auto idRows = [&](Value ids) -> int64_t {
      auto type = ids ? dyn_cast<RankedTensorType>(ids.getType()) : RankedTensorType();
      return type && type.getRank() == batchRank ? type.getDimSize(batchRank - 2) : 1;
    };
    sizes.queryPositionRows = idRows(self.getQueryPositions());
    sizes.keyPositionRows = idRows(self.getKeyPositions());
    for (unsigned k = 0; k < reads; ++k)
      if (failed(rope.verifyEncodingOperand(
              k, cast<RankedTensorType>(self.getEncodingOperands()[k].getType()), sizes, [&, k]() {
                return self.emitOpError() << "encoding_operands #" << k << " ("
                                          << rope.getEncodingOperandName(k) << "): ";
              })))
        return failure();
  }
  int64_t axes = rope ? rope.getPositionAxes() : 0;
  return verifyQueryKeyPositions(op, self.getQueryPositions(), self.getKeyPositions(), b, sq, skv,
                                 axes);
}

} // namespace

pe::PositionalEncodingAttrInterface LinearAttentionOp::getFusedQKTransform() {
  return fusedQKTransform(getEncodingsAttr());
}

pe::PositionalEncodingAttrInterface LinearAttentionBackwardOp::getFusedQKTransform() {
  return fusedQKTransform(getEncodingsAttr());
}

LogicalResult LinearAttentionOp::verify() {
  Operation *op = getOperation();
  Value q = getQuery(), k = getKey();
  if (failed(verifyQueryKeyValue(op, q, k, getValue(), getResult())))
    return failure();
  int64_t b = dim(q, 0), hq = dim(q, 1), d = dim(q, 3);
  if (Value state = getState()) {
    // [b, hq, d, dv + 2] f32: S, then z, then m (docs/linear-attention.md).
    auto type = cast<RankedTensorType>(state.getType());
    int64_t dv = dim(getValue(), 3);
    int64_t expected[] = {b, hq, d, ShapedType::isDynamic(dv) ? dv : dv + 2};
    bool matches = type.getRank() == 4 && type.getElementType().isF32();
    for (int64_t i = 0; matches && i < 4; ++i)
      matches = type.getDimSize(i) == expected[i];
    if (!matches)
      return emitOpError() << "state must be f32 [b, hq, d, dv + 2] = "
                           << RankedTensorType::get(expected, Float32Type::get(getContext()))
                           << " (S, then z, then softmax_keys' running max), got " << type;
  }
  return verifyEncodings(*this);
}

LogicalResult LinearAttentionBackwardOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyQueryKeyValue(op, getQuery(), getKey(), getValue(), getOutput())))
    return failure();
  if (getOutputGrad().getType() != getOutput().getType())
    return emitOpError() << "output_grad must have the output's type " << getOutput().getType()
                         << ", got " << getOutputGrad().getType();
  std::pair<Value, Value> gradients[] = {
      {getQueryGrad(), getQuery()}, {getKeyGrad(), getKey()}, {getValueGrad(), getValue()}};
  const char *names[] = {"query", "key", "value"};
  for (auto [n, pair] : llvm::enumerate(gradients))
    if (pair.first.getType() != pair.second.getType())
      return emitOpError() << "the " << names[n] << " gradient must have the " << names[n]
                           << "'s type " << pair.second.getType() << ", got "
                           << pair.first.getType();
  return verifyEncodings(*this);
}
