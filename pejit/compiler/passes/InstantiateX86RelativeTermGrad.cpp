// attn-instantiate-x86-template, materialized Shaw term gradient form: a
// function whose body is one pe.relative_term_grad on its arguments
// becomes @pejit_key_term_grad_item of templates/x86/key_term_grad.mlir
// (the key term: dq and d a^K) or @pejit_value_term_grad_item of
// templates/x86/value_term_grad.mlir (the value term: d a^V), the
// encoding's hooks giving each score's bucket, the table's rows and the
// table's adjoint (docs/backward.md). This file names no concrete encoding.
//
//   key:   S_i[m] = sum_{j: r(i,j) = m} dE_ij;  dq_i = sum_m S_i[m] a^K[m];
//          d a^K[m] += S_i[m] q_i
//   value: d a^V[m] += sum over the diagonals delta with r = m of
//          sum_i dR[i, i + delta]
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include "templates/X86KeyTermGrad.inc"
#include "templates/X86ValueTermGrad.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Query rows per key-term item; diagonals per value-term item.
constexpr int64_t kRows = 16, kDiagonals = 64;

} // namespace

bool pejit::isRelativeTermGradient(ModuleOp module) {
  return static_cast<bool>(soleOpOf<pe::RelativeTermGradOp>(module));
}

LogicalResult pejit::instantiateX86RelativeTermGrad(ModuleOp module) {
  pe::RelativeTermGradOp op = soleOpOf<pe::RelativeTermGradOp>(module);
  if (!op)
    return module.emitError() << "expected one function of one pe.relative_term_grad";
  func::FuncOp func = op->getParentOfType<func::FuncOp>();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getOperands() != op.getResults())
    return func.emitError() << "the function must return the pe.relative_term_grad's results "
                               "(and nothing else): they are the kernel's outputs";
  auto encoding = cast<pe::PositionalEncodingAttrInterface>(op.getEncoding());
  bool keyTerm = static_cast<bool>(op.getQuery());
  auto termType = cast<RankedTensorType>(op.getTermGrad().getType());
  const char *typeName = kernelElementTypeName(termType.getElementType());
  if (!typeName)
    return op.emitError() << "term_grad element type " << termType.getElementType()
                          << " is not supported by the x86 kernel (f32, f16 or bf16)";
  auto tableType = cast<RankedTensorType>(op.getTable().getType());
  if (!tableType.hasStaticShape())
    return op.emitError() << "the table whose gradient the kernel writes must be static, got "
                          << tableType;
  for (Value operand : op->getOperands())
    if (!isa<BlockArgument>(operand))
      return op.emitError() << "the kernel reads its tensors from arguments of the function";
  FailureOr<SmallVector<std::string>> slots =
      encodingOperandSlots(op, ValueRange{op.getTable()}, 1);
  if (failed(slots))
    return failure();

  KernelSignature signature;
  signature.shawTermGradient = true;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    if (arg == op.getTermGrad()) {
      argument.role = ArgumentRole::OutputGradient;
    } else if (arg == op.getQuery()) {
      argument.role = ArgumentRole::Query;
    } else if (arg == op.getTable()) {
      argument.role = ArgumentRole::EncodingOperand;
      argument.name = encoding.getEncodingOperandName(0);
      argument.slots = {0};
    } else {
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " is not an operand of pe.relative_term_grad";
    }
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }

  // The hooks' shape: the term's sizes; a shared value table's term has
  // no head dim (one item row of heads).
  pe::AttentionShape shape;
  shape.vectorWidth = 8;
  std::map<std::string, std::string> params = {{"T", typeName},
                                               {"E0", (*slots)[0]},
                                               {"PF", std::to_string(tableType.getNumElements())},
                                               {"WIDEN8", x86WidenBody(typeName)},
                                               {"WIDEN1", x86WidenOneBody(typeName)}};
  std::string outName = "f32";
  int64_t items = 0, tile = 0;
  if (keyTerm) {
    auto queryType = cast<RankedTensorType>(op.getQuery().getType());
    const char *queryName = kernelElementTypeName(queryType.getElementType());
    if (!queryName)
      return op.emitError() << "query element type " << queryType.getElementType()
                            << " is not supported by the x86 kernel (f32, f16 or bf16)";
    if (ShapedType::isDynamic(termType.getDimSize(1)) || queryType.isDynamicDim(3) ||
        queryType.getDimSize(3) % 8 != 0)
      return op.emitError() << "the key term's gradient needs static heads and d a multiple of "
                               "8, got "
                            << queryType;
    outName = queryName;
    shape.batch = termType.getDimSize(0);
    shape.queryHeads = shape.kvHeads = termType.getDimSize(1);
    shape.querySeq = termType.getDimSize(2);
    shape.keySeq = termType.getDimSize(3);
    shape.headDim = shape.valueDim = queryType.getDimSize(3);
    params.insert({{"B", dimToString(shape.batch)},
                   {"H", std::to_string(shape.queryHeads)},
                   {"SQ", dimToString(shape.querySeq)},
                   {"SKV", dimToString(shape.keySeq)},
                   {"D", std::to_string(shape.headDim)},
                   {"TQ", queryName},
                   {"NB", std::to_string(encoding.getKeyTermBuckets())},
                   {"R", std::to_string(kRows)},
                   {"WIDEN8Q", x86WidenBody(queryName)},
                   {"NARROW8Q", x86NarrowBody(queryName)}});
    tile = kRows;
    if (termType.hasStaticShape())
      items = shape.batch * shape.queryHeads * ((shape.querySeq + kRows - 1) / kRows);
  } else {
    bool perHead = termType.getRank() == 4;
    int64_t first = perHead ? 1 : 0;
    int64_t dv = termType.getDimSize(first + 2);
    if (ShapedType::isDynamic(dv) || dv % 8 != 0 ||
        (perHead && ShapedType::isDynamic(termType.getDimSize(0))))
      return op.emitError() << "the value term's gradient needs static heads and dv a multiple "
                               "of 8, got "
                            << termType;
    shape.batch = 1;
    shape.queryHeads = shape.kvHeads = perHead ? termType.getDimSize(0) : 1;
    shape.querySeq = termType.getDimSize(first);
    shape.keySeq = termType.getDimSize(first + 1);
    shape.headDim = shape.valueDim = dv;
    params.insert({{"HR", std::to_string(shape.queryHeads)},
                   {"SQ", dimToString(shape.querySeq)},
                   {"SKV", dimToString(shape.keySeq)},
                   {"DV", std::to_string(dv)},
                   {"G", std::to_string(kDiagonals)}});
    tile = kDiagonals;
    if (termType.hasStaticShape())
      items =
          shape.queryHeads * ((shape.querySeq + shape.keySeq - 1 + kDiagonals - 1) / kDiagonals);
  }
  FailureOr<std::string> text =
      keyTerm
          ? substitute(loadTemplate("x86/key_term_grad.mlir", kX86KeyTermGradTemplate), params, op)
          : substitute(loadTemplate("x86/value_term_grad.mlir", kX86ValueTermGradTemplate), params,
                       op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, {encoding}, std::nullopt)))
    return failure();

  // Items (the runtime's rule too, X86ShawTermGrad.cpp): key b h ceil(sq /
  // tile_m); value heads ceil((sq + skv - 1) / tile_m).
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(items));
  info.append("scratch_floats", attrs.getI64IntegerAttr(0));
  info.append("tile_m", attrs.getI64IntegerAttr(tile));
  info.append("tile_n", attrs.getI64IntegerAttr(8));
  spliceX86Kernel(module, func, signature, *kernel, info, typeName, outName);
  return success();
}
