// RoPE's per-call cos/sin tables: their layout in the scratch and the
// prologue code that fills them (RopeTables.cpp), shared by RoPE's hooks
// (RopeHooks.cpp).
#ifndef PEJIT_DIALECTS_PE_ROPETABLES_H
#define PEJIT_DIALECTS_PE_ROPETABLES_H

#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"

namespace pejit::pe {

/// The tables of one RoPE at one head dim: W entries per (row, s), W =
/// rd / 2 (half), or rd (interleaved: entries duplicated per channel pair,
/// sin signed -/+).
struct RopeTableLayout {
  int64_t half = 0;  // rd / 2 frequencies
  int64_t width = 0; // W entries per (row, s)
  bool interleaved = false;

  RopeTableLayout(RopeAttr rope, const AttentionShape &shape) {
    int64_t rotaryDim = rope.getRotaryDim().value_or(shape.headDim);
    half = rotaryDim / 2;
    interleaved = rope.getLayout() == RopeLayout::Interleaved;
    width = interleaved ? rotaryDim : half;
  }
};

/// Fills invFreq (memref<half x f64>) with this call's inverse
/// frequencies: the operand rope_inv_freq's (learned_inv_freq), the
/// scaling's long-context ones when max(position) + 1 passes its original
/// length (dynamic_ntk, longrope: args' ids), else the static ones.
void emitInverseFrequencies(mlir::OpBuilder &b, mlir::Location loc, RopeAttr rope,
                            const AttentionShape &shape, const QKPrologueArgs &args,
                            mlir::Value invFreq);

/// cos/sin tables of one position tensor into scratch. With position axes
/// (M-RoPE sections, axial RoPE), positions holds one block of rows per axis
/// ([axes * rows, seq]) and frequency c takes the position of its axis,
/// axisOfFrequency[c] (the reference's map, pejit/reference/Rope.h). f32Lanes
/// is the target's f32 vector width: 8 (AVX2) takes the 8-lane path.
void emitRopeTables(mlir::OpBuilder &b, mlir::Location loc, const RopeTableLayout &layout,
                    mlir::Value positions, mlir::Value invFreq, double attentionFactor,
                    mlir::Value cosBase, mlir::Value sinBase, mlir::Value scratch,
                    mlir::Value rowBegin, mlir::Value rowStep, int64_t positionAxes,
                    llvm::ArrayRef<int64_t> axisOfFrequency, mlir::Value positionScale,
                    int64_t f32Lanes);

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_ROPETABLES_H
