// attn-instantiate-x86-template, table gradient form: a function whose
// body is one pe.embed_grad on its arguments, returned, becomes
// @pejit_embed_grad_item of templates/x86/embed_grad.mlir
// (docs/backward.md, "Standalone kernels"):
//   out[v, :] = scale * sum over (b, t) with id(b, t) = v of grad[b, t, :]
// each table row summed by one item, in ascending (b, t) order (the runtime
// sorts the rows by id: pejit/runtime/X86EmbedGrad.cpp).
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <cstdio>

#include "templates/X86EmbedGrad.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Table rows per work item: enough items for every core on a position
/// table (hundreds of rows), few enough that an item's rows amortize its
/// call.
constexpr int64_t kTableRowsPerItem = 16;

} // namespace

bool pejit::isEmbeddingGradient(ModuleOp module) {
  return static_cast<bool>(soleOpOf<pe::EmbedGradOp>(module));
}

LogicalResult pejit::instantiateX86EmbedGrad(ModuleOp module) {
  pe::EmbedGradOp op = soleOpOf<pe::EmbedGradOp>(module);
  if (!op)
    return module.emitError() << "expected one function computing one pe.embed_grad";
  auto func = op->getParentOfType<func::FuncOp>();
  for (auto [value, what] : {std::pair{op.getGrad(), "grad"}, {op.getIds(), "ids"}})
    if (!isa<BlockArgument>(value))
      return op.emitError() << "the kernel reads the " << what
                            << " from an argument of the function";
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op.getResult())
    return func.emitError() << "the function must return the pe.embed_grad's result (and nothing "
                               "else): that is the kernel's output";
  auto gradType = cast<RankedTensorType>(op.getGrad().getType());
  auto outType = cast<RankedTensorType>(op.getResult().getType());
  const char *gradName = kernelElementTypeName(gradType.getElementType());
  const char *outName = kernelElementTypeName(outType.getElementType());
  if (!gradName || !outName)
    return op.emitError() << "element types " << gradType.getElementType() << " (grad) and "
                          << outType.getElementType()
                          << " (result) must be f32, f16 or bf16 for the x86 kernel";
  int64_t dim = gradType.getDimSize(2), rows = outType.getDimSize(0);
  if (ShapedType::isDynamic(dim) || dim % 8 != 0)
    return op.emitError() << "the x86 kernel needs a static d with d % 8 == 0, got d = "
                          << dimToString(dim);
  char scale[64];
  std::snprintf(scale, sizeof(scale), "%.9e", op.getScale().convertToDouble());
  std::map<std::string, std::string> params = {{"B", dimToString(gradType.getDimSize(0))},
                                               {"S", dimToString(gradType.getDimSize(1))},
                                               {"D", std::to_string(dim)},
                                               {"V", std::to_string(rows)},
                                               {"R", std::to_string(kTableRowsPerItem)},
                                               {"T", gradName},
                                               {"OT", outName},
                                               {"SCALE", scale},
                                               {"WIDEN8", x86WidenBody(gradName)},
                                               {"NARROW8", x86NarrowBody(outName)}};
  FailureOr<std::string> text =
      substitute(loadTemplate("x86/embed_grad.mlir", kX86EmbedGradTemplate), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the kernel template did not parse after substitution";

  KernelSignature signature;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    argument.role = arg == op.getGrad() ? ArgumentRole::GradRows : ArgumentRole::GradIds;
    if (arg != op.getGrad() && arg != op.getIds())
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " is not an operand of the pe.embed_grad";
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }
  // The table's rows bound the ids (position_limit); items = ceil(rows / R).
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr((rows + kTableRowsPerItem - 1) / kTableRowsPerItem));
  info.append("scratch_floats", attrs.getI64IntegerAttr(0));
  info.append("position_limit", attrs.getI64IntegerAttr(rows));
  info.append("tile_m", attrs.getI64IntegerAttr(kTableRowsPerItem));
  info.append("tile_n", attrs.getI64IntegerAttr(kTableRowsPerItem));
  spliceX86Kernel(module, func, signature, *kernel, info, gradName, outName);
  return success();
}
