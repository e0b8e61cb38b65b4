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
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/StandaloneChain.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Parser/Parser.h"

#include <algorithm>
#include <cstdio>

#include "templates/X86Embed.inc"
#include "templates/X86QkTransform.inc"

using namespace mlir;
using namespace pejit;

namespace {

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
  FailureOr<StandaloneKernel> described = describeStandalone(chain, /*vectorWidth=*/8, "x86");
  if (failed(described))
    return failure();
  StandaloneKernel &kernelInfo = *described;
  Operation *first = kernelInfo.first;
  pe::AttentionShape &shape = kernelInfo.shape;
  const int64_t kRowsPerItem = x86StandaloneRowsPerItem(shape.headDim);
  shape.queryTileRows = kRowsPerItem;
  if (shape.headDim % 8 != 0)
    return first->emitError() << "the AVX2 kernel needs d % 8 == 0, got d = " << shape.headDim;
  int64_t positionLimit = kernelInfo.positionLimit, perPosition = kernelInfo.perPosition;

  int64_t positionRows = shape.positionAxes * shape.queryPositionRows;
  ChainHookText hooks = chainHookText(chain, shape, positionRows, !chain.embed);
  const char *outName = kernelInfo.outName;
  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"H", std::to_string(shape.queryHeads)},
      {"S", dimToString(shape.querySeq)},
      {"D", std::to_string(shape.headDim)},
      {"R", std::to_string(kRowsPerItem)},
      {"T", kernelInfo.inName},
      {"OT", outName},
      {"PB", std::to_string(positionRows)},
      {"E0", kernelInfo.operandSlot},
      {"PARTS", hooks.parts},
      {"PROLOGUES", hooks.prologues},
      {"TRANSFORMS", hooks.transforms},
      {"NARROW8", x86NarrowBody(outName)},
      {"STREAM_MIN", std::to_string(kX86StreamMinElements)},
      {"PREFETCH_NEXT", std::string(kernelInfo.inName) == "f32" ? "false" : "true"}};
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
  // calls by the same rule (pejit/runtime/X86Transform.cpp).
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
  spliceX86Kernel(module, func, kernelInfo.signature, *kernel, info, kernelInfo.inName, outName);
  return success();
}
