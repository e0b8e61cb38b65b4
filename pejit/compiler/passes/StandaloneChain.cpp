// readStandaloneChain and chainHookText (StandaloneChain.h). The rules a
// chain follows are checked here, so the instantiation can assume them:
// each op reads the previous op's result, all ops read one tensor of ids,
// the function returns the last result, and at most one table among them
// (the templates' one encoding operand slot).
#include "pejit/compiler/passes/StandaloneChain.h"
#include "pejit/compiler/passes/TemplateSupport.h"

#include "mlir/IR/Diagnostics.h"

#include <algorithm>

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

FailureOr<StandaloneKernel> describeStandalone(const StandaloneChain &read, int64_t vectorWidth,
                                               StringRef target) {
  StandaloneChain chain = read; // op handles: their accessors are not const
  StandaloneKernel out;
  out.first = chain.embed ? chain.embed.getOperation() : chain.ops.front().getOperation();
  Operation *first = out.first;
  // The rows: x's type, or the embedding's (the gather's result).
  out.rowsType = cast<RankedTensorType>(chain.embed ? chain.embed.getResult().getType()
                                                    : chain.input.getType());
  out.outType = cast<RankedTensorType>(chain.last()->getResult(0).getType());
  RankedTensorType rowsType = out.rowsType;
  // [b, s, d] (an embedding) is [b, 1, s, d].
  out.embedding = rowsType.getRank() == 3;
  if (rowsType.getRank() != 4 && !out.embedding)
    return first->emitError() << "the standalone kernel takes a [b, h, s, d] input, got "
                              << rowsType;
  int64_t seqDim = out.embedding ? 1 : 2, lastDim = out.embedding ? 2 : 3;
  for (int64_t dim : {out.embedding ? lastDim : 1, lastDim})
    if (rowsType.isDynamicDim(dim))
      return first->emitError() << "input " << rowsType << " has a dynamic dim " << dim
                                << ": the kernel takes `?` only for the batch (dim 0) and the "
                                   "length (dim "
                                << seqDim << ")";
  out.inName = kernelElementTypeName(rowsType.getElementType());
  out.outName = kernelElementTypeName(out.outType.getElementType());
  if (!out.inName || !out.outName)
    return first->emitError() << "element type " << rowsType.getElementType()
                              << " is not supported by the " << target
                              << " kernel (f32, f16 or bf16)";
  pe::AttentionShape &shape = out.shape;
  shape.batch = rowsType.getDimSize(0);
  shape.queryHeads = shape.kvHeads = out.embedding ? 1 : rowsType.getDimSize(1);
  shape.querySeq = rowsType.getDimSize(seqDim);
  shape.keySeq = 0; // no keys: the key side's tables are empty
  shape.headDim = shape.valueDim = rowsType.getDimSize(lastDim);
  shape.vectorWidth = vectorWidth;
  int64_t axes = 0;
  for (pe::PositionalEncodingAttrInterface encoding : chain.encodings) {
    axes = std::max(axes, encoding.getPositionAxes());
    int64_t limit = encoding.getPositionLimit();
    if (limit > 0)
      out.positionLimit = out.positionLimit > 0 ? std::min(out.positionLimit, limit) : limit;
  }
  shape.positionAxes = std::max<int64_t>(axes, 1);
  // [s] (or [A, s]) ids are shared by the batch; [b, s] (or [A, b, s]) have
  // a row per batch entry.
  if (chain.ids) {
    auto idsType = cast<RankedTensorType>(chain.ids.getType());
    if (idsType.getRank() == (axes > 0 ? 3 : 2))
      shape.queryPositionRows = shape.keyPositionRows = idsType.getDimSize(axes > 0 ? 1 : 0);
    if (ShapedType::isDynamic(shape.queryPositionRows))
      return first->emitError()
             << "position ids per batch row ([b, s]) with a `?` batch are not built yet: pass "
                "ids shared by the batch ([s]) or a static batch";
  }
  for (pe::PositionalEncodingAttrInterface encoding : chain.encodings)
    out.perPosition += encoding.getScratchFloatsPerPosition(shape, false);

  // The encodings' own tensors (a learned table): one slot in the templates.
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(first, chain.tables, 1);
  if (failed(slots))
    return failure();
  out.operandSlot = (*slots)[0];
  for (BlockArgument arg : chain.func.getArguments()) {
    KernelArgument argument;
    if (chain.embed && arg == chain.embed.getTokens())
      argument.role = ArgumentRole::EmbedTokens;
    else if (chain.embed && arg == chain.embed.getTable())
      argument.role = ArgumentRole::EmbedTable;
    else if (arg == chain.input)
      argument.role = ArgumentRole::TransformInput;
    else if (arg == chain.ids)
      argument.role = ArgumentRole::TransformPositions;
    else if (!chain.tables.empty() && arg == chain.tables.front()) {
      argument.role = ArgumentRole::EncodingOperand;
      argument.slots = {0};
      for (auto [k, op] : llvm::enumerate(chain.ops))
        if (!op.getEncodingOperands().empty())
          argument.name = chain.encodings[k].getEncodingOperandName(0);
    } else {
      return chain.func.emitError()
             << "argument #" << arg.getArgNumber() << " is not an operand of the function's pe ops";
    }
    describeArgumentType(arg.getType(), argument);
    out.signature.arguments.push_back(std::move(argument));
  }
  return out;
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
    // An adjoint op turns the gradient rows back (pe.rope adjoint).
    pe::PositionalEncodingOpInterface op = chain.ops[k];
    std::string adjoint = op.isAdjoint() ? " adjoint" : "";
    text.transforms += "  attn.qk_transform" + adjoint + " %tile" +
                       std::string(reads ? " from %rows" : "") + ", %nr, %i0, %b, " + part +
                       " lengths(%S, %c0)" + index + " : !TILE" + (reads ? " from !ROWS" : "") +
                       ", " + partType + "\n";
    before += perPosition;
  }
  return text;
}

} // namespace pejit
