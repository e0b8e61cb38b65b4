// readStandaloneChain and chainHookText (StandaloneChain.h). The rules a
// chain follows are checked here, so the instantiation can assume them:
// each op reads the previous op's result, all ops read one tensor of ids,
// the function returns the last result, and at most one table among them
// (the templates' one encoding operand slot).
#include "compiler/passes/StandaloneChain.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace pejit {

Operation *StandaloneChain::last() const {
  if (!ops.empty())
    return pe::PositionalEncodingOpInterface(ops.back()).getOperation();
  return embed ? pe::EmbedOp(embed).getOperation() : nullptr;
}

func::FuncOp standaloneFunction(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return nullptr;
  bool anyPe = false;
  for (Operation &op : funcs[0].getBody().getOps()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (!isa<pe::PositionalEncodingOpInterface, pe::EmbedOp>(op))
      return nullptr;
    anyPe = true;
  }
  return anyPe ? funcs[0] : nullptr;
}

namespace {

/// The tensor a chain op adds to or transforms: its input.
Value chainInput(pe::PositionalEncodingOpInterface op) {
  if (Value input = op.getTransformedInput())
    return input;
  return op.getEncodingKind() == pe::EncodingKind::Additive ? op->getOperand(0) : Value();
}

} // namespace

FailureOr<StandaloneChain> readStandaloneChain(func::FuncOp func) {
  StandaloneChain chain;
  chain.func = func;
  Value previous;
  for (Operation &inner : func.getBody().getOps()) {
    if (isa<func::ReturnOp>(inner))
      continue;
    if (auto embed = dyn_cast<pe::EmbedOp>(inner)) {
      if (chain.embed || !chain.ops.empty())
        return inner.emitError() << "a standalone kernel has one pe.embed, first: the pe ops "
                                    "add to its result";
      for (auto [value, what] :
           {std::pair{embed.getTokens(), "tokens"}, {embed.getTable(), "table"}})
        if (!isa<BlockArgument>(value))
          return inner.emitError()
                 << "the kernel reads the " << what << " from an argument of the function";
      chain.embed = embed;
      previous = embed.getResult();
      continue;
    }
    auto op = cast<pe::PositionalEncodingOpInterface>(inner);
    pe::PositionalEncodingAttrInterface encoding = op.getPositionalEncoding();
    if (!encoding.hasStandaloneKernel())
      return inner.emitError() << "'" << inner.getName()
                               << "' does not chain with other pe ops in one kernel: only "
                                  "pe.rope, pe.sinusoidal and pe.learned do; a score bias or "
                                  "Shaw term compiles as a function of its own "
                                  "(docs/standalone-kernels.md)";
    Value input = chainInput(op);
    if (!previous) {
      if (!input || !isa<BlockArgument>(input))
        return op->emitError() << "the kernel reads the input from an argument of the function";
      chain.input = input;
    } else if (input != previous) {
      return op->emitError() << "each pe op of a standalone kernel must read the result of the "
                                "one before it: they run in one pass over the rows";
    }
    Value ids = op.getPositionIds();
    if (!ids || !isa<BlockArgument>(ids))
      return op->emitError() << "the kernel reads the positions from an argument of the function";
    if (chain.ids && ids != chain.ids)
      return op->emitError() << "the pe ops of one standalone kernel must read the same position "
                                "ids (one argument)";
    chain.ids = ids;
    for (OpOperand &use : op->getOpOperands())
      if (llvm::is_contained(op.getEncodingOperands(), use.get())) {
        if (!isa<BlockArgument>(use.get()))
          return op->emitError() << "the kernel reads the "
                                 << op.getOperandRoleName(use.getOperandNumber())
                                 << " from an argument of the function";
        chain.tables.push_back(use.get());
      }
    if (chain.tables.size() > 1)
      return op->emitError() << "a standalone kernel reads at most one table of its pe ops, found "
                             << chain.tables.size();
    chain.ops.push_back(op);
    chain.encodings.push_back(encoding);
    previous = op->getResult(0);
  }
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  Operation *last = chain.last();
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != last->getResult(0))
    return func.emitError() << "the function must return the " << last->getName()
                            << "'s result (and nothing else): that is the kernel's output";
  for (unsigned k = 0; k + 1 < chain.ops.size(); ++k)
    if (!chain.ops[k]->hasOneUse())
      return chain.ops[k]->emitError()
             << "its result is read by the next pe op only: the kernel writes one output";
  if (chain.embed && !chain.embed->hasOneUse())
    return chain.embed->emitError()
           << "its result is read by the next pe op only: the kernel writes one output";
  return chain;
}

ChainHookText chainHookText(const StandaloneChain &chain, const pe::AttentionShape &shape,
                            int64_t positionRows, bool fromRows) {
  ChainHookText text;
  int64_t before = 0; // floats per position of the ops before op k
  for (auto [k, encoding] : llvm::enumerate(chain.encodings)) {
    std::string n = std::to_string(k);
    int64_t perPosition = encoding.getScratchFloatsPerPosition(shape, false);
    // Op 0's part starts the scratch; op k's after op k - 1's.
    std::string part = "%scratch", partType = "!SCRATCH";
    if (k > 0) {
      part = "%part" + n;
      partType = "!PART";
      text.parts += "  %part_off_c" + n + " = arith.constant " +
                    std::to_string(before * positionRows) + " : index\n" + "  %part_off" + n +
                    " = arith.muli %S, %part_off_c" + n + " : index\n" + "  %part_len_c" + n +
                    " = arith.constant " + std::to_string(perPosition * positionRows) +
                    " : index\n" + "  %part_len" + n + " = arith.muli %S, %part_len_c" + n +
                    " : index\n" + "  " + part + " = memref.subview %scratch[%part_off" + n +
                    "] [%part_len" + n + "] [1] : !SCRATCH to !PART\n";
    }
    std::string index = " {encoding = " + n + " : i64}";
    text.prologues += "  attn.qk_prologue %pos, %none, " + part +
                      " rows(%first, %step) operands(%e0 : !E0)" + index + " : !POS, !NOPOS, " +
                      partType + "\n";
    bool reads = fromRows && k == 0;
    text.transforms += "  attn.qk_transform %tile" + std::string(reads ? " from %rows" : "") +
                       ", %nr, %i0, %b, " + part + " lengths(%S, %c0)" + index + " : !TILE" +
                       (reads ? " from !ROWS" : "") + ", " + partType + "\n";
    before += perPosition;
  }
  return text;
}

} // namespace pejit
