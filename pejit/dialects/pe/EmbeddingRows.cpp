// emitAddPositionRows (EmbeddingRows.h): x + PE row by row, widened to f32
// and narrowed to the tile's type.
#include "pejit/dialects/pe/EmbeddingRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace pejit::pe {

void emitAddPositionRows(OpBuilder &b, Location loc, const AttentionShape &shape,
                         const QKTileArgs &args) {
  int64_t lanes = shape.vectorWidth, dim = shape.headDim;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value batchRow = shape.queryPositionRows == 1 ? zero : args.batch;
  Value firstRow = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, batchRow, args.querySeq), args.seqStart);
  Value input = args.source ? args.source : args.tile;
  Type inputElement = cast<MemRefType>(input.getType()).getElementType();
  Type tileElement = cast<MemRefType>(args.tile.getType()).getElementType();
  auto rowLoop = scf::ForOp::create(b, loc, zero, args.rows, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  Value r = rowLoop.getInductionVar();
  Value tableRow = arith::MulIOp::create(b, loc, arith::AddIOp::create(b, loc, firstRow, r),
                                         arith::ConstantIndexOp::create(b, loc, dim));
  auto chanLoop = scf::ForOp::create(b, loc, zero, arith::ConstantIndexOp::create(b, loc, dim),
                                     arith::ConstantIndexOp::create(b, loc, lanes));
  b.setInsertionPointToStart(chanLoop.getBody());
  Value c = chanLoop.getInductionVar();
  auto f32Type = VectorType::get({lanes}, b.getF32Type());
  Value x = vector::LoadOp::create(b, loc, VectorType::get({lanes}, inputElement), input,
                                   ValueRange{r, c});
  if (!inputElement.isF32())
    x = arith::ExtFOp::create(b, loc, f32Type, x);
  Value pe = vector::LoadOp::create(b, loc, f32Type, args.scratch,
                                    ValueRange{arith::AddIOp::create(b, loc, tableRow, c)});
  Value sum = arith::AddFOp::create(b, loc, x, pe);
  if (!tileElement.isF32())
    sum = arith::TruncFOp::create(b, loc, VectorType::get({lanes}, tileElement), sum);
  vector::StoreOp::create(b, loc, sum, args.tile, ValueRange{r, c});
}

} // namespace pejit::pe
