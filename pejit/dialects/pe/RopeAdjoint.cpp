// RoPE's operand adjoint (attn.qk_transform_grad, docs/backward.md): the
// gradients of the runtime position scale s and of learned inverse
// frequencies from a tile of dQ' or dK' rows.
//
// Math: pair (a, b) of channels at frequency c turns by
// angle = (pos * s) * inv_freq[c], and d x'_a / d angle = -x'_b,
// d x'_b / d angle = x'_a (the attention factor rides along), so with
// t_c = g_b x'_a - g_a x'_b (g the gradient of the rotated rows x'):
//   dL/ds          = sum over rows and pairs of pos_axis(c) * inv_freq[c] * t_c
//   dL/dinv_freq[c] = sum over rows of pos_axis(c) * s * t_c
// The tile's rows are one batch row: one contribution to s (at index
// batch for a [b] scale, 0 for [1]) and one per frequency. Summed in f64
// within the tile: the terms are large (pos * inv_freq) and cancel. Scalar
// loops: this runs once per written tile, beside the phase's O(s) dot
// products per row. Constant frequencies are the static ones (runtime_scale
// and learned_inv_freq exclude dynamic_ntk and longrope, the verifier's
// rule).
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

bool RopeAttr::hasOperandAdjoint(unsigned index) const {
  return index == scaleOperand() || index == invFreqOperand();
}

llvm::SmallVector<GradContribution>
RopeAttr::emitQKTransformOperandAdjoint(OpBuilder &b, Location loc, const AttentionShape &shape,
                                        const QKGradArgs &args) const {
  auto wanted = [&](std::optional<unsigned> at) {
    return at && *at < args.wanted.size() && args.wanted[*at] && *at < args.operands.size();
  };
  const bool wantScale = wanted(scaleOperand()), wantFreq = wanted(invFreqOperand());
  if (!wantScale && !wantFreq)
    return {};
  RopeTableLayout layout(*this, shape);
  pejit::ref::RopeConfig config = toReferenceConfig(*this);
  std::vector<int64_t> axisOf = pejit::ref::ropeAxisOfFrequency(config, layout.half);
  int64_t axes = std::max<int64_t>(getPositionAxes(), 1);
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  Type f32 = b.getF32Type(), f64 = b.getF64Type();
  auto f64Const = [&](double v) -> Value {
    return arith::ConstantFloatOp::create(b, loc, cast<FloatType>(f64), APFloat(v));
  };
  Value zero = index(0), one = index(1), zeroF64 = f64Const(0.0);

  // inv_freq[c] (f64): the operand's, or the static ones (the prologue's
  // rule; runtime_scale and learned_inv_freq exclude the dynamic scalings).
  Value invFreq = memref::AllocaOp::create(b, loc, MemRefType::get({layout.half}, f64));
  QKPrologueArgs frequencyArgs;
  frequencyArgs.operands = args.operands;
  emitInverseFrequencies(b, loc, *this, shape, frequencyArgs, invFreq);
  // axisMask[a, c] = 1 where frequency c takes axis a's position.
  auto maskType = MemRefType::get({axes, layout.half}, f64);
  Value axisMask = memref::AllocaOp::create(b, loc, maskType);
  auto rowType = VectorType::get({layout.half}, f64);
  for (int64_t a = 0; a < axes; ++a) {
    std::vector<double> row(layout.half, 0.0);
    for (int64_t c = 0; c < layout.half; ++c)
      row[c] = axisOf[c] == a ? 1.0 : 0.0;
    vector::StoreOp::create(
        b, loc,
        arith::ConstantOp::create(b, loc, rowType, DenseElementsAttr::get(rowType, ArrayRef(row))),
        axisMask, ValueRange{index(a), zero});
  }
  // The batch row's scale s (1 without runtime_scale), and where its
  // gradient goes: [1] one scale for the batch, [b] batch row `batch`'s.
  Value scaleValue = f64Const(1.0), scaleAt = zero;
  if (std::optional<unsigned> at = scaleOperand(); at && *at < args.operands.size()) {
    Value scale = args.operands[*at];
    Value shared = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         memref::DimOp::create(b, loc, scale, 0), one);
    scaleAt = arith::SelectOp::create(b, loc, shared, zero, args.batch);
    Value value = memref::LoadOp::create(b, loc, scale, ValueRange{scaleAt});
    scaleValue = arith::ExtFOp::create(b, loc, f64, value);
  }
  // Per-frequency sums of pos * t_c over the tile's rows.
  Value freqSums;
  if (wantFreq) {
    freqSums = memref::AllocaOp::create(b, loc, MemRefType::get({layout.half}, f64));
    vector::StoreOp::create(
        b, loc,
        arith::ConstantOp::create(
            b, loc, rowType,
            DenseElementsAttr::get(rowType, ArrayRef(std::vector<double>(layout.half, 0.0)))),
        freqSums, ValueRange{zero});
  }

  int64_t positionRows = args.isKey ? shape.keyPositionRows : shape.queryPositionRows;
  Value batchRow = positionRows == 1 ? zero : args.batch;
  auto rowLoop = scf::ForOp::create(b, loc, zero, args.rows, one, ValueRange{zeroF64});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rowLoop.getBody());
    Value r = rowLoop.getInductionVar();
    Value seqIndex = arith::AddIOp::create(b, loc, args.seqStart, r);
    SmallVector<Value> positions; // the row's position on each axis, f64
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
    Value position = zeroF64; // pos_axis(c)
    for (int64_t a = 0; a < axes; ++a) {
      Value m = memref::LoadOp::create(b, loc, axisMask, ValueRange{index(a), c});
      position =
          arith::AddFOp::create(b, loc, position, arith::MulFOp::create(b, loc, m, positions[a]));
    }
    Value posT = arith::MulFOp::create(b, loc, position, dAngle);
    if (wantFreq) {
      Value old = memref::LoadOp::create(b, loc, freqSums, ValueRange{c});
      memref::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, old, posT), freqSums,
                              ValueRange{c});
    }
    Value w = memref::LoadOp::create(b, loc, invFreq, ValueRange{c});
    Value sum = arith::AddFOp::create(b, loc, pairLoop.getRegionIterArgs()[0],
                                      arith::MulFOp::create(b, loc, w, posT));
    scf::YieldOp::create(b, loc, sum);
    b.setInsertionPointAfter(pairLoop);
    scf::YieldOp::create(b, loc, pairLoop.getResult(0));
  }
  llvm::SmallVector<GradContribution> contributions;
  if (wantScale)
    contributions.push_back(
        {*scaleOperand(), scaleAt, arith::TruncFOp::create(b, loc, f32, rowLoop.getResult(0))});
  if (wantFreq)
    for (int64_t c = 0; c < layout.half; ++c) {
      Value sum = memref::LoadOp::create(b, loc, freqSums, ValueRange{index(c)});
      contributions.push_back(
          {*invFreqOperand(), index(c),
           arith::TruncFOp::create(b, loc, f32, arith::MulFOp::create(b, loc, sum, scaleValue))});
    }
  return contributions;
}
