// attn-instantiate-x86-template, position scale gradient form: a function
// whose body is one pe.rope_scale_grad on its arguments, returned, becomes
// @pejit_prologue and @pejit_scale_grad_item of
// templates/x86/rope_scale_grad.mlir (docs/backward.md, "Standalone
// kernels"):
//   dL/ds = sum over rows and pairs of pos_axis(c) * inv_freq[c] * t_c,
//   t_c = g_b y_a - g_a y_b, g = dy, y = pe.rope(x)
// The hooks are the RoPE's own (its prologue, transform and operand
// adjoint, through PositionalEncodingAttrInterface).
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>

#include "templates/X86RopeScaleGrad.inc"

using namespace mlir;
using namespace pejit;

bool pejit::isRopeScaleGradient(ModuleOp module) {
  return static_cast<bool>(soleOpOf<pe::RopeScaleGradOp>(module));
}

LogicalResult pejit::instantiateX86RopeScaleGrad(ModuleOp module) {
  pe::RopeScaleGradOp op = soleOpOf<pe::RopeScaleGradOp>(module);
  if (!op)
    return module.emitError() << "expected one function computing one pe.rope_scale_grad";
  auto func = op->getParentOfType<func::FuncOp>();
  for (Value operand : op->getOperands())
    if (!isa<BlockArgument>(operand))
      return op.emitError() << "the kernel reads each operand from an argument of the function";
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op.getResult())
    return func.emitError() << "the function must return the pe.rope_scale_grad's result (and "
                               "nothing else): that is the kernel's output";
  auto xType = cast<RankedTensorType>(op.getInput().getType());
  const char *name = kernelElementTypeName(xType.getElementType());
  if (!name)
    return op.emitError() << "element type " << xType.getElementType()
                          << " is not supported by the x86 kernel (f32, f16 or bf16)";
  for (int64_t d : {1, 3})
    if (xType.isDynamicDim(d))
      return op.emitError() << "input " << xType << " has a dynamic dim " << d
                            << ": the kernel takes `?` only for the batch and the length";
  pe::RopeAttr rope = op.getEncoding();
  pe::AttentionShape shape;
  shape.batch = xType.getDimSize(0);
  shape.queryHeads = shape.kvHeads = xType.getDimSize(1);
  shape.querySeq = xType.getDimSize(2);
  shape.keySeq = 0; // no keys: the key side's tables are empty
  shape.headDim = shape.valueDim = xType.getDimSize(3);
  if (shape.headDim % 8 != 0)
    return op.emitError() << "the AVX2 kernel needs d % 8 == 0, got d = " << shape.headDim;
  shape.vectorWidth = 8;
  int64_t axes = rope.getPositionAxes();
  shape.positionAxes = std::max<int64_t>(axes, 1);
  auto idsType = cast<RankedTensorType>(op.getPositions().getType());
  if (idsType.getRank() == (axes > 0 ? 3 : 2))
    shape.queryPositionRows = shape.keyPositionRows = idsType.getDimSize(axes > 0 ? 1 : 0);
  const int64_t rows = x86StandaloneRowsPerItem(shape.headDim);
  shape.queryTileRows = rows;
  int64_t perPosition = rope.getScratchFloatsPerPosition(shape, false);
  auto scaleType = cast<RankedTensorType>(op.getPositionScale().getType());
  FailureOr<SmallVector<std::string>> slots =
      encodingOperandSlots(op, ValueRange{op.getPositionScale()}, 1);
  if (failed(slots))
    return failure();

  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"H", std::to_string(shape.queryHeads)},
      {"S", dimToString(shape.querySeq)},
      {"D", std::to_string(shape.headDim)},
      {"R", std::to_string(rows)},
      {"T", name},
      {"PB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"E0", (*slots)[0]},
      {"L", std::to_string(scaleType.getDimSize(0))},
      {"WIDEN8", x86WidenBody(name)}};
  FailureOr<std::string> text =
      substitute(loadTemplate("x86/rope_scale_grad.mlir", kX86RopeScaleGradTemplate), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the kernel template did not parse after substitution";
  SmallVector<pe::PositionalEncodingAttrInterface> encodings = {rope};
  if (failed(expandHooks(*kernel, shape, encodings, std::nullopt)))
    return failure();

  KernelSignature signature;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    if (arg == op.getGrad())
      argument.role = ArgumentRole::OutputGradient;
    else if (arg == op.getInput())
      argument.role = ArgumentRole::TransformInput;
    else if (arg == op.getPositions())
      argument.role = ArgumentRole::TransformPositions;
    else {
      argument.role = ArgumentRole::EncodingOperand;
      argument.name = rope.getEncodingOperandName(0);
      argument.slots = {0};
    }
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }
  // The plan of a call, as the forward's: items = b h ceil(s / R), tables
  // of the ids' (row, s) pairs; at a static shape here, per call otherwise
  // (pejit/runtime/X86RopeScaleGrad.cpp).
  bool staticShape = !ShapedType::isDynamic(shape.batch) && !ShapedType::isDynamic(shape.querySeq);
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items",
              attrs.getI64IntegerAttr(staticShape ? shape.batch * shape.queryHeads *
                                                        ((shape.querySeq + rows - 1) / rows)
                                                  : 0));
  info.append("scratch_floats",
              attrs.getI64IntegerAttr(
                  staticShape ? perPosition * shape.queryPositionRows * shape.querySeq : 0));
  info.append("table_floats_per_query_position", attrs.getI64IntegerAttr(perPosition));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(rows));
  info.append("tile_n", attrs.getI64IntegerAttr(rows));
  spliceX86Kernel(module, func, signature, *kernel, info, name, "f32");
  return success();
}
