// Verifier of attn.attention: the shape contract between Q, K, V, the result
// and the optional terms, with messages that name the mismatch.
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include <cmath>

using namespace mlir;
using namespace pejit;
using namespace pejit::attn;

double AttentionOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(static_cast<double>(dim(getQuery(), 3)));
}

LogicalResult pejit::attn::verifyQueryKeyValue(Operation *op, Value q, Value k, Value v,
                                               Value result, StringRef resultName) {
  if (failed(requireRank(op, "query", q.getType(), 4, "[b, hq, sq, d]")) ||
      failed(requireRank(op, "key", k.getType(), 4, "[b, hkv, skv, d]")) ||
      failed(requireRank(op, "value", v.getType(), 4, "[b, hkv, skv, dv]")) ||
      failed(requireRank(op, resultName, result.getType(), 4, "[b, hq, sq, dv]")))
    return failure();

  using limits::kMaxHeadDim, limits::kMaxHeads, limits::kMaxLength;
  const DimLimit queryLimits[] = {
      {"b", kMaxLength}, {"hq", kMaxHeads}, {"sq", kMaxLength}, {"d", kMaxHeadDim}};
  const DimLimit keyLimits[] = {
      {"b", kMaxLength}, {"hkv", kMaxHeads}, {"skv", kMaxLength}, {"d", kMaxHeadDim}};
  const DimLimit valueLimits[] = {
      {"b", kMaxLength}, {"hkv", kMaxHeads}, {"skv", kMaxLength}, {"dv", kMaxHeadDim}};
  const DimLimit resultLimits[] = {
      {"b", kMaxLength}, {"hq", kMaxHeads}, {"sq", kMaxLength}, {"dv", kMaxHeadDim}};
  if (failed(requireSizesWithinLimits(op, "query", q.getType(), queryLimits)) ||
      failed(requireSizesWithinLimits(op, "key", k.getType(), keyLimits)) ||
      failed(requireSizesWithinLimits(op, "value", v.getType(), valueLimits)) ||
      failed(requireSizesWithinLimits(op, resultName, result.getType(), resultLimits)))
    return failure();

  Type elementType = cast<RankedTensorType>(q.getType()).getElementType();
  for (auto [name, value] : {std::pair<StringRef, Value>{"key", k}, {"value", v}})
    if (cast<RankedTensorType>(value.getType()).getElementType() != elementType)
      return op->emitOpError() << name << " element type "
                               << cast<RankedTensorType>(value.getType()).getElementType()
                               << " does not match query element type " << elementType;

  int64_t b = dim(q, 0), hq = dim(q, 1), sq = dim(q, 2), d = dim(q, 3);
  int64_t hkv = dim(k, 1), skv = dim(k, 2), dv = dim(v, 3);
  if (failed(requireDim(op, "key", k.getType(), 0, "b", b, "the query's b")) ||
      failed(requireDim(op, "key", k.getType(), 3, "d", d, "the query's d")) ||
      failed(requireDim(op, "value", v.getType(), 0, "b", b, "the query's b")) ||
      failed(requireDim(op, "value", v.getType(), 1, "hkv", hkv, "the key's hkv")) ||
      failed(requireDim(op, "value", v.getType(), 2, "skv", skv, "the key's skv")))
    return failure();
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) && (hkv == 0 || hq % hkv != 0))
    return op->emitOpError() << "hq (" << hq << ") is not a multiple of hkv (" << hkv << ")";
  Type resultType = result.getType();
  if (failed(requireDim(op, resultName, resultType, 0, "b", b, "the query's b")) ||
      failed(requireDim(op, resultName, resultType, 1, "hq", hq, "the query's hq")) ||
      failed(requireDim(op, resultName, resultType, 2, "sq", sq, "the query's sq")) ||
      failed(requireDim(op, resultName, resultType, 3, "dv", dv, "the value's dv")))
    return failure();

  return success();
}

LogicalResult pejit::attn::verifyQueryKeyPositions(Operation *op, Value queryPositions,
                                                   Value keyPositions, int64_t batch,
                                                   int64_t querySeq, int64_t keySeq, int64_t axes) {
  if (queryPositions && failed(verifyPositionIds(op, "query_positions", queryPositions.getType(),
                                                 batch, querySeq, axes)))
    return failure();
  if (keyPositions &&
      failed(verifyPositionIds(op, "key_positions", keyPositions.getType(), batch, keySeq, axes)))
    return failure();
  return success();
}

LogicalResult pejit::attn::verifyScaleWindowSoftcap(Operation *op, FloatAttr scaleAttr,
                                                    int64_t headDim, std::optional<int64_t> window,
                                                    std::optional<int64_t> right,
                                                    FloatAttr softcapAttr) {
  // scale and softcap are f32 constants in the kernels.
  auto requirePositiveF32 = [&](StringRef name, double value) -> LogicalResult {
    StringRef problem = limits::f32RangeProblem(value);
    if (value > 0.0 && problem.empty())
      return success();
    InFlightDiagnostic diag = op->emitOpError() << name << " must be positive and an f32, got "
                                                << pe::formatF64(value);
    if (!problem.empty())
      diag << " (" << problem << ")";
    return diag;
  };
  if (scaleAttr) {
    if (failed(requirePositiveF32("scale", scaleAttr.getValueAsDouble())))
      return failure();
  } else if (ShapedType::isDynamic(headDim)) {
    return op->emitOpError() << "scale is required when the head dim d is dynamic";
  }
  if (window && *window < 0)
    return op->emitOpError() << "window must be non-negative, got " << *window;
  if (right && *right < 0)
    return op->emitOpError() << "window_right must be non-negative, got " << *right
                             << " (leave it out for no right bound)";
  if (softcapAttr)
    if (failed(requirePositiveF32("softcap", softcapAttr.getValueAsDouble())))
      return failure();
  return success();
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  Value q = getQuery(), k = getKey();
  if (failed(verifyQueryKeyValue(op, q, k, getValue(), getResult())))
    return failure();
  int64_t b = dim(q, 0), hq = dim(q, 1), sq = dim(q, 2), skv = dim(k, 2);
  int64_t d = dim(q, 3), dv = dim(getValue(), 3);

  // M-RoPE's ids have a leading axis per section (its QK transform says).
  pe::PositionalEncodingAttrInterface transform = getFusedQKTransform();
  int64_t axes = transform ? transform.getPositionAxes() : 0;
  if (failed(verifyQueryKeyPositions(op, getQueryPositions(), getKeyPositions(), b, sq, skv, axes)))
    return failure();
  // The optional tensors' dims equal the checked ones above (or are 1), but
  // a bias [b, hq, sq, skv] can still exceed the element limit.
  for (auto [name, value] : {std::pair<StringRef, Value>{"bias", getBias()},
                             {"key_term", getKeyTerm()},
                             {"value_term", getValueTerm()}})
    if (value && failed(requireSizesWithinLimits(op, name, value.getType(), {})))
      return failure();

  if (Value bias = getBias()) {
    if (failed(requireRank(op, "bias", bias.getType(), 4, "[1|b, 1|hq, sq, skv]")))
      return failure();
    if (dim(bias, 0) != 1 &&
        failed(requireDim(op, "bias", bias.getType(), 0, "b", b, "the query's b (or 1)")))
      return failure();
    if (dim(bias, 1) != 1 &&
        failed(requireDim(op, "bias", bias.getType(), 1, "h", hq, "the query's hq (or 1)")))
      return failure();
    if (failed(requireDim(op, "bias", bias.getType(), 2, "sq", sq, "the query's sq")) ||
        failed(requireDim(op, "bias", bias.getType(), 3, "skv", skv, "the key's skv")))
      return failure();
    // `?` lengths (a shape class) need `?` here: a bias of one length would
    // be read past its end at a longer call.
    for (auto [index, length, name] :
         {std::tuple<unsigned, int64_t, StringRef>{2, sq, "sq"}, {3, skv, "skv"}})
      if (ShapedType::isDynamic(length) && !ShapedType::isDynamic(dim(bias, index)))
        return emitOpError() << "bias " << name << " (dim " << index << ") is " << dim(bias, index)
                             << " but the attention's " << name
                             << " is ? (each call's): write ? there too";
  }
  if (Value term = getKeyTerm()) {
    if (failed(requireRank(op, "key_term", term.getType(), 4, "[b, hq, sq, skv]")))
      return failure();
    int64_t expected[] = {b, hq, sq, skv};
    const char *names[] = {"b", "hq", "sq", "skv"};
    for (unsigned i = 0; i < 4; ++i)
      if (failed(requireDim(op, "key_term", term.getType(), i, names[i], expected[i],
                            "the attention's")))
        return failure();
  }
  if (Value term = getValueTerm()) {
    // [sq, skv, dv], or [hq, sq, skv, dv] from per-head tables.
    auto type = cast<RankedTensorType>(term.getType());
    unsigned lead = type.getRank() == 4 ? 1 : 0;
    if (type.getRank() != 3 && type.getRank() != 4)
      return emitOpError() << "value_term must be [sq, skv, dv] or [hq, sq, skv, dv], got " << type;
    if ((lead && failed(requireDim(op, "value_term", type, 0, "hq", hq, "the query's heads"))) ||
        failed(requireDim(op, "value_term", type, lead, "sq", sq, "the query's sq")) ||
        failed(requireDim(op, "value_term", type, lead + 1, "skv", skv, "the key's skv")) ||
        failed(requireDim(op, "value_term", type, lead + 2, "dv", dv, "the value's dv")))
      return failure();
  }

  // The training forward's row log-sum-exp: [b, hq, sq] f32.
  if (Value lse = getLse()) {
    if (failed(requireRank(op, "lse", lse.getType(), 3, "[b, hq, sq]")))
      return failure();
    int64_t expected[] = {b, hq, sq};
    const char *names[] = {"b", "hq", "sq"};
    for (unsigned i = 0; i < 3; ++i)
      if (failed(requireDim(op, "lse", lse.getType(), i, names[i], expected[i], "the query's")))
        return failure();
  }

  if (failed(verifyScaleWindowSoftcap(op, getScaleAttr(), d, getWindow(), getWindowRight(),
                                      getSoftcapAttr())))
    return failure();
  if (failed(verifySegments()))
    return failure();
  return verifyEncodings();
}

// Packed sequences: one batch row holds them all, and each sequence's
// lengths are its own, so the kernel's must be `?`.
LogicalResult AttentionOp::verifySegments() {
  bool paged = getKey().getDefiningOp<PagedKvOp>() || getValue().getDefiningOp<PagedKvOp>();
  return verifySegmentsAndLengths(getOperation(), getQuery(), getKey(), getQuerySegments(),
                                  getKeySegments(), getKeyLengths(), paged, getQueryPositions(),
                                  getKeyPositions(), getEncodingsAttr());
}

LogicalResult pejit::attn::verifySegmentsAndLengths(Operation *op, Value q, Value k, Value cuQ,
                                                    Value cuK, Value lengths, bool paged,
                                                    Value queryPositions, Value keyPositions,
                                                    ArrayAttr encodings) {
  auto emitOpError = [&]() { return op->emitOpError(); };
  if (lengths) {
    if (cuQ)
      return emitOpError() << "takes segments or key_lengths, not both: a packed sequence's "
                              "key length is already its segment's";
    int64_t b = dim(q, 0), n = dim(lengths, 0);
    if (!ShapedType::isDynamic(b) && !ShapedType::isDynamic(n) && b != n)
      return emitOpError() << "key_lengths has " << n << " entries but the batch b is " << b
                           << ": one per batch row";
    // Each row runs at its own length: a kernel of one skv would not.
    if (!ShapedType::isDynamic(dim(k, 2)))
      return emitOpError() << "key_lengths: the key's skv (dim 2) must be ? (each row's length is "
                              "its own, at most the capacity the call's K has), got "
                           << dim(k, 2);
  }
  // Each row runs alone (key_lengths, or a paged K that the runtime reads
  // row by row): the position ids are the batch's, one set for every row.
  if (lengths || paged)
    for (auto [name, positions] : {std::pair<StringRef, Value>{"query_positions", queryPositions},
                                   {"key_positions", keyPositions}}) {
      // [s] ids, or [A, s] with a leading axis per section.
      pe::PositionalEncodingAttrInterface transform = fusedQKTransform(encodings);
      int64_t sharedRank = transform && transform.getPositionAxes() > 0 ? 2 : 1;
      if (positions && cast<RankedTensorType>(positions.getType()).getRank() != sharedRank)
        return emitOpError() << "with " << (lengths ? "key_lengths" : "a paged K or V") << ", "
                             << name
                             << " must be shared by the batch (per-row ids are not supported "
                                "yet), got "
                             << positions.getType();
    }
  if (!cuQ)
    return success();
  int64_t nq = dim(cuQ, 0), nk = dim(cuK, 0);
  for (auto [name, n] : {std::pair<StringRef, int64_t>{"query", nq}, {"key", nk}})
    if (!ShapedType::isDynamic(n) && n < 2)
      return emitOpError() << "segments: the " << name
                           << " offsets must have n + 1 >= 2 entries (one sequence at least), got "
                           << n;
  if (!ShapedType::isDynamic(nq) && !ShapedType::isDynamic(nk) && nq != nk)
    return emitOpError() << "segments: " << nq << " query offsets but " << nk
                         << " key offsets (both are n + 1 for n sequences)";
  if (dim(q, 0) != 1)
    return emitOpError() << "segments pack the sequences into one batch row: the query's b "
                            "(dim 0) must be 1, got "
                         << (ShapedType::isDynamic(dim(q, 0)) ? std::string("?")
                                                              : std::to_string(dim(q, 0)));
  for (auto [name, value, length] :
       {std::tuple<StringRef, Value, StringRef>{"query", q, "sq"}, {"key", k, "skv"}})
    if (!ShapedType::isDynamic(dim(value, 2)))
      return emitOpError() << "segments: the " << name << "'s " << length
                           << " (dim 2) must be ? (each sequence's length is its own), got "
                           << dim(value, 2);
  return success();
}

pe::PositionalEncodingAttrInterface AttentionOp::getFusedQKTransform() {
  return fusedQKTransform(getEncodingsAttr());
}

pe::PositionalEncodingAttrInterface pejit::attn::fusedQKTransform(ArrayAttr encodings) {
  // dyn_cast: the verifier asks before it has checked every entry.
  if (encodings)
    for (Attribute attr : encodings)
      if (auto encoding = dyn_cast<pe::PositionalEncodingAttrInterface>(attr);
          encoding && encoding.getEncodingKind() == pe::EncodingKind::QKTransform)
        return encoding;
  return nullptr;
}

// The fused encodings: pe attributes of a kind attention can apply, at most
// one QK transform, each valid for this attention's heads and head dim.
LogicalResult AttentionOp::verifyEncodings() {
  return verifyFusedEncodings(getOperation(), getEncodingsAttr(), getEncodingOperands(), getQuery(),
                              getKey(), getValue(), getQueryPositions(), getKeyPositions());
}

LogicalResult pejit::attn::verifyFusedEncodings(Operation *op, ArrayAttr encodings,
                                                ValueRange encodingOperands, Value query, Value key,
                                                Value value, Value queryPositions,
                                                Value keyPositions) {
  auto emitOpError = [&]() { return op->emitOpError(); };
  if (!encodings) {
    if (!encodingOperands.empty())
      return emitOpError() << "has " << encodingOperands.size()
                           << " encoding_operands but no encodings that read them";
    return success();
  }
  int64_t queryHeads = dim(query, 1), headDim = dim(query, 3);
  // The sizes an encoding operand is checked against (dynamic: kDynamic).
  pe::AttentionShape sizes;
  sizes.batch = dim(query, 0);
  sizes.queryHeads = queryHeads;
  sizes.kvHeads = dim(key, 1);
  sizes.querySeq = dim(query, 2);
  sizes.keySeq = dim(key, 2);
  sizes.headDim = headDim;
  sizes.valueDim = dim(value, 3);
  // Batch rows of each side's ids: [b, s] (or [A, b, s] with axes) have b;
  // [s], [A, s] and the defaults one.
  pe::PositionalEncodingAttrInterface transform = fusedQKTransform(encodings);
  int64_t batchRank = transform && transform.getPositionAxes() > 0 ? 3 : 2;
  auto idRows = [&](Value ids) -> int64_t {
    auto type = ids ? dyn_cast<RankedTensorType>(ids.getType()) : RankedTensorType();
    return type && type.getRank() == batchRank ? type.getDimSize(batchRank - 2) : 1;
  };
  sizes.queryPositionRows = idRows(queryPositions);
  sizes.keyPositionRows = idRows(keyPositions);
  unsigned nextOperand = 0;
  int numQKTransforms = 0, numValueTerms = 0;
  for (auto [index, attr] : llvm::enumerate(encodings)) {
    auto encoding = dyn_cast<pe::PositionalEncodingAttrInterface>(attr);
    if (!encoding)
      return emitOpError() << "encodings[" << index << "] (" << attr
                           << ") is not a positional encoding attribute";
    pe::EncodingKind kind = encoding.getEncodingKind();
    if (kind == pe::EncodingKind::Additive)
      return emitOpError() << "encodings[" << index << "] (" << attr
                           << ") is additive: it applies to embeddings, not attention";
    if (kind == pe::EncodingKind::QKTransform && ++numQKTransforms > 1)
      return emitOpError() << "encodings[" << index
                           << "] is a second QK transform; at most one is allowed";
    if (encoding.getValueTermBuckets() > 0 && ++numValueTerms > 1)
      return emitOpError() << "encodings[" << index
                           << "] is a second value term; at most one is allowed";
    if (kind == pe::EncodingKind::ValueTerm && encoding.getValueTermBuckets() <= 0)
      return emitOpError() << "encodings[" << index << "] (" << attr
                           << ") is a value term without a fused form";
    auto emitError = [&, index = index]() {
      return op->emitOpError() << "encodings[" << index << "]: ";
    };
    if (failed(encoding.verifyForAttention(queryHeads, headDim, emitError)))
      return failure();
    // Its operands: the next getNumEncodingOperands() of encoding_operands.
    for (unsigned k = 0; k < encoding.getNumEncodingOperands(); ++k, ++nextOperand) {
      if (nextOperand >= encodingOperands.size())
        return emitOpError() << "encodings[" << index << "] (" << attr << ") reads "
                             << encoding.getNumEncodingOperands()
                             << " encoding operand(s), but encoding_operands has only "
                             << encodingOperands.size() << " in all";
      auto type = cast<RankedTensorType>(encodingOperands[nextOperand].getType());
      auto operandError = [&, index = index, k]() {
        return op->emitOpError() << "encoding_operands #" << nextOperand << " ("
                                 << encoding.getEncodingOperandName(k) << " of encodings[" << index
                                 << "]): ";
      };
      if (failed(encoding.verifyEncodingOperand(k, type, sizes, operandError)))
        return failure();
    }
  }
  if (nextOperand != encodingOperands.size())
    return emitOpError() << "has " << encodingOperands.size()
                         << " encoding_operands but its encodings read " << nextOperand;
  // relative_to = position reads plain [s] / [b, s] ids: not M-RoPE's axes.
  for (auto [index, attr] : llvm::enumerate(encodings))
    if (cast<pe::PositionalEncodingAttrInterface>(attr).readsPositions() && transform &&
        transform.getPositionAxes() > 0)
      return emitOpError() << "encodings[" << index << "] (" << attr
                           << ") measures distance by position, but the position ids have "
                           << transform.getPositionAxes() << " axes (from " << transform
                           << "): relative_to = position needs [s] or [b, s] ids";
  return success();
}

#include "pejit/dialects/attn/AttnEnums.cpp.inc"

#define GET_OP_CLASSES
#include "pejit/dialects/attn/AttnOps.cpp.inc"

LogicalResult pejit::attn::QKPrologueOp::verify() {
  if (static_cast<bool>(getRowBegin()) != static_cast<bool>(getRowStep()))
    return emitOpError("rows(begin, step) needs both operands");
  return success();
}

LogicalResult pejit::attn::QKTransformOp::verify() {
  auto tile = cast<MemRefType>(getTile().getType());
  if (tile.getRank() != 2)
    return emitOpError("tile must be a 2-D memref [rows, d], got ") << tile;
  if (static_cast<bool>(getQueryLength()) != static_cast<bool>(getKeyLength()))
    return emitOpError("lengths(query, key) needs both operands");
  if (!getSource())
    return success();
  auto source = cast<MemRefType>(getSource().getType());
  if (source.getRank() != 2)
    return emitOpError("source must be a 2-D memref [rows, d], got ") << source;
  if (!isa<FloatType>(source.getElementType()) || !isa<FloatType>(tile.getElementType()))
    return emitOpError("source and tile must hold floats");
  int64_t sourceWidth = source.getDimSize(1), tileWidth = tile.getDimSize(1);
  if (!ShapedType::isDynamic(sourceWidth) && !ShapedType::isDynamic(tileWidth) &&
      sourceWidth != tileWidth)
    return emitOpError("source rows have ")
           << sourceWidth << " elements but tile rows " << tileWidth;
  return success();
}

LogicalResult pejit::attn::QKTransformGradOp::verify() {
  for (auto [value, name] :
       {std::pair<Value, const char *>{getGrad(), "grad"}, {getTransformed(), "transformed"}}) {
    auto type = cast<MemRefType>(value.getType());
    if (type.getRank() != 2 || !type.getElementType().isF32())
      return emitOpError() << name << " must be a 2-D f32 memref [rows, d], got " << type;
  }
  if (static_cast<bool>(getQueryLength()) != static_cast<bool>(getKeyLength()))
    return emitOpError("lengths(query, key) needs both operands");
  return success();
}

LogicalResult pejit::attn::ScoreModOp::verify() {
  // Lane l of the indices names lane l of the scores: one shape for all.
  auto lanes = [](Type type) -> int64_t {
    auto vector = dyn_cast<VectorType>(type);
    return vector ? vector.getNumElements() : 0;
  };
  if (lanes(getScore().getType()) != lanes(getQueryIndex().getType()))
    return emitOpError("query_index and key_index (")
           << getQueryIndex().getType() << ") must have the lanes of score ("
           << getScore().getType() << ")";
  if (static_cast<bool>(getTileScratch()) != static_cast<bool>(getTileStart()))
    return emitOpError("tile(scratch, start) needs both operands");
  if (static_cast<bool>(getQueryPositions()) != static_cast<bool>(getKeyPositions()))
    return emitOpError("positions(query, key) needs both operands");
  if (static_cast<bool>(getQueryLength()) != static_cast<bool>(getKeyLength()))
    return emitOpError("lengths(query, key) needs both operands");
  return success();
}
