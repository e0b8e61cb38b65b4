// The tile transform the absolute embeddings share in a standalone kernel
// (docs/standalone-kernels.md): each row plus its position's row of the
// prologue's table.
#ifndef PEJIT_DIALECTS_PE_EMBEDDINGROWS_H
#define PEJIT_DIALECTS_PE_EMBEDDINGROWS_H

#include "pejit/dialects/pe/KernelHooks.h"

namespace pejit::pe {

/// tile[r, :] = source[r, :] + scratch[(row of r) d : (row of r) d + d],
/// in f32, for r in [0, args.rows). The scratch holds d f32 per (batch row,
/// sequence index) of the position ids, laid out row-major as the ids are
/// (shape.queryPositionRows rows of args.querySeq): what an embedding's
/// emitQKPrologue fills.
void emitAddPositionRows(mlir::OpBuilder &b, mlir::Location loc, const AttentionShape &shape,
                         const QKTileArgs &args);

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_EMBEDDINGROWS_H
