// RoPE's kernel hooks (PositionalEncodingAttrInterface on #pe.rope).
//
// Math (docs/semantics.md "RoPE"): pair (a, b) of channels rotates by
// angle = position * inv_freq[c]:
//   out_a = x_a cos - x_b sin,   out_b = x_b cos + x_a sin
// with cos and sin scaled by the scaling's attention factor (yarn, longrope).
// inv_freq comes from the float64 reference (pejit/reference/Rope.cpp), so
// every scaling variant changes only a table: static scalings are constants,
// dynamic_ntk and longrope pick theirs per call from max(position) + 1.
//
// Prologue (once per call): cos/sin tables per (batch row, sequence index)
// for Q and for K (RopeTables.cpp), angles and their range reduction in
// float64 (VectorSinCos: positions >= 1e6 stay accurate), stored f32.
// Layout in scratch, W = rd/2 (half) or rd (interleaved, entries duplicated
// per channel with sin signed -/+ so that out = x cos + swap_pairs(x) sin):
//   [Q cos | Q sin | K cos | K sin], each [rows, s, W]; a side it does not
//   rotate (one-sided RoPE, a pre-rotated K cache) has empty tables.
// Tile transform: per row, vectors of W channels, 2 loads of tables + 2 FMA;
// from a source (the Q/K operand), rows are read there and written rotated to
// the tile in the same pass, the channels past the rotary dims copied.
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/RopeConfig.h"
#include "pejit/dialects/pe/RopeTables.h"
#include "pejit/dialects/pe/TileCopy.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "pejit/reference/Rope.h"

using namespace mlir;
using namespace pejit::pe;

namespace {

Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

/// Where the four tables start in scratch, from the call's (row, s) pairs
/// of Q and K ids: values, since a shape class leaves the lengths to the
/// call (constants, folded, for a static shape).
struct TableBases {
  Value queryCos, querySin, keyCos, keySin;

  TableBases(OpBuilder &b, Location loc, const RopeTableLayout &layout, Value queryPairs,
             Value keyPairs) {
    Value width = indexConst(b, loc, layout.width);
    Value queryTable = arith::MulIOp::create(b, loc, queryPairs, width);
    Value keyTable = arith::MulIOp::create(b, loc, keyPairs, width);
    queryCos = indexConst(b, loc, 0);
    querySin = queryTable;
    keyCos = arith::AddIOp::create(b, loc, queryTable, queryTable);
    keySin = arith::AddIOp::create(b, loc, keyCos, keyTable);
  }
  Value cos(bool isKey) const { return isKey ? keyCos : queryCos; }
  Value sin(bool isKey) const { return isKey ? keySin : querySin; }
};

/// (batch row, s) pairs of a [axes * rows, s] position memref.
Value positionPairs(OpBuilder &b, Location loc, Value positions, int64_t positionAxes) {
  Value rows = memref::DimOp::create(b, loc, positions, 0);
  rows =
      arith::DivUIOp::create(b, loc, rows, indexConst(b, loc, std::max<int64_t>(positionAxes, 1)));
  Value seq = memref::DimOp::create(b, loc, positions, 1);
  return arith::MulIOp::create(b, loc, rows, seq);
}

Value f64VectorConst(OpBuilder &b, Location loc, llvm::ArrayRef<double> values) {
  auto type = VectorType::get({static_cast<int64_t>(values.size())}, b.getF64Type());
  return arith::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, values));
}

/// max(position) + 1 over the position tensors of the sides the RoPE
/// rotates (dynamic scalings only): both, or Q's or K's alone.
Value emitSeqLen(OpBuilder &b, Location loc, RopeAttr rope, const QKPrologueArgs &args) {
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  Value maxPos = arith::ConstantIntOp::create(b, loc, b.getI64Type(), -1);
  SmallVector<Value> sides;
  if (rope.transformsQuery())
    sides.push_back(args.queryPositions);
  if (rope.transformsKey())
    sides.push_back(args.keyPositions);
  for (Value positions : sides) {
    auto rows = scf::ForOp::create(b, loc, zero, memref::DimOp::create(b, loc, positions, 0), one,
                                   ValueRange{maxPos});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(rows.getBody());
      auto cols = scf::ForOp::create(b, loc, zero, memref::DimOp::create(b, loc, positions, 1), one,
                                     ValueRange{rows.getRegionIterArgs()[0]});
      b.setInsertionPointToStart(cols.getBody());
      Value p = memref::LoadOp::create(b, loc, positions,
                                       ValueRange{rows.getInductionVar(), cols.getInductionVar()});
      Value m = arith::MaxSIOp::create(b, loc, cols.getRegionIterArgs()[0], p);
      scf::YieldOp::create(b, loc, m);
      b.setInsertionPointAfter(cols);
      scf::YieldOp::create(b, loc, cols.getResult(0));
    }
    maxPos = rows.getResult(0);
  }
  Value oneI64 = arith::ConstantIntOp::create(b, loc, b.getI64Type(), 1);
  return arith::AddIOp::create(b, loc, maxPos, oneI64);
}

} // namespace

void pejit::pe::emitInverseFrequencies(OpBuilder &b, Location loc, RopeAttr rope,
                                       const AttentionShape &shape, const QKPrologueArgs &args,
                                       Value invFreq) {
  pejit::ref::RopeConfig config = toReferenceConfig(rope);
  Value zero = indexConst(b, loc, 0);
  auto store = [&](llvm::ArrayRef<double> values) {
    vector::StoreOp::create(b, loc, f64VectorConst(b, loc, values), invFreq, ValueRange{zero});
  };
  // learned_inv_freq: this call's frequencies are the operand's, widened.
  if (std::optional<unsigned> at = rope.invFreqOperand();
      at && *at < args.operands.size() && args.operands[*at]) {
    int64_t half = cast<MemRefType>(invFreq.getType()).getDimSize(0);
    for (int64_t c = 0; c < half; ++c) {
      Value f =
          memref::LoadOp::create(b, loc, args.operands[*at], ValueRange{indexConst(b, loc, c)});
      Value wide = arith::ExtFOp::create(b, loc, b.getF64Type(), f);
      memref::StoreOp::create(b, loc, wide, invFreq, ValueRange{indexConst(b, loc, c)});
    }
    return;
  }
  int64_t original = config.scaling.originalMaxPosition;
  // Frequencies when max(position) + 1 <= original (seqLen = 0 selects them).
  std::vector<double> base = pejit::ref::computeRopeFrequencies(config, shape.headDim, 0).invFreq;
  store(base);
  using Kind = pejit::ref::RopeScaling::Kind;
  if (config.scaling.kind != Kind::DynamicNtk && config.scaling.kind != Kind::LongRope)
    return;
  Value seqLen = emitSeqLen(b, loc, rope, args);
  Value limit = arith::ConstantIntOp::create(b, loc, b.getI64Type(), original);
  Value longContext = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, seqLen, limit);
  auto ifOp = scf::IfOp::create(b, loc, longContext, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  if (config.scaling.kind == Kind::LongRope) {
    store(pejit::ref::computeRopeFrequencies(config, shape.headDim, original + 1).invFreq);
    return;
  }
  // HF _compute_dynamic_ntk_parameters: base = theta * ((factor * seqLen /
  // original) - (factor - 1))^(rd / (rd - 2)); inv_freq[c] = 1 / base^(2c/rd).
  // The reference's operations in its order (pejit/reference/Rope.cpp),
  // with libm's pow as it calls it: exp(log(base) * -2c/rd) was off by a few
  // ulps, which large angles (position x inv_freq) turn into visible error.
  double factor = config.scaling.factor;
  double rd = 2.0 * static_cast<double>(base.size());
  auto f64 = [&](double v) {
    return arith::ConstantFloatOp::create(b, loc, b.getF64Type(), APFloat(v));
  };
  Value len = arith::SIToFPOp::create(b, loc, b.getF64Type(), seqLen);
  Value ratio = arith::MulFOp::create(b, loc, f64(factor), len);
  ratio = arith::DivFOp::create(b, loc, ratio, f64(static_cast<double>(original)));
  ratio = arith::SubFOp::create(b, loc, ratio, f64(factor - 1.0));
  Value scaled = math::PowFOp::create(b, loc, ratio, f64(rd / (rd - 2.0)));
  Value newBase = arith::MulFOp::create(b, loc, f64(config.theta), scaled);
  for (size_t c = 0; c < base.size(); ++c) {
    // base^0 = 1 for any base, inf and NaN included (pow's own rule).
    Value power = math::PowFOp::create(b, loc, newBase, f64(static_cast<double>(2 * c) / rd));
    Value freq = arith::DivFOp::create(b, loc, f64(1.0), power);
    memref::StoreOp::create(b, loc, freq, invFreq, ValueRange{indexConst(b, loc, c)});
  }
}

int64_t RopeAttr::getScratchFloatsPerPosition(const AttentionShape &shape, bool isKey) const {
  // A cos and a sin entry per table column, for the positions of each side
  // it rotates: none for a side left alone (K of a pre-rotated cache).
  bool rotates = isKey ? transformsKey() : transformsQuery();
  return rotates ? 2 * RopeTableLayout(*this, shape).width : 0;
}

void RopeAttr::emitQKPrologue(OpBuilder &b, Location loc, const AttentionShape &shape,
                              const QKPrologueArgs &args) const {
  RopeTableLayout layout(*this, shape);
  auto freqType = MemRefType::get({layout.half}, b.getF64Type());
  Value invFreq = memref::AllocaOp::create(b, loc, freqType);
  emitInverseFrequencies(b, loc, *this, shape, args, invFreq);
  double attentionFactor =
      pejit::ref::computeRopeFrequencies(toReferenceConfig(*this), shape.headDim, 0)
          .attentionFactor;
  std::vector<int64_t> axisOfFrequency =
      pejit::ref::ropeAxisOfFrequency(toReferenceConfig(*this), layout.half);
  // A side RoPE leaves alone has no table (0 pairs in the layout): a
  // decode step over a pre-rotated K cache computes Q's one row of cos/sin,
  // not a row per cached key.
  Value none = indexConst(b, loc, 0);
  Value queryPairs =
      transformsQuery() ? positionPairs(b, loc, args.queryPositions, getPositionAxes()) : none;
  Value keyPairs =
      transformsKey() ? positionPairs(b, loc, args.keyPositions, getPositionAxes()) : none;
  TableBases bases(b, loc, layout, queryPairs, keyPairs);
  // runtime_scale: the scale is the encoding's one operand.
  std::optional<unsigned> scaleAt = scaleOperand();
  Value scale = scaleAt && *scaleAt < args.operands.size() ? args.operands[*scaleAt] : Value();
  if (transformsQuery())
    emitRopeTables(b, loc, layout, args.queryPositions, invFreq, attentionFactor, bases.cos(false),
                   bases.sin(false), args.scratch, args.rowBegin, args.rowStep, getPositionAxes(),
                   axisOfFrequency, scale, shape.vectorWidth);
  if (transformsKey())
    emitRopeTables(b, loc, layout, args.keyPositions, invFreq, attentionFactor, bases.cos(true),
                   bases.sin(true), args.scratch, args.rowBegin, args.rowStep, getPositionAxes(),
                   axisOfFrequency, scale, shape.vectorWidth);
}

namespace {

/// The rotation of rows [0, args.rows) by the tables, or (inverse) its
/// transpose: the same tables with sin negated, which is the rotation by
/// -angle times the same attention factor (the adjoint of a scaled
/// rotation is the scaled inverse rotation).
void emitRotation(OpBuilder &b, Location loc, RopeAttr rope, const AttentionShape &shape,
                  const QKTileArgs &args, bool inverse) {
  RopeTableLayout layout(rope, shape);
  int64_t lanes = shape.vectorWidth;
  int64_t positionRows = args.isKey ? shape.keyPositionRows : shape.queryPositionRows;
  Value seq = args.isKey ? args.keySeq : args.querySeq;
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  Value batchRow = positionRows == 1 ? zero : args.batch;
  Value firstRow = arith::MulIOp::create(b, loc, batchRow, seq);
  firstRow = arith::AddIOp::create(b, loc, firstRow, args.seqStart);
  bool vectorized = layout.width % lanes == 0;
  // From a source, the channels past the rotary dims are copied unchanged.
  if (args.source)
    emitTileRowCopy(b, loc, args.source, args.tile, args.rows,
                    rope.getRotaryDim().value_or(shape.headDim), shape.headDim, lanes);
  // The tables' bases, before the row loop (invariant in it).
  auto pairs = [&](int64_t rows, Value length) -> Value {
    return arith::MulIOp::create(b, loc, indexConst(b, loc, rows), length);
  };
  Value none = indexConst(b, loc, 0);
  TableBases bases(b, loc, layout,
                   rope.transformsQuery() ? pairs(shape.queryPositionRows, args.querySeq) : none,
                   rope.transformsKey() ? pairs(shape.keyPositionRows, args.keySeq) : none);
  auto rowLoop = scf::ForOp::create(b, loc, zero, args.rows, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  Value r = rowLoop.getInductionVar();
  Value tableRow = arith::AddIOp::create(b, loc, firstRow, r);
  Value rowBase = arith::MulIOp::create(b, loc, tableRow, indexConst(b, loc, layout.width));
  Value cosRow = arith::AddIOp::create(b, loc, rowBase, bases.cos(args.isKey));
  Value sinRow = arith::AddIOp::create(b, loc, rowBase, bases.sin(args.isKey));
  Value halfOffset = indexConst(b, loc, layout.half);
  auto chanLoop = scf::ForOp::create(b, loc, zero, indexConst(b, loc, layout.width),
                                     indexConst(b, loc, vectorized ? lanes : 1));
  b.setInsertionPointToStart(chanLoop.getBody());
  Value c = chanLoop.getInductionVar();
  Value cosAt = arith::AddIOp::create(b, loc, cosRow, c);
  Value sinAt = arith::AddIOp::create(b, loc, sinRow, c);
  // f16/bf16 tiles (GPU) are rotated in f32: widened on load, narrowed on
  // store. Rows come from the source when there is one (the Q/K operand,
  // f32/f16/bf16), else from the tile itself.
  Type element = cast<MemRefType>(args.tile.getType()).getElementType();
  bool narrow = !element.isF32();
  Value input = args.source ? args.source : args.tile;
  Type inputElement = cast<MemRefType>(input.getType()).getElementType();
  bool widen = !inputElement.isF32();
  if (vectorized) {
    auto vecType = VectorType::get({lanes}, b.getF32Type());
    auto tileVecType = VectorType::get({lanes}, element);
    auto inputVecType = VectorType::get({lanes}, inputElement);
    auto load = [&](Value mem, ValueRange idx) {
      return vector::LoadOp::create(b, loc, vecType, mem, idx);
    };
    auto loadTile = [&](ValueRange idx) -> Value {
      Value x = vector::LoadOp::create(b, loc, inputVecType, input, idx);
      return widen ? arith::ExtFOp::create(b, loc, vecType, x).getResult() : x;
    };
    auto storeTile = [&](Value x, ValueRange idx) {
      if (narrow)
        x = arith::TruncFOp::create(b, loc, tileVecType, x);
      vector::StoreOp::create(b, loc, x, args.tile, idx);
    };
    Value cosV = load(args.scratch, cosAt), sinV = load(args.scratch, sinAt);
    if (inverse)
      sinV = arith::NegFOp::create(b, loc, sinV);
    if (layout.interleaved) {
      // out = x cos + swap_pairs(x) sin, sin signed -/+ in the table.
      Value x = loadTile(ValueRange{r, c});
      SmallVector<int64_t> swap;
      for (int64_t i = 0; i < lanes; ++i)
        swap.push_back(i ^ 1);
      Value swapped = vector::ShuffleOp::create(b, loc, x, x, swap);
      Value t = arith::MulFOp::create(b, loc, swapped, sinV);
      Value out = vector::FMAOp::create(b, loc, x, cosV, t);
      storeTile(out, ValueRange{r, c});
      return;
    }
    Value cHi = arith::AddIOp::create(b, loc, c, halfOffset);
    Value xa = loadTile(ValueRange{r, c}), xb = loadTile(ValueRange{r, cHi});
    Value negXbSin = arith::NegFOp::create(b, loc, arith::MulFOp::create(b, loc, xb, sinV));
    Value outA = vector::FMAOp::create(b, loc, xa, cosV, negXbSin);
    Value xaSin = arith::MulFOp::create(b, loc, xa, sinV);
    Value outB = vector::FMAOp::create(b, loc, xb, cosV, xaSin);
    storeTile(outA, ValueRange{r, c});
    storeTile(outB, ValueRange{r, cHi});
    return;
  }
  // Scalar path (W not a multiple of the vector width): channel pair of
  // table entry c is (c, c + half), or, interleaved, (c, c + 1) for even c
  // with the (+)sin at entry c + 1.
  auto rotatePair = [&](Value channelA, Value channelB, Value cosIndex, Value sinIndex) {
    auto loadScalar = [&](Value channel) -> Value {
      Value x = memref::LoadOp::create(b, loc, input, ValueRange{r, channel});
      return widen ? arith::ExtFOp::create(b, loc, b.getF32Type(), x).getResult() : x;
    };
    Value xa = loadScalar(channelA), xb = loadScalar(channelB);
    Value cs = memref::LoadOp::create(b, loc, args.scratch, ValueRange{cosIndex});
    Value sn = memref::LoadOp::create(b, loc, args.scratch, ValueRange{sinIndex});
    if (inverse)
      sn = arith::NegFOp::create(b, loc, sn);
    Value outA = arith::SubFOp::create(b, loc, arith::MulFOp::create(b, loc, xa, cs),
                                       arith::MulFOp::create(b, loc, xb, sn));
    Value outB = arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, xb, cs),
                                       arith::MulFOp::create(b, loc, xa, sn));
    if (narrow) {
      outA = arith::TruncFOp::create(b, loc, element, outA);
      outB = arith::TruncFOp::create(b, loc, element, outB);
    }
    memref::StoreOp::create(b, loc, outA, args.tile, ValueRange{r, channelA});
    memref::StoreOp::create(b, loc, outB, args.tile, ValueRange{r, channelB});
  };
  if (!layout.interleaved) {
    rotatePair(c, arith::AddIOp::create(b, loc, c, halfOffset), cosAt, sinAt);
    return;
  }
  Value isEven =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            arith::RemUIOp::create(b, loc, c, indexConst(b, loc, 2)), zero);
  auto ifEven = scf::IfOp::create(b, loc, isEven, /*withElseRegion=*/false);
  b.setInsertionPointToStart(ifEven.thenBlock());
  rotatePair(c, arith::AddIOp::create(b, loc, c, one), cosAt,
             arith::AddIOp::create(b, loc, sinAt, one));
}

} // namespace

void RopeAttr::emitQKTileTransform(OpBuilder &b, Location loc, const AttentionShape &shape,
                                   const QKTileArgs &args) const {
  emitRotation(b, loc, *this, shape, args, /*inverse=*/false);
}

// The adjoint (docs/backward.md): out = m R(angle) x has dx = m R(-angle) g,
// in place on rows of dQ or dK.
void RopeAttr::emitQKTileTransformAdjoint(OpBuilder &b, Location loc, const AttentionShape &shape,
                                          const QKTileArgs &args) const {
  emitRotation(b, loc, *this, shape, args, /*inverse=*/true);
}
