// attn-instantiate-nvidia-template: the fused attention function of a module
// becomes the gpu.module of templates/nvidia/mma_attention.mlir (f16/bf16
// tensor-core flash attention). Like the x86 instantiation, parameters are
// substituted as text and hook ops are expanded through the encodings'
// interface, here per score element (vector width 1); this file never names
// a concrete encoding.
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/KernelViews.h"
#include "pejit/compiler/passes/Passes.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/core/NvidiaPlan.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>

#include "templates/NvidiaMmaAttention.inc"
#include "templates/NvidiaMmaBlocks.inc"
#include "templates/NvidiaMmaMath.inc"

namespace pejit {
#define GEN_PASS_DEF_INSTANTIATENVIDIATEMPLATE
#include "pejit/compiler/passes/Passes.h.inc"
} // namespace pejit

using namespace mlir;
using namespace pejit;

namespace {

constexpr int64_t kStaticSharedBytes = 48 * 1024;

} // namespace

LogicalResult pejit::instantiateNvidiaTemplate(ModuleOp module, const NvidiaTileConfig &tiles) {
  if (isStandaloneTransform(module))
    return instantiateNvidiaTransform(module);
  if (isEmbeddingGradient(module))
    return module.emitError() << "pe.embed_grad (a table's gradient) compiles for x86 only so far";
  if (isRopeScaleGradient(module))
    return module.emitError()
           << "pe.rope_scale_grad (a position scale's gradient) compiles for x86 only so far";
  if (isLinearAttentionBackward(module))
    return module.emitError()
           << "attn.linear_attention_backward compiles for x86 only so far (docs/status.md)";
  if (isLinearAttention(module))
    return instantiateNvidiaLinearAttention(module);
  if (isAttentionBackward(module))
    return instantiateNvidiaBackward(module);
  FailureOr<FusedAttention> found = findFusedAttention(module);
  if (failed(found))
    return failure();
  attn::AttentionOp op = found->op;
  if (op.getLse())
    return op.emitError() << "the nvidia kernel does not write lse yet (a training forward): "
                             "compile it for x86, or drop the lse result";
  // segments, key_lengths and a paged cache need nothing of the kernel: the
  // runtime runs the `?` kernel once per sequence or row (runtime/
  // CallParts.h), as on x86.
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto kType = cast<RankedTensorType>(op.getKey().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  auto oType = cast<RankedTensorType>(op.getResult().getType());
  Type element = qType.getElementType();
  for (auto [type, name] : {std::pair{qType, "query"}, {kType, "key"}, {vType, "value"}}) {
    if (!type.getElementType().isF16() && !type.getElementType().isBF16())
      return op.emitError() << name << " element type " << type.getElementType()
                            << " is not supported by the nvidia kernel (f16 or bf16 inputs, "
                               "f32 accumulation)";
    if (type.getElementType() != element)
      return op.emitError() << name << " element type " << type.getElementType()
                            << " differs from the query's " << element;
  }
  // A shape class leaves the batch (dim 0) and the lengths (dim 2) to the
  // call (docs/shape-classes.md); heads and head dims are the class's.
  for (auto [type, name] :
       {std::pair{qType, "query"}, {kType, "key"}, {vType, "value"}, {oType, "result"}})
    for (int64_t dim : {1, 3})
      if (type.isDynamicDim(dim))
        return op.emitError() << name << " " << type << " has a dynamic dim " << dim
                              << ": the nvidia kernel takes `?` only for the batch (dim 0) and "
                                 "the lengths (dim 2)";
  // Decode-sized queries get a one-warp block instead of padding 64 rows;
  // a `?` query length may be anything, so it gets the prefill tile.
  int64_t querySeq = qType.getDimSize(2);
  int64_t bm = tiles.queryTile > 0                                ? tiles.queryTile
               : ShapedType::isDynamic(querySeq) || querySeq > 32 ? 64
               : querySeq <= 16                                   ? 16
                                                                  : 32;
  // Hooks run per score element (one mma fragment entry): vector width 1.
  // The query tile's scratch lives in shared memory.
  pe::AttentionShape shape = attentionShape(op, /*vectorWidth=*/1);
  shape.queryTileRows = bm;
  shape.hasQueryTileScratch = true;
  if (shape.headDim % 16 != 0 || shape.valueDim % 16 != 0 || shape.headDim > 256 ||
      shape.valueDim > 256)
    return op.emitError() << "the nvidia kernel needs d and dv multiples of 16 up to 256, got d = "
                          << shape.headDim << ", dv = " << shape.valueDim;

  pe::PositionalEncodingAttrInterface qkTransform;
  SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  int64_t valueTermBuckets = 0;
  if (ArrayAttr encodingList = op.getEncodingsAttr()) {
    for (Attribute attr : encodingList) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      if (!encoding.isFusable())
        return op.emitError() << "encoding " << attr << " is not fused by the nvidia kernel yet";
      if (encoding.getEncodingKind() == pe::EncodingKind::QKTransform)
        qkTransform = encoding;
      else if (encoding.getValueTermBuckets() > 0)
        valueTermBuckets = encoding.getValueTermBuckets();
      else if (encoding.getEncodingKind() != pe::EncodingKind::ScoreBias)
        return op.emitError() << "encoding " << attr << " is not fused by the nvidia kernel yet";
      if (encoding.requiresQueryTileScratch() && encoding.getQueryTileScratchFloats(shape) == 0)
        return op.emitError() << "encoding " << attr
                              << " needs a per-query-tile table that does not fit at this "
                                 "shape and tile config (docs/limits.md)";
      encodings.push_back(encoding);
    }
  }
  // Shared memory, f32: the encodings' per-query-tile tables (Shaw's
  // Q_tile . a^K^T) and the value term's accumulator VT [buckets, BM].
  int64_t tileScratchFloats = queryTileScratchFloats(encodings, shape);
  int64_t valueTermFloats = valueTermBuckets * bm;
  // Encoding operands: bare pointers after the fixed kernel arguments.
  FailureOr<SmallVector<std::string>> slots =
      encodingOperandSlots(op, op.getEncodingOperands().size());
  if (failed(slots))
    return failure();
  EncodingArgumentTexts encodingText = encodingArgumentTexts(*slots);
  // Ids per batch row take their row count from the batch, which the hooks
  // get as a constant: with a `?` batch they must be shared ([s]).
  if (ShapedType::isDynamic(shape.queryPositionRows) ||
      ShapedType::isDynamic(shape.keyPositionRows))
    return op.emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                             "built yet: pass ids shared by the batch ([s]) or a static batch";

  // Q staging and the K, V tiles (f16/bf16, rows padded by 8), plus the
  // f32 tables. The default key tile is 64, halved while that does not fit.
  auto sharedBytesFor = [&](int64_t bn) {
    int64_t kRows = std::max(bm, bn);
    return (kRows * (shape.headDim + 8) + bn * (shape.valueDim + 8)) * 2 +
           (tileScratchFloats + valueTermFloats) * 4;
  };
  int64_t bn = tiles.keyTile;
  if (bn <= 0)
    for (bn = 64; bn > 16 && sharedBytesFor(bn) > kStaticSharedBytes;)
      bn /= 2;
  int64_t warps = bm / 16;
  if (!(bm == 16 || bm == 32 || bm == 64 || bm == 128) || bn < 16 || bn > 128 || bn % 16 != 0)
    return op.emitError() << "nvidia tile config (" << bm << ", " << bn
                          << ") is invalid: the query tile is 16 x warps (16, 32, 64 or 128), "
                             "the key tile a multiple of 16 up to 128";
  int64_t kRows = std::max(bm, bn);
  int64_t sharedBytes = sharedBytesFor(bn);
  if (sharedBytes > kStaticSharedBytes)
    return op.emitError() << "nvidia tile config (" << bm << ", " << bn << ") needs " << sharedBytes
                          << " bytes of shared memory for d = " << shape.headDim << " ("
                          << (tileScratchFloats + valueTermFloats) * 4
                          << " of them the encodings' per-tile tables), more than the "
                          << kStaticSharedBytes << " a block has statically";
  bool bf16 = element.isBF16();
  Type outElement = cast<RankedTensorType>(op.getResult().getType()).getElementType();
  if (!kernelElementTypeName(outElement))
    return op.emitError() << "result element type " << outElement
                          << " is not supported by the nvidia kernel (f32, f16 or bf16)";
  std::string outName = kernelElementTypeName(outElement);
  // How a call is launched (pejit/core/NvidiaPlan.h): planned here for a
  // static shape, by the runtime per call for a shape class.
  bool lengthsAreCalls = ShapedType::isDynamic(shape.batch) ||
                         ShapedType::isDynamic(shape.querySeq) ||
                         ShapedType::isDynamic(shape.keySeq);
  KernelDescription rule;
  rule.queryTile = bm;
  rule.keyTile = bn;
  if (qkTransform) {
    rule.tableFloatsPerQueryPosition = qkTransform.getScratchFloatsPerPosition(shape, false);
    rule.tableFloatsPerKeyPosition = qkTransform.getScratchFloatsPerPosition(shape, true);
  }
  rule.queryPositionRows = shape.queryPositionRows;
  rule.keyPositionRows = shape.keyPositionRows;
  Shape staticShape{shape.batch,  shape.queryHeads, shape.kvHeads, shape.querySeq,
                    shape.keySeq, shape.headDim,    shape.valueDim};
  NvidiaCallPlan plan;
  if (!lengthsAreCalls)
    plan = planNvidiaCall(rule, tiles.splits, staticShape);
  // A shape class's kernel always takes the split-KV partials (the call
  // decides their count); a static one only when it splits.
  bool split = lengthsAreCalls || plan.splits > 1;
  auto dim = [](int64_t value, const char *name) {
    return ShapedType::isDynamic(value) ? std::string(name) : std::to_string(value);
  };
  std::string b = dim(shape.batch, "%B"), sq = dim(shape.querySeq, "%SQ"),
              skv = dim(shape.keySeq, "%SKV");
  std::string splitsText = lengthsAreCalls ? "%SPLITS" : std::to_string(plan.splits);
  std::string hq = std::to_string(shape.queryHeads), hkv = std::to_string(shape.kvHeads);
  std::string d = std::to_string(shape.headDim), dv = std::to_string(shape.valueDim);
  std::string inName = element.isBF16() ? "bf16" : "f16";
  KernelView wo{"wo", "f32", {"1", "1", "1", "1", "1"}}, wm{"wm", "f32", {"1", "1", "1", "1"}},
      wl = wm;
  wl.name = "wl";
  if (split) {
    wo.sizes = {b, hq, splitsText, sq, dv};
    wm.sizes = wl.sizes = {b, hq, splitsText, sq};
  }
  KernelView out{"o", outName, {b, hq, sq, dv}};
  KernelView qpos{
      "qpos", "i64", {std::to_string(shape.positionAxes * shape.queryPositionRows), sq}};
  KernelView kpos{"kpos", "i64", {std::to_string(shape.positionAxes * shape.keyPositionRows), skv}};
  KernelView scratch{
      "scratch",
      "f32",
      {lengthsAreCalls ? "%NSCRATCH" : std::to_string(std::max<int64_t>(plan.tableFloats, 1))}};
  // %B, %SQ, %SKV, %SPLITS and %NSCRATCH: the class's numbers, or the
  // call's (the i64 length arguments).
  auto lengths = [&] {
    return lengthsText(
        {{"B", shape.batch, "nb"},
         {"SQ", shape.querySeq, "nsq"},
         {"SKV", shape.keySeq, "nskv"},
         {"SPLITS", lengthsAreCalls ? ShapedType::kDynamic : plan.splits, "nsplits"},
         {"NSCRATCH", lengthsAreCalls ? ShapedType::kDynamic : plan.tableFloats, "nscratch"}});
  };
  std::string attentionViews = lengths() + viewsText({{"q", inName, {b, hq, sq, d}},
                                                      {"k", inName, {b, hkv, skv, d}},
                                                      {"v", inName, {b, hkv, skv, dv}},
                                                      out,
                                                      scratch,
                                                      wo,
                                                      wm,
                                                      wl,
                                                      qpos,
                                                      kpos});
  std::optional<int64_t> window = effectiveWindow(op, shape.keySeq);
  std::optional<int64_t> right = effectiveRightWindow(op, shape.querySeq);
  std::map<std::string, std::string> params = {
      {"BD", dimToString(shape.batch)},
      {"HQ", hq},
      {"HKV", hkv},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"SQD", dimToString(shape.querySeq)},
      {"SKVD", dimToString(shape.keySeq)},
      {"SCRATCHD", viewDimsText(scratch)},
      {"D", std::to_string(shape.headDim)},
      {"DV", std::to_string(shape.valueDim)},
      {"DP", std::to_string(shape.headDim + 8)},
      {"DVP", std::to_string(shape.valueDim + 8)},
      {"D16", std::to_string(shape.headDim / 16)},
      {"DV8", std::to_string(shape.valueDim / 8)},
      {"BM", std::to_string(bm)},
      {"BN", std::to_string(bn)},
      {"BN8", std::to_string(bn / 8)},
      {"BN16", std::to_string(bn / 16)},
      {"THREADS", std::to_string(32 * warps)},
      {"KROWS", std::to_string(kRows)},
      {"WO_SHAPE", viewDimsText(wo)},
      {"WML_SHAPE", viewDimsText(wm)},
      {"LENGTH_ARGS", "%nb: i64, %nsq: i64, %nskv: i64, %nsplits: i64, %nscratch: i64"},
      {"PROLOGUE_VIEWS", lengths() + viewsText({scratch, qpos, kpos})},
      {"ATTENTION_VIEWS", attentionViews},
      {"COMBINE_VIEWS", lengths() + viewsText({out, wo, wm, wl})},
      {"POSITION_VIEWS", viewsText({qpos, kpos})},
      {"CAUSAL", op.getCausal() ? "true" : "false"},
      {"HAS_WINDOW", window ? "true" : "false"},
      {"WINDOW", std::to_string(window.value_or(0))},
      {"HAS_RIGHT", right ? "true" : "false"},
      {"RIGHT", std::to_string(right.value_or(0))},
      {"SCALE", formatFloat(op.getEffectiveScale())},
      {"T", bf16 ? "bf16" : "f16"},
      {"MMA", bf16 ? "mma_bf16" : "mma_f16"},
      {"OT", outName},
      {"CVT", "out_" + outName},
      {"QPB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"KPB", std::to_string(shape.positionAxes * shape.keyPositionRows)},
      {"TILE_SCRATCH", std::to_string(std::max<int64_t>(tileScratchFloats, 1))},
      {"VALUE_TERM", valueTermBuckets > 0 ? "true" : "false"},
      {"VT_BUCKETS", std::to_string(std::max<int64_t>(valueTermBuckets, 1))},
      {"VT_FLOATS", std::to_string(std::max<int64_t>(valueTermFloats, 1))},
      {"ENCODING_ARGS", encodingText.args},
      {"ENCODING_CALL_ARGS", encodingText.callArgs},
      {"ENCODING_CALL_TYPES", encodingText.callTypes},
      {"ENCODING_OPERANDS", encodingText.operands}};
  FailureOr<std::string> text =
      substitute(loadTemplateWithBlocks({"nvidia/mma_attention.mlir", kNvidiaMmaAttentionTemplate},
                                        {{"nvidia/mma_math.mlir", kNvidiaMmaMathTemplate},
                                         {"nvidia/mma_blocks.mlir", kNvidiaMmaBlocksTemplate}}),
                 params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the nvidia kernel template did not parse after substitution";

  std::optional<double> softcap;
  if (FloatAttr attr = op.getSoftcapAttr())
    softcap = attr.getValueAsDouble();
  if (failed(expandHooks(*kernel, shape, encodings, softcap)))
    return failure();

  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("target", attrs.getStringAttr("nvidia"));
  info.append("dtype", attrs.getStringAttr(bf16 ? "bf16" : "f16"));
  info.append("out_dtype", attrs.getStringAttr(outName));
  info.append("kernel", attrs.getStringAttr("pejit_attention"));
  // A shape class's launch is planned per call: splits is then the tile
  // config's fixed count, or 0 for the rule's.
  info.append("splits", attrs.getI64IntegerAttr(lengthsAreCalls ? std::max<int64_t>(tiles.splits, 0)
                                                                : plan.splits));
  if (!lengthsAreCalls) {
    info.append("grid", attrs.getI64ArrayAttr(plan.grid));
    info.append("combine_grid", attrs.getI64ArrayAttr(plan.combineGrid));
    info.append("partial_row_floats", attrs.getI64IntegerAttr(plan.partialRowFloats));
    info.append("partial_output_floats", attrs.getI64IntegerAttr(plan.partialOutputFloats));
  }
  // The class: b, hq, hkv, sq, skv, d, dv; -1 (kDynamicDim) for `?`.
  SmallVector<int64_t> classDims;
  for (int64_t value :
       {staticShape.batch, staticShape.queryHeads, staticShape.kvHeads, staticShape.querySeq,
        staticShape.keySeq, staticShape.headDim, staticShape.valueDim})
    classDims.push_back(ShapedType::isDynamic(value) ? kDynamicDim : value);
  info.append("shape", attrs.getI64ArrayAttr(classDims));
  info.append("block", attrs.getI64ArrayAttr({32 * warps, 1, 1}));
  info.append("scratch_floats", attrs.getI64IntegerAttr(plan.tableFloats));
  info.append("table_floats_per_query_position",
              attrs.getI64IntegerAttr(rule.tableFloatsPerQueryPosition));
  info.append("table_floats_per_key_position",
              attrs.getI64IntegerAttr(rule.tableFloatsPerKeyPosition));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(bm));
  info.append("tile_n", attrs.getI64IntegerAttr(bn));
  info.append("function", attrs.getStringAttr(found->func.getSymName()));
  info.append("arguments", attrs.getStringAttr(found->signature.str()));

  if (!split) // a static kernel that does not split: nothing to combine
    kernel->walk([](gpu::GPUFuncOp func) {
      if (func.getName() == "pejit_combine")
        func.erase();
    });
  spliceKernel(module, *found, *kernel, attrs.getDictionaryAttr(info));
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), attrs.getUnitAttr());
  return success();
}

namespace {
struct InstantiateNvidiaTemplatePass
    : pejit::impl::InstantiateNvidiaTemplateBase<InstantiateNvidiaTemplatePass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(instantiateNvidiaTemplate(getOperation(), NvidiaTileConfig{tileM, tileN, 0})))
      signalPassFailure();
  }
};
} // namespace
