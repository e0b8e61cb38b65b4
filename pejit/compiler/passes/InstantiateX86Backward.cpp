// attn-instantiate-x86-template, backward form: a function whose body is one
// attn.attention_backward on its arguments, returning dq, dk, dv, becomes
// @pejit_backward_rows, @pejit_backward_kv and @pejit_backward_q of
// templates/x86/attention_backward.mlir (docs/backward.md):
//
//   D_i = dO_i . O_i;  lse_i = log sum_j exp(s_ij);  P_ij = exp(s_ij - lse_i)
//   dS = P (dO V^T - D);  dE = scale softcap' dS
//   dQ = dE K;  dK = dE^T Q;  dV = P^T dO   (dK, dV summed over a KV head's group)
//
// This form takes f32, f16 or bf16 tensors (16-bit ones widened into f32
// scratch, the gradients narrowed back; o and dO may be f32 beside 16-bit
// q, k, v), masks, windows, GQA, softcap, a QK
// transform with an adjoint (RoPE: the phases read Q' and K', and dQ', dK'
// rows go through its adjoint as written) and the score biases by index
// (ALiBi, T5, a bias tensor: dS passes through an additive bias
// unchanged), bucketed key and value terms (Shaw's a^K and a^V: a table
// of q_i . a^K[m] and dO_i . a^V[m] per row in scratch, per-bucket sums in
// the q phase), with the gradients of the operands whose encoding gives an
// adjoint for them (T5's table, ALiBi's learned slopes, Shaw's tables,
// RoPE's position scale and inverse frequencies). Packed sequences
// (segments) and per-row key lengths are the runtime's: it runs each
// sequence or row as a call of its own, as the forward does. A training
// forward's lse, given, is read instead of recomputed (the rows phase
// copies it). Other encodings and other operand gradients are errors that
// say so.
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Parser/Parser.h"

#include "templates/X86AttentionBackward.inc"
#include "templates/X86AttentionBackwardBlocks.inc"
#include "templates/X86AttentionBackwardPrepare.inc"
#include "templates/X86AttentionBackwardTerms.inc"
#include "templates/X86Exp2.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Query rows per rows/q item and keys per kv item: a long call still has
/// thousands of items, and a decode step's one row is one item.
constexpr int64_t kRowsPerItem = 16, kKeysPerItem = 16;

} // namespace

/// The one attn.attention_backward of the module's one function.
FailureOr<std::pair<func::FuncOp, attn::AttentionBackwardOp>>
pejit::findAttentionBackward(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError() << "expected one function to compile, found " << funcs.size();
  func::FuncOp func = funcs[0];
  attn::AttentionBackwardOp op;
  for (Operation &inner : func.getBody().getOps()) {
    if (auto backward = dyn_cast<attn::AttentionBackwardOp>(inner)) {
      if (op)
        return inner.emitError() << "expected one attn.attention_backward per kernel";
      op = backward;
    } else if (!isa<func::ReturnOp>(inner)) {
      return inner.emitError() << "'" << inner.getName()
                               << "' cannot be compiled with attn.attention_backward: its "
                                  "operands must be the function's arguments";
    }
  }
  if (!op)
    return module.emitError() << "expected one attn.attention_backward to compile";
  return std::make_pair(func, op);
}

bool pejit::isAttentionBackward(ModuleOp module) {
  bool found = false;
  module.walk([&](attn::AttentionBackwardOp) { found = true; });
  return found;
}

LogicalResult pejit::bindBackwardArguments(func::FuncOp func, attn::AttentionBackwardOp op,
                                           ArrayRef<std::string> operandNames,
                                           KernelSignature &signature) {
  std::pair<Value, ArgumentRole> roles[] = {{op.getQuery(), ArgumentRole::Query},
                                            {op.getKey(), ArgumentRole::Key},
                                            {op.getValue(), ArgumentRole::Value},
                                            {op.getOutput(), ArgumentRole::Output},
                                            {op.getOutputGrad(), ArgumentRole::OutputGradient}};
  std::pair<Value, ArgumentRole> positionRoles[] = {
      {op.getQueryPositions(), ArgumentRole::QueryPositions},
      {op.getKeyPositions(), ArgumentRole::KeyPositions},
      {op.getQuerySegments(), ArgumentRole::QuerySegments},
      {op.getKeySegments(), ArgumentRole::KeySegments},
      {op.getKeyLengths(), ArgumentRole::KeyLengths},
      {op.getLse(), ArgumentRole::LogSumExp}};
  for (auto [value, role] : roles)
    if (!isa<BlockArgument>(value))
      return op.emitError() << "operand '" << argumentRoleName(role)
                            << "' is computed in the function: the kernel reads it from an "
                               "argument";
  for (size_t a = 0; a < std::size(roles); ++a)
    for (size_t b = 0; b < a; ++b)
      if (roles[a].first == roles[b].first)
        return op.emitError() << "'" << argumentRoleName(roles[a].second) << "' and '"
                              << argumentRoleName(roles[b].second)
                              << "' are one argument: the backward writes a gradient for each, "
                                 "so each needs an argument of its own";
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    bool bound = false;
    for (auto [value, role] : roles)
      if (value == arg && !bound) {
        argument.role = role;
        bound = true;
      }
    for (auto [value, role] : positionRoles)
      if (value == arg && !bound) {
        argument.role = role;
        bound = true;
      }
    // One tensor of position ids for both Q and K (LLaMA's position_ids).
    if (arg == op.getQueryPositions() && arg == op.getKeyPositions())
      argument.role = ArgumentRole::Positions;
    // Encoding operands in the slots the kernel reads them from.
    for (auto [n, operand] : llvm::enumerate(op.getEncodingOperands()))
      if (operand == arg && (!bound || argument.role == ArgumentRole::EncodingOperand)) {
        argument.role = ArgumentRole::EncodingOperand;
        if (argument.name.empty())
          argument.name = operandNames[n];
        argument.slots.push_back(static_cast<unsigned>(n));
        bound = true;
      }
    if (!bound)
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " is not an operand of attn.attention_backward";
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }
  return success();
}

LogicalResult pejit::instantiateX86Backward(ModuleOp module, int64_t familyLanes) {
  FailureOr<std::pair<func::FuncOp, attn::AttentionBackwardOp>> found =
      findAttentionBackward(module);
  if (failed(found))
    return failure();
  auto [func, op] = *found;
  if (failed(
          requireX86QueryKeyValue(op, op.getQuery(), op.getKey(), op.getValue(), op.getOutput())))
    return failure();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getOperands() != op.getResults())
    return func.emitError() << "the function must return dq, dk and dv of the "
                               "attn.attention_backward, in that order: they are the kernel's "
                               "outputs";
  // What this backward kernel computes (docs/status.md): the score biases
  // whose hooks read no position ids pass dS through unchanged; their
  // parameters' gradients and the other kinds come next.
  SmallVector<pe::PositionalEncodingAttrInterface> encodings;
  pe::PositionalEncodingAttrInterface qkTransform;
  bool readsPositions = false;          // relative_to = position
  int64_t keyTerms = 0, valueTerms = 0; // buckets of the bucketed terms
  if (ArrayAttr attrs = op.getEncodingsAttr())
    for (Attribute attr : attrs) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      bool scoreBias = encoding.getEncodingKind() == pe::EncodingKind::ScoreBias &&
                       (!encoding.isKeyTerm() || encoding.getKeyTermBuckets() > 0);
      bool transformWithAdjoint = encoding.getEncodingKind() == pe::EncodingKind::QKTransform &&
                                  encoding.hasQKTransformAdjoint();
      keyTerms += encoding.getKeyTermBuckets();
      valueTerms += encoding.getValueTermBuckets();
      if (!scoreBias && !transformWithAdjoint && encoding.getValueTermBuckets() == 0)
        return op.emitError() << "the x86 backward does not take " << attr
                              << " yet (it takes RoPE, the score biases: ALiBi, T5, a bias "
                                 "tensor, and Shaw's terms); docs/status.md lists what it takes";
      if (transformWithAdjoint)
        qkTransform = encoding;
      readsPositions = readsPositions || encoding.readsPositions();
      encodings.push_back(encoding);
    }
  if (!qkTransform && !readsPositions && (op.getQueryPositions() || op.getKeyPositions()))
    return op.emitError() << "the x86 backward reads position ids for a QK transform (RoPE) or "
                             "an encoding with relative_to = position; no encoding here reads "
                             "them";
  // The encoding operand gradients asked for: each operand's encoding must
  // give its adjoint; its place in the kv items' partial buffers is the
  // sum of the sizes before it (the runtime's rule too, X86Backward.cpp).
  SmallVector<int64_t> gradOffsets(4, -1);
  int64_t gradFloats = 0;
  std::vector<unsigned> operandGradients;
  std::optional<unsigned> scoreShapedGradient;
  for (int64_t slot : op.getGradOperands() ? *op.getGradOperands() : ArrayRef<int64_t>()) {
    auto [encoding, local] = op.encodingOfOperand(slot);
    if (!encoding.isDifferentiableOperand(local) || !encoding.hasOperandAdjoint(local))
      return op.emitError() << "the x86 backward does not compute the gradient of "
                            << encoding.getEncodingOperandName(local)
                            << " yet (grad_operands); derive the backward without it";
    if (slot >= 4)
      return op.emitError() << "grad_operands: slot " << slot << " is past the kernel's 4";
    operandGradients.push_back(static_cast<unsigned>(slot));
    // A bias tensor's gradient is dS itself: the kv phase writes it per
    // score (no partial buffer), the runtime sums its broadcast dims.
    if (encoding.hasScoreShapedGradient(local)) {
      if (scoreShapedGradient)
        return op.emitError() << "grad_operands: two score-shaped gradients (bias tensors); the "
                                 "x86 backward writes one";
      if (op.getQuerySegments() || op.getKeyLengths())
        return op.emitError() << "the gradient of " << encoding.getEncodingOperandName(local)
                              << " with segments or key_lengths is not built yet";
      scoreShapedGradient = static_cast<unsigned>(slot);
      continue;
    }
    auto type = cast<RankedTensorType>(op.getEncodingOperands()[slot].getType());
    gradOffsets[slot] = gradFloats;
    gradFloats += type.getNumElements();
  }
  // 16-bit q, k, v, o, dO: widened to f32 in scratch, the phases in f32,
  // dq, dk, dv narrowed back (@pejit_backward_widen / _narrow).
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  const char *elementType = kernelElementTypeName(qType.getElementType());
  for (Value value : {op.getKey(), op.getValue()})
    if (cast<RankedTensorType>(value.getType()).getElementType() != qType.getElementType())
      return op.emitError() << "the x86 backward takes q, k and v of one element type, got "
                            << qType.getElementType() << " and "
                            << cast<RankedTensorType>(value.getType()).getElementType();
  // o and dO: the forward's output type, q's or f32 (a 16-bit forward
  // with an f32 result): the phases read f32 o and dO as they are.
  Type outElement = cast<RankedTensorType>(op.getOutput().getType()).getElementType();
  Type gradElement = cast<RankedTensorType>(op.getOutputGrad().getType()).getElementType();
  if (gradElement != outElement || (outElement != qType.getElementType() && !outElement.isF32()))
    return op.emitError() << "the x86 backward takes o and dO of one element type, q's ("
                          << qType.getElementType() << ") or f32, got " << outElement << " and "
                          << gradElement;
  const char *outType = kernelElementTypeName(outElement);
  pe::AttentionShape shape =
      attentionShape(op.getQuery(), op.getKey(), op.getValue(), op.getQueryPositions(),
                     op.getKeyPositions(), qkTransform, 8);
  if (ShapedType::isDynamic(shape.queryPositionRows) ||
      ShapedType::isDynamic(shape.keyPositionRows))
    return op.emitError() << "position ids per batch row ([b, s]) with a `?` batch are not "
                             "built yet: pass ids shared by the batch ([s]) or a static batch";
  if (shape.headDim % 8 != 0 || shape.valueDim % 8 != 0)
    return op.emitError() << "the x86 backward needs d % 8 == 0 and dv % 8 == 0, got d = "
                          << shape.headDim << ", dv = " << shape.valueDim;
  // The family's lanes where d and dv are whole vectors of them (the row
  // phases' dot products run along the channels), else 8.
  const int64_t lanes =
      familyLanes == 16 && shape.headDim % 16 == 0 && shape.valueDim % 16 == 0 ? 16 : 8;
  shape.vectorWidth = lanes;

  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, op.getEncodingOperands(), 4);
  if (failed(slots))
    return failure();
  SmallVector<std::string> operandNames;
  for (pe::PositionalEncodingAttrInterface encoding : encodings)
    for (unsigned n = 0; n < encoding.getNumEncodingOperands(); ++n)
      operandNames.push_back(encoding.getEncodingOperandName(n));

  KernelSignature signature;
  signature.operandGradients = operandGradients;
  signature.scoreShapedGradient = scoreShapedGradient;
  if (failed(bindBackwardArguments(func, op, operandNames, signature)))
    return failure();

  std::optional<int64_t> window = op.getWindow(), right = op.getWindowRight();
  std::optional<double> softcap;
  if (FloatAttr cap = op.getSoftcapAttr())
    softcap = cap.getValueAsDouble();
  std::map<std::string, std::string> params = {
      {"B", dimToString(shape.batch)},
      {"HQ", std::to_string(shape.queryHeads)},
      {"HKV", std::to_string(shape.kvHeads)},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"SQ", dimToString(shape.querySeq)},
      {"SKV", dimToString(shape.keySeq)},
      {"D", std::to_string(shape.headDim)},
      {"DV", std::to_string(shape.valueDim)},
      {"BM", std::to_string(kRowsPerItem)},
      {"BN", std::to_string(kKeysPerItem)},
      {"CAUSAL", op.getCausal() ? "true" : "false"},
      {"HAS_WINDOW", window ? "true" : "false"},
      {"WINDOW", std::to_string(window.value_or(0))},
      {"HAS_RIGHT", right ? "true" : "false"},
      {"RIGHT", std::to_string(right.value_or(0))},
      {"SCALE", formatFloat(op.getEffectiveScale())},
      {"HAS_SOFTCAP", softcap ? "true" : "false"},
      {"SOFTCAP", formatFloat(softcap.value_or(1.0))},
      {"E0", (*slots)[0]},
      {"E1", (*slots)[1]},
      {"E2", (*slots)[2]},
      {"E3", (*slots)[3]},
      {"T", elementType},
      {"WIDEN8", x86WidenBody(elementType)},
      {"NARROW8", x86NarrowBody(elementType)},
      {"L", std::to_string(lanes)},
      {"LM1", std::to_string(lanes - 1)},
      {"IOTA", x86LaneIota(lanes)},
      {"QPB", std::to_string(shape.positionAxes * shape.queryPositionRows)},
      {"KPB", std::to_string(shape.positionAxes * shape.keyPositionRows)},
      {"HAS_GRADS", gradFloats > 0 ? "true" : "false"},
      {"HAS_LSE", op.getLse() ? "true" : "false"},
      {"HAS_SCORE_GRAD", scoreShapedGradient ? "true" : "false"},
      {"HAS_KEY_TERM", keyTerms > 0 ? "true" : "false"},
      {"KEY_TERMS", std::to_string(keyTerms)},
      {"HAS_VALUE_TERM", valueTerms > 0 ? "true" : "false"},
      {"VALUE_TERMS", std::to_string(valueTerms)},
      {"TERM_FLOATS", std::to_string(keyTerms + valueTerms)},
      {"ROW_FLOATS", std::to_string(2 + keyTerms + valueTerms)},
      {"GRAD_FLOATS", std::to_string(gradFloats)},
      {"GRAD_OFFSETS", "[" + std::to_string(gradOffsets[0]) + ", " +
                           std::to_string(gradOffsets[1]) + ", " + std::to_string(gradOffsets[2]) +
                           ", " + std::to_string(gradOffsets[3]) + "]"}};
  FailureOr<std::string> text =
      substitute(loadTemplateWithBlocks(
                     {"x86/attention_backward.mlir", kX86AttentionBackwardTemplate},
                     {{"x86/attention_backward_blocks.mlir", kX86AttentionBackwardBlocksTemplate},
                      {"x86/attention_backward_prepare.mlir", kX86AttentionBackwardPrepareTemplate},
                      {"x86/attention_backward_terms.mlir", kX86AttentionBackwardTermsTemplate},
                      {"x86/exp2.mlir", kX86Exp2Template}}),
                 params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the backward template did not parse after substitution";
  // The score hooks without a query-tile scratch (one score at a time); the
  // template applies the softcap itself, before them.
  shape.hasQueryTileScratch = false;
  shape.scale = op.getEffectiveScale();
  if (failed(expandHooks(*kernel, shape, encodings, std::nullopt)))
    return failure();

  // The plan of a call: rows and q items b hq ceil(sq / BM), kv items
  // b hkv ceil(skv / BN); the scratch holds D, lse and the bucketed terms'
  // table, 2 + terms floats for each of the b hq sq rows.
  // At a static shape here; the runtime plans a shape class's calls by the
  // same rule (pejit/runtime/X86Backward.cpp).
  bool staticShape = !ShapedType::isDynamic(shape.batch) &&
                     !ShapedType::isDynamic(shape.querySeq) && !ShapedType::isDynamic(shape.keySeq);
  int64_t rowFloats = staticShape ? shape.batch * shape.queryHeads * shape.querySeq : 0;
  int64_t keyItems =
      staticShape ? shape.batch * shape.kvHeads * ((shape.keySeq + kKeysPerItem - 1) / kKeysPerItem)
                  : 0;
  int64_t items = staticShape ? shape.batch * shape.queryHeads *
                                    ((shape.querySeq + kRowsPerItem - 1) / kRowsPerItem)
                              : 0;
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(items));
  int64_t rowScratch = 2 + keyTerms + valueTerms;
  info.append("scratch_floats",
              attrs.getI64IntegerAttr(rowScratch * rowFloats + (keyItems + items) * gradFloats));
  info.append("row_scratch_floats", attrs.getI64IntegerAttr(rowScratch));
  // A QK transform's tables, sized per call by the runtime as the
  // forward's: floats per position of each side, position rows and axes.
  int64_t perQuery = qkTransform ? qkTransform.getScratchFloatsPerPosition(shape, false) : 0;
  int64_t perKey = qkTransform ? qkTransform.getScratchFloatsPerPosition(shape, true) : 0;
  info.append("table_floats_per_query_position", attrs.getI64IntegerAttr(perQuery));
  info.append("table_floats_per_key_position", attrs.getI64IntegerAttr(perKey));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  info.append("tile_m", attrs.getI64IntegerAttr(kRowsPerItem));
  info.append("tile_n", attrs.getI64IntegerAttr(kKeysPerItem));
  info.append("lanes", attrs.getI64IntegerAttr(lanes));
  spliceX86Kernel(module, func, signature, *kernel, info, elementType, outType);
  return success();
}
