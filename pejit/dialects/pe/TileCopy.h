// Copying rows of a Q/K operand into a kernel tile, converting the element
// type on the way: what an `attn.qk_transform ... from %source` does for the
// channels a QK transform leaves alone, and the whole op when no transform
// is fused.
#ifndef PEJIT_DIALECTS_PE_TILECOPY_H
#define PEJIT_DIALECTS_PE_TILECOPY_H

#include "mlir/IR/Builders.h"

namespace pejit::pe {

/// tile[r, c] = convert(source[r, c]) for r in [0, rows), c in
/// [channelBegin, channelEnd): vectors of `lanes` elements, then scalars for
/// the rest. source and tile are 2-D float memrefs; f16/bf16 widen to f32
/// (extf) and f32 narrows (truncf) when the tile is the narrower one.
void emitTileRowCopy(mlir::OpBuilder &b, mlir::Location loc, mlir::Value source, mlir::Value tile,
                     mlir::Value rows, int64_t channelBegin, int64_t channelEnd, int64_t lanes);

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_TILECOPY_H
