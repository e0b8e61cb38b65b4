// What the x86 linear attention templates share, forward
// (InstantiateX86LinearAttention.cpp) and backward
// (InstantiateX86LinearBackward.cpp): their shape rules, the parameters both
// read, and the kernel's parse, hooks and description.
#ifndef PEJIT_COMPILER_PASSES_X86LINEARTEMPLATE_H
#define PEJIT_COMPILER_PASSES_X86LINEARTEMPLATE_H

#include "pejit/core/KernelSignature.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>

namespace pejit {

/// The form of a linear attention the templates specialise on.
struct X86LinearForm {
  attn::FeatureMap map;
  bool causal = false;
  bool onNumerator = false; ///< rope_placement(rope_on_numerator)
};

/// The AVX2 templates' rules: d and dv multiples of 8, `states` d x dv
/// matrices within the item's stack bound, ids per batch row only with a
/// static batch. An error on `op` names the broken rule.
mlir::LogicalResult checkX86LinearShape(mlir::Operation *op, const pe::AttentionShape &shape,
                                        int64_t states);

/// The parameters both templates read: B HQ HKV GROUP SQ SKV D DV R T QPB
/// KPB CAUSAL ON_NUMERATOR SOFTMAX_KEYS NORMALIZE E0 PHI8 WIDEN8.
std::map<std::string, std::string> x86LinearParams(const pe::AttentionShape &shape,
                                                   X86LinearForm form, int64_t rows,
                                                   const std::string &typeName,
                                                   const std::string &scaleSlot);

/// `text` parsed, the RoPE's hooks expanded, spliced in place of `func`
/// with its description: `itemsPerBatch` items per batch row, the RoPE's
/// tables, tile_m the largest length (one item covers every row), tile_n
/// `rows`, and `extra` entries.
mlir::LogicalResult finishX86LinearKernel(mlir::ModuleOp module, mlir::Operation *op,
                                          mlir::func::FuncOp func, const KernelSignature &signature,
                                          const std::string &text, const pe::AttentionShape &shape,
                                          pe::PositionalEncodingAttrInterface rope,
                                          int64_t itemsPerBatch, int64_t rows,
                                          mlir::NamedAttrList extra, llvm::StringRef dtype,
                                          llvm::StringRef outDtype);

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_X86LINEARTEMPLATE_H
