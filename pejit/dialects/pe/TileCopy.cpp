#include "pejit/dialects/pe/TileCopy.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace pejit::pe {
namespace {

Value convert(OpBuilder &b, Location loc, Value x, Type to) {
  Type from = getElementTypeOrSelf(x.getType());
  Type toElement = getElementTypeOrSelf(to);
  if (from == toElement)
    return x;
  if (from.getIntOrFloatBitWidth() < toElement.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, loc, to, x);
  return arith::TruncFOp::create(b, loc, to, x);
}

} // namespace

void emitTileRowCopy(OpBuilder &b, Location loc, Value source, Value tile, Value rows,
                     int64_t channelBegin, int64_t channelEnd, int64_t lanes) {
  if (channelEnd <= channelBegin)
    return;
  Type sourceElement = cast<MemRefType>(source.getType()).getElementType();
  Type tileElement = cast<MemRefType>(tile.getType()).getElementType();
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  int64_t vectorEnd = channelBegin + (channelEnd - channelBegin) / lanes * lanes;
  OpBuilder::InsertionGuard guard(b);
  auto rowLoop = scf::ForOp::create(b, loc, index(0), rows, index(1));
  b.setInsertionPointToStart(rowLoop.getBody());
  Value r = rowLoop.getInductionVar();
  if (vectorEnd > channelBegin) {
    auto loop = scf::ForOp::create(b, loc, index(channelBegin), index(vectorEnd), index(lanes));
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c = loop.getInductionVar();
    Value x = vector::LoadOp::create(b, loc, VectorType::get({lanes}, sourceElement), source,
                                     ValueRange{r, c});
    vector::StoreOp::create(b, loc, convert(b, loc, x, VectorType::get({lanes}, tileElement)), tile,
                            ValueRange{r, c});
  }
  if (channelEnd > vectorEnd) {
    auto loop = scf::ForOp::create(b, loc, index(vectorEnd), index(channelEnd), index(1));
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c = loop.getInductionVar();
    Value x = memref::LoadOp::create(b, loc, source, ValueRange{r, c});
    memref::StoreOp::create(b, loc, convert(b, loc, x, tileElement), tile, ValueRange{r, c});
  }
}

} // namespace pejit::pe
