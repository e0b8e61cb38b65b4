// How each op kind evaluates in float64 (Interpreter.h): attention and
// its fused encodings, linear attention, pe ops through their interface,
// and pe.embed.
#include "pejit/interpreter/Interpreter.h"
#include "pejit/interpreter/Signature.h"

#include "pejit/reference/Absolute.h"
#include "pejit/reference/Attention.h"
#include "pejit/reference/LinearAttention.h"
#include "pejit/reference/ScoreBias.h"

#include <algorithm>
#include <functional>

namespace pejit::interp {

namespace {

/// [1|b, 1|h, sq, skv] a + b, broadcast over the first two dims.
ref::Tensor addBias(const ref::Tensor &a, const ref::Tensor &b) {
  ref::Tensor sum({std::max(a.dim(0), b.dim(0)), std::max(a.dim(1), b.dim(1)), a.dim(2), a.dim(3)});
  for (int64_t n = 0; n < sum.dim(0); ++n)
    for (int64_t h = 0; h < sum.dim(1); ++h)
      for (int64_t i = 0; i < sum.dim(2); ++i)
        for (int64_t j = 0; j < sum.dim(3); ++j)
          sum.at(n, h, i, j) = a.at(std::min(n, a.dim(0) - 1), std::min(h, a.dim(1) - 1), i, j) +
                               b.at(std::min(n, b.dim(0) - 1), std::min(h, b.dim(1) - 1), i, j);
  return sum;
}

} // namespace

bool Interpreter::attention(attn::AttentionOp op, int64_t seqLen, ref::Tensor &out) {
  ref::Tensor q = tensor(op.getQuery()), k = tensor(op.getKey());
  int64_t sq = q.dim(2), skv = k.dim(2);
  ref::AttentionOptions options;
  options.scale = op.getEffectiveScale();
  options.causal = op.getCausal();
  if (mlir::IntegerAttr window = op.getWindowAttr())
    options.window = window.getInt();
  if (mlir::IntegerAttr right = op.getWindowRightAttr())
    options.windowRight = right.getInt();
  if (mlir::FloatAttr softcap = op.getSoftcapAttr())
    options.softcap = softcap.getValueAsDouble();
  std::optional<ref::Tensor> bias, keyTerm;
  if (op.getBias())
    bias = tensor(op.getBias());
  // Each fused encoding brings its float64 semantics through its
  // interface; its operands are the next of encoding_operands. The
  // position ids (defaults filled in) serve QK transforms and encodings
  // that measure distance by position.
  std::optional<ref::PositionIds> qIds = ids(op, op.getQueryPositions(), false, sq, skv);
  std::optional<ref::PositionIds> kIds = ids(op, op.getKeyPositions(), true, sq, skv);
  if (!qIds || !kIds)
    return false;
  unsigned nextOperand = 0;
  for (mlir::Attribute attr : op.getEncodingsAttr() ? op.getEncodingsAttr().getValue()
                                                    : llvm::ArrayRef<mlir::Attribute>()) {
    auto encoding = mlir::cast<pe::PositionalEncodingAttrInterface>(attr);
    pe::ReferenceAttention context{q.dim(0), q.dim(1), sq, skv, {}};
    context.queryPositions = &*qIds;
    context.keyPositions = &*kIds;
    for (unsigned k = 0; k < encoding.getNumEncodingOperands(); ++k)
      context.operands.push_back(&tensor(op.getEncodingOperands()[nextOperand++]));
    switch (encoding.getEncodingKind()) {
    case pe::EncodingKind::QKTransform: {
      std::string problem;
      if ((encoding.transformsQuery() &&
           !encoding.applyReferenceQKTransform(q, *qIds, omitted(op.getQueryPositions()), seqLen,
                                               context.operands, problem)) ||
          (encoding.transformsKey() &&
           !encoding.applyReferenceQKTransform(k, *kIds, omitted(op.getKeyPositions()), seqLen,
                                               context.operands, problem)))
        return fail(op, problem);
      break;
    }
    case pe::EncodingKind::ScoreBias: {
      if (encoding.isKeyTerm()) {
        context.query = &q;
        keyTerm = encoding.referenceKeyTerm(context);
        break;
      }
      ref::Tensor b = encoding.referenceScoreBias(context);
      if (!b.data.empty())
        bias = bias ? addBias(*bias, b) : b;
      break;
    }
    case pe::EncodingKind::ValueTerm:
      options.bucketedValueTerm = encoding.referenceValueTerm(context);
      if (!options.bucketedValueTerm)
        return fail(op, "fused value term " + str(attr) + " has no reference");
      break;
    default:
      return fail(op,
                  "fused encoding " + str(attr) + " is not supported by the reference interpreter");
    }
  }
  options.bias = bias ? &*bias : nullptr;
  options.keyTerm = op.getKeyTerm()       ? &tensor(op.getKeyTerm())
                    : keyTerm.has_value() ? &*keyTerm
                                          : nullptr;
  options.valueTerm = op.getValueTerm() ? &tensor(op.getValueTerm()) : nullptr;
  out = ref::attention(q, k, tensor(op.getValue()), options);
  return true;
}

/// attn.linear_attention: its fused RoPE (if any) rotates at the ids
/// (defaults filled in) where its placement says.
bool Interpreter::linearAttention(attn::LinearAttentionOp op, int64_t seqLen, ref::Tensor &out) {
  const ref::Tensor &q = tensor(op.getQuery()), &k = tensor(op.getKey());
  int64_t sq = q.dim(2), skv = k.dim(2);
  std::optional<ref::PositionIds> qIds = ids(op, op.getQueryPositions(), false, sq, skv);
  std::optional<ref::PositionIds> kIds = ids(op, op.getKeyPositions(), true, sq, skv);
  if (!qIds || !kIds)
    return false;
  ref::LinearAttentionOptions options;
  options.map = static_cast<ref::FeatureMap>(op.getFeatureMap());
  options.causal = op.getCausal();
  options.ropeOnNumerator = op.getRopePlacement() == attn::RopePlacement::OnNumerator;
  if (op.getState())
    options.state = &tensor(op.getState());
  pe::PositionalEncodingAttrInterface rope = op.getFusedQKTransform();
  std::vector<const ref::Tensor *> ropeOperands;
  for (mlir::Value operand : op.getEncodingOperands())
    ropeOperands.push_back(&tensor(operand));
  std::string problem;
  std::function<void(ref::Tensor &, bool)> rotate;
  if (rope)
    rotate = [&](ref::Tensor &x, bool isKey) {
      mlir::Value positions = isKey ? op.getKeyPositions() : op.getQueryPositions();
      if (problem.empty())
        rope.applyReferenceQKTransform(x, isKey ? *kIds : *qIds, omitted(positions), seqLen,
                                       ropeOperands, problem);
    };
  out = ref::linearAttention(q, k, tensor(op.getValue()), options, rotate);
  if (!problem.empty())
    return fail(op, problem);
  return true;
}

/// A pe op through its interface: operands as tensors or as ids (the
/// defaults filled in), the semantics its own files define.
bool Interpreter::evaluateEncoding(pe::PositionalEncodingOpInterface op, int64_t seqLen,
                                   ref::Tensor &result) {
  pe::ReferenceOpArgs args;
  args.seqLen = seqLen;
  std::vector<std::optional<ref::PositionIds>> resolved(op->getNumOperands());
  for (auto [n, operand] : llvm::enumerate(op->getOperands())) {
    bool isIds = mlir::isa<mlir::IntegerType>(
        mlir::cast<mlir::RankedTensorType>(operand.getType()).getElementType());
    args.tensors.push_back(isIds ? nullptr : &tensor(operand));
    if (isIds) {
      resolved[n] = opIds(op, operand);
      if (!resolved[n])
        return false;
      args.idsOmitted = args.idsOmitted || omitted(operand);
    }
    args.ids.push_back(resolved[n] ? &*resolved[n] : nullptr);
  }
  // A materialized term (a bias, ...) is sized by its result's dims: the
  // type's, with `?` lengths from the attention it feeds. An additive
  // embedding's result is its input's shape.
  if (!op.getTransformedInput() && op.getEncodingKind() != pe::EncodingKind::Additive &&
      op->getNumResults() == 1) {
    auto type = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    args.resultShape = resultDims(op->getResult(0));
    if (llvm::is_contained(args.resultShape, mlir::ShapedType::kDynamic))
      return fail(op, "its result " + str(type) +
                          " has `?` dims that no attention it feeds sizes; give it static "
                          "lengths (docs/shape-classes.md)");
  }
  std::string problem;
  if (!op.evaluateReference(args, result, problem))
    return fail(op, problem);
  return true;
}

/// pe.embed: rows of the table at the tokens, scaled; a token outside
/// the table is the caller's error.
bool Interpreter::embed(pe::EmbedOp op, ref::Tensor &result) {
  auto tokens = values.find(op.getTokens());
  if (tokens == values.end() || tokens->second.kind != Val::Ids)
    return fail(op, "its tokens must be an argument of the function");
  const ref::Tensor &table = tensor(op.getTable());
  for (size_t i = 0; i < tokens->second.ids.data.size(); ++i) {
    int64_t token = tokens->second.ids.data[i];
    if (token < 0 || token >= table.dim(0))
      return fail(op, "token " + std::to_string(token) + " at flat index " + std::to_string(i) +
                          " is outside the table's " + std::to_string(table.dim(0)) + " rows");
  }
  result = ref::tokenEmbedding(tokens->second.ids, table, op.getScale().convertToDouble());
  return true;
}

/// pe.embed_grad: rows of grad summed by id into the table's shape; an id
/// outside the table is the caller's error.
bool Interpreter::embedGrad(pe::EmbedGradOp op, ref::Tensor &result) {
  auto ids = values.find(op.getIds());
  if (ids == values.end() || ids->second.kind != Val::Ids)
    return fail(op, "its ids must be an argument of the function");
  int64_t rows = mlir::cast<mlir::RankedTensorType>(op.getResult().getType()).getDimSize(0);
  for (size_t i = 0; i < ids->second.ids.data.size(); ++i) {
    int64_t id = ids->second.ids.data[i];
    if (id < 0 || id >= rows)
      return fail(op, "id " + std::to_string(id) + " at flat index " + std::to_string(i) +
                          " is outside the table's " + std::to_string(rows) + " rows");
  }
  result = ref::embeddingGradient(tensor(op.getGrad()), ids->second.ids, rows,
                                  op.getScale().convertToDouble());
  return true;
}

/// pe.rope_scale_grad: the op's own reference (its rope's files).
bool Interpreter::ropeScaleGrad(pe::RopeScaleGradOp op, int64_t seqLen, ref::Tensor &result) {
  auto ids = values.find(op.getPositions());
  if (ids == values.end() || ids->second.kind != Val::Ids)
    return fail(op, "its positions must be an argument of the function");
  std::string problem;
  if (!op.evaluateReference(tensor(op.getGrad()), tensor(op.getInput()), ids->second.ids,
                            tensor(op.getPositionScale()), seqLen, result, problem))
    return fail(op, problem);
  return true;
}

/// pe.score_bias_grad: the encoding's own reference adjoint (its files).
bool Interpreter::scoreBiasGrad(pe::ScoreBiasGradOp op, ref::Tensor &result) {
  auto encoding = mlir::cast<pe::PositionalEncodingAttrInterface>(op.getEncoding());
  const ref::Tensor &dbias = tensor(op.getBiasGrad());
  pe::ReferenceAttention context{dbias.dim(0), dbias.dim(1), dbias.dim(2), dbias.dim(3), {}};
  for (mlir::Value operand : op.getEncodingOperands())
    context.operands.push_back(&tensor(operand));
  result = encoding.referenceScoreBiasGradient(context, dbias, 0);
  if (result.data.empty())
    return fail(op, "encoding " + str(op.getEncoding()) + " has no reference gradient");
  return true;
}

} // namespace pejit::interp
