// attn-derive-backward (Passes.td): the backward function of each function
// computing one fused attn.attention on its arguments (docs/backward.md).
//
//   func @f(q, k, v, ops..., ids...) -> o  [, lse]
//   func @f_backward(q, k, v, ops..., o, dO, [lse,] ids...) -> (dq, dk, dv, d ops...)
//
// o and dO (and a training forward's lse, which the backward then reads
// instead of recomputing) go before the forward's trailing position ids,
// so that those stay trailing, and optional at a run, as in the forward.
// The backward carries the forward's operands and attributes; its
// grad_operands are the encoding operands their encoding differentiates.
//
// A materialized score bias with a tensor (a pe.t5_bias on its own) gets
// its tensor's gradient:
//
//   func @f(table) -> bias = pe.t5_bias table
//   func @f_backward(table, dBias) -> d table = pe.score_bias_grad dBias
//
// and a materialized Shaw term its table's gradient (and the key term its
// query's):
//
//   func @f(q, a^K) -> E = pe.relative_key q, a^K
//   func @f_backward(q, a^K, dE) -> (dq, d a^K) = pe.relative_term_grad dE
//   func @f(a^V) -> R = pe.relative_value a^V
//   func @f_backward(a^V, dR) -> d a^V = pe.relative_term_grad dR
//
// A function computing one attn.linear_attention gets
// attn.linear_attention_backward the same way (o and dO before the ids;
// results dq, dk, dv); a carried state has no backward.
//
// A standalone chain of pe ops on an argument x (docs/standalone-kernels.md)
// gets the chain's input gradient:
//
//   func @f(x, ids, ops...) -> y = op_n(... op_0(x))
//   func @f_backward(dy, ids, ops...) -> dx = op_0^T(... op_n^T(dy))
//
// each QK transform turned into its adjoint (pe.rope adjoint: the rotation
// transposed); an additive op (pe.sinusoidal, pe.learned) passes the
// gradient through. A chain of additive ops alone gets no backward: dx is
// dy. The encodings' own tensors get no gradient here yet.
#include "pejit/compiler/passes/Passes.h"
#include "pejit/compiler/passes/StandaloneChain.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace pejit {
#define GEN_PASS_DEF_DERIVEBACKWARD
#include "pejit/compiler/passes/Passes.h.inc"
} // namespace pejit

using namespace mlir;
using namespace pejit;

namespace {

/// The one attn.attention of `func`, when the function is that attention
/// on its arguments, returned; else null (not an attention function) or
/// failure (an attention the backward cannot take, with the error emitted).
FailureOr<attn::AttentionOp> attentionOf(func::FuncOp func) {
  attn::AttentionOp op;
  for (Operation &inner : func.getBody().getOps()) {
    if (auto attention = dyn_cast<attn::AttentionOp>(inner)) {
      if (op)
        return inner.emitError() << "attn-derive-backward takes one attn.attention per function";
      op = attention;
    } else if (!isa<func::ReturnOp>(inner)) {
      if (op || llvm::any_of(func.getBody().getOps(),
                             [](Operation &other) { return isa<attn::AttentionOp>(other); }))
        return inner.emitError() << "'" << inner.getName()
                                 << "' is not fused into the attention: the backward needs "
                                    "every operand of attn.attention to be a function argument "
                                    "(run pe-fuse-into-attention first)";
      return attn::AttentionOp();
    }
  }
  if (!op)
    return attn::AttentionOp();
  if (op.getBias() || op.getKeyTerm() || op.getValueTerm())
    return op.emitError() << "the backward takes fused encodings, not a bias, key_term or "
                             "value_term operand (run pe-fuse-into-attention first)";
  for (auto [value, name] : {std::pair<Value, StringRef>{op.getQuery(), "query"},
                             {op.getKey(), "key"},
                             {op.getValue(), "value"}})
    if (!isa<BlockArgument>(value))
      return op.emitError() << "the " << name
                            << " is computed in the function: the backward differentiates "
                               "function arguments (fuse the pe ops first)";
  if (op.getQuery() == op.getKey() || op.getQuery() == op.getValue() ||
      op.getKey() == op.getValue())
    return op.emitError() << "query, key and value are not three arguments: the backward "
                             "writes a gradient for each";
  for (Value operand : op.getEncodingOperands())
    if (!isa<BlockArgument>(operand))
      return op.emitError() << "an encoding operand is computed in the function: the backward "
                               "reads each from an argument";
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  bool returnsResults = returnOp.getOperands() == op.getResults();
  if (!returnsResults)
    return func.emitError() << "the function must return the attention's result (and its lse, "
                               "if it has one; nothing else) to have a backward";
  return op;
}

/// A derived backward function `<name>_backward`, placed after the forward:
/// the forward's arguments with `added` inserted where its trailing position
/// ids start, so that those stay trailing (and optional at a run).
struct DerivedFunction {
  Block *body = nullptr;
  unsigned idsAt = 0, added = 0;
  /// The backward's argument for a forward argument (null for null).
  Value mapped(Value forwardArgument) const {
    if (!forwardArgument)
      return Value();
    unsigned number = cast<BlockArgument>(forwardArgument).getArgNumber();
    return body->getArgument(number < idsAt ? number : number + added);
  }
  SmallVector<Value> mapped(ValueRange forwardArguments) const {
    SmallVector<Value> out;
    for (Value value : forwardArguments)
      out.push_back(mapped(value));
    return out;
  }
  /// The inserted arguments, in order.
  Value inserted(unsigned n) const { return body->getArgument(idsAt + n); }
};

FailureOr<DerivedFunction> createBackwardFunction(OpBuilder &builder, func::FuncOp func,
                                                  Value queryIds, Value keyIds,
                                                  ArrayRef<Type> added,
                                                  ArrayRef<Type> resultTypes) {
  DerivedFunction derived;
  derived.idsAt = func.getNumArguments();
  derived.added = added.size();
  auto isIds = [&](Value arg) { return arg == queryIds || arg == keyIds; };
  while (derived.idsAt > 0 && isIds(func.getArgument(derived.idsAt - 1)))
    --derived.idsAt;
  SmallVector<Type> argumentTypes(func.getArgumentTypes());
  argumentTypes.insert(argumentTypes.begin() + derived.idsAt, added.begin(), added.end());
  std::string name = (func.getSymName() + "_backward").str();
  if (SymbolTable::lookupSymbolIn(func->getParentOp(), name))
    return func.emitError() << "a function named '" << name << "' exists already";
  builder.setInsertionPointAfter(func);
  auto backward = func::FuncOp::create(builder, func.getLoc(), name,
                                       builder.getFunctionType(argumentTypes, resultTypes));
  derived.body = backward.addEntryBlock();
  builder.setInsertionPointToStart(derived.body);
  return derived;
}

LogicalResult deriveBackward(func::FuncOp func, attn::AttentionOp op, bool operandGradients,
                             bool scoreShapedGradients) {
  OpBuilder builder(func);
  Location loc = op.getLoc();
  Type outputType = op.getResult().getType();
  SmallVector<Type> added = {outputType, outputType}; // o, dO
  if (Value lse = op.getLse())
    added.push_back(lse.getType());
  // Results: dq, dk, dv, then the differentiable encoding operands' (f32).
  SmallVector<Type> resultTypes = {op.getQuery().getType(), op.getKey().getType(),
                                   op.getValue().getType()};
  SmallVector<int64_t> gradOperands;
  for (auto [index, operand] : llvm::enumerate(op.getEncodingOperands())) {
    auto [encoding, local] = attn::encodingOfOperand(op.getEncodingsAttr(), index);
    if (!operandGradients || !encoding || !encoding.isDifferentiableOperand(local) ||
        (!scoreShapedGradients && encoding.hasScoreShapedGradient(local)))
      continue;
    gradOperands.push_back(index);
    auto type = cast<RankedTensorType>(operand.getType());
    resultTypes.push_back(RankedTensorType::get(type.getShape(), builder.getF32Type()));
  }
  FailureOr<DerivedFunction> derived = createBackwardFunction(
      builder, func, op.getQueryPositions(), op.getKeyPositions(), added, resultTypes);
  if (failed(derived))
    return failure();
  auto mapped = [&](Value value) { return derived->mapped(value); };
  SmallVector<Value> encodingOperands = derived->mapped(op.getEncodingOperands());
  auto grad = attn::AttentionBackwardOp::create(
      builder, loc, resultTypes, mapped(op.getQuery()), mapped(op.getKey()), mapped(op.getValue()),
      derived->inserted(0), derived->inserted(1), op.getLse() ? derived->inserted(2) : Value(),
      mapped(op.getQueryPositions()), mapped(op.getKeyPositions()), mapped(op.getQuerySegments()),
      mapped(op.getKeySegments()), mapped(op.getKeyLengths()), op.getScaleAttr(),
      op.getCausalAttr(), op.getWindowAttr(), op.getWindowRightAttr(), op.getSoftcapAttr(),
      op.getEncodingsAttr(), encodingOperands,
      gradOperands.empty() ? DenseI64ArrayAttr() : builder.getDenseI64ArrayAttr(gradOperands));
  func::ReturnOp::create(builder, loc, grad.getResults());
  return success();
}

/// The one attn.linear_attention of `func`, when the function is that
/// linear attention on its arguments (null when it is not one; failure,
/// with the error emitted, when the backward cannot take it).
FailureOr<attn::LinearAttentionOp> linearAttentionOf(func::FuncOp func) {
  auto ops = llvm::to_vector(func.getBody().getOps<attn::LinearAttentionOp>());
  if (ops.empty())
    return attn::LinearAttentionOp();
  if (ops.size() > 1)
    return ops[1].emitError() << "attn-derive-backward takes one attn.linear_attention per "
                                 "function";
  attn::LinearAttentionOp op = ops[0];
  for (Operation &inner : func.getBody().getOps())
    if (!isa<func::ReturnOp, attn::LinearAttentionOp>(inner))
      return inner.emitError() << "'" << inner.getName()
                               << "' is not fused into the linear attention: the backward "
                                  "needs every operand to be a function argument";
  if (op.getState())
    return op.emitError() << "a carried state(...) has no backward: train with the whole "
                             "sequence in one call (docs/backward.md)";
  SmallVector<Value> read = {op.getQuery(), op.getKey(), op.getValue()};
  llvm::append_range(read, op.getEncodingOperands());
  for (Value value : read)
    if (!isa<BlockArgument>(value))
      return op.emitError() << "an operand is computed in the function: the backward "
                               "differentiates function arguments";
  if (op.getQuery() == op.getKey() || op.getQuery() == op.getValue() ||
      op.getKey() == op.getValue())
    return op.emitError() << "query, key and value are not three arguments: the backward "
                             "writes a gradient for each";
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getOperands() != op->getResults())
    return func.emitError() << "the function must return the linear attention's result (and "
                               "nothing else) to have a backward";
  return op;
}

/// func @f(q, k, v, ops..., ids...) -> o becomes
/// func @f_backward(q, k, v, ops..., o, dO, ids...) -> (dq, dk, dv); a
/// RoPE's runtime scale gets no gradient here yet.
LogicalResult deriveLinearBackward(func::FuncOp func, attn::LinearAttentionOp op) {
  OpBuilder builder(func);
  Type outputType = op.getResult().getType();
  SmallVector<Type> resultTypes = {op.getQuery().getType(), op.getKey().getType(),
                                   op.getValue().getType()};
  FailureOr<DerivedFunction> derived =
      createBackwardFunction(builder, func, op.getQueryPositions(), op.getKeyPositions(),
                             {outputType, outputType}, resultTypes);
  if (failed(derived))
    return failure();
  auto mapped = [&](Value value) { return derived->mapped(value); };
  SmallVector<Value> encodingOperands = derived->mapped(op.getEncodingOperands());
  auto grad = attn::LinearAttentionBackwardOp::create(
      builder, op.getLoc(), resultTypes, mapped(op.getQuery()), mapped(op.getKey()),
      mapped(op.getValue()), derived->inserted(0), derived->inserted(1),
      mapped(op.getQueryPositions()), mapped(op.getKeyPositions()), encodingOperands,
      op.getFeatureMapAttr(), op.getCausalAttr(), op.getEncodingsAttr(), op.getRopePlacementAttr());
  func::ReturnOp::create(builder, op.getLoc(), grad.getResults());
  return success();
}

/// The one score-bias pe op of `func` when the function is that bias
/// written out (a materialized pe.t5_bias) and its encoding has a tensor
/// with a gradient; else null.
pe::PositionalEncodingOpInterface materializedBiasOf(func::FuncOp func) {
  pe::PositionalEncodingOpInterface found;
  for (Operation &inner : func.getBody().getOps()) {
    if (isa<func::ReturnOp>(inner))
      continue;
    auto op = dyn_cast<pe::PositionalEncodingOpInterface>(inner);
    if (!op || found || op.getEncodingKind() != pe::EncodingKind::ScoreBias ||
        op.getPositionalEncoding().isKeyTerm())
      return nullptr;
    found = op;
  }
  if (!found)
    return nullptr;
  pe::PositionalEncodingAttrInterface encoding = found.getPositionalEncoding();
  auto operands = found.getEncodingOperands();
  bool anyGradient = false;
  for (unsigned n = 0; n < operands.size(); ++n)
    anyGradient |= encoding.isDifferentiableOperand(n);
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (!anyGradient || returnOp.getOperands() != found->getResults() ||
      !llvm::all_of(operands, [](Value v) { return isa<BlockArgument>(v); }))
    return nullptr;
  return found;
}

/// func @f(table...) -> bias becomes func @f_backward(table..., dBias) ->
/// d table: pe.score_bias_grad with the bias's encoding.
LogicalResult deriveBiasBackward(func::FuncOp func, pe::PositionalEncodingOpInterface op) {
  OpBuilder builder(func);
  SmallVector<Value> operands = op.getEncodingOperands();
  if (operands.size() != 1)
    return op->emitError() << "the backward of a materialized bias takes one tensor, "
                           << op->getName() << " has " << operands.size();
  auto tableType = cast<RankedTensorType>(operands[0].getType());
  Type gradType = RankedTensorType::get(tableType.getShape(), builder.getF32Type());
  // No position ids: dBias goes last.
  FailureOr<DerivedFunction> derived = createBackwardFunction(
      builder, func, Value(), Value(), {op->getResult(0).getType()}, {gradType});
  if (failed(derived))
    return failure();
  auto grad = pe::ScoreBiasGradOp::create(builder, op.getLoc(), gradType, derived->inserted(0),
                                          ValueRange{derived->mapped(operands[0])},
                                          op.getPositionalEncoding());
  func::ReturnOp::create(builder, op.getLoc(), grad.getResult());
  return success();
}

/// The one Shaw term pe op of `func` when the function is that term
/// written out (a materialized pe.relative_key or pe.relative_value, its
/// distances by index) on its arguments, returned; else null.
pe::PositionalEncodingOpInterface materializedShawTermOf(func::FuncOp func) {
  pe::PositionalEncodingOpInterface found;
  for (Operation &inner : func.getBody().getOps()) {
    if (isa<func::ReturnOp>(inner))
      continue;
    auto op = dyn_cast<pe::PositionalEncodingOpInterface>(inner);
    if (!op || found)
      return nullptr;
    pe::PositionalEncodingAttrInterface encoding = op.getPositionalEncoding();
    bool term = (encoding.isKeyTerm() && encoding.getKeyTermBuckets() > 0) ||
                encoding.getValueTermBuckets() > 0;
    if (!term || encoding.readsPositions())
      return nullptr;
    found = op;
  }
  if (!found)
    return nullptr;
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getOperands() != found->getResults() ||
      !llvm::all_of(found->getOperands(), [](Value v) { return isa<BlockArgument>(v); }))
    return nullptr;
  return found;
}

/// func @f(q, a^K) -> E becomes func @f_backward(q, a^K, dE) -> (dq, d a^K),
/// and func @f(a^V) -> R becomes func @f_backward(a^V, dR) -> d a^V:
/// pe.relative_term_grad with the term's encoding. The operand that is not
/// the table is the key term's query.
LogicalResult deriveShawTermBackward(func::FuncOp func, pe::PositionalEncodingOpInterface op) {
  OpBuilder builder(func);
  SmallVector<Value> operands = op.getEncodingOperands();
  if (operands.size() != 1)
    return op->emitError() << "the backward of a materialized Shaw term takes one table, "
                           << op->getName() << " has " << operands.size();
  Value query;
  for (Value operand : op->getOperands())
    if (operand != operands[0])
      query = operand;
  auto tableType = cast<RankedTensorType>(operands[0].getType());
  SmallVector<Type> resultTypes;
  if (query)
    resultTypes.push_back(query.getType());
  resultTypes.push_back(RankedTensorType::get(tableType.getShape(), builder.getF32Type()));
  FailureOr<DerivedFunction> derived = createBackwardFunction(
      builder, func, Value(), Value(), {op->getResult(0).getType()}, resultTypes);
  if (failed(derived))
    return failure();
  auto grad = pe::RelativeTermGradOp::create(
      builder, op.getLoc(), resultTypes, derived->inserted(0), derived->mapped(query),
      derived->mapped(operands[0]), op.getPositionalEncoding());
  func::ReturnOp::create(builder, op.getLoc(), grad.getResults());
  return success();
}

/// Whether `func` is a chain the pass derives a backward for: pe ops only
/// (no pe.embed), one of them a QK transform with an adjoint.
bool isDifferentiableChain(func::FuncOp func) {
  bool anyAdjoint = false;
  for (Operation &inner : func.getBody().getOps()) {
    if (isa<func::ReturnOp>(inner))
      continue;
    auto op = dyn_cast<pe::PositionalEncodingOpInterface>(inner);
    if (!op)
      return false;
    pe::PositionalEncodingAttrInterface encoding = op.getPositionalEncoding();
    if (!encoding.hasStandaloneKernel())
      return false;
    anyAdjoint |=
        op.getEncodingKind() == pe::EncodingKind::QKTransform && encoding.hasQKTransformAdjoint();
  }
  return anyAdjoint;
}

LogicalResult deriveChainBackward(func::FuncOp func) {
  FailureOr<StandaloneChain> chain = readStandaloneChain(func);
  if (failed(chain))
    return failure();
  OpBuilder builder(func);
  builder.setInsertionPointAfter(func);
  std::string name = (func.getSymName() + "_backward").str();
  if (SymbolTable::lookupSymbolIn(func->getParentOp(), name))
    return func.emitError() << "a function named '" << name << "' exists already";
  // The forward's arguments, dy in x's place (the same type: each op's
  // result has its input's).
  Type inputType = chain->input.getType();
  auto backward =
      func::FuncOp::create(builder, func.getLoc(), name,
                           builder.getFunctionType(func.getArgumentTypes(), TypeRange{inputType}));
  Block *body = backward.addEntryBlock();
  builder.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [forward, derived] : llvm::zip(func.getArguments(), body->getArguments()))
    mapping.map(forward, derived);
  Value gradient = body->getArgument(cast<BlockArgument>(chain->input).getArgNumber());
  for (pe::PositionalEncodingOpInterface op : llvm::reverse(chain->ops)) {
    if (op.getEncodingKind() != pe::EncodingKind::QKTransform)
      continue; // additive: d input = d output
    Value input = op.getTransformedInput();
    mapping.map(input, gradient);
    auto adjoint = cast<pe::PositionalEncodingOpInterface>(builder.clone(*op, mapping));
    adjoint.makeAdjoint(!op.isAdjoint());
    gradient = adjoint->getResult(0);
  }
  func::ReturnOp::create(builder, func.getLoc(), gradient);
  return success();
}

struct DeriveBackwardPass : pejit::impl::DeriveBackwardBase<DeriveBackwardPass> {
  using DeriveBackwardBase::DeriveBackwardBase;
  void runOnOperation() override {
    for (func::FuncOp func : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      FailureOr<attn::LinearAttentionOp> linear = linearAttentionOf(func);
      if (failed(linear) || (*linear && failed(deriveLinearBackward(func, *linear)))) {
        signalPassFailure();
        return;
      }
      if (*linear)
        continue;
      if (pe::PositionalEncodingOpInterface bias = materializedBiasOf(func)) {
        if (failed(deriveBiasBackward(func, bias))) {
          signalPassFailure();
          return;
        }
        continue;
      }
      if (pe::PositionalEncodingOpInterface term = materializedShawTermOf(func)) {
        if (failed(deriveShawTermBackward(func, term))) {
          signalPassFailure();
          return;
        }
        continue;
      }
      FailureOr<attn::AttentionOp> op = attentionOf(func);
      if (failed(op) ||
          (*op && failed(deriveBackward(func, *op, operandGradients, scoreShapedGradients))) ||
          (!*op && isDifferentiableChain(func) && failed(deriveChainBackward(func)))) {
        signalPassFailure();
        return;
      }
    }
  }
};

} // namespace
