// attn-instantiate-nvidia-template, linear attention form: one
// attn.linear_attention on the function's arguments becomes the gpu.module
// of templates/nvidia/linear_attention.mlir (docs/linear-attention.md,
// "How it runs (NVIDIA)"): a block per (b, hq) scans the sequence with the
// state S spread over its threads' registers. The fused RoPE's hooks are
// the attention templates', per element (vector width 1); this file names
// no concrete encoding.
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/KernelViews.h"
#include "pejit/compiler/passes/LinearAttentionKernel.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"

#include "templates/NvidiaLinearAttention.inc"

using namespace mlir;
using namespace pejit;

namespace {

constexpr int64_t kStaticSharedBytes = 48 * 1024;
/// 256 threads of up to 255 registers fit an SM's 64K registers.
constexpr int64_t kMaxThreads = 256;

/// The body of @phi on one f32 (e^x by libdevice's expf).
std::string phiBody(attn::FeatureMap map) {
  switch (map) {
  case attn::FeatureMap::EluPlusOne:
    return "%zero = arith.constant 0.0 : f32\n"
           "  %one = arith.constant 1.0 : f32\n"
           "  %positive = arith.cmpf ogt, %x, %zero : f32\n"
           "  %e = math.exp %x : f32\n"
           "  %p = arith.addf %x, %one : f32\n"
           "  %y = arith.select %positive, %p, %e : f32\n"
           "  return %y : f32";
  case attn::FeatureMap::Relu:
    return "%zero = arith.constant 0.0 : f32\n"
           "  %y = arith.maximumf %x, %zero : f32\n"
           "  return %y : f32";
  case attn::FeatureMap::Identity:
  case attn::FeatureMap::SoftmaxKeys:
    return "return %x : f32";
  }
  return "return %x : f32";
}

} // namespace

LogicalResult pejit::instantiateNvidiaLinearAttention(ModuleOp module) {
  FailureOr<LinearAttentionKernel> read = readLinearAttention(module);
  if (failed(read))
    return failure();
  attn::LinearAttentionOp op = read->op;
  pe::PositionalEncodingAttrInterface rope = read->rope;
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto oType = cast<RankedTensorType>(op.getResult().getType());
  const char *inName = kernelElementTypeName(qType.getElementType());
  const char *outName = kernelElementTypeName(oType.getElementType());
  for (Value operand : {op.getKey(), op.getValue()})
    if (cast<RankedTensorType>(operand.getType()).getElementType() != qType.getElementType())
      return op.emitError() << "Q, K and V must have one element type for the nvidia kernel, got "
                            << qType.getElementType() << " and "
                            << cast<RankedTensorType>(operand.getType()).getElementType();
  if (!inName || !outName)
    return op.emitError() << "element type " << qType.getElementType() << " -> "
                          << oType.getElementType()
                          << " is not supported by the nvidia kernel (f32, f16 or bf16)";
  pe::AttentionShape shape =
      attentionShape(op.getQuery(), op.getKey(), op.getValue(), op.getQueryPositions(),
                     op.getKeyPositions(), rope, /*vectorWidth=*/1);
  shape.queryTileRows = 1;
  for (auto [type, name] : {std::pair{qType, "query"}, {oType, "result"}})
    for (int64_t dim : {1, 3})
      if (type.isDynamicDim(dim))
        return op.emitError() << name << " " << type << " has a dynamic dim " << dim
                              << ": the kernel takes `?` only for the batch (dim 0) and the "
                                 "lengths (dim 2)";
  if (ShapedType::isDynamic(shape.queryPositionRows) ||
      ShapedType::isDynamic(shape.keyPositionRows))
    return op.emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                             "built yet: pass ids shared by the batch ([s]) or a static batch";
  // Each thread holds KS rows of one column of S in registers, P = d / KS
  // threads per column: the smallest KS (8 to 128, dividing d) that keeps
  // the block within 256 threads, so each may use up to 255 registers.
  int64_t d = shape.headDim, dv = shape.valueDim;
  if (d % 8 != 0)
    return op.emitError() << "the nvidia linear attention kernel needs d % 8 == 0, got d = " << d;
  int64_t ks = 0;
  for (int64_t candidate : {8, 16, 32, 64, 128})
    if (d % candidate == 0 && (d / candidate) * dv <= kMaxThreads) {
      ks = candidate;
      break;
    }
  if (ks == 0)
    return op.emitError() << "the state d x dv = " << d << " x " << dv << " needs more than "
                          << kMaxThreads << " threads of at most 128 floats of S each: the nvidia "
                          << "kernel takes d x dv up to " << kMaxThreads * 128
                          << " with dv <= " << kMaxThreads << " (docs/limits.md)";
  int64_t slices = d / ks, threads = slices * dv;
  // Shared memory (f32): num and den, 2R rows (keys, queries) x (d + 1), V's
  // R x dv, the P x dv partial sums, z, m and a.
  auto sharedBytes = [&](int64_t rows) {
    return (4 * rows * (d + 1) + rows * dv + slices * dv + 3 * d) * 4;
  };
  int64_t rows = 16;
  while (rows > 4 && sharedBytes(rows) > kStaticSharedBytes)
    rows /= 2;
  if (sharedBytes(rows) > kStaticSharedBytes)
    return op.emitError() << "the nvidia linear attention kernel needs " << sharedBytes(rows)
                          << " bytes of shared memory for d = " << d << ", dv = " << dv
                          << ", more than the " << kStaticSharedBytes << " a block has";
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, read->operands, 1);
  if (failed(slots))
    return failure();

  bool lengthsAreCalls = ShapedType::isDynamic(shape.batch) ||
                         ShapedType::isDynamic(shape.querySeq) ||
                         ShapedType::isDynamic(shape.keySeq);
  int64_t perQuery = rope ? rope.getScratchFloatsPerPosition(shape, false) : 0;
  int64_t perKey = rope ? rope.getScratchFloatsPerPosition(shape, true) : 0;
  int64_t tableFloats = lengthsAreCalls ? ShapedType::kDynamic : tableScratchFloats(rope, shape);
  auto sizeText = [](int64_t value, const char *name) {
    return ShapedType::isDynamic(value) ? std::string(name) : std::to_string(value);
  };
  std::string b = sizeText(shape.batch, "%B"), sq = sizeText(shape.querySeq, "%SQ"),
              skv = sizeText(shape.keySeq, "%SKV");
  std::string hq = std::to_string(shape.queryHeads), hkv = std::to_string(shape.kvHeads);
  std::string lengths =
      lengthsText({{"B", shape.batch, "nb"},
                   {"SQ", shape.querySeq, "nsq"},
                   {"SKV", shape.keySeq, "nskv"},
                   {"NSCRATCH", lengthsAreCalls ? tableFloats : std::max<int64_t>(tableFloats, 1),
                    "nscratch"}});
  KernelView scratch{"scratch",
                     "f32",
                     {lengthsAreCalls ? std::string("%NSCRATCH")
                                      : std::to_string(std::max<int64_t>(tableFloats, 1))}};
  KernelView qpos{
      "qpos", "i64", {std::to_string(shape.positionAxes * shape.queryPositionRows), sq}};
  KernelView kpos{"kpos", "i64", {std::to_string(shape.positionAxes * shape.keyPositionRows), skv}};
  std::string linearViews =
      lengths + viewsText({{"q", inName, {b, hq, sq, std::to_string(d)}},
                           {"k", inName, {b, hkv, skv, std::to_string(d)}},
                           {"v", inName, {b, hkv, skv, std::to_string(dv)}},
                           {"o", outName, {b, hq, sq, std::to_string(dv)}},
                           scratch,
                           qpos,
                           kpos,
                           {"st", "f32", {b, hq, std::to_string(d), std::to_string(dv + 2)}}});
  attn::FeatureMap map = op.getFeatureMap();
  bool onNumerator = op.getRopePlacement() == attn::RopePlacement::OnNumerator;
  std::map<std::string, std::string> params = {
      {"BD", dimToString(shape.batch)},
      {"SQD", dimToString(shape.querySeq)},
      {"SKVD", dimToString(shape.keySeq)},
      {"SCRATCHD", viewDimsText(scratch)},
      {"HQ", hq},
      {"HKV", hkv},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"D", std::to_string(d)},
      {"DP", std::to_string(d + 1)},
      {"DV", std::to_string(dv)},
      {"DVS", std::to_string(dv + 2)},
      {"R", std::to_string(rows)},
      {"R2", std::to_string(2 * rows)},
      {"KS", std::to_string(ks)},
      {"P", std::to_string(slices)},
      {"THREADS", std::to_string(threads)},
      {"T", inName},
      {"OT", outName},
      {"QPB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"KPB", std::to_string(shape.positionAxes * shape.keyPositionRows)},
      {"CAUSAL", op.getCausal() ? "true" : "false"},
      {"ON_NUMERATOR", onNumerator ? "true" : "false"},
      {"SOFTMAX_KEYS", map == attn::FeatureMap::SoftmaxKeys ? "true" : "false"},
      {"NORMALIZE",
       map == attn::FeatureMap::EluPlusOne || map == attn::FeatureMap::Relu ? "true" : "false"},
      {"HAS_STATE", op.getState() ? "true" : "false"},
      {"E0", (*slots)[0]},
      {"LENGTH_ARGS", "%nb: i64, %nsq: i64, %nskv: i64, %nsplits: i64, %nscratch: i64"},
      {"PROLOGUE_VIEWS", lengths + viewsText({qpos, kpos, scratch})},
      {"LINEAR_VIEWS", linearViews},
      {"PHI", phiBody(map)},
      {"WIDEN", scalarConvertText(inName, "f32")},
      {"NARROW", scalarConvertText("f32", outName)}};
  FailureOr<std::string> text = substitute(
      loadTemplate("nvidia/linear_attention.mlir", kNvidiaLinearAttentionTemplate), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the nvidia kernel template did not parse after substitution";
  SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  if (rope)
    encodings.push_back(rope);
  if (failed(expandHooks(*kernel, shape, encodings, std::nullopt)))
    return failure();

  // A block per (b, hq): grid [1, hq, b]; the tables are the RoPE's, per Q
  // and K position (the runtime plans a shape class's by the same rule).
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("target", attrs.getStringAttr("nvidia"));
  info.append("dtype", attrs.getStringAttr(inName));
  info.append("out_dtype", attrs.getStringAttr(outName));
  info.append("kernel", attrs.getStringAttr("pejit_linear"));
  info.append("splits", attrs.getI64IntegerAttr(1));
  if (!lengthsAreCalls)
    info.append("grid", attrs.getI64ArrayAttr({1, shape.queryHeads, shape.batch}));
  auto dim = [](int64_t value) { return ShapedType::isDynamic(value) ? kDynamicDim : value; };
  info.append("shape", attrs.getI64ArrayAttr({dim(shape.batch), shape.queryHeads, shape.kvHeads,
                                              dim(shape.querySeq), dim(shape.keySeq), d, dv}));
  info.append("block", attrs.getI64ArrayAttr({threads, 1, 1}));
  info.append("scratch_floats", attrs.getI64IntegerAttr(lengthsAreCalls ? 0 : tableFloats));
  info.append("table_floats_per_query_position", attrs.getI64IntegerAttr(perQuery));
  info.append("table_floats_per_key_position", attrs.getI64IntegerAttr(perKey));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(rows));
  info.append("tile_n", attrs.getI64IntegerAttr(rows));
  info.append("function", attrs.getStringAttr(read->func.getSymName()));
  info.append("arguments", attrs.getStringAttr(read->signature.str()));
  FusedAttention found{read->func, nullptr, read->signature};
  spliceKernel(module, found, *kernel, attrs.getDictionaryAttr(info));
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), attrs.getUnitAttr());
  return success();
}
