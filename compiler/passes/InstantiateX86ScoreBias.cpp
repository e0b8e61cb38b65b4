// attn-instantiate-x86-template, materialized bias form: a function whose
// body is one score-bias pe op (pe.alibi, pe.t5_bias) becomes the kernel of
// templates/x86/score_bias.mlir (docs/standalone-kernels.md "Materialized
// biases"): the encoding's score hook on zero scores, written out. This
// file names no concrete encoding.
//
//   out[b, h, i, j] = score_mod(0, b, h, i, j)
#include "compiler/passes/Instantiate.h"
#include "compiler/passes/TemplateSupport.h"
#include "dialects/ShapeChecks.h"
#include "dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include "templates/X86ScoreBias.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// The function's one pe op when it is a score bias with a score hook (a
/// fusable one that is not a key term: pe.alibi, pe.t5_bias), else null.
pe::PositionalEncodingOpInterface materializedBias(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return nullptr;
  pe::PositionalEncodingOpInterface found;
  for (Operation &op : funcs[0].getBody().getOps()) {
    if (isa<func::ReturnOp>(op))
      continue;
    auto encodingOp = dyn_cast<pe::PositionalEncodingOpInterface>(op);
    if (!encodingOp || found)
      return nullptr;
    pe::PositionalEncodingAttrInterface encoding = encodingOp.getPositionalEncoding();
    if (encoding.getEncodingKind() != pe::EncodingKind::ScoreBias || !encoding.isFusable() ||
        encoding.isKeyTerm())
      return nullptr;
    found = encodingOp;
  }
  return found;
}

/// The body of @narrow1: one f32 as `t`, through @narrow8's rounding.
std::string narrowOneBody(const std::string &t) {
  if (t == "f32")
    return "return %x : f32";
  return "%v = vector.broadcast %x : f32 to vector<8xf32>\n"
         "  %n = func.call @narrow8(%v) : (vector<8xf32>) -> vector<8x" +
         t + ">\n  %e = vector.extract %n[0] : " + t + " from vector<8x" + t +
         ">\n  return %e : " + t;
}

} // namespace

bool pejit::isMaterializedBias(ModuleOp module) {
  return static_cast<bool>(materializedBias(module));
}

LogicalResult pejit::instantiateX86ScoreBias(ModuleOp module) {
  pe::PositionalEncodingOpInterface op = materializedBias(module);
  if (!op)
    return module.emitError() << "expected one function of one score-bias pe op";
  func::FuncOp func = op->getParentOfType<func::FuncOp>();
  pe::PositionalEncodingAttrInterface encoding = op.getPositionalEncoding();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op->getResult(0))
    return func.emitError() << "the function must return the " << op->getName()
                            << "'s result (and nothing else): that is the kernel's output";
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  if (outType.getRank() != 4 || outType.isDynamicDim(1))
    return op->emitError() << "the bias kernel writes [1|b, h, sq, skv] with a static h, got "
                           << outType;
  const char *outName = kernelElementTypeName(outType.getElementType());
  if (!outName)
    return op->emitError() << "element type " << outType.getElementType()
                           << " is not supported by the x86 kernel (f32, f16 or bf16)";
  pe::AttentionShape shape;
  shape.batch = outType.getDimSize(0);
  shape.queryHeads = shape.kvHeads = outType.getDimSize(1);
  shape.querySeq = outType.getDimSize(2);
  shape.keySeq = outType.getDimSize(3);
  shape.headDim = shape.valueDim = 8; // no Q, K or V: unused by score hooks
  shape.vectorWidth = 8;
  if (failed(encoding.verifyForAttention(shape.queryHeads, shape.headDim,
                                         [&] { return op->emitOpError(); })))
    return failure();

  SmallVector<Value> operands = op.getEncodingOperands();
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, operands, 1);
  if (failed(slots))
    return failure();
  KernelSignature signature;
  signature.materializedBias = true;
  for (BlockArgument arg : func.getArguments()) {
    auto operand = llvm::find(operands, arg);
    if (operand == operands.end())
      return func.emitError() << "argument #" << arg.getArgNumber() << " is not an operand of "
                              << op->getName();
    KernelArgument argument;
    argument.role = ArgumentRole::EncodingOperand;
    argument.name = encoding.getEncodingOperandName(operand - operands.begin());
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }
  for (Value operand : operands)
    if (!isa<BlockArgument>(operand))
      return op->emitError() << "the kernel reads its table from an argument of the function";

  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"H", std::to_string(shape.queryHeads)},
      {"SQ", dimToString(shape.querySeq)},
      {"SKV", dimToString(shape.keySeq)},
      {"OT", outName},
      {"E0", (*slots)[0]},
      {"OPERANDS", operands.empty() ? "" : "operands(%e0 : !E0)"},
      {"NARROW8", x86NarrowBody(outName)},
      {"NARROW1", narrowOneBody(outName)}};
  FailureOr<std::string> text =
      substitute(loadTemplate("x86/score_bias.mlir", kX86ScoreBiasTemplate), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op->emitError() << "the kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, {encoding}, std::nullopt)))
    return failure();

  // Items = b h sq: one output row each (the runtime plans a `?` shape's
  // calls by the same rule, runtime/X86Bias.cpp).
  bool staticShape = outType.hasStaticShape();
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(
                           staticShape ? shape.batch * shape.queryHeads * shape.querySeq : 0));
  info.append("scratch_floats", attrs.getI64IntegerAttr(0));
  info.append("tile_m", attrs.getI64IntegerAttr(1));
  info.append("tile_n", attrs.getI64IntegerAttr(8));
  spliceX86Kernel(module, func, signature, *kernel, info, outName, outName);
  return success();
}
