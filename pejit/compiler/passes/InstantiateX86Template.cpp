// attn-instantiate-x86-template: the fused attention function of a module becomes
// the kernel of templates/x86/avx2_attention.mlir. The template's ${NAME}
// parameters (shapes, tiles, mask flags, scale) are substituted as text, the
// result is parsed, and its hook ops are expanded by the fused encodings
// through PositionalEncodingAttrInterface; this file never names a concrete
// encoding.
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/compiler/backends/x86/X86TileRules.h"
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/Passes.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/core/CallPlan.h"
#include "pejit/dialects/Limits.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/Regex.h"
#include <cstdio>
#include <map>
#include <string>

#include "templates/X86Avx2Attention.inc"
#include "templates/X86Avx2Blocks.inc"
#include "templates/X86Avx2Decode.inc"
#include "templates/X86Avx2Rows.inc"
#include "templates/X86Avx2Tiles.inc"
#include "templates/X86Avx512Bf16Decode.inc"
#include "templates/X86Avx512Bf16DecodeBlocks.inc"
#include "templates/X86Avx512Bf16Tiles.inc"
#include "templates/X86Exp2.inc"

namespace pejit {
#define GEN_PASS_DEF_INSTANTIATEX86TEMPLATE
#include "pejit/compiler/passes/Passes.h.inc"
} // namespace pejit

using namespace mlir;
using namespace pejit;

namespace {

/// How @kv_value_rows gets the f32 rows of V that P . V reads.
enum class ValueRows { View, Copy, ViewForFullTiles };

/// The body of @kv_value_rows: rows [j0, j0 + nk) of V[b, hk] as f32 rows.
/// View (f32 V, full Q tiles): a view of V itself, no copy; Copy: the rows
/// are copied (f16/bf16: widened) into the Vs tile, which is then viewed the
/// same way; ViewForFullTiles (f32 V, tiles not all full): a view when the
/// item's Q tile is full or one row (%view_v), else the copy. P . V reads V in
/// 16-column slices down the rows: with a full Q tile the FMAs hide that, in
/// decode (one query row per item, bound by reading K and V) the row-by-row
/// copy was ~17% faster.
std::string valueRowsBody(const std::string &t, int64_t valueDim, int64_t keyTile, ValueRows mode,
                          int64_t lanes) {
  std::string dv = std::to_string(valueDim), n = std::to_string(lanes);
  std::string view = "%rows = memref.subview %v[%b, %hk, %j0, 0] [1, 1, %nk, " + dv +
                     "] [1, 1, 1, 1] : !V to !VROWS\n";
  if (mode == ValueRows::View)
    return view + "  return %rows : !VROWS";
  std::string tile = "memref<" + std::to_string(keyTile) + "x" + dv + "xf32>";
  std::string widened = t == "f32" ? "%x" : "%w";
  std::string widen = t == "f32" ? ""
                                 : "      %w = arith.extf %x : vector<" + n + "x" + t +
                                       "> to vector<" + n + "xf32>\n";
  std::string copy = "%c0 = arith.constant 0 : index\n"
                     "  %c1 = arith.constant 1 : index\n"
                     "  %lanes = arith.constant " +
                     n +
                     " : index\n"
                     "  %dv = arith.constant " +
                     dv +
                     " : index\n"
                     "  scf.for %r = %c0 to %nk step %c1 {\n"
                     "    %j = arith.addi %j0, %r : index\n"
                     "    scf.for %d = %c0 to %dv step %lanes {\n"
                     "      %x = vector.load %v[%b, %hk, %j, %d] : !V, vector<" +
                     n + "x" + t + ">\n" + widen + "      vector.store " + widened +
                     ", %Vs[%r, %d] : " + tile + ", vector<" + n +
                     "xf32>\n"
                     "    }\n"
                     "  }\n"
                     "  %rows = memref.cast %Vs : " +
                     tile + " to !VROWS\n";
  if (mode == ValueRows::Copy)
    return copy + "  return %rows : !VROWS";
  return "%picked = scf.if %view_v -> !VROWS {\n  " + view +
         "  scf.yield %rows : !VROWS\n} else {\n  " + copy +
         "  scf.yield %rows : !VROWS\n}\n  return %picked : !VROWS";
}
/// The body of @key_rows_in_place for f32 K: the tile at K's element
/// offset + b s0 + hk s1 + j0 s2, `keyTile` rows `headDim` apart.
std::string keyRowsInPlaceBody(int64_t keyTile, int64_t headDim) {
  std::string bn = std::to_string(keyTile), d = std::to_string(headDim);
  return "%base, %offset, %sizes:4, %strides:4 = memref.extract_strided_metadata %k\n"
         "      : !K -> memref<f32>, index, index, index, index, index, index, index, index, "
         "index\n"
         "  %at_b = arith.muli %b, %strides#0 : index\n"
         "  %at_h = arith.muli %hk, %strides#1 : index\n"
         "  %at_j = arith.muli %j0, %strides#2 : index\n"
         "  %at0 = arith.addi %offset, %at_b : index\n"
         "  %at1 = arith.addi %at0, %at_h : index\n"
         "  %at = arith.addi %at1, %at_j : index\n"
         "  %tile = memref.reinterpret_cast %base to offset: [%at], sizes: [" +
         bn + ", " + d + "], strides: [" + d +
         ", 1] : memref<f32> to !KTILE\n"
         "  return %tile : !KTILE";
}

} // namespace

/// The body of @narrow8 (lanes x f32 -> lanes x OT): a plain return for f32.
std::string pejit::x86NarrowBody(const std::string &t, int64_t lanes) {
  const std::string n = std::to_string(lanes);
  if (t == "f32")
    return "return %x : vector<" + n + "xf32>";
  if (t == "f16") // vcvtps2ph (F16C)
    return "%n = arith.truncf %x : vector<" + n + "xf32> to vector<" + n +
           "xf16>\n"
           "  return %n : vector<" +
           n + "xf16>";
  // bf16 = the high half of the f32 bits, rounded to nearest even:
  // (bits + 0x7fff + ((bits >> 16) & 1)) >> 16; a NaN becomes the quiet NaN
  // 0x7fc0 first (as f32: rounding could carry a NaN's payload into inf).
  // Written out because LLVM makes truncf to bf16 a libgcc call without
  // AVX512-BF16. The NaN select is on f32 lanes: on the i32 bits LLVM sank
  // it past the truncation and did it lane by lane (8 cmovs and 8 scalar
  // stores per vector; bench/RESULTS.md, session 19).
  return "%qnan = arith.constant dense<0x7FC00000> : vector<" + n +
         "xf32>\n"
         "  %nan = arith.cmpf uno, %x, %x : vector<" +
         n +
         "xf32>\n"
         "  %xq = arith.select %nan, %qnan, %x : vector<" +
         n + "xi1>, vector<" + n +
         "xf32>\n"
         "  %bits = arith.bitcast %xq : vector<" +
         n + "xf32> to vector<" + n +
         "xi32>\n"
         "  %c16 = arith.constant dense<16> : vector<" +
         n +
         "xi32>\n"
         "  %c1 = arith.constant dense<1> : vector<" +
         n +
         "xi32>\n"
         "  %bias = arith.constant dense<32767> : vector<" +
         n +
         "xi32>\n"
         "  %hi = arith.shrui %bits, %c16 : vector<" +
         n +
         "xi32>\n"
         "  %lsb = arith.andi %hi, %c1 : vector<" +
         n +
         "xi32>\n"
         "  %up = arith.addi %bits, %bias : vector<" +
         n +
         "xi32>\n"
         "  %rounded = arith.addi %up, %lsb : vector<" +
         n +
         "xi32>\n"
         "  %top = arith.shrui %rounded, %c16 : vector<" +
         n +
         "xi32>\n"
         "  %half = arith.trunci %top : vector<" +
         n + "xi32> to vector<" + n +
         "xi16>\n"
         "  %n = arith.bitcast %half : vector<" +
         n + "xi16> to vector<" + n +
         "xbf16>\n"
         "  return %n : vector<" +
         n + "xbf16>";
}

namespace {
LogicalResult instantiateForward(ModuleOp module, const X86TileConfig &tiles, X86Isa isa);

/// The kernel of the module's one function, at 8 lanes or (the forward
/// attention, where its rules allow) the family's.
LogicalResult instantiateKernel(ModuleOp module, const X86TileConfig &tiles, X86Isa isa) {
  // A pe.rope on its own: the standalone transform kernel.
  if (isMaterializedBias(module))
    return instantiateX86ScoreBias(module);
  if (isEmbeddingGradient(module))
    return instantiateX86EmbedGrad(module);
  if (isScoreBiasGradient(module))
    return instantiateX86ScoreBiasGrad(module);
  if (isRelativeTermGradient(module))
    return instantiateX86RelativeTermGrad(module);
  if (isRopeScaleGradient(module))
    return instantiateX86RopeScaleGrad(module);
  if (isStandaloneTransform(module))
    return instantiateX86Transform(module);
  if (isLinearAttentionBackward(module))
    return instantiateX86LinearBackward(module);
  if (isLinearAttention(module))
    return instantiateX86LinearAttention(module);
  if (isAttentionBackward(module))
    return instantiateX86Backward(module, x86IsaLanes(isa));
  return instantiateForward(module, tiles, isa);
}
} // namespace

LogicalResult pejit::instantiateX86Template(ModuleOp module, const X86TileConfig &tiles) {
  Expected<X86Isa> isa = resolveX86Isa(tiles.isa);
  if (!isa)
    return module.emitError() << isa.error();
  if (failed(instantiateKernel(module, tiles, *isa)))
    return failure();
  // Every kind says its family and lanes (8 unless it chose more), and its
  // code is generated for the family (HostIsa.h).
  Builder attrs(module.getContext());
  NamedAttrList info(module->getAttrOfType<DictionaryAttr>(kKernelInfoAttr));
  info.set("target", attrs.getStringAttr(std::string("x86-") + x86IsaName(*isa)));
  info.set("isa", attrs.getStringAttr(x86IsaName(*isa)));
  if (!info.get("lanes"))
    info.set("lanes", attrs.getI64IntegerAttr(8));
  module->setAttr(kKernelInfoAttr, attrs.getDictionaryAttr(info));
  module->setAttr(kX86IsaAttr, attrs.getStringAttr(x86IsaName(*isa)));
  return success();
}

namespace {
/// The forward attention: templates/x86/avx2_attention.mlir and its blocks.
LogicalResult instantiateForward(ModuleOp module, const X86TileConfig &tiles, X86Isa isa) {
  FailureOr<FusedAttention> found = findFusedAttention(module);
  if (failed(found))
    return failure();
  attn::AttentionOp op = found->op;
  if (failed(
          requireX86QueryKeyValue(op, op.getQuery(), op.getKey(), op.getValue(), op.getResult())))
    return failure();
  Type inType = cast<RankedTensorType>(op.getQuery().getType()).getElementType();
  Type outType = cast<RankedTensorType>(op.getResult().getType()).getElementType();
  pe::AttentionShape shape = attentionShape(op, /*vectorWidth=*/8);
  shape.queryTileRows = tiles.queryTile;
  shape.hasQueryTileScratch = true;
  if (shape.headDim % 8 != 0 || shape.valueDim % 16 != 0)
    return op.emitError() << "the x86 kernel needs d % 8 == 0 and dv % 16 == 0, got d = "
                          << shape.headDim << ", dv = " << shape.valueDim;
  // The family's lanes where its blocks divide the shape: rows of d in
  // whole vectors, P . V's column blocks of two vectors in dv. Else 8.
  const int64_t lanes =
      x86IsaLanes(isa) == 16 && shape.headDim % 16 == 0 && shape.valueDim % 32 == 0 ? 16 : 8;
  shape.vectorWidth = lanes;
  // Q K^T and P V as bf16 pairs (vdpbf16ps): bf16 inputs at 16 lanes, rows
  // of d in whole 32-element pairs of vectors.
  const bool bf16Products =
      isa == X86Isa::Avx512Bf16 && lanes == 16 && inType.isBF16() && shape.headDim % 32 == 0;
  if (std::string problem =
          x86TileProblem(tiles.queryTile, tiles.keyTile, shape.headDim, shape.valueDim);
      !problem.empty())
    return op.emitError() << problem;

  pe::PositionalEncodingAttrInterface qkTransform;
  SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  bool hasScoreBias = false;
  int64_t valueTermBuckets = 0;
  if (ArrayAttr encodingList = op.getEncodingsAttr()) {
    for (Attribute attr : encodingList) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      if (!encoding.isFusable())
        return op.emitError() << "encoding " << attr << " has no kernel hooks yet";
      if (encoding.getEncodingKind() == pe::EncodingKind::QKTransform)
        qkTransform = encoding;
      else if (encoding.getEncodingKind() == pe::EncodingKind::ScoreBias)
        hasScoreBias = true;
      else if (encoding.getValueTermBuckets() > 0)
        valueTermBuckets = encoding.getValueTermBuckets();
      else
        return op.emitError() << "encoding " << attr << " is not supported by the x86 kernel";
      encodings.push_back(encoding);
    }
  }
  for (pe::PositionalEncodingAttrInterface encoding : encodings)
    if (encoding.requiresQueryTileScratch() && encoding.getQueryTileScratchFloats(shape) == 0)
      return op.emitError() << "encoding " << encoding
                            << " needs a per-query-tile table that does not fit the item's "
                               "stack at this shape and tile config (docs/limits.md)";
  if (valueTermBuckets * tiles.queryTile > pe::kMaxQueryTileScratchFloats)
    return op.emitError() << "the value term's accumulator (" << valueTermBuckets << " buckets x "
                          << tiles.queryTile << " query rows) exceeds the item's stack bound of "
                          << pe::kMaxQueryTileScratchFloats
                          << " floats (docs/limits.md): use a smaller clip or query tile";
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, kMaxEncodingOperands);
  if (failed(slots))
    return failure();

  // How a call is planned (pejit/core/CallPlan.h): here for a static
  // shape, by the runtime per call for a shape class. The key cache holds K
  // transformed: only worth it when K is.
  bool lengthsAreCalls = ShapedType::isDynamic(shape.querySeq) ||
                         ShapedType::isDynamic(shape.keySeq) || ShapedType::isDynamic(shape.batch);
  // Ids per batch row take their row count from the batch, which the hooks
  // get as a constant: with a `?` batch they must be shared ([s]).
  if (ShapedType::isDynamic(shape.queryPositionRows) ||
      ShapedType::isDynamic(shape.keyPositionRows))
    return op.emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                             "built yet: pass ids shared by the batch ([s]) or a static batch";
  bool transformsKey = qkTransform && qkTransform.transformsKey();
  KernelDescription rule;
  rule.queryTile = tiles.queryTile;
  rule.keyTile = tiles.keyTile;
  rule.keyCacheTile = transformsKey ? tiles.keyTile : 0;
  if (qkTransform) {
    rule.tableFloatsPerQueryPosition = qkTransform.getScratchFloatsPerPosition(shape, false);
    rule.tableFloatsPerKeyPosition = qkTransform.getScratchFloatsPerPosition(shape, true);
  }
  rule.queryPositionRows = shape.queryPositionRows;
  // Grouped decode (avx2_decode.mlir): the GROUP heads of a KV head are the
  // lanes of one score vector, so up to 8, and nothing may read per-head
  // state the item keeps for one head (a value term, query-tile tables).
  int64_t group = shape.queryHeads / shape.kvHeads;
  bool perHeadState = valueTermBuckets > 0 || queryTileScratchFloats(encodings, shape) > 0;
  for (pe::PositionalEncodingAttrInterface encoding : encodings)
    perHeadState = perHeadState || encoding.isKeyTerm();
  // A training forward writes lse from @pejit_item only: no grouped decode.
  rule.decodeGroup = group > 1 && group <= 8 && !perHeadState && !op.getLse() ? group : 0;
  rule.keyPositionRows = shape.keyPositionRows;
  CallPlan plan;
  if (!lengthsAreCalls)
    plan = planCall(rule, Shape{shape.batch, shape.queryHeads, shape.kvHeads, shape.querySeq,
                                shape.keySeq, shape.headDim, shape.valueDim});
  // f32 V is viewed in place when the lengths fill a Q tile (a static
  // shape), else per item: for full tiles and single rows (decode).
  bool fillsTiles = !lengthsAreCalls && shape.querySeq >= tiles.queryTile;
  ValueRows valueRows = !inType.isF32() ? ValueRows::Copy
                        : fillsTiles    ? ValueRows::View
                                        : ValueRows::ViewForFullTiles;
  bool keyInPlace = inType.isF32() && !transformsKey;
  // The grouped decode's tile with bf16 products reads K as it is: only
  // where no QK transform changes K (avx512_bf16_decode.mlir).
  bool bf16Decode = bf16Products && !transformsKey;
  std::optional<int64_t> window = effectiveWindow(op, shape.keySeq);
  std::optional<int64_t> right = effectiveRightWindow(op, shape.querySeq);
  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"HQ", std::to_string(shape.queryHeads)},
      {"HKV", std::to_string(shape.kvHeads)},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"SQ", dimToString(shape.querySeq)},
      {"SKV", dimToString(shape.keySeq)},
      {"D", std::to_string(shape.headDim)},
      {"DV", std::to_string(shape.valueDim)},
      {"BM", std::to_string(tiles.queryTile)},
      {"L", std::to_string(lanes)},
      {"L2", std::to_string(2 * lanes)},
      {"LM1", std::to_string(lanes - 1)},
      {"IOTA", x86LaneIota(lanes)},
      {"S_TILE", bf16Products ? "pejit_s_tile_bf16" : "pejit_s_tile"},
      {"PV_PACK", bf16Products ? "pv_pack_bf16" : "pv_pack_none"},
      {"PV_PLAIN", bf16Products ? "pv_plain_keys_bf16" : "pv_plain_keys"},
      {"QTP_ROWS", std::to_string(bf16Products ? shape.headDim / 2 : 1)},
      {"KB_COLS", std::to_string(bf16Products ? shape.headDim / 2 : 1)},
      {"VP_ROWS", std::to_string(bf16Products ? tiles.keyTile / 2 : 1)},
      {"DECODE_TILE", bf16Decode ? "pejit_decode_tile_bf16" : "pejit_decode_tile_none"},
      {"DECODE_BF16", bf16Decode ? "true" : "false"},
      {"DH", std::to_string(shape.headDim / 2)},
      {"BN32", std::to_string((tiles.keyTile + 31) / 32 * 32)},
      {"BN", std::to_string(tiles.keyTile)},
      {"CAUSAL", op.getCausal() ? "true" : "false"},
      {"HAS_WINDOW", window ? "true" : "false"},
      {"SCORE_MOD", op.getSoftcapAttr() || hasScoreBias ? "true" : "false"},
      {"TILE_SCRATCH",
       std::to_string(std::max<int64_t>(queryTileScratchFloats(encodings, shape), 8))},
      {"VALUE_TERM", valueTermBuckets > 0 ? "true" : "false"},
      {"VT_FLOATS", std::to_string(std::max<int64_t>(valueTermBuckets, 1) * tiles.queryTile)},
      {"VT_BUCKETS", std::to_string(std::max<int64_t>(valueTermBuckets, 1))},
      {"E0", (*slots)[0]},
      {"E1", (*slots)[1]},
      {"E2", (*slots)[2]},
      {"E3", (*slots)[3]},
      {"WINDOW", std::to_string(window.value_or(0))},
      {"HAS_RIGHT", right ? "true" : "false"},
      {"RIGHT", std::to_string(right.value_or(0))},
      {"SCALE", formatFloat(op.getEffectiveScale())},
      {"QPB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"KPB", std::to_string(shape.positionAxes * shape.keyPositionRows)},
      {"T", kernelElementTypeName(inType)},
      {"OT", kernelElementTypeName(outType)},
      // K rotated once per call: allowed (a shape class) or chosen (a
      // static shape); the runtime passes the key cache the plan sizes.
      {"KONCE", (lengthsAreCalls ? transformsKey : plan.keyCacheFloats > 0) ? "true" : "false"},
      {"KCACHE", lengthsAreCalls ? std::string("?")
                                 : std::to_string(std::max<int64_t>(plan.keyCacheFloats, 1))},
      {"KTILE_FLOATS", std::to_string(tiles.keyTile * shape.headDim)},
      {"VALUE_ROWS", valueRowsBody(kernelElementTypeName(inType), shape.valueDim, tiles.keyTile,
                                   valueRows, lanes)},
      {"NARROW8", x86NarrowBody(kernelElementTypeName(outType), lanes)},
      // K read in place by one-row items: f32 K that no QK transform changes.
      {"K_IN_PLACE", keyInPlace ? "true" : "false"},
      {"KEY_ROWS_IN_PLACE", keyInPlace ? keyRowsInPlaceBody(tiles.keyTile, shape.headDim)
                                       : std::string("return %fallback : !KTILE")}};
  std::vector<TemplateFile> blocks = {{"x86/avx2_blocks.mlir", kX86Avx2BlocksTemplate},
                                      {"x86/avx2_tiles.mlir", kX86Avx2TilesTemplate},
                                      {"x86/avx2_rows.mlir", kX86Avx2RowsTemplate},
                                      {"x86/avx2_decode.mlir", kX86Avx2DecodeTemplate},
                                      {"x86/exp2.mlir", kX86Exp2Template}};
  // Only where the family has the instructions (they would not compile in
  // another), and used.
  if (bf16Products) {
    blocks.push_back({"x86/avx512_bf16_tiles.mlir", kX86Avx512Bf16TilesTemplate});
    blocks.push_back({"x86/avx512_bf16_decode.mlir", kX86Avx512Bf16DecodeTemplate});
    blocks.push_back({"x86/avx512_bf16_decode_blocks.mlir", kX86Avx512Bf16DecodeBlocksTemplate});
  }
  FailureOr<std::string> text = substitute(
      loadTemplateWithBlocks({"x86/avx2_attention.mlir", kX86Avx2AttentionTemplate}, blocks),
      params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the kernel template did not parse after substitution";

  std::optional<double> softcap;
  if (FloatAttr attr = op.getSoftcapAttr())
    softcap = attr.getValueAsDouble();
  if (failed(expandHooks(*kernel, shape, encodings, softcap)))
    return failure();

  // items <= b hq sq, within the query's 2^40 elements (the verifier's
  // bound): no overflow. 0 for a shape class: planned per call.
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(plan.items));
  info.append("scratch_floats", attrs.getI64IntegerAttr(plan.tableFloats));
  info.append("prepare_jobs", attrs.getI64IntegerAttr(plan.prepareJobs));
  info.append("key_cache_tile", attrs.getI64IntegerAttr(rule.keyCacheTile));
  info.append("decode_group", attrs.getI64IntegerAttr(rule.decodeGroup));
  info.append("table_floats_per_query_position",
              attrs.getI64IntegerAttr(rule.tableFloatsPerQueryPosition));
  info.append("table_floats_per_key_position",
              attrs.getI64IntegerAttr(rule.tableFloatsPerKeyPosition));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(tiles.queryTile));
  info.append("tile_n", attrs.getI64IntegerAttr(tiles.keyTile));
  info.append("lanes", attrs.getI64IntegerAttr(lanes));
  info.append("products", attrs.getStringAttr(bf16Products ? "bf16" : "f32"));
  info.append("target", attrs.getStringAttr("x86-avx2"));
  info.append("dtype", attrs.getStringAttr(kernelElementTypeName(inType)));
  info.append("out_dtype", attrs.getStringAttr(kernelElementTypeName(outType)));
  info.append("function", attrs.getStringAttr(found->func.getSymName()));
  info.append("arguments", attrs.getStringAttr(found->signature.str()));

  spliceKernel(module, *found, *kernel, attrs.getDictionaryAttr(info));
  return success();
}

struct InstantiateX86TemplatePass
    : pejit::impl::InstantiateX86TemplateBase<InstantiateX86TemplatePass> {
  using Base::Base;
  void runOnOperation() override {
    X86TileConfig tiles{tileM, tileN, std::nullopt};
    if (!isa.empty()) {
      std::string error;
      tiles.isa = parseX86Isa(isa, &error);
      if (!tiles.isa) {
        getOperation().emitError() << error;
        return signalPassFailure();
      }
    }
    if (failed(instantiateX86Template(getOperation(), tiles)))
      signalPassFailure();
  }
};
} // namespace
