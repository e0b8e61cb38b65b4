// Shared by the kernel template instantiations (x86, nvidia): the fused
// attention a module holds, text substitution of ${NAME} parameters, and the
// expansion of hook ops through the encodings' interface.
#ifndef PEJIT_COMPILER_TEMPLATESUPPORT_H
#define PEJIT_COMPILER_TEMPLATESUPPORT_H

#include "pejit/core/KernelSignature.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace pejit {

/// Rows per work item of the x86 standalone kernels (qk_transform.mlir and
/// rope_scale_grad.mlir): 16 rows of d <= 256 f32 are a tile of <= 16 KB on
/// the item's stack, and a long call still has thousands of items. A wider
/// row (an embedding's model dim) takes fewer rows: the tile stays <= 64 KB.
inline int64_t x86StandaloneRowsPerItem(int64_t dim) {
  return std::clamp<int64_t>(16384 / dim, 1, 16);
}

/// The op of type OpT when the module's one function holds that op alone
/// (besides its return); else null. How an instantiation recognizes a
/// one-op kernel (pe.embed_grad, pe.rope_scale_grad).
template <typename OpT> OpT soleOpOf(mlir::ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<mlir::func::FuncOp>());
  if (funcs.size() != 1)
    return nullptr;
  OpT found;
  for (mlir::Operation &op : funcs[0].getBody().getOps()) {
    if (mlir::isa<mlir::func::ReturnOp>(op))
      continue;
    auto match = mlir::dyn_cast<OpT>(op);
    if (!match || found)
      return nullptr;
    found = match;
  }
  return found;
}

std::string formatFloat(double value);

/// x86 kernels write outputs of more elements than this (16 MiB of f32,
/// past this machine's caches) with non-temporal stores: no read for
/// ownership of lines nothing reads soon (bench/RESULTS.md, sessions 20
/// and 21).
constexpr int64_t kX86StreamMinElements = int64_t(1) << 22;

/// "f32", "f16" or "bf16" (the kernels' element types, as the kernel
/// descriptions and templates spell them); null for any other type.
const char *kernelElementTypeName(mlir::Type type);

/// A template's text: $PEJIT_TEMPLATE_DIR/<relativePath> when that is set and
/// readable, else the copy embedded at build time.
std::string loadTemplate(const std::string &relativePath, const char *embedded);

/// A template file: its path under templates/ and its embedded copy.
struct TemplateFile {
  const char *path;
  const char *embedded;
};

/// A kernel template with its blocks (helpers, secondary kernels) kept in
/// files of their own: the blocks' texts, in order, replace the kernel's
/// `// @pejit-blocks` line, or are appended when it has none. All load as
/// loadTemplate does.
std::string loadTemplateWithBlocks(TemplateFile kernel, llvm::ArrayRef<TemplateFile> blocks);

/// Replaces every ${NAME}; fails (naming it) on a name without a value.
mlir::FailureOr<std::string> substitute(const std::string &text,
                                        const std::map<std::string, std::string> &params,
                                        mlir::Operation *op);

/// The body of a @widen1 (one element of `t` as f32; a plain return for
/// f32).
std::string x86WidenOneBody(const std::string &t);

/// The body of the x86 templates' @narrow8 (8 x f32 -> 8 x `t`, t = f32,
/// f16 or bf16): a plain return for f32.
std::string x86NarrowBody(const std::string &t, int64_t lanes = 8);

/// [0, 1, ..., lanes - 1]: the values of a dense vector constant (the x86
/// templates' ${IOTA}).
std::string x86LaneIota(int64_t lanes);

/// `%w = ...` as one `to` element from `%v`, one `from` element (f32, f16,
/// bf16): an extf, a truncf, or a bitcast for the same type. The nvidia
/// kernels' per-element loads and stores.
std::string scalarConvertText(const std::string &from, const std::string &to);

/// The body of a template's @widen8 (8 x `t` -> 8 x f32): a plain return
/// for f32, else extf.
std::string x86WidenBody(const std::string &t);

struct FusedAttention {
  mlir::func::FuncOp func;
  attn::AttentionOp op;
  /// The function's arguments, as the runtime binds them.
  KernelSignature signature;
};

/// A function argument's shape (`?` as kDynamicDim) and dtype, as the
/// kernel signature records them; `type` is a ranked tensor type.
void describeArgumentType(mlir::Type type, KernelArgument &argument);

/// The one function, whose body is one attn.attention on its arguments.
mlir::FailureOr<FusedAttention> findFusedAttention(mlir::ModuleOp module);

/// The attention's static sizes and position-id rows, as the hooks see them;
/// `vectorWidth` is the f32 lanes the target's hooks emit (8 AVX2, 1 GPU).
pe::AttentionShape attentionShape(attn::AttentionOp op, int64_t vectorWidth);
/// The same from the operands of any attention-shaped op (linear attention):
/// its fused QK transform (null: none) decides the position ids' axes.
pe::AttentionShape attentionShape(mlir::Value q, mlir::Value k, mlir::Value v,
                                  mlir::Value queryPositions, mlir::Value keyPositions,
                                  pe::PositionalEncodingAttrInterface transform,
                                  int64_t vectorWidth);

/// The x86 kernels' rules for Q, K, V and the result: static heads and head
/// dims (`?` only for the batch and the lengths), f32/f16/bf16, Q, K and V
/// of one element type. An error on `op` names the operand.
mlir::LogicalResult requireX86QueryKeyValue(mlir::Operation *op, mlir::Value q, mlir::Value k,
                                            mlir::Value v, mlir::Value result);

/// The left window as the templates apply it: none when the op has none or
/// when it is at least skv wide, since such a window hides no key (j >= i +
/// skv - sq - w holds for every j >= 0 once w >= skv). So the templates'
/// index arithmetic never adds or subtracts a window beyond the lengths
/// (window(9223372036854775807) overflowed it and unmasked keys).
std::optional<int64_t> effectiveWindow(attn::AttentionOp op, int64_t keySeq);

/// The right window as the templates apply it: none when the op has none,
/// when it is causal (which hides every key a right window would), or when
/// it is at least sq - 1 wide (then it hides no key).
std::optional<int64_t> effectiveRightWindow(attn::AttentionOp op, int64_t querySeq);

/// Replaces the user's function by the instantiated kernel's top-level ops
/// and describes the kernel to the runtime (module attribute pejit.kernel).
void spliceKernel(mlir::ModuleOp module, FusedAttention &found, mlir::ModuleOp kernel,
                  mlir::DictionaryAttr info);

/// spliceKernel for the kernels that are not one attn.attention (standalone
/// pe ops, linear attention): `info` (the plan's entries) gains the x86
/// target, the element types, the function's name and the signature.
void spliceX86Kernel(mlir::ModuleOp module, mlir::func::FuncOp func,
                     const KernelSignature &signature, mlir::ModuleOp kernel,
                     mlir::NamedAttrList info, llvm::StringRef dtype, llvm::StringRef outDtype);

/// softcap * tanh(s / softcap), pointwise (a scalar or a vector of scores).
mlir::Value emitSoftcap(mlir::OpBuilder &b, mlir::Location loc, mlir::Value score, double softcap);

/// Replaces the template's hook ops (attn.qk_prologue, attn.qk_transform,
/// attn.score_mod) by what the fused `encodings` (in the attention's order)
/// emit through their interface, and the softcap when given; hooks nobody
/// fills expand to nothing. A score_mod's operands are the attention's
/// encoding_operands, each encoding taking its own in order.
/// Fails (with an error on the hook op) only for a template bug: a hook op
/// without lengths(...) in a kernel whose lengths are the call's.
mlir::LogicalResult expandHooks(mlir::ModuleOp kernel, const pe::AttentionShape &shape,
                                llvm::ArrayRef<pe::PositionalEncodingAttrInterface> encodings,
                                std::optional<double> softcap);

/// Floats of the QK transform's per-call tables (0 without one) at a static
/// shape: its floats per position times the (row, s) pairs of Q's and K's
/// ids. A shape class's runtime does the same sum with the call's lengths.
int64_t tableScratchFloats(pe::PositionalEncodingAttrInterface qkTransform,
                           const pe::AttentionShape &shape);

/// Floats of query-tile scratch the encodings ask for in all (each gets
/// its part at consecutive offsets, in order).
int64_t queryTileScratchFloats(llvm::ArrayRef<pe::PositionalEncodingAttrInterface> encodings,
                               const pe::AttentionShape &shape);

/// The most encoding operands one kernel takes (the x86 item function has
/// that many slots).
inline constexpr unsigned kMaxEncodingOperands = 4;

/// The memref type of each encoding operand slot: the operand's static
/// shape, contiguous, for used slots; memref<1xf32> for the rest. Fails
/// (naming the operand) beyond kMaxEncodingOperands or on a dynamic shape.
/// The texts the nvidia templates splice for the encoding operands, one
/// bare pointer %eN per slot type: ", %e0: T0, ..." (kernel arguments),
/// ", %e0, ..." and ", T0, ..." (a func.call's), and " operands(%e0, ... :
/// T0, ...)" for the hook ops (empty without operands).
struct EncodingArgumentTexts {
  std::string args, callArgs, callTypes, operands;
};
EncodingArgumentTexts encodingArgumentTexts(llvm::ArrayRef<std::string> slotTypes);

mlir::FailureOr<llvm::SmallVector<std::string>> encodingOperandSlots(attn::AttentionOp op,
                                                                     unsigned slots);
/// The same for the operands of any op (a standalone kernel's pe op).
mlir::FailureOr<llvm::SmallVector<std::string>>
encodingOperandSlots(mlir::Operation *op, mlir::ValueRange operands, unsigned slots);

} // namespace pejit

#endif // PEJIT_COMPILER_TEMPLATESUPPORT_H
