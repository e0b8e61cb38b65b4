// The interfaces every positional encoding implements (PEInterfaces.td).
#ifndef PEJIT_DIALECTS_PE_PEINTERFACES_H
#define PEJIT_DIALECTS_PE_PEINTERFACES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpDefinition.h"
#include "pejit/dialects/pe/KernelHooks.h"
#include "llvm/ADT/StringRef.h"

namespace pejit::pe {

/// Where a positional encoding enters attention.
enum class EncodingKind {
  QKTransform, ///< rotates Q and K before their product (RoPE)
  ScoreBias,   ///< adds f(b, h, i, j) to the scores (ALiBi, T5, Shaw key)
  ValueTerm,   ///< adds sum_j p_ij * t(i, j) to the output (Shaw value)
  Additive,    ///< added to embeddings, outside attention (sinusoidal, learned)
};

llvm::StringRef stringifyEncodingKind(EncodingKind kind);

} // namespace pejit::pe

#include "pejit/dialects/pe/PEAttrInterfaces.h.inc"
#include "pejit/dialects/pe/PEOpInterfaces.h.inc"

#endif // PEJIT_DIALECTS_PE_PEINTERFACES_H
