// Ops of the attn dialect (AttnOps.td).
#ifndef PEJIT_DIALECTS_ATTN_ATTNOPS_H
#define PEJIT_DIALECTS_ATTN_ATTNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "pejit/dialects/attn/AttnDialect.h"
#include "pejit/dialects/pe/PEInterfaces.h"
#include <optional>
#include <utility>

#include "pejit/dialects/attn/AttnEnums.h.inc"

#define GET_OP_CLASSES
#include "pejit/dialects/attn/AttnOps.h.inc"

namespace pejit::attn {

/// The shape rules attn.attention and attn.linear_attention share: Q [b,
/// hq, sq, d], K [b, hkv, skv, d], V [b, hkv, skv, dv], the result [b, hq,
/// sq, dv], one element type, hq a multiple of hkv, sizes within limits.
::llvm::LogicalResult verifyQueryKeyValue(::mlir::Operation *op, ::mlir::Value q, ::mlir::Value k,
                                          ::mlir::Value v, ::mlir::Value result,
                                          ::llvm::StringRef resultName = "result");

/// Position ids of an attention-shaped op, when given: [s] or [b, s] (with
/// `axes` > 0, a leading axis per M-RoPE section) of i32 or i64, s = sq for
/// the query's and skv for the key's.
::llvm::LogicalResult verifyQueryKeyPositions(::mlir::Operation *op, ::mlir::Value queryPositions,
                                              ::mlir::Value keyPositions, int64_t batch,
                                              int64_t querySeq, int64_t keySeq, int64_t axes);

/// scale and softcap positive f32 numbers (scale required when d is
/// dynamic); windows non-negative.
::llvm::LogicalResult verifyScaleWindowSoftcap(::mlir::Operation *op, ::mlir::FloatAttr scale,
                                               int64_t headDim, std::optional<int64_t> window,
                                               std::optional<int64_t> right,
                                               ::mlir::FloatAttr softcap);

/// The fused `encodings` of an attention-shaped op and their operands: pe
/// attributes attention can apply, at most one QK transform and one value
/// term, each operand checked by its encoding.
::llvm::LogicalResult verifyFusedEncodings(::mlir::Operation *op, ::mlir::ArrayAttr encodings,
                                           ::mlir::ValueRange encodingOperands, ::mlir::Value query,
                                           ::mlir::Value key, ::mlir::Value value,
                                           ::mlir::Value queryPositions,
                                           ::mlir::Value keyPositions);

/// The encoding of `encodings` that reads encoding operand `index` (each
/// takes the next getNumEncodingOperands()), and the operand's index among
/// that encoding's own; null when out of range.
std::pair<::pejit::pe::PositionalEncodingAttrInterface, unsigned>
encodingOfOperand(::mlir::ArrayAttr encodings, unsigned index);

/// Packed sequences (`segments(cuQ, cuK)`) and per-row key lengths
/// (`key_lengths(lengths)`) of an attention-shaped op: not both, their
/// sizes, `?` lengths, ids shared by the batch where each row runs alone
/// (key lengths, or a paged K/V).
::llvm::LogicalResult verifySegmentsAndLengths(::mlir::Operation *op, ::mlir::Value query,
                                               ::mlir::Value key, ::mlir::Value querySegments,
                                               ::mlir::Value keySegments, ::mlir::Value keyLengths,
                                               bool paged, ::mlir::Value queryPositions,
                                               ::mlir::Value keyPositions,
                                               ::mlir::ArrayAttr encodings);

/// The QK transform among `encodings` (at most one), or null.
::pejit::pe::PositionalEncodingAttrInterface fusedQKTransform(::mlir::ArrayAttr encodings);

} // namespace pejit::attn

#endif // PEJIT_DIALECTS_ATTN_ATTNOPS_H
