// The absolute embeddings' float64 references (pe.sinusoidal, pe.learned),
// through PositionalEncodingOpInterface. Math (docs/semantics.md
// "Absolute embeddings"): x + PE(position), with PE(p, 2i) = sin(p /
// base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)), or PE(p) = table[p].
#include "pejit/dialects/pe/PEOps.h"

#include "pejit/reference/Absolute.h"

using namespace mlir;
using namespace pejit::pe;

Value SinusoidalOp::getPositionIds() { return getPositions(); }

std::string SinusoidalOp::getOperandRoleName(unsigned index) {
  return index == 0 ? "input" : "positions";
}

bool SinusoidalOp::evaluateReference(const ReferenceOpArgs &args, pejit::ref::Tensor &result,
                                     std::string &) {
  result = pejit::ref::sinusoidalEmbedding(*args.tensors[0], *args.ids[1], getEncoding().getBase());
  return true;
}

Value LearnedOp::getPositionIds() { return getPositions(); }

SmallVector<Value> LearnedOp::getEncodingOperands() { return {getTable()}; }

std::string LearnedOp::getOperandRoleName(unsigned index) {
  return index == 0 ? "input" : index == 1 ? "positions" : "table";
}

bool LearnedOp::evaluateReference(const ReferenceOpArgs &args, pejit::ref::Tensor &result,
                                  std::string &error) {
  // A position past the table is the caller's error, never a read past it.
  const pejit::ref::Tensor &table = *args.tensors[2];
  for (int64_t p : args.ids[1]->data)
    if (p < 0 || p >= table.dim(0)) {
      error = "position " + std::to_string(p) + " is outside the table's [0, " +
              std::to_string(table.dim(0)) + ")";
      return false;
    }
  result = pejit::ref::learnedEmbedding(*args.tensors[0], *args.ids[1], table);
  return true;
}
