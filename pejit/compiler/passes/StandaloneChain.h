// A standalone kernel's program (docs/standalone-kernels.md): the chain of
// pe ops a function of no attention computes, read and checked once for
// the templates that compile it (templates/x86/qk_transform.mlir and
// embed.mlir).
#ifndef PEJIT_COMPILER_PASSES_STANDALONECHAIN_H
#define PEJIT_COMPILER_PASSES_STANDALONECHAIN_H

#include "pejit/core/KernelSignature.h"
#include "pejit/dialects/pe/KernelHooks.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace pejit {

/// out = op_n( ... op_1(op_0(source)) ... ): the source is an argument x
/// (then op_0 reads it) or a pe.embed's gather. Every op is elementwise on
/// rows (a QK transform or an additive embedding) with a standalone kernel,
/// and all read the same position ids.
struct StandaloneChain {
  mlir::func::FuncOp func;
  pe::EmbedOp embed;                                        ///< null: the source is `input`
  mlir::Value input;                                        ///< x, an argument (no embed)
  mlir::Value ids;                                          ///< the ops' ids (null: no op)
  llvm::SmallVector<pe::PositionalEncodingOpInterface> ops; ///< in order
  llvm::SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  llvm::SmallVector<mlir::Value> tables; ///< the ops' own tensors (encoding operands)

  /// The op whose result the function returns.
  mlir::Operation *last() const;
};

/// The module's one function, when it holds no attention: pe ops (and a
/// pe.embed) only. Null otherwise.
mlir::func::FuncOp standaloneFunction(mlir::ModuleOp module);

/// The function's chain; an error on the op that breaks a rule.
mlir::FailureOr<StandaloneChain> readStandaloneChain(mlir::func::FuncOp func);

/// What every target's standalone kernel reads off the chain: the rows it
/// works on ([b, h, s, d], an embedding's [b, s, d] as [b, 1, s, d]), the
/// hooks' shape (no keys: keySeq 0), the ids' rows and axes, the tables'
/// floats per position, the lowest learned-table limit on ids, the
/// signature, and the one encoding operand slot's memref type.
struct StandaloneKernel {
  mlir::Operation *first = nullptr;           ///< the embed, or op 0
  mlir::RankedTensorType rowsType, outType;   ///< as the user wrote them
  bool embedding = false;                     ///< rows are [b, s, d]
  pe::AttentionShape shape;                   ///< queryTileRows left to the target
  int64_t positionLimit = 0, perPosition = 0; ///< 0: no limit / no tables
  KernelSignature signature;
  std::string operandSlot;                          ///< memref<1xf32> if none
  const char *inName = nullptr, *outName = nullptr; ///< "f32", "f16" or "bf16"
};

/// The chain's kernel description for hooks of `vectorWidth` lanes; an
/// error on the op that breaks a rule (rank, a `?` head or head dim, an
/// element type, ids per batch row with a `?` batch), naming `target`.
mlir::FailureOr<StandaloneKernel> describeStandalone(const StandaloneChain &chain,
                                                     int64_t vectorWidth, llvm::StringRef target);

/// The template text of the chain's hooks, spliced where the template says
/// ${PARTS}, ${PROLOGUES} and ${TRANSFORMS}: op k's part of the scratch
/// (its per-position floats for `positionRows` rows of %S ids, after op
/// k - 1's), its attn.qk_prologue, and its attn.qk_transform on %tile
/// (`fromRows`: op 0 reads %rows, the others transform in place).
struct ChainHookText {
  std::string parts, prologues, transforms;
};
ChainHookText chainHookText(const StandaloneChain &chain, const pe::AttentionShape &shape,
                            int64_t positionRows, bool fromRows);

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_STANDALONECHAIN_H
