// A linear attention kernel's program (docs/linear-attention.md): the one
// attn.linear_attention of a module's function, read and checked once for
// the templates that compile it (templates/x86/linear_attention.mlir,
// templates/nvidia/linear_attention.mlir).
#ifndef PEJIT_COMPILER_PASSES_LINEARATTENTIONKERNEL_H
#define PEJIT_COMPILER_PASSES_LINEARATTENTIONKERNEL_H

#include "pejit/core/KernelSignature.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace pejit {

struct LinearAttentionKernel {
  mlir::func::FuncOp func;
  attn::LinearAttentionOp op;
  /// The function's arguments by role (query, key, value, their ids, the
  /// state, the RoPE's runtime scale as encoding operand 0).
  KernelSignature signature;
  /// The fused RoPE's own tensors (its runtime scale), arguments.
  llvm::SmallVector<mlir::Value> operands;
  pe::PositionalEncodingAttrInterface rope; ///< null: no RoPE
};

/// The module's one function, whose body is one attn.linear_attention on
/// its arguments, returned. Anything else is an error naming it.
mlir::FailureOr<LinearAttentionKernel> readLinearAttention(mlir::ModuleOp module);

struct LinearAttentionBackwardKernel {
  mlir::func::FuncOp func;
  attn::LinearAttentionBackwardOp op;
  /// query, key, value, output, output_grad, their ids, the RoPE's scale.
  KernelSignature signature;
  pe::PositionalEncodingAttrInterface rope; ///< null: no RoPE
};

/// The module's one function, whose body is one
/// attn.linear_attention_backward on its arguments returning dq, dk, dv.
mlir::FailureOr<LinearAttentionBackwardKernel> readLinearAttentionBackward(mlir::ModuleOp module);

/// The body of the x86 templates' @phi8 (the feature map on 8 lanes;
/// identity for softmax_keys).
std::string x86FeatureMapBody(attn::FeatureMap map);

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_LINEARATTENTIONKERNEL_H
