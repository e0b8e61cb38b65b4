// attn-instantiate-nvidia-template: the fused attention function of a module
// becomes the gpu.module of templates/nvidia/mma_attention.mlir (f16/bf16
// tensor-core flash attention). Like the x86 instantiation, parameters are
// substituted as text and hook ops are expanded through the encodings'
// interface, here per score element (vector width 1); this file never names
// a concrete encoding.
#include "compiler/passes/Instantiate.h"
#include "compiler/passes/Passes.h"
#include "compiler/passes/TemplateSupport.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>

#include "templates/NvidiaMmaAttention.inc"
#include "templates/NvidiaMmaBlocks.inc"

namespace pejit {
#define GEN_PASS_DEF_INSTANTIATENVIDIATEMPLATE
#include "compiler/passes/Passes.h.inc"
} // namespace pejit

using namespace mlir;
using namespace pejit;

namespace {

constexpr int64_t kStaticSharedBytes = 48 * 1024;

} // namespace

LogicalResult pejit::instantiateNvidiaTemplate(ModuleOp module, const NvidiaTileConfig &tiles) {
  if (isStandaloneTransform(module))
    return module.emitError() << "the nvidia backend has no standalone pe.rope kernel yet: "
                                 "compile it for x86 (docs/standalone-kernels.md)";
  FailureOr<FusedAttention> found = findFusedAttention(module);
  if (failed(found))
    return failure();
  attn::AttentionOp op = found->op;
  // Per-sequence lengths are x86's for now (docs/shape-classes.md): a
  // kernel that ignored them would attend to keys a row does not have.
  if (op.getQuerySegments() || op.getKeyLengths() || found->signature.paged())
    return op.emitError() << "the nvidia kernel does not take segments, key_lengths or a paged "
                             "KV cache yet (x86 does): one kernel per shape, every row all of "
                             "its keys";
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto kType = cast<RankedTensorType>(op.getKey().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  Type element = qType.getElementType();
  for (auto [type, name] : {std::pair{qType, "query"}, {kType, "key"}, {vType, "value"}}) {
    if (!type.hasStaticShape())
      return op.emitError() << name << " has a dynamic shape " << type
                            << ": pejit compiles one kernel per shape";
    if (!type.getElementType().isF16() && !type.getElementType().isBF16())
      return op.emitError() << name << " element type " << type.getElementType()
                            << " is not supported by the nvidia kernel (f16 or bf16 inputs, "
                               "f32 accumulation)";
    if (type.getElementType() != element)
      return op.emitError() << name << " element type " << type.getElementType()
                            << " differs from the query's " << element;
  }
  // Decode-sized queries get a one-warp block instead of padding 64 rows.
  int64_t querySeq = qType.getDimSize(2);
  int64_t bm = tiles.queryTile > 0 ? tiles.queryTile
               : querySeq <= 16    ? 16
               : querySeq <= 32    ? 32
                                   : 64;
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
  std::string encodingArgs, encodingNames, encodingTypes, callArgs, callTypes;
  for (auto [n, type] : llvm::enumerate(*slots)) {
    std::string name = "%e" + std::to_string(n);
    encodingArgs += ", " + name + ": " + type;
    encodingNames += (n ? ", " : "") + name;
    encodingTypes += (n ? ", " : "") + type;
    callArgs += ", " + name;
    callTypes += ", " + type;
  }
  std::string encodingOperands =
      slots->empty() ? "" : " operands(" + encodingNames + " : " + encodingTypes + ")";
  int64_t scratchFloats = tableScratchFloats(qkTransform, shape);

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
  int64_t numQueryTiles = (shape.querySeq + bm - 1) / bm;
  // Split-KV when there are too few blocks to fill a GPU (decode): aim for
  // ~2 blocks per SM of a 132-SM part, at least 2 KV tiles per split.
  int64_t kvTiles = (shape.keySeq + bn - 1) / bn;
  int64_t blocks = numQueryTiles * shape.queryHeads * shape.batch;
  int64_t splits = tiles.splits;
  if (splits <= 0) {
    splits = 1;
    if (blocks < 264 && kvTiles >= 4)
      splits =
          std::max<int64_t>(1, std::min<int64_t>({(264 + blocks - 1) / blocks, kvTiles / 2, 32}));
  }
  if (splits > kvTiles)
    splits = std::max<int64_t>(kvTiles, 1);
  auto dims = [](std::initializer_list<int64_t> values) {
    std::string text;
    for (int64_t v : values)
      text += (text.empty() ? "" : "x") + std::to_string(v);
    return text;
  };
  bool split = splits > 1;
  std::string woShape =
      split ? dims({shape.batch, shape.queryHeads, splits, shape.querySeq, shape.valueDim})
            : "1x1x1x1x1";
  std::string wmlShape =
      split ? dims({shape.batch, shape.queryHeads, splits, shape.querySeq}) : "1x1x1x1";
  std::optional<int64_t> window = effectiveWindow(op, shape.keySeq);
  std::optional<int64_t> right = effectiveRightWindow(op, shape.querySeq);
  std::map<std::string, std::string> params = {
      {"B", std::to_string(shape.batch)},
      {"HQ", std::to_string(shape.queryHeads)},
      {"HKV", std::to_string(shape.kvHeads)},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"SQ", std::to_string(shape.querySeq)},
      {"SKV", std::to_string(shape.keySeq)},
      {"D", std::to_string(shape.headDim)},
      {"DV", std::to_string(shape.valueDim)},
      {"DP", std::to_string(shape.headDim + 8)},
      {"DVP", std::to_string(shape.valueDim + 8)},
      {"D16", std::to_string(shape.headDim / 16)},
      {"DV8", std::to_string(shape.valueDim / 8)},
      {"NQT", std::to_string(numQueryTiles)},
      {"BM", std::to_string(bm)},
      {"BN", std::to_string(bn)},
      {"BN8", std::to_string(bn / 8)},
      {"BN16", std::to_string(bn / 16)},
      {"THREADS", std::to_string(32 * warps)},
      {"KROWS", std::to_string(kRows)},
      {"SPLITS", std::to_string(splits)},
      {"SPLIT_KV", split ? "true" : "false"},
      {"WO_SHAPE", woShape},
      {"WML_SHAPE", wmlShape},
      {"OFF", std::to_string(shape.keySeq - shape.querySeq)},
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
      {"SCRATCH", std::to_string(std::max<int64_t>(scratchFloats, 1))},
      {"TILE_SCRATCH", std::to_string(std::max<int64_t>(tileScratchFloats, 1))},
      {"VALUE_TERM", valueTermBuckets > 0 ? "true" : "false"},
      {"VT_BUCKETS", std::to_string(std::max<int64_t>(valueTermBuckets, 1))},
      {"VT_FLOATS", std::to_string(std::max<int64_t>(valueTermFloats, 1))},
      {"ENCODING_ARGS", encodingArgs},
      {"ENCODING_CALL_ARGS", callArgs},
      {"ENCODING_CALL_TYPES", callTypes},
      {"ENCODING_OPERANDS", encodingOperands}};
  FailureOr<std::string> text =
      substitute(loadTemplateWithBlocks({"nvidia/mma_attention.mlir", kNvidiaMmaAttentionTemplate},
                                        {{"nvidia/mma_blocks.mlir", kNvidiaMmaBlocksTemplate}}),
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
  info.append("grid",
              attrs.getI64ArrayAttr({numQueryTiles * splits, shape.queryHeads, shape.batch}));
  info.append("splits", attrs.getI64IntegerAttr(splits));
  info.append("combine_grid",
              attrs.getI64ArrayAttr({numQueryTiles, shape.queryHeads, shape.batch}));
  int64_t partialRows = split ? shape.batch * shape.queryHeads * splits * shape.querySeq : 0;
  info.append("partial_row_floats", attrs.getI64IntegerAttr(partialRows));
  info.append("partial_output_floats", attrs.getI64IntegerAttr(partialRows * shape.valueDim));
  info.append("block", attrs.getI64ArrayAttr({32 * warps, 1, 1}));
  info.append("scratch_floats", attrs.getI64IntegerAttr(scratchFloats));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(bm));
  info.append("tile_n", attrs.getI64IntegerAttr(bn));
  info.append("function", attrs.getStringAttr(found->func.getSymName()));
  info.append("arguments", attrs.getStringAttr(found->signature.str()));

  if (!split) // nothing to combine
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
