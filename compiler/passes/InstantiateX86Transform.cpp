// attn-instantiate-x86-template, standalone form: a function of pe ops and
// no attention (a StandaloneChain) becomes the kernel of
// templates/x86/qk_transform.mlir, or of templates/x86/embed.mlir when it
// starts with pe.embed (docs/standalone-kernels.md). Each op's hooks are
// the ones the attention templates expand (the prologue's tables for the
// ids as Q's, the tile transform on the rows), through
// PositionalEncodingAttrInterface; this file names no concrete encoding.
//
//   out[b, h, i, :] = op_n(... op_0(x[b, h, i, :], ids[., i]) ...)
//   out[b, i, :] = op_n(... op_0(table[tokens[b, i]] * scale, ids[., i]) ...)
// An embedding's [b, s, d] is read as [b, 1, s, d].
#include "compiler/passes/Instantiate.h"
#include "compiler/passes/StandaloneChain.h"
#include "compiler/passes/TemplateSupport.h"
#include "dialects/ShapeChecks.h"

#include "mlir/Parser/Parser.h"

#include <algorithm>
#include <cstdio>

#include "templates/X86Embed.inc"
#include "templates/X86QkTransform.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Rows per work item: 16 rows of d <= 256 f32 are a tile of <= 16 KB on
/// the item's stack, and a long call still has thousands of items. A wider
/// row (an embedding's model dim) takes fewer rows: the tile stays <= 64 KB.
int64_t rowsPerItem(int64_t dim) { return std::clamp<int64_t>(16384 / dim, 1, 16); }

/// A float64 as an MLIR f32 literal (rounded to f32 by the parser).
std::string floatLiteral(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9e", value);
  return text;
}

} // namespace

bool pejit::isStandaloneTransform(ModuleOp module) {
  return static_cast<bool>(standaloneFunction(module));
}

LogicalResult pejit::instantiateX86Transform(ModuleOp module) {
  func::FuncOp func = standaloneFunction(module);
  if (!func)
    return module.emitError() << "expected one function of pe ops to compile";
  FailureOr<StandaloneChain> read = readStandaloneChain(func);
  if (failed(read))
    return failure();
  StandaloneChain &chain = *read;
  Operation *last = chain.last();
  Operation *first = chain.embed ? chain.embed.getOperation() : chain.ops.front().getOperation();

  // The rows: x's type, or the embedding's (the gather's result).
  auto rowsType = cast<RankedTensorType>(chain.embed ? chain.embed.getResult().getType()
                                                     : chain.input.getType());
  auto outType = cast<RankedTensorType>(last->getResult(0).getType());
  // [b, s, d] (an embedding) is [b, 1, s, d].
  bool embedding = rowsType.getRank() == 3;
  if (rowsType.getRank() != 4 && !embedding)
    return first->emitError() << "the standalone kernel takes a [b, h, s, d] input, got "
                              << rowsType;
  int64_t seqDim = embedding ? 1 : 2, lastDim = embedding ? 2 : 3;
  for (int64_t dim : {embedding ? lastDim : 1, lastDim})
    if (rowsType.isDynamicDim(dim))
      return first->emitError() << "input " << rowsType << " has a dynamic dim " << dim
                                << ": the kernel takes `?` only for the batch (dim 0) and the "
                                   "length (dim "
                                << seqDim << ")";
  if (!kernelElementTypeName(rowsType.getElementType()) ||
      !kernelElementTypeName(outType.getElementType()))
    return first->emitError() << "element type " << rowsType.getElementType()
                              << " is not supported by the x86 kernel (f32, f16 or bf16)";
  pe::AttentionShape shape;
  shape.batch = rowsType.getDimSize(0);
  shape.queryHeads = shape.kvHeads = embedding ? 1 : rowsType.getDimSize(1);
  shape.querySeq = rowsType.getDimSize(seqDim);
  shape.keySeq = 0; // no keys: the key side's tables are empty
  shape.headDim = shape.valueDim = rowsType.getDimSize(lastDim);
  shape.vectorWidth = 8;
  const int64_t kRowsPerItem = rowsPerItem(shape.headDim);
  shape.queryTileRows = kRowsPerItem;
  if (shape.headDim % 8 != 0)
    return first->emitError() << "the AVX2 kernel needs d % 8 == 0, got d = " << shape.headDim;
  int64_t axes = 0, positionLimit = 0, perPosition = 0;
  for (pe::PositionalEncodingAttrInterface encoding : chain.encodings) {
    axes = std::max(axes, encoding.getPositionAxes());
    int64_t limit = encoding.getPositionLimit();
    if (limit > 0)
      positionLimit = positionLimit > 0 ? std::min(positionLimit, limit) : limit;
  }
  shape.positionAxes = std::max<int64_t>(axes, 1);
  // [s] (or [A, s]) ids are shared by the batch; [b, s] (or [A, b, s]) have
  // a row per batch entry.
  if (chain.ids) {
    auto idsType = cast<RankedTensorType>(chain.ids.getType());
    if (idsType.getRank() == (axes > 0 ? 3 : 2))
      shape.queryPositionRows = shape.keyPositionRows = idsType.getDimSize(axes > 0 ? 1 : 0);
    if (ShapedType::isDynamic(shape.queryPositionRows))
      return first->emitError()
             << "position ids per batch row ([b, s]) with a `?` batch are not built yet: pass "
                "ids shared by the batch ([s]) or a static batch";
  }
  for (pe::PositionalEncodingAttrInterface encoding : chain.encodings)
    perPosition += encoding.getScratchFloatsPerPosition(shape, false);

  // The encodings' own tensors (a learned table): one slot in the templates.
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(first, chain.tables, 1);
  if (failed(slots))
    return failure();
  KernelSignature signature;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    if (chain.embed && arg == chain.embed.getTokens())
      argument.role = ArgumentRole::EmbedTokens;
    else if (chain.embed && arg == chain.embed.getTable())
      argument.role = ArgumentRole::EmbedTable;
    else if (arg == chain.input)
      argument.role = ArgumentRole::TransformInput;
    else if (arg == chain.ids)
      argument.role = ArgumentRole::TransformPositions;
    else if (!chain.tables.empty() && arg == chain.tables.front()) {
      argument.role = ArgumentRole::EncodingOperand;
      for (auto [k, op] : llvm::enumerate(chain.ops))
        if (!op.getEncodingOperands().empty())
          argument.name = chain.encodings[k].getEncodingOperandName(0);
    } else {
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " is not an operand of the function's pe ops";
    }
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }

  int64_t positionRows = shape.positionAxes * shape.queryPositionRows;
  ChainHookText hooks = chainHookText(chain, shape, positionRows, !chain.embed);
  const char *outName = kernelElementTypeName(outType.getElementType());
  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"H", std::to_string(shape.queryHeads)},
      {"S", dimToString(shape.querySeq)},
      {"D", std::to_string(shape.headDim)},
      {"R", std::to_string(kRowsPerItem)},
      {"T", kernelElementTypeName(rowsType.getElementType())},
      {"OT", outName},
      {"PB", std::to_string(positionRows)},
      {"E0", (*slots)[0]},
      {"PARTS", hooks.parts},
      {"PROLOGUES", hooks.prologues},
      {"TRANSFORMS", hooks.transforms},
      {"NARROW8", x86NarrowBody(outName)}};
  if (chain.embed) {
    auto tableType = cast<RankedTensorType>(chain.embed.getTable().getType());
    std::string tableName = kernelElementTypeName(tableType.getElementType());
    params["V"] = std::to_string(tableType.getDimSize(0));
    params["LAST_ROW"] = std::to_string(tableType.getDimSize(0) - 1);
    params["TT"] = tableName;
    params["SCALE"] = floatLiteral(chain.embed.getScale().convertToDouble());
    params["WIDEN8"] = x86WidenBody(tableName);
    if (tableType.isDynamicDim(0))
      return chain.embed.emitError() << "the token table's rows must be static, got " << tableType;
  }
  FailureOr<std::string> text =
      chain.embed ? substitute(loadTemplate("x86/embed.mlir", kX86EmbedTemplate), params, first)
                  : substitute(loadTemplate("x86/qk_transform.mlir", kX86QkTransformTemplate),
                               params, first);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return first->emitError() << "the kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, chain.encodings, std::nullopt)))
    return failure();

  // The plan of a call: items = b h ceil(s / R), tables of the ids' (row,
  // s) pairs. At a static shape here; the runtime plans a shape class's
  // calls by the same rule (runtime/X86Transform.cpp).
  bool staticShape = !ShapedType::isDynamic(shape.batch) && !ShapedType::isDynamic(shape.querySeq);
  int64_t items = staticShape ? shape.batch * shape.queryHeads *
                                    ((shape.querySeq + kRowsPerItem - 1) / kRowsPerItem)
                              : 0;
  int64_t tableFloats = staticShape ? perPosition * shape.queryPositionRows * shape.querySeq : 0;
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(items));
  info.append("scratch_floats", attrs.getI64IntegerAttr(tableFloats));
  info.append("table_floats_per_query_position", attrs.getI64IntegerAttr(perPosition));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("position_limit", attrs.getI64IntegerAttr(positionLimit));
  info.append("tile_m", attrs.getI64IntegerAttr(kRowsPerItem));
  info.append("tile_n", attrs.getI64IntegerAttr(kRowsPerItem));
  spliceX86Kernel(module, func, signature, *kernel, info,
                  kernelElementTypeName(rowsType.getElementType()), outName);
  return success();
}
