// expandHooks (TemplateSupport.h): the template's hook ops become what the
// fused encodings emit through PositionalEncodingAttrInterface.
#include "pejit/compiler/passes/TemplateSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/TileCopy.h"

using namespace mlir;

namespace pejit {

namespace {

/// The position ids of rows `index` (i32 lanes or a scalar) of batch
/// `batch`: positions[b or 0, clamp(index, 0, s - 1)] as i64 of index's
/// shape. Padding lanes past s read the last id (their scores are masked).
/// Without a positions memref, the default ids: index + offset (an i32
/// scalar: skv - sq for queries, 0 for keys).
/// Lanes of one row (a broadcast index: the key of 8 query rows) take one
/// scalar load; lanes the template states are consecutive (index[0] + l)
/// take one vector load when all lie inside the sequence. Else a gather.
Value loadPositions(OpBuilder &b, Location loc, Value positions, Value batch, Value index,
                    Value defaultOffset, bool consecutive) {
  Type i64 = pe::typeLike(index, b.getI64Type());
  if (!positions) {
    Value shifted =
        arith::AddIOp::create(b, loc, index, pe::broadcastLike(b, loc, index, defaultOffset));
    return arith::ExtSIOp::create(b, loc, i64, shifted);
  }
  auto type = cast<MemRefType>(positions.getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value row = type.getDimSize(0) == 1 ? zero : batch;
  // The call's sequence length (the memref's, static or not) as i32.
  Value seq = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                         memref::DimOp::create(b, loc, positions, 1));
  // clamp(v, 0, s - 1), for lanes or a scalar.
  auto clampToSequence = [&](Value v) -> Value {
    Value low = arith::MaxSIOp::create(b, loc, v, pe::constantLike(b, loc, v, 0.0));
    Value last = arith::SubIOp::create(b, loc, seq,
                                       arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1)));
    return arith::MinSIOp::create(b, loc, low, pe::broadcastLike(b, loc, v, last));
  };
  auto lanes = dyn_cast<VectorType>(index.getType());
  auto loadAt = [&](Value scalarIndex) -> Value {
    Value at = arith::IndexCastOp::create(b, loc, b.getIndexType(), scalarIndex);
    return memref::LoadOp::create(b, loc, positions, ValueRange{row, at});
  };
  if (!lanes)
    return loadAt(clampToSequence(index));
  if (auto uniform = index.getDefiningOp<vector::BroadcastOp>();
      uniform && !isa<VectorType>(uniform.getSource().getType()))
    return vector::BroadcastOp::create(b, loc, i64, loadAt(clampToSequence(uniform.getSource())));
  Value clamped = clampToSequence(index);
  int64_t staticSeq = type.getDimSize(1);
  if (!consecutive || (!ShapedType::isDynamic(staticSeq) && staticSeq < lanes.getNumElements()))
    return pe::gatherLanes(b, loc, positions, ValueRange{row, zero}, clamped);
  // index[0] >= 0 here (the template's rows start at 0); with s < lanes no
  // index passes (s - lanes < 0).
  Value first = vector::ExtractOp::create(b, loc, index, ArrayRef<int64_t>{0});
  Value inside = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::sle, first,
      arith::SubIOp::create(
          b, loc, seq,
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(lanes.getNumElements()))));
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{i64}, inside, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value at = arith::IndexCastOp::create(b, loc, b.getIndexType(), first);
    scf::YieldOp::create(
        b, loc, vector::LoadOp::create(b, loc, i64, positions, ValueRange{row, at}).getResult());
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc,
                         pe::gatherLanes(b, loc, positions, ValueRange{row, zero}, clamped));
  }
  return ifOp.getResult(0);
}

/// point's positions, for an encoding that measures by them.
void setPositions(OpBuilder &b, Location loc, const pe::AttentionShape &shape,
                  pe::PositionalEncodingAttrInterface encoding, Value queryPositions,
                  Value keyPositions, pe::ScorePoint &point) {
  if (!encoding.readsPositions())
    return;
  Value offset = arith::IndexCastOp::create(
      b, loc, b.getI32Type(), arith::SubIOp::create(b, loc, point.keySeq, point.querySeq));
  point.queryPosition = loadPositions(b, loc, queryPositions, point.batch, point.queryIndex, offset,
                                      point.queryLanesConsecutive);
  point.keyPosition =
      loadPositions(b, loc, keyPositions, point.batch, point.keyIndex,
                    arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0)), false);
}

/// The call's (query, key) lengths at a hook: its lengths(...) operands, or
/// the attention's static lengths as constants. A template for a shape
/// class must pass them; failure (with an error on the hook) if it did not.
FailureOr<std::pair<Value, Value>> lengthsAt(OpBuilder &b, Operation *hook,
                                             const pe::AttentionShape &shape, Value queryLength,
                                             Value keyLength) {
  if (queryLength && keyLength)
    return std::pair{queryLength, keyLength};
  if (ShapedType::isDynamic(shape.querySeq) || ShapedType::isDynamic(shape.keySeq))
    return hook->emitError() << "the kernel's lengths are the call's (a `?` shape), but this hook "
                                "op has no lengths(%sq, %skv)";
  Location loc = hook->getLoc();
  return std::pair<Value, Value>{arith::ConstantIndexOp::create(b, loc, shape.querySeq),
                                 arith::ConstantIndexOp::create(b, loc, shape.keySeq)};
}

} // namespace

LogicalResult expandHooks(ModuleOp kernel, const pe::AttentionShape &shape,
                          ArrayRef<pe::PositionalEncodingAttrInterface> encodings,
                          std::optional<double> softcap) {
  // The QK transform (at most one: the verifier), the score biases, and
  // where each encoding's operands start among the score_mod's operands.
  // Each encoding's part of the query-tile scratch, at consecutive offsets.
  struct Placed {
    pe::PositionalEncodingAttrInterface encoding;
    unsigned firstOperand;
    int64_t tileOffset, tileFloats;
  };
  pe::PositionalEncodingAttrInterface qkTransform;
  unsigned qkFirstOperand = 0;
  SmallVector<Placed> scoreBiases;
  std::optional<Placed> valueTerm, keyTerm; // at most one each (the verifier)
  unsigned firstOperand = 0;
  int64_t tileOffset = 0;
  for (pe::PositionalEncodingAttrInterface encoding : encodings) {
    int64_t tileFloats = encoding.getQueryTileScratchFloats(shape);
    // An additive embedding is never fused into attention; in a standalone
    // kernel it takes the QK transform hooks (x + PE for its rows).
    if (encoding.getEncodingKind() == pe::EncodingKind::QKTransform ||
        encoding.getEncodingKind() == pe::EncodingKind::Additive) {
      qkTransform = encoding;
      qkFirstOperand = firstOperand;
    } else if (encoding.getEncodingKind() == pe::EncodingKind::ScoreBias) {
      scoreBiases.push_back({encoding, firstOperand, tileOffset, tileFloats});
      if (encoding.getKeyTermBuckets() > 0)
        keyTerm = scoreBiases.back();
    } else if (encoding.getValueTermBuckets() > 0)
      valueTerm = Placed{encoding, firstOperand, tileOffset, tileFloats};
    firstOperand += encoding.getNumEncodingOperands();
    tileOffset += tileFloats;
  }
  auto operandsOf = [](const Placed &placed, OperandRange all) {
    SmallVector<Value> operands;
    for (unsigned k = 0; k < placed.encoding.getNumEncodingOperands(); ++k)
      operands.push_back(all[placed.firstOperand + k]);
    return operands;
  };
  auto tilePart = [&](OpBuilder &b, Location loc, Value scratch, const Placed &placed) -> Value {
    return memref::SubViewOp::create(b, loc, scratch,
                                     ArrayRef<OpFoldResult>{b.getIndexAttr(placed.tileOffset)},
                                     ArrayRef<OpFoldResult>{b.getIndexAttr(placed.tileFloats)},
                                     ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  };
  OpBuilder b(kernel.getContext());
  SmallVector<Operation *> hooks;
  kernel.walk([&](Operation *hook) {
    if (isa<attn::QKPrologueOp, attn::QKTransformOp, attn::QKTransformGradOp, attn::ScoreModOp,
            attn::ScoreGradOp, attn::QueryTilePrologueOp, attn::ValueTermBucketOp,
            attn::ValueTermRowOp, attn::TermRowGradOp>(hook))
      hooks.push_back(hook);
  });
  // A prologue or transform hook that names its encoding ({encoding = k}:
  // a standalone kernel's chain) expands that one; else the QK transform.
  auto transformOf = [&](Operation *hook) -> FailureOr<pe::PositionalEncodingAttrInterface> {
    auto index = hook->getAttrOfType<IntegerAttr>("encoding");
    if (!index)
      return qkTransform;
    if (index.getInt() < 0 || index.getInt() >= static_cast<int64_t>(encodings.size()))
      return hook->emitError() << "names encoding " << index.getInt() << " of " << encodings.size();
    return encodings[index.getInt()];
  };
  // An adjoint's contribution to operand `slot` (among all the encodings'
  // operands): added to the work item's partial buffer at the slot's
  // offset, when its gradient is asked for (offset >= 0).
  auto addToPartial = [&](Location loc, Value partial, Value partialStart,
                          ArrayRef<int64_t> offsets, unsigned slot, const pe::GradContribution &c) {
    if (slot >= offsets.size() || offsets[slot] < 0)
      return;
    Value base = arith::AddIOp::create(b, loc, partialStart,
                                       arith::ConstantIndexOp::create(b, loc, offsets[slot]));
    Value at = arith::AddIOp::create(b, loc, base, c.index);
    // A vector value at a scalar index: consecutive elements from it.
    if (auto lanes = dyn_cast<VectorType>(c.value.getType())) {
      Value old = vector::LoadOp::create(b, loc, lanes, partial, ValueRange{at});
      Value sum = arith::AddFOp::create(b, loc, old, c.value);
      vector::StoreOp::create(b, loc, sum, partial, ValueRange{at});
      return;
    }
    Value old = memref::LoadOp::create(b, loc, partial, ValueRange{at});
    Value sum = arith::AddFOp::create(b, loc, old, c.value);
    memref::StoreOp::create(b, loc, sum, partial, ValueRange{at});
  };
  for (Operation *hook : hooks) {
    b.setInsertionPoint(hook);
    Location loc = hook->getLoc();
    FailureOr<pe::PositionalEncodingAttrInterface> hookTransform = transformOf(hook);
    if (failed(hookTransform))
      return failure();
    if (auto prologue = dyn_cast<attn::QKPrologueOp>(hook)) {
      pe::PositionalEncodingAttrInterface transformer = *hookTransform;
      // An attention's prologue passes every encoding's operands: the QK
      // transform's are its slice. One that names its encoding (a
      // standalone chain) passes that op's own.
      SmallVector<Value> operands = llvm::to_vector(prologue.getEncodingOperands());
      if (transformer && !prologue->hasAttr("encoding")) {
        unsigned count = transformer.getNumEncodingOperands();
        if (operands.size() < qkFirstOperand + count)
          return hook->emitError() << "the QK transform " << transformer << " reads " << count
                                   << " encoding operand(s), but the template's attn.qk_prologue "
                                      "passes none for it";
        operands = SmallVector<Value>(operands.begin() + qkFirstOperand,
                                      operands.begin() + qkFirstOperand + count);
      }
      if (transformer)
        transformer.emitQKPrologue(b, loc, shape,
                                   {prologue.getQueryPositions(), prologue.getKeyPositions(),
                                    prologue.getScratch(), prologue.getRowBegin(),
                                    prologue.getRowStep(), operands});
    } else if (auto transform = dyn_cast<attn::QKTransformOp>(hook)) {
      pe::PositionalEncodingAttrInterface transformer = *hookTransform;
      bool applies = transformer && (transform.getIsKey() ? transformer.transformsKey()
                                                          : transformer.transformsQuery());
      FailureOr<std::pair<Value, Value>> lengths =
          lengthsAt(b, hook, shape, transform.getQueryLength(), transform.getKeyLength());
      if (failed(lengths))
        return failure();
      pe::QKTileArgs tileArgs{
          transform.getTile(),   transform.getRows(),    transform.getSeqStart(),
          transform.getBatch(),  transform.getScratch(), transform.getIsKey(),
          transform.getSource(), lengths->first,         lengths->second};
      if (transform.getAdjoint()) {
        if (applies && !transformer.hasQKTransformAdjoint())
          return hook->emitError() << "the QK transform " << transformer
                                   << " has no adjoint (a backward cannot take it)";
        // From a source, the adjoint reads the gradient rows there, as the
        // forward reads its rows; with none to apply, they are only copied.
        if (applies)
          transformer.emitQKTileTransformAdjoint(b, loc, shape, tileArgs);
        else if (transform.getSource())
          pe::emitTileRowCopy(b, loc, transform.getSource(), transform.getTile(),
                              transform.getRows(), 0, shape.headDim, shape.vectorWidth);
      } else if (applies)
        transformer.emitQKTileTransform(b, loc, shape, tileArgs);
      else if (transform.getSource()) // no transform: the rows are only copied
        pe::emitTileRowCopy(b, loc, transform.getSource(), transform.getTile(), transform.getRows(),
                            0, shape.headDim, shape.vectorWidth);
    } else if (auto mod = dyn_cast<attn::ScoreModOp>(hook)) {
      // docs/semantics.md's order: key terms (inside the scale), softcap,
      // then the score biases.
      Value score = mod.getScore();
      FailureOr<std::pair<Value, Value>> lengths =
          lengthsAt(b, hook, shape, mod.getQueryLength(), mod.getKeyLength());
      if (failed(lengths))
        return failure();
      auto apply = [&](const Placed &bias) {
        pe::ScorePoint point{score, mod.getBatch(), mod.getHead(), mod.getQueryIndex(),
                             mod.getKeyIndex()};
        point.querySeq = lengths->first;
        point.keySeq = lengths->second;
        point.operands = operandsOf(bias, mod.getEncodingOperands());
        if (bias.tileFloats > 0 && mod.getTileScratch()) {
          point.tileScratch = tilePart(b, loc, mod.getTileScratch(), bias);
          point.tileStart = mod.getTileStart();
        }
        point.queryLanesConsecutive = mod.getConsecutiveQueries();
        setPositions(b, loc, shape, bias.encoding, mod.getQueryPositions(), mod.getKeyPositions(),
                     point);
        score = bias.encoding.emitScoreMod(b, loc, shape, point);
      };
      for (const Placed &bias : scoreBiases)
        if (bias.encoding.isKeyTerm())
          apply(bias);
      if (softcap)
        score = emitSoftcap(b, loc, score, *softcap);
      for (const Placed &bias : scoreBiases)
        if (!bias.encoding.isKeyTerm())
          apply(bias);
      mod.getResult().replaceAllUsesWith(score);
    } else if (auto grad = dyn_cast<attn::ScoreGradOp>(hook)) {
      // The score biases' adjoints: each contribution added to the partial
      // buffer at its operand's offset (docs/backward.md), in the order the
      // encodings and their contributions come.
      FailureOr<std::pair<Value, Value>> lengths =
          lengthsAt(b, hook, shape, grad.getQueryLength(), grad.getKeyLength());
      if (failed(lengths))
        return failure();
      ArrayRef<int64_t> offsets = grad.getOffsets();
      for (const Placed &bias : scoreBiases) {
        pe::ScorePoint point{nullptr, grad.getBatch(), grad.getHead(), grad.getQueryIndex(),
                             grad.getKeyIndex()};
        point.querySeq = lengths->first;
        point.keySeq = lengths->second;
        point.operands = operandsOf(bias, grad.getEncodingOperands());
        setPositions(b, loc, shape, bias.encoding, grad.getQueryPositions(), grad.getKeyPositions(),
                     point);
        for (const pe::GradContribution &c :
             bias.encoding.emitScoreModAdjoint(b, loc, shape, point, grad.getScoreGrad()))
          addToPartial(loc, grad.getPartial(), grad.getPartialStart(), offsets,
                       bias.firstOperand + c.operand, c);
      }
    } else if (auto grad = dyn_cast<attn::QKTransformGradOp>(hook)) {
      // The QK transform's operand adjoint, for the operands asked for.
      pe::PositionalEncodingAttrInterface transformer = *hookTransform;
      bool applies = transformer && (grad.getIsKey() ? transformer.transformsKey()
                                                     : transformer.transformsQuery());
      ArrayRef<int64_t> offsets = grad.getOffsets();
      if (applies) {
        pe::QKGradArgs args{grad.getGrad(),     grad.getTransformed(), grad.getRows(),
                            grad.getSeqStart(), grad.getBatch(),       grad.getPositions()};
        args.isKey = grad.getIsKey();
        unsigned count = transformer.getNumEncodingOperands();
        auto all = grad.getEncodingOperands();
        bool anyWanted = false;
        for (unsigned n = 0; n < count; ++n) {
          unsigned slot = qkFirstOperand + n;
          args.operands.push_back(slot < all.size() ? all[slot] : Value());
          args.wanted.push_back(slot < offsets.size() && offsets[slot] >= 0);
          anyWanted = anyWanted || args.wanted.back();
        }
        if (anyWanted)
          for (const pe::GradContribution &c :
               transformer.emitQKTransformOperandAdjoint(b, loc, shape, args))
            addToPartial(loc, grad.getPartial(), grad.getPartialStart(), offsets,
                         qkFirstOperand + c.operand, c);
      }
    } else if (auto bucket = dyn_cast<attn::ValueTermBucketOp>(hook)) {
      // No value term: every probability lands in bucket 0 of rows of zeros.
      // With `key`, the key term's bucket (a backward's).
      Value result = pe::constantLike(b, loc, bucket.getQueryIndex(), 0.0);
      std::optional<Placed> term = bucket.getKey() ? keyTerm : valueTerm;
      if (term) {
        FailureOr<std::pair<Value, Value>> lengths =
            lengthsAt(b, hook, shape, bucket.getQueryLength(), bucket.getKeyLength());
        if (failed(lengths))
          return failure();
        pe::ScorePoint point{nullptr, bucket.getBatch(), bucket.getHead(), bucket.getQueryIndex(),
                             bucket.getKeyIndex()};
        point.querySeq = lengths->first;
        point.keySeq = lengths->second;
        point.operands = operandsOf(*term, bucket.getEncodingOperands());
        setPositions(b, loc, shape, term->encoding, bucket.getQueryPositions(),
                     bucket.getKeyPositions(), point);
        result = bucket.getKey() ? term->encoding.emitKeyTermBucket(b, loc, shape, point)
                                 : term->encoding.emitValueTermBucket(b, loc, shape, point);
      }
      bucket.getResult().replaceAllUsesWith(result);
    } else if (auto row = dyn_cast<attn::ValueTermRowOp>(hook)) {
      auto vector = dyn_cast<VectorType>(row.getType());
      std::optional<Placed> term = row.getKey() ? keyTerm : valueTerm;
      Value result;
      if (term) {
        pe::ValueTermRowArgs args{row.getBatch(),
                                  row.getHead(),
                                  row.getBucket(),
                                  row.getChannel(),
                                  operandsOf(*term, row.getEncodingOperands()),
                                  vector ? vector.getNumElements() : 1};
        result = row.getKey() ? term->encoding.emitKeyTermRow(b, loc, shape, args)
                              : term->encoding.emitValueTermRow(b, loc, shape, args);
      } else
        result = arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(row.getType())));
      row.getResult().replaceAllUsesWith(result);
    } else if (auto grad = dyn_cast<attn::TermRowGradOp>(hook)) {
      // A bucketed term's row gradient (Shaw's tables): the term's adjoint.
      std::optional<Placed> term = grad.getKey() ? keyTerm : valueTerm;
      if (term) {
        auto vector = dyn_cast<VectorType>(grad.getGrad().getType());
        pe::ValueTermRowArgs args{grad.getBatch(),
                                  grad.getHead(),
                                  grad.getBucket(),
                                  grad.getChannel(),
                                  operandsOf(*term, grad.getEncodingOperands()),
                                  vector ? vector.getNumElements() : 1};
        for (const pe::GradContribution &c :
             term->encoding.emitTermRowAdjoint(b, loc, shape, args, grad.getGrad()))
          addToPartial(loc, grad.getPartial(), grad.getPartialStart(), grad.getOffsets(),
                       term->firstOperand + c.operand, c);
      }
    } else if (auto tile = dyn_cast<attn::QueryTilePrologueOp>(hook)) {
      for (const Placed &bias : scoreBiases)
        if (bias.tileFloats > 0)
          bias.encoding.emitQueryTilePrologue(
              b, loc, shape,
              {tilePart(b, loc, tile.getTileScratch(), bias), tile.getBatch(), tile.getHead(),
               tile.getStart(), tile.getRows(), operandsOf(bias, tile.getEncodingOperands()),
               tile.getQueryTile(), tile.getRowFirst(), tile.getRowStep()});
    }
    hook->erase();
  }
  return success();
}

} // namespace pejit
