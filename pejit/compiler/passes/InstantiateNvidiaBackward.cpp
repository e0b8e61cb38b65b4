// attn-instantiate-nvidia-template, backward form: a function whose body is
// one attn.attention_backward on its arguments, returning dq, dk, dv,
// becomes the gpu.module of templates/nvidia/mma_attention_backward.mlir
// (docs/backward.md, "NVIDIA"):
//
//   D_i = dO_i . O_i;  lse_i = log sum_j exp(s_ij);  P_ij = exp(s_ij - lse_i)
//   dS = P (dO V^T - D);  dE = scale softcap' dS
//   dQ' = dE K';  dK' = dE^T Q' (summed over a KV head's group);  dV = P^T dO
//   dq = adjoint(dQ'), dk = adjoint(dK')   (RoPE: the inverse rotation)
//
// f16/bf16 q, k, v (o and dO of the forward's output type), f32
// accumulation, gradients in the inputs' type. It takes masks, windows,
// GQA, softcap, a QK transform with an adjoint and the score biases by
// index (ALiBi, T5, relative_to = position), Shaw's bucketed terms, with
// the gradients of the operands whose encoding gives an adjoint for them
// (T5's table, ALiBi's learned slopes, the RoPE's position scale and
// inverse frequencies, Shaw's tables) in per-warp partials, summed by the
// runtime in slot order, and a bias tensor's (dS per score, reduced by the
// runtime); segments and key lengths are errors that say so. Like the forward's instantiation, this
// file never names a concrete encoding.
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/KernelViews.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/core/NvidiaPlan.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"

#include "templates/NvidiaMmaAttentionBackward.inc"
#include "templates/NvidiaMmaBackwardBlocks.inc"
#include "templates/NvidiaMmaBackwardRowwise.inc"
#include "templates/NvidiaMmaBackwardSteps.inc"
#include "templates/NvidiaMmaBackwardTerms.inc"
#include "templates/NvidiaMmaMath.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Rows a block owns (4 warps of 16), and shared memory a block has
/// without opting in to more.
constexpr int64_t kBlockRows = 64, kThreads = 128, kStaticSharedBytes = 48 * 1024;

/// `%w`'s conversion from an `from` value `%x` to `to`, as a function body.
std::string convertBody(const std::string &from, const std::string &to) {
  if (from == to)
    return "return %x : " + to;
  if (from == "f32")
    return "%w = arith.truncf %x : f32 to " + to + "\n  return %w : " + to;
  if (to == "f32")
    return "%w = arith.extf %x : " + from + " to f32\n  return %w : f32";
  return "%f = arith.extf %x : " + from + " to f32\n  %w = arith.truncf %f : f32 to " + to +
         "\n  return %w : " + to;
}

} // namespace

LogicalResult pejit::instantiateNvidiaBackward(ModuleOp module) {
  FailureOr<std::pair<func::FuncOp, attn::AttentionBackwardOp>> found =
      findAttentionBackward(module);
  if (failed(found))
    return failure();
  auto [func, op] = *found;
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getOperands() != op.getResults())
    return func.emitError() << "the function must return dq, dk and dv of the "
                               "attn.attention_backward, in that order: they are the kernel's "
                               "outputs";
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto oType = cast<RankedTensorType>(op.getOutput().getType());
  Type element = qType.getElementType();
  for (auto [value, name] :
       {std::pair{op.getQuery(), "query"}, {op.getKey(), "key"}, {op.getValue(), "value"}}) {
    Type type = cast<RankedTensorType>(value.getType()).getElementType();
    if (!type.isF16() && !type.isBF16())
      return op.emitError() << name << " element type " << type
                            << " is not supported by the nvidia backward (f16 or bf16 inputs, "
                               "f32 accumulation)";
    if (type != element)
      return op.emitError() << name << " element type " << type << " differs from the query's "
                            << element;
  }
  Type outElement = oType.getElementType();
  if (!kernelElementTypeName(outElement) ||
      cast<RankedTensorType>(op.getOutputGrad().getType()).getElementType() != outElement)
    return op.emitError() << "the nvidia backward takes o and dO of one element type (f32, f16 "
                             "or bf16), got "
                          << outElement << " and "
                          << cast<RankedTensorType>(op.getOutputGrad().getType()).getElementType();
  for (auto [value, name] : {std::pair{op.getQuery(), "query"},
                             {op.getKey(), "key"},
                             {op.getValue(), "value"},
                             {op.getOutput(), "output"}})
    for (int64_t dim : {1, 3})
      if (cast<RankedTensorType>(value.getType()).isDynamicDim(dim))
        return op.emitError() << name << " has a dynamic dim " << dim
                              << ": the nvidia backward takes `?` only for the batch (dim 0) and "
                                 "the lengths (dim 2)";
  if (op.getQuerySegments() || op.getKeySegments() || op.getKeyLengths())
    return op.emitError() << "the nvidia backward does not take segments or key_lengths yet "
                             "(docs/status.md): run each sequence as a call of its own";

  // What it takes: the score biases by index or position (dS passes
  // through them unchanged) and a QK transform with an adjoint.
  SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  pe::PositionalEncodingAttrInterface qkTransform;
  SmallVector<std::string> operandNames;
  int64_t keyTerms = 0, valueTerms = 0; // buckets of Shaw's terms
  if (ArrayAttr attrs = op.getEncodingsAttr())
    for (Attribute attr : attrs) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      bool scoreBias = encoding.getEncodingKind() == pe::EncodingKind::ScoreBias &&
                       (!encoding.isKeyTerm() || encoding.getKeyTermBuckets() > 0);
      bool transform = encoding.getEncodingKind() == pe::EncodingKind::QKTransform &&
                       encoding.hasQKTransformAdjoint();
      keyTerms += encoding.getKeyTermBuckets();
      valueTerms += encoding.getValueTermBuckets();
      if (!scoreBias && !transform && encoding.getValueTermBuckets() == 0)
        return op.emitError() << "the nvidia backward does not take " << attr
                              << " yet (it takes RoPE, the score biases ALiBi, T5 and a bias "
                                 "tensor, and Shaw's terms; docs/status.md lists what each "
                                 "target takes)";
      if (transform)
        qkTransform = encoding;
      encodings.push_back(encoding);
      for (unsigned n = 0; n < encoding.getNumEncodingOperands(); ++n)
        operandNames.push_back(encoding.getEncodingOperandName(n));
    }
  pe::AttentionShape shape =
      attentionShape(op.getQuery(), op.getKey(), op.getValue(), op.getQueryPositions(),
                     op.getKeyPositions(), qkTransform, /*vectorWidth=*/1);
  shape.scale = op.getEffectiveScale();
  shape.hasQueryTileScratch = false;
  if (shape.headDim % 16 != 0 || shape.valueDim % 16 != 0 || shape.headDim > 128 ||
      shape.valueDim > 128)
    return op.emitError() << "the nvidia backward needs d and dv multiples of 16 up to 128, got "
                             "d = "
                          << shape.headDim << ", dv = " << shape.valueDim;
  if (ShapedType::isDynamic(shape.queryPositionRows) ||
      ShapedType::isDynamic(shape.keyPositionRows))
    return op.emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                             "built yet: pass ids shared by the batch ([s]) or a static batch";

  // The encoding operand gradients asked for: each operand's encoding
  // gives its adjoint; its place in a warp's partial is the sum of the
  // sizes before it (the runtime's rule too, BackwardLaunch.h).
  SmallVector<int64_t> gradOffsets(std::max<size_t>(op.getEncodingOperands().size(), 1), -1);
  int64_t gradFloats = 0;
  bool scoreGrads = false, transformGrads = false, termGrads = false, keyTableGrad = false;
  KernelSignature signature;
  for (int64_t slot : op.getGradOperands() ? *op.getGradOperands() : ArrayRef<int64_t>()) {
    auto [encoding, local] = op.encodingOfOperand(slot);
    if (!encoding.isDifferentiableOperand(local) || !encoding.hasOperandAdjoint(local))
      return op.emitError() << "the nvidia backward does not compute the gradient of "
                            << encoding.getEncodingOperandName(local)
                            << " yet (grad_operands; docs/status.md): derive the backward "
                               "without it, or compile it for x86";
    // A bias tensor's gradient is dS itself: the q phase writes it per
    // score (no partial), the runtime sums its broadcast dims.
    if (encoding.hasScoreShapedGradient(local)) {
      if (signature.scoreShapedGradient)
        return op.emitError() << "grad_operands: two score-shaped gradients (bias tensors); the "
                                 "nvidia backward writes one";
      signature.scoreShapedGradient = static_cast<unsigned>(slot);
      signature.operandGradients.push_back(static_cast<unsigned>(slot));
      continue;
    }
    bool transform = encoding.getEncodingKind() == pe::EncodingKind::QKTransform;
    bool term = encoding.getKeyTermBuckets() > 0 || encoding.getValueTermBuckets() > 0;
    transformGrads = transformGrads || transform;
    termGrads = termGrads || term;
    keyTableGrad = keyTableGrad || encoding.getKeyTermBuckets() > 0;
    scoreGrads = scoreGrads || (!transform && !term);
    signature.operandGradients.push_back(static_cast<unsigned>(slot));
    gradOffsets[slot] = gradFloats;
    gradFloats += cast<RankedTensorType>(op.getEncodingOperands()[slot].getType()).getNumElements();
  }
  std::string offsetsText;
  for (int64_t offset : gradOffsets)
    offsetsText += (offsetsText.empty() ? "" : ", ") + std::to_string(offset);
  if (failed(bindBackwardArguments(func, op, operandNames, signature)))
    return failure();

  // The step W: 64 rows of the other side while the shared tiles (64 + W
  // rows of D and of DV, 16-bit) fit, else 16. 16 also where d > 64 or an
  // operand gradient is asked: what keeps dV, dK', the two score tiles
  // and the lanes' gradient adds in registers (ptxas: no spills).
  auto sharedBytes = [&](int64_t w) {
    return (kBlockRows + w) * ((shape.headDim + 8) + (shape.valueDim + 8)) * 2;
  };
  bool anyGradient = gradFloats > 0 || signature.scoreShapedGradient;
  int64_t w = std::max(shape.headDim, shape.valueDim) <= 64 && !anyGradient ? 64 : 16;
  if (sharedBytes(w) > kStaticSharedBytes ||
      kBlockRows * (shape.headDim + 8) * 4 > kStaticSharedBytes)
    return op.emitError() << "the nvidia backward needs " << sharedBytes(w)
                          << " bytes of shared memory at d = " << shape.headDim
                          << ", more than the " << kStaticSharedBytes << " a block has";

  FailureOr<SmallVector<std::string>> slots =
      encodingOperandSlots(op, op.getEncodingOperands(), op.getEncodingOperands().size());
  if (failed(slots))
    return failure();
  EncodingArgumentTexts encodingText = encodingArgumentTexts(*slots);

  // Lengths and views, as the forward's (KernelViews.h).
  bool lengthsAreCalls = ShapedType::isDynamic(shape.batch) ||
                         ShapedType::isDynamic(shape.querySeq) ||
                         ShapedType::isDynamic(shape.keySeq);
  KernelDescription rule;
  rule.queryTile = kBlockRows;
  rule.keyTile = w;
  if (qkTransform) {
    rule.tableFloatsPerQueryPosition = qkTransform.getScratchFloatsPerPosition(shape, false);
    rule.tableFloatsPerKeyPosition = qkTransform.getScratchFloatsPerPosition(shape, true);
  }
  rule.queryPositionRows = shape.queryPositionRows;
  rule.keyPositionRows = shape.keyPositionRows;
  Shape staticShape{shape.batch,  shape.queryHeads, shape.kvHeads, shape.querySeq,
                    shape.keySeq, shape.headDim,    shape.valueDim};
  int64_t tableFloats = lengthsAreCalls ? 0 : planNvidiaCall(rule, 1, staticShape).tableFloats;
  auto dim = [](int64_t value, const char *name) {
    return ShapedType::isDynamic(value) ? std::string(name) : std::to_string(value);
  };
  std::string b = dim(shape.batch, "%B"), sq = dim(shape.querySeq, "%SQ"),
              skv = dim(shape.keySeq, "%SKV");
  std::string hq = std::to_string(shape.queryHeads), hkv = std::to_string(shape.kvHeads);
  std::string d = std::to_string(shape.headDim), dv = std::to_string(shape.valueDim);
  std::string inName = element.isBF16() ? "bf16" : "f16";
  std::string outName = kernelElementTypeName(outElement);
  KernelView qpos{
      "qpos", "i64", {std::to_string(shape.positionAxes * shape.queryPositionRows), sq}};
  KernelView kpos{"kpos", "i64", {std::to_string(shape.positionAxes * shape.keyPositionRows), skv}};
  KernelView scratch{
      "scratch",
      "f32",
      {lengthsAreCalls ? "%NSCRATCH" : std::to_string(std::max<int64_t>(tableFloats, 1))}};
  KernelView lse{"lse", "f32", {"1", "1", "1"}};
  if (op.getLse())
    lse.sizes = {b, hq, sq};
  auto lengths = [&] {
    return lengthsText(
        {{"B", shape.batch, "nb"},
         {"SQ", shape.querySeq, "nsq"},
         {"SKV", shape.keySeq, "nskv"},
         {"NSCRATCH", lengthsAreCalls ? ShapedType::kDynamic : tableFloats, "nscratch"}});
  };
  std::string backwardViews = lengths() + viewsText({{"o", outName, {b, hq, sq, dv}},
                                                     {"do", outName, {b, hq, sq, dv}},
                                                     {"rows", "f32", {"2", b, hq, sq}},
                                                     lse,
                                                     {"gq", "f32", {b, hq, sq, d}},
                                                     {"gk", "f32", {b, hkv, skv, d}},
                                                     {"dv", inName, {b, hkv, skv, dv}},
                                                     scratch});
  std::string lengthArgs = "%nb: i64, %nsq: i64, %nskv: i64, %nsplits: i64, %nscratch: i64";
  // Every kernel but the prologue takes the same arguments (the runtime's
  // order, pejit/runtime/cuda/BackwardLaunch.h).
  std::string backwardArgs = "%q_arg: !PT, %k_arg: !PT, %v_arg: !PT, %o_arg: !POT, "
                             "%do_arg: !POT, %dq_arg: !PT, %dk_arg: !PT, %dv_arg: !PT, "
                             "%tq_arg: !PT, %tk_arg: !PT, %scratch_arg: !PF, %rows_arg: !PF, "
                             "%gq_arg: !PF, %gk_arg: !PF, %lse_arg: !PF, %part_arg: !PF, "
                             "%tqf_arg: !PF, %tkf_arg: !PF, %terms_arg: !PF, %ds_arg: !PF, "
                             "%qpos_arg: !PI, %kpos_arg: !PI, " +
                             lengthArgs + encodingText.args;
  std::optional<int64_t> window = op.getWindow(), right = op.getWindowRight();
  std::optional<double> softcap;
  if (FloatAttr cap = op.getSoftcapAttr())
    softcap = cap.getValueAsDouble();
  std::map<std::string, std::string> params = {
      {"BD", dimToString(shape.batch)},
      {"SQD", dimToString(shape.querySeq)},
      {"SKVD", dimToString(shape.keySeq)},
      {"SCRATCHD", viewDimsText(scratch)},
      {"LSE_SHAPE", viewDimsText(lse)},
      {"HQ", hq},
      {"HKV", hkv},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"D", d},
      {"DV", dv},
      {"DP", std::to_string(shape.headDim + 8)},
      {"DVP", std::to_string(shape.valueDim + 8)},
      {"D8", std::to_string(shape.headDim / 8)},
      {"DV8", std::to_string(shape.valueDim / 8)},
      {"D16", std::to_string(shape.headDim / 16)},
      {"DV16", std::to_string(shape.valueDim / 16)},
      {"W", std::to_string(w)},
      {"W8", std::to_string(w / 8)},
      {"W16", std::to_string(w / 16)},
      {"ROWS", std::to_string(kBlockRows + w)},
      {"THREADS", std::to_string(kThreads)},
      {"T", inName},
      {"MMA", element.isBF16() ? "mma_bf16" : "mma_f16"},
      {"OT", outName},
      {"O_TO_T", convertBody(outName, inName)},
      {"O_TO_F32", convertBody(outName, "f32")},
      {"CAUSAL", op.getCausal() ? "true" : "false"},
      {"HAS_WINDOW", window ? "true" : "false"},
      {"WINDOW", std::to_string(window.value_or(0))},
      {"HAS_RIGHT", right ? "true" : "false"},
      {"RIGHT", std::to_string(right.value_or(0))},
      {"SCALE", formatFloat(op.getEffectiveScale())},
      {"HAS_SOFTCAP", softcap ? "true" : "false"},
      {"SOFTCAP", formatFloat(softcap.value_or(1.0))},
      {"HAS_LSE", op.getLse() ? "true" : "false"},
      {"HAS_SCORE_GRADS", scoreGrads ? "true" : "false"},
      {"HAS_TRANSFORM_GRADS", transformGrads ? "true" : "false"},
      {"HAS_TERM_GRADS", termGrads ? "true" : "false"},
      {"HAS_FINISH_GRADS", transformGrads || termGrads ? "true" : "false"},
      {"KEEP_F32", transformGrads || keyTableGrad ? "true" : "false"},
      {"HAS_TERMS", keyTerms + valueTerms > 0 ? "true" : "false"},
      {"HAS_SCORE_GRAD", signature.scoreShapedGradient ? "true" : "false"},
      {"HAS_KEY_TERM", keyTerms > 0 ? "true" : "false"},
      {"HAS_VALUE_TERM", valueTerms > 0 ? "true" : "false"},
      {"NK", std::to_string(keyTerms)},
      {"NV", std::to_string(valueTerms)},
      {"NK2", std::to_string(2 * keyTerms)},
      {"TW", std::to_string(std::max<int64_t>(2 * keyTerms + 2 * valueTerms, 1))},
      {"GRAD_FLOATS", std::to_string(std::max<int64_t>(gradFloats, 1))},
      {"GRAD_OFFSETS", "[" + offsetsText + "]"},
      {"QPB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"KPB", std::to_string(shape.positionAxes * shape.keyPositionRows)},
      {"LENGTH_ARGS", lengthArgs},
      {"BACKWARD_ARGS", backwardArgs},
      {"PROLOGUE_VIEWS", lengths() + viewsText({scratch, qpos, kpos})},
      {"BACKWARD_VIEWS", backwardViews},
      {"POSITION_VIEWS", viewsText({qpos, kpos})},
      {"ENCODING_ARGS", encodingText.args},
      {"ENCODING_CALL_ARGS", encodingText.callArgs},
      {"ENCODING_CALL_TYPES", encodingText.callTypes},
      {"ENCODING_OPERANDS", encodingText.operands}};
  FailureOr<std::string> text =
      substitute(loadTemplateWithBlocks(
                     {"nvidia/mma_attention_backward.mlir", kNvidiaMmaAttentionBackwardTemplate},
                     {{"nvidia/mma_math.mlir", kNvidiaMmaMathTemplate},
                      {"nvidia/mma_backward_blocks.mlir", kNvidiaMmaBackwardBlocksTemplate},
                      {"nvidia/mma_backward_steps.mlir", kNvidiaMmaBackwardStepsTemplate},
                      {"nvidia/mma_backward_terms.mlir", kNvidiaMmaBackwardTermsTemplate},
                      {"nvidia/mma_backward_rowwise.mlir", kNvidiaMmaBackwardRowwiseTemplate}}),
                 params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the nvidia backward template did not parse after substitution";
  // The template applies the softcap itself (it needs softcap' too).
  if (failed(expandHooks(*kernel, shape, encodings, std::nullopt)))
    return failure();

  // Grids (pejit/runtime/cuda/BackwardLaunch.h plans a shape class's the
  // same way): rows and q [ceil(sq / 64), hq, b], kv [ceil(skv / 64), hkv,
  // b], transform and finish [ceil(max(sq, skv) / 64), hq + hkv, b].
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("target", attrs.getStringAttr("nvidia"));
  info.append("dtype", attrs.getStringAttr(inName));
  info.append("out_dtype", attrs.getStringAttr(inName));
  info.append("kernel", attrs.getStringAttr("pejit_backward"));
  info.append("splits", attrs.getI64IntegerAttr(1));
  if (!lengthsAreCalls) {
    auto tiles = [](int64_t n) { return (n + kBlockRows - 1) / kBlockRows; };
    info.append("grid",
                attrs.getI64ArrayAttr({tiles(shape.querySeq), shape.queryHeads, shape.batch}));
    info.append("combine_grid", attrs.getI64ArrayAttr({1, 1, 1}));
    info.append("partial_row_floats", attrs.getI64IntegerAttr(0));
    info.append("partial_output_floats", attrs.getI64IntegerAttr(0));
  }
  auto classDim = [](int64_t value) { return ShapedType::isDynamic(value) ? kDynamicDim : value; };
  info.append("shape",
              attrs.getI64ArrayAttr({classDim(shape.batch), shape.queryHeads, shape.kvHeads,
                                     classDim(shape.querySeq), classDim(shape.keySeq),
                                     shape.headDim, shape.valueDim}));
  info.append("block", attrs.getI64ArrayAttr({kThreads, 1, 1}));
  info.append("scratch_floats", attrs.getI64IntegerAttr(tableFloats));
  info.append("table_floats_per_query_position",
              attrs.getI64IntegerAttr(rule.tableFloatsPerQueryPosition));
  info.append("table_floats_per_key_position",
              attrs.getI64IntegerAttr(rule.tableFloatsPerKeyPosition));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(kBlockRows));
  info.append("tile_n", attrs.getI64IntegerAttr(w));
  // Per row: D and lse, then Shaw's terms (QaK, S, dOaV, T).
  info.append("row_scratch_floats", attrs.getI64IntegerAttr(2 + 2 * keyTerms + 2 * valueTerms));
  info.append("function", attrs.getStringAttr(func.getSymName()));
  info.append("arguments", attrs.getStringAttr(signature.str()));
  FusedAttention spliced{func, nullptr, signature};
  spliceKernel(module, spliced, *kernel, attrs.getDictionaryAttr(info));
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), attrs.getUnitAttr());
  return success();
}
