// attn-instantiate-x86-template, materialized bias gradient form: a
// function whose body is one pe.score_bias_grad on its arguments becomes
// @pejit_bias_grad_item of templates/x86/score_bias_grad.mlir
// (docs/backward.md): dBias summed along its diagonals, each sum handed to
// the encoding's score adjoint hook (attn.score_grad) into per-item partial
// gradients that the runtime adds in item order. This file names no
// concrete encoding.
//
//   d operand += score_adjoint(sum_{j - i = delta} dBias[b, h, i, j]) at distance delta
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include "templates/X86ScoreBiasGrad.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Rows per item and keys per chunk (as the forward's distance-only form):
/// a row of 512 + 64 diagonal sums on the stack serves 64 rows of dBias.
constexpr int64_t kRows = 64, kKeys = 512;

} // namespace

bool pejit::isScoreBiasGradient(ModuleOp module) {
  return static_cast<bool>(soleOpOf<pe::ScoreBiasGradOp>(module));
}

LogicalResult pejit::instantiateX86ScoreBiasGrad(ModuleOp module) {
  pe::ScoreBiasGradOp op = soleOpOf<pe::ScoreBiasGradOp>(module);
  if (!op)
    return module.emitError() << "expected one function of one pe.score_bias_grad";
  func::FuncOp func = op->getParentOfType<func::FuncOp>();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op.getResult())
    return func.emitError() << "the function must return the pe.score_bias_grad's result (and "
                               "nothing else): that is the kernel's output";
  auto encoding = cast<pe::PositionalEncodingAttrInterface>(op.getEncoding());
  auto dbiasType = cast<RankedTensorType>(op.getBiasGrad().getType());
  const char *typeName = kernelElementTypeName(dbiasType.getElementType());
  if (!typeName)
    return op.emitError() << "bias_grad element type " << dbiasType.getElementType()
                          << " is not supported by the x86 kernel (f32, f16 or bf16)";
  if (ShapedType::isDynamic(dbiasType.getDimSize(1)))
    return op.emitError() << "bias_grad's heads must be static, got " << dbiasType;
  Value table = op.getEncodingOperands()[0];
  auto tableType = cast<RankedTensorType>(table.getType());
  if (!tableType.hasStaticShape())
    return op.emitError() << "the tensor whose gradient the kernel writes must be static, got "
                          << tableType;
  for (Value operand : op->getOperands())
    if (!isa<BlockArgument>(operand))
      return op.emitError() << "the kernel reads its tensors from arguments of the function";
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, ValueRange{table}, 1);
  if (failed(slots))
    return failure();

  KernelSignature signature;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    if (arg == op.getBiasGrad()) {
      argument.role = ArgumentRole::OutputGradient;
    } else if (arg == table) {
      argument.role = ArgumentRole::EncodingOperand;
      argument.name = encoding.getEncodingOperandName(0);
      argument.slots = {0};
    } else {
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " is not an operand of pe.score_bias_grad";
    }
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }

  pe::AttentionShape shape;
  shape.batch = dbiasType.getDimSize(0);
  shape.queryHeads = shape.kvHeads = dbiasType.getDimSize(1);
  shape.querySeq = dbiasType.getDimSize(2);
  shape.keySeq = dbiasType.getDimSize(3);
  shape.headDim = shape.valueDim = 8; // no Q, K or V: unused by score hooks
  shape.vectorWidth = 8;
  std::map<std::string, std::string> params = {{"B", dimToString(shape.batch)},
                                               {"H", std::to_string(shape.queryHeads)},
                                               {"SQ", dimToString(shape.querySeq)},
                                               {"SKV", dimToString(shape.keySeq)},
                                               {"T", typeName},
                                               {"E0", (*slots)[0]},
                                               {"PF", std::to_string(tableType.getNumElements())},
                                               {"R", std::to_string(kRows)},
                                               {"C", std::to_string(kKeys)},
                                               {"DIAG", std::to_string(kKeys + kRows + 8)},
                                               {"WIDEN8", x86WidenBody(typeName)},
                                               {"WIDEN1", x86WidenOneBody(typeName)}};
  FailureOr<std::string> text =
      substitute(loadTemplate("x86/score_bias_grad.mlir", kX86ScoreBiasGradTemplate), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, {encoding}, std::nullopt)))
    return failure();

  // Items: b h ceil(sq / tile_m) (the runtime's rule too, X86BiasGrad.cpp).
  bool staticShape = dbiasType.hasStaticShape();
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items",
              attrs.getI64IntegerAttr(staticShape ? shape.batch * shape.queryHeads *
                                                        ((shape.querySeq + kRows - 1) / kRows)
                                                  : 0));
  info.append("scratch_floats", attrs.getI64IntegerAttr(0));
  info.append("tile_m", attrs.getI64IntegerAttr(kRows));
  info.append("tile_n", attrs.getI64IntegerAttr(8));
  spliceX86Kernel(module, func, signature, *kernel, info, typeName, "f32");
  return success();
}
