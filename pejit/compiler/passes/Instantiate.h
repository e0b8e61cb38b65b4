// The template instantiation passes as functions: the fused attention
// function of a module becomes the kernel of a target's template
// (attn-instantiate-x86-template, attn-instantiate-nvidia-template).
#ifndef PEJIT_COMPILER_PASSES_INSTANTIATE_H
#define PEJIT_COMPILER_PASSES_INSTANTIATE_H

#include "pejit/compiler/Target.h"
#include "pejit/core/KernelSignature.h"
#include "pejit/dialects/attn/AttnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/BuiltinOps.h"

namespace pejit {

/// Name of the module attribute (a dictionary) that describes the kernel to
/// the runtime: items, scratch_floats, query_position_rows,
/// key_position_rows, tile_m, tile_n, and `arguments`, the role of each
/// argument of the source function ("query", "key", "value",
/// "query_positions", "key_positions", or "positions" for one argument that
/// is both). The nvidia template adds grid, block, splits, the split-KV
/// buffer sizes and combine_grid. readKernelInfo (Stages.h) reads it.
inline constexpr const char *kKernelInfoAttr = "pejit.kernel";

/// Replaces the module's one function (one fused attn.attention on function
/// arguments, static shapes) by the kernel functions @pejit_prologue and
/// @pejit_item of the x86 AVX2 template, with the encodings' hooks
/// expanded. Emits a diagnostic naming the problem and fails on anything it
/// cannot compile.
mlir::LogicalResult instantiateX86Template(mlir::ModuleOp module, const X86TileConfig &tiles);

/// Whether the module's one function computes no attention but a QK
/// transform (pe.rope) alone: the standalone kernels of
/// docs/standalone-kernels.md.
bool isStandaloneTransform(mlir::ModuleOp module);

/// The standalone form of instantiateX86Template, which calls it for such a
/// module: a function whose body is one pe.rope on its arguments, returned,
/// becomes @pejit_prologue and @pejit_transform_item of
/// templates/x86/qk_transform.mlir. Anything else is an error naming it.
mlir::LogicalResult instantiateX86Transform(mlir::ModuleOp module);

/// Whether the module's one function is one score-bias pe op (pe.alibi,
/// pe.t5_bias) returned: a materialized bias.
bool isMaterializedBias(mlir::ModuleOp module);

/// The materialized bias form of instantiateX86Template: @pejit_bias_item
/// of templates/x86/score_bias.mlir writes the encoding's bias, one output
/// row per item (docs/standalone-kernels.md).
mlir::LogicalResult instantiateX86ScoreBias(mlir::ModuleOp module);

/// Whether the module's one function is one pe.embed_grad returned: a
/// table's gradient (docs/backward.md, "Standalone kernels").
bool isEmbeddingGradient(mlir::ModuleOp module);

/// The table gradient form of instantiateX86Template: @pejit_embed_grad_item
/// of templates/x86/embed_grad.mlir, a block of table rows per item.
mlir::LogicalResult instantiateX86EmbedGrad(mlir::ModuleOp module);

/// Whether the module computes pe.score_bias_grad (a materialized bias's
/// tensor gradient).
bool isScoreBiasGradient(mlir::ModuleOp module);

/// Its form of instantiateX86Template: @pejit_bias_grad_item of
/// templates/x86/score_bias_grad.mlir, partial gradients per item that the
/// runtime adds in item order.
mlir::LogicalResult instantiateX86ScoreBiasGrad(mlir::ModuleOp module);

/// Whether the module computes pe.relative_term_grad (a materialized Shaw
/// term's gradients).
bool isRelativeTermGradient(mlir::ModuleOp module);

/// Its form of instantiateX86Template: @pejit_key_term_grad_item of
/// templates/x86/key_term_grad.mlir or @pejit_value_term_grad_item of
/// templates/x86/value_term_grad.mlir, partial tables per item that the
/// runtime adds in item order.
mlir::LogicalResult instantiateX86RelativeTermGrad(mlir::ModuleOp module);

/// Whether the module's one function is one pe.rope_scale_grad returned:
/// a standalone RoPE's position scale gradient.
bool isRopeScaleGradient(mlir::ModuleOp module);

/// Its form of instantiateX86Template: @pejit_prologue and
/// @pejit_scale_grad_item of templates/x86/rope_scale_grad.mlir, partial
/// sums per item that the runtime adds in item order.
mlir::LogicalResult instantiateX86RopeScaleGrad(mlir::ModuleOp module);

/// Whether the module computes attn.attention_backward.
bool isAttentionBackward(mlir::ModuleOp module);

/// The module's one function and its one attn.attention_backward (on the
/// function's arguments, returned); an error naming what else is there.
mlir::FailureOr<std::pair<mlir::func::FuncOp, attn::AttentionBackwardOp>>
findAttentionBackward(mlir::ModuleOp module);

/// The kernel arguments of a backward function, each bound to its role in
/// `op` (q, k, v, o, dO, ids, lse, the encoding operands named by
/// `operandNames`), appended to `signature`; shared by both targets.
mlir::LogicalResult bindBackwardArguments(mlir::func::FuncOp func, attn::AttentionBackwardOp op,
                                          llvm::ArrayRef<std::string> operandNames,
                                          KernelSignature &signature);

/// The backward form of instantiateX86Template: @pejit_backward_rows,
/// @pejit_backward_kv and @pejit_backward_q of
/// templates/x86/attention_backward.mlir (docs/backward.md).
mlir::LogicalResult instantiateX86Backward(mlir::ModuleOp module, int64_t lanes = 8);

/// Whether the module computes attn.linear_attention.
bool isLinearAttention(mlir::ModuleOp module);

/// The linear attention form of instantiateX86Template, which calls it for
/// such a module: one attn.linear_attention (a RoPE fused) on the
/// function's arguments becomes @pejit_prologue and @pejit_item of
/// templates/x86/linear_attention.mlir, with the attention kernel's
/// calling convention (docs/linear-attention.md).
mlir::LogicalResult instantiateX86LinearAttention(mlir::ModuleOp module);

/// Whether the module computes attn.linear_attention_backward.
bool isLinearAttentionBackward(mlir::ModuleOp module);

/// Its form of instantiateX86Template: @pejit_prologue and
/// @pejit_linear_backward_item of templates/x86/linear_attention_backward.mlir,
/// one item per (b, hkv) (docs/backward.md).
mlir::LogicalResult instantiateX86LinearBackward(mlir::ModuleOp module);

/// The nvidia (tensor-core, f16/bf16) template: a gpu.module with
/// pejit_prologue, pejit_attention and (split-KV) pejit_combine.
mlir::LogicalResult instantiateNvidiaTemplate(mlir::ModuleOp module,
                                              const NvidiaTileConfig &tiles = {});

/// The backward form of instantiateNvidiaTemplate, which calls it for a
/// module with attn.attention_backward: the kernels of
/// templates/nvidia/mma_attention_backward.mlir (docs/backward.md,
/// "NVIDIA"), launched in order by the runtime.
mlir::LogicalResult instantiateNvidiaBackward(mlir::ModuleOp module);

/// The standalone form of instantiateNvidiaTemplate, which calls it for a
/// module of pe ops and no attention: @pejit_prologue and @pejit_transform
/// of templates/nvidia/transform.mlir, or @pejit_embed of
/// templates/nvidia/embed.mlir for a chain that starts with pe.embed
/// (docs/standalone-kernels.md). The kernel description names the entry
/// ("kernel"). A materialized bias is an error (x86 only).
mlir::LogicalResult instantiateNvidiaTransform(mlir::ModuleOp module);

/// The linear attention form of instantiateNvidiaTemplate, which calls it
/// for a module with attn.linear_attention: @pejit_prologue and
/// @pejit_linear of templates/nvidia/linear_attention.mlir, a block per
/// (b, hq) (docs/linear-attention.md).
mlir::LogicalResult instantiateNvidiaLinearAttention(mlir::ModuleOp module);

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_INSTANTIATE_H
