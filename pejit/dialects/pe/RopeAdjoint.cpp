// RoPE's operand adjoint (attn.qk_transform_grad, docs/backward.md): the
// gradient of the runtime position scale s from a tile of dQ' or dK' rows.
//
// Math: pair (a, b) of channels at frequency c turns by
// angle = (pos * s) * inv_freq[c], and d x'_a / d angle = -x'_b,
// d x'_b / d angle = x'_a (the attention factor rides along), so
//   dL/ds = sum over rows and pairs of pos_axis(c) * inv_freq[c] * (g_b x'_a - g_a x'_b)
// with g the gradient of the rotated rows x'. One contribution per tile (its
// rows are one batch row): at index batch for a [b] scale, 0 for [1].
// Summed in f64 within the tile: the terms are large (pos * inv_freq) and
// cancel. Scalar loops: this runs once per written tile, beside the
// phase's O(s) dot products per row. The frequencies are the static ones
// (runtime_scale excludes dynamic_ntk and longrope, the verifier's rule).
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/RopeConfig.h"
#include "pejit/dialects/pe/RopeTables.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "pejit/reference/Rope.h"

using namespace mlir;
using namespace pejit::pe;

bool RopeAttr::hasOperandAdjoint(unsigned index) const { return getRuntimeScale() && index == 0; }

llvm::SmallVector<GradContribution>
RopeAttr::emitQKTransformOperandAdjoint(OpBuilder &b, Location loc, const AttentionShape &shape,
                                        const QKGradArgs &args) const {
  if (!getRuntimeScale() || args.wanted.empty() || !args.wanted[0] || args.operands.empty())
    return {};
  RopeTableLayout layout(*this, shape);
  pejit::ref::RopeConfig config = toReferenceConfig(*this);
  std::vector<double> invFreq =
      pejit::ref::computeRopeFrequencies(config, shape.headDim, 0).invFreq;
  std::vector<int64_t> axisOf = pejit::ref::ropeAxisOfFrequency(config, layout.half);
  int64_t axes = std::max<int64_t>(getPositionAxes(), 1);
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  Type f32 = b.getF32Type(), f64 = b.getF64Type();

  // weights[a, c] = inv_freq[c] where frequency c takes axis a, else 0.
  auto weightType = MemRefType::get({axes, layout.half}, f64);
  Value weights = memref::AllocaOp::create(b, loc, weightType);
  auto rowType = VectorType::get({layout.half}, f64);
  for (int64_t a = 0; a < axes; ++a) {
    std::vector<double> row(layout.half, 0.0);
    for (int64_t c = 0; c < layout.half; ++c)
      if (axisOf[c] == a)
        row[c] = invFreq[c];
    Value constant =
        arith::ConstantOp::create(b, loc, rowType, DenseElementsAttr::get(rowType, ArrayRef(row)));
    vector::StoreOp::create(b, loc, constant, weights, ValueRange{index(a), index(0)});
  }
  int64_t positionRows = args.isKey ? shape.keyPositionRows : shape.queryPositionRows;
  Value zero = index(0), one = index(1);
  Value batchRow = positionRows == 1 ? zero : args.batch;
  Value zeroF64 = arith::ConstantFloatOp::create(b, loc, cast<FloatType>(f64), APFloat(0.0));
  auto rowLoop = scf::ForOp::create(b, loc, zero, args.rows, one, ValueRange{zeroF64});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rowLoop.getBody());
    Value r = rowLoop.getInductionVar();
    Value seqIndex = arith::AddIOp::create(b, loc, args.seqStart, r);
    // The row's position on each axis, as f64.
    SmallVector<Value> positions;
    for (int64_t a = 0; a < axes; ++a) {
      Value idRow = arith::AddIOp::create(b, loc, index(a * positionRows), batchRow);
      Value id = memref::LoadOp::create(b, loc, args.positions, ValueRange{idRow, seqIndex});
      positions.push_back(arith::SIToFPOp::create(b, loc, f64, id));
    }
    auto pairLoop = scf::ForOp::create(b, loc, zero, index(layout.half), one,
                                       ValueRange{rowLoop.getRegionIterArgs()[0]});
    b.setInsertionPointToStart(pairLoop.getBody());
    Value c = pairLoop.getInductionVar();
    // Channels of pair c: (c, c + half), or interleaved (2c, 2c + 1).
    Value chA = layout.interleaved ? arith::MulIOp::create(b, loc, c, index(2)).getResult() : c;
    Value chB = layout.interleaved ? arith::AddIOp::create(b, loc, chA, one)
                                   : arith::AddIOp::create(b, loc, c, index(layout.half));
    auto load = [&](Value rows, Value channel) -> Value {
      Value x = memref::LoadOp::create(b, loc, rows, ValueRange{r, channel});
      return arith::ExtFOp::create(b, loc, f64, x);
    };
    Value ga = load(args.grad, chA), gb = load(args.grad, chB);
    Value xa = load(args.transformed, chA), xb = load(args.transformed, chB);
    Value dAngle = arith::SubFOp::create(b, loc, arith::MulFOp::create(b, loc, gb, xa),
                                         arith::MulFOp::create(b, loc, ga, xb));
    Value weight = zeroF64;
    for (int64_t a = 0; a < axes; ++a) {
      Value w = memref::LoadOp::create(b, loc, weights, ValueRange{index(a), c});
      weight =
          arith::AddFOp::create(b, loc, weight, arith::MulFOp::create(b, loc, w, positions[a]));
    }
    Value sum = arith::AddFOp::create(b, loc, pairLoop.getRegionIterArgs()[0],
                                      arith::MulFOp::create(b, loc, weight, dAngle));
    scf::YieldOp::create(b, loc, sum);
    b.setInsertionPointAfter(pairLoop);
    scf::YieldOp::create(b, loc, pairLoop.getResult(0));
  }
  Value total = arith::TruncFOp::create(b, loc, f32, rowLoop.getResult(0));
  // [1]: one scale for the batch; [b]: batch row `batch`'s.
  Value scale = args.operands[0];
  Value size = memref::DimOp::create(b, loc, scale, 0);
  Value shared = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, size, one);
  Value at = arith::SelectOp::create(b, loc, shared, zero, args.batch);
  return {GradContribution{0, at, total}};
}
