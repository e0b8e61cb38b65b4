// ALiBi's kernel hook (PositionalEncodingAttrInterface on #pe.alibi).
//
// Math (docs/semantics.md "ALiBi"), with off = skv - sq:
//   bias(h, i, j) = -slope[head_offset + h] * d,  d = (i + off) - j  (causal)
//                                                  or |i + off - j| (symmetric)
// Slopes are the ALiBi paper's get_slopes(num_heads) (float64 reference),
// baked in as a constant vector; on the transposed score tile a row jr holds
// consecutive query rows, so d is iota + a scalar and the bias one FMA.
#include "dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "reference/ScoreBias.h"

using namespace mlir;
using namespace pejit::pe;

void AlibiAttr::emitScoreBias(OpBuilder &b, Location loc, const AttentionShape &shape,
                              const ScoreTileArgs &args) const {
  std::vector<double> slopes = getSlopes().empty()
                                   ? pejit::ref::alibiSlopes(getNumHeads())
                                   : std::vector<double>(getSlopes().begin(), getSlopes().end());
  std::vector<float> negSlopes;
  for (int64_t h = 0; h < shape.queryHeads; ++h)
    negSlopes.push_back(static_cast<float>(-slopes[getHeadOffset() + h]));

  auto tileType = cast<MemRefType>(args.scores.getType());
  int64_t keyRows = tileType.getDimSize(0), queryCols = tileType.getDimSize(1);
  int64_t lanes = shape.vectorWidth;
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  auto f32Type = b.getF32Type();
  auto vecType = VectorType::get({lanes}, f32Type);
  // The head's slope by a chain of selects on the head index: a constant
  // table indexed dynamically would go through memory (a stack slot on GPUs).
  Value negSlope = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(negSlopes.back()));
  for (int64_t h = shape.queryHeads - 2; h >= 0; --h) {
    Value isHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, args.head, idx(h));
    Value slope = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(negSlopes[h]));
    negSlope = arith::SelectOp::create(b, loc, isHead, slope, negSlope);
  }
  Value negSlopeV = vector::BroadcastOp::create(b, loc, vecType, negSlope);
  SmallVector<float> iotaValues;
  for (int64_t i = 0; i < lanes; ++i)
    iotaValues.push_back(static_cast<float>(i));
  Value iota = arith::ConstantOp::create(
      b, loc, vecType, DenseElementsAttr::get(vecType, llvm::ArrayRef<float>(iotaValues)));

  // d(jr, ir) = (queryStart + ir + off) - (keyStart + jr) = iota + base
  Value off = idx(shape.keySeq - shape.querySeq);
  Value start = arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, args.queryStart, off),
                                      args.keyStart);
  Value startI = arith::IndexCastOp::create(b, loc, b.getI64Type(), start);
  Value startF = arith::SIToFPOp::create(b, loc, f32Type, startI);
  bool symmetric = getForm() == AlibiForm::Symmetric;

  auto rows = scf::ForOp::create(b, loc, idx(0), idx(keyRows), idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rows.getBody());
  Value jr = rows.getInductionVar();
  Value jrF = arith::SIToFPOp::create(b, loc, f32Type,
                                      arith::IndexCastOp::create(b, loc, b.getI64Type(), jr));
  Value rowStart = arith::SubFOp::create(b, loc, startF, jrF);
  auto cols = scf::ForOp::create(b, loc, idx(0), idx(queryCols), idx(lanes));
  b.setInsertionPointToStart(cols.getBody());
  Value ir = cols.getInductionVar();
  Value irF = arith::SIToFPOp::create(b, loc, f32Type,
                                      arith::IndexCastOp::create(b, loc, b.getI64Type(), ir));
  Value base =
      vector::BroadcastOp::create(b, loc, vecType, arith::AddFOp::create(b, loc, rowStart, irF));
  Value distance = arith::AddFOp::create(b, loc, iota, base);
  if (symmetric)
    distance = math::AbsFOp::create(b, loc, distance);
  Value scores = vector::LoadOp::create(b, loc, vecType, args.scores, ValueRange{jr, ir});
  Value biased = vector::FMAOp::create(b, loc, distance, negSlopeV, scores);
  vector::StoreOp::create(b, loc, biased, args.scores, ValueRange{jr, ir});
}
