// attn-instantiate-x86-template, standalone form: a function whose body is
// one pe op with a standalone kernel (pe.rope, pe.sinusoidal) on its
// arguments becomes the kernel of templates/x86/qk_transform.mlir
// (docs/standalone-kernels.md). The op's hooks are the ones the attention templates expand (the
// prologue's tables for the ids as Q's, the tile transform reading the
// rows), through PositionalEncodingAttrInterface; this file names no
// concrete encoding.
//
//   out[b, h, i, :] = qk_transform(x[b, h, i, :], ids[., i])
// An embedding's [b, s, d] input is read as [b, 1, s, d].
#include "compiler/passes/Instantiate.h"
#include "compiler/passes/TemplateSupport.h"
#include "dialects/ShapeChecks.h"
#include "dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>

#include "templates/X86QkTransform.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Rows per work item: 16 rows of d <= 256 f32 are a tile of <= 16 KB on
/// the item's stack, and a long call still has thousands of items. A wider
/// row (an embedding's model dim) takes fewer rows: the tile stays <= 64 KB.
int64_t rowsPerItem(int64_t dim) { return std::clamp<int64_t>(16384 / dim, 1, 16); }

/// The module's one function, when it holds no attention and only pe ops.
func::FuncOp standaloneFunction(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return nullptr;
  bool anyPe = false;
  for (Operation &op : funcs[0].getBody().getOps()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (!isa<pe::PositionalEncodingOpInterface>(op))
      return nullptr;
    anyPe = true;
  }
  return anyPe ? funcs[0] : nullptr;
}

} // namespace

bool pejit::isStandaloneTransform(ModuleOp module) {
  return static_cast<bool>(standaloneFunction(module));
}

LogicalResult pejit::instantiateX86Transform(ModuleOp module) {
  func::FuncOp func = standaloneFunction(module);
  if (!func)
    return module.emitError() << "expected one function of pe ops to compile";
  pe::PositionalEncodingOpInterface op;
  for (Operation &inner : func.getBody().getOps()) {
    auto encodingOp = dyn_cast<pe::PositionalEncodingOpInterface>(inner);
    if (!encodingOp)
      continue;
    if (!encodingOp.getPositionalEncoding().hasStandaloneKernel())
      return inner.emitError() << "'" << inner.getName()
                               << "' has no standalone kernel yet: pe.rope, pe.sinusoidal and "
                                  "pe.learned compile on their own (docs/standalone-kernels.md)";
    if (op)
      return inner.emitError() << "expected one pe op per standalone kernel, found another";
    op = encodingOp;
  }
  pe::PositionalEncodingAttrInterface encoding = op.getPositionalEncoding();
  // An additive embedding's operand 0 is the [b, s, d] input it adds to.
  Value input = op.getTransformedInput(), ids = op.getPositionIds();
  if (!input && op.getEncodingKind() == pe::EncodingKind::Additive)
    input = op->getOperand(0);
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op->getResult(0))
    return func.emitError() << "the function must return the " << op->getName()
                            << "'s result (and nothing else): that is the kernel's output";
  for (auto [value, what] : {std::pair{input, "input"}, {ids, "positions"}})
    if (!value || !isa<BlockArgument>(value))
      return op->emitError() << "the kernel reads the " << what
                             << " from an argument of the function";
  SmallVector<Value> tables = op.getEncodingOperands();
  for (OpOperand &use : op->getOpOperands())
    if (llvm::is_contained(tables, use.get()) && !isa<BlockArgument>(use.get()))
      return op->emitError() << "the kernel reads the "
                             << op.getOperandRoleName(use.getOperandNumber())
                             << " from an argument of the function";

  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  auto idsType = cast<RankedTensorType>(ids.getType());
  // [b, s, d] (an embedding) is [b, 1, s, d]: dims maps the kernel's
  // b, h, s, d to the input's.
  bool embedding = inType.getRank() == 3;
  if (inType.getRank() != 4 && !embedding)
    return op->emitError() << "the standalone kernel takes a [b, h, s, d] input, got " << inType;
  int64_t seqDim = embedding ? 1 : 2, lastDim = embedding ? 2 : 3;
  for (int64_t dim : {embedding ? lastDim : 1, lastDim})
    if (inType.isDynamicDim(dim))
      return op->emitError() << "input " << inType << " has a dynamic dim " << dim
                             << ": the kernel takes `?` only for the batch (dim 0) and the "
                                "length (dim "
                             << seqDim << ")";
  if (!kernelElementTypeName(inType.getElementType()) ||
      !kernelElementTypeName(outType.getElementType()))
    return op->emitError() << "element type " << inType.getElementType()
                           << " is not supported by the x86 kernel (f32, f16 or bf16)";
  pe::AttentionShape shape;
  shape.batch = inType.getDimSize(0);
  shape.queryHeads = shape.kvHeads = embedding ? 1 : inType.getDimSize(1);
  shape.querySeq = inType.getDimSize(seqDim);
  shape.keySeq = 0; // no keys: the key side's tables are empty
  shape.headDim = shape.valueDim = inType.getDimSize(lastDim);
  shape.vectorWidth = 8;
  const int64_t kRowsPerItem = rowsPerItem(shape.headDim);
  shape.queryTileRows = kRowsPerItem;
  if (shape.headDim % 8 != 0)
    return op->emitError() << "the AVX2 kernel needs d % 8 == 0, got d = " << shape.headDim;
  int64_t axes = encoding.getPositionAxes();
  shape.positionAxes = std::max<int64_t>(axes, 1);
  // [s] (or [A, s]) ids are shared by the batch; [b, s] (or [A, b, s]) have
  // a row per batch entry.
  if (idsType.getRank() == (axes > 0 ? 3 : 2))
    shape.queryPositionRows = shape.keyPositionRows = idsType.getDimSize(axes > 0 ? 1 : 0);
  if (ShapedType::isDynamic(shape.queryPositionRows))
    return op->emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                              "built yet: pass ids shared by the batch ([s]) or a static batch";

  // The encoding's own tensors (a learned table): one slot in the template.
  SmallVector<Value> operands = op.getEncodingOperands();
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, operands, 1);
  if (failed(slots))
    return failure();
  KernelSignature signature;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    auto operand = llvm::find(operands, arg);
    if (arg == input)
      argument.role = ArgumentRole::TransformInput;
    else if (arg == ids)
      argument.role = ArgumentRole::TransformPositions;
    else if (operand != operands.end()) {
      argument.role = ArgumentRole::EncodingOperand;
      argument.name = encoding.getEncodingOperandName(operand - operands.begin());
    } else
      return func.emitError() << "argument #" << arg.getArgNumber() << " is not an operand of "
                              << op->getName();
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }

  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"H", std::to_string(shape.queryHeads)},
      {"S", dimToString(shape.querySeq)},
      {"D", std::to_string(shape.headDim)},
      {"R", std::to_string(kRowsPerItem)},
      {"T", kernelElementTypeName(inType.getElementType())},
      {"OT", kernelElementTypeName(outType.getElementType())},
      {"PB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"E0", (*slots)[0]},
      {"NARROW8", x86NarrowBody(kernelElementTypeName(outType.getElementType()))}};
  FailureOr<std::string> text =
      substitute(loadTemplate("x86/qk_transform.mlir", kX86QkTransformTemplate), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op->emitError() << "the kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, {encoding}, std::nullopt)))
    return failure();

  // The plan of a call: items = b h ceil(s / R), tables of the ids' (row,
  // s) pairs. At a static shape here; the runtime plans a shape class's
  // calls by the same rule (runtime/X86Transform.cpp).
  int64_t perPosition = encoding.getScratchFloatsPerPosition(shape, false);
  bool staticShape = !ShapedType::isDynamic(shape.batch) && !ShapedType::isDynamic(shape.querySeq);
  int64_t items = staticShape ? shape.batch * shape.queryHeads *
                                    ((shape.querySeq + kRowsPerItem - 1) / kRowsPerItem)
                              : 0;
  int64_t tableFloats = staticShape ? tableScratchFloats(encoding, shape) : 0; // K side: 0 ids
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(items));
  info.append("scratch_floats", attrs.getI64IntegerAttr(tableFloats));
  info.append("table_floats_per_query_position", attrs.getI64IntegerAttr(perPosition));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("position_limit", attrs.getI64IntegerAttr(encoding.getPositionLimit()));
  info.append("tile_m", attrs.getI64IntegerAttr(kRowsPerItem));
  info.append("tile_n", attrs.getI64IntegerAttr(kRowsPerItem));
  info.append("target", attrs.getStringAttr("x86-avx2"));
  info.append("dtype", attrs.getStringAttr(kernelElementTypeName(inType.getElementType())));
  info.append("out_dtype", attrs.getStringAttr(kernelElementTypeName(outType.getElementType())));
  info.append("function", attrs.getStringAttr(func.getSymName()));
  info.append("arguments", attrs.getStringAttr(signature.str()));
  FusedAttention found{func, nullptr, signature};
  spliceKernel(module, found, *kernel, attrs.getDictionaryAttr(info));
  return success();
}
