// pe.learned's kernel hooks (PositionalEncodingAttrInterface on
// #pe.learned), for the standalone kernel (docs/standalone-kernels.md): the
// QK transform hooks applied to an embedding's rows, read as Q.
//
// Math (docs/semantics.md "Absolute embeddings"):
//   out[b, t, :] = x[b, t, :] + table[p, :],  p = position of (b, t)
// Prologue (once per call): table[p] widened to f32, a row of d per (batch
// row, index) of the ids. Tile transform: per row, x + its table row.
// An id outside [0, max_positions) never reaches the kernel: `run` refuses
// it (getPositionLimit); the prologue still clamps, so no id reads past
// the table.
#include "pejit/dialects/pe/EmbeddingRows.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace pejit::pe;

bool LearnedAttr::hasStandaloneKernel() const { return true; }

bool LearnedAttr::transformsKey() const { return false; }

unsigned LearnedAttr::getNumEncodingOperands() const { return 1; }

std::string LearnedAttr::getEncodingOperandName(unsigned) const { return "learned_table"; }
// docs/backward.md: the table's rows are trained.
bool LearnedAttr::isDifferentiableOperand(unsigned) const { return true; }

int64_t LearnedAttr::getPositionLimit() const { return getMaxPositions(); }

int64_t LearnedAttr::getScratchFloatsPerPosition(const AttentionShape &shape, bool isKey) const {
  return isKey ? 0 : shape.headDim;
}

void LearnedAttr::emitQKPrologue(OpBuilder &b, Location loc, const AttentionShape &shape,
                                 const QKPrologueArgs &args) const {
  int64_t dim = shape.headDim, lanes = shape.vectorWidth;
  Value table = args.operands.front();
  Type tableElement = cast<MemRefType>(table.getType()).getElementType();
  Value positions = args.queryPositions;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value rows = memref::DimOp::create(b, loc, positions, 0);
  Value seq = memref::DimOp::create(b, loc, positions, 1);
  auto rowLoop = scf::ForOp::create(b, loc, args.rowBegin ? args.rowBegin : zero,
                                    arith::MulIOp::create(b, loc, rows, seq),
                                    args.rowStep ? args.rowStep : one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  Value flat = rowLoop.getInductionVar();
  Value pos = memref::LoadOp::create(b, loc, positions,
                                     ValueRange{arith::DivUIOp::create(b, loc, flat, seq),
                                                arith::RemUIOp::create(b, loc, flat, seq)});
  // clamp(p, 0, max_positions - 1): run checked the ids; this keeps every
  // read inside the table regardless.
  Value low = arith::MaxSIOp::create(b, loc, pos,
                                     arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  Value clamped = arith::MinSIOp::create(
      b, loc, low, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(getMaxPositions() - 1)));
  Value tableRow = arith::IndexCastOp::create(b, loc, b.getIndexType(), clamped);
  Value rowBase = arith::MulIOp::create(b, loc, flat, arith::ConstantIndexOp::create(b, loc, dim));
  auto chanLoop = scf::ForOp::create(b, loc, zero, arith::ConstantIndexOp::create(b, loc, dim),
                                     arith::ConstantIndexOp::create(b, loc, lanes));
  b.setInsertionPointToStart(chanLoop.getBody());
  Value c = chanLoop.getInductionVar();
  Value row = vector::LoadOp::create(b, loc, VectorType::get({lanes}, tableElement), table,
                                     ValueRange{tableRow, c});
  if (!tableElement.isF32())
    row = arith::ExtFOp::create(b, loc, VectorType::get({lanes}, b.getF32Type()), row);
  vector::StoreOp::create(b, loc, row, args.scratch,
                          ValueRange{arith::AddIOp::create(b, loc, rowBase, c)});
}

void LearnedAttr::emitQKTileTransform(OpBuilder &b, Location loc, const AttentionShape &shape,
                                      const QKTileArgs &args) const {
  emitAddPositionRows(b, loc, shape, args);
}
