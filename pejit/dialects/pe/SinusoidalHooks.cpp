// pe.sinusoidal's kernel hooks (PositionalEncodingAttrInterface on
// #pe.sinusoidal), for the standalone kernel (docs/standalone-kernels.md):
// the QK transform hooks applied to an embedding's rows, read as Q.
//
// Math (docs/semantics.md "Absolute embeddings"):
//   out[b, t, 2i]     = x[b, t, 2i]     + sin(p / base^(2i/d))
//   out[b, t, 2i + 1] = x[b, t, 2i + 1] + cos(p / base^(2i/d)),  p = position
// Prologue (once per call): a row of d f32 entries per (batch row, index)
// of the ids, [sin, cos] per channel pair, from float64 angles reduced in
// float64 (VectorSinCos's exact range reduction: accurate at positions >=
// 1e6); with 8-lane vectors the polynomials run in f32 on 8 pairs at once.
// Tile transform: per row, x + its table row, widened to f32.
#include "pejit/dialects/pe/EmbeddingRows.h"
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/VectorSinCos.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace pejit::pe;

namespace {

Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

} // namespace

bool SinusoidalAttr::hasStandaloneKernel() const { return true; }

bool SinusoidalAttr::transformsKey() const { return false; }

int64_t SinusoidalAttr::getScratchFloatsPerPosition(const AttentionShape &shape, bool isKey) const {
  return isKey ? 0 : shape.headDim;
}

void SinusoidalAttr::emitQKPrologue(OpBuilder &b, Location loc, const AttentionShape &shape,
                                    const QKPrologueArgs &args) const {
  int64_t dim = shape.headDim, pairs = dim / 2;
  // Four channel pairs at a time: frequencies 1 / base^(2i/d) as float64
  // constants, angles p * freq in float64.
  constexpr int64_t kLanes = 4;
  Value positions = args.queryPositions;
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  Value rows = memref::DimOp::create(b, loc, positions, 0);
  Value seq = memref::DimOp::create(b, loc, positions, 1);
  // The d/2 frequencies (padded to a multiple of four with zeros), stored
  // once per call from one constant: the loop below loads four at a time.
  int64_t groups = (pairs + kLanes - 1) / kLanes;
  SmallVector<double> freqs(groups * kLanes, 0.0);
  for (int64_t i = 0; i < pairs; ++i)
    freqs[i] = 1.0 / std::pow(static_cast<double>(getBase()), static_cast<double>(2 * i) / dim);
  auto allType = VectorType::get({groups * kLanes}, b.getF64Type());
  Value invFreq =
      memref::AllocaOp::create(b, loc, MemRefType::get({groups * kLanes}, b.getF64Type()));
  vector::StoreOp::create(
      b, loc,
      arith::ConstantOp::create(b, loc, allType, DenseElementsAttr::get(allType, ArrayRef(freqs))),
      invFreq, ValueRange{zero});
  auto rowLoop = scf::ForOp::create(b, loc, args.rowBegin ? args.rowBegin : zero,
                                    arith::MulIOp::create(b, loc, rows, seq),
                                    args.rowStep ? args.rowStep : one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  Value flat = rowLoop.getInductionVar();
  Value row = arith::DivUIOp::create(b, loc, flat, seq);
  Value col = arith::RemUIOp::create(b, loc, flat, seq);
  Value pos = memref::LoadOp::create(b, loc, positions, ValueRange{row, col});
  Value posF = arith::SIToFPOp::create(b, loc, b.getF64Type(), pos);
  Value rowBase = arith::MulIOp::create(b, loc, flat, indexConst(b, loc, dim));
  auto f64Type = VectorType::get({kLanes}, b.getF64Type());
  auto f32Type = VectorType::get({kLanes}, b.getF32Type());
  Value posV = vector::BroadcastOp::create(b, loc, f64Type, posF);
  // Whole groups of four pairs (eight entries) in a loop; a last partial
  // group (d % 8 != 0) entry by entry.
  int64_t whole = pairs / kLanes;
  auto tableGroup = [&](Value first) {
    Value freq = vector::LoadOp::create(b, loc, f64Type, invFreq, ValueRange{first});
    Value angle = arith::MulFOp::create(b, loc, posV, freq);
    auto [sinV, cosV] = emitSinCos(b, loc, angle);
    Value sin32 = arith::TruncFOp::create(b, loc, f32Type, sinV);
    Value cos32 = arith::TruncFOp::create(b, loc, f32Type, cosV);
    // Entries 2i, 2i + 1: sin then cos.
    Value interleaved =
        vector::ShuffleOp::create(b, loc, sin32, cos32, ArrayRef<int64_t>{0, 4, 1, 5, 2, 6, 3, 7});
    Value at = arith::AddIOp::create(b, loc, rowBase,
                                     arith::MulIOp::create(b, loc, first, indexConst(b, loc, 2)));
    return std::pair{interleaved, at};
  };
  // With 8-lane f32 vectors (AVX2), groups of eight pairs first: the angles
  // and their reduction in float64, the polynomials in f32 (emitSinCosF32);
  // the rest four at a time in float64.
  int64_t wide = shape.vectorWidth >= 8 ? pairs / 8 * 8 : 0;
  if (wide > 0) {
    auto wideLoop =
        scf::ForOp::create(b, loc, zero, indexConst(b, loc, wide), indexConst(b, loc, 8));
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(wideLoop.getBody());
    Value first = wideLoop.getInductionVar();
    Value second = arith::AddIOp::create(b, loc, first, indexConst(b, loc, kLanes));
    auto angle = [&](Value at) -> Value {
      Value freq = vector::LoadOp::create(b, loc, f64Type, invFreq, ValueRange{at});
      return arith::MulFOp::create(b, loc, posV, freq);
    };
    auto [sin8, cos8] = emitSinCosF32(b, loc, angle(first), angle(second));
    Value at = arith::AddIOp::create(b, loc, rowBase,
                                     arith::MulIOp::create(b, loc, first, indexConst(b, loc, 2)));
    // Entries 2i, 2i + 1: sin then cos, 16 of them.
    Value low =
        vector::ShuffleOp::create(b, loc, sin8, cos8, ArrayRef<int64_t>{0, 8, 1, 9, 2, 10, 3, 11});
    Value high = vector::ShuffleOp::create(b, loc, sin8, cos8,
                                           ArrayRef<int64_t>{4, 12, 5, 13, 6, 14, 7, 15});
    vector::StoreOp::create(b, loc, low, args.scratch, ValueRange{at});
    vector::StoreOp::create(b, loc, high, args.scratch,
                            ValueRange{arith::AddIOp::create(b, loc, at, indexConst(b, loc, 8))});
  }
  if (whole * kLanes > wide) {
    auto groupLoop =
        scf::ForOp::create(b, loc, indexConst(b, loc, wide), indexConst(b, loc, whole * kLanes),
                           indexConst(b, loc, kLanes));
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(groupLoop.getBody());
    auto [interleaved, at] = tableGroup(groupLoop.getInductionVar());
    vector::StoreOp::create(b, loc, interleaved, args.scratch, ValueRange{at});
  }
  if (whole < groups) {
    auto [interleaved, at] = tableGroup(indexConst(b, loc, whole * kLanes));
    for (int64_t e = 0; e < 2 * (pairs - whole * kLanes); ++e)
      memref::StoreOp::create(
          b, loc, vector::ExtractOp::create(b, loc, interleaved, ArrayRef<int64_t>{e}),
          args.scratch, ValueRange{arith::AddIOp::create(b, loc, at, indexConst(b, loc, e))});
  }
}

void SinusoidalAttr::emitQKTileTransform(OpBuilder &b, Location loc, const AttentionShape &shape,
                                         const QKTileArgs &args) const {
  emitAddPositionRows(b, loc, shape, args);
}
