// X86LinearTemplate.h: the x86 linear attention templates' shared rules,
// parameters and kernel description.
#include "pejit/compiler/passes/X86LinearTemplate.h"
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/LinearAttentionKernel.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Parser/Parser.h"

using namespace mlir;

namespace pejit {

namespace {
/// A state S [d, dv] (and the backward's T) lives on the item's stack: at
/// most 256 KB each.
constexpr int64_t kMaxStateFloats = int64_t(1) << 16;
} // namespace

LogicalResult checkX86LinearShape(Operation *op, const pe::AttentionShape &shape, int64_t states) {
  if (shape.headDim % 8 != 0 || shape.valueDim % 8 != 0)
    return op->emitError() << "the AVX2 kernel needs d % 8 == 0 and dv % 8 == 0, got d = "
                           << shape.headDim << ", dv = " << shape.valueDim;
  if (shape.headDim * shape.valueDim > kMaxStateFloats)
    return op->emitError() << "the state d x dv = " << shape.headDim * shape.valueDim
                           << " floats exceeds the item's stack bound of " << kMaxStateFloats
                           << (states > 1 ? " (the backward keeps two)" : "")
                           << " (docs/limits.md)";
  if (ShapedType::isDynamic(shape.queryPositionRows) ||
      ShapedType::isDynamic(shape.keyPositionRows))
    return op->emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                              "built yet: pass ids shared by the batch ([s]) or a static batch";
  return success();
}

std::map<std::string, std::string> x86LinearParams(const pe::AttentionShape &shape,
                                                   X86LinearForm form, int64_t rows,
                                                   const std::string &typeName,
                                                   const std::string &scaleSlot) {
  const bool normalized =
      form.map == attn::FeatureMap::EluPlusOne || form.map == attn::FeatureMap::Relu;
  return {{"B", dimToString(shape.batch)},
          {"HQ", std::to_string(shape.queryHeads)},
          {"HKV", std::to_string(shape.kvHeads)},
          {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
          {"SQ", dimToString(shape.querySeq)},
          {"SKV", dimToString(shape.keySeq)},
          {"D", std::to_string(shape.headDim)},
          {"DV", std::to_string(shape.valueDim)},
          {"R", std::to_string(rows)},
          {"T", typeName},
          {"QPB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
          {"KPB", std::to_string(shape.positionAxes * shape.keyPositionRows)},
          {"CAUSAL", form.causal ? "true" : "false"},
          {"ON_NUMERATOR", form.onNumerator ? "true" : "false"},
          {"SOFTMAX_KEYS", form.map == attn::FeatureMap::SoftmaxKeys ? "true" : "false"},
          {"NORMALIZE", normalized ? "true" : "false"},
          {"E0", scaleSlot},
          {"PHI8", x86FeatureMapBody(form.map)},
          {"WIDEN8", x86WidenBody(typeName)}};
}

LogicalResult finishX86LinearKernel(ModuleOp module, Operation *op, func::FuncOp func,
                                    const KernelSignature &signature, const std::string &text,
                                    const pe::AttentionShape &shape,
                                    pe::PositionalEncodingAttrInterface rope, int64_t itemsPerBatch,
                                    int64_t rows, NamedAttrList extra, StringRef dtype,
                                    StringRef outDtype) {
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(text, module.getContext());
  if (!kernel)
    return op->emitError() << "the kernel template did not parse after substitution";
  SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  if (rope)
    encodings.push_back(rope);
  if (failed(expandHooks(*kernel, shape, encodings, std::nullopt)))
    return failure();
  // tile_m is the largest length, so the runtime's plan gives one item per
  // (b, itemsPerBatch) for every call. The tables are the RoPE's, per Q and
  // K position.
  bool staticShape = !ShapedType::isDynamic(shape.batch) &&
                     !ShapedType::isDynamic(shape.querySeq) && !ShapedType::isDynamic(shape.keySeq);
  int64_t perQuery = rope ? rope.getScratchFloatsPerPosition(shape, false) : 0;
  int64_t perKey = rope ? rope.getScratchFloatsPerPosition(shape, true) : 0;
  int64_t tableFloats = staticShape ? tableScratchFloats(rope, shape) : 0;
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(staticShape ? shape.batch * itemsPerBatch : 0));
  info.append("scratch_floats", attrs.getI64IntegerAttr(tableFloats));
  info.append("table_floats_per_query_position", attrs.getI64IntegerAttr(perQuery));
  info.append("table_floats_per_key_position", attrs.getI64IntegerAttr(perKey));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(limits::kMaxLength));
  info.append("tile_n", attrs.getI64IntegerAttr(rows));
  info.append(extra.getAttrs());
  spliceX86Kernel(module, func, signature, *kernel, info, dtype, outDtype);
  return success();
}

} // namespace pejit
