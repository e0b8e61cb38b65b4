// emitRopeTables (RopeTables.h): RoPE's per-call cos/sin tables, the
// prologue's part of its hooks (RopeHooks.cpp).
//
// Per (batch row, sequence index) of the ids and frequency c:
//   angle = position * inv_freq[c]   (* a runtime scale), in float64
//   cos = cos(angle) * factor, sin = sin(angle) * factor, stored f32
// The sin and cos take no libm calls: VectorSinCos reduces the angle mod
// pi/2 in float64 (positions >= 1e6 stay accurate), then evaluates the
// polynomials in float64 on 4 lanes, or in f32 on 8 (AVX2).
#include "pejit/dialects/pe/RopeTables.h"
#include "pejit/dialects/pe/VectorSinCos.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace {

Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

} // namespace

void pejit::pe::emitRopeTables(OpBuilder &b, Location loc, const RopeTableLayout &layout,
                               Value positions, Value invFreq, double attentionFactor,
                               Value cosBase, Value sinBase, Value scratch, Value rowBegin,
                               Value rowStep, int64_t positionAxes,
                               llvm::ArrayRef<int64_t> axisOfFrequency, Value positionScale,
                               int64_t f32Lanes) {
  int64_t axes = std::max<int64_t>(positionAxes, 1);
  Value rows = arith::DivUIOp::create(b, loc, memref::DimOp::create(b, loc, positions, 0),
                                      indexConst(b, loc, axes));
  Value seq = memref::DimOp::create(b, loc, positions, 1);
  // (first frequency, count, axis) of each run of frequencies on one axis:
  // one run without axes, one per section for M-RoPE, one per frequency for
  // Qwen3-VL's interleaved sections.
  struct Section {
    int64_t first, count, axis;
  };
  SmallVector<Section> parts;
  for (int64_t c = 0; c < layout.half; ++c) {
    if (!parts.empty() && parts.back().axis == axisOfFrequency[c])
      ++parts.back().count;
    else
      parts.push_back({c, 1, axisOfFrequency[c]});
  }
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  Value factor = arith::ConstantFloatOp::create(b, loc, b.getF64Type(), APFloat(attentionFactor));
  auto rowLoop =
      scf::ForOp::create(b, loc, rowBegin ? rowBegin : zero,
                         arith::MulIOp::create(b, loc, rows, seq), rowStep ? rowStep : one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  Value flat = rowLoop.getInductionVar();
  Value row = arith::DivUIOp::create(b, loc, flat, seq);
  Value col = arith::RemUIOp::create(b, loc, flat, seq);
  Value rowBase = arith::MulIOp::create(b, loc, flat, indexConst(b, loc, layout.width));
  // A runtime scale ([1], or [b] with per-batch ids: row r's is scale[r])
  // multiplies the position before the rotation, in f64.
  Value scale;
  if (positionScale) {
    bool shared = cast<MemRefType>(positionScale.getType()).getDimSize(0) == 1;
    Value at = shared ? zero : row;
    Value loaded = memref::LoadOp::create(b, loc, positionScale, ValueRange{at});
    scale = arith::ExtFOp::create(b, loc, b.getF64Type(), loaded);
  }
  auto storeAt = [&](Value value, Value base, Value offset) {
    Value index = arith::AddIOp::create(b, loc, rowBase, offset);
    index = arith::AddIOp::create(b, loc, index, base);
    if (isa<VectorType>(value.getType()))
      vector::StoreOp::create(b, loc, value, scratch, ValueRange{index});
    else
      memref::StoreOp::create(b, loc, value, scratch, ValueRange{index});
  };
  // Four frequencies at a time with the vector sin/cos (no libm calls),
  // else one at a time with math.sin/cos. With 8-lane f32 vectors (AVX2),
  // eight at a time: the angles and their reduction in float64, the
  // polynomials in f32 (emitSinCosF32; the tables are f32 either way).
  constexpr int64_t kLanes = 4;
  auto allParts = [&](int64_t lanes) {
    return llvm::all_of(parts, [&](const Section &part) { return part.count % lanes == 0; });
  };
  bool vectorized = allParts(kLanes);
  bool wide = f32Lanes >= 8 && allParts(8);
  int64_t step = wide ? 8 : vectorized ? kLanes : 1;
  for (const Section &part : parts) {
    OpBuilder::InsertionGuard sectionGuard(b);
    Value axisRow = arith::AddIOp::create(
        b, loc, row, arith::MulIOp::create(b, loc, rows, indexConst(b, loc, part.axis)));
    Value pos = memref::LoadOp::create(b, loc, positions, ValueRange{axisRow, col});
    Value posF = arith::SIToFPOp::create(b, loc, b.getF64Type(), pos);
    if (scale)
      posF = arith::MulFOp::create(b, loc, posF, scale);
    auto freqLoop =
        scf::ForOp::create(b, loc, indexConst(b, loc, part.first),
                           indexConst(b, loc, part.first + part.count), indexConst(b, loc, step));
    b.setInsertionPointToStart(freqLoop.getBody());
    Value c = freqLoop.getInductionVar();
    Value cos32, sin32;
    if (wide) {
      auto f64Type = VectorType::get({kLanes}, b.getF64Type());
      Value posV = vector::BroadcastOp::create(b, loc, f64Type, posF);
      auto angle = [&](Value at) -> Value {
        Value freq = vector::LoadOp::create(b, loc, f64Type, invFreq, ValueRange{at});
        return arith::MulFOp::create(b, loc, posV, freq);
      };
      Value upper = arith::AddIOp::create(b, loc, c, indexConst(b, loc, kLanes));
      auto [sinV, cosV] = emitSinCosF32(b, loc, angle(c), angle(upper));
      cos32 = cosV;
      sin32 = sinV;
      if (attentionFactor != 1.0) {
        Value factorV =
            arith::ConstantOp::create(b, loc,
                                      DenseElementsAttr::get(VectorType::get({8}, b.getF32Type()),
                                                             static_cast<float>(attentionFactor)));
        cos32 = arith::MulFOp::create(b, loc, cos32, factorV);
        sin32 = arith::MulFOp::create(b, loc, sin32, factorV);
      }
    } else if (vectorized) {
      auto f64Type = VectorType::get({kLanes}, b.getF64Type());
      Value freq = vector::LoadOp::create(b, loc, f64Type, invFreq, ValueRange{c});
      Value angle =
          arith::MulFOp::create(b, loc, vector::BroadcastOp::create(b, loc, f64Type, posF), freq);
      auto [sinV, cosV] = emitSinCos(b, loc, angle);
      Value factorV = vector::BroadcastOp::create(b, loc, f64Type, factor);
      auto f32Type = VectorType::get({kLanes}, b.getF32Type());
      cos32 =
          arith::TruncFOp::create(b, loc, f32Type, arith::MulFOp::create(b, loc, cosV, factorV));
      sin32 =
          arith::TruncFOp::create(b, loc, f32Type, arith::MulFOp::create(b, loc, sinV, factorV));
    } else {
      Value freq = memref::LoadOp::create(b, loc, invFreq, ValueRange{c});
      Value angle = arith::MulFOp::create(b, loc, posF, freq);
      Value cosV = arith::MulFOp::create(b, loc, math::CosOp::create(b, loc, angle), factor);
      Value sinV = arith::MulFOp::create(b, loc, math::SinOp::create(b, loc, angle), factor);
      cos32 = arith::TruncFOp::create(b, loc, b.getF32Type(), cosV);
      sin32 = arith::TruncFOp::create(b, loc, b.getF32Type(), sinV);
    }
    if (!layout.interleaved) {
      storeAt(cos32, cosBase, c);
      storeAt(sin32, sinBase, c);
      continue;
    }
    Value even = arith::MulIOp::create(b, loc, c, indexConst(b, loc, 2));
    Value negSin32 = arith::NegFOp::create(b, loc, sin32);
    if (step > 1) {
      // Entries 2c and 2c + 1: cos twice; -sin then +sin. Eight entries
      // per four frequencies.
      for (int64_t quad = 0; quad < step / kLanes; ++quad) {
        int64_t q = quad * kLanes, n = step;
        Value cosPairs = vector::ShuffleOp::create(
            b, loc, cos32, cos32,
            ArrayRef<int64_t>{q, q, q + 1, q + 1, q + 2, q + 2, q + 3, q + 3});
        Value sinPairs = vector::ShuffleOp::create(
            b, loc, negSin32, sin32,
            ArrayRef<int64_t>{q, n + q, q + 1, n + q + 1, q + 2, n + q + 2, q + 3, n + q + 3});
        Value at = arith::AddIOp::create(b, loc, even, indexConst(b, loc, 2 * q));
        storeAt(cosPairs, cosBase, at);
        storeAt(sinPairs, sinBase, at);
      }
      continue;
    }
    Value odd = arith::AddIOp::create(b, loc, even, one);
    storeAt(cos32, cosBase, even);
    storeAt(cos32, cosBase, odd);
    storeAt(negSin32, sinBase, even);
    storeAt(sin32, sinBase, odd);
  }
}
