// readLinearAttention and readLinearAttentionBackward
// (LinearAttentionKernel.h): the rules every target's linear attention
// kernel (and its backward) follows, checked once.
#include "pejit/compiler/passes/LinearAttentionKernel.h"
#include "pejit/compiler/passes/TemplateSupport.h"

using namespace mlir;

namespace pejit {

namespace {

/// The kernel's arguments by role: each function argument is one of
/// `roles`' values or one of the RoPE's `operands` (encoding operand 0).
FailureOr<KernelSignature> signatureOf(func::FuncOp func, Operation *op,
                                       const std::vector<std::pair<Value, ArgumentRole>> &roles,
                                       ArrayRef<Value> operands,
                                       pe::PositionalEncodingAttrInterface rope) {
  KernelSignature signature;
  auto valueOf = [&](ArgumentRole wanted) {
    for (auto [value, role] : roles)
      if (role == wanted)
        return value;
    return Value();
  };
  for (auto [value, role] : roles)
    if (value && !isa<BlockArgument>(value))
      return op->emitError() << "operand '" << argumentRoleName(role) << "' is computed by '"
                             << value.getDefiningOp()->getName()
                             << "': the kernel reads it from an argument of the function";
  // The RoPE's own tensors (its runtime scale): encoding operand 0.
  for (Value operand : operands)
    if (!isa<BlockArgument>(operand))
      return op->emitError() << "the kernel reads its encoding operands from arguments of the "
                                "function";
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    bool found = false;
    for (auto [value, role] : roles)
      if (value == arg && !found) {
        argument.role = role;
        found = true;
      }
    if (!found && llvm::is_contained(operands, arg)) {
      argument.role = ArgumentRole::EncodingOperand;
      argument.name = rope.getEncodingOperandName(0);
      argument.slots = {0};
      found = true;
    }
    if (arg == valueOf(ArgumentRole::QueryPositions) && arg == valueOf(ArgumentRole::KeyPositions))
      argument.role = ArgumentRole::Positions;
    if (!found)
      return func.emitError() << "argument #" << arg.getArgNumber() << " is not an operand of "
                              << op->getName();
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }
  return signature;
}

} // namespace

FailureOr<LinearAttentionKernel> readLinearAttention(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError() << "expected one function to compile, found " << funcs.size();
  func::FuncOp func = funcs[0];
  attn::LinearAttentionOp op;
  for (Operation &inner : func.getBody().getOps()) {
    if (auto linear = dyn_cast<attn::LinearAttentionOp>(inner)) {
      if (op)
        return inner.emitError() << "expected one attn.linear_attention per kernel, found another";
      op = linear;
    } else if (!isa<func::ReturnOp>(inner)) {
      return inner.emitError() << "'" << inner.getName()
                               << "' cannot be compiled with attn.linear_attention: fuse a RoPE "
                                  "into it with encodings(...) and rope_placement(...)";
    }
  }
  if (!op)
    return module.emitError() << "expected one attn.linear_attention to compile";
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op.getResult())
    return func.emitError() << "the function must return the attn.linear_attention's result "
                               "(and nothing else): that is the kernel's output";
  pe::PositionalEncodingAttrInterface rope = op.getFusedQKTransform();
  std::vector<std::pair<Value, ArgumentRole>> roles = {
      {op.getQuery(), ArgumentRole::Query},
      {op.getKey(), ArgumentRole::Key},
      {op.getValue(), ArgumentRole::Value},
      {op.getQueryPositions(), ArgumentRole::QueryPositions},
      {op.getKeyPositions(), ArgumentRole::KeyPositions},
      {op.getState(), ArgumentRole::LinearState}};
  SmallVector<Value> operands(op.getEncodingOperands());
  FailureOr<KernelSignature> signature = signatureOf(func, op, roles, operands, rope);
  if (failed(signature))
    return failure();
  return LinearAttentionKernel{func, op, std::move(*signature), std::move(operands), rope};
}

FailureOr<LinearAttentionBackwardKernel> readLinearAttentionBackward(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError() << "expected one function to compile, found " << funcs.size();
  func::FuncOp func = funcs[0];
  auto ops = llvm::to_vector(func.getBody().getOps<attn::LinearAttentionBackwardOp>());
  if (ops.size() != 1)
    return func.emitError() << "expected one attn.linear_attention_backward to compile, found "
                            << ops.size();
  attn::LinearAttentionBackwardOp op = ops[0];
  for (Operation &inner : func.getBody().getOps())
    if (!isa<func::ReturnOp, attn::LinearAttentionBackwardOp>(inner))
      return inner.emitError() << "'" << inner.getName()
                               << "' cannot be compiled with attn.linear_attention_backward: its "
                                  "operands must be the function's arguments";
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getOperands() != op->getResults())
    return func.emitError() << "the function must return dq, dk and dv of the "
                               "attn.linear_attention_backward, in that order: they are the "
                               "kernel's outputs";
  pe::PositionalEncodingAttrInterface rope = op.getFusedQKTransform();
  std::vector<std::pair<Value, ArgumentRole>> roles = {
      {op.getQuery(), ArgumentRole::Query},
      {op.getKey(), ArgumentRole::Key},
      {op.getValue(), ArgumentRole::Value},
      {op.getOutput(), ArgumentRole::Output},
      {op.getOutputGrad(), ArgumentRole::OutputGradient},
      {op.getQueryPositions(), ArgumentRole::QueryPositions},
      {op.getKeyPositions(), ArgumentRole::KeyPositions}};
  SmallVector<Value> operands(op.getEncodingOperands());
  FailureOr<KernelSignature> signature = signatureOf(func, op, roles, operands, rope);
  if (failed(signature))
    return failure();
  signature->linearBackward = true;
  return LinearAttentionBackwardKernel{func, op, std::move(*signature), rope};
}

} // namespace pejit
