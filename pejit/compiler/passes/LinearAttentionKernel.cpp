// readLinearAttention (LinearAttentionKernel.h): the rules every target's
// linear attention kernel follows, checked once.
#include "pejit/compiler/passes/LinearAttentionKernel.h"
#include "pejit/compiler/passes/TemplateSupport.h"

using namespace mlir;

namespace pejit {

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
  KernelSignature signature;
  std::pair<Value, ArgumentRole> roles[] = {{op.getQuery(), ArgumentRole::Query},
                                            {op.getKey(), ArgumentRole::Key},
                                            {op.getValue(), ArgumentRole::Value},
                                            {op.getQueryPositions(), ArgumentRole::QueryPositions},
                                            {op.getKeyPositions(), ArgumentRole::KeyPositions},
                                            {op.getState(), ArgumentRole::LinearState}};
  for (auto [value, role] : roles)
    if (value && !isa<BlockArgument>(value))
      return op.emitError() << "operand '" << argumentRoleName(role) << "' is computed by '"
                            << value.getDefiningOp()->getName()
                            << "': the kernel reads it from an argument of the function";
  // The RoPE's own tensors (its runtime scale): encoding operand 0.
  SmallVector<Value> operands(op.getEncodingOperands());
  for (Value operand : operands)
    if (!isa<BlockArgument>(operand))
      return op.emitError() << "the kernel reads its encoding operands from arguments of the "
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
    if (arg == op.getQueryPositions() && arg == op.getKeyPositions())
      argument.role = ArgumentRole::Positions;
    if (!found)
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " is not an operand of attn.linear_attention";
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }

  return LinearAttentionKernel{func, op, std::move(signature), std::move(operands), rope};
}

} // namespace pejit
