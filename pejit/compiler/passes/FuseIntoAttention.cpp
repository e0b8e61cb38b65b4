// pe-fuse-into-attention: positional encodings become attributes of the
// attn.attention that consumes them (see Passes.td for the rules).
//
//   %qr = pe.rope %q, %qp <E>;  %kr = pe.rope %k, %kp <E>;  %b = pe.t5_bias %t <T>
//   %vt = pe.relative_value %aV <V>
//   attn.attention %qr, %kr, %v bias(%b) value_term(%vt)
// becomes
//   attn.attention %q, %k, %v query_positions(%qp) key_positions(%kp)
//       scale(1/sqrt(d)) encodings([E, T, V]) encoding_operands(%t, %aV)
#include "pejit/compiler/passes/Passes.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/IR/Builders.h"
#include <cmath>

namespace pejit {
#define GEN_PASS_DEF_FUSEINTOATTENTION
#include "pejit/compiler/passes/Passes.h.inc"
} // namespace pejit

using namespace mlir;
using namespace pejit;

namespace {

/// The pe op producing `value` if it is a fusable encoding of `kind` whose
/// result has no other user.
pe::PositionalEncodingOpInterface fusableProducer(Value value, pe::EncodingKind kind) {
  auto producer = value.getDefiningOp<pe::PositionalEncodingOpInterface>();
  // An adjoint (a backward's pe.rope adjoint) is not an encoding of Q or K.
  if (!producer || producer.isAdjoint() || producer.getEncodingKind() != kind ||
      !producer.getPositionalEncoding().isFusable() || !value.hasOneUse())
    return nullptr;
  return producer;
}

bool hasQKTransform(ArrayRef<Attribute> encodings) {
  return llvm::any_of(encodings, [](Attribute attr) {
    return cast<pe::PositionalEncodingAttrInterface>(attr).getEncodingKind() ==
           pe::EncodingKind::QKTransform;
  });
}

/// Q and K rotated by the same encoding -> the attention's QK transform.
/// Only one of them rotated (the other already is, e.g. a KV cache written
/// with RoPE) -> the encoding's one-sided form, if it has one.
void fuseQKTransform(attn::AttentionOp op, SmallVectorImpl<Attribute> &encodings) {
  if (hasQKTransform(encodings))
    return;
  auto queryOp = fusableProducer(op.getQuery(), pe::EncodingKind::QKTransform);
  auto keyOp = fusableProducer(op.getKey(), pe::EncodingKind::QKTransform);
  // Positions the attention already has (a bias by position reads them)
  // must be the ones the transform reads.
  auto conflicts = [](Value given, pe::PositionalEncodingOpInterface producer) {
    return given && producer && producer.getPositionIds() != given;
  };
  if (conflicts(op.getQueryPositions(), queryOp) || conflicts(op.getKeyPositions(), keyOp))
    return;
  // The same encoding reading the same tensors (a runtime position scale).
  bool same = queryOp && keyOp && queryOp != keyOp &&
              queryOp.getPositionalEncoding() == keyOp.getPositionalEncoding() &&
              queryOp.getEncodingOperands() == keyOp.getEncodingOperands();
  if (!same) {
    // One side: Q's producer if there is one, else K's, and only when the
    // other side comes from no QK transform at all (it is given rotated).
    bool query = static_cast<bool>(queryOp);
    pe::PositionalEncodingOpInterface side = query ? queryOp : keyOp;
    Value other = query ? op.getKey() : op.getQuery();
    auto otherOp = other.getDefiningOp<pe::PositionalEncodingOpInterface>();
    if (!side || (queryOp && keyOp) ||
        (otherOp && otherOp.getEncodingKind() == pe::EncodingKind::QKTransform))
      return;
    Attribute oneSided = side.getPositionalEncoding().onOneSide(query);
    if (!oneSided)
      return;
    if (query)
      op.getQueryMutable().assign(side.getTransformedInput());
    else
      op.getKeyMutable().assign(side.getTransformedInput());
    if (Value positions = side.getPositionIds()) {
      if (query)
        op.getQueryPositionsMutable().assign(positions);
      else
        op.getKeyPositionsMutable().assign(positions);
    }
    encodings.push_back(oneSided);
    op.getEncodingOperandsMutable().append(side.getEncodingOperands());
    side->erase();
    return;
  }
  op.getQueryMutable().assign(queryOp.getTransformedInput());
  op.getKeyMutable().assign(keyOp.getTransformedInput());
  if (Value positions = queryOp.getPositionIds())
    op.getQueryPositionsMutable().assign(positions);
  if (Value positions = keyOp.getPositionIds())
    op.getKeyPositionsMutable().assign(positions);
  encodings.push_back(queryOp.getPositionalEncoding());
  op.getEncodingOperandsMutable().append(queryOp.getEncodingOperands());
  queryOp->erase();
  keyOp->erase();
}

/// The general fallback: the kernel reads the bias tensor itself.
void fuseAsBiasTensor(attn::AttentionOp op, SmallVectorImpl<Attribute> &encodings) {
  op.getEncodingOperandsMutable().append(op.getBias());
  op.getBiasMutable().clear();
  encodings.push_back(pe::BiasTensorAttr::get(op.getContext()));
}

/// Whether the pe op's operands are all its encoding's own tensors (a T5 or
/// Shaw table): then they can move onto the attention.
bool readsOnlyItsOwnTensors(pe::PositionalEncodingOpInterface producer) {
  SmallVector<Value> operands = producer.getEncodingOperands();
  return operands.size() == producer->getNumOperands() &&
         operands.size() == producer.getPositionalEncoding().getNumEncodingOperands();
}

/// The pe op's encoding joins the attention's, its own tensors its
/// encoding_operands; the op goes.
void absorb(attn::AttentionOp op, pe::PositionalEncodingOpInterface producer,
            SmallVectorImpl<Attribute> &encodings) {
  op.getEncodingOperandsMutable().append(producer.getEncodingOperands());
  encodings.push_back(producer.getPositionalEncoding());
  producer->erase();
}

/// A score bias computed from indices and the encoding's own tensors (a T5
/// table) -> a fused score bias; those tensors become encoding operands.
void fuseScoreBias(attn::AttentionOp op, SmallVectorImpl<Attribute> &encodings) {
  if (!op.getBias())
    return;
  auto biasOp = fusableProducer(op.getBias(), pe::EncodingKind::ScoreBias);
  if (!biasOp)
    return fuseAsBiasTensor(op, encodings);
  // Every operand of the pe op must be one the encoding reads as its own:
  // one that depends on Q or K (Shaw's key term) cannot move this way.
  if (!readsOnlyItsOwnTensors(biasOp))
    return fuseAsBiasTensor(op, encodings);
  op.getBiasMutable().clear();
  absorb(op, biasOp, encodings);
}

/// A key term computed from Q and the encoding's own tensors (Shaw's a^K)
/// -> a fused key term. Its Q must be the attention's, not rotated by a
/// fused QK transform (the kernel would see the rotated rows).
void fuseKeyTerm(attn::AttentionOp op, SmallVectorImpl<Attribute> &encodings) {
  if (!op.getKeyTerm())
    return;
  auto termOp = fusableProducer(op.getKeyTerm(), pe::EncodingKind::ScoreBias);
  if (!termOp || !termOp.getPositionalEncoding().isKeyTerm())
    return;
  for (Attribute attr : encodings) {
    auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
    if (encoding.getEncodingKind() == pe::EncodingKind::QKTransform && encoding.transformsQuery())
      return;
  }
  SmallVector<Value> operands = termOp.getEncodingOperands();
  if (operands.size() != termOp.getPositionalEncoding().getNumEncodingOperands())
    return;
  // Every other operand of the op must be the attention's query.
  for (Value operand : termOp->getOperands())
    if (!llvm::is_contained(operands, operand) && operand != op.getQuery())
      return;
  op.getKeyTermMutable().clear();
  absorb(op, termOp, encodings);
}

/// A value term computed from the encoding's own tensors alone (Shaw's
/// a^V) -> a fused value term; its tables become encoding operands.
void fuseValueTerm(attn::AttentionOp op, SmallVectorImpl<Attribute> &encodings) {
  if (!op.getValueTerm())
    return;
  auto termOp = fusableProducer(op.getValueTerm(), pe::EncodingKind::ValueTerm);
  if (!termOp || !readsOnlyItsOwnTensors(termOp))
    return;
  op.getValueTermMutable().clear();
  absorb(op, termOp, encodings);
}

struct FuseIntoAttentionPass : pejit::impl::FuseIntoAttentionBase<FuseIntoAttentionPass> {
  void runOnOperation() override {
    getOperation().walk([](attn::AttentionOp op) {
      SmallVector<Attribute> encodings;
      if (ArrayAttr existing = op.getEncodingsAttr())
        llvm::append_range(encodings, existing.getValue());
      fuseQKTransform(op, encodings);
      fuseScoreBias(op, encodings);
      fuseKeyTerm(op, encodings);
      fuseValueTerm(op, encodings);
      Builder builder(op.getContext());
      if (!encodings.empty())
        op.setEncodingsAttr(builder.getArrayAttr(encodings));
      if (!op.getScaleAttr())
        op.setScaleAttr(builder.getF64FloatAttr(op.getEffectiveScale()));
    });
  }
};

} // namespace
